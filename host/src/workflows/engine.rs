//! The run engine (issue 13 §3): workers that claim queued runs from `workflow_runs` (the table
//! is the queue) and execute their steps, durable on Canopy's store.
//!
//! - One tokio task per worker (`workflowWorkers`, 0 = no engine in this process), each with its
//!   own id. A worker claims the next due run with a lease (`locked_by`, `lease_expires_at`):
//!   PostgreSQL with `FOR UPDATE SKIP LOCKED`, SQLite with one `UPDATE … RETURNING` (one
//!   writer). While it holds the run it sends a heartbeat every second (the lease renewed, see
//!   [`EngineSettings::heartbeat`]) and drives the run until it waits, ends or is retried
//!   later (`execute`).
//! - Workers sleep until [`Wakeup::notify`] (called when a run is queued or re-queued), a
//!   PostgreSQL `NOTIFY` from another instance sharing the store (`LISTEN` on a connection of
//!   its own), or the poll fallback.
//! - A reaper turns runs whose heartbeats stopped for a lease (4 s by default) back to
//!   `queued`, except a run whose current step was writing: that one waits for a person
//!   (reason `uncertain`), never a blind re-run. A dead instance's runs are thus taken over
//!   within five seconds. The reaper never takes a run its own process is driving: a late
//!   heartbeat of a live worker (a store stalled for seconds) costs nothing.
//! - [`Engine::stop`] is graceful: each worker finishes its current step, gives its run back to
//!   the queue, and ends.
//!
//! Each step loads the served generation's operations (`ops::Generations`, which `http`
//! implements over its swapped state) as a request does at its arrival, and acts as the run's
//! user through the operations layer (`crate::workflows::steps` calls `ops::actions` and
//! `ops::relations`; it never names `http`, see docs/architecture.md).

pub mod control;
mod execute;
pub mod store;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sqlx::Row as _;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

pub use control::{Completion, Controller};
pub use execute::acting_caller;
pub use store::{Reaped, Run, RunFilter, StepRow, StepStatus, Viewer, WaitingReason};

use super::{Definition, Error, Result};
use crate::config::EngineConfig;
use crate::ops::Generations;
use crate::platform::Store;
use crate::platform::store::{Dialect, Heard};

/// The PostgreSQL channel runs are announced on; the payload is `project/environment`.
pub const CHANNEL: &str = "canopy_workflow_runs";

/// Attempts of a step failing with a transient error (store or database unavailable, a
/// timeout) before a person is asked to take over.
pub const MAX_ATTEMPTS: i64 = 3;
/// Most steps one run may make: a go-to loop ends the run instead of running forever.
pub const MAX_STEPS: i64 = 1000;

/// What the engine runs with (from `EngineConfig`, plus what tests and benches tune).
#[derive(Debug, Clone)]
pub struct EngineSettings {
    pub workers: u32,
    pub step_timeout: Duration,
    pub lease: Duration,
    /// How often idle workers look for due runs without being woken (retries fall due, a
    /// notification lost).
    pub poll: Duration,
    /// The first retry's delay; each next one doubles it, plus up to half of it at random.
    pub retry_base: Duration,
    /// The store's URL when it is PostgreSQL: the engine listens for `NOTIFY` on a connection
    /// of its own.
    pub listen_url: Option<String>,
}

impl EngineSettings {
    /// The settings of `canopy serve` for a store at `state_url`.
    pub fn new(config: &EngineConfig, state_url: &str) -> Self {
        let postgres = state_url.starts_with("postgres:") || state_url.starts_with("postgresql:");
        Self {
            workers: config.workers,
            step_timeout: config.step_timeout,
            lease: config.lease,
            poll: Duration::from_secs(5),
            retry_base: Duration::from_millis(500),
            listen_url: postgres.then(|| state_url.to_owned()),
        }
    }

