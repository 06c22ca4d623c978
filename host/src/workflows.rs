//! Workflows (issue 13): definitions of steps on one collection, runs of them on one record,
//! the triggers that start runs (manual, the signed webhook, schedules, record changes) and the
//! in-process engine that executes them, durable on Canopy's store.
//!
//! - `definition`: the definition format (TOML, YAML or JSON);
//! - `validate`: a definition's checks, whole (structure, served schema, store);
//! - `versions`: workflows and their versions in the store;
//! - `files`: the workflows folder, loaded at start and at each reload;
//! - `runs`: run states, and queuing a run with one ongoing run per (workflow, record) enforced
//!   by the store's partial unique index;
//! - `engine`: the workers that claim queued runs with leases and drive them, the reaper, the
//!   wake-ups, and run control (abort, resume, complete, revise);
//! - `operations`: the run operations the surfaces call (the runs a user may see, one run,
//!   a manual start, completing a step);
//! - `steps`: what each step kind does, as the run's user through the permission layer;
//! - `triggers`: the manual and webhook triggers in the store, and the service that starts runs
//!   (rate limits, the batched run queue, who a run acts as), and record-change hooks;
//!   `webhook`: its signed URLs; `schedule`: cron schedules.

pub mod definition;
pub mod engine;
pub mod files;
pub mod json;
pub mod operations;
pub mod runs;
pub mod schedule;
pub mod steps;
pub mod triggers;
pub mod validate;
pub mod versions;
pub mod webhook;

pub use definition::Definition;
pub use runs::{NewRun, Queued, RunState, TriggerKind};
pub use versions::{Version, Workflow};

/// Everything the workflow layer can fail with. `Display` is the message a client or operator
/// reads; it never holds record values or secrets.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A definition, a trigger setting or a request body is not acceptable; the message names
    /// the file, step and field.
    #[error("{0}")]
    Invalid(String),
    /// A workflow, trigger, run or step does not exist (or is not visible to the caller).
    #[error("{0} not found")]
    NotFound(String),
    /// The change conflicts with the run's state (a run already ongoing, a step not waiting).
    #[error("{0}")]
    Conflict(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Store(#[from] crate::platform::Error),
}

impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        Self::Store(error.into())
    }
}

/// Result alias of the workflow layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;
