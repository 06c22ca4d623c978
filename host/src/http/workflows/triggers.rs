//! The triggers of a workflow under `/v1/project/{p}/environment/{e}/workflows/{id}`:
//! - `POST …/runs` `{recordId}`: the manual trigger, as a signed-in user (session, or a token
//!   with `workflows:trigger` or `all`) who may browse the collection: 202 `{runId}` or 409 as
//!   the webhook answers;
//! - `GET …/triggers`: the manual and webhook triggers (the webhook's URL for admins only: it
//!   is a credential);
//! - `POST …/triggers/webhook/enable|disable|regenerate`, `PATCH …/triggers/webhook`
//!   `{rateLimitPerMinute}`: admins only (tokens need `all`), each with its admin log entry.
//!
//! `{id}` is the workflow's id (its name is accepted too).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use serde_json::{Map, Value as Json, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::platform::{Admin, Body, Error, Fields as _, SignedIn};
use crate::http::{SharedState, json};
use crate::platform::activity::Origin;
use crate::platform::{Scope, Store};
use crate::workflows::operations;
use crate::workflows::triggers::{Triggers, WebhookTrigger, WorkflowRef};

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(start))
        .routes(routes!(list))
        .routes(routes!(enable))
        .routes(routes!(disable))
        .routes(routes!(regenerate))
        .routes(routes!(change))
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// The body of a manual start.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "documentation only: the handler reads the body itself"
)]
struct ManualStart {
    /// The record to run on (a composite key in its packed form, `1|2`).
    #[schema(example = "42")]
    record_id: String,
}

/// A workflow's triggers.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: written with json!")]
struct TriggerList {
    data: Vec<TriggerSchema>,
}

/// One trigger of a workflow.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WorkflowTrigger)]
#[allow(dead_code, reason = "documentation only: written with json!")]
struct TriggerSchema {
    /// `manual` or `webhook`.
    kind: String,
    enabled: bool,
    /// The webhook's id (the webhook only).
    id: Option<String>,
    /// The webhook's URL version: regenerating the URL increments it (the webhook only).
    url_version: Option<i64>,
    /// The webhook's own rate limit; `null` follows the server's default (the webhook only).
    rate_limit_per_minute: Option<u32>,
    /// The webhook's URL, for admins only: it is a credential, to keep with the token.
    url: Option<String>,
    #[schema(format = DateTime)]
    updated_at: Option<String>,
}

/// The body of `PATCH …/triggers/webhook`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "documentation only: the handler reads the body itself"
)]
struct WebhookChange {
    /// Calls per minute this webhook accepts (1 to 10,000,000); `null` for the server's
    /// default (`workflowWebhookRateLimitPerMinute`).
    #[schema(minimum = 1, maximum = 10_000_000, required = true)]
    rate_limit_per_minute: Option<u32>,
}

/// The trigger service, after checking that the environment is the one it serves.
fn served<'a>(state: &'a SharedState, store: &Store, environment: &str) -> Result<&'a Triggers> {
    let triggers = state.workflow_triggers.as_ref().ok_or(Error::Unavailable)?;
    if environment != store.environment() || environment != triggers.store().environment() {
        return Err(Error::NotFound(format!(
            "environment {environment:?} not found"
        )));
    }
    Ok(triggers)
}

async fn workflow(triggers: &Triggers, id: &str) -> Result<WorkflowRef> {
    triggers
        .store()
        .workflow_ref(id)
        .await
        .map_err(internal)?
        .ok_or_else(|| Error::NotFound(format!("workflow {id:?} not found")))
}

fn internal(error: impl std::fmt::Display) -> Error {
    Error::Internal(error.to_string())
}

