//! A record's page: every field, to-one links, and a tab per to-many relation.

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::table::{Row, cells};
use super::{Layout, enc, named, page, record_href};
use crate::console::collab;
use crate::console::data::{Data, ListQuery};
use crate::console::session::{Session, first, form_pairs};
use crate::console::view::{self, InputKind};
use crate::console::{Error, Result};
use crate::datasource::pack_id;
use crate::state::SharedState;

// ----- record ----------------------------------------------------------------------------

struct FieldView {
    name: String,
    text: String,
    href: Option<String>,
}

struct Tab {
    name: String,
    href: String,
    active: bool,
}

#[derive(Template)]
#[template(path = "record.html")]
struct RecordPage {
    layout: Layout,
    collection: String,
    label: String,
    table_href: String,
    edit_href: Option<String>,
    delete_href: Option<String>,
    fields: Vec<FieldView>,
    tabs: Vec<Tab>,
    related_name: String,
    related_columns: Vec<String>,
    related_rows: Vec<Row>,
    related_prev: Option<String>,
    related_next: Option<String>,
    notice: Option<String>,
    /// The actions the user may run on this record (single and bulk ones).
    actions: Vec<crate::console::actions::ActionButton>,
    /// The plugin charts of the record (`lifetime_value` on a customer).
    cards: Vec<crate::console::charts::Card>,
    /// The collaboration panel: notes, activity, history, workflow runs.
    collab: collab::Panel,
}

/// Columns a related list shows: the first few of the foreign collection.
const RELATED_COLUMNS: usize = 6;
const RELATED_PAGE: u64 = 10;

/// `GET /console/c/{collection}/r/{id}`: every field, to-one links, a tab per to-many relation,
/// and the collaboration panel (notes, activity, history, workflow runs).
pub async fn record(
    State(state): State<SharedState>,
    session: Session,
    Path((name, id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let pairs = form_pairs(query.as_deref().unwrap_or("").as_bytes());
    render(&state, &session, &name, &id, &pairs, None).await
}

/// The record page for the query `pairs`; with a `problem`, the collaboration form that failed
/// is shown again with its message and what the user typed (answered with its status).
pub(crate) async fn render(
    state: &SharedState,
    session: &Session,
    name: &str,
    id: &str,
    pairs: &[(String, String)],
    problem: Option<collab::Problem>,
) -> Result<Response> {
    let (name, id) = (name.to_owned(), id.to_owned());
    let data = Data::new(state, &session.caller);
    let collection = named(&data, &name)?;
    let record = data.get(&name, &id).await?.ok_or_else(|| {
        Error::NotFound(format!(
            "There is no record {id} in {name} that you may see."
        ))
    })?;
    let rights = data.rights(&name).await?;
    let base = session.base.clone();
    let tz = session.caller.timezone;
    let names: Vec<String> = collection
        .fields
        .iter()
        .filter(|(_, f)| f.as_relation().is_none_or(|r| r.is_to_one()))
        .map(|(n, _)| n.clone())
        .collect();
    let fields = cells(&base, &data, collection, &record, &names, tz)
        .into_iter()
        .zip(&names)
        .map(|(cell, name)| FieldView {
            name: name.clone(),
            text: cell.text,
            href: cell.href,
        })
        .collect();
    let relations = data.browsable_relations(collection).await?;
    let chosen = first(pairs, "tab")
        .filter(|t| relations.iter().any(|(r, _)| r == t))
        .map(str::to_owned)
        .or_else(|| relations.first().map(|(r, _)| r.clone()))
        .unwrap_or_default();
    let related_page: u64 = first(pairs, "rpage")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .max(1);
    let here = record_href(&base, &name, &id);
    let tabs = relations
        .iter()
        .map(|(relation, _)| Tab {
            name: relation.clone(),
            href: format!("{here}?tab={}", enc(relation)),
            active: *relation == chosen,
        })
        .collect();
    let (mut related_columns, mut related_rows, mut related_prev, mut related_next) =
        (Vec::new(), Vec::new(), None, None);
    if let Some((relation, foreign_name)) = relations.iter().find(|(r, _)| *r == chosen)
        && let Ok(foreign) = data.schema().collection(foreign_name)
    {
        related_columns = foreign
            .columns()
            .filter(|(_, c)| view::input_kind(c) != InputKind::ReadOnly)
            .map(|(n, _)| n.clone())
            .take(RELATED_COLUMNS)
            .collect();
        let query = ListQuery {
            page: related_page,
            size: RELATED_PAGE,
            fields: vec![(format!("fields[{foreign_name}]"), related_columns.join(","))],
            ..ListQuery::default()
        };
        let records = data.related(&name, &id, relation, &query).await?;
        related_rows = records
            .iter()
            .map(|r| {
                let rid = pack_id(foreign, r).unwrap_or_default();
                Row {
                    id: rid.clone(),
                    href: record_href(&base, foreign_name, &rid),
                    edit_href: None,
                    label: view::label(foreign, r, tz),
                    cells: cells(&base, &data, foreign, r, &related_columns, tz),
                }
            })
            .collect();
        let tab = |p: u64| format!("{here}?tab={}&rpage={p}", enc(relation));
        related_prev = (related_page > 1).then(|| tab(related_page - 1));
        related_next = (related_rows.len() as u64 == RELATED_PAGE).then(|| tab(related_page + 1));
    }
    let notice = first(pairs, "saved")
        .map(|_| "Saved.".to_owned())
        .or_else(|| first(pairs, "created").map(|_| "Created.".to_owned()));
    let status = problem.as_ref().map_or(StatusCode::OK, |p| p.status);
    let collab = collab::panel(state, session, &name, &id, &here, pairs, problem).await?;
    let label = view::label(collection, &record, tz);
    let actions = crate::console::actions::buttons(state, &session.caller, collection)
        .await?
        .into_iter()
        .filter(|b| b.scope != "global")
        .map(|mut b| {
            b.href = format!("{}?id={}", b.href, enc(&id));
            b
        })
        .collect();
    let layout = Layout::new(session, &data, &name, format!("{name} {label}")).await?;
    let template = RecordPage {
        layout,
        collection: name.clone(),
        label,
        table_href: format!("{base}/c/{}", enc(&name)),
        edit_href: rights.edit.then(|| format!("{here}/edit")),
        delete_href: rights.delete.then(|| format!("{here}/delete")),
        fields,
        tabs,
        related_name: chosen,
        related_columns,
        related_rows,
        related_prev,
        related_next,
        notice,
        actions,
        cards: crate::console::charts::record_cards(state, &session.caller, &name, &id).await,
        collab,
    };
    page(status, &template)
}
