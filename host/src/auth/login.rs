//! Sign-in, keeping the agent's flow on the wire (protocol §4.1): `POST /forest/authentication`
//! answers an authorization URL, the browser proves who the user is there, and comes back to the
//! application's callback with a one-time code that `GET /forest/authentication/callback`
//! exchanges for a session token with the §4.2 claims.
//!
//! Two identity sources lead to the same one-time code:
//! - the built-in sign-in page (`page`): email and password, argon2-checked, rate limited per
//!   client address and per email, one generic failure message;
//! - an OpenID Connect provider (`oidc`): authorization code with PKCE, nonce and state, users
//!   matched or created by email, teams and role mapped from claims.
//!
//! Nothing is stored until a user has proved who they are: a login request is a token signed
//! with a key derived from the auth secret (its id, the client's `state`, an expiry), carried by
//! the sign-in form or as the provider's `state`; the PKCE verifier and the nonce are derived from
//! its id with another key, so they never appear in a URL. The one-time code is stored as a hash,
//! expires after a minute and is spent by its first exchange (`platform::login`).
//!
//! Nothing here knows HTTP types: `http::authentication` reads requests and writes answers.

pub mod oidc;
pub mod page;

use std::net::IpAddr;
use std::time::Duration;

use argon2::password_hash::rand_core::{OsRng, RngCore as _};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sha2::{Digest as _, Sha256};

use super::session::{SessionClaims, SessionKey};
use crate::config::LoginConfig;
use crate::platform::{self, Store, User, password};

type HmacSha256 = Hmac<Sha256>;

/// A session token's lifetime: the agent's `expiresIn: '1 hours'`.
pub const SESSION_TTL: Duration = Duration::from_secs(3600);
/// A one-time code's lifetime: the browser hands it over within a redirect or two.
pub const CODE_TTL: Duration = Duration::from_secs(60);
/// A login request's lifetime: time to type a password or go through a provider's pages.
pub const REQUEST_TTL: Duration = Duration::from_secs(600);
/// The cookie that ties a sign-in form to the browser it was served to (CSRF).
pub const CSRF_COOKIE: &str = "canopy_sign_in";
/// The one failure message of the sign-in page, whatever failed (unknown email, wrong password,
/// disabled user, no password): it must not tell which accounts exist.
pub const GENERIC_FAILURE: &str = "Wrong email or password.";
/// Password checks running at once: each takes argon2's memory (19 MiB) and a core for tens of
/// milliseconds, so a burst from many addresses waits instead of exhausting the machine.
const CONCURRENT_PASSWORD_CHECKS: usize = 4;
/// Keys a rate limiter holds before it forgets the ones back to a fresh state.
const LIMITER_KEYS: usize = 10_000;

/// Why a sign-in attempt was refused.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// Too many attempts from this address or on this email; retry after the duration.
    #[error("too many sign-in attempts")]
    RateLimited { retry_after: Duration },
    /// Unknown email, wrong password, disabled user or no password: one answer for all.
    #[error("{GENERIC_FAILURE}")]
    Failed,
    #[error(transparent)]
    Store(#[from] platform::Error),
}

/// Why `GET /forest/authentication/callback` refused; `http` renders each as the agent does.
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// The `state` is not JSON (400 `ValidationError`).
    #[error("Failed to retrieve renderingId from query[state]")]
    InvalidState,
    /// The identity step failed, as an OAuth error (401 `{error, error_description, state}`).
    #[error("{error}")]
    Provider {
        error: String,
        description: Option<String>,
        state: Option<String>,
    },
    /// The user may not sign in (403 `{error: 403, error_description}`).
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Store(#[from] platform::Error),
    #[error(transparent)]
    Token(#[from] super::Error),
}

impl CallbackError {
    /// The error of a code that is unknown, expired, already spent or issued for another state:
    /// what an OpenID provider answers for such a grant.
    pub fn invalid_grant() -> Self {
        Self::Provider {
            error: "invalid_grant".to_owned(),
            description: Some("grant request is invalid".to_owned()),
            state: None,
        }
    }
}

/// A login request, read back from its signed token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginRequest {
    /// Random; the PKCE verifier and the nonce are derived from it.
    pub id: String,
    /// The client's `state` (`{"renderingId":N}`), handed back with the code.
    pub state: String,
    /// The signed token (URL-safe), as the sign-in form and the provider carry it.
    pub token: String,
}

