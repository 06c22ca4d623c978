//! Approval requests (issue 11 §3): an action that requires an approval answers the agent's
//! 403 `CustomActionRequiresApprovalError`; its requester then files the same action body here,
//! approvers list the requests, and approve (which runs the action as the approver, naming the
//! requester, with the recorded form values and selection) or reject them.
//!
//! Under `/v1/project/{project}/environment/{environment}/approval-requests`, authenticated with
//! the session token like the agent's routes or with an application token of the `all` scope,
//! errors in the public API's shape
//! `{code, message, error}` (plus `data.roleIdsAllowedToApprove` where the agent gives it):
//! - `POST …` with `{"action": "<name or slug>", "data": {"attributes": {…action body…}}}` files
//!   a request (201). Only an action that requires an approval of this caller on this selection
//!   can be filed (else 422 `approval_not_required`); a select-all selection is resolved to the
//!   ids it targets now, at most `maxRecordsForApproval` of them (else 422 `too_many_records`),
//!   so that the approver approves the records the requester saw;
//! - `GET …?status=pending|approved|rejected` lists the requests the caller may see: their own,
//!   and those of actions their role may approve (admins see all); `GET …/{id}` one of them;
//! - `POST …/{id}/approve` and `…/{id}/reject`, body `{"comment": "…"}` (optional): the caller
//!   must pass the agent's approve rule (self-approve when they filed it, approval condition on
//!   every record). The decision is atomic (a second decision is 409 `conflict`); approving then
//!   runs the action and records its outcome in the request.
//!
//! Each request keeps who filed it and when, who decided, when, their comment, and the outcome:
//! the admin-visible record until the activity log serves them.
//!
//! Filing, listing, reading and deciding are `ops::approvals` (the console's inbox calls them
//! too); these routes read the wire, map the operations' refusals to their codes and resume a
//! workflow run waiting on a decision.
//!
//! `ApprovalSettings` also checks the agent route's `signed_approval_request` (a JWT signed with
//! the environment secret, whose payload replaces the action body).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;
use serde_json::{Value as Json, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::caller::Authenticated;
use super::error::ApiError;
use super::middleware::RequestId;
use super::openapi::ErrorBody;
use super::platform::Error;
use super::{CallerContext, JsonBody, SharedState};
use crate::agent::query_string::QueryString;
use crate::auth;
use crate::datasource::Caller;
use crate::ops::approvals::{self, MAX_COMMENT_CHARS, Refusal};
use crate::platform::{Approval, ApprovalStatus, Scope, Store};

// The settings (signed requests, `maxRecordsForApproval`) are the operations' (the console
// files requests too); re-exported where the routes and their tests name them.
pub use crate::ops::approvals::{ApprovalSettings, MAX_RECORDS_FOR_APPROVAL};

/// The approval request routes, below `/v1` (`http::openapi` mounts them with their document).
pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(list, file))
        .routes(routes!(show))
        .routes(routes!(approve))
        .routes(routes!(reject))
}

/// The query of `GET …/approval-requests`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code, reason = "documentation only: list reads the query string")]
struct ApprovalQuery {
    /// Only the requests in this state (empty: every state).
    #[param(schema_with = status_filter)]
    status: Option<String>,
    /// The time zone of the action's selection (IANA name, any case; empty or absent: UTC).
    #[param(schema_with = timezone)]
    timezone: Option<String>,
}

/// `status=`: a state, or empty for all of them.
fn status_filter() -> utoipa::openapi::schema::Schema {
    super::openapi::schema(json!({
        "type": "string",
        "enum": ["pending", "approved", "rejected", ""],
    }))
}

/// `timezone=`: an IANA time zone name, as `chrono_tz` knows them.
fn timezone() -> utoipa::openapi::schema::Schema {
    let mut names: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()).collect();
    names.push("");
    super::openapi::schema(json!({"type": "string", "enum": names, "example": "Europe/Paris"}))
}

/// The state of an approval request.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = ApprovalStatus)]
#[allow(
    dead_code,
    reason = "documentation only: platform::ApprovalStatus is the real one"
)]
enum StatusSchema {
    Pending,
    Approved,
    Rejected,
}

/// An approval request.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApprovalRequest)]
#[allow(
    dead_code,
    reason = "documentation only: approval_json writes it from platform::Approval"
)]
struct ApprovalSchema {
    id: i64,
    collection_name: String,
    action_name: String,
    requester_id: i64,
    requester_email: String,
    status: StatusSchema,
    /// The action body's `data.attributes` as filed (a select-all resolved to ids).
    #[schema(value_type = Object)]
    attributes: Json,
    /// Unix milliseconds.
    created_at: i64,
    decided_by_id: Option<i64>,
    decided_by_email: Option<String>,
    /// Unix milliseconds.
    decided_at: Option<i64>,
    comment: Option<String>,
    /// What running the approved action answered (`status` and `body`, or `file`, or `error`).
    #[schema(value_type = Option<Object>)]
    outcome: Option<Json>,
    /// The roles that may approve it (in the answer of a new request only).
    #[schema(nullable = false)]
    role_ids_allowed_to_approve: Option<Vec<i64>>,
}

