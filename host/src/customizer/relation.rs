//! Relations added by customizations (protocol §8.4, stack position 7): `addManyToOneRelation`,
//! `addOneToManyRelation`, `addOneToOneRelation` and `addManyToManyRelation`, emulated over the
//! collections' own keys, as the Node agent's relation decorator does.
//!
//! The foreign collection may be served by another datasource (a `CompositeDataSource`), so
//! nothing here joins in SQL: every crossing of an added relation is a query of its own.
//! - Projections: `rel:field` is asked below as the relation's key; then the related records
//!   are read with **one** `In` query on the foreign collection per relation per page, and
//!   matched to their parents by key (null and NaN keys are skipped).
//! - Filters: a leaf on `rel:field` lists the matching foreign keys first, then becomes
//!   `fk In [...]` (ManyToOne; `NotEqual` becomes `NotIn` of the inverse set when the key
//!   supports it) or `originKeyTarget In [...]` (OneToOne).
//! - Sorts: a clause on an added ManyToOne sorts by its foreign key, on an added OneToOne by the
//!   origin key target (the agent's compromise: no join, so not by the foreign field).
//! - Aggregations grouped or measured through an added relation are answered in memory over the
//!   listed records, bounded by the emulation row limit.
//!
//! Relations of the layer below are never rewritten, but a path may cross them to reach an added
//! relation of another collection (`book:author:name`): every collection of the layer is
//! decorated, and the foreign collections are queried through this layer's own view of them.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;

use super::computed::{Shape, hash_value};
use super::stack::{Decorator, Layer, StackOptions, decorated};
use super::{Customization, Kind, RelationDefinition};
use crate::datasource::query::evaluate;
use crate::datasource::schema::FieldSchema;
use crate::datasource::{
    AggregateResult, Aggregation, Caller, Collection, CollectionSchema, ColumnSchema,
    ConditionTree, DataSource, DataSourceSchema, Error, Filter, Leaf, Operator, Page, Projection,
    Record, RelationSchema, Result, Sort, SortClause, Value,
};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a relation cannot be added.
enum Problem {
    /// A collection or key it names does not exist: `options.missing` decides.
    Missing(String),
    /// It exists but cannot be used (types differ, no `In`, no primary key to default to).
    Invalid(String),
}

/// The first primary key of a collection, the default of every key target.
fn first_primary_key(collection: &CollectionSchema) -> Option<String> {
    collection.primary_keys().first().map(|k| (*k).to_owned())
}

/// The relation schema of a definition, its `None` targets defaulted (§8.4). With `strict`, the
/// keys are checked as the agent checks them: both columns exist, support `In`, and have the same
/// column type. Without, only what is needed to name the targets (planning the stack).
fn resolve(
    schema: &DataSourceSchema,
    collection: &str,
    definition: &RelationDefinition,
    strict: bool,
) -> Result<RelationSchema, Problem> {
    let get = |name: &str, role: &str| {
        schema.collections.get(name).ok_or_else(|| {
            Problem::Missing(format!("the {role} collection '{name}' does not exist"))
        })
    };
    let own = get(collection, "origin")?;
    let default_key = |owner: &CollectionSchema, given: &Option<String>| match given {
        Some(key) => Ok(key.clone()),
        None => first_primary_key(owner).ok_or_else(|| {
            Problem::Invalid(format!(
                "'{}' has no primary key for the target to default to",
                owner.name
            ))
        }),
    };
    let check = |owner: &CollectionSchema, key: &str, target_owner: &CollectionSchema, target| {
        if strict {
            check_keys(owner, key, target_owner, target)
        } else {
            Ok(())
        }
    };
    Ok(match definition {
        RelationDefinition::ManyToOne {
            foreign_collection,
            foreign_key,
            foreign_key_target,
        } => {
            let foreign = get(foreign_collection, "foreign")?;
            let target = default_key(foreign, foreign_key_target)?;
            check(own, foreign_key, foreign, &target)?;
            RelationSchema::ManyToOne {
                foreign_collection: foreign_collection.clone(),
                foreign_key: foreign_key.clone(),
                foreign_key_target: target,
            }
        }
        RelationDefinition::OneToMany {
            foreign_collection,
            origin_key,
            origin_key_target,
        }
        | RelationDefinition::OneToOne {
            foreign_collection,
            origin_key,
            origin_key_target,
        } => {
            let foreign = get(foreign_collection, "foreign")?;
            let target = default_key(own, origin_key_target)?;
            check(foreign, origin_key, own, &target)?;
            let foreign_collection = foreign_collection.clone();
            let origin_key = origin_key.clone();
            if matches!(definition, RelationDefinition::OneToOne { .. }) {
                RelationSchema::OneToOne {
                    foreign_collection,
                    origin_key,
                    origin_key_target: target,
                }
            } else {
                RelationSchema::OneToMany {
                    foreign_collection,
                    origin_key,
                    origin_key_target: target,
                }
            }
        }
        RelationDefinition::ManyToMany {
            foreign_collection,
            through_collection,
            origin_key,
            foreign_key,
            origin_key_target,
            foreign_key_target,
        } => {
            let foreign = get(foreign_collection, "foreign")?;
            let through = get(through_collection, "through")?;
            let own_target = default_key(own, origin_key_target)?;
            let foreign_target = default_key(foreign, foreign_key_target)?;
            check(through, foreign_key, foreign, &foreign_target)?;
            check(through, origin_key, own, &own_target)?;
            RelationSchema::ManyToMany {
                foreign_collection: foreign_collection.clone(),
                through_collection: through_collection.clone(),
                origin_key: origin_key.clone(),
                origin_key_target: own_target,
                foreign_key: foreign_key.clone(),
                foreign_key_target: foreign_target,
            }
        }
    })
}

