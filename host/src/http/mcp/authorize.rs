//! `GET` and `POST {base}/oauth/authorize`: the authorization request is checked (client,
//! `allowedOAuthClients`, redirect URI, PKCE, resource, scope), then the user signs in through
//! Canopy's login and consents on one page; the browser goes back to the client with a one-time
//! code, the `state` and `iss` (RFC 9207).
//!
//! The validated request travels in a login request token (signed, expiring, see
//! `auth::login`), tied to the browser by the sign-in CSRF cookie: nothing is stored until the
//! user has signed in. With an OpenID provider, the page sends the user there and the provider's
//! callback comes back here (`resume`).

use std::net::IpAddr;

use axum::body::Bytes;
use axum::extract::{FromRequest as _, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};

use super::super::SharedState;
use super::super::authentication::{client_ip, cookie_value, csrf_cookie_at, html, request_base};
use super::too_many;
use crate::auth::login::page::{self, ConsentForm};
use crate::auth::login::{
    CSRF_COOKIE, GENERIC_FAILURE, Login, LoginRequest, SignInError, random_token,
};
use crate::mcp::Mcp;
use crate::mcp::oauth::{
    AuthorizeError, AuthorizeRequest, OAuthError, authorize_request, redirect_with,
};

/// What marks a login request as an MCP authorization (its `state`).
pub(crate) const STATE_PREFIX: &str = "mcp:";

fn pairs(raw: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(raw).into_owned().collect()
}

fn param(pairs: &[(String, String)], key: &str) -> Option<String> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
}

fn error_page(error: &OAuthError) -> Response {
    // A browser shows the page; a script reads the same `{error}` in its title and text.
    html(
        StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST),
        page::message(
            &format!("Authorization refused: {}", error.error),
            &error.description,
        ),
    )
}

fn found(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(value) => (
            StatusCode::FOUND,
            [
                (header::LOCATION, value),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
        )
            .into_response(),
        Err(_) => error_page(&OAuthError::bad("invalid_request", "unusable redirect_uri")),
    }
}

/// The client's redirect with an error (RFC 6749 §4.1.2.1).
fn redirect_error(
    mcp: &Mcp,
    base: &str,
    redirect_uri: &str,
    state: Option<&str>,
    error: &OAuthError,
) -> Response {
    let issuer = mcp.issuer(base);
    let mut params = vec![
        ("error", error.error),
        ("error_description", error.description.as_str()),
    ];
    if let Some(state) = state {
        params.push(("state", state));
    }
    params.push(("iss", &issuer));
    found(&redirect_with(redirect_uri, &params))
}

fn rate_limited(mcp: &Mcp, ip: IpAddr) -> Option<Response> {
    let retry = mcp.check_authorize_rate(ip).err()?;
    tracing::warn!(%ip, "MCP authorization rate limited");
    let response = too_many("authorization requests", retry);
    Some(response)
}

/// The MCP and login services, or the 404 of a router built without them (boxed: a response
/// is large).
fn services(state: &SharedState) -> Result<(&Mcp, &Login), Box<Response>> {
    match (state.mcp.as_deref(), state.login.as_deref()) {
        (Some(mcp), Some(login)) => Ok((mcp, login)),
        _ => Err(Box::new(error_page(&OAuthError::new(
            404,
            "not_found",
            "the MCP server is not mounted",
        )))),
    }
}

/// The request carried by a login request, if it is an MCP one.
fn carried(login_request: &LoginRequest) -> Option<AuthorizeRequest> {
    let json = login_request.state.strip_prefix(STATE_PREFIX)?;
    serde_json::from_str(json).ok()
}

struct Page<'a> {
    mcp: &'a Mcp,
    login: &'a Login,
    request: &'a AuthorizeRequest,
    login_request: &'a LoginRequest,
    nonce: &'a str,
    client_name: &'a str,
}

