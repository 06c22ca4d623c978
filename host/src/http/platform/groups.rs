//! `/v1/project/{project}/teams[/{id}]` and `/v1/project/{project}/roles[/{id}]`: list,
//! create, read, rename, remove.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Admin, Body, Error, Fields as _, Result, id, no_content};
use crate::http::openapi::ErrorBody;
use crate::http::{SharedState, json, json_with};
use crate::ops;
use crate::platform::Store;

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(list_teams, create_team))
        .routes(routes!(read_team, rename_team, remove_team))
        .routes(routes!(list_roles, create_role))
        .routes(routes!(read_role, rename_role, remove_role))
}

/// A team or a role.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: item writes it")]
pub struct Group {
    /// `team` or `role`.
    #[schema(pattern = "^(team|role)$")]
    object: String,
    id: i64,
    name: String,
    /// Teams only: the id of the team's rendering in the served environment, the `renderingId`
    /// of its users' session tokens (and of `/liana/v4/permissions/renderings/{id}`).
    #[schema(nullable = false)]
    rendering_id: Option<i64>,
}

/// Every team, or every role.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: list writes it")]
pub struct GroupList {
    data: Vec<Group>,
}

/// The name of a new or renamed team or role.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "documentation only: name_of reads it")]
pub struct GroupName {
    /// Not blank.
    #[schema(pattern = r"\S")]
    name: String,
}

#[derive(Clone, Copy)]
enum Kind {
    Team,
    Role,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Team => "team",
            Self::Role => "role",
        }
    }

    fn group(self) -> ops::users::Group {
        match self {
            Self::Team => ops::users::Group::Team,
            Self::Role => ops::users::Group::Role,
        }
    }

    /// Each group as it is answered.
    async fn all(self, store: &Store) -> Result<Vec<(i64, serde_json::Value)>> {
        Ok(match self {
            Self::Team => {
                let renderings = store.rendering_ids_by_team().await?;
                store
                    .teams()
                    .await?
                    .into_iter()
                    .map(|t| {
                        let item = team_item(t.id, &t.name, renderings.get(&t.id).copied());
                        (t.id, item)
                    })
                    .collect()
            }
            Self::Role => store
                .roles()
                .await?
                .into_iter()
                .map(|r| (r.id, item(self, r.id, &r.name)))
                .collect(),
        })
    }

    async fn find(self, store: &Store, raw: &str) -> Result<serde_json::Value> {
        let id = id("id", raw)?;
        self.all(store)
            .await?
            .into_iter()
            .find(|(found, _)| *found == id)
            .map(|(_, item)| item)
            .ok_or_else(|| Error::NotFound(format!("{} {id} not found", self.name())))
    }
}

fn item(kind: Kind, id: i64, name: &str) -> serde_json::Value {
    json!({"object": kind.name(), "id": id, "name": name})
}

/// A team, with its rendering's id in the served environment (when it has one there).
fn team_item(id: i64, name: &str, rendering_id: Option<i64>) -> serde_json::Value {
    let mut item = item(Kind::Team, id, name);
    if let Some(rendering_id) = rendering_id {
        item["renderingId"] = json!(rendering_id);
    }
    item
}

fn name_of(body: &serde_json::Map<String, serde_json::Value>) -> Result<String> {
    body.only(&["name"])?;
    let name = body
        .string("name")?
        .ok_or_else(|| Error::field("name", "is required"))?;
    if name.trim().is_empty() {
        return Err(Error::field("name", "must not be empty"));
    }
    Ok(name)
}

async fn list(kind: Kind, admin: Admin, project: String) -> Result<Response> {
    let store = admin.project(&project)?;
    let items: Vec<_> = kind.all(store).await?.into_iter().map(|(_, i)| i).collect();
    Ok(json(&json!({"data": items})))
}

async fn read(kind: Kind, admin: Admin, project: String, raw: String) -> Result<Response> {
    let store = admin.project(&project)?;
    Ok(json(&kind.find(store, &raw).await?))
}

async fn create(
    kind: Kind,
    state: SharedState,
    admin: Admin,
    project: String,
    body: serde_json::Map<String, serde_json::Value>,
) -> Result<Response> {
    let store = admin.project(&project)?;
    let name = name_of(&body)?;
    let id = ops::users::create_group(&state.ops, &admin.caller(), kind.group(), &name).await?;
    let created = kind.find(store, &id.to_string()).await?;
    Ok(json_with(StatusCode::CREATED, &created))
}

async fn rename(
    kind: Kind,
    state: SharedState,
    admin: Admin,
    project: String,
    raw: String,
    body: serde_json::Map<String, serde_json::Value>,
) -> Result<Response> {
    let store = admin.project(&project)?;
    let new_name = name_of(&body)?;
    let mut found = kind.find(store, &raw).await?;
    let group_id = id("id", &raw)?;
    let renamed = ops::users::rename_group(
        &state.ops,
        &admin.caller(),
        kind.group(),
        group_id,
        &new_name,
    )
    .await?;
    found["name"] = json!(renamed);
    Ok(json(&found))
}

