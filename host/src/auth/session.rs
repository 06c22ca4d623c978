//! The end-user session token: the HMAC-signed JWT the Node agent issues after login (protocol
//! §4.2 claims, §4.3 verification), how a request carries it, how it becomes a `Caller`, and how
//! `canopy token` mints one for local use.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono_tz::Tz;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{
    Algorithm, AlgorithmFamily, DecodingKey, EncodingKey, Header, Validation, decode, encode,
};
use serde::{Deserialize, Deserializer, Serialize};
use uuid::Uuid;

use super::{Error, Result};
use crate::datasource::Caller;
pub use crate::datasource::PermissionLevel;

/// The cookie the agent's login flow sets; it wins over the `Authorization` header.
pub const COOKIE_NAME: &str = "forest_session_token";

/// The claims of a session token (§4.2). Claims not listed here (for example `serverToken`) are
/// ignored, as the agent's data routes ignore them.
///
/// Only `id`, `email` and `exp` are required: the agent builds the token from the Forest server's
/// user record and drops absent fields (`team` for a user without teams), so a missing or `null`
/// descriptive claim reads as empty rather than rejecting a token the agent would accept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionClaims {
    /// Forest user id; every permission look-up uses it.
    pub id: i64,
    pub email: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub first_name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub last_name: String,
    /// The user's first team.
    #[serde(default, deserialize_with = "null_as_default")]
    pub team: String,
    /// The id of that team. The agent's tokens do not carry it (it reads it from the rendering
    /// on the Forest server); Canopy reads it from the token when present, for
    /// `currentUser.team.id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_id: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub role: String,
    /// The role's id, for `currentUser.roleId`: the agent's test client puts it in its tokens;
    /// the agent itself reads it from the Forest server's user list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_id: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub permission_level: PermissionLevel,
    /// Rendering (team × environment) that scopes and charts are looked up for.
    #[serde(default, deserialize_with = "null_as_default")]
    pub rendering_id: i64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub tags: BTreeMap<String, String>,
    /// Issued at, in seconds since the epoch.
    #[serde(default)]
    pub iat: u64,
    /// Expiry, in seconds since the epoch; the token is refused from this second on.
    pub exp: u64,
}

/// Reads `null` like an absent claim; serde's `default` alone only covers absence.
fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl SessionClaims {
    /// The claims of a stored user as a member of `team` (their first team), whose rendering in
    /// this environment is `rendering_id`: what sign-in puts in a token, and what a workflow run
    /// or an MCP call acts as. `iat` and `exp` are set when minting.
    pub fn for_user(
        user: &crate::platform::User,
        team: &crate::platform::Team,
        rendering_id: i64,
    ) -> Self {
        Self {
            id: user.id,
            email: user.email.clone(),
            first_name: user.first_name.clone(),
            last_name: user.last_name.clone(),
            team: team.name.clone(),
            team_id: Some(team.id),
            role: user
                .role
                .as_ref()
                .map(|r| r.name.clone())
                .unwrap_or_default(),
            role_id: user.role.as_ref().map(|r| r.id),
            permission_level: user.permission_level,
            rendering_id,
            tags: user.tags.clone(),
            iat: 0,
            exp: 0,
        }
    }

    /// The `Caller` of a request made with these claims, in the request's `?timezone=` and with
    /// its correlation id.
    pub fn into_caller(self, timezone: Tz, request_id: Uuid) -> Caller {
        Caller {
            id: self.id,
            email: self.email,
            first_name: self.first_name,
            last_name: self.last_name,
            team: self.team,
            team_id: self.team_id,
            role: self.role,
            role_id: self.role_id,
            permission_level: self.permission_level,
            rendering_id: self.rendering_id,
            tags: self.tags,
            timezone,
            request_id,
            project: None,
            environment: None,
        }
    }
}

/// Most verified tokens remembered at once; past it the cache evicts the coldest. A few
/// thousand users' sessions fit, and a flood of distinct valid tokens cannot grow memory.
const VERIFIED_TOKENS: usize = 4096;

/// The auth secret, prepared once for verifying and minting session tokens.
pub struct SessionKey {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    /// Tokens already verified, with their claims, served until their `exp`. A client sends the
    /// same token with every request, and base64, HMAC and JSON for it were a measurable part
    /// of a short list's CPU. Keyed by the whole token text, so a token differing in any byte
    /// (a tampered signature) is verified in full.
    verified: quick_cache::sync::Cache<Box<str>, Arc<SessionClaims>>,
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys hold the secret; never print them.
        f.debug_struct("SessionKey").finish_non_exhaustive()
    }
}

