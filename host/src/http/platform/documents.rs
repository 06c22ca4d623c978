//! The permission documents of one environment, in the Forest server's own shapes (§5.1):
//! `…/environment/{environment}/permissions` (rights of each role on each collection and
//! action), `…/renderings` and `…/teams/{id}/rendering` (a team's scopes, SQL segments and
//! charts), `…/ip-whitelist`. A PUT replaces the whole document after checking every
//! collection, action, role id and condition tree against the served schema.

use std::collections::{BTreeMap, BTreeSet};

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value as Json, json};

use super::{Admin, Document, Error, Result, id, typed};
use crate::http::{SharedState, json};
use crate::platform::declarative::{self, Part, Right, SchemaView};
use crate::platform::documents::{
    ActionPermissions, CollectionPermissions, EnvironmentPermissions, Grant, IpWhitelist,
    RenderingCollection,
};
use crate::platform::{Store, Team};

pub fn router() -> Router<SharedState> {
    let env = "/project/{project}/environment/{environment}";
    Router::new()
        .route(
            &format!("{env}/permissions"),
            get(permissions).put(set_permissions),
        )
        .route(&format!("{env}/renderings"), get(renderings))
        .route(
            &format!("{env}/teams/{{id}}/rendering"),
            get(rendering).put(set_rendering),
        )
        .route(
            &format!("{env}/ip-whitelist"),
            get(ip_whitelist).put(set_ip_whitelist),
        )
}

async fn permissions(
    admin: Admin,
    Path((project, environment)): Path<(String, String)>,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    Ok(json(&store.environment_document().await?))
}

async fn set_permissions(
    admin: Admin,
    State(state): State<SharedState>,
    Path((project, environment)): Path<(String, String)>,
    Document(body): Document,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    let document = match body {
        Json::Bool(all) => EnvironmentPermissions::AllowAll(all),
        Json::Object(mut map) => {
            if let Some(unknown) = map.keys().find(|k| *k != "collections") {
                return Err(Error::field(
                    unknown,
                    "unknown field (expected collections)",
                ));
            }
            let collections = match map.remove("collections") {
                Some(Json::Object(collections)) => collections,
                Some(_) => return Err(Error::field("collections", "must be an object")),
                None => serde_json::Map::new(),
            };
            let view = SchemaView::served(state.datasource.schema());
            let roles: BTreeSet<i64> = store.roles().await?.iter().map(|r| r.id).collect();
            let mut out = BTreeMap::new();
            for (name, value) in collections {
                let at = format!("collections.{name}");
                if !view.has_collection(&name) {
                    return Err(Error::field(&at, "unknown collection"));
                }
                let permissions: CollectionPermissions =
                    typed(&at, value).map_err(|e| prefix(&at, e))?;
                check_collection(&at, &name, &permissions, &view, &roles)?;
                out.insert(name, permissions);
            }
            EnvironmentPermissions::Collections { collections: out }
        }
        _ => {
            return Err(Error::InvalidParameter(
                "the body must be true or {\"collections\": {…}}".to_owned(),
            ));
        }
    };
    declarative::guard(&store, Part::Roles).await?;
    store
        .set_environment_document(&admin.actor(), &document)
        .await?;
    Ok(json(&document))
}

/// Puts `at.` before the path a typed read names.
fn prefix(at: &str, error: Error) -> Error {
    match error {
        Error::InvalidParameter(message) if message.starts_with(at) => {
            Error::InvalidParameter(message)
        }
        Error::InvalidParameter(message) => Error::InvalidParameter(format!("{at}.{message}")),
        other => other,
    }
}

fn check_grant(at: &str, grant: &Grant, roles: &BTreeSet<i64>) -> Result<()> {
    if let Grant::Roles { roles: ids } = grant
        && let Some(unknown) = ids.iter().find(|id| !roles.contains(id))
    {
        return Err(Error::field(
            &format!("{at}.roles"),
            format!("no role has the id {unknown}"),
        ));
    }
    Ok(())
}

fn check_collection(
    at: &str,
    name: &str,
    permissions: &CollectionPermissions,
    view: &SchemaView,
    roles: &BTreeSet<i64>,
) -> Result<()> {
    for right in Right::ALL {
        let key = match right {
            Right::Browse => "browseEnabled",
            Right::Read => "readEnabled",
            Right::Edit => "editEnabled",
            Right::Add => "addEnabled",
            Right::Delete => "deleteEnabled",
            Right::Export => "exportEnabled",
        };
        check_grant(
            &format!("{at}.collection.{key}"),
            right.grant(&permissions.collection),
            roles,
        )?;
    }
    for (action, rights) in &permissions.actions {
        let at = format!("{at}.actions.{action}");
        if !view.has_action(name, action) {
            return Err(Error::field(&at, format!("{name} has no such action")));
        }
        check_action(&at, name, rights, view, roles)?;
    }
    Ok(())
}