/// The requests the caller may see, newest first.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: list writes it")]
struct ApprovalList {
    data: Vec<ApprovalSchema>,
}

/// The action body to file for approval, as the agent's action route receives it.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: file reads the body as JSON")]
struct NewApproval {
    /// The action's name or slug.
    action: String,
    /// `{"attributes": {collection_name, ids, all_records, all_records_ids_excluded, values, …}}`.
    #[schema(schema_with = action_body)]
    data: Json,
}

/// The `data` of an action body: its attributes name the collection at least.
fn action_body() -> utoipa::openapi::schema::Schema {
    super::openapi::schema(json!({
        "type": "object",
        "required": ["attributes"],
        "properties": {"attributes": {
            "type": "object",
            "required": ["collection_name"],
            "properties": {
                "collection_name": {"type": "string"},
                "ids": {"type": "array", "items": {"type": "string"}},
                "all_records": {"type": "boolean"},
                "all_records_ids_excluded": {"type": "array", "items": {"type": "string"}},
                "values": {"type": "object"},
            },
        }},
    }))
}

/// An approver's decision.
#[derive(ToSchema)]
#[allow(
    dead_code,
    reason = "documentation only: decide reads the body as JSON"
)]
struct Decision {
    /// Kept with the decision.
    #[schema(max_length = 10000)]
    comment: Option<String>,
}

// ------------------------------------------------------------------------------------------------
// Errors

// The errors are the public API's one type (`http::platform::Error`); the approval routes keep
// their own codes for body problems (`invalid_request`) and the agent's refusals.

/// A body that is not what filing or deciding needs.
fn invalid(message: impl Into<String>) -> Error {
    Error::coded(StatusCode::BAD_REQUEST, "invalid_request", message)
}

fn not_found(message: impl Into<String>) -> Error {
    Error::NotFound(message.into())
}

type Answer = Result<Response, Error>;

// ------------------------------------------------------------------------------------------------
// Who is asking

/// The signed-in user of a request, in the `?timezone=` of the request (UTC by default: these
/// routes are not the agent's), refused unless their address passes the IP whitelist and they are
/// an enabled user. Either a session token, or one of the user's application tokens
/// (`Bearer cnp_…`) with the `all` scope, as on the other `/v1` routes that no narrower scope
/// names: filing and deciding run actions on records as the user, which no `*:read`/`*:write`
/// scope of the spec covers.
struct Session {
    context: CallerContext,
}

/// The claims of an application token's user, read from the store now: their first team and its
/// rendering, as a session token would carry them.
async fn token_claims(
    parts: &mut Parts,
    state: &SharedState,
) -> Result<auth::SessionClaims, Error> {
    let signed_in = super::platform::SignedIn::from_request_parts(parts, state).await?;
    signed_in.require(Scope::All)?;
    let user = &signed_in.user;
    let Some(team) = user.teams.first() else {
        return Err(Error::insufficient("the token's user is in no team"));
    };
    let rendering_id = signed_in.store.rendering_id(team.id).await?;
    Ok(auth::SessionClaims::for_user(user, team, rendering_id))
}

impl FromRequestParts<SharedState> for Session {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &SharedState,
    ) -> Result<Self, Self::Rejection> {
        let claims = if super::platform::bearer_api_token(&parts.headers).is_some() {
            token_claims(parts, state).await?
        } else {
            Authenticated::from_request_parts(parts, state).await?.0
        };
        // The agent routes' private-routes checks: the IP whitelist (§5.7), then an enabled user.
        let permissions = &state.permissions;
        if permissions.ip_whitelist_enabled().await? {
            let forwarded = super::security::forwarded_for(&parts.headers);
            let socket = parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(address)| address.ip());
            permissions.check_ip(forwarded.as_deref(), socket).await?;
        }
        permissions.enabled_user(claims.id).await?;
        let query = QueryString::parse(parts.uri.query().unwrap_or(""));
        let timezone = match query.get("timezone").filter(|t| !t.is_empty()) {
            Some(name) => Caller::parse_timezone(&name).map_err(|e| invalid(e.to_string()))?,
            None => chrono_tz::UTC,
        };
        let request_id = match parts.extensions.get::<RequestId>() {
            Some(request_id) => {
                request_id.mark_used();
                request_id.id
            }
            None => Uuid::new_v4(),
        };
        let caller = claims.into_caller(timezone, request_id);
        Ok(Self {
            context: CallerContext { caller, query },
        })
    }
}

