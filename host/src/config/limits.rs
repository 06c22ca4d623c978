//! The settings that bound what one client may ask of the server: the request head size and the
//! connection timeouts of the HTTP server, the largest page, the origins whose browser requests
//! may carry credentials, and how long a native query may run. None is a createAgent option; each
//! has a default safe to expose to the Internet.

use std::time::Duration;

use super::file::{FileConfig, Size};
use super::{ConfigError, Layers, ServeArgs, Sourced, invalid, size_bytes, value_or};

/// Node's `--max-http-header-size` default: the request line, URL included, and the headers.
pub const DEFAULT_MAX_HEADER_SIZE: u64 = 16 * 1024;
/// A request head is a few hundred bytes: 30 s is room for any client on any network.
pub const DEFAULT_HEADERS_TIMEOUT_SECONDS: u64 = 30;
/// Node's `keepAliveTimeout` default.
pub const DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS: u64 = 5;
/// Node's `requestTimeout` default: the time a whole request, body included, may take to arrive.
pub const DEFAULT_BODY_TIMEOUT_SECONDS: u64 = 300;
/// Stop at once by default (development, tests); behind a load balancer, set it above the
/// balancer's health-check interval so that it stops routing here before the listener closes.
pub const DEFAULT_DRAIN_DELAY_SECONDS: u64 = 0;
/// Kubernetes' `terminationGracePeriodSeconds` default: requests in flight get this long.
pub const DEFAULT_SHUTDOWN_GRACE_SECONDS: u64 = 30;
/// Ten times the largest page the Forest UI asks for.
pub const DEFAULT_MAX_PAGE_SIZE: u64 = 1000;
/// The Forest Admin application, the one browser client of the agent's routes.
pub const DEFAULT_CORS_ALLOWED_ORIGINS: &[&str] = &["https://app.forestadmin.com"];
/// The datasource's own default (see there why).
pub const DEFAULT_NATIVE_QUERY_TIMEOUT_SECONDS: u64 =
    crate::datasource::sql::DEFAULT_NATIVE_QUERY_TIMEOUT.as_secs();
/// Below this, ordinary browser requests (cookies, a session token) would not fit.
const MIN_MAX_HEADER_SIZE: u64 = 1024;

/// The resolved limits; `resolve` hands them to the groups that use them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Limits {
    pub max_header_size: usize,
    pub headers_timeout: Duration,
    pub keep_alive_timeout: Duration,
    pub body_timeout: Duration,
    pub drain_delay: Duration,
    pub shutdown_grace: Duration,
    pub max_page_size: u64,
    pub cors_allowed_origins: Vec<String>,
    pub native_query_timeout: Duration,
}

