//! `POST {base}/oauth/token` (authorization code and refresh token grants, rate limited per
//! client address) and `POST {base}/oauth/register` (dynamic client registration, RFC 7591).

use axum::body::Bytes;
use axum::extract::{FromRequest as _, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::{Value as Json, json};

use super::super::SharedState;
use super::super::authentication::{client_ip, request_base};
use super::{oauth_json, too_many};
use crate::mcp::oauth::{OAuthError, registration, token_params};

fn answer(error: &OAuthError) -> Response {
    oauth_json(
        StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST),
        &error.body(),
    )
}

/// `POST {base}/oauth/token`, `application/x-www-form-urlencoded` (RFC 6749 §3.2).
pub(super) async fn token(State(state): State<SharedState>, request: Request) -> Response {
    let Some(mcp) = state.mcp.as_deref() else {
        return answer(&OAuthError::new(
            404,
            "not_found",
            "the MCP server is not mounted",
        ));
    };
    let ip = client_ip(&request);
    if let Err(retry) = mcp.check_token_rate(ip) {
        tracing::warn!(%ip, "MCP token endpoint rate limited");
        return too_many("requests", retry);
    }
    let base = request_base(request.headers(), request.uri());
    let json_body = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let Ok(body) = Bytes::from_request(request, &()).await else {
        return answer(&OAuthError::bad(
            "invalid_request",
            "the request body is too large",
        ));
    };
    let params = match token_params(json_body, &body) {
        Ok(params) => params,
        Err(error) => return answer(&error),
    };
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let issuer = mcp.issuer(&base);
    let result = match param("grant_type").as_deref() {
        Some("authorization_code") => mcp.exchange_code(param, &issuer).await,
        Some("refresh_token") => mcp.refresh(param, &issuer).await,
        Some(other) => Err(OAuthError::bad(
            "unsupported_grant_type",
            format!(
                "grant_type {other:?} is not supported: use authorization_code or refresh_token"
            ),
        )),
        None => Err(OAuthError::bad("invalid_request", "grant_type is required")),
    };
    match result {
        Ok(tokens) => oauth_json(StatusCode::OK, &json!(tokens)),
        Err(error) => {
            tracing::info!(%ip, error = error.error, description = %error.description, "MCP token request refused");
            answer(&error)
        }
    }
}

/// `POST {base}/oauth/register`: registers a public client; `201` with its `client_id` and the
/// metadata as the server kept it.
pub(super) async fn register(State(state): State<SharedState>, request: Request) -> Response {
    let Some(mcp) = state.mcp.as_deref() else {
        return answer(&OAuthError::new(
            404,
            "not_found",
            "the MCP server is not mounted",
        ));
    };
    let ip = client_ip(&request);
    // Registrations are rare: they spend the authorization quota, not a quota of their own.
    if let Err(retry) = mcp.check_authorize_rate(ip) {
        return too_many("requests", retry);
    }
    let Ok(body) = Bytes::from_request(request, &()).await else {
        return answer(&OAuthError::bad(
            "invalid_client_metadata",
            "the registration is too large",
        ));
    };
    let Ok(document) = serde_json::from_slice::<Json>(&body) else {
        return answer(&OAuthError::bad(
            "invalid_client_metadata",
            "the registration is not JSON",
        ));
    };
    let client = match registration(&document) {
        Ok(client) => client,
        Err(error) => return answer(&error),
    };
    match mcp.store.register_oauth_client(client).await {
        Ok(client) => {
            tracing::info!(client = %client.client_id, name = ?client.client_name, "MCP client registered");
            let mut body = match client.metadata {
                Json::Object(fields) => fields,
                _ => serde_json::Map::new(),
            };
            body.insert("client_id".to_owned(), json!(client.client_id));
            body.insert(
                "client_id_issued_at".to_owned(),
                json!(client.created_at / 1000),
            );
            oauth_json(StatusCode::CREATED, &Json::Object(body))
        }
        Err(error) => {
            tracing::error!(%error, "MCP client registration failed");
            answer(&OAuthError::new(
                500,
                "server_error",
                "the registration could not be stored",
            ))
        }
    }
}