#[derive(Serialize, Deserialize)]
struct RequestPayload {
    /// id
    i: String,
    /// client state
    s: String,
    /// expiry, unix seconds
    e: u64,
}

/// A session token and its decoded claims, the answer of the callback.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub token_data: Json,
}

/// Keys derived from the auth secret, one per use, so that no signature made for one purpose
/// verifies for another (nor as a session token).
struct Keys {
    request: [u8; 32],
    csrf: [u8; 32],
    oidc: [u8; 32],
}

fn derive(secret: &[u8], label: &str) -> [u8; 32] {
    hmac_bytes(secret, label.as_bytes())
}

fn hmac_bytes(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).unwrap_or_else(|_| {
        // HMAC accepts keys of any length; unreachable.
        HmacSha256::new_from_slice(&[0]).unwrap_or_else(|_| unreachable!())
    });
    mac.update(message);
    mac.finalize().into_bytes().into()
}

fn verify_hmac(key: &[u8], message: &[u8], tag: &[u8]) -> bool {
    HmacSha256::new_from_slice(key).is_ok_and(|mut mac| {
        mac.update(message);
        // Constant time.
        mac.verify_slice(tag).is_ok()
    })
}

/// `n` random bytes from the operating system, URL-safe base64.
pub fn random_token(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The stored form of a one-time code: its SHA-256, hex.
pub fn code_hash(code: &str) -> String {
    hex::encode(Sha256::digest(code.as_bytes()))
}

fn now_secs() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// The sign-in service, shared by every generation of the served stack (its rate limits and the
/// provider's discovered metadata outlive a plugin reload).
pub struct Login {
    store: Store,
    session: SessionKey,
    keys: Keys,
    /// `publicUrl`, when configured.
    public_url: Option<String>,
    /// `loginRedirectUrl`, when configured.
    redirect_url: Option<String>,
    /// `/{prefix}/forest`.
    mount_path: String,
    by_ip: DefaultKeyedRateLimiter<IpAddr>,
    by_email: DefaultKeyedRateLimiter<String>,
    password_checks: tokio::sync::Semaphore,
    oidc: Option<oidc::Provider>,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys are secrets.
        f.debug_struct("Login")
            .field("public_url", &self.public_url)
            .field("redirect_url", &self.redirect_url)
            .field("oidc", &self.oidc.is_some())
            .finish_non_exhaustive()
    }
}

impl Login {
    /// The service of these settings over `store`, signing with `auth_secret`, its routes under
    /// `mount_path`. Fails only if the OpenID provider's HTTP client cannot be built.
    pub fn new(
        config: &LoginConfig,
        auth_secret: &str,
        mount_path: &str,
        store: Store,
    ) -> Result<Self, String> {
        let secret = auth_secret.as_bytes();
        let oidc = match &config.oidc {
            Some(settings) => Some(oidc::Provider::new(settings.clone())?),
            None => None,
        };
        Ok(Self {
            store,
            session: SessionKey::new(auth_secret),
            keys: Keys {
                request: derive(secret, "canopy login request v1"),
                csrf: derive(secret, "canopy sign-in csrf v1"),
                oidc: derive(secret, "canopy oidc pkce and nonce v1"),
            },
            public_url: config.public_url.clone(),
            redirect_url: config.redirect_url.clone(),
            mount_path: mount_path.to_owned(),
            by_ip: DefaultKeyedRateLimiter::keyed(Quota::per_minute(config.attempts_per_ip)),
            by_email: DefaultKeyedRateLimiter::keyed(Quota::per_minute(config.attempts_per_email)),
            password_checks: tokio::sync::Semaphore::new(CONCURRENT_PASSWORD_CHECKS),
            oidc,
        })
    }

