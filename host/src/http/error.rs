//! The one place errors become responses: every error kind of every layer is mapped here to its
//! HTTP status and the agent's public error name, and rendered as the agent's envelope
//! `{"errors":[{"name","detail","status"}]}` (protocol §7).
//!
//! Business and validation errors show their own message; unexpected ones (database, internal)
//! are logged and show "Unexpected error", or the `customizeErrorMessage` template when set.
//!
//! Three answers come from koa itself rather than from the agent's error handler, and keep koa's
//! plain-text shape: a path (or method) that no route serves (404 `Not Found`), a body that is
//! not JSON (400 `Bad Request`) and a body over `jsonLimit` (413 `request entity too large`).

use std::any::Any;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::ErrorMessageTemplate;
use crate::{agent, auth, datasource, ops};

/// The detail of errors whose message must not reach clients (§7).
const UNEXPECTED: &str = ops::UNEXPECTED;

/// Every error a route can answer with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Agent(#[from] agent::Error),
    #[error(transparent)]
    Datasource(#[from] datasource::Error),
    #[error(transparent)]
    Auth(#[from] auth::Error),
    /// No route (or no collection) at this path, or not with this method.
    #[error("Not Found")]
    RouteNotFound,
    /// The request body is over `jsonLimit`.
    #[error("request entity too large")]
    PayloadTooLarge,
    /// The request body could not be read as JSON; the parser's detail is logged only, as koa
    /// answers `Bad Request` alone.
    #[error("{0}")]
    BadRequest(String),
}

/// Result alias of route handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// The operations layer's errors, each as the route answered it before that layer existed.
impl From<crate::ops::Error> for ApiError {
    fn from(error: crate::ops::Error) -> Self {
        use crate::ops::Error as E;
        match error {
            E::Agent(e) => Self::Agent(e),
            E::Datasource(e) => Self::Datasource(e),
            E::Auth(e) => Self::Auth(e),
            E::NotFound => Self::RouteNotFound,
            // Only the approval routes meet these, and they answer them in their own shape.
            E::Approval { refusal, message } => {
                use crate::ops::approvals::Refusal as R;
                match refusal {
                    R::NotFound => Self::Agent(agent::Error::NotFound(message)),
                    R::Invalid | R::Conflict => Self::BadRequest(message),
                    R::NotRequired | R::TooManyRecords => {
                        Self::Agent(agent::Error::Unprocessable(message))
                    }
                }
            }
            E::Platform(crate::platform::Error::NotFound(what)) => {
                Self::Agent(agent::Error::NotFound(format!("{what} not found")))
            }
            E::Platform(
                crate::platform::Error::Invalid(message)
                | crate::platform::Error::Conflict(message),
            ) => Self::Agent(agent::Error::Validation(message)),
            E::Field { field, message } => {
                Self::Agent(agent::Error::Validation(format!("{field}: {message}")))
            }
            other @ (E::Platform(_) | E::Unavailable) => {
                Self::Datasource(datasource::Error::Internal(other.to_string()))
            }
        }
    }
}

/// How an error kind is answered: its status, its public name, and whether its message is safe
/// to show (business errors) or must be hidden and logged (unexpected errors).
struct Public {
    status: StatusCode,
    name: &'static str,
    expose: bool,
}

/// The agent's table, kept by the operations layer (`ops::Public`, which also says how an
/// approved action's failure is kept), with the status as a `StatusCode`.
impl From<ops::Public> for Public {
    fn from(public: ops::Public) -> Self {
        Self {
            status: StatusCode::from_u16(public.status)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            name: public.name,
            expose: public.expose,
        }
    }
}

impl ApiError {
    /// THE table: error kind → status, agent error name, message exposure (`ops::Public`, plus
    /// the three answers koa writes itself).
    fn public(&self) -> Public {
        let public = match self {
            Self::Agent(e) => ops::Public::of_agent(e),
            Self::Datasource(e) => ops::Public::of_datasource(e),
            Self::Auth(e) => ops::Public::of_auth(e),
            Self::RouteNotFound => ops::Public::NOT_FOUND,
            // Koa's body parser errors are http-errors, named after their status.
            Self::PayloadTooLarge => ops::Public::new(413, "PayloadTooLargeError", true),
            Self::BadRequest(_) => ops::Public::BAD_REQUEST,
        };
        public.into()
    }
}

impl ApiError {
    /// The `data` of the envelope, for the errors that carry one (§7).
    pub fn data(&self) -> Option<serde_json::Value> {
        match self {
            Self::Auth(e) => e.data(),
            _ => None,
        }
    }

    /// Status, public name and detail as the envelope shows them, for the APIs that answer
    /// another error shape (`http::approvals`); unexpected errors are logged, not shown.
    pub fn public_parts(&self) -> (StatusCode, &'static str, String) {
        let public = self.public();
        let message = self.to_string();
        if public.expose && !message.is_empty() {
            return (public.status, public.name, message);
        }
        tracing::error!(error = %error_chain(self), "unexpected error");
        (public.status, public.name, UNEXPECTED.to_owned())
    }

    /// The plain-text body of the answers koa writes itself (see the module notes).
    fn koa_text(&self) -> Option<&'static str> {
        match self {
            Self::RouteNotFound => Some("Not Found"),
            Self::BadRequest(_) => Some("Bad Request"),
            Self::PayloadTooLarge => Some("request entity too large"),
            Self::Agent(_) | Self::Datasource(_) | Self::Auth(_) => None,
        }
    }
}

