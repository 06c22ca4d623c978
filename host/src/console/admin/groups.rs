//! The project's teams and roles (admins): each with how many users it has, a form to create
//! one, to rename one, and its removal when nobody uses it (a team with members or a role
//! someone holds is refused, the reason next to it). Written through `ops::users`, with the
//! same admin log entries as the `/v1` team and role routes.

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::{Tab, admin_layout, tabs};
use crate::console::pages::{Layout, page};
use crate::console::session::Posted;
use crate::console::session::{Session, first, form_pairs};
use crate::console::{Error, Result};
use crate::ops;
use crate::ops::users::Group;
use crate::state::SharedState;

/// One team or role as listed.
struct Item {
    id: i64,
    name: String,
    /// Users in the team, or holding the role.
    members: usize,
    /// The name typed to rename it, when refused, and the refusal (rename or removal).
    typed: Option<String>,
    error: Option<String>,
}

/// One list (teams, or roles), with its creation form.
struct Section {
    kind: &'static str,
    title: &'static str,
    items: Vec<Item>,
    /// The name typed to create one, when refused, and the refusal.
    new_name: String,
    new_error: Option<String>,
}

#[derive(Template)]
#[template(path = "admin_groups.html")]
struct GroupsPage {
    layout: Layout,
    tabs: Vec<Tab>,
    sections: Vec<Section>,
    notice: Option<String>,
}

/// A refusal to show: which list, which item (none: the creation form), the name typed.
struct Refused {
    kind: Group,
    id: Option<i64>,
    typed: String,
    message: String,
}

fn kind_of(raw: &str) -> Result<Group> {
    match raw {
        "team" => Ok(Group::Team),
        "role" => Ok(Group::Role),
        _ => Err(Error::NotFound(
            "There is no such kind of group.".to_owned(),
        )),
    }
}

/// `GET /console/admin/groups`.
pub async fn list(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let query = form_pairs(query.unwrap_or_default().as_bytes());
    let notice = first(&query, "done").map(|done| match done {
        "created" => "Created.".to_owned(),
        "renamed" => "Renamed.".to_owned(),
        _ => "Removed.".to_owned(),
    });
    render(&state, &session, notice, None).await
}

async fn render(
    state: &SharedState,
    session: &Session,
    notice: Option<String>,
    refused: Option<Refused>,
) -> Result<Response> {
    let layout = admin_layout(state, session, "groups", "Teams and roles".to_owned()).await?;
    let (roles, teams) = ops::users::roles_and_teams(&state.ops, &session.caller).await?;
    let (team_members, role_members) =
        ops::users::group_members(&state.ops, &session.caller).await?;
    let section = |kind: Group,
                   title,
                   all: Vec<(i64, String)>,
                   members: &std::collections::BTreeMap<i64, usize>| {
        let here = refused.as_ref().filter(|r| r.kind == kind);
        Section {
            kind: kind.as_str(),
            title,
            items: all
                .into_iter()
                .map(|(id, name)| {
                    let mine = here.filter(|r| r.id == Some(id));
                    Item {
                        id,
                        members: members.get(&id).copied().unwrap_or(0),
                        typed: mine.map(|r| r.typed.clone()),
                        error: mine.map(|r| r.message.clone()),
                        name,
                    }
                })
                .collect(),
            new_name: here
                .filter(|r| r.id.is_none())
                .map(|r| r.typed.clone())
                .unwrap_or_default(),
            new_error: here.filter(|r| r.id.is_none()).map(|r| r.message.clone()),
        }
    };
    let sections = vec![
        section(
            Group::Team,
            "Teams",
            teams.into_iter().map(|t| (t.id, t.name)).collect(),
            &team_members,
        ),
        section(
            Group::Role,
            "Roles",
            roles.into_iter().map(|r| (r.id, r.name)).collect(),
            &role_members,
        ),
    ];
    let status = if refused.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        status,
        &GroupsPage {
            tabs: tabs(&session.base, "groups"),
            layout,
            sections,
            notice,
        },
    )
}

/// The page again with `error` next to the form it came from, or the error page.
async fn refused(
    state: &SharedState,
    session: &Session,
    kind: Group,
    id: Option<i64>,
    typed: String,
    error: ops::Error,
) -> Result<Response> {
    let message = match error {
        ops::Error::Field { message, .. } => format!("The name {message}."),
        ops::Error::Platform(
            crate::platform::Error::Conflict(message) | crate::platform::Error::Invalid(message),
        ) => message,
        other => return Err(other.into()),
    };
    let refusal = Refused {
        kind,
        id,
        typed,
        message,
    };
    render(state, session, None, Some(refusal)).await
}

fn done(session: &Session, what: &str) -> Response {
    Redirect::to(&format!("{}/admin/groups?done={what}", session.base)).into_response()
}

/// `POST /console/admin/groups/{kind}`: creates a team or a role.
pub async fn create(
    State(state): State<SharedState>,
    Path(kind): Path<String>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let kind = kind_of(&kind)?;
    let name = first(&pairs, "name").unwrap_or("").to_owned();
    match ops::users::create_group(&state.ops, &session.caller, kind, &name).await {
        Ok(_) => Ok(done(&session, "created")),
        Err(error) => refused(&state, &session, kind, None, name, error).await,
    }
}

/// `POST /console/admin/groups/{kind}/{id}/rename`.
pub async fn rename(
    State(state): State<SharedState>,
    Path((kind, id)): Path<(String, i64)>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let kind = kind_of(&kind)?;
    let name = first(&pairs, "name").unwrap_or("").to_owned();
    match ops::users::rename_group(&state.ops, &session.caller, kind, id, &name).await {
        Ok(_) => Ok(done(&session, "renamed")),
        Err(error) => refused(&state, &session, kind, Some(id), name, error).await,
    }
}

/// `POST /console/admin/groups/{kind}/{id}/remove`: refused while it is used.
pub async fn remove(
    State(state): State<SharedState>,
    Path((kind, id)): Path<(String, i64)>,
    Posted(session, _): Posted,
) -> Result<Response> {
    let kind = kind_of(&kind)?;
    match ops::users::remove_group(&state.ops, &session.caller, kind, id).await {
        Ok(()) => Ok(done(&session, "removed")),
        Err(error) => refused(&state, &session, kind, Some(id), String::new(), error).await,
    }
}
