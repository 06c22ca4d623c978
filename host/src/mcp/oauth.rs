//! The rules of Canopy's OAuth 2.1 authorization server for MCP clients, without HTTP types:
//! client registration (RFC 7591), redirect-URI matching (exact; any port on loopback, RFC 8252
//! §7.3), the `allowedOAuthClients` domains, authorization requests (PKCE S256 only, RFC 8707
//! `resource`), PKCE verification and scopes.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value as Json, json};
use sha2::{Digest as _, Sha256};

use super::{DEFAULT_SCOPE, SCOPES};
use crate::platform::oauth::NewOAuthClient;

/// An OAuth error answer: `{error, error_description}` with its HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    pub status: u16,
    pub error: &'static str,
    pub description: String,
}

impl OAuthError {
    pub fn new(status: u16, error: &'static str, description: impl Into<String>) -> Self {
        Self {
            status,
            error,
            description: description.into(),
        }
    }

    pub fn bad(error: &'static str, description: impl Into<String>) -> Self {
        Self::new(400, error, description)
    }

    /// A client that `allowedOAuthClients` refuses: the message does not say which domains are.
    pub fn not_allowed() -> Self {
        Self::bad(
            "invalid_client",
            "This MCP server only accepts approved client applications. Contact your Canopy \
             administrator.",
        )
    }

    pub fn body(&self) -> Json {
        json!({"error": self.error, "error_description": self.description})
    }
}

/// The longest registration document accepted, in redirect URIs.
const MAX_REDIRECT_URIS: usize = 10;
/// The longest string field of a registration.
const MAX_FIELD: usize = 2048;

/// Whether `host` names this machine.
pub fn is_loopback(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1")
}

/// Checks one redirect URI of a registration: absolute, no fragment, and `https` unless it
/// points at this machine (a native client's loopback listener).
fn check_redirect_uri(uri: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(uri).map_err(|_| format!("{uri:?} is not an absolute URL"))?;
    if parsed.fragment().is_some() {
        return Err(format!("{uri:?} must not have a fragment"));
    }
    let host = parsed.host_str().unwrap_or("");
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(host) => Ok(()),
        "http" => Err(format!(
            "{uri:?} must use https (http only on localhost, 127.0.0.1 or [::1])"
        )),
        // A private-use scheme (`com.example.app:/callback`, RFC 8252 §7.1) for desktop apps.
        scheme if scheme.contains('.') => Ok(()),
        scheme => Err(format!("{uri:?} has the scheme {scheme:?}")),
    }
}

