//! The permission editor (admins): a role's collection rights as a grid of checkboxes (saved
//! through `ops::rights`), its action rights with their conditions, the teams' scopes, and
//! "what can this user do" for a chosen user.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::{Tab, admin_layout, tabs};
use crate::console::pages::{Layout, page};
use crate::console::session::{Session, first, form_pairs};
use crate::console::{Error, Result};
use crate::ops::rights::{self, ActionRights, RoleRights, Row, TeamScopes};
use crate::platform::declarative::Right;
use crate::platform::documents::WILDCARD;
use crate::state::SharedState;

/// One checkbox of the grid.
struct Cell {
    right: &'static str,
    own: bool,
    /// Held through the `"*"` row.
    via_any: bool,
}

struct GridRow {
    name: String,
    cells: Vec<Cell>,
}

/// One collection's rights of the chosen user, as words.
struct UserRow {
    collection: String,
    rights: String,
}

/// The chosen user's summary.
struct UserView {
    email: String,
    level: &'static str,
    role: String,
    teams: String,
    rows: Vec<UserRow>,
    scopes: Vec<TeamScopes>,
}

#[derive(Template)]
#[template(path = "admin_permissions.html")]
struct PermissionsPage {
    layout: Layout,
    tabs: Vec<Tab>,
    /// (id, name, chosen) of every role.
    roles: Vec<(i64, String, bool)>,
    role_name: String,
    allow_all: bool,
    rights: [&'static str; 6],
    grid: Vec<GridRow>,
    action: String,
    actions: Vec<ActionRights>,
    teams: Vec<TeamScopes>,
    /// (id, email, chosen) of every user.
    users: Vec<(i64, String, bool)>,
    user: Option<UserView>,
    notice: Option<&'static str>,
    error: Option<String>,
}

fn grid(rights: &RoleRights) -> Vec<GridRow> {
    rights
        .rows
        .iter()
        .map(|(name, own, any)| GridRow {
            name: name.clone(),
            cells: Right::ALL
                .iter()
                .zip(own.iter().zip(any))
                .map(|(right, (own, any))| Cell {
                    right: right.as_str(),
                    own: *own,
                    via_any: *any && !*own,
                })
                .collect(),
        })
        .collect()
}

/// The rights held on each served collection (own or through `"*"`), as words.
fn user_rows(rights: &RoleRights) -> Vec<UserRow> {
    rights
        .rows
        .iter()
        .filter(|(name, _, _)| name != WILDCARD)
        .map(|(name, own, any)| {
            let held: Vec<&str> = Right::ALL
                .iter()
                .zip(own.iter().zip(any))
                .filter(|(_, (own, any))| **own || **any)
                .map(|(right, _)| right.as_str())
                .collect();
            UserRow {
                collection: name.clone(),
                rights: if held.is_empty() {
                    "nothing".to_owned()
                } else {
                    held.join(", ")
                },
            }
        })
        .collect()
}

/// `GET /console/admin/permissions?role=…&user=…`.
pub async fn editor(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let query = form_pairs(query.unwrap_or_default().as_bytes());
    let id = |key: &str| first(&query, key).and_then(|v| v.parse::<i64>().ok());
    let notice = (first(&query, "saved") == Some("1")).then_some("The role's rights were saved.");
    render(&state, &session, id("role"), id("user"), notice, None).await
}

async fn render(
    state: &SharedState,
    session: &Session,
    role: Option<i64>,
    user: Option<i64>,
    notice: Option<&'static str>,
    error: Option<String>,
) -> Result<Response> {
    let layout = admin_layout(state, session, "permissions", "Permissions".to_owned()).await?;
    let ops = &state.ops;
    let caller = &session.caller;
    let all_roles = rights::roles(ops, caller).await?;
    let Some(chosen) = role.or_else(|| all_roles.first().map(|r| r.id)) else {
        return Err(Error::NotFound(
            "No role exists yet: create one with POST /v1/project/…/roles.".to_owned(),
        ));
    };
    let rights = rights::role_rights(ops, caller, chosen).await?;
    let users = crate::ops::users::list(ops, caller).await?;
    let chosen_user = user;
    let user = match user {
        Some(id) => {
            let (user, role_rights, scopes) = rights::of_user(ops, caller, id).await?;
            Some(UserView {
                email: user.email.clone(),
                level: user.permission_level.as_str(),
                role: user
                    .role
                    .as_ref()
                    .map(|r| r.name.clone())
                    .unwrap_or_default(),
                teams: user
                    .teams
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                rows: role_rights.as_ref().map(user_rows).unwrap_or_default(),
                scopes,
            })
        }
        None => None,
    };
    let status = if error.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        status,
        &PermissionsPage {
            tabs: tabs(&session.base, "permissions"),
            roles: all_roles
                .iter()
                .map(|r| (r.id, r.name.clone(), r.id == chosen))
                .collect(),
            role_name: rights.role.name.clone(),
            allow_all: rights.allow_all,
            rights: Right::ALL.map(Right::as_str),
            grid: grid(&rights),
            action: format!("{}/admin/permissions/{chosen}", session.base),
            actions: rights.actions,
            teams: rights::team_scopes(ops, caller).await?,
            users: users
                .iter()
                .map(|u| (u.id, u.email.clone(), Some(u.id) == chosen_user))
                .collect(),
            user,
            notice,
            error,
            layout,
        },
    )
}

/// `POST /console/admin/permissions/{role}`: saves the role's grid.
pub async fn save(
    State(state): State<SharedState>,
    session: Session,
    Path(role): Path<i64>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response> {
    let pairs = session.form(&headers, &body)?;
    let mut rows: BTreeMap<String, Row> = pairs
        .iter()
        .filter(|(k, _)| k == "row")
        .map(|(_, name)| (name.clone(), [false; 6]))
        .collect();
    for (key, _) in &pairs {
        let Some((name, right)) = key
            .strip_prefix("right:")
            .and_then(|rest| rest.rsplit_once(':'))
        else {
            continue;
        };
        let (Some(row), Some(at)) = (
            rows.get_mut(name),
            Right::ALL.iter().position(|r| r.as_str() == right),
        ) else {
            continue;
        };
        row[at] = true;
    }
    match rights::set_role_rights(&state.ops, &session.caller, role, &rows).await {
        Ok(()) => Ok(Redirect::to(&format!(
            "{}/admin/permissions?role={role}&saved=1",
            session.base
        ))
        .into_response()),
        Err(
            error @ (crate::ops::Error::Field { .. }
            | crate::ops::Error::Platform(crate::platform::Error::Conflict(_))),
        ) => {
            render(
                &state,
                &session,
                Some(role),
                None,
                None,
                Some(error.to_string()),
            )
            .await
        }
        Err(other) => Err(other.into()),
    }
}
