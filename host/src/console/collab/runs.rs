//! The Runs tab of a record's collaboration panel: the workflow runs on the record, starting one,
//! the step a run waits on as a form (a manual update's columns or an action's form included),
//! and a run's steps drawn as a diagram. Everything goes through `workflows::operations`, as
//! the `/v1` routes and MCP's workflow tools do.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono_tz::Tz;
use serde_json::{Map, Value as Json};

use super::{Panel, Problem, RUNS, again, back, when};
use crate::console::pages::record::render;
use crate::console::session::Posted;
use crate::console::session::{Session, first};
use crate::console::{Error, Result};
use crate::datasource::CollectionSchema;
use crate::datasource::action::{FieldType, FormElement, FormField, FormPhase, FormValues};
use crate::ops;
use crate::state::SharedState;
use crate::workflows::definition::{Kind, Mode, Step};
use crate::workflows::engine::{Completion, StepStatus, WaitingReason};
use crate::workflows::operations::{RunView, Runs};
use crate::workflows::{Queued, RunState};

pub struct RunRow {
    pub workflow: String,
    pub state: String,
    pub state_class: &'static str,
    pub when: String,
    pub outcome: String,
    pub href: String,
    pub current: bool,
}

pub struct WorkflowChoice {
    pub id: String,
    pub name: String,
    pub description: String,
}

/// One step of a run's diagram.
pub struct StepBox {
    pub title: String,
    pub kind: String,
    /// `done`, `current`, `failed`, `skipped` or `ahead` (not reached yet): the CSS class.
    pub class: &'static str,
    pub status: String,
    pub when: String,
    pub note: String,
}

/// The form of the step a run waits on.
pub struct StepForm {
    pub action: String,
    pub title: String,
    pub prompt: String,
    /// A free-text answer is asked (guidance).
    pub answer: bool,
    /// Options to pick from (a manual decision).
    pub options: Vec<String>,
    /// A confirm step: do it or skip it.
    pub confirm: bool,
    pub typed_answer: String,
    pub error: Option<String>,
    /// The values a manual `update-data` or `trigger-action` step runs with: the columns it
    /// sets, or the action's form (the action form's inputs, `v:<field>`).
    pub blocks: Vec<crate::console::actions::fields::Block>,
    /// Whether a field is required (the hint about the asterisk shows then).
    pub required_hint: bool,
    /// Where the console's script posts the values typed so far, for an action's form whose
    /// change hooks recompute it (a `trigger-action` step).
    pub refresh: Option<String>,
}

pub struct RunDetail {
    pub workflow: String,
    pub state: String,
    pub state_class: &'static str,
    pub started: String,
    pub finished: String,
    pub error: String,
    pub steps: Vec<StepBox>,
    pub form: Option<StepForm>,
    /// Why the run waits when no form here can answer it (an approval, a sub-workflow).
    pub waiting: String,
    pub ongoing: bool,
    pub refresh: String,
}

pub(super) fn runs_of(state: &SharedState) -> Option<Runs<'_>> {
    let triggers = state.workflow_triggers.as_deref()?;
    Some(Runs {
        ops: state,
        triggers,
        wakeup: &state.workflow_wakeup,
    })
}

fn state_class(state: RunState) -> &'static str {
    match state {
        RunState::Succeeded => "done",
        RunState::Failed => "failed",
        RunState::Cancelled => "skipped",
        RunState::Queued | RunState::Running | RunState::AwaitingInput => "current",
    }
}

fn state_text(state: RunState) -> String {
    match state {
        RunState::Queued => "Queued",
        RunState::Running => "Running",
        RunState::AwaitingInput => "Waiting for a person",
        RunState::Succeeded => "Succeeded",
        RunState::Failed => "Failed",
        RunState::Cancelled => "Cancelled",
    }
    .to_owned()
}

