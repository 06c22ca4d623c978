//! Workflow definitions under `/v1/project/{project}/environment/{environment}/workflows`:
//! - `GET` lists them, newest first (`collectionName`, `active`, `createdAt.*`, `limit` and
//!   `hasMore` as the other listings);
//! - `POST` creates one from a JSON definition (201), `PUT …/{id}` saves a new version of it
//!   (none when the definition is the latest one already);
//! - `GET …/{id}` gives it with its latest definition, `GET …/{id}/versions` its versions,
//!   `GET …/{id}/versions/{version}` one of them with its definition;
//! - `POST …/{id}/activate` and `…/deactivate` turn it on and off (no new version).
//!
//! Reading: any signed-in user (session, or a token holding `all`) who may browse the workflow's
//! collection; admins read every workflow. Writing: admins (a token needs `all`). A definition
//! is checked whole against the served schema and the store before anything is saved: a bad
//! one is a 400 listing every problem. A workflow of the workflows folder is its file's: writes
//! to it are a 409 naming the file. Changes go to the admin log (resource `workflow`).

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value as Json, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{CollectionRight, SessionClaims};
use crate::datasource::Caller;
use crate::http::openapi::ErrorBody;
use crate::http::platform::listing::{CreatedAtQuery, ListQuery, iso};
use crate::http::platform::{Admin, Body, Error, SignedIn};
use crate::http::{SharedState, json, json_with};
use crate::platform::declarative::SchemaView;
use crate::platform::{Scope, Store, User};
use crate::workflows::Definition;
use crate::workflows::files::{self, known_from_store};
use crate::workflows::json::workflow_json;
use crate::workflows::validate;
use crate::workflows::versions::{
    Change, Origin, Source, Version, Workflow, WorkflowFilter, file_owned,
};

type Result<T, E = Error> = std::result::Result<T, E>;

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, update))
        .routes(routes!(versions))
        .routes(routes!(version))
        .routes(routes!(activate))
        .routes(routes!(deactivate))
}

/// A workflow as listed.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Workflow)]
#[allow(dead_code, reason = "documentation only: workflow_json writes it")]
struct WorkflowSchema {
    /// Always `workflow`.
    object: String,
    id: String,
    name: String,
    /// The collection whose records it runs on.
    collection_name: String,
    description: Option<String>,
    /// Whether new runs start on it.
    active: bool,
    /// `file` (the workflows folder: only the file changes it) or `api`.
    source: String,
    /// The file that defines it, when `source` is `file`.
    source_file: Option<String>,
    /// The number of the version new runs start on.
    latest_version: i64,
    created_by_user_id: Option<i64>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

/// A workflow with its latest definition.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: read writes it")]
struct WorkflowWithDefinition {
    object: String,
    id: String,
    name: String,
    collection_name: String,
    description: Option<String>,
    active: bool,
    source: String,
    source_file: Option<String>,
    latest_version: i64,
    created_by_user_id: Option<i64>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
    /// The latest version's definition, as stored (keys sorted).
    definition: DefinitionSchema,
}

/// A workflow after a `PUT`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: update writes it")]
struct SavedWorkflow {
    object: String,
    id: String,
    name: String,
    collection_name: String,
    description: Option<String>,
    active: bool,
    source: String,
    source_file: Option<String>,
    latest_version: i64,
    created_by_user_id: Option<i64>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
    definition: DefinitionSchema,
    /// Whether the definition differed from the latest version (and so made a new one).
    version_created: bool,
}

/// One page of workflows.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: list writes it")]
struct WorkflowList {
    has_more: bool,
    /// The path parameters, the limit and every filter given.
    parameters: Json,
    data: Vec<WorkflowSchema>,
}

/// A version of a workflow's definition.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WorkflowVersion)]
#[allow(dead_code, reason = "documentation only: version_json writes it")]
struct VersionSchema {
    /// Always `workflow_version`.
    object: String,
    workflow_id: String,
    #[schema(minimum = 1)]
    version: i64,
    /// SHA-256 hex of the canonical definition.
    definition_hash: String,
    created_by_user_id: Option<i64>,
    #[schema(format = DateTime)]
    created_at: String,
}

/// A version with its definition.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: version writes it")]
struct VersionWithDefinition {
    object: String,
    workflow_id: String,
    #[schema(minimum = 1)]
    version: i64,
    definition_hash: String,
    created_by_user_id: Option<i64>,
    #[schema(format = DateTime)]
    created_at: String,
    definition: DefinitionSchema,
}

/// One page of versions, newest first.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: versions writes it")]
struct VersionList {
    has_more: bool,
    parameters: Json,
    data: Vec<VersionSchema>,
}

crate::http::openapi::json_schema!(
    /// A workflow definition (docs/workflows.md): its collection and its steps, each with a
    /// unique `key` and a `type`.
    DefinitionSchema,
    "WorkflowDefinition",
    json!({
        "type": "object",
        "required": ["collection", "steps"],
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string", "description": "Unique in the environment; on PUT, the workflow's name when absent"},
            "collection": {"type": "string", "description": "The collection whose records it runs on"},
            "description": {"type": "string"},
            "active": {"type": "boolean", "description": "Turns the workflow on or off (not part of a version)"},
            "triggers": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "schedules": {"type": "array", "items": {"type": "object"}},
                    "recordChanges": {"type": "array", "items": {"type": "object"}},
                },
            },
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key", "type"],
                    "properties": {
                        "key": {"type": "string"},
                        "title": {"type": "string"},
                        "mode": {"type": "string", "enum": ["automatic", "confirm", "manual"]},
                        "next": {"type": "string"},
                        "type": {"type": "string", "enum": [
                            "guidance", "get-data", "update-data", "load-related",
                            "trigger-action", "decision", "plugin", "go-to", "end",
                            "escalation", "sub-workflow",
                        ]},
                    },
                },
            },
        },
    })
);

