//! `/forest/authentication…`: sign-in, public (no session token, no IP whitelist, as in the
//! agent, whose router mounts these before its JWT middleware).
//!
//! - `POST /authentication {renderingId?}` → `{"authorizationUrl"}` (the built-in sign-in page, or
//!   the OpenID provider's authorization endpoint); a `renderingId` that is NaN → 400. The token's
//!   rendering is the user's team's, so `renderingId` is optional (the agent requires it) and only
//!   travels back in `state`.
//! - `GET /authentication/callback?code&state` → `{token, tokenData}`; an identity error → 401
//!   `{error, error_description, state}`; a user who may not sign in → 403
//!   `{error: 403, error_description}`.
//! - `GET|POST /authentication/sign-in`: Canopy's own sign-in page (built-in identity source).
//! - `GET /authentication/oidc/callback`: where the OpenID provider sends the browser back.
//! - `POST /authentication/logout`: clears the `forest_session_token` cookie (a Canopy route).
//!
//! `auth::login` does the work; this file only reads requests and writes answers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest as _, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value as Json, json};

use super::error::ApiError;
use super::{JsonBody, SharedState};
use crate::auth::login::oidc::{ClaimsError, OidcError, sync_user};
use crate::auth::login::page::{self, SignInForm};
use crate::auth::login::{
    CSRF_COOKIE, CallbackError, GENERIC_FAILURE, Login, LoginRequest, REQUEST_TTL, SignInError,
    client_state, js_number, random_token, state_is_readable,
};
use crate::auth::session::COOKIE_NAME;
use crate::{agent, datasource};

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/authentication", post(start))
        .route("/authentication/callback", get(callback))
        .route("/authentication/sign-in", get(sign_in_page).post(sign_in))
        .route("/authentication/oidc/callback", get(oidc_callback))
        .route("/authentication/logout", post(logout))
}

/// The query string's pairs, decoded; the first of a repeated key wins.
fn query(uri: &Uri) -> Vec<(String, String)> {
    form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// `scheme://host` of the request: the Host header (or the URI's authority), `https` when a proxy
/// says so in `X-Forwarded-Proto`. Only used where `publicUrl` is not configured; a Host that is
/// not a plain host name reads as `localhost`.
pub(super) fn request_base(headers: &HeaderMap, uri: &Uri) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .filter(|h| {
            !h.is_empty()
                && h.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                })
        })
        .unwrap_or("localhost");
    let https = headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    format!("{}://{host}", if https { "https" } else { "http" })
}

/// The client's address, as the server accepted its connection (rate limits key on it).
pub(super) fn client_ip(request: &Request) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip())
}

/// A cookie's value from the request's `Cookie` headers.
pub(super) fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_owned())
        .filter(|v| !v.is_empty())
}

/// An HTML page, never cached nor framed, with no script allowed.
pub(super) fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
            ),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

fn message_page(status: StatusCode, title: &str, text: &str) -> Response {
    html(status, page::message(title, text))
}

fn expired_page() -> Response {
    message_page(
        StatusCode::BAD_REQUEST,
        "This sign-in link has expired",
        "Go back to the application and sign in again.",
    )
}

fn unavailable_page() -> Response {
    message_page(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Sign-in is unavailable",
        "Something went wrong on the server; try again in a moment.",
    )
}

/// A `303 See Other` to `location`: the browser follows it with a GET.
fn see_other(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(value) => (StatusCode::SEE_OTHER, [(header::LOCATION, value)]).into_response(),
        Err(_) => unavailable_page(),
    }
}

/// The service, or the 404 of a router built without one (route tests over a bare stack).
fn service(state: &SharedState) -> Result<&Login, ApiError> {
    state.login.as_deref().ok_or(ApiError::RouteNotFound)
}

/// An unexpected error: logged, answered with the agent's 500.
fn unexpected(error: &dyn std::fmt::Display) -> ApiError {
    tracing::error!(%error, "sign-in failed");
    ApiError::Datasource(datasource::Error::Internal(error.to_string()))
}

// ----- the agent's two routes -------------------------------------------------------------

