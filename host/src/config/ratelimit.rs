//! Settings of the public API's rate limits (`http::ratelimit`, issue 12 §5): per credential
//! (application token or session) and per client address for requests without valid ones.

use std::num::NonZeroU32;

use clap::Args;

use super::file::FileConfig;
use super::{ConfigError, Layers, invalid};

/// Requests per minute of one token: the platform's current per-token limit (platform-api.md
/// §1.6), enough for a script paging through logs, low enough that a leaked token is slow.
pub const DEFAULT_PER_MINUTE: u32 = 60;
/// Requests per minute from one address without valid credentials: the platform's older
/// per-address limit, a brake on token guessing that an office behind one NAT does not hit.
pub const DEFAULT_PER_MINUTE_PER_IP: u32 = 300;

/// `canopy serve`'s rate-limit flags (flattened into [`super::ServeArgs`]).
#[derive(Debug, Default, Clone, Args)]
pub struct RateLimitArgs {
    /// Requests per minute one application token (or one signed-in session) may make on the
    /// /v1 API; more are answered 429 with Retry-After. [default: 60]
    /// [file key: apiRateLimitPerMinute]
    #[arg(long, env = "CANOPY_API_RATE_LIMIT_PER_MINUTE", value_name = "COUNT")]
    pub api_rate_limit_per_minute: Option<u32>,

    /// Requests one token may make at once before the per-minute pace applies. [default: the
    /// per-minute limit] [file key: apiRateLimitBurst]
    #[arg(long, env = "CANOPY_API_RATE_LIMIT_BURST", value_name = "COUNT")]
    pub api_rate_limit_burst: Option<u32>,

    /// Requests per minute on the /v1 API from one client address without valid credentials
    /// (none, malformed, unknown, expired or revoked). [default: 300]
    /// [file key: apiRateLimitPerMinutePerIp]
    #[arg(
        long,
        env = "CANOPY_API_RATE_LIMIT_PER_MINUTE_PER_IP",
        value_name = "COUNT"
    )]
    pub api_rate_limit_per_minute_per_ip: Option<u32>,
}

/// The public API's rate limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitConfig {
    /// `apiRateLimitPerMinute`.
    pub per_minute: NonZeroU32,
    /// `apiRateLimitBurst`.
    pub burst: NonZeroU32,
    /// `apiRateLimitPerMinutePerIp` (its burst is the same number).
    pub per_minute_per_ip: NonZeroU32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        let n = |v: u32| NonZeroU32::new(v).unwrap_or(NonZeroU32::MIN);
        Self {
            per_minute: n(DEFAULT_PER_MINUTE),
            burst: n(DEFAULT_PER_MINUTE),
            per_minute_per_ip: n(DEFAULT_PER_MINUTE_PER_IP),
        }
    }
}

fn at_least_one(
    key: &'static str,
    value: Option<super::Sourced<u32>>,
) -> Result<Option<NonZeroU32>, ConfigError> {
    value
        .map(|v| {
            NonZeroU32::new(v.value).ok_or_else(|| invalid(key, "must be at least 1", &v.origin))
        })
        .transpose()
}

pub(super) fn resolve_rate_limits(
    layers: &Layers,
    args: &mut RateLimitArgs,
    file: &mut FileConfig,
) -> Result<RateLimitConfig, ConfigError> {
    let defaults = RateLimitConfig::default();
    let per_minute = at_least_one(
        "apiRateLimitPerMinute",
        layers.pick(
            args.api_rate_limit_per_minute.take(),
            (
                "--api-rate-limit-per-minute",
                "CANOPY_API_RATE_LIMIT_PER_MINUTE",
            ),
            file.api_rate_limit_per_minute.take(),
        ),
    )?
    .unwrap_or(defaults.per_minute);
    let burst = at_least_one(
        "apiRateLimitBurst",
        layers.pick(
            args.api_rate_limit_burst.take(),
            ("--api-rate-limit-burst", "CANOPY_API_RATE_LIMIT_BURST"),
            file.api_rate_limit_burst.take(),
        ),
    )?
    .unwrap_or(per_minute);
    let per_minute_per_ip = at_least_one(
        "apiRateLimitPerMinutePerIp",
        layers.pick(
            args.api_rate_limit_per_minute_per_ip.take(),
            (
                "--api-rate-limit-per-minute-per-ip",
                "CANOPY_API_RATE_LIMIT_PER_MINUTE_PER_IP",
            ),
            file.api_rate_limit_per_minute_per_ip.take(),
        ),
    )?
    .unwrap_or(defaults.per_minute_per_ip);
    Ok(RateLimitConfig {
        per_minute,
        burst,
        per_minute_per_ip,
    })
}
