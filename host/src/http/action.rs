//! Action routes (§1.2, §2.7): `POST /_actions/{c}/{index}/{slug}` executes,
//! `…/hooks/load|change|search` compute the form; with `useUnsafeActionEndpoint` the `{index}`
//! segment is left out. Also the spec's `POST /actions/{action}/values` (the form's values).
//!
//! Permissions (§5.4, `auth::permissions::actions`): an execution is checked on its selection
//! with the caller's scope (and without it for `roleIdsAllowedToApprove`): trigger and approval
//! required, or, when the body is a `signed_approval_request` naming a requester, approve or
//! self-approve. The form routes need `trigger` alone. As in the agent, the action routes check
//! no collection right (browse, read…): the action's own rights are the whole decision.
//!
//! The pieces (`selection`, `check`, `perform`) are shared with `http::approvals`, which runs an
//! approved request as its approver, and with the workflow engine's trigger-action step
//! (`workflows::steps`), which runs an action as the run's user.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value as Json;

use super::activity::Recorded;
use super::collection::{resolve, served};
use super::error::{ApiError, ApiResult};
use super::related::related_tree;
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::action::{
    ResultBody, check_files, content_disposition, find, form_json, parse_hook, parse_values,
    result_body, slug, values_json,
};
use crate::agent::query_string::{Params, parse_filter, parse_selection};
use crate::auth::{self, permissions::ActionRequest};
use crate::datasource::action::{ActionResult, ActionScope, FormPhase};
use crate::datasource::{Caller, CollectionSchema, Error as DsError, Filter, unpack_id};
use crate::platform::activity::Action;

/// The action routes; the path shape depends on `useUnsafeActionEndpoint` (both cannot be
/// registered together: they differ only by a parameter's name).
pub fn router(unsafe_endpoint: bool) -> Router<SharedState> {
    let base = if unsafe_endpoint {
        "/_actions/{collection}/{slug}"
    } else {
        "/_actions/{collection}/{index}/{slug}"
    };
    Router::new()
        .route(base, post(execute))
        .route(&format!("{base}/hooks/{{hook}}"), post(hook))
        .route("/actions/{action}/values", post(values))
}

/// The collection and action of a route, or a 404 (the agent registers one route per action).
pub(super) fn locate<'a>(
    state: &'a SharedState,
    params: &HashMap<String, String>,
) -> ApiResult<(&'a CollectionSchema, String, ActionScope)> {
    let collection = params.get("collection").ok_or(ApiError::RouteNotFound)?;
    let schema = served(state.datasource.schema(), collection)?;
    let action_slug = params.get("slug").ok_or(ApiError::RouteNotFound)?;
    let (name, action) = find(schema, params.get("index").map(String::as_str), action_slug)
        .ok_or(ApiError::RouteNotFound)?;
    Ok((schema, name.clone(), action.scope))
}

/// The records an action targets, as the agent's `getRecordSelection` builds them twice: with
/// the caller's scope (what the action runs on and what trigger/approve conditions count) and
/// without it (what `roleIdsAllowedToApprove` counts).
pub(crate) struct Selection {
    pub for_caller: Filter,
    pub for_all: Filter,
}

/// The selection of an action body: the selection's ids (all but the excluded ones with
/// `all_records`) ∧ the subset query's filters, search and segment, restricted to the parent's
/// relation when launched from related data. Global actions ignore ids; a hook body without ids
/// restricts nothing.
pub(crate) async fn selection(
    state: &SharedState,
    context: &CallerContext,
    collection: &CollectionSchema,
    scope: ActionScope,
    body: &Json,
) -> ApiResult<Selection> {
    let schema = state.datasource.schema();
    let attributes = body.pointer("/data/attributes");
    let has_ids = attributes.is_some_and(|a| {
        a.get("ids").is_some_and(|ids| !ids.is_null())
            || a.get("all_records").is_some_and(|v| v == true)
    }) || body.get("data").is_some_and(Json::is_array);
    let request = if scope == ActionScope::Global || !has_ids {
        let subset = attributes
            .and_then(|a| a.get("all_records_subset_query"))
            .and_then(Json::as_object);
        parse_filter(
            &Params::with_subset_query(&context.query, subset),
            schema,
            collection,
        )?
    } else {
        parse_selection(body, collection)?.filter(&context.query, schema, collection)?
    };
    let filter = resolve(state, &context.caller, collection, request).await?;
    let for_all = restrict_to_parent(state, context, attributes, filter).await?;
    let scope_tree = super::permission::scope(state, &context.caller, collection).await?;
    Ok(Selection {
        for_caller: for_all.clone().and(scope_tree),
        for_all,
    })
}

