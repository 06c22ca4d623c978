//! What each step kind does (issue 13 §2), as the run's user through the permission layer:
//! reads need the collection's `read` right and stay within the user's scope, `update-data`
//! needs `edit` (a record outside the scope is not found), `trigger-action` passes the §5.4
//! action checks (an action needing an approval files a request and the run waits).
//!
//! [`run`] applies the step's mode first: `automatic` does the work; `confirm` prepares it and
//! waits for a person's confirmation; `manual` waits for a person's values. A person's answer
//! comes back in the step's `input` (`control::Completion`), and the step runs again with it.
//! Every step that did something leaves an activity log entry attributed to the run's user
//! (origin `webhook` for webhook runs, `executor` otherwise), with the record's id, never its
//! values.
//!
//! One file per family: `data` (get-data, update-data, load-related), `action`
//! (trigger-action), `decision`, `plugin`, `flow` (guidance, go-to, end, escalation,
//! sub-workflow); `template` resolves `{{context.<step>.<field>}}` in values.

mod action;
mod data;
mod decision;
mod flow;
mod plugin;
mod template;

use serde_json::{Map, Value as Json, json};

use super::definition::{EndOutcome, Kind, Mode, Step};
use super::engine::Loaded;
use super::engine::store::{Run, StepRow, StepWait, WaitingReason};
use super::runs::TriggerKind;
use crate::datasource::{Caller, CollectionSchema};
use crate::ops::Ops;
use crate::platform::Store;
use crate::platform::activity::{Action, Actor, Entry, Origin, Status};

pub use template::resolve;

/// Everything a step works with.
pub(crate) struct StepCtx<'a> {
    /// The served generation, loaded for this step.
    pub state: &'a Ops,
    pub store: &'a Store,
    pub run: &'a Run,
    pub row: &'a StepRow,
    pub step: &'a Step,
    pub loaded: &'a Loaded,
    /// The run's user.
    pub caller: &'a Caller,
}

/// How a step ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Done (or declined, `skipped`): `output` goes into the run's context under the step's key;
    /// `option` is the decision's option (or a plugin's next step).
    Done {
        output: Json,
        option: Option<String>,
        skipped: bool,
    },
    /// The run waits for a person.
    Wait(WaitingReason, StepWait),
    /// An `end` step: the run ends.
    End {
        outcome: EndOutcome,
        message: Option<String>,
    },
    Failed(StepError),
}

impl Outcome {
    fn done(output: Json) -> Self {
        Self::Done {
            output,
            option: None,
            skipped: false,
        }
    }
}

/// Why a step failed, which decides what becomes of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The store or the database is unavailable, or the step timed out: tried again later
    /// (three attempts), then a person is asked.
    Transient,
    /// The record does not exist, its id is not one of the collection, or it is outside the
    /// user's scope: the run fails, visibly.
    RecordNotFound,
    /// Refused (a right, an action's rules, a rejected approval) or invalid (a value, a
    /// template, an option): the run waits for a person (reason `step_failed`).
    Refused,
    /// The definition cannot run (a step, a workflow or an action it names is missing): the run
    /// fails.
    Definition,
}

impl Failure {
    /// The run's `error_code` when it fails for this reason.
    pub fn code(self) -> &'static str {
        match self {
            Self::Transient => "unavailable",
            Self::RecordNotFound => "record_not_found",
            Self::Refused => "step_refused",
            Self::Definition => "invalid_definition",
        }
    }
}

/// A step's failure: its kind and a message for the run's readers (no record values).
#[derive(Debug, Clone)]
pub struct StepError {
    pub failure: Failure,
    pub message: String,
}

