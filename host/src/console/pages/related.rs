//! Linking records on a record's relation tab: "Add existing" (associate), and "Remove"
//! (dissociate) or "Delete" (dissociate with `delete`) for one row or the selected rows, after a
//! confirmation. The operations are `ops::relations`' (through `Data`), the ones
//! `POST`/`DELETE /forest/{c}/{id}/relationships/{r}` and MCP call: the same rights, scopes and
//! activity entries. A refusal the user can correct (an id that does not exist or is outside
//! their scope, nothing selected) shows the record page again with the message next to the
//! control, and changes nothing.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::{Layout, enc, named, page, record_href};
use crate::console::data::Data;
use crate::console::session::Posted;
use crate::console::session::{Session, first};
use crate::console::view;
use crate::console::{Error, Result};
use crate::state::SharedState;

/// The record page's tab of `relation`, with a notice (`added=1`, `removed=N`, `deleted=N`).
fn tab_href(base: &str, name: &str, id: &str, relation: &str, notice: &str) -> String {
    format!(
        "{}?tab={}&{notice}",
        record_href(base, name, id),
        enc(relation)
    )
}

/// The record page again, its tab `relation` showing `message` (answered with `status`).
async fn refused(
    state: &SharedState,
    session: &Session,
    (name, id, relation): (&str, &str, &str),
    status: StatusCode,
    message: String,
) -> Result<Response> {
    let pairs = [("tab".to_owned(), relation.to_owned())];
    super::record::render_with(
        state,
        session,
        name,
        id,
        &pairs,
        None,
        Some((status, message)),
    )
    .await
}

/// A failed operation: a refusal the user can act on is shown on the tab; a missing right, a
/// missing record and a server failure are error pages.
async fn failed(
    state: &SharedState,
    session: &Session,
    place: (&str, &str, &str),
    failure: crate::ops::Error,
) -> Result<Response> {
    let failure = Error::from(failure);
    let status = failure.status();
    if status.is_client_error() && status != StatusCode::FORBIDDEN {
        refused(state, session, place, status, failure.message()).await
    } else {
        Err(failure)
    }
}

/// `POST /console/c/{collection}/r/{id}/related/{relation}/add` with `id`: links that record of
/// the relation's foreign collection.
pub async fn add(
    State(state): State<SharedState>,
    Path((name, id, relation)): Path<(String, String, String)>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    named(&data, &name)?;
    let place = (name.as_str(), id.as_str(), relation.as_str());
    let target = first(&pairs, "id").unwrap_or("").trim();
    if target.is_empty() {
        let message = format!("Choose a record to add to {relation}.");
        return refused(&state, &session, place, StatusCode::BAD_REQUEST, message).await;
    }
    match data.associate(&name, &id, &relation, target).await {
        Ok(()) => Ok(
            Redirect::to(&tab_href(&session.base, &name, &id, &relation, "added=1"))
                .into_response(),
        ),
        Err(failure) => failed(&state, &session, place, failure).await,
    }
}

/// A record listed on the confirmation page.
struct Listed {
    label: String,
    href: String,
}

#[derive(Template)]
#[template(path = "dissociate.html")]
struct ConfirmPage {
    layout: Layout,
    collection: String,
    label: String,
    heading: String,
    effect: String,
    items: Vec<Listed>,
    ids: Vec<String>,
    mode: &'static str,
    delete: bool,
    submit: String,
    action: String,
    cancel_href: String,
}

