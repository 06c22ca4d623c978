//! The admin HTTP API under `/{prefix}/v1/project/{project}/…`: users, teams and roles, the
//! environment's permissions, each team's rendering, the IP whitelist and the admin log, and the
//! caller's application tokens (`tokens`). The admin routes take an [`Admin`]: a user whose
//! stored level is `admin` (others 403), by their session token or one of their application
//! tokens (`Authorization: Bearer cnp_…`, narrowed by its scopes: `admin.require(scope)`). JSON
//! bodies; every error is an [`Error`], the public API's one shape `{code, message, error}`.
//! Changes are logged with the admin as initiator.

mod activity;
mod documents;
mod groups;
// Its filter getters serve the list routes of the notes and activity logs, built beside this
// branch; until they are merged, nothing here calls them.
#[allow(
    dead_code,
    reason = "the notes and activity-log routes use the filter getters"
)]
pub mod listing;
mod logs;
mod notes;
mod tokens;
mod users;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value as Json, json};
use utoipa_axum::router::OpenApiRouter;

use super::SharedState;
use crate::auth;
use crate::auth::tokens::{TokenError, VerifiedToken};
use crate::datasource::PermissionLevel;
use crate::platform::{self, Actor, Scope, Store, User};

/// Where the API lives: beside `/forest`, under the same prefix.
pub fn base_path(mount_path: &str) -> String {
    crate::config::api_base_path(mount_path)
}

/// The admin API's routes, each documented (`http::openapi` mounts them and their document).
pub fn routes() -> OpenApiRouter<SharedState> {
    // Managing users, teams, roles and permissions is named by no scope of the spec: a token
    // needs `all` for it (public-api.md, Authentication §7).
    let management = OpenApiRouter::new()
        .merge(users::routes())
        .merge(groups::routes())
        .merge(documents::routes())
        .route_layer(axum::middleware::from_fn(full_access_only));
    OpenApiRouter::new()
        .merge(management)
        .merge(logs::routes())
        .merge(activity::routes())
        .merge(tokens::routes())
        .merge(notes::routes())
}

/// Refuses (403) a request whose application token (checked by `http::ratelimit`, which runs
/// first) lacks the `all` scope.
async fn full_access_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(TokenCheck(Ok(token))) = request.extensions().get::<TokenCheck>()
        && !Scope::All.granted_by(token.scopes())
    {
        return Error::insufficient("the token lacks the all scope").into_response();
    }
    next.run(request).await
}

/// The answer of a `/v1` path without a route.
pub(super) async fn not_found() -> Response {
    Error::NotFound("no route at this path".to_owned()).into_response()
}

/// The answer of a method a `/v1` path does not serve (axum adds the `Allow` header).
pub(super) async fn method_not_allowed() -> Response {
    Error::MethodNotAllowed.into_response()
}

/// Every way a `/v1` request fails, each with its status and public `code`: the one error type
/// of the public API (admin API, tokens, approvals, and the routes added beside them). Every
/// answer is `{code, message, error}` (`error` the status text, as the spec's authentication
/// errors carry it), plus `retry_after` on a 429 and the agent's `data` where approvals give it.
/// Nothing internal is shown: `Internal` is logged and answered "Unexpected error".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter or body field is missing or wrong; the message names it.
    #[error("{0}")]
    InvalidParameter(String),
    /// No valid credentials; the message says which way they failed.
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the request body is too large")]
    PayloadTooLarge,
    #[error("this method is not allowed on this path")]
    MethodNotAllowed,
    /// Over the rate limit (`http::ratelimit`): 429 with `Retry-After` in whole seconds.
    #[error("Too many requests: retry after {retry_after} seconds.")]
    RateLimited { retry_after: u64 },
    /// Canopy's store is not part of this server (a router over a bare stack).
    #[error("Canopy's store is not available on this server")]
    Unavailable,
    /// A refusal with a code of its own: the approval routes' rules (`approval_required`,
    /// `action_trigger_forbidden`, `too_many_records`, …), with the agent's `data` if any.
    #[error("{message}")]
    Coded {
        status: StatusCode,
        code: &'static str,
        message: String,
        data: Option<Json>,
    },
    /// Logged; the client sees a plain message.
    #[error("{0}")]
    Internal(String),
}

