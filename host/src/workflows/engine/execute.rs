//! Driving one claimed run: step after step until it waits for a person, ends, is retried
//! later, or the worker loses it (aborted, reaped) or stops (graceful shutdown, between two
//! steps). The lease is renewed in the background meanwhile.
//!
//! A step's row is created before it runs (`pending`), then finished with its output merged
//! into the run's context in one transaction, so a crash at any point leaves the run where a
//! restart picks it up: a finished step is never run again, and a step that was writing (marker
//! `executing`) waits for a person instead of running twice. Steps that only read and steer
//! ([`Step::only_reads`]) are the exception: a run of them goes on in memory and is written in
//! one transaction ([`Unwritten`]), since running them again after a crash changes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use tokio::sync::watch;

use super::store::{
    DONE, EXECUTING, Finished, NewStep, Progress, Run, StepRow, StepStatus, StepWait,
    UNCERTAIN_MESSAGE, WaitingReason,
};
use super::{Loaded, MAX_ATTEMPTS, MAX_STEPS, Shared, millis};
use crate::auth::SessionClaims;
use crate::datasource::Caller;
use crate::platform::activity::{Action, Status};
use crate::platform::store::now_ms;
use crate::platform::{Error as StoreError, Store};
use crate::workflows::definition::{Definition, EndOutcome, Kind, Step};
use crate::workflows::runs::RunState;
use crate::workflows::steps::{self, Failure, Outcome, StepCtx, StepError, StepResult};

/// What the driver does next.
enum Flow {
    /// The run moved (a step started or finished): go on.
    Next,
    /// The run waits, ended, was retried later, or is no longer this worker's.
    Stop,
}

/// Drives `run` (claimed by `worker`) until it stops; store failures end the drive (the lease
/// then expires, and the reaper hands the run on).
pub(super) async fn drive(
    shared: &Arc<Shared>,
    worker: &str,
    run: Run,
    shutdown: &watch::Receiver<bool>,
) {
    let lost = Arc::new(AtomicBool::new(false));
    let renewal = renew(shared, worker, &run.id, &lost);
    let mut driver = Driver {
        shared,
        worker,
        run,
        caller: None,
        current: None,
        last_index: None,
        read: false,
        unwritten: Unwritten::default(),
    };
    loop {
        if lost.load(Ordering::Acquire) {
            tracing::info!(
                run = driver.run.id,
                "workflow run no longer held (aborted or reaped)"
            );
            break;
        }
        match driver.advance().await {
            Ok(Flow::Next) => {
                if *shutdown.borrow() {
                    // Between two steps: the run goes back to the queue for whoever is next,
                    // with what it did so far.
                    let released = match driver.flush().await {
                        Ok(true) => shared.store.release_run(&driver.run.id, worker).await,
                        Ok(false) => Ok(false),
                        Err(error) => Err(error),
                    };
                    if let Err(error) = released {
                        tracing::warn!(run = driver.run.id, %error, "releasing a run failed");
                    }
                    break;
                }
            }
            Ok(Flow::Stop) => break,
            Err(error) => {
                tracing::warn!(
                    run = driver.run.id,
                    %error,
                    "Canopy's store failed during a workflow run; its lease will expire and it \
                     will be taken up again"
                );
                break;
            }
        }
    }
    renewal.abort();
}

/// The run's heartbeat: renews the lease every [`EngineSettings::heartbeat`] until aborted;
/// flags `lost` when the run is no longer held (aborted by a person, or taken over after the
/// process stalled for a whole lease).
fn renew(
    shared: &Arc<Shared>,
    worker: &str,
    run_id: &str,
    lost: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let shared = Arc::clone(shared);
    let worker = worker.to_owned();
    let run_id = run_id.to_owned();
    let lost = Arc::clone(lost);
    tokio::spawn(async move {
        let lease = shared.settings.lease;
        let beat = shared.settings.heartbeat();
        loop {
            tokio::time::sleep(beat).await;
            let until = now_ms() + millis(lease);
            match shared.store.renew_lease(&run_id, &worker, until).await {
                Ok(true) => {}
                Ok(false) => {
                    lost.store(true, Ordering::Release);
                    return;
                }
                Err(error) => tracing::warn!(run = run_id, %error, "renewing a lease failed"),
            }
        }
    })
}