pub(super) fn resolve_limits(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
) -> Result<Limits, ConfigError> {
    let max_header_size = match layers.pick(
        args.max_header_size.take().map(Size::Text),
        ("--max-header-size", "CANOPY_MAX_HEADER_SIZE"),
        file.max_header_size.take(),
    ) {
        Some(size) => {
            let bytes = size_bytes("maxHeaderSize", &size)?;
            if bytes < MIN_MAX_HEADER_SIZE {
                return Err(invalid(
                    "maxHeaderSize",
                    format!("must be at least 1kb, not {bytes} bytes"),
                    &size.origin,
                ));
            }
            bytes
        }
        None => DEFAULT_MAX_HEADER_SIZE,
    };
    let headers_timeout = seconds(
        "headersTimeoutInSeconds",
        layers.pick(
            args.headers_timeout_in_seconds.take(),
            (
                "--headers-timeout-in-seconds",
                "CANOPY_HEADERS_TIMEOUT_IN_SECONDS",
            ),
            file.headers_timeout_in_seconds.take(),
        ),
        DEFAULT_HEADERS_TIMEOUT_SECONDS,
    )?;
    let keep_alive_timeout = seconds(
        "keepAliveTimeoutInSeconds",
        layers.pick(
            args.keep_alive_timeout_in_seconds.take(),
            (
                "--keep-alive-timeout-in-seconds",
                "CANOPY_KEEP_ALIVE_TIMEOUT_IN_SECONDS",
            ),
            file.keep_alive_timeout_in_seconds.take(),
        ),
        DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS,
    )?;
    let body_timeout = seconds(
        "bodyTimeoutInSeconds",
        layers.pick(
            args.body_timeout_in_seconds.take(),
            (
                "--body-timeout-in-seconds",
                "CANOPY_BODY_TIMEOUT_IN_SECONDS",
            ),
            file.body_timeout_in_seconds.take(),
        ),
        DEFAULT_BODY_TIMEOUT_SECONDS,
    )?;
    // 0 is a valid delay: stop accepting as soon as the signal arrives.
    let drain_delay = Duration::from_secs(value_or(
        layers.pick(
            args.drain_delay_in_seconds.take(),
            ("--drain-delay-in-seconds", "CANOPY_DRAIN_DELAY_IN_SECONDS"),
            file.drain_delay_in_seconds.take(),
        ),
        DEFAULT_DRAIN_DELAY_SECONDS,
    ));
    let shutdown_grace = seconds(
        "shutdownGraceInSeconds",
        layers.pick(
            args.shutdown_grace_in_seconds.take(),
            (
                "--shutdown-grace-in-seconds",
                "CANOPY_SHUTDOWN_GRACE_IN_SECONDS",
            ),
            file.shutdown_grace_in_seconds.take(),
        ),
        DEFAULT_SHUTDOWN_GRACE_SECONDS,
    )?;
    let native_query_timeout = seconds(
        "nativeQueryTimeoutInSeconds",
        layers.pick(
            args.native_query_timeout_in_seconds.take(),
            (
                "--native-query-timeout-in-seconds",
                "CANOPY_NATIVE_QUERY_TIMEOUT_IN_SECONDS",
            ),
            file.native_query_timeout_in_seconds.take(),
        ),
        DEFAULT_NATIVE_QUERY_TIMEOUT_SECONDS,
    )?;
    let max_page_size = match layers.pick(
        args.max_page_size.take(),
        ("--max-page-size", "CANOPY_MAX_PAGE_SIZE"),
        file.max_page_size.take(),
    ) {
        Some(size) if size.value == 0 => {
            return Err(invalid("maxPageSize", "must be at least 1", &size.origin));
        }
        size => value_or(size, DEFAULT_MAX_PAGE_SIZE),
    };
    let cors_allowed_origins = match layers.pick(
        args.cors_allowed_origins.take(),
        ("--cors-allowed-origins", "CANOPY_CORS_ALLOWED_ORIGINS"),
        file.cors_allowed_origins.take(),
    ) {
        Some(origins) => {
            for origin in &origins.value {
                if !is_origin(origin) {
                    return Err(invalid(
                        "corsAllowedOrigins",
                        format!(
                            "must list origins such as `https://app.example.com` (scheme, host \
                             and optional port, no path) or `*`, not `{origin}`"
                        ),
                        &origins.origin,
                    ));
                }
            }
            origins.value
        }
        None => DEFAULT_CORS_ALLOWED_ORIGINS
            .iter()
            .map(|o| (*o).to_owned())
            .collect(),
    };
    Ok(Limits {
        // A limit beyond the address space cannot be reached anyway.
        max_header_size: usize::try_from(max_header_size).unwrap_or(usize::MAX),
        headers_timeout,
        keep_alive_timeout,
        body_timeout,
        drain_delay,
        shutdown_grace,
        max_page_size,
        cors_allowed_origins,
        native_query_timeout,
    })
}

/// A duration in whole seconds, at least one.
fn seconds(key: &str, picked: Option<Sourced<u64>>, default: u64) -> Result<Duration, ConfigError> {
    match picked {
        Some(s) if s.value == 0 => Err(invalid(key, "must be at least 1", &s.origin)),
        picked => Ok(Duration::from_secs(value_or(picked, default))),
    }
}

/// `*`, or `http(s)://host[:port]` as a browser sends it in `Origin`: no path, no trailing slash.
fn is_origin(text: &str) -> bool {
    if text == "*" {
        return true;
    }
    let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
}
