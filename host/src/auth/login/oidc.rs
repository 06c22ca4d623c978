//! Sign-in through an OpenID Connect provider: discovery (once, retried until it succeeds),
//! the authorization code flow with PKCE, nonce and state, ID token validation (signature,
//! issuer, audience, expiry, nonce), the userinfo claims, and the Canopy user those claims stand
//! for: matched by email or created, with their teams and role mapped from configured claims.
//! Every change made from claims is logged as the identity provider's (`Actor::IdentityProvider`).

use std::borrow::Cow;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreGenderClaim, CoreProviderMetadata,
};
use openidconnect::{
    AdditionalClaims, AuthType, AuthorizationCode, ClientId, ClientSecret, CsrfToken,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, IssuerUrl, Nonce, OAuth2TokenResponse as _,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope, TokenResponse as _,
    UserInfoClaims,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::config::OidcConfig;
use crate::datasource::PermissionLevel;
use crate::platform::{self, Actor, NewUser, Store, User, UserChange};

/// The client once the provider's metadata is discovered.
type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a step with the provider failed.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider answered with an OAuth error (`invalid_grant`, `access_denied`…).
    #[error("{error}: {}", description.as_deref().unwrap_or(""))]
    Provider {
        error: String,
        description: Option<String>,
    },
    /// The provider could not be reached, or answered something unusable (a bad ID token).
    #[error("{0}")]
    Unavailable(String),
}

/// Every claim the provider gave beyond the standard ones.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct ExtraClaims {
    #[serde(flatten)]
    claims: Map<String, Json>,
}

impl AdditionalClaims for ExtraClaims {}

/// One configured OpenID provider.
pub struct Provider {
    config: OidcConfig,
    /// The workspace's reqwest, without redirects (OAuth endpoints must not be followed blindly).
    http: reqwest::Client,
    client: tokio::sync::OnceCell<Client>,
}

impl Provider {
    pub fn new(config: OidcConfig) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot build the OpenID Connect HTTP client: {e}"))?;
        Ok(Self {
            config,
            http,
            client: tokio::sync::OnceCell::new(),
        })
    }

    pub fn issuer(&self) -> &str {
        &self.config.issuer_url
    }

    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// The client, discovering the provider on first use; a failed discovery is retried by the
    /// next sign-in rather than remembered.
    async fn client(&self) -> Result<&Client, OidcError> {
        self.client
            .get_or_try_init(|| async {
                let issuer = IssuerUrl::new(self.config.issuer_url.clone())
                    .map_err(|e| OidcError::Unavailable(format!("issuer URL: {e}")))?;
                let metadata = CoreProviderMetadata::discover_async(issuer, &self.http)
                    .await
                    .map_err(|e| {
                        OidcError::Unavailable(format!(
                            "discovery of {} failed: {}",
                            self.config.issuer_url,
                            chain(&e)
                        ))
                    })?;
                // `client_secret_basic` is the default; a provider that lists only `_post`
                // gets the secret in the body.
                let post_only = metadata
                    .token_endpoint_auth_methods_supported()
                    .is_some_and(|methods| {
                        let names: Vec<String> = methods
                            .iter()
                            .map(|m| serde_json::to_value(m).unwrap_or_default().to_string())
                            .collect();
                        !names.iter().any(|n| n.contains("client_secret_basic"))
                            && names.iter().any(|n| n.contains("client_secret_post"))
                    });
                let mut client = CoreClient::from_provider_metadata(
                    metadata,
                    ClientId::new(self.config.client_id.clone()),
                    self.config
                        .client_secret
                        .as_ref()
                        .map(|s| ClientSecret::new(s.expose().to_owned())),
                );
                if post_only || self.config.client_secret.is_none() {
                    client = client.set_auth_type(AuthType::RequestBody);
                }
                tracing::info!(issuer = %self.config.issuer_url, "OpenID provider discovered");
                Ok(client)
            })
            .await
    }

    /// The provider's authorization URL for a login request.
    pub async fn authorization_url(
        &self,
        redirect_uri: &str,
        state: &str,
        pkce_verifier: &str,
        nonce: &str,
    ) -> Result<String, OidcError> {
        let client = self.client().await?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned())
            .map_err(|e| OidcError::Unavailable(format!("redirect URI: {e}")))?;
        let challenge = PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(
            pkce_verifier.to_owned(),
        ));
        let (state, nonce) = (state.to_owned(), nonce.to_owned());
        let (url, _, _) = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                move || CsrfToken::new(state),
                move || Nonce::new(nonce),
            )
            // `openid` is always sent by the library.
            .add_scopes(
                self.config
                    .scopes
                    .iter()
                    .filter(|s| *s != "openid")
                    .map(|s| Scope::new(s.clone())),
            )
            .set_pkce_challenge(challenge)
            .set_redirect_uri(Cow::Owned(redirect))
            .url();
        Ok(url.into())
    }

    /// Exchanges the provider's code, validates the ID token against `nonce`, and returns every
    /// claim of the ID token and of the userinfo endpoint (the ID token's win).
    pub async fn exchange(
        &self,
        redirect_uri: &str,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
    ) -> Result<Map<String, Json>, OidcError> {
        let client = self.client().await?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned())
            .map_err(|e| OidcError::Unavailable(format!("redirect URI: {e}")))?;
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| OidcError::Unavailable(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
            .set_redirect_uri(Cow::Owned(redirect))
            .request_async(&self.http)
            .await
            .map_err(|e| match e {
                RequestTokenError::ServerResponse(response) => OidcError::Provider {
                    error: response.error().as_ref().to_owned(),
                    description: response.error_description().cloned(),
                },
                other => {
                    OidcError::Unavailable(format!("the token endpoint failed: {}", chain(&other)))
                }
            })?;
        let id_token = response.id_token().ok_or_else(|| {
            OidcError::Unavailable("the provider answered without an ID token".to_owned())
        })?;
        let verified = id_token
            .claims(&client.id_token_verifier(), &Nonce::new(nonce.to_owned()))
            .map_err(|e| OidcError::Unavailable(format!("invalid ID token: {}", chain(&e))))?;
        let subject = verified.subject().clone();
        // The signature and claims are verified above; the raw payload keeps the provider's
        // own claims (groups, roles) that the typed claims drop.
        let mut claims = jwt_payload(&id_token.to_string()).ok_or_else(|| {
            OidcError::Unavailable("the ID token's payload is not JSON".to_owned())
        })?;
        if client.user_info_url().is_some() {
            let request = client
                .user_info(response.access_token().clone(), Some(subject))
                .map_err(|e| OidcError::Unavailable(e.to_string()))?;
            let info: UserInfoClaims<ExtraClaims, CoreGenderClaim> =
                request.request_async(&self.http).await.map_err(|e| {
                    OidcError::Unavailable(format!("the userinfo endpoint failed: {}", chain(&e)))
                })?;
            if let Ok(Json::Object(extra)) = serde_json::to_value(&info) {
                for (key, value) in extra {
                    claims.entry(key).or_insert(value);
                }
            }
        }
        Ok(claims)
    }
}