/// Starts a run of the workflow on one record, as the caller.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflows/{id}/runs",
    operation_id = "start_workflow_run",
    tag = "workflow-triggers",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id (or name)"),
    ),
    request_body = ManualStart,
    responses(
        (status = 202, description = "Run created and queued",
         body = super::webhook::RunCreated,
         headers(("Location" = String, description = "The run"))),
        (status = 409, description = "A run of the workflow is ongoing on the record",
         body = super::webhook::RunOngoing),
    ),
)]
async fn start(
    State(state): State<SharedState>,
    caller: SignedIn,
    Path((project, environment, id)): Path<(String, String, String)>,
    extensions: axum::http::Extensions,
    body: Body,
) -> Result<Response> {
    let store = caller.project(&project)?;
    let triggers = served(&state, store, &environment)?;
    caller.require(Scope::WorkflowsTrigger)?;
    let workflow = workflow(triggers, &id).await?;
    let Some(version_id) = workflow.startable_version() else {
        return Err(Error::NotFound(format!(
            "the workflow {:?} has no active version",
            workflow.name
        )));
    };
    let request_id = extensions
        .get::<crate::http::middleware::RequestId>()
        .map_or_else(uuid::Uuid::new_v4, |r| r.id);
    let runner = triggers
        .runner(
            &state.permissions,
            &caller.user,
            &workflow.collection,
            request_id,
        )
        .await
        .map_err(|e| match e {
            crate::workflows::Error::Forbidden(why) => Error::insufficient(why),
            other => internal(other),
        })?;
    let Body(body) = body;
    let record_id = match body.get("recordId") {
        Some(Json::String(id)) if !id.is_empty() => id.clone(),
        Some(Json::Number(n)) => n.to_string(),
        None | Some(Json::Null) => return Err(Error::field("recordId", "is required")),
        Some(_) => {
            return Err(Error::field(
                "recordId",
                "must be a non-empty string (a composite key packed as `1|2`) or a number",
            ));
        }
    };
    let acting = operations::Acting {
        user: &caller.user,
        token_id: caller.token_id.as_deref(),
        origin: Origin::Api,
    };
    let queued = operations::queue_manual(
        &state, triggers, &acting, &runner, &workflow, version_id, &record_id, request_id,
    )
    .await
    .map_err(internal)?;
    Ok(super::webhook::answered(&state, triggers, queued))
}

/// The JSON of a webhook trigger; its URL only for admins.
fn webhook_json(
    state: &SharedState,
    triggers: &Triggers,
    trigger: &WebhookTrigger,
    headers: &HeaderMap,
    with_url: bool,
) -> Json {
    let mut out = Map::new();
    out.insert("kind".into(), "webhook".into());
    out.insert("enabled".into(), trigger.enabled.into());
    out.insert("id".into(), trigger.id.clone().into());
    out.insert("urlVersion".into(), trigger.url_version.into());
    out.insert(
        "rateLimitPerMinute".into(),
        trigger.rate_limit_per_minute.map_or(Json::Null, Json::from),
    );
    if with_url {
        out.insert(
            "url".into(),
            webhook_url(state, triggers, trigger, headers).into(),
        );
    }
    out.insert(
        "updatedAt".into(),
        chrono::DateTime::from_timestamp_millis(trigger.updated_at)
            .map_or(Json::Null, |t| t.to_rfc3339().into()),
    );
    Json::Object(out)
}

/// `{publicUrl or the request's own origin}/{prefix}/v1/workflow-hooks/{hook}`
/// (`Triggers::webhook_url`).
pub fn webhook_url(
    state: &SharedState,
    triggers: &Triggers,
    trigger: &WebhookTrigger,
    headers: &HeaderMap,
) -> String {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    triggers.webhook_url(trigger, &state.mount_path, host)
}

