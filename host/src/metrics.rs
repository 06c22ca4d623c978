//! The process's Prometheus metrics (`GET /metrics`, in the Prometheus text format).
//!
//! Counters and histograms are recorded where things happen (the request log, a plugin call, a
//! refused request, a dropped activity entry) into one process-wide registry: they outlive plugin
//! reloads, which build a new generation of everything else, and Prometheus expects a counter to
//! only ever grow for the life of the process. Gauges of the current state (pool use, the run
//! queue, breakers, draining) are read from the served generation at scrape time instead.
//!
//! Label values are bounded: route families, not paths (a path holds ids); plugin names and call
//! kinds, which the plugin directory fixes; database names, which the configuration fixes.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::{
    Encoder as _, Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The `Content-Type` of the text format, version 0.0.4 (what every Prometheus scrapes).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Request latencies: from a cached list (~1 ms) to an export or a slow plugin (tens of s).
const HTTP_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Plugin calls: a warm computed field takes tens of µs, a fresh Python instance milliseconds.
const PLUGIN_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
    5.0,
];

/// Every metric of the process.
pub struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    plugin_calls: IntCounterVec,
    plugin_duration: HistogramVec,
    plugin_breaker_open: IntGaugeVec,
    pool_connections: IntGaugeVec,
    runs_queued: IntGauge,
    runs_oldest_age: Gauge,
    activity_dropped: IntCounter,
    rate_limited: IntCounterVec,
    reloads: IntCounterVec,
    draining: IntGauge,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Registers `metric` and hands it back. The names are literals of this file, each registered
/// once, so registration cannot fail (a duplicate would be a bug found by the first test).
fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: M,
) -> M {
    registry
        .register(Box::new(metric.clone()))
        .expect("each metric is registered once");
    metric
}

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            registered(
                &registry,
                IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
            )
        };
        let histogram = |name: &str, help: &str, labels: &[&str], buckets: &[f64]| {
            registered(
                &registry,
                HistogramVec::new(
                    HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                    labels,
                )
                .expect("valid metric"),
            )
        };
        let gauges = |name: &str, help: &str, labels: &[&str]| {
            registered(
                &registry,
                IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"),
            )
        };
        let build = gauges(
            "canopy_build_info",
            "The running version of Canopy (always 1).",
            &["version"],
        );
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        Self {
            http_requests: counter(
                "canopy_http_requests_total",
                "HTTP requests answered, by route family and status code.",
                &["family", "status"],
            ),
            http_duration: histogram(
                "canopy_http_request_duration_seconds",
                "Time to answer an HTTP request (to its response head), by route family.",
                &["family"],
                HTTP_BUCKETS,
            ),
            plugin_calls: counter(
                "canopy_plugin_calls_total",
                "Calls into plugins, by plugin, kind of call and outcome (ok, error: the plugin \
                 answered an error, trap: it crashed, timeout: it ran out of time).",
                &["plugin", "kind", "outcome"],
            ),
            plugin_duration: histogram(
                "canopy_plugin_call_duration_seconds",
                "Time spent in a plugin call, instantiation included, by plugin and kind.",
                &["plugin", "kind"],
                PLUGIN_BUCKETS,
            ),
            plugin_breaker_open: gauges(
                "canopy_plugin_breaker_open",
                "1 while a plugin's circuit breaker is open (its calls fail at once).",
                &["plugin"],
            ),
            pool_connections: gauges(
                "canopy_db_pool_connections",
                "Connections of each database pool: in_use, idle, and max (the pool's limit).",
                &["database", "state"],
            ),
            runs_queued: registered(
                &registry,
                IntGauge::new(
                    "canopy_workflow_runs_queued",
                    "Workflow runs due and waiting for a worker.",
                )
                .expect("valid metric"),
            ),
            runs_oldest_age: registered(
                &registry,
                Gauge::new(
                    "canopy_workflow_queue_oldest_age_seconds",
                    "How long the oldest due run has waited for a worker (0 when none waits).",
                )
                .expect("valid metric"),
            ),
            activity_dropped: registered(
                &registry,
                IntCounter::new(
                    "canopy_activity_log_dropped_total",
                    "Activity log entries dropped because the writer's buffer was full.",
                )
                .expect("valid metric"),
            ),
            rate_limited: counter(
                "canopy_rate_limit_refusals_total",
                "Requests refused with 429 by a rate limit, by limit.",
                &["limit"],
            ),
            reloads: counter(
                "canopy_reloads_total",
                "Reloads of the plugins and the stack (asked here or announced by another \
                 instance), by outcome (ok, failed: the previous generation kept serving).",
                &["outcome"],
            ),
            draining: registered(
                &registry,
                IntGauge::new(
                    "canopy_draining",
                    "1 once the instance is stopping (SIGTERM): /readyz fails.",
                )
                .expect("valid metric"),
            ),
            registry,
        }
    }

    /// An HTTP request answered.
    pub fn http_request(&self, family: &str, status: u16, elapsed: Duration) {
        let mut code = itoa::Buffer::new();
        self.http_requests
            .with_label_values(&[family, code.format(status)])
            .inc();
        self.http_duration
            .with_label_values(&[family])
            .observe(elapsed.as_secs_f64());
    }

    /// A plugin call ended with `outcome` (`ok`, `error`, `trap`, `timeout`, `refused`).
    pub fn plugin_call(&self, plugin: &str, kind: &str, outcome: &str, elapsed: Duration) {
        self.plugin_calls
            .with_label_values(&[plugin, kind, outcome])
            .inc();
        self.plugin_duration
            .with_label_values(&[plugin, kind])
            .observe(elapsed.as_secs_f64());
    }

    /// An activity log entry dropped.
    pub fn activity_dropped(&self) {
        self.activity_dropped.inc();
    }

    /// A request refused by the rate limit `limit`.
    pub fn rate_limited(&self, limit: &str) {
        self.rate_limited.with_label_values(&[limit]).inc();
    }

    /// A reload ended.
    pub fn reloaded(&self, ok: bool) {
        self.reloads
            .with_label_values(&[if ok { "ok" } else { "failed" }])
            .inc();
    }

    /// The text format of every metric, with the gauges of the served generation as `now`
    /// says.
    pub fn render(&self, now: &Snapshot) -> String {
        self.plugin_breaker_open.reset();
        for (plugin, open) in &now.breakers {
            self.plugin_breaker_open
                .with_label_values(&[plugin.as_str()])
                .set(i64::from(*open));
        }
        self.pool_connections.reset();
        for pool in &now.pools {
            let idle = i64::try_from(pool.idle).unwrap_or(i64::MAX);
            let gauge = |which: &str, value: i64| {
                self.pool_connections
                    .with_label_values(&[pool.name.as_str(), which])
                    .set(value);
            };
            gauge("in_use", i64::from(pool.size) - idle);
            gauge("idle", idle);
            gauge("max", i64::from(pool.max));
        }
        if let Some((queued, oldest_age)) = now.queue {
            self.runs_queued.set(queued);
            self.runs_oldest_age.set(oldest_age.as_secs_f64());
        }
        self.draining.set(i64::from(now.draining));
        let mut out = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(%error, "metrics: cannot encode");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The state a scrape shows as gauges, read by the route from the served generation.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Each plugin and whether its circuit breaker is open.
    pub breakers: Vec<(String, bool)>,
    pub pools: Vec<PoolUse>,
    /// Runs due and waiting, and how long the oldest has waited; `None` when the store could
    /// not say (the gauges keep their last values).
    pub queue: Option<(i64, Duration)>,
    pub draining: bool,
}

