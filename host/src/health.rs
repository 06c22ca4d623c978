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

/// Whether a pool's every connection is open and in use.
fn saturated((open, idle, most): (u32, usize, u32)) -> bool {
    open >= most && idle == 0
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
    type Ping = std::pin::Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send>>;
    // A probe of a pool: (connections open, idle, most).
    type Usage = Box<dyn Fn() -> (u32, usize, u32) + Send>;
    let mut pings: Vec<(String, Ping, Usage)> = Vec::new();
    if let Some(store) = store {
        let pool = store.pool().clone();
        let probe = pool.clone();
        pings.push((
            "store".to_owned(),
            Box::pin(async move { sqlx::query("SELECT 1").execute(&pool).await.map(drop) }),
            Box::new(move || {
                (
                    probe.size(),
                    probe.num_idle(),
                    probe.options().get_max_connections(),
                )
            }),
        ));
    }
    for named in pools {
        let pool = named.pool;
        let probe = pool.clone();
        pings.push((
            format!("database:{}", named.name),
            Box::pin(async move { pool.ping().await }),
            Box::new(move || probe.usage()),
        ));
    }
    let mut checks: Vec<Check> =
        futures::future::join_all(pings.into_iter().map(|(name, ping, usage)| async move {
            let started = Instant::now();
            let outcome = tokio::time::timeout(CHECK_TIMEOUT, ping).await;
            let millis = started.elapsed().as_millis() as u64;
            let (ok, detail) = match outcome {
                Ok(Ok(())) => (true, None),
                // `/readyz` is unauthenticated: the driver's message (hosts, users) goes to the
                // log, not to whoever asks.
                Ok(Err(error)) => {
                    tracing::warn!(check = %name, %error, "readiness check failed");
                    (
                        false,
                        Some("unreachable (the server log says why)".to_owned()),
                    )
                }
                // No connection came free in time because every one is busy with requests: the
                // database answers them, the instance is loaded, not broken. Failing here would
                // make the balancer pull it and pile its load onto the others, which then fail
                // the same way (under a burst of 1,000 webhook calls, three instances went down
                // in turn). A database that stops answering frees its connections with errors,
                // and then the ping fails.
                Err(_) if saturated(usage()) => (
                    true,
                    Some("busy: every connection is serving requests".to_owned()),
                ),
                Err(_) => (
                    false,
                    Some(format!("no answer within {} ms", CHECK_TIMEOUT.as_millis())),
                ),
            };
            Check {
                name,
                ok,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::sql::Pool;

    /// A database whose every connection is busy serving requests keeps the instance ready: the
    /// ping waits for a connection past the check's time, yet the pool is full, not broken.
    #[tokio::test]
    async fn a_pool_whose_every_connection_is_busy_is_ready_but_says_so() {
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        let busy = pool.acquire().await.unwrap();
        let readiness = readiness_of(&pool).await;
        assert!(readiness.ready, "{readiness:?}");
        assert_eq!(
            readiness.checks[0].detail.as_deref(),
            Some("busy: every connection is serving requests")
        );
        drop(busy);
        let readiness = readiness_of(&pool).await;
        assert!(readiness.ready && readiness.checks[0].detail.is_none());
    }

    /// A pool that is not full yet cannot answer within the check's time: not ready.
    #[test]
    fn only_a_full_pool_counts_as_busy() {
        assert!(saturated((10, 0, 10)));
        assert!(!saturated((9, 0, 10)));
        assert!(!saturated((10, 1, 10)));
    }

    async fn readiness_of(pool: &sqlx::SqlitePool) -> Readiness {
        readiness(
            None,
            vec![NamedPool {
                name: "shop".to_owned(),
                pool: Pool::Sqlite(pool.clone()),
            }],
            0,
            &Lifecycle::default(),
        )
        .await
    }
}
