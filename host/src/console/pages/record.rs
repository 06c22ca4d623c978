//! A record's page: every field, to-one links, and a tab per to-many relation, where the
//! records of the relation can be linked (an existing record found by search), unlinked or
//! deleted, as the user's rights allow (the posts are `pages::related`'s).

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::table::{Row, cells};
use super::{Layout, enc, named, page, record_href};
use crate::console::collab;
use crate::console::data::{Data, LinkRights, ListQuery};
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

/// A record of the foreign collection offered by "Add existing": its label (the reference
/// field) and its id.
struct Candidate {
    id: String,
    label: String,
}

/// The "Add existing" control of a relation tab and the unlinking buttons, as the rights allow.
#[derive(Default)]
struct Linking {
    rights: LinkRights,
    /// The foreign collection.
    foreign: String,
    searchable: bool,
    /// Whether the user asked for candidates (`pick` in the query): the control is open.
    open: bool,
    pick: String,
    candidates: Vec<Candidate>,
    candidates_prev: Option<String>,
    candidates_next: Option<String>,
    /// Where "Add" posts, and where the selection of related rows posts.
    add_action: String,
    remove_action: String,
    /// What unlinking does to a related record, in words.
    remove_effect: String,
    /// A refused link or unlink, shown next to the control.
    error: Option<String>,
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
    /// This page's address (the "Add existing" search reloads it).
    here: String,
    linking: Linking,
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
/// Records "Add existing" offers per page.
const CANDIDATES_PAGE: u64 = 10;

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
    render_with(state, session, name, id, pairs, problem, None).await
}

/// The record page; with `link_error`, a refused link or unlink of the chosen tab, shown next to
/// its control and answered with its status.
pub(crate) async fn render_with(
    state: &SharedState,
    session: &Session,
    name: &str,
    id: &str,
    pairs: &[(String, String)],
    problem: Option<collab::Problem>,
    link_error: Option<(StatusCode, String)>,
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
    let mut linking = Linking::default();
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
        linking = linking_of(&data, collection, relation, foreign, &here, pairs, tz).await?;
    }
    let status = match link_error {
        Some((status, message)) => {
            linking.error = Some(message);
            linking.open = linking.open || linking.rights.add;
            status
        }
        None => StatusCode::OK,
    };
    let notice = first(pairs, "saved")
        .map(|_| "Saved.".to_owned())
        .or_else(|| first(pairs, "created").map(|_| "Created.".to_owned()))
        .or_else(|| link_notice(pairs, &chosen));
    let status = problem.as_ref().map_or(status, |p| p.status);
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
        here: here.clone(),
        linking,
        notice,
        actions,
        cards: crate::console::charts::record_cards(state, &session.caller, &name, &id).await,
        collab,
    };
    page(status, &template)
}

/// What the last link, unlink or delete on a relation tab did (`added`, `removed`, `deleted`).
fn link_notice(pairs: &[(String, String)], relation: &str) -> Option<String> {
    let count = |key: &str| first(pairs, key).and_then(|n| n.parse::<u64>().ok());
    let records = |n: u64| {
        if n == 1 {
            "1 record".to_owned()
        } else {
            format!("{n} records")
        }
    };
    if first(pairs, "added").is_some() {
        return Some(format!("Added to {relation}."));
    }
    if let Some(n) = count("removed") {
        return Some(if n == 0 {
            format!("Nothing was removed: none of the selected records is in {relation}.")
        } else {
            format!("{} removed from {relation}; they are kept.", records(n))
        });
    }
    count("deleted").map(|n| {
        if n == 0 {
            format!("Nothing was deleted: none of the selected records is in {relation}.")
        } else {
            format!("{} of {relation} deleted.", records(n))
        }
    })
}

/// The linking controls of the relation tab `relation` (to `foreign`): the user's rights and,
/// when "Add existing" was asked for (`pick`), a page of the foreign collection's records found
/// by its own search.
async fn linking_of(
    data: &Data<'_>,
    collection: &crate::datasource::CollectionSchema,
    relation: &str,
    foreign: &crate::datasource::CollectionSchema,
    here: &str,
    pairs: &[(String, String)],
    tz: chrono_tz::Tz,
) -> Result<Linking> {
    let rights = data.link_rights(collection, relation).await?;
    let action = |verb: &str| format!("{here}/related/{}/{verb}", enc(relation));
    let remove_effect = match collection.relation(relation) {
        Some(crate::datasource::RelationSchema::OneToMany { origin_key, .. }) => format!(
            "Removing empties their {origin_key}; the {} records are kept.",
            foreign.name
        ),
        _ => format!(
            "Removing unlinks them; the {} records are kept.",
            foreign.name
        ),
    };
    let mut linking = Linking {
        rights,
        foreign: foreign.name.clone(),
        searchable: foreign.searchable,
        add_action: action("add"),
        remove_action: action("remove"),
        remove_effect,
        ..Linking::default()
    };
    let Some(pick) = first(pairs, "pick").filter(|_| rights.add) else {
        return Ok(linking);
    };
    linking.open = true;
    linking.pick = pick.to_owned();
    let page: u64 = first(pairs, "ppage")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut shown: Vec<String> = foreign
        .primary_keys()
        .into_iter()
        .map(str::to_owned)
        .collect();
    if let Some(label) = view::label_column(foreign)
        && !shown.iter().any(|c| c == label)
    {
        shown.push(label.to_owned());
    }
    let query = ListQuery {
        page,
        size: CANDIDATES_PAGE,
        search: Some(pick.to_owned()).filter(|s| foreign.searchable && !s.trim().is_empty()),
        fields: vec![(format!("fields[{}]", foreign.name), shown.join(","))],
        ..ListQuery::default()
    };
    let found = data.list(&foreign.name, &query).await?;
    linking.candidates = found
        .iter()
        .filter_map(|record| {
            let id = pack_id(foreign, record).ok()?;
            Some(Candidate {
                label: view::label(foreign, record, tz),
                id,
            })
        })
        .collect();
    let href = |p: u64| format!("{here}?tab={}&pick={}&ppage={p}", enc(relation), enc(pick));
    linking.candidates_prev = (page > 1).then(|| href(page - 1));
    linking.candidates_next = (found.len() as u64 == CANDIDATES_PAGE).then(|| href(page + 1));
    Ok(linking)
}
