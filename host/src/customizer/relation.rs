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
                // Only the target of a ManyToOne: it is the foreign key, no query needed (the
                // agent's lazy join, position 8; a dangling key still reads as a record).
                if let Some(RelationSchema::ManyToOne {
                    foreign_key,
                    foreign_key_target,
                    ..
                }) = self.added(collection, prefix)
                    && sub.iter().all(|p| p == foreign_key_target)
                {
                    for record in records.iter_mut() {
                        let related = match record.get(foreign_key).filter(|v| usable(v)) {
                            Some(value) => {
                                let mut target = Record::with_capacity(1);
                                target.insert(foreign_key_target.as_str(), value.clone());
                                Value::Record(Box::new(target))
                            }
                            None => Value::Null,
                        };
                        record.insert(prefix, related);
                    }
                    continue;
                }
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use indexmap::IndexMap;

    use super::super::{StackOptions, build_stack_with};
    use super::*;
    use crate::customizer::test_support::{caller, computed, sqlite};
    use crate::datasource::{CompositeDataSource, PrimitiveType};

    /// Lists seen by the base collections: (collection, projection).
    type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

    /// A datasource that records every list its collections answer.
    struct Counting {
        inner: Arc<dyn DataSource>,
        seen: Seen,
    }

    struct CountingCollection {
        inner: Arc<dyn Collection>,
        seen: Seen,
    }

    #[async_trait]
    impl DataSource for Counting {
        fn schema(&self) -> &DataSourceSchema {
            self.inner.schema()
        }

        fn collection(&self, name: &str) -> Result<Arc<dyn Collection>> {
            Ok(Arc::new(CountingCollection {
                inner: self.inner.collection(name)?,
                seen: Arc::clone(&self.seen),
            }))
        }

        fn native_query_connections(&self) -> Vec<String> {
            Vec::new()
        }

        async fn native_query(
            &self,
            _: &Caller,
            _: &str,
            _: &str,
            _: &IndexMap<String, Value>,
        ) -> Result<Vec<Record>> {
            Ok(Vec::new())
        }
    }

    #[async_trait]
    impl Collection for CountingCollection {
        fn schema(&self) -> &CollectionSchema {
            self.inner.schema()
        }

        async fn list(
            &self,
            caller: &Caller,
            filter: &Filter,
            projection: &Projection,
        ) -> Result<Vec<Record>> {
            self.seen
                .lock()
                .unwrap()
                .push((self.inner.schema().name.clone(), projection.0.clone()));
            self.inner.list(caller, filter, projection).await
        }

        async fn aggregate(
            &self,
            caller: &Caller,
            filter: &Filter,
            aggregation: &Aggregation,
            limit: Option<u64>,
        ) -> Result<Vec<AggregateResult>> {
            self.inner
                .aggregate(caller, filter, aggregation, limit)
                .await
        }

        async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
            self.inner.create(caller, records).await
        }

        async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
            self.inner.update(caller, filter, patch).await
        }

        async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
            self.inner.delete(caller, filter).await
        }
    }

    /// Authors in one database; books, covers (a native relation to books) and tags in another.
    async fn base() -> (Arc<dyn DataSource>, Seen) {
        let people = sqlite(
            "CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
             INSERT INTO authors VALUES (1, 'Herbert', 'x'), (2, 'Austen', 'y'), (3, 'Nobody', 'z');",
        )
        .await;
        let library = sqlite(
            "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT, author_id INTEGER);
             CREATE TABLE covers (id INTEGER PRIMARY KEY, color TEXT,
                book_id INTEGER REFERENCES books(id));
             CREATE TABLE tags (id INTEGER PRIMARY KEY, label TEXT);
             CREATE TABLE book_tags (book_id INTEGER, tag_id INTEGER, PRIMARY KEY (book_id, tag_id));
             INSERT INTO books VALUES (1, 'Dune', 1), (2, 'Emma', 2), (3, 'Persuasion', 2),
                (4, 'Anonymous', NULL), (5, 'Children of Dune', 1);
             INSERT INTO covers VALUES (1, 'red', 1), (2, 'blue', 2), (3, 'green', 4);
             INSERT INTO tags VALUES (1, 'sf'), (2, 'classic');
             INSERT INTO book_tags VALUES (1, 1), (1, 2), (2, 2);",
        )
        .await;
        let composite = CompositeDataSource::new(vec![people, library]).unwrap();
        let seen: Seen = Arc::default();
        let counting = Counting {
            inner: Arc::new(composite),
            seen: Arc::clone(&seen),
        };
        (Arc::new(counting), seen)
    }

    fn relation(collection: &str, name: &str, definition: RelationDefinition) -> Customization {
        Customization::collection(
            "test-plugin",
            collection,
            Kind::Relation {
                name: name.into(),
                definition,
            },
        )
    }

    fn book_author() -> Customization {
        relation(
            "books",
            "author",
            RelationDefinition::ManyToOne {
                foreign_collection: "authors".into(),
                foreign_key: "author_id".into(),
                foreign_key_target: None,
            },
        )
    }

    fn relations() -> Vec<Customization> {
        vec![
            book_author(),
            relation(
                "authors",
                "books",
                RelationDefinition::OneToMany {
                    foreign_collection: "books".into(),
                    origin_key: "author_id".into(),
                    origin_key_target: None,
                },
            ),
            relation(
                "books",
                "cover",
                RelationDefinition::OneToOne {
                    foreign_collection: "covers".into(),
                    origin_key: "book_id".into(),
                    origin_key_target: None,
                },
            ),
            relation(
                "books",
                "tags",
                RelationDefinition::ManyToMany {
                    foreign_collection: "tags".into(),
                    through_collection: "book_tags".into(),
                    origin_key: "book_id".into(),
                    foreign_key: "tag_id".into(),
                    origin_key_target: None,
                    foreign_key_target: None,
                },
            ),
        ]
    }

    async fn stack(customizations: Vec<Customization>) -> (Arc<dyn DataSource>, Seen) {
        let (base, seen) = base().await;
        let stack = build_stack_with(base, customizations, &StackOptions::default()).unwrap();
        (stack, seen)
    }

    fn text(record: &Record, path: &str) -> String {
        match record.get_path(path) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => "-".into(),
            Some(other) => format!("{other:?}"),
        }
    }

    async fn list(
        ds: &Arc<dyn DataSource>,
        collection: &str,
        filter: Filter,
        paths: &[&str],
    ) -> Vec<Record> {
        ds.collection(collection)
            .unwrap()
            .list(&caller(), &filter, &Projection::new(paths.iter().copied()))
            .await
            .unwrap()
    }

    fn by_id() -> Filter {
        Filter::default().with_sort(Sort::asc("id"))
    }

    #[tokio::test]
    async fn the_schema_has_the_relations_with_their_default_targets() {
        let (ds, _) = stack(relations()).await;
        let books = ds.schema().collection("books").unwrap();
        assert_eq!(
            books.relation("author"),
            Some(&RelationSchema::ManyToOne {
                foreign_collection: "authors".into(),
                foreign_key: "author_id".into(),
                foreign_key_target: "id".into(),
            })
        );
        assert_eq!(
            books.relation("tags"),
            Some(&RelationSchema::ManyToMany {
                foreign_collection: "tags".into(),
                through_collection: "book_tags".into(),
                origin_key: "book_id".into(),
                origin_key_target: "id".into(),
                foreign_key: "tag_id".into(),
                foreign_key_target: "id".into(),
            })
        );
        // The collection the layer serves has it too (the HTTP layer reads both).
        assert!(
            ds.collection("authors")
                .unwrap()
                .schema()
                .relation("books")
                .is_some()
        );
    }

    #[tokio::test]
    async fn projections_through_an_added_relation_cost_one_in_query_per_relation() {
        let (ds, seen) = stack(relations()).await;
        let records = list(
            &ds,
            "books",
            by_id(),
            &["title", "author:name", "cover:color"],
        )
        .await;
        let rows: Vec<String> = records
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}",
                    text(r, "title"),
                    text(r, "author:name"),
                    text(r, "cover:color")
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                "Dune Herbert red",
                "Emma Austen blue",
                "Persuasion Austen -",
                "Anonymous - green",
                "Children of Dune Herbert -"
            ]
        );
        // Exactly what was asked: the keys read for the joins are not returned.
        assert_eq!(
            records[0].keys().collect::<Vec<_>>(),
            ["title", "author", "cover"]
        );
        assert_eq!(
            records[0].get("author").and_then(|a| match a {
                Value::Record(r) => Some(r.keys().count()),
                _ => None,
            }),
            Some(1)
        );
        let seen = seen.lock().unwrap();
        let collections: Vec<&str> = seen.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(collections, ["books", "authors", "covers"]);
        assert_eq!(seen[0].1, ["title", "author_id", "id"]);
    }

    #[tokio::test]
    async fn only_the_target_of_a_many_to_one_is_read_from_the_foreign_key() {
        let (ds, seen) = stack(relations()).await;
        let records = list(&ds, "books", by_id(), &["title", "author:id"]).await;
        let ids: Vec<Option<&Value>> = records.iter().map(|r| r.get_path("author:id")).collect();
        assert_eq!(
            ids,
            [
                Some(&Value::Int(1)),
                Some(&Value::Int(2)),
                Some(&Value::Int(2)),
                Some(&Value::Null),
                Some(&Value::Int(1))
            ]
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "no query on authors: {seen:?}");
    }

    #[tokio::test]
    async fn an_added_relation_is_reached_through_a_native_one() {
        let (ds, seen) = stack(relations()).await;
        let covers = ds.schema().collection("covers").unwrap();
        let native = covers
            .relations()
            .find(|(_, r)| r.foreign_collection() == "books")
            .map(|(n, _)| n.clone())
            .unwrap();
        let path = format!("{native}:author:name");
        let records = list(&ds, "covers", by_id(), &["color", &path]).await;
        let names: Vec<String> = records.iter().map(|r| text(r, &path)).collect();
        assert_eq!(names, ["Herbert", "Austen", "-"]);
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 2, "{seen:?}");
            assert_eq!(
                seen[0].1,
                ["color".to_owned(), format!("{native}:author_id")]
            );
        }

        // Filters cross it the same way.
        let filter = Filter::new(Some(ConditionTree::leaf(
            path.as_str(),
            Operator::Equal,
            Value::String("Austen".into()),
        )));
        let records = list(&ds, "covers", filter, &["color"]).await;
        assert_eq!(records.len(), 1);
        assert_eq!(text(&records[0], "color"), "blue");
    }

    #[tokio::test]
    async fn filters_through_added_relations_become_key_lists() {
        let (ds, _) = stack(relations()).await;
        let titles = |records: Vec<Record>| -> Vec<String> {
            records.iter().map(|r| text(r, "title")).collect()
        };
        let leaf = |field: &str, op: Operator, value: &str| {
            by_id().and(Some(ConditionTree::leaf(
                field,
                op,
                Value::String(value.into()),
            )))
        };
        let austen = list(
            &ds,
            "books",
            leaf("author:name", Operator::Equal, "Austen"),
            &["title"],
        )
        .await;
        assert_eq!(titles(austen), ["Emma", "Persuasion"]);
        // NotEqual: the keys of the equal ones, excluded (books without author are kept, as
        // `NotIn` keeps null keys).
        let not_austen = list(
            &ds,
            "books",
            leaf("author:name", Operator::NotEqual, "Austen"),
            &["title"],
        )
        .await;
        assert_eq!(
            titles(not_austen),
            ["Dune", "Anonymous", "Children of Dune"]
        );
        let red = list(
            &ds,
            "books",
            leaf("cover:color", Operator::Equal, "red"),
            &["title"],
        )
        .await;
        assert_eq!(titles(red), ["Dune"]);
        let none = list(
            &ds,
            "books",
            leaf("author:name", Operator::Equal, "Tolstoy"),
            &["title"],
        )
        .await;
        assert!(none.is_empty());
        // In an Or with a plain column.
        let or = by_id().and(Some(ConditionTree::or(vec![
            ConditionTree::leaf("author:name", Operator::Equal, Value::from("Herbert")),
            ConditionTree::leaf("title", Operator::Equal, Value::from("Emma")),
        ])));
        assert_eq!(
            titles(list(&ds, "books", or, &["title"]).await),
            ["Dune", "Emma", "Children of Dune"]
        );
    }

    #[tokio::test]
    async fn sorting_on_an_added_many_to_one_sorts_by_its_key() {
        let (ds, _) = stack(relations()).await;
        let filter = Filter::default().with_sort(Sort(vec![
            SortClause {
                field: "author:name".into(),
                ascending: false,
            },
            SortClause {
                field: "id".into(),
                ascending: true,
            },
        ]));
        let records = list(&ds, "books", filter, &["title", "author:name"]).await;
        // By author_id descending (2, 2, 1, 1, null), not by name.
        let rows: Vec<String> = records.iter().map(|r| text(r, "title")).collect();
        assert_eq!(
            rows,
            [
                "Emma",
                "Persuasion",
                "Dune",
                "Children of Dune",
                "Anonymous"
            ]
        );
    }

    #[tokio::test]
    async fn aggregations_through_added_relations_run_in_memory_within_the_row_limit() {
        let (ds, _) = stack(relations()).await;
        let books = ds.collection("books").unwrap();
        let aggregation = Aggregation::count().group_by("author:name", None);
        let rows = books
            .aggregate(&caller(), &Filter::default(), &aggregation, None)
            .await
            .unwrap();
        let groups: Vec<(String, f64)> = rows
            .iter()
            .map(|r| {
                (
                    match r.group.get("author:name") {
                        Some(Value::String(s)) => s.clone(),
                        _ => "-".into(),
                    },
                    r.value.as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            groups,
            [
                ("Herbert".to_owned(), 2.0),
                ("Austen".to_owned(), 2.0),
                ("-".to_owned(), 1.0)
            ]
        );
        // Filtered through a relation, aggregated below.
        let filter = Filter::new(Some(ConditionTree::leaf(
            "author:name",
            Operator::Equal,
            Value::from("Herbert"),
        )));
        let rows = books
            .aggregate(&caller(), &filter, &Aggregation::count(), None)
            .await
            .unwrap();
        assert_eq!(rows[0].value.as_f64(), Some(2.0));

        let (base, _) = base().await;
        let options = StackOptions {
            emulation_row_limit: 3,
            ..StackOptions::default()
        };
        let limited = build_stack_with(base, relations(), &options).unwrap();
        let error = limited
            .collection("books")
            .unwrap()
            .aggregate(&caller(), &Filter::default(), &aggregation, None)
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, Error::Validation(_))
                && message.contains("'books'")
                && message.contains("'author:name'")
                && message.contains("3 records")
                && message.contains("emulationRowLimit"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn update_and_delete_filters_cross_added_relations() {
        let (ds, _) = stack(relations()).await;
        let books = ds.collection("books").unwrap();
        let herbert = Filter::new(Some(ConditionTree::leaf(
            "author:name",
            Operator::Equal,
            Value::from("Herbert"),
        )));
        let mut patch = Record::new();
        patch.insert("title", Value::from("by Herbert"));
        books.update(&caller(), &herbert, &patch).await.unwrap();
        let titles: Vec<String> = list(&ds, "books", by_id(), &["title"])
            .await
            .iter()
            .map(|r| text(r, "title"))
            .collect();
        assert_eq!(
            titles,
            [
                "by Herbert",
                "Emma",
                "Persuasion",
                "Anonymous",
                "by Herbert"
            ]
        );
        // Dune's cover goes first (a foreign key).
        ds.collection("covers")
            .unwrap()
            .delete(
                &caller(),
                &Filter::new(Some(ConditionTree::leaf(
                    "id",
                    Operator::Equal,
                    Value::Int(1),
                ))),
            )
            .await
            .unwrap();
        books.delete(&caller(), &herbert).await.unwrap();
        assert_eq!(list(&ds, "books", by_id(), &["id"]).await.len(), 3);
    }

    fn refused(result: Result<Arc<dyn DataSource>>) -> String {
        match result {
            Ok(_) => panic!("the stack must be refused"),
            Err(e) => e.to_string(),
        }
    }

    #[tokio::test]
    async fn bad_keys_are_refused_and_missing_targets_follow_the_option() {
        let (base, _) = base().await;
        let strict = StackOptions::default();
        let lenient = StackOptions {
            ignore_missing_schema_element_errors: true,
            ..StackOptions::default()
        };
        let many_to_one = |foreign: &str, key: &str, target: Option<&str>| {
            relation(
                "books",
                "writer",
                RelationDefinition::ManyToOne {
                    foreign_collection: foreign.into(),
                    foreign_key: key.into(),
                    foreign_key_target: target.map(str::to_owned),
                },
            )
        };
        for (customization, expected) in [
            (
                many_to_one("writers", "author_id", None),
                "the foreign collection 'writers' does not exist",
            ),
            (
                many_to_one("authors", "writer_id", None),
                "the key 'books.writer_id' does not exist",
            ),
            (
                many_to_one("authors", "author_id", Some("nope")),
                "the key 'authors.nope' does not exist",
            ),
        ] {
            let message = refused(build_stack_with(
                Arc::clone(&base),
                vec![customization.clone()],
                &strict,
            ));
            assert!(
                message.contains("test-plugin")
                    && message.contains("'books.writer'")
                    && message.contains(expected),
                "{message}"
            );
            // Ignored: the relation is skipped, the stack is built without it.
            let ds = build_stack_with(Arc::clone(&base), vec![customization], &lenient).unwrap();
            assert!(
                ds.schema()
                    .collection("books")
                    .unwrap()
                    .relation("writer")
                    .is_none()
            );
        }
        // Keys that exist but cannot be used are refused even when missing ones are ignored.
        let mismatch = many_to_one("authors", "title", None);
        let message = refused(build_stack_with(
            Arc::clone(&base),
            vec![mismatch],
            &lenient,
        ));
        assert!(
            message.contains(
                "the types of 'books.title' (\"String\") and 'authors.id' (\"Number\") do not match"
            ),
            "{message}"
        );
        let twice = refused(build_stack_with(
            Arc::clone(&base),
            vec![book_author(), book_author()],
            &strict,
        ));
        assert!(twice.contains("already exists"), "{twice}");
    }

    #[tokio::test]
    async fn a_key_without_the_in_operator_is_refused() {
        // A computed field has no operator until one is emulated or replaced.
        let (base, _) = base().await;
        let computed = Customization::collection(
            "test-plugin",
            "books",
            Kind::ComputedField {
                name: "writer_id".into(),
                column_type: PrimitiveType::Number.into(),
                dependencies: vec!["author_id".into()],
                default_value: None,
                enum_values: None,
                handler: super::super::closures::compute(|batch| {
                    Ok(batch.columns[0].values.clone())
                }),
            },
        );
        let message = refused(build_stack_with(
            base,
            vec![
                computed,
                relation(
                    "books",
                    "writer",
                    RelationDefinition::ManyToOne {
                        foreign_collection: "authors".into(),
                        foreign_key: "writer_id".into(),
                        foreign_key_target: None,
                    },
                ),
            ],
            &StackOptions::default(),
        ));
        assert!(
            message.contains("'books.writer_id' does not support the In operator"),
            "{message}"
        );
    }

    fn computed_copy(collection: &str, name: &str, deps: &[&str]) -> Customization {
        let handler = super::super::closures::compute(|batch| {
            Ok((0..batch.len)
                .map(|i| {
                    let parts: Vec<String> = batch
                        .columns
                        .iter()
                        .map(|c| match &c.values[i] {
                            Value::String(s) => s.clone(),
                            Value::Null => "-".into(),
                            other => format!("{other:?}"),
                        })
                        .collect();
                    Value::String(parts.join(" by "))
                })
                .collect())
        });
        Customization {
            origin: "test-plugin".into(),
            ..computed(collection, name, deps, handler)
        }
    }

    #[tokio::test]
    async fn a_computed_field_reading_an_added_relation_sits_above_it() {
        let mut customizations = vec![computed_copy("books", "byline", &["title", "author:name"])];
        customizations.extend(relations());
        // Computed on the late field, and on a field of the foreign collection reached through
        // the relation (early on authors).
        customizations.push(computed_copy("authors", "shout", &["name"]));
        customizations.push(computed_copy("books", "loud", &["byline", "author:shout"]));
        let (ds, _) = stack(customizations).await;
        let records = list(&ds, "books", by_id(), &["loud"]).await;
        let rows: Vec<String> = records.iter().map(|r| text(r, "loud")).collect();
        assert_eq!(
            rows[..2],
            ["Dune by Herbert by Herbert", "Emma by Austen by Austen"]
        );
        assert_eq!(rows[3], "Anonymous by - by -");
        // Through the relation from the other side.
        let records = list(&ds, "covers", by_id(), &["color"]).await;
        assert_eq!(records.len(), 3);
    }

    #[tokio::test]
    async fn a_relation_may_use_an_imported_or_computed_key() {
        let (base, _) = base().await;
        let native = base
            .schema()
            .collection("covers")
            .unwrap()
            .relations()
            .find(|(_, r)| r.foreign_collection() == "books")
            .map(|(n, _)| n.clone())
            .unwrap();
        let customizations = vec![
            // covers.book_author_id imported from the book; its operators (In among them)
            // are replaced by the same ones on the path, under the relation layer.
            Customization::collection(
                "test-plugin",
                "covers",
                Kind::ImportField {
                    name: "book_author_id".into(),
                    path: format!("{native}:author_id"),
                    readonly: Some(true),
                },
            ),
            relation(
                "covers",
                "author",
                RelationDefinition::ManyToOne {
                    foreign_collection: "authors".into(),
                    foreign_key: "book_author_id".into(),
                    foreign_key_target: None,
                },
            ),
            // authors.writer_key: a computed copy of the id, with In emulated.
            Customization::collection(
                "test-plugin",
                "authors",
                Kind::ComputedField {
                    name: "writer_key".into(),
                    column_type: PrimitiveType::Number.into(),
                    dependencies: vec!["id".into()],
                    default_value: None,
                    enum_values: None,
                    handler: super::super::closures::compute(|batch| {
                        Ok(batch.columns[0].values.clone())
                    }),
                },
            ),
            Customization::collection(
                "test-plugin",
                "authors",
                Kind::Filtering {
                    field: "writer_key".into(),
                    mode: super::super::FilteringMode::Emulate(Operator::In),
                },
            ),
            relation(
                "books",
                "writer",
                RelationDefinition::ManyToOne {
                    foreign_collection: "authors".into(),
                    foreign_key: "author_id".into(),
                    foreign_key_target: Some("writer_key".into()),
                },
            ),
        ];
        let ds = build_stack_with(base, customizations, &StackOptions::default()).unwrap();
        let records = list(&ds, "covers", by_id(), &["color", "author:name"]).await;
        let rows: Vec<String> = records
            .iter()
            .map(|r| format!("{} {}", text(r, "color"), text(r, "author:name")))
            .collect();
        assert_eq!(rows, ["red Herbert", "blue Austen", "green -"]);
        let filter = Filter::new(Some(ConditionTree::leaf(
            "author:name",
            Operator::Equal,
            Value::from("Austen"),
        )));
        let blue = list(&ds, "covers", filter, &["color"]).await;
        assert_eq!(blue.len(), 1);
        assert_eq!(text(&blue[0], "color"), "blue");

        let records = list(&ds, "books", by_id(), &["title", "writer:name"]).await;
        assert_eq!(text(&records[1], "writer:name"), "Austen");
        assert_eq!(text(&records[3], "writer:name"), "-");
    }

    #[test]
    fn planning_adds_relations_without_checking_keys() {
        let mut schema = DataSourceSchema::default();
        let mut authors = CollectionSchema::new("authors");
        let mut id = ColumnSchema::new(PrimitiveType::Number);
        id.is_primary_key = true;
        authors.fields.insert("id".into(), FieldSchema::Column(id));
        schema.collections.insert("authors".into(), authors);
        schema
            .collections
            .insert("books".into(), CollectionSchema::new("books"));
        let planned = with_relations(&schema, &[book_author()]);
        assert_eq!(
            planned.collection("books").unwrap().relation("author"),
            Some(&RelationSchema::ManyToOne {
                foreign_collection: "authors".into(),
                foreign_key: "author_id".into(),
                foreign_key_target: "id".into(),
            })
        );
    }
}
