//! The inbox: the approval requests a user may see (the ones they may review and their own),
//! pending first, and the history of decided ones; one request's page with approve and reject
//! (with a comment). Through `ops::approvals`, as the `/v1/…/approval-requests` routes: the same
//! visibility, the same approve rule, the same run of the approved action as the approver.

use askama::Template;
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono_tz::Tz;
use serde_json::Value as Json;

use crate::agent::query_string::QueryString;
use crate::console::data::Data;
use crate::console::pages::{Layout, page, record_href};
use crate::console::session::Posted;
use crate::console::session::{Session, first, form_pairs};
use crate::console::{Error, Result};
use crate::ops::approvals::{self, Decision, MAX_COMMENT_CHARS, Refusal};
use crate::platform::{Approval, ApprovalStatus};
use crate::state::SharedState;

pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/inbox", get(inbox))
        .route("/inbox/{id}", get(request))
        .route("/inbox/{id}/approve", post(approve))
        .route("/inbox/{id}/reject", post(reject))
}

/// An approval operation's refusal as a console error.
fn refused(error: crate::ops::Error) -> Error {
    match error {
        crate::ops::Error::Approval {
            refusal: Refusal::NotFound,
            message,
        } => Error::NotFound(format!(
            "There is no {message}: it may not be yours to see."
        )),
        other => Error::Ops(other),
    }
}

/// A time of the store (Unix milliseconds) in the user's timezone.
fn when(ms: i64, tz: Tz) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// One request as a row of the inbox.
struct Item {
    id: i64,
    href: String,
    action: String,
    collection: String,
    records: String,
    requester: String,
    mine: bool,
    filed: String,
    status: &'static str,
    decided_by: String,
}

fn item(base: &str, approval: &Approval, caller_id: i64, tz: Tz) -> Item {
    let ids = ids(approval);
    Item {
        id: approval.id,
        href: format!("{base}/inbox/{}", approval.id),
        action: approval.action_name.clone(),
        collection: approval.collection_name.clone(),
        records: if ids.is_empty() {
            "the collection".to_owned()
        } else {
            ids.join(", ")
        },
        requester: approval.requester_email.clone(),
        mine: approval.requester_id == caller_id,
        filed: when(approval.created_at, tz),
        status: approval.status.as_str(),
        decided_by: approval.decided_by_email.clone().unwrap_or_default(),
    }
}

fn ids(approval: &Approval) -> Vec<String> {
    approval
        .attributes
        .as_object()
        .map(approvals::selected_ids)
        .unwrap_or_default()
}

#[derive(Template)]
#[template(path = "inbox.html")]
struct InboxPage {
    layout: Layout,
    /// pending, decided or all.
    view: String,
    items: Vec<Item>,
}

/// `GET /console/inbox?view=pending|decided|all`: the requests the user may see.
async fn inbox(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let pairs = form_pairs(query.as_deref().unwrap_or("").as_bytes());
    let view = match first(&pairs, "view") {
        Some("decided") => "decided",
        Some("all") => "all",
        _ => "pending",
    };
    let status = (view == "pending").then_some(ApprovalStatus::Pending);
    let caller = &session.caller;
    let items = approvals::list(&state, caller, status)
        .await
        .map_err(refused)?
        .iter()
        .filter(|a| view != "decided" || a.status != ApprovalStatus::Pending)
        .map(|a| item(&session.base, a, caller.id, caller.timezone))
        .collect();
    let data = Data::new(&state, caller);
    let layout = Layout::new(&session, &data, "inbox", "Inbox".to_owned()).await?;
    page(
        StatusCode::OK,
        &InboxPage {
            layout,
            view: view.to_owned(),
            items,
        },
    )
}

#[derive(Template)]
#[template(path = "approval.html")]
struct RequestPage {
    layout: Layout,
    item: Item,
    records: Vec<(String, String)>,
    values: Vec<(String, String)>,
    notice: Option<String>,
    may_decide: bool,
    comment: String,
    decided_at: String,
    /// What running the approved action answered, in words.
    outcome: String,
    outcome_failed: bool,
    max_comment: usize,
}