impl Page<'_> {
    fn render(&self, status: StatusCode, email: &str, error: Option<&str>) -> Response {
        let host = reqwest::Url::parse(&self.request.redirect_uri)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        let action = self.mcp.paths().authorize;
        html(
            status,
            page::consent(&ConsentForm {
                action: &action,
                request: &self.login_request.token,
                csrf: &self.login.csrf_token(self.login_request, self.nonce),
                email,
                error,
                client: self.client_name,
                redirect_host: &host,
                scopes: &self.request.scope,
                provider: self.login.oidc().map(|p| p.issuer()),
            }),
        )
    }
}

/// `GET {base}/oauth/authorize`.
pub(super) async fn page(State(state): State<SharedState>, request: Request) -> Response {
    let (mcp, login) = match services(&state) {
        Ok(services) => services,
        Err(response) => return *response,
    };
    if let Some(response) = rate_limited(mcp, client_ip(&request)) {
        return response;
    }
    let base = request_base(request.headers(), request.uri());
    let query = pairs(request.uri().query().unwrap_or("").as_bytes());
    authorize(mcp, login, &base, &query, request.headers()).await
}

async fn authorize(
    mcp: &Mcp,
    login: &Login,
    base: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
) -> Response {
    let Some(client_id) = param(query, "client_id").filter(|c| !c.is_empty()) else {
        return error_page(&OAuthError::bad("invalid_request", "client_id is required"));
    };
    let client = match mcp.client(&client_id).await {
        Ok(client) => client,
        Err(error) => return error_page(&error),
    };
    let request = match authorize_request(
        |k| param(query, k),
        &client.redirect_uris,
        &mcp.resource(base),
    ) {
        Ok(request) => request,
        Err(AuthorizeError::Show(error)) => return error_page(&error),
        Err(AuthorizeError::Redirect {
            redirect_uri,
            state,
            error,
        }) => {
            return redirect_error(mcp, base, &redirect_uri, state.as_deref(), &error);
        }
    };
    let state_text = match serde_json::to_string(&request) {
        Ok(text) => format!("{STATE_PREFIX}{text}"),
        Err(_) => return error_page(&OAuthError::new(500, "server_error", "try again")),
    };
    let login_request = login.begin(&state_text);
    // Another tab's cookie is kept, so both forms stay valid.
    let nonce = cookie_value(headers, CSRF_COOKIE)
        .filter(|n| n.len() <= 64)
        .unwrap_or_else(|| random_token(16));
    let name = client
        .client_name
        .clone()
        .unwrap_or_else(|| client.client_id.clone());
    let page = Page {
        mcp,
        login,
        request: &request,
        login_request: &login_request,
        nonce: &nonce,
        client_name: &name,
    };
    let mut response = page.render(StatusCode::OK, "", None);
    response.headers_mut().insert(
        header::SET_COOKIE,
        csrf_cookie_at(login, base, &nonce, &mcp.paths().authorize),
    );
    response
}

