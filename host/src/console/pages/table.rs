//! A collection's table: paging, count, sort, columns, search, segments, the filter builder
//! (nested AND/OR groups, `filters`), CSV export, bulk delete of the selected rows or of every
//! record matching the table ("Select all N matching records").

use std::fmt::Write as _;

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use chrono_tz::Tz;
use serde_json::Value as Json;

use super::filters::{Condition, Group, Item};
use super::{DEFAULT_SIZE, Layout, MAX_SIZE, SIZES, enc, guarded, named, page, record_href};
use crate::console::data::{Data, ListQuery, to_one_target};
use crate::console::session::Posted;
use crate::console::session::{Session, first, form_pairs};
use crate::console::view::{self, InputKind};
use crate::console::{Error, Result};
use crate::datasource::{CollectionSchema, Operator, Record, Value, pack_id};
use crate::state::SharedState;

// ----- table -----------------------------------------------------------------------------

/// A table page's state, as its URL carries it.
#[derive(Debug, Clone, Default)]
struct TableState {
    page: u64,
    size: u64,
    sort: String,
    search: String,
    extended: bool,
    segment: String,
    /// Chosen columns; empty: the default ones.
    columns: Vec<String>,
    /// The filter builder's conditions and groups, as typed.
    filter: Group,
    /// The condition tree of `filter` once checked (what links carry as `filters`).
    tree: Option<Json>,
    /// Why the address's `filters` could not be read.
    filter_error: Option<String>,
    /// Whether the builder's fields or a builder button came with the request (not a link).
    built: bool,
    /// "Select all N matching records": the selection is every record of this table.
    all: bool,
}

/// A field of the filter builder's form (`ff`, `fx`, `ga.<path>`, `c<n>.<part>`), as opposed to
/// a link's `filters`.
fn builder_key(key: &str) -> bool {
    let numbered = key
        .strip_prefix('c')
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    numbered || key == "ff" || key == "fx" || key.starts_with("ga.")
}

impl TableState {
    fn parse(query: &str) -> Self {
        Self::from_pairs(&form_pairs(query.as_bytes()))
    }

    fn from_pairs(pairs: &[(String, String)]) -> Self {
        let get = |key: &str| first(pairs, key).unwrap_or("").to_owned();
        let all = |key: &str| -> Vec<String> {
            pairs
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .collect()
        };
        let (filter, filter_error) = Group::from_pairs(pairs);
        let built = first(pairs, "filters").is_none() && pairs.iter().any(|(k, _)| builder_key(k));
        Self {
            page: get("page").parse().unwrap_or(1).max(1),
            size: get("size")
                .parse()
                .unwrap_or(DEFAULT_SIZE)
                .clamp(1, MAX_SIZE),
            sort: get("sort"),
            search: get("q"),
            extended: get("ext") == "1",
            segment: get("segment"),
            columns: all("col")
                .into_iter()
                .flat_map(|c| c.split(',').map(str::to_owned).collect::<Vec<_>>())
                .filter(|c| !c.is_empty())
                .collect(),
            filter,
            tree: None,
            filter_error,
            built,
            all: get("all") == "1",
        }
    }

    /// The table's URL with this state.
    fn href(&self, base: &str, collection: &str) -> String {
        let mut out = format!("{base}/c/{}?", enc(collection));
        let mut add = |key: &str, value: &str| {
            let _ = write!(out, "{key}={}&", enc(value));
        };
        if self.page > 1 {
            add("page", &self.page.to_string());
        }
        if self.size != DEFAULT_SIZE {
            add("size", &self.size.to_string());
        }
        if !self.sort.is_empty() {
            add("sort", &self.sort);
        }
        if !self.search.is_empty() {
            add("q", &self.search);
            if self.extended {
                add("ext", "1");
            }
        }
        if !self.segment.is_empty() {
            add("segment", &self.segment);
        }
        if !self.columns.is_empty() {
            add("col", &self.columns.join(","));
        }
        match &self.tree {
            Some(tree) => add("filters", &tree.to_string()),
            None => {
                for (key, value) in self.filter.form_pairs() {
                    add(&key, &value);
                }
            }
        }
        if self.all {
            add("all", "1");
        }
        out.pop();
        out
    }

    /// The CSV export of exactly this table (filter, search, segment, sort, columns).
    fn export_href(&self, base: &str, collection: &str) -> String {
        let href = self.href(base, collection);
        match href.split_once('?') {
            Some((path, query)) => format!("{path}/export?{query}"),
            None => format!("{href}/export"),
        }
    }