/// `GET /console/inbox/{id}`: one request, with approve and reject when the user may decide it.
async fn request(
    State(state): State<SharedState>,
    session: Session,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let pairs = form_pairs(query.as_deref().unwrap_or("").as_bytes());
    let notice = match first(&pairs, "done") {
        Some("filed") => Some(
            "This action needs an approval: your request is filed. It runs once an approver approves it."
                .to_owned(),
        ),
        Some("approved") => Some("Approved: the action ran as you.".to_owned()),
        Some("rejected") => Some("Rejected: the action will not run.".to_owned()),
        _ => None,
    };
    request_page(&state, &session, &id, notice).await
}

async fn request_page(
    state: &SharedState,
    session: &Session,
    id: &str,
    notice: Option<String>,
) -> Result<Response> {
    let caller = &session.caller;
    let id = path_id(id)?;
    let approval = approvals::visible(state, caller, id)
        .await
        .map_err(refused)?;
    let may_decide = approvals::may_decide(state, caller, &QueryString::default(), &approval)
        .await
        .map_err(refused)?;
    let base = &session.base;
    let records = ids(&approval)
        .into_iter()
        .map(|id| {
            (
                format!("{} {id}", approval.collection_name),
                record_href(base, &approval.collection_name, &id),
            )
        })
        .collect();
    let values = approval
        .attributes
        .pointer("/values")
        .and_then(Json::as_object)
        .map(|values| {
            values
                .iter()
                .map(|(k, v)| {
                    let text = match v {
                        Json::String(s) if s.starts_with("data:") => "(a file)".to_owned(),
                        Json::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default();
    let (outcome, outcome_failed) = outcome_text(approval.outcome.as_ref());
    let data = Data::new(state, caller);
    let title = format!("Request {id} · Inbox");
    let layout = Layout::new(session, &data, "inbox", title).await?;
    page(
        StatusCode::OK,
        &RequestPage {
            layout,
            item: item(base, &approval, caller.id, caller.timezone),
            records,
            values,
            notice,
            may_decide,
            comment: approval.comment.clone().unwrap_or_default(),
            decided_at: approval
                .decided_at
                .map(|ms| when(ms, caller.timezone))
                .unwrap_or_default(),
            outcome,
            outcome_failed,
            max_comment: MAX_COMMENT_CHARS,
        },
    )
}

/// The outcome kept with an approved request, in words, and whether the run failed.
fn outcome_text(outcome: Option<&Json>) -> (String, bool) {
    let Some(outcome) = outcome else {
        return (String::new(), false);
    };
    if let Some(detail) = outcome.pointer("/error/detail").and_then(Json::as_str) {
        return (format!("The action failed: {detail}"), true);
    }
    if let Some(file) = outcome.get("file") {
        let name = file.get("name").and_then(Json::as_str).unwrap_or("a file");
        return (format!("The action generated the file {name}."), false);
    }
    let body = outcome.get("body");
    if let Some(message) = body.and_then(|b| b.get("success")).and_then(Json::as_str) {
        return (message.to_owned(), false);
    }
    if let Some(message) = body.and_then(|b| b.get("error")).and_then(Json::as_str) {
        return (format!("The action answered an error: {message}"), true);
    }
    ("The action ran.".to_owned(), false)
}

fn path_id(raw: &str) -> Result<i64> {
    raw.parse()
        .map_err(|_| Error::NotFound(format!("There is no approval request {raw}.")))
}

/// `POST /console/inbox/{id}/approve`: runs the action as the approver.
async fn approve(state: State<SharedState>, id: Path<String>, posted: Posted) -> Result<Response> {
    decide(state, id, ApprovalStatus::Approved, posted).await
}

/// `POST /console/inbox/{id}/reject`.
async fn reject(state: State<SharedState>, id: Path<String>, posted: Posted) -> Result<Response> {
    decide(state, id, ApprovalStatus::Rejected, posted).await
}

async fn decide(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    status: ApprovalStatus,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let approval_id = path_id(&id)?;
    let comment = first(&pairs, "comment")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    let decided = approvals::decide(
        &state,
        &session.caller,
        &QueryString::default(),
        Decision {
            id: approval_id,
            status,
            comment,
        },
    )
    .await
    .map_err(refused)?;
    if let Some(store) = state.store.as_ref() {
        crate::workflows::engine::control::resume_after_decision(
            store,
            &state.workflow_wakeup,
            approval_id,
            status == ApprovalStatus::Approved,
            decided.outcome.as_ref(),
        )
        .await;
    }
    let target = format!(
        "{}/inbox/{approval_id}?done={}",
        session.base,
        status.as_str()
    );
    Ok(Redirect::to(&target).into_response())
}
