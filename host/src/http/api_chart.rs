//! API chart routes (§1.2, §1.4): `/_charts/{c}/{chart}` renders a collection chart for the
//! record `record_id`, `/_charts/{chart}` a datasource chart. `GET` answers the raw chart value,
//! `POST` the stats document. No right is checked, as in the agent: only the session (and, as on
//! every private route, the IP whitelist and the user's being enabled, `security`).

use axum::Router;
use axum::extract::{OriginalUri, Path, State};
use axum::response::Response;
use axum::routing::get;
use serde_json::Value as Json;

use super::collection::served;
use super::error::ApiResult;
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::api_chart::{chart_value, parameters};
use crate::agent::chart::stats_document;
use crate::datasource::chart::ChartRequest;
use crate::datasource::{Error as DsError, unpack_id};

pub fn router() -> Router<SharedState> {
    Router::new()
        .route(
            "/_charts/{collection}/{chart}",
            get(collection_get).post(collection_post),
        )
        .route(
            "/_charts/{chart}",
            get(datasource_get).post(datasource_post),
        )
}

/// The query string's pairs, for the chart parameters.
fn query_pairs(uri: &OriginalUri) -> Vec<(String, String)> {
    form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// The chart request: parameters from the query string and body, and for a collection chart the
/// unpacked `record_id`.
fn request(
    state: &SharedState,
    uri: &OriginalUri,
    body: &Json,
    collection: Option<&str>,
) -> ApiResult<ChartRequest> {
    let parameters = parameters(query_pairs(uri), body);
    let record_id = match collection {
        None => None,
        Some(name) => {
            let schema = served(state.datasource.schema(), name)?;
            let packed = parameters.get("record_id").ok_or_else(|| {
                DsError::validation("The chart of a collection needs a record_id")
            })?;
            Some(
                unpack_id(schema, packed)?
                    .into_iter()
                    .map(|(_, value)| value)
                    .collect(),
            )
        }
    };
    Ok(ChartRequest {
        record_id,
        parameters,
    })
}

/// The chart value of a plugin chart, as `ops::charts::api_chart` computes it.
async fn render(
    state: &SharedState,
    context: &CallerContext,
    collection: Option<&str>,
    chart: &str,
    request: &ChartRequest,
) -> ApiResult<Json> {
    let result =
        crate::ops::charts::api_chart(state, &context.caller, collection, chart, request).await?;
    Ok(chart_value(&result))
}

async fn collection_get(
    State(state): State<SharedState>,
    Path((collection, chart)): Path<(String, String)>,
    uri: OriginalUri,
    context: CallerContext,
) -> ApiResult<Response> {
    let request = request(&state, &uri, &Json::Null, Some(&collection))?;
    let value = render(&state, &context, Some(&collection), &chart, &request).await?;
    Ok(super::json(&value))
}

async fn collection_post(
    State(state): State<SharedState>,
    Path((collection, chart)): Path<(String, String)>,
    uri: OriginalUri,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let request = request(&state, &uri, &body, Some(&collection))?;
    let value = render(&state, &context, Some(&collection), &chart, &request).await?;
    Ok(super::json(&stats_document(value)))
}

async fn datasource_get(
    State(state): State<SharedState>,
    Path(chart): Path<String>,
    uri: OriginalUri,
    context: CallerContext,
) -> ApiResult<Response> {
    let request = request(&state, &uri, &Json::Null, None)?;
    let value = render(&state, &context, None, &chart, &request).await?;
    Ok(super::json(&value))
}

async fn datasource_post(
    State(state): State<SharedState>,
    Path(chart): Path<String>,
    uri: OriginalUri,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let request = request(&state, &uri, &body, None)?;
    let value = render(&state, &context, None, &chart, &request).await?;
    Ok(super::json(&stats_document(value)))
}