#[allow(
    clippy::too_many_arguments,
    reason = "the panel's parts, passed as the other tabs get them"
)]
pub(super) async fn runs_tab(
    panel: &mut Panel,
    (state, runs): (&SharedState, &Runs<'_>),
    session: &Session,
    collection: &str,
    id: &str,
    here: &str,
    pairs: &[(String, String)],
    problem: &Option<Problem>,
) -> Result<()> {
    let caller = &session.caller;
    let tz = caller.timezone;
    ops::notes::readable(runs.ops, caller, collection, id)
        .await
        .map_err(Error::Ops)?;
    let startable = runs
        .startable(caller, collection)
        .await
        .map_err(workflow_error)?;
    let name_of_workflow = |wid: &str| {
        startable
            .iter()
            .find(|w| w.id == wid)
            .map_or_else(|| wid.to_owned(), |w| w.name.clone())
    };
    let listed = runs
        .of_record(caller, collection, id)
        .await
        .map_err(workflow_error)?;
    let chosen = first(pairs, "run")
        .map(str::to_owned)
        .or_else(|| problem.as_ref().and_then(|p| p.about.clone()))
        .or_else(|| listed.first().map(|r| r.id.clone()));
    // The run shown is read once, and its row drawn from that same read: the list and the
    // picture never disagree on its state (the list may be a moment older than the read).
    let shown = match chosen.clone().filter(|c| listed.iter().any(|r| &r.id == c)) {
        Some(run_id) => Some(runs.read(caller, &run_id).await.map_err(workflow_error)?),
        None => None,
    };
    panel.runs = listed
        .iter()
        .map(|run| match &shown {
            Some(view) if view.run.id == run.id => &view.run,
            _ => run,
        })
        .map(|run| RunRow {
            workflow: name_of_workflow(&run.workflow_id),
            state: state_text(run.state),
            state_class: state_class(run.state),
            when: when(run.created_at, tz),
            outcome: run
                .error_message
                .clone()
                .or_else(|| run.finished_at.map(|at| format!("ended {}", when(at, tz))))
                .unwrap_or_default(),
            href: format!("{here}?panel=runs&run={}#run", run.id),
            current: chosen.as_deref() == Some(run.id.as_str()),
        })
        .collect();
    if let Some(view) = shown {
        let workflow = name_of_workflow(&view.run.workflow_id);
        let mut detail = run_detail(&view, workflow, here, tz, problem.as_ref());
        let mine = problem
            .as_ref()
            .filter(|p| p.about.as_deref() == Some(view.run.id.as_str()));
        // A refused post shows the fields as they were when it was sent.
        let typed = mine.map(|p| p.typed.clone()).unwrap_or_default();
        let posted = typed.iter().any(|(k, _)| k.starts_with("v:"));
        if let Some(form) = detail.form.as_mut()
            && let Some(step) = waiting_step(&view)
            && let Some(fields) = step_fields(
                state,
                caller,
                (collection, id),
                step,
                posted.then_some(&typed[..]),
            )
            .await?
        {
            let errors = mine.map(|p| p.field_errors.clone()).unwrap_or_default();
            form.blocks =
                crate::console::actions::fields::blocks(&fields.shown, &typed, &errors, tz);
            form.required_hint = crate::console::actions::fields::any_required(&fields.shown);
            if matches!(step.kind, Kind::TriggerAction { .. }) {
                form.refresh = Some(format!("{}/form", form.action));
            }
        }
        panel.run = Some(detail);
    }
    panel.startable = startable
        .into_iter()
        .map(|w| WorkflowChoice {
            id: w.id,
            name: w.name,
            description: w.description.unwrap_or_default(),
        })
        .collect();
    Ok(())
}

/// The step of the definition a run waits on for a person's values (a manual step).
fn waiting_step(view: &RunView) -> Option<&Step> {
    let run = &view.run;
    if run.state != RunState::AwaitingInput || run.waiting_reason != Some(WaitingReason::UserInput)
    {
        return None;
    }
    let index = run.current_step_index?;
    let key = &view.steps.iter().find(|s| s.index == index)?.key;
    view.definition
        .as_ref()?
        .steps
        .iter()
        .find(|s| &s.key == key)
        .filter(|s| s.mode() == Mode::Manual)
}

/// The fields of a manual `update-data` or `trigger-action` step, and the values posted in them.
struct StepFields {
    /// The fields shown.
    shown: Vec<FormElement>,
    /// The values posted, read by the types of every field the step may ask.
    values: FormValues,
    /// A message per posted value that does not read.
    errors: Vec<(String, String)>,
}

/// The fields a manual `update-data` or `trigger-action` step asks, and the values `posted`
/// in them: the columns it sets (typed by the collection; the definition's value as the
/// default, a template's field left empty, the template then being used), or the action's form
/// on the record as its hooks compute it (the load hook before anything is posted, then the
/// change hook of the field that changed, as on the action's own page). Other steps ask none.
async fn step_fields(
    state: &SharedState,
    caller: &crate::datasource::Caller,
    (collection, id): (&str, &str),
    step: &Step,
    posted: Option<&[(String, String)]>,
) -> Result<Option<StepFields>> {
    use crate::console::actions::{fields, record_form};
    let tz = caller.timezone;
    let action = match &step.kind {
        Kind::UpdateData { values } => {
            let data = crate::console::data::Data::new(state, caller);
            let schema = crate::console::pages::named(&data, collection)?;
            let shown: Vec<FormElement> = values
                .iter()
                .map(|(name, value)| FormElement::Field(column_field(schema, name, value)))
                .collect();
            let (values, errors) = fields::values(&shown, posted.unwrap_or_default(), tz);
            return Ok(Some(StepFields {
                shown,
                values,
                errors,
            }));
        }
        Kind::TriggerAction { action, .. } => action,
        _ => return Ok(None),
    };
    let target = (collection, id);
    let Some(posted) = posted else {
        let shown = record_form(
            state,
            caller,
            target,
            action,
            &FormValues::new(),
            &FormPhase::Load,
        )
        .await?;
        return Ok(Some(StepFields {
            shown,
            values: FormValues::new(),
            errors: Vec::new(),
        }));
    };
    let every = record_form(
        state,
        caller,
        target,
        action,
        &FormValues::new(),
        &FormPhase::Execute,
    )
    .await?;
    let (values, errors) = fields::values(&every, posted, tz);
    let changed = FormPhase::Change {
        changed_field: first(posted, "changed").unwrap_or("").to_owned(),
    };
    let shown = record_form(state, caller, target, action, &values, &changed).await?;
    Ok(Some(StepFields {
        shown,
        values,
        errors,
    }))
}

/// A column an `update-data` step sets, as a form field of the column's type.
fn column_field(schema: &CollectionSchema, name: &str, value: &Json) -> FormField {
    use crate::datasource::PrimitiveType as P;
    let mut field = FormField::new(name, FieldType::String);
    if let Some(column) = schema.column(name) {
        field.field_type = match column.column_type.primitive() {
            Some(P::Number) => FieldType::Number,
            Some(P::Boolean) => FieldType::Boolean,
            Some(P::Date) => FieldType::Date,
            Some(P::Dateonly) => FieldType::Dateonly,
            Some(P::Time) => FieldType::Time,
            Some(P::Enum) => {
                field.enum_values = Some(column.enum_values.clone());
                FieldType::Enum
            }
            Some(P::String | P::Uuid | P::Binary) => FieldType::String,
            Some(P::Json | P::Point) | None => FieldType::Json,
        };
    }
    match value.as_str().filter(|text| text.contains("{{")) {
        Some(template) => {
            field.description = Some(format!("Left empty, the workflow sets {template}."));
        }
        None if !value.is_null() => field.value = Some(value.clone()),
        None => {}
    }
    field
}

/// A run's steps as a diagram, and the form of the step it waits on when the caller may do it.
fn run_detail(
    view: &RunView,
    workflow: String,
    here: &str,
    tz: Tz,
    problem: Option<&Problem>,
) -> RunDetail {
    let run = &view.run;
    let steps_of_definition = view.definition.as_ref().map(|d| d.steps.as_slice());
    let defined = |key: &str| steps_of_definition.and_then(|s| s.iter().find(|d| d.key == key));
    let mut steps: Vec<StepBox> = view
        .steps
        .iter()
        .map(|row| {
            let class = match row.status {
                StepStatus::Succeeded => "done",
                StepStatus::Failed => "failed",
                StepStatus::Skipped | StepStatus::Cancelled => "skipped",
                StepStatus::Pending | StepStatus::Running | StepStatus::AwaitingInput => "current",
            };
            let title = defined(&row.key)
                .and_then(|d| d.title.clone())
                .unwrap_or_else(|| row.key.clone());
            let at = row.finished_at.or(row.started_at);
            StepBox {
                title,
                kind: row.kind.clone(),
                class,
                status: row.status.as_str().replace('_', " "),
                when: at.map(|at| when(at, tz)).unwrap_or_default(),
                note: row
                    .error_message
                    .clone()
                    .or_else(|| row.selected_option.as_ref().map(|o| format!("chose {o}")))
                    .unwrap_or_default(),
            }
        })
        .collect();
    // The steps not reached yet, in the definition's order after the last one run.
    if run.state.ongoing()
        && let Some(definition) = steps_of_definition
    {
        let last = view.steps.last().map(|s| s.key.as_str());
        let from = last
            .and_then(|key| definition.iter().position(|d| d.key == key))
            .map_or(0, |at| at + 1);
        for step in &definition[from.min(definition.len())..] {
            if view.steps.iter().any(|s| s.key == step.key) {
                continue;
            }
            steps.push(StepBox {
                title: step.title.clone().unwrap_or_else(|| step.key.clone()),
                kind: kind_name(&step.kind),
                class: "ahead",
                status: "not reached".to_owned(),
                when: String::new(),
                note: String::new(),
            });
        }
    }
    let mut waiting = String::new();
    let mut form = None;
    if run.state == RunState::AwaitingInput
        && let Some(index) = run.current_step_index
    {
        let row = view.steps.iter().find(|s| s.index == index);
        let step = row.and_then(|r| defined(&r.key));
        match run.waiting_reason {
            Some(WaitingReason::Approval) => {
                waiting = "The run waits for the decision on its approval request.".to_owned();
            }
            Some(WaitingReason::SubWorkflow) => {
                waiting = "The run waits for the workflow it started to end.".to_owned();
            }
            _ if !view.controls => {
                waiting = "The run waits for its user, who started it, or an admin.".to_owned();
            }
            reason => {
                let mine = problem.filter(|p| p.about.as_deref() == Some(run.id.as_str()));
                let mut f = StepForm {
                    action: format!("{here}/runs/{}/steps/{index}", run.id),
                    title: step
                        .and_then(|s| s.title.clone())
                        .or_else(|| row.map(|r| r.key.clone()))
                        .unwrap_or_default(),
                    prompt: String::new(),
                    answer: false,
                    options: Vec::new(),
                    confirm: reason == Some(WaitingReason::Confirmation),
                    typed_answer: mine.map(|p| p.typed("answer")).unwrap_or_default(),
                    error: mine.map(|p| p.message.clone()),
                    blocks: Vec::new(),
                    required_hint: false,
                    refresh: None,
                };
                if let Some(step) = step
                    && !f.confirm
                    && step.mode() == Mode::Manual
                {
                    match &step.kind {
                        Kind::Guidance { prompt, answer } => {
                            f.prompt.clone_from(prompt);
                            f.answer = *answer;
                        }
                        Kind::Decision { options } => {
                            f.options = options.iter().map(|o| o.name.clone()).collect();
                        }
                        _ => {}
                    }
                }
                form = Some(f);
            }
        }
    }
    RunDetail {
        workflow,
        state: state_text(run.state),
        state_class: state_class(run.state),
        started: when(run.started_at.unwrap_or(run.created_at), tz),
        finished: run.finished_at.map(|at| when(at, tz)).unwrap_or_default(),
        error: run.error_message.clone().unwrap_or_default(),
        steps,
        form,
        waiting,
        ongoing: run.state.ongoing(),
        refresh: format!("{here}?panel=runs&run={}#run", run.id),
    }
}

/// A step kind's name as definitions write it (`get-data`).
fn kind_name(kind: &Kind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.get("type").and_then(Json::as_str).map(str::to_owned))
        .unwrap_or_default()
}