/// The JSON payload of a compact JWT.
fn jwt_payload(token: &str) -> Option<Map<String, Json>> {
    let payload = token.split('.').nth(1)?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?).ok()
}

/// An error with its sources, for logs and descriptions.
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        out.push_str(": ");
        out.push_str(&e.to_string());
        source = e.source();
    }
    out
}

/// A claim as a list of strings: a string is a list of one, other values are skipped.
fn strings(value: Option<&Json>) -> Vec<String> {
    match value {
        Some(Json::String(s)) => vec![s.clone()],
        Some(Json::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

fn claim_str<'a>(claims: &'a Map<String, Json>, name: &str) -> Option<&'a str> {
    claims
        .get(name)
        .and_then(Json::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Why claims do not make a user who may sign in; the text is shown as `error_description`.
#[derive(Debug, thiserror::Error)]
pub enum ClaimsError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] platform::Error),
}

/// The Canopy user these claims stand for: the user with this email, their role and teams set
/// from the mapped claims when those name existing roles and teams; or a new user (permission
/// level `user`) with the mapped or default role and team.
pub async fn sync_user(
    store: &Store,
    config: &OidcConfig,
    claims: &Map<String, Json>,
) -> Result<User, ClaimsError> {
    let email = claim_str(claims, "email").ok_or_else(|| {
        ClaimsError::Refused(
            "The identity provider gave no email address (is the `email` scope allowed?)."
                .to_owned(),
        )
    })?;
    // Matching by email is only safe when the provider vouches for it.
    let unverified = match claims.get("email_verified") {
        Some(Json::Bool(verified)) => !verified,
        Some(Json::String(s)) => s == "false",
        _ => false,
    };
    if unverified {
        return Err(ClaimsError::Refused(
            "The identity provider has not verified this email address.".to_owned(),
        ));
    }
    let roles = store.roles().await?;
    let teams = store.teams().await?;
    let mapped_role = config.role_claim.as_ref().and_then(|claim| {
        let named = strings(claims.get(claim));
        let role = named
            .iter()
            .find_map(|name| roles.iter().find(|r| &r.name == name));
        if role.is_none() && !named.is_empty() {
            tracing::warn!(claim, ?named, "no Canopy role has the name the claim gives");
        }
        role.map(|r| r.name.clone())
    });
    let mapped_teams: Vec<String> = config.team_claim.as_ref().map_or_else(Vec::new, |claim| {
        let mut out: Vec<String> = Vec::new();
        for name in strings(claims.get(claim)) {
            if teams.iter().any(|t| t.name == name) && !out.contains(&name) {
                out.push(name);
            }
        }
        out
    });
    match store.user_by_email(email).await? {
        Some(user) => update_user(store, user, mapped_role, mapped_teams).await,
        None => {
            let (first_name, last_name) = names(claims, email);
            let role = mapped_role.or_else(|| {
                config
                    .default_role
                    .clone()
                    .filter(|name| roles.iter().any(|r| &r.name == name))
            });
            let teams = if mapped_teams.is_empty() {
                config
                    .default_team
                    .clone()
                    .filter(|name| teams.iter().any(|t| &t.name == name))
                    .into_iter()
                    .collect()
            } else {
                mapped_teams
            };
            let created = store
                .create_user(
                    &Actor::IdentityProvider,
                    NewUser {
                        email: email.to_owned(),
                        first_name,
                        last_name,
                        permission_level: PermissionLevel::User,
                        role,
                        teams,
                        ..NewUser::default()
                    },
                )
                .await;
            match created {
                Ok(user) => Ok(user),
                // A concurrent first sign-in created them: use that one.
                Err(platform::Error::Conflict(_)) => store
                    .user_by_email(email)
                    .await?
                    .ok_or_else(|| ClaimsError::Refused("The user could not be created.".into())),
                Err(error) => Err(error.into()),
            }
        }
    }
}

