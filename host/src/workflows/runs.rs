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
        let mut answers = self.queue_runs_in(conn, std::slice::from_ref(run)).await?;
        Ok(answers.pop().unwrap_or(Queued::Ongoing(None)))
    }

    /// [`Store::queue_run`] for many runs on a connection of the caller's (a transaction), in
    /// few statements: the runs go in multi-row `INSERT`s of [`CHUNKS`] sizes (37 runs: 32, 4,
    /// 1), so a batch costs a handful of round trips instead of one per run, and the statements
    /// stay among a few prepared texts. Answers in the order of `runs`. Two runs of one workflow
    /// on one record in one call give one `Created` and one `Ongoing`, as two calls would: the
    /// index skips a row that conflicts with one inserted earlier by the same statement.
    pub async fn queue_runs_in(
        &self,
        conn: &mut sqlx::AnyConnection,
        runs: &[NewRun],
    ) -> crate::platform::Result<Vec<Queued>> {
        let now = crate::platform::store::now_ms();
        let ids: Vec<String> = runs
            .iter()
            .map(|_| uuid::Uuid::new_v4().to_string())
            .collect();
        let mut created = std::collections::HashSet::with_capacity(runs.len());
        let mut start = 0;
        while start < runs.len() {
            let size = chunk(runs.len() - start);
            let statement = insert_runs(size);
            let mut query = sqlx::query(&statement);
            for (id, run) in ids[start..start + size]
                .iter()
                .zip(&runs[start..start + size])
            {
                query = query
                    .bind(id)
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
                    .bind(now);
            }
            for row in query.fetch_all(&mut *conn).await? {
                created.insert(row.try_get::<String, _>(0)?);
            }
            start += size;
        }
        let mut answers = Vec::with_capacity(runs.len());
        for (id, run) in ids.into_iter().zip(runs) {
            answers.push(if created.contains(&id) {
                Queued::Created(id)
            } else {
                Queued::Ongoing(self.ongoing_run(conn, run).await?)
            });
        }
        Ok(answers)
    }

    /// The ongoing run of `run`'s workflow on its record, if any.
    async fn ongoing_run(
        &self,
        conn: &mut sqlx::AnyConnection,
        run: &NewRun,
    ) -> crate::platform::Result<Option<String>> {
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
        Ok(ongoing)
    }
}

/// The sizes of the multi-row inserts of [`Store::queue_runs_in`], largest first: each batch is
/// cut into these, so at most this many statement texts are ever prepared. 14 parameters a row:
/// 512 rows stay far below SQLite's 32,766 and PostgreSQL's 65,535 parameters.
pub const CHUNKS: [usize; 10] = [512, 256, 128, 64, 32, 16, 8, 4, 2, 1];

/// The largest chunk that fits in `left` runs (`left` ≥ 1).
fn chunk(left: usize) -> usize {
    CHUNKS.into_iter().find(|&size| size <= left).unwrap_or(1)
}

/// The `INSERT` of `rows` runs, 14 parameters each.
fn insert_runs(rows: usize) -> String {
    use std::fmt::Write as _;
    let mut sql = String::from(
        "INSERT INTO workflow_runs (id, project, environment, workflow_id, version_id, \
         collection_name, record_id, state, trigger_kind, trigger_id, trigger_url_version, \
         user_id, token_id, parent_run_id, context, attempt, available_at, created_at, \
         updated_at) VALUES ",
    );
    for row in 0..rows {
        let p = row * 14;
        let _ = write!(
            sql,
            "{}(${}, ${}, ${}, ${}, ${}, ${}, ${}, 'queued', ${}, ${}, ${}, ${}, ${}, ${}, '{{}}', \
             0, ${}, ${}, ${})",
            if row == 0 { "" } else { ", " },
            p + 1,
            p + 2,
            p + 3,
            p + 4,
            p + 5,
            p + 6,
            p + 7,
            p + 8,
            p + 9,
            p + 10,
            p + 11,
            p + 12,
            p + 13,
            p + 14,
            p + 14,
            p + 14,
        );
    }
    sql.push_str(
        " ON CONFLICT (workflow_id, collection_name, record_id) \
         WHERE state IN ('queued', 'running', 'awaiting_input') DO NOTHING RETURNING id",
    );
    sql
}

/// The context a run starts with: empty; steps add their outputs under their keys.
pub fn empty_context() -> Json {
    Json::Object(Default::default())
}
