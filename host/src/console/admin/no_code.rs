//! "No-code actions" (admins): the webhook and update-record actions of the config file (shown,
//! not editable: the file is theirs) and those added here, each removable, with a form to add
//! one. Adding or removing one reloads the served generation at once, so the action is in the
//! collection's menu on the next page; a reload that fails keeps the served one and says why.
//! Stored through `ops::no_code` (checked as a load would check it; admin log entries
//! `noCodeAction`, header values masked). Header values are never shown back.

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{Map, Value as Json, json};

use super::{Tab, admin_layout, tabs};
use crate::config::{NoCodeAction, NoCodeKind};
use crate::console::pages::{Layout, page};
use crate::console::session::{Posted, Session, first, form_pairs};
use crate::console::{Error, Result};
use crate::ops;
use crate::state::SharedState;

/// One listed action.
struct Row {
    id: Option<i64>,
    collection: String,
    name: String,
    kind: &'static str,
    scope: &'static str,
    /// Where it sends or what it writes, in a line.
    what: String,
    problem: Option<String>,
}

/// The add form as typed.
#[derive(Default)]
struct Form {
    collection: String,
    name: String,
    kind: String,
    scope: String,
    url: String,
    method: String,
    headers: String,
    timeout: String,
    fields: String,
}

#[derive(Template)]
#[template(path = "admin_no_code.html")]
struct NoCodePage {
    layout: Layout,
    tabs: Vec<Tab>,
    rows: Vec<Row>,
    collections: Vec<String>,
    form: Form,
    webhooks_on: bool,
    updates_on: bool,
    notice: Option<String>,
    error: Option<String>,
}

fn row(id: Option<i64>, action: &NoCodeAction, problem: Option<String>) -> Row {
    let what = match &action.kind {
        NoCodeKind::Webhook { url, method, .. } => {
            format!("{} {}", method.as_str(), crate::config::shown_url(url))
        }
        NoCodeKind::UpdateRecord { fields } => fields
            .iter()
            .map(|(field, value)| format!("{field} = {value}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    Row {
        id,
        collection: action.collection.clone(),
        name: action.name.clone(),
        kind: action.type_name(),
        scope: action.scope.as_api(),
        what,
        problem,
    }
}

async fn render(
    state: &SharedState,
    session: &Session,
    form: Form,
    notice: Option<String>,
    error: Option<String>,
) -> Result<Response> {
    let layout = admin_layout(state, session, "actions", "No-code actions".to_owned()).await?;
    let rows = ops::no_code::list(&state.ops, &session.caller)
        .await?
        .into_iter()
        .map(|listed| match &listed.action {
            Some(action) => row(listed.id, action, listed.problem),
            None => Row {
                id: listed.id,
                collection: String::new(),
                name: format!("#{}", listed.id.unwrap_or_default()),
                kind: "?",
                scope: "",
                what: listed.definition.to_string(),
                problem: listed.problem,
            },
        })
        .collect();
    let status = if error.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        status,
        &NoCodePage {
            tabs: tabs(&session.base, "actions"),
            rows,
            collections: state.schema().collections.keys().cloned().collect(),
            form,
            webhooks_on: state.no_code.webhook_custom_actions,
            updates_on: state.no_code.update_record_custom_actions,
            notice,
            error,
            layout,
        },
    )
}

/// `GET /console/admin/actions`.
pub async fn list(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let query = form_pairs(query.unwrap_or_default().as_bytes());
    let notice = match first(&query, "done") {
        Some("added") => Some("Added: the action is in its collection's menu now.".to_owned()),
        Some("removed") => Some("Removed.".to_owned()),
        _ => None,
    };
    let form = Form {
        scope: "single".to_owned(),
        method: "POST".to_owned(),
        timeout: "10".to_owned(),
        ..Form::default()
    };
    render(&state, &session, form, notice, None).await
}

impl Form {
    fn read(pairs: &[(String, String)]) -> Self {
        let text = |key| first(pairs, key).unwrap_or_default().trim().to_owned();
        Self {
            collection: text("collection"),
            name: text("name"),
            kind: text("type"),
            scope: text("scope"),
            url: text("url"),
            method: text("method"),
            headers: text("headers"),
            timeout: text("timeoutInSeconds"),
            fields: text("fields"),
        }
    }

    /// The `[[noCodeActions]]` entry typed, or what is wrong with the lines of a text area.
    fn definition(&self) -> std::result::Result<Json, String> {
        let mut entry = json!({
            "collection": self.collection,
            "name": self.name,
            "type": self.kind,
            "scope": self.scope,
        });
        if self.kind == "webhook" {
            entry["url"] = json!(self.url);
            if !self.method.is_empty() {
                entry["method"] = json!(self.method);
            }
            if !self.timeout.is_empty() {
                let seconds: u64 = self.timeout.parse().map_err(|_| {
                    format!("The timeout is \"{}\": a number of seconds.", self.timeout)
                })?;
                entry["timeoutInSeconds"] = json!(seconds);
            }
            let headers = lines(&self.headers, ':', "Headers", "Name: value")?;
            if !headers.is_empty() {
                entry["headers"] = Json::Object(headers);
            }
        } else {
            // `field = value`: the value read as JSON (`2`, `true`, `null`), else as text.
            let fields = lines(&self.fields, '=', "Values", "field = value")?
                .into_iter()
                .map(|(field, value)| {
                    let text = value.as_str().unwrap_or_default();
                    let typed = serde_json::from_str(text).unwrap_or_else(|_| json!(text));
                    (field, typed)
                })
                .collect::<Map<_, _>>();
            entry["fields"] = Json::Object(fields);
        }
        Ok(entry)
    }
}

/// The `name SEP value` lines of a text area, in order.
fn lines(
    text: &str,
    separator: char,
    what: &str,
    shape: &str,
) -> std::result::Result<Map<String, Json>, String> {
    let mut map = Map::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(separator).ok_or_else(|| {
            format!("{what}: \"{line}\" is not of the form \"{shape}\" (one per line).")
        })?;
        map.insert(name.trim().to_owned(), json!(value.trim()));
    }
    Ok(map)
}

