//! `/v1/project/{project}/users[/{id}]`: list, create, read, change, remove.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value as Json, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Admin, Body, Error, Fields as _, Result, id, no_content};
use crate::datasource::PermissionLevel;
use crate::http::openapi::ErrorBody;
use crate::http::{SharedState, json, json_with};
use crate::ops;
use crate::platform::store::parse_level;
use crate::platform::{NewUser, User, UserChange, password};

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, change, remove))
}

/// A role or team as a user shows it.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: user_json writes it")]
pub struct NamedRef {
    /// `role` or `team`.
    object: String,
    id: i64,
    name: String,
}

/// The permission levels of a user.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code, reason = "documentation only: the store's PermissionLevel")]
pub enum Level {
    Admin,
    Developer,
    Editor,
    User,
}

/// A user of the project (never their password or its hash).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: user_json writes it")]
#[schema(as = User)]
pub struct UserSchema {
    /// Always `user`.
    object: String,
    id: i64,
    email: String,
    first_name: String,
    last_name: String,
    permission_level: Level,
    role: Option<NamedRef>,
    teams: Vec<NamedRef>,
    tags: BTreeMap<String, String>,
    disabled: bool,
    /// Whether they may sign in with a password.
    has_password: bool,
}

/// Every user of the project.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: list writes it")]
pub struct UserList {
    data: Vec<UserSchema>,
}

/// A new user. Role and teams are named and must exist; the password needs at least 8
/// characters (without one, the user signs in through the identity provider).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "documentation only: create reads the body field by field"
)]
#[schema(as = NewUser)]
pub struct NewUserSchema {
    #[schema(pattern = r"^[^@\s]+@\S+$")]
    email: String,
    #[schema(nullable = false)]
    first_name: Option<String>,
    #[schema(nullable = false)]
    last_name: Option<String>,
    #[schema(nullable = false)]
    permission_level: Option<Level>,
    role: Option<String>,
    #[schema(nullable = false)]
    teams: Option<Vec<String>>,
    #[schema(nullable = false, schema_with = crate::http::openapi::tags)]
    tags: Option<BTreeMap<String, String>>,
    #[schema(nullable = false, min_length = 8)]
    password: Option<String>,
}

/// The fields to change; a `null` role or password removes it. An admin cannot disable or
/// demote themselves (409).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "documentation only: change reads the body field by field"
)]
#[schema(as = UserChange)]
pub struct UserChangeSchema {
    #[schema(nullable = false, pattern = r"^[^@\s]+@\S+$")]
    email: Option<String>,
    #[schema(nullable = false)]
    first_name: Option<String>,
    #[schema(nullable = false)]
    last_name: Option<String>,
    #[schema(nullable = false)]
    permission_level: Option<Level>,
    role: Option<String>,
    #[schema(nullable = false)]
    teams: Option<Vec<String>>,
    #[schema(nullable = false, schema_with = crate::http::openapi::tags)]
    tags: Option<BTreeMap<String, String>>,
    #[schema(nullable = false)]
    disabled: Option<bool>,
    #[schema(min_length = 8)]
    password: Option<String>,
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

/// Lists the project's users.
#[utoipa::path(
    get,
    path = "/project/{project}/users",
    operation_id = "list_users",
    tag = "users",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
    ),
    responses((status = 200, description = "Every user", body = UserList)),
)]
async fn list(
    State(state): State<SharedState>,
    admin: Admin,
    Path(project): Path<String>,
) -> Result<Response> {
    admin.project(&project)?;
    let users = ops::users::list(&state.ops, &admin.caller()).await?;
    let users: Vec<Json> = users.iter().map(user_json).collect();
    Ok(json(&json!({"data": users})))
}

/// Reads one user.
#[utoipa::path(
    get,
    path = "/project/{project}/users/{id}",
    operation_id = "read_user",
    tag = "users",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The user's id"),
    ),
    responses((status = 200, description = "The user", body = UserSchema)),
)]
async fn read(
    State(state): State<SharedState>,
    admin: Admin,
    Path((project, raw)): Path<(String, String)>,
) -> Result<Response> {
    admin.project(&project)?;
    let id = id("id", &raw)?;
    let user = ops::users::get(&state.ops, &admin.caller(), id).await?;
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

/// Creates a user (enabled).
#[utoipa::path(
    post,
    path = "/project/{project}/users",
    operation_id = "create_user",
    tag = "users",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
    ),
    request_body = NewUserSchema,
    responses(
        (status = 201, description = "The new user", body = UserSchema),
        (status = 409, description = "A user has this email", body = ErrorBody),
    ),
)]
async fn create(
    State(state): State<SharedState>,
    admin: Admin,
    Path(project): Path<String>,
    Body(body): Body,
) -> Result<Response> {
    admin.project(&project)?;
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
    let user = ops::users::create(&state.ops, &admin.caller(), new).await?;
    Ok(json_with(StatusCode::CREATED, &user_json(&user)))
}

/// Changes a user.
#[utoipa::path(
    patch,
    path = "/project/{project}/users/{id}",
    operation_id = "change_user",
    tag = "users",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The user's id"),
    ),
    request_body = UserChangeSchema,
    responses(
        (status = 200, description = "The user as changed", body = UserSchema),
        (status = 409, description = "Another user has this email, or an admin would disable or demote themselves", body = ErrorBody),
    ),
)]
async fn change(
    State(state): State<SharedState>,
    admin: Admin,
    Path((project, raw)): Path<(String, String)>,
    Body(body): Body,
) -> Result<Response> {
    admin.project(&project)?;
    let id = id("id", &raw)?;
    body.only(&FIELDS)?;
    // An unknown user is refused before the body's values are read.
    ops::users::get(&state.ops, &admin.caller(), id).await?;
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
    let user = ops::users::change(&state.ops, &admin.caller(), id, change).await?;
    Ok(json(&user_json(&user)))
}

/// Removes a user.
#[utoipa::path(
    delete,
    path = "/project/{project}/users/{id}",
    operation_id = "remove_user",
    tag = "users",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The user's id"),
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 409, description = "An admin cannot remove themselves", body = ErrorBody),
    ),
)]
async fn remove(
    State(state): State<SharedState>,
    admin: Admin,
    Path((project, raw)): Path<(String, String)>,
) -> Result<Response> {
    admin.project(&project)?;
    let id = id("id", &raw)?;
    ops::users::remove(&state.ops, &admin.caller(), id).await?;
    Ok(no_content())
}
