//! Collaboration on a record (issue 22, Part 2 §5): the panel under a record's fields, with one
//! tab each for its notes (a thread per note, a new note, a reply, archive), its activity (the
//! activity log on this record), its history (the audit trail's changes with the values before
//! and after) and its workflow runs (start one, complete the step a run waits on, a run's steps
//! drawn as a diagram).
//!
//! Everything goes through the operations the other surfaces use: `ops::notes`,
//! `ops::activity`, `ops::audit` and `workflows::operations`; this module only reads forms,
//! shapes what they answer for the templates, and redirects after a write (303, so a reload
//! does not post twice). A refused form comes back on the record page with its message and what
//! the user typed.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use chrono::DateTime;
use chrono_tz::Tz;

use crate::auth::login::page::escape;
use crate::console::session::Posted;
use serde_json::Value as Json;

mod runs;

pub use runs::{RunDetail, RunRow, WorkflowChoice};
use runs::{complete_step, runs_of, runs_tab, start_run};

use super::pages::record::render;
use super::session::{Session, first};
use super::{Error, Result};
use crate::ops;
use crate::platform::audit::{HistoryQuery, Order};
use crate::state::SharedState;

/// The collaboration forms' routes, under a record's path.
pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/c/{collection}/r/{id}/notes", post(create_note))
        .route(
            "/c/{collection}/r/{id}/notes/{note}/messages",
            post(add_message),
        )
        .route("/c/{collection}/r/{id}/notes/{note}/archive", post(archive))
        .route("/c/{collection}/r/{id}/runs", post(start_run))
        .route(
            "/c/{collection}/r/{id}/runs/{run}/steps/{index}",
            post(complete_step),
        )
        .route(
            "/c/{collection}/r/{id}/runs/{run}/steps/{index}/form",
            post(runs::refresh_step),
        )
}

/// The tabs of the panel.
const NOTES: &str = "notes";
const ACTIVITY: &str = "activity";
const HISTORY: &str = "history";
const RUNS: &str = "runs";

/// Changes a History tab shows (newest first).
const HISTORY_PAGE: u64 = 50;

/// A collaboration form that failed: its message, and what the user typed, shown again.
pub struct Problem {
    pub status: StatusCode,
    pub message: String,
    /// The tab the form is on.
    pub panel: &'static str,
    /// Field name → typed value.
    pub typed: Vec<(String, String)>,
    /// The note or run the form was about, when not a new one.
    pub about: Option<String>,
    /// A message per field of a step's form (`v:<field>` inputs) that did not read.
    pub field_errors: Vec<(String, String)>,
}

impl Problem {
    fn typed(&self, field: &str) -> String {
        first(&self.typed, field).unwrap_or_default().to_owned()
    }
}

pub struct PanelTab {
    pub label: &'static str,
    pub href: String,
    pub active: bool,
}

pub struct MessageView {
    pub author: String,
    pub when: String,
    pub text: String,
}

pub struct NoteView {
    pub id: i64,
    pub title: String,
    pub author: String,
    pub when: String,
    /// When it was archived, if it is.
    pub archived: Option<String>,
    pub messages: Vec<MessageView>,
    pub reply_action: String,
    pub archive_action: Option<String>,
    /// What the reply box holds (what the user typed, after a refused reply).
    pub reply_typed: String,
    pub reply_error: Option<String>,
}

pub struct ActivityView {
    pub action: String,
    pub who: String,
    pub when: String,
    pub label: String,
}

pub struct FieldChange {
    pub field: String,
    pub before: String,
    pub after: String,
}

pub struct ChangeView {
    pub operation: String,
    pub who: String,
    pub when: String,
    pub changes: Vec<FieldChange>,
}

/// The panel as the record page shows it.
pub struct Panel {
    pub tabs: Vec<PanelTab>,
    pub active: &'static str,
    pub notice: Option<String>,
    pub error: Option<String>,
    // Notes
    pub notes: Vec<NoteView>,
    pub note_action: String,
    pub typed_title: String,
    pub typed_content: String,
    // Activity
    pub activity: Vec<ActivityView>,
    // History
    pub history: Vec<ChangeView>,
    pub history_count: i64,
    // Runs
    pub runs: Vec<RunRow>,
    pub startable: Vec<WorkflowChoice>,
    pub start_action: String,
    pub run: Option<RunDetail>,
}