fn check_action(
    at: &str,
    collection: &str,
    rights: &ActionPermissions,
    view: &SchemaView,
    roles: &BTreeSet<i64>,
) -> Result<()> {
    for (key, grant) in [
        ("triggerEnabled", &rights.trigger_enabled),
        ("approvalRequired", &rights.approval_required),
        ("userApprovalEnabled", &rights.user_approval_enabled),
        ("selfApprovalEnabled", &rights.self_approval_enabled),
    ] {
        check_grant(&format!("{at}.{key}"), grant, roles)?;
    }
    for (key, conditions) in [
        ("triggerConditions", &rights.trigger_conditions),
        (
            "approvalRequiredConditions",
            &rights.approval_required_conditions,
        ),
        ("userApprovalConditions", &rights.user_approval_conditions),
    ] {
        for (i, condition) in conditions.iter().enumerate() {
            let at = format!("{at}.{key}[{i}]");
            if !roles.contains(&condition.role_id) {
                return Err(Error::field(
                    &format!("{at}.roleId"),
                    format!("no role has the id {}", condition.role_id),
                ));
            }
            declarative::check_tree(&condition.filter, collection, view)
                .map_err(|e| Error::field(&format!("{at}.filter"), e))?;
        }
    }
    Ok(())
}

fn rendering_json(team: &Team, id: i64, rendering: &crate::platform::Rendering) -> Json {
    json!({
        "object": "rendering",
        "id": id,
        "team": {"object": "team", "id": team.id, "name": team.name},
        "collections": rendering.collections,
        "stats": rendering.stats,
    })
}

async fn team(store: &Store, raw: &str) -> Result<Team> {
    let id = id("id", raw)?;
    store
        .teams()
        .await?
        .into_iter()
        .find(|t| t.id == id)
        .ok_or_else(|| Error::NotFound(format!("team {id} not found")))
}

async fn renderings(
    admin: Admin,
    Path((project, environment)): Path<(String, String)>,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    let mut out = Vec::new();
    for team in store.teams().await? {
        let id = store.rendering_id(team.id).await?;
        let rendering = store.rendering_document(id).await?.unwrap_or_default();
        out.push(rendering_json(&team, id, &rendering));
    }
    Ok(json(&json!({"data": out})))
}

async fn rendering(
    admin: Admin,
    Path((project, environment, raw)): Path<(String, String, String)>,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    let team = team(&store, &raw).await?;
    let id = store.rendering_id(team.id).await?;
    let rendering = store.rendering_document(id).await?.unwrap_or_default();
    Ok(json(&rendering_json(&team, id, &rendering)))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RenderingBody {
    #[serde(default)]
    collections: BTreeMap<String, RenderingCollection>,
    #[serde(default)]
    stats: Vec<Json>,
}

async fn set_rendering(
    admin: Admin,
    State(state): State<SharedState>,
    Path((project, environment, raw)): Path<(String, String, String)>,
    Document(body): Document,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    let team = team(&store, &raw).await?;
    let body: RenderingBody = typed("body", body)?;
    let view = SchemaView::served(state.datasource.schema());
    for (name, collection) in &body.collections {
        let at = format!("collections.{name}");
        if !view.has_collection(name) {
            return Err(Error::field(&at, "unknown collection"));
        }
        if let Some(scope) = &collection.scope {
            declarative::check_tree(scope, name, &view)
                .map_err(|e| Error::field(&format!("{at}.scope"), e))?;
        }
        for (i, query) in collection.segments.iter().enumerate() {
            declarative::check_sql(query)
                .map_err(|e| Error::field(&format!("{at}.segments[{i}]"), e))?;
        }
        for (i, segment) in collection.live_query_segments.iter().enumerate() {
            declarative::check_sql(&segment.query)
                .map_err(|e| Error::field(&format!("{at}.liveQuerySegments[{i}].query"), e))?;
        }
    }
    for (i, chart) in body.stats.iter().enumerate() {
        if !chart.get("type").is_some_and(Json::is_string) {
            return Err(Error::field(
                &format!("stats[{i}]"),
                "a chart is an object with at least a `type`",
            ));
        }
    }
    declarative::guard(&store, Part::Teams).await?;
    let id = store
        .set_rendering(&admin.actor(), &team.name, body.collections, body.stats)
        .await?;
    let rendering = store.rendering_document(id).await?.unwrap_or_default();
    Ok(json(&rendering_json(&team, id, &rendering)))
}

async fn ip_whitelist(
    admin: Admin,
    Path((project, environment)): Path<(String, String)>,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    Ok(json(&store.ip_whitelist_document().await?))
}

async fn set_ip_whitelist(
    admin: Admin,
    Path((project, environment)): Path<(String, String)>,
    Document(body): Document,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    let whitelist: IpWhitelist = typed("body", body)?;
    declarative::check_ip_rules(&whitelist.rules).map_err(Error::InvalidParameter)?;
    if whitelist.use_ip_whitelist && whitelist.rules.is_empty() {
        return Err(Error::field(
            "use_ip_whitelist",
            "the whitelist cannot be on without rules (every remote address would be refused)",
        ));
    }
    declarative::guard(&store, Part::IpWhitelist).await?;
    store.set_ip_whitelist(&admin.actor(), &whitelist).await?;
    Ok(json(&whitelist))
}
