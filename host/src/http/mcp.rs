//! The MCP server's routes (`mcp`): `POST /mcp` (the rmcp service of `crate::mcp::server`
//! behind our bearer check, which hands the tools the signed-in `McpCaller`), the OAuth authorization server (`/oauth/authorize`, `/oauth/token`,
//! `/oauth/register`), its RFC 8414 and RFC 9728 metadata, and the upload URLs of action files.
//! With a `basePath` every route but the metadata moves under it; without one, the whole
//! `/oauth/*` and `/.well-known/*` namespaces are the MCP server's, and what it does not serve
//! there is a 404 (or a 405 for a known path and another method).

mod authorize;
mod token;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{any, get, post, post_service, put};
use serde_json::{Value as Json, json};

pub(crate) use authorize::{is_mcp_login, resume};

use super::SharedState;
use super::authentication::request_base;
use crate::mcp::uploads::UploadError;
use crate::mcp::{DEFAULT_SCOPE, Mcp, McpCaller, SCOPES};

/// The MCP routes, or an empty router when the server is not mounted: the protocol service of
/// `crate::mcp::server` behind the bearer check, the OAuth endpoints, the metadata.
pub fn router(state: &SharedState) -> Router {
    let Some(mcp) = state.mcp.as_ref() else {
        return Router::new();
    };
    let paths = mcp.paths();
    let service = crate::mcp::server::service(state, mcp);
    let protocol = post_service(
        tower::ServiceBuilder::new()
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(state),
                bearer,
            ))
            .service(service),
    )
    .fallback(method_not_allowed);
    let mut router = Router::new()
        .route(&paths.mcp, protocol)
        .route(
            &paths.authorize,
            get(authorize::page)
                .post(authorize::submit)
                .fallback(method_not_allowed),
        )
        .route(
            &paths.token,
            post(token::token).fallback(method_not_allowed),
        )
        .route(
            &paths.register,
            post(token::register).fallback(method_not_allowed),
        )
        .route(
            &paths.authorization_server,
            get(authorization_server).fallback(method_not_allowed),
        )
        .route(
            &paths.protected_resource,
            get(protected_resource).fallback(method_not_allowed),
        );
    if let Some(uploads) = &mcp.uploads {
        let limit = usize::try_from(uploads.settings.max_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        router = router.route(
            &format!("{}/{{key}}", paths.uploads),
            put(upload)
                .fallback(method_not_allowed)
                .layer(DefaultBodyLimit::max(limit)),
        );
    }
    router = if paths.base.is_empty() {
        // Root mode: the namespaces are the MCP server's (the spec's route claim), and clients
        // that try the root protected-resource document first find it.
        router
            .route(
                "/.well-known/oauth-protected-resource",
                get(protected_resource).fallback(method_not_allowed),
            )
            .route("/.well-known/{*rest}", any(not_served))
            .route("/oauth/{*rest}", any(not_served))
            .route("/mcp/{*rest}", any(not_served))
    } else {
        router
            .route(&format!("{}/oauth/{{*rest}}", paths.base), any(not_served))
            .route(&format!("{}/mcp/{{*rest}}", paths.base), any(not_served))
    };
    router.with_state(Arc::clone(state))
}