    /// The OpenID provider, when sign-in goes through one (the built-in page is then off).
    pub fn oidc(&self) -> Option<&oidc::Provider> {
        self.oidc.as_ref()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// `publicUrl` if configured, else `request_base` (the scheme and Host of the request being
    /// answered).
    pub fn base_url<'a>(&'a self, request_base: &'a str) -> &'a str {
        self.public_url.as_deref().unwrap_or(request_base)
    }

    /// The built-in sign-in page.
    pub fn sign_in_path(&self) -> String {
        format!("{}/authentication/sign-in", self.mount_path)
    }

    /// Canopy's own OpenID Connect callback, the redirect URI registered at the provider.
    pub fn oidc_redirect_uri(&self, request_base: &str) -> String {
        format!(
            "{}{}/authentication/oidc/callback",
            self.base_url(request_base),
            self.mount_path
        )
    }

    /// Where a browser is sent with its code: `loginRedirectUrl`, else this Canopy's callback.
    /// `request_base` is the base of the request the browser is making now (never one stored in
    /// a login request, which whoever started the login chose).
    pub fn redirect_target(&self, request_base: &str) -> String {
        self.redirect_url.clone().unwrap_or_else(|| {
            format!(
                "{}{}/authentication/callback",
                self.base_url(request_base),
                self.mount_path
            )
        })
    }

    /// The redirect target with these query parameters added.
    pub fn redirect_with(&self, request_base: &str, params: &[(&str, &str)]) -> String {
        let target = self.redirect_target(request_base);
        match reqwest::Url::parse(&target) {
            Ok(mut url) => {
                url.query_pairs_mut().extend_pairs(params);
                url.into()
            }
            // Only a Host header that is not a host gets here; its answer may as well be odd.
            Err(_) => {
                let query: String = form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(params)
                    .finish();
                format!("{target}?{query}")
            }
        }
    }

    // ----- login requests -----------------------------------------------------------------

    /// Starts a login for the client's `state`.
    pub fn begin(&self, state: &str) -> LoginRequest {
        let payload = RequestPayload {
            i: random_token(16),
            s: state.to_owned(),
            e: now_secs().saturating_add(REQUEST_TTL.as_secs()),
        };
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap_or_default());
        let tag = URL_SAFE_NO_PAD.encode(hmac_bytes(&self.keys.request, body.as_bytes()));
        LoginRequest {
            id: payload.i,
            state: payload.s,
            token: format!("{body}.{tag}"),
        }
    }

    /// Reads a login request back; `None` if it was not signed here or has expired.
    pub fn request(&self, token: &str) -> Option<LoginRequest> {
        let (body, tag) = token.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        if !verify_hmac(&self.keys.request, body.as_bytes(), &tag) {
            return None;
        }
        let payload: RequestPayload =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()?;
        (payload.e > now_secs()).then(|| LoginRequest {
            id: payload.i,
            state: payload.s,
            token: token.to_owned(),
        })
    }

    /// The form field that proves a sign-in form was served to the browser holding the CSRF
    /// cookie `nonce`, for this login request.
    pub fn csrf_token(&self, request: &LoginRequest, nonce: &str) -> String {
        let message = format!("{}|{nonce}", request.id);
        URL_SAFE_NO_PAD.encode(hmac_bytes(&self.keys.csrf, message.as_bytes()))
    }

    /// Whether `token` is [`Self::csrf_token`] of this request and cookie, in constant time.
    pub fn check_csrf(&self, request: &LoginRequest, nonce: &str, token: &str) -> bool {
        let Ok(tag) = URL_SAFE_NO_PAD.decode(token) else {
            return false;
        };
        let message = format!("{}|{nonce}", request.id);
        !nonce.is_empty() && verify_hmac(&self.keys.csrf, message.as_bytes(), &tag)
    }

    /// The PKCE verifier of a login request (43 URL-safe characters, RFC 7636).
    pub fn pkce_verifier(&self, request: &LoginRequest) -> String {
        let message = format!("pkce|{}", request.id);
        URL_SAFE_NO_PAD.encode(hmac_bytes(&self.keys.oidc, message.as_bytes()))
    }

    /// The OpenID Connect nonce of a login request.
    pub fn oidc_nonce(&self, request: &LoginRequest) -> String {
        let message = format!("nonce|{}", request.id);
        URL_SAFE_NO_PAD.encode(hmac_bytes(&self.keys.oidc, message.as_bytes()))
    }

