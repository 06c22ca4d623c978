//! Workflow definitions and their webhooks (admins): each workflow with its collection, state
//! and version, its webhook's URL (a credential: copy it), and buttons to enable, disable or
//! regenerate it. The changes go through the workflow engine's trigger store, as the `/v1`
//! trigger routes do (each with its admin log entry); the operations layer does not know the
//! workflow engine (`host/tests/layers.rs`), so this page calls it directly.

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::{Tab, admin_layout, tabs, when};
use crate::console::pages::{Layout, page};
use crate::console::session::Posted;
use crate::console::session::{Session, first, form_pairs};
use crate::console::{Error, Result};
use crate::ops::tokens::{actor, require_admin};
use crate::platform::listing::DateRange;
use crate::state::SharedState;
use crate::workflows::triggers::Triggers;
use crate::workflows::versions::WorkflowFilter;

/// Most workflows listed.
const LIMIT: i64 = 200;

struct Row {
    id: String,
    name: String,
    collection: String,
    active: bool,
    version: i64,
    updated: String,
    /// The webhook's state and URL, when the trigger service runs.
    webhook: Option<(bool, String)>,
}

#[derive(Template)]
#[template(path = "admin_workflows.html")]
struct WorkflowsPage {
    layout: Layout,
    tabs: Vec<Tab>,
    rows: Vec<Row>,
    notice: Option<&'static str>,
}

fn triggers(state: &SharedState) -> Option<&Triggers> {
    state.workflow_triggers.as_deref()
}

fn failed(error: impl std::fmt::Display) -> Error {
    crate::datasource::Error::Internal(error.to_string()).into()
}

/// `GET /console/admin/workflows`.
pub async fn list(
    State(state): State<SharedState>,
    session: Session,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let layout = admin_layout(&state, &session, "workflows", "Workflows".to_owned()).await?;
    let store = crate::ops::tokens::store(&state.ops)?;
    let filter = WorkflowFilter {
        limit: LIMIT,
        collection: None,
        collections: None,
        active: None,
        created_at: DateRange::default(),
    };
    let mut rows = Vec::new();
    for workflow in store.workflows(&filter).await.map_err(failed)? {
        let webhook = match triggers(&state) {
            Some(triggers) => {
                let found = triggers
                    .store()
                    .workflow_ref(&workflow.id)
                    .await
                    .map_err(failed)?;
                match found {
                    Some(reference) => {
                        let trigger = triggers
                            .store()
                            .webhook_trigger(&reference)
                            .await
                            .map_err(failed)?;
                        let host = headers
                            .get(axum::http::header::HOST)
                            .and_then(|h| h.to_str().ok());
                        let url = triggers.webhook_url(&trigger, &state.mount_path, host);
                        Some((trigger.enabled, url))
                    }
                    None => None,
                }
            }
            None => None,
        };
        rows.push(Row {
            id: workflow.id,
            name: workflow.name,
            collection: workflow.collection_name,
            active: workflow.active,
            version: workflow.latest_version,
            updated: when(workflow.updated_at, session.caller.timezone),
            webhook,
        });
    }
    let query = form_pairs(query.unwrap_or_default().as_bytes());
    let notice = match first(&query, "done") {
        Some("enable") => Some("The webhook is enabled: calls are accepted at its URL."),
        Some("disable") => Some("The webhook is disabled: calls are refused until it is enabled."),
        Some("regenerate") => Some("The webhook has a new URL: the old one no longer works."),
        _ => None,
    };
    page(
        StatusCode::OK,
        &WorkflowsPage {
            tabs: tabs(&session.base, "workflows"),
            layout,
            rows,
            notice,
        },
    )
}

/// `POST /console/admin/workflows/{id}/webhook/{change}`: enable, disable or regenerate.
pub async fn webhook(
    State(state): State<SharedState>,
    Path((id, change)): Path<(String, String)>,
    Posted(session, _): Posted,
) -> Result<Response> {
    require_admin(&state.ops, &session.caller).await?;
    let triggers = triggers(&state).ok_or_else(|| {
        Error::NotFound("The workflow engine does not run on this server.".to_owned())
    })?;
    let store = triggers.store();
    let workflow = store
        .workflow_ref(&id)
        .await
        .map_err(failed)?
        .ok_or_else(|| Error::NotFound(format!("There is no workflow {id}.")))?;
    let by = actor(&session.caller);
    let trigger = match change.as_str() {
        "enable" => store.set_webhook_enabled(&by, &workflow, true).await,
        "disable" => store.set_webhook_enabled(&by, &workflow, false).await,
        "regenerate" => {
            store
                .regenerate_webhook(&by, &workflow, triggers.signing_kid())
                .await
        }
        _ => return Err(Error::NotFound("There is no such change.".to_owned())),
    }
    .map_err(failed)?;
    tracing::info!(
        workflow = %workflow.id,
        trigger = %trigger.id,
        by = session.caller.id,
        enabled = trigger.enabled,
        url_version = trigger.url_version,
        "workflow webhook changed from the console"
    );
    Ok(Redirect::to(&format!("{}/admin/workflows?done={change}", session.base)).into_response())
}