/// `POST /console/admin/actions`: adds the typed action, then reloads so that it serves.
pub async fn add(
    State(state): State<SharedState>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let form = Form::read(&pairs);
    let definition = match form.definition() {
        Ok(definition) => definition,
        Err(problem) => return render(&state, &session, form, None, Some(problem)).await,
    };
    match ops::no_code::add(&state.ops, &session.caller, &definition).await {
        Ok(id) => {
            tracing::info!(
                by = session.caller.id,
                id,
                "no-code action added from the console"
            );
            reloaded(&state, &session, "added").await
        }
        Err(ops::Error::Field { message, .. }) => {
            render(&state, &session, form, None, Some(sentence(&message))).await
        }
        Err(other) => Err(Error::from(other)),
    }
}

/// `POST /console/admin/actions/{id}/remove`.
pub async fn remove(
    State(state): State<SharedState>,
    Path(id): Path<i64>,
    Posted(session, _): Posted,
) -> Result<Response> {
    ops::no_code::remove(&state.ops, &session.caller, id).await?;
    reloaded(&state, &session, "removed").await
}

/// The list after a reload; a reload that fails says why (the change is stored and serves at
/// the next successful one).
async fn reloaded(state: &SharedState, session: &Session, done: &str) -> Result<Response> {
    match crate::state::reload_with(&state.reloader).await {
        Some(Err(message)) => {
            let error = format!(
                "Saved, but the reload failed; the previous actions are still served: {message}"
            );
            render(state, session, Form::default(), None, Some(error)).await
        }
        // Reloaded, or a bare stack that cannot reload (tests): the list shows the store.
        _ => Ok(
            Redirect::to(&format!("{}/admin/actions?done={done}", session.base)).into_response(),
        ),
    }
}

/// A message as a sentence: capitalised, with a full stop.
fn sentence(message: &str) -> String {
    let mut chars = message.chars();
    let mut text = chars.next().map_or_else(String::new, |c| {
        format!("{}{}", c.to_uppercase(), chars.as_str())
    });
    if !text.ends_with('.') {
        text.push('.');
    }
    text
}
