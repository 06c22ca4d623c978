//! emulateFieldFiltering, emulateFieldOperator and replaceFieldOperator (protocol §8.8, stack
//! positions 5 and 10): operators a collection cannot answer, mostly on computed fields (which
//! have none), answered above it.
//!
//! A filter leaf `field op value` on such an operator is rewritten before the layer below sees it:
//! - emulated: every record of the collection is listed (its keys and the field, up to the
//!   emulation row limit), matched in memory with the datasource's own semantics
//!   (`evaluate::Matcher`), and the leaf becomes `pk In [matching keys]`;
//! - replaced: the leaf becomes the tree the handler returns for its value, itself rewritten
//!   (it may use other emulated or replaced operators; a replacement that comes back to itself is
//!   an error, not an endless loop), then validated against this layer's schema.
//!
//! Leaves through to-one relations (`customer:fullName`) are rewritten by the related collection's
//! rules and nested back under the relation, so every collection of the layer is decorated.
//! The schema advertises the added operators on the field.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;

use super::handlers::{Context, OperatorHandler};
use super::stack::{FilterRefiner, Layer, StackOptions, by_collection, refining};
use super::{Customization, FilteringMode, Kind};
use crate::datasource::query::evaluate::Matcher;
use crate::datasource::{
    Caller, Collection, CollectionSchema, ColumnType, ConditionTree, DataSource, DataSourceSchema,
    Error, Filter, Leaf, Operator, Page, Projection, Record, Result, Value,
};

/// How one operator of one field is answered.
#[derive(Clone)]
struct Rule {
    origin: String,
    /// `None`: emulated in memory.
    handler: Option<Arc<dyn OperatorHandler>>,
}

/// collection → field → operator → rule.
type Registry = HashMap<String, HashMap<String, HashMap<Operator, Rule>>>;

/// The operator emulation layer over `child`. Every customization targets a column of `child`
/// (computed fields included); the stack calls the layer once per place such fields appear.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut schema = child.schema().clone();
    let mut registry: Registry = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        for customization in list {
            let Kind::Filtering { field, mode } = customization.kind else {
                continue;
            };
            let origin = customization.origin;
            let Some(target) = schema.collections.get_mut(&collection) else {
                options.missing(format!(
                    "{origin}: filtering on '{collection}.{field}' targets a collection that does not exist"
                ))?;
                continue;
            };
            if target.relation(&field).is_some() {
                return Err(Error::validation(format!(
                    "{origin}: cannot emulate or replace operators of '{collection}.{field}': it is a relation, not a column"
                )));
            }
            let Some(column) = target.column(&field) else {
                options.missing(format!(
                    "{origin}: filtering on '{collection}.{field}' targets a field that does not exist"
                ))?;
                continue;
            };
            check_primary_keys(&origin, target)?;
            let operators: Vec<(Operator, Option<Arc<dyn OperatorHandler>>)> = match mode {
                // Only primitive types: the agent emulates nothing on arrays and composites.
                FilteringMode::EmulateAll => match &column.column_type {
                    ColumnType::Primitive(_) => Operator::ALL
                        .iter()
                        .filter(|op| {
                            op.allowed_for(&column.column_type)
                                && !column.filter_operators.contains(op)
                        })
                        .map(|op| (*op, None))
                        .collect(),
                    _ => Vec::new(),
                },
                FilteringMode::Emulate(op) => vec![(op, None)],
                FilteringMode::Replace(op, handler) => vec![(op, Some(handler))],
            };
            for (op, _) in &operators {
                if !op.allowed_for(&column.column_type) {
                    return Err(Error::validation(format!(
                        "{origin}: the operator {op} is not allowed on '{collection}.{field}' ({})",
                        column.column_type.to_json()
                    )));
                }
            }
            let rules = registry
                .entry(collection.clone())
                .or_default()
                .entry(field.clone())
                .or_default();
            let mut added = Vec::with_capacity(operators.len());
            for (op, handler) in operators {
                added.push(op);
                rules.insert(
                    op,
                    Rule {
                        origin: origin.clone(),
                        handler,
                    },
                );
            }
            if let Some(crate::datasource::FieldSchema::Column(column)) =
                target.fields.get_mut(&field)
            {
                column.filter_operators.extend(added);
            }
        }
    }
    let shared = Arc::new(Shared {
        child: Arc::clone(child),
        schema,
        registry,
        row_limit: options.emulation_row_limit,
    });
    let layer = Layer::new(Arc::clone(child), |collection| {
        let name = collection.schema().name.clone();
        Ok(Some(refining(Emulated {
            child: collection,
            schema: shared.schema.collection(&name)?.clone(),
            shared: Arc::clone(&shared),
        })))
    })?;
    Ok(Arc::new(layer))
}

