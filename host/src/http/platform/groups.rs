//! `/v1/project/{project}/teams[/{id}]` and `/v1/project/{project}/roles[/{id}]`: list,
//! create, read, rename, remove.

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::json;

use super::{Admin, Body, Error, Fields as _, Result, id, no_content};
use crate::http::{SharedState, json, json_with};
use crate::platform::Store;
use crate::platform::declarative::{self, Part};

pub fn router() -> Router<SharedState> {
    Router::new()
        .route(
            "/project/{project}/teams",
            get(list_teams).post(create_team),
        )
        .route(
            "/project/{project}/teams/{id}",
            get(read_team).patch(rename_team).delete(remove_team),
        )
        .route(
            "/project/{project}/roles",
            get(list_roles).post(create_role),
        )
        .route(
            "/project/{project}/roles/{id}",
            get(read_role).patch(rename_role).delete(remove_role),
        )
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

    fn part(self) -> Part {
        match self {
            Self::Team => Part::Teams,
            Self::Role => Part::Roles,
        }
    }

    async fn all(self, store: &Store) -> Result<Vec<(i64, String)>> {
        Ok(match self {
            Self::Team => store
                .teams()
                .await?
                .into_iter()
                .map(|t| (t.id, t.name))
                .collect(),
            Self::Role => store
                .roles()
                .await?
                .into_iter()
                .map(|r| (r.id, r.name))
                .collect(),
        })
    }

    async fn find(self, store: &Store, raw: &str) -> Result<(i64, String)> {
        let id = id("id", raw)?;
        self.all(store)
            .await?
            .into_iter()
            .find(|(found, _)| *found == id)
            .ok_or_else(|| Error::NotFound(format!("{} {id} not found", self.name())))
    }
}

fn item(kind: Kind, id: i64, name: &str) -> serde_json::Value {
    json!({"object": kind.name(), "id": id, "name": name})
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
    let items: Vec<_> = kind
        .all(store)
        .await?
        .iter()
        .map(|(id, name)| item(kind, *id, name))
        .collect();
    Ok(json(&json!({"data": items})))
}

async fn read(kind: Kind, admin: Admin, project: String, raw: String) -> Result<Response> {
    let store = admin.project(&project)?;
    let (id, name) = kind.find(store, &raw).await?;
    Ok(json(&item(kind, id, &name)))
}

async fn create(
    kind: Kind,
    admin: Admin,
    project: String,
    body: serde_json::Map<String, serde_json::Value>,
) -> Result<Response> {
    let store = admin.project(&project)?;
    let name = name_of(&body)?;
    declarative::guard(store, kind.part()).await?;
    let actor = admin.actor();
    let (id, name) = match kind {
        Kind::Team => {
            let team = store.create_team(&actor, &name).await?;
            (team.id, team.name)
        }
        Kind::Role => {
            let role = store.create_role(&actor, &name).await?;
            (role.id, role.name)
        }
    };
    Ok(json_with(StatusCode::CREATED, &item(kind, id, &name)))
}

async fn rename(
    kind: Kind,
    admin: Admin,
    project: String,
    raw: String,
    body: serde_json::Map<String, serde_json::Value>,
) -> Result<Response> {
    let store = admin.project(&project)?;
    let new_name = name_of(&body)?;
    let (id, name) = kind.find(store, &raw).await?;
    declarative::guard(store, kind.part()).await?;
    let actor = admin.actor();
    let renamed = match kind {
        Kind::Team => store.rename_team(&actor, &name, &new_name).await?.name,
        Kind::Role => store.rename_role(&actor, &name, &new_name).await?.name,
    };
    Ok(json(&item(kind, id, &renamed)))
}

async fn remove(kind: Kind, admin: Admin, project: String, raw: String) -> Result<Response> {
    let store = admin.project(&project)?;
    let (_, name) = kind.find(store, &raw).await?;
    declarative::guard(store, kind.part()).await?;
    let actor = admin.actor();
    match kind {
        Kind::Team => store.remove_team(&actor, &name).await?,
        Kind::Role => store.remove_role(&actor, &name).await?,
    }
    Ok(no_content())
}

async fn list_teams(admin: Admin, Path(project): Path<String>) -> Result<Response> {
    list(Kind::Team, admin, project).await
}

async fn list_roles(admin: Admin, Path(project): Path<String>) -> Result<Response> {
    list(Kind::Role, admin, project).await
}

async fn read_team(admin: Admin, Path((p, id)): Path<(String, String)>) -> Result<Response> {
    read(Kind::Team, admin, p, id).await
}

async fn read_role(admin: Admin, Path((p, id)): Path<(String, String)>) -> Result<Response> {
    read(Kind::Role, admin, p, id).await
}

async fn create_team(admin: Admin, Path(p): Path<String>, Body(b): Body) -> Result<Response> {
    create(Kind::Team, admin, p, b).await
}

async fn create_role(admin: Admin, Path(p): Path<String>, Body(b): Body) -> Result<Response> {
    create(Kind::Role, admin, p, b).await
}

async fn rename_team(
    admin: Admin,
    Path((p, id)): Path<(String, String)>,
    Body(b): Body,
) -> Result<Response> {
    rename(Kind::Team, admin, p, id, b).await
}

async fn rename_role(
    admin: Admin,
    Path((p, id)): Path<(String, String)>,
    Body(b): Body,
) -> Result<Response> {
    rename(Kind::Role, admin, p, id, b).await
}

async fn remove_team(admin: Admin, Path((p, id)): Path<(String, String)>) -> Result<Response> {
    remove(Kind::Team, admin, p, id).await
}

async fn remove_role(admin: Admin, Path((p, id)): Path<(String, String)>) -> Result<Response> {
    remove(Kind::Role, admin, p, id).await
}