    // ----- the built-in identity source ---------------------------------------------------

    /// Checks an email and password from `ip`: rate limits first (per address, then per
    /// email), then the password, in as much time for an unknown email as for a known one.
    pub async fn check_password(
        &self,
        ip: IpAddr,
        email: &str,
        password: &str,
    ) -> Result<User, SignInError> {
        let email = email.trim();
        limit(&self.by_ip, &ip)?;
        limit(&self.by_email, &email.to_lowercase())?;
        let user = self.store.user_by_email(email).await?;
        let hash = match &user {
            Some(user) if !user.disabled => self.store.password_hash(user.id).await?,
            _ => None,
        };
        let _permit = self
            .password_checks
            .acquire()
            .await
            .map_err(|_| SignInError::Failed)?;
        let password = password.to_owned();
        let matched = tokio::task::spawn_blocking(move || match hash {
            Some(hash) => password::verify(&password, &hash),
            None => {
                password::verify_dummy(&password);
                false
            }
        })
        .await
        .unwrap_or(false);
        match user {
            Some(user) if matched && !user.disabled => Ok(user),
            _ => Err(SignInError::Failed),
        }
    }

    // ----- one-time codes and the callback ------------------------------------------------

    /// Issues the one-time code that a signed-in `user_id` exchanges for a session token.
    pub async fn issue_code(&self, user_id: i64, state: &str) -> Result<String, platform::Error> {
        let code = random_token(32);
        self.store
            .create_login_code(&code_hash(&code), user_id, state, CODE_TTL)
            .await?;
        Ok(code)
    }

    /// `GET /forest/authentication/callback`: spends the code and signs the session token of
    /// its user, with the rendering of the user's first team in this environment.
    pub async fn redeem(&self, code: &str, state: &str) -> Result<Issued, CallbackError> {
        let Some(redeemed) = self
            .store
            .redeem_login_code(&code_hash(code), state)
            .await?
        else {
            return Err(CallbackError::invalid_grant());
        };
        // Read now, not when the code was issued: a user disabled or removed in between is
        // refused.
        let user = match self.store.user(redeemed.user_id).await? {
            Some(user) if !user.disabled => user,
            Some(_) => {
                return Err(CallbackError::Forbidden(
                    "This user is disabled: ask an administrator to enable them.".to_owned(),
                ));
            }
            None => {
                return Err(CallbackError::Forbidden(
                    "This user is no longer part of the project.".to_owned(),
                ));
            }
        };
        let Some(team) = user.teams.first() else {
            return Err(CallbackError::Forbidden(
                "This user is in no team: ask an administrator to add them to one.".to_owned(),
            ));
        };
        let rendering_id = self.store.rendering_id(team.id).await?;
        let claims = SessionClaims::for_user(&user, team, rendering_id);
        let token = self.session.mint(claims, SESSION_TTL)?;
        // `tokenData` is the token decoded, as the agent's `jsonwebtoken.decode(token)`.
        let decoded = self.session.verify(&token)?;
        let token_data = serde_json::to_value(&decoded).unwrap_or(Json::Null);
        tracing::info!(user_id = user.id, rendering_id, "signed in");
        Ok(Issued { token, token_data })
    }
}

/// Takes one attempt of `key`'s quota, forgetting idle keys once there are many.
fn limit<K>(limiter: &DefaultKeyedRateLimiter<K>, key: &K) -> Result<(), SignInError>
where
    K: std::hash::Hash + Eq + Clone,
{
    if limiter.len() > LIMITER_KEYS {
        limiter.retain_recent();
    }
    limiter.check_key(key).map_err(|not_until| {
        let retry_after = not_until.wait_time_from(DefaultClock::default().now());
        SignInError::RateLimited {
            // Whole seconds, at least one: what `Retry-After` can say.
            retry_after: Duration::from_secs(retry_after.as_secs().max(1)),
        }
    })
}

/// The default quota of a limiter in tests.
#[cfg(test)]
fn per_minute(n: u32) -> Quota {
    Quota::per_minute(std::num::NonZeroU32::new(n).unwrap_or(std::num::NonZeroU32::MIN))
}

