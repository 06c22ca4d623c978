//! What people do to runs (issue 13 §3, §5): abort one, resume one (take it over: it then acts
//! as them), complete the step it waits on with values, revise a finished step (later steps are
//! cancelled and it runs again at a new index). Also how an approval's decision resumes the run
//! that filed it, for `http::approvals`.
//!
//! Who may: the run's user, whoever started it, its assignee (the user, or a member of the team
//! it was escalated to), and admins. Each change is one transaction conditioned on the state it
//! expects (a run waiting for this reason, on this step), so two people acting at once get one
//! success and one conflict; each leaves its activity log entry. Runs that move on are queued
//! and the engine is woken.

use serde_json::{Map, Value as Json, json};
use sqlx::{Any, Transaction};

use super::store::{RUN_COLUMNS, Run, StepRow, StepStatus, WaitingReason, run_from_row, touch};
use super::{Wakeup, load_definition};
use crate::datasource::PermissionLevel;
use crate::platform::activity::{Action, Actor, Entry, Origin};
use crate::platform::store::now_ms;
use crate::platform::{ActivityLog, Store, User};
use crate::workflows::definition::{Kind, Step};
use crate::workflows::runs::RunState;
use crate::workflows::{Error, Result};

/// A person's answer to the step a run waits on (`POST …/steps/{index}/complete`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    /// A guidance step's free-text answer.
    pub answer: Option<String>,
    /// A decision's option (its name), or a plugin step's next step (a step key).
    pub option: Option<String>,
    /// Form values: what an update or an action runs with, or what a step done by hand
    /// produced (kept in the context).
    pub values: Map<String, Json>,
    /// A `confirm` step: `true` runs it, `false` skips it. A step whose write is uncertain:
    /// `true` says it was done.
    pub confirmation: Option<bool>,
}

/// Run control as one user of the store.
pub struct Controller<'a> {
    pub store: &'a Store,
    pub wakeup: &'a Wakeup,
    pub activity: &'a ActivityLog,
    /// Who acts.
    pub user: &'a User,
    /// The application token they present, if any (kept on the activity entries).
    pub token_id: Option<&'a str>,
    pub origin: Origin,
}

const ONGOING: &str = "('queued', 'running', 'awaiting_input')";

/// Whether `user` may control `run`: its user, who started it, its assignee, or an admin.
pub fn may_control(user: &User, run: &Run) -> bool {
    user.permission_level == PermissionLevel::Admin
        || run.user_id == user.id
        || run.started_by_user_id == user.id
        || run.assignee_user_id == Some(user.id)
        || run
            .assignee_team
            .as_ref()
            .is_some_and(|team| user.teams.iter().any(|t| &t.name == team))
}

fn conflict(message: impl Into<String>) -> Error {
    Error::Conflict(message.into())
}