/// The 401 message of missing or invalid credentials (public-api.md, Authentication errors).
pub const INVALID_TOKEN: &str = "Invalid or missing API token";
/// The 401 message of an expired application token.
pub const EXPIRED_TOKEN: &str = "API token has expired";
/// The 403 message's start when the caller may not do this.
pub const INSUFFICIENT: &str = "Insufficient permissions for this operation";

impl Error {
    fn public(&self) -> (StatusCode, &'static str) {
        match self {
            Self::InvalidParameter(_) => (StatusCode::BAD_REQUEST, "invalid_parameter"),
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Self::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Self::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::Coded { status, code, .. } => (*status, *code),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
        }
    }

    /// A body field that is not what it must be.
    pub fn field(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::InvalidParameter(format!("{field}: {problem}"))
    }

    /// A refusal with its own code (approvals).
    pub fn coded(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self::Coded {
            status,
            code,
            message: message.into(),
            data: None,
        }
    }

    /// A 403 for a caller who may not do this, in the spec's words.
    pub fn insufficient(why: impl std::fmt::Display) -> Self {
        Self::Forbidden(format!("{INSUFFICIENT}: {why}"))
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let (status, code) = self.public();
        let message = match &self {
            Self::Internal(detail) => {
                tracing::error!(detail, "public API: unexpected error");
                "Unexpected error".to_owned()
            }
            other => other.to_string(),
        };
        let mut body = json!({
            "code": code,
            "message": message,
            "error": status.canonical_reason().unwrap_or("Error"),
        });
        match self {
            Self::RateLimited { retry_after } => {
                body["retry_after"] = json!(retry_after);
                let mut response = super::json_with(status, &body);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from(retry_after));
                response
            }
            Self::Coded {
                data: Some(data), ..
            } => {
                body["data"] = data;
                super::json_with(status, &body)
            }
            _ => super::json_with(status, &body),
        }
    }
}

