//! Signing in to the console, its session cookie and its CSRF tokens.
//!
//! The cookie carries the same session JWT that signing in through the agent's flow gives
//! (`auth::session`, minted for the user's first team and its rendering), under a cookie name of
//! its own: the `Caller` of a console page is then built exactly as the API builds it (same
//! user, team, role, tags and rendering, so the same rights and scopes), while the `/forest`
//! routes never accept the console's cookie, so a cross-site form cannot reach them with it.
//!
//! CSRF: every form carries a token bound to the session (SHA-256 of the session JWT under a
//! label: unforgeable without the HttpOnly cookie), checked in constant time; posts must be
//! `application/x-www-form-urlencoded` (a cross-site `text/plain` post is refused before it
//! is read) and, when the browser says so, same-origin. The sign-in form, served before any
//! session, is bound to a random cookie of its own (double submit).

use std::net::SocketAddr;

use askama::Template;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono_tz::Tz;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::pages::html;
use crate::auth::SessionClaims;
use crate::auth::login::{SESSION_TTL, SignInError, random_token};
use crate::datasource::Caller;
use crate::state::SharedState;

/// The session cookie: the session JWT.
pub const SESSION_COOKIE: &str = "canopy_console";
/// The user's timezone (an IANA name read by the browser at sign-in).
const TIMEZONE_COOKIE: &str = "canopy_console_tz";
/// The random value the sign-in form is bound to before any session exists.
const SIGN_IN_COOKIE: &str = "canopy_console_sign_in";

/// A signed-in user of the console: who they are as the API sees them, and their CSRF token.
pub struct Session {
    pub caller: Caller,
    /// The CSRF token every form of this session carries.
    pub csrf: String,
    /// The console's path (`/{prefix}/console`).
    pub base: String,
}

impl Session {
    /// Checks a form's CSRF token against the session's, in constant time.
    pub fn check_csrf(&self, token: &str) -> super::Result<()> {
        if bool::from(self.csrf.as_bytes().ct_eq(token.as_bytes())) {
            Ok(())
        } else {
            Err(super::Error::Csrf)
        }
    }

    /// The fields of a form posted by this session: a same-site, URL-encoded post carrying the
    /// session's CSRF token. Handlers that read nothing else of the request take [`Posted`].
    pub fn form(&self, headers: &HeaderMap, body: &[u8]) -> super::Result<Vec<(String, String)>> {
        same_site(headers)?;
        form_content_type(headers)?;
        let pairs = form_pairs(body);
        self.check_csrf(first(&pairs, "csrf").unwrap_or(""))?;
        Ok(pairs)
    }

    /// The user as the header shows them.
    pub fn display_name(&self) -> String {
        let name = format!("{} {}", self.caller.first_name, self.caller.last_name);
        let name = name.trim();
        if name.is_empty() {
            self.caller.email.clone()
        } else {
            name.to_owned()
        }
    }
}

/// Signing in and out, under the console's path.
pub fn routes() -> axum::Router<SharedState> {
    axum::Router::new()
        .route("/sign-in", axum::routing::get(sign_in_page).post(sign_in))
        .route("/sign-out", axum::routing::post(sign_out))
}

/// The CSRF token of a session: SHA-256 of its JWT under a label, hex.
fn csrf_of(token: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"canopy console csrf\0");
    hash.update(token.as_bytes());
    hex::encode(hash.finalize())
}

/// The value of cookie `name` in a request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(std::result::Result::ok)
        .find(|pair| pair.name() == name)
        .map(|pair| pair.value().to_owned())
        .filter(|value| !value.is_empty())
}

/// Why a request has no session: the page sends the browser to the sign-in form.
pub struct SignInRequired {
    target: String,
}

impl IntoResponse for SignInRequired {
    fn into_response(self) -> Response {
        Redirect::to(&self.target).into_response()
    }
}

/// A form posted by a signed-in user, checked as [`Session::form`] checks it: the session, then
/// a same-site `application/x-www-form-urlencoded` post (refused before its body is read, so a
/// cross-site `text/plain` post costs nothing), then the CSRF token among its fields. A
/// handler takes `Posted(session, fields)` as its last argument (it reads the body).
pub struct Posted(pub Session, pub Vec<(String, String)>);

impl FromRequest<SharedState> for Posted {
    type Rejection = Response;

