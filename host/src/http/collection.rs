//! Per-collection data routes (protocol §1.2): list, count, CSV export, get one, delete one and
//! bulk delete. Each handler authenticates (the `CallerContext` extractor), asks its right of
//! `auth::Permissions` (§1.2: browse, read, delete, browse + export) and AND-s the caller's scope
//! into its filter (`permission`), parses with `agent::query_string` and answers with
//! `agent::serialize`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;

use super::activity::{Recorded, list_action};
use super::error::{ApiError, ApiResult};
use super::permission::{self, IncludedScopes, browse, scoped};
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::query_string::{
    Params, RequestFilter, match_ids, parse_csv_params, parse_filter, parse_paginated_filter,
    parse_projection, parse_requested_projection, parse_selection, with_primary_keys,
};
use crate::agent::{self, serialize};
use crate::auth::CollectionRight;
use crate::datasource::{
    Aggregation, Caller, Collection, CollectionSchema, ConditionTree, DataSourceSchema, Filter,
    Operator, Page, Projection, Value, unpack_id,
};
use crate::platform::activity::Action;

/// The `Forest-Projection` header (overrides `fields[…]` on list, get and CSV).
const FOREST_PROJECTION: &str = "forest-projection";

/// Records per query of a CSV export, as the agent pages it.
const CSV_PAGE: u64 = 1000;

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/{collection}", get(list).delete(bulk_delete))
        .route("/{collection}/count", get(count))
        .route("/{collection}/{id}", get(get_one).delete(delete_one))
}

/// The schema of a served collection; an unknown name is a path without a route (404), as the
/// agent registers routes per collection.
pub(crate) fn served<'a>(
    schema: &'a DataSourceSchema,
    name: &str,
) -> ApiResult<&'a CollectionSchema> {
    schema.collections.get(name).ok_or(ApiError::RouteNotFound)
}

