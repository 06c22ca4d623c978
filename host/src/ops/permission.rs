//! The permission steps operations share (§5): browse with its live-query segment, the
//! caller's scope, the scopes of the records included through to-one relations
//! (`strictScopes`), relation reads (`skipRelationReadPermissions`) and the `currentUser`
//! context variables. Each operation calls these in the agent's order; the decisions themselves are
//! `auth::Permissions`'.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{Ops, Result};
use crate::agent::chart::ContextVariables;
use crate::agent::query_string::{CompositeId, match_ids};
use crate::datasource::{
    Caller, Collection, CollectionSchema, ConditionTree, DataSourceSchema, Filter, Projection,
    Record, Value, pack_id,
};

/// `assertCanBrowse` on `collection`: browse, and the live-query segment of the request
/// (`segmentQuery`, `connectionName`) when there is one.
pub async fn browse(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    segment: Option<&LiveSegmentQuery>,
) -> Result<()> {
    let segment = segment.map(|s| (s.query.as_str(), s.connection.as_deref()));
    match ops
        .permissions
        .can_browse(caller, collection, segment)
        .await
    {
        // Worded as the other failures of a segment query (docs/compatibility.md).
        Err(crate::auth::Error::InvalidSegmentQuery(message)) => {
            Err(crate::agent::Error::Business(format!(
                "An error occurred during the execution of the segment query - {message}"
            ))
            .into())
        }
        other => Ok(other?),
    }
}

/// The live-query segment a request names (`segmentQuery`, `connectionName`), which browsing
/// checks against the rendering's allowed queries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSegmentQuery {
    pub query: String,
    pub connection: Option<String>,
}

impl LiveSegmentQuery {
    /// The segment of a query string, when `segmentQuery` is given and not empty.
    pub fn of(query: &crate::agent::query_string::QueryString) -> Option<Self> {
        let text = query.get("segmentQuery").filter(|q| !q.is_empty())?;
        Some(Self {
            query: text.to_string(),
            connection: query.get("connectionName").map(|c| c.to_string()),
        })
    }
}

/// The caller's scope on `collection`.
pub async fn scope(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
) -> Result<Option<ConditionTree>> {
    Ok(ops
        .permissions
        .scope(caller, collection, ops.datasource.schema())
        .await?)
}

/// `filter` restricted to the caller's scope on `collection`.
pub async fn scoped(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
    filter: Filter,
) -> Result<Filter> {
    Ok(filter.and(scope(ops, caller, collection).await?))
}

/// Packed record ids of one page, hashed with foldhash (seeded per process) rather than SipHash,
/// which took a tenth of what a scoped relation adds to a list-15 request.
type Ids = HashSet<String, foldhash::fast::RandomState>;

/// The caller's scopes on the collections whose records an answer includes through to-one
/// relations (`strictScopes`, on by default): an included record outside the caller's scope on
/// its own collection is left out, so the relationship is `data: null` and nothing is in
/// `included` (a CSV export writes its columns empty). The agent applies a scope to the route's
/// collection only (docs/compatibility.md). Built once per request from its projection, then
/// applied to each page of records.
pub struct IncludedScopes {
    relations: Vec<Included>,
}

/// One to-one relation of a projection whose records some scope restricts.
struct Included {
    /// The relation's name in the including records.
    relation: String,
    collection: Arc<dyn Collection>,
    /// The caller's scope on the related collection; `None`: every related record is in it.
    tree: Option<ConditionTree>,
    /// The to-one relations the related records include in turn (`customer:country:name`).
    nested: IncludedScopes,
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

impl IncludedScopes {
    /// The scopes of the to-one relations `projection` includes from `collection`; nothing to do
    /// with `strictScopes = false`, when permissions are not enforced, or when no scope applies.
    pub async fn new(
        ops: &Ops,
        caller: &Caller,
        collection: &CollectionSchema,
        projection: &Projection,
    ) -> Result<Self> {
        if !ops.permissions.strict_scopes || !ops.permissions.enforced() {
            return Ok(Self {
                relations: Vec::new(),
            });
        }
        Self::build(ops, caller, collection, projection.clone()).await
    }

    fn build<'a>(
        ops: &'a Ops,
        caller: &'a Caller,
        collection: &'a CollectionSchema,
        projection: Projection,
    ) -> Boxed<'a, Self> {
        Box::pin(async move {
            let schema = ops.datasource.schema();
            let mut relations = Vec::new();
            for name in projection.relations() {
                let Some(relation) = collection.relation(name).filter(|r| r.is_to_one()) else {
                    continue;
                };
                let foreign = schema.collection(relation.foreign_collection())?;
                let tree = scope(ops, caller, foreign).await?;
                let nested = Self::build(ops, caller, foreign, projection.under(name)).await?;
                if tree.is_none() && nested.relations.is_empty() {
                    continue;
                }
                relations.push(Included {
                    relation: name.to_owned(),
                    collection: ops.datasource.collection(&foreign.name)?,
                    tree,
                    nested,
                });
            }
            Ok(Self { relations })
        })
    }

    /// Leaves out of `records` the included records outside the caller's scopes: one query per
    /// restricted relation and page, for the related keys of that page only.
    pub fn apply<'a>(&'a self, caller: &'a Caller, records: &'a mut [Record]) -> Boxed<'a, ()> {
        Box::pin(async move {
            for included in &self.relations {
                // The related records, taken out of their parents (left `Null` until put back).
                let mut parents = Vec::new();
                let mut related = Vec::new();
                for (i, record) in records.iter_mut().enumerate() {
                    if let Some(value) = record.get_mut(&included.relation)
                        && matches!(value, Value::Record(_))
                        && let Value::Record(inner) = std::mem::replace(value, Value::Null)
                    {
                        parents.push(i);
                        related.push(*inner);
                    }
                }
                let keep = match &included.tree {
                    Some(tree) => Some(included.in_scope(caller, tree, &related).await?),
                    None => None,
                };
                let schema = included.collection.schema();
                let (mut kept_parents, mut kept) = (Vec::new(), Vec::new());
                for (parent, record) in parents.into_iter().zip(related) {
                    let allowed = keep.as_ref().is_none_or(|keep| {
                        pack_id(schema, &record).is_ok_and(|id| keep.contains(&id))
                    });
                    if allowed {
                        kept_parents.push(parent);
                        kept.push(record);
                    }
                }
                included.nested.apply(caller, &mut kept).await?;
                for (parent, record) in kept_parents.into_iter().zip(kept) {
                    if let Some(value) = records[parent].get_mut(&included.relation) {
                        *value = Value::Record(Box::new(record));
                    }
                }
            }
            Ok(())
        })
    }
}

