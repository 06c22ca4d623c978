//! Middleware shared by every route: the request log with the correlation id, and CORS as the
//! agent's `@koa/cors` answers it (protocol §0).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument as _;
use uuid::Uuid;

use super::SharedState;
use super::error::{BeforeRoute, customize};

/// The response header carrying the request id (`caller.requestId`).
pub const CORRELATION_ID: &str = "x-forest-correlation-id";

/// The request id of one request. The agent only sends it back from routes that built a Caller,
/// so the extractor that builds one marks it used, and the header is added only then.
#[derive(Debug, Clone)]
pub struct RequestId {
    pub id: Uuid,
    used: Arc<AtomicBool>,
    /// The signed-in user the request acted as (0 until a Caller is built), for the log line.
    user: Arc<AtomicI64>,
}

impl RequestId {
    fn new() -> Self {
        Self {
            id: Uuid::new_v4(),
            used: Arc::new(AtomicBool::new(false)),
            user: Arc::new(AtomicI64::new(0)),
        }
    }

    /// Called when a Caller is built with this id.
    pub fn mark_used(&self) {
        self.used.store(true, Ordering::Relaxed);
    }

    /// Called when the request is known to act as user `id`: the request's log line names them.
    pub fn mark_user(&self, id: i64) {
        self.user.store(id, Ordering::Relaxed);
    }

    fn is_used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }
}

/// Outermost layer: gives the request its id, applies `customizeErrorMessage` to unexpected
/// errors, sets the correlation header, and logs one line (method, path, status, duration, id).
pub async fn request_log(
    State(state): State<SharedState>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let request_id = RequestId::new();
    request.extensions_mut().insert(request_id.clone());
    let method = request.method().clone();
    // A webhook's path is a credential: its MAC never reaches the log.
    let path = crate::workflows::webhook::redact_path(request.uri().path());
    let route = crate::metrics::route_family(&state.mount_path, &path);
    let span = request_span(&method, route, &path, request.headers());
    let response = next.run(request).instrument(span.clone()).await;
    let mut response = customize(response, state.customize_error_message.as_ref());
    // koa's own answers (no route, unreadable body) come before any caller in the agent.
    let before_route = response.extensions().get::<BeforeRoute>().is_some();
    let correlation_id = if request_id.is_used() && !before_route {
        let id = request_id.id.to_string();
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(CORRELATION_ID, value);
        }
        id
    } else {
        "-".to_owned()
    };
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    crate::metrics::metrics().http_request(route, status, elapsed);
    let duration_ms = elapsed.as_secs_f64() * 1000.0;
    // `-` for a request no user was authenticated for.
    let user = match request_id.user.load(Ordering::Relaxed) {
        0 => "-".to_owned(),
        id => id.to_string(),
    };
    if !span.is_none() {
        span.record("http.response.status_code", status);
        span.record("correlation_id", correlation_id.as_str());
        span.record("enduser.id", user.as_str());
        if status >= 500 {
            span.record("otel.status_code", "ERROR");
        }
    }
    // As the agent's logger: client errors at warn and server errors at error, so that a
    // `loggerLevel` of warn still shows failing requests.
    macro_rules! request_line {
        ($level:ident) => {
            tracing::$level!(
                target: "canopy::http",
                %method,
                %path,
                route,
                %user,
                status,
                duration_ms,
                correlation_id,
                "request"
            )
        };
    }
    match status {
        500.. => request_line!(error),
        400..=499 => request_line!(warn),
        _ => request_line!(info),
    }
    response
}

/// The span of one request, for the trace export (`logging::spans`); none otherwise, which
/// costs nothing. Named after the method and the route family of `/metrics` (`GET forest`, `POST
/// v1`): a bounded name, where the path's ids would make every name unique (the path is an
/// attribute, a webhook's MAC redacted). Continues the trace of the request's `traceparent`.
fn request_span(method: &Method, route: &str, path: &str, headers: &HeaderMap) -> tracing::Span {
    if !crate::logging::spans() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        target: "canopy::http",
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = %method,
        http.route = route,
        url.path = path,
        http.response.status_code = tracing::field::Empty,
        correlation_id = tracing::field::Empty,
        enduser.id = tracing::field::Empty,
    );
    #[cfg(feature = "otel")]
    crate::logging::otel::continue_trace(&span, headers);
    #[cfg(not(feature = "otel"))]
    let _ = headers;
    span
}

/// CORS as `@koa/cors` with `credentials: true, maxAge: 86400, privateNetworkAccess: true` and
/// `exposeHeaders: x-forest-correlation-id`: the origin and the requested headers are reflected,
/// and a preflight (OPTIONS with `Access-Control-Request-Method`) is answered 204 on every path,
/// before authentication. A request without `Origin` gets no CORS header at all.
///
/// Unlike the agent, `Access-Control-Allow-Credentials` is only sent to the origins of
/// `corsAllowedOrigins` (the Forest Admin application by default): the session cookie
/// authenticates a request, so with credentials reflected for any origin, any web page a user
/// visits could read the admin data with their cookie. Other origins still get CORS answers,
/// enough for a client that sends its token in `Authorization`.
pub async fn cors(State(state): State<SharedState>, request: Request, next: Next) -> Response {
    let Some(origin) = request.headers().get(header::ORIGIN).cloned() else {
        return next.run(request).await;
    };
    let credentials = state.cors_allows_credentials(&origin);
    let headers = request.headers();
    if request.method() == Method::OPTIONS
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return preflight(origin, headers, credentials);
    }
    let mut response = next.run(request).await;
    let out = response.headers_mut();
    out.append(header::VARY, HeaderValue::from_static("Origin"));
    out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    if credentials {
        out.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
    }
    out.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(CORRELATION_ID),
    );
    response
}

fn preflight(origin: HeaderValue, request: &HeaderMap, credentials: bool) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    out.insert(header::VARY, HeaderValue::from_static("Origin"));
    out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    if credentials {
        out.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
    }
    out.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    // @koa/cors's default method list.
    out.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET,HEAD,PUT,POST,DELETE,PATCH"),
    );
    if let Some(requested) = request.get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
        out.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested.clone());
    }
    // Chrome's Private Network Access: only answered when asked.
    if request
        .get("access-control-request-private-network")
        .is_some_and(|v| v == "true")
    {
        out.insert(
            "access-control-allow-private-network",
            HeaderValue::from_static("true"),
        );
    }
    response
}
