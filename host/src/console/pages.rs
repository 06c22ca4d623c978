//! The console's data pages: home, a collection's table, a record, its edit form and its delete
//! confirmation. Each handler reads through `data` as the signed-in user and renders a template;
//! links and buttons appear only where the user's rights allow them.

use std::fmt::Write as _;

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono_tz::Tz;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value as Json, json};

use super::assets::{Urls, urls};
use super::data::{Data, ListQuery, Rights, to_one_target};
use super::session::{Session, first, form_content_type, form_pairs, same_site};
use super::view::{self, InputKind};
use super::{Error, Result};
use crate::datasource::query::ValueKind;
use crate::datasource::{CollectionSchema, ColumnSchema, Operator, Record, Value, pack_id};
use crate::http::{ApiError, SharedState};

/// Rows per page unless the user picks another size.
const DEFAULT_SIZE: u64 = 25;
/// The largest page the console asks for.
const MAX_SIZE: u64 = 100;
/// The page sizes offered.
const SIZES: [u64; 4] = [10, 25, 50, 100];

/// Characters escaped in a path segment or a query value.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');

fn enc(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

/// An HTML answer.
pub fn html(body: String) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        body,
    )
}

fn page(status: StatusCode, template: &impl Template) -> Result<Response> {
    Ok((status, html(template.render()?)).into_response())
}

/// What every signed-in page shows around its content: the sidebar and the header.
pub struct Layout {
    pub base: String,
    pub assets: &'static Urls,
    pub user: String,
    pub email: String,
    pub role: String,
    pub team: String,
    pub timezone: String,
    pub csrf: String,
    pub collections: Vec<String>,
    pub current: String,
    pub title: String,
}

impl Layout {
    async fn new(session: &Session, data: &Data<'_>, current: &str, title: String) -> Result<Self> {
        Ok(Self {
            base: session.base.clone(),
            assets: urls(),
            user: session.display_name(),
            email: session.caller.email.clone(),
            role: session.caller.role.clone(),
            team: session.caller.team.clone(),
            timezone: session.caller.timezone.name().to_owned(),
            csrf: session.csrf.clone(),
            collections: data.browsable().await?,
            current: current.to_owned(),
            title,
        })
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    base: String,
    status: u16,
    message: &'a str,
}

/// A page saying what went wrong, and a way back.
pub fn error_page(status: StatusCode, message: &str) -> Response {
    // The base path is not known here without the state; the link goes to the site root, which
    // redirects to the console.
    let template = ErrorPage {
        base: String::new(),
        status: status.as_u16(),
        message,
    };
    match template.render() {
        Ok(body) => (status, html(body)).into_response(),
        Err(_) => (status, message.to_owned()).into_response(),
    }
}

// ----- home ------------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    layout: Layout,
}

/// `GET /console/`: the collections the user may browse, or what to do when there are none.
pub async fn home(State(state): State<SharedState>, session: Session) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let layout = Layout::new(&session, &data, "", "Home".to_owned()).await?;
    page(StatusCode::OK, &HomePage { layout })
}

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

struct Cell {
    text: String,
    href: Option<String>,
}

struct Row {
    /// The packed id (the bulk selection's value).
    id: String,
    href: String,
    edit_href: Option<String>,
    label: String,
    cells: Vec<Cell>,
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
    /// Where the selection of rows is posted, for users who may delete.
    bulk_action: Option<String>,
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

fn record_href(base: &str, collection: &str, id: &str) -> String {
    format!("{base}/c/{}/r/{}", enc(collection), enc(id))
}

/// The cells of a record for `columns`: values as text, to-one relations as links.
fn cells(
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
        return Err(ApiError::from(crate::auth::Error::forbidden()).into());
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
    let template = TablePage {
        layout,
        collection: name.clone(),
        add_href: rights.add.then(|| format!("{base}/c/{}/new", enc(&name))),
        export_href: rights.export.then(|| table.export_href(&base, &name)),
        bulk_action: rights
            .delete
            .then(|| format!("{base}/c/{}/bulk-delete", enc(&name))),
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
    Ok(data.export(&name, &list, &shown.join(","), &name).await?)
}

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
}

/// Columns a related list shows: the first few of the foreign collection.
const RELATED_COLUMNS: usize = 6;
const RELATED_PAGE: u64 = 10;

/// `GET /console/c/{collection}/r/{id}`: every field, to-one links, a tab per to-many relation.
pub async fn record(
    State(state): State<SharedState>,
    session: Session,
    Path((name, id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
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
    let pairs = form_pairs(query.as_deref().unwrap_or("").as_bytes());
    let relations = data.browsable_relations(collection).await?;
    let chosen = first(&pairs, "tab")
        .filter(|t| relations.iter().any(|(r, _)| r == t))
        .map(str::to_owned)
        .or_else(|| relations.first().map(|(r, _)| r.clone()))
        .unwrap_or_default();
    let related_page: u64 = first(&pairs, "rpage")
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
    let notice = first(&pairs, "saved")
        .map(|_| "Saved.".to_owned())
        .or_else(|| first(&pairs, "created").map(|_| "Created.".to_owned()));
    let label = view::label(collection, &record, tz);
    let layout = Layout::new(&session, &data, &name, format!("{name} {label}")).await?;
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
    };
    page(StatusCode::OK, &template)
}

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

/// The served collection `name`; an unknown one is a 404 page.
fn named<'d>(data: &'d Data<'_>, name: &str) -> Result<&'d CollectionSchema> {
    data.schema()
        .collections
        .get(name)
        .ok_or_else(|| Error::NotFound(format!("There is no collection \"{name}\".")))
}

/// The collection `name` if the user holds the right `allowed` picks on it: an unknown
/// collection is a 404, a missing right a 403 (pages hide what a user cannot use, so only a
/// typed URL or a stale page gets here).
async fn guarded<'d>(
    data: &'d Data<'_>,
    name: &str,
    allowed: fn(&Rights) -> bool,
) -> Result<&'d CollectionSchema> {
    let collection = named(data, name)?;
    if !allowed(&data.rights(name).await?) {
        return Err(ApiError::from(crate::auth::Error::forbidden()).into());
    }
    Ok(collection)
}

async fn load(data: &Data<'_>, name: &str, id: &str) -> Result<Record> {
    data.get(name, id).await?.ok_or_else(|| {
        Error::NotFound(format!(
            "There is no record {id} in {name} that you may see."
        ))
    })
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
    same_site(&headers)?;
    form_content_type(&headers)?;
    let pairs = form_pairs(&body);
    session.check_csrf(first(&pairs, "csrf").unwrap_or(""))?;
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
    session: Session,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response> {
    same_site(&headers)?;
    form_content_type(&headers)?;
    let pairs = form_pairs(&body);
    session.check_csrf(first(&pairs, "csrf").unwrap_or(""))?;
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
    session: Session,
    Path((name, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response> {
    same_site(&headers)?;
    form_content_type(&headers)?;
    let pairs = form_pairs(&body);
    session.check_csrf(first(&pairs, "csrf").unwrap_or(""))?;
    let data = Data::new(&state, &session.caller);
    data.delete(&name, &id).await?;
    Ok(Redirect::to(&format!("{}/c/{}?deleted=1", session.base, enc(&name))).into_response())
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
    same_site(&headers)?;
    form_content_type(&headers)?;
    let pairs = form_pairs(&body);
    session.check_csrf(first(&pairs, "csrf").unwrap_or(""))?;
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
