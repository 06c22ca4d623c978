//! `POST /{prefix}/v1/workflow-hooks/{hook}`: starts a run of a workflow on one record from an
//! external system (public-api.md, "Trigger a workflow run"), with an application token.
//!
//! The checks run in the order of platform-api.md §2.1, so that a request wrong in two ways gets
//! the earlier answer, except that a request with no application token at all is refused first
//! (401), as the public API documents every operation: that needs no store either, and tells
//! nothing about the URL:
//! 1. the URL's shape and MAC (400), before anything reads the store;
//! 2. the bearer application token (401: invalid, expired, revoked);
//! 3. the webhook's rate limit (429 with `Retry-After`), per trigger;
//! 4. the trigger: unknown, disabled, or no active workflow (404); a superseded URL (400);
//! 5. the token's user: the `workflows:trigger` or `all` scope, enabled, in a team of this
//!    environment, allowed to browse the workflow's collection (403);
//! 6. the body: JSON with `record_id` a string or a number (400; unknown fields ignored);
//! 7. the run, queued unless one is ongoing on the record (409 with its `runId`);
//!
//! then the activity entry (`triggerWorkflow`, origin `webhook`, the token's user) and 202
//! `{runId}` with the run's `Location`. The route is outside the per-token limit of `/v1`
//! (`http::ratelimit`): its quota is the webhook's, so one integration does not starve another.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value as Json, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::SharedState;
use crate::http::platform::{Error, TokenCheck, bearer_api_token, check_api_token};
use crate::platform::Scope;
use crate::platform::activity::{Action, Actor, Entry, Origin};
use crate::workflows::triggers::Triggers;
use crate::workflows::{NewRun, Queued, TriggerKind};

/// The webhook, documented.
pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new().routes(routes!(trigger))
}

/// The body of a webhook call.
#[derive(ToSchema)]
#[allow(
    dead_code,
    reason = "documentation only: the handler reads the body itself"
)]
struct WebhookBody {
    /// The record to run on: its id, a composite key in its packed form (`1|2`). Not checked
    /// here: a bad id fails the run at its first data step. Other fields are ignored.
    #[schema(example = "42")]
    record_id: String,
}

/// The answer of an accepted call.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: written with json!")]
pub(crate) struct RunCreated {
    /// The new run's id (a UUID).
    #[schema(example = "0b6f2f0e-4d0a-4c3e-9d7e-2f3b5a6c7d8e")]
    run_id: String,
}

/// The answer when a run of the workflow is already ongoing on the record.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: written with json!")]
pub(crate) struct RunOngoing {
    code: String,
    message: String,
    error: String,
    /// The ongoing run, when it could be read.
    run_id: Option<String>,
}

