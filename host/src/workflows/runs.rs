//! Runs in the store: the states, and queuing a run with the store enforcing one ongoing run per
//! (workflow, record). The engine (`engine`) claims and moves them; triggers create them here.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sqlx::Row as _;

use crate::platform::Store;

/// Where a run is. `queued`, `running` and `awaiting_input` are ongoing (one per workflow and
/// record); the other three are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Queued,
    Running,
    AwaitingInput,
    Succeeded,
    Failed,
    Cancelled,
}

impl RunState {
    pub const ALL: [Self; 6] = [
        Self::Queued,
        Self::Running,
        Self::AwaitingInput,
        Self::Succeeded,
        Self::Failed,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::AwaitingInput => "awaiting_input",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }

    /// Whether the run has not ended.
    pub fn ongoing(self) -> bool {
        matches!(self, Self::Queued | Self::Running | Self::AwaitingInput)
    }
}

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    Manual,
    Webhook,
    Schedule,
    RecordChange,
    SubWorkflow,
}

impl TriggerKind {
    pub const ALL: [Self; 5] = [
        Self::Manual,
        Self::Webhook,
        Self::Schedule,
        Self::RecordChange,
        Self::SubWorkflow,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Webhook => "webhook",
            Self::Schedule => "schedule",
            Self::RecordChange => "record_change",
            Self::SubWorkflow => "sub_workflow",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == s)
    }
}

/// A run to queue.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub workflow_id: String,
    pub version_id: String,
    pub collection_name: String,
    /// The packed wire id; not checked here (a bad one fails the run at its first data step).
    pub record_id: String,
    pub trigger_kind: TriggerKind,
    pub trigger_id: Option<String>,
    pub trigger_url_version: Option<i64>,
    pub user_id: i64,
    pub token_id: Option<String>,
    pub parent_run_id: Option<String>,
}

impl NewRun {
    /// A run of `workflow_id` at `version_id` on one record, started by `user_id`, with no
    /// trigger, token or parent run of record: what schedules and record changes queue, what a
    /// manual start fills in before its token, and what tests and benches queue.
    pub fn new(
        workflow_id: impl Into<String>,
        version_id: impl Into<String>,
        collection_name: impl Into<String>,
        record_id: impl Into<String>,
        trigger_kind: TriggerKind,
        user_id: i64,
    ) -> Self {
        Self {
            workflow_id: workflow_id.into(),
            version_id: version_id.into(),
            collection_name: collection_name.into(),
            record_id: record_id.into(),
            trigger_kind,
            trigger_id: None,
            trigger_url_version: None,
            user_id,
            token_id: None,
            parent_run_id: None,
        }
    }
}

/// The answer to queuing a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queued {
    /// Queued under this id.
    Created(String),
    /// A run of the workflow is ongoing on the record: nothing was created. Its id, when it
    /// could be read (it may have ended in between).
    Ongoing(Option<String>),
}

impl Store {
    /// Queues `run` unless one of its workflow is ongoing on its record. One statement: the
    /// partial unique index `workflow_runs_ongoing` decides, so concurrent callers (on any
    /// instance sharing the store) get exactly one `Created`.
    pub async fn queue_run(&self, run: &NewRun) -> crate::platform::Result<Queued> {
        let mut conn = self.pool().acquire().await?;
        self.queue_run_in(&mut conn, run).await
    }

    /// [`Store::queue_run`] on a connection of the caller's: a transaction that queues a batch
    /// of runs at once (`workflows::triggers::queue`).
    pub async fn queue_run_in(
        &self,
        conn: &mut sqlx::AnyConnection,
        run: &NewRun,
    ) -> crate::platform::Result<Queued> {
        let id = uuid::Uuid::new_v4().to_string();
        let now = crate::platform::store::now_ms();
        let inserted = sqlx::query(
            "INSERT INTO workflow_runs (id, project, environment, workflow_id, version_id, \
             collection_name, record_id, state, trigger_kind, trigger_id, trigger_url_version, \
             user_id, token_id, parent_run_id, context, attempt, available_at, created_at, \
             updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9, $10, $11, $12, $13, '{}', 0, \
             $14, $14, $14) \
             ON CONFLICT (workflow_id, collection_name, record_id) \
             WHERE state IN ('queued', 'running', 'awaiting_input') DO NOTHING \
             RETURNING id",
        )
        .bind(&id)
        .bind(self.project())
        .bind(self.environment())
        .bind(&run.workflow_id)
        .bind(&run.version_id)
        .bind(&run.collection_name)
        .bind(&run.record_id)
        .bind(run.trigger_kind.as_str())
        .bind(&run.trigger_id)
        .bind(run.trigger_url_version)
        .bind(run.user_id)
        .bind(&run.token_id)
        .bind(&run.parent_run_id)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
        if inserted.is_some() {
            return Ok(Queued::Created(id));
        }
        let ongoing = sqlx::query(
            "SELECT id FROM workflow_runs WHERE workflow_id = $1 AND collection_name = $2 \
             AND record_id = $3 AND state IN ('queued', 'running', 'awaiting_input')",
        )
        .bind(&run.workflow_id)
        .bind(&run.collection_name)
        .bind(&run.record_id)
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| row.get::<String, _>(0));
        Ok(Queued::Ongoing(ongoing))
    }
}

/// The context a run starts with: empty; steps add their outputs under their keys.
pub fn empty_context() -> Json {
    Json::Object(Default::default())
}