impl From<platform::Error> for Error {
    fn from(error: platform::Error) -> Self {
        match error {
            platform::Error::NotFound(what) => Self::NotFound(format!("{what} not found")),
            platform::Error::Conflict(message) => Self::Conflict(message),
            platform::Error::Invalid(message) => Self::InvalidParameter(message),
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<auth::Error> for Error {
    fn from(error: auth::Error) -> Self {
        match error {
            auth::Error::ExpiredToken => Self::Unauthorized("Session token has expired"),
            auth::Error::BadAuthorizationHeader => {
                Self::Unauthorized("The Authorization header must be `Bearer <token>`")
            }
            auth::Error::MissingToken | auth::Error::InvalidToken(_) => {
                Self::Unauthorized(INVALID_TOKEN)
            }
            // The agent's refusals reach the approval routes through the agent's error table.
            other => super::ApiError::from(other).into(),
        }
    }
}

/// The agent's errors met on `/v1` (the approval routes run actions), in this shape: the agent's
/// error name becomes the code, its detail the message, unexpected ones are not shown.
impl From<super::ApiError> for Error {
    fn from(error: super::ApiError) -> Self {
        let data = error.data();
        let (status, name, message) = error.public_parts();
        let code = match name {
            "UnauthorizedError" => "unauthorized",
            "CustomActionTriggerForbiddenError" => "action_trigger_forbidden",
            "CustomActionRequiresApprovalError" => "approval_required",
            "ApprovalNotAllowedError" => "approval_not_allowed",
            "InvalidActionConditionError" => "invalid_action_condition",
            "ForbiddenError" => "forbidden",
            "NotFoundError" => "not_found",
            "PayloadTooLargeError" => "payload_too_large",
            "ServiceUnavailableError" => "unavailable",
            _ if status == StatusCode::BAD_REQUEST => "invalid_request",
            _ if status == StatusCode::UNPROCESSABLE_ENTITY => "unprocessable",
            _ => "internal_error",
        };
        if code == "unauthorized" {
            return Self::Unauthorized(INVALID_TOKEN);
        }
        // koa's plain answers have no message of their own worth more than the status.
        let message = if message.is_empty() {
            status.canonical_reason().unwrap_or("Error").to_owned()
        } else {
            message
        };
        Self::Coded {
            status,
            code,
            message,
            data,
        }
    }
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// Who is calling the public API: a user of the project, signed in with a session token or
/// presenting one of their application tokens, read from the store at this call (so a disabled
/// user, or a demoted admin, is refused at once). Any enabled user may be a `SignedIn`; the
/// admin API takes an [`Admin`].
pub struct SignedIn {
    pub user: User,
    pub store: Store,
    /// The application token's scopes; `None` for a session token, which may do everything its
    /// user may.
    pub scopes: Option<Vec<Scope>>,
    /// The application token's id, when the call presents one.
    pub token_id: Option<String>,
}

/// An admin of the project: extracting it answers 401 without valid credentials and 403 unless
/// the user exists, is enabled and is an admin in the store now.
pub struct Admin {
    pub user: User,
    pub store: Store,
    /// The application token's scopes; `None` for a session token, which may do everything its
    /// user may.
    pub scopes: Option<Vec<Scope>>,
    /// The application token's id, when the call presents one (activity entries carry it).
    pub token_id: Option<String>,
}

/// Refuses (403) a request whose application token lacks `scope`.
fn require(scopes: Option<&[Scope]>, scope: Scope) -> Result<()> {
    match scopes {
        Some(held) if !scope.granted_by(held) => Err(Error::insufficient(format_args!(
            "the token lacks the {scope} scope"
        ))),
        _ => Ok(()),
    }
}

/// The store, after checking that `project` is the one served (else 404).
fn served_project<'a>(store: &'a Store, project: &str) -> Result<&'a Store> {
    if project == store.project() {
        Ok(store)
    } else {
        Err(Error::NotFound(format!("project {project:?} not found")))
    }
}

/// The operations layer's caller for `user` acting through the API (no rendering: the
/// platform operations need who they are and their level).
fn caller_of(user: &User) -> crate::datasource::Caller {
    let mut caller = crate::datasource::Caller::system(chrono_tz::Tz::UTC);
    caller.id = user.id;
    caller.email.clone_from(&user.email);
    caller.first_name.clone_from(&user.first_name);
    caller.last_name.clone_from(&user.last_name);
    caller.permission_level = user.permission_level;
    caller.role = user
        .role
        .as_ref()
        .map(|r| r.name.clone())
        .unwrap_or_default();
    caller.role_id = user.role.as_ref().map(|r| r.id);
    caller.tags.clone_from(&user.tags);
    caller
}

impl From<crate::ops::Error> for Error {
    fn from(error: crate::ops::Error) -> Self {
        use crate::ops::Error as E;
        match error {
            E::Platform(e) => e.into(),
            E::Auth(e) => e.into(),
            E::Field { field, message } => Self::field(&field, message),
            E::Unavailable => Self::Unavailable,
            other => super::ApiError::from(other).into(),
        }
    }
}

impl SignedIn {
    /// The operations layer's caller.
    pub fn caller(&self) -> crate::datasource::Caller {
        caller_of(&self.user)
    }

    /// Refuses (403) a request whose application token lacks `scope`.
    pub fn require(&self, scope: Scope) -> Result<()> {
        require(self.scopes.as_deref(), scope)
    }

    /// The store, after checking that `project` is the one served (else 404).
    pub fn project(&self, project: &str) -> Result<&Store> {
        served_project(&self.store, project)
    }

    pub fn is_admin(&self) -> bool {
        self.user.permission_level == PermissionLevel::Admin
    }
}

impl Admin {
    /// The operations layer's caller.
    pub fn caller(&self) -> crate::datasource::Caller {
        caller_of(&self.user)
    }

    /// Refuses (403) a request whose application token lacks `scope`.
    pub fn require(&self, scope: Scope) -> Result<()> {
        require(self.scopes.as_deref(), scope)
    }

    /// The admin log's initiator, as the operations write it (`ops::tokens::actor`).
    pub fn actor(&self) -> Actor {
        crate::ops::tokens::actor(&self.caller())
    }

    /// The store, after checking that `project` is the one served (else 404).
    pub fn project(&self, project: &str) -> Result<&Store> {
        served_project(&self.store, project)
    }

    /// The store seen from `environment` of `project`: the one served, or another one this
    /// store holds permissions for (several environments may share a PostgreSQL store).
    pub async fn environment(&self, project: &str, environment: &str) -> Result<Store> {
        let store = self.project(project)?;
        if environment == store.environment() {
            return Ok(store.clone());
        }
        let other = store.for_environment(environment);
        if other.has_environment_document().await? {
            Ok(other)
        } else {
            Err(Error::NotFound(format!(
                "environment {environment:?} not found"
            )))
        }
    }
}

/// The outcome of checking a request's `Bearer cnp_…` token, left in the request's extensions by
/// the rate limiter (which needs to know whose request it is) for the extractors to use.
#[derive(Clone)]
pub(crate) struct TokenCheck(pub Result<Arc<VerifiedToken>, Refusal>);

/// Why a presented application token was refused, as the client is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Invalid,
    Expired,
    /// The store failed (logged when it happened).
    Unavailable,
}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Invalid => Self::Unauthorized(INVALID_TOKEN),
            Refusal::Expired => Self::Unauthorized(EXPIRED_TOKEN),
            Refusal::Unavailable => Self::Internal("the token could not be checked".to_owned()),
        }
    }
}