/// An OAuth-shaped JSON error.
pub(super) fn oauth_json(status: StatusCode, body: &Json) -> Response {
    let mut response = super::json_with(status, body);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The 429 of the OAuth endpoints, with `Retry-After`; `what` names what came too often.
pub(super) fn too_many(what: &str, retry: u64) -> Response {
    let mut response = oauth_json(
        StatusCode::TOO_MANY_REQUESTS,
        &json!({"error": "too_many_requests", "error_description": format!("Too many {what}: retry after {retry} seconds.")}),
    );
    if let Ok(value) = HeaderValue::from_str(&retry.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

async fn not_served(uri: Uri) -> Response {
    oauth_json(
        StatusCode::NOT_FOUND,
        &json!({"error": "not_found", "error_description": format!("{} is not served by this MCP server", uri.path())}),
    )
}

async fn method_not_allowed(method: Method) -> Response {
    let mut response = oauth_json(
        StatusCode::METHOD_NOT_ALLOWED,
        &json!({
            "error": "method_not_allowed",
            "error_description": format!("The method {method} is not allowed for this endpoint")
        }),
    );
    // Every MCP route but the metadata and the authorization endpoint takes POST; those say
    // what they take themselves (axum fills `Allow` for a route it knows), so this is the rest.
    response
        .headers_mut()
        .entry(header::ALLOW)
        .or_insert(HeaderValue::from_static("POST"));
    response
}

/// The MCP service, or the 404 of a router built without one (boxed: a response is large).
fn mcp_of(state: &SharedState) -> Result<&Mcp, Box<Response>> {
    state.mcp.as_deref().ok_or_else(|| {
        Box::new(oauth_json(
            StatusCode::NOT_FOUND,
            &json!({"error": "not_found", "error_description": "the MCP server is not mounted"}),
        ))
    })
}

/// RFC 8414 metadata.
async fn authorization_server(
    State(state): State<SharedState>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let mcp = match mcp_of(&state) {
        Ok(mcp) => mcp,
        Err(response) => return *response,
    };
    let base = request_base(&headers, &uri);
    let root = mcp.base_url(&base);
    let paths = mcp.paths();
    super::json(&json!({
        "issuer": mcp.issuer(&base),
        "authorization_endpoint": format!("{root}{}", paths.authorize),
        "token_endpoint": format!("{root}{}", paths.token),
        "registration_endpoint": format!("{root}{}", paths.register),
        "scopes_supported": SCOPES,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
        "service_documentation": "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization",
    }))
}

/// RFC 9728 metadata of `/mcp`.
async fn protected_resource(
    State(state): State<SharedState>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let mcp = match mcp_of(&state) {
        Ok(mcp) => mcp,
        Err(response) => return *response,
    };
    let base = request_base(&headers, &uri);
    super::json(&json!({
        "resource": mcp.resource(&base),
        "authorization_servers": [mcp.issuer(&base)],
        "scopes_supported": SCOPES,
        "bearer_methods_supported": ["header"],
        "resource_name": "Canopy",
    }))
}

/// The 401 (or 403) of `/mcp`, with the challenge that points clients at the metadata. Its
/// `scope` is what clients then ask for: the default grant, so that a client that asks for what
/// the challenge says can also upload files (`mcp:action`).
fn challenge(mcp: &Mcp, base: &str, status: StatusCode, error: Option<(&str, &str)>) -> Response {
    let metadata = format!("{}{}", mcp.base_url(base), mcp.paths().protected_resource);
    let mut value = String::from("Bearer ");
    if let Some((code, description)) = error {
        value.push_str(&format!(
            "error=\"{code}\", error_description=\"{description}\", "
        ));
    }
    value.push_str(&format!(
        "scope=\"{DEFAULT_SCOPE}\", resource_metadata=\"{metadata}\""
    ));
    let body = match error {
        Some((code, description)) => json!({"error": code, "error_description": description}),
        None => {
            json!({"error": "invalid_token", "error_description": "Missing Authorization header"})
        }
    };
    let mut response = oauth_json(status, &body);
    if let Ok(value) = HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The bearer check of `POST /mcp`: an MCP access token issued for this server's URL, with
/// `mcp:read`. Session tokens of `/forest` and tokens of another resource are refused.
async fn bearer(State(state): State<SharedState>, mut request: Request, next: Next) -> Response {
    let mcp = match mcp_of(&state) {
        Ok(mcp) => mcp,
        Err(response) => return *response,
    };
    let base = request_base(request.headers(), request.uri());
    let presented = match request.headers().get(header::AUTHORIZATION) {
        None => return challenge(mcp, &base, StatusCode::UNAUTHORIZED, None),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty() && !t.contains(' ')),
    };
    let Some(presented) = presented else {
        return challenge(
            mcp,
            &base,
            StatusCode::UNAUTHORIZED,
            Some((
                "invalid_token",
                "Invalid Authorization header format, expected 'Bearer TOKEN'",
            )),
        );
    };
    let claims = match mcp.keys.verify(presented, &mcp.resource(&base)) {
        Ok(claims) => claims,
        Err(refusal) => {
            return challenge(
                mcp,
                &base,
                StatusCode::UNAUTHORIZED,
                Some(("invalid_token", refusal.description())),
            );
        }
    };
    if mcp.family_revoked(&claims.fam).await {
        return challenge(
            mcp,
            &base,
            StatusCode::UNAUTHORIZED,
            Some(("invalid_token", "The sign-in of this token was revoked")),
        );
    }
    if !claims.scope.split(' ').any(|s| s == "mcp:read") {
        return challenge(
            mcp,
            &base,
            StatusCode::FORBIDDEN,
            Some(("insufficient_scope", "The token lacks the mcp:read scope")),
        );
    }
    request.extensions_mut().insert(McpCaller { claims, base });
    next.run(request).await
}

/// `PUT {base}/mcp/uploads/{key}`: the bytes of one reserved upload. The URL is the credential
/// (unguessable, single use, short-lived), as a presigned storage URL is.
async fn upload(
    State(state): State<SharedState>,
    Path(key): Path<String>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let Some(uploads) = state.mcp.as_ref().and_then(|m| m.uploads.as_ref()) else {
        return not_served(Uri::from_static("/mcp/uploads")).await;
    };
    let result = match body {
        Ok(bytes) => uploads.put(&key, bytes.to_vec()).await,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            Err(UploadError::TooLarge(uploads.settings.max_bytes))
        }
        Err(rejection) => Err(UploadError::Io(rejection.body_text())),
    };
    let (status, code) = match &result {
        Ok(()) => return super::json(&json!({"stored": true, "key": key})),
        Err(UploadError::Unknown) => (StatusCode::NOT_FOUND, "not_found"),
        Err(UploadError::Used) => (StatusCode::CONFLICT, "upload_url_used"),
        Err(UploadError::TooLarge(_)) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
        Err(UploadError::Full) => (StatusCode::INSUFFICIENT_STORAGE, "storage_full"),
        Err(UploadError::Handle(_)) => (StatusCode::BAD_REQUEST, "invalid_request"),
        Err(UploadError::Io(error)) => {
            tracing::error!(%error, "MCP upload failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "server_error")
        }
    };
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    super::json_with(
        status,
        &json!({"error": code, "error_description": message}),
    )
}

/// The served routes of `canopy mcp` (`serve --mcp-only`): the MCP namespaces, nothing else.
pub fn only(state: &SharedState) -> Router {
    router(state).fallback(not_served)
}