/// koa's own answer: `text/plain; charset=utf-8` with the text, marked [`BeforeRoute`].
fn plain_text(status: StatusCode, text: &'static str) -> Response {
    let mut response = (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        text,
    )
        .into_response();
    response.extensions_mut().insert(BeforeRoute);
    response
}

/// Carried by the response of an unexpected error so that the request-log middleware, which has
/// the settings, can apply the `customizeErrorMessage` template ([`customize`]).
#[derive(Debug, Clone)]
pub struct Unexpected {
    name: &'static str,
    message: String,
}

/// Marks a response that koa would have answered before any route built a caller: the
/// request-log layer then sends no correlation id, as the agent does not.
#[derive(Debug, Clone, Copy)]
pub struct BeforeRoute;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(text) = self.koa_text() {
            if let Self::BadRequest(detail) = &self {
                tracing::debug!(detail, "request body is not JSON");
            }
            return plain_text(self.public().status, text);
        }
        let public = self.public();
        let message = self.to_string();
        if let Self::Agent(agent::Error::Business(_)) = &self {
            return envelope_with_data(public.status, public.name, &message, &json!({}));
        }
        if let Some(data) = self.data() {
            return envelope_with_data(public.status, public.name, &message, &data);
        }
        if public.expose && !message.is_empty() {
            return envelope(public.status, public.name, &message);
        }
        // The message may hold SQL or driver details: logs only.
        tracing::error!(error = %error_chain(&self), "unexpected error");
        let mut response = envelope(public.status, public.name, UNEXPECTED);
        response.extensions_mut().insert(Unexpected {
            name: public.name,
            message,
        });
        response
    }
}

/// Applies the `customizeErrorMessage` template to the response of an unexpected error.
pub fn customize(response: Response, template: Option<&ErrorMessageTemplate>) -> Response {
    match (template, response.extensions().get::<Unexpected>()) {
        (Some(template), Some(unexpected)) => envelope(
            response.status(),
            unexpected.name,
            &template.render(unexpected.name, &unexpected.message),
        ),
        _ => response,
    }
}

/// The error with its sources, for logs.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        out.push_str(": ");
        out.push_str(&e.to_string());
        source = e.source();
    }
    out
}

/// `{"errors":[{"name","detail","status"}]}` with that status.
pub fn envelope(status: StatusCode, name: &str, detail: &str) -> Response {
    let body = json!({ "errors": [{ "name": name, "detail": detail, "status": status.as_u16() }] });
    super::json_with(status, &body)
}

/// The envelope of a business error with its `data`.
fn envelope_with_data(
    status: StatusCode,
    name: &str,
    detail: &str,
    data: &serde_json::Value,
) -> Response {
    let body = json!({ "errors": [{
        "name": name, "detail": detail, "status": status.as_u16(), "data": data,
    }] });
    super::json_with(status, &body)
}

/// The answer of paths outside the mount path that match no route.
pub async fn not_found() -> Response {
    ApiError::RouteNotFound.into_response()
}

