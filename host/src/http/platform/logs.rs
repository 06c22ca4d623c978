//! `GET /v1/project/{project}/admin-logs`: the admin log entries in the public API's shape
//! (platform-api.md §1.3): `{hasMore, parameters, data}`, each entry `{object: "adminLog", id,
//! type, resource, initiator, createdAt, user?, previousValue?, newValue?}`, newest first.
//! Filters, AND-combined: `limit`, `userEmail`, `userId` (the administrator), `type`,
//! `initiator`, `resource` and `createdAt.{eq,lt,lte,gt,gte}`; a bad value is a 400 naming it.

use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use serde_json::{Map, Value as Json, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::listing::{CreatedAtQuery, ListQuery, iso};
use super::{Admin, Result};
use crate::http::{SharedState, json};
use crate::platform::store::AdminLogFilter;
use crate::platform::{AdminLog, Scope};

/// The values of the §1.3 enums, as the store writes them; `token` (application tokens made and
/// revoked) and `chart` (dashboard charts added from the console) are Canopy's own resources
/// (docs/compatibility.md).
const TYPES: &[&str] = &["add", "remove", "update", "initial"];
const INITIATORS: &[&str] = &["administrator", "identityProvider", "forestAdmin"];
const RESOURCES: &[&str] = &[
    "user-project",
    "role",
    "team",
    "environment",
    crate::platform::tokens::ADMIN_LOG_RESOURCE,
    "workflow",
    crate::platform::charts::ADMIN_LOG_RESOURCE,
];

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// The query of `GET …/admin-logs`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(
    dead_code,
    reason = "documentation only: list reads the query with ListQuery"
)]
struct AdminLogQuery {
    /// How many entries, newest first (1 to 100).
    #[param(nullable = false, minimum = 1, maximum = 100, default = 10)]
    limit: Option<i64>,
    /// The administrator's e-mail.
    #[param(rename = "userEmail", nullable = false, format = Email)]
    user_email: Option<String>,
    /// The administrator's id.
    #[param(rename = "userId", nullable = false, minimum = 1)]
    user_id: Option<i64>,
    #[param(rename = "type", nullable = false, schema_with = types)]
    kind: Option<String>,
    #[param(nullable = false, schema_with = initiators)]
    initiator: Option<String>,
    #[param(nullable = false, schema_with = resources)]
    resource: Option<String>,
}

fn types() -> utoipa::openapi::schema::Schema {
    crate::http::openapi::schema(json!({"type": "string", "enum": TYPES}))
}

fn initiators() -> utoipa::openapi::schema::Schema {
    crate::http::openapi::schema(json!({"type": "string", "enum": INITIATORS}))
}

fn resources() -> utoipa::openapi::schema::Schema {
    crate::http::openapi::schema(json!({"type": "string", "enum": RESOURCES}))
}

/// Who made the change, when an admin did.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: entry writes it")]
struct AdminLogUser {
    /// Always `user`.
    object: String,
    id: i64,
    username: String,
    email: String,
}

/// One change made by an admin, an identity provider or Canopy itself.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: entry writes it")]
struct AdminLogEntry {
    /// Always `adminLog`.
    object: String,
    id: String,
    /// `add`, `remove`, `update` or `initial`.
    r#type: String,
    /// `user-project`, `role`, `team`, `environment`, `token` (an application token made or
    /// revoked) or `workflow` (a definition saved, activated or deactivated).
    resource: String,
    /// `administrator`, `identityProvider` or `forestAdmin`.
    initiator: String,
    /// ISO 8601, with milliseconds.
    #[schema(format = DateTime)]
    created_at: String,
    /// Absent unless an admin made the change.
    #[schema(nullable = false)]
    user: Option<AdminLogUser>,
    /// The resource before the change.
    #[schema(nullable = false, value_type = Option<Object>)]
    previous_value: Option<Json>,
    /// The resource after the change.
    #[schema(nullable = false, value_type = Option<Object>)]
    new_value: Option<Json>,
}

/// A page of the admin log, newest first.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "documentation only: ListQuery::envelope writes it"
)]
struct AdminLogList {
    /// Whether older entries remain beyond `limit`.
    has_more: bool,
    /// The path parameters, the limit and every filter given, under the same keys.
    #[schema(value_type = Object)]
    parameters: Json,
    data: Vec<AdminLogEntry>,
}

/// The newest entries of the project's admin log.
#[utoipa::path(
    get,
    path = "/project/{project}/admin-logs",
    operation_id = "list_admin_logs",
    tag = "admin-logs",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        AdminLogQuery,
        CreatedAtQuery,
    ),
    responses((status = 200, description = "The newest entries", body = AdminLogList)),
)]
async fn list(
    State(state): State<SharedState>,
    admin: Admin,
    Path(project): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    admin.require(Scope::AdminLogsRead)?;
    admin.project(&project)?;
    let mut query = ListQuery::parse(query.as_deref(), &[("projectName", &project)])?;
    let filter = AdminLogFilter {
        limit: query.limit + 1,
        user_email: query.email("userEmail")?,
        user_id: query.id("userId")?,
        r#type: query.one_of("type", TYPES)?,
        initiator: query.one_of("initiator", INITIATORS)?,
        resource: query.one_of("resource", RESOURCES)?,
        created_at: query.dates("createdAt")?,
    };
    let entries = crate::ops::logs::admin(&state.ops, &admin.caller(), &filter).await?;
    Ok(json(&query.envelope(entries.iter().map(entry).collect())))
}

/// One entry; optional fields are left out rather than null (strict clients of the public API
/// refuse unexpected values).
pub fn entry(log: &AdminLog) -> Json {
    let mut out = Map::new();
    out.insert("object".into(), "adminLog".into());
    out.insert("id".into(), log.id.clone().into());
    out.insert("type".into(), log.r#type.clone().into());
    out.insert("resource".into(), log.resource.clone().into());
    out.insert("initiator".into(), log.initiator.clone().into());
    out.insert("createdAt".into(), iso(log.created_at).into());
    if let Some(id) = log.actor_user_id {
        out.insert(
            "user".into(),
            json!({
                "object": "user",
                "id": id,
                "username": log.actor_username.clone().unwrap_or_default(),
                "email": log.actor_email.clone().unwrap_or_default(),
            }),
        );
    }
    if let Some(previous) = &log.previous_value {
        out.insert("previousValue".into(), previous.clone());
    }
    if let Some(new) = &log.new_value {
        out.insert("newValue".into(), new.clone());
    }
    Json::Object(out)
}
