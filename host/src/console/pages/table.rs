//! A collection's table: paging, count, sort, columns, search, segments, the filter builder,
//! CSV export and bulk delete.

use std::fmt::Write as _;

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono_tz::Tz;
use serde_json::{Value as Json, json};

use super::{DEFAULT_SIZE, Layout, MAX_SIZE, SIZES, enc, guarded, named, page, record_href};
use crate::console::data::{Data, ListQuery, to_one_target};
use crate::console::session::{Session, first, form_pairs};
use crate::console::view::{self, InputKind};
use crate::console::{Error, Result};
use crate::datasource::query::ValueKind;
use crate::datasource::{CollectionSchema, ColumnSchema, Operator, Record, Value, pack_id};
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
    /// Filter rows: (field, operator, value).
    filters: Vec<(String, String, String)>,
}

impl TableState {
    fn parse(query: &str) -> Self {
        let pairs = form_pairs(query.as_bytes());
        let get = |key: &str| first(&pairs, key).unwrap_or("").to_owned();
        let all = |key: &str| -> Vec<String> {
            pairs
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .collect()
        };
        let fields = all("ff");
        let operators = all("fo");
        let values = all("fv");
        let filters = fields
            .into_iter()
            .enumerate()
            .filter(|(_, field)| !field.is_empty())
            .map(|(i, field)| {
                (
                    field,
                    operators.get(i).cloned().unwrap_or_default(),
                    values.get(i).cloned().unwrap_or_default(),
                )
            })
            .collect();
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
            filters,
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
        for (field, operator, value) in &self.filters {
            add("ff", field);
            add("fo", operator);
            add("fv", value);
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

/// A field offered by the filter builder, with the operators it supports.
struct FilterField {
    path: String,
    label: String,
    /// Snake-case operators, space-separated (read by the script to narrow the operator list).
    operators: String,
}

struct FilterRow {
    field: String,
    operator: String,
    value: String,
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
    filter_fields: Vec<FilterField>,
    operators: Vec<(String, String)>,
    filters: Vec<FilterRow>,
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

/// The filter builder's fields: columns with operators, and those of first-level to-one
/// relations (`customer:email`).
fn filter_fields(data: &Data<'_>, collection: &CollectionSchema) -> Vec<FilterField> {
    let mut out = Vec::new();
    let mut push = |path: String, label: String, column: &ColumnSchema| {
        if column.filter_operators.is_empty() {
            return;
        }
        let operators: Vec<String> = Operator::in_agent_order(&column.filter_operators)
            .into_iter()
            .map(Operator::snake_case)
            .collect();
        out.push(FilterField {
            path,
            label,
            operators: operators.join(" "),
        });
    };
    for (name, column) in collection.columns() {
        push(name.clone(), name.clone(), column);
    }
    for (name, relation) in collection.relations() {
        if !relation.is_to_one() {
            continue;
        }
        let Ok(foreign) = data.schema().collection(relation.foreign_collection()) else {
            continue;
        };
        for (column_name, column) in foreign.columns() {
            push(
                format!("{name}:{column_name}"),
                format!("{name} › {column_name}"),
                column,
            );
        }
    }
    out
}

/// The condition tree of the filter rows (`filters` JSON), or the message of a row that does
/// not read.
fn filter_tree(
    data: &Data<'_>,
    collection: &CollectionSchema,
    rows: &[(String, String, String)],
) -> std::result::Result<Option<Json>, String> {
    let mut conditions = Vec::new();
    for (field, operator, value) in rows {
        let (_, column) = data
            .schema()
            .resolve_column(collection, field)
            .map_err(|_| format!("There is no field \"{field}\" to filter on."))?;
        let parsed: Operator = operator
            .parse()
            .map_err(|_| format!("Choose an operator for \"{field}\"."))?;
        if !column.filter_operators.contains(&parsed) {
            return Err(format!(
                "\"{field}\" cannot be filtered with \"{}\".",
                view::operator_label(operator)
            ));
        }
        let mut leaf = json!({"field": field, "operator": parsed.snake_case()});
        match parsed.value_kind() {
            ValueKind::None => {}
            ValueKind::List => {
                let items: Vec<Json> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(|v| Json::String(v.to_owned()))
                    .collect();
                leaf["value"] = Json::Array(items);
            }
            ValueKind::Number => {
                let number: f64 = value.trim().parse().map_err(|_| {
                    format!(
                        "\"{}\" on \"{field}\" needs a number.",
                        view::operator_label(operator)
                    )
                })?;
                leaf["value"] = json!(number);
            }
            _ => {
                leaf["value"] = Json::String(value.clone());
            }
        }
        conditions.push(leaf);
    }
    Ok(match conditions.len() {
        0 => None,
        1 => conditions.pop(),
        _ => Some(json!({"aggregator": "and", "conditions": conditions})),
    })
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
    let table = TableState::parse(query.as_deref().unwrap_or(""));
    let base = session.base.clone();
    let tz = session.caller.timezone;
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
    let mut error = None;
    let filters = match filter_tree(&data, collection, &table.filters) {
        Ok(filters) => filters,
        Err(message) => {
            error = Some(message);
            None
        }
    };
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
    let mut filter_rows: Vec<FilterRow> = table
        .filters
        .iter()
        .map(|(field, operator, value)| FilterRow {
            field: field.clone(),
            operator: operator.clone(),
            value: value.clone(),
        })
        .collect();
    filter_rows.push(FilterRow {
        field: String::new(),
        operator: String::new(),
        value: String::new(),
    });
    let mut operators: Vec<(String, String)> = Operator::ALL
        .iter()
        .map(|o| (o.snake_case(), view::operator_label(&o.snake_case())))
        .collect();
    operators.dedup();
    let query_pairs = form_pairs(query.as_deref().unwrap_or("").as_bytes());
    let notice = first(&query_pairs, "deleted").map(|n| match n.parse::<u64>() {
        Ok(count) if count != 1 => format!("{count} records were deleted."),
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
    let template = TablePage {
        layout,
        collection: name.clone(),
        add_href: rights.add.then(|| format!("{base}/c/{}/new", enc(&name))),
        export_href: rights.export.then(|| table.export_href(&base, &name)),
        dashboard_href: crate::console::charts::dashboard_href(&state, &base, &name).await,
        selectable: bulk_action.is_some() || !selection_actions.is_empty(),
        bulk_action,
        selection_actions,
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
        filter_fields: filter_fields(&data, collection),
        operators,
        filters: filter_rows,
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
    let filters = filter_tree(&data, collection, &table.filters)
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
    ids: Vec<String>,
    action: String,
    cancel_href: String,
}

/// `POST /console/c/{collection}/bulk-delete`: the selected rows. Without `confirm`, a page
/// listing what will be deleted; with it, one delete of those records within the caller's scope.
pub async fn bulk_delete(
    State(state): State<SharedState>,
    session: Session,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response> {
    let pairs = session.form(&headers, &body)?;
    let data = Data::new(&state, &session.caller);
    guarded(&data, &name, |rights| rights.delete).await?;
    let ids: Vec<String> = pairs
        .iter()
        .filter(|(k, v)| k == "id" && !v.is_empty())
        .map(|(_, v)| v.clone())
        .collect();
    let table = format!("{}/c/{}", session.base, enc(&name));
    if ids.is_empty() {
        return Err(Error::from(crate::agent::Error::Validation(
            "Select at least one record to delete.".to_owned(),
        )));
    }
    if first(&pairs, "confirm") != Some("1") {
        let layout = Layout::new(
            &session,
            &data,
            &name,
            format!("Delete {} records", ids.len()),
        )
        .await?;
        return page(
            StatusCode::OK,
            &BulkDeletePage {
                layout,
                collection: name.clone(),
                ids,
                action: format!("{table}/bulk-delete"),
                cancel_href: table,
            },
        );
    }
    let deleted = data.delete_many(&name, &ids).await?;
    Ok(Redirect::to(&format!("{table}?deleted={deleted}")).into_response())
}