/// Starts a run of the workflow on one record. The URL is the credential copied from the
/// workflow's trigger settings (`GET …/workflows/{id}/triggers`), never assembled; the bearer
/// application token (scope `workflows:trigger` or `all`) fixes who the run acts as.
#[utoipa::path(
    post,
    path = "/workflow-hooks/{hook}",
    operation_id = "trigger_workflow_webhook",
    tag = "workflow-triggers",
    params(
        // The shape of `workflows::webhook::Hook::parse`: the trigger's UUID, the URL's
        // version, the signing key's id, the 128-bit MAC in unpadded base64url.
        ("hook" = String, Path,
         pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.[1-9][0-9]{0,11}\.[A-Za-z0-9_-]{1,16}\.[A-Za-z0-9_-]{21}[AQgw]$",
         description = "The signed part of the webhook URL, as copied: \
            `{triggerId}.{urlVersion}.{keyId}.{mac}`. Only a URL Canopy signed is accepted: \
            any other (even of this shape) is a 400 `invalid_webhook_url`, checked after the \
            presence of the bearer token (401) and before anything else"),
    ),
    request_body = WebhookBody,
    responses(
        (status = 202, description = "Run created and queued", body = RunCreated,
         headers(("Location" = String, description = "The run"))),
        (status = 409, description = "A run of the workflow is ongoing on the record", body = RunOngoing),
    ),
)]
async fn trigger(
    State(state): State<SharedState>,
    Path(hook): Path<String>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Error> {
    let triggers = state.workflow_triggers.as_ref().ok_or(Error::Unavailable)?;
    // 0. No application token at all: nothing to check the URL for.
    let Some(presented) = bearer_api_token(&headers) else {
        return Err(Error::Unauthorized(crate::http::platform::INVALID_TOKEN));
    };
    // 1. The URL, before any store access.
    let hook = triggers.verify(&hook).ok_or_else(|| {
        Error::coded(
            StatusCode::BAD_REQUEST,
            "invalid_webhook_url",
            "The webhook URL is malformed or was tampered with: copy it again from the \
             workflow's trigger settings",
        )
    })?;
    // 2. The application token (the rate limiter of `/v1` may have checked it already).
    let TokenCheck(checked) = match extensions.get::<TokenCheck>() {
        Some(check) => check.clone(),
        None => check_api_token(&state, presented).await,
    };
    let token = checked?;
    // 3. The webhook's quota, when this process knows it (else once the trigger is read).
    let rate_limited = |retry_after: u64| {
        tracing::info!(trigger = %hook.trigger_id, retry_after, "workflow webhook: rate limited");
        Error::RateLimited { retry_after }
    };
    let checked = match triggers.check_rate(&hook.trigger_id) {
        Some(spent) => {
            spent.map_err(rate_limited)?;
            true
        }
        None => false,
    };
    // 4. The trigger and its workflow.
    let target = triggers
        .hook_target(&hook.trigger_id)
        .await
        .map_err(internal)?;
    let Some(target) = target else {
        return Err(Error::NotFound("unknown webhook".to_owned()));
    };
    if checked {
        triggers.observe_limit(&hook.trigger_id, target.rate_limit_per_minute);
    } else {
        triggers
            .first_rate(&hook.trigger_id, target.rate_limit_per_minute)
            .map_err(rate_limited)?;
    }
    if !target.enabled {
        return Err(Error::NotFound(
            "this webhook trigger is disabled".to_owned(),
        ));
    }
    let Some(version_id) = target.workflow.startable_version() else {
        return Err(Error::NotFound(format!(
            "the workflow {:?} has no active version",
            target.workflow.name
        )));
    };
    if hook.url_version != target.url_version {
        return Err(Error::coded(
            StatusCode::BAD_REQUEST,
            "webhook_url_superseded",
            "This webhook URL was superseded when the URL was regenerated: use the new URL",
        ));
    }
    // 5. Who the run acts as.
    if !Scope::WorkflowsTrigger.granted_by(token.scopes()) {
        return Err(Error::insufficient(
            "the token lacks the workflows:trigger scope",
        ));
    }
    let user = match triggers.user(token.user_id()).await {
        Ok(Some(user)) => user,
        // A removed user's tokens are worth nothing.
        Ok(None) => return Err(Error::Unauthorized(crate::http::platform::INVALID_TOKEN)),
        Err(error) => return Err(error.into()),
    };
    let request_id = extensions
        .get::<crate::http::middleware::RequestId>()
        .map_or_else(uuid::Uuid::new_v4, |r| r.id);
    let caller = triggers
        .runner(
            &state.permissions,
            &user,
            &target.workflow.collection,
            request_id,
        )
        .await
        .map_err(|e| forbidden(&e))?;
    // 6. The body.
    let record_id = record_id(body)?;
    // 7. The run.
    let run = NewRun {
        workflow_id: target.workflow.id.clone(),
        version_id: version_id.to_owned(),
        collection_name: target.workflow.collection.clone(),
        record_id: record_id.clone(),
        trigger_kind: TriggerKind::Webhook,
        trigger_id: Some(hook.trigger_id.clone()),
        trigger_url_version: Some(hook.url_version),
        user_id: user.id,
        token_id: Some(token.id().to_owned()),
        parent_run_id: None,
    };
    let queued = triggers.queue(run).await.map_err(internal)?;
    Ok(answer(
        &state,
        triggers,
        queued,
        Entry::new(Action::TriggerWorkflow, Actor::of(&caller), Origin::Webhook)
            .with_collection(target.workflow.collection.clone())
            .with_records([record_id])
            .with_label(target.workflow.name.clone())
            .with_token(token.id())
            .with_request_id(request_id.to_string()),
    ))
}

/// 202 with the run, or 409 with the ongoing one; the activity entry of a created run.
pub(crate) fn answer(
    state: &SharedState,
    triggers: &Triggers,
    queued: Queued,
    entry: Entry,
) -> Response {
    if matches!(queued, Queued::Created(_)) {
        state.activity.record(entry);
    }
    answered(state, triggers, queued)
}

/// 202 with the run, or 409 with the ongoing one (the activity entry already recorded).
pub(crate) fn answered(state: &SharedState, triggers: &Triggers, queued: Queued) -> Response {
    match queued {
        Queued::Created(run_id) => {
            let mut response =
                crate::http::json_with(StatusCode::ACCEPTED, &json!({ "runId": run_id }));
            let location = format!(
                "{}/project/{}/environment/{}/workflow-runs/{run_id}",
                crate::http::platform::base_path(&state.mount_path),
                triggers.store().project(),
                triggers.store().environment(),
            );
            if let Ok(location) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, location);
            }
            response
        }
        Queued::Ongoing(run_id) => {
            let message = "A run of this workflow is already ongoing on this record.";
            crate::http::json_with(
                StatusCode::CONFLICT,
                &json!({
                    "code": "run_ongoing",
                    "message": message,
                    "error": "Conflict",
                    "runId": run_id,
                }),
            )
        }
    }
}

/// The record id of a webhook body: `record_id` as a string (or a number, written as its
/// digits); a packed composite id is taken as it is.
fn record_id(body: Result<Bytes, BytesRejection>) -> Result<String, Error> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Error::PayloadTooLarge
        } else {
            Error::InvalidParameter("the request body could not be read".to_owned())
        }
    })?;
    let body: Json = serde_json::from_slice(&bytes)
        .map_err(|e| Error::InvalidParameter(format!("the request body is not valid JSON: {e}")))?;
    let Json::Object(body) = body else {
        return Err(Error::InvalidParameter(
            "the request body must be a JSON object with record_id".to_owned(),
        ));
    };
    match body.get("record_id") {
        None | Some(Json::Null) => Err(Error::field("record_id", "is required")),
        Some(Json::String(id)) if !id.is_empty() => Ok(id.clone()),
        Some(Json::Number(n)) => Ok(n.to_string()),
        Some(_) => Err(Error::field(
            "record_id",
            "must be a non-empty string (a composite key packed as `1|2`) or a number",
        )),
    }
}

/// A refusal of the run's user, as the API tells it.
fn forbidden(error: &crate::workflows::Error) -> Error {
    match error {
        crate::workflows::Error::Forbidden(why) => Error::insufficient(why),
        other => internal(other),
    }
}

fn internal(error: impl std::fmt::Display) -> Error {
    Error::Internal(error.to_string())
}
