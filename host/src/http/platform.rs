//! The admin HTTP API under `/{prefix}/v1/project/{project}/…`: users, teams and roles, the
//! environment's permissions, each team's rendering, the IP whitelist and the admin log. Admins
//! only: the session token of a user whose stored level is `admin` (others 403). JSON bodies;
//! errors in the public API's shape `{code, message}` (plus `error`, the status text, as the
//! public API's authentication errors carry it). Changes are logged with the admin as initiator.

mod documents;
mod groups;
pub mod listing;
mod logs;
mod users;

use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value as Json, json};
use utoipa_axum::router::OpenApiRouter;

use super::SharedState;
use crate::auth;
use crate::datasource::PermissionLevel;
use crate::platform::{self, Actor, Scope, Store, User};

/// Where the API lives: beside `/forest`, under the same prefix.
pub fn base_path(mount_path: &str) -> String {
    format!("{}/v1", mount_path.strip_suffix("/forest").unwrap_or(""))
}

/// The admin API's routes, each documented (`http::openapi` mounts them and their document).
pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .merge(users::routes())
        .merge(groups::routes())
        .merge(documents::routes())
        .merge(logs::routes())
}

/// The answer of a `/v1` path without a route.
pub(super) async fn not_found() -> Response {
    Error::NotFound("no route at this path".to_owned()).into_response()
}

/// The answer of a method a `/v1` path does not serve (axum adds the `Allow` header).
pub(super) async fn method_not_allowed() -> Response {
    Error::MethodNotAllowed.into_response()
}

/// Every way an admin API request fails, each with its status and public `code`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter or body field is missing or wrong; the message names it.
    #[error("{0}")]
    InvalidParameter(String),
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
    /// Canopy's store is not part of this server (a router over a bare stack).
    #[error("Canopy's store is not available on this server")]
    Unavailable,
    /// Logged; the client sees a plain message.
    #[error("{0}")]
    Internal(String),
}

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
            Self::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
        }
    }

    /// A body field that is not what it must be.
    pub fn field(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::InvalidParameter(format!("{field}: {problem}"))
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let (status, code) = self.public();
        let message = match &self {
            Self::Internal(detail) => {
                tracing::error!(detail, "admin API: unexpected error");
                "Unexpected error".to_owned()
            }
            other => other.to_string(),
        };
        super::json_with(
            status,
            &json!({
                "code": code,
                "message": message,
                "error": status.canonical_reason().unwrap_or(""),
            }),
        )
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
            auth::Error::ExpiredToken => Self::Unauthorized("the session token has expired"),
            auth::Error::BadAuthorizationHeader => {
                Self::Unauthorized("the Authorization header must be `Bearer <token>`")
            }
            _ => Self::Unauthorized("invalid or missing session token"),
        }
    }
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// An admin of the project, from the request's session token: extracting it answers 401
/// without a valid token and 403 unless the token's user exists, is enabled and is an admin
/// in the store now (a demoted admin's live token stops working at once).
pub struct Admin {
    pub user: User,
    pub store: Store,
    /// The application token's scopes; `None` for a session token, which may do everything its
    /// user may.
    pub scopes: Option<Vec<Scope>>,
}

impl Admin {
    /// Refuses (403) a request whose application token lacks `scope`.
    pub fn require(&self, scope: Scope) -> Result<()> {
        match &self.scopes {
            Some(held) if !scope.granted_by(held) => Err(Error::Forbidden(format!(
                "Insufficient permissions for this operation: the token lacks the {scope} scope"
            ))),
            _ => Ok(()),
        }
    }

    /// The admin log's initiator.
    pub fn actor(&self) -> Actor {
        Actor::Administrator {
            user_id: self.user.id,
            email: self.user.email.clone(),
            name: self.user.full_name(),
        }
    }

    /// The store, after checking that `project` is the one served (else 404).
    pub fn project(&self, project: &str) -> Result<&Store> {
        if project == self.store.project() {
            Ok(&self.store)
        } else {
            Err(Error::NotFound(format!("project {project:?} not found")))
        }
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

impl FromRequestParts<SharedState> for Admin {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self> {
        let super::caller::Authenticated(claims) =
            super::caller::Authenticated::from_request_parts(parts, state)
                .await
                .map_err(|e| match e {
                    super::ApiError::Auth(auth) => Error::from(auth),
                    _ => Error::Unauthorized("invalid or missing session token"),
                })?;
        let store = state.store.clone().ok_or(Error::Unavailable)?;
        let user = store.user(claims.id).await?;
        match user {
            Some(user) if !user.disabled && user.permission_level == PermissionLevel::Admin => {
                Ok(Self {
                    user,
                    store,
                    scopes: None,
                })
            }
            _ => Err(Error::Forbidden(
                "only admins of the project may use the admin API".to_owned(),
            )),
        }
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