/// The query of `GET …/workflows`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(
    dead_code,
    reason = "documentation only: list reads the query with ListQuery"
)]
struct WorkflowsQuery {
    /// How many workflows, newest first (1 to 100).
    #[param(nullable = false, minimum = 1, maximum = 100, default = 10)]
    limit: Option<i64>,
    /// Only the workflows of this collection.
    #[param(rename = "collectionName", nullable = false, min_length = 1)]
    collection_name: Option<String>,
    /// Only active (`true`) or inactive (`false`) workflows.
    #[param(nullable = false, pattern = "^(true|false)$")]
    active: Option<String>,
}

/// The query of `GET …/versions`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(
    dead_code,
    reason = "documentation only: versions reads the query with ListQuery"
)]
struct VersionsQuery {
    /// How many versions, newest first (1 to 100).
    #[param(nullable = false, minimum = 1, maximum = 100, default = 10)]
    limit: Option<i64>,
}

fn definition_json(definition: &Definition) -> Json {
    serde_json::from_str(&definition.canonical_json()).unwrap_or(Json::Null)
}

fn version_json(version: &Version, with_definition: bool) -> Json {
    let mut out = Map::new();
    out.insert("object".into(), "workflow_version".into());
    out.insert("workflowId".into(), version.workflow_id.clone().into());
    out.insert("version".into(), version.version.into());
    out.insert(
        "definitionHash".into(),
        version.definition_hash.clone().into(),
    );
    out.insert("createdByUserId".into(), version.created_by_user_id.into());
    out.insert("createdAt".into(), iso(version.created_at).into());
    if with_definition {
        out.insert("definition".into(), definition_json(&version.definition));
    }
    Json::Object(out)
}

/// The store of the served environment (workflows are checked against the schema this server
/// serves, so another environment's are not served here).
fn environment<'a>(store: &'a Store, environment: &str) -> Result<&'a Store> {
    if environment == store.environment() {
        Ok(store)
    } else {
        Err(Error::NotFound(format!(
            "environment {environment:?} not found"
        )))
    }
}

/// The user as a caller of the permission checks: their first team's rendering.
async fn caller_of(store: &Store, user: &User) -> Result<Option<Caller>> {
    let Some(team) = user.teams.first() else {
        return Ok(None);
    };
    let rendering_id = store.rendering_id(team.id).await?;
    Ok(Some(
        SessionClaims::for_user(user, team, rendering_id)
            .into_caller(chrono_tz::UTC, uuid::Uuid::new_v4()),
    ))
}

/// The collections whose workflows `reader` may read: `None` for all (an admin), else those
/// of the served schema they may browse.
async fn readable(state: &SharedState, reader: &SignedIn) -> Result<Option<Vec<String>>> {
    if reader.is_admin() {
        return Ok(None);
    }
    let Some(caller) = caller_of(&reader.store, &reader.user).await? else {
        return Ok(Some(Vec::new()));
    };
    let mut allowed = Vec::new();
    for name in state.datasource.schema().collections.keys() {
        if state
            .permissions
            .has(&caller, name, CollectionRight::Browse)
            .await?
        {
            allowed.push(name.clone());
        }
    }
    Ok(Some(allowed))
}

/// Workflow `id`, when `reader` may read it (else 404: its existence is none of their business).
async fn readable_workflow(
    state: &SharedState,
    reader: &SignedIn,
    store: &Store,
    id: &str,
) -> Result<Workflow> {
    let not_found = || Error::NotFound(format!("workflow {id:?} not found"));
    let workflow = store.workflow(id).await?.ok_or_else(not_found)?;
    match readable(state, reader).await? {
        Some(collections) if !collections.contains(&workflow.collection_name) => Err(not_found()),
        _ => Ok(workflow),
    }
}