    async fn from_request(
        request: axum::extract::Request,
        state: &SharedState,
    ) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let session = Session::from_request_parts(&mut parts, state).await?;
        same_site(&parts.headers).map_err(IntoResponse::into_response)?;
        form_content_type(&parts.headers).map_err(IntoResponse::into_response)?;
        let request = axum::extract::Request::from_parts(parts, body);
        let body = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let pairs = form_pairs(&body);
        session
            .check_csrf(first(&pairs, "csrf").unwrap_or(""))
            .map_err(IntoResponse::into_response)?;
        Ok(Self(session, pairs))
    }
}

impl FromRequestParts<SharedState> for Session {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &SharedState,
    ) -> Result<Self, Self::Rejection> {
        let base = super::base_path(&state.mount_path);
        // The whole path: a nested router sees only its own part in `parts.uri`.
        let next = parts
            .extensions
            .get::<axum::extract::OriginalUri>()
            .map_or(&parts.uri, |original| &original.0)
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default();
        let required = || {
            let target = format!(
                "{base}/sign-in?next={}",
                percent_encoding::utf8_percent_encode(&next, percent_encoding::NON_ALPHANUMERIC)
            );
            SignInRequired { target }.into_response()
        };
        let Some(token) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(required());
        };
        // Expired or tampered: sign in again.
        let Ok(claims) = state.session.verify(&token) else {
            return Err(required());
        };
        // What every private route of the API checks first: the IP whitelist and that the
        // user is still enabled.
        let socket = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(address)| address.ip());
        let forwarded = crate::auth::permissions::forwarded_for(
            parts
                .headers
                .get_all("x-forwarded-for")
                .iter()
                .map(HeaderValue::as_bytes),
        );
        if let Err(error) = state
            .permissions
            .private_checks(claims.id, forwarded.as_deref(), socket)
            .await
        {
            return Err(super::Error::from(error).into_response());
        }
        let timezone = cookie(&parts.headers, TIMEZONE_COOKIE)
            .and_then(|name| name.parse::<Tz>().ok())
            .unwrap_or(Tz::UTC);
        Ok(Self {
            caller: SessionClaims::into_caller(claims, timezone, uuid::Uuid::new_v4()),
            csrf: csrf_of(&token),
            base,
        })
    }
}

/// Whether the request came over TLS (directly or through a proxy saying so): cookies are then
/// `Secure`.
fn over_tls(headers: &HeaderMap, public_url: Option<&str>) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').next().is_some_and(|p| p.trim() == "https"))
        || public_url.is_some_and(|url| url.starts_with("https://"))
}

/// Whether this answer's cookies are `Secure`: over TLS, or when `publicUrl` is `https://`.
fn secure_cookies(state: &SharedState, headers: &HeaderMap) -> bool {
    over_tls(
        headers,
        state.login.as_ref().map(|login| login.base_url("")),
    )
}

/// A `Set-Cookie` value for the console's path.
fn set_cookie(
    name: &str,
    value: &str,
    base: &str,
    max_age: Option<u64>,
    secure: bool,
) -> HeaderValue {
    let mut text = format!("{name}={value}; Path={base}; HttpOnly; SameSite=Lax");
    match max_age {
        Some(seconds) => text.push_str(&format!("; Max-Age={seconds}")),
        None => text.push_str("; Max-Age=0"),
    }
    if secure {
        text.push_str("; Secure");
    }
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// A same-site check of a form post: browsers send `Sec-Fetch-Site` (and `Origin`) with every
/// post; a cross-site one is refused whatever it carries.
pub fn same_site(headers: &HeaderMap) -> super::Result<()> {
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some("same-origin" | "none") | None => Ok(()),
        Some(_) => Err(super::Error::Csrf),
    }
}

/// Only URL-encoded forms are read: a `text/plain` or JSON post (what another site can send
/// without a preflight, or a script) is refused before its body is looked at.
pub fn form_content_type(headers: &HeaderMap) -> super::Result<()> {
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if kind.split(';').next().is_some_and(|k| {
        k.trim()
            .eq_ignore_ascii_case("application/x-www-form-urlencoded")
    }) {
        Ok(())
    } else {
        Err(super::Error::Csrf)
    }
}

