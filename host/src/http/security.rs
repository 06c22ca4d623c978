//! The agent's security routes beside login (protocol §1.1): the middleware every private route
//! passes (the IP whitelist of §5.7, and the users document: a removed or disabled user's live
//! token is refused), and `POST /scope-cache-invalidation`.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value as Json;

use super::caller::{Authenticated, VerifiedClaims};
use super::error::ApiError;
use super::{JsonBody, SharedState};
use crate::agent;

pub fn router() -> Router<SharedState> {
    Router::new().route("/scope-cache-invalidation", post(scope_cache_invalidation))
}

/// Paths (under the mount path) the agent serves before its JWT middleware: the healthcheck and
/// the login routes. Everything else is private.
fn is_public(path: &str) -> bool {
    path.is_empty()
        || path == "/"
        || path == "/authentication"
        || path.starts_with("/authentication/")
}

/// Runs before every private route, after authentication as the agent's chain does (JWT, then
/// IP whitelist): a request without a valid token goes on to the route, which answers the 401;
/// with one, the caller's address must pass the whitelist (403 `IP address rejected (<ip>)`),
/// and the caller must be an enabled user of the users document (403 `Forbidden`), whatever
/// the route. The verified claims are handed to the route, which does not verify them again.
/// Nothing is checked when permissions are not enforced.
pub async fn private_routes(
    State(state): State<SharedState>,
    request: Request,
    next: Next,
) -> Response {
    let permissions = &state.permissions;
    if !permissions.enforced() || is_public(request.uri().path()) {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(Authenticated(claims)) = <Authenticated as axum::extract::FromRequestParts<
        SharedState,
    >>::from_request_parts(&mut parts, &state)
    .await
    else {
        return next.run(Request::from_parts(parts, body)).await;
    };
    let socket = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(address)| address.ip());
    if let Err(error) = private_checks(&state, claims.id, &parts.headers, socket).await {
        return error.into_response();
    }
    parts.extensions.insert(VerifiedClaims(claims));
    next.run(Request::from_parts(parts, body)).await
}

/// What every private route checks of a signed-in user: the IP whitelist (§5.7), then that the
/// user is enabled (`Permissions::private_checks`, which the console's pages and the MCP tools
/// that read the datasource in process pass too).
pub(crate) async fn private_checks(
    state: &SharedState,
    user_id: i64,
    headers: &axum::http::HeaderMap,
    socket: Option<std::net::IpAddr>,
) -> Result<(), ApiError> {
    let forwarded = forwarded_for(headers);
    Ok(state
        .permissions
        .private_checks(user_id, forwarded.as_deref(), socket)
        .await?)
}

/// The raw `x-forwarded-for` text; several headers are joined with `, ` as Node joins them.
pub(super) fn forwarded_for(headers: &axum::http::HeaderMap) -> Option<String> {
    crate::auth::permissions::forwarded_for(
        headers
            .get_all("x-forwarded-for")
            .iter()
            .map(axum::http::HeaderValue::as_bytes),
    )
}

/// `POST /scope-cache-invalidation` `{renderingId}`: drops that rendering's cached copy (its
/// scopes, segments and charts are read again on the next request). 204; a body whose
/// `renderingId` is not a number (JavaScript's `Number(v)` is NaN) → 400 `Malformed body`.
async fn scope_cache_invalidation(
    State(state): State<SharedState>,
    _session: Authenticated,
    JsonBody(body): JsonBody,
) -> Result<StatusCode, ApiError> {
    let rendering_id = body
        .get("renderingId")
        .and_then(js_number)
        .ok_or_else(|| agent::Error::validation("Malformed body"))?;
    // A rendering id is an integer; another number names no rendering and drops nothing.
    if rendering_id.fract() == 0.0 && rendering_id.abs() < 9.007_199_254_740_992e15 {
        state.permissions.invalidate_rendering(rendering_id as i64);
    }
    Ok(StatusCode::NO_CONTENT)
}

/// JavaScript's `Number(value)` for JSON values, `None` for NaN.
fn js_number(value: &Json) -> Option<f64> {
    let number = match value {
        Json::Null => 0.0,
        Json::Bool(b) => f64::from(u8::from(*b)),
        Json::Number(n) => n.as_f64()?,
        Json::String(s) => {
            let s = s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
            if s.is_empty() {
                0.0
            } else if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16).ok()? as f64
            } else if matches!(s, "Infinity" | "+Infinity") {
                f64::INFINITY
            } else if s == "-Infinity" {
                f64::NEG_INFINITY
            } else if s.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) {
                s.parse().ok()?
            } else {
                return None;
            }
        }
        // `Number([])` is 0, `Number([x])` is `Number(String(x))`; objects are NaN.
        Json::Array(items) => match items.as_slice() {
            [] => 0.0,
            [item] if !item.is_object() && !item.is_array() => js_number(item)?,
            _ => return None,
        },
        Json::Object(_) => return None,
    };
    (!number.is_nan()).then_some(number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rendering_ids_read_as_javascript_numbers() {
        assert_eq!(js_number(&json!(12)), Some(12.0));
        assert_eq!(js_number(&json!("12")), Some(12.0));
        assert_eq!(js_number(&json!(" 7 ")), Some(7.0));
        assert_eq!(js_number(&json!(null)), Some(0.0));
        assert_eq!(js_number(&json!("")), Some(0.0));
        assert_eq!(js_number(&json!(true)), Some(1.0));
        assert_eq!(js_number(&json!([3])), Some(3.0));
        assert_eq!(js_number(&json!("0x10")), Some(16.0));
        assert_eq!(js_number(&json!("abc")), None);
        assert_eq!(js_number(&json!({})), None);
        assert_eq!(js_number(&json!([1, 2])), None);
    }

    #[test]
    fn public_paths_are_the_healthcheck_and_login() {
        for path in ["", "/", "/authentication", "/authentication/callback"] {
            assert!(is_public(path), "{path}");
        }
        for path in ["/orders", "/scope-cache-invalidation", "/authenticationx"] {
            assert!(!is_public(path), "{path}");
        }
    }
}
