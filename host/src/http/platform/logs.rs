//! `GET /v1/project/{project}/admin-logs?limit=`: the newest admin log entries in the public
//! API's shape (platform-api.md §1.3): `{hasMore, parameters, data}`, each entry `{object:
//! "adminLog", id, type, resource, initiator, createdAt, user?, previousValue?, newValue?}`.

use axum::Router;
use axum::extract::{Path, RawQuery};
use axum::response::Response;
use axum::routing::get;
use serde_json::{Map, Value as Json, json};

use super::{Admin, Error, Result};
use crate::http::{SharedState, json};
use crate::platform::AdminLog;

const DEFAULT_LIMIT: i64 = 10;
const MAX_LIMIT: i64 = 100;

pub fn router() -> Router<SharedState> {
    Router::new().route("/project/{project}/admin-logs", get(list))
}

async fn list(
    admin: Admin,
    Path(project): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let store = admin.project(&project)?;
    let mut limit = DEFAULT_LIMIT;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        // Unknown parameters are ignored (the next issue adds the filters).
        if key == "limit" {
            limit = value
                .parse::<i64>()
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or_else(|| {
                    Error::field("limit", format!("must be an integer from 1 to {MAX_LIMIT}"))
                })?;
        }
    }
    let mut entries = store.admin_logs(limit + 1).await?;
    let has_more = entries.len() > usize::try_from(limit).unwrap_or(usize::MAX);
    entries.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(json(&json!({
        "hasMore": has_more,
        "parameters": {"projectName": project, "limit": limit},
        "data": entries.iter().map(entry).collect::<Vec<_>>(),
    })))
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

/// Unix milliseconds as ISO 8601 with milliseconds and `Z`.
fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