async fn remove(
    kind: Kind,
    state: SharedState,
    admin: Admin,
    project: String,
    raw: String,
) -> Result<Response> {
    let store = admin.project(&project)?;
    kind.find(store, &raw).await?;
    let group_id = id("id", &raw)?;
    ops::users::remove_group(&state.ops, &admin.caller(), kind.group(), group_id).await?;
    Ok(no_content())
}

#[utoipa::path(
    get,
    path = "/project/{project}/teams",
    tag = "teams",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
    ),
    responses(
        (status = 200, description = "Every team", body = GroupList),
    ),
)]
async fn list_teams(admin: Admin, Path(project): Path<String>) -> Result<Response> {
    list(Kind::Team, admin, project).await
}

#[utoipa::path(
    get,
    path = "/project/{project}/roles",
    tag = "roles",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
    ),
    responses(
        (status = 200, description = "Every role", body = GroupList),
    ),
)]
async fn list_roles(admin: Admin, Path(project): Path<String>) -> Result<Response> {
    list(Kind::Role, admin, project).await
}

#[utoipa::path(
    get,
    path = "/project/{project}/teams/{id}",
    tag = "teams",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The team's id"),
    ),
    responses(
        (status = 200, description = "The team", body = Group),
    ),
)]
async fn read_team(admin: Admin, Path((p, id)): Path<(String, String)>) -> Result<Response> {
    read(Kind::Team, admin, p, id).await
}

#[utoipa::path(
    get,
    path = "/project/{project}/roles/{id}",
    tag = "roles",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The role's id"),
    ),
    responses(
        (status = 200, description = "The role", body = Group),
    ),
)]
async fn read_role(admin: Admin, Path((p, id)): Path<(String, String)>) -> Result<Response> {
    read(Kind::Role, admin, p, id).await
}

#[utoipa::path(
    post,
    path = "/project/{project}/teams",
    tag = "teams",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
    ),
    request_body = GroupName,
    responses(
        (status = 201, description = "The new team", body = Group),
        (status = 409, description = "The name is taken, or the project's teams are managed by a declarative file", body = ErrorBody),
    ),
)]
async fn create_team(
    State(state): State<SharedState>,
    admin: Admin,
    Path(p): Path<String>,
    Body(b): Body,
) -> Result<Response> {
    create(Kind::Team, state, admin, p, b).await
}

#[utoipa::path(
    post,
    path = "/project/{project}/roles",
    tag = "roles",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
    ),
    request_body = GroupName,
    responses(
        (status = 201, description = "The new role", body = Group),
        (status = 409, description = "The name is taken, or the project's roles are managed by a declarative file", body = ErrorBody),
    ),
)]
async fn create_role(
    State(state): State<SharedState>,
    admin: Admin,
    Path(p): Path<String>,
    Body(b): Body,
) -> Result<Response> {
    create(Kind::Role, state, admin, p, b).await
}

#[utoipa::path(
    patch,
    path = "/project/{project}/teams/{id}",
    tag = "teams",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The team's id"),
    ),
    request_body = GroupName,
    responses(
        (status = 200, description = "The renamed team", body = Group),
        (status = 409, description = "The name is taken, or the project's teams are managed by a declarative file", body = ErrorBody),
    ),
)]
async fn rename_team(
    State(state): State<SharedState>,
    admin: Admin,
    Path((p, id)): Path<(String, String)>,
    Body(b): Body,
) -> Result<Response> {
    rename(Kind::Team, state, admin, p, id, b).await
}

#[utoipa::path(
    patch,
    path = "/project/{project}/roles/{id}",
    tag = "roles",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The role's id"),
    ),
    request_body = GroupName,
    responses(
        (status = 200, description = "The renamed role", body = Group),
        (status = 409, description = "The name is taken, or the project's roles are managed by a declarative file", body = ErrorBody),
    ),
)]
async fn rename_role(
    State(state): State<SharedState>,
    admin: Admin,
    Path((p, id)): Path<(String, String)>,
    Body(b): Body,
) -> Result<Response> {
    rename(Kind::Role, state, admin, p, id, b).await
}

#[utoipa::path(
    delete,
    path = "/project/{project}/teams/{id}",
    tag = "teams",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The team's id"),
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 409, description = "The team has members, or the project's teams are managed by a declarative file", body = ErrorBody),
    ),
)]
async fn remove_team(
    State(state): State<SharedState>,
    admin: Admin,
    Path((p, id)): Path<(String, String)>,
) -> Result<Response> {
    remove(Kind::Team, state, admin, p, id).await
}

#[utoipa::path(
    delete,
    path = "/project/{project}/roles/{id}",
    tag = "roles",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The role's id"),
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 409, description = "A user holds the role, or the project's roles are managed by a declarative file", body = ErrorBody),
    ),
)]
async fn remove_role(
    State(state): State<SharedState>,
    admin: Admin,
    Path((p, id)): Path<(String, String)>,
) -> Result<Response> {
    remove(Kind::Role, state, admin, p, id).await
}
