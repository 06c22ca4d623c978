//! `GET /v1/project/{project}/admin-logs`: the admin log entries in the public API's shape
//! (platform-api.md §1.3): `{hasMore, parameters, data}`, each entry `{object: "adminLog", id,
//! type, resource, initiator, createdAt, user?, previousValue?, newValue?}`, newest first.
//! Filters, AND-combined: `limit`, `userEmail`, `userId` (the administrator), `type`,
//! `initiator`, `resource` and `createdAt.{eq,lt,lte,gt,gte}`; a bad value is a 400 naming it.

use axum::Router;
use axum::extract::{Path, RawQuery};
use axum::response::Response;
use axum::routing::get;
use serde_json::{Map, Value as Json, json};

use super::listing::{ListQuery, iso};
use super::{Admin, Result};
use crate::http::{SharedState, json};
use crate::platform::store::AdminLogFilter;
use crate::platform::{AdminLog, Scope};

/// The values of the §1.3 enums, as the store writes them.
const TYPES: &[&str] = &["add", "remove", "update", "initial"];
const INITIATORS: &[&str] = &["administrator", "identityProvider", "forestAdmin"];
const RESOURCES: &[&str] = &["user-project", "role", "team", "environment"];

pub fn router() -> Router<SharedState> {
    Router::new().route("/project/{project}/admin-logs", get(list))
}

async fn list(
    admin: Admin,
    Path(project): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    admin.require(Scope::AdminLogsRead)?;
    let store = admin.project(&project)?;
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
    let entries = store.admin_logs_matching(&filter).await?;
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