/// The application token of an `Authorization: Bearer cnp_…` header, if the request has one.
pub(crate) fn bearer_api_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && token.starts_with(platform::tokens::PREFIX))
        .then_some(token)
}

/// Checks the application token `presented` with the state's verifier.
pub(crate) async fn check_api_token(state: &SharedState, presented: &str) -> TokenCheck {
    let Some(verifier) = &state.tokens else {
        return TokenCheck(Err(Refusal::Invalid));
    };
    TokenCheck(
        verifier
            .verify(presented)
            .await
            .map_err(|error| match error {
                TokenError::Invalid => Refusal::Invalid,
                TokenError::Expired => Refusal::Expired,
                TokenError::Store(error) => {
                    tracing::error!(%error, "an application token could not be checked");
                    Refusal::Unavailable
                }
            }),
    )
}

impl FromRequestParts<SharedState> for SignedIn {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self> {
        let store = state.store.clone().ok_or(Error::Unavailable)?;
        let (user_id, scopes, token_id) = match bearer_api_token(&parts.headers) {
            Some(presented) => {
                let TokenCheck(checked) = match parts.extensions.get::<TokenCheck>() {
                    Some(check) => check.clone(),
                    None => check_api_token(state, presented).await,
                };
                let token = checked?;
                (
                    token.user_id(),
                    Some(token.scopes().to_vec()),
                    Some(token.id().to_owned()),
                )
            }
            None => {
                let super::caller::Authenticated(claims) =
                    super::caller::Authenticated::from_request_parts(parts, state)
                        .await
                        .map_err(|e| match e {
                            super::ApiError::Auth(auth) => Error::from(auth),
                            _ => Error::Unauthorized(INVALID_TOKEN),
                        })?;
                (claims.id, None, None)
            }
        };
        match store.user(user_id).await? {
            Some(user) if !user.disabled => Ok(Self {
                user,
                store,
                scopes,
                token_id,
            }),
            // Known, but may do nothing now (their credentials may work again if re-enabled).
            Some(_) => Err(Error::insufficient("the user is disabled")),
            // A removed user's credentials are worth nothing.
            None => Err(Error::Unauthorized(INVALID_TOKEN)),
        }
    }
}

impl FromRequestParts<SharedState> for Admin {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self> {
        let signed_in = SignedIn::from_request_parts(parts, state).await?;
        if !signed_in.is_admin() {
            return Err(Error::insufficient(
                "only admins of the project may use this API",
            ));
        }
        Ok(Self {
            user: signed_in.user,
            store: signed_in.store,
            scopes: signed_in.scopes,
            token_id: signed_in.token_id,
        })
    }
}

/// A JSON object body; anything else is a 400 naming the problem.
pub struct Body(pub serde_json::Map<String, Json>);

