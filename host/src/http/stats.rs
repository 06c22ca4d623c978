//! Chart routes: `POST /stats/{c}` (a built-in chart over one collection, §2.8 and §8.10) and
//! `POST /_internal/native_query` (a query chart on a native query connection, §1.1). Both answer
//! the stats document `{data:{id,type:"stats",attributes:{value}}}`.
//!
//! Permissions (§5.5): the chart permission (level, else the chart's hash among the rendering's),
//! then for a collection chart the caller's scope on it and, unless
//! `skipRelationReadPermissions`, `read` on the collections its relation paths reach and
//! `browse` on the collection a Count leaderboard counts. The agent checks no collection right
//! on charts.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use serde_json::Value as Json;

use super::activity::Recorded;
use super::collection::served;
use super::error::ApiResult;
use super::permission::{self, scope};
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::chart::{self, ChartRequest, ChartType};
use crate::auth::CollectionRight;
use crate::datasource::{AggregationOperation, CollectionSchema};
use crate::platform::activity::Action;

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/stats/{collection}", post(collection_chart))
        .route("/_internal/native_query", post(native_query))
}

/// `POST /stats/{c}`: the chart body evaluated on the collection, within the caller's scope.
async fn collection_chart(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    // The agent registers this route per collection: an unknown one has no route.
    let collection = served(schema, &name)?;
    let mut activity = Recorded::start(&state, Action::Dashboard, &context.caller, &name);
    activity.label("chart");
    state
        .permissions
        .can_execute_chart(&context.caller, &body)
        .await?;
    let variables = permission::context_variables(
        &state,
        &context.caller,
        body.get("contextVariables").and_then(Json::as_object),
    )
    .await?;
    let request = ChartRequest::parse_with(&body, schema, &name, &variables)?;
    relation_reads(&state, &context, collection, &request).await?;
    let scope = scope(&state, &context.caller, collection).await?;
    let value = chart::evaluate(
        state.datasource.as_ref(),
        &context.caller,
        &name,
        &request,
        scope,
    )
    .await?;
    activity.done();
    Ok(super::json(&chart::stats_document(value)))
}

/// The relation reads of a chart: its filter's paths, its grouped and aggregated fields; a
/// leaderboard reads the related collection (browse to count it, read to sum its field).
async fn relation_reads(
    state: &SharedState,
    context: &CallerContext,
    collection: &CollectionSchema,
    request: &ChartRequest,
) -> ApiResult<()> {
    let permissions = &state.permissions;
    if !permissions.checks_relation_reads() {
        return Ok(());
    }
    let schema = state.datasource.schema();
    let mut paths: Vec<&str> = Vec::new();
    if let Some(tree) = &request.filter {
        for leaf in tree.leaves() {
            paths.push(&leaf.field);
        }
    }
    if request.chart_type != ChartType::Leaderboard {
        paths.extend(request.group_by_field.as_deref());
        paths.extend(request.aggregate_field.as_deref());
    }
    permissions
        .can_read_through(&context.caller, schema, collection, paths)
        .await?;
    if request.chart_type == ChartType::Leaderboard
        && let Some(relation) = request
            .relationship_field
            .as_deref()
            .and_then(|r| collection.relation(r))
    {
        let right = if request.aggregator == AggregationOperation::Count {
            CollectionRight::Browse
        } else {
            CollectionRight::Read
        };
        permissions
            .can(&context.caller, relation.foreign_collection(), right)
            .await?;
    }
    Ok(())
}

/// `POST /_internal/native_query`: a query chart `{type, query, connectionName,
/// contextVariables}`. The body is checked first (422), then the chart permission, as the agent
/// does.
async fn native_query(
    State(state): State<SharedState>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let mut activity = Recorded::start_on(&state, Action::Dashboard, &context.caller, None);
    activity.label("native query chart");
    chart::check_native(state.datasource.as_ref(), &body)?;
    state
        .permissions
        .can_execute_chart(&context.caller, &body)
        .await?;
    let user = state.permissions.current_user(&context.caller).await?;
    let value = chart::evaluate_native_with(
        state.datasource.as_ref(),
        &context.caller,
        &body,
        |request| {
            let mut variables = chart::ContextVariables::new(&context.caller, request);
            if let Some(user) = user {
                variables.set_user(user.properties());
            }
            variables
        },
    )
    .await?;
    activity.done();
    Ok(super::json(&chart::stats_document(value)))
}
