//! Per-collection data routes (protocol §1.2): list, count, CSV export, get one, delete one and
//! bulk delete. Each handler authenticates (the `CallerContext` extractor), parses the request
//! with `agent::query_string` into the typed request of `ops::records`, which authorizes and runs
//! it, and answers with `agent::serialize`.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;

use super::error::{ApiError, ApiResult};
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::query_string::{Params, parse_filter, parse_projection, parse_selection};
use crate::agent::serialize;
use crate::auth::CollectionRight;
use crate::datasource::{CollectionSchema, DataSourceSchema};
use crate::ops::permission::LiveSegmentQuery;
use crate::ops::records::{
    self, Counted, FilterRequest, GetRequest, ListRequest, SelectionRequest, explicit_projection,
};
use crate::ops::{self, activity};
use crate::platform::activity::Action;

/// The `Forest-Projection` header (overrides `fields[…]` on list, get and CSV).
const FOREST_PROJECTION: &str = "forest-projection";

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/{collection}", get(list).delete(bulk_delete))
        .route("/{collection}/count", get(count))
        .route("/{collection}/{id}", get(get_one).delete(delete_one))
}

/// The schema of a served collection; an unknown name is a path without a route (404), as the
/// agent registers routes per collection.
pub(super) fn served<'a>(
    schema: &'a DataSourceSchema,
    name: &str,
) -> ApiResult<&'a CollectionSchema> {
    schema.collections.get(name).ok_or(ApiError::RouteNotFound)
}

pub(super) fn projection_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(FOREST_PROJECTION).and_then(|v| v.to_str().ok())
}

/// A request that could not be parsed is an attempted operation all the same: its activity
/// entry is recorded as failed, as the operation records a refused one.
pub(super) async fn parsed<T>(
    state: &SharedState,
    action: Action,
    context: &CallerContext,
    collection: &str,
    request: Result<T, impl Into<ApiError>>,
) -> ApiResult<T> {
    parsed_on(state, action, context, collection, None, request).await
}

/// [`parsed`] of an operation on one record, whose entry names it.
pub(super) async fn parsed_on<T>(
    state: &SharedState,
    action: Action,
    context: &CallerContext,
    collection: &str,
    record: Option<&str>,
    request: Result<T, impl Into<ApiError>>,
) -> ApiResult<T> {
    parsed_labelled(state, action, context, collection, record, None, request).await
}

/// [`parsed_on`] with the label the operation would have given its entry
/// (`ops::activity::unparsed`: the failed entry, and the right checked first).
pub(super) async fn parsed_labelled<T>(
    state: &SharedState,
    action: Action,
    context: &CallerContext,
    collection: &str,
    record: Option<&str>,
    label: Option<String>,
    request: Result<T, impl Into<ApiError>>,
) -> ApiResult<T> {
    let error = match request {
        Ok(request) => return Ok(request),
        Err(error) => error.into(),
    };
    activity::unparsed(state, action, &context.caller, collection, record, label).await?;
    Err(error)
}

/// `GET /{c}`; also `GET /{c}.csv`, since a path segment cannot be split by the router.
async fn list(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    context: CallerContext,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    if !schema.collections.contains_key(&name)
        && let Some(csv_name) = name.strip_suffix(".csv")
    {
        return csv(&state, csv_name, &context, &headers, None).await;
    }
    served(schema, &name)?;
    let request = ListRequest::parse(&state, &name, &context.query, projection_header(&headers));
    let kind = records::list_kind(&context.query);
    let request = parsed(&state, kind, &context, &name, request).await?;
    let listed = records::list(&state, &context.caller, request).await?;
    let body = serialize::serialize_list(schema, &name, &listed.records, listed.search.as_deref())?;
    Ok(super::json_bytes(body.to_bytes()?))
}

/// The filter request of a query string (count, related count).
/// A collection whose count is deactivated (`disableCount`) answers so whatever its filters: they
/// are not read, as the agent does not read them.
pub(super) fn filter_request(
    state: &SharedState,
    context: &CallerContext,
    collection: &CollectionSchema,
) -> ApiResult<FilterRequest> {
    let filter = if collection.countable {
        parse_filter(
            &Params::new(&context.query),
            state.datasource.schema(),
            collection,
        )?
    } else {
        crate::agent::query_string::RequestFilter::default()
    };
    Ok(FilterRequest {
        collection: collection.name.clone(),
        filter,
        segment_query: LiveSegmentQuery::of(&context.query),
    })
}