/// `owner.key` points at `target_owner.target`: both are columns answering `In`, of one type.
fn check_keys(
    owner: &CollectionSchema,
    key: &str,
    target_owner: &CollectionSchema,
    target: &str,
) -> Result<(), Problem> {
    fn column<'a>(
        collection: &'a CollectionSchema,
        name: &str,
    ) -> Result<&'a ColumnSchema, Problem> {
        match collection.fields.get(name) {
            None => Err(Problem::Missing(format!(
                "the key '{}.{name}' does not exist",
                collection.name
            ))),
            Some(FieldSchema::Relation(_)) => Err(Problem::Invalid(format!(
                "the key '{}.{name}' is a relation, not a column",
                collection.name
            ))),
            Some(FieldSchema::Column(column))
                if !column.filter_operators.contains(&Operator::In) =>
            {
                Err(Problem::Invalid(format!(
                    "the key '{}.{name}' does not support the In operator (emulate or replace it first)",
                    collection.name
                )))
            }
            Some(FieldSchema::Column(column)) => Ok(column),
        }
    }
    let key_column = column(owner, key)?;
    let target_column = column(target_owner, target)?;
    if key_column.column_type != target_column.column_type {
        return Err(Problem::Invalid(format!(
            "the types of '{}.{key}' ({}) and '{}.{target}' ({}) do not match",
            owner.name,
            key_column.column_type.to_json(),
            target_owner.name,
            target_column.column_type.to_json()
        )));
    }
    Ok(())
}

/// `schema` with the relations of `customizations` added, unchecked, for planning the stack
/// (which fields an import or a computed field reaches). The layer checks them when it is built.
pub(super) fn with_relations(
    schema: &DataSourceSchema,
    customizations: &[Customization],
) -> DataSourceSchema {
    let mut out = schema.clone();
    for customization in customizations {
        let (Some(collection), Kind::Relation { name, definition }) =
            (&customization.collection, &customization.kind)
        else {
            continue;
        };
        if let Ok(relation) = resolve(schema, collection, definition, false)
            && let Some(target) = out.collections.get_mut(collection)
            && !target.fields.contains_key(name)
        {
            target
                .fields
                .insert(name.clone(), FieldSchema::Relation(relation));
        }
    }
    out
}

/// The relations the layer adds: collection → relation name → relation.
type Added = HashMap<String, HashMap<String, RelationSchema>>;

