//! The HTTP server: the axum router that merges every route family's `router()` under the mount
//! path, the shared middleware (request log and correlation id, CORS, panics, body limit), and
//! the one place errors become responses (`error`).
//!
//! `router(state)` serves the tests (`tower::ServiceExt::oneshot`); `canopy serve` serves
//! `router_with(state, console::router(…))` (composed by `app`: http never names the console)
//! behind `reload::router`, which swaps whole generations of it, and serves that with
//! `server::serve` (request head size, header read and keep-alive timeouts).

pub(crate) mod action;
mod api_chart;
pub mod approvals;
mod audit;
mod authentication;
mod caller;
mod capabilities;
pub(crate) mod collection;
pub mod error;
pub mod executor;
mod health;
mod healthcheck;
pub mod liana;
pub mod mcp;
mod middleware;
mod modification;
pub mod openapi;
mod platform;
pub mod ratelimit;
pub(crate) mod related;
pub mod reload;
pub(crate) mod security;
pub mod server;
mod stats;
pub mod workflows;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;

pub use approvals::ApprovalSettings;
pub use caller::{CallerContext, JsonBody};
pub use error::{ApiError, ApiResult};

/// The served generation's state, which every transport shares (`crate::state`).
pub use crate::state::{AppState, SharedState, WorkflowSteps};

/// The `Content-Type` of every JSON answer: koa writes the charset, and clients compare the
/// whole header.
pub const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// A `200` JSON response of bytes already written (JSON:API documents).
fn json_bytes(body: Vec<u8>) -> axum::response::Response {
    json_bytes_with(axum::http::StatusCode::OK, body)
}

/// A JSON response of bytes already written, with this status.
fn json_bytes_with(status: axum::http::StatusCode, body: Vec<u8>) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static(JSON_CONTENT_TYPE),
        )],
        body,
    )
        .into_response()
}

/// A `200` JSON response of this value. Every JSON answer goes through here or `json_bytes`
/// (`axum::Json` is a disallowed type: it omits the charset).
pub fn json(value: &impl serde::Serialize) -> axum::response::Response {
    json_with(axum::http::StatusCode::OK, value)
}

/// A JSON response of this value, with this status.
pub fn json_with(
    status: axum::http::StatusCode,
    value: &impl serde::Serialize,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match serde_json::to_vec(value) {
        Ok(body) => json_bytes_with(status, body),
        // Only a map with non-string keys fails, and no route builds one.
        Err(error) => {
            tracing::error!(%error, "a JSON answer could not be written");
            axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// koa's router matches a route with or without one trailing slash (`/forest/` is the
/// healthcheck): the slash is dropped before routing.
fn trim_trailing_slash(mut request: axum::extract::Request) -> axum::extract::Request {
    let uri = request.uri();
    let Some(path) = uri.path().strip_suffix('/').filter(|p| !p.is_empty()) else {
        return request;
    };
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    let Ok(path_and_query) = axum::http::uri::PathAndQuery::try_from(path_and_query) else {
        return request;
    };
    parts.path_and_query = Some(path_and_query);
    if let Ok(trimmed) = axum::http::Uri::from_parts(parts) {
        *request.uri_mut() = trimmed;
    }
    request
}

/// The agent's router sends no `Allow` header (it has no `allowedMethods()`); axum adds one to
/// the answer of a method that a path does not serve. A 405 keeps it: only `/v1` answers 405
/// (the agent's routes answer 404), and RFC 9110 §15.5.6 requires `Allow` there.
fn without_allow(mut response: axum::response::Response) -> axum::response::Response {
    if response.status() != axum::http::StatusCode::METHOD_NOT_ALLOWED {
        response.headers_mut().remove(axum::http::header::ALLOW);
    }
    response
}

/// The whole HTTP API. Layers run outside in: request log (and correlation id), CORS (so that
/// preflights are answered on every path before anything else), panic catcher, body limit.
pub fn router(state: SharedState) -> Router {
    router_with(state, Router::new())
}

/// [`router`] with `pages` served beside the data routes, under the same middleware (request
/// log, CORS, body limit, panics answered): the composition root (`app`) mounts the browser
/// console this way, so that `http` and `console`, transports side by side, never import each
/// other. `pages` is not served when only MCP is (`mcp.only`).
pub fn router_with(state: SharedState, pages: Router) -> Router {
    let mount_path = state.mount_path.clone();
    let json_limit = state.json_limit;
    let forest = Router::new()
        .merge(healthcheck::router())
        .merge(authentication::router())
        .merge(collection::router())
        .merge(modification::router())
        .merge(related::router())
        .merge(stats::router())
        .merge(capabilities::router())
        .merge(action::router(state.use_unsafe_action_endpoint))
        .merge(api_chart::router())
        .merge(security::router())
        .merge(audit::router(&state))
        .merge(executor::router(&state))
        // Set once every route is merged: it applies to the routes present.
        .method_not_allowed_fallback(error::forest_not_found)
        .fallback(error::forest_not_found)
        // After the fallbacks, so that a path without a route is IP-checked too, as the agent's
        // middleware runs before its router finds none.
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            security::private_routes,
        ))
        .with_state(Arc::clone(&state));
    // The public API `/v1`: rate limited as a whole, its 404 and 405 answers included.
    let limited = || axum::middleware::from_fn_with_state(Arc::clone(&state), ratelimit::limit);
    let data = Router::new()
        .nest(&mount_path, forest)
        // Every `/v1` route (admin API, approval requests, tokens, notes, logs) with its OpenAPI
        // document.
        .nest(
            &platform::base_path(&mount_path),
            openapi::router(Arc::clone(&state), &platform::base_path(&mount_path)).layer(limited()),
        );
    // MCP tools call the operations themselves (`crate::mcp`); its routes only mount them.
    let routes = if state.mcp.as_ref().is_some_and(|m| m.config.only) {
        mcp::only(&state)
    } else {
        data.merge(mcp::router(&state))
            // The browser console (`/{prefix}/console`, and `/` redirecting there).
            .merge(pages)
            .fallback(error::not_found)
    };
    // `/healthz`, `/readyz` and `/metrics` at the root, whatever else is served.
    let routes = routes.merge(health::router().with_state(Arc::clone(&state)));
    let routes = liana::around(&state, routes);
    // Trimmed before routing, which layers added to `routes` itself would follow.
    let routes = tower::ServiceExt::map_request(routes, trim_trailing_slash);
    Router::new()
        .fallback_service(tower::ServiceExt::map_response(routes, without_allow))
        .layer(DefaultBodyLimit::max(json_limit))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            error::panic_response,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            middleware::cors,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state,
            middleware::request_log,
        ))
}
