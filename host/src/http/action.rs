//! Action routes (§1.2, §2.7): `POST /_actions/{c}/{index}/{slug}` executes,
//! `…/hooks/load|change|search` compute the form; with `useUnsafeActionEndpoint` the `{index}`
//! segment is left out. Also the spec's `POST /actions/{action}/values` (the form's values).
//!
//! The routes read the wire (a `signed_approval_request` checked with the environment secret
//! replaces the body; `requester_id`, ids, values, the selection) into the typed requests of
//! `ops::actions`, which holds the permissions (§5.4) and runs the action; the result is written
//! back here (JSON, a file, its headers). Approval requests are filed and run by
//! `ops::approvals`.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value as Json;

use super::collection::{parsed_labelled, served};
use super::error::{ApiError, ApiResult};
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::action::{
    ResultBody, content_disposition, find, form_json, parse_hook, parse_values, result_body, slug,
    values_json,
};
use crate::auth;
use crate::datasource::action::{ActionResult, ActionScope, FormPhase};
use crate::datasource::{CollectionSchema, Error as DsError};
use crate::ops::actions::{self, ExecuteRequest, Target};
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

/// `POST /_actions/{c}/{index}/{slug}`: runs the action and answers its result.
async fn execute(
    State(state): State<SharedState>,
    Path(params): Path<HashMap<String, String>>,
    context: CallerContext,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (schema, name, scope) = locate(&state, &params)?;
    let request = approval_request_body(&state, body).and_then(|body| {
        Ok(ExecuteRequest {
            collection: schema.name.clone(),
            action: name.clone(),
            ids: selected_ids(&body),
            requester: requester_id(&body)?,
            target: Target::parse(&state, &context.query, schema, scope, &body)?,
            values: parse_values(&body)?,
        })
    });
    let request = parsed_labelled(
        &state,
        Action::Action,
        &context,
        &schema.name,
        None,
        Some(name.clone()),
        request,
    )
    .await?;
    let result = actions::execute(&state, &context.caller, request).await?;
    respond(result)
}

/// The packed ids an action body selects (`data.attributes.ids`); none for a select-all, whose
/// records are not known without reading them.
fn selected_ids(body: &Json) -> Vec<String> {
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
fn requester_id(body: &Json) -> ApiResult<Option<i64>> {
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
    let target = Target::parse(&state, &context.query, schema, scope, &body)?;
    let form = actions::form(
        &state,
        &context.caller,
        schema,
        &name,
        target,
        &request.values,
        &phase,
    )
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
    let target = Target::parse(&state, &context.query, collection, scope, &body)?;
    let request = parse_hook(&body);
    let form = actions::form(
        &state,
        &context.caller,
        collection,
        &name,
        target,
        &request.values,
        &FormPhase::Load,
    )
    .await?;
    Ok(super::json(&values_json(&form)))
}