/// Reads a dynamic client registration (RFC 7591 §2): public clients only (`none`), the
/// authorization code and refresh grants. What the server does not support is refused with
/// `invalid_client_metadata`, a bad redirect URI with `invalid_redirect_uri`.
pub fn registration(body: &Json) -> Result<NewOAuthClient, OAuthError> {
    let Some(fields) = body.as_object() else {
        return Err(OAuthError::bad(
            "invalid_client_metadata",
            "the registration must be a JSON object",
        ));
    };
    let uris: Vec<String> = match fields.get("redirect_uris") {
        Some(Json::Array(uris)) if !uris.is_empty() => uris
            .iter()
            .map(|u| u.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                OAuthError::bad("invalid_redirect_uri", "redirect_uris must be strings")
            })?,
        _ => {
            return Err(OAuthError::bad(
                "invalid_redirect_uri",
                "redirect_uris must be a non-empty array of URLs",
            ));
        }
    };
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(OAuthError::bad(
            "invalid_redirect_uri",
            format!("at most {MAX_REDIRECT_URIS} redirect_uris"),
        ));
    }
    for uri in &uris {
        if uri.len() > MAX_FIELD {
            return Err(OAuthError::bad(
                "invalid_redirect_uri",
                "a redirect URI is too long",
            ));
        }
        check_redirect_uri(uri).map_err(|e| OAuthError::bad("invalid_redirect_uri", e))?;
    }
    let text = |key: &str| -> Result<Option<String>, OAuthError> {
        match fields.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) if s.len() <= MAX_FIELD => Ok(Some(s.clone())),
            Some(_) => Err(OAuthError::bad(
                "invalid_client_metadata",
                format!("{key} must be a string of at most {MAX_FIELD} characters"),
            )),
        }
    };
    let method = text("token_endpoint_auth_method")?.unwrap_or_else(|| "none".to_owned());
    if method != "none" {
        return Err(OAuthError::bad(
            "invalid_client_metadata",
            format!(
                "token_endpoint_auth_method {method:?} is not supported: this server registers \
                 public clients (\"none\") that prove themselves with PKCE"
            ),
        ));
    }
    let list = |key: &str, allowed: &[&str], default: &[&str]| -> Result<Vec<String>, OAuthError> {
        match fields.get(key) {
            None | Some(Json::Null) => Ok(default.iter().map(|s| (*s).to_owned()).collect()),
            Some(Json::Array(items)) => items
                .iter()
                .map(|item| match item.as_str() {
                    Some(s) if allowed.contains(&s) => Ok(s.to_owned()),
                    _ => Err(OAuthError::bad(
                        "invalid_client_metadata",
                        format!("{key} may only hold {}", allowed.join(", ")),
                    )),
                })
                .collect(),
            Some(_) => Err(OAuthError::bad(
                "invalid_client_metadata",
                format!("{key} must be an array"),
            )),
        }
    };
    let grant_types = list(
        "grant_types",
        &["authorization_code", "refresh_token"],
        &["authorization_code", "refresh_token"],
    )?;
    let response_types = list("response_types", &["code"], &["code"])?;
    let scope = match text("scope")? {
        Some(scope) => Some(granted_scope(Some(&scope))?),
        None => None,
    };
    let client_name = text("client_name")?;
    // What is echoed back: the client's descriptive fields, and what the server decided.
    let mut metadata = Map::new();
    for key in [
        "client_name",
        "client_uri",
        "logo_uri",
        "software_id",
        "software_version",
        "application_type",
    ] {
        if let Some(value) = text(key)? {
            metadata.insert(key.to_owned(), Json::String(value));
        }
    }
    metadata.insert("redirect_uris".to_owned(), json!(uris));
    metadata.insert("grant_types".to_owned(), json!(grant_types));
    metadata.insert("response_types".to_owned(), json!(response_types));
    metadata.insert("token_endpoint_auth_method".to_owned(), json!("none"));
    if let Some(scope) = scope {
        metadata.insert("scope".to_owned(), json!(scope));
    }
    Ok(NewOAuthClient {
        client_name,
        redirect_uris: uris,
        metadata: Json::Object(metadata),
    })
}

/// The parameters of a token request (`POST /oauth/token`), in body order: form encoding is the
/// standard (RFC 6749 §3.2), and a JSON object is read the same way (some clients send it), its
/// non-string values as their JSON text and `null` as absent.
pub fn token_params(json_body: bool, body: &[u8]) -> Result<Vec<(String, String)>, OAuthError> {
    if !json_body {
        return Ok(form_urlencoded::parse(body).into_owned().collect());
    }
    match serde_json::from_slice::<Json>(body) {
        Ok(Json::Object(fields)) => Ok(fields
            .into_iter()
            .filter_map(|(k, v)| match v {
                Json::String(s) => Some((k, s)),
                Json::Null => None,
                other => Some((k, other.to_string())),
            })
            .collect()),
        _ => Err(OAuthError::bad(
            "invalid_request",
            "the body is not a JSON object",
        )),
    }
}

/// Whether `presented` is one of the client's redirect URIs: the same string, or for a loopback
/// URI the same but for the port (a native client listens on whatever port is free).
pub fn redirect_matches(registered: &[String], presented: &str) -> bool {
    if registered.iter().any(|r| r == presented) {
        return true;
    }
    let Ok(presented) = reqwest::Url::parse(presented) else {
        return false;
    };
    if presented.scheme() != "http" || !presented.host_str().is_some_and(is_loopback) {
        return false;
    }
    registered.iter().any(|r| {
        reqwest::Url::parse(r).is_ok_and(|mut r| {
            r.scheme() == "http"
                && r.host_str() == presented.host_str()
                && r.set_port(presented.port()).is_ok()
                && r == presented
        })
    })
}

