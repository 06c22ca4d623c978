//! The edit and create forms: one input per editable field, each value checked on its own
//! so that a message sits next to the field that does not read.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono_tz::Tz;
use serde_json::json;

use super::{Layout, enc, guarded, load, page, record_href};
use crate::console::data::Data;
use crate::console::session::Posted;
use crate::console::session::{Session, first};
use crate::console::view::{self, InputKind};
use crate::console::{Error, Result};
use crate::datasource::{CollectionSchema, ColumnSchema, Record};
use crate::state::SharedState;

// ----- edit ------------------------------------------------------------------------------

struct InputView {
    name: String,
    /// `text`, `number`, `boolean`, `select`, `datetime`, `date`, `time`, `json`, `readonly`.
    kind: &'static str,
    value: String,
    options: Vec<String>,
    nullable: bool,
    error: Option<String>,
    hint: String,
}

#[derive(Template)]
#[template(path = "edit.html")]
struct EditPage {
    layout: Layout,
    collection: String,
    label: String,
    heading: String,
    submit: &'static str,
    action: String,
    cancel_href: String,
    inputs: Vec<InputView>,
    error: Option<String>,
}

fn kind_name(kind: &InputKind) -> &'static str {
    match kind {
        InputKind::Text => "text",
        InputKind::Number => "number",
        InputKind::Boolean => "boolean",
        InputKind::Select(_) => "select",
        InputKind::DateTime => "datetime",
        InputKind::Date => "date",
        InputKind::Time => "time",
        InputKind::Json => "json",
        InputKind::ReadOnly => "readonly",
    }
}

/// Whether a column can be edited in the form: not a key, not read-only, a kind with an input.
fn editable(collection: &CollectionSchema, name: &str, column: &ColumnSchema) -> bool {
    !column.is_read_only
        && !column.is_primary_key
        && !collection.primary_keys().contains(&name)
        && view::input_kind(column) != InputKind::ReadOnly
}

/// Whether a column can be given in a create form: keys too (a composite key is typed in; an
/// auto-increment one is left empty).
fn creatable(collection: &CollectionSchema, name: &str, column: &ColumnSchema) -> bool {
    view::input_kind(column) != InputKind::ReadOnly
        && (!column.is_read_only
            || column.is_primary_key
            || collection.primary_keys().contains(&name))
}

/// The form's inputs for `record` (empty when creating); `typed` holds what the user typed
/// (kept after an error).
fn inputs(
    collection: &CollectionSchema,
    record: &Record,
    typed: Option<&[(String, String)]>,
    errors: &[(String, String)],
    tz: Tz,
    creating: bool,
) -> Vec<InputView> {
    collection
        .columns()
        .map(|(name, column)| {
            let kind = view::input_kind(column);
            let original = record
                .get(name)
                .map(|v| view::input_text(v, &kind, tz))
                .unwrap_or_default();
            let editable = if creating {
                creatable(collection, name, column)
            } else {
                editable(collection, name, column)
            };
            let value = match typed.and_then(|t| first(t, &format!("field:{name}"))) {
                Some(text) if editable => text.to_owned(),
                _ => original,
            };
            let hint = match &kind {
                _ if !editable => String::new(),
                InputKind::DateTime => format!("Date and time in {}", tz.name()),
                InputKind::Json => "JSON".to_owned(),
                InputKind::Number => "A number".to_owned(),
                _ => String::new(),
            };
            InputView {
                name: name.clone(),
                kind: if editable {
                    kind_name(&kind)
                } else {
                    "readonly"
                },
                options: match &kind {
                    InputKind::Select(values) => values.clone(),
                    _ => Vec::new(),
                },
                value,
                nullable: column.allow_null,
                error: errors
                    .iter()
                    .find(|(field, _)| field == name)
                    .map(|(_, m)| m.clone()),
                hint,
            }
        })
        .collect()
}

