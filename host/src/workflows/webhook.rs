//! Signed webhook URLs (platform-api.md §2.1): `{base}/v1/workflow-hooks/{hook}` where
//! `hook = {trigger_id}.{url_version}.{kid}.{mac}` and `mac` is the first 128 bits, base64url, of
//! HMAC-SHA256(key[kid], a domain-separated message over the project, the environment, the
//! trigger id and the URL version).
//!
//! The MAC is checked in constant time before anything reads the store, so a forged or
//! truncated URL costs one HMAC and learns nothing about which triggers exist. The workflow is
//! bound through the trigger: a trigger row belongs to one workflow for its whole life (its id is
//! random and never reused), so the URL does not need to carry the workflow id, and the MAC can
//! be checked from the URL alone. Regenerating bumps `url_version` (the old URL then verifies but
//! is refused as superseded, a store decision that every instance sees at once).
//!
//! Keys come from `workflowWebhookKeys` (`kid:base64key,…`; the first signs, all verify), or
//! one key derived from the auth secret (kid `s`). Removing a kid from the ring invalidates every
//! URL it signed. The whole URL is a credential: it is never logged (the trigger id is).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::WebhookKey;

type HmacSha256 = Hmac<Sha256>;

/// The kid of the key derived from the auth secret.
pub const DERIVED_KID: &str = "s";
/// The path below `/{prefix}/v1` under which webhooks are served.
pub const PATH: &str = "/workflow-hooks";
/// Bytes of the MAC kept in the URL: 128 bits.
const MAC_BYTES: usize = 16;
/// Its base64url length.
const MAC_CHARS: usize = 22;
/// What the message starts with, so that no MAC made with these keys for another purpose (or a
/// later version of this format) verifies as a webhook URL.
const DOMAIN: &str = "canopy:workflow-webhook:v1";

/// Whether `path` (below `/{prefix}/v1`, or whole) is a webhook call.
pub fn is_hook_path(path: &str) -> bool {
    path.strip_prefix(PATH)
        .is_some_and(|rest| rest.starts_with('/'))
        || path.contains("/v1/workflow-hooks/")
}

/// `path` with the signed part of a webhook URL cut after the trigger id (`…/workflow-hooks/
/// {trigger_id}.…`), for logs; any other path unchanged.
pub fn redact_path(path: &str) -> String {
    let marker = "/workflow-hooks/";
    let Some(at) = path.find(marker) else {
        return path.to_owned();
    };
    let start = at + marker.len();
    let rest = &path[start..];
    // At most the 36 bytes of a trigger id, and never inside a character: a request path may
    // hold any UTF-8 (hyper and `http` accept it), and slicing within one would panic.
    let mut keep = rest.find('.').unwrap_or(rest.len()).min(36);
    while !rest.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{}.…", &path[..start], &rest[..keep])
}

/// The parts of a webhook path segment, shape-checked (not yet verified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub trigger_id: String,
    pub url_version: i64,
    pub kid: String,
    mac: [u8; MAC_BYTES],
}

impl Hook {
    /// Reads `{trigger_id}.{url_version}.{kid}.{mac}`; `None` when it is not that shape
    /// (truncated, extra parts, a version that is not a positive number, a MAC of the wrong
    /// length).
    pub fn parse(segment: &str) -> Option<Self> {
        let mut parts = segment.split('.');
        let (trigger_id, version, kid, mac) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        uuid::Uuid::parse_str(trigger_id).ok()?;
        // Digits only: `+1` or ` 1` would be other spellings of one URL.
        if version.is_empty() || version.len() > 12 || !version.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let url_version: i64 = version.parse().ok().filter(|v| *v >= 1)?;
        if !crate::config::valid_webhook_kid(kid) || mac.len() != MAC_CHARS {
            return None;
        }
        let decoded = URL_SAFE_NO_PAD.decode(mac).ok()?;
        let mac: [u8; MAC_BYTES] = decoded.try_into().ok()?;
        Some(Self {
            trigger_id: trigger_id.to_owned(),
            url_version,
            kid: kid.to_owned(),
            mac,
        })
    }
}

/// The keys that sign and verify webhook URLs. The first signs.
pub struct KeyRing {
    keys: Vec<WebhookKey>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<&str> = self.keys.iter().map(|k| k.kid.as_str()).collect();
        f.debug_struct("KeyRing").field("kids", &kids).finish()
    }
}

impl KeyRing {
    /// The configured keys, or (when none are) one key derived from the auth secret.
    pub fn new(configured: &[WebhookKey], auth_secret: &str) -> Self {
        if configured.is_empty() {
            return Self {
                keys: vec![WebhookKey {
                    kid: DERIVED_KID.to_owned(),
                    key: hmac_full(auth_secret.as_bytes(), DOMAIN.as_bytes()).to_vec(),
                }],
            };
        }
        Self {
            keys: configured.to_vec(),
        }
    }

    /// The kid new URLs are signed with.
    pub fn signing_kid(&self) -> &str {
        self.keys.first().map_or(DERIVED_KID, |k| k.kid.as_str())
    }

    /// The path segment of a trigger's URL at `url_version`, signed with `kid` when the ring
    /// still holds it (a URL keeps its kid until regenerated), else with the signing key.
    pub fn sign(
        &self,
        project: &str,
        environment: &str,
        trigger_id: &str,
        url_version: i64,
        kid: Option<&str>,
    ) -> String {
        let key = kid
            .and_then(|kid| self.keys.iter().find(|k| k.kid == kid))
            .or_else(|| self.keys.first());
        let Some(key) = key else {
            return String::new();
        };
        let mac = hmac_full(
            &key.key,
            message(project, environment, trigger_id, url_version, &key.kid).as_bytes(),
        );
        format!(
            "{trigger_id}.{url_version}.{}.{}",
            key.kid,
            URL_SAFE_NO_PAD.encode(&mac[..MAC_BYTES])
        )
    }