/// Emulated leaves become `pk In [...]` (or an `Or` of key `And`s): the keys must answer `Equal`
/// and `In`.
fn check_primary_keys(origin: &str, collection: &CollectionSchema) -> Result<()> {
    let keys = collection.primary_keys();
    let usable = !keys.is_empty()
        && keys.iter().all(|key| {
            collection.column(key).is_some_and(|c| {
                c.filter_operators.contains(&Operator::Equal)
                    && c.filter_operators.contains(&Operator::In)
            })
        });
    if usable {
        Ok(())
    } else {
        Err(Error::validation(format!(
            "{origin}: cannot emulate or replace operators on '{}': its primary key columns must support the 'Equal' and 'In' operators",
            collection.name
        )))
    }
}

/// What every collection of the layer shares.
struct Shared {
    child: Arc<dyn DataSource>,
    /// This layer's schema (the child's plus the added operators).
    schema: DataSourceSchema,
    registry: Registry,
    row_limit: u64,
}

struct Emulated {
    child: Arc<dyn Collection>,
    schema: CollectionSchema,
    shared: Arc<Shared>,
}

#[async_trait]
impl FilterRefiner for Emulated {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn refine(&self, caller: &Caller, filter: &Filter) -> Result<Filter> {
        let Some(tree) = &filter.condition_tree else {
            return Ok(filter.clone());
        };
        if !self.shared.touches(&self.schema.name, tree) {
            return Ok(filter.clone());
        }
        let tree = self
            .shared
            .rewrite_tree(caller, &self.schema.name, tree, &[])
            .await?;
        Ok(Filter {
            condition_tree: Some(tree),
            ..filter.clone()
        })
    }
}

impl Shared {
    /// Whether a leaf of `tree` (relative to `collection`) has a rule: most filters have none
    /// and are passed on untouched.
    fn touches(&self, collection: &str, tree: &ConditionTree) -> bool {
        tree.leaves()
            .iter()
            .any(|leaf| self.rule(collection, &leaf.field, leaf.operator).is_some())
    }

    /// The rule for `op` on `path`, following to-one relations.
    fn rule(&self, collection: &str, path: &str, op: Operator) -> Option<&Rule> {
        match path.split_once(':') {
            None => self.registry.get(collection)?.get(path)?.get(&op),
            Some((head, rest)) => {
                let relation = self.schema.collection(collection).ok()?.relation(head)?;
                self.rule(relation.foreign_collection(), rest, op)
            }
        }
    }

