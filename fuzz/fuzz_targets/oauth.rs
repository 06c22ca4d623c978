//! The OAuth authorization server of the MCP endpoint (`mcp::oauth`): dynamic client
//! registration, the authorization request's parameters (redirect URI matching, PKCE, scope,
//! resource), the `allowedOAuthClients` domains, the redirect back, and the token endpoint's
//! form or JSON body.
//!
//! Input: `<authorize query string>\n<allowedOAuthClients, comma-separated>\n<body>`: the body
//! is read as a registration document and as a token request (form and JSON). Beyond "no panic",
//! it checks that what is accepted is consistent: a registered URI matches itself, an accepted
//! request redirects to a registered URI with known scopes, and a verifier matches its own S256
//! challenge.

#![no_main]

#[allow(dead_code, reason = "each target uses some of the shared helpers")]
mod common;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use canopy::mcp::SCOPES;
use canopy::mcp::oauth::{
    authorize_request, client_allowed, granted_scope, pkce_matches, redirect_matches,
    redirect_with, registration, same_resource, token_params,
};
use common::split;
use libfuzzer_sys::fuzz_target;
use sha2::{Digest as _, Sha256};

/// The `resource` of this server, as `Mcp::resource` writes it.
const RESOURCE: &str = "https://canopy.example/forest/mcp";

fuzz_target!(|data: &[u8]| {
    let (lines, body) = split(data, 2);
    let query: Vec<(String, String)> = form_urlencoded::parse(lines[0].as_bytes())
        .into_owned()
        .collect();
    let param = |key: &str| query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let allowed: Vec<String> = lines[1]
        .split(',')
        .map(|d| d.trim().to_ascii_lowercase())
        .filter(|d| !d.is_empty())
        .collect();

    // The registration document, then the client it registers (or a typical one).
    let registered = match serde_json::from_str(&body).map(|doc| registration(&doc)) {
        Ok(Ok(client)) => {
            for uri in &client.redirect_uris {
                assert!(redirect_matches(&client.redirect_uris, uri), "{uri:?}");
            }
            client.redirect_uris
        }
        _ => vec![
            "http://127.0.0.1:33418/callback".to_owned(),
            "https://client.example/oauth/callback".to_owned(),
        ],
    };
    let _ = client_allowed(&allowed, &registered);

    match authorize_request(param, &registered, RESOURCE) {
        Ok(request) => {
            assert!(redirect_matches(&registered, &request.redirect_uri));
            assert_eq!(request.resource, RESOURCE);
            assert_eq!(request.code_challenge.len(), 43);
            assert!(request.scope.split(' ').all(|s| SCOPES.contains(&s)));
            let _ = redirect_with(
                &request.redirect_uri,
                &[
                    ("code", "c0de"),
                    ("state", request.state.as_deref().unwrap_or("")),
                ],
            );
        }
        Err(error) => {
            let _ = format!("{error:?}");
        }
    }
    if let Ok(scope) = granted_scope(param("scope").as_deref()) {
        assert!(scope.split(' ').any(|s| s == "mcp:read"), "{scope:?}");
    }
    if let Some(resource) = param("resource") {
        let _ = same_resource(&resource, RESOURCE);
    }
    if let Some(uri) = param("redirect_uri") {
        let _ = redirect_with(&uri, &[("error", "access_denied"), ("iss", RESOURCE)]);
    }

    // PKCE: what the input holds, then the verifier against its own S256 challenge.
    let verifier = param("code_verifier").unwrap_or_default();
    let _ = pkce_matches(&verifier, &param("code_challenge").unwrap_or_default());
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    assert_eq!(
        pkce_matches(&verifier, &challenge),
        well_formed,
        "{verifier:?}"
    );

    // The token endpoint's body, as a form and as JSON.
    for json in [false, true] {
        let _ = token_params(json, body.as_bytes());
    }
});