/// The body of a count.
pub(super) fn count_response(counted: Counted) -> Response {
    match counted {
        Counted::Count(count) => super::json(&serialize::count_body(count)),
        Counted::Deactivated => super::json(&serialize::count_deactivated_body()),
    }
}

/// `GET /{c}/count`: `{"count": n}`, or the deactivated body without querying.
async fn count(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    context: CallerContext,
) -> ApiResult<Response> {
    let collection_schema = served(state.datasource.schema(), &name)?;
    let request = match filter_request(&state, &context, collection_schema) {
        Ok(request) => request,
        Err(error) => {
            // The right first, as in `parsed_labelled` (a count records no activity entry).
            state
                .permissions
                .can(&context.caller, &name, CollectionRight::Browse)
                .await?;
            return Err(error);
        }
    };
    let counted = records::count(&state, &context.caller, request).await?;
    Ok(count_response(counted))
}

/// `GET /{c}/{id}`: one record, 404 `Record does not exists` when none.
async fn get_one(
    State(state): State<SharedState>,
    Path((name, id)): Path<(String, String)>,
    context: CallerContext,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    let collection_schema = served(schema, &name)?;
    let header = projection_header(&headers);
    let projection = parse_projection(&context.query, header, schema, collection_schema);
    let projection = parsed_on(
        &state,
        Action::Read,
        &context,
        &name,
        Some(id.as_str()),
        projection,
    )
    .await?;
    let request = GetRequest {
        collection: name.clone(),
        packed_id: id,
        projection,
        explicit_projection: explicit_projection(&context.query, header, &name),
    };
    let record = records::get(&state, &context.caller, request).await?;
    let body = serialize::serialize_one(schema, &name, &record)?;
    Ok(super::json_bytes(body.to_bytes()?))
}

/// `DELETE /{c}/{id}`: 204.
async fn delete_one(
    State(state): State<SharedState>,
    Path((name, id)): Path<(String, String)>,
    context: CallerContext,
) -> ApiResult<StatusCode> {
    served(state.datasource.schema(), &name)?;
    records::delete_one(&state, &context.caller, &name, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The selection of a bulk body (§2.6) on `collection`, with the query's filters.
pub(super) fn selection_request(
    state: &SharedState,
    context: &CallerContext,
    collection: &CollectionSchema,
    body: &serde_json::Value,
) -> ApiResult<SelectionRequest> {
    let selection = parse_selection(body, collection)?;
    let filter = selection.filter(&context.query, state.datasource.schema(), collection)?;
    Ok(SelectionRequest {
        collection: collection.name.clone(),
        all_records: selection.all_records,
        ids: selection.ids,
        filter,
    })
}

/// `DELETE /{c}` with a selection body (§2.6): 204.
async fn bulk_delete(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<StatusCode> {
    let collection_schema = served(state.datasource.schema(), &name)?;
    let request = selection_request(&state, &context, collection_schema, &body);
    let request = parsed(&state, Action::Delete, &context, &name, request).await?;
    records::delete_selection(&state, &context.caller, request).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /{c}.csv`: the header row, then pages of records streamed as they are read, up to
/// `limitExportSize` (§3.5; `ops::export`). Errors before the first byte are answered in the
/// envelope, without the download headers (the agent sets them only once every parameter is
/// parsed, so that a browser shows the error instead of saving it); a page that fails later ends
/// the stream (the status is already sent), and is logged.
pub(super) async fn csv(
    state: &SharedState,
    name: &str,
    context: &CallerContext,
    headers: &HeaderMap,
    parent: Option<&ops::relations::Parent>,
) -> ApiResult<Response> {
    let request = ops::export::CsvRequest {
        collection: name,
        query: &context.query,
        projection_header: projection_header(headers),
        parent,
    };
    let csv = ops::export::csv(state, &context.caller, request).await?;
    let disposition = HeaderValue::from_str(&csv.content_disposition).ok();
    let mut response = Response::new(Body::from_stream(csv.into_stream()));
    let out = response.headers_mut();
    // koa 3 keeps the type the agent sets before `attachment()`, whatever the file name.
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Some(value) = disposition {
        out.insert(header::CONTENT_DISPOSITION, value);
    }
    if let Ok(value) = HeaderValue::from_str(&httpdate_now()) {
        out.insert(header::LAST_MODIFIED, value);
    }
    out.insert("x-accel-buffering", HeaderValue::from_static("no"));
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}

/// `Last-Modified: now` in the HTTP date format.
fn httpdate_now() -> String {
    chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}