/// Whether `allowedOAuthClients` admits a client: every redirect URI is http(s) on one of the
/// domains or a subdomain. A client without redirect URIs is not.
pub fn client_allowed(allowed: &[String], redirect_uris: &[String]) -> bool {
    !redirect_uris.is_empty()
        && redirect_uris.iter().all(|uri| {
            reqwest::Url::parse(uri).is_ok_and(|url| {
                matches!(url.scheme(), "http" | "https")
                    && url.host_str().is_some_and(|host| {
                        let host = host.trim_end_matches('.').to_ascii_lowercase();
                        allowed.iter().any(|domain| {
                            host == *domain
                                || host
                                    .strip_suffix(domain.as_str())
                                    .is_some_and(|rest| rest.ends_with('.'))
                        })
                    })
            })
        })
}

/// The scopes granted for a request: the known ones asked for (all of [`DEFAULT_SCOPE`] when
/// none are); an unknown scope is `invalid_scope`.
pub fn granted_scope(requested: Option<&str>) -> Result<String, OAuthError> {
    let requested: Vec<&str> = requested
        .unwrap_or("")
        .split([' ', '+'])
        .filter(|s| !s.is_empty())
        .collect();
    if requested.is_empty() {
        return Ok(DEFAULT_SCOPE.to_owned());
    }
    if let Some(unknown) = requested.iter().find(|s| !SCOPES.contains(s)) {
        return Err(OAuthError::bad(
            "invalid_scope",
            format!(
                "unknown scope {unknown:?}; the scopes are {}",
                SCOPES.join(" ")
            ),
        ));
    }
    let mut granted: Vec<&str> = SCOPES
        .iter()
        .copied()
        .filter(|s| requested.contains(s))
        .collect();
    // Every call needs `mcp:read`: a token without it would be useless.
    if !granted.contains(&"mcp:read") {
        granted.insert(0, "mcp:read");
    }
    Ok(granted.join(" "))
}

/// Whether `verifier` is the PKCE S256 verifier of `challenge` (RFC 7636 §4.6), in constant time.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    // RFC 7636 §4.1: 43 to 128 unreserved characters.
    if !(43..=128).contains(&verifier.len())
        || !verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
    {
        return false;
    }
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    // Without an early exit (`subtle`): the time taken says nothing of how much matched.
    use subtle::ConstantTimeEq as _;
    bool::from(computed.as_bytes().ct_eq(challenge.as_bytes()))
}

/// A validated authorization request (`GET /oauth/authorize`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuthorizeRequest {
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub state: Option<String>,
    pub scope: String,
    pub resource: String,
}

/// What is wrong with an authorization request: before the client and its redirect URI are
/// known good, the error is shown to the user (never sent to an unverified URI); after, it goes
/// back to the client's redirect URI (RFC 6749 §4.1.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizeError {
    Show(OAuthError),
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: OAuthError,
    },
}

