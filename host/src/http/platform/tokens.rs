//! `/v1/project/{project}/tokens[/{id}]`: a signed-in user's application tokens (issue 12 §1).
//! - `GET` lists the caller's live tokens: `{data: [{object: "token", id, name, scopes, hint,
//!   createdAt, lastUsedAt, expiresAt}]}`, never a secret;
//! - `POST {name, scopes, expiresAt?}` creates one: 201 with the same fields and `token`, the
//!   secret, shown this once;
//! - `DELETE …/{id}` revokes one: the owner's, or anyone's for an admin (204); the next request
//!   with it is refused on this instance, within `auth::tokens::CACHE_TTL` on the others.
//!
//! Any enabled user may manage their own tokens, with their session. A token may only manage
//! tokens if it holds `all`: a leaked `notes:read` token must not be able to mint itself a wider
//! one (docs/compatibility.md).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value as Json, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::listing::{iso, parse_date};
use super::{Body, Error, Fields as _, Result, SignedIn, no_content};
use crate::http::{SharedState, json, json_with};
use crate::ops;
use crate::platform::tokens::parse_scopes;
use crate::platform::{NewToken, Scope, Token};

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(revoke))
}

/// An application token as listed (never its secret).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Token)]
#[allow(dead_code, reason = "documentation only: token_json writes it")]
struct TokenSchema {
    /// Always `token`.
    object: String,
    id: String,
    name: String,
    /// `activity_logs:read`, `admin_logs:read`, `notes:read`, `notes:write`,
    /// `workflows:trigger` or `all`.
    scopes: Vec<String>,
    /// `cnp_…` and the secret's last four characters, to tell tokens apart.
    hint: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    last_used_at: Option<String>,
    #[schema(format = DateTime)]
    expires_at: Option<String>,
}

/// A token just made: the listed fields and, this once, the secret.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: create writes it")]
struct CreatedToken {
    object: String,
    id: String,
    name: String,
    scopes: Vec<String>,
    hint: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    last_used_at: Option<String>,
    #[schema(format = DateTime)]
    expires_at: Option<String>,
    /// The secret (`cnp_…`): shown once, never again.
    token: String,
}

/// `scopes`: a non-empty list of scope names.
fn scope_list() -> utoipa::openapi::schema::Schema {
    let names: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
    crate::http::openapi::schema(json!({
        "type": "array",
        "minItems": 1,
        "items": {"type": "string", "enum": names},
    }))
}

/// The caller's tokens.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: list writes it")]
struct TokenList {
    data: Vec<TokenSchema>,
}

/// A token to make.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "documentation only: create reads the body as JSON"
)]
struct NewTokenSchema {
    #[schema(min_length = 1)]
    name: String,
    /// At least one of `activity_logs:read`, `admin_logs:read`, `notes:read`, `notes:write`,
    /// `workflows:trigger`, `all`.
    #[schema(schema_with = scope_list)]
    scopes: Vec<String>,
    /// When it stops working (in the future); none by default.
    #[schema(format = DateTime)]
    expires_at: Option<String>,
}

/// A token as listed; optional dates are `null` when unset (the listing's columns are fixed).
pub fn token_json(token: &Token) -> Map<String, Json> {
    let mut out = Map::new();
    out.insert("object".into(), "token".into());
    out.insert("id".into(), token.id.clone().into());
    out.insert("name".into(), token.name.clone().into());
    out.insert(
        "scopes".into(),
        token
            .scopes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .into(),
    );
    out.insert("hint".into(), token.hint.clone().into());
    out.insert("createdAt".into(), iso(token.created_at).into());
    out.insert("lastUsedAt".into(), token.last_used_at.map(iso).into());
    out.insert("expiresAt".into(), token.expires_at.map(iso).into());
    out
}

/// The caller's application tokens (a session, or a token holding `all`).
#[utoipa::path(
    get,
    path = "/project/{project}/tokens",
    operation_id = "list_tokens",
    tag = "tokens",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
    ),
    responses((status = 200, description = "The caller's tokens", body = TokenList)),
)]
async fn list(
    State(state): State<SharedState>,
    caller: SignedIn,
    Path(project): Path<String>,
) -> Result<Response> {
    caller.require(Scope::All)?;
    caller.project(&project)?;
    let tokens = ops::tokens::mine(&state.ops, &caller.caller()).await?;
    let data: Vec<Json> = tokens.iter().map(|t| Json::Object(token_json(t))).collect();
    Ok(json(&json!({ "data": data })))
}

/// Makes an application token for the caller; the secret is in the answer, this once.
#[utoipa::path(
    post,
    path = "/project/{project}/tokens",
    operation_id = "create_token",
    tag = "tokens",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
    ),
    request_body = NewTokenSchema,
    responses((status = 201, description = "The new token and its secret", body = CreatedToken)),
)]
async fn create(
    State(state): State<SharedState>,
    caller: SignedIn,
    Path(project): Path<String>,
    body: Body,
) -> Result<Response> {
    caller.require(Scope::All)?;
    caller.project(&project)?;
    let Body(body) = body;
    body.only(&["name", "scopes", "expiresAt"])?;
    let name = body
        .string("name")?
        .ok_or_else(|| Error::field("name", "is required"))?;
    let scopes = body
        .strings("scopes")?
        .ok_or_else(|| Error::field("scopes", "is required (e.g. [\"notes:read\"])"))?;
    let scopes = parse_scopes(&scopes).map_err(|e| Error::field("scopes", e))?;
    let expires_at = match body.nullable_string("expiresAt")?.flatten() {
        None => None,
        Some(raw) => Some(
            parse_date(&raw)
                .ok_or_else(|| {
                    Error::field("expiresAt", format!("{raw:?} is not an ISO 8601 date"))
                })?
                .timestamp_millis(),
        ),
    };
    let new = NewToken {
        name,
        scopes,
        expires_at,
    };
    let (token, secret) = ops::tokens::create(&state.ops, &caller.caller(), new).await?;
    let mut out = token_json(&token);
    out.insert("token".into(), secret.expose().into());
    Ok(json_with(StatusCode::CREATED, &Json::Object(out)))
}

/// Revokes a token: the caller's own, or anyone's for an admin. It stops working at once.
#[utoipa::path(
    delete,
    path = "/project/{project}/tokens/{id}",
    operation_id = "revoke_token",
    tag = "tokens",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = String, Path, description = "The token's id"),
    ),
    responses((status = 204, description = "Revoked")),
)]
async fn revoke(
    State(state): State<SharedState>,
    caller: SignedIn,
    Path((project, id)): Path<(String, String)>,
) -> Result<Response> {
    caller.require(Scope::All)?;
    caller.project(&project)?;
    let verifier = state.tokens.as_deref();
    ops::tokens::revoke(&state.ops, &caller.caller(), &id, verifier).await?;
    Ok(no_content())
}
