//! The project's users (admins): the list, and a user's form (name, email, permission level,
//! role, teams, disabled) with each refusal shown next to its field and nothing changed.

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::{Tab, admin_layout, tabs};
use crate::console::pages::{Layout, page};
use crate::console::session::{Session, first};
use crate::console::{Error, Result};
use crate::ops;
use crate::platform::store::parse_level;
use crate::platform::{User, UserChange};
use crate::state::SharedState;

/// The permission levels, as the store names them.
const LEVELS: [&str; 4] = ["admin", "developer", "editor", "user"];

struct Row {
    id: i64,
    email: String,
    name: String,
    level: &'static str,
    role: String,
    teams: String,
    disabled: bool,
}

#[derive(Template)]
#[template(path = "admin_users.html")]
struct UsersPage {
    layout: Layout,
    tabs: Vec<Tab>,
    rows: Vec<Row>,
    notice: Option<&'static str>,
}

/// `GET /console/admin/users`.
pub async fn list(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let layout = admin_layout(&state, &session, "users", "Users".to_owned()).await?;
    let rows = ops::users::list(&state.ops, &session.caller)
        .await?
        .into_iter()
        .map(|user| Row {
            id: user.id,
            name: user.full_name().trim().to_owned(),
            level: user.permission_level.as_str(),
            role: user.role.map(|r| r.name).unwrap_or_default(),
            teams: user
                .teams
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            disabled: user.disabled,
            email: user.email,
        })
        .collect();
    let notice = query
        .is_some_and(|q| q.split('&').any(|p| p == "saved=1"))
        .then_some("The user was saved.");
    page(
        StatusCode::OK,
        &UsersPage {
            tabs: tabs(&session.base, "users"),
            layout,
            rows,
            notice,
        },
    )
}

/// A user's form: values as typed, and the refusals by field.
#[derive(Default)]
struct Draft {
    email: String,
    first_name: String,
    last_name: String,
    level: String,
    role: String,
    teams: Vec<String>,
    disabled: bool,
    email_error: Option<String>,
    level_error: Option<String>,
    role_error: Option<String>,
    teams_error: Option<String>,
    error: Option<String>,
}

impl Draft {
    fn of(user: &User) -> Self {
        Self {
            email: user.email.clone(),
            first_name: user.first_name.clone(),
            last_name: user.last_name.clone(),
            level: user.permission_level.as_str().to_owned(),
            role: user
                .role
                .as_ref()
                .map(|r| r.name.clone())
                .unwrap_or_default(),
            teams: user.teams.iter().map(|t| t.name.clone()).collect(),
            disabled: user.disabled,
            ..Self::default()
        }
    }

    fn refused(&self) -> bool {
        self.email_error.is_some()
            || self.level_error.is_some()
            || self.role_error.is_some()
            || self.teams_error.is_some()
            || self.error.is_some()
    }
}

#[derive(Template)]
#[template(path = "admin_user.html")]
struct UserPage {
    layout: Layout,
    tabs: Vec<Tab>,
    heading: String,
    action: String,
    back: String,
    levels: [&'static str; 4],
    roles: Vec<String>,
    /// Each team, and whether the user is in it.
    teams: Vec<(String, bool)>,
    draft: Draft,
    /// Whether this is the signed-in admin (who cannot demote or disable themselves).
    own: bool,
}

/// `GET /console/admin/users/{id}`: the user's form.
pub async fn edit(
    State(state): State<SharedState>,
    session: Session,
    Path(id): Path<i64>,
) -> Result<Response> {
    let user = ops::users::get(&state.ops, &session.caller, id).await?;
    render(&state, &session, &user, Draft::of(&user)).await
}

async fn render(
    state: &SharedState,
    session: &Session,
    user: &User,
    draft: Draft,
) -> Result<Response> {
    let heading = format!("Edit {}", user.email);
    let layout = admin_layout(state, session, "users", heading.clone()).await?;
    let (roles, teams) = ops::users::roles_and_teams(&state.ops, &session.caller).await?;
    let teams = teams
        .into_iter()
        .map(|t| {
            let member = draft.teams.contains(&t.name);
            (t.name, member)
        })
        .collect();
    let status = if draft.refused() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        status,
        &UserPage {
            tabs: tabs(&session.base, "users"),
            heading,
            action: format!("{}/admin/users/{}", session.base, user.id),
            back: format!("{}/admin/users", session.base),
            levels: LEVELS,
            roles: roles.into_iter().map(|r| r.name).collect(),
            teams,
            own: user.id == session.caller.id,
            draft,
            layout,
        },
    )
}

/// `POST /console/admin/users/{id}`: saves the form, or shows it again with what is wrong.
pub async fn save(
    State(state): State<SharedState>,
    session: Session,
    Path(id): Path<i64>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response> {
    let pairs = session.form(&headers, &body)?;
    let user = ops::users::get(&state.ops, &session.caller, id).await?;
    let text = |key: &str| first(&pairs, key).unwrap_or("").trim().to_owned();
    let mut draft = Draft {
        email: text("email"),
        first_name: text("firstName"),
        last_name: text("lastName"),
        level: text("permissionLevel"),
        role: text("role"),
        teams: pairs
            .iter()
            .filter(|(k, _)| k == "team")
            .map(|(_, v)| v.clone())
            .collect(),
        disabled: first(&pairs, "disabled") == Some("on"),
        ..Draft::default()
    };
    if draft.email.is_empty() {
        draft.email_error = Some("An email is required: the user signs in with it.".to_owned());
    }
    let level = match parse_level(&draft.level) {
        Ok(level) => Some(level),
        Err(error) => {
            draft.level_error = Some(error.to_string());
            None
        }
    };
    let (Some(level), false) = (level, draft.refused()) else {
        return render(&state, &session, &user, draft).await;
    };
    let change = UserChange {
        email: Some(draft.email.clone()),
        first_name: Some(draft.first_name.clone()),
        last_name: Some(draft.last_name.clone()),
        permission_level: Some(level),
        role: Some((!draft.role.is_empty()).then(|| draft.role.clone())),
        teams: Some(draft.teams.clone()),
        tags: None,
        disabled: Some(draft.disabled),
        password_hash: None,
    };
    match ops::users::change(&state.ops, &session.caller, id, change).await {
        Ok(_) => Ok(Redirect::to(&format!("{}/admin/users?saved=1", session.base)).into_response()),
        Err(ops::Error::Field { field, message }) => {
            match field.split('[').next().unwrap_or("") {
                "email" => draft.email_error = Some(message),
                "role" => draft.role_error = Some(message),
                "teams" => draft.teams_error = Some(message),
                _ => draft.error = Some(format!("{field}: {message}")),
            }
            render(&state, &session, &user, draft).await
        }
        Err(ops::Error::Platform(
            crate::platform::Error::Conflict(message) | crate::platform::Error::Invalid(message),
        )) => {
            draft.error = Some(message);
            render(&state, &session, &user, draft).await
        }
        Err(other) => Err(Error::from(other)),
    }
}