/// The claims of a stored user in their first team, as a workflow run acts: what their session
/// token would say. A removed or disabled user, or one without a team, cannot act.
pub async fn acting_caller(store: &Store, user_id: i64) -> Result<Caller, StepError> {
    let user = store
        .user(user_id)
        .await?
        .ok_or_else(|| StepError::refused(format!("the run's user {user_id} no longer exists")))?;
    if user.disabled {
        return Err(StepError::refused(format!(
            "the run's user {} is disabled",
            user.email
        )));
    }
    let team = user.teams.first().ok_or_else(|| {
        StepError::refused(format!(
            "the run's user {} is in no team, so has no rights",
            user.email
        ))
    })?;
    // Read first: `rendering_id` creates the rendering when missing, a write each run would
    // pay for nothing.
    let known: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM renderings WHERE project = $1 AND environment = $2 AND team_id = $3",
    )
    .bind(store.project())
    .bind(store.environment())
    .bind(team.id)
    .fetch_optional(store.pool())
    .await
    .map_err(StoreError::from)?;
    let rendering = match known {
        Some(id) => id,
        None => store.rendering_id(team.id).await?,
    };
    Ok(SessionClaims::for_user(&user, team, rendering)
        .into_caller(chrono_tz::UTC, uuid::Uuid::now_v7()))
}

struct Driver<'a> {
    shared: &'a Arc<Shared>,
    worker: &'a str,
    run: Run,
    /// The run's user, read once per claim (its rights are checked at each step).
    caller: Option<Caller>,
    /// The current step's row and the highest step index, read at the claim and then kept up
    /// to date here: nobody else writes a run's steps while a worker holds it.
    current: Option<StepRow>,
    last_index: Option<i64>,
    read: bool,
    unwritten: Unwritten,
}

/// Steps finished in memory since the run's last write, and whether the current step's row is
/// written. A run of steps that only read and steer ([`Step::only_reads`]) goes on without
/// writing; the next write ([`Driver::flush`], or the run's end) records them all in one
/// transaction. It comes at the first step that does something else, when the run waits, fails
/// or ends, at a graceful stop, and at the latest after [`BATCH_STEPS`] steps or [`BATCH_AGE`],
/// so a long loop of reads still shows its progress. A crash meanwhile loses reads only: the
/// run makes them again from its last written step. Issue 23: a commit per step, in a store
/// with one writer, held the engine to 110–260 short runs a second.
#[derive(Default)]
struct Unwritten {
    finished: Vec<Finished>,
    /// The current step's row is not written yet.
    current: bool,
    /// When the oldest unwritten change was made.
    since: Option<Instant>,
}

/// Most steps kept unwritten, and the longest time.
const BATCH_STEPS: usize = 32;
const BATCH_AGE: Duration = Duration::from_millis(250);

impl Unwritten {
    fn touched(&mut self) {
        self.since.get_or_insert_with(Instant::now);
    }

    /// Whether more may wait for the next write.
    fn may_wait(&self) -> bool {
        self.finished.len() < BATCH_STEPS && self.since.is_none_or(|s| s.elapsed() < BATCH_AGE)
    }
}