/// The definition of a request body, checked whole against the served schema and the store.
async fn checked_definition(
    state: &SharedState,
    store: &Store,
    body: Json,
    name: Option<&str>,
) -> Result<Definition> {
    let mut definition = files::from_json(body).map_err(Error::InvalidParameter)?;
    if let Some(name) = name
        && definition.name.is_empty()
    {
        definition.name = name.to_owned();
    }
    let view = SchemaView::served(state.datasource.schema());
    let plugins = state.plugin_names.as_ref().clone();
    let known = known_from_store(store, Some(&view), Some(plugins), []).await?;
    validate::check(&definition, &known)
        .map_err(|problems| Error::InvalidParameter(validate::describe(None, &problems)))?;
    Ok(definition)
}

/// The environment's workflows the caller may read, newest first.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/workflows",
    operation_id = "list_workflows",
    tag = "workflows",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        WorkflowsQuery,
        CreatedAtQuery,
    ),
    responses((status = 200, description = "The newest workflows", body = WorkflowList)),
)]
async fn list(
    State(state): State<SharedState>,
    reader: SignedIn,
    Path((project, environment_name)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    reader.require(Scope::All)?;
    let mut query = ListQuery::parse(
        raw.as_deref(),
        &[
            ("projectName", &project),
            ("environmentName", &environment_name),
        ],
    )?;
    let collection = query.text("collectionName")?;
    let active = query
        .one_of("active", &["true", "false"])?
        .map(|a| a == "true");
    let created_at = query.dates("createdAt")?;
    let store = environment(reader.project(&project)?, &environment_name)?;
    let filter = WorkflowFilter {
        limit: query.limit + 1,
        collection,
        collections: readable(&state, &reader).await?,
        active,
        created_at,
    };
    let rows = store
        .workflows(&filter)
        .await?
        .iter()
        .map(|w| Json::Object(workflow_json(w)))
        .collect();
    Ok(json(&query.envelope(rows)))
}

/// Creates a workflow from a definition (version 1), active unless it says `active: false`.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflows",
    operation_id = "create_workflow",
    tag = "workflows",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
    ),
    request_body = DefinitionSchema,
    responses(
        (status = 201, description = "The new workflow", body = WorkflowWithDefinition),
        (status = 409, description = "A workflow has this name", body = ErrorBody),
    ),
)]
async fn create(
    State(state): State<SharedState>,
    admin: Admin,
    Path((project, environment_name)): Path<(String, String)>,
    Body(body): Body,
) -> Result<Response> {
    admin.require(Scope::All)?;
    let store = environment(admin.project(&project)?, &environment_name)?;
    let definition = checked_definition(&state, store, Json::Object(body), None).await?;
    let saved = store
        .create_workflow(&admin.actor(), &definition, Origin::Api)
        .await?;
    tracing::info!(workflow = %saved.workflow.id, name = %saved.workflow.name, by = admin.user.id, "workflow created");
    let mut out = workflow_json(&saved.workflow);
    out.insert(
        "definition".into(),
        definition_json(&saved.version.definition),
    );
    Ok(json_with(StatusCode::CREATED, &Json::Object(out)))
}

/// A workflow with its latest definition.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/workflows/{id}",
    operation_id = "get_workflow",
    tag = "workflows",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id"),
    ),
    responses((status = 200, description = "The workflow", body = WorkflowWithDefinition)),
)]
async fn read(
    State(state): State<SharedState>,
    reader: SignedIn,
    Path((project, environment_name, id)): Path<(String, String, String)>,
) -> Result<Response> {
    reader.require(Scope::All)?;
    let store = environment(reader.project(&project)?, &environment_name)?;
    let workflow = readable_workflow(&state, &reader, store, &id).await?;
    let version = store
        .workflow_version(&id, workflow.latest_version)
        .await?
        .ok_or_else(|| Error::Internal(format!("workflow {id} has no latest version")))?;
    let mut out = workflow_json(&workflow);
    out.insert("definition".into(), definition_json(&version.definition));
    Ok(json(&Json::Object(out)))
}

