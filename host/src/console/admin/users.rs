//! The project's users (admins): the list, a new user's form and a user's form (name, email,
//! permission level, role, teams, tags, password, disabled) with each refusal shown next to its
//! field and nothing changed, and a user's removal after a confirmation (never one's own).

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::{Tab, admin_layout, tabs};
use crate::console::pages::{Layout, page};
use crate::console::session::Posted;
use crate::console::session::{Session, first};
use crate::console::{Error, Result};
use crate::ops;
use crate::platform::store::parse_level;
use crate::platform::{NewUser, User, UserChange, password};
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
    add_href: String,
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
    let query = query.unwrap_or_default();
    let said = |what: &str| query.split('&').any(|p| p == what);
    let notice = if said("saved=1") {
        Some("The user was saved.")
    } else if said("created=1") {
        Some("The user was created.")
    } else if said("removed=1") {
        Some("The user was removed.")
    } else {
        None
    };
    page(
        StatusCode::OK,
        &UsersPage {
            tabs: tabs(&session.base, "users"),
            add_href: format!("{}/admin/users/new", session.base),
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
    /// `key=value` lines.
    tags: String,
    /// Typed, never shown back.
    password: String,
    disabled: bool,
    email_error: Option<String>,
    tags_error: Option<String>,
    password_error: Option<String>,
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
            tags: user
                .tags
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("\n"),
            disabled: user.disabled,
            ..Self::default()
        }
    }

    fn refused(&self) -> bool {
        self.email_error.is_some()
            || self.level_error.is_some()
            || self.role_error.is_some()
            || self.teams_error.is_some()
            || self.tags_error.is_some()
            || self.password_error.is_some()
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
    /// A new user (no "disabled", a password to give) rather than an existing one.
    new: bool,
    /// Where the removal is confirmed (not for a new user, nor for oneself).
    remove_href: Option<String>,
}

/// `GET /console/admin/users/{id}`: the user's form.
pub async fn edit(
    State(state): State<SharedState>,
    session: Session,
    Path(id): Path<i64>,
) -> Result<Response> {
    let user = ops::users::get(&state.ops, &session.caller, id).await?;
    render(&state, &session, Some(&user), Draft::of(&user)).await
}

/// `GET /console/admin/users/new`: a new user's form.
pub async fn new(State(state): State<SharedState>, session: Session) -> Result<Response> {
    let draft = Draft {
        level: "user".to_owned(),
        ..Draft::default()
    };
    render(&state, &session, None, draft).await
}

async fn render(
    state: &SharedState,
    session: &Session,
    user: Option<&User>,
    mut draft: Draft,
) -> Result<Response> {
    // A password typed is never sent back into the page.
    draft.password.clear();
    let heading = user.map_or_else(|| "Add a user".to_owned(), |u| format!("Edit {}", u.email));
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
            action: user.map_or_else(
                || format!("{}/admin/users/new", session.base),
                |u| format!("{}/admin/users/{}", session.base, u.id),
            ),
            back: format!("{}/admin/users", session.base),
            levels: LEVELS,
            roles: roles.into_iter().map(|r| r.name).collect(),
            teams,
            own: user.is_some_and(|u| u.id == session.caller.id),
            new: user.is_none(),
            remove_href: user
                .filter(|u| u.id != session.caller.id)
                .map(|u| format!("{}/admin/users/{}/remove", session.base, u.id)),
            draft,
            layout,
        },
    )
}

/// The form as typed, with the refusals that need no store: a missing email, an unknown level,
/// a tag line without `=`, a password too short.
fn read_form(pairs: &[(String, String)]) -> (Draft, Option<crate::datasource::PermissionLevel>) {
    let text = |key: &str| first(pairs, key).unwrap_or("").trim().to_owned();
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
        tags: first(pairs, "tags").unwrap_or("").trim().to_owned(),
        password: first(pairs, "password").unwrap_or("").to_owned(),
        disabled: first(pairs, "disabled") == Some("on"),
        ..Draft::default()
    };
    if draft.email.is_empty() {
        draft.email_error = Some("An email is required: the user signs in with it.".to_owned());
    }
    if let Err(message) = tags_of(&draft.tags) {
        draft.tags_error = Some(message);
    }
    let level = match parse_level(&draft.level) {
        Ok(level) => Some(level),
        Err(error) => {
            draft.level_error = Some(error.to_string());
            None
        }
    };
    (draft, level)
}

/// `key=value` lines as tags; a line without `=` or with an empty key is refused.
fn tags_of(text: &str) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut tags = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match line.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                tags.insert(key.trim().to_owned(), value.trim().to_owned());
            }
            _ => {
                return Err(format!(
                    "Line {} is not key=value (for example region=EU).",
                    i + 1
                ));
            }
        }
    }
    Ok(tags)
}

/// The hash of the password typed, or the refusal next to its field.
fn hash_of(draft: &mut Draft) -> Option<String> {
    if draft.password.is_empty() {
        return None;
    }
    match password::hash(&draft.password) {
        Ok(hash) => Some(hash),
        Err(error) => {
            draft.password_error = Some(format!("{error}."));
            None
        }
    }
}