impl Included {
    /// The packed ids of those of `related` that the caller's scope `tree` keeps.
    async fn in_scope(
        &self,
        caller: &Caller,
        tree: &ConditionTree,
        related: &[Record],
    ) -> Result<Ids> {
        let schema = self.collection.schema();
        let keys = schema.primary_keys();
        let mut seen = Ids::default();
        let ids: Vec<CompositeId> = related
            .iter()
            .filter(|record| pack_id(schema, record).is_ok_and(|id| seen.insert(id)))
            .map(|record| {
                keys.iter()
                    .map(|key| {
                        let value = record.get(key).cloned().unwrap_or(Value::Null);
                        ((*key).to_owned(), value)
                    })
                    .collect()
            })
            .collect();
        if ids.is_empty() {
            return Ok(Ids::default());
        }
        let filter = Filter::new(Some(match_ids(schema, &ids)?)).and(Some(tree.clone()));
        let rows = self
            .collection
            .list(caller, &filter, &Projection::new(keys))
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| pack_id(schema, row).ok())
            .collect())
    }
}

/// Relation reads of a request (`skipRelationReadPermissions` off): `read` on every collection
/// that the filter's leaves, its sort and its extended search reach through relations, and on
/// those the fields the client asked for reach (403 when one is denied). Fields of the default
/// projection that the caller may not read are left out instead of refusing the request.
/// `explicit` says whether the client chose the fields (`Forest-Projection` or `fields[c]`)
/// rather than getting the default projection.
pub async fn relation_reads(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
    filter: &Filter,
    projection: Option<&mut Projection>,
    explicit: bool,
) -> Result<()> {
    let permissions = &ops.permissions;
    if !permissions.checks_relation_reads() {
        return Ok(());
    }
    let schema = ops.datasource.schema();
    let mut paths: Vec<&str> = Vec::new();
    if let Some(tree) = &filter.condition_tree {
        for leaf in tree.leaves() {
            paths.push(&leaf.field);
        }
    }
    for clause in &filter.sort.0 {
        paths.push(&clause.field);
    }
    permissions
        .can_read_through(caller, schema, collection, paths)
        .await?;
    if filter.search_extended && filter.search.as_deref().is_some_and(|s| !s.is_empty()) {
        // The extended search reads the columns of every first-level to-one relation.
        let relations: Vec<String> = collection
            .relations()
            .filter(|(_, r)| r.is_to_one())
            .map(|(name, _)| format!("{name}:*"))
            .collect();
        let relations: Vec<&str> = relations.iter().map(String::as_str).collect();
        permissions
            .can_read_through(caller, schema, collection, relations)
            .await?;
    }
    let Some(projection) = projection else {
        return Ok(());
    };
    if explicit {
        let paths: Vec<&str> = projection.iter().collect();
        permissions
            .can_read_through(caller, schema, collection, paths)
            .await?;
    } else {
        prune(ops, caller, schema, collection, projection).await?;
    }
    Ok(())
}

/// Leaves out of a default projection the paths the caller may not read.
async fn prune(
    ops: &Ops,
    caller: &Caller,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    projection: &mut Projection,
) -> Result<()> {
    let mut denied: Vec<String> = Vec::new();
    for path in projection.iter() {
        let Some((relation, _)) = path.split_once(':') else {
            continue;
        };
        if denied.iter().any(|d| d == relation) {
            continue;
        }
        if !ops
            .permissions
            .can_read_path(caller, schema, collection, path)
            .await?
        {
            denied.push(relation.to_owned());
        }
    }
    if !denied.is_empty() {
        projection.0.retain(|path| {
            path.split_once(':')
                .is_none_or(|(relation, _)| !denied.iter().any(|d| d == relation))
        });
    }
    Ok(())
}

/// The context variables of a chart or SQL query: `currentUser.*` from the users document and
/// the rendering's team when permissions are enforced (the token's claims otherwise), plus the
/// request's `contextVariables`.
pub async fn context_variables(
    ops: &Ops,
    caller: &Caller,
    request: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<ContextVariables> {
    let mut variables = ContextVariables::new(caller, request);
    if let Some(user) = ops.permissions.current_user(caller).await? {
        variables.set_user(user.properties());
    }
    Ok(variables)
}