impl StepError {
    pub fn new(failure: Failure, message: impl Into<String>) -> Self {
        Self {
            failure,
            message: message.into(),
        }
    }

    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(Failure::Refused, message)
    }

    pub fn definition(message: impl Into<String>) -> Self {
        Self::new(Failure::Definition, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Failure::RecordNotFound, message)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Whether a store or database error may pass by itself (connection, pool, I/O, timeout).
fn transient_sqlx(error: &sqlx::Error) -> bool {
    matches!(
        error,
        sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
    )
}

impl From<crate::datasource::Error> for StepError {
    fn from(error: crate::datasource::Error) -> Self {
        use crate::datasource::Error as E;
        match &error {
            E::Database(e) if transient_sqlx(e) => Self::new(Failure::Transient, error.to_string()),
            // A database answer the caller cannot fix: its details stay in the logs.
            E::Database(e) => {
                tracing::warn!(error = %e, "a workflow step's database call failed");
                Self::refused("the database refused the operation (details in the server log)")
            }
            E::Internal(_) => {
                tracing::error!(%error, "a workflow step failed unexpectedly");
                Self::refused("unexpected error (details in the server log)")
            }
            _ => Self::refused(error.to_string()),
        }
    }
}

impl From<crate::auth::Error> for StepError {
    fn from(error: crate::auth::Error) -> Self {
        match error {
            crate::auth::Error::PermissionsUnavailable(_) => Self::new(
                Failure::Transient,
                "the permission documents are unavailable",
            ),
            crate::auth::Error::Forbidden(message) if message.is_empty() => {
                Self::refused("the run's user is not allowed to do this")
            }
            other => Self::refused(other.to_string()),
        }
    }
}

impl From<crate::ops::Error> for StepError {
    fn from(error: crate::ops::Error) -> Self {
        use crate::ops::Error as E;
        match error {
            E::Datasource(e) => e.into(),
            E::Auth(e) => e.into(),
            E::Agent(e) => Self::refused(e.to_string()),
            E::NotFound => Self::definition("not found in the served schema"),
            E::Approval { message, .. } => Self::refused(message),
            other @ (E::Platform(_) | E::Field { .. } | E::Unavailable) => {
                Self::refused(other.to_string())
            }
        }
    }
}

impl From<crate::platform::Error> for StepError {
    fn from(error: crate::platform::Error) -> Self {
        use crate::platform::Error as E;
        match &error {
            E::Database(e) if transient_sqlx(e) => Self::new(Failure::Transient, error.to_string()),
            E::NotFound(_) | E::Conflict(_) | E::Invalid(_) => Self::refused(error.to_string()),
            _ => {
                tracing::warn!(%error, "a workflow step's store call failed");
                Self::new(Failure::Transient, "Canopy's store failed")
            }
        }
    }
}

impl From<super::Error> for StepError {
    fn from(error: super::Error) -> Self {
        match error {
            super::Error::Store(e) => e.into(),
            super::Error::NotFound(what) => Self::definition(format!("{what} not found")),
            other => Self::refused(other.to_string()),
        }
    }
}

pub(crate) type StepResult<T> = std::result::Result<T, StepError>;

/// A person's answer to a step, as `control::complete` stores it in the step's input.
pub(crate) struct Given<'a>(&'a Json);

impl Given<'_> {
    /// Whether a person completed the step (else it has not been answered yet).
    pub fn completed(&self) -> bool {
        self.0.get("completed").and_then(Json::as_bool) == Some(true)
    }

    /// `false` when the person declined a step in `confirm` mode.
    pub fn confirmed(&self) -> bool {
        self.0.get("confirmation").and_then(Json::as_bool) != Some(false)
    }

    pub fn values(&self) -> Map<String, Json> {
        self.0
            .get("values")
            .and_then(Json::as_object)
            .cloned()
            .unwrap_or_default()
    }

    pub fn option(&self) -> Option<&str> {
        self.0.get("option").and_then(Json::as_str)
    }

    pub fn answer(&self) -> Option<&str> {
        self.0.get("answer").and_then(Json::as_str)
    }
}

/// Runs the step in its mode.
pub(crate) async fn run(ctx: &StepCtx<'_>) -> Outcome {
    let given = Given(&ctx.row.input);
    match &ctx.step.kind {
        Kind::End { outcome, message } => Outcome::End {
            outcome: outcome.unwrap_or(EndOutcome::Succeeded),
            message: message.clone(),
        },
        Kind::GoTo { .. } => Outcome::done(json!({})),
        Kind::Escalation { .. } if given.completed() => Outcome::done(Json::Object(given.values())),
        Kind::Escalation {
            team,
            user,
            message,
        } => flow::escalate(ctx, team.as_deref(), user.as_deref(), message.as_deref()).await,
        _ => match ctx.step.mode() {
            Mode::Automatic => work(ctx, None).await,
            Mode::Manual if !given.completed() => Outcome::Wait(
                WaitingReason::UserInput,
                StepWait {
                    prepared: Some(prompt(ctx.step)),
                    ..StepWait::default()
                },
            ),
            Mode::Manual => manual(ctx, &given).await,
            Mode::Confirm if !given.completed() => prepare(ctx).await,
            Mode::Confirm if !given.confirmed() => Outcome::Done {
                output: json!({"confirmed": false}),
                option: None,
                skipped: true,
            },
            Mode::Confirm => work(ctx, Some(&given)).await,
        },
    }
}

/// What a person is asked in a manual step.
fn prompt(step: &Step) -> Json {
    match &step.kind {
        Kind::Guidance { prompt, answer } => json!({"prompt": prompt, "answer": answer}),
        Kind::Decision { options } => {
            json!({"options": options.iter().map(|o| &o.name).collect::<Vec<_>>()})
        }
        _ => json!({}),
    }
}

