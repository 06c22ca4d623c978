//! The loaded plugins (admins): each application with its calls, errors, traps, refusals and
//! time since this generation was loaded, and a button that reloads the plugin set (as SIGHUP
//! or `POST /_canopy/reload` do: the new set is swapped in only if every plugin loads).

use std::sync::atomic::Ordering;

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::{Tab, admin_layout, tabs};
use crate::console::pages::{Layout, page};
use crate::console::session::Posted;
use crate::console::session::{Session, first, form_pairs};
use crate::console::{Error, Result};
use crate::ops::tokens::require_admin;
use crate::plugins::Compiler;
use crate::state::SharedState;

struct Row {
    label: String,
    /// The language the plugin was written in (`PluginInfo::language`).
    language: String,
    calls: u64,
    errors: u64,
    traps: u64,
    refused: u64,
    total_ms: u64,
    /// Mean time per call, in ms with one decimal.
    mean_ms: String,
    /// "optimized" (Cranelift) or "quick" (Winch, until a reload's background compile is done).
    code: &'static str,
}

#[derive(Template)]
#[template(path = "admin_plugins.html")]
struct PluginsPage {
    layout: Layout,
    tabs: Vec<Tab>,
    rows: Vec<Row>,
    /// Whether this server can reload (a served generation, not a bare stack).
    can_reload: bool,
    notice: Option<String>,
    error: Option<String>,
}

async fn render(
    state: &SharedState,
    session: &Session,
    notice: Option<String>,
    error: Option<String>,
) -> Result<Response> {
    let layout = admin_layout(state, session, "plugins", "Plugins".to_owned()).await?;
    let rows = state
        .plugins
        .iter()
        .map(|plugin| {
            let stats = &plugin.stats;
            let calls = stats.calls.load(Ordering::Relaxed);
            let micros = stats.micros.load(Ordering::Relaxed);
            Row {
                label: plugin.info.label(),
                language: plugin.info.language.clone(),
                calls,
                errors: stats.errors.load(Ordering::Relaxed),
                traps: stats.traps.load(Ordering::Relaxed),
                refused: stats.refused.load(Ordering::Relaxed),
                total_ms: micros / 1000,
                mean_ms: if calls == 0 {
                    "–".to_owned()
                } else {
                    format!("{:.1}", micros as f64 / calls as f64 / 1000.0)
                },
                code: match plugin.compiler() {
                    Compiler::Cranelift => "optimized",
                    Compiler::Winch => "quick",
                },
            }
        })
        .collect();
    let status = if error.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        status,
        &PluginsPage {
            tabs: tabs(&session.base, "plugins"),
            rows,
            can_reload: state.reloader.get().is_some(),
            notice,
            error,
            layout,
        },
    )
}

/// `GET /console/admin/plugins`.
pub async fn list(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let query = form_pairs(query.unwrap_or_default().as_bytes());
    let notice = first(&query, "reloaded").map(|count| {
        format!("Reloaded: {count} plugin(s) loaded; new requests use them (their counts start at zero).")
    });
    render(&state, &session, notice, None).await
}

/// `POST /console/admin/plugins/reload`: rebuilds the plugin set; on failure the served one
/// stays, and the page says why.
pub async fn reload(
    State(state): State<SharedState>,
    Posted(session, _): Posted,
) -> Result<Response> {
    require_admin(&state.ops, &session.caller).await?;
    tracing::info!(
        by = session.caller.id,
        "plugin reload asked from the console"
    );
    match crate::state::reload_with(&state.reloader).await {
        Some(Ok(report)) => Ok(Redirect::to(&format!(
            "{}/admin/plugins?reloaded={}",
            session.base, report.plugins
        ))
        .into_response()),
        Some(Err(message)) => {
            let error =
                format!("The reload failed; the previous plugins are still served: {message}");
            render(&state, &session, None, Some(error)).await
        }
        None => Err(Error::NotFound(
            "This server cannot reload its plugins.".to_owned(),
        )),
    }
}