    /// How often a worker renews the lease of the run it holds: every second, or a quarter of
    /// a shorter lease, so that three beats may be missed before the run is taken over.
    pub fn heartbeat(&self) -> Duration {
        (self.lease / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }

    /// How often the reaper looks for runs whose heartbeats stopped: an eighth of the lease,
    /// at most every second, so a dead worker's run waits at most a lease and a half-beat.
    pub fn reap_every(&self) -> Duration {
        (self.lease / 8).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self::new(&EngineConfig::default(), "sqlite:")
    }
}

/// Wakes workers when runs are queued: in this process at once, and (once [`Wakeup::announce`]
/// was called on a PostgreSQL store) in the other instances sharing the store, through
/// `NOTIFY`. Cheap to clone; the same one is shared by every generation of the served stack
/// (`AppState::workflow_wakeup`), so a trigger or a run control only calls `notify()`.
#[derive(Clone, Default)]
pub struct Wakeup {
    inner: Arc<WakeInner>,
}

#[derive(Default)]
struct WakeInner {
    local: Notify,
    /// Coalesces announcements: one `NOTIFY` in flight at a time, however many runs queued.
    remote: OnceLock<mpsc::Sender<()>>,
}

impl std::fmt::Debug for Wakeup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakeup")
            .field("announces", &self.inner.remote.get().is_some())
            .finish()
    }
}

impl Wakeup {
    pub fn new() -> Self {
        Self::default()
    }

    /// On a PostgreSQL store, every later `notify()` also sends `NOTIFY` (coalesced), so that
    /// workers of other instances wake. Nothing on SQLite (one process). Call it once, inside
    /// a tokio runtime.
    pub fn announce(&self, store: &Store) {
        if store.dialect() != Dialect::Postgres {
            return;
        }
        let (sender, mut receiver) = mpsc::channel::<()>(1);
        if self.inner.remote.set(sender).is_err() {
            return;
        }
        let pool = store.pool().clone();
        let payload = format!("{}/{}", store.project(), store.environment());
        tokio::spawn(async move {
            while receiver.recv().await.is_some() {
                if pool.is_closed() {
                    break;
                }
                if let Err(error) = sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(CHANNEL)
                    .bind(&payload)
                    .execute(&pool)
                    .await
                {
                    tracing::debug!(%error, "announcing queued workflow runs failed");
                }
            }
        });
    }

    /// Runs were queued or re-queued: wake a worker (here, and elsewhere through `NOTIFY`).
    pub fn notify(&self) {
        self.inner.local.notify_one();
        if let Some(remote) = self.inner.remote.get() {
            // Full: an announcement is already on its way, it covers this one too.
            let _ = remote.try_send(());
        }
    }

    /// Wakes one local worker only (a notification that came from elsewhere).
    fn notify_local(&self) {
        self.inner.local.notify_one();
    }
}

/// A definition version as the engine runs it, with its workflow's name (for logs).
#[derive(Debug)]
pub(crate) struct Loaded {
    pub definition: Definition,
    pub workflow_name: String,
}

/// What every worker shares.
pub(crate) struct Shared {
    pub store: Store,
    pub state: Arc<dyn Generations>,
    pub wakeup: Wakeup,
    pub settings: EngineSettings,
    /// Versions never change once written: each is parsed once.
    definitions: Mutex<HashMap<String, Arc<Loaded>>>,
    /// The runs this process's workers are driving, with how many workers hold each: the
    /// reaper leaves them alone even when a heartbeat is late, since their worker is alive and
    /// fences its own writes. Counted, because a run can be claimed again by a second worker
    /// (after another instance requeued it) before the first one has let go of it.
    held: Held,
}

/// Most parsed versions kept; past it the cache starts again (rare: one entry per version).
const CACHED_DEFINITIONS: usize = 1024;

impl Shared {
    /// The definition of a version.
    pub async fn definition(&self, version_id: &str) -> Result<Arc<Loaded>> {
        if let Some(loaded) = self
            .definitions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(version_id)
        {
            return Ok(Arc::clone(loaded));
        }
        let loaded = Arc::new(load_definition(&self.store, version_id).await?);
        let mut cache = self.definitions.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHED_DEFINITIONS {
            cache.clear();
        }
        cache.insert(version_id.to_owned(), Arc::clone(&loaded));
        Ok(loaded)
    }
}

