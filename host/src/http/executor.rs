//! `ALL {prefix}/forest/_internal/executor/*`: the agent's proxy to a workflow executor
//! (platform-api.md §1.10), mounted only when `workflowExecutorUrl` is set (else those paths are
//! the agent's 404). A private route: a valid user session is required (401 without), and the
//! private-routes middleware has already checked the IP whitelist and that the user is enabled.
//!
//! The request is forwarded verbatim to the executor's root (method, query, raw body bytes,
//! headers but the hop-by-hop ones, `Host` and `Content-Length`), and its answer comes back the
//! same way, within 120 s. The SSRF guard: the path after `executor/` may not climb (`..`, an
//! encoded dot `%2e`, a backslash, NUL, a leading `/` that would make it protocol-relative),
//! and the URL built from it must still have the executor's origin and sit below its path.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::any;

use super::SharedState;
use super::caller::Authenticated;
use super::error::ApiError;

/// Where the proxied paths live, below the mount path.
const PREFIX: &str = "/_internal/executor";
/// How long the executor may take to answer.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The executor proxy of one process.
#[derive(Debug)]
pub struct ExecutorProxy {
    /// `workflowExecutorUrl`, ending with `/`.
    base: reqwest::Url,
    client: reqwest::Client,
}

impl ExecutorProxy {
    /// The proxy to `url` (an http(s) URL, checked by the configuration).
    pub fn new(url: &str) -> Result<Self, String> {
        let with_slash = if url.ends_with('/') {
            url.to_owned()
        } else {
            format!("{url}/")
        };
        let base =
            reqwest::Url::parse(&with_slash).map_err(|e| format!("workflowExecutorUrl: {e}"))?;
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            // The executor's redirects are the client's business, never followed here (a
            // redirect could lead anywhere).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("the executor's HTTP client: {e}"))?;
        Ok(Self { base, client })
    }

    /// The executor URL of `tail` (the path after `executor/`, raw) and `query`, or `None` when
    /// the SSRF guard refuses it.
    pub fn target(&self, tail: &str, query: Option<&str>) -> Option<reqwest::Url> {
        let lower = tail.to_ascii_lowercase();
        if tail.starts_with('/')
            || tail.contains("..")
            || lower.contains("%2e")
            || lower.contains("%5c")
            || lower.contains("%00")
            || lower.contains("%2f")
            || tail.contains('\\')
            || tail.contains('\0')
        {
            return None;
        }
        let mut target = self.base.join(tail).ok()?;
        target.set_query(query);
        (target.origin() == self.base.origin() && target.path().starts_with(self.base.path()))
            .then_some(target)
    }
}

/// The proxy's routes (none without an executor).
pub fn router(state: &SharedState) -> Router<SharedState> {
    if state.workflow_executor.is_none() {
        return Router::new();
    }
    Router::new()
        .route(PREFIX, any(proxy))
        .route(&format!("{PREFIX}/"), any(proxy))
        .route(&format!("{PREFIX}/{{*path}}"), any(proxy))
}

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus those the
/// client of the next hop sets itself.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

fn forwarded(headers: &HeaderMap) -> HeaderMap {
    // Headers the `Connection` header names are hop-by-hop too.
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let lower = name.as_str();
        if HOP_BY_HOP.contains(&lower)
            || lower == "content-length"
            || named.iter().any(|n| n == lower)
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

async fn proxy(
    State(state): State<SharedState>,
    Authenticated(claims): Authenticated,
    request: Request,
) -> Response {
    let Some(executor) = &state.workflow_executor else {
        return ApiError::RouteNotFound.into_response();
    };
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    let tail = path
        .find(PREFIX)
        .map(|at| &path[at + PREFIX.len()..])
        .unwrap_or_default();
    let tail = tail.strip_prefix('/').unwrap_or(tail);
    let Some(target) = executor.target(tail, parts.uri.query()) else {
        tracing::warn!(
            user = claims.id,
            "executor proxy: a path that climbs out was refused"
        );
        return ApiError::from(crate::agent::Error::validation("Invalid executor path"))
            .into_response();
    };
    let Ok(body) = axum::body::to_bytes(body, state.json_limit).await else {
        return ApiError::PayloadTooLarge.into_response();
    };
    let sent = executor
        .client
        .request(parts.method.clone(), target)
        .headers(forwarded(&parts.headers))
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(error) => {
            let status = if error.is_timeout() {
                StatusCode::GATEWAY_TIMEOUT
            } else {
                StatusCode::BAD_GATEWAY
            };
            tracing::error!(%error, "executor proxy: the executor did not answer");
            return (status, status.canonical_reason().unwrap_or("Bad Gateway")).into_response();
        }
    };
    let status = answer.status();
    let headers = forwarded(answer.headers());
    match answer.bytes().await {
        Ok(bytes) => {
            let mut response = Response::new(Body::from(bytes));
            *response.status_mut() = status;
            for (name, value) in &headers {
                if let Ok(name) = HeaderName::from_bytes(name.as_str().as_bytes()) {
                    response.headers_mut().append(name, value.clone());
                }
            }
            response
        }
        Err(error) => {
            tracing::error!(%error, "executor proxy: the executor's answer broke off");
            (StatusCode::BAD_GATEWAY, "Bad Gateway").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_climb_out_or_change_origin_are_refused() {
        let proxy = ExecutorProxy::new("http://127.0.0.1:3400/base").unwrap();
        let ok = proxy.target("runs/12/trigger", Some("a=1")).unwrap();
        assert_eq!(
            ok.as_str(),
            "http://127.0.0.1:3400/base/runs/12/trigger?a=1"
        );
        assert_eq!(
            proxy.target("", None).unwrap().as_str(),
            "http://127.0.0.1:3400/base/"
        );
        for bad in [
            "../admin",
            "runs/../../x",
            "%2e%2e/x",
            "%2E%2E/x",
            "runs\\..\\x",
            "runs%5cx",
            "a\0b",
            "a%00b",
            "/evil.example/x",
            "//evil.example/x",
            "a%2f..%2fb",
        ] {
            assert_eq!(proxy.target(bad, None), None, "{bad:?}");
        }
        // A tail that parses as an absolute URL changes the origin: refused.
        assert_eq!(proxy.target("http://evil.example/x", None), None);
    }

    #[test]
    fn hop_by_hop_host_and_length_are_not_forwarded() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "canopy"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("content-length", "3"),
            ("transfer-encoding", "chunked"),
            ("authorization", "Bearer t"),
            ("x-custom", "yes"),
        ] {
            headers.insert(
                HeaderName::from_static(name),
                axum::http::HeaderValue::from_static(value),
            );
        }
        let out = forwarded(&headers);
        let names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["authorization", "x-custom"]);
    }
}