/// A workflow operation's failure as the console shows it.
fn workflow_error(error: crate::workflows::Error) -> Error {
    use crate::workflows::Error as E;
    match error {
        E::NotFound(what) => Error::NotFound(format!("There is no {what} that you may see.")),
        E::Forbidden(_) => crate::auth::Error::forbidden().into(),
        E::Conflict(message) | E::Invalid(message) => {
            crate::agent::Error::Validation(message).into()
        }
        E::Store(error) => crate::datasource::Error::Internal(error.to_string()).into(),
    }
}

/// `POST …/r/{id}/runs` `workflow`: starts a workflow on the record.
pub(super) async fn start_run(
    State(state): State<SharedState>,
    Path((collection, id)): Path<(String, String)>,
    Posted(session, form): Posted,
) -> Result<Response> {
    let runs = runs_of(&state).ok_or_else(|| Error::NotFound("Workflows are off.".to_owned()))?;
    let workflow = first(&form, "workflow").unwrap_or("").to_owned();
    let target = (collection.as_str(), id.as_str());
    ops::notes::readable(&state, &session.caller, &collection, &id)
        .await
        .map_err(Error::Ops)?;
    let refused =
        |message: String| again(&state, &session, target, message, RUNS, Vec::new(), None);
    if workflow.is_empty() {
        return refused("Choose a workflow to start.".to_owned()).await;
    }
    match runs
        .start(&session.caller, &workflow, &collection, &id)
        .await
    {
        Ok(Queued::Created(run)) => Ok(back(
            &session,
            &collection,
            &id,
            &format!("panel=runs&started=1&run={}", enc(&run)),
        )),
        Ok(Queued::Ongoing(_)) => {
            refused("A run of this workflow is already ongoing on this record.".to_owned()).await
        }
        Err(
            crate::workflows::Error::Conflict(message) | crate::workflows::Error::Invalid(message),
        ) => refused(message).await,
        Err(error) => Err(workflow_error(error)),
    }
}