/// `GET /console/c/{collection}/r/{id}/edit`.
pub async fn edit_form(
    State(state): State<SharedState>,
    session: Session,
    Path((name, id)): Path<(String, String)>,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let collection = guarded(&data, &name, |rights| rights.edit).await?;
    let record = load(&data, &name, &id).await?;
    render_edit(
        &session,
        &data,
        collection,
        &id,
        &record,
        None,
        &[],
        None,
        StatusCode::OK,
    )
    .await
}

#[allow(clippy::too_many_arguments, reason = "one page's parts, passed once")]
async fn render_edit(
    session: &Session,
    data: &Data<'_>,
    collection: &CollectionSchema,
    id: &str,
    record: &Record,
    typed: Option<&[(String, String)]>,
    errors: &[(String, String)],
    error: Option<String>,
    status: StatusCode,
) -> Result<Response> {
    let tz = session.caller.timezone;
    let here = record_href(&session.base, &collection.name, id);
    let label = view::label(collection, record, tz);
    let layout = Layout::new(
        session,
        data,
        &collection.name,
        format!("Edit {} {label}", collection.name),
    )
    .await?;
    let template = EditPage {
        layout,
        collection: collection.name.clone(),
        heading: format!("Edit {label}"),
        label,
        submit: "Save",
        action: format!("{here}/edit"),
        cancel_href: here,
        inputs: inputs(collection, record, typed, errors, tz, false),
        error,
    };
    page(status, &template)
}

