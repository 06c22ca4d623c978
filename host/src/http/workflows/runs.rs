//! Workflow runs under `/v1/project/{project}/environment/{environment}/workflow-runs`
//! (issue 13 §5): the listing (by workflow, by record, by state, trigger and creation date,
//! newest first, `limit` and `hasMore`), one run with its steps, and run control: abort, resume
//! (take the run over), complete the step it waits on, revise a step
//! (`workflows::engine::control`).
//!
//! Any signed-in user of the project (a session, or an application token with the `all`
//! scope: no narrower scope names runs) sees the runs they act in, started or were handed, and
//! the runs on collections they may browse; admins see all. A run's context and its steps'
//! values may hold record values: they are shown to its user, starter, assignee and admins, and
//! to others only when they may read the record (the collection's `read` right, the record
//! within their scope). Control is for the run's user, starter, assignee and admins.

use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use serde_json::{Map, Value as Json, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::platform::listing::{CreatedAtQuery, ListQuery};
use crate::http::platform::{Body, Error, Fields as _, SignedIn};
use crate::http::{SharedState, json};
use crate::platform::activity::Origin;
use crate::platform::{Scope, Store};
use crate::workflows::engine::{Completion, Controller, Run, RunFilter, WaitingReason};
/// The JSON of runs and steps, shared with MCP and the CLI (`workflows::json`).
pub use crate::workflows::json::{run_json, step_json};
use crate::workflows::operations;
use crate::workflows::runs::{RunState, TriggerKind};

type Result<T, E = Error> = std::result::Result<T, E>;

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(show))
        .routes(routes!(abort))
        .routes(routes!(resume))
        .routes(routes!(complete))
        .routes(routes!(revise))
}

// ------------------------------------------------------------------------------------------------
// Documentation types

/// The query of `GET …/workflow-runs` (every filter optional; several combine with AND).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(
    dead_code,
    reason = "documentation only: list reads the query with ListQuery"
)]
struct RunsQuery {
    /// How many runs, newest first (1 to 100).
    #[param(nullable = false, minimum = 1, maximum = 100, default = 10)]
    limit: Option<i64>,
    /// The runs of one workflow.
    #[param(rename = "workflowId", nullable = false, min_length = 1)]
    workflow_id: Option<String>,
    /// The runs on one collection's records.
    #[param(rename = "collectionName", nullable = false, min_length = 1)]
    collection_name: Option<String>,
    /// The runs on one record (packed form for composite keys). Needs `collectionName` (ids
    /// are only unique within a collection): `recordId` alone is a 400 naming `recordId`.
    #[param(rename = "recordId", nullable = false, min_length = 1)]
    record_id: Option<String>,
    #[param(nullable = false, schema_with = state_schema)]
    state: Option<String>,
    #[param(nullable = false, schema_with = trigger_schema)]
    trigger: Option<String>,
}

fn state_schema() -> utoipa::openapi::schema::Schema {
    crate::http::openapi::schema(json!({
        "type": "string",
        "enum": RunState::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
    }))
}

fn trigger_schema() -> utoipa::openapi::schema::Schema {
    crate::http::openapi::schema(json!({
        "type": "string",
        "enum": TriggerKind::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
    }))
}

fn reason_schema() -> utoipa::openapi::schema::Schema {
    crate::http::openapi::schema(json!({
        "type": ["string", "null"],
        "enum": WaitingReason::ALL.iter().map(|r| Json::from(r.as_str()))
            .chain([Json::Null]).collect::<Vec<_>>(),
    }))
}

