//! The engine's reads and writes of `workflow_runs` and `workflow_run_steps`: claiming a queued
//! run with a lease, renewing and reaping leases, the step rows a run makes as it goes, and how
//! a run waits, is retried later or ends.
//!
//! Every write a worker makes to its run is conditioned on still holding it (`locked_by` = the
//! worker, state `running`): a run aborted or reaped meanwhile is left alone, and the worker
//! stops. Step rows are written whatever happened to the run, so a side effect that ran is always
//! recorded as done (the write-ahead marker of platform-api.md §1.10).

use serde::Serialize;
use serde_json::Value as Json;
use sqlx::any::AnyRow;
use sqlx::{Any, Row as _, Transaction};

use super::super::runs::{RunState, TriggerKind};
use crate::platform::listing::{Args, DateRange};
use crate::platform::store::{Dialect, now_ms};
use crate::platform::{Result, Store};

/// Why an awaiting run waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitingReason {
    /// A manual step waits for a person's values (an answer, an option, form values).
    UserInput,
    /// A step in `confirm` mode is prepared and waits for a person to confirm it.
    Confirmation,
    /// An action needs an approval: the run waits for the request's decision.
    Approval,
    /// The run was handed to a team or a user, who resume it.
    Escalation,
    /// A sub-workflow's run is going on; the run resumes when it ends.
    SubWorkflow,
    /// A step that writes was interrupted (its worker died) after it may have written: a person
    /// says whether it was done (complete) or must run again (revise). Never re-run blindly.
    Uncertain,
    /// A step failed (refused, invalid, or still failing after its retries): a person may take
    /// the run over (resume), do the step by hand (complete) or run it again (revise).
    StepFailed,
}

impl WaitingReason {
    pub const ALL: [Self; 7] = [
        Self::UserInput,
        Self::Confirmation,
        Self::Approval,
        Self::Escalation,
        Self::SubWorkflow,
        Self::Uncertain,
        Self::StepFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::UserInput => "user_input",
            Self::Confirmation => "confirmation",
            Self::Approval => "approval",
            Self::Escalation => "escalation",
            Self::SubWorkflow => "sub_workflow",
            Self::Uncertain => "uncertain",
            Self::StepFailed => "step_failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == s)
    }
}

/// Where one step of a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Running,
    AwaitingInput,
    Succeeded,
    Failed,
    /// A person declined a step in `confirm` mode: the run went on without it.
    Skipped,
    /// Revised away: a later step of a revised one.
    Cancelled,
}

impl StepStatus {
    pub const ALL: [Self; 7] = [
        Self::Pending,
        Self::Running,
        Self::AwaitingInput,
        Self::Succeeded,
        Self::Failed,
        Self::Skipped,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::AwaitingInput => "awaiting_input",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == s)
    }
}

/// The write-ahead marker of a step that writes.
pub const EXECUTING: &str = "executing";
pub const DONE: &str = "done";

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: String,
    pub workflow_id: String,
    pub version_id: String,
    pub collection_name: String,
    /// Packed wire id (`1|2` for a composite key).
    pub record_id: String,
    pub state: RunState,
    pub waiting_reason: Option<WaitingReason>,
    pub trigger_kind: TriggerKind,
    pub trigger_id: Option<String>,
    /// Who the run acts as now (a person who resumes a run takes it over).
    pub user_id: i64,
    /// Who started it.
    pub started_by_user_id: i64,
    pub token_id: Option<String>,
    pub parent_run_id: Option<String>,
    pub current_step_index: Option<i64>,
    /// Each finished step's output under its key.
    pub context: Json,
    pub assignee_user_id: Option<i64>,
    pub assignee_team: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
    pub locked_by: Option<String>,
}

/// One step of a run as stored (a step revised is run again at a new index).
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub run_id: String,
    pub index: i64,
    pub key: String,
    pub kind: String,
    pub mode: String,
    pub status: StepStatus,
    pub revised: bool,
    pub original_step_index: Option<i64>,
    pub attempt: i64,
    /// `executing` or `done` around a write; `None` before it (or for steps that do not write).
    pub phase: Option<String>,
    pub selected_option: Option<String>,
    /// What a person gave the step (values, an answer, an option, a confirmation).
    pub input: Json,
    /// What the step produced (kept in the run's context under its key), or what it prepared
    /// for a person's confirmation.
    pub output: Json,
    pub error_message: Option<String>,
    pub actor_user_id: Option<i64>,
    pub approval_id: Option<i64>,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

impl StepRow {
    /// The row of `step` as it starts, before it is written (see [`Progress`]).
    pub(crate) fn pending(run_id: &str, step: &NewStep<'_>) -> Self {
        Self {
            run_id: run_id.to_owned(),
            index: step.index,
            key: step.key.to_owned(),
            kind: step.kind.to_owned(),
            mode: step.mode.to_owned(),
            status: StepStatus::Pending,
            revised: false,
            original_step_index: step.original_step_index,
            attempt: 0,
            phase: None,
            selected_option: None,
            input: step.input.clone(),
            output: Json::Null,
            error_message: None,
            actor_user_id: None,
            approval_id: None,
            started_at: Some(now_ms()),
            finished_at: None,
        }
    }
}

