//! `GET /v1/project/{project}/environment/{environment}/activity-logs` (platform-api.md §1.2):
//! the environment's activity log, newest first (`createdAt` then `id`, both descending), in the
//! public API's envelope `{hasMore, parameters, data}`. Admins only, scope `activity_logs:read`.
//!
//! Filters, AND-combined: `limit`, `userEmail`, `userId`, `teamName`, `collectionName`,
//! `recordId`, `action` (the 38-value enum), `type` (`read` or `write`) and
//! `createdAt.{eq,lt,lte,gt,gte}`; a bad value is a 400 naming it. Beyond the platform,
//! `startingAfter=<id>` continues after an entry (a keyset cursor on `(createdAt, id)`): paging
//! with `createdAt.lt=<last createdAt>` alone would skip the entries of the same millisecond.
//!
//! Items have exactly the platform's fields (`additionalProperties: false` in its OpenAPI), the
//! optional ones left out rather than null; status, origin, token and request id stay in the store.

use axum::extract::{Path, RawQuery};
use axum::response::Response;
use serde_json::{Map, Value as Json, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::listing::{CreatedAtQuery, ListQuery, iso};
use super::{Admin, Error, Result};
use crate::http::{SharedState, json};
use crate::platform::Scope;
use crate::platform::activity::{Action, ActivityFilter, ActivityRow, Kind};

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// The query of `GET …/activity-logs` (every filter is optional; several combine with AND).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(
    dead_code,
    reason = "documentation only: list reads the query with ListQuery"
)]
struct ActivityQuery {
    /// How many entries, newest first (1 to 100).
    #[param(nullable = false, minimum = 1, maximum = 100, default = 10)]
    limit: Option<i64>,
    /// The user's e-mail.
    #[param(rename = "userEmail", nullable = false, format = Email)]
    user_email: Option<String>,
    #[param(rename = "userId", nullable = false, minimum = 1)]
    user_id: Option<i64>,
    #[param(rename = "teamName", nullable = false, min_length = 1)]
    team_name: Option<String>,
    /// The collection's name, as in the schema.
    #[param(rename = "collectionName", nullable = false, min_length = 1)]
    collection_name: Option<String>,
    /// A record the operation targeted (packed form for composite keys).
    #[param(rename = "recordId", nullable = false, min_length = 1)]
    record_id: Option<String>,
    /// One of the platform's 38 actions (`index`, `read`, `update`, `createNote`, …).
    #[param(nullable = false, schema_with = action_names)]
    action: Option<String>,
    /// `read` or `write`.
    #[param(rename = "type", nullable = false, schema_with = kinds)]
    kind: Option<String>,
    /// Continue after this entry (its `id`): a keyset cursor that never skips entries of the
    /// same millisecond.
    #[param(rename = "startingAfter", nullable = false, min_length = 1)]
    starting_after: Option<String>,
}

fn action_names() -> utoipa::openapi::schema::Schema {
    crate::http::openapi::schema(json!({"type": "string", "enum": Action::NAMES}))
}

fn kinds() -> utoipa::openapi::schema::Schema {
    crate::http::openapi::schema(json!({"type": "string", "enum": ["read", "write"]}))
}

/// The user who acted.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: entry writes it")]
struct ActivityUser {
    /// Always `user`.
    object: String,
    id: i64,
    username: String,
    email: String,
}

/// `{object, name}` of the entry's environment, team or collection.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: entry writes it")]
struct ActivityNamed {
    /// `environment`, `team` or `collection`.
    object: String,
    name: String,
}

/// One thing a user did (no record values, ever).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ActivityLog)]
#[allow(dead_code, reason = "documentation only: entry writes it")]
struct ActivityLogSchema {
    /// Always `activityLog`.
    object: String,
    id: String,
    /// `read` or `write`.
    r#type: String,
    action: String,
    #[schema(nullable = false)]
    label: Option<String>,
    #[schema(nullable = false)]
    record_ids: Option<Vec<String>>,
    #[schema(format = DateTime)]
    created_at: String,
    user: ActivityUser,
    environment: ActivityNamed,
    team: ActivityNamed,
    #[schema(nullable = false)]
    collection: Option<ActivityNamed>,
}

/// A page of the activity log, newest first.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "documentation only: ListQuery::envelope writes it"
)]
struct ActivityLogList {
    /// Whether older entries match beyond `limit`.
    has_more: bool,
    /// The path parameters, the limit and every filter given, under the same keys.
    #[schema(value_type = Object)]
    parameters: Json,
    data: Vec<ActivityLogSchema>,
}

/// The newest entries of the environment's activity log.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/activity-logs",
    operation_id = "list_activity_logs",
    tag = "activity-logs",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ActivityQuery,
        CreatedAtQuery,
    ),
    responses((status = 200, description = "The newest entries", body = ActivityLogList)),
)]
async fn list(
    admin: Admin,
    Path((project, environment)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    admin.require(Scope::ActivityLogsRead)?;
    let mut query = ListQuery::parse(
        query.as_deref(),
        &[("projectName", &project), ("environmentName", &environment)],
    )?;
    // Parameters are checked before the path's environment is looked up, so that a bad one is
    // named even on an environment that has no document yet.
    let filter = ActivityFilter {
        limit: query.limit + 1,
        user_email: query.email("userEmail")?,
        user_id: query.id("userId")?,
        team_name: query.text("teamName")?,
        collection_name: query.text("collectionName")?,
        record_id: query.text("recordId")?,
        action: query
            .one_of("action", Action::NAMES)?
            .map(|name| {
                name.parse::<Action>()
                    .map_err(|e| Error::field("action", e))
            })
            .transpose()?,
        kind: query.one_of("type", &["read", "write"])?.map(|kind| {
            if kind == "read" {
                Kind::Read
            } else {
                Kind::Write
            }
        }),
        created_at: query.dates("createdAt")?,
        starting_after: query.text("startingAfter")?,
    };
    let store = admin.environment(&project, &environment).await?;
    let rows = store.activity_logs(&filter).await?;
    Ok(json(&query.envelope(rows.iter().map(entry).collect())))
}

/// One entry in the shape of platform-api.md §1.2.
pub fn entry(row: &ActivityRow) -> Json {
    let mut out = Map::new();
    out.insert("object".into(), "activityLog".into());
    out.insert("id".into(), row.id.clone().into());
    out.insert("type".into(), row.kind.clone().into());
    out.insert("action".into(), row.action.clone().into());
    if let Some(label) = &row.label {
        out.insert("label".into(), label.clone().into());
    }
    if !row.record_ids.is_empty() {
        out.insert("recordIds".into(), row.record_ids.clone().into());
    }
    out.insert("createdAt".into(), iso(row.created_at).into());
    out.insert(
        "user".into(),
        json!({
            "object": "user",
            "id": row.user_id,
            "username": row.username,
            "email": row.user_email,
        }),
    );
    out.insert(
        "environment".into(),
        json!({"object": "environment", "name": row.environment}),
    );
    out.insert(
        "team".into(),
        json!({"object": "team", "name": row.team_name}),
    );
    if let Some(collection) = &row.collection_name {
        out.insert(
            "collection".into(),
            json!({"object": "collection", "name": collection}),
        );
    }
    Json::Object(out)
}