    /// Rewrites every leaf of `tree`; `replacements` are the replaced operators being expanded
    /// (`collection.field[Op]`), to stop cycles.
    fn rewrite_tree<'a>(
        &'a self,
        caller: &'a Caller,
        collection: &'a str,
        tree: &'a ConditionTree,
        replacements: &'a [String],
    ) -> BoxFuture<'a, Result<ConditionTree>> {
        Box::pin(async move {
            match tree {
                ConditionTree::Leaf(leaf) => {
                    self.rewrite_leaf(caller, collection, leaf, replacements)
                        .await
                }
                ConditionTree::Branch {
                    aggregator,
                    conditions,
                } => {
                    let mut out = Vec::with_capacity(conditions.len());
                    for condition in conditions {
                        out.push(
                            self.rewrite_tree(caller, collection, condition, replacements)
                                .await?,
                        );
                    }
                    Ok(ConditionTree::Branch {
                        aggregator: *aggregator,
                        conditions: out,
                    })
                }
            }
        })
    }

    async fn rewrite_leaf(
        &self,
        caller: &Caller,
        collection: &str,
        leaf: &Leaf,
        replacements: &[String],
    ) -> Result<ConditionTree> {
        if let Some((head, rest)) = leaf.field.split_once(':') {
            // A leaf on another collection: rewritten by its rules, then nested back.
            let relation = self
                .schema
                .collection(collection)
                .ok()
                .and_then(|c| c.relation(head))
                .filter(|r| r.is_to_one());
            let Some(relation) = relation else {
                // Not a to-one relation: the layer below reports the bad path.
                return Ok(ConditionTree::Leaf(leaf.clone()));
            };
            let inner = Leaf {
                field: rest.to_owned(),
                ..leaf.clone()
            };
            let rewritten = self
                .rewrite_tree(
                    caller,
                    relation.foreign_collection(),
                    &ConditionTree::Leaf(inner),
                    replacements,
                )
                .await?;
            return nest(&rewritten, head);
        }
        let Some(rule) = self
            .registry
            .get(collection)
            .and_then(|fields| fields.get(&leaf.field))
            .and_then(|ops| ops.get(&leaf.operator))
        else {
            return Ok(ConditionTree::Leaf(leaf.clone()));
        };
        match &rule.handler {
            Some(handler) => {
                self.replace(caller, collection, leaf, rule, handler, replacements)
                    .await
            }
            None => self.emulate(caller, collection, leaf).await,
        }
    }

    /// The handler's tree for the leaf, rewritten in turn and validated.
    async fn replace(
        &self,
        caller: &Caller,
        collection: &str,
        leaf: &Leaf,
        rule: &Rule,
        handler: &Arc<dyn OperatorHandler>,
        replacements: &[String],
    ) -> Result<ConditionTree> {
        let id = format!("{collection}.{}[{}]", leaf.field, leaf.operator.as_str());
        let mut chain = replacements.to_vec();
        let cycle = chain.contains(&id);
        chain.push(id);
        if cycle {
            return Err(Error::Plugin(format!(
                "{}: operator replacement cycle: {}",
                rule.origin,
                chain.join(" -> ")
            )));
        }
        let ctx = Context {
            collection: Some(collection.to_owned()),
            datasource: Arc::clone(&self.child),
        };
        let tree = handler.replace(caller, &ctx, &leaf.value).await?;
        let tree = self.rewrite_tree(caller, collection, &tree, &chain).await?;
        let own = self.schema.collection(collection)?;
        tree.validate(own, &self.schema).map_err(|e| {
            Error::Plugin(format!(
                "{}: the replacement of {} on '{collection}.{}' is not a valid condition: {e}",
                rule.origin,
                leaf.operator.as_str(),
                leaf.field
            ))
        })?;
        Ok(tree)
    }

    /// `pk In [keys of the records that match the leaf]`, from every record of the collection.
    async fn emulate(
        &self,
        caller: &Caller,
        collection: &str,
        leaf: &Leaf,
    ) -> Result<ConditionTree> {
        let own = self.schema.collection(collection)?;
        let mut projection = Projection::new([leaf.field.as_str()]);
        for key in own.primary_keys() {
            if key != leaf.field {
                projection.push(key.to_owned());
            }
        }
        let filter = Filter {
            page: Some(Page::new(0, self.row_limit.saturating_add(1))),
            ..Filter::default()
        };
        let records = self
            .child
            .collection(collection)?
            .list(caller, &filter, &projection)
            .await?;
        if records.len() as u64 > self.row_limit {
            return Err(too_many_rows(
                collection,
                &leaf.field,
                &format!("the operator {}", leaf.operator.as_str()),
                self.row_limit,
            ));
        }
        let matcher = Matcher::new(
            &ConditionTree::Leaf(leaf.clone()),
            own,
            &self.schema,
            caller.timezone,
            chrono::Utc::now(),
        )?;
        let matching: Vec<&Record> = records.iter().filter(|r| matcher.matches(r)).collect();
        Ok(match_records(own, matching))
    }
}

/// The tree with every leaf moved under `relation`.
fn nest(tree: &ConditionTree, relation: &str) -> Result<ConditionTree> {
    tree.replace_leaves(&mut |leaf| {
        Ok(ConditionTree::Leaf(Leaf {
            field: format!("{relation}:{}", leaf.field),
            ..leaf.clone()
        }))
    })
}

/// A tree that matches exactly `records` by primary key: `pk In [...]`, or for composite keys an
/// `Or` of `And`s of `Equal`s. No record matches nothing (`In []`, `Or []`).
pub(super) fn match_records<'a>(
    collection: &CollectionSchema,
    records: impl IntoIterator<Item = &'a Record>,
) -> ConditionTree {
    let keys = collection.primary_keys();
    let key = |record: &Record, k: &str| record.get(k).cloned().unwrap_or(Value::Null);
    match keys.as_slice() {
        [single] => ConditionTree::leaf(
            *single,
            Operator::In,
            Value::Array(records.into_iter().map(|r| key(r, single)).collect()),
        ),
        _ => ConditionTree::or(
            records
                .into_iter()
                .map(|r| {
                    ConditionTree::and(
                        keys.iter()
                            .map(|k| ConditionTree::leaf(*k, Operator::Equal, key(r, k)))
                            .collect(),
                    )
                })
                .collect(),
        ),
    }
}

/// The error of an emulation that would load more records than `emulationRowLimit` allows.
pub(super) fn too_many_rows(collection: &str, field: &str, what: &str, limit: u64) -> Error {
    Error::validation(format!(
        "Cannot emulate {what} on '{collection}.{field}': it needs more than {limit} records of \
         '{collection}' in memory (the emulation row limit). Raise the limit with the \
         `emulationRowLimit` option (CANOPY_EMULATION_ROW_LIMIT), or narrow the request."
    ))
}