pub(crate) const RUN_COLUMNS: &str = "id, workflow_id, version_id, collection_name, record_id, \
    state, waiting_reason, trigger_kind, trigger_id, user_id, \
    COALESCE(started_by_user_id, user_id) AS started_by, token_id, parent_run_id, \
    current_step_index, context, assignee_user_id, assignee_team, error_code, error_message, \
    created_at, started_at, updated_at, finished_at, locked_by";

const STEP_COLUMNS: &str = "run_id, step_index, step_key, step_type, mode, status, revised, \
    original_step_index, attempt, phase, selected_option, input, output, error_message, \
    actor_user_id, approval_id, started_at, finished_at";

fn json_column(row: &AnyRow, name: &str) -> Result<Json> {
    let text: Option<String> = row.try_get(name)?;
    Ok(text
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Json::Null))
}

pub(crate) fn run_from_row(row: &AnyRow) -> Result<Run> {
    let state: String = row.try_get("state")?;
    let trigger: String = row.try_get("trigger_kind")?;
    let reason: Option<String> = row.try_get("waiting_reason")?;
    let mut context = json_column(row, "context")?;
    if !context.is_object() {
        context = Json::Object(Default::default());
    }
    Ok(Run {
        id: row.try_get("id")?,
        workflow_id: row.try_get("workflow_id")?,
        version_id: row.try_get("version_id")?,
        collection_name: row.try_get("collection_name")?,
        record_id: row.try_get("record_id")?,
        state: RunState::parse(&state).ok_or_else(|| {
            crate::platform::Error::Invalid(format!("a run is in the unknown state {state:?}"))
        })?,
        waiting_reason: reason.as_deref().and_then(WaitingReason::parse),
        trigger_kind: TriggerKind::parse(&trigger).unwrap_or(TriggerKind::Manual),
        trigger_id: row.try_get("trigger_id")?,
        user_id: row.try_get("user_id")?,
        started_by_user_id: row.try_get("started_by")?,
        token_id: row.try_get("token_id")?,
        parent_run_id: row.try_get("parent_run_id")?,
        current_step_index: row.try_get("current_step_index")?,
        context,
        assignee_user_id: row.try_get("assignee_user_id")?,
        assignee_team: row.try_get("assignee_team")?,
        error_code: row.try_get("error_code")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        updated_at: row.try_get("updated_at")?,
        finished_at: row.try_get("finished_at")?,
        locked_by: row.try_get("locked_by")?,
    })
}

fn step_from_row(row: &AnyRow) -> Result<StepRow> {
    let status: String = row.try_get("status")?;
    Ok(StepRow {
        run_id: row.try_get("run_id")?,
        index: row.try_get("step_index")?,
        key: row.try_get("step_key")?,
        kind: row.try_get("step_type")?,
        mode: row.try_get("mode")?,
        status: StepStatus::parse(&status).unwrap_or(StepStatus::Failed),
        revised: row.try_get::<i64, _>("revised")? != 0,
        original_step_index: row.try_get("original_step_index")?,
        attempt: row.try_get("attempt")?,
        phase: row.try_get("phase")?,
        selected_option: row.try_get("selected_option")?,
        input: json_column(row, "input")?,
        output: json_column(row, "output")?,
        error_message: row.try_get("error_message")?,
        actor_user_id: row.try_get("actor_user_id")?,
        approval_id: row.try_get("approval_id")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

fn text(value: &Json) -> Option<String> {
    (!value.is_null()).then(|| value.to_string())
}

/// A new step row.
#[derive(Debug, Clone)]
pub(crate) struct NewStep<'a> {
    pub index: i64,
    pub key: &'a str,
    pub kind: &'a str,
    pub mode: &'a str,
    pub original_step_index: Option<i64>,
    pub input: Json,
}

/// How a step ended well: its status (`succeeded`, or `skipped` when declined), what it
/// produced, the option it chose, and who did it.
#[derive(Debug, Clone)]
pub(crate) struct StepDone {
    pub status: StepStatus,
    pub output: Json,
    pub option: Option<String>,
    pub actor_user_id: Option<i64>,
}

/// A finished step as [`Store::record_progress`] writes it: its row as it ended (status,
/// output, option, actor, times), and whether that row exists already (written as `pending`
/// when the step started) or is inserted whole.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    pub row: StepRow,
    pub written: bool,
}

/// A run's progress since its last write, written in one transaction: the steps finished
/// meanwhile, its context, and its current step (with that step's row when it is not written
/// yet). The engine runs the steps that only read and steer one after the other in memory and
/// writes them together (see `execute::Unwritten`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress<'a> {
    pub finished: &'a [Finished],
    pub context: &'a Json,
    pub current_index: Option<i64>,
    /// The current step's row, when it is not written yet.
    pub current: Option<&'a StepRow>,
}

impl Progress<'_> {
    /// Nothing happened since the last write (the context changes only with a finished step).
    pub fn is_empty(&self) -> bool {
        self.finished.is_empty() && self.current.is_none()
    }
}

/// How a step waits: what it prepared, the approval request it filed, the person it was
/// handed to.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepWait {
    pub prepared: Option<Json>,
    pub approval_id: Option<i64>,
    pub assignee_user_id: Option<i64>,
    pub assignee_team: Option<String>,
    /// The step failed: its status becomes `failed` and the message is kept on the step and
    /// the run.
    pub failed: Option<String>,
    /// The step did its work (a sub-workflow queued): its marker becomes `done`.
    pub done: bool,
}

