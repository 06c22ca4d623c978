//! `/v1/project/{project}/users[/{id}]`: list, create, read, change, remove.

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value as Json, json};

use super::{Admin, Body, Error, Fields as _, Result, id, no_content};
use crate::datasource::PermissionLevel;
use crate::http::{SharedState, json, json_with};
use crate::platform::declarative::{self, Part};
use crate::platform::store::parse_level;
use crate::platform::{NewUser, Store, User, UserChange, password};

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/project/{project}/users", get(list).post(create))
        .route(
            "/project/{project}/users/{id}",
            get(read).patch(change).delete(remove),
        )
}

/// A user as the API shows them (never a password hash).
pub fn user_json(user: &User) -> Json {
    json!({
        "object": "user",
        "id": user.id,
        "email": user.email,
        "firstName": user.first_name,
        "lastName": user.last_name,
        "permissionLevel": user.permission_level.as_str(),
        "role": user.role.as_ref().map(|r| json!({"object": "role", "id": r.id, "name": r.name})),
        "teams": user.teams.iter().map(|t| json!({"object": "team", "id": t.id, "name": t.name})).collect::<Vec<_>>(),
        "tags": user.tags,
        "disabled": user.disabled,
        "hasPassword": user.has_password,
    })
}

async fn list(admin: Admin, Path(project): Path<String>) -> Result<Response> {
    let store = admin.project(&project)?;
    let users: Vec<Json> = store.users().await?.iter().map(user_json).collect();
    Ok(json(&json!({"data": users})))
}

async fn read(admin: Admin, Path((project, raw)): Path<(String, String)>) -> Result<Response> {
    let store = admin.project(&project)?;
    let id = id("id", &raw)?;
    let user = store
        .user(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("user {id} not found")))?;
    Ok(json(&user_json(&user)))
}

const FIELDS: [&str; 9] = [
    "email",
    "firstName",
    "lastName",
    "permissionLevel",
    "role",
    "teams",
    "tags",
    "password",
    "disabled",
];

fn level(body: &serde_json::Map<String, Json>) -> Result<Option<PermissionLevel>> {
    body.string("permissionLevel")?
        .map(|l| parse_level(&l).map_err(|e| Error::field("permissionLevel", e)))
        .transpose()
}

fn password_hash(clear: &str) -> Result<String> {
    password::hash(clear).map_err(|e| Error::field("password", e))
}

async fn create(admin: Admin, Path(project): Path<String>, Body(body): Body) -> Result<Response> {
    let store = admin.project(&project)?;
    body.only(&FIELDS)?;
    let email = body
        .string("email")?
        .ok_or_else(|| Error::field("email", "is required"))?;
    if body.contains_key("disabled") {
        return Err(Error::field(
            "disabled",
            "a new user is enabled; disable them with PATCH",
        ));
    }
    let new = NewUser {
        email,
        first_name: body.string("firstName")?.unwrap_or_default(),
        last_name: body.string("lastName")?.unwrap_or_default(),
        permission_level: level(&body)?.unwrap_or_default(),
        role: body.nullable_string("role")?.flatten(),
        teams: body.strings("teams")?.unwrap_or_default(),
        tags: body.tags("tags")?.unwrap_or_default(),
        password_hash: body
            .string("password")?
            .map(|p| password_hash(&p))
            .transpose()?,
    };
    declarative::guard(store, Part::Users).await?;
    check_names(store, new.role.as_deref(), &new.teams).await?;
    let user = store
        .create_user(&admin.actor(), new)
        .await
        .map_err(|e| match e {
            crate::platform::Error::Invalid(message) => Error::field("email", message),
            other => other.into(),
        })?;
    Ok(json_with(StatusCode::CREATED, &user_json(&user)))
}

/// A role or team that does not exist is a 400 naming the field, not a 404 of the user.
async fn check_names(store: &Store, role: Option<&str>, teams: &[String]) -> Result<()> {
    if let Some(role) = role
        && store.role_by_name(role).await?.is_none()
    {
        return Err(Error::field("role", format!("no role named {role:?}")));
    }
    for (i, team) in teams.iter().enumerate() {
        if store.team_by_name(team).await?.is_none() {
            return Err(Error::field(
                &format!("teams[{i}]"),
                format!("no team named {team:?}"),
            ));
        }
    }
    Ok(())
}

async fn change(
    admin: Admin,
    Path((project, raw)): Path<(String, String)>,
    Body(body): Body,
) -> Result<Response> {
    let store = admin.project(&project)?;
    let id = id("id", &raw)?;
    body.only(&FIELDS)?;
    let before = store
        .user(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("user {id} not found")))?;
    let change = UserChange {
        email: body.string("email")?,
        first_name: body.string("firstName")?,
        last_name: body.string("lastName")?,
        permission_level: level(&body)?,
        role: body.nullable_string("role")?,
        teams: body.strings("teams")?,
        tags: body.tags("tags")?,
        disabled: body.boolean("disabled")?,
        password_hash: match body.nullable_string("password")? {
            None => None,
            Some(None) => Some(None),
            Some(Some(clear)) => Some(Some(password_hash(&clear)?)),
        },
    };
    let managed = declarative::managed(store).await?;
    if body.keys().all(|k| k == "password") {
        managed.check_password(&before.email)?;
    } else {
        managed.check(Part::Users)?;
    }
    check_names(
        store,
        change.role.clone().flatten().as_deref(),
        change.teams.as_deref().unwrap_or_default(),
    )
    .await?;
    let demoted = change
        .permission_level
        .is_some_and(|l| l != PermissionLevel::Admin);
    if id == admin.user.id && (change.disabled == Some(true) || demoted) {
        return Err(Error::Conflict(
            "an admin cannot disable or demote themselves: ask another admin".to_owned(),
        ));
    }
    let user = store
        .update_user(&admin.actor(), id, change)
        .await
        .map_err(|e| match e {
            crate::platform::Error::Invalid(message) => Error::field("email", message),
            other => other.into(),
        })?;
    Ok(json(&user_json(&user)))
}

async fn remove(admin: Admin, Path((project, raw)): Path<(String, String)>) -> Result<Response> {
    let store = admin.project(&project)?;
    let id = id("id", &raw)?;
    declarative::guard(store, Part::Users).await?;
    if id == admin.user.id {
        return Err(Error::Conflict(
            "an admin cannot remove themselves: ask another admin".to_owned(),
        ));
    }
    store.remove_user(&admin.actor(), id).await?;
    Ok(no_content())
}
