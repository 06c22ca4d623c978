//! Settings of what starts workflow runs (`workflows::triggers`): the keys that sign webhook URLs
//! and the default rate limit of one webhook.

use std::fmt;
use std::num::NonZeroU32;

use base64::Engine as _;
use clap::Args;

use super::file::FileConfig;
use super::{ConfigError, Layers, invalid};

/// Calls per minute one webhook accepts by default (platform-api.md §1.6: "about 60").
pub const DEFAULT_WEBHOOK_PER_MINUTE: u32 = 60;
/// The shortest signing key accepted: HMAC-SHA256 keys shorter than 128 bits are guessable.
const MIN_KEY_BYTES: usize = 16;

/// `canopy serve`'s trigger flags (flattened into [`super::ServeArgs`]).
#[derive(Debug, Default, Clone, Args)]
pub struct TriggerArgs {
    /// Keys signing workflow webhook URLs, `kid:base64key,…` (keys of at least 16 bytes, kids of
    /// letters, digits, `-` and `_`): the first signs new URLs, every one verifies. Removing a
    /// kid invalidates every URL it signed. [default: one key derived from the auth secret, kid
    /// `s`] [file key: workflowWebhookKeys]
    #[arg(long, env = "CANOPY_WORKFLOW_WEBHOOK_KEYS", value_name = "KID:KEY,…")]
    pub workflow_webhook_keys: Option<String>,

    /// Calls per minute one workflow webhook accepts before answering 429 with Retry-After; a
    /// trigger may set its own (triggers API). [default: 60]
    /// [file key: workflowWebhookRateLimitPerMinute]
    #[arg(
        long,
        env = "CANOPY_WORKFLOW_WEBHOOK_RATE_LIMIT_PER_MINUTE",
        value_name = "COUNT"
    )]
    pub workflow_webhook_rate_limit_per_minute: Option<u32>,
}

/// One webhook signing key.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookKey {
    pub kid: String,
    pub key: Vec<u8>,
}

impl fmt::Debug for WebhookKey {
    // The key is a secret; configs end up in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookKey")
            .field("kid", &self.kid)
            .field("key", &"***")
            .finish()
    }
}

/// What starts workflow runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerConfig {
    /// `workflowWebhookKeys`; empty: one key derived from the auth secret.
    pub webhook_keys: Vec<WebhookKey>,
    /// `workflowWebhookRateLimitPerMinute`.
    pub webhook_per_minute: NonZeroU32,
}

impl Default for TriggerConfig {
    fn default() -> Self {
        Self {
            webhook_keys: Vec::new(),
            webhook_per_minute: NonZeroU32::new(DEFAULT_WEBHOOK_PER_MINUTE)
                .unwrap_or(NonZeroU32::MIN),
        }
    }
}

/// Whether `kid` may name a key: it appears in URLs between dots.
pub fn valid_kid(kid: &str) -> bool {
    !kid.is_empty()
        && kid.len() <= 16
        && kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Reads `kid:base64key,…`.
pub fn parse_keys(text: &str) -> Result<Vec<WebhookKey>, String> {
    let mut keys: Vec<WebhookKey> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((kid, key)) = entry.split_once(':') else {
            return Err("each entry must be `kid:base64key`".to_owned());
        };
        let kid = kid.trim();
        if !valid_kid(kid) {
            return Err(format!(
                "the kid `{kid}` must be 1 to 16 letters, digits, `-` or `_`"
            ));
        }
        let key = key.trim();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(key)
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(key))
            .map_err(|_| format!("the key of `{kid}` is not base64"))?;
        if bytes.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the key of `{kid}` must be at least {MIN_KEY_BYTES} bytes"
            ));
        }
        if keys.iter().any(|k| k.kid == kid) {
            return Err(format!("the kid `{kid}` is given twice"));
        }
        keys.push(WebhookKey {
            kid: kid.to_owned(),
            key: bytes,
        });
    }
    if keys.is_empty() {
        return Err("at least one `kid:base64key` is needed".to_owned());
    }
    Ok(keys)
}

pub(super) fn resolve_triggers(
    layers: &Layers,
    args: &mut TriggerArgs,
    file: &mut FileConfig,
) -> Result<TriggerConfig, ConfigError> {
    let defaults = TriggerConfig::default();
    let webhook_keys = match layers.pick(
        args.workflow_webhook_keys.take(),
        ("--workflow-webhook-keys", "CANOPY_WORKFLOW_WEBHOOK_KEYS"),
        file.workflow_webhook_keys.take(),
    ) {
        Some(keys) => parse_keys(&keys.value)
            .map_err(|problem| invalid("workflowWebhookKeys", problem, &keys.origin))?,
        None => Vec::new(),
    };
    let webhook_per_minute = match layers.pick(
        args.workflow_webhook_rate_limit_per_minute.take(),
        (
            "--workflow-webhook-rate-limit-per-minute",
            "CANOPY_WORKFLOW_WEBHOOK_RATE_LIMIT_PER_MINUTE",
        ),
        file.workflow_webhook_rate_limit_per_minute.take(),
    ) {
        Some(v) => NonZeroU32::new(v.value).ok_or_else(|| {
            invalid(
                "workflowWebhookRateLimitPerMinute",
                "must be at least 1",
                &v.origin,
            )
        })?,
        None => defaults.webhook_per_minute,
    };
    Ok(TriggerConfig {
        webhook_keys,
        webhook_per_minute,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_in_order_and_bad_ones_named() {
        let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        let keys = parse_keys(&format!("new:{key}, old:{key}")).unwrap();
        assert_eq!(
            keys.iter().map(|k| k.kid.as_str()).collect::<Vec<_>>(),
            ["new", "old"]
        );
        assert_eq!(keys[0].key, vec![7u8; 32]);
        assert!(parse_keys("nokey").unwrap_err().contains("kid:base64key"));
        assert!(parse_keys("a.b:AAAA").unwrap_err().contains("a.b"));
        assert!(parse_keys("a:AAAA").unwrap_err().contains("16 bytes"));
        assert!(
            parse_keys(&format!("a:{key},a:{key}"))
                .unwrap_err()
                .contains("twice")
        );
        assert!(parse_keys("").is_err());
    }
}