/// An operation's refusal shown next to its field, or on top of the form.
fn refusal(draft: &mut Draft, error: ops::Error) -> Result<()> {
    match error {
        ops::Error::Field { field, message } => {
            match field.split('[').next().unwrap_or("") {
                "email" => draft.email_error = Some(message),
                "role" => draft.role_error = Some(message),
                "teams" => draft.teams_error = Some(message),
                _ => draft.error = Some(format!("{field}: {message}")),
            }
            Ok(())
        }
        ops::Error::Platform(crate::platform::Error::Conflict(message)) => {
            // A taken email is the email's problem.
            if message.contains("email") {
                draft.email_error = Some(message);
            } else {
                draft.error = Some(message);
            }
            Ok(())
        }
        ops::Error::Platform(crate::platform::Error::Invalid(message)) => {
            draft.error = Some(message);
            Ok(())
        }
        other => Err(Error::from(other)),
    }
}

/// `POST /console/admin/users/new`: creates the user, or shows the form again with what is
/// wrong.
pub async fn create(
    State(state): State<SharedState>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let (mut draft, level) = read_form(&pairs);
    let password_hash = hash_of(&mut draft);
    let (Some(level), false) = (level, draft.refused()) else {
        return render(&state, &session, None, draft).await;
    };
    let new = NewUser {
        email: draft.email.clone(),
        first_name: draft.first_name.clone(),
        last_name: draft.last_name.clone(),
        permission_level: level,
        role: (!draft.role.is_empty()).then(|| draft.role.clone()),
        teams: draft.teams.clone(),
        tags: tags_of(&draft.tags).unwrap_or_default(),
        password_hash,
    };
    match ops::users::create(&state.ops, &session.caller, new).await {
        Ok(_) => {
            Ok(Redirect::to(&format!("{}/admin/users?created=1", session.base)).into_response())
        }
        Err(error) => {
            refusal(&mut draft, error)?;
            render(&state, &session, None, draft).await
        }
    }
}

/// `POST /console/admin/users/{id}`: saves the form, or shows it again with what is wrong.
pub async fn save(
    State(state): State<SharedState>,
    Path(id): Path<i64>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let user = ops::users::get(&state.ops, &session.caller, id).await?;
    let (mut draft, level) = read_form(&pairs);
    let password_hash = hash_of(&mut draft);
    let (Some(level), false) = (level, draft.refused()) else {
        return render(&state, &session, Some(&user), draft).await;
    };
    let change = UserChange {
        email: Some(draft.email.clone()),
        first_name: Some(draft.first_name.clone()),
        last_name: Some(draft.last_name.clone()),
        permission_level: Some(level),
        role: Some((!draft.role.is_empty()).then(|| draft.role.clone())),
        teams: Some(draft.teams.clone()),
        tags: Some(tags_of(&draft.tags).unwrap_or_default()),
        disabled: Some(draft.disabled),
        // An empty password box keeps the password.
        password_hash: password_hash.map(Some),
    };
    match ops::users::change(&state.ops, &session.caller, id, change).await {
        Ok(_) => Ok(Redirect::to(&format!("{}/admin/users?saved=1", session.base)).into_response()),
        Err(error) => {
            refusal(&mut draft, error)?;
            render(&state, &session, Some(&user), draft).await
        }
    }
}

#[derive(Template)]
#[template(path = "admin_user_remove.html")]
struct RemovePage {
    layout: Layout,
    email: String,
    action: String,
    back: String,
    error: Option<String>,
}

/// `GET /console/admin/users/{id}/remove`: the confirmation.
pub async fn remove_confirm(
    State(state): State<SharedState>,
    session: Session,
    Path(id): Path<i64>,
) -> Result<Response> {
    let user = ops::users::get(&state.ops, &session.caller, id).await?;
    confirm(&state, &session, &user, StatusCode::OK, None).await
}

async fn confirm(
    state: &SharedState,
    session: &Session,
    user: &User,
    status: StatusCode,
    error: Option<String>,
) -> Result<Response> {
    let layout = admin_layout(state, session, "users", format!("Remove {}", user.email)).await?;
    page(
        status,
        &RemovePage {
            layout,
            email: user.email.clone(),
            action: format!("{}/admin/users/{}/remove", session.base, user.id),
            back: format!("{}/admin/users/{}", session.base, user.id),
            error,
        },
    )
}

/// `POST /console/admin/users/{id}/remove`: removes the user (never oneself: the confirmation
/// says why).
pub async fn remove(
    State(state): State<SharedState>,
    Path(id): Path<i64>,
    Posted(session, _): Posted,
) -> Result<Response> {
    let user = ops::users::get(&state.ops, &session.caller, id).await?;
    match ops::users::remove(&state.ops, &session.caller, id).await {
        Ok(()) => {
            Ok(Redirect::to(&format!("{}/admin/users?removed=1", session.base)).into_response())
        }
        Err(ops::Error::Platform(crate::platform::Error::Conflict(message))) => {
            confirm(&state, &session, &user, StatusCode::CONFLICT, Some(message)).await
        }
        Err(other) => Err(other.into()),
    }
}
