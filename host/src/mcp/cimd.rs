//! Client ID Metadata Documents (MCP 2025-11-25, the way 2026-07-28 prefers over registration): a
//! client whose `client_id` is an `https` URL with a path is described by the JSON document at
//! that URL, which the server fetches.
//!
//! Fetching a URL a stranger chose is a server-side request forgery risk, so: `https` only, no
//! credentials in the URL, every address the host resolves to must be a public one (no loopback,
//! private, link-local, shared, documentation or multicast range), the connection goes to the
//! address that was checked (no second resolution to rebind), no redirects, five seconds, 64 KiB.
//! Documents are kept in memory for five minutes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::oauth::{OAuthError, registration};
use crate::platform::oauth::OAuthClient;

const TIMEOUT: Duration = Duration::from_secs(5);
const MAX_BYTES: usize = 64 * 1024;
/// How long a fetched document is trusted.
pub const CACHE_TTL: Duration = Duration::from_secs(300);

/// Whether a `client_id` names a metadata document: an `https` URL with a path.
pub fn is_document_url(client_id: &str) -> bool {
    client_id.starts_with("https://")
        && reqwest::Url::parse(client_id).is_ok_and(|u| u.path() != "/" && !u.path().is_empty())
}

/// Whether an address is on the public internet (what a metadata document may be fetched from).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        // Shared address space (RFC 6598), benchmarking (RFC 2544), IETF protocol assignments,
        // reserved.
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (18..20).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || a >= 240)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // Unique local (fc00::/7), link-local (fe80::/10), documentation (2001:db8::/32).
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first == 0x2001 && ip.segments()[1] == 0x0db8))
}

fn refused(description: impl Into<String>) -> OAuthError {
    OAuthError::bad("invalid_client", description)
}

/// Fetches and checks the document of `client_id`.
pub async fn fetch(client_id: &str) -> Result<OAuthClient, OAuthError> {
    let url = reqwest::Url::parse(client_id).map_err(|_| refused("client_id is not a URL"))?;
    if url.scheme() != "https" || !url.username().is_empty() || url.password().is_some() {
        return Err(refused(
            "a client_id URL must be https, without credentials",
        ));
    }
    if url.fragment().is_some() {
        return Err(refused("a client_id URL must not have a fragment"));
    }
    let host = url
        .host_str()
        .ok_or_else(|| refused("the client_id URL has no host"))?
        .to_owned();
    let port = url.port_or_known_default().unwrap_or(443);
    let addresses: Vec<SocketAddr> = tokio::time::timeout(
        TIMEOUT,
        tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), port)),
    )
    .await
    .map_err(|_| refused("the client_id's host did not resolve in time"))?
    .map_err(|_| refused("the client_id's host does not resolve"))?
    .collect();
    let Some(first) = addresses.first().copied() else {
        return Err(refused("the client_id's host does not resolve"));
    };
    if let Some(private) = addresses.iter().find(|a| !is_public(a.ip())) {
        tracing::warn!(client_id, address = %private.ip(), "MCP: a client metadata document on a non-public address was refused");
        return Err(refused(
            "the client_id's host is not a public address: metadata documents are only fetched from the internet",
        ));
    }
    let client = reqwest::Client::builder()
        .resolve(&host, first)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| refused(format!("cannot fetch the client metadata: {e}")))?;
    let mut response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|_| refused("the client metadata document could not be fetched"))?;
    if !response.status().is_success() {
        return Err(refused(format!(
            "the client metadata document answered {}",
            response.status().as_u16()
        )));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| refused("the client metadata document could not be read"))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BYTES {
            return Err(refused(
                "the client metadata document is larger than 64 KiB",
            ));
        }
    }
    let document: Json = serde_json::from_slice(&body)
        .map_err(|_| refused("the client metadata document is not JSON"))?;
    check(client_id, &document)
}

/// Checks a fetched document: it names itself, and is a valid registration.
pub fn check(client_id: &str, document: &Json) -> Result<OAuthClient, OAuthError> {
    if document.get("client_id").and_then(Json::as_str) != Some(client_id) {
        return Err(refused(
            "the metadata document's client_id is not its own URL",
        ));
    }
    let new = registration(document).map_err(|e| refused(e.description))?;
    Ok(OAuthClient {
        client_id: client_id.to_owned(),
        client_name: new.client_name,
        redirect_uris: new.redirect_uris,
        metadata: new.metadata,
        created_at: chrono::Utc::now().timestamp_millis(),
    })
}

/// A fetched document and when.
pub type Cached = (OAuthClient, Instant);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_public_addresses_may_serve_a_document() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "224.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn document_urls_are_https_with_a_path() {
        assert!(is_document_url("https://app.example/oauth/client.json"));
        assert!(!is_document_url("https://app.example/"));
        assert!(!is_document_url("http://app.example/client.json"));
        assert!(!is_document_url("mcp_abc"));
    }

    #[test]
    fn a_document_must_name_itself_and_register_cleanly() {
        let id = "https://app.example/client.json";
        let good = json!({"client_id": id, "client_name": "App", "redirect_uris": ["https://app.example/cb"]});
        let client = check(id, &good).unwrap();
        assert_eq!(client.client_id, id);
        assert_eq!(client.redirect_uris, ["https://app.example/cb"]);
        let other = json!({"client_id": "https://evil.example/c.json", "redirect_uris": ["https://app.example/cb"]});
        assert_eq!(check(id, &other).unwrap_err().error, "invalid_client");
        let bad = json!({"client_id": id, "redirect_uris": ["http://evil.example/cb"]});
        assert_eq!(check(id, &bad).unwrap_err().error, "invalid_client");
    }

    #[tokio::test]
    async fn loopback_and_plain_http_documents_are_never_fetched() {
        let refused = fetch("https://127.0.0.1:9/client.json").await.unwrap_err();
        assert!(
            refused.description.contains("not a public address"),
            "{refused:?}"
        );
        let refused = fetch("https://localhost:9/client.json").await.unwrap_err();
        assert!(
            refused.description.contains("not a public address"),
            "{refused:?}"
        );
        let refused = fetch("https://user:pw@app.example/c.json")
            .await
            .unwrap_err();
        assert!(refused.description.contains("credentials"), "{refused:?}");
    }
}