/// What the reaper did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Runs queued again: their worker died between steps or during a step that writes nothing.
    pub requeued: Vec<String>,
    /// Runs now waiting (reason `uncertain`): their worker died during a write.
    pub uncertain: Vec<String>,
}

/// The filters of the runs listing, AND-combined.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub workflow_id: Option<String>,
    pub collection_name: Option<String>,
    pub record_id: Option<String>,
    pub state: Option<RunState>,
    pub trigger: Option<TriggerKind>,
    pub created_at: DateRange,
    /// `None`: every run (an admin); else only the runs this viewer may see.
    pub visible_to: Option<Viewer>,
}

/// Who lists runs, when not an admin: they see the runs they act in, started, or were handed,
/// and the runs on collections they may browse.
#[derive(Debug, Clone, Default)]
pub struct Viewer {
    pub user_id: i64,
    pub teams: Vec<String>,
    pub browsable: Vec<String>,
}

/// The message kept on a step its worker died in while it may have written.
pub const UNCERTAIN_MESSAGE: &str = "the worker running this step stopped while it may have \
     written: complete the step if it was done, or revise it to run it again";

impl Store {
    /// A run of this environment.
    pub async fn workflow_run(&self, id: &str) -> Result<Option<Run>> {
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM workflow_runs \
             WHERE id = $1 AND project = $2 AND environment = $3"
        ))
        .bind(id)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(run_from_row).transpose()
    }

    /// The steps of a run, in the order they ran (revised and cancelled ones included).
    pub async fn workflow_run_steps(&self, run_id: &str) -> Result<Vec<StepRow>> {
        let rows = sqlx::query(&format!(
            "SELECT {STEP_COLUMNS} FROM workflow_run_steps WHERE run_id = $1 ORDER BY step_index"
        ))
        .bind(run_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(step_from_row).collect()
    }

    /// One step of a run.
    pub async fn workflow_run_step(&self, run_id: &str, index: i64) -> Result<Option<StepRow>> {
        let row = sqlx::query(&format!(
            "SELECT {STEP_COLUMNS} FROM workflow_run_steps WHERE run_id = $1 AND step_index = $2"
        ))
        .bind(run_id)
        .bind(index)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(step_from_row).transpose()
    }

    /// The runs matching `filter`, newest first, at most `limit`.
    pub async fn workflow_runs(&self, filter: &RunFilter, limit: i64) -> Result<Vec<Run>> {
        let mut args = Args::default();
        let mut conditions = vec![
            format!("project = {}", args.text(self.project())),
            format!("environment = {}", args.text(self.environment())),
        ];
        if let Some(workflow) = &filter.workflow_id {
            conditions.push(format!("workflow_id = {}", args.text(workflow.clone())));
        }
        if let Some(collection) = &filter.collection_name {
            conditions.push(format!(
                "collection_name = {}",
                args.text(collection.clone())
            ));
        }
        if let Some(record) = &filter.record_id {
            conditions.push(format!("record_id = {}", args.text(record.clone())));
        }
        if let Some(state) = filter.state {
            conditions.push(format!("state = {}", args.text(state.as_str())));
        }
        if let Some(trigger) = filter.trigger {
            conditions.push(format!("trigger_kind = {}", args.text(trigger.as_str())));
        }
        conditions.extend(filter.created_at.conditions("created_at", &mut args));
        if let Some(viewer) = &filter.visible_to {
            let me = viewer.user_id;
            let mut any = vec![
                format!("user_id = {}", args.int(me)),
                format!("started_by_user_id = {}", args.int(me)),
                format!("assignee_user_id = {}", args.int(me)),
            ];
            for team in &viewer.teams {
                any.push(format!("assignee_team = {}", args.text(team.clone())));
            }
            for collection in &viewer.browsable {
                any.push(format!(
                    "collection_name = {}",
                    args.text(collection.clone())
                ));
            }
            conditions.push(format!("({})", any.join(" OR ")));
        }
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM workflow_runs WHERE {} \
             ORDER BY created_at DESC, id DESC LIMIT {}",
            conditions.join(" AND "),
            args.int(limit),
        );
        let rows = args.bind(sqlx::query(&sql)).fetch_all(self.pool()).await?;
        rows.iter().map(run_from_row).collect()
    }

    /// Claims the next queued run that is due, for `worker`, until `lease_until` (unix ms):
    /// PostgreSQL skips runs another instance is claiming (`FOR UPDATE SKIP LOCKED`); SQLite
    /// has one writer, so one statement is enough.
    pub(crate) async fn claim_run(&self, worker: &str, lease_until: i64) -> Result<Option<Run>> {
        let row = sqlx::query(&claim_sql(self.dialect()))
            .bind(worker)
            .bind(lease_until)
            .bind(now_ms())
            .bind(self.project())
            .bind(self.environment())
            .fetch_optional(self.progress_pool())
            .await?;
        row.as_ref().map(run_from_row).transpose()
    }

    /// The runs due now and waiting for a worker, and the time the oldest of them became due
    /// (unix ms): the depth and age of the queue, for `/metrics`. Read from the same index as
    /// [`Store::claim_run`].
    pub async fn queue_depth(&self) -> Result<(i64, Option<i64>)> {
        let row = sqlx::query(
            "SELECT COUNT(*), MIN(available_at) FROM workflow_runs WHERE project = $1 \
             AND environment = $2 AND state = 'queued' AND available_at <= $3",
        )
        .bind(self.project())
        .bind(self.environment())
        .bind(now_ms())
        .fetch_one(self.pool())
        .await?;
        Ok((row.try_get(0)?, row.try_get(1)?))
    }

    /// Extends `worker`'s lease on a run; `false` when it no longer holds it (aborted, reaped).
    pub(crate) async fn renew_lease(
        &self,
        run_id: &str,
        worker: &str,
        lease_until: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE workflow_runs SET lease_expires_at = $1 \
             WHERE id = $2 AND locked_by = $3 AND state = 'running'",
        )
        .bind(lease_until)
        .bind(run_id)
        .bind(worker)
        .execute(self.progress_pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives a run back to the queue (graceful stop between two steps).
    pub(crate) async fn release_run(&self, run_id: &str, worker: &str) -> Result<bool> {
        let now = now_ms();
        let done = sqlx::query(
            "UPDATE workflow_runs SET state = 'queued', locked_by = NULL, \
             lease_expires_at = NULL, available_at = $1, updated_at = $1 \
             WHERE id = $2 AND locked_by = $3 AND state = 'running'",
        )
        .bind(now)
        .bind(run_id)
        .bind(worker)
        .execute(self.progress_pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Turns the runs whose lease expired back to `queued`, except a run whose current step was
    /// writing (marker `executing`): that one waits for a person (reason `uncertain`), since
    /// running the write again could do it twice. Each change is conditioned on the lease
    /// still being expired, so a worker renewing at the same moment keeps its run.
    pub async fn reap_workflow_leases(&self) -> Result<Reaped> {
        self.reap_workflow_leases_except(|_| false).await
    }

    /// [`Self::reap_workflow_leases`], leaving alone the runs `driven` says this process's
    /// own workers are driving (alive, only late with a heartbeat).
    pub async fn reap_workflow_leases_except(
        &self,
        driven: impl Fn(&str) -> bool,
    ) -> Result<Reaped> {
        let now = now_ms();
        let expired = sqlx::query(
            "SELECT r.id, s.phase, s.step_index FROM workflow_runs r \
             LEFT JOIN workflow_run_steps s ON s.run_id = r.id \
             AND s.step_index = r.current_step_index \
             WHERE r.project = $1 AND r.environment = $2 AND r.state = 'running' \
             AND r.lease_expires_at < $3",
        )
        .bind(self.project())
        .bind(self.environment())
        .bind(now)
        .fetch_all(self.progress_pool())
        .await?;
        let mut reaped = Reaped::default();
        for row in expired {
            let id: String = row.try_get(0)?;
            if driven(&id) {
                continue;
            }
            let phase: Option<String> = row.try_get(1)?;
            let index: Option<i64> = row.try_get(2)?;
            if phase.as_deref() == Some(EXECUTING) {
                let mut tx = self.progress_pool().begin().await?;
                let done = sqlx::query(
                    "UPDATE workflow_runs SET state = 'awaiting_input', \
                     waiting_reason = 'uncertain', locked_by = NULL, lease_expires_at = NULL, \
                     error_message = $1, updated_at = $2 \
                     WHERE id = $3 AND state = 'running' AND lease_expires_at < $2",
                )
                .bind(UNCERTAIN_MESSAGE)
                .bind(now)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 1 {
                    sqlx::query(
                        "UPDATE workflow_run_steps SET status = 'awaiting_input', \
                         error_message = $1 WHERE run_id = $2 AND step_index = $3",
                    )
                    .bind(UNCERTAIN_MESSAGE)
                    .bind(&id)
                    .bind(index)
                    .execute(&mut *tx)
                    .await?;
                    reaped.uncertain.push(id);
                }
                tx.commit().await?;
            } else {
                let done = sqlx::query(
                    "UPDATE workflow_runs SET state = 'queued', locked_by = NULL, \
                     lease_expires_at = NULL, available_at = $1, updated_at = $1 \
                     WHERE id = $2 AND state = 'running' AND lease_expires_at < $1",
                )
                .bind(now)
                .bind(&id)
                .execute(self.progress_pool())
                .await?;
                if done.rows_affected() == 1 {
                    reaped.requeued.push(id);
                }
            }
        }
        Ok(reaped)
    }

    /// The highest step index of a run, if it has steps.
    pub(crate) async fn last_step_index(&self, run_id: &str) -> Result<Option<i64>> {
        Ok(
            sqlx::query("SELECT MAX(step_index) FROM workflow_run_steps WHERE run_id = $1")
                .bind(run_id)
                .fetch_one(self.pool())
                .await?
                .try_get::<Option<i64>, _>(0)?,
        )
    }

    /// Writes a run's progress ([`Progress`]) in one transaction: the finished steps, the
    /// context, the current step. Rows that exist already are finished whatever happened to the
    /// run, since their side effect happened; the rest is written only while `worker` holds
    /// the run. Returns whether it does.
    pub(crate) async fn record_progress(
        &self,
        run_id: &str,
        worker: &str,
        progress: &Progress<'_>,
    ) -> Result<bool> {
        let mut tx = self.progress_pool().begin().await?;
        let held = write_progress(&mut tx, run_id, worker, progress, now_ms()).await?;
        tx.commit().await?;
        Ok(held)
    }

    /// Sets the write-ahead marker before a step's side effect. `false` when the marker was
    /// already set: the write may have happened (`executing`) or did (`done`), so it must not
    /// run again.
    pub(crate) async fn mark_executing(&self, run_id: &str, index: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE workflow_run_steps SET phase = 'executing', status = 'running' \
             WHERE run_id = $1 AND step_index = $2 AND phase IS NULL",
        )
        .bind(run_id)
        .bind(index)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Clears the marker of a write that failed with an error (it did not happen), so that it
    /// may be retried.
    pub(crate) async fn clear_executing(&self, run_id: &str, index: i64) -> Result<()> {
        sqlx::query(
            "UPDATE workflow_run_steps SET phase = NULL \
             WHERE run_id = $1 AND step_index = $2 AND phase = 'executing'",
        )
        .bind(run_id)
        .bind(index)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The run waits for a person (`reason`); its step waits too (or failed, with `wait.failed`).
    /// The lease is released: nobody works on a waiting run.
    pub(crate) async fn wait_for_person(
        &self,
        run_id: &str,
        worker: &str,
        index: i64,
        reason: WaitingReason,
        wait: &StepWait,
    ) -> Result<bool> {
        let now = now_ms();
        let mut tx = self.progress_pool().begin().await?;
        let status = if wait.failed.is_some() {
            StepStatus::Failed
        } else {
            StepStatus::AwaitingInput
        };
        let held = sqlx::query(
            "UPDATE workflow_runs SET state = 'awaiting_input', waiting_reason = $1, \
             locked_by = NULL, lease_expires_at = NULL, updated_at = $2, error_message = $3, \
             assignee_user_id = COALESCE($4, assignee_user_id), \
             assignee_team = COALESCE($5, assignee_team) \
             WHERE id = $6 AND locked_by = $7 AND state = 'running'",
        )
        .bind(reason.as_str())
        .bind(now)
        .bind(&wait.failed)
        .bind(wait.assignee_user_id)
        .bind(&wait.assignee_team)
        .bind(run_id)
        .bind(worker)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        sqlx::query(
            "UPDATE workflow_run_steps SET status = $1, error_message = $2, \
             output = COALESCE($3, output), approval_id = COALESCE($4, approval_id), \
             phase = CASE WHEN $5 = 1 AND phase = 'executing' THEN 'done' ELSE phase END, \
             finished_at = CASE WHEN $1 = 'failed' THEN $6 ELSE finished_at END \
             WHERE run_id = $7 AND step_index = $8",
        )
        .bind(status.as_str())
        .bind(&wait.failed)
        .bind(wait.prepared.as_ref().map(Json::to_string))
        .bind(wait.approval_id)
        .bind(i64::from(wait.done))
        .bind(now)
        .bind(run_id)
        .bind(index)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(held)
    }

    /// A step failed in a way worth trying again: the step goes back to `pending` with its
    /// attempt count, and the run to the queue, due at `available_at`.
    pub(crate) async fn retry_later(
        &self,
        run_id: &str,
        worker: &str,
        index: i64,
        attempt: i64,
        error: &str,
        available_at: i64,
    ) -> Result<bool> {
        let now = now_ms();
        let mut tx = self.progress_pool().begin().await?;
        sqlx::query(
            "UPDATE workflow_run_steps SET status = 'pending', attempt = $1, error_message = $2 \
             WHERE run_id = $3 AND step_index = $4",
        )
        .bind(attempt)
        .bind(error)
        .bind(run_id)
        .bind(index)
        .execute(&mut *tx)
        .await?;
        let held = sqlx::query(
            "UPDATE workflow_runs SET state = 'queued', locked_by = NULL, \
             lease_expires_at = NULL, available_at = $1, updated_at = $2 \
             WHERE id = $3 AND locked_by = $4 AND state = 'running'",
        )
        .bind(available_at)
        .bind(now)
        .bind(run_id)
        .bind(worker)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(held)
    }

    /// Ends a run `worker` holds (`succeeded`, `failed`) after writing its last `progress`, its
    /// current step failed with the message when it failed. A sub-workflow's run wakes its
    /// parent in the same transaction. Returns whether it held the run, and the parent to wake.
    pub(crate) async fn end_run(
        &self,
        run: &Run,
        worker: &str,
        progress: &Progress<'_>,
        state: RunState,
        error: Option<(&str, &str)>,
    ) -> Result<(bool, Option<String>)> {
        let now = now_ms();
        let mut tx = self.progress_pool().begin().await?;
        // The last progress's context and current step go with the end, in its one UPDATE of
        // the run (a round trip less per run than writing the progress first).
        let written = !progress.is_empty();
        let held = sqlx::query(
            "UPDATE workflow_runs SET state = $1, waiting_reason = NULL, locked_by = NULL, \
             lease_expires_at = NULL, finished_at = $2, updated_at = $2, error_code = $3, \
             error_message = $4, context = COALESCE($7, context), \
             current_step_index = COALESCE($8, current_step_index) \
             WHERE id = $5 AND locked_by = $6 AND state = 'running'",
        )
        .bind(state.as_str())
        .bind(now)
        .bind(error.map(|(code, _)| code))
        .bind(error.map(|(_, message)| message))
        .bind(&run.id)
        .bind(worker)
        .bind(written.then(|| progress.context.to_string()))
        .bind(progress.current_index.filter(|_| written))
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !held {
            tx.rollback().await?;
            return Ok((false, None));
        }
        if written {
            write_steps(&mut tx, run.id.as_str(), progress, true, now).await?;
        }
        if let (Some((_, message)), Some(index)) = (error, run.current_step_index) {
            sqlx::query(
                "UPDATE workflow_run_steps SET status = 'failed', error_message = $1, \
                 finished_at = $2 WHERE run_id = $3 AND step_index = $4 \
                 AND status NOT IN ('succeeded', 'skipped', 'cancelled')",
            )
            .bind(message)
            .bind(now)
            .bind(&run.id)
            .bind(index)
            .execute(&mut *tx)
            .await?;
        }
        let parent = wake_parent(&mut tx, run, state, now).await?;
        tx.commit().await?;
        Ok((true, parent))
    }

    /// Wakes the parent of `child_id` if that run already ended (it may end before its parent
    /// was recorded as waiting for it). Returns the parent when it was queued again.
    pub(crate) async fn wake_parent_of(&self, child_id: &str) -> Result<Option<String>> {
        let mut tx = self.pool().begin().await?;
        // Written first: the child's row is locked (PostgreSQL) and the store's write lock held
        // (SQLite) before reading, so its end cannot slip between this read and `wake_parent`.
        touch(&mut tx, child_id).await?;
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM workflow_runs WHERE id = $1"
        ))
        .bind(child_id)
        .fetch_optional(&mut *tx)
        .await?;
        let parent = match row.as_ref().map(run_from_row).transpose()? {
            Some(child) if !child.state.ongoing() => {
                wake_parent(&mut tx, &child, child.state, now_ms()).await?
            }
            _ => None,
        };
        tx.commit().await?;
        Ok(parent)
    }
}

/// The claim of [`Store::claim_run`]: the environment's oldest due queued run, read from the
/// `workflow_runs_due` index (one entry, whatever the history).
fn claim_sql(dialect: Dialect) -> String {
    let lock = match dialect {
        Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
        Dialect::Sqlite => "",
    };
    format!(
        "UPDATE workflow_runs SET state = 'running', locked_by = $1, lease_expires_at = $2, \
         started_at = COALESCE(started_at, $3), updated_at = $3 \
         WHERE id = (SELECT id FROM workflow_runs WHERE project = $4 AND environment = $5 \
         AND state = 'queued' AND available_at <= $3 ORDER BY available_at, created_at \
         LIMIT 1{lock}) AND state = 'queued' \
         RETURNING {RUN_COLUMNS}"
    )
}

/// A write that changes nothing, to take the row's lock (PostgreSQL) or the store's write lock
/// (SQLite) before reading in a transaction.
pub(crate) async fn touch(tx: &mut Transaction<'_, Any>, run_id: &str) -> Result<()> {
    sqlx::query("UPDATE workflow_runs SET updated_at = updated_at WHERE id = $1")
        .bind(run_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// [`Store::record_progress`] inside a transaction; whether `worker` holds the run.
async fn write_progress(
    tx: &mut Transaction<'_, Any>,
    run_id: &str,
    worker: &str,
    progress: &Progress<'_>,
    now: i64,
) -> Result<bool> {
    let held = sqlx::query(
        "UPDATE workflow_runs SET context = $1, updated_at = $2, \
         current_step_index = COALESCE($3, current_step_index) \
         WHERE id = $4 AND locked_by = $5 AND state = 'running'",
    )
    .bind(progress.context.to_string())
    .bind(now)
    .bind(progress.current_index)
    .bind(run_id)
    .bind(worker)
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1;
    write_steps(tx, run_id, progress, held, now).await?;
    Ok(held)
}

/// The step rows of `progress`: the rows written before are finished whatever happened to the
/// run (their side effect happened); the new ones are inserted only while the run is `held`.
async fn write_steps(
    tx: &mut Transaction<'_, Any>,
    run_id: &str,
    progress: &Progress<'_>,
    held: bool,
    now: i64,
) -> Result<()> {
    for finished in progress.finished.iter().filter(|f| f.written) {
        let row = &finished.row;
        let done = StepDone {
            status: row.status,
            output: row.output.clone(),
            option: row.selected_option.clone(),
            actor_user_id: row.actor_user_id,
        };
        write_done(tx, run_id, row.index, &done, now).await?;
    }
    if held {
        let new: Vec<&StepRow> = progress
            .finished
            .iter()
            .filter(|f| !f.written)
            .map(|f| &f.row)
            .chain(progress.current)
            .collect();
        insert_rows(tx, &new).await?;
    }
    Ok(())
}

/// Columns bound per row by [`insert_rows`].
const BOUND_PER_ROW: usize = 13;

/// Inserts step rows whole (pending, or already finished), in one statement.
async fn insert_rows(tx: &mut Transaction<'_, Any>, rows: &[&StepRow]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let values: Vec<String> = (0..rows.len())
        .map(|n| {
            let first = n * BOUND_PER_ROW;
            let binds: Vec<String> = (1..=BOUND_PER_ROW)
                .map(|c| format!("${}", first + c))
                .collect();
            format!("({}, 0, 0)", binds.join(", "))
        })
        .collect();
    let sql = format!(
        "INSERT INTO workflow_run_steps (run_id, step_index, step_key, step_type, mode, status, \
         original_step_index, input, output, selected_option, actor_user_id, started_at, \
         finished_at, revised, attempt) VALUES {}",
        values.join(", ")
    );
    let mut query = sqlx::query(&sql);
    for row in rows {
        query = query
            .bind(&row.run_id)
            .bind(row.index)
            .bind(&row.key)
            .bind(&row.kind)
            .bind(&row.mode)
            .bind(row.status.as_str())
            .bind(row.original_step_index)
            .bind(text(&row.input))
            .bind(text(&row.output))
            .bind(&row.selected_option)
            .bind(row.actor_user_id)
            .bind(row.started_at)
            .bind(row.finished_at);
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

async fn write_done(
    tx: &mut Transaction<'_, Any>,
    run_id: &str,
    index: i64,
    done: &StepDone,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "UPDATE workflow_run_steps SET status = $1, output = $2, selected_option = $3, \
         actor_user_id = COALESCE($4, actor_user_id), error_message = NULL, finished_at = $5, \
         phase = CASE WHEN phase = 'executing' THEN 'done' ELSE phase END \
         WHERE run_id = $6 AND step_index = $7",
    )
    .bind(done.status.as_str())
    .bind(text(&done.output))
    .bind(&done.option)
    .bind(done.actor_user_id)
    .bind(now)
    .bind(run_id)
    .bind(index)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A sub-workflow's run ended (`state`): its parent, waiting on its current step for it,
/// resumes (the step succeeded with the child's id and state) or waits for a person (the step
/// failed). Returns the parent when it was queued again.
pub(crate) async fn wake_parent(
    tx: &mut Transaction<'_, Any>,
    child: &Run,
    state: RunState,
    now: i64,
) -> Result<Option<String>> {
    let Some(parent_id) = &child.parent_run_id else {
        return Ok(None);
    };
    // Locks the parent first: its own move to `awaiting_input` is then either seen here or
    // still to come (and it looks at the child after it, `wake_parent_of`).
    touch(tx, parent_id).await?;
    let row = sqlx::query(&format!(
        "SELECT {RUN_COLUMNS} FROM workflow_runs WHERE id = $1 AND state = 'awaiting_input' \
         AND waiting_reason = 'sub_workflow'"
    ))
    .bind(parent_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(parent) = row.as_ref().map(run_from_row).transpose()? else {
        return Ok(None);
    };
    let Some(index) = parent.current_step_index else {
        return Ok(None);
    };
    let step = sqlx::query(&format!(
        "SELECT {STEP_COLUMNS} FROM workflow_run_steps WHERE run_id = $1 AND step_index = $2"
    ))
    .bind(parent_id)
    .bind(index)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(step) = step.as_ref().map(step_from_row).transpose()? else {
        return Ok(None);
    };
    // Only the child this step started wakes it.
    if step.output.get("runId").and_then(Json::as_str) != Some(child.id.as_str()) {
        return Ok(None);
    }
    let output = serde_json::json!({"runId": child.id, "state": state.as_str()});
    if state == RunState::Succeeded {
        let mut context = parent.context.clone();
        if let Some(map) = context.as_object_mut() {
            map.insert(step.key.clone(), output.clone());
        }
        write_done(
            tx,
            parent_id,
            index,
            &StepDone {
                status: StepStatus::Succeeded,
                output,
                option: None,
                actor_user_id: None,
            },
            now,
        )
        .await?;
        sqlx::query(
            "UPDATE workflow_runs SET state = 'queued', waiting_reason = NULL, context = $1, \
             available_at = $2, updated_at = $2 WHERE id = $3 AND state = 'awaiting_input'",
        )
        .bind(context.to_string())
        .bind(now)
        .bind(parent_id)
        .execute(&mut **tx)
        .await?;
        Ok(Some(parent_id.clone()))
    } else {
        let message = format!(
            "the sub-workflow's run {} ended {}",
            child.id,
            state.as_str()
        );
        sqlx::query(
            "UPDATE workflow_run_steps SET status = 'failed', output = $1, error_message = $2, \
             finished_at = $3 WHERE run_id = $4 AND step_index = $5",
        )
        .bind(output.to_string())
        .bind(&message)
        .bind(now)
        .bind(parent_id)
        .bind(index)
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "UPDATE workflow_runs SET waiting_reason = 'step_failed', error_message = $1, \
             updated_at = $2 WHERE id = $3 AND state = 'awaiting_input'",
        )
        .bind(&message)
        .bind(now)
        .bind(parent_id)
        .execute(&mut **tx)
        .await?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::workflows::runs::NewRun;

    /// A store in a fresh SQLite file with one workflow version, and a run of it queued.
    async fn queued_run() -> (Store, std::path::PathBuf, String) {
        let path =
            std::env::temp_dir().join(format!("canopy-progress-{}.sqlite", uuid::Uuid::new_v4()));
        let store = Store::open(&format!("sqlite://{}?mode=rwc", path.display()), "p", "e")
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO workflows (id, project, environment, name, collection_name, active, \
             latest_version, source, created_at, updated_at) \
             VALUES ('w', 'p', 'e', 'w', 'orders', 1, 1, 'api', 0, 0)",
        )
        .execute(store.pool())
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO workflow_versions (id, workflow_id, version, definition, \
             definition_hash, created_at) VALUES ('v', 'w', 1, '{}', 'h', 0)",
        )
        .execute(store.pool())
        .await
        .unwrap();
        let queued = store
            .queue_run(&NewRun::new(
                "w",
                "v",
                "orders",
                "1",
                TriggerKind::Manual,
                1,
            ))
            .await
            .unwrap();
        let crate::workflows::runs::Queued::Created(id) = queued else {
            panic!("not queued: {queued:?}");
        };
        (store, path, id)
    }

    fn step(run: &str, index: i64, key: &str) -> StepRow {
        StepRow::pending(
            run,
            &NewStep {
                index,
                key,
                kind: "get-data",
                mode: "automatic",
                original_step_index: None,
                input: Json::Null,
            },
        )
    }

    fn finished(mut row: StepRow, output: Json, written: bool) -> Finished {
        row.status = StepStatus::Succeeded;
        row.output = output;
        row.actor_user_id = Some(1);
        row.finished_at = Some(now_ms());
        Finished { row, written }
    }

    #[tokio::test]
    async fn a_claim_reads_the_due_index_whatever_the_history() {
        let (store, path, _) = queued_run().await;
        // `EXPLAIN QUERY PLAN` answers (id, parent, notused, detail) rows.
        let plan: Vec<String> = sqlx::query(&format!(
            "EXPLAIN QUERY PLAN {}",
            claim_sql(Dialect::Sqlite)
        ))
        .bind("w1")
        .bind(1_i64)
        .bind(1_i64)
        .bind("p")
        .bind("e")
        .fetch_all(store.pool())
        .await
        .unwrap()
        .iter()
        .map(|row| row.try_get::<String, _>(3).unwrap())
        .collect();
        let plan = plan.join("\n");
        assert!(plan.contains("workflow_runs_due"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[tokio::test]
    async fn progress_made_in_memory_is_written_in_one_go_and_only_by_the_runs_holder() {
        let (store, path, id) = queued_run().await;
        let run = store
            .claim_run("w1", now_ms() + 60_000)
            .await
            .unwrap()
            .unwrap();
        // Two steps finished in memory (never written) and a third current one, in one write.
        let first = [
            finished(step(&id, 0, "a"), json!({"n": 1}), false),
            finished(step(&id, 1, "b"), json!({"n": 2}), false),
        ];
        let current = step(&id, 2, "c");
        let context = json!({"a": {"n": 1}, "b": {"n": 2}});
        let progress = Progress {
            finished: &first,
            context: &context,
            current_index: Some(2),
            current: Some(&current),
        };
        // Another worker's write changes nothing: the run is not its own.
        assert!(!store.record_progress(&id, "w2", &progress).await.unwrap());
        assert!(store.workflow_run_steps(&id).await.unwrap().is_empty());
        assert!(store.record_progress(&id, "w1", &progress).await.unwrap());
        let rows = store.workflow_run_steps(&id).await.unwrap();
        let seen: Vec<_> = rows.iter().map(|r| (r.key.as_str(), r.status)).collect();
        assert_eq!(
            seen,
            [
                ("a", StepStatus::Succeeded),
                ("b", StepStatus::Succeeded),
                ("c", StepStatus::Pending)
            ]
        );
        assert_eq!(rows[1].output, json!({"n": 2}));
        assert_eq!(rows[1].actor_user_id, Some(1));
        assert!(rows[0].finished_at.is_some() && rows[2].finished_at.is_none());
        let stored = store.workflow_run(&id).await.unwrap().unwrap();
        assert_eq!(stored.context, context);
        assert_eq!(stored.current_step_index, Some(2));

        // The current step (written) and a fourth (not) finish, and the run ends, in one write.
        let last = [
            finished(current, json!({"n": 3}), true),
            finished(step(&id, 3, "d"), json!({}), false),
        ];
        let context = json!({"a": {"n": 1}, "b": {"n": 2}, "c": {"n": 3}, "d": {}});
        let mut ended = run.clone();
        ended.current_step_index = Some(3);
        let progress = Progress {
            finished: &last,
            context: &context,
            current_index: Some(3),
            current: None,
        };
        // Another worker's end writes nothing, neither the run nor the steps.
        let (held, _) = store
            .end_run(&ended, "w2", &progress, RunState::Succeeded, None)
            .await
            .unwrap();
        assert!(!held);
        assert_eq!(store.workflow_run_steps(&id).await.unwrap().len(), 3);
        let stored = store.workflow_run(&id).await.unwrap().unwrap();
        assert_eq!(stored.state, RunState::Running);
        assert_eq!(stored.current_step_index, Some(2));
        let (held, parent) = store
            .end_run(&ended, "w1", &progress, RunState::Succeeded, None)
            .await
            .unwrap();
        assert!(held);
        assert_eq!(parent, None);
        let rows = store.workflow_run_steps(&id).await.unwrap();
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.status == StepStatus::Succeeded));
        assert_eq!(rows[2].output, json!({"n": 3}));
        let stored = store.workflow_run(&id).await.unwrap().unwrap();
        assert_eq!(stored.state, RunState::Succeeded);
        assert_eq!(stored.context, context);
        assert_eq!(stored.current_step_index, Some(3));
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