/// Checks an authorization request's parameters for a registered client (`registered`
/// redirect URIs) and this server's `resource`.
pub fn authorize_request(
    param: impl Fn(&str) -> Option<String>,
    registered: &[String],
    resource: &str,
) -> Result<AuthorizeRequest, AuthorizeError> {
    let client_id = param("client_id").unwrap_or_default();
    let redirect_uri = match param("redirect_uri") {
        Some(uri) if redirect_matches(registered, &uri) => uri,
        Some(_) => {
            return Err(AuthorizeError::Show(OAuthError::bad(
                "invalid_request",
                "redirect_uri is not one the client registered",
            )));
        }
        // RFC 6749 §3.1.2.3: optional when the client registered exactly one.
        None if registered.len() == 1 => registered[0].clone(),
        None => {
            return Err(AuthorizeError::Show(OAuthError::bad(
                "invalid_request",
                "redirect_uri is required",
            )));
        }
    };
    let state = param("state");
    let fail = |error: &'static str, description: &str| AuthorizeError::Redirect {
        redirect_uri: redirect_uri.clone(),
        state: state.clone(),
        error: OAuthError::bad(error, description),
    };
    if param("response_type").as_deref() != Some("code") {
        return Err(fail(
            "unsupported_response_type",
            "response_type must be code",
        ));
    }
    let Some(code_challenge) = param("code_challenge").filter(|c| !c.is_empty()) else {
        return Err(fail(
            "invalid_request",
            "code_challenge is required (PKCE with S256)",
        ));
    };
    if param("code_challenge_method").as_deref() != Some("S256") {
        return Err(fail(
            "invalid_request",
            "code_challenge_method must be S256",
        ));
    }
    if code_challenge.len() != 43 {
        return Err(fail(
            "invalid_request",
            "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
        ));
    }
    let resource = match param("resource") {
        Some(asked) if same_resource(&asked, resource) => resource.to_owned(),
        Some(_) => {
            return Err(fail(
                "invalid_target",
                "resource is not this MCP server's URL",
            ));
        }
        None => resource.to_owned(),
    };
    let scope = granted_scope(param("scope").as_deref()).map_err(|e| AuthorizeError::Redirect {
        redirect_uri: redirect_uri.clone(),
        state: state.clone(),
        error: e,
    })?;
    Ok(AuthorizeRequest {
        client_id,
        redirect_uri,
        code_challenge,
        state,
        scope,
        resource,
    })
}

/// Whether a client's `resource` names this server's: the same URL, but for a trailing slash
/// and the case of the scheme and host (RFC 8707 §2 canonical URIs).
pub fn same_resource(asked: &str, ours: &str) -> bool {
    let canonical = |u: &str| {
        reqwest::Url::parse(u.trim_end_matches('/'))
            .map(|u| u.as_str().trim_end_matches('/').to_owned())
            .ok()
    };
    canonical(asked).is_some() && canonical(asked) == canonical(ours)
}