impl Driver<'_> {
    fn store(&self) -> &Store {
        &self.shared.store
    }

    async fn advance(&mut self) -> Result<Flow, StoreError> {
        let loaded = match self.shared.definition(&self.run.version_id).await {
            Ok(loaded) => loaded,
            Err(crate::workflows::Error::Store(error)) => return Err(error),
            Err(error) => {
                return self
                    .end(
                        RunState::Failed,
                        Some((Failure::Definition, error.to_string())),
                    )
                    .await;
            }
        };
        let definition = &loaded.definition;
        if !self.read {
            // A run gets its first step and its current index in one write (here, or a person's
            // revision): without a current step, it has none.
            if let Some(index) = self.run.current_step_index {
                self.current = self.store().workflow_run_step(&self.run.id, index).await?;
                self.last_index = self.store().last_step_index(&self.run.id).await?;
            }
            self.read = true;
        }
        let Some(index) = self.run.current_step_index else {
            let Some(first) = definition.steps.first() else {
                return self
                    .end(
                        RunState::Failed,
                        Some((Failure::Definition, "the workflow has no step".to_owned())),
                    )
                    .await;
            };
            return self.start(first, 0).await;
        };
        let Some(row) = self.current.clone() else {
            return self
                .end(
                    RunState::Failed,
                    Some((
                        Failure::Definition,
                        format!("the run's step {index} is missing"),
                    )),
                )
                .await;
        };
        match row.status {
            // Finished by a person (or an approval, a sub-workflow's run) while the run waited.
            StepStatus::Succeeded | StepStatus::Skipped => match self.following(definition, &row) {
                Ok(Some((step, index))) => self.start(step, index).await,
                Ok(None) => self.end(RunState::Succeeded, None).await,
                Err(message) => {
                    self.end(RunState::Failed, Some((Failure::Definition, message)))
                        .await
                }
            },
            StepStatus::Pending | StepStatus::Running | StepStatus::AwaitingInput => {
                self.execute(&loaded, row).await
            }
            StepStatus::Failed => {
                let message = row
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "the step failed".to_owned());
                self.wait(
                    &row,
                    WaitingReason::StepFailed,
                    StepWait {
                        failed: Some(message),
                        ..StepWait::default()
                    },
                )
                .await
            }
            StepStatus::Cancelled => {
                self.end(
                    RunState::Failed,
                    Some((
                        Failure::Definition,
                        "the run's current step was cancelled".to_owned(),
                    )),
                )
                .await
            }
        }
    }

    /// Adds the step at `index` and makes it current: written now, unless it only reads.
    async fn start(&mut self, step: &Step, index: i64) -> Result<Flow, StoreError> {
        self.started(&new_step(step, index));
        if step.only_reads() && self.unwritten.may_wait() {
            return Ok(Flow::Next);
        }
        Ok(if self.flush().await? {
            Flow::Next
        } else {
            Flow::Stop
        })
    }

    /// The step just added is the run's current one; its row is not written yet.
    fn started(&mut self, new: &NewStep<'_>) {
        self.current = Some(StepRow::pending(&self.run.id, new));
        self.last_index = Some(new.index);
        self.run.current_step_index = Some(new.index);
        self.unwritten.current = true;
        self.unwritten.touched();
    }

    /// What the next write records.
    fn progress(&self) -> Progress<'_> {
        Progress {
            finished: &self.unwritten.finished,
            context: &self.run.context,
            current_index: self.run.current_step_index,
            current: self.current.as_ref().filter(|_| self.unwritten.current),
        }
    }

    /// Writes what was done in memory ([`Unwritten`]); `false` when the run is no longer held.
    async fn flush(&mut self) -> Result<bool, StoreError> {
        let progress = self.progress();
        if progress.is_empty() {
            return Ok(true);
        }
        let held = self
            .store()
            .record_progress(&self.run.id, self.worker, &progress)
            .await?;
        self.unwritten = Unwritten::default();
        Ok(held)
    }

    /// The step after a finished one and the index it takes; `None` ends the run; `Err` when
    /// the definition leads nowhere or the run made too many steps.
    fn following<'d>(
        &self,
        definition: &'d Definition,
        row: &StepRow,
    ) -> Result<Option<(&'d Step, i64)>, String> {
        let Some(key) = next_key(definition, row)? else {
            return Ok(None);
        };
        let index = self.last_index.map_or(0, |last| last + 1);
        if index >= MAX_STEPS {
            return Err(format!(
                "the run made {MAX_STEPS} steps: a go-to loop never ends"
            ));
        }
        // `next_key` checked that the step exists.
        let step = definition
            .steps
            .iter()
            .find(|s| s.key == key)
            .ok_or_else(|| format!("no step {key:?}"))?;
        Ok(Some((step, index)))
    }

    /// Runs the current step.
    async fn execute(&mut self, loaded: &Arc<Loaded>, row: StepRow) -> Result<Flow, StoreError> {
        let Some(step) = loaded.definition.steps.iter().find(|s| s.key == row.key) else {
            return self
                .end(
                    RunState::Failed,
                    Some((
                        Failure::Definition,
                        format!("the workflow has no step {:?}", row.key),
                    )),
                )
                .await;
        };
        match row.phase.as_deref() {
            // Its worker died while it wrote: it may have written. Never again by itself.
            Some(EXECUTING) => return self.uncertain(&row).await,
            // Written, and its result kept: rebuilt, not run again.
            Some(DONE) => {
                let output = row.output.clone();
                let option = row.selected_option.clone();
                return self.done(loaded, step, &row, output, option, false).await;
            }
            _ => {}
        }
        let caller = match self.caller().await {
            Ok(caller) => caller,
            Err(error) => return self.failed(loaded, step, &row, error).await,
        };
        let state = self.shared.state.current();
        let ctx = StepCtx {
            state: &state,
            store: &self.shared.store,
            run: &self.run,
            row: &row,
            step,
            loaded,
            caller: &caller,
        };
        let timeout = self.shared.settings.step_timeout;
        let result = tokio::time::timeout(timeout, steps::run(&ctx)).await;
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(_elapsed) => {
                let phase = self
                    .store()
                    .workflow_run_step(&self.run.id, row.index)
                    .await?
                    .and_then(|r| r.phase);
                if phase.as_deref() == Some(EXECUTING) {
                    return self.uncertain(&row).await;
                }
                Outcome::Failed(StepError::new(
                    Failure::Transient,
                    format!("the step took longer than {}s", timeout.as_secs()),
                ))
            }
        };
        match outcome {
            Outcome::Done {
                output,
                option,
                skipped,
            } => self.done(loaded, step, &row, output, option, skipped).await,
            Outcome::Wait(reason, wait) => self.wait(&row, reason, wait).await,
            Outcome::End { outcome, message } => {
                if !self
                    .finish(step, &row, (json!({}), None, StepStatus::Succeeded), None)
                    .await?
                {
                    return Ok(Flow::Stop);
                }
                match outcome {
                    EndOutcome::Succeeded => self.end(RunState::Succeeded, None).await,
                    EndOutcome::Failed => {
                        let message =
                            message.unwrap_or_else(|| format!("ended at step {:?}", step.key));
                        self.end_as(RunState::Failed, Some(("ended", message)))
                            .await
                    }
                }
            }
            Outcome::Failed(error) => self.failed(loaded, step, &row, error).await,
        }
    }

    /// The run's user as a caller, with a fresh correlation id for this step.
    async fn caller(&mut self) -> StepResult<Caller> {
        let mut caller = match self.caller.take() {
            Some(caller) => caller,
            None => acting_caller(self.store(), self.run.user_id).await?,
        };
        caller.request_id = uuid::Uuid::now_v7();
        self.caller = Some(caller.clone());
        Ok(caller)
    }

    /// A step (`step`, its row `row`) finished: its output goes into the context, and `next`
    /// (a step and its index) becomes current. Written in one transaction with what came
    /// before, unless both only read (then with what comes next, see [`Unwritten`]); `false`
    /// when the run is no longer held.
    async fn finish(
        &mut self,
        step: &Step,
        row: &StepRow,
        (output, option, status): (Json, Option<String>, StepStatus),
        next: Option<(&Step, i64)>,
    ) -> Result<bool, StoreError> {
        if let Some(map) = self.run.context.as_object_mut() {
            map.insert(row.key.clone(), output.clone());
        }
        let mut finished = row.clone();
        finished.status = status;
        finished.output = output;
        finished.selected_option = option;
        finished.actor_user_id = Some(self.run.user_id);
        finished.error_message = None;
        finished.finished_at = Some(now_ms());
        self.unwritten.finished.push(Finished {
            row: finished,
            written: !self.unwritten.current,
        });
        self.unwritten.current = false;
        self.unwritten.touched();
        if let Some((next, index)) = next {
            self.started(&new_step(next, index));
        }
        // Without a next step, the run's end writes what is left.
        let reads_on = next.is_none_or(|(next, _)| next.only_reads());
        if step.only_reads() && reads_on && self.unwritten.may_wait() {
            return Ok(true);
        }
        self.flush().await
    }

    /// A step done: it is recorded with the next step started, or the run ends.
    async fn done(
        &mut self,
        loaded: &Loaded,
        step: &Step,
        row: &StepRow,
        output: Json,
        option: Option<String>,
        skipped: bool,
    ) -> Result<Flow, StoreError> {
        let status = if skipped {
            StepStatus::Skipped
        } else {
            StepStatus::Succeeded
        };
        let mut finished = row.clone();
        finished.status = status;
        finished.selected_option.clone_from(&option);
        let following = self.following(&loaded.definition, &finished);
        let next = following.as_ref().ok().copied().flatten();
        let held = self
            .finish(step, row, (output, option, status), next)
            .await?;
        let what = if skipped { "skipped" } else { "done" };
        self.log(loaded, step, what, Status::Completed);
        if !held {
            return Ok(Flow::Stop);
        }
        match following {
            Ok(Some(_)) => Ok(Flow::Next),
            Ok(None) => self.end(RunState::Succeeded, None).await,
            Err(message) => {
                self.end(RunState::Failed, Some((Failure::Definition, message)))
                    .await
            }
        }
    }

    async fn wait(
        &mut self,
        row: &StepRow,
        reason: WaitingReason,
        wait: StepWait,
    ) -> Result<Flow, StoreError> {
        if !self.flush().await? {
            return Ok(Flow::Stop);
        }
        let held = self
            .store()
            .wait_for_person(&self.run.id, self.worker, row.index, reason, &wait)
            .await?;
        if held {
            tracing::info!(
                run = self.run.id,
                step = row.key,
                reason = reason.as_str(),
                "workflow run waits"
            );
        }
        if reason == WaitingReason::SubWorkflow {
            // The child may already have ended while this run was still running (it could not
            // wake it then): look now.
            self.shared.wakeup.notify();
            if let Some(child) = wait
                .prepared
                .as_ref()
                .and_then(|p| p.get("runId"))
                .and_then(Json::as_str)
                && self.store().wake_parent_of(child).await?.is_some()
            {
                self.shared.wakeup.notify();
            }
        }
        Ok(Flow::Stop)
    }

    async fn uncertain(&mut self, row: &StepRow) -> Result<Flow, StoreError> {
        self.wait(
            row,
            WaitingReason::Uncertain,
            StepWait {
                prepared: None,
                ..StepWait::default()
            },
        )
        .await?;
        // The message says what a person can do.
        tracing::warn!(run = self.run.id, step = row.key, "{UNCERTAIN_MESSAGE}");
        Ok(Flow::Stop)
    }

    /// A step failed: retried later (transient, within its attempts), handed to a person, or
    /// the run fails.
    async fn failed(
        &mut self,
        loaded: &Loaded,
        step: &Step,
        row: &StepRow,
        error: StepError,
    ) -> Result<Flow, StoreError> {
        self.log(loaded, step, &format!("failed: {error}"), Status::Failed);
        if !self.flush().await? {
            return Ok(Flow::Stop);
        }
        tracing::info!(
            run = self.run.id,
            step = row.key,
            failure = error.failure.code(),
            "workflow step failed: {error}"
        );
        match error.failure {
            Failure::Transient => {
                let attempt = row.attempt + 1;
                if attempt < MAX_ATTEMPTS {
                    let delay = backoff(self.shared.settings.retry_base, attempt);
                    let held = self
                        .store()
                        .retry_later(
                            &self.run.id,
                            self.worker,
                            row.index,
                            attempt,
                            &error.message,
                            now_ms() + millis(delay),
                        )
                        .await?;
                    if held {
                        // Woken when due rather than at the next poll.
                        let wakeup = self.shared.wakeup.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(delay).await;
                            wakeup.notify();
                        });
                    }
                    Ok(Flow::Stop)
                } else if steps::can_take_over(&step.kind) {
                    let message = format!("{error} (after {MAX_ATTEMPTS} attempts)");
                    self.wait(
                        row,
                        WaitingReason::StepFailed,
                        StepWait {
                            failed: Some(message),
                            ..StepWait::default()
                        },
                    )
                    .await
                } else {
                    self.end(
                        RunState::Failed,
                        Some((
                            Failure::Transient,
                            format!("{error} (after {MAX_ATTEMPTS} attempts)"),
                        )),
                    )
                    .await
                }
            }
            Failure::RecordNotFound | Failure::Definition => {
                self.end(RunState::Failed, Some((error.failure, error.message)))
                    .await
            }
            Failure::Refused => {
                self.wait(
                    row,
                    WaitingReason::StepFailed,
                    StepWait {
                        failed: Some(error.message),
                        ..StepWait::default()
                    },
                )
                .await
            }
        }
    }

    async fn end(
        &mut self,
        state: RunState,
        error: Option<(Failure, String)>,
    ) -> Result<Flow, StoreError> {
        self.end_as(
            state,
            error.map(|(failure, message)| (failure.code(), message)),
        )
        .await
    }

    async fn end_as(
        &mut self,
        state: RunState,
        error: Option<(&str, String)>,
    ) -> Result<Flow, StoreError> {
        let (held, parent) = self
            .store()
            .end_run(
                &self.run,
                self.worker,
                &self.progress(),
                state,
                error
                    .as_ref()
                    .map(|(code, message)| (*code, message.as_str())),
            )
            .await?;
        self.unwritten = Unwritten::default();
        if !held {
            return Ok(Flow::Stop);
        }
        if parent.is_some() {
            self.shared.wakeup.notify();
        }
        match &error {
            None => tracing::info!(run = self.run.id, "workflow run succeeded"),
            Some((code, message)) => {
                tracing::info!(run = self.run.id, code, "workflow run failed: {message}");
            }
        }
        if let Ok(loaded) = self.shared.definition(&self.run.version_id).await
            && let Some(caller) = &self.caller
        {
            let status = if state == RunState::Succeeded {
                Status::Completed
            } else {
                Status::Failed
            };
            let served = self.shared.state.current();
            // The label names no run: labels are interned, and one per run grew the lookup
            // table and the writer's cache with every run. The entry names the workflow, its
            // record and the time; the run is found from those (`GET …/workflow-runs`).
            served.activity.record(steps::entry(
                &self.run,
                &loaded.workflow_name,
                caller,
                Action::CompleteWorkflow,
                &format!("run {}", state_name(status)),
                status,
            ));
        }
        Ok(Flow::Stop)
    }

    /// The activity entry of a step (a step that did nothing but steer logs nothing).
    fn log(&self, loaded: &Loaded, step: &Step, what: &str, status: Status) {
        if matches!(step.kind, Kind::GoTo { .. }) {
            return;
        }
        let Some(caller) = &self.caller else { return };
        let state = self.shared.state.current();
        state.activity.record(steps::entry(
            &self.run,
            &loaded.workflow_name,
            caller,
            steps::logged_action(&step.kind),
            &format!("step {} {what}", step.key),
            status,
        ));
    }
}