/// Applies the mapped role and teams to an existing user, when they differ.
async fn update_user(
    store: &Store,
    user: User,
    role: Option<String>,
    teams: Vec<String>,
) -> Result<User, ClaimsError> {
    let current_teams: Vec<&str> = user.teams.iter().map(|t| t.name.as_str()).collect();
    let mut change = UserChange::default();
    let mut changed = false;
    if let Some(role) = role
        && user.role.as_ref().map(|r| r.name.as_str()) != Some(role.as_str())
    {
        change.role = Some(Some(role));
        changed = true;
    }
    if !teams.is_empty() && current_teams != teams {
        change.teams = Some(teams);
        changed = true;
    }
    if !changed {
        return Ok(user);
    }
    Ok(store
        .update_user(&Actor::IdentityProvider, user.id, change)
        .await?)
}

/// First and last names: `given_name` and `family_name`, else `name` split at its first space,
/// else the email's local part.
fn names(claims: &Map<String, Json>, email: &str) -> (String, String) {
    let given = claim_str(claims, "given_name");
    let family = claim_str(claims, "family_name");
    if given.is_some() || family.is_some() {
        return (
            given.unwrap_or_default().to_owned(),
            family.unwrap_or_default().to_owned(),
        );
    }
    if let Some(name) = claim_str(claims, "name") {
        return match name.split_once(' ') {
            Some((first, last)) => (first.to_owned(), last.trim().to_owned()),
            None => (name.to_owned(), String::new()),
        };
    }
    (
        email.split('@').next().unwrap_or(email).to_owned(),
        String::new(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(value: Json) -> Map<String, Json> {
        match value {
            Json::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn names_come_from_the_claims_the_provider_gives() {
        let claims = map(json!({"given_name": "Ada", "family_name": "Lovelace", "name": "x y"}));
        assert_eq!(names(&claims, "a@b.c"), ("Ada".into(), "Lovelace".into()));
        let claims = map(json!({"name": "Grace Brewster Hopper"}));
        assert_eq!(
            names(&claims, "a@b.c"),
            ("Grace".into(), "Brewster Hopper".into())
        );
        assert_eq!(names(&Map::new(), "sam@b.c"), ("sam".into(), String::new()));
    }

    #[test]
    fn claims_read_as_lists() {
        assert_eq!(strings(Some(&json!("Ops"))), ["Ops"]);
        assert_eq!(strings(Some(&json!(["Ops", 3, "Sales"]))), ["Ops", "Sales"]);
        assert!(strings(Some(&json!({"a": 1}))).is_empty());
        assert!(strings(None).is_empty());
    }

    #[test]
    fn jwt_payloads_decode() {
        let payload = URL_SAFE_NO_PAD.encode(br#"{"sub":"1","groups":["a"]}"#);
        let claims = jwt_payload(&format!("h.{payload}.s")).unwrap();
        assert_eq!(claims["groups"], json!(["a"]));
        assert!(jwt_payload("nope").is_none());
    }
}