/// The key/value pairs of a URL-encoded body.
pub fn form_pairs(body: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(body).into_owned().collect()
}

/// The first value of `key`.
pub fn first<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignInPage<'a> {
    base: &'a str,
    assets: &'a super::assets::Urls,
    csrf: &'a str,
    email: &'a str,
    next: &'a str,
    error: Option<&'a str>,
    notice: Option<&'a str>,
}

/// Where to go after signing in: a console path only (never another site).
fn safe_next<'a>(base: &str, next: Option<&'a str>) -> Option<&'a str> {
    next.filter(|n| n.starts_with(&format!("{base}/")) && !n.starts_with("//"))
}

fn render_sign_in(
    state: &SharedState,
    headers: &HeaderMap,
    status: StatusCode,
    email: &str,
    next: &str,
    error: Option<&str>,
    notice: Option<&str>,
) -> Response {
    let base = super::base_path(&state.mount_path);
    // Kept when the browser has one: two sign-in tabs (or a reload) share it, so the first
    // form stays valid.
    let nonce = cookie(headers, SIGN_IN_COOKIE)
        .filter(|value| {
            value.len() == 32
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .unwrap_or_else(|| random_token(24));
    let page = SignInPage {
        base: &base,
        assets: super::assets::urls(),
        csrf: &nonce,
        email,
        next,
        error,
        notice,
    };
    let mut response = match page.render() {
        Ok(body) => (status, html(body)).into_response(),
        Err(error) => return super::Error::Render(error).into_response(),
    };
    let secure = secure_cookies(state, headers);
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(SIGN_IN_COOKIE, &nonce, &base, Some(600), secure),
    );
    response
}

/// `GET /console/sign-in` (also to switch user: a new sign-in replaces the session).
pub async fn sign_in_page(
    State(state): State<SharedState>,
    headers: HeaderMap,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let pairs = form_pairs(query.unwrap_or_default().as_bytes());
    let base = super::base_path(&state.mount_path);
    let next = safe_next(&base, first(&pairs, "next")).unwrap_or("");
    let notice = first(&pairs, "signed-out").map(|_| "You are signed out.");
    render_sign_in(&state, &headers, StatusCode::OK, "", next, None, notice)
}

/// `POST /console/sign-in`: email, password, the form's token, the browser's timezone.
pub async fn sign_in(
    State(state): State<SharedState>,
    headers: HeaderMap,
    connect: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    body: axum::body::Bytes,
) -> Response {
    let base = super::base_path(&state.mount_path);
    if let Err(error) = same_site(&headers).and_then(|()| form_content_type(&headers)) {
        return error.into_response();
    }
    let pairs = form_pairs(&body);
    let email = first(&pairs, "email").unwrap_or("").trim().to_owned();
    let password = first(&pairs, "password").unwrap_or("");
    let next = safe_next(&base, first(&pairs, "next"))
        .unwrap_or("")
        .to_owned();
    let fail = |status, message: &str| {
        render_sign_in(&state, &headers, status, &email, &next, Some(message), None)
    };
    let expected = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    let given = first(&pairs, "csrf").unwrap_or("");
    if expected.is_empty() || !bool::from(expected.as_bytes().ct_eq(given.as_bytes())) {
        return fail(
            StatusCode::FORBIDDEN,
            "This sign-in form has expired. Please sign in again.",
        );
    }
    if email.is_empty() || password.is_empty() {
        return fail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Enter your email and your password.",
        );
    }
    let (Some(login), Some(store)) = (state.login.as_ref(), state.store.as_ref()) else {
        return fail(
            StatusCode::SERVICE_UNAVAILABLE,
            "Signing in with a password is not available on this server.",
        );
    };
    // Without a peer address (a router driven in process), the loopback's quota.
    let ip = connect.map_or(
        std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        |axum::Extension(ConnectInfo(address))| address.ip(),
    );
    let user = match login.check_password(ip, &email, password).await {
        Ok(user) => user,
        Err(SignInError::RateLimited { retry_after }) => {
            return fail(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "Too many sign-in attempts. Try again in {} seconds.",
                    retry_after.as_secs()
                ),
            );
        }
        Err(SignInError::Failed) => {
            return fail(
                StatusCode::UNAUTHORIZED,
                "Wrong email or password. Check them and try again.",
            );
        }
        Err(SignInError::Store(error)) => {
            tracing::error!(%error, "console sign-in failed");
            return fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Signing in failed on the server. Try again later.",
            );
        }
    };
    let Some(team) = user.teams.first() else {
        return fail(
            StatusCode::FORBIDDEN,
            "Your account is in no team: ask an administrator to add you to one.",
        );
    };
    let token = match store.rendering_id(team.id).await.map(|rendering_id| {
        state.session.mint(
            SessionClaims::for_user(&user, team, rendering_id),
            SESSION_TTL,
        )
    }) {
        Ok(Ok(token)) => token,
        other => {
            tracing::error!(?other, "console sign-in could not issue a session");
            return fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Signing in failed on the server. Try again later.",
            );
        }
    };
    tracing::info!(user_id = user.id, "signed in to the console");
    let timezone = first(&pairs, "timezone")
        .filter(|tz| tz.parse::<Tz>().is_ok())
        .unwrap_or("UTC");
    let secure = secure_cookies(&state, &headers);
    let target = if next.is_empty() {
        format!("{base}/")
    } else {
        next.clone()
    };
    let mut response = Redirect::to(&target).into_response();
    let out = response.headers_mut();
    let ttl = Some(SESSION_TTL.as_secs());
    out.append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, &token, &base, ttl, secure),
    );
    out.append(
        header::SET_COOKIE,
        set_cookie(TIMEZONE_COOKIE, timezone, &base, ttl, secure),
    );
    out.append(
        header::SET_COOKIE,
        set_cookie(SIGN_IN_COOKIE, "", &base, None, secure),
    );
    response
}