/// The store, if this project and environment are the ones served.
fn store<'a>(state: &'a SharedState, project: &str, environment: &str) -> Result<&'a Store, Error> {
    let store = state
        .store
        .as_ref()
        .ok_or_else(|| not_found("approval requests need Canopy's store"))?;
    if store.project() != project || store.environment() != environment {
        return Err(not_found(format!(
            "project {project:?} environment {environment:?} is not served here"
        )));
    }
    Ok(store)
}

// ------------------------------------------------------------------------------------------------
// Routes

/// `POST …/approval-requests`: files the action body for approval.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/approval-requests",
    operation_id = "file_approval_request",
    tag = "approval-requests",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
    ),
    request_body = NewApproval,
    responses(
        (status = 201, description = "The request, filed", body = ApprovalSchema),
        (status = 422, description = "The action needs no approval here, or a select-all targets too many records", body = ErrorBody),
    ),
)]
async fn file(
    State(state): State<SharedState>,
    Path((project, environment)): Path<(String, String)>,
    session: Session,
    body: Result<JsonBody, ApiError>,
) -> Answer {
    store(&state, &project, &environment)?;
    let JsonBody(body) = body?;
    let filed = approvals::file(
        &state,
        &session.context.caller,
        &session.context.query,
        &body,
        state.approvals.max_records_for_approval,
    )
    .await
    .map_err(refusal)?;
    let mut answer = approval_json(&filed.approval);
    answer["roleIdsAllowedToApprove"] = json!(filed.role_ids_allowed_to_approve);
    Ok(super::json_with(StatusCode::CREATED, &answer))
}

/// `GET …/approval-requests?status=`: the requests the caller may see, newest first.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/approval-requests",
    operation_id = "list_approval_requests",
    tag = "approval-requests",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ApprovalQuery,
    ),
    responses(
        (status = 200, description = "The requests the caller may see", body = ApprovalList),
    ),
)]
async fn list(
    State(state): State<SharedState>,
    Path((project, environment)): Path<(String, String)>,
    session: Session,
) -> Answer {
    store(&state, &project, &environment)?;
    let status = session.context.query.get("status");
    let status = match status.as_deref() {
        None | Some("") => None,
        Some("pending") => Some(ApprovalStatus::Pending),
        Some("approved") => Some(ApprovalStatus::Approved),
        Some("rejected") => Some(ApprovalStatus::Rejected),
        Some(other) => {
            return Err(Error::coded(
                StatusCode::BAD_REQUEST,
                "invalid_parameter",
                format!("status must be pending, approved or rejected, not {other:?}"),
            ));
        }
    };
    let visible: Vec<Json> = approvals::list(&state, &session.context.caller, status)
        .await
        .map_err(refusal)?
        .iter()
        .map(approval_json)
        .collect();
    Ok(super::json(&json!({ "data": visible })))
}

/// `GET …/approval-requests/{id}`.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/approval-requests/{id}",
    operation_id = "read_approval_request",
    tag = "approval-requests",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The approval request's id"),
    ),
    responses(
        (status = 200, description = "The request", body = ApprovalSchema),
    ),
)]
async fn show(
    State(state): State<SharedState>,
    Path((project, environment, id)): Path<(String, String, String)>,
    session: Session,
) -> Answer {
    store(&state, &project, &environment)?;
    let id = path_id(&id)?;
    let approval = approvals::visible(&state, &session.context.caller, id)
        .await
        .map_err(refusal)?;
    Ok(super::json(&approval_json(&approval)))
}

/// `POST …/approval-requests/{id}/approve`: runs the action as the approver.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/approval-requests/{id}/approve",
    operation_id = "approve_approval_request",
    tag = "approval-requests",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The approval request's id"),
    ),
    request_body = Decision,
    responses(
        (status = 200, description = "Approved; the action ran and its outcome is kept", body = ApprovalSchema),
        (status = 409, description = "Already decided", body = ErrorBody),
        (status = 422, description = "The action cannot run on this selection", body = ErrorBody),
    ),
)]
async fn approve(
    State(state): State<SharedState>,
    Path((project, environment, id)): Path<(String, String, String)>,
    session: Session,
    body: Result<JsonBody, ApiError>,
) -> Answer {
    decide(
        &state,
        &project,
        &environment,
        path_id(&id)?,
        &session,
        body,
        ApprovalStatus::Approved,
    )
    .await
}

/// `POST …/approval-requests/{id}/reject`.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/approval-requests/{id}/reject",
    operation_id = "reject_approval_request",
    tag = "approval-requests",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The approval request's id"),
    ),
    request_body = Decision,
    responses(
        (status = 200, description = "Rejected", body = ApprovalSchema),
        (status = 409, description = "Already decided", body = ErrorBody),
        (status = 422, description = "The action cannot run on this selection", body = ErrorBody),
    ),
)]
async fn reject(
    State(state): State<SharedState>,
    Path((project, environment, id)): Path<(String, String, String)>,
    session: Session,
    body: Result<JsonBody, ApiError>,
) -> Answer {
    decide(
        &state,
        &project,
        &environment,
        path_id(&id)?,
        &session,
        body,
        ApprovalStatus::Rejected,
    )
    .await
}