/// A manual step a person completed: their answer is the step's output, or (for a write) the
/// values it runs with.
async fn manual(ctx: &StepCtx<'_>, given: &Given<'_>) -> Outcome {
    match &ctx.step.kind {
        Kind::Guidance { .. } => Outcome::done(match given.answer() {
            Some(answer) => json!({"answer": answer}),
            None => json!({}),
        }),
        Kind::Decision { .. } => Outcome::Done {
            output: json!({"option": given.option()}),
            option: given.option().map(str::to_owned),
            skipped: false,
        },
        Kind::Plugin { .. } => Outcome::Done {
            output: Json::Object(given.values()),
            option: given.option().map(str::to_owned),
            skipped: false,
        },
        _ => work(ctx, Some(given)).await,
    }
}

/// A step in `confirm` mode, before its confirmation: what it would do, for the person.
async fn prepare(ctx: &StepCtx<'_>) -> Outcome {
    let prepared = match &ctx.step.kind {
        Kind::UpdateData { values } => match template::resolve_map(values, &ctx.run.context) {
            Ok(values) => json!({"values": values}),
            Err(error) => return Outcome::Failed(error),
        },
        Kind::TriggerAction { action, values } => {
            match template::resolve_map(values, &ctx.run.context) {
                Ok(values) => json!({"action": action, "values": values}),
                Err(error) => return Outcome::Failed(error),
            }
        }
        _ => prompt(ctx.step),
    };
    Outcome::Wait(
        WaitingReason::Confirmation,
        StepWait {
            prepared: Some(prepared),
            ..StepWait::default()
        },
    )
}

/// The work of the step's kind, with a person's values when they gave some.
async fn work(ctx: &StepCtx<'_>, given: Option<&Given<'_>>) -> Outcome {
    let result = match &ctx.step.kind {
        Kind::Guidance { .. } => Ok(Outcome::done(match given.and_then(Given::answer) {
            Some(answer) => json!({"answer": answer}),
            None => json!({}),
        })),
        Kind::GetData { fields } => data::get(ctx, fields).await,
        Kind::UpdateData { values } => data::update(ctx, values, given).await,
        Kind::LoadRelated {
            relation,
            filter,
            fields,
        } => data::load_related(ctx, relation, filter.as_ref(), fields).await,
        Kind::TriggerAction {
            action: name,
            values,
        } => action::trigger(ctx, name, values, given).await,
        Kind::Decision { options } => decision::decide(ctx, options).await,
        Kind::Plugin {
            plugin,
            handler,
            settings,
        } => plugin::run(ctx, plugin, handler, settings).await,
        Kind::SubWorkflow { workflow, record } => {
            flow::sub_workflow(ctx, workflow, record.as_deref()).await
        }
        Kind::GoTo { .. } | Kind::End { .. } | Kind::Escalation { .. } => {
            Ok(Outcome::done(json!({})))
        }
    };
    result.unwrap_or_else(Outcome::Failed)
}

/// Whether a person can take over a step that keeps failing (else the run fails): every kind a
/// person can do by hand; `get-data` only runs automatically.
pub(crate) fn can_take_over(kind: &Kind) -> bool {
    !matches!(
        kind,
        Kind::GetData { .. } | Kind::GoTo { .. } | Kind::End { .. }
    )
}

/// The activity log's action for a step of this kind.
pub(crate) fn logged_action(kind: &Kind) -> Action {
    match kind {
        Kind::GetData { .. } | Kind::LoadRelated { .. } => Action::Read,
        Kind::UpdateData { .. } => Action::Update,
        Kind::TriggerAction { .. } => Action::Action,
        Kind::Decision { .. } => Action::SelectWorkflowOption,
        Kind::End { .. } => Action::CompleteWorkflow,
        _ => Action::CompleteWorkflowStep,
    }
}

/// Where a run's operations come from: its webhook, or the executor acting for its user.
pub(crate) fn origin(run: &Run) -> Origin {
    if run.trigger_kind == TriggerKind::Webhook {
        Origin::Webhook
    } else {
        Origin::Executor
    }
}

/// The activity log entry of a run's operation by `caller`, on its record.
pub(crate) fn entry(
    run: &Run,
    workflow_name: &str,
    caller: &Caller,
    action: Action,
    what: &str,
    status: Status,
) -> Entry {
    let mut entry = Entry::new(action, Actor::of(caller), origin(run))
        .with_collection(run.collection_name.clone())
        .with_records([run.record_id.clone()])
        .with_label(format!("workflow {workflow_name}: {what}"))
        .with_request_id(caller.request_id.to_string());
    if let Some(token) = &run.token_id {
        entry = entry.with_token(token.clone());
    }
    entry.status = status;
    entry
}

/// The served schema of the run's collection.
pub(crate) fn collection<'a>(ctx: &'a StepCtx<'_>) -> StepResult<&'a CollectionSchema> {
    ctx.state
        .datasource
        .schema()
        .collections
        .get(&ctx.run.collection_name)
        .ok_or_else(|| {
            StepError::definition(format!(
                "the collection {:?} is not served",
                ctx.run.collection_name
            ))
        })
}