/// The filter of a request, with its live-query segment resolved: the native query runs on its
/// connection (`{{var}}` placeholders bound, never spliced) and the first primary key of its rows
/// restricts the filter with an `In` leaf (§8.5). Any failure is a 422 `BusinessError`, as the
/// agent wraps it (its cause logged, not sent).
pub(crate) async fn resolve(
    state: &SharedState,
    caller: &Caller,
    collection: &CollectionSchema,
    request: RequestFilter,
) -> ApiResult<Filter> {
    let Some(segment) = request.live_query_segment else {
        return Ok(request.filter);
    };
    let failed = |detail: String| {
        tracing::debug!(%detail, "live-query segment failed");
        agent::Error::Business(format!(
            "An error occurred during the execution of the segment query - {detail}"
        ))
    };
    // The agent's datasource names an unknown connection so (the native query route another way).
    if !state
        .datasource
        .native_query_connections()
        .contains(&segment.connection_name)
    {
        return Err(failed(format!(
            "Unknown connection name '{}'",
            segment.connection_name
        ))
        .into());
    }
    // The agent keys the segment on the first primary key only.
    let pk = *collection
        .primary_keys()
        .first()
        .ok_or(crate::datasource::Error::NoPrimaryKey)?;
    let variables = permission::context_variables(state, caller, None).await?;
    let (sql, binds) = variables
        .bind_sql(&segment.query)
        .map_err(|e| failed(e.to_string()))?;
    let rows = state
        .datasource
        .native_query(caller, &segment.connection_name, &sql, &binds)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let ids = rows
        .iter()
        .map(|row| {
            row.get(pk)
                .cloned()
                .ok_or_else(|| failed(format!("the query must return the column '{pk}'")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut filter = request.filter;
    filter.condition_tree = ConditionTree::intersect([
        filter.condition_tree.take(),
        Some(ConditionTree::leaf(pk, Operator::In, Value::Array(ids))),
    ]);
    Ok(filter)
}

pub(super) fn projection_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(FOREST_PROJECTION).and_then(|v| v.to_str().ok())
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
    let listed = list_records(&state, &context, &name, Some(&headers)).await?;
    let body = serialize::serialize_list(schema, &name, &listed.records, listed.search.as_deref())?;
    let response = super::json_bytes(body.to_bytes()?);
    listed.activity.done();
    Ok(response)
}

/// A page of records, as `GET /{c}` reads it: browse right, filters, projection, relation reads,
/// segment and scope. The activity entry is started and handed back, to be marked done once the
/// answer is written.
pub(crate) struct Listed {
    pub records: Vec<crate::datasource::Record>,
    pub search: Option<String>,
    pub activity: Recorded,
}

/// The records of a list request on `name` (`GET /{c}`, and the MCP `list` tool, which calls it
/// in process so that both read through the same checks).
pub(crate) async fn list_records(
    state: &SharedState,
    context: &CallerContext,
    name: &str,
    headers: Option<&HeaderMap>,
) -> ApiResult<Listed> {
    let schema = state.datasource.schema();
    let collection_schema = served(schema, name)?;
    let activity = Recorded::start(state, list_action(&context.query), &context.caller, name);
    browse(state, context, name).await?;
    let params = Params::new(&context.query);
    let request = parse_paginated_filter(&params, schema, collection_schema)?;
    state.check_page_size(&request)?;
    let mut projection = parse_projection(
        &context.query,
        headers.and_then(projection_header),
        schema,
        collection_schema,
    )?;
    permission::relation_reads(
        state,
        context,
        headers,
        collection_schema,
        &request.filter,
        Some(&mut projection),
    )
    .await?;
    let filter = resolve(state, &context.caller, collection_schema, request).await?;
    let filter = scoped(state, &context.caller, collection_schema, filter).await?;
    let included =
        IncludedScopes::new(state, &context.caller, collection_schema, &projection).await?;
    let mut records = state
        .datasource
        .collection(name)?
        .list(&context.caller, &filter, &projection)
        .await?;
    included.apply(&context.caller, &mut records).await?;
    Ok(Listed {
        records,
        search: filter.search,
        activity,
    })
}

/// `GET /{c}/count`: `{"count": n}`, or the deactivated body without querying.
async fn count(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    context: CallerContext,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    let collection_schema = served(schema, &name)?;
    browse(&state, &context, &name).await?;
    if !collection_schema.countable {
        return Ok(super::json(&serialize::count_deactivated_body()));
    }
    let request = parse_filter(&Params::new(&context.query), schema, collection_schema)?;
    permission::relation_reads(
        &state,
        &context,
        None,
        collection_schema,
        &request.filter,
        None,
    )
    .await?;
    let filter = resolve(&state, &context.caller, collection_schema, request).await?;
    let filter = scoped(&state, &context.caller, collection_schema, filter).await?;
    let rows = state
        .datasource
        .collection(&name)?
        .aggregate(&context.caller, &filter, &Aggregation::count(), None)
        .await?;
    // A count is a non-negative integer; `as` saturates, and no row means 0.
    let count = rows
        .first()
        .and_then(|row| row.value.as_f64())
        .map_or(0, |n| n as u64);
    Ok(super::json(&serialize::count_body(count)))
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
    let mut activity = Recorded::start(&state, Action::Read, &context.caller, &name);
    activity.records([id.as_str()]);
    state
        .permissions
        .can(&context.caller, &name, CollectionRight::Read)
        .await?;
    let filter = Filter::new(Some(match_ids(
        collection_schema,
        &[unpack_id(collection_schema, &id)?],
    )?));
    let filter = scoped(&state, &context.caller, collection_schema, filter).await?;
    let mut projection = parse_projection(
        &context.query,
        projection_header(&headers),
        schema,
        collection_schema,
    )?;
    permission::relation_reads(
        &state,
        &context,
        Some(&headers),
        collection_schema,
        &Filter::default(),
        Some(&mut projection),
    )
    .await?;
    let included =
        IncludedScopes::new(&state, &context.caller, collection_schema, &projection).await?;
    let mut records = state
        .datasource
        .collection(&name)?
        .list(&context.caller, &filter, &projection)
        .await?;
    included.apply(&context.caller, &mut records).await?;
    let record = records
        .first()
        .ok_or_else(|| agent::Error::NotFound("Record does not exists".to_owned()))?;
    let body = serialize::serialize_one(schema, &name, record)?;
    let response = super::json_bytes(body.to_bytes()?);
    activity.done();
    Ok(response)
}

/// `DELETE /{c}/{id}`: 204.
async fn delete_one(
    State(state): State<SharedState>,
    Path((name, id)): Path<(String, String)>,
    context: CallerContext,
) -> ApiResult<StatusCode> {
    let collection_schema = served(state.datasource.schema(), &name)?;
    let mut activity = Recorded::start(&state, Action::Delete, &context.caller, &name);
    activity.records([id.as_str()]);
    state
        .permissions
        .can(&context.caller, &name, CollectionRight::Delete)
        .await?;
    let filter = Filter::new(Some(match_ids(
        collection_schema,
        &[unpack_id(collection_schema, &id)?],
    )?));
    let filter = scoped(&state, &context.caller, collection_schema, filter).await?;
    state
        .datasource
        .collection(&name)?
        .delete(&context.caller, &filter)
        .await?;
    activity.done();
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /{c}` with a selection body (§2.6): 204.
async fn bulk_delete(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<StatusCode> {
    let schema = state.datasource.schema();
    let collection_schema = served(schema, &name)?;
    let mut activity = Recorded::start(&state, Action::Delete, &context.caller, &name);
    state
        .permissions
        .can(&context.caller, &name, CollectionRight::Delete)
        .await?;
    let selection = parse_selection(&body, collection_schema)?;
    if selection.all_records {
        // Every record matching the query but the excluded ones: the ids are not known
        // without reading them.
        activity.label("deleted all records of the selection");
    } else {
        activity.ids(&selection.ids);
    }
    let filter = resolve(
        &state,
        &context.caller,
        collection_schema,
        selection.filter(&context.query, schema, collection_schema)?,
    )
    .await?;
    let filter = scoped(&state, &context.caller, collection_schema, filter).await?;
    state
        .datasource
        .collection(&name)?
        .delete(&context.caller, &filter)
        .await?;
    activity.done();
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /{c}.csv`: the header row, then pages of records streamed as they are read, up to
/// `limitExportSize` (§3.5). Errors before the first byte are answered in the envelope, without
/// the download headers (the agent sets them only once every parameter is parsed, so that a
/// browser shows the error instead of saving it); a page that fails later ends the stream (the
/// status is already sent), and is logged.
pub(crate) async fn csv(
    state: &SharedState,
    name: &str,
    context: &CallerContext,
    headers: &HeaderMap,
    restrict: Option<ConditionTree>,
) -> ApiResult<Response> {
    let schema = state.datasource.schema();
    let collection_schema = served(schema, name)?;
    // Recorded when the stream starts: a page failing later is logged by the export itself.
    let activity = Recorded::start(state, Action::Export, &context.caller, name);
    browse(state, context, name).await?;
    state
        .permissions
        .can(&context.caller, name, CollectionRight::Export)
        .await?;
    let params = Params::new(&context.query);
    let mut request = parse_filter(&params, schema, collection_schema)?;
    request.filter.sort =
        crate::agent::query_string::parse_sort(&params, schema, collection_schema)?;
    let mut columns = parse_requested_projection(
        &context.query,
        projection_header(headers),
        schema,
        collection_schema,
    )?;
    permission::relation_reads(
        state,
        context,
        Some(headers),
        collection_schema,
        &request.filter,
        Some(&mut columns),
    )
    .await?;
    let sort = std::mem::take(&mut request.filter.sort);
    let mut filter = resolve(state, &context.caller, collection_schema, request)
        .await?
        // The related export (`GET /{c}/{id}/relationships/{r}.csv`) keeps to the parent's
        // records.
        .and(restrict);
    filter = scoped(state, &context.caller, collection_schema, filter).await?;
    // Without `sort`, the primary keys (`parse_sort`), so that the pages of the stream follow
    // one order.
    filter.sort = sort;
    let params = parse_csv_params(&context.query);
    let collection = state.datasource.collection(name)?;
    let head = serialize::csv_header(params.header.as_deref().unwrap_or(""))?;
    let projection = with_primary_keys(&columns, schema, collection_schema);
    // An included record outside the caller's scope on its collection is written as a null
    // relation: its columns are empty, as for an order without a customer.
    let included =
        IncludedScopes::new(state, &context.caller, collection_schema, &projection).await?;
    let export = Export {
        wires: serialize::csv_wires(schema, collection_schema, &columns.0),
        collection,
        caller: context.caller.clone(),
        filter,
        projection,
        included,
        columns,
        remaining: state.limit_export_size,
        skip: 0,
        done: false,
    };
    let first = futures::stream::once(async move { Ok::<_, std::io::Error>(head) });
    let pages = futures::stream::unfold(export, |mut export| async move {
        let chunk = export.next_page().await?;
        Some((Ok::<_, std::io::Error>(chunk), export))
    });
    let body = Body::from_stream(futures::StreamExt::chain(first, pages));
    // The agent interpolates the query parameter as is: without one, the name is `undefined`
    // (what `@forestadmin/agent-client` gets, as it sends none).
    let filename = params.filename.unwrap_or_else(|| "undefined".to_owned());
    let disposition = serialize::csv_content_disposition(&filename);
    let mut response = Response::new(body);
    let out = response.headers_mut();
    // koa 3 keeps the type the agent sets before `attachment()`, whatever the file name.
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        out.insert(header::CONTENT_DISPOSITION, value);
    }
    if let Ok(value) = HeaderValue::from_str(&httpdate_now()) {
        out.insert(header::LAST_MODIFIED, value);
    }
    out.insert("x-accel-buffering", HeaderValue::from_static("no"));
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    activity.done();
    Ok(response)
}

/// `Last-Modified: now` in the HTTP date format.
fn httpdate_now() -> String {
    chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// The state of a streamed CSV export.
struct Export {
    collection: Arc<dyn Collection>,
    caller: Caller,
    filter: Filter,
    /// What is fetched: the written columns and the keys ids need.
    projection: Projection,
    /// The caller's scopes on the records included through to-one relations (`strictScopes`).
    included: IncludedScopes,
    /// What is written, in order: the fields the client asked for.
    columns: Projection,
    /// The wire form of each written column.
    wires: Vec<crate::datasource::schema::Wire>,
    /// Records still allowed by `limitExportSize`.
    remaining: Option<u64>,
    skip: u64,
    done: bool,
}

impl Export {
    /// The next page as CSV rows; `None` once every record (or the limit) is written.
    async fn next_page(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        let limit = self.remaining.map_or(CSV_PAGE, |r| r.min(CSV_PAGE));
        if limit == 0 {
            return None;
        }
        let filter = self.filter.clone().with_page(Page::new(self.skip, limit));
        let mut records = match self
            .collection
            .list(&self.caller, &filter, &self.projection)
            .await
        {
            Ok(records) => records,
            Err(error) => {
                tracing::error!(%error, "CSV export stopped");
                return None;
            }
        };
        if let Err(error) = self.included.apply(&self.caller, &mut records).await {
            tracing::error!(%error, "CSV export stopped");
            return None;
        }
        let read = records.len() as u64;
        self.skip += read;
        self.remaining = self.remaining.map(|r| r.saturating_sub(read));
        self.done = read < limit;
        if read == 0 {
            return None;
        }
        let mut out = Vec::new();
        if let Err(error) =
            serialize::write_csv_batch(&mut out, &self.columns.0, &self.wires, &records)
        {
            tracing::error!(%error, "CSV export stopped");
            return None;
        }
        Some(out)
    }
}