/// `POST /authentication`: the URL where the browser signs in.
async fn start(
    State(state): State<SharedState>,
    headers: HeaderMap,
    uri: Uri,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let login = service(&state)?;
    // Absent (or no body at all): accepted, since the token's rendering never comes from it. A
    // value that is present must still read as a number, as the agent checks.
    let state = match body.get("renderingId") {
        None => "{}".to_owned(),
        Some(value) => client_state(
            js_number(Some(value))
                .ok_or_else(|| agent::Error::validation("Rendering id must be a number"))?,
        ),
    };
    let request = login.begin(&state);
    let base = request_base(&headers, &uri);
    let authorization_url = match login.oidc() {
        Some(provider) => provider
            .authorization_url(
                &login.oidc_redirect_uri(&base),
                &request.token,
                &login.pkce_verifier(&request),
                &login.oidc_nonce(&request),
            )
            .await
            .map_err(|e| unexpected(&e))?,
        None => format!(
            "{}{}?request={}",
            login.base_url(&base),
            login.sign_in_path(),
            request.token
        ),
    };
    Ok(super::json(
        &json!({ "authorizationUrl": authorization_url }),
    ))
}

/// `GET /authentication/callback`: the one-time code for a session token.
async fn callback(State(state): State<SharedState>, uri: Uri) -> Result<Response, ApiError> {
    let login = service(&state)?;
    let pairs = query(&uri);
    let Some(client_state) = param(&pairs, "state").filter(|s| state_is_readable(s)) else {
        return Err(agent::Error::validation(CallbackError::InvalidState.to_string()).into());
    };
    if let Some(error) = param(&pairs, "error") {
        return Ok(provider_error(
            error,
            param(&pairs, "error_description"),
            Some(client_state),
        ));
    }
    let Some(code) = param(&pairs, "code").filter(|c| !c.is_empty()) else {
        return Ok(provider_error(
            "invalid_request",
            Some("code missing from response"),
            None,
        ));
    };
    match login.redeem(code, client_state).await {
        Ok(issued) => Ok(super::json(
            &json!({ "token": issued.token, "tokenData": issued.token_data }),
        )),
        Err(CallbackError::Provider {
            error,
            description,
            state,
        }) => Ok(provider_error(
            &error,
            description.as_deref(),
            state.as_deref(),
        )),
        Err(CallbackError::Forbidden(message)) => {
            tracing::warn!(message, "sign-in refused");
            Ok(super::json_with(
                StatusCode::FORBIDDEN,
                &json!({ "error": 403, "error_description": message }),
            ))
        }
        Err(CallbackError::InvalidState) => {
            Err(agent::Error::validation(CallbackError::InvalidState.to_string()).into())
        }
        Err(error @ (CallbackError::Store(_) | CallbackError::Token(_))) => Err(unexpected(&error)),
    }
}

/// The agent's 401 of an OpenID error: `{error, error_description, state}`, absent ones left out.
fn provider_error(error: &str, description: Option<&str>, state: Option<&str>) -> Response {
    let mut body = Map::new();
    body.insert("error".into(), Json::from(error));
    if let Some(description) = description {
        body.insert("error_description".into(), Json::from(description));
    }
    if let Some(state) = state {
        body.insert("state".into(), Json::from(state));
    }
    super::json_with(StatusCode::UNAUTHORIZED, &Json::Object(body))
}

// ----- the built-in sign-in page ----------------------------------------------------------

/// The page of a Canopy signing in through an OpenID provider.
fn password_sign_in_off(issuer: &str) -> Response {
    message_page(
        StatusCode::NOT_FOUND,
        "Password sign-in is off",
        &format!("This Canopy signs in through {issuer}."),
    )
}