/// The relation layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let below = child.schema();
    let mut schema = below.clone();
    let mut added: Added = HashMap::new();
    for customization in customizations {
        let Kind::Relation { name, definition } = customization.kind else {
            continue;
        };
        let origin = customization.origin;
        let Some(collection) = customization.collection else {
            return Err(Error::validation(format!(
                "{origin}: the relation '{name}' names no collection"
            )));
        };
        let describe = |detail: String| {
            format!("{origin}: the relation '{collection}.{name}' cannot be added: {detail}")
        };
        if schema
            .collections
            .get(&collection)
            .is_some_and(|c| c.fields.contains_key(&name))
        {
            return Err(Error::validation(describe(format!(
                "the field '{collection}.{name}' already exists"
            ))));
        }
        // Keys are columns, so they are checked against the layer below.
        let relation = match resolve(below, &collection, &definition, true) {
            Ok(relation) => relation,
            Err(Problem::Missing(detail)) => {
                options.missing(describe(detail))?;
                continue;
            }
            Err(Problem::Invalid(detail)) => return Err(Error::validation(describe(detail))),
        };
        if let Some(target) = schema.collections.get_mut(&collection) {
            target
                .fields
                .insert(name.clone(), FieldSchema::Relation(relation.clone()));
        }
        added.entry(collection).or_default().insert(name, relation);
    }
    let schemas = schema
        .collections
        .iter()
        .map(|(name, c)| (name.clone(), Arc::new(c.clone())))
        .collect();
    let shared = Arc::new(Shared {
        child: Arc::clone(child),
        schema,
        schemas,
        added,
        row_limit: options.emulation_row_limit,
    });
    let layer = Layer::new(Arc::clone(child), |collection| {
        let name = collection.schema().name.clone();
        Ok(Some(decorated(shared.view(&name)?)))
    })?;
    Ok(Arc::new(layer))
}

/// What every collection of the layer shares: the layer below, the schema with the added
/// relations, and those relations.
struct Shared {
    child: Arc<dyn DataSource>,
    schema: DataSourceSchema,
    schemas: HashMap<String, Arc<CollectionSchema>>,
    added: Added,
    row_limit: u64,
}

/// A value used as a key to match related records: strict equality, as the agent's `===`.
struct Key<'a>(&'a Value);

impl Hash for Key<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_value(self.0, state);
    }
}

impl PartialEq for Key<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

// Keys that are not equal to themselves (NaN) are never built: see `usable`.
impl Eq for Key<'_> {}

/// Whether a key value can match: null and NaN keys never do.
fn usable(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Float(f) => !f.is_nan(),
        _ => true,
    }
}

/// The distinct usable values of `field` over the records, in first-seen order.
fn distinct(records: &[Record], field: &str) -> Vec<Value> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for record in records {
        if let Some(value) = record.get(field).filter(|v| usable(v))
            && seen.insert(Key(value))
        {
            out.push(value.clone());
        }
    }
    out
}

/// `tree` with every leaf's field prefixed by `relation:`.
fn nest(tree: ConditionTree, relation: &str) -> ConditionTree {
    match tree {
        ConditionTree::Leaf(leaf) => ConditionTree::Leaf(Leaf {
            field: format!("{relation}:{}", leaf.field),
            ..leaf
        }),
        ConditionTree::Branch {
            aggregator,
            conditions,
        } => ConditionTree::Branch {
            aggregator,
            conditions: conditions.into_iter().map(|c| nest(c, relation)).collect(),
        },
    }
}

impl Shared {
    /// This layer's view of a collection: its added relations are emulated, and so are those
    /// reached through it.
    fn view(self: &Arc<Self>, name: &str) -> Result<Relations> {
        let schema = self
            .schemas
            .get(name)
            .cloned()
            .ok_or_else(|| Error::MissingCollection(name.to_owned()))?;
        Ok(Relations {
            child: self.child.collection(name)?,
            schema,
            shared: Arc::clone(self),
        })
    }

    fn added(&self, collection: &str, relation: &str) -> Option<&RelationSchema> {
        self.added.get(collection)?.get(relation)
    }

    fn relation(&self, collection: &str, relation: &str) -> Option<&RelationSchema> {
        self.schema.collections.get(collection)?.relation(relation)
    }

