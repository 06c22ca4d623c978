//! The permission editor (admins): a role's collection rights as a grid of checkboxes, its
//! action rights with their conditions (each edited on its own page, conditions with the
//! condition builder), the teams' scopes (edited the same way, `{{currentUser.*}}` variables
//! offered), and "what can this user do" for a chosen user. Every change goes through
//! `ops::rights`, which writes the store's document (admin log entry) and drops the cached
//! permissions: it holds from the next request on.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::conditions::{self, Builder};
use super::{Tab, admin_layout, tabs};
use crate::console::pages::{Layout, page};
use crate::console::session::Posted;
use crate::console::session::{Session, first, form_pairs};
use crate::console::{Error, Result};
use crate::datasource::CollectionSchema;
use crate::ops::rights::{self, ActionChange, ActionRights, RoleRights, Row, TeamScopes};
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
    /// The chosen role's id, for the links to its action rights.
    role_id: i64,
    /// The served collections, for a new scope.
    collections: Vec<String>,
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
    let notice = match first(&query, "saved") {
        Some("1") => Some("The role's rights were saved."),
        Some("action") => Some("The action's rights were saved."),
        Some("scope") => Some("The team's scope was saved."),
        _ => None,
    };
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
            "No role exists yet: create one in Administration › Teams & roles.".to_owned(),
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
            role_id: chosen,
            collections: ops.schema().collections.keys().cloned().collect(),
            layout,
        },
    )
}