/// JavaScript's `Number(value)` for a JSON value, as the agent reads `renderingId`: `None` for
/// NaN.
pub fn js_number(value: Option<&Json>) -> Option<f64> {
    match value {
        None => None,
        Some(Json::Null) => Some(0.0),
        Some(Json::Bool(b)) => Some(if *b { 1.0 } else { 0.0 }),
        Some(Json::Number(n)) => n.as_f64(),
        Some(Json::String(s)) => js_string_number(s),
        // `Number([x])` is `Number(String([x]))`: `[]` is 0, `[5]` is 5, `[1,2]` is NaN.
        Some(Json::Array(items)) => match items.as_slice() {
            [] => Some(0.0),
            [one] if !one.is_array() && !one.is_object() => js_number(Some(one)),
            [one] if one.is_array() => js_number(Some(one)),
            _ => None,
        },
        Some(Json::Object(_)) => None,
    }
}

/// `Number(string)`: trimmed; empty is 0; decimal, `Infinity`, and `0x`/`0o`/`0b` integers.
fn js_string_number(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() {
        return Some(0.0);
    }
    match s {
        "Infinity" | "+Infinity" => return Some(f64::INFINITY),
        "-Infinity" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = s.strip_prefix(prefix) {
            return u64::from_str_radix(digits, radix).ok().map(|n| n as f64);
        }
    }
    // Rust also reads `inf` and `NaN`; JavaScript only digits, a point, an exponent and signs.
    if !s
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    s.parse::<f64>().ok()
}

/// The `state` the agent builds: `JSON.stringify({ renderingId })` (an integer prints without
/// a fraction; infinities print as `null`).
pub fn client_state(rendering_id: f64) -> String {
    let value = if rendering_id.is_finite()
        && rendering_id.fract() == 0.0
        && rendering_id.abs() < 9_007_199_254_740_992.0
    {
        Json::from(rendering_id as i64)
    } else {
        serde_json::Number::from_f64(rendering_id).map_or(Json::Null, Json::Number)
    };
    serde_json::json!({ "renderingId": value }).to_string()
}