/// `canopy_sign_in={nonce}` for the sign-in routes only, readable by no script, sent by the
/// browser on same-site requests only (a form posted from another site arrives without it).
pub(super) fn csrf_cookie_at(login: &Login, base: &str, nonce: &str, path: &str) -> HeaderValue {
    let secure = if login.base_url(base).starts_with("https:") {
        "; Secure"
    } else {
        ""
    };
    let value = format!(
        "{CSRF_COOKIE}={nonce}; Path={path}; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
        REQUEST_TTL.as_secs()
    );
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn csrf_cookie(login: &Login, base: &str, nonce: &str) -> HeaderValue {
    csrf_cookie_at(login, base, nonce, &login.sign_in_path())
}

/// The form page for `request`, with this status, email and error.
fn form_page(
    login: &Login,
    request: &LoginRequest,
    nonce: &str,
    status: StatusCode,
    email: &str,
    error: Option<&str>,
) -> Response {
    let action = login.sign_in_path();
    let csrf = login.csrf_token(request, nonce);
    html(
        status,
        page::sign_in(&SignInForm {
            action: &action,
            request: &request.token,
            csrf: &csrf,
            email,
            error,
        }),
    )
}

/// `GET /authentication/sign-in?request=…`: the form, and the cookie it is tied to.
async fn sign_in_page(
    State(state): State<SharedState>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    let login = service(&state)?;
    if let Some(provider) = login.oidc() {
        return Ok(password_sign_in_off(provider.issuer()));
    }
    let pairs = query(&uri);
    let Some(request) = param(&pairs, "request").and_then(|token| login.request(token)) else {
        return Ok(expired_page());
    };
    // Another tab's cookie is kept, so both forms stay valid.
    let nonce = cookie_value(&headers, CSRF_COOKIE)
        .filter(|n| n.len() <= 64)
        .unwrap_or_else(|| random_token(16));
    let mut response = form_page(login, &request, &nonce, StatusCode::OK, "", None);
    let base = request_base(&headers, &uri);
    response
        .headers_mut()
        .insert(header::SET_COOKIE, csrf_cookie(login, &base, &nonce));
    Ok(response)
}

/// `POST /authentication/sign-in` (a form): the password check, then the redirect with a
/// one-time code.
async fn sign_in(State(state): State<SharedState>, request: Request) -> Result<Response, ApiError> {
    let login = service(&state)?;
    if let Some(provider) = login.oidc() {
        return Ok(password_sign_in_off(provider.issuer()));
    }
    let ip = client_ip(&request);
    let base = request_base(request.headers(), request.uri());
    let nonce = cookie_value(request.headers(), CSRF_COOKIE).unwrap_or_default();
    let Ok(body) = Bytes::from_request(request, &()).await else {
        return Ok(message_page(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Sign-in form too large",
            "Go back and try again.",
        ));
    };
    let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    let field = |name: &str| param(&form, name).unwrap_or("");
    let Some(login_request) = login.request(field("request")) else {
        return Ok(expired_page());
    };
    if !login.check_csrf(&login_request, &nonce, field("csrf")) {
        return Ok(message_page(
            StatusCode::FORBIDDEN,
            "This sign-in form is no longer valid",
            "Reload the sign-in page and try again (cookies must be allowed for this site).",
        ));
    }
    let email = field("email");
    match login.check_password(ip, email, field("password")).await {
        Ok(user) => match login.issue_code(user.id, &login_request.state).await {
            Ok(code) => Ok(see_other(&login.redirect_with(
                &base,
                &[("code", &code), ("state", &login_request.state)],
            ))),
            Err(error) => {
                tracing::error!(%error, "could not issue a sign-in code");
                Ok(unavailable_page())
            }
        },
        Err(SignInError::Failed) => {
            tracing::info!(%ip, "sign-in failed");
            Ok(form_page(
                login,
                &login_request,
                &nonce,
                StatusCode::UNAUTHORIZED,
                email,
                Some(GENERIC_FAILURE),
            ))
        }
        Err(SignInError::RateLimited { retry_after }) => {
            tracing::warn!(%ip, "sign-in rate limited");
            let mut response = message_page(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many sign-in attempts",
                &format!("Wait {} seconds, then try again.", retry_after.as_secs()),
            );
            if let Ok(value) = HeaderValue::from_str(&retry_after.as_secs().to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            Ok(response)
        }
        Err(SignInError::Store(error)) => {
            tracing::error!(%error, "sign-in could not read the store");
            Ok(unavailable_page())
        }
    }
}

// ----- OpenID Connect -----------------------------------------------------------------------

/// `GET /authentication/oidc/callback?code&state`: the provider's code for the user's claims,
/// then the same one-time code as the built-in page. Failures go to the redirect target as
/// `?error=…&error_description=…&state=…`, which the agent's callback answers with its 401.
async fn oidc_callback(
    State(state): State<SharedState>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    let login = service(&state)?;
    let Some(provider) = login.oidc() else {
        return Err(ApiError::RouteNotFound);
    };
    let pairs = query(&uri);
    let Some(request) = param(&pairs, "state").and_then(|token| login.request(token)) else {
        return Ok(expired_page());
    };
    let base = request_base(&headers, &uri);
    let fail = |error: &str, description: &str| {
        see_other(&login.redirect_with(
            &base,
            &[
                ("error", error),
                ("error_description", description),
                ("state", &request.state),
            ],
        ))
    };
    if let Some(error) = param(&pairs, "error") {
        return Ok(fail(
            error,
            param(&pairs, "error_description").unwrap_or(""),
        ));
    }
    let Some(code) = param(&pairs, "code") else {
        return Ok(fail("invalid_request", "code missing from response"));
    };
    let claims = match provider
        .exchange(
            &login.oidc_redirect_uri(&base),
            code,
            &login.pkce_verifier(&request),
            &login.oidc_nonce(&request),
        )
        .await
    {
        Ok(claims) => claims,
        Err(OidcError::Provider { error, description }) => {
            return Ok(fail(&error, description.as_deref().unwrap_or("")));
        }
        Err(OidcError::Unavailable(detail)) => {
            tracing::warn!(detail, "OpenID Connect sign-in failed");
            return Ok(fail(
                "server_error",
                "The identity provider's answer could not be used; see Canopy's log.",
            ));
        }
    };
    let user = match sync_user(login.store(), provider.config(), &claims).await {
        Ok(user) => user,
        Err(ClaimsError::Refused(message)) => {
            tracing::warn!(message, "OpenID Connect sign-in refused");
            return Ok(fail("access_denied", &message));
        }
        Err(ClaimsError::Store(error)) => {
            tracing::error!(%error, "OpenID Connect sign-in could not write the store");
            return Ok(unavailable_page());
        }
    };
    // An MCP client's authorization continues at the MCP server, which issues its own code.
    if super::mcp::is_mcp_login(&request.state) {
        return Ok(super::mcp::resume(&state, &base, user.id, &request)
            .await
            .unwrap_or_else(expired_page));
    }
    match login.issue_code(user.id, &request.state).await {
        Ok(code) => Ok(see_other(
            &login.redirect_with(&base, &[("code", &code), ("state", &request.state)]),
        )),
        Err(error) => {
            tracing::error!(%error, "could not issue a sign-in code");
            Ok(unavailable_page())
        }
    }
}

// ----- logout ---------------------------------------------------------------------------------

/// `POST /authentication/logout`: 204, and the session cookie cleared. The agent has no such
/// route (the Forest application forgets its token itself); a token stays valid until its
/// `exp`, as with the agent.
async fn logout() -> Response {
    let clear = format!(
        "{COOKIE_NAME}=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Lax"
    );
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(value) = HeaderValue::from_str(&clear) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_comes_from_the_host_and_the_proxy() {
        let mut headers = HeaderMap::new();
        let uri: Uri = "/forest/authentication".parse().unwrap();
        assert_eq!(request_base(&headers, &uri), "http://localhost");
        headers.insert(header::HOST, HeaderValue::from_static("canopy.test:8080"));
        assert_eq!(request_base(&headers, &uri), "http://canopy.test:8080");
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert_eq!(request_base(&headers, &uri), "https://canopy.test:8080");
        headers.insert(header::HOST, HeaderValue::from_static("evil/\"<x>"));
        assert_eq!(request_base(&headers, &uri), "https://localhost");
    }
}
