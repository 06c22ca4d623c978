//! "Add a chart" (admins): the charts added from the console to the home dashboard or to a
//! collection's, each removable, and a form to add one (kind, collection, aggregate, field,
//! group-by, time range, objective, leaderboard relation and label, unit, a filter built with
//! the condition builder) with a preview drawn as the dashboard would draw it. The script
//! refreshes the form and its preview as the admin types (`…/charts/preview`, the same form
//! posted); without it, the "Preview" button does. Stored through `ops::dashboard` (checked and
//! computed once before it is added; admin log entries `chart`).

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{Map, Value as Json, json};

use super::conditions::Builder;
use super::{Tab, admin_layout, tabs};
use crate::config::ChartKind;
use crate::console::charts::{Card, card};
use crate::console::pages::{Layout, enc, html, page};
use crate::console::session::Posted;
use crate::console::session::{Session, first, form_pairs};
use crate::console::{Error, Result};
use crate::datasource::PrimitiveType;
use crate::ops;
use crate::state::SharedState;

const KINDS: [(&str, &str); 6] = [
    ("value", "A figure"),
    ("objective", "A figure toward a target"),
    ("percentage", "A share in percent"),
    ("distribution", "A figure per value of a field"),
    ("time-based", "A figure per period"),
    ("leaderboard", "The records with the largest figure"),
];
const AGGREGATES: [&str; 5] = ["Count", "Sum", "Avg", "Max", "Min"];
const RANGES: [&str; 5] = ["Day", "Week", "Month", "Quarter", "Year"];

