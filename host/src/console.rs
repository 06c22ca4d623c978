//! The console: the browser UI people sign in to, served by the binary at `/{prefix}/console`.
//!
//! Server-rendered HTML (askama templates, checked by the compiler, escaped by default) with one
//! small stylesheet and one small script of our own, embedded in the binary (`assets`). Pages
//! are plain forms and links: every page works without the script, which only refines the filter
//! builder and reads the browser's timezone. Why this shape: docs/architecture.md "The console".
//!
//! - `session`: sign-in against the built-in users, the session cookie (the same session JWT as
//!   the agent's, under a cookie of its own), CSRF tokens, sign-out.
//! - `data`: every data call the console makes, through the same permission checks, scopes and
//!   activity entries as the `/forest` routes (the one file to swap for the operations layer).
//! - `pages`: the collection table, the record page, the edit form and the delete confirmation.
//! - `actions`: the actions' buttons, forms and results, and the inbox of approval requests.
//! - `charts`: dashboards, the charts of `[[dashboard.chart]]` drawn as inline SVG.
//! - `collab`: a record's collaboration panel (notes, activity, history, workflow runs).
//! - `admin`: the administration (application tokens, users; admins only) and everyone's own
//!   tokens.
//! - `view`: values as text and as form inputs, in the user's timezone; form values back to
//!   typed values.

mod actions;
mod admin;
mod assets;
mod charts;
mod collab;
mod data;
mod pages;
mod session;
mod view;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use crate::state::SharedState;

/// The console's path for a mount path `/{prefix}/forest`: `/{prefix}/console`.
pub fn base_path(mount_path: &str) -> String {
    format!(
        "{}/console",
        mount_path.strip_suffix("/forest").unwrap_or("")
    )
}

/// The console's pages under [`base_path`], and `/` redirecting there.
pub fn router(state: &SharedState) -> Router {
    let base = base_path(&state.mount_path);
    // Each part of the console is a module with its own routes.
    let pages = Router::new()
        .route("/assets/{name}", get(assets::serve))
        .merge(session::routes())
        .merge(pages::routes())
        .merge(actions::routes())
        .merge(charts::routes())
        .merge(collab::routes())
        .merge(admin::routes())
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(std::sync::Arc::clone(state));
    let target = format!("{base}/");
    Router::new()
        .route(
            "/",
            get(move || {
                let target = target.clone();
                async move { Redirect::to(&target) }
            }),
        )
        .nest(&base, pages)
}

/// The Content-Security-Policy of every console answer: nothing but our own script, stylesheet
/// and forms; no inline script or style, no framing, no other host.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'; connect-src 'self'";

/// An origin one answer's script may connect to beside the console's own (the webhook an
/// action's result asks the browser to call): added to that answer's `connect-src` only.
#[derive(Debug, Clone)]
pub(crate) struct ConnectTo(pub String);

/// Security headers on every console answer; pages (not the hashed assets) are never cached,
/// since they show one user's data.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    // `connect-src` is the CSP's last directive: an origin appended extends it, and only it.
    let csp = response
        .extensions()
        .get::<ConnectTo>()
        .and_then(|to| HeaderValue::from_str(&format!("{CSP} {}", to.0)).ok())
        .unwrap_or_else(|| HeaderValue::from_static(CSP));
    let out = response.headers_mut();
    out.insert(header::CONTENT_SECURITY_POLICY, csp);
    out.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    out.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    out.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !out.contains_key(header::CACHE_CONTROL) {
        out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Why a console page could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What an operation refuses or fails with (permissions, scopes, bad parameters): the one
    /// error of the operations layer, mapped here to the console's status and message.
    #[error(transparent)]
    Ops(crate::ops::Error),
    /// No such collection, record or relation (or out of the caller's scope).
    #[error("{0}")]
    NotFound(String),
    /// The form's CSRF token is missing or wrong, or the request came from another site.
    #[error(
        "This form has expired or did not come from this console. Reload the page and try again."
    )]
    Csrf,
    /// A page failed to render.
    #[error("the page could not be rendered")]
    Render(#[from] askama::Error),
}

impl Error {
    fn status(&self) -> StatusCode {
        match self {
            Self::Ops(error) => ops_status(error),
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Csrf => StatusCode::FORBIDDEN,
            Self::Render(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message shown to the user: the cause of a refusal, never the detail of an
    /// unexpected failure (logged instead).
    fn message(&self) -> String {
        match self {
            Self::Ops(crate::ops::Error::NotFound) => "There is no such page.".to_owned(),
            Self::Ops(error) => {
                let status = ops_status(error);
                if status == StatusCode::FORBIDDEN {
                    "You do not have the right to see or do this. Ask an administrator if you need it."
                        .to_owned()
                } else if status.is_client_error() {
                    error.to_string()
                } else {
                    "Unexpected error: the server could not answer. Try again later.".to_owned()
                }
            }
            other => other.to_string(),
        }
    }
}

/// The status of a page whose operation failed with `error`: missing things are 404, refusals
/// 401 or 403, what the user sent wrong 400 (its message is shown), anything else 500.
fn ops_status(error: &crate::ops::Error) -> StatusCode {
    use crate::agent::Error as A;
    use crate::datasource::Error as D;
    use crate::ops::Error as E;
    use crate::ops::approvals::Refusal;
    let datasource = |error: &D| match error {
        D::Forbidden(_) => StatusCode::FORBIDDEN,
        D::Validation(_)
        | D::Constraint(_)
        | D::MissingField(_)
        | D::MissingRelation(_)
        | D::Unprocessable(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    match error {
        E::NotFound
        | E::Agent(A::NotFound(_))
        | E::Approval {
            refusal: Refusal::NotFound,
            ..
        }
        | E::Platform(crate::platform::Error::NotFound(_)) => StatusCode::NOT_FOUND,
        E::Auth(e) if e.is_unauthorized() => StatusCode::UNAUTHORIZED,
        E::Auth(crate::auth::Error::Forbidden(_) | crate::auth::Error::InvalidScope(_)) => {
            StatusCode::FORBIDDEN
        }
        E::Agent(A::Validation(_) | A::Unprocessable(_) | A::Business(_))
        | E::Approval { .. }
        | E::Field { .. }
        | E::Platform(crate::platform::Error::Invalid(_) | crate::platform::Error::Conflict(_)) => {
            StatusCode::BAD_REQUEST
        }
        E::Datasource(e) | E::Agent(A::Datasource(e)) => datasource(e),
        E::Auth(_) | E::Platform(_) | E::Unavailable => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An operation's refusal as the console shows it: a thing of Canopy's store that does not
/// exist is a page of its own ("There is no user 7."), anything else keeps the operation's error.
impl From<crate::ops::Error> for Error {
    fn from(error: crate::ops::Error) -> Self {
        match error {
            crate::ops::Error::Platform(crate::platform::Error::NotFound(what)) => {
                Self::NotFound(format!("There is no {what}."))
            }
            other => Self::Ops(other),
        }
    }
}

impl From<crate::auth::Error> for Error {
    fn from(error: crate::auth::Error) -> Self {
        Self::Ops(error.into())
    }
}

impl From<crate::datasource::Error> for Error {
    fn from(error: crate::datasource::Error) -> Self {
        Self::Ops(error.into())
    }
}

impl From<crate::agent::Error> for Error {
    fn from(error: crate::agent::Error) -> Self {
        Self::Ops(error.into())
    }
}

/// Result alias of the console's handlers.
pub type Result<T> = std::result::Result<T, Error>;

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(error = %self, "console page failed");
        }
        pages::error_page(status, &self.message())
    }
}