impl<S: Send + Sync> axum::extract::FromRequest<S> for Body {
    type Rejection = Error;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self> {
        let json_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|v| v.starts_with("application/json"));
        let bytes = Bytes::from_request(request, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Error::PayloadTooLarge
            } else {
                Error::InvalidParameter("the request body could not be read".to_owned())
            }
        })?;
        if !json_type {
            return Err(Error::InvalidParameter(
                "the request body must be JSON (Content-Type: application/json)".to_owned(),
            ));
        }
        match serde_json::from_slice::<Json>(&bytes) {
            Ok(Json::Object(map)) => Ok(Self(map)),
            Ok(_) => Err(Error::InvalidParameter(
                "the request body must be a JSON object".to_owned(),
            )),
            Err(e) => Err(Error::InvalidParameter(format!(
                "the request body is not valid JSON: {e}"
            ))),
        }
    }
}

/// A JSON body of any shape (documents such as the environment's permissions, `true` included).
pub struct Document(pub Json);

impl<S: Send + Sync> axum::extract::FromRequest<S> for Document {
    type Rejection = Error;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self> {
        let bytes = Bytes::from_request(request, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Error::PayloadTooLarge
            } else {
                Error::InvalidParameter("the request body could not be read".to_owned())
            }
        })?;
        serde_json::from_slice(&bytes).map(Self).map_err(|e| {
            Error::InvalidParameter(format!("the request body is not valid JSON: {e}"))
        })
    }
}

/// Reads a typed document, naming the path of the first field that does not fit.
pub fn typed<T: serde::de::DeserializeOwned>(what: &str, value: Json) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." { what.to_owned() } else { path };
        Error::field(&at, e.into_inner())
    })
}

/// Optional typed fields of a body.
pub trait Fields {
    fn string(&self, field: &str) -> Result<Option<String>>;
    /// `Some(None)` for an explicit `null`.
    fn nullable_string(&self, field: &str) -> Result<Option<Option<String>>>;
    fn strings(&self, field: &str) -> Result<Option<Vec<String>>>;
    fn boolean(&self, field: &str) -> Result<Option<bool>>;
    fn tags(&self, field: &str) -> Result<Option<std::collections::BTreeMap<String, String>>>;
    fn only(&self, known: &[&str]) -> Result<()>;
}

impl Fields for serde_json::Map<String, Json> {
    fn string(&self, field: &str) -> Result<Option<String>> {
        match self.get(field) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Error::field(field, "must be a string")),
        }
    }

    fn nullable_string(&self, field: &str) -> Result<Option<Option<String>>> {
        match self.get(field) {
            None => Ok(None),
            Some(Json::Null) => Ok(Some(None)),
            Some(Json::String(s)) => Ok(Some(Some(s.clone()))),
            Some(_) => Err(Error::field(field, "must be a string or null")),
        }
    }

    fn strings(&self, field: &str) -> Result<Option<Vec<String>>> {
        match self.get(field) {
            None => Ok(None),
            Some(Json::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    item.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| Error::field(&format!("{field}[{i}]"), "must be a string"))
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(_) => Err(Error::field(field, "must be an array of strings")),
        }
    }

    fn boolean(&self, field: &str) -> Result<Option<bool>> {
        match self.get(field) {
            None => Ok(None),
            Some(Json::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(Error::field(field, "must be true or false")),
        }
    }

    fn tags(&self, field: &str) -> Result<Option<std::collections::BTreeMap<String, String>>> {
        match self.get(field) {
            None => Ok(None),
            Some(Json::Object(map)) => map
                .iter()
                .map(|(k, v)| match v {
                    Json::String(s) if !k.trim().is_empty() => Ok((k.clone(), s.clone())),
                    Json::String(_) => Err(Error::field(field, "a tag needs a non-empty key")),
                    _ => Err(Error::field(&format!("{field}.{k}"), "must be a string")),
                })
                .collect::<Result<_>>()
                .map(Some),
            Some(_) => Err(Error::field(
                field,
                "must be an object of string values, e.g. {\"region\": \"EU\"}",
            )),
        }
    }

    fn only(&self, known: &[&str]) -> Result<()> {
        match self.keys().find(|k| !known.contains(&k.as_str())) {
            Some(unknown) => Err(Error::field(
                unknown,
                format!("unknown field (expected {})", known.join(", ")),
            )),
            None => Ok(()),
        }
    }
}

/// A path id that must be a positive integer.
pub fn id(field: &str, raw: &str) -> Result<i64> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| Error::field(field, format!("{raw:?} is not an id")))
}

/// `204 No Content`.
pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}