/// `POST /console/c/{collection}/r/{id}/related/{relation}/remove`: a row's own button
/// (`row=remove:<id>` or `row=delete:<id>`) or the selected rows (`id`, with `mode`). Without
/// `confirm`, a page listing what will be removed or deleted; with it, one dissociation.
pub async fn remove(
    State(state): State<SharedState>,
    Path((name, id, relation)): Path<(String, String, String)>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let collection = named(&data, &name)?;
    let place = (name.as_str(), id.as_str(), relation.as_str());
    let (mode, ids): (String, Vec<String>) =
        match first(&pairs, "row").and_then(|r| r.split_once(':')) {
            Some((mode, one)) => (mode.to_owned(), vec![one.to_owned()]),
            None => (
                first(&pairs, "mode").unwrap_or("remove").to_owned(),
                pairs
                    .iter()
                    .filter(|(k, v)| k == "id" && !v.is_empty())
                    .map(|(_, v)| v.clone())
                    .collect(),
            ),
        };
    let delete = match mode.as_str() {
        "remove" => false,
        "delete" => true,
        _ => {
            return Err(
                crate::ops::Error::from(crate::agent::Error::validation(format!(
                    "Unknown mode \"{mode}\"."
                )))
                .into(),
            );
        }
    };
    let foreign = collection
        .relation(&relation)
        .filter(|r| !r.is_to_one())
        .map(|r| r.foreign_collection().to_owned())
        .ok_or_else(|| Error::NotFound(format!("{name} has no relation \"{relation}\".")))?;
    // Pages show these buttons only to who may use them: a typed post without the right is a 403.
    let rights = data.link_rights(collection, &relation).await?;
    let allowed = if delete { rights.delete } else { rights.remove };
    if !allowed {
        return Err(crate::auth::Error::forbidden().into());
    }
    if ids.is_empty() {
        let message = format!(
            "Select at least one record of {relation} to {}.",
            if delete { "delete" } else { "remove" }
        );
        return refused(&state, &session, place, StatusCode::BAD_REQUEST, message).await;
    }
    if first(&pairs, "confirm") != Some("1") {
        return confirm(&session, &data, place, &foreign, ids, delete).await;
    }
    match data.dissociate(&name, &id, &relation, &ids, delete).await {
        Ok(count) => {
            let notice = if delete {
                format!("deleted={count}")
            } else {
                format!("removed={count}")
            };
            Ok(
                Redirect::to(&tab_href(&session.base, &name, &id, &relation, &notice))
                    .into_response(),
            )
        }
        Err(failure) => failed(&state, &session, place, failure).await,
    }
}

/// The confirmation of a removal or deletion: the records it touches and what happens to them.
async fn confirm(
    session: &Session,
    data: &Data<'_>,
    (name, id, relation): (&str, &str, &str),
    foreign: &str,
    ids: Vec<String>,
    delete: bool,
) -> Result<Response> {
    let tz = session.caller.timezone;
    let collection = named(data, name)?;
    let parent = super::load(data, name, id).await?;
    let label = view::label(collection, &parent, tz);
    let foreign_schema = named(data, foreign)?;
    let mut items = Vec::new();
    for one in &ids {
        let text = match data.get(foreign, one).await {
            Ok(Some(record)) => view::label(foreign_schema, &record, tz),
            _ => one.clone(),
        };
        items.push(Listed {
            label: text,
            href: record_href(&session.base, foreign, one),
        });
    }
    let count = ids.len();
    let records = if count == 1 {
        "1 record".to_owned()
    } else {
        format!("{count} records")
    };
    let (heading, effect, submit) = if delete {
        (
            format!("Delete {records} of {relation} of {name} {label}?"),
            format!("These {foreign} records will be deleted. It cannot be undone."),
            format!("Delete {}", if count == 1 { "it" } else { "them" }),
        )
    } else {
        let effect = match collection.relation(relation) {
            Some(crate::datasource::RelationSchema::OneToMany { origin_key, .. }) => {
                format!("Their {origin_key} will be emptied. The {foreign} records are kept.")
            }
            _ => format!("The links are removed. The {foreign} records are kept."),
        };
        (
            format!("Remove {records} from {relation} of {name} {label}?"),
            effect,
            format!("Remove {}", if count == 1 { "it" } else { "them" }),
        )
    };
    let cancel_href = format!(
        "{}?tab={}",
        record_href(&session.base, name, id),
        enc(relation)
    );
    let layout = Layout::new(session, data, name, heading.clone()).await?;
    page(
        StatusCode::OK,
        &ConfirmPage {
            layout,
            collection: name.to_owned(),
            label,
            heading,
            effect,
            items,
            ids,
            mode: if delete { "delete" } else { "remove" },
            delete,
            submit,
            action: format!(
                "{}/related/{}/remove",
                record_href(&session.base, name, id),
                enc(relation)
            ),
            cancel_href,
        },
    )
}