/// An action launched from a record's related data runs on the selection restricted to that
/// parent's relation (`parent_collection_name`, `parent_collection_id`,
/// `parent_association_name`).
async fn restrict_to_parent(
    state: &SharedState,
    context: &CallerContext,
    attributes: Option<&Json>,
    filter: Filter,
) -> ApiResult<Filter> {
    let text = |key: &str| {
        attributes
            .and_then(|a| a.get(key))
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
    };
    let (Some(parent), Some(parent_id), Some(relation)) = (
        text("parent_collection_name"),
        text("parent_collection_id"),
        text("parent_association_name"),
    ) else {
        return Ok(filter);
    };
    let parent = served(state.datasource.schema(), parent)?;
    let parent_id = unpack_id(parent, parent_id)?;
    let relation = parent.relation(relation).ok_or_else(|| {
        DsError::validation(format!(
            "Relation '{relation}' not found on '{}'",
            parent.name
        ))
    })?;
    let tree = related_tree(state, &context.caller, parent, &parent_id, relation).await?;
    Ok(filter.and(Some(tree)))
}

/// `POST /_actions/{c}/{index}/{slug}`: runs the action and answers its result.
async fn execute(
    State(state): State<SharedState>,
    Path(params): Path<HashMap<String, String>>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (schema, name, scope) = locate(&state, &params)?;
    let mut activity = Recorded::start(&state, Action::Action, &context.caller, &schema.name);
    activity.label(name.as_str());
    let body = approval_request_body(&state, body)?;
    activity.records(selected_ids(&body));
    let requester = requester_id(&body)?;
    let selection = selection(&state, &context, schema, scope, &body).await?;
    check(
        &state,
        &context.caller,
        schema,
        &name,
        &selection,
        requester,
    )
    .await?;
    let result = perform(
        &state,
        &context.caller,
        schema,
        &name,
        &selection.for_caller,
        &body,
    )
    .await?;
    let response = respond(result)?;
    activity.done();
    Ok(response)
}

/// The packed ids an action body selects (`data.attributes.ids`); none for a select-all, whose
/// records are not known without reading them.
pub(super) fn selected_ids(body: &Json) -> Vec<String> {
    let attributes = body.pointer("/data/attributes");
    if attributes
        .and_then(|a| a.get("all_records"))
        .is_some_and(truthy)
    {
        return Vec::new();
    }
    attributes
        .and_then(|a| a.get("ids"))
        .and_then(Json::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The agent's middleware before an execution: a `requester_id` is only believed from inside a
/// `signed_approval_request` (a top-level one is 422 `UnprocessableError`), and a signed
/// request, once its signature is checked with the environment secret, replaces the whole body.
fn approval_request_body(state: &SharedState, body: Json) -> ApiResult<Json> {
    let attributes = body.pointer("/data/attributes");
    if attributes
        .and_then(|a| a.get("requester_id"))
        .is_some_and(truthy)
    {
        return Err(crate::agent::Error::Unprocessable(String::new()).into());
    }
    let Some(signed) = attributes
        .and_then(|a| a.get("signed_approval_request"))
        .filter(|v| truthy(v))
    else {
        return Ok(body);
    };
    let payload = signed
        .as_str()
        .and_then(|token| state.approvals.verify(token));
    payload.ok_or_else(|| {
        auth::Error::Forbidden("The signed approval request is invalid or expired.".to_owned())
            .into()
    })
}

/// The requester named by an approval body (`data.attributes.requester_id`), if any.
pub(super) fn requester_id(body: &Json) -> ApiResult<Option<i64>> {
    let Some(value) = body
        .pointer("/data/attributes/requester_id")
        .filter(|v| truthy(v))
    else {
        return Ok(None);
    };
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .map(Some)
        .ok_or_else(|| {
            crate::agent::Error::Unprocessable("requester_id must be a user id".to_owned()).into()
        })
}

/// JavaScript truthiness, as the agent tests these attributes.
fn truthy(value: &Json) -> bool {
    match value {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(_) | Json::Object(_) => true,
    }
}

/// The §5.4 decision on one execution: approve (or self-approve) when it carries its
/// requester, else trigger and approval required.
pub(crate) async fn check(
    state: &SharedState,
    caller: &Caller,
    schema: &CollectionSchema,
    name: &str,
    selection: &Selection,
    requester: Option<i64>,
) -> ApiResult<()> {
    let collection = state.datasource.collection(&schema.name)?;
    let request = ActionRequest {
        caller,
        collection: &*collection,
        collection_schema: schema,
        schema: state.datasource.schema(),
        action: name,
        filter_for_caller: &selection.for_caller,
        filter_for_all: &selection.for_all,
    };
    match requester {
        Some(requester) => {
            state
                .permissions
                .assert_can_approve_action(&request, requester)
                .await?;
        }
        None => {
            state
                .permissions
                .assert_can_trigger_action(&request)
                .await?
        }
    }
    Ok(())
}

/// Runs an action already allowed on `filter` with the body's form values.
pub(crate) async fn perform(
    state: &SharedState,
    caller: &Caller,
    schema: &CollectionSchema,
    name: &str,
    filter: &Filter,
    body: &Json,
) -> ApiResult<ActionResult> {
    let values = parse_values(body)?;
    let collection = state.datasource.collection(&schema.name)?;
    // The form tells how to read the values (files must be data URIs), so it is computed first,
    // hidden fields included, as the agent does.
    let form = collection
        .get_form(caller, name, filter, &values, &FormPhase::Execute)
        .await?;
    check_files(&form, &values)?;
    Ok(collection.execute(caller, name, filter, &values).await?)
}

/// The response of a result, with the headers it set.
pub(super) fn respond(result: ActionResult) -> ApiResult<Response> {
    let mut response = match result_body(result.outcome) {
        ResultBody::Json { status, body } => super::json_with(
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            &body,
        ),
        ResultBody::File {
            name,
            mime_type,
            bytes,
        } => {
            let mut response = bytes.into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, header_value(&mime_type)?);
            headers.insert(
                header::CONTENT_DISPOSITION,
                header_value(&content_disposition(&name))?,
            );
            headers.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static("Content-Disposition"),
            );
            response
        }
    };
    for (name, value) in result.headers {
        let name = HeaderName::try_from(name.as_str()).map_err(|_| {
            DsError::Internal(format!("an action set the invalid header name {name:?}"))
        })?;
        response.headers_mut().insert(name, header_value(&value)?);
    }
    Ok(response)
}

