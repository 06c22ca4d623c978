//! Whether this instance should receive traffic: its lifecycle (serving, then draining once
//! SIGTERM arrived) and the readiness checks behind `GET /readyz`. A load balancer reads them to
//! route around an instance whose store or database is unreachable, and to stop routing to one
//! that is stopping before its listener closes.
//!
//! Liveness (`/healthz`) is only "the process answers": restarting an instance because its
//! database is down would not bring the database back, so those checks belong to readiness.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::datasource::NamedPool;
use crate::platform::Store;

/// How long one readiness check may take: a database that does not answer within it is as
/// good as down for the requests that would wait on it.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The lifecycle of the process, shared by every served generation.
#[derive(Debug, Default)]
pub struct Lifecycle {
    draining: AtomicBool,
}

impl Lifecycle {
    /// From now on, `/readyz` fails: the instance is stopping.
    pub fn drain(&self) {
        if !self.draining.swap(true, Ordering::AcqRel) {
            tracing::info!("draining: /readyz now answers 503");
        }
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }
}

/// One readiness check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// `store`, `database:<name>`, `plugins` or `lifecycle`.
    pub name: String,
    pub ok: bool,
    /// Why it failed, or what it saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Time the check took.
    pub millis: u64,
}

/// The answer of `/readyz`: ready when every check passed.
#[derive(Debug, Clone, Serialize)]
pub struct Readiness {
    pub ready: bool,
    pub checks: Vec<Check>,
}

/// Runs every check, concurrently, each within [`CHECK_TIMEOUT`]: Canopy's `store` answers,
/// every datasource's database (`pools`) answers, the served generation's `plugins` are loaded,
/// and the instance is not draining.
pub async fn readiness(
    store: Option<&Store>,
    pools: Vec<NamedPool>,
    plugins: usize,
    lifecycle: &Lifecycle,
) -> Readiness {
    let mut pings = Vec::new();
    if let Some(store) = store {
        let pool = store.pool().clone();
        pings.push((
            "store".to_owned(),
            Box::pin(async move { sqlx::query("SELECT 1").execute(&pool).await.map(drop) })
                as std::pin::Pin<Box<dyn Future<Output = _> + Send>>,
        ));
    }
    for named in pools {
        let pool = named.pool;
        pings.push((
            format!("database:{}", named.name),
            Box::pin(async move { pool.ping().await }),
        ));
    }
    let mut checks: Vec<Check> =
        futures::future::join_all(pings.into_iter().map(|(name, ping)| async move {
            let started = Instant::now();
            let outcome = tokio::time::timeout(CHECK_TIMEOUT, ping).await;
            let millis = started.elapsed().as_millis() as u64;
            let detail = match outcome {
                Ok(Ok(())) => None,
                // `/readyz` is unauthenticated: the driver's message (hosts, users) goes to the
                // log, not to whoever asks.
                Ok(Err(error)) => {
                    tracing::warn!(check = %name, %error, "readiness check failed");
                    Some("unreachable (the server log says why)".to_owned())
                }
                Err(_) => Some(format!("no answer within {} ms", CHECK_TIMEOUT.as_millis())),
            };
            Check {
                name,
                ok: detail.is_none(),
                detail,
                millis,
            }
        }))
        .await;
    // A generation is served only once its plugins loaded (a failed load keeps the previous
    // one): this says how many, for the operator comparing instances.
    checks.push(Check {
        name: "plugins".to_owned(),
        ok: true,
        detail: Some(format!("{plugins} loaded")),
        millis: 0,
    });
    let draining = lifecycle.is_draining();
    checks.push(Check {
        name: "lifecycle".to_owned(),
        ok: !draining,
        detail: Some(if draining { "draining" } else { "serving" }.to_owned()),
        millis: 0,
    });
    Readiness {
        ready: checks.iter().all(|c| c.ok),
        checks,
    }
}
