//! The permission steps the data routes share (§5): browse with its live-query segment, the
//! caller's scope, relation reads (`skipRelationReadPermissions`) and the `currentUser`
//! context variables. Each route calls these in the agent's order; the decisions themselves are
//! `auth::Permissions`'.

use axum::http::HeaderMap;

use super::CallerContext;
use super::SharedState;
use super::collection::projection_header;
use super::error::ApiResult;
use crate::agent::chart::ContextVariables;
use crate::agent::query_string::QueryString;
use crate::datasource::{
    Caller, CollectionSchema, ConditionTree, DataSourceSchema, Filter, Projection,
};

/// `assertCanBrowse` on `collection`: browse, and the live-query segment of the query string
/// (`segmentQuery`, `connectionName`) when there is one.
pub(super) async fn browse(
    state: &SharedState,
    context: &CallerContext,
    collection: &str,
) -> ApiResult<()> {
    let query = context.query.get("segmentQuery").filter(|q| !q.is_empty());
    let connection = context.query.get("connectionName");
    let segment = query.as_deref().map(|query| (query, connection.as_deref()));
    match state
        .permissions
        .can_browse(&context.caller, collection, segment)
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

/// The caller's scope on `collection`.
pub(super) async fn scope(
    state: &SharedState,
    caller: &Caller,
    collection: &CollectionSchema,
) -> ApiResult<Option<ConditionTree>> {
    Ok(state
        .permissions
        .scope(caller, collection, state.datasource.schema())
        .await?)
}

/// `filter` restricted to the caller's scope on `collection`.
pub(super) async fn scoped(
    state: &SharedState,
    caller: &Caller,
    collection: &CollectionSchema,
    filter: Filter,
) -> ApiResult<Filter> {
    Ok(filter.and(scope(state, caller, collection).await?))
}

/// Whether the client chose the fields (`Forest-Projection` or `fields[c]`), rather than
/// getting the default projection.
fn explicit_projection(query: &QueryString, headers: &HeaderMap, collection: &str) -> bool {
    projection_header(headers).is_some_and(|h| !h.trim().is_empty())
        || query
            .get(&format!("fields[{collection}]"))
            .is_some_and(|f| !f.is_empty())
}

/// Relation reads of a request (`skipRelationReadPermissions` off): `read` on every collection
/// that the filter's leaves, its sort and its extended search reach through relations, and on
/// those the fields the client asked for reach (403 when one is denied). Fields of the default
/// projection that the caller may not read are left out instead of refusing the request.
pub(super) async fn relation_reads(
    state: &SharedState,
    context: &CallerContext,
    headers: Option<&HeaderMap>,
    collection: &CollectionSchema,
    filter: &Filter,
    projection: Option<&mut Projection>,
) -> ApiResult<()> {
    let permissions = &state.permissions;
    if !permissions.checks_relation_reads() {
        return Ok(());
    }
    let schema = state.datasource.schema();
    let caller = &context.caller;
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
    let explicit =
        headers.is_some_and(|h| explicit_projection(&context.query, h, &collection.name));
    if explicit {
        let paths: Vec<&str> = projection.iter().collect();
        permissions
            .can_read_through(caller, schema, collection, paths)
            .await?;
    } else {
        prune(state, caller, schema, collection, projection).await?;
    }
    Ok(())
}

/// Leaves out of a default projection the paths the caller may not read.
async fn prune(
    state: &SharedState,
    caller: &Caller,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    projection: &mut Projection,
) -> ApiResult<()> {
    let mut denied: Vec<String> = Vec::new();
    for path in projection.iter() {
        let Some((relation, _)) = path.split_once(':') else {
            continue;
        };
        if denied.iter().any(|d| d == relation) {
            continue;
        }
        if !state
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
pub(super) async fn context_variables(
    state: &SharedState,
    caller: &Caller,
    request: Option<&serde_json::Map<String, serde_json::Value>>,
) -> ApiResult<ContextVariables> {
    let mut variables = ContextVariables::new(caller, request);
    if let Some(user) = state.permissions.current_user(caller).await? {
        variables.set_user(user.properties());
    }
    Ok(variables)
}