/// Approve or reject: the agent's approve rule on the recorded selection (as the approver
/// sees it), then the atomic decision, then (approving) the run and its outcome.
async fn decide(
    state: &SharedState,
    project: &str,
    environment: &str,
    id: i64,
    session: &Session,
    body: Result<JsonBody, ApiError>,
    decision: ApprovalStatus,
) -> Answer {
    let store = store(state, project, environment)?;
    let JsonBody(body) = body?;
    let comment = match body.get("comment") {
        None | Some(Json::Null) => None,
        Some(Json::String(comment)) if comment.chars().count() <= MAX_COMMENT_CHARS => {
            Some(comment.as_str())
        }
        Some(Json::String(_)) => {
            return Err(invalid(format!(
                "`comment` is longer than {MAX_COMMENT_CHARS} characters"
            )));
        }
        Some(_) => return Err(invalid("`comment` must be a string")),
    };
    let approval = approvals::decide(
        state,
        &session.context.caller,
        &session.context.query,
        approvals::Decision {
            id,
            status: decision,
            comment: comment.map(str::to_owned),
        },
    )
    .await
    .map_err(refusal)?;
    resume_workflow(
        state,
        store,
        id,
        decision == ApprovalStatus::Approved,
        approval.outcome.as_ref(),
    )
    .await;
    Ok(super::json(&approval_json(&approval)))
}

/// An approval operation's refusal in the public API's shape.
fn refusal(error: crate::ops::Error) -> Error {
    use crate::ops::Error as E;
    match error {
        E::Approval { refusal, message } => match refusal {
            Refusal::Invalid => invalid(message),
            Refusal::NotFound => not_found(message),
            Refusal::NotRequired => Error::coded(
                StatusCode::UNPROCESSABLE_ENTITY,
                "approval_not_required",
                message,
            ),
            Refusal::TooManyRecords => Error::coded(
                StatusCode::UNPROCESSABLE_ENTITY,
                "too_many_records",
                message,
            ),
            Refusal::Conflict => Error::coded(StatusCode::CONFLICT, "conflict", message),
        },
        E::Platform(error) => error.into(),
        E::Auth(error) => error.into(),
        other => ApiError::from(other).into(),
    }
}

/// A workflow run whose trigger-action step filed this request resumes with the decision
/// (`workflows::engine::control::resume_after_decision`: a failure is logged, the decision
/// stands).
pub async fn resume_workflow(
    state: &SharedState,
    store: &Store,
    id: i64,
    approved: bool,
    outcome: Option<&Json>,
) {
    crate::workflows::engine::control::resume_after_decision(
        store,
        &state.workflow_wakeup,
        id,
        approved,
        outcome,
    )
    .await;
}

// ------------------------------------------------------------------------------------------------
// Helpers

/// An approval request's id from the path; else a 400 in the API's shape (axum's own rejection
/// is plain text).
fn path_id(raw: &str) -> Result<i64, Error> {
    raw.parse()
        .map_err(|_| Error::field("id", format!("{raw:?} is not an id")))
}

/// An approval request as the API shows it.
fn approval_json(approval: &Approval) -> Json {
    serde_json::to_value(approval).unwrap_or(Json::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_signed_request_round_trips_and_a_wrong_secret_is_refused() {
        let settings = ApprovalSettings::new(SECRET, 100);
        let payload = json!({"data": {"attributes": {"requester_id": 2, "ids": ["1"]}}});
        let token = settings.sign(&payload).unwrap();
        assert_eq!(settings.verify(&token), Some(payload.clone()));
        let other = ApprovalSettings::new(&"f".repeat(64), 100);
        assert_eq!(other.verify(&token), None);
        assert_eq!(ApprovalSettings::default().verify(&token), None);
        assert_eq!(settings.verify("not.a.jwt"), None);
    }

    #[test]
    fn an_expired_signed_request_is_refused() {
        let settings = ApprovalSettings::new(SECRET, 100);
        let past = chrono::Utc::now().timestamp() - 60;
        let token = settings
            .sign(&json!({"data": {"attributes": {}}, "exp": past}))
            .unwrap();
        assert_eq!(settings.verify(&token), None);
    }

    #[test]
    fn max_records_is_capped_at_the_platforms_500() {
        assert_eq!(
            ApprovalSettings::new(SECRET, 10_000).max_records_for_approval,
            500
        );
        assert_eq!(
            ApprovalSettings::new(SECRET, 20).max_records_for_approval,
            20
        );
    }
}