    /// What the layer below is asked for instead of `path`: the key of the first added relation
    /// on the way, prefixed by the relations of the layer below that lead to it.
    fn rewrite_field(&self, collection: &str, path: &str) -> String {
        let Some((head, rest)) = path.split_once(':') else {
            return path.to_owned();
        };
        match self.added(collection, head) {
            Some(RelationSchema::ManyToOne { foreign_key, .. }) => foreign_key.clone(),
            Some(
                RelationSchema::OneToOne {
                    origin_key_target, ..
                }
                | RelationSchema::OneToMany {
                    origin_key_target, ..
                }
                | RelationSchema::ManyToMany {
                    origin_key_target, ..
                },
            ) => origin_key_target.clone(),
            None => match self.relation(collection, head) {
                Some(relation) => {
                    format!(
                        "{head}:{}",
                        self.rewrite_field(relation.foreign_collection(), rest)
                    )
                }
                None => path.to_owned(),
            },
        }
    }

    /// Whether `path` crosses an added relation.
    fn crosses(&self, collection: &str, path: &str) -> bool {
        path.contains(':') && self.rewrite_field(collection, path) != path
    }

    fn tree_crosses(&self, collection: &str, tree: &ConditionTree) -> bool {
        tree.leaves()
            .iter()
            .any(|leaf| self.crosses(collection, &leaf.field))
    }

    /// The filter the layer below understands: leaves and sort clauses through added relations
    /// rewritten onto keys.
    async fn refine(
        self: &Arc<Self>,
        caller: &Caller,
        collection: &str,
        filter: &Filter,
    ) -> Result<Filter> {
        let crossing_tree = filter
            .condition_tree
            .as_ref()
            .filter(|t| self.tree_crosses(collection, t));
        let crossing_sort = filter
            .sort
            .0
            .iter()
            .any(|c| self.crosses(collection, &c.field));
        if crossing_tree.is_none() && !crossing_sort {
            return Ok(filter.clone());
        }
        let mut refined = filter.clone();
        if let Some(tree) = crossing_tree {
            refined.condition_tree = Some(self.rewrite_tree(caller, collection, tree).await?);
        }
        if crossing_sort {
            let mut clauses: Vec<SortClause> = Vec::with_capacity(filter.sort.0.len());
            for clause in &filter.sort.0 {
                let field = self.rewrite_field(collection, &clause.field);
                if !clauses.iter().any(|c| c.field == field) {
                    clauses.push(SortClause {
                        field,
                        ascending: clause.ascending,
                    });
                }
            }
            refined.sort = Sort(clauses);
        }
        Ok(refined)
    }