impl Controller<'_> {
    /// The run, if the user may control it (else `Forbidden`; `NotFound` when it does not exist).
    async fn run(&self, run_id: &str) -> Result<Run> {
        let run = self
            .store
            .workflow_run(run_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("workflow run {run_id}")))?;
        if !may_control(self.user, &run) {
            return Err(Error::Forbidden(
                "only the run's user, its assignee or an admin may change this run".to_owned(),
            ));
        }
        Ok(run)
    }

    fn waiting(run: &Run) -> Result<WaitingReason> {
        match (run.state, run.waiting_reason) {
            (RunState::AwaitingInput, Some(reason)) => Ok(reason),
            (state, _) => Err(conflict(format!(
                "the run is {}, not waiting for a person",
                state.as_str()
            ))),
        }
    }

    fn log(&self, run: &Run, action: Action, what: String) {
        let mut entry = Entry::new(action, Actor::of_user(self.user), self.origin)
            .with_collection(run.collection_name.clone())
            .with_records([run.record_id.clone()])
            .with_label(what);
        if let Some(token) = self.token_id {
            entry = entry.with_token(token);
        }
        self.activity.record(entry);
    }

    async fn reread(&self, run_id: &str) -> Result<Run> {
        self.store
            .workflow_run(run_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("workflow run {run_id}")))
    }

    /// Aborts an ongoing run (`cancelled`), its sub-workflows' runs with it; a parent waiting
    /// for it then waits for a person.
    pub async fn abort(&self, run_id: &str) -> Result<Run> {
        let run = self.run(run_id).await?;
        if !run.state.ongoing() {
            return Err(conflict(format!(
                "the run is already {}",
                run.state.as_str()
            )));
        }
        let now = now_ms();
        let message = format!("aborted by {}", self.user.email);
        let mut tx = self.store.pool().begin().await?;
        if !cancel(&mut tx, &run.id, &message, now).await? {
            tx.rollback().await?;
            return Err(conflict("the run ended meanwhile"));
        }
        // Its sub-workflows' runs, level by level.
        let mut parents = vec![run.id.clone()];
        while let Some(parent) = parents.pop() {
            let children: Vec<String> = sqlx::query_scalar(&format!(
                "SELECT id FROM workflow_runs WHERE parent_run_id = $1 AND state IN {ONGOING}"
            ))
            .bind(&parent)
            .fetch_all(&mut *tx)
            .await?;
            for child in children {
                cancel(&mut tx, &child, &message, now).await?;
                parents.push(child);
            }
        }
        super::store::wake_parent(&mut tx, &run, RunState::Cancelled, now).await?;
        tx.commit().await?;
        self.log(&run, Action::AbortWorkflow, format!("run {}", run.id));
        tracing::info!(run = run.id, user = self.user.id, "workflow run aborted");
        self.reread(run_id).await
    }

    /// Takes the run over: it acts as this user from now on. A run escalated goes on (its
    /// escalation step is done); a run whose step failed runs that step again, unless it wrote
    /// (then it must be completed or revised); a run waiting for values keeps waiting, now for
    /// this user.
    pub async fn resume(&self, run_id: &str) -> Result<Run> {
        let run = self.run(run_id).await?;
        let reason = Self::waiting(&run)?;
        let index = run.current_step_index.unwrap_or_default();
        let step = self.store.workflow_run_step(&run.id, index).await?;
        let now = now_ms();
        let mut queued = false;
        let mut tx = self.store.pool().begin().await?;
        touch(&mut tx, &run.id).await?;
        match reason {
            WaitingReason::Approval => {
                return Err(conflict(
                    "the run waits for an approval request's decision: resuming it would not \
                     change that",
                ));
            }
            WaitingReason::SubWorkflow => {
                return Err(conflict(
                    "the run waits for its sub-workflow's run to end (abort that one to stop \
                     waiting)",
                ));
            }
            WaitingReason::Uncertain => {
                return Err(conflict(
                    "the step may have written: complete it if it was done, or revise it to \
                     run it again",
                ));
            }
            WaitingReason::Escalation => {
                if let Some(step) = &step {
                    let output = json!({"resumedBy": self.user.id});
                    step_done(&mut tx, step, &output, None, self.user.id, now).await?;
                    set_context(&mut tx, &run, &step.key, output).await?;
                }
                queued = true;
            }
            WaitingReason::StepFailed => {
                if let Some(step) = step.as_ref().filter(|s| s.phase.is_none()) {
                    sqlx::query(
                        "UPDATE workflow_run_steps SET status = 'pending', attempt = 0, \
                         error_message = NULL, finished_at = NULL \
                         WHERE run_id = $1 AND step_index = $2",
                    )
                    .bind(&run.id)
                    .bind(step.index)
                    .execute(&mut *tx)
                    .await?;
                    queued = true;
                }
            }
            WaitingReason::UserInput | WaitingReason::Confirmation => {}
        }
        let changed = sqlx::query(
            "UPDATE workflow_runs SET user_id = $1, updated_at = $2, \
             state = CASE WHEN $3 = 1 THEN 'queued' ELSE state END, \
             waiting_reason = CASE WHEN $3 = 1 THEN NULL ELSE waiting_reason END, \
             error_message = CASE WHEN $3 = 1 THEN NULL ELSE error_message END, \
             assignee_user_id = CASE WHEN $3 = 1 THEN NULL ELSE assignee_user_id END, \
             assignee_team = CASE WHEN $3 = 1 THEN NULL ELSE assignee_team END, \
             available_at = $2, \
             started_by_user_id = COALESCE(started_by_user_id, user_id) \
             WHERE id = $4 AND state = 'awaiting_input' AND waiting_reason = $5",
        )
        .bind(self.user.id)
        .bind(now)
        .bind(i64::from(queued))
        .bind(&run.id)
        .bind(reason.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed != 1 {
            tx.rollback().await?;
            return Err(conflict("the run changed meanwhile"));
        }
        tx.commit().await?;
        self.log(&run, Action::ResumeWorkflow, format!("run {}", run.id));
        if queued {
            self.wakeup.notify();
        }
        self.reread(run_id).await
    }

    /// Completes the step the run waits on with a person's answer. A step waiting for input or
    /// a confirmation runs with it; a step escalated, failed, or whose write is uncertain is
    /// recorded as done by hand (its values become its output).
    pub async fn complete(&self, run_id: &str, index: i64, completion: &Completion) -> Result<Run> {
        let run = self.run(run_id).await?;
        let reason = Self::waiting(&run)?;
        if run.current_step_index != Some(index) {
            return Err(conflict(format!(
                "the run waits on step {}, not on step {index}",
                run.current_step_index.unwrap_or_default()
            )));
        }
        let row = self
            .store
            .workflow_run_step(&run.id, index)
            .await?
            .ok_or_else(|| Error::NotFound(format!("step {index} of run {run_id}")))?;
        let loaded = load_definition(self.store, &run.version_id).await?;
        let step = loaded
            .definition
            .steps
            .iter()
            .find(|s| s.key == row.key)
            .ok_or_else(|| Error::NotFound(format!("step {:?} in the definition", row.key)))?;
        check_completion(step, &loaded.definition.steps, reason, completion)?;
        let now = now_ms();
        let mut tx = self.store.pool().begin().await?;
        touch(&mut tx, &run.id).await?;
        match reason {
            WaitingReason::Approval | WaitingReason::SubWorkflow => {
                return Err(conflict(format!(
                    "the step waits for {}, not for a person's values",
                    if reason == WaitingReason::Approval {
                        "an approval request's decision"
                    } else {
                        "its sub-workflow's run"
                    }
                )));
            }
            WaitingReason::UserInput | WaitingReason::Confirmation => {
                let input = json!({
                    "completed": true,
                    "answer": completion.answer,
                    "option": completion.option,
                    "values": completion.values,
                    "confirmation": completion.confirmation,
                    "by": self.user.id,
                });
                sqlx::query(
                    "UPDATE workflow_run_steps SET input = $1, status = 'pending', \
                     actor_user_id = $2 WHERE run_id = $3 AND step_index = $4",
                )
                .bind(input.to_string())
                .bind(self.user.id)
                .bind(&run.id)
                .bind(index)
                .execute(&mut *tx)
                .await?;
            }
            WaitingReason::Escalation | WaitingReason::StepFailed | WaitingReason::Uncertain => {
                let mut output = completion.values.clone();
                if let Some(answer) = &completion.answer {
                    output.insert("answer".to_owned(), json!(answer));
                }
                if let Some(option) = &completion.option {
                    output.insert("option".to_owned(), json!(option));
                }
                output.insert("doneBy".to_owned(), json!(self.user.id));
                let output = Json::Object(output);
                step_done(
                    &mut tx,
                    &row,
                    &output,
                    completion.option.as_deref(),
                    self.user.id,
                    now,
                )
                .await?;
                set_context(&mut tx, &run, &row.key, output).await?;
            }
        }
        let changed = sqlx::query(
            "UPDATE workflow_runs SET state = 'queued', waiting_reason = NULL, \
             error_message = NULL, assignee_user_id = NULL, assignee_team = NULL, \
             available_at = $1, updated_at = $1 \
             WHERE id = $2 AND state = 'awaiting_input' AND waiting_reason = $3 \
             AND current_step_index = $4",
        )
        .bind(now)
        .bind(&run.id)
        .bind(reason.as_str())
        .bind(index)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed != 1 {
            tx.rollback().await?;
            return Err(conflict("the run changed meanwhile"));
        }
        tx.commit().await?;
        let action = if completion.option.is_some() {
            Action::SelectWorkflowOption
        } else {
            Action::CompleteWorkflowStep
        };
        self.log(&run, action, format!("run {} step {}", run.id, row.key));
        self.wakeup.notify();
        self.reread(run_id).await
    }

    /// Revises a step of a waiting run: it is marked revised, every later step cancelled, and it
    /// runs again at a new index (`original_step_index` pointing back), its later steps after it.
    /// The context loses the outputs of the steps cancelled.
    pub async fn revise(&self, run_id: &str, index: i64) -> Result<Run> {
        let run = self.run(run_id).await?;
        Self::waiting(&run)?;
        let steps = self.store.workflow_run_steps(&run.id).await?;
        let row = steps
            .iter()
            .find(|s| s.index == index)
            .ok_or_else(|| Error::NotFound(format!("step {index} of run {run_id}")))?;
        if row.revised || row.status == StepStatus::Cancelled {
            return Err(conflict(format!(
                "step {index} was revised or cancelled already: revise its newer run"
            )));
        }
        let loaded = load_definition(self.store, &run.version_id).await?;
        let step = loaded
            .definition
            .steps
            .iter()
            .find(|s| s.key == row.key)
            .ok_or_else(|| Error::NotFound(format!("step {:?} in the definition", row.key)))?;
        let next = steps.iter().map(|s| s.index).max().unwrap_or(index) + 1;
        let mut context = run.context.clone();
        if let Some(map) = context.as_object_mut() {
            for later in steps.iter().filter(|s| s.index >= index && !s.revised) {
                map.remove(&later.key);
            }
        }
        let now = now_ms();
        let mut tx = self.store.pool().begin().await?;
        touch(&mut tx, &run.id).await?;
        sqlx::query(
            "UPDATE workflow_run_steps SET revised = 1 WHERE run_id = $1 AND step_index = $2",
        )
        .bind(&run.id)
        .bind(index)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE workflow_run_steps SET status = 'cancelled', finished_at = $1 \
             WHERE run_id = $2 AND step_index > $3 AND revised = 0 AND status <> 'cancelled'",
        )
        .bind(now)
        .bind(&run.id)
        .bind(index)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO workflow_run_steps (run_id, step_index, step_key, step_type, mode, \
             status, revised, original_step_index, attempt, started_at) \
             VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, 0, $7)",
        )
        .bind(&run.id)
        .bind(next)
        .bind(&step.key)
        .bind(step.kind.name())
        .bind(step.mode().as_str())
        .bind(index)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let changed = sqlx::query(
            "UPDATE workflow_runs SET state = 'queued', waiting_reason = NULL, \
             error_message = NULL, current_step_index = $1, context = $2, available_at = $3, \
             updated_at = $3 WHERE id = $4 AND state = 'awaiting_input'",
        )
        .bind(next)
        .bind(context.to_string())
        .bind(now)
        .bind(&run.id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed != 1 {
            tx.rollback().await?;
            return Err(conflict("the run changed meanwhile"));
        }
        tx.commit().await?;
        self.log(
            &run,
            Action::ReviseWorkflowStep,
            format!("run {} step {}", run.id, row.key),
        );
        self.wakeup.notify();
        self.reread(run_id).await
    }
}