fn enc(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `POST …/runs/{run}/steps/{index}` `answer`, `option`, `confirmation`: completes the step a
/// run waits on.
pub(super) async fn complete_step(
    State(state): State<SharedState>,
    Path((collection, id, run, index)): Path<(String, String, String, String)>,
    Posted(session, form): Posted,
) -> Result<Response> {
    let runs = runs_of(&state).ok_or_else(|| Error::NotFound("Workflows are off.".to_owned()))?;
    let index: i64 = index
        .parse()
        .map_err(|_| Error::NotFound(format!("There is no step {index}.")))?;
    let answer = first(&form, "answer").map(|a| a.trim().to_owned());
    let target = (collection.as_str(), id.as_str());
    let mut typed = vec![("answer".to_owned(), answer.clone().unwrap_or_default())];
    typed.extend(form.iter().filter(|(k, _)| k.starts_with("v:")).cloned());
    // A manual write step's values, read by the types of its form; a value that does not read
    // (or a required one missing) is refused next to its field, and nothing runs.
    let mut values = Map::new();
    let view = runs
        .read(&session.caller, &run)
        .await
        .map_err(workflow_error)?;
    if let Some(step) = waiting_step(&view)
        && view.run.current_step_index == Some(index)
        && let Some(StepFields {
            shown,
            values: read,
            mut errors,
        }) = step_fields(&state, &session.caller, target, step, Some(&form)).await?
    {
        for missing in crate::console::actions::fields::missing(&shown, &read) {
            if !errors.iter().any(|(e, _)| *e == missing.0) {
                errors.push(missing);
            }
        }
        if !errors.is_empty() {
            let problem = Problem {
                status: StatusCode::BAD_REQUEST,
                message: "Correct the fields marked below.".to_owned(),
                panel: RUNS,
                typed,
                about: Some(run),
                field_errors: errors,
            };
            return render(&state, &session, &collection, &id, &[], Some(problem)).await;
        }
        values = read.into_iter().collect();
    }
    let completion = Completion {
        answer: answer.clone().filter(|a| !a.is_empty()),
        option: first(&form, "option").map(str::to_owned),
        values,
        confirmation: first(&form, "confirmation").map(|c| c == "true"),
    };
    match runs
        .complete(&session.caller, &run, index, &completion)
        .await
    {
        Ok(_) => Ok(back(
            &session,
            &collection,
            &id,
            &format!("panel=runs&completed=1&run={}", enc(&run)),
        )),
        Err(
            crate::workflows::Error::Conflict(message) | crate::workflows::Error::Invalid(message),
        ) => again(&state, &session, target, message, RUNS, typed, Some(run)).await,
        Err(error) => Err(workflow_error(error)),
    }
}

/// `POST …/runs/{run}/steps/{index}/form` (the console's script): the fields of the step a run
/// waits on for the values typed so far, as the action's change hook computes them.
pub(super) async fn refresh_step(
    State(state): State<SharedState>,
    Path((collection, id, run, index)): Path<(String, String, String, String)>,
    Posted(session, form): Posted,
) -> Result<Response> {
    let runs = runs_of(&state).ok_or_else(|| Error::NotFound("Workflows are off.".to_owned()))?;
    let view = runs
        .read(&session.caller, &run)
        .await
        .map_err(workflow_error)?;
    let gone =
        || Error::NotFound("This step no longer waits for values: refresh the page.".to_owned());
    let step = waiting_step(&view)
        .filter(|_| view.run.current_step_index.map(|i| i.to_string()) == Some(index.clone()))
        .ok_or_else(gone)?;
    let fields = step_fields(
        &state,
        &session.caller,
        (&collection, &id),
        step,
        Some(&form),
    )
    .await?
    .ok_or_else(gone)?;
    let tz = session.caller.timezone;
    crate::console::actions::fields_fragment(crate::console::actions::fields::blocks(
        &fields.shown,
        &form,
        &fields.errors,
        tz,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_update_steps_columns_become_fields_of_their_type() {
        use crate::datasource::{ColumnSchema, FieldSchema, PrimitiveType};
        let mut schema = CollectionSchema::new("orders");
        schema.fields.insert(
            "total".into(),
            FieldSchema::Column(ColumnSchema::new(PrimitiveType::Number)),
        );
        schema.fields.insert(
            "status".into(),
            FieldSchema::Column(ColumnSchema::new(PrimitiveType::String)),
        );
        let total = column_field(&schema, "total", &json!("{{context.read.total}}"));
        assert_eq!(total.field_type, FieldType::Number);
        assert_eq!(total.value, None);
        assert!(
            total
                .description
                .unwrap()
                .contains("{{context.read.total}}")
        );
        let status = column_field(&schema, "status", &json!("paid"));
        assert_eq!(status.field_type, FieldType::String);
        assert_eq!(status.value, Some(json!("paid")));
        assert!(!status.is_required);
    }
}