/// A time in the user's timezone.
fn when(ms: i64, tz: Tz) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|d| d.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string())
        .unwrap_or_default()
}

/// The panel of the record `id` of `collection`, on the tab the query names.
pub async fn panel(
    state: &SharedState,
    session: &Session,
    collection: &str,
    id: &str,
    here: &str,
    pairs: &[(String, String)],
    problem: Option<Problem>,
) -> Result<Panel> {
    let caller = &session.caller;
    let tz = caller.timezone;
    let runs = runs_of(state);
    let mut available = vec![(NOTES, "Notes"), (ACTIVITY, "Activity")];
    if state.audit.is_some() {
        available.push((HISTORY, "History"));
    }
    if runs.is_some() {
        available.push((RUNS, "Workflows"));
    }
    let asked = problem
        .as_ref()
        .map(|p| p.panel)
        .or_else(|| first(pairs, "panel"))
        .unwrap_or(NOTES);
    let active: &'static str = available
        .iter()
        .map(|&(key, _)| key)
        .find(|&key| key == asked)
        .unwrap_or(NOTES);
    let tabs = available
        .iter()
        .map(|&(key, label)| PanelTab {
            label,
            href: format!("{here}?panel={key}#collab"),
            active: key == active,
        })
        .collect();
    let notice = [
        ("noted", "Note added."),
        ("replied", "Reply added."),
        ("archived", "Note archived."),
        ("unarchived", "Note restored."),
        ("started", "Workflow started."),
        ("completed", "Step completed."),
    ]
    .iter()
    .find(|&&(key, _)| first(pairs, key).is_some())
    .map(|&(_, text)| text.to_owned());
    let mut panel = Panel {
        tabs,
        active,
        notice,
        error: None,
        notes: Vec::new(),
        note_action: format!("{here}/notes"),
        typed_title: String::new(),
        typed_content: String::new(),
        activity: Vec::new(),
        history: Vec::new(),
        history_count: 0,
        runs: Vec::new(),
        startable: Vec::new(),
        start_action: format!("{here}/runs"),
        run: None,
    };
    // A problem with one note's reply or one run's step is shown next to that form.
    let about = problem.as_ref().and_then(|p| p.about.clone());
    if let Some(problem) = &problem
        && about.is_none()
    {
        panel.error = Some(problem.message.clone());
        panel.typed_title = problem.typed("title");
        panel.typed_content = problem.typed("content");
    }
    match active {
        NOTES => {
            let notes = ops::notes::of_record(state, caller, collection, id)
                .await
                .map_err(Error::Ops)?;
            panel.notes = notes
                .iter()
                .map(|note| {
                    let mine = about.as_deref() == Some(&note.id.to_string());
                    NoteView {
                        id: note.id,
                        title: note.title.clone(),
                        author: name_of(&note.author.username, &note.author.email),
                        when: when(note.created_at, tz),
                        archived: note.archived_at.map(|at| when(at, tz)),
                        messages: note
                            .messages
                            .iter()
                            .map(|m| MessageView {
                                author: name_of(&m.author.username, &m.author.email),
                                when: when(m.created_at, tz),
                                text: m.content_text.clone(),
                            })
                            .collect(),
                        reply_action: format!("{here}/notes/{}/messages", note.id),
                        archive_action: ops::notes::may_archive(caller, note)
                            .then(|| format!("{here}/notes/{}/archive", note.id)),
                        reply_typed: problem
                            .as_ref()
                            .filter(|_| mine)
                            .map(|p| p.typed("content"))
                            .unwrap_or_default(),
                        reply_error: problem.as_ref().filter(|_| mine).map(|p| p.message.clone()),
                    }
                })
                .collect();
        }
        ACTIVITY => {
            let rows = ops::activity::of_record(state, caller, collection, id)
                .await
                .map_err(Error::Ops)?;
            panel.activity = rows
                .iter()
                .map(|row| ActivityView {
                    action: row.action.clone(),
                    who: name_of(&row.username, &row.user_email),
                    when: when(row.created_at, tz),
                    label: row.label.clone().unwrap_or_default(),
                })
                .collect();
        }
        HISTORY => {
            let trail = ops::audit::open(state, caller, collection, id)
                .await
                .map_err(Error::Ops)?;
            let page = ops::audit::history(
                &trail,
                HistoryQuery::default(),
                Order::NewestFirst,
                0,
                HISTORY_PAGE,
                false,
            )
            .await
            .map_err(Error::Ops)?;
            panel.history_count = page.count;
            panel.history = page.entries.iter().map(|e| change_view(e, tz)).collect();
        }
        _ => {
            if let Some(runs) = &runs {
                runs_tab(
                    &mut panel,
                    (state, runs),
                    session,
                    collection,
                    id,
                    here,
                    pairs,
                    &problem,
                )
                .await?;
            }
        }
    }
    Ok(panel)
}