/// One step of a run, in the order they ran.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WorkflowRunStep)]
#[allow(dead_code, reason = "documentation only: step_json writes it")]
struct StepSchema {
    index: i64,
    /// The step's key in the definition.
    key: String,
    /// `guidance`, `get-data`, `update-data`, `load-related`, `trigger-action`, `decision`,
    /// `plugin`, `go-to`, `end`, `escalation` or `sub-workflow`.
    r#type: String,
    /// `automatic`, `confirm` or `manual`.
    mode: String,
    /// `pending`, `running`, `awaiting_input`, `succeeded`, `failed`, `skipped` or `cancelled`.
    status: String,
    /// A later step runs it again (`originalStepIndex` there points here).
    revised: bool,
    original_step_index: Option<i64>,
    attempt: i64,
    /// The write-ahead marker of a step that writes: `executing`, then `done`.
    phase: Option<String>,
    selected_option: Option<String>,
    approval_request_id: Option<i64>,
    error_message: Option<String>,
    actor_user_id: Option<i64>,
    #[schema(format = DateTime)]
    started_at: Option<String>,
    #[schema(format = DateTime)]
    finished_at: Option<String>,
    /// What a person gave the step (only to those who may read the record).
    #[schema(value_type = Option<Object>, nullable = false)]
    input: Option<Json>,
    /// What the step produced, or prepared for a person (only to those who may read the
    /// record).
    #[schema(value_type = Option<Object>, nullable = false)]
    output: Option<Json>,
}

/// A workflow run.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WorkflowRun)]
#[allow(dead_code, reason = "documentation only: run_json writes it")]
struct RunSchema {
    id: String,
    workflow_id: String,
    version_id: String,
    collection_name: String,
    record_id: String,
    #[schema(schema_with = state_schema)]
    state: String,
    /// Why an `awaiting_input` run waits.
    #[schema(schema_with = reason_schema)]
    waiting_reason: Option<String>,
    #[schema(schema_with = trigger_schema)]
    trigger: String,
    /// Who the run acts as now.
    user_id: i64,
    started_by_user_id: i64,
    assignee_user_id: Option<i64>,
    assignee_team: Option<String>,
    parent_run_id: Option<String>,
    current_step_index: Option<i64>,
    error_code: Option<String>,
    error_message: Option<String>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    started_at: Option<String>,
    #[schema(format = DateTime)]
    updated_at: String,
    #[schema(format = DateTime)]
    finished_at: Option<String>,
    /// Each finished step's output under its key (one run; only to those who may read the
    /// record).
    #[schema(value_type = Option<Object>, nullable = false)]
    context: Option<Json>,
    /// The steps (one run only).
    #[schema(nullable = false)]
    steps: Option<Vec<StepSchema>>,
}

/// A page of runs, newest first.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "documentation only: ListQuery::envelope writes it"
)]
struct WorkflowRunList {
    /// Whether more runs match beyond `limit`.
    has_more: bool,
    /// The path parameters, the limit and every filter given, under the same keys.
    #[schema(value_type = Object)]
    parameters: Json,
    data: Vec<RunSchema>,
}

/// A person's answer to the step the run waits on.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "documentation only: complete reads the body as JSON"
)]
struct CompletionSchema {
    /// A guidance step's answer.
    #[schema(nullable = false)]
    answer: Option<String>,
    /// A decision's option (by name), or a plugin step's next step (a step key).
    #[schema(nullable = false)]
    option: Option<String>,
    /// Form values: what an update or an action runs with, or what a step done by hand
    /// produced.
    #[schema(value_type = Option<Object>, nullable = false)]
    values: Option<Json>,
    /// A step in `confirm` mode: `true` runs it, `false` skips it. A step whose write is
    /// uncertain: `true` says it was done.
    #[schema(nullable = false)]
    confirmation: Option<bool>,
}

// ------------------------------------------------------------------------------------------------
// Helpers

/// The store, when the path names the project and environment served (else 404); runs need a
/// session or a token with `all`.
fn served<'a>(who: &'a SignedIn, project: &str, environment: &str) -> Result<&'a Store> {
    who.require(Scope::All)?;
    let store = who.project(project)?;
    if environment != store.environment() {
        return Err(Error::NotFound(format!(
            "environment {environment:?} not found"
        )));
    }
    Ok(store)
}

fn from_workflows(error: crate::workflows::Error) -> Error {
    use crate::workflows::Error as E;
    match error {
        E::NotFound(_) => Error::NotFound(error.to_string()),
        E::Conflict(message) => Error::Conflict(message),
        E::Forbidden(message) => Error::insufficient(message),
        E::Invalid(message) => Error::InvalidParameter(message),
        E::Store(error) => error.into(),
    }
}