/// Reads and parses a stored version (`workflow_versions.definition`, the JSON of
/// [`Definition`]).
pub(crate) async fn load_definition(store: &Store, version_id: &str) -> Result<Loaded> {
    let row = sqlx::query(
        "SELECT v.definition, w.name FROM workflow_versions v \
         JOIN workflows w ON w.id = v.workflow_id WHERE v.id = $1",
    )
    .bind(version_id)
    .fetch_optional(store.pool())
    .await?
    .ok_or_else(|| Error::NotFound(format!("workflow version {version_id}")))?;
    let text: String = row.try_get(0)?;
    let definition: Definition = serde_json::from_str(&text).map_err(|e| {
        Error::Invalid(format!(
            "the stored definition of version {version_id} cannot be read: {e}"
        ))
    })?;
    Ok(Loaded {
        definition,
        workflow_name: row.try_get(1)?,
    })
}

/// The running engine of this process: its workers, reaper and listener.
pub struct Engine {
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    instance: String,
}

/// How long a graceful stop waits for workers to finish their current step.
const DRAIN: Duration = Duration::from_secs(30);

impl Engine {
    /// Starts `settings.workers` workers over `store`, each step using the generation current
    /// in `state`, woken by `wakeup` (give the one every generation's `AppState` holds). The
    /// reaper runs beside them, and on PostgreSQL a listener for other instances' `NOTIFY`.
    pub fn start<G: Generations>(
        store: Store,
        state: Arc<G>,
        wakeup: Wakeup,
        settings: EngineSettings,
    ) -> Self {
        let instance = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let (shutdown, _) = watch::channel(false);
        let state: Arc<dyn Generations> = state;
        let shared = Arc::new(Shared {
            store,
            state,
            wakeup,
            settings,
            definitions: Mutex::new(HashMap::new()),
            held: Held::default(),
        });
        let mut tasks = Vec::new();
        for n in 0..shared.settings.workers {
            let worker = format!("{instance}-{n}");
            tasks.push(tokio::spawn(work(
                Arc::clone(&shared),
                worker,
                shutdown.subscribe(),
            )));
        }
        tasks.push(tokio::spawn(reap(
            Arc::clone(&shared),
            shutdown.subscribe(),
        )));
        if let Some(url) = shared.settings.listen_url.clone() {
            tasks.push(listen(Arc::clone(&shared), url, shutdown.subscribe()));
        }
        tracing::info!(
            instance,
            workers = shared.settings.workers,
            "workflow engine started"
        );
        // Runs queued while no engine ran (or before a restart) are due now.
        shared.wakeup.notify_local();
        Self {
            shutdown,
            tasks,
            instance,
        }
    }

    /// This engine's id: the prefix of its workers' ids (`locked_by`).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Stops gracefully: each worker finishes the step it is running and gives its run back
    /// to the queue; after [`DRAIN`] the rest is dropped (their leases expire and the runs are
    /// taken up again).
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        let all = futures::future::join_all(self.tasks);
        if tokio::time::timeout(DRAIN, all).await.is_err() {
            tracing::warn!(
                "workflow workers still busy after {}s: their runs are taken up again once \
                 their leases expire",
                DRAIN.as_secs()
            );
        }
        tracing::info!(instance = self.instance, "workflow engine stopped");
    }
}

/// One worker: claim, drive, repeat; sleep when nothing is due.
async fn work(shared: Arc<Shared>, worker: String, mut shutdown: watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        let lease_until = crate::platform::store::now_ms() + millis(shared.settings.lease);
        match shared.store.claim_run(&worker, lease_until).await {
            Ok(Some(run)) => {
                // There may be more: let another idle worker look too.
                shared.wakeup.notify_local();
                // Let go of when the drive ends, however it ends.
                let _holding = shared.held.hold(&run.id);
                execute::drive(&shared, &worker, run, &shutdown).await;
            }
            Ok(None) => {
                tokio::select! {
                    () = shared.wakeup.inner.local.notified() => {}
                    () = tokio::time::sleep(shared.settings.poll) => {}
                    _ = shutdown.changed() => {}
                }
            }
            Err(error) => {
                tracing::warn!(worker, %error, "claiming a workflow run failed");
                tokio::select! {
                    () = tokio::time::sleep(shared.settings.poll) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
    }
}

/// The runs held by this process's workers, each with the number of workers holding it.
#[derive(Default)]
struct Held(Mutex<HashMap<String, usize>>);

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `run` as held until the returned value is dropped.
    fn hold(&self, run: &str) -> Holding<'_> {
        *self.lock().entry(run.to_owned()).or_insert(0) += 1;
        Holding {
            held: self,
            run: run.to_owned(),
        }
    }

    /// The runs held now.
    fn runs(&self) -> HashSet<String> {
        self.lock().keys().cloned().collect()
    }
}