/// `POST /console/sign-out`: the session's CSRF token; the cookies are cleared.
pub async fn sign_out(
    State(state): State<SharedState>,
    session: Session,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> super::Result<Response> {
    let _pairs = session.form(&headers, &body)?;
    let base = super::base_path(&state.mount_path);
    let secure = secure_cookies(&state, &headers);
    let mut response = Redirect::to(&format!("{base}/sign-in?signed-out=1")).into_response();
    let out = response.headers_mut();
    out.append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, "", &base, None, secure),
    );
    out.append(
        header::SET_COOKIE,
        set_cookie(TIMEZONE_COOKIE, "", &base, None, secure),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_csrf_token_is_bound_to_the_session() {
        assert_eq!(csrf_of("a.b.c"), csrf_of("a.b.c"));
        assert_ne!(csrf_of("a.b.c"), csrf_of("a.b.d"));
        assert_eq!(csrf_of("a.b.c").len(), 64);
    }

    #[test]
    fn only_url_encoded_same_site_posts_are_read() {
        let form = headers(&[("content-type", "application/x-www-form-urlencoded")]);
        assert!(form_content_type(&form).is_ok());
        for kind in [
            "text/plain",
            "application/json",
            "multipart/form-data; boundary=x",
        ] {
            let other = headers(&[("content-type", kind)]);
            assert!(form_content_type(&other).is_err(), "{kind}");
        }
        assert!(form_content_type(&HeaderMap::new()).is_err());
        assert!(same_site(&headers(&[("sec-fetch-site", "same-origin")])).is_ok());
        assert!(same_site(&headers(&[("sec-fetch-site", "cross-site")])).is_err());
        assert!(same_site(&headers(&[("sec-fetch-site", "same-site")])).is_err());
    }

    #[test]
    fn sign_in_only_returns_to_console_paths() {
        assert_eq!(
            safe_next("/console", Some("/console/c/orders")),
            Some("/console/c/orders")
        );
        assert_eq!(safe_next("/console", Some("https://evil.example/")), None);
        assert_eq!(safe_next("/console", Some("//evil.example/console/")), None);
        assert_eq!(safe_next("/console", Some("/forest/orders")), None);
    }

    #[test]
    fn cookies_are_http_only_same_site_and_secure_behind_tls() {
        let cookie = set_cookie(SESSION_COOKIE, "t", "/console", Some(60), true);
        let text = cookie.to_str().unwrap_or_default();
        assert!(
            text.contains("HttpOnly") && text.contains("SameSite=Lax") && text.contains("Secure")
        );
        assert!(over_tls(&headers(&[("x-forwarded-proto", "https")]), None));
        assert!(!over_tls(&HeaderMap::new(), None));
    }
}