/// Whether a callback `state` is one the agent reads (`JSON.parse(state).renderingId` does not
/// throw): any JSON but `null`.
pub fn state_is_readable(state: &str) -> bool {
    serde_json::from_str::<Json>(state).is_ok_and(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rendering_ids_read_as_javascript_numbers() {
        for (value, expected) in [
            (json!(12), Some(12.0)),
            (json!("12"), Some(12.0)),
            (json!(" 7 "), Some(7.0)),
            (json!(""), Some(0.0)),
            (json!(null), Some(0.0)),
            (json!(true), Some(1.0)),
            (json!([]), Some(0.0)),
            (json!([5]), Some(5.0)),
            (json!("0x10"), Some(16.0)),
            (json!("1e2"), Some(100.0)),
        ] {
            assert_eq!(js_number(Some(&value)), expected, "{value}");
        }
        for value in [
            json!("abc"),
            json!({}),
            json!([1, 2]),
            json!("NaN"),
            json!("inf"),
        ] {
            assert_eq!(js_number(Some(&value)), None, "{value}");
        }
        assert_eq!(js_number(None), None);
        assert_eq!(client_state(3.0), r#"{"renderingId":3}"#);
        assert_eq!(client_state(1.5), r#"{"renderingId":1.5}"#);
        assert_eq!(client_state(f64::INFINITY), r#"{"renderingId":null}"#);
    }

    #[test]
    fn states_the_agent_can_read() {
        assert!(state_is_readable(r#"{"renderingId":1}"#));
        assert!(state_is_readable("5"));
        assert!(!state_is_readable("null"));
        assert!(!state_is_readable("{renderingId:1}"));
    }

    #[test]
    fn codes_are_stored_as_hashes() {
        let code = random_token(32);
        assert_eq!(code.len(), 43);
        let hash = code_hash(&code);
        assert_eq!(hash.len(), 64);
        assert!(!hash.contains(&code));
        assert_ne!(random_token(32), code);
    }

    /// A service over an in-memory store: these tests never reach the store.
    async fn service(secret: &str) -> Login {
        let store = Store::open("sqlite::memory:", "p", "e").await.unwrap();
        Login::new(&LoginConfig::default(), secret, "/forest", store).unwrap()
    }

    #[tokio::test]
    async fn login_requests_are_signed_carry_the_state_and_expire() {
        let login = service("secret").await;
        let request = login.begin(r#"{"renderingId":3}"#);
        let read = login.request(&request.token).unwrap();
        assert_eq!(read, request);
        assert_eq!(read.state, r#"{"renderingId":3}"#);
        // Signed with another auth secret, or altered: refused.
        assert!(service("another").await.request(&request.token).is_none());
        let (body, tag) = request.token.split_once('.').unwrap();
        let last = if body.ends_with('A') { 'B' } else { 'A' };
        let altered = format!("{}{last}.{tag}", &body[..body.len() - 1]);
        assert!(login.request(&altered).is_none());
        assert!(login.request("garbage").is_none());
        // Signed here but past its expiry.
        let payload = RequestPayload {
            i: "x".into(),
            s: "{}".into(),
            e: now_secs() - 1,
        };
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap());
        let tag = URL_SAFE_NO_PAD.encode(hmac_bytes(&login.keys.request, body.as_bytes()));
        assert!(login.request(&format!("{body}.{tag}")).is_none());
    }

    #[tokio::test]
    async fn csrf_tokens_tie_a_form_to_its_cookie_and_request() {
        let login = service("secret").await;
        let request = login.begin("{}");
        let other = login.begin("{}");
        let token = login.csrf_token(&request, "nonce-1");
        assert!(login.check_csrf(&request, "nonce-1", &token));
        assert!(!login.check_csrf(&request, "nonce-2", &token));
        assert!(!login.check_csrf(&other, "nonce-1", &token));
        assert!(!login.check_csrf(&request, "", &login.csrf_token(&request, "")));
        assert!(!login.check_csrf(&request, "nonce-1", "not base64!"));
    }

    #[tokio::test]
    async fn pkce_verifiers_and_nonces_are_secret_per_request() {
        let login = service("secret").await;
        let request = login.begin("{}");
        let verifier = login.pkce_verifier(&request);
        assert_eq!(verifier.len(), 43, "RFC 7636 wants 43 to 128 characters");
        assert_eq!(
            login.pkce_verifier(&request),
            verifier,
            "derived, not stored"
        );
        assert_ne!(login.oidc_nonce(&request), verifier);
        assert_ne!(login.pkce_verifier(&login.begin("{}")), verifier);
        assert!(!request.token.contains(&verifier));
    }

    #[tokio::test]
    async fn redirects_keep_the_targets_query() {
        let mut login = service("secret").await;
        assert_eq!(
            login.redirect_with("http://h:1", &[("code", "c"), ("state", r#"{"a":1}"#)]),
            "http://h:1/forest/authentication/callback?code=c&state=%7B%22a%22%3A1%7D"
        );
        login.redirect_url = Some("https://app.test/cb?x=1".into());
        login.public_url = Some("https://canopy.test".into());
        assert_eq!(
            login.redirect_with("http://h:1", &[("code", "c")]),
            "https://app.test/cb?x=1&code=c"
        );
        assert_eq!(
            login.oidc_redirect_uri("http://h:1"),
            "https://canopy.test/forest/authentication/oidc/callback"
        );
    }

    #[test]
    fn rate_limits_refuse_past_the_quota_with_a_retry_delay() {
        let limiter: DefaultKeyedRateLimiter<String> =
            DefaultKeyedRateLimiter::keyed(per_minute(2));
        let key = "a@b.c".to_owned();
        assert!(limit(&limiter, &key).is_ok());
        assert!(limit(&limiter, &key).is_ok());
        match limit(&limiter, &key) {
            Err(SignInError::RateLimited { retry_after }) => {
                assert!((1..=30).contains(&retry_after.as_secs()), "{retry_after:?}");
            }
            other => panic!("{other:?}"),
        }
        // Another key has its own quota.
        assert!(limit(&limiter, &"x@y.z".to_owned()).is_ok());
    }
}
