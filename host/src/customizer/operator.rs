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
use super::stack::{ColumnTarget, FilterRefiner, Layer, StackOptions, by_collection, refining};
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
            let target = ColumnTarget {
                origin: &origin,
                collection: &collection,
                field: &field,
                declared: "filtering",
                refused: "emulate or replace operators of",
            };
            let Some(target) = target.find(&mut schema, options)? else {
                continue;
            };
            // `find` checked that the field is a column.
            let Some(column) = target.column(&field) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::customizer::test_support::{base, by_id, caller, full_name, ids, string};
    use crate::customizer::{StackOptions, build_stack, build_stack_with, closures};

    fn filtering(field: &str, mode: FilteringMode) -> Customization {
        Customization::collection(
            "test",
            "customers",
            Kind::Filtering {
                field: field.into(),
                mode,
            },
        )
    }

    #[tokio::test]
    async fn emulated_operators_on_a_computed_field_are_advertised_and_matched_in_memory() {
        let stack = build_stack(
            base().await,
            vec![
                full_name(),
                filtering("fullName", FilteringMode::EmulateAll),
            ],
        )
        .unwrap();
        let column = stack
            .schema()
            .collection("customers")
            .unwrap()
            .column("fullName")
            .unwrap()
            .clone();
        for op in [
            Operator::Equal,
            Operator::IContains,
            Operator::In,
            Operator::Present,
        ] {
            assert!(column.filter_operators.contains(&op), "{op:?}");
        }
        // Not allowed on strings: not advertised.
        assert!(!column.filter_operators.contains(&Operator::Today));

        let tree = ConditionTree::leaf("fullName", Operator::IContains, string("al"));
        assert_eq!(
            ids(&stack, "customers", &by_id(Some(tree))).await.unwrap(),
            [2]
        );
        let tree = ConditionTree::or(vec![
            ConditionTree::leaf("fullName", Operator::StartsWith, string("Grace")),
            ConditionTree::leaf("id", Operator::Equal, Value::Int(1)),
        ]);
        assert_eq!(
            ids(&stack, "customers", &by_id(Some(tree))).await.unwrap(),
            [1, 3]
        );
        // Through a relation: the leaf is rewritten by the customers' rules, then nested.
        let tree =
            ConditionTree::leaf("customer:fullName", Operator::Equal, string("Ada Lovelace"));
        assert_eq!(
            ids(&stack, "orders", &by_id(Some(tree))).await.unwrap(),
            [1, 5]
        );
        // Nothing matches: `In []`.
        let tree = ConditionTree::leaf("fullName", Operator::Equal, string("Nobody"));
        assert!(
            ids(&stack, "customers", &by_id(Some(tree)))
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn one_emulated_operator_is_added_to_the_native_ones() {
        let stack = build_stack(
            base().await,
            vec![
                full_name(),
                filtering("fullName", FilteringMode::Emulate(Operator::Equal)),
            ],
        )
        .unwrap();
        let schema = stack.schema().collection("customers").unwrap();
        assert_eq!(
            schema
                .column("fullName")
                .unwrap()
                .filter_operators
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [Operator::Equal]
        );
        // An update through the emulated filter touches only the matching record.
        let tree = ConditionTree::leaf("fullName", Operator::Equal, string("Alan Turing"));
        let patch: Record = [("last_name", string("T."))].into_iter().collect();
        stack
            .collection("customers")
            .unwrap()
            .update(&caller(), &Filter::new(Some(tree)), &patch)
            .await
            .unwrap();
        let tree = ConditionTree::leaf("last_name", Operator::Equal, string("T."));
        assert_eq!(
            ids(&stack, "customers", &by_id(Some(tree))).await.unwrap(),
            [2]
        );
        // An operator the column type does not allow is refused at build time.
        let err = build_stack(
            base().await,
            vec![
                full_name(),
                filtering("fullName", FilteringMode::Emulate(Operator::Today)),
            ],
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("Today"), "{err}");
    }

    #[tokio::test]
    async fn replaced_operators_use_the_handler_tree_which_may_use_emulated_ones() {
        let stack = build_stack(
            base().await,
            vec![
                full_name(),
                filtering("fullName", FilteringMode::Emulate(Operator::Equal)),
                // StartsWith x ⇒ first_name StartsWith x; Contains x ⇒ fullName Equal x (emulated).
                filtering(
                    "fullName",
                    FilteringMode::Replace(
                        Operator::StartsWith,
                        closures::operator(|v| {
                            Ok(ConditionTree::leaf(
                                "first_name",
                                Operator::StartsWith,
                                v.clone(),
                            ))
                        }),
                    ),
                ),
                filtering(
                    "fullName",
                    FilteringMode::Replace(
                        Operator::Contains,
                        closures::operator(|v| {
                            Ok(ConditionTree::leaf("fullName", Operator::Equal, v.clone()))
                        }),
                    ),
                ),
            ],
        )
        .unwrap();
        let tree = ConditionTree::leaf("fullName", Operator::StartsWith, string("A"));
        assert_eq!(
            ids(&stack, "customers", &by_id(Some(tree))).await.unwrap(),
            [1, 2]
        );
        let tree = ConditionTree::leaf("fullName", Operator::Contains, string("Grace Hopper"));
        assert_eq!(
            ids(&stack, "customers", &by_id(Some(tree))).await.unwrap(),
            [3]
        );
    }

    #[tokio::test]
    async fn a_replacement_cycle_and_an_invalid_replacement_are_clear_errors() {
        let stack = build_stack(
            base().await,
            vec![
                filtering(
                    "last_name",
                    FilteringMode::Replace(
                        Operator::Contains,
                        closures::operator(|v| {
                            Ok(ConditionTree::leaf(
                                "last_name",
                                Operator::EndsWith,
                                v.clone(),
                            ))
                        }),
                    ),
                ),
                filtering(
                    "last_name",
                    FilteringMode::Replace(
                        Operator::EndsWith,
                        closures::operator(|v| {
                            Ok(ConditionTree::leaf(
                                "last_name",
                                Operator::Contains,
                                v.clone(),
                            ))
                        }),
                    ),
                ),
                filtering(
                    "first_name",
                    FilteringMode::Replace(
                        Operator::Contains,
                        closures::operator(|v| {
                            Ok(ConditionTree::leaf("nope", Operator::Equal, v.clone()))
                        }),
                    ),
                ),
            ],
        )
        .unwrap();
        let tree = ConditionTree::leaf("last_name", Operator::Contains, string("a"));
        let err = ids(&stack, "customers", &by_id(Some(tree)))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains(
                "cycle: customers.last_name[Contains] -> customers.last_name[EndsWith] -> customers.last_name[Contains]"
            ),
            "{err}"
        );
        let tree = ConditionTree::leaf("first_name", Operator::Contains, string("a"));
        let err = ids(&stack, "customers", &by_id(Some(tree)))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[tokio::test]
    async fn emulation_past_the_row_limit_is_a_validation_error_naming_the_option() {
        let options = StackOptions {
            emulation_row_limit: 2,
            ..StackOptions::default()
        };
        let stack = build_stack_with(
            base().await,
            vec![
                full_name(),
                filtering("fullName", FilteringMode::EmulateAll),
            ],
            &options,
        )
        .unwrap();
        let tree = ConditionTree::leaf("fullName", Operator::Equal, string("Ada Lovelace"));
        let err = ids(&stack, "customers", &by_id(Some(tree)))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Validation(_)), "{err:?}");
        let message = err.to_string();
        for part in ["customers.fullName", "2 records", "emulationRowLimit"] {
            assert!(message.contains(part), "{message}");
        }
        // At the limit, it works.
        let options = StackOptions {
            emulation_row_limit: 3,
            ..StackOptions::default()
        };
        let stack = build_stack_with(
            base().await,
            vec![
                full_name(),
                filtering("fullName", FilteringMode::EmulateAll),
            ],
            &options,
        )
        .unwrap();
        let tree = ConditionTree::leaf("fullName", Operator::Equal, string("Ada Lovelace"));
        assert_eq!(
            ids(&stack, "customers", &by_id(Some(tree))).await.unwrap(),
            [1]
        );
    }

    #[tokio::test]
    async fn a_missing_field_is_refused_or_skipped_when_ignoring_missing_elements() {
        let err = build_stack(
            base().await,
            vec![filtering("ghost", FilteringMode::EmulateAll)],
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("customers.ghost"), "{err}");
        let options = StackOptions {
            ignore_missing_schema_element_errors: true,
            ..StackOptions::default()
        };
        assert!(
            build_stack_with(
                base().await,
                vec![filtering("ghost", FilteringMode::EmulateAll)],
                &options
            )
            .is_ok()
        );
    }
}