/// A person's name, else their email.
fn name_of(name: &str, email: &str) -> String {
    if name.trim().is_empty() {
        email.to_owned()
    } else {
        name.to_owned()
    }
}

/// One audit entry: who, when, and each changed field's value before and after.
fn change_view(entry: &crate::platform::audit::AuditRecord, tz: Tz) -> ChangeView {
    let names = [
        entry.user_first_name.as_deref().unwrap_or(""),
        entry.user_last_name.as_deref().unwrap_or(""),
    ]
    .join(" ");
    let who = name_of(&names, entry.user_email.as_deref().unwrap_or(""));
    let mut fields: Vec<&String> = entry
        .new_values
        .keys()
        .chain(entry.previous_values.keys())
        .collect();
    fields.sort();
    fields.dedup();
    let changes = fields
        .into_iter()
        .filter(|f| entry.previous_values.get(*f) != entry.new_values.get(*f))
        .map(|field| FieldChange {
            field: field.clone(),
            before: value_text(entry.previous_values.get(field), tz),
            after: value_text(entry.new_values.get(field), tz),
        })
        .collect();
    ChangeView {
        operation: match entry.operation.as_str() {
            "create" => "Created".to_owned(),
            "update" => "Updated".to_owned(),
            "delete" => "Deleted".to_owned(),
            "action" => format!(
                "Ran {}",
                entry.action_name.as_deref().unwrap_or("an action")
            ),
            other => other.to_owned(),
        },
        who,
        when: when(entry.timestamp_ms, tz),
        changes,
    }
}

/// A recorded value as text: dates in the user's timezone, nothing as empty.
fn value_text(value: Option<&Json>, tz: Tz) -> String {
    match value {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(text)) => DateTime::parse_from_rfc3339(text)
            .map(|d| d.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S").to_string())
            .unwrap_or_else(|_| text.clone()),
        Some(Json::Bool(true)) => "Yes".to_owned(),
        Some(Json::Bool(false)) => "No".to_owned(),
        Some(other) => other.to_string(),
    }
}

// ----- forms ---------------------------------------------------------------------------------

fn record_href(session: &Session, collection: &str, id: &str) -> String {
    super::pages::record_href(&session.base, collection, id)
}

/// After a write: back to the record's panel, saying what was done.
fn back(session: &Session, collection: &str, id: &str, query: &str) -> Response {
    let href = record_href(session, collection, id);
    Redirect::to(&format!("{href}?{query}#collab")).into_response()
}

/// The message of a refusal the user can act on (a bad value, a conflict), or the error itself
/// when it is not theirs to fix (a missing right, a failure).
fn refusal(error: ops::Error) -> std::result::Result<String, Error> {
    match error {
        ops::Error::Agent(
            crate::agent::Error::Validation(message) | crate::agent::Error::Unprocessable(message),
        ) => Ok(message),
        other => Err(Error::Ops(other)),
    }
}

/// Shows the record page again with the form's problem.
async fn again(
    state: &SharedState,
    session: &Session,
    (collection, id): (&str, &str),
    message: String,
    panel: &'static str,
    typed: Vec<(String, String)>,
    about: Option<String>,
) -> Result<Response> {
    let problem = Problem {
        status: StatusCode::BAD_REQUEST,
        message,
        panel,
        typed,
        about,
        field_errors: Vec::new(),
    };
    render(state, session, collection, id, &[], Some(problem)).await
}