/// `POST /console/c/{collection}/r/{id}/edit`: the changed fields, checked one by one (a
/// message next to each field that does not read), then written in one update.
pub async fn edit_save(
    State(state): State<SharedState>,
    session: Session,
    Path((name, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response> {
    let pairs = session.form(&headers, &body)?;
    let data = Data::new(&state, &session.caller);
    let collection = guarded(&data, &name, |rights| rights.edit).await?;
    let record = load(&data, &name, &id).await?;
    let tz = session.caller.timezone;
    let mut errors: Vec<(String, String)> = Vec::new();
    let mut patch = Record::new();
    for (field, column) in collection.columns() {
        if !editable(collection, field, column) {
            continue;
        }
        let Some(text) = first(&pairs, &format!("field:{field}")) else {
            continue;
        };
        let kind = view::input_kind(column);
        let original = record
            .get(field)
            .map(|v| view::input_text(v, &kind, tz))
            .unwrap_or_default();
        // Only what changed is written: an untouched date keeps its milliseconds.
        if text.replace("\r\n", "\n") == original {
            continue;
        }
        let attribute = match view::parse_input(text, &kind, column, tz) {
            Ok(attribute) => attribute,
            Err(message) => {
                errors.push((field.clone(), message));
                continue;
            }
        };
        // The write body's own casting and enum checks, field by field.
        let body = json!({"data": {"attributes": {field.as_str(): attribute}}});
        match crate::agent::body::parse_update(&body, collection) {
            Ok(one) => {
                for (key, value) in one.iter() {
                    patch.insert(key, value.clone());
                }
            }
            Err(error) => errors.push((field.clone(), error.to_string())),
        }
    }
    if !errors.is_empty() {
        let message = Some(format!(
            "{} field{} need{} a correction; nothing was saved.",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" },
            if errors.len() == 1 { "s" } else { "" },
        ));
        return render_edit(
            &session,
            &data,
            collection,
            &id,
            &record,
            Some(pairs.as_slice()),
            &errors,
            message,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    let here = record_href(&session.base, &name, &id);
    if patch.is_empty() {
        return Ok(Redirect::to(&here).into_response());
    }
    match data.update(&name, &id, &patch).await {
        Ok(()) => Ok(Redirect::to(&format!("{here}?saved=1")).into_response()),
        Err(failure) => {
            let failure = Error::from(failure);
            let status = failure.status();
            if status.is_client_error()
                && status != StatusCode::FORBIDDEN
                && status != StatusCode::NOT_FOUND
            {
                // A rule of the datasource (validation, constraint): next to the field it names.
                let message = failure.message();
                let errors: Vec<(String, String)> = patch
                    .keys()
                    .filter(|field| message.contains(field))
                    .map(|field| (field.to_owned(), message.clone()))
                    .collect();
                render_edit(
                    &session,
                    &data,
                    collection,
                    &id,
                    &record,
                    Some(pairs.as_slice()),
                    &errors,
                    Some(format!("Nothing was saved: {message}")),
                    StatusCode::UNPROCESSABLE_ENTITY,
                )
                .await
            } else {
                Err(failure)
            }
        }
    }
}

// ----- create ------------------------------------------------------------------------------

async fn render_create(
    session: &Session,
    data: &Data<'_>,
    collection: &CollectionSchema,
    typed: Option<&[(String, String)]>,
    errors: &[(String, String)],
    error: Option<String>,
    status: StatusCode,
) -> Result<Response> {
    let name = &collection.name;
    let table = format!("{}/c/{}", session.base, enc(name));
    let layout = Layout::new(session, data, name, format!("New record in {name}")).await?;
    let template = EditPage {
        layout,
        collection: name.clone(),
        label: String::new(),
        heading: format!("New record in {name}"),
        submit: "Create",
        action: format!("{table}/new"),
        cancel_href: table,
        inputs: inputs(
            collection,
            &Record::new(),
            typed,
            errors,
            session.caller.timezone,
            true,
        ),
        error,
    };
    page(status, &template)
}

/// `GET /console/c/{collection}/new`: an empty form, for users with the add right.
pub async fn new_form(
    State(state): State<SharedState>,
    session: Session,
    Path(name): Path<String>,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let collection = guarded(&data, &name, |rights| rights.add).await?;
    render_create(&session, &data, collection, None, &[], None, StatusCode::OK).await
}

/// `POST /console/c/{collection}/new`: the fields given (empty ones are left to the database),
/// each checked, then one create.
pub async fn create(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let collection = guarded(&data, &name, |rights| rights.add).await?;
    let tz = session.caller.timezone;
    let mut errors: Vec<(String, String)> = Vec::new();
    let mut attributes = serde_json::Map::new();
    for (field, column) in collection.columns() {
        if !creatable(collection, field, column) {
            continue;
        }
        let Some(text) = first(&pairs, &format!("field:{field}")) else {
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match view::parse_input(text, &view::input_kind(column), column, tz) {
            Ok(attribute) => {
                attributes.insert(field.clone(), attribute);
            }
            Err(message) => errors.push((field.clone(), message)),
        }
    }
    let failed = |errors: Vec<(String, String)>, message: String| {
        let pairs = pairs.clone();
        let data = &data;
        let session = &session;
        async move {
            render_create(
                session,
                data,
                collection,
                Some(pairs.as_slice()),
                &errors,
                Some(message),
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
        }
    };
    if !errors.is_empty() {
        let count = errors.len();
        return failed(
            errors,
            format!("{count} field(s) need a correction; nothing was created."),
        )
        .await;
    }
    if attributes.is_empty() {
        return failed(Vec::new(), "Fill in at least one field.".to_owned()).await;
    }
    let given: Vec<String> = attributes.keys().cloned().collect();
    match data.create(&name, attributes).await {
        Ok(id) => Ok(Redirect::to(&format!(
            "{}?created=1",
            record_href(&session.base, &name, &id)
        ))
        .into_response()),
        Err(failure) => {
            let failure = Error::from(failure);
            let status = failure.status();
            if status.is_client_error() && status != StatusCode::FORBIDDEN {
                let message = failure.message();
                let errors = given
                    .iter()
                    .filter(|field| message.contains(field.as_str()))
                    .map(|field| (field.clone(), message.clone()))
                    .collect();
                failed(errors, format!("Nothing was created: {message}")).await
            } else {
                Err(failure)
            }
        }
    }
}