    fn rewrite_tree<'a>(
        self: &'a Arc<Self>,
        caller: &'a Caller,
        collection: &'a str,
        tree: &'a ConditionTree,
    ) -> BoxFuture<'a, Result<ConditionTree>> {
        Box::pin(async move {
            match tree {
                ConditionTree::Leaf(leaf) => self.rewrite_leaf(caller, collection, leaf).await,
                ConditionTree::Branch {
                    aggregator,
                    conditions,
                } => {
                    let mut out = Vec::with_capacity(conditions.len());
                    for condition in conditions {
                        out.push(self.rewrite_tree(caller, collection, condition).await?);
                    }
                    Ok(ConditionTree::Branch {
                        aggregator: *aggregator,
                        conditions: out,
                    })
                }
            }
        })
    }

    /// One leaf: through an added to-one relation it becomes a key list read from the foreign
    /// collection; through a relation of the layer below, the part beyond it is rewritten in the
    /// foreign collection and nested back.
    fn rewrite_leaf<'a>(
        self: &'a Arc<Self>,
        caller: &'a Caller,
        collection: &'a str,
        leaf: &'a Leaf,
    ) -> BoxFuture<'a, Result<ConditionTree>> {
        Box::pin(async move {
            let unchanged = || ConditionTree::Leaf(leaf.clone());
            let Some((head, rest)) = leaf.field.split_once(':') else {
                return Ok(unchanged());
            };
            let unnested = Leaf {
                field: rest.to_owned(),
                ..leaf.clone()
            };
            match self.added(collection, head) {
                Some(RelationSchema::ManyToOne {
                    foreign_collection,
                    foreign_key,
                    foreign_key_target,
                }) => {
                    let foreign = self.view(foreign_collection)?;
                    let not_in = self
                        .schema
                        .collections
                        .get(collection)
                        .and_then(|c| c.column(foreign_key))
                        .is_some_and(|c| c.filter_operators.contains(&Operator::NotIn));
                    // `NotEqual`: the keys of the records that are equal, excluded.
                    let (tree, operator) = if leaf.operator == Operator::NotEqual && not_in {
                        let equal = Leaf {
                            operator: Operator::Equal,
                            ..unnested
                        };
                        (ConditionTree::Leaf(equal), Operator::NotIn)
                    } else {
                        (ConditionTree::Leaf(unnested), Operator::In)
                    };
                    let records = foreign
                        .list(
                            caller,
                            &Filter::new(Some(tree)),
                            &Projection::new([foreign_key_target.as_str()]),
                        )
                        .await?;
                    let keys = distinct(&records, foreign_key_target);
                    Ok(ConditionTree::leaf(
                        foreign_key.as_str(),
                        operator,
                        Value::Array(keys),
                    ))
                }
                Some(RelationSchema::OneToOne {
                    foreign_collection,
                    origin_key,
                    origin_key_target,
                }) => {
                    let foreign = self.view(foreign_collection)?;
                    let records = foreign
                        .list(
                            caller,
                            &Filter::new(Some(ConditionTree::Leaf(unnested))),
                            &Projection::new([origin_key.as_str()]),
                        )
                        .await?;
                    let keys = distinct(&records, origin_key);
                    Ok(ConditionTree::leaf(
                        origin_key_target.as_str(),
                        Operator::In,
                        Value::Array(keys),
                    ))
                }
                // To-many relations cannot be filtered through; the layer below says so.
                Some(_) => Ok(unchanged()),
                None => match self.relation(collection, head) {
                    Some(relation) if self.crosses(collection, &leaf.field) => {
                        let foreign = relation.foreign_collection();
                        let inner = self.rewrite_leaf(caller, foreign, &unnested).await?;
                        Ok(nest(inner, head))
                    }
                    _ => Ok(unchanged()),
                },
            }
        })
    }

    /// Fills in, on records listed with their keys, the relations of `projection` that cross
    /// added relations: one `In` query per added relation, whatever the number of records.
    fn reproject<'a>(
        self: &'a Arc<Self>,
        caller: &'a Caller,
        collection: &'a str,
        mut records: Vec<&'a mut Record>,
        projection: &'a Projection,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            for prefix in projection.relations() {
                let sub = projection.under(prefix);
                let key_and_target = match self.added(collection, prefix) {
                    Some(RelationSchema::ManyToOne {
                        foreign_key,
                        foreign_key_target,
                        ..
                    }) => Some((foreign_key, foreign_key_target)),
                    Some(
                        RelationSchema::OneToOne {
                            origin_key,
                            origin_key_target,
                            ..
                        }
                        | RelationSchema::OneToMany {
                            origin_key,
                            origin_key_target,
                            ..
                        },
                    ) => Some((origin_key_target, origin_key)),
                    // Not projectable: the layer above refuses such paths.
                    Some(RelationSchema::ManyToMany { .. }) => continue,
                    None => None,
                };
                let Some(relation) = self.relation(collection, prefix) else {
                    continue;
                };
                let foreign_name = relation.foreign_collection();
                match key_and_target {
                    Some((key, target)) => {
                        let foreign = self.view(foreign_name)?;
                        self.join(caller, &foreign, &mut records, prefix, key, target, sub)
                            .await?;
                    }
                    None => {
                        if !sub
                            .iter()
                            .any(|p| p.contains(':') && self.crosses(foreign_name, p))
                        {
                            continue;
                        }
                        let nested: Vec<&mut Record> = records
                            .iter_mut()
                            .filter_map(|r| match r.get_mut(prefix) {
                                Some(Value::Record(inner)) => Some(&mut **inner),
                                _ => None,
                            })
                            .collect();
                        self.reproject(caller, foreign_name, nested, &sub).await?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Sets `relation` on each record to the foreign record whose `target` equals the record's
    /// `key` (or null), read with one `In` query.
    #[expect(
        clippy::too_many_arguments,
        reason = "one relation's keys and projection"
    )]
    async fn join(
        &self,
        caller: &Caller,
        foreign: &Relations,
        records: &mut [&mut Record],
        relation: &str,
        key: &str,
        target: &str,
        mut sub: Projection,
    ) -> Result<()> {
        let keys = {
            let mut seen = HashSet::new();
            let mut keys = Vec::new();
            for record in records.iter() {
                if let Some(value) = record.get(key).filter(|v| usable(v))
                    && seen.insert(Key(value))
                {
                    keys.push(value.clone());
                }
            }
            keys
        };
        let found = if keys.is_empty() {
            Vec::new()
        } else {
            sub.push(target.to_owned());
            let filter = Filter::new(Some(ConditionTree::leaf(
                target,
                Operator::In,
                Value::Array(keys),
            )));
            foreign.list(caller, &filter, &sub).await?
        };
        let mut index: HashMap<Key<'_>, usize> = HashMap::with_capacity(found.len());
        for (i, record) in found.iter().enumerate() {
            if let Some(value) = record.get(target).filter(|v| usable(v)) {
                // The first record of a key wins, as the agent's `find`.
                index.entry(Key(value)).or_insert(i);
            }
        }
        for record in records.iter_mut() {
            let related = record
                .get(key)
                .filter(|v| usable(v))
                .and_then(|v| index.get(&Key(v)))
                .map_or(Value::Null, |i| Value::Record(Box::new(found[*i].clone())));
            record.insert(relation, related);
        }
        Ok(())
    }
}

