//! The permission documents of one environment, in the Forest server's own shapes (§5.1):
//! `…/environment/{environment}/permissions` (rights of each role on each collection and
//! action), `…/renderings` and `…/teams/{id}/rendering` (a team's scopes, SQL segments and
//! charts), `…/ip-whitelist`. A PUT replaces the whole document after checking every
//! collection, action, role id and condition tree against the served schema.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{Value as Json, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Admin, Document, Error, Result, id, typed};
use crate::http::openapi::{ErrorBody, json_schema};
use crate::http::{SharedState, json};
use crate::platform::declarative::{self, Part, Right, SchemaView};
use crate::platform::documents::{
    ActionPermissions, CollectionPermissions, EnvironmentPermissions, Grant, IpWhitelist,
    RenderingCollection, WILDCARD,
};
use crate::platform::{Store, Team};

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(permissions, set_permissions))
        .routes(routes!(renderings))
        .routes(routes!(rendering, set_rendering))
        .routes(routes!(ip_whitelist, set_ip_whitelist))
}

/// A grant of one right: to everyone (`true`), nobody (`false`), or the roles listed.
fn grant() -> Json {
    json!({"oneOf": [
        {"type": "boolean"},
        {"type": "object", "required": ["roles"], "additionalProperties": false,
         "properties": {"roles": {"type": "array", "items": {"type": "integer"}}}},
    ]})
}

json_schema!(
    /// The environment's permissions (§5.1 of the Forest server): `true` allows everything,
    /// else each served collection's rights and its actions' rights, by role.
    EnvironmentPermissionsSchema,
    "EnvironmentPermissions",
    json!({
        "description": "`true` (everything allowed), or the rights of each served collection \
            and of its actions, by role id. Collections, actions and roles must exist; the \
            collection `*` stands for every collection and the action `*` for every action of \
            its collection (`*` in `*`: every action), including those served later (a plugin \
            reloaded, another agent's uploaded schema). Rights add up: a role has a right \
            given by name or by `*`.",
        "oneOf": [
            {"type": "boolean"},
            {"type": "object", "additionalProperties": false, "properties": {
                "collections": {"type": "object", "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "collection": {"type": "object", "properties": {
                            "browseEnabled": grant(), "readEnabled": grant(),
                            "editEnabled": grant(), "addEnabled": grant(),
                            "deleteEnabled": grant(), "exportEnabled": grant(),
                        }},
                        "actions": {"type": "object", "additionalProperties": {"type": "object"}},
                    },
                }},
            }},
        ],
    })
);

/// What a team may see of one collection.
fn rendering_collection() -> Json {
    json!({
        "type": "object",
        "properties": {
            "scope": {
                "description": "A condition tree, AND-ed into every filter of the team's users \
                    (`{{currentUser.*}}` placeholders allowed)",
                "type": ["object", "null"],
            },
            "segments": {"type": "array", "items": {"type": "string"}},
            "liveQuerySegments": {"type": "array", "items": {
                "type": "object",
                "required": ["connectionName", "query"],
                "properties": {"connectionName": {"type": "string"}, "query": {"type": "string"}},
            }},
        },
    })
}

/// One team's rendering.
fn rendering_schema() -> Json {
    json!({
        "type": "object",
        "required": ["object", "id", "team", "collections", "stats"],
        "properties": {
            "object": {"const": "rendering"},
            "id": {"type": "integer"},
            "team": {"type": "object", "required": ["object", "id", "name"], "properties": {
                "object": {"const": "team"}, "id": {"type": "integer"}, "name": {"type": "string"},
            }},
            "collections": {"type": "object", "additionalProperties": rendering_collection()},
            "stats": {"type": "array", "items": {"type": "object"}},
        },
    })
}

json_schema!(
    /// One team's rendering: its scopes, SQL segments and charts.
    RenderingSchema,
    "Rendering",
    rendering_schema()
);

json_schema!(
    /// Every team's rendering.
    RenderingListSchema,
    "RenderingList",
    json!({
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"type": "array", "items": rendering_schema()}},
    })
);

json_schema!(
    /// A new rendering of a team: served collections only, scopes and segments checked.
    RenderingBodySchema,
    "RenderingBody",
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "collections": {"type": "object", "additionalProperties": rendering_collection()},
            "stats": {"type": "array", "items": {
                "type": "object", "required": ["type"], "properties": {"type": {"type": "string"}},
            }},
        },
    })
);

