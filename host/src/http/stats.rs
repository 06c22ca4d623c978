//! Chart routes: `POST /stats/{c}` (a built-in chart over one collection, §2.8 and §8.10) and
//! `POST /_internal/native_query` (a query chart on a native query connection, §1.1). Both answer
//! the stats document `{data:{id,type:"stats",attributes:{value}}}`.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;

use super::collection::served;
use super::error::ApiResult;
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::chart::{self, ChartRequest};
use crate::auth::{self, Action};

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/stats/{collection}", post(collection_chart))
        .route("/_internal/native_query", post(native_query))
}

/// `POST /stats/{c}`: the chart body evaluated on the collection.
async fn collection_chart(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    // The agent registers this route per collection: an unknown one has no route.
    served(schema, &name)?;
    auth::authorize(&context.caller, &name, Action::Chart)?;
    let request = ChartRequest::parse(&body, schema, &name, &context.caller)?;
    // No rendering scope until permissions land; the argument is where it will go.
    let value = chart::evaluate(
        state.datasource.as_ref(),
        &context.caller,
        &name,
        &request,
        None,
    )
    .await?;
    Ok(super::json(&chart::stats_document(value)))
}

/// `POST /_internal/native_query`: a query chart `{type, query, connectionName,
/// contextVariables}`.
async fn native_query(
    State(state): State<SharedState>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    // A query chart belongs to no collection; the chart permission is checked on its hash alone.
    auth::authorize(&context.caller, "", Action::Chart)?;
    let value = chart::evaluate_native(state.datasource.as_ref(), &context.caller, &body).await?;
    Ok(super::json(&chart::stats_document(value)))
}
