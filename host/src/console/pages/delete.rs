//! Deleting one record, after a confirmation page.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::{Layout, enc, guarded, load, page, record_href};
use crate::console::Result;
use crate::console::data::Data;
use crate::console::session::Posted;
use crate::console::session::Session;
use crate::console::view::{self};
use crate::state::SharedState;

// ----- delete ----------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "delete.html")]
struct DeletePage {
    layout: Layout,
    collection: String,
    label: String,
    id: String,
    action: String,
    cancel_href: String,
}

/// `GET /console/c/{collection}/r/{id}/delete`: what will be deleted, and a confirmation.
pub async fn delete_confirm(
    State(state): State<SharedState>,
    session: Session,
    Path((name, id)): Path<(String, String)>,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let collection = guarded(&data, &name, |rights| rights.delete).await?;
    let record = load(&data, &name, &id).await?;
    let label = view::label(collection, &record, session.caller.timezone);
    let here = record_href(&session.base, &name, &id);
    let layout = Layout::new(&session, &data, &name, format!("Delete {name} {label}")).await?;
    page(
        StatusCode::OK,
        &DeletePage {
            layout,
            collection: name.clone(),
            label,
            id: id.clone(),
            action: format!("{here}/delete"),
            cancel_href: here,
        },
    )
}

/// `POST /console/c/{collection}/r/{id}/delete`.
pub async fn delete(
    State(state): State<SharedState>,
    Path((name, id)): Path<(String, String)>,
    Posted(session, _): Posted,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    data.delete(&name, &id).await?;
    Ok(Redirect::to(&format!("{}/c/{}?deleted=1", session.base, enc(&name))).into_response())
}
