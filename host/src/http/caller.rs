//! Extractors of the data routes: the authenticated `Caller` with the request's query string,
//! and a JSON body read under the `jsonLimit`.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use serde_json::Value as Json;
use uuid::Uuid;

use super::SharedState;
use super::error::ApiError;
use super::middleware::RequestId;
use crate::agent::query_string::{QueryString, parse_timezone};
use crate::auth::session::session_cookie;
use crate::auth::{self, SessionClaims};
use crate::datasource::Caller;

/// Who is asking (session token → claims, `?timezone=`, request id) and the decoded query string.
/// Extracting it is authentication: a route that takes it answers 401 without a valid token.
#[derive(Debug, Clone)]
pub struct CallerContext {
    pub caller: Caller,
    pub query: QueryString,
}

impl FromRequestParts<SharedState> for CallerContext {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &SharedState,
    ) -> Result<Self, Self::Rejection> {
        // The agent checks the JWT (middleware) before any route reads its timezone.
        let Authenticated(claims) = Authenticated::from_request_parts(parts, state).await?;
        let query = QueryString::parse(parts.uri.query().unwrap_or(""));
        let timezone = parse_timezone(&query)?;
        let request_id = match parts.extensions.get::<RequestId>() {
            Some(request_id) => {
                request_id.mark_used();
                request_id.mark_user(claims.id);
                request_id.id
            }
            // Only without the request-log layer (never with `http::router`).
            None => Uuid::new_v4(),
        };
        Ok(Self {
            caller: claims.into_caller(timezone, request_id).with_context_url(
                parts
                    .headers
                    .get("forest-context-url")
                    .and_then(|value| value.to_str().ok()),
            ),
            query,
        })
    }
}

/// The session claims alone, for the routes that build no `Caller` and so need no `?timezone=`
/// (`/_internal/capabilities`). Extracting it is authentication, as with [`CallerContext`].
#[derive(Debug, Clone)]
pub struct Authenticated(pub SessionClaims);

/// Claims the private-routes middleware (`security`) already verified for this request.
#[derive(Debug, Clone)]
pub struct VerifiedClaims(pub SessionClaims);

impl FromRequestParts<SharedState> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &SharedState,
    ) -> Result<Self, Self::Rejection> {
        // Taken, not cloned: a second extractor of the same request verifies again.
        if let Some(VerifiedClaims(claims)) = parts.extensions.remove::<VerifiedClaims>() {
            return Ok(Self(claims));
        }
        let cookie = cookie_header(&parts.headers);
        if cookie.as_deref().and_then(session_cookie).is_some() {
            refuse_cross_site_post(parts)?;
        }
        let authorization = match parts.headers.get(header::AUTHORIZATION) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| auth::Error::BadAuthorizationHeader)?,
            ),
        };
        let claims = state
            .session
            .authenticate(cookie.as_deref(), authorization)?;
        Ok(Self(claims))
    }
}

/// A browser sends the session cookie with any request to this host, a form posted from another
/// site on the same domain (another port, a sibling subdomain: `SameSite` does not stop those)
/// included. Such a "simple" request can only be a POST with a form or `text/plain` body, or no
/// body; every other method and content type needs a CORS preflight this server never grants.
/// So a POST signed in by the cookie must say its body is JSON, which no cross-site form can.
/// The agent parses no `text/plain` body and so acts on `{}`; Canopy refuses it
/// (docs/compatibility.md).
fn refuse_cross_site_post(parts: &Parts) -> Result<(), ApiError> {
    if parts.method != Method::POST {
        return Ok(());
    }
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .is_some_and(|essence| essence == "application/json" || essence.ends_with("+json"));
    if json {
        Ok(())
    } else {
        Err(auth::Error::Forbidden(
            "A request signed in by the session cookie must send its body as JSON \
             (Content-Type: application/json)"
                .to_owned(),
        )
        .into())
    }
}

/// Every `Cookie` header joined as one (HTTP/2 clients may split them); `None` if absent or not
/// text.
pub(super) fn cookie_header(headers: &HeaderMap) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join("; "))
}

/// A JSON request body; an empty body reads as `{}` as the agent's body parser gives it.
/// Over `jsonLimit` → 413, not JSON → 400, both in the agent's envelope.
#[derive(Debug, Clone)]
pub struct JsonBody(pub Json);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::BadRequest(e.body_text())
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(Json::Object(serde_json::Map::new())));
        }
        serde_json::from_slice(&bytes)
            .map(Self)
            .map_err(|e| ApiError::BadRequest(format!("Invalid JSON body: {e}")))
    }
}