/// The row of `step` at `index`, before it runs.
fn new_step(step: &Step, index: i64) -> NewStep<'_> {
    NewStep {
        index,
        key: &step.key,
        kind: step.kind.name(),
        mode: step.mode().as_str(),
        original_step_index: None,
        input: Json::Null,
    }
}

fn state_name(status: Status) -> &'static str {
    match status {
        Status::Completed => "succeeded",
        Status::Failed => "failed",
    }
}

/// The step after a finished one: a decision's option, a go-to's target, a plugin's choice,
/// the step's `next`, else the next in the list; `None` ends the run.
fn next_key(definition: &Definition, row: &StepRow) -> Result<Option<String>, String> {
    let position = definition
        .steps
        .iter()
        .position(|s| s.key == row.key)
        .ok_or_else(|| format!("the workflow has no step {:?}", row.key))?;
    let step = &definition.steps[position];
    let following = || {
        step.next
            .clone()
            .or_else(|| definition.steps.get(position + 1).map(|s| s.key.clone()))
    };
    let next = match &step.kind {
        Kind::Decision { options } if row.status == StepStatus::Succeeded => {
            let name = row
                .selected_option
                .as_deref()
                .ok_or_else(|| format!("the decision {:?} chose no option", step.key))?;
            let option = options
                .iter()
                .find(|o| o.name == name)
                .ok_or_else(|| format!("the decision {:?} has no option {name:?}", step.key))?;
            Some(option.next.clone())
        }
        Kind::GoTo { target } => Some(target.clone()),
        Kind::End { .. } => None,
        Kind::Plugin { .. } if row.selected_option.is_some() => row.selected_option.clone(),
        _ => following(),
    };
    if let Some(key) = &next
        && !definition.steps.iter().any(|s| &s.key == key)
    {
        return Err(format!(
            "the step {:?} leads to {key:?}, which is no step of the workflow",
            step.key
        ));
    }
    Ok(next)
}