/// Saves a definition as the workflow's next version, unless it is its latest one already
/// (`versionCreated: false`). `active` in the body turns it on or off.
#[utoipa::path(
    put,
    path = "/project/{project}/environment/{environment}/workflows/{id}",
    operation_id = "update_workflow",
    tag = "workflows",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id"),
    ),
    request_body = DefinitionSchema,
    responses(
        (status = 200, description = "The workflow after the save", body = SavedWorkflow),
        (status = 409, description = "A file of the workflows folder defines it, or another workflow has the name", body = ErrorBody),
    ),
)]
async fn update(
    State(state): State<SharedState>,
    admin: Admin,
    Path((project, environment_name, id)): Path<(String, String, String)>,
    Body(body): Body,
) -> Result<Response> {
    admin.require(Scope::All)?;
    let store = environment(admin.project(&project)?, &environment_name)?;
    let current = store
        .workflow(&id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("workflow {id:?} not found")))?;
    // The folder's workflows are refused before their body is even read.
    if current.source == Source::File {
        return Err(file_owned(&current).into());
    }
    let definition =
        checked_definition(&state, store, Json::Object(body), Some(&current.name)).await?;
    let saved = store
        .save_workflow(&admin.actor(), &id, &definition, Origin::Api)
        .await?;
    let mut out = workflow_json(&saved.workflow);
    out.insert(
        "definition".into(),
        definition_json(&saved.version.definition),
    );
    out.insert(
        "versionCreated".into(),
        (saved.change == Change::NewVersion).into(),
    );
    Ok(json(&Json::Object(out)))
}

/// The versions of a workflow, newest first.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/workflows/{id}/versions",
    operation_id = "list_workflow_versions",
    tag = "workflows",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id"),
        VersionsQuery,
        CreatedAtQuery,
    ),
    responses((status = 200, description = "The newest versions", body = VersionList)),
)]
async fn versions(
    State(state): State<SharedState>,
    reader: SignedIn,
    Path((project, environment_name, id)): Path<(String, String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    reader.require(Scope::All)?;
    let mut query = ListQuery::parse(
        raw.as_deref(),
        &[
            ("projectName", &project),
            ("environmentName", &environment_name),
            ("workflowId", &id),
        ],
    )?;
    let created_at = query.dates("createdAt")?;
    let store = environment(reader.project(&project)?, &environment_name)?;
    readable_workflow(&state, &reader, store, &id).await?;
    let rows = store
        .workflow_versions(&id, query.limit + 1, &created_at)
        .await?
        .iter()
        .map(|v| version_json(v, false))
        .collect();
    Ok(json(&query.envelope(rows)))
}

/// One version of a workflow, with its definition.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/workflows/{id}/versions/{version}",
    operation_id = "get_workflow_version",
    tag = "workflows",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id"),
        ("version" = i64, Path, minimum = 1, description = "The version's number"),
    ),
    responses((status = 200, description = "The version", body = VersionWithDefinition)),
)]
async fn version(
    State(state): State<SharedState>,
    reader: SignedIn,
    Path((project, environment_name, id, raw_version)): Path<(String, String, String, String)>,
) -> Result<Response> {
    reader.require(Scope::All)?;
    let number = crate::http::platform::id("version", &raw_version)?;
    let store = environment(reader.project(&project)?, &environment_name)?;
    readable_workflow(&state, &reader, store, &id).await?;
    let version = store
        .workflow_version(&id, number)
        .await?
        .ok_or_else(|| Error::NotFound(format!("version {number} of workflow {id:?} not found")))?;
    Ok(json(&version_json(&version, true)))
}

/// Turns a workflow on: new runs start on its latest version.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflows/{id}/activate",
    operation_id = "activate_workflow",
    tag = "workflows",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id"),
    ),
    responses(
        (status = 200, description = "The workflow, active", body = WorkflowSchema),
        (status = 409, description = "A file of the workflows folder defines it", body = ErrorBody),
    ),
)]
async fn activate(
    admin: Admin,
    Path((project, environment_name, id)): Path<(String, String, String)>,
) -> Result<Response> {
    set_active(&admin, &project, &environment_name, &id, true).await
}

/// Turns a workflow off: runs under way go on, no new one starts.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/workflows/{id}/deactivate",
    operation_id = "deactivate_workflow",
    tag = "workflows",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = String, Path, description = "The workflow's id"),
    ),
    responses(
        (status = 200, description = "The workflow, inactive", body = WorkflowSchema),
        (status = 409, description = "A file of the workflows folder defines it", body = ErrorBody),
    ),
)]
async fn deactivate(
    admin: Admin,
    Path((project, environment_name, id)): Path<(String, String, String)>,
) -> Result<Response> {
    set_active(&admin, &project, &environment_name, &id, false).await
}

async fn set_active(
    admin: &Admin,
    project: &str,
    environment_name: &str,
    id: &str,
    active: bool,
) -> Result<Response> {
    admin.require(Scope::All)?;
    let store = environment(admin.project(project)?, environment_name)?;
    let workflow = store
        .set_workflow_active(&admin.actor(), id, active, Origin::Api)
        .await?;
    Ok(json(&Json::Object(workflow_json(&workflow))))
}