/// One database pool's connections.
#[derive(Debug)]
pub struct PoolUse {
    pub name: String,
    /// Open now.
    pub size: u32,
    /// Open and idle.
    pub idle: usize,
    /// The pool's limit.
    pub max: u32,
}

/// The route family of a request path, a bounded label: `forest` for the agent's routes (under
/// `mount_path`, `{prefix}/forest`), else the first segment after the prefix when it names one of
/// Canopy's surfaces (`v1`, `mcp`, `console`, …; the operator's routes sit at the root), else
/// `other`.
pub fn route_family<'a>(mount_path: &str, path: &'a str) -> &'a str {
    if let Some(rest) = path.strip_prefix(mount_path)
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return "forest";
    }
    let prefix = mount_path.strip_suffix("/forest").unwrap_or("");
    let path = path
        .strip_prefix(prefix)
        .filter(|rest| rest.starts_with('/'))
        .unwrap_or(path);
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    match first {
        "v1" | "mcp" | "oauth" | ".well-known" | "console" | "liana" | "_canopy" | "healthz"
        | "readyz" | "metrics" => first,
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::route_family;

    #[test]
    fn route_families_are_the_surfaces_and_nothing_from_the_path() {
        assert_eq!(route_family("/forest", "/forest"), "forest");
        assert_eq!(route_family("/forest", "/forest/customers/12"), "forest");
        assert_eq!(
            route_family("/admin/forest", "/admin/forest/customers"),
            "forest"
        );
        assert_eq!(route_family("/admin/forest", "/admin/v1/notes"), "v1");
        assert_eq!(route_family("/forest", "/v1/project/x/notes"), "v1");
        assert_eq!(route_family("/admin/forest", "/metrics"), "metrics");
        assert_eq!(route_family("/forest", "/forestx"), "other");
        assert_eq!(route_family("/forest", "/"), "other");
        assert_eq!(route_family("/forest", "/wp-login.php"), "other");
        assert_eq!(route_family("/forest", "/customers-12"), "other");
    }
}