/// A collection of the relation layer.
struct Relations {
    child: Arc<dyn Collection>,
    schema: Arc<CollectionSchema>,
    shared: Arc<Shared>,
}

impl Relations {
    fn name(&self) -> &str {
        &self.schema.name
    }

    /// The projection asked below: every path through an added relation replaced by its key.
    fn child_projection(&self, projection: &Projection) -> Projection {
        Projection::new(
            projection
                .iter()
                .map(|p| self.shared.rewrite_field(self.name(), p)),
        )
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        let filter = self.shared.refine(caller, self.name(), filter).await?;
        let child_projection = self.child_projection(projection);
        if child_projection == *projection {
            return self.child.list(caller, &filter, projection).await;
        }
        let mut records = self.child.list(caller, &filter, &child_projection).await?;
        self.shared
            .reproject(
                caller,
                self.name(),
                records.iter_mut().collect(),
                projection,
            )
            .await?;
        // The keys asked for the joins are dropped, unless they were asked for too.
        let shape = Shape::of(projection);
        Ok(records.iter().map(|r| shape.apply(r)).collect())
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        let fields: Vec<&str> = aggregation
            .field
            .iter()
            .map(String::as_str)
            .chain(aggregation.groups.iter().map(|g| g.field.as_str()))
            .collect();
        let crossing: Vec<&str> = fields
            .iter()
            .copied()
            .filter(|f| self.shared.crosses(self.name(), f))
            .collect();
        if crossing.is_empty() {
            let filter = self.shared.refine(caller, self.name(), filter).await?;
            return self
                .child
                .aggregate(caller, &filter, aggregation, limit)
                .await;
        }
        // The layer below cannot group by what it does not have: the matching records are
        // listed (at most the emulation row limit) and aggregated here, as the agent does.
        let limit_rows = self.shared.row_limit;
        let all = Filter {
            sort: Sort::default(),
            page: Some(Page::new(0, limit_rows.saturating_add(1))),
            ..filter.clone()
        };
        let records = self.list(caller, &all, &Projection::new(fields)).await?;
        if records.len() as u64 > limit_rows {
            return Err(Error::validation(format!(
                "The aggregation of '{}' through the relation field(s) {} would load more than \
                 {limit_rows} records in memory; narrow the filter or raise emulationRowLimit",
                self.name(),
                crossing
                    .iter()
                    .map(|f| format!("'{f}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(evaluate::aggregate(
            &records,
            aggregation,
            caller.timezone,
            limit,
        ))
    }
}

#[async_trait]
impl Decorator for Relations {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        Relations::list(self, caller, filter, projection).await
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        Relations::aggregate(self, caller, filter, aggregation, limit).await
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        let filter = self.shared.refine(caller, self.name(), filter).await?;
        self.child.update(caller, &filter, patch).await
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        let filter = self.shared.refine(caller, self.name(), filter).await?;
        self.child.delete(caller, &filter).await
    }
}