/// The run as the caller may see it: 404 when they may not see it at all.
async fn visible(
    state: &SharedState,
    store: &Store,
    who: &SignedIn,
    id: &str,
) -> Result<(Run, bool)> {
    operations::visible(state, store, &who.user, id)
        .await
        .map_err(from_workflows)
}

/// The answer of a control route: the run as its controller sees it, with its steps.
async fn shown(store: &Store, run: &Run) -> Result<Response> {
    let steps = store.workflow_run_steps(&run.id).await?;
    Ok(json(&run_json(run, true, Some((&steps, true)))))
}

fn controller<'a>(state: &'a SharedState, store: &'a Store, who: &'a SignedIn) -> Controller<'a> {
    Controller {
        store,
        wakeup: &state.workflow_wakeup,
        activity: &state.activity,
        user: &who.user,
        token_id: who.token_id.as_deref(),
        origin: Origin::Api,
    }
}

/// A step index from the path.
fn index(raw: &str) -> Result<i64> {
    raw.parse::<i64>()
        .ok()
        .filter(|i| *i >= 0)
        .ok_or_else(|| Error::field("index", format!("{raw:?} is not a step index")))
}

// ------------------------------------------------------------------------------------------------
// Routes

/// The newest runs the caller may see.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/workflow-runs",
    operation_id = "list_workflow_runs",
    tag = "workflow-runs",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        RunsQuery,
        CreatedAtQuery,
    ),
    responses((status = 200, description = "The newest runs", body = WorkflowRunList)),
)]
async fn list(
    who: SignedIn,
    State(state): State<SharedState>,
    Path((project, environment)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let mut query = ListQuery::parse(
        query.as_deref(),
        &[("projectName", &project), ("environmentName", &environment)],
    )?;
    let states: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    let triggers: Vec<&str> = TriggerKind::ALL.iter().map(|t| t.as_str()).collect();
    let filter = RunFilter {
        workflow_id: query.text("workflowId")?,
        collection_name: query.text("collectionName")?,
        record_id: query.text("recordId")?,
        state: query
            .one_of("state", &states)?
            .and_then(|s| RunState::parse(&s)),
        trigger: query
            .one_of("trigger", &triggers)?
            .and_then(|t| TriggerKind::parse(&t)),
        created_at: query.dates("createdAt")?,
        visible_to: None,
    };
    if filter.record_id.is_some() && filter.collection_name.is_none() {
        return Err(Error::field(
            "recordId",
            "needs collectionName (ids are only unique within a collection)",
        ));
    }
    let store = served(&who, &project, &environment)?;
    let runs = operations::list(&state, store, &who.user, filter, query.limit + 1)
        .await
        .map_err(from_workflows)?;
    Ok(json(&query.envelope(
        runs.iter().map(|run| run_json(run, false, None)).collect(),
    )))
}

/// One run with its steps.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/workflow-runs/{id}",
    operation_id = "read_workflow_run",
    tag = "workflow-runs",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, min_length = 1, description = "The run's id"),
    ),
    responses((status = 200, description = "The run and its steps", body = RunSchema)),
)]
async fn show(
    who: SignedIn,
    State(state): State<SharedState>,
    Path((project, environment, id)): Path<(String, String, String)>,
) -> Result<Response> {
    let store = served(&who, &project, &environment)?;
    let (run, details) = visible(&state, store, &who, &id).await?;
    let steps = store.workflow_run_steps(&run.id).await?;
    Ok(json(&run_json(&run, details, Some((&steps, details)))))
}