impl SessionKey {
    pub fn new(secret: &str) -> Self {
        // What the agent's jsonwebtoken 9 does with an HMAC secret: HS256, HS384 and HS512.
        let mut validation = Validation::new_for_family(AlgorithmFamily::Hmac);
        // Node's jsonwebtoken has no clock leeway and refuses a token from its `exp` second on
        // (`now >= exp`); this crate refuses when `exp - reject < now - leeway`, so 0 and 1.
        validation.leeway = 0;
        validation.reject_tokens_expiring_in_less_than = 1;
        // Node checks `nbf` whenever it is present; this crate only when asked.
        validation.validate_nbf = true;
        // The agent configures no audience, and Node then ignores `aud`; this crate would refuse
        // any token carrying one.
        validation.validate_aud = false;
        Self {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            validation,
            verified: quick_cache::sync::Cache::new(VERIFIED_TOKENS),
        }
    }

    /// Verifies a token's signature, algorithm and `exp`, and reads its claims. A token verified
    /// before is answered from memory while `now < exp`; from its `exp` second on it is verified
    /// again, which refuses it as expired.
    pub fn verify(&self, token: &str) -> Result<SessionClaims> {
        if let Some(claims) = self.verified.get(token)
            && jsonwebtoken::get_current_timestamp() < claims.exp
        {
            return Ok(SessionClaims::clone(&claims));
        }
        match decode::<SessionClaims>(token, &self.decoding, &self.validation) {
            Ok(data) => {
                self.verified
                    .insert(token.into(), Arc::new(data.claims.clone()));
                Ok(data.claims)
            }
            Err(error) if matches!(error.kind(), ErrorKind::ExpiredSignature) => {
                Err(Error::ExpiredToken)
            }
            Err(error) => Err(Error::InvalidToken(error)),
        }
    }

    /// Authenticates a request from its raw `Cookie` and `Authorization` header values.
    pub fn authenticate(
        &self,
        cookie: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<SessionClaims> {
        self.verify(resolve_token(cookie, authorization)?)
    }

    /// Signs `claims` with HS256 (the agent's choice), setting `iat` to now and `exp` to now +
    /// `ttl`; whatever `iat` and `exp` the claims held are replaced.
    pub fn mint(&self, mut claims: SessionClaims, ttl: Duration) -> Result<String> {
        claims.iat = jsonwebtoken::get_current_timestamp();
        claims.exp = claims.iat.saturating_add(ttl.as_secs());
        encode(&Header::new(Algorithm::HS256), &claims, &self.encoding).map_err(Error::Mint)
    }
}

/// Signs a session token with the auth secret; see [`SessionKey::mint`].
pub fn mint(secret: &str, claims: SessionClaims, ttl: Duration) -> Result<String> {
    SessionKey::new(secret).mint(claims, ttl)
}

/// Finds the token of a request as koa-jwt does: a non-empty `forest_session_token` cookie first
/// (the header is then not looked at, even if malformed), else `Authorization: Bearer <token>`.
pub fn resolve_token<'a>(
    cookie: Option<&'a str>,
    authorization: Option<&'a str>,
) -> Result<&'a str> {
    if let Some(token) = cookie.and_then(session_cookie) {
        return Ok(token);
    }
    // koa-jwt treats an empty header like an absent one.
    let Some(authorization) = authorization.filter(|value| !value.is_empty()) else {
        return Err(Error::MissingToken);
    };
    // koa-jwt trims, then splits on single spaces: two spaces make three parts, which it refuses.
    let mut parts = authorization.trim().split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(scheme), Some(token), None) if scheme.eq_ignore_ascii_case("bearer") => Ok(token),
        _ => Err(Error::BadAuthorizationHeader),
    }
}

/// The first `forest_session_token` pair of a `Cookie` header, if non-empty. Pairs the cookie
/// crate cannot read are skipped, as browsers and the `cookies` npm module do.
pub fn session_cookie(header: &str) -> Option<&str> {
    cookie::Cookie::split_parse(header)
        .filter_map(std::result::Result::ok)
        .find(|pair| pair.name() == COOKIE_NAME)
        .and_then(|pair| pair.value_raw())
        .filter(|value| !value.is_empty())
}

