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

use axum::Router;
use axum::extract::{Path, RawQuery};
use axum::response::Response;
use axum::routing::get;
use serde_json::{Map, Value as Json, json};

use super::listing::{ListQuery, iso};
use super::{Admin, Error, Result};
use crate::http::{SharedState, json};
use crate::platform::Scope;
use crate::platform::activity::{Action, ActivityFilter, ActivityRow, Kind};

pub fn router() -> Router<SharedState> {
    Router::new().route(
        "/project/{project}/environment/{environment}/activity-logs",
        get(list),
    )
}

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