/// The delay before the `attempt`-th retry: `base` doubled per attempt, plus up to half of it
/// at random so that runs failing together do not retry together.
fn backoff(base: Duration, attempt: i64) -> Duration {
    let exponent = u32::try_from(attempt.clamp(1, 16) - 1).unwrap_or(0);
    let delay = base.saturating_mul(2u32.saturating_pow(exponent));
    let half = u64::try_from(delay.as_millis() / 2)
        .unwrap_or(u64::MAX)
        .max(1);
    // A v4 UUID is 122 random bits from the thread's generator: jitter needs no more.
    let jitter = uuid::Uuid::new_v4().as_u64_pair().0 % half;
    delay + Duration::from_millis(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_bounded_jitter() {
        let base = Duration::from_millis(100);
        for _ in 0..50 {
            let first = backoff(base, 1);
            assert!(first >= base && first < base + base / 2, "{first:?}");
            let second = backoff(base, 2);
            assert!(second >= base * 2 && second < base * 3, "{second:?}");
        }
    }

    fn row(key: &str, option: Option<&str>) -> StepRow {
        StepRow {
            run_id: "r".into(),
            index: 0,
            key: key.into(),
            kind: String::new(),
            mode: String::new(),
            status: StepStatus::Succeeded,
            revised: false,
            original_step_index: None,
            attempt: 0,
            phase: None,
            selected_option: option.map(str::to_owned),
            input: Json::Null,
            output: Json::Null,
            error_message: None,
            actor_user_id: None,
            approval_id: None,
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn the_next_step_follows_options_targets_and_the_list() {
        let definition: Definition = serde_json::from_value(json!({
            "name": "w", "collection": "orders",
            "steps": [
                {"key": "a", "type": "get-data", "fields": ["id"]},
                {"key": "b", "type": "decision", "options": [
                    {"name": "yes", "next": "d"}, {"name": "no", "next": "c"}]},
                {"key": "c", "type": "go-to", "target": "a"},
                {"key": "d", "type": "guidance", "prompt": "p", "next": "f"},
                {"key": "e", "type": "end"},
                {"key": "f", "type": "plugin", "plugin": "p", "handler": "h"},
            ],
        }))
        .unwrap();
        assert_eq!(next_key(&definition, &row("a", None)), Ok(Some("b".into())));
        assert_eq!(
            next_key(&definition, &row("b", Some("yes"))),
            Ok(Some("d".into()))
        );
        assert!(next_key(&definition, &row("b", Some("maybe"))).is_err());
        assert_eq!(next_key(&definition, &row("c", None)), Ok(Some("a".into())));
        assert_eq!(next_key(&definition, &row("d", None)), Ok(Some("f".into())));
        assert_eq!(next_key(&definition, &row("e", None)), Ok(None));
        assert_eq!(
            next_key(&definition, &row("f", Some("e"))),
            Ok(Some("e".into()))
        );
        assert_eq!(next_key(&definition, &row("f", None)), Ok(None));
    }
}