/// `POST …/r/{id}/notes` `title`, `content`: a new note on the record.
async fn create_note(
    State(state): State<SharedState>,
    Path((collection, id)): Path<(String, String)>,
    Posted(session, form): Posted,
) -> Result<Response> {
    let title = first(&form, "title").unwrap_or("").trim().to_owned();
    let content = first(&form, "content").unwrap_or("").trim().to_owned();
    let typed = vec![
        ("title".to_owned(), title.clone()),
        ("content".to_owned(), content.clone()),
    ];
    let target = (collection.as_str(), id.as_str());
    if title.is_empty() || content.is_empty() {
        let message = "Give the note a title and a first message.".to_owned();
        return again(&state, &session, target, message, NOTES, typed, None).await;
    }
    let html = paragraphs(&content);
    match ops::notes::create(&state, &session.caller, &collection, &id, &title, &html).await {
        Ok(_) => Ok(back(&session, &collection, &id, "panel=notes&noted=1")),
        Err(error) => {
            let message = refusal(error)?;
            again(&state, &session, target, message, NOTES, typed, None).await
        }
    }
}

/// Plain text as the HTML a note's message holds: a paragraph per blank-line-separated block,
/// every character escaped (the store sanitises again).
fn paragraphs(text: &str) -> String {
    text.replace("\r\n", "\n")
        .split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| format!("<p>{}</p>", escape(p).replace('\n', "<br>")))
        .collect()
}

fn note_id(raw: &str) -> Result<i64> {
    raw.parse()
        .map_err(|_| Error::NotFound(format!("There is no note {raw}.")))
}

/// `POST …/notes/{note}/messages` `content`: a reply in a note's thread.
async fn add_message(
    State(state): State<SharedState>,
    Path((collection, id, note)): Path<(String, String, String)>,
    Posted(session, form): Posted,
) -> Result<Response> {
    let note = note_id(&note)?;
    let content = first(&form, "content").unwrap_or("").trim().to_owned();
    let typed = vec![("content".to_owned(), content.clone())];
    let target = (collection.as_str(), id.as_str());
    let about = Some(note.to_string());
    if content.is_empty() {
        let message = "Write a message first.".to_owned();
        return again(&state, &session, target, message, NOTES, typed, about).await;
    }
    match ops::notes::add_message(&state, &session.caller, note, &paragraphs(&content)).await {
        Ok(_) => Ok(back(&session, &collection, &id, "panel=notes&replied=1")),
        Err(error) => {
            let message = refusal(error)?;
            again(&state, &session, target, message, NOTES, typed, about).await
        }
    }
}

/// `POST …/notes/{note}/archive` `archived=true|false`: archives or restores a note.
async fn archive(
    State(state): State<SharedState>,
    Path((collection, id, note)): Path<(String, String, String)>,
    Posted(session, form): Posted,
) -> Result<Response> {
    let note = note_id(&note)?;
    let archived = first(&form, "archived") != Some("false");
    ops::notes::archive(&state, &session.caller, note, archived)
        .await
        .map_err(Error::Ops)?;
    let done = if archived { "archived" } else { "unarchived" };
    Ok(back(
        &session,
        &collection,
        &id,
        &format!("panel=notes&{done}=1"),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn typed_text_becomes_escaped_paragraphs() {
        assert_eq!(
            paragraphs("a <b>x</b> & 'y'\r\nnext\r\n\r\n\r\nsecond"),
            "<p>a &lt;b&gt;x&lt;/b&gt; &amp; &#39;y&#39;<br>next</p><p>second</p>"
        );
        assert_eq!(paragraphs("  \n\n "), "");
    }

    #[test]
    fn a_change_lists_each_changed_field_before_and_after() {
        let entry = crate::platform::audit::AuditRecord {
            id: 1,
            timestamp: String::new(),
            timestamp_ms: 0,
            operation: "update".to_owned(),
            collection: "orders".to_owned(),
            record_id: Some("3".to_owned()),
            user_id: 1,
            user_first_name: Some("Ann".to_owned()),
            user_last_name: Some("Lee".to_owned()),
            user_email: Some("ann@acme.io".to_owned()),
            action_name: None,
            correlation_key: String::new(),
            previous_values: json!({"total": 10, "status": "paid", "note": null})
                .as_object()
                .unwrap()
                .clone(),
            new_values: json!({"total": 21.5, "status": "paid", "note": "x"})
                .as_object()
                .unwrap()
                .clone(),
            status: "done".to_owned(),
        };
        let view = change_view(&entry, chrono_tz::UTC);
        assert_eq!(view.operation, "Updated");
        assert_eq!(view.who, "Ann Lee");
        let changes: Vec<(&str, &str, &str)> = view
            .changes
            .iter()
            .map(|c| (c.field.as_str(), c.before.as_str(), c.after.as_str()))
            .collect();
        assert_eq!(changes, [("note", "", "x"), ("total", "10", "21.5")]);
    }
}