fn header_value(value: &str) -> ApiResult<HeaderValue> {
    HeaderValue::from_str(value).map_err(|_| {
        ApiError::from(DsError::Internal(format!(
            "an action set the invalid header value {value:?}"
        )))
    })
}

/// `POST …/hooks/load|change|search`: the form `{fields, layout}` for the current values.
async fn hook(
    State(state): State<SharedState>,
    Path(params): Path<HashMap<String, String>>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (schema, name, scope) = locate(&state, &params)?;
    let request = parse_hook(&body);
    let phase = match params.get("hook").map(String::as_str) {
        Some("load") => FormPhase::Load,
        Some("change") => FormPhase::Change {
            changed_field: request.changed_field.clone().unwrap_or_default(),
        },
        Some("search") => FormPhase::Search {
            field: request.search_field.clone().unwrap_or_default(),
            search_value: request.search_value.clone(),
        },
        _ => return Err(ApiError::RouteNotFound),
    };
    state
        .permissions
        .assert_can_request_action_parameters(&context.caller, &schema.name, &name)
        .await?;
    let filter = selection(&state, &context, schema, scope, &body)
        .await?
        .for_caller;
    let form = state
        .datasource
        .collection(&schema.name)?
        .get_form(&context.caller, &name, &filter, &request.values, &phase)
        .await?;
    Ok(super::json(&form_json(state.datasource.schema(), &form)?))
}

/// `POST /actions/{action}/values` (spec): the values of the action's form as it opens, by field
/// id. `{action}` is the action's name or slug; `data.attributes.collection_name` says whose
/// action it is when several collections have one with that name.
async fn values(
    State(state): State<SharedState>,
    Path(action): Path<String>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let wanted = body
        .pointer("/data/attributes/collection_name")
        .and_then(Json::as_str);
    let schema = state.datasource.schema();
    let found = schema
        .collections
        .values()
        .filter(|c| wanted.is_none_or(|w| w == c.name))
        .find_map(|c| {
            c.actions
                .iter()
                .find(|(name, _)| **name == action || slug(name) == action)
                .map(|(name, a)| (c, name.clone(), a.scope))
        });
    let Some((collection, name, scope)) = found else {
        return Err(ApiError::RouteNotFound);
    };
    state
        .permissions
        .assert_can_request_action_parameters(&context.caller, &collection.name, &name)
        .await?;
    let filter = selection(&state, &context, collection, scope, &body)
        .await?
        .for_caller;
    let request = parse_hook(&body);
    let form = state
        .datasource
        .collection(&collection.name)?
        .get_form(
            &context.caller,
            &name,
            &filter,
            &request.values,
            &FormPhase::Load,
        )
        .await?;
    Ok(super::json(&values_json(&form)))
}
