//! The token endpoint's grants: an authorization code (PKCE-checked, single use) or a refresh
//! token (rotated at each use; a used one presented again revokes its whole family, RFC 9700
//! §4.14.2) exchanged for an audience-bound access token and a new refresh token.

use std::time::Duration;

use serde::Serialize;

use super::Mcp;
use super::oauth::{OAuthError, client_allowed, pkce_matches, same_resource};
use super::token::AccessClaims;
use crate::auth::SessionClaims;
use crate::auth::login::{code_hash, random_token};
use crate::platform::oauth::{CodeGrant, RefreshGrant, RefreshUse};

/// How long an authorization code may wait for its exchange.
pub const CODE_TTL: Duration = Duration::from_secs(60);

/// The token endpoint's success body (RFC 6749 §5.1).
#[derive(Debug, Clone, Serialize)]
pub struct Tokens {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: u64,
    pub refresh_token: String,
    pub scope: String,
}

fn server_error(error: impl std::fmt::Display) -> OAuthError {
    tracing::error!(%error, "MCP OAuth: the store failed");
    OAuthError::new(
        500,
        "server_error",
        "the authorization server failed; retry later",
    )
}

fn invalid_grant(description: &str) -> OAuthError {
    OAuthError::bad("invalid_grant", description)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Mcp {
    /// Looks a client up and applies `allowedOAuthClients`; `invalid_client` otherwise.
    pub async fn client(
        &self,
        client_id: &str,
    ) -> Result<crate::platform::oauth::OAuthClient, OAuthError> {
        let client = if super::cimd::is_document_url(client_id) {
            self.document_client(client_id).await?
        } else {
            self.store
                .oauth_client(client_id)
                .await
                .map_err(server_error)?
                .ok_or_else(|| {
                    OAuthError::bad("invalid_client", "unknown client_id: register first")
                })?
        };
        if let Some(allowed) = &self.config.allowed_oauth_clients
            && !client_allowed(allowed, &client.redirect_uris)
        {
            tracing::info!(client = %client.client_id, "MCP OAuth: a client outside allowedOAuthClients was refused");
            return Err(OAuthError::not_allowed());
        }
        Ok(client)
    }

    /// Issues the one-time code of a signed-in user for a validated request.
    pub async fn issue_code(
        &self,
        user_id: i64,
        request: &super::oauth::AuthorizeRequest,
    ) -> Result<String, OAuthError> {
        let code = random_token(32);
        let grant = CodeGrant {
            client_id: request.client_id.clone(),
            user_id,
            redirect_uri: request.redirect_uri.clone(),
            code_challenge: request.code_challenge.clone(),
            resource: request.resource.clone(),
            scope: request.scope.clone(),
        };
        self.store
            .create_oauth_code(&code_hash(&code), &grant, CODE_TTL)
            .await
            .map_err(server_error)?;
        Ok(code)
    }

    /// `grant_type=authorization_code`.
    pub async fn exchange_code(
        &self,
        param: impl Fn(&str) -> Option<String>,
        issuer: &str,
    ) -> Result<Tokens, OAuthError> {
        let required = |key: &str| {
            param(key)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| OAuthError::bad("invalid_request", format!("{key} is required")))
        };
        let code = required("code")?;
        let client_id = required("client_id")?;
        let verifier = required("code_verifier")?;
        let client = self.client(&client_id).await?;
        let Some(grant) = self
            .store
            .redeem_oauth_code(&code_hash(&code))
            .await
            .map_err(server_error)?
        else {
            return Err(invalid_grant(
                "the authorization code is unknown, expired or already used",
            ));
        };
        if grant.client_id != client.client_id {
            return Err(invalid_grant(
                "the authorization code was issued to another client",
            ));
        }
        if let Some(uri) = param("redirect_uri")
            && uri != grant.redirect_uri
        {
            return Err(invalid_grant(
                "redirect_uri differs from the authorization request's",
            ));
        }
        if !pkce_matches(&verifier, &grant.code_challenge) {
            return Err(invalid_grant(
                "code_verifier does not match the code_challenge",
            ));
        }
        if let Some(resource) = param("resource")
            && !same_resource(&resource, &grant.resource)
        {
            return Err(OAuthError::bad(
                "invalid_target",
                "resource differs from the authorization request's",
            ));
        }
        let family = self
            .store
            .start_oauth_grant(
                &client.client_id,
                grant.user_id,
                &grant.resource,
                &grant.scope,
            )
            .await
            .map_err(server_error)?;
        self.tokens(&family, issuer).await
    }

    /// `grant_type=refresh_token`.
    pub async fn refresh(
        &self,
        param: impl Fn(&str) -> Option<String>,
        issuer: &str,
    ) -> Result<Tokens, OAuthError> {
        let Some(presented) = param("refresh_token").filter(|v| !v.is_empty()) else {
            return Err(OAuthError::bad(
                "invalid_request",
                "refresh_token is required",
            ));
        };
        let family = match self
            .store
            .use_refresh_token(&code_hash(&presented))
            .await
            .map_err(server_error)?
        {
            RefreshUse::Valid(family) => family,
            RefreshUse::Reused(family) => {
                self.forget_family(&family.family_id);
                tracing::warn!(
                    client = %family.client_id,
                    user = family.user_id,
                    "MCP OAuth: a used refresh token was presented again; its sign-in is revoked"
                );
                return Err(invalid_grant(
                    "the refresh token was already used: the session is revoked, sign in again",
                ));
            }
            RefreshUse::Expired => return Err(invalid_grant("Refresh token has expired")),
            RefreshUse::Unknown => return Err(invalid_grant("the refresh token is not valid")),
        };
        if let Some(client_id) = param("client_id")
            && client_id != family.client_id
        {
            // Whoever holds it is not the client it was for.
            self.store
                .revoke_oauth_grant(&family.family_id)
                .await
                .map_err(server_error)?;
            self.forget_family(&family.family_id);
            return Err(OAuthError::bad(
                "invalid_client",
                "the refresh token was issued to another client",
            ));
        }
        self.client(&family.client_id).await?;
        self.tokens(&family, issuer).await
    }

    /// A new access token and refresh token of `family`, if its user may still sign in.
    async fn tokens(&self, family: &RefreshGrant, issuer: &str) -> Result<Tokens, OAuthError> {
        let user = self
            .store
            .user(family.user_id)
            .await
            .map_err(server_error)?
            .filter(|u| !u.disabled)
            .ok_or_else(|| invalid_grant("the user may no longer sign in"))?;
        let Some(team) = user.teams.first() else {
            return Err(invalid_grant("the user is in no team of this environment"));
        };
        let rendering_id = self
            .store
            .rendering_id(team.id)
            .await
            .map_err(server_error)?;
        // The session ends `refreshTokenSeconds` after the interactive sign-in, never later.
        let session_end = self.config.refresh_token_ttl.map(|ttl| {
            family
                .session_started_at
                .saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
        });
        let now = now_ms();
        let mut ttl = self.config.access_token_ttl;
        if let Some(end) = session_end {
            let left = u64::try_from((end - now).max(0) / 1000).unwrap_or(0);
            if left == 0 {
                return Err(invalid_grant("Refresh token has expired"));
            }
            ttl = ttl.min(Duration::from_secs(left));
        }
        let claims = AccessClaims {
            user: SessionClaims::for_user(&user, team, rendering_id),
            exp: 0,
            aud: family.resource.clone(),
            iss: issuer.to_owned(),
            scope: family.scope.clone(),
            client_id: family.client_id.clone(),
            fam: family.family_id.clone(),
            typ: String::new(),
        };
        let access_token = self.keys.mint(claims, ttl).map_err(server_error)?;
        let refresh_token = random_token(32);
        self.store
            .add_refresh_token(&code_hash(&refresh_token), &family.family_id, session_end)
            .await
            .map_err(server_error)?;
        Ok(Tokens {
            access_token,
            token_type: "Bearer",
            expires_in: ttl.as_secs(),
            refresh_token,
            scope: family.scope.clone(),
        })
    }
}