/// The chart form as typed, its choices, its refusals and its preview.
pub struct Editor {
    dashboard: String,
    /// (value, label): "" the home dashboard, else a collection.
    dashboards: Vec<(String, String)>,
    title: String,
    kind: String,
    kinds: [(&'static str, &'static str); 6],
    collection: String,
    collections: Vec<String>,
    aggregate: String,
    aggregates: [&'static str; 5],
    field: String,
    /// The number fields of the collection (and of its to-many relations', for a leaderboard).
    fields: Vec<String>,
    group_by: String,
    /// The columns of the collection.
    columns: Vec<String>,
    time_range: String,
    ranges: [&'static str; 5],
    objective: String,
    relation: String,
    relations: Vec<String>,
    label: String,
    limit: String,
    unit: String,
    bars: bool,
    builders: Vec<Builder>,
    title_error: Option<String>,
    kind_error: Option<String>,
    collection_error: Option<String>,
    dashboard_error: Option<String>,
    objective_error: Option<String>,
    limit_error: Option<String>,
    /// A refusal of the chart as a whole (what its kind needs), or its failure to compute.
    error: Option<String>,
    preview: Option<Card>,
}

impl Editor {
    fn refused(&self) -> bool {
        self.title_error.is_some()
            || self.kind_error.is_some()
            || self.collection_error.is_some()
            || self.dashboard_error.is_some()
            || self.objective_error.is_some()
            || self.limit_error.is_some()
            || self.builders.iter().any(|b| b.error.is_some())
            || self.error.is_some()
    }

    /// The form as posted (or as the query of a link gives it).
    fn read(state: &SharedState, pairs: &[(String, String)]) -> Self {
        let text = |key: &str| first(pairs, key).unwrap_or("").trim().to_owned();
        let schema = state.ops.schema();
        let collections: Vec<String> = schema.collections.keys().cloned().collect();
        let dashboard = text("dashboard");
        let mut collection = text("collection");
        if collection.is_empty() {
            // A collection's dashboard reads that collection by default.
            collection = if dashboard.is_empty() {
                collections.first().cloned().unwrap_or_default()
            } else {
                dashboard.clone()
            };
        }
        let kind = Some(text("kind"))
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| "value".to_owned());
        let mut editor = Self {
            dashboards: std::iter::once((String::new(), "Home dashboard".to_owned()))
                .chain(
                    collections
                        .iter()
                        .map(|c| (c.clone(), format!("Dashboard of {c}"))),
                )
                .collect(),
            dashboard,
            title: text("title"),
            kind,
            kinds: KINDS,
            aggregate: Some(text("aggregate"))
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| "Count".to_owned()),
            aggregates: AGGREGATES,
            field: text("field"),
            fields: Vec::new(),
            group_by: text("groupBy"),
            columns: Vec::new(),
            time_range: Some(text("timeRange"))
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "Month".to_owned()),
            ranges: RANGES,
            objective: text("objective"),
            relation: text("relation"),
            relations: Vec::new(),
            label: text("label"),
            limit: text("limit"),
            unit: text("unit"),
            bars: text("style") == "bars",
            builders: Vec::new(),
            title_error: None,
            kind_error: None,
            collection_error: None,
            dashboard_error: None,
            objective_error: None,
            limit_error: None,
            error: None,
            preview: None,
            collection,
            collections,
        };
        if let Some(served) = schema.collections.get(&editor.collection) {
            let number = |c: &crate::datasource::ColumnSchema| {
                c.column_type.primitive() == Some(PrimitiveType::Number)
            };
            editor.columns = served.columns().map(|(n, _)| n.clone()).collect();
            editor.fields = served
                .columns()
                .filter(|(_, c)| number(c))
                .map(|(n, _)| n.clone())
                .collect();
            for (name, relation) in served.relations() {
                if relation.is_to_one() {
                    continue;
                }
                editor.relations.push(name.clone());
                if let Some(foreign) = schema.collections.get(relation.foreign_collection()) {
                    for (column, _) in foreign.columns().filter(|(_, c)| number(c)) {
                        if !editor.fields.contains(column) {
                            editor.fields.push(column.clone());
                        }
                    }
                }
            }
            let mut builder = Builder::new(
                schema,
                served,
                "cf",
                "Only the records matching",
                "No condition: every record the reader may see.",
                None,
            );
            builder.read(pairs);
            editor.builders.push(builder);
        } else if !editor.collection.is_empty() {
            editor.collection_error = Some(format!("{:?} is not served.", editor.collection));
        }
        editor
    }

    /// The chart as a `[[dashboard.chart]]` entry in JSON, or `None` when a field does not
    /// read (its refusal set). A preview (`strict` false) draws a chart without a title yet.
    fn definition(&mut self, state: &SharedState, strict: bool) -> Option<Json> {
        let mut chart = Map::new();
        let title = if self.title.is_empty() && !strict {
            "Untitled chart"
        } else {
            self.title.as_str()
        };
        chart.insert("title".into(), json!(title));
        chart.insert("kind".into(), json!(self.kind));
        chart.insert("collection".into(), json!(self.collection));
        if !self.dashboard.is_empty() {
            chart.insert("dashboard".into(), json!(self.dashboard));
        }
        if self.title.is_empty() && strict {
            self.title_error = Some("A chart needs a title: its card shows it.".to_owned());
        }
        if !KINDS.iter().any(|(k, _)| *k == self.kind) {
            self.kind_error = Some("Choose one of the kinds listed.".to_owned());
        }
        let kind = self.kind.as_str();
        if kind != "percentage" {
            chart.insert("aggregate".into(), json!(self.aggregate));
            if self.aggregate != "Count" {
                if self.field.is_empty() {
                    self.error = Some(format!(
                        "{} needs a field to compute: choose one.",
                        self.aggregate
                    ));
                }
                chart.insert("field".into(), json!(self.field));
            }
        }
        if matches!(kind, "distribution" | "time-based") {
            chart.insert("groupBy".into(), json!(self.group_by));
        }
        if kind == "time-based" {
            chart.insert("timeRange".into(), json!(self.time_range));
            if self.bars {
                chart.insert("style".into(), json!("bars"));
            }
        }
        if kind == "objective" {
            match self.objective.parse::<f64>() {
                Ok(target) if target.is_finite() => {
                    chart.insert("objective".into(), json!(target));
                }
                _ => self.objective_error = Some("The target is a number (such as 100).".into()),
            }
        }
        if kind == "leaderboard" {
            chart.insert("relation".into(), json!(self.relation));
            chart.insert("label".into(), json!(self.label));
            if !self.limit.is_empty() {
                match self.limit.parse::<u64>() {
                    Ok(limit) if (1..=100).contains(&limit) => {
                        chart.insert("limit".into(), json!(limit));
                    }
                    _ => self.limit_error = Some("From 1 to 100 rows.".into()),
                }
            }
        }
        if !self.unit.is_empty() {
            chart.insert("unit".into(), json!(self.unit));
        }
        let schema = state.ops.schema();
        if let (Some(served), Some(builder)) = (
            schema.collections.get(&self.collection),
            self.builders.first_mut(),
        ) && let Some(Some(tree)) = builder.tree(schema, served)
        {
            chart.insert("filter".into(), tree);
        }
        (!self.refused()).then_some(Json::Object(chart))
    }

    /// A refusal of the operations layer, next to its field.
    fn refusal(&mut self, error: ops::Error) -> Result<()> {
        match error {
            ops::Error::Field { field, message } => {
                let mut chars = message.chars();
                let message = chars.next().map_or_else(String::new, |c| {
                    format!("{}{}.", c.to_uppercase(), chars.as_str())
                });
                match field.as_str() {
                    "title" => self.title_error = Some(message),
                    "kind" => self.kind_error = Some(message),
                    "collection" => self.collection_error = Some(message),
                    "dashboard" => self.dashboard_error = Some(message),
                    _ => self.error = Some(message),
                }
                Ok(())
            }
            ops::Error::Auth(_) => Err(error.into()),
            other => {
                // The chart does not compute (a field that does not group, a relation that is
                // not one): the reason, as a chart card shows it.
                self.error = Some(Error::from(other).message());
                Ok(())
            }
        }
    }

    fn dashboard(&self) -> Option<&str> {
        (!self.dashboard.is_empty()).then_some(self.dashboard.as_str())
    }

    /// Computes the chart as the admin would see it on the dashboard.
    async fn draw(&mut self, state: &SharedState, session: &Session) -> Result<()> {
        let Some(definition) = self.definition(state, false) else {
            return Ok(());
        };
        match ops::dashboard::preview(&state.ops, &session.caller, self.dashboard(), &definition)
            .await
        {
            Ok((chart, figure)) => {
                self.preview = Some(card(
                    0,
                    &chart.title,
                    chart.kind,
                    chart.unit.as_deref().unwrap_or(""),
                    self.bars,
                    Ok(figure),
                    || "Nothing to show yet: no record matches this chart.".to_owned(),
                ));
                Ok(())
            }
            Err(error) => self.refusal(error),
        }
    }
}

