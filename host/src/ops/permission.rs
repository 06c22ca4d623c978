//! The permission steps operations share (§5): browse with its live-query segment, the
//! caller's scope, the scopes of the records included through to-one relations
//! (`strictScopes`), relation reads (`skipRelationReadPermissions`) and the `currentUser`
//! context variables. Each operation calls these in the agent's order; the decisions themselves are
//! `auth::Permissions`'.

use std::future::Future;
use std::pin::Pin;

use super::{Ops, Result};
use crate::agent::chart::ContextVariables;
use crate::datasource::query::evaluate::Matcher;
use crate::datasource::{
    Caller, CollectionSchema, ConditionTree, DataSourceSchema, Filter, Projection, Record, Value,
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

/// The caller's scopes on the collections whose records an answer includes through to-one
/// relations (`strictScopes`, on by default): an included record outside the caller's scope on
/// its own collection is left out, so the relationship is `data: null` and nothing is in
/// `included` (a CSV export writes its columns empty). The agent applies a scope to the route's
/// collection only (docs/compatibility.md). Built once per request from its projection, then
/// applied to each page of records.
///
/// The scopes are matched in memory on the included records, which the page's own query reads
/// with the fields the scopes need: no second query per page. A query per restricted relation
/// and page cost a scoped user's list of 15 a third of its throughput (issue 23); the matcher
/// has the SQL datasource's semantics on all three databases (`datasource::query::evaluate`,
/// held to it by the property tests).
pub struct IncludedScopes {
    relations: Vec<Included>,
}

/// One to-one relation of a projection whose records some scope restricts.
struct Included {
    /// The relation's name in the including records.
    relation: String,
    /// The caller's scope on the related collection; `None`: every related record is in it.
    scope: Option<Matcher>,
    /// The to-one relations the related records include in turn (`customer:country:name`).
    nested: IncludedScopes,
    /// Paths of the related records read only for `scope` (not asked for by the request), taken
    /// out once matched: the answer holds what it held without scopes.
    read_for_scope: Vec<String>,
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

impl IncludedScopes {
    /// The scopes of the to-one relations `projection` includes from `collection`, with the
    /// fields they are matched on added to `projection`; nothing to do with `strictScopes =
    /// false`, when permissions are not enforced, or when no scope applies.
    pub async fn new(
        ops: &Ops,
        caller: &Caller,
        collection: &CollectionSchema,
        projection: &mut Projection,
    ) -> Result<Self> {
        if !ops.permissions.strict_scopes || !ops.permissions.enforced() {
            return Ok(Self {
                relations: Vec::new(),
            });
        }
        let mut added = Vec::new();
        let scopes = Self::build(ops, caller, collection, projection, &mut added).await?;
        for path in added {
            projection.push(path);
        }
        Ok(scopes)
    }

    /// The scopes under `projection` (relative to `collection`); the paths their matching needs
    /// beyond `projection` go to `added`, relative to `collection` too.
    fn build<'a>(
        ops: &'a Ops,
        caller: &'a Caller,
        collection: &'a CollectionSchema,
        projection: &'a Projection,
        added: &'a mut Vec<String>,
    ) -> Boxed<'a, Self> {
        Box::pin(async move {
            let schema = ops.datasource.schema();
            let mut relations = Vec::new();
            for name in projection.relations() {
                let Some(relation) = collection.relation(name).filter(|r| r.is_to_one()) else {
                    continue;
                };
                let foreign = schema.collection(relation.foreign_collection())?;
                let read = projection.under(name);
                let mut needed = Vec::new();
                let nested = Self::build(ops, caller, foreign, &read, &mut needed).await?;
                let tree = scope(ops, caller, foreign).await?;
                if tree.is_none() && nested.relations.is_empty() {
                    continue;
                }
                let mut read_for_scope = Vec::new();
                let scope = match tree {
                    Some(tree) => {
                        for leaf in tree.leaves() {
                            let path = &leaf.field;
                            if !read.0.contains(path) && !needed.contains(path) {
                                needed.push(path.clone());
                                let unread = unread_prefix(&read, path).to_owned();
                                if !read_for_scope.contains(&unread) {
                                    read_for_scope.push(unread);
                                }
                            }
                        }
                        Some(Matcher::new(
                            &tree,
                            foreign,
                            schema,
                            caller.timezone,
                            caller.now(),
                        )?)
                    }
                    None => None,
                };
                added.extend(needed.iter().map(|path| format!("{name}:{path}")));
                relations.push(Included {
                    relation: name.to_owned(),
                    scope,
                    nested,
                    read_for_scope,
                });
            }
            Ok(Self { relations })
        })
    }

    /// Leaves out of `records` the included records outside the caller's scopes, and takes out
    /// what was read only to match them.
    pub fn apply(&self, records: &mut [Record]) {
        if !self.relations.is_empty() {
            let mut all: Vec<&mut Record> = records.iter_mut().collect();
            self.apply_to(&mut all);
        }
    }

    fn apply_to(&self, records: &mut [&mut Record]) {
        for included in &self.relations {
            let mut kept: Vec<&mut Record> = Vec::with_capacity(records.len());
            for record in records.iter_mut() {
                let Some(value) = record.get_mut(&included.relation) else {
                    continue;
                };
                let in_scope = match &*value {
                    Value::Record(related) => included
                        .scope
                        .as_ref()
                        .is_none_or(|scope| scope.matches(related)),
                    _ => continue,
                };
                if !in_scope {
                    *value = Value::Null;
                } else if let Value::Record(related) = value {
                    kept.push(&mut **related);
                }
            }
            // Nested scopes match after this one: a related record's scope is decided on what
            // it holds, before its own relations are left out.
            included.nested.apply_to(&mut kept);
            for path in &included.read_for_scope {
                Record::remove_path(kept.iter_mut().map(|r| &mut **r), path);
            }
        }
    }
}

/// The shortest prefix of `path` that `read` does not reach: removing it from a record takes
/// away what reading `path` added and nothing the request asked for (`country:name` when the
/// request reads no `country:…`, `country:name` itself when it reads `country:code`).
fn unread_prefix<'p>(read: &Projection, path: &'p str) -> &'p str {
    for (end, _) in path.match_indices(':') {
        let prefix = &path[..end];
        let reached = read
            .iter()
            .any(|p| p.len() > end && p.starts_with(prefix) && p.as_bytes()[end] == b':');
        if !reached {
            return prefix;
        }
    }
    path
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
