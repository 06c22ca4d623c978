//! The console's administration (issue 22, Part 2 §6), for admins: application tokens, the
//! project's users, teams and roles, the rights of each role and the teams' scopes (the
//! permission editor), the charts added to the dashboards, the no-code actions, the workflows'
//! webhooks, the plugins and the logs; and every user's own application tokens ("My tokens").
//!
//! Each page reads and writes through the operations layer (`ops::tokens`, `ops::users`,
//! `ops::rights`, `ops::logs`; the workflow engine's trigger store for webhooks) as the
//! signed-in user, which checks that they are an admin in the store now (not only in their
//! session) and writes the admin log entries: a non-admin reaching an administration page by a
//! typed URL gets the 403 page, and the sidebar shows them no "Administration" place.

mod charts;
mod conditions;
mod groups;
mod logs;
mod no_code;
mod permissions;
mod plugins;
mod tokens;
mod users;
mod workflows;

use axum::Router;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono_tz::Tz;

use super::Result;
use super::data::Data;
use super::pages::Layout;
use super::session::Session;
use crate::state::SharedState;

/// The administration's routes, under the console's path.
pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/admin", get(index))
        .route("/tokens", get(tokens::mine).post(tokens::create))
        .route("/admin/tokens", get(tokens::all).post(tokens::create_admin))
        .route(
            "/tokens/{id}/revoke",
            get(tokens::revoke_confirm).post(tokens::revoke),
        )
        .route("/admin/users", get(users::list))
        .route("/admin/users/new", get(users::new).post(users::create))
        .route("/admin/users/{id}", get(users::edit).post(users::save))
        .route(
            "/admin/users/{id}/remove",
            get(users::remove_confirm).post(users::remove),
        )
        .route("/admin/groups", get(groups::list))
        .route("/admin/groups/{kind}", post(groups::create))
        .route("/admin/groups/{kind}/{id}/rename", post(groups::rename))
        .route("/admin/groups/{kind}/{id}/remove", post(groups::remove))
        .route("/admin/permissions", get(permissions::editor))
        .route("/admin/permissions/{role}", post(permissions::save))
        .route(
            "/admin/permissions/{role}/actions/{collection}/{action}",
            get(permissions::action_form).post(permissions::action_save),
        )
        .route(
            "/admin/scopes",
            get(permissions::scope_form).post(permissions::scope_save),
        )
        .route("/admin/charts", get(charts::list).post(charts::save))
        .route("/admin/charts/preview", post(charts::preview))
        .route("/admin/charts/{id}/remove", post(charts::remove))
        .route("/admin/actions", get(no_code::list).post(no_code::add))
        .route("/admin/actions/{id}/remove", post(no_code::remove))
        .route("/admin/workflows", get(workflows::list))
        .route(
            "/admin/workflows/{id}/webhook/{change}",
            post(workflows::webhook),
        )
        .route("/admin/plugins", get(plugins::list))
        .route("/admin/plugins/reload", post(plugins::reload))
        .route("/admin/logs", get(logs::logs))
}

/// `GET /console/admin`: the administration's first page.
async fn index(session: Session) -> Response {
    Redirect::to(&format!("{}/admin/tokens", session.base)).into_response()
}

/// One tab of the administration's navigation.
pub struct Tab {
    pub label: &'static str,
    pub href: String,
    pub current: bool,
}

/// The administration's tabs, `current` marked.
fn tabs(base: &str, current: &str) -> Vec<Tab> {
    [
        ("Tokens", "tokens"),
        ("Users", "users"),
        ("Teams & roles", "groups"),
        ("Permissions", "permissions"),
        ("Charts", "charts"),
        ("No-code actions", "actions"),
        ("Workflows", "workflows"),
        ("Plugins", "plugins"),
        ("Logs", "logs"),
    ]
    .into_iter()
    .map(|(label, path)| Tab {
        label,
        href: format!("{base}/admin/{path}"),
        current: path == current,
    })
    .collect()
}

/// The layout of an administration page, after checking that the user is an admin now: anyone
/// else gets the 403 page, whatever URL they typed.
async fn admin_layout(
    state: &SharedState,
    session: &Session,
    tab: &str,
    title: String,
) -> Result<Layout> {
    crate::ops::tokens::require_admin(&state.ops, &session.caller).await?;
    let data = Data::new(state, &session.caller);
    Layout::new(session, &data, &format!("admin:{tab}"), title).await
}

/// `ms` since the epoch as the user reads it, to the minute.
fn when(ms: i64, tz: Tz) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(String::new, |at| {
        at.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string()
    })
}