/// Reads a token lifetime for `canopy token --expires`: a positive whole number followed by `s`,
/// `m`, `h` or `d` ("3600s", "30m", "1h", "2d").
pub fn parse_ttl(input: &str) -> Result<Duration> {
    let invalid = |reason| Error::InvalidTtl {
        input: input.to_owned(),
        reason,
    };
    let Some((digits, unit)) = input
        .char_indices()
        .last()
        .map(|(at, _)| input.split_at(at))
    else {
        return Err(invalid("it is empty"));
    };
    let seconds_per_unit: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(invalid(
                "expected a number followed by a unit: s, m, h or d (e.g. 1h)",
            ));
        }
    };
    // `u64::from_str` would also take a leading `+`; only plain digits are a lifetime.
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(invalid(
            "expected a whole number before the unit (e.g. 30m)",
        ));
    }
    let count: u64 = digits
        .parse()
        .map_err(|_| invalid("the number is too large"))?;
    if count == 0 {
        return Err(invalid("it must be greater than zero"));
    }
    let seconds = count
        .checked_mul(seconds_per_unit)
        .ok_or_else(|| invalid("the number is too large"))?;
    Ok(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SECRET: &str = "a-test-auth-secret";

    fn claims() -> SessionClaims {
        SessionClaims {
            id: 42,
            email: "ada@example.com".to_owned(),
            first_name: "Ada".to_owned(),
            last_name: "Lovelace".to_owned(),
            team: "Operations".to_owned(),
            team_id: None,
            role: "Admin".to_owned(),
            role_id: None,
            permission_level: PermissionLevel::Admin,
            rendering_id: 7,
            tags: BTreeMap::from([("region".to_owned(), "EU".to_owned())]),
            iat: 0,
            exp: 0,
        }
    }

    fn now() -> u64 {
        jsonwebtoken::get_current_timestamp()
    }

    /// Signs any JSON payload, so tests can build tokens the minting API would never produce.
    fn sign(payload: &serde_json::Value, algorithm: Algorithm, secret: &str) -> String {
        encode(
            &Header::new(algorithm),
            payload,
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    }

    /// A payload as the Node agent issues it, with an extra claim it must ignore.
    fn agent_payload(exp: u64) -> serde_json::Value {
        json!({
            "id": 42, "email": "ada@example.com", "firstName": "Ada", "lastName": "Lovelace",
            "team": "Operations", "role": "Admin", "permissionLevel": "admin", "renderingId": 7,
            "tags": {"region": "EU"}, "serverToken": "ignored", "iat": exp - 3600, "exp": exp,
        })
    }

    fn valid_token() -> String {
        mint(SECRET, claims(), Duration::from_secs(3600)).unwrap()
    }

    #[test]
    fn minted_token_verifies_with_its_lifetime() {
        let verified = SessionKey::new(SECRET).verify(&valid_token()).unwrap();
        assert_eq!(verified.exp - verified.iat, 3600);
        assert!(verified.iat.abs_diff(now()) <= 1);
        assert_eq!(
            SessionClaims {
                iat: 0,
                exp: 0,
                ..verified
            },
            claims()
        );
    }

    #[test]
    fn agent_token_from_cookie() {
        let token = sign(&agent_payload(now() + 3600), Algorithm::HS256, SECRET);
        let cookie = format!("theme=dark; forest_session_token={token}; other=1");
        let claims = SessionKey::new(SECRET)
            .authenticate(Some(&cookie), None)
            .unwrap();
        assert_eq!(claims.id, 42);
        assert_eq!(claims.permission_level, PermissionLevel::Admin);
        assert_eq!(claims.rendering_id, 7);
    }

    #[test]
    fn token_from_bearer_header() {
        let header = format!("Bearer {}", valid_token());
        let claims = SessionKey::new(SECRET)
            .authenticate(None, Some(&header))
            .unwrap();
        assert_eq!(claims.email, "ada@example.com");
    }

    #[test]
    fn cookie_wins_over_header() {
        let token = valid_token();
        let cookie = format!("forest_session_token={token}");
        assert_eq!(
            resolve_token(Some(&cookie), Some("Bearer other")).unwrap(),
            token
        );
        // koa-jwt does not look at the header once the cookie gave a token.
        assert_eq!(
            resolve_token(Some(&cookie), Some("garbage")).unwrap(),
            token
        );
    }

    #[test]
    fn empty_or_unrelated_cookie_falls_back_to_header() {
        assert_eq!(
            resolve_token(Some("forest_session_token="), Some("Bearer abc")).unwrap(),
            "abc"
        );
        assert_eq!(
            resolve_token(Some("theme=dark; broken"), Some("Bearer abc")).unwrap(),
            "abc"
        );
    }

    #[test]
    fn missing_token() {
        for (cookie, authorization) in [
            (None, None),
            (Some(""), None),
            (Some("theme=dark"), None),
            (None, Some("")),
        ] {
            let error = resolve_token(cookie, authorization).unwrap_err();
            assert!(
                matches!(error, Error::MissingToken),
                "{cookie:?} {authorization:?}"
            );
            assert_eq!(error.to_string(), "Authentication Error");
        }
    }

    #[test]
    fn malformed_authorization_headers() {
        for header in [
            "Bearer",
            "abc",
            "Bearer a b",
            "Bearer  abc",
            "Basic abc",
            "Bearer ",
        ] {
            let error = resolve_token(None, Some(header)).unwrap_err();
            assert!(matches!(error, Error::BadAuthorizationHeader), "{header:?}");
            assert_eq!(
                error.to_string(),
                r#"Bad Authorization header format. Format is "Authorization: Bearer <token>""#
            );
        }
    }

    #[test]
    fn scheme_is_case_insensitive_and_header_trimmed() {
        for header in ["bearer abc", "BEARER abc", " Bearer abc "] {
            assert_eq!(
                resolve_token(None, Some(header)).unwrap(),
                "abc",
                "{header:?}"
            );
        }
    }

    #[test]
    fn expired_token() {
        let token = sign(&agent_payload(now() - 10), Algorithm::HS256, SECRET);
        let error = SessionKey::new(SECRET).verify(&token).unwrap_err();
        assert!(matches!(error, Error::ExpiredToken), "{error:?}");
        assert_eq!(error.to_string(), "Authentication Error");
    }

    #[test]
    fn a_verified_token_is_remembered_only_until_its_exp() {
        let key = SessionKey::new(SECRET);
        // Valid for two more seconds: verified, remembered, then refused once they passed.
        let token = sign(&agent_payload(now() + 2), Algorithm::HS256, SECRET);
        assert_eq!(key.verify(&token).unwrap().email, "ada@example.com");
        assert_eq!(key.verified.len(), 1);
        assert_eq!(key.verify(&token).unwrap().email, "ada@example.com");
        std::thread::sleep(Duration::from_millis(2100));
        let error = key.verify(&token).unwrap_err();
        assert!(matches!(error, Error::ExpiredToken), "{error:?}");
    }

    #[test]
    fn a_remembered_token_does_not_vouch_for_a_tampered_copy() {
        let key = SessionKey::new(SECRET);
        let token = valid_token();
        key.verify(&token).unwrap();
        // Same header and payload, another signature: verified in full, and refused.
        let (signed, _) = token.rsplit_once('.').unwrap();
        let forged = format!("{signed}.{}", "A".repeat(43));
        let error = key.verify(&forged).unwrap_err();
        assert!(matches!(error, Error::InvalidToken(_)), "{error:?}");
        // A token signed with another secret is refused too, remembered tokens notwithstanding.
        let other = sign(
            &agent_payload(now() + 3600),
            Algorithm::HS256,
            "another secret",
        );
        assert!(key.verify(&other).is_err());
    }

    #[test]
    fn token_expiring_this_second_is_refused_as_node_does() {
        let token = sign(&agent_payload(now()), Algorithm::HS256, SECRET);
        let error = SessionKey::new(SECRET).verify(&token).unwrap_err();
        assert!(matches!(error, Error::ExpiredToken), "{error:?}");
    }

    #[test]
    fn token_without_exp_is_refused() {
        let mut payload = agent_payload(now() + 3600);
        payload.as_object_mut().unwrap().remove("exp");
        let token = sign(&payload, Algorithm::HS256, SECRET);
        let error = SessionKey::new(SECRET).verify(&token).unwrap_err();
        assert!(matches!(error, Error::InvalidToken(_)), "{error:?}");
    }

    #[test]
    fn tampered_signature() {
        let token = valid_token();
        let (unsigned, signature) = token.rsplit_once('.').unwrap();
        let flipped = if signature.starts_with('A') { "B" } else { "A" };
        let tampered = format!("{unsigned}.{flipped}{}", &signature[1..]);
        let error = SessionKey::new(SECRET).verify(&tampered).unwrap_err();
        assert!(matches!(error, Error::InvalidToken(_)), "{error:?}");
        assert_eq!(error.to_string(), "Authentication Error");
    }

    #[test]
    fn wrong_secret() {
        let token = mint("another-secret", claims(), Duration::from_secs(60)).unwrap();
        let error = SessionKey::new(SECRET).verify(&token).unwrap_err();
        assert!(matches!(error, Error::InvalidToken(_)), "{error:?}");
    }

    #[test]
    fn not_a_jwt() {
        for token in ["abc", "a.b.c", ""] {
            let error = SessionKey::new(SECRET).verify(token).unwrap_err();
            assert!(matches!(error, Error::InvalidToken(_)), "{token:?}");
        }
    }

    #[test]
    fn every_hmac_algorithm_is_accepted() {
        for algorithm in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
            let token = sign(&agent_payload(now() + 60), algorithm, SECRET);
            assert!(
                SessionKey::new(SECRET).verify(&token).is_ok(),
                "{algorithm:?}"
            );
        }
    }

    #[test]
    fn claims_of_the_wrong_shape_are_invalid() {
        let mut payload = agent_payload(now() + 60);
        payload["id"] = json!("forty-two");
        let token = sign(&payload, Algorithm::HS256, SECRET);
        let error = SessionKey::new(SECRET).verify(&token).unwrap_err();
        assert!(matches!(error, Error::InvalidToken(_)), "{error:?}");
    }

    #[test]
    fn absent_or_null_descriptive_claims_read_as_empty() {
        let token = sign(
            &json!({"id": 1, "email": "e@x.io", "team": null, "tags": null, "exp": now() + 60}),
            Algorithm::HS256,
            SECRET,
        );
        let claims = SessionKey::new(SECRET).verify(&token).unwrap();
        assert_eq!(claims.team, "");
        assert!(claims.tags.is_empty());
        assert_eq!(claims.permission_level, PermissionLevel::User);
    }

    #[test]
    fn claims_become_the_caller() {
        let request_id = Uuid::new_v4();
        let caller = claims().into_caller(chrono_tz::Europe::Paris, request_id);
        assert_eq!(caller.id, 42);
        assert_eq!(caller.email, "ada@example.com");
        assert_eq!(caller.first_name, "Ada");
        assert_eq!(caller.last_name, "Lovelace");
        assert_eq!(caller.team, "Operations");
        assert_eq!(caller.role, "Admin");
        assert_eq!(caller.permission_level, PermissionLevel::Admin);
        assert_eq!(caller.rendering_id, 7);
        assert_eq!((caller.role_id, caller.team_id), (None, None));
        assert_eq!(caller.tags.get("region").map(String::as_str), Some("EU"));
        assert_eq!(caller.timezone, chrono_tz::Europe::Paris);
        assert_eq!(caller.request_id, request_id);
    }

    #[test]
    fn role_and_team_ids_are_carried_when_the_token_has_them() {
        let mut payload = agent_payload(now() + 60);
        payload["roleId"] = json!(3);
        payload["teamId"] = json!(12);
        let token = sign(&payload, Algorithm::HS256, SECRET);
        let claims = SessionKey::new(SECRET).verify(&token).unwrap();
        assert_eq!((claims.role_id, claims.team_id), (Some(3), Some(12)));
        let caller = claims.into_caller(chrono_tz::UTC, Uuid::new_v4());
        assert_eq!((caller.role_id, caller.team_id), (Some(3), Some(12)));
        // The agent's own tokens have neither; `null` reads as absent too.
        payload["roleId"] = json!(null);
        payload.as_object_mut().unwrap().remove("teamId");
        let token = sign(&payload, Algorithm::HS256, SECRET);
        let claims = SessionKey::new(SECRET).verify(&token).unwrap();
        assert_eq!((claims.role_id, claims.team_id), (None, None));
    }

    #[test]
    fn debug_does_not_print_the_secret() {
        assert!(!format!("{:?}", SessionKey::new(SECRET)).contains(SECRET));
    }

    #[test]
    fn ttl_units() {
        assert_eq!(parse_ttl("3600s").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_ttl("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_ttl("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_ttl("2d").unwrap(), Duration::from_secs(172_800));
    }

    #[test]
    fn ttl_errors_say_what_is_wrong() {
        for (input, reason) in [
            ("", "it is empty"),
            ("1", "unit"),
            ("1w", "unit"),
            ("1é", "unit"),
            ("h", "whole number"),
            ("-1h", "whole number"),
            ("+1h", "whole number"),
            ("1.5h", "whole number"),
            (" 1h", "whole number"),
            ("0s", "greater than zero"),
            ("99999999999999999999s", "too large"),
            ("9999999999999999999d", "too large"),
        ] {
            let error = parse_ttl(input).unwrap_err();
            let message = error.to_string();
            assert!(matches!(error, Error::InvalidTtl { .. }), "{input:?}");
            assert!(message.contains(reason), "{input:?}: {message}");
            assert!(message.contains(&format!("{input:?}")), "{message}");
        }
    }
}
