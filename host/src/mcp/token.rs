//! MCP access tokens: HS256 JWTs that carry the user's session claims (what a tool call acts as)
//! plus the audience, issuer, scopes, client and refresh family they were issued for.
//!
//! They are signed with a key derived from the auth secret, not with the secret itself: an agent
//! session token (signed with the secret) is then not an MCP token, and an MCP token is not a
//! session token of `/forest`, whatever their claims say. The audience is checked too, so a
//! token issued for another `resource` (RFC 8707) is refused.
//!
//! Verified tokens are remembered until their `exp`, as session tokens are: a client sends the
//! same token with every call, and verifying it once is enough.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::auth::SessionClaims;

/// What the derived signing key is for; changing it invalidates every MCP token.
const KEY_PURPOSE: &[u8] = b"canopy mcp access token v1";
/// Verified tokens remembered at once (see `auth::session`).
const VERIFIED_TOKENS: usize = 4096;

/// The claims of an MCP access token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessClaims {
    /// The user, as a session token has them (`iat` and `exp` included); nested rather than
    /// flattened, which serde reads several times faster.
    #[serde(rename = "usr")]
    pub user: SessionClaims,
    /// Expiry (seconds since the epoch), the user's `exp` again where the JWT library looks.
    #[serde(default)]
    pub exp: u64,
    /// The canonical MCP URL the token was issued for (RFC 8707 `resource`).
    pub aud: String,
    /// The authorization server that issued it.
    pub iss: String,
    /// Granted scopes, space separated.
    pub scope: String,
    pub client_id: String,
    /// The refresh family (one interactive sign-in of one client).
    pub fam: String,
    /// Marks the token kind, so that no other token signed with this key passes for one.
    pub typ: String,
}

/// The kind marker of access tokens.
const ACCESS: &str = "mcp-access";

/// Why a presented token was refused (the `error_description` of the 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Expired,
    Invalid,
}

impl Refusal {
    pub fn description(self) -> &'static str {
        match self {
            Self::Expired => "Access token has expired",
            Self::Invalid => "Invalid access token",
        }
    }
}

/// Mints and verifies access tokens.
pub struct AccessKeys {
    encoding: EncodingKey,
    /// The HMAC keyed with the signing key, cloned for each verification.
    mac: Hmac<Sha256>,
    verified: quick_cache::sync::Cache<Box<str>, Arc<AccessClaims>>,
}

impl std::fmt::Debug for AccessKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKeys").finish_non_exhaustive()
    }
}

impl AccessKeys {
    pub fn new(auth_secret: &str) -> Self {
        let key = derive(auth_secret, KEY_PURPOSE);
        let Ok(mac) = Hmac::<Sha256>::new_from_slice(&key) else {
            unreachable!("HMAC takes a key of any length")
        };
        Self {
            encoding: EncodingKey::from_secret(&key),
            mac,
            verified: quick_cache::sync::Cache::new(VERIFIED_TOKENS),
        }
    }

    /// Signs an access token valid for `ttl` from now.
    pub fn mint(&self, mut claims: AccessClaims, ttl: Duration) -> Result<String, String> {
        claims.user.iat = jsonwebtoken::get_current_timestamp();
        claims.user.exp = claims.user.iat.saturating_add(ttl.as_secs());
        claims.exp = claims.user.exp;
        claims.typ = ACCESS.to_owned();
        encode(&Header::new(Algorithm::HS256), &claims, &self.encoding).map_err(|e| e.to_string())
    }

    /// Verifies a token for `audience`: signature, `exp`, kind and audience.
    pub fn verify(&self, token: &str, audience: &str) -> Result<Arc<AccessClaims>, Refusal> {
        let now = jsonwebtoken::get_current_timestamp();
        if let Some(claims) = self.verified.get(token) {
            return if now >= claims.user.exp {
                Err(Refusal::Expired)
            } else if claims.aud == audience {
                Ok(claims)
            } else {
                Err(Refusal::Invalid)
            };
        }
        let claims = Arc::new(self.decode(token, now)?);
        if claims.aud != audience {
            return Err(Refusal::Invalid);
        }
        self.verified.insert(token.into(), Arc::clone(&claims));
        Ok(claims)
    }