/// Checks a person's answer against the step and why it waits.
fn check_completion(
    step: &Step,
    steps: &[Step],
    reason: WaitingReason,
    completion: &Completion,
) -> Result<()> {
    let invalid = |message: String| Err(Error::Invalid(message));
    if reason == WaitingReason::Confirmation && completion.confirmation.is_none() {
        return invalid("confirmation: true (do it) or false (skip it) is required".to_owned());
    }
    if reason == WaitingReason::Uncertain && completion.confirmation != Some(true) {
        return invalid(
            "confirmation: true is required (the step was done); to run it again, revise it"
                .to_owned(),
        );
    }
    match &step.kind {
        Kind::Guidance { answer: true, .. }
            if reason == WaitingReason::UserInput
                && completion
                    .answer
                    .as_deref()
                    .is_none_or(|a| a.trim().is_empty()) =>
        {
            invalid(format!(
                "answer: the step {:?} asks for an answer",
                step.key
            ))
        }
        Kind::Decision { options }
            if matches!(reason, WaitingReason::UserInput | WaitingReason::StepFailed) =>
        {
            match &completion.option {
                Some(option) if options.iter().any(|o| &o.name == option) => Ok(()),
                Some(option) => invalid(format!(
                    "option: {option:?} is not one of {}",
                    options
                        .iter()
                        .map(|o| format!("{:?}", o.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                None => invalid(format!("option: the decision {:?} needs one", step.key)),
            }
        }
        Kind::Plugin { .. } => match &completion.option {
            Some(option) if steps.iter().all(|s| &s.key != option) => {
                invalid(format!("option: {option:?} is no step of the workflow"))
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Marks a step done by hand (its write's marker `done`).
async fn step_done(
    tx: &mut Transaction<'_, Any>,
    step: &StepRow,
    output: &Json,
    option: Option<&str>,
    user_id: i64,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "UPDATE workflow_run_steps SET status = 'succeeded', output = $1, \
         selected_option = COALESCE($2, selected_option), actor_user_id = $3, \
         error_message = NULL, finished_at = $4, \
         phase = CASE WHEN phase IS NULL THEN NULL ELSE 'done' END \
         WHERE run_id = $5 AND step_index = $6",
    )
    .bind(output.to_string())
    .bind(option)
    .bind(user_id)
    .bind(now)
    .bind(&step.run_id)
    .bind(step.index)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Puts a step's output into the run's context.
async fn set_context(
    tx: &mut Transaction<'_, Any>,
    run: &Run,
    key: &str,
    output: Json,
) -> Result<()> {
    let mut context = run.context.clone();
    if let Some(map) = context.as_object_mut() {
        map.insert(key.to_owned(), output);
    }
    sqlx::query("UPDATE workflow_runs SET context = $1 WHERE id = $2")
        .bind(context.to_string())
        .bind(&run.id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Cancels an ongoing run and its unfinished steps; `false` when it was not ongoing.
async fn cancel(
    tx: &mut Transaction<'_, Any>,
    run_id: &str,
    message: &str,
    now: i64,
) -> Result<bool> {
    let changed = sqlx::query(&format!(
        "UPDATE workflow_runs SET state = 'cancelled', waiting_reason = NULL, locked_by = NULL, \
         lease_expires_at = NULL, finished_at = $1, updated_at = $1, error_code = 'aborted', \
         error_message = $2 WHERE id = $3 AND state IN {ONGOING}"
    ))
    .bind(now)
    .bind(message)
    .bind(run_id)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if changed == 1 {
        sqlx::query(
            "UPDATE workflow_run_steps SET status = 'cancelled', finished_at = $1 \
             WHERE run_id = $2 AND status IN ('pending', 'running', 'awaiting_input')",
        )
        .bind(now)
        .bind(run_id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(changed == 1)
}

/// [`approval_decided`] where a person decided (the `/v1` route, the console's inbox): the
/// decision stands whatever happens here, so a failure is logged, and the run keeps waiting
/// visibly.
pub async fn resume_after_decision(
    store: &Store,
    wakeup: &Wakeup,
    approval_id: i64,
    approved: bool,
    outcome: Option<&Json>,
) {
    if let Err(error) = approval_decided(store, wakeup, approval_id, approved, outcome).await {
        tracing::error!(
            approval = approval_id,
            %error,
            "resuming the workflow run of an approval failed"
        );
    }
}

/// An approval request was decided: the run whose step filed it resumes. Approved, the step
/// succeeded with what running the action answered (the approver ran it); rejected, or the
/// action failed when approved, the step failed and the run waits for a person. Returns the
/// run, when a step waited for this request.
pub async fn approval_decided(
    store: &Store,
    wakeup: &Wakeup,
    approval_id: i64,
    approved: bool,
    outcome: Option<&Json>,
) -> Result<Option<String>> {
    let found: Option<(String, i64)> = sqlx::query_as(
        "SELECT run_id, step_index FROM workflow_run_steps \
         WHERE approval_id = $1 AND status = 'awaiting_input'",
    )
    .bind(approval_id)
    .fetch_optional(store.pool())
    .await?;
    let Some((run_id, index)) = found else {
        return Ok(None);
    };
    let mut tx = store.pool().begin().await?;
    // Written first (the run's lock), then read again under it: a concurrent change wins or
    // waits, never interleaves.
    touch(&mut tx, &run_id).await?;
    let row = sqlx::query(&format!(
        "SELECT {RUN_COLUMNS} FROM workflow_runs WHERE id = $1 AND state = 'awaiting_input' \
         AND waiting_reason = 'approval' AND current_step_index = $2"
    ))
    .bind(&run_id)
    .bind(index)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(run) = row.as_ref().map(run_from_row).transpose()? else {
        return Ok(None);
    };
    let key: String = sqlx::query_scalar(
        "SELECT step_key FROM workflow_run_steps WHERE run_id = $1 AND step_index = $2",
    )
    .bind(&run_id)
    .bind(index)
    .fetch_one(&mut *tx)
    .await?;
    let now = now_ms();
    let outcome = outcome.cloned().unwrap_or(Json::Null);
    let failed_action = outcome.get("error").is_some()
        || outcome
            .get("status")
            .and_then(Json::as_u64)
            .is_some_and(|status| status >= 400);
    let output =
        json!({"approvalRequestId": approval_id, "approved": approved, "outcome": outcome});
    if approved && !failed_action {
        sqlx::query(
            "UPDATE workflow_run_steps SET status = 'succeeded', output = $1, finished_at = $2, \
             error_message = NULL WHERE run_id = $3 AND step_index = $4",
        )
        .bind(output.to_string())
        .bind(now)
        .bind(&run_id)
        .bind(index)
        .execute(&mut *tx)
        .await?;
        let mut context = run.context.clone();
        if let Some(map) = context.as_object_mut() {
            map.insert(key, output);
        }
        sqlx::query(
            "UPDATE workflow_runs SET state = 'queued', waiting_reason = NULL, context = $1, \
             available_at = $2, updated_at = $2 WHERE id = $3",
        )
        .bind(context.to_string())
        .bind(now)
        .bind(&run_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        wakeup.notify();
    } else {
        let message = if approved {
            format!("approval request {approval_id} was approved, but the action failed")
        } else {
            format!("approval request {approval_id} was rejected")
        };
        sqlx::query(
            "UPDATE workflow_run_steps SET status = 'failed', output = $1, finished_at = $2, \
             error_message = $3 WHERE run_id = $4 AND step_index = $5",
        )
        .bind(output.to_string())
        .bind(now)
        .bind(&message)
        .bind(&run_id)
        .bind(index)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE workflow_runs SET waiting_reason = 'step_failed', error_message = $1, \
             updated_at = $2 WHERE id = $3",
        )
        .bind(&message)
        .bind(now)
        .bind(&run_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    tracing::info!(
        run = run_id,
        approval = approval_id,
        approved,
        "workflow run's approval decided"
    );
    Ok(Some(run_id))
}