/// Aborts an ongoing run (and its sub-workflows' runs).
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflow-runs/{id}/abort",
    operation_id = "abort_workflow_run",
    tag = "workflow-runs",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, min_length = 1, description = "The run's id"),
    ),
    responses(
        (status = 200, description = "The run, cancelled", body = RunSchema),
        (status = 409, description = "The run has already ended", body = crate::http::openapi::ErrorBody),
    ),
)]
async fn abort(
    who: SignedIn,
    State(state): State<SharedState>,
    Path((project, environment, id)): Path<(String, String, String)>,
) -> Result<Response> {
    let store = served(&who, &project, &environment)?;
    visible(&state, store, &who, &id).await?;
    let run = controller(&state, store, &who)
        .abort(&id)
        .await
        .map_err(from_workflows)?;
    shown(store, &run).await
}

/// Takes a waiting run over: it acts as the caller from now on; an escalated run goes on, a
/// failed step runs again (unless it wrote).
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflow-runs/{id}/resume",
    operation_id = "resume_workflow_run",
    tag = "workflow-runs",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, min_length = 1, description = "The run's id"),
    ),
    responses(
        (status = 200, description = "The run, now the caller's", body = RunSchema),
        (status = 409, description = "The run does not wait for a person, or waits for something a resume cannot give", body = crate::http::openapi::ErrorBody),
    ),
)]
async fn resume(
    who: SignedIn,
    State(state): State<SharedState>,
    Path((project, environment, id)): Path<(String, String, String)>,
) -> Result<Response> {
    let store = served(&who, &project, &environment)?;
    visible(&state, store, &who, &id).await?;
    let run = controller(&state, store, &who)
        .resume(&id)
        .await
        .map_err(from_workflows)?;
    shown(store, &run).await
}

/// Completes the step the run waits on.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflow-runs/{id}/steps/{index}/complete",
    operation_id = "complete_workflow_run_step",
    tag = "workflow-runs",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, min_length = 1, description = "The run's id"),
        ("index" = i64, Path, minimum = 0, description = "The step's index (the run's currentStepIndex)"),
    ),
    request_body = CompletionSchema,
    responses(
        (status = 200, description = "The run, going on", body = RunSchema),
        (status = 409, description = "The run does not wait on this step for a person", body = crate::http::openapi::ErrorBody),
    ),
)]
async fn complete(
    who: SignedIn,
    State(state): State<SharedState>,
    Path((project, environment, id, raw)): Path<(String, String, String, String)>,
    Body(body): Body,
) -> Result<Response> {
    let index = index(&raw)?;
    body.only(&["answer", "option", "values", "confirmation"])?;
    let values: Map<String, Json> = match body.get("values") {
        None | Some(Json::Null) => Map::new(),
        Some(Json::Object(values)) => values.clone(),
        Some(_) => return Err(Error::field("values", "must be an object")),
    };
    let completion = Completion {
        answer: body.string("answer")?,
        option: body.string("option")?,
        values,
        confirmation: body.boolean("confirmation")?,
    };
    let store = served(&who, &project, &environment)?;
    let acting = operations::Acting {
        user: &who.user,
        token_id: who.token_id.as_deref(),
        origin: Origin::Api,
    };
    let run = operations::complete(
        &state,
        store,
        &state.workflow_wakeup,
        &acting,
        &id,
        index,
        &completion,
    )
    .await
    .map_err(from_workflows)?;
    shown(store, &run).await
}

/// Revises a step: later steps are cancelled and it runs again at a new index.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflow-runs/{id}/steps/{index}/revise",
    operation_id = "revise_workflow_run_step",
    tag = "workflow-runs",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, min_length = 1, description = "The run's id"),
        ("index" = i64, Path, minimum = 0, description = "The step's index"),
    ),
    responses(
        (status = 200, description = "The run, going on from the revised step", body = RunSchema),
        (status = 409, description = "The run does not wait for a person, or the step was revised or cancelled", body = crate::http::openapi::ErrorBody),
    ),
)]
async fn revise(
    who: SignedIn,
    State(state): State<SharedState>,
    Path((project, environment, id, raw)): Path<(String, String, String, String)>,
) -> Result<Response> {
    let index = index(&raw)?;
    let store = served(&who, &project, &environment)?;
    visible(&state, store, &who, &id).await?;
    let run = controller(&state, store, &who)
        .revise(&id, index)
        .await
        .map_err(from_workflows)?;
    shown(store, &run).await
}