    /// Checks the HS256 signature over `header.payload`, then reads the claims once.
    /// (`jsonwebtoken::decode` parses the header, sets the key up again and reads the claims
    /// twice, once for its own checks: the better half of a first verification.) The header's
    /// `alg` is not looked at: the signature is checked as HS256 with this key whatever it says.
    fn decode(&self, token: &str, now: u64) -> Result<AccessClaims, Refusal> {
        let (message, signature) = token.rsplit_once('.').ok_or(Refusal::Invalid)?;
        let (_, payload) = message.split_once('.').ok_or(Refusal::Invalid)?;
        // HS256: HMAC-SHA256 from the keyed state prepared once, compared in constant time.
        let tag = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| Refusal::Invalid)?;
        let mut mac = self.mac.clone();
        mac.update(message.as_bytes());
        mac.verify_slice(&tag).map_err(|_| Refusal::Invalid)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| Refusal::Invalid)?;
        let claims: AccessClaims = serde_json::from_slice(&bytes).map_err(|_| Refusal::Invalid)?;
        if claims.typ != ACCESS {
            return Err(Refusal::Invalid);
        }
        if now >= claims.exp {
            return Err(Refusal::Expired);
        }
        Ok(claims)
    }
}

/// A key for one purpose, derived from the auth secret (HMAC-SHA256 of the purpose).
pub fn derive(secret: &str, purpose: &[u8]) -> Vec<u8> {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        // HMAC takes a key of any length.
        return purpose.to_vec();
    };
    mac.update(purpose);
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(aud: &str) -> AccessClaims {
        AccessClaims {
            user: SessionClaims {
                id: 7,
                email: "ada@example.com".into(),
                first_name: "Ada".into(),
                last_name: "L".into(),
                team: "Ops".into(),
                team_id: Some(1),
                role: "Editor".into(),
                role_id: Some(2),
                permission_level: crate::datasource::PermissionLevel::User,
                rendering_id: 3,
                tags: Default::default(),
                iat: 0,
                exp: 0,
            },
            exp: 0,
            aud: aud.into(),
            iss: "http://localhost:3351".into(),
            scope: "mcp:read".into(),
            client_id: "mcp_x".into(),
            fam: "f".into(),
            typ: String::new(),
        }
    }

    const AUD: &str = "http://localhost:3351/mcp";

    #[test]
    fn a_minted_token_verifies_for_its_audience_only() {
        let keys = AccessKeys::new("secret-secret-secret");
        let token = keys.mint(claims(AUD), Duration::from_secs(60)).unwrap();
        let verified = keys.verify(&token, AUD).unwrap();
        assert_eq!(verified.user.id, 7);
        assert_eq!(verified.scope, "mcp:read");
        // Twice: the second from memory, same answer.
        assert!(keys.verify(&token, AUD).is_ok());
        assert_eq!(
            keys.verify(&token, "http://other/mcp").unwrap_err(),
            Refusal::Invalid
        );
        let fresh = AccessKeys::new("secret-secret-secret");
        assert_eq!(
            fresh.verify(&token, "http://other/mcp").unwrap_err(),
            Refusal::Invalid
        );
    }

    #[test]
    fn a_session_token_or_another_secret_is_not_an_mcp_token() {
        let keys = AccessKeys::new("secret-secret-secret");
        let session = crate::auth::session::mint(
            "secret-secret-secret",
            claims(AUD).user,
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(keys.verify(&session, AUD).unwrap_err(), Refusal::Invalid);
        let other = AccessKeys::new("another-secret")
            .mint(claims(AUD), Duration::from_secs(60))
            .unwrap();
        assert_eq!(keys.verify(&other, AUD).unwrap_err(), Refusal::Invalid);
        assert_eq!(keys.verify("garbage", AUD).unwrap_err(), Refusal::Invalid);
    }

    #[test]
    fn an_expired_token_is_refused_as_expired() {
        let keys = AccessKeys::new("secret-secret-secret");
        let mut expired = claims(AUD);
        expired.user.iat = 1;
        expired.user.exp = 2;
        expired.exp = 2;
        expired.typ = ACCESS.into();
        let token = encode(&Header::new(Algorithm::HS256), &expired, &keys.encoding).unwrap();
        assert_eq!(keys.verify(&token, AUD).unwrap_err(), Refusal::Expired);
    }
}
