//! Chart routes: `POST /stats/{c}` (a built-in chart over one collection, §2.8 and §8.10) and
//! `POST /_internal/native_query` (a query chart on a native query connection, §1.1). Both answer
//! the stats document `{data:{id,type:"stats",attributes:{value}}}`; the permissions and the
//! evaluation are `ops::charts`'.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;

use super::collection::served;
use super::error::ApiResult;
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::chart;
use crate::ops::charts;

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
    // The agent registers this route per collection: an unknown one has no route.
    served(state.datasource.schema(), &name)?;
    let value = charts::collection_chart(&state, &context.caller, &name, &body).await?;
    Ok(super::json(&chart::stats_document(value)))
}

/// `POST /_internal/native_query`: a query chart `{type, query, connectionName,
/// contextVariables}`.
async fn native_query(
    State(state): State<SharedState>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let value = charts::native_query(&state, &context.caller, &body).await?;
    Ok(super::json(&chart::stats_document(value)))
}