json_schema!(
    /// The IP whitelist: whether it is on, and its rules.
    IpWhitelistSchema,
    "IpWhitelist",
    json!({
        "type": "object",
        "required": ["use_ip_whitelist"],
        "properties": {
            "use_ip_whitelist": {
                "type": "boolean",
                "description": "On only with at least one rule",
            },
            "rules": {"type": "array", "items": {"oneOf": [
                {"type": "object", "required": ["type", "ip"], "properties": {
                    "type": {"const": 0}, "ip": {"anyOf": [{"format": "ipv4"}, {"format": "ipv6"}], "type": "string"},
                }},
                {"type": "object", "required": ["type", "ipMinimum", "ipMaximum"], "properties": {
                    "type": {"const": 1},
                    "ipMinimum": {"anyOf": [{"format": "ipv4"}, {"format": "ipv6"}], "type": "string"},
                    "ipMaximum": {"anyOf": [{"format": "ipv4"}, {"format": "ipv6"}], "type": "string"},
                }},
                {"type": "object", "required": ["type", "range"], "properties": {
                    "type": {"const": 2},
                    "range": {"type": "string", "description": "A CIDR block, e.g. 10.0.0.0/8"},
                }},
            ]}},
        },
    })
);

#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/permissions",
    operation_id = "read_permissions",
    tag = "permissions",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
    ),
    responses(
        (status = 200, description = "The environment's permissions", body = EnvironmentPermissionsSchema),
    ),
)]
async fn permissions(
    admin: Admin,
    Path((project, environment)): Path<(String, String)>,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    Ok(json(&store.environment_document().await?))
}

#[utoipa::path(
    put,
    path = "/project/{project}/environment/{environment}/permissions",
    operation_id = "set_permissions",
    tag = "permissions",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
    ),
    request_body = EnvironmentPermissionsSchema,
    responses(
        (status = 200, description = "The permissions as saved", body = EnvironmentPermissionsSchema),
        (status = 409, description = "The document is managed by a declarative permissions file", body = ErrorBody),
    ),
)]
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
            let apimap = store.apimap().await?;
            let view = SchemaView::served(state.datasource.schema())
                .with_agents(apimap.as_ref().map(|a| &a.document));
            let roles: BTreeSet<i64> = store.roles().await?.iter().map(|r| r.id).collect();
            let mut out = BTreeMap::new();
            for (name, value) in collections {
                let at = format!("collections.{name}");
                // `"*"`: every collection, those served later too.
                if name != WILDCARD && !view.has_collection(&name) {
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
        if name == WILDCARD && action != WILDCARD {
            return Err(Error::field(
                &at,
                "the \"*\" collection only takes the \"*\" action (every action)",
            ));
        }
        if action != WILDCARD && !view.has_action(name, action) {
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
            if collection == WILDCARD {
                return Err(Error::field(
                    &at,
                    "a condition names fields of one collection: it cannot apply to \"*\"",
                ));
            }
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

#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/renderings",
    operation_id = "list_renderings",
    tag = "permissions",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
    ),
    responses(
        (status = 200, description = "Every team's rendering", body = RenderingListSchema),
    ),
)]
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

#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/teams/{id}/rendering",
    operation_id = "read_rendering",
    tag = "permissions",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The team's id"),
    ),
    responses(
        (status = 200, description = "The team's rendering", body = RenderingSchema),
    ),
)]
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

#[utoipa::path(
    put,
    path = "/project/{project}/environment/{environment}/teams/{id}/rendering",
    operation_id = "set_rendering",
    tag = "permissions",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The team's id"),
    ),
    request_body = RenderingBodySchema,
    responses(
        (status = 200, description = "The rendering as saved", body = RenderingSchema),
        (status = 409, description = "The document is managed by a declarative permissions file", body = ErrorBody),
    ),
)]
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

#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/ip-whitelist",
    operation_id = "read_ip_whitelist",
    tag = "permissions",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
    ),
    responses(
        (status = 200, description = "The IP whitelist", body = IpWhitelistSchema),
    ),
)]
async fn ip_whitelist(
    admin: Admin,
    Path((project, environment)): Path<(String, String)>,
) -> Result<Response> {
    let store = admin.environment(&project, &environment).await?;
    Ok(json(&store.ip_whitelist_document().await?))
}

#[utoipa::path(
    put,
    path = "/project/{project}/environment/{environment}/ip-whitelist",
    operation_id = "set_ip_whitelist",
    tag = "permissions",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
    ),
    request_body = IpWhitelistSchema,
    responses(
        (status = 200, description = "The whitelist as saved", body = IpWhitelistSchema),
        (status = 409, description = "The document is managed by a declarative permissions file", body = ErrorBody),
    ),
)]
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