    fn with(&self, change: impl FnOnce(&mut Self)) -> Self {
        let mut next = self.clone();
        change(&mut next);
        next
    }
}

struct Column {
    name: String,
    sort_href: Option<String>,
    /// `ascending`, `descending` or `none` (aria-sort); empty when not sortable.
    sorted: &'static str,
}

pub(super) struct Cell {
    pub(super) text: String,
    pub(super) href: Option<String>,
}

pub(super) struct Row {
    /// The packed id (the bulk selection's value).
    pub(super) id: String,
    pub(super) href: String,
    pub(super) edit_href: Option<String>,
    pub(super) label: String,
    pub(super) cells: Vec<Cell>,
}

/// The selection of every record the table's query matches, past this page.
struct SelectAll {
    /// The selection is every matching record (the rows left unchecked are kept).
    active: bool,
    /// The table with every matching record selected, and without.
    href: String,
    clear_href: String,
    /// "all 2345 matching records".
    matching: String,
    page_rows: usize,
    /// The query the selection posts (`all`, `q`, `ext`, `segment`, `filters`).
    hidden: Vec<(String, String)>,
}

struct Choice {
    name: String,
    checked: bool,
}

struct SegmentLink {
    name: String,
    href: String,
    active: bool,
}

#[derive(Template)]
#[template(path = "table.html")]
struct TablePage {
    layout: Layout,
    collection: String,
    add_href: Option<String>,
    export_href: Option<String>,
    /// The collection's dashboard, when it has charts.
    dashboard_href: Option<String>,
    /// Where the selection of rows is posted, for users who may delete.
    bulk_action: Option<String>,
    /// The actions on the selected rows (single and bulk), and those on the whole collection.
    selection_actions: Vec<crate::console::actions::ActionButton>,
    global_actions: Vec<crate::console::actions::ActionButton>,
    /// Whether rows have a checkbox: some button works on the selection.
    selectable: bool,
    /// Where the selection form posts by default (each button names its own target).
    selection_target: String,
    /// "Select all N matching records", on a table whose rows may be deleted.
    select_all: Option<SelectAll>,
    columns: Vec<Column>,
    choices: Vec<Choice>,
    rows: Vec<Row>,
    count: String,
    page: u64,
    prev_href: Option<String>,
    next_href: Option<String>,
    sizes: Vec<(u64, bool)>,
    search: String,
    extended: bool,
    searchable: bool,
    segments: Vec<SegmentLink>,
    all_href: String,
    filter_fields: Vec<view::FilterField>,
    operators: Vec<(String, String)>,
    /// The filter builder's lines (groups and conditions).
    builder: Vec<Item>,
    /// Conditions filled in; the builder is open when there are some.
    filter_count: usize,
    filters_open: bool,
    state_sort: String,
    state_segment: String,
    reset_href: String,
    error: Option<String>,
    notice: Option<String>,
}