/// The redirect URI with the response's parameters added (`iss` always, RFC 9207).
pub fn redirect_with(redirect_uri: &str, params: &[(&str, &str)]) -> String {
    match reqwest::Url::parse(redirect_uri) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(params);
            url.into()
        }
        Err(_) => redirect_uri.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_redirects_match_on_any_port_and_others_exactly() {
        let registered = vec![
            "http://127.0.0.1:3000/callback".to_owned(),
            "https://claude.ai/api/mcp/auth_callback".to_owned(),
        ];
        assert!(redirect_matches(
            &registered,
            "http://127.0.0.1:3000/callback"
        ));
        assert!(redirect_matches(
            &registered,
            "http://127.0.0.1:49152/callback"
        ));
        assert!(!redirect_matches(
            &registered,
            "http://127.0.0.1:49152/other"
        ));
        assert!(!redirect_matches(
            &registered,
            "http://localhost:3000/callback"
        ));
        assert!(redirect_matches(
            &registered,
            "https://claude.ai/api/mcp/auth_callback"
        ));
        assert!(!redirect_matches(
            &registered,
            "https://claude.ai:8443/api/mcp/auth_callback"
        ));
        assert!(!redirect_matches(
            &registered,
            "https://evil.example/api/mcp/auth_callback"
        ));
    }

    #[test]
    fn allowed_clients_need_every_redirect_on_a_listed_domain() {
        let allowed = vec!["claude.ai".to_owned()];
        let ok = |uris: &[&str]| {
            client_allowed(
                &allowed,
                &uris.iter().map(|u| (*u).to_owned()).collect::<Vec<_>>(),
            )
        };
        assert!(ok(&["https://claude.ai/cb", "https://app.claude.ai/cb"]));
        assert!(!ok(&["https://claude.ai/cb", "http://127.0.0.1:3000/cb"]));
        assert!(!ok(&["https://notclaude.ai/cb"]));
        assert!(!ok(&["https://claude.ai.evil.com/cb"]));
        assert!(!ok(&[]));
    }

    #[test]
    fn registrations_are_public_clients_with_safe_redirects() {
        let client = registration(&json!({
            "redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "Test",
            "token_endpoint_auth_method": "none", "grant_types": ["authorization_code"]
        }))
        .unwrap();
        assert_eq!(client.client_name.as_deref(), Some("Test"));
        assert_eq!(client.metadata["token_endpoint_auth_method"], "none");
        let refused = |body: Json| registration(&body).unwrap_err().error;
        assert_eq!(refused(json!({})), "invalid_redirect_uri");
        assert_eq!(
            refused(json!({"redirect_uris": ["http://example.com/cb"]})),
            "invalid_redirect_uri"
        );
        assert_eq!(
            refused(json!({"redirect_uris": ["https://x/cb#f"]})),
            "invalid_redirect_uri"
        );
        assert_eq!(
            refused(
                json!({"redirect_uris": ["https://x/cb"], "token_endpoint_auth_method": "client_secret_basic"})
            ),
            "invalid_client_metadata"
        );
        assert_eq!(
            refused(json!({"redirect_uris": ["https://x/cb"], "grant_types": ["password"]})),
            "invalid_client_metadata"
        );
    }

    #[test]
    fn pkce_s256_is_checked_against_the_rfc_example() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches(
            verifier,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM-"
        ));
        assert!(!pkce_matches("short", challenge));
    }

    #[test]
    fn scopes_default_and_unknown_ones_are_refused() {
        assert_eq!(granted_scope(None).unwrap(), DEFAULT_SCOPE);
        assert_eq!(
            granted_scope(Some("mcp:action")).unwrap(),
            "mcp:read mcp:action"
        );
        assert_eq!(
            granted_scope(Some("mcp:read+mcp:write")).unwrap(),
            "mcp:read mcp:write"
        );
        assert_eq!(
            granted_scope(Some("admin")).unwrap_err().error,
            "invalid_scope"
        );
    }

    #[test]
    fn authorization_requests_fail_visibly_before_the_redirect_is_trusted() {
        let registered = vec!["http://127.0.0.1:3000/cb".to_owned()];
        let resource = "http://localhost:3351/mcp";
        let params = |pairs: Vec<(&'static str, &'static str)>| {
            move |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let good = vec![
            ("client_id", "c"),
            ("redirect_uri", "http://127.0.0.1:4000/cb"),
            ("response_type", "code"),
            (
                "code_challenge",
                "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            ),
            ("code_challenge_method", "S256"),
            ("state", "xyz"),
            ("resource", "http://localhost:3351/mcp/"),
        ];
        let request = authorize_request(params(good.clone()), &registered, resource).unwrap();
        assert_eq!(request.redirect_uri, "http://127.0.0.1:4000/cb");
        assert_eq!(request.resource, resource);
        assert_eq!(request.scope, DEFAULT_SCOPE);
        let mut evil = good.clone();
        evil[1] = ("redirect_uri", "https://evil.example/cb");
        assert!(matches!(
            authorize_request(params(evil), &registered, resource),
            Err(AuthorizeError::Show(_))
        ));
        let mut plain = good.clone();
        plain[4] = ("code_challenge_method", "plain");
        assert!(matches!(
            authorize_request(params(plain), &registered, resource),
            Err(AuthorizeError::Redirect { error, .. }) if error.error == "invalid_request"
        ));
        let mut other = good;
        other[6] = ("resource", "http://other:1/mcp");
        assert!(matches!(
            authorize_request(params(other), &registered, resource),
            Err(AuthorizeError::Redirect { error, .. }) if error.error == "invalid_target"
        ));
    }

    #[test]
    fn token_requests_are_read_as_forms_or_json_objects() {
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            token_params(false, b"grant_type=authorization_code&code=a%2Bb&x"),
            Ok(pairs(&[
                ("grant_type", "authorization_code"),
                ("code", "a+b"),
                ("x", "")
            ]))
        );
        assert_eq!(
            token_params(
                true,
                br#"{"grant_type":"refresh_token","n":1,"scope":null}"#
            ),
            Ok(pairs(&[("grant_type", "refresh_token"), ("n", "1")]))
        );
        for bad in [&b"[1]"[..], b"grant_type=x", b"\xff"] {
            assert_eq!(
                token_params(true, bad).map_err(|e| e.error),
                Err("invalid_request")
            );
        }
    }
}