/// A chart added from the console, as listed.
struct Added {
    id: i64,
    title: String,
    kind: String,
    dashboard: String,
    href: String,
}

#[derive(Template)]
#[template(path = "admin_charts.html")]
struct ChartsPage {
    layout: Layout,
    tabs: Vec<Tab>,
    added: Vec<Added>,
    editor: Editor,
    notice: Option<&'static str>,
}

/// The form's fields and preview alone, for the script.
#[derive(Template)]
#[template(path = "admin_chart_editor.html")]
struct EditorFragment {
    editor: Editor,
}

async fn render(
    state: &SharedState,
    session: &Session,
    editor: Editor,
    notice: Option<&'static str>,
) -> Result<Response> {
    let layout = admin_layout(state, session, "charts", "Charts".to_owned()).await?;
    ops::tokens::require_admin(&state.ops, &session.caller).await?;
    let mut added = Vec::new();
    for dashboard in std::iter::once(None).chain(
        state
            .ops
            .schema()
            .collections
            .keys()
            .map(|c| Some(c.as_str())),
    ) {
        for chart in ops::dashboard::stored_charts(&state.ops, dashboard).await {
            let Some(id) = chart.stored else { continue };
            added.push(Added {
                id,
                title: chart.definition.title.clone(),
                kind: KINDS
                    .iter()
                    .find(|(k, _)| {
                        serde_json::from_value::<ChartKind>(json!(k)).ok()
                            == Some(chart.definition.kind)
                    })
                    .map_or("chart", |(k, _)| k)
                    .to_owned(),
                dashboard: dashboard.map_or_else(|| "Home".to_owned(), str::to_owned),
                href: dashboard.map_or_else(
                    || format!("{}/", session.base),
                    |d| format!("{}/c/{}/dashboard", session.base, enc(d)),
                ),
            });
        }
    }
    let status = if editor.refused() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        status,
        &ChartsPage {
            tabs: tabs(&session.base, "charts"),
            layout,
            added,
            editor,
            notice,
        },
    )
}

/// `GET /console/admin/charts?dashboard=…`: the charts added, and the form to add one.
pub async fn list(
    State(state): State<SharedState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let pairs = form_pairs(query.unwrap_or_default().as_bytes());
    let notice = match first(&pairs, "done") {
        Some("added") => Some("The chart was added to its dashboard."),
        Some("removed") => Some("The chart was removed."),
        _ => None,
    };
    let mut editor = Editor::read(&state, &pairs);
    editor.draw(&state, &session).await?;
    render(&state, &session, editor, notice).await
}

/// `POST /console/admin/charts`: "Preview" draws the chart below the form; "Add" adds it.
pub async fn save(
    State(state): State<SharedState>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let mut editor = Editor::read(&state, &pairs);
    if first(&pairs, "do") != Some("add") {
        editor.draw(&state, &session).await?;
        return render(&state, &session, editor, None).await;
    }
    let Some(definition) = editor.definition(&state, true) else {
        return render(&state, &session, editor, None).await;
    };
    match ops::dashboard::add_chart(&state.ops, &session.caller, editor.dashboard(), &definition)
        .await
    {
        Ok(_) => {
            Ok(Redirect::to(&format!("{}/admin/charts?done=added", session.base)).into_response())
        }
        Err(error) => {
            editor.refusal(error)?;
            render(&state, &session, editor, None).await
        }
    }
}

/// `POST /console/admin/charts/preview`: the form's fields and preview for what is typed (the
/// script's refresh).
pub async fn preview(
    State(state): State<SharedState>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    ops::tokens::require_admin(&state.ops, &session.caller).await?;
    let mut editor = Editor::read(&state, &pairs);
    editor.draw(&state, &session).await?;
    Ok(html(EditorFragment { editor }.render()?).into_response())
}

/// `POST /console/admin/charts/{id}/remove`.
pub async fn remove(
    State(state): State<SharedState>,
    Path(id): Path<i64>,
    Posted(session, _): Posted,
) -> Result<Response> {
    ops::dashboard::remove_chart(&state.ops, &session.caller, id).await?;
    Ok(Redirect::to(&format!("{}/admin/charts?done=removed", session.base)).into_response())
}