/// The fields a table shows by default: every column but binary ones, then to-one relations.
fn default_columns(collection: &CollectionSchema) -> Vec<String> {
    collection
        .fields
        .iter()
        .filter(|(name, field)| match field {
            crate::datasource::schema::FieldSchema::Column(column) => {
                view::input_kind(column) != InputKind::ReadOnly
                    || collection.primary_keys().contains(&name.as_str())
            }
            crate::datasource::schema::FieldSchema::Relation(relation) => relation.is_to_one(),
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// The condition tree of the filter builder (`filters` JSON), or the message of a condition
/// that does not read.
fn filter_tree(
    data: &Data<'_>,
    collection: &CollectionSchema,
    group: &Group,
) -> std::result::Result<Option<Json>, String> {
    group.tree(&|condition| filter_leaf(data, collection, condition))
}

/// One condition of the builder as a leaf of the condition tree.
fn filter_leaf(
    data: &Data<'_>,
    collection: &CollectionSchema,
    condition: &Condition,
) -> std::result::Result<Json, String> {
    let Condition {
        field,
        operator,
        value,
        ..
    } = condition;
    view::condition_leaf(
        data.schema(),
        collection,
        field,
        operator,
        value,
        view::ConditionUse::Filter,
    )
}

/// The cells of a record for `columns`: values as text, to-one relations as links.
pub(super) fn cells(
    base: &str,
    data: &Data<'_>,
    collection: &CollectionSchema,
    record: &Record,
    columns: &[String],
    tz: Tz,
) -> Vec<Cell> {
    columns
        .iter()
        .map(
            |name| match (record.get(name), to_one_target(collection, name)) {
                (Some(Value::Record(inner)), Some(target)) => {
                    match data.schema().collection(target) {
                        Ok(foreign) => Cell {
                            text: view::label(foreign, inner, tz),
                            href: pack_id(foreign, inner)
                                .ok()
                                .map(|id| record_href(base, target, &id)),
                        },
                        Err(_) => Cell {
                            text: String::new(),
                            href: None,
                        },
                    }
                }
                (Some(value), _) => Cell {
                    text: view::display(value, tz),
                    href: None,
                },
                (None, _) => Cell {
                    text: String::new(),
                    href: None,
                },
            },
        )
        .collect()
}

/// `fields[…]` pairs for `columns`: each to-one relation loads its label column.
fn fields_pairs(
    data: &Data<'_>,
    collection: &CollectionSchema,
    columns: &[String],
) -> Vec<(String, String)> {
    let mut pairs = vec![(format!("fields[{}]", collection.name), columns.join(","))];
    for name in columns {
        if let Some(target) = to_one_target(collection, name)
            && let Ok(foreign) = data.schema().collection(target)
            && let Some(label) = view::label_column(foreign)
        {
            pairs.push((format!("fields[{name}]"), label.to_owned()));
        }
    }
    pairs
}

/// `GET /console/c/{collection}`.
pub async fn table(
    State(state): State<SharedState>,
    session: Session,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let collection = named(&data, &name)?;
    let rights = data.rights(&name).await?;
    if !rights.browse {
        return Err(crate::auth::Error::forbidden().into());
    }
    let mut table = TableState::parse(query.as_deref().unwrap_or(""));
    let base = session.base.clone();
    let tz = session.caller.timezone;
    let mut error = table.filter_error.clone();
    if error.is_none() {
        match filter_tree(&data, collection, &table.filter) {
            Ok(tree) => table.tree = tree,
            Err(message) => error = Some(message),
        }
    }
    let pairs = form_pairs(query.as_deref().unwrap_or("").as_bytes());
    let command = first(&pairs, "fx").is_some();
    if table.built && !command && error.is_none() {
        // Applied: the address carries the condition tree itself, a link to share.
        return Ok(Redirect::to(&table.href(&base, &name)).into_response());
    }
    // Every link of the page is to the table as it is, without the selection.
    let selecting_all = std::mem::take(&mut table.all);
    let defaults = default_columns(collection);
    let shown: Vec<String> = if table.columns.is_empty() {
        defaults.clone()
    } else {
        table
            .columns
            .iter()
            .filter(|c| collection.fields.contains_key(c.as_str()))
            .cloned()
            .collect()
    };
    let filters = table.tree.clone();
    let list = ListQuery {
        page: table.page,
        size: table.size,
        sort: Some(table.sort.clone()).filter(|s| !s.is_empty()),
        search: Some(table.search.clone()).filter(|s| !s.trim().is_empty()),
        search_extended: table.extended,
        segment: Some(table.segment.clone()).filter(|s| !s.is_empty()),
        filters,
        fields: fields_pairs(&data, collection, &shown),
    };
    let mut status = StatusCode::OK;
    let (records, count) = if error.is_some() {
        status = StatusCode::BAD_REQUEST;
        (Vec::new(), None)
    } else {
        match data.list(&name, &list).await {
            Ok(records) => {
                let count = data.count(&name, &list).await?;
                (records, count)
            }
            Err(failure) => {
                let failure = Error::from(failure);
                if failure.status().is_client_error() && failure.status() != StatusCode::FORBIDDEN {
                    status = failure.status();
                    error = Some(failure.message());
                    (Vec::new(), None)
                } else {
                    return Err(failure);
                }
            }
        }
    };
    let rows = records
        .iter()
        .map(|record| {
            let id = pack_id(collection, record).unwrap_or_default();
            Row {
                id: id.clone(),
                href: record_href(&base, &name, &id),
                edit_href: rights
                    .edit
                    .then(|| format!("{}/edit", record_href(&base, &name, &id))),
                label: view::label(collection, record, tz),
                cells: cells(&base, &data, collection, record, &shown, tz),
            }
        })
        .collect::<Vec<_>>();
    let pages = count.map(|c| c.div_ceil(table.size).max(1));
    let count_text = match count {
        Some(1) => "1 record".to_owned(),
        Some(n) => format!("{n} records"),
        None if error.is_some() => String::new(),
        None => "Count disabled for this collection".to_owned(),
    };
    let has_next = match pages {
        Some(pages) => table.page < pages,
        None => rows.len() as u64 == table.size,
    };
    let columns = shown
        .iter()
        .map(|field| {
            let sortable = collection.column(field).is_some_and(|c| c.is_sortable);
            let (sorted, next) = if table.sort == *field {
                ("ascending", format!("-{field}"))
            } else if table.sort == format!("-{field}") {
                ("descending", field.clone())
            } else {
                ("none", field.clone())
            };
            Column {
                name: field.clone(),
                sort_href: sortable.then(|| {
                    table
                        .with(|s| {
                            s.sort = next;
                            s.page = 1;
                        })
                        .href(&base, &name)
                }),
                sorted: if sortable { sorted } else { "" },
            }
        })
        .collect();
    let choices = defaults
        .iter()
        .map(|c| Choice {
            name: c.clone(),
            checked: shown.contains(c),
        })
        .collect();
    let segments = collection
        .segments
        .iter()
        .map(|segment| SegmentLink {
            name: segment.clone(),
            href: table
                .with(|s| {
                    s.segment = segment.clone();
                    s.page = 1;
                })
                .href(&base, &name),
            active: table.segment == *segment,
        })
        .collect();
    let mut operators: Vec<(String, String)> = Operator::ALL
        .iter()
        .map(|o| (o.snake_case(), view::operator_label(&o.snake_case())))
        .collect();
    operators.dedup();
    let notice = first(&pairs, "deleted").map(|n| match n.parse::<u64>() {
        Ok(count) if count != 1 => format!("{count} records were deleted."),
        Err(_) if n == "all" => "The matching records were deleted.".to_owned(),
        _ => "The record was deleted.".to_owned(),
    });
    let layout = Layout::new(&session, &data, &name, name.clone()).await?;
    let (global_actions, selection_actions): (Vec<_>, Vec<_>) =
        crate::console::actions::buttons(&state, &session.caller, collection)
            .await?
            .into_iter()
            .partition(|b| b.scope == "global");
    let bulk_action = rights
        .delete
        .then(|| format!("{base}/c/{}/bulk-delete", enc(&name)));
    let selection_target = bulk_action
        .clone()
        .or_else(|| selection_actions.first().map(|b| b.href.clone()))
        .unwrap_or_default();
    // "Select all N matching records" goes past the page to the whole query, for the bulk
    // delete and the bulk actions (both take `all_records`); a single action still needs one
    // checked row.
    let more = count.map_or(has_next || table.page > 1, |c| c > rows.len() as u64);
    let takes_all = bulk_action.is_some() || selection_actions.iter().any(|b| b.scope == "bulk");
    let select_all = (takes_all && !rows.is_empty() && (more || selecting_all)).then(|| {
        let matching = match count {
            Some(1) => "the 1 matching record".to_owned(),
            Some(n) => format!("all {n} matching records"),
            None => "all matching records".to_owned(),
        };
        let mut hidden = vec![("all".to_owned(), "1".to_owned())];
        let mut keep = |key: &str, value: &str| {
            if !value.is_empty() {
                hidden.push((key.to_owned(), value.to_owned()));
            }
        };
        keep("q", &table.search);
        keep("ext", if table.extended { "1" } else { "" });
        keep("segment", &table.segment);
        keep(
            "filters",
            &table.tree.as_ref().map(Json::to_string).unwrap_or_default(),
        );
        SelectAll {
            active: selecting_all,
            href: table.with(|s| s.all = true).href(&base, &name),
            clear_href: table.href(&base, &name),
            matching,
            page_rows: rows.len(),
            hidden,
        }
    });
    let template = TablePage {
        layout,
        collection: name.clone(),
        add_href: rights.add.then(|| format!("{base}/c/{}/new", enc(&name))),
        export_href: rights.export.then(|| table.export_href(&base, &name)),
        dashboard_href: crate::console::charts::dashboard_href(&state, &base, &name).await,
        selectable: bulk_action.is_some() || !selection_actions.is_empty(),
        bulk_action,
        // Every record of the query is selected: the bulk actions take them all; a single
        // action needs one checked row, so it waits.
        selection_actions: if selecting_all {
            selection_actions
                .into_iter()
                .filter(|b| b.scope == "bulk")
                .collect()
        } else {
            selection_actions
        },
        select_all,
        global_actions,
        selection_target,
        columns,
        choices,
        rows,
        count: count_text,
        page: table.page,
        prev_href: (table.page > 1).then(|| table.with(|s| s.page -= 1).href(&base, &name)),
        next_href: has_next.then(|| table.with(|s| s.page += 1).href(&base, &name)),
        sizes: SIZES.iter().map(|s| (*s, *s == table.size)).collect(),
        search: table.search.clone(),
        extended: table.extended,
        searchable: collection.searchable,
        segments,
        all_href: table
            .with(|s| {
                s.segment.clear();
                s.page = 1;
            })
            .href(&base, &name),
        filter_fields: view::filter_fields(data.schema(), collection),
        operators,
        builder: table.filter.items(),
        filter_count: table.filter.count(),
        filters_open: table.filter.count() > 0 || command,
        state_sort: table.sort.clone(),
        state_segment: table.segment.clone(),
        reset_href: format!("{base}/c/{}", enc(&name)),
        error,
        notice,
    };
    page(status, &template)
}

/// `GET /console/c/{collection}/export?…`: the table's records as CSV, streamed (the browser
/// shows the download's progress).
pub async fn export(
    State(state): State<SharedState>,
    session: Session,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let collection = named(&data, &name)?;
    let table = TableState::parse(query.as_deref().unwrap_or(""));
    let shown: Vec<String> = if table.columns.is_empty() {
        default_columns(collection)
    } else {
        table
            .columns
            .iter()
            .filter(|c| collection.fields.contains_key(c.as_str()))
            .cloned()
            .collect()
    };
    if let Some(message) = table.filter_error {
        return Err(Error::from(crate::agent::Error::Validation(message)));
    }
    let filters = filter_tree(&data, collection, &table.filter)
        .map_err(|message| Error::from(crate::agent::Error::Validation(message)))?;
    let list = ListQuery {
        sort: Some(table.sort.clone()).filter(|s| !s.is_empty()),
        search: Some(table.search.clone()).filter(|s| !s.trim().is_empty()),
        search_extended: table.extended,
        segment: Some(table.segment.clone()).filter(|s| !s.is_empty()),
        filters,
        fields: fields_pairs(&data, collection, &shown),
        ..ListQuery::default()
    };
    let csv = data.export(&name, &list, &shown.join(","), &name).await?;
    Ok(csv_download(csv))
}

/// A started CSV export as the browser's download: the same rows and file name as
/// `GET /forest/{c}.csv` (`ops::export`), streamed as they are read.
fn csv_download(csv: crate::ops::export::Csv) -> Response {
    use axum::http::{HeaderValue, header};
    let disposition = HeaderValue::from_str(&csv.content_disposition).ok();
    let mut response = Response::new(axum::body::Body::from_stream(csv.into_stream()));
    let out = response.headers_mut();
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Some(value) = disposition {
        out.insert(header::CONTENT_DISPOSITION, value);
    }
    // Rows reach the browser as they are read, not once a proxy has buffered them all.
    out.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

// ----- bulk delete -----------------------------------------------------------------------

#[derive(Template)]
#[template(path = "bulk_delete.html")]
struct BulkDeletePage {
    layout: Layout,
    collection: String,
    heading: String,
    /// The selected ids (none when every matching record is selected).
    ids: Vec<String>,
    /// Every record matching the table: what the table showed, in words, and the rows left out.
    all: bool,
    view: Vec<String>,
    excluded: Vec<String>,
    /// The fields posted again with the confirmation.
    hidden: Vec<(String, String)>,
    submit: String,
    action: String,
    cancel_href: String,
}

/// `POST /console/c/{collection}/bulk-delete`: the selected rows, or with `all=1` every record
/// of the table's query (`q`, `ext`, `segment`, `filters`) but the rows of the page left
/// unchecked (`page_id` without `id`). Without `confirm`, a page saying what will be deleted;
/// with it, one delete of those records within the caller's scope.
pub async fn bulk_delete(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let collection = guarded(&data, &name, |rights| rights.delete).await?;
    let values = |key: &str| -> Vec<String> {
        pairs
            .iter()
            .filter(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect()
    };
    let ids = values("id");
    let table = format!("{}/c/{}", session.base, enc(&name));
    let confirmed = first(&pairs, "confirm") == Some("1");
    if first(&pairs, "all") == Some("1") {
        let excluded: Vec<String> = if confirmed {
            values("excluded")
        } else {
            values("page_id")
                .into_iter()
                .filter(|id| !ids.contains(id))
                .collect()
        };
        return delete_all(&session, &data, collection, &pairs, excluded, confirmed).await;
    }
    if ids.is_empty() {
        return Err(Error::from(crate::agent::Error::Validation(
            "Select at least one record to delete.".to_owned(),
        )));
    }
    if !confirmed {
        let heading = format!("Delete {} records of {name}?", ids.len());
        let layout = Layout::new(&session, &data, &name, heading.clone()).await?;
        return page(
            StatusCode::OK,
            &BulkDeletePage {
                layout,
                collection: name.clone(),
                heading,
                submit: format!("Delete these {} records", ids.len()),
                ids,
                all: false,
                view: Vec::new(),
                excluded: Vec::new(),
                hidden: Vec::new(),
                action: format!("{table}/bulk-delete"),
                cancel_href: table,
            },
        );
    }
    let deleted = data.delete_many(&name, &ids).await?;
    Ok(Redirect::to(&format!("{table}?deleted={deleted}")).into_response())
}

/// Deletes every record of the table's query posted in `pairs` but `excluded`, after a page
/// saying how many and which view they come from: `DELETE /forest/{c}` with `all_records`.
async fn delete_all(
    session: &Session,
    data: &Data<'_>,
    collection: &CollectionSchema,
    pairs: &[(String, String)],
    excluded: Vec<String>,
    confirmed: bool,
) -> Result<Response> {
    let name = &collection.name;
    let mut view = TableState::from_pairs(pairs);
    if let Some(message) = view.filter_error.take() {
        return Err(Error::from(crate::agent::Error::Validation(message)));
    }
    view.tree = filter_tree(data, collection, &view.filter)
        .map_err(|message| Error::from(crate::agent::Error::Validation(message)))?;
    let list = ListQuery {
        search: Some(view.search.clone()).filter(|s| !s.trim().is_empty()),
        search_extended: view.extended,
        segment: Some(view.segment.clone()).filter(|s| !s.is_empty()),
        filters: view.tree.clone(),
        ..ListQuery::default()
    };
    let table = view.href(&session.base, name);
    if confirmed {
        let deleted = data.delete_all(name, &list, &excluded).await?;
        let notice = match deleted {
            Some(count) => format!("deleted={count}"),
            None => "deleted=all".to_owned(),
        };
        let base = format!("{}/c/{}", session.base, enc(name));
        return Ok(Redirect::to(&format!("{base}?{notice}")).into_response());
    }
    let count = data.count(name, &list).await?;
    let (heading, submit) = match count {
        Some(count) => {
            let n = count.saturating_sub(excluded.len() as u64);
            let records = if n == 1 {
                "1 record".to_owned()
            } else {
                format!("{n} records")
            };
            (
                format!("Delete {records} of {name}?"),
                format!("Delete these {records}"),
            )
        }
        None => (
            format!("Delete every matching record of {name}?"),
            "Delete them".to_owned(),
        ),
    };
    let mut described = Vec::new();
    if !view.search.trim().is_empty() {
        described.push(format!(
            "Search: \"{}\"{}",
            view.search,
            if view.extended {
                ", also in related records"
            } else {
                ""
            }
        ));
    }
    if !view.segment.is_empty() {
        described.push(format!("Segment: {}", view.segment));
    }
    match view.filter.count() {
        0 => {}
        1 => described.push("Filters: 1 condition".to_owned()),
        n => described.push(format!("Filters: {n} conditions")),
    }
    if described.is_empty() {
        described.push(format!("Every record of {name} you may see"));
    }
    let mut hidden = vec![("all".to_owned(), "1".to_owned())];
    hidden.extend(
        [
            ("q", view.search.clone()),
            (
                "ext",
                if view.extended {
                    "1".to_owned()
                } else {
                    String::new()
                },
            ),
            ("segment", view.segment.clone()),
            (
                "filters",
                view.tree.as_ref().map(Json::to_string).unwrap_or_default(),
            ),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_owned(), v)),
    );
    hidden.extend(
        excluded
            .iter()
            .map(|id| ("excluded".to_owned(), id.clone())),
    );
    let layout = Layout::new(session, data, name, heading.clone()).await?;
    page(
        StatusCode::OK,
        &BulkDeletePage {
            layout,
            collection: name.clone(),
            submit,
            heading,
            ids: Vec::new(),
            all: true,
            view: described,
            excluded,
            hidden,
            action: format!("{}/c/{}/bulk-delete", session.base, enc(name)),
            cancel_href: table,
        },
    )
}
