//! Settings of the workflow run engine (`workflows::engine`, issue 13 §3): how many workers this
//! process runs, how long one step may take, and how many seconds of missed heartbeats hand a
//! claimed run on to another worker.

use std::time::Duration;

use clap::Args;

use super::file::FileConfig;
use super::{ConfigError, Layers, invalid};

/// Workers per process: one keeps a SQLite store's single writer busy without contention; more
/// help on PostgreSQL, where runs are claimed with `SKIP LOCKED`.
pub const DEFAULT_WORKERS: u32 = 1;
/// The executor's step timeout (platform-api.md §1.10).
pub const DEFAULT_STEP_TIMEOUT_SECONDS: u64 = 300;
/// How long a claimed run stays claimed without a heartbeat: the worker holding it renews it
/// every second (`EngineSettings::heartbeat`), and a run whose worker died is taken over by
/// another instance once this passed without one. Four seconds tolerates three missed beats
/// (a stalled store) and hands a dead instance's runs on within five (issue 23).
pub const DEFAULT_LEASE_SECONDS: u64 = 4;
/// Most workers one process may run (each holds at most one store connection at a time).
const MAX_WORKERS: u32 = 64;

/// `canopy serve`'s engine flags (flattened into [`super::ServeArgs`]).
#[derive(Debug, Default, Clone, Args)]
pub struct EngineArgs {
    /// Workflow workers of this process: each runs one workflow run at a time; 0 runs no
    /// engine here (runs queued by this process are executed by other instances sharing the
    /// store). [default: 1] [file key: workflowWorkers]
    #[arg(long, env = "CANOPY_WORKFLOW_WORKERS", value_name = "COUNT")]
    pub workflow_workers: Option<u32>,

    /// Longest time one workflow step may run before it counts as failed (and is retried, or
    /// waits for a person when it may have written). [default: 300]
    /// [file key: workflowStepTimeoutInSeconds]
    #[arg(
        long,
        env = "CANOPY_WORKFLOW_STEP_TIMEOUT_IN_SECONDS",
        value_name = "SECONDS"
    )]
    pub workflow_step_timeout_in_seconds: Option<u64>,

    /// How long a worker's claim on a run lasts without a heartbeat (sent every second while
    /// it holds the run); a run whose worker died is taken up again after this. [default: 4]
    /// [file key: workflowLeaseInSeconds]
    #[arg(long, env = "CANOPY_WORKFLOW_LEASE_IN_SECONDS", value_name = "SECONDS")]
    pub workflow_lease_in_seconds: Option<u64>,
}

/// The engine's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// `workflowWorkers`: 0 means no engine in this process.
    pub workers: u32,
    /// `workflowStepTimeoutInSeconds`.
    pub step_timeout: Duration,
    /// `workflowLeaseInSeconds`.
    pub lease: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            step_timeout: Duration::from_secs(DEFAULT_STEP_TIMEOUT_SECONDS),
            lease: Duration::from_secs(DEFAULT_LEASE_SECONDS),
        }
    }
}

pub(super) fn resolve_engine(
    layers: &Layers,
    args: &mut EngineArgs,
    file: &mut FileConfig,
) -> Result<EngineConfig, ConfigError> {
    let defaults = EngineConfig::default();
    let workers = match layers.pick(
        args.workflow_workers.take(),
        ("--workflow-workers", "CANOPY_WORKFLOW_WORKERS"),
        file.workflow_workers.take(),
    ) {
        Some(picked) if picked.value > MAX_WORKERS => {
            return Err(invalid(
                "workflowWorkers",
                format!("must be at most {MAX_WORKERS}"),
                &picked.origin,
            ));
        }
        Some(picked) => picked.value,
        None => defaults.workers,
    };
    let seconds =
        |key: &'static str, picked: Option<super::Sourced<u64>>, default: Duration| match picked {
            Some(picked) if picked.value == 0 => {
                Err(invalid(key, "must be at least 1 second", &picked.origin))
            }
            Some(picked) => Ok(Duration::from_secs(picked.value)),
            None => Ok(default),
        };
    let step_timeout = seconds(
        "workflowStepTimeoutInSeconds",
        layers.pick(
            args.workflow_step_timeout_in_seconds.take(),
            (
                "--workflow-step-timeout-in-seconds",
                "CANOPY_WORKFLOW_STEP_TIMEOUT_IN_SECONDS",
            ),
            file.workflow_step_timeout_in_seconds.take(),
        ),
        defaults.step_timeout,
    )?;
    let lease = seconds(
        "workflowLeaseInSeconds",
        layers.pick(
            args.workflow_lease_in_seconds.take(),
            (
                "--workflow-lease-in-seconds",
                "CANOPY_WORKFLOW_LEASE_IN_SECONDS",
            ),
            file.workflow_lease_in_seconds.take(),
        ),
        defaults.lease,
    )?;
    Ok(EngineConfig {
        workers,
        step_timeout,
        lease,
    })
}