/// The workflow's triggers: manual (always on) and the webhook. Anyone who may browse the
/// collection sees them; only admins see the webhook's URL.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/workflows/{id}/triggers",
    operation_id = "list_workflow_triggers",
    tag = "workflow-triggers",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id (or name)"),
    ),
    responses((status = 200, description = "The workflow's triggers", body = TriggerList)),
)]
async fn list(
    State(state): State<SharedState>,
    caller: SignedIn,
    Path((project, environment, id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response> {
    let store = caller.project(&project)?;
    let triggers = served(&state, store, &environment)?;
    let workflow = workflow(triggers, &id).await?;
    // The URL is a credential: admins (with a token, one of scope `all`) only.
    let admin = caller.is_admin()
        && caller
            .scopes
            .as_deref()
            .is_none_or(|held| Scope::All.granted_by(held));
    if !admin {
        triggers
            .runner(
                &state.permissions,
                &caller.user,
                &workflow.collection,
                uuid::Uuid::new_v4(),
            )
            .await
            .map_err(|e| match e {
                crate::workflows::Error::Forbidden(why) => Error::insufficient(why),
                other => internal(other),
            })?;
    }
    let webhook = triggers
        .store()
        .webhook_trigger(&workflow)
        .await
        .map_err(internal)?;
    let data = json!([
        {"kind": "manual", "enabled": workflow.active},
        webhook_json(&state, triggers, &webhook, &headers, admin),
    ]);
    Ok(json(&json!({ "data": data })))
}

/// Which change a route makes.
enum Change {
    Enable,
    Disable,
    Regenerate,
    RateLimit(Option<u32>),
}

async fn apply(
    state: &SharedState,
    admin: &Admin,
    (project, environment, id): (String, String, String),
    headers: &HeaderMap,
    change: Change,
) -> Result<Response> {
    admin.require(Scope::All)?;
    let triggers = served(state, admin.project(&project)?, &environment)?;
    let workflow = workflow(triggers, &id).await?;
    let store = triggers.store();
    let actor = admin.actor();
    let trigger = match change {
        Change::Enable => store.set_webhook_enabled(&actor, &workflow, true).await,
        Change::Disable => store.set_webhook_enabled(&actor, &workflow, false).await,
        Change::Regenerate => {
            store
                .regenerate_webhook(&actor, &workflow, triggers.signing_kid())
                .await
        }
        Change::RateLimit(limit) => {
            let changed = store.set_webhook_rate_limit(&actor, &workflow, limit).await;
            if let Ok(trigger) = &changed {
                triggers.limit_changed(&trigger.id, trigger.rate_limit_per_minute);
            }
            changed
        }
    }
    .map_err(|e| match e {
        crate::workflows::Error::Invalid(message) => Error::InvalidParameter(message),
        other => internal(other),
    })?;
    tracing::info!(
        workflow = %workflow.id,
        trigger = %trigger.id,
        by = admin.user.id,
        enabled = trigger.enabled,
        url_version = trigger.url_version,
        "workflow webhook changed"
    );
    Ok(json(&webhook_json(
        state, triggers, &trigger, headers, true,
    )))
}

/// Enables the webhook: calls are accepted again, at the same URL.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflows/{id}/triggers/webhook/enable",
    operation_id = "enable_workflow_webhook",
    tag = "workflow-triggers",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id (or name)"),
    ),
    responses((status = 200, description = "The webhook trigger", body = TriggerSchema)),
)]
async fn enable(
    State(state): State<SharedState>,
    admin: Admin,
    Path(path): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response> {
    apply(&state, &admin, path, &headers, Change::Enable).await
}

/// Disables the webhook: calls answer 404 until it is enabled again; its URL is kept.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflows/{id}/triggers/webhook/disable",
    operation_id = "disable_workflow_webhook",
    tag = "workflow-triggers",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id (or name)"),
    ),
    responses((status = 200, description = "The webhook trigger", body = TriggerSchema)),
)]
async fn disable(
    State(state): State<SharedState>,
    admin: Admin,
    Path(path): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response> {
    apply(&state, &admin, path, &headers, Change::Disable).await
}

/// Gives the webhook a new URL; the old one answers 400 from now on, on every instance.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflows/{id}/triggers/webhook/regenerate",
    operation_id = "regenerate_workflow_webhook",
    tag = "workflow-triggers",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id (or name)"),
    ),
    responses((status = 200, description = "The webhook trigger with its new URL", body = TriggerSchema)),
)]
async fn regenerate(
    State(state): State<SharedState>,
    admin: Admin,
    Path(path): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response> {
    apply(&state, &admin, path, &headers, Change::Regenerate).await
}

/// Sets the webhook's own rate limit.
#[utoipa::path(
    patch,
    path = "/project/{project}/environment/{environment}/workflows/{id}/triggers/webhook",
    operation_id = "change_workflow_webhook",
    tag = "workflow-triggers",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id (or name)"),
    ),
    request_body = WebhookChange,
    responses((status = 200, description = "The webhook trigger", body = TriggerSchema)),
)]
async fn change(
    State(state): State<SharedState>,
    admin: Admin,
    Path(path): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response> {
    let Body(body) = body;
    body.only(&["rateLimitPerMinute"])?;
    let limit = match body.get("rateLimitPerMinute") {
        None => {
            return Err(Error::field(
                "rateLimitPerMinute",
                "is required (a number or null)",
            ));
        }
        Some(Json::Null) => None,
        Some(value) => Some(
            // JSON Schema's integers include `1427.0`: a whole number however it is written.
            value
                .as_u64()
                .or_else(|| {
                    value
                        .as_f64()
                        .filter(|v| v.fract() == 0.0 && *v >= 0.0 && *v <= f64::from(u32::MAX))
                        .map(|v| v as u64)
                })
                .and_then(|v| u32::try_from(v).ok())
                .filter(|v| (1..=crate::workflows::triggers::MAX_RATE_LIMIT_PER_MINUTE).contains(v))
                .ok_or_else(|| {
                    Error::field(
                        "rateLimitPerMinute",
                        "must be a whole number from 1 to 10000000, or null",
                    )
                })?,
        ),
    };
    apply(&state, &admin, path, &headers, Change::RateLimit(limit)).await
}