    /// Whether `hook` was signed by a key of this ring for this project and environment,
    /// compared in constant time.
    pub fn verify(&self, project: &str, environment: &str, hook: &Hook) -> bool {
        let Some(key) = self.keys.iter().find(|k| k.kid == hook.kid) else {
            return false;
        };
        let Ok(mut mac) = HmacSha256::new_from_slice(&key.key) else {
            return false;
        };
        mac.update(
            message(
                project,
                environment,
                &hook.trigger_id,
                hook.url_version,
                &hook.kid,
            )
            .as_bytes(),
        );
        mac.verify_truncated_left(&hook.mac).is_ok()
    }
}

/// The signed message: every identifier, the names length-prefixed so that no two tuples spell
/// the same bytes (the others are a UUID, digits and a kid, none of which holds `|`).
fn message(
    project: &str,
    environment: &str,
    trigger_id: &str,
    url_version: i64,
    kid: &str,
) -> String {
    format!(
        "{DOMAIN}|{}:{project}|{}:{environment}|{trigger_id}|{url_version}|{kid}",
        project.len(),
        environment.len()
    )
}

fn hmac_full(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length: this cannot fail.
    let mut mac = HmacSha256::new_from_slice(key)
        .unwrap_or_else(|_| HmacSha256::new_from_slice(&[0]).unwrap_or_else(|_| unreachable!()));
    mac.update(message);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRIGGER: &str = "0b6f2f0e-4d0a-4c3e-9d7e-2f3b5a6c7d8e";

    fn ring() -> KeyRing {
        KeyRing::new(&[], "an auth secret of some length")
    }

    #[test]
    fn a_signed_hook_verifies_and_any_change_does_not() {
        let ring = ring();
        let segment = ring.sign("acme", "production", TRIGGER, 3, None);
        let hook = Hook::parse(&segment).unwrap();
        assert_eq!(hook.trigger_id, TRIGGER);
        assert_eq!(hook.url_version, 3);
        assert_eq!(hook.kid, DERIVED_KID);
        assert!(ring.verify("acme", "production", &hook));
        // Another environment or project: the same URL means nothing there.
        assert!(!ring.verify("acme", "staging", &hook));
        assert!(!ring.verify("acme2", "production", &hook));
        // Each part tampered with.
        let version = segment.replacen(".3.", ".4.", 1);
        assert!(!ring.verify("acme", "production", &Hook::parse(&version).unwrap()));
        let other = segment.replacen("0b6f", "1b6f", 1);
        assert!(!ring.verify("acme", "production", &Hook::parse(&other).unwrap()));
        let mut flipped = segment.clone().into_bytes();
        let last = flipped.len() - 2;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(flipped).unwrap();
        assert!(!ring.verify("acme", "production", &Hook::parse(&flipped).unwrap()));
        // Another auth secret signs other URLs.
        assert!(!KeyRing::new(&[], "another secret").verify("acme", "production", &hook));
    }

    #[test]
    fn logged_paths_keep_the_trigger_id_only() {
        let segment = ring().sign("acme", "production", TRIGGER, 2, None);
        let path = format!("/api/v1/workflow-hooks/{segment}");
        assert_eq!(
            redact_path(&path),
            format!("/api/v1/workflow-hooks/{TRIGGER}.…")
        );
        assert_eq!(redact_path("/forest/books"), "/forest/books");
        assert!(!redact_path("/v1/workflow-hooks/aaaa.1.s.MAC").contains("MAC"));
        // The fuzz target's finding (fuzz/corpus/webhook/crash-redact-inside-a-character): a
        // character across byte 36 of the segment panicked the request log's redaction.
        let path = format!(
            "/forest/v1/workflow-hooks/{}\u{fffd}{}",
            "a".repeat(35),
            "b".repeat(40)
        );
        assert_eq!(
            redact_path(&path),
            format!("/forest/v1/workflow-hooks/{}.…", "a".repeat(35))
        );
    }

    #[test]
    fn malformed_and_truncated_hooks_do_not_parse() {
        let segment = ring().sign("acme", "production", TRIGGER, 1, None);
        for bad in [
            "",
            "x",
            &segment[..segment.len() - 1],
            &segment[..segment.rfind('.').unwrap()],
            &format!("{segment}.x"),
            &segment.replacen(".1.", ".0.", 1),
            &segment.replacen(".1.", ".+1.", 1),
            &segment.replacen(TRIGGER, "not-a-uuid", 1),
            &segment.replacen(".s.", ".s!.", 1),
        ] {
            assert_eq!(Hook::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_key_of_the_ring_verifies_and_the_first_signs() {
        let old = WebhookKey {
            kid: "old".into(),
            key: vec![1; 32],
        };
        let new = WebhookKey {
            kid: "new".into(),
            key: vec![2; 32],
        };
        let before = KeyRing::new(std::slice::from_ref(&old), "x");
        let url = before.sign("p", "e", TRIGGER, 1, None);
        let rotated = KeyRing::new(&[new.clone(), old], "x");
        assert_eq!(rotated.signing_kid(), "new");
        assert!(rotated.verify("p", "e", &Hook::parse(&url).unwrap()));
        // A URL keeps its kid while the ring holds it.
        assert_eq!(rotated.sign("p", "e", TRIGGER, 1, Some("old")), url);
        // Retiring a kid invalidates its URLs.
        let retired = KeyRing::new(&[new], "x");
        assert!(!retired.verify("p", "e", &Hook::parse(&url).unwrap()));
    }
}