/// `POST {base}/oauth/authorize`: the consent form (or, from a client, the same parameters as
/// the GET, which RFC 6749 §3.1 allows).
pub(super) async fn submit(State(state): State<SharedState>, request: Request) -> Response {
    let (mcp, login) = match services(&state) {
        Ok(services) => services,
        Err(response) => return *response,
    };
    let ip = client_ip(&request);
    if let Some(response) = rate_limited(mcp, ip) {
        return response;
    }
    let base = request_base(request.headers(), request.uri());
    let headers = request.headers().clone();
    let Ok(body) = Bytes::from_request(request, &()).await else {
        return error_page(&OAuthError::bad("invalid_request", "the form is too large"));
    };
    let form = pairs(&body);
    let Some(token) = param(&form, "request") else {
        // Not our form: an authorization request posted by a client.
        return authorize(mcp, login, &base, &form, &headers).await;
    };
    let expired = || {
        error_page(&OAuthError::bad(
            "invalid_request",
            "This authorization page has expired: go back to the application and connect again.",
        ))
    };
    let Some(login_request) = login.request(&token) else {
        return expired();
    };
    let Some(authorize_request) = carried(&login_request) else {
        return expired();
    };
    let nonce = cookie_value(&headers, CSRF_COOKIE).unwrap_or_default();
    if !login.check_csrf(
        &login_request,
        &nonce,
        &param(&form, "csrf").unwrap_or_default(),
    ) {
        return error_page(&OAuthError::new(
            403,
            "invalid_request",
            "This authorization form is no longer valid: reload it and try again (cookies must be allowed for this site).",
        ));
    }
    // The client may have been removed or fallen out of `allowedOAuthClients` meanwhile.
    let client = match mcp.client(&authorize_request.client_id).await {
        Ok(client) => client,
        Err(error) => return error_page(&error),
    };
    let state_param = authorize_request.state.as_deref();
    if param(&form, "decision").as_deref() != Some("allow") {
        return redirect_error(
            mcp,
            &base,
            &authorize_request.redirect_uri,
            state_param,
            &OAuthError::bad("access_denied", "the user denied the authorization"),
        );
    }
    if let Some(provider) = login.oidc() {
        // Sign-in goes through the provider, which comes back to the login's OpenID callback;
        // that callback sends MCP logins to `resume`.
        let redirect = login.oidc_redirect_uri(&base);
        return match provider
            .authorization_url(
                &redirect,
                &login_request.token,
                &login.pkce_verifier(&login_request),
                &login.oidc_nonce(&login_request),
            )
            .await
        {
            Ok(url) => found(&url),
            Err(error) => {
                tracing::error!(%error, "MCP authorization: the OpenID provider is unavailable");
                error_page(&OAuthError::new(
                    503,
                    "temporarily_unavailable",
                    "the identity provider is unavailable; try again",
                ))
            }
        };
    }
    let email = param(&form, "email").unwrap_or_default();
    let name = client
        .client_name
        .clone()
        .unwrap_or_else(|| client.client_id.clone());
    let page = Page {
        mcp,
        login,
        request: &authorize_request,
        login_request: &login_request,
        nonce: &nonce,
        client_name: &name,
    };
    let user = match login
        .check_password(ip, &email, &param(&form, "password").unwrap_or_default())
        .await
    {
        Ok(user) => user,
        Err(SignInError::Failed) => {
            tracing::info!(%ip, "MCP authorization: sign-in failed");
            return page.render(StatusCode::UNAUTHORIZED, &email, Some(GENERIC_FAILURE));
        }
        Err(SignInError::RateLimited { retry_after }) => {
            let mut response = error_page(&OAuthError::new(
                429,
                "too_many_requests",
                format!(
                    "Too many sign-in attempts: wait {} seconds, then try again.",
                    retry_after.as_secs()
                ),
            ));
            if let Ok(value) = HeaderValue::from_str(&retry_after.as_secs().to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Err(SignInError::Store(error)) => {
            tracing::error!(%error, "MCP authorization could not read the store");
            return error_page(&OAuthError::new(
                500,
                "server_error",
                "try again in a moment",
            ));
        }
    };
    grant(mcp, &base, user.id, &authorize_request).await
}

/// Issues the code of a signed-in user and sends the browser back to the client.
async fn grant(mcp: &Mcp, base: &str, user_id: i64, request: &AuthorizeRequest) -> Response {
    match mcp.issue_code(user_id, request).await {
        Ok(code) => {
            tracing::info!(client = %request.client_id, user = user_id, "MCP authorization granted");
            let issuer = mcp.issuer(base);
            let mut params = vec![("code", code.as_str())];
            if let Some(state) = &request.state {
                params.push(("state", state));
            }
            params.push(("iss", &issuer));
            found(&redirect_with(&request.redirect_uri, &params))
        }
        Err(error) => error_page(&error),
    }
}

/// The OpenID callback's continuation for an MCP login: the provider proved who `user_id` is
/// for this login request.
pub(crate) async fn resume(
    state: &SharedState,
    base: &str,
    user_id: i64,
    login_request: &LoginRequest,
) -> Option<Response> {
    let request = carried(login_request)?;
    let mcp = state.mcp.as_deref()?;
    if let Err(error) = mcp.client(&request.client_id).await {
        return Some(error_page(&error));
    }
    Some(grant(mcp, base, user_id, &request).await)
}

/// Whether the login request's state is an MCP authorization's.
pub(crate) fn is_mcp_login(state: &str) -> bool {
    state.starts_with(STATE_PREFIX)
}