/// `POST /console/admin/permissions/{role}`: saves the role's grid.
pub async fn save(
    State(state): State<SharedState>,
    Path(role): Path<i64>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
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

// ----- an action's rights ----------------------------------------------------------------------

#[derive(Template)]
#[template(path = "admin_action_rights.html")]
struct ActionPage {
    layout: Layout,
    tabs: Vec<Tab>,
    heading: String,
    role_name: String,
    back: String,
    action: String,
    trigger: bool,
    approval_required: bool,
    may_approve: bool,
    self_approval: bool,
    builders: Vec<Builder>,
    /// A condition does not read (each says why next to it).
    conditions_refused: bool,
    error: Option<String>,
}

/// The three builders of an action's conditions.
fn action_builders(
    state: &SharedState,
    collection: &CollectionSchema,
    rights: &ActionRights,
) -> Vec<Builder> {
    let schema = state.ops.schema();
    vec![
        Builder::new(
            schema,
            collection,
            "tc",
            "Trigger only on records matching",
            "No condition: they may trigger it on any record they can see. Otherwise every selected record must match.",
            rights.trigger_condition.as_ref(),
        ),
        Builder::new(
            schema,
            collection,
            "rc",
            "Approval required only for records matching",
            "With \"needs approval\" ticked and no condition, every run needs an approval; otherwise only runs on a record matching.",
            rights.approval_required_condition.as_ref(),
        ),
        Builder::new(
            schema,
            collection,
            "ac",
            "Approve only records matching",
            "No condition: they may approve any run of this action they may approve.",
            rights.approval_condition.as_ref(),
        ),
    ]
}

fn action_href(base: &str, role: i64, collection: &str, action: &str) -> String {
    format!(
        "{base}/admin/permissions/{role}/actions/{}/{}",
        crate::console::pages::enc(collection),
        crate::console::pages::enc(action)
    )
}

#[allow(clippy::too_many_arguments, reason = "the page's parts, each its own")]
async fn render_action(
    state: &SharedState,
    session: &Session,
    role: i64,
    collection: &str,
    action: &str,
    rights: &ActionRights,
    role_name: String,
    builders: Vec<Builder>,
    error: Option<String>,
) -> Result<Response> {
    let heading = format!("{role_name}: the action \u{201c}{action}\u{201d} on {collection}");
    let layout = admin_layout(state, session, "permissions", heading.clone()).await?;
    let conditions_refused = builders.iter().any(|b| b.error.is_some());
    let refused = error.is_some() || conditions_refused;
    page(
        if refused {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::OK
        },
        &ActionPage {
            tabs: tabs(&session.base, "permissions"),
            heading,
            back: format!("{}/admin/permissions?role={role}", session.base),
            action: action_href(&session.base, role, collection, action),
            trigger: rights.trigger,
            approval_required: rights.approval_required,
            may_approve: rights.may_approve,
            self_approval: rights.self_approval,
            role_name,
            builders,
            conditions_refused,
            error,
            layout,
        },
    )
}

/// `GET /console/admin/permissions/{role}/actions/{collection}/{action}`.
pub async fn action_form(
    State(state): State<SharedState>,
    session: Session,
    Path((role, collection, action)): Path<(i64, String, String)>,
) -> Result<Response> {
    let (found, rights) =
        rights::action_rights_of(&state.ops, &session.caller, role, &collection, &action).await?;
    let schema = state.ops.collection(&collection)?;
    let builders = action_builders(&state, schema, &rights);
    render_action(
        &state,
        &session,
        role,
        &collection,
        &action,
        &rights,
        found.name,
        builders,
        None,
    )
    .await
}

/// `POST /console/admin/permissions/{role}/actions/{collection}/{action}`.
pub async fn action_save(
    State(state): State<SharedState>,
    Path((role, collection, action)): Path<(i64, String, String)>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let (found, mut rights) =
        rights::action_rights_of(&state.ops, &session.caller, role, &collection, &action).await?;
    let schema = state.ops.collection(&collection)?;
    let ticked = |key: &str| first(&pairs, key) == Some("on");
    rights.trigger = ticked("trigger");
    rights.approval_required = ticked("approvalRequired");
    rights.may_approve = ticked("userApproval");
    rights.self_approval = ticked("selfApproval");
    let mut builders = action_builders(&state, schema, &rights);
    let mut trees = Vec::new();
    for builder in &mut builders {
        builder.read(&pairs);
        trees.push(builder.tree(state.ops.schema(), schema));
    }
    let [Some(trigger), Some(required), Some(approval)] =
        <[_; 3]>::try_from(trees).unwrap_or([None, None, None])
    else {
        return render_action(
            &state,
            &session,
            role,
            &collection,
            &action,
            &rights,
            found.name,
            builders,
            None,
        )
        .await;
    };
    let change = ActionChange {
        trigger: rights.trigger,
        approval_required: rights.approval_required,
        may_approve: rights.may_approve,
        self_approval: rights.self_approval,
        trigger_condition: trigger,
        approval_required_condition: required,
        approval_condition: approval,
    };
    match rights::set_action_rights(
        &state.ops,
        &session.caller,
        role,
        &collection,
        &action,
        &change,
    )
    .await
    {
        Ok(()) => Ok(Redirect::to(&format!(
            "{}/admin/permissions?role={role}&saved=action",
            session.base
        ))
        .into_response()),
        Err(crate::ops::Error::Field { field, message }) => {
            let at = match field.as_str() {
                "triggerCondition" => Some(0),
                "approvalRequiredCondition" => Some(1),
                "approvalCondition" => Some(2),
                _ => None,
            };
            let mut error = None;
            match at.and_then(|i| builders.get_mut(i)) {
                Some(builder) => builder.error = Some(message),
                None => error = Some(message),
            }
            render_action(
                &state,
                &session,
                role,
                &collection,
                &action,
                &rights,
                found.name,
                builders,
                error,
            )
            .await
        }
        Err(crate::ops::Error::Platform(crate::platform::Error::Conflict(message))) => {
            render_action(
                &state,
                &session,
                role,
                &collection,
                &action,
                &rights,
                found.name,
                builders,
                Some(message),
            )
            .await
        }
        Err(other) => Err(other.into()),
    }
}

// ----- a team's scope --------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "admin_scope.html")]
struct ScopePage {
    layout: Layout,
    tabs: Vec<Tab>,
    heading: String,
    back: String,
    team_id: i64,
    collection: String,
    builders: Vec<Builder>,
    variables: Vec<String>,
    error: Option<String>,
}

fn scope_builder(
    state: &SharedState,
    collection: &CollectionSchema,
    scope: Option<&serde_json::Value>,
) -> Builder {
    Builder::new(
        state.ops.schema(),
        collection,
        "sc",
        "The team's users see only the records matching",
        "No condition: they see every record their role lets them see. A value may be a variable of the signed-in user, such as {{currentUser.tags.region}}.",
        scope,
    )
    .with_variables()
}

async fn render_scope(
    state: &SharedState,
    session: &Session,
    team: &crate::platform::Team,
    collection: &str,
    builder: Builder,
    error: Option<String>,
) -> Result<Response> {
    let heading = format!("Scope of the team {} on {collection}", team.name);
    let layout = admin_layout(state, session, "permissions", heading.clone()).await?;
    let tags = crate::ops::users::list(&state.ops, &session.caller)
        .await?
        .into_iter()
        .flat_map(|u| u.tags.into_keys());
    let refused = error.is_some() || builder.error.is_some();
    page(
        if refused {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::OK
        },
        &ScopePage {
            tabs: tabs(&session.base, "permissions"),
            heading,
            back: format!("{}/admin/permissions", session.base),
            team_id: team.id,
            collection: collection.to_owned(),
            builders: vec![builder],
            variables: conditions::variables(tags),
            error,
            layout,
        },
    )
}

/// The team and collection a scope page is about (`team`, `collection` in the query or form).
fn scope_of(pairs: &[(String, String)]) -> Result<(i64, String)> {
    let team = first(pairs, "team").and_then(|t| t.parse::<i64>().ok());
    let collection = first(pairs, "collection").filter(|c| !c.is_empty());
    match (team, collection) {
        (Some(team), Some(collection)) => Ok((team, collection.to_owned())),
        _ => Err(Error::NotFound(
            "Choose a team and a collection on the permissions page.".to_owned(),
        )),
    }
}

/// `GET /console/admin/scopes?team=…&collection=…`.
pub async fn scope_form(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let (team, collection) = scope_of(&form_pairs(query.unwrap_or_default().as_bytes()))?;
    let (team, scope) = rights::team_scope(&state.ops, &session.caller, team, &collection).await?;
    let schema = state.ops.collection(&collection)?;
    let builder = scope_builder(&state, schema, scope.as_ref());
    render_scope(&state, &session, &team, &collection, builder, None).await
}

/// `POST /console/admin/scopes`: saves the team's scope on the collection.
pub async fn scope_save(
    State(state): State<SharedState>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let (team, collection) = scope_of(&pairs)?;
    let (team, scope) = rights::team_scope(&state.ops, &session.caller, team, &collection).await?;
    let schema = state.ops.collection(&collection)?;
    let mut builder = scope_builder(&state, schema, scope.as_ref());
    builder.read(&pairs);
    let Some(tree) = builder.tree(state.ops.schema(), schema) else {
        return render_scope(&state, &session, &team, &collection, builder, None).await;
    };
    match rights::set_team_scope(&state.ops, &session.caller, team.id, &collection, tree).await {
        Ok(()) => Ok(
            Redirect::to(&format!("{}/admin/permissions?saved=scope", session.base))
                .into_response(),
        ),
        Err(crate::ops::Error::Field { message, .. }) => {
            builder.error = Some(message);
            render_scope(&state, &session, &team, &collection, builder, None).await
        }
        Err(crate::ops::Error::Platform(crate::platform::Error::Conflict(message))) => {
            render_scope(&state, &session, &team, &collection, builder, Some(message)).await
        }
        Err(other) => Err(other.into()),
    }
}