/// One worker's hold on a run ([`Held::hold`]).
struct Holding<'h> {
    held: &'h Held,
    run: String,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        let mut held = self.held.lock();
        if let Some(count) = held.get_mut(&self.run) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.run);
            }
        }
    }
}

/// The lease reaper: every eighth of a lease (at most a second), so a dead worker's runs are
/// queued again within a lease and a little.
async fn reap(shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let every = shared.settings.reap_every();
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        let held = shared.held.runs();
        match shared
            .store
            .reap_workflow_leases_except(|run| held.contains(run))
            .await
        {
            Ok(reaped) => {
                for id in &reaped.requeued {
                    tracing::info!(run = id, "workflow run's lease expired: queued again");
                }
                for id in &reaped.uncertain {
                    tracing::warn!(
                        run = id,
                        "workflow run's lease expired during a write: waiting for a person"
                    );
                }
                if !reaped.requeued.is_empty() {
                    shared.wakeup.notify();
                }
            }
            Err(error) => tracing::warn!(%error, "reaping workflow leases failed"),
        }
    }
}

/// Follows other instances' announcements (PostgreSQL `LISTEN`) until shutdown: a run queued
/// elsewhere for this project wakes the local workers. After a lost connection they are woken
/// too, since what was announced meanwhile is lost (the poll would find it later).
fn listen(shared: Arc<Shared>, url: String, mut shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
    let mine = format!("{}/{}", shared.store.project(), shared.store.environment());
    let stop = async move {
        let _ = shutdown.changed().await;
    };
    crate::platform::store::follow_channel(url, CHANNEL, "workflow runs", stop, move |heard| {
        let wake = match heard {
            Heard::Payload(payload) => payload == mine,
            Heard::Reconnected => true,
        };
        if wake {
            shared.wakeup.notify_local();
        }
        std::future::ready(true)
    })
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_stays_held_until_every_worker_holding_it_lets_go() {
        let held = Held::default();
        let first = held.hold("run-1");
        // Claimed again by a second worker before the first one has let go.
        let second = held.hold("run-1");
        let other = held.hold("run-2");
        drop(first);
        assert!(held.runs().contains("run-1"));
        drop(second);
        assert!(!held.runs().contains("run-1"));
        assert!(held.runs().contains("run-2"));
        // A drive that ends in a panic lets go too.
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _holding = held.hold("run-3");
            panic!("the drive failed");
        }));
        assert!(unwound.is_err());
        assert!(!held.runs().contains("run-3"));
        drop(other);
        assert!(held.runs().is_empty());
    }

    #[test]
    fn the_default_lease_outlives_three_missed_heartbeats_and_hands_a_run_on_within_five_seconds() {
        let settings = EngineSettings::default();
        assert_eq!(settings.heartbeat(), Duration::from_secs(1));
        assert!(settings.lease >= settings.heartbeat() * 4);
        // The worst case: the last beat just before the death, then one reaper period.
        assert!(settings.lease + settings.reap_every() <= Duration::from_secs(5));
    }

    #[test]
    fn a_short_lease_beats_and_reaps_faster_but_never_busy_loops() {
        let settings = EngineSettings {
            lease: Duration::from_secs(1),
            ..EngineSettings::default()
        };
        assert_eq!(settings.heartbeat(), Duration::from_millis(250));
        assert_eq!(settings.reap_every(), Duration::from_millis(125));
        let tiny = EngineSettings {
            lease: Duration::from_millis(10),
            ..EngineSettings::default()
        };
        assert_eq!(tiny.heartbeat(), Duration::from_millis(50));
        assert_eq!(tiny.reap_every(), Duration::from_millis(50));
    }
}