/// The answer of paths (or methods) under the mount path that match no route: the agent's
/// router checks the session token on every path before finding no route, so a request
/// without a valid token gets the 401, and only an authenticated one the plain 404.
pub async fn forest_not_found(
    authenticated: Result<super::caller::Authenticated, ApiError>,
) -> Response {
    match authenticated {
        Ok(_) => ApiError::RouteNotFound.into_response(),
        Err(error) => error.into_response(),
    }
}

/// A handler panicked: the request gets a 500 in the envelope and the server keeps serving.
#[expect(
    clippy::needless_pass_by_value,
    reason = "CatchPanicLayer hands the payload over by value"
)]
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(panic = message, "request handler panicked");
    envelope(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalServerError",
        UNEXPECTED,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_and_name(error: &ApiError) -> (u16, &'static str) {
        let public = error.public();
        (public.status.as_u16(), public.name)
    }

    #[test]
    fn an_operations_error_is_answered_as_the_api_error_it_becomes() {
        use crate::ops::approvals::Refusal;
        let errors: Vec<fn() -> ops::Error> = vec![
            || ops::Error::NotFound,
            || agent::Error::validation("x").into(),
            || auth::Error::forbidden().into(),
            || datasource::Error::Internal("boom".into()).into(),
            || ops::Error::field("email", "is taken"),
            || ops::Error::Unavailable,
            || crate::platform::Error::NotFound("user 7".into()).into(),
            || crate::platform::Error::Conflict("taken".into()).into(),
            || crate::platform::Error::Remote("down".into()).into(),
            || ops::Error::Approval {
                refusal: Refusal::NotFound,
                message: "m".into(),
            },
            || ops::Error::Approval {
                refusal: Refusal::Conflict,
                message: "m".into(),
            },
            || ops::Error::Approval {
                refusal: Refusal::TooManyRecords,
                message: "m".into(),
            },
        ];
        for error in errors {
            let api = ApiError::from(error());
            let public = error().public();
            assert_eq!(
                (
                    api.public().status.as_u16(),
                    api.public().name,
                    api.public().expose
                ),
                (public.status, public.name, public.expose),
                "{api:?}"
            );
            if public.expose {
                assert_eq!(api.to_string(), error().to_string());
            }
        }
    }

    #[test]
    fn every_kind_has_the_agents_status_and_name() {
        use datasource::{ConstraintViolation, Error as D};
        assert_eq!(
            status_and_name(&agent::Error::validation("x").into()),
            (400, "ValidationError")
        );
        assert_eq!(
            status_and_name(&D::Constraint(ConstraintViolation::Unique).into()),
            (400, "ValidationError")
        );
        assert_eq!(
            status_and_name(&D::MissingCollection("x".into()).into()),
            (400, "MissingCollectionError")
        );
        assert_eq!(
            status_and_name(&D::NoPrimaryKey.into()),
            (422, "NoPrimaryKeyError")
        );
        assert_eq!(
            status_and_name(&agent::Error::NotFound("x".into()).into()),
            (404, "NotFoundError")
        );
        assert_eq!(
            status_and_name(&auth::Error::MissingToken.into()),
            (401, "UnauthorizedError")
        );
        assert_eq!(
            status_and_name(&D::Internal("boom".into()).into()),
            (500, "InternalServerError")
        );
        assert_eq!(
            status_and_name(&ApiError::PayloadTooLarge),
            (413, "PayloadTooLargeError")
        );
    }

    async fn body(response: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn unexpected_errors_hide_their_message_unless_templated() {
        let error = || ApiError::from(datasource::Error::Internal("secret SQL".into()));
        assert_eq!(
            body(error().into_response()).await,
            json!({"errors":[{"name":"InternalServerError","detail":"Unexpected error","status":500}]})
        );
        let template = ErrorMessageTemplate::parse("Oops ({name})").unwrap();
        assert_eq!(
            body(customize(error().into_response(), Some(&template))).await["errors"][0]["detail"],
            "Oops (InternalServerError)"
        );
        let business = ApiError::from(agent::Error::validation("Missing timezone"));
        assert_eq!(
            body(customize(business.into_response(), Some(&template))).await["errors"][0]["detail"],
            "Missing timezone"
        );
    }
}
