//! Dashboards: the charts of `[[dashboard.chart]]` (config) and those an admin added from the
//! console (stored, `ops::dashboard::stored_charts`) drawn by the server. The home page
//! shows the home dashboard above the collection cards; `/c/{collection}/dashboard` shows a
//! collection's (a "Dashboard" tab on its table page); a record page shows its collection's
//! plugin charts (`lifetime_value` on a customer).
//!
//! Each chart is computed by `ops::dashboard` as the signed-in user, in their timezone, through
//! the code of `POST /forest/stats/{collection}` and `/forest/_charts/…` (permissions, scope,
//! activity). A chart the user may not compute is left out; a chart that fails shows its error
//! in its own card, never the whole page. `svg` draws each figure as accessible inline SVG.

mod svg;

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::Value as Json;

use super::data::Data;
use super::pages::{Layout, enc, guarded, page};
use super::session::Session;
use super::{Error, Result};
use crate::config::{ChartDefinition, ChartKind, ChartStyle};
use crate::datasource::Caller;
use crate::ops::Ops;
use crate::ops::dashboard::{self, Figure};
use crate::state::SharedState;

/// One chart's card.
pub struct Card {
    /// Unique on the page (`chart-3`), for the SVG's title and the tests.
    pub id: String,
    pub title: String,
    /// The chart kind, as the config names it (`value`, `time-based`…).
    pub kind: &'static str,
    /// The drawing (escaped when drawn).
    pub body: Option<String>,
    /// What to do when there is nothing to draw.
    pub empty: Option<String>,
    /// Why the chart could not be computed.
    pub error: Option<String>,
    /// Time-based charts and leaderboards take a wide card.
    pub wide: bool,
}

/// The console routes of dashboards.
pub fn routes() -> Router<SharedState> {
    Router::new().route("/c/{collection}/dashboard", get(collection_dashboard))
}

fn kind_name(kind: ChartKind) -> &'static str {
    match kind {
        ChartKind::Value => "value",
        ChartKind::Objective => "objective",
        ChartKind::Percentage => "percentage",
        ChartKind::Distribution => "distribution",
        ChartKind::TimeBased => "time-based",
        ChartKind::MultipleTimeBased => "multiple-time-based",
        ChartKind::Leaderboard => "leaderboard",
        ChartKind::Plugin => "plugin",
    }
}

/// Whether a condition tree names a period (Today, PreviousMonth, PreviousXDays…).
fn names_a_period(tree: &Json) -> bool {
    match tree {
        Json::Object(map) => {
            map.get("operator")
                .and_then(Json::as_str)
                .is_some_and(|op| {
                    let op = op.to_ascii_lowercase().replace('_', "");
                    [
                        "previous",
                        "today",
                        "yesterday",
                        "todate",
                        "past",
                        "future",
                        "ago",
                    ]
                    .iter()
                    .any(|p| op.contains(p))
                })
                || map.values().any(names_a_period)
        }
        Json::Array(items) => items.iter().any(names_a_period),
        _ => false,
    }
}

/// The empty state of a chart: what there is none of, and when figures will show.
fn empty_message(definition: &ChartDefinition) -> String {
    let Some(collection) = &definition.collection else {
        return "Nothing to show yet: the plugin's chart has no figure.".to_owned();
    };
    let period = definition
        .filter
        .iter()
        .chain(definition.series.iter().filter_map(|s| s.filter.as_ref()))
        .any(names_a_period);
    if period {
        format!("No {collection} in this period. Figures appear here as soon as there are some.")
    } else if definition.filter.is_some() {
        format!("No {collection} match this chart yet. Figures appear here as soon as some do.")
    } else {
        format!("No {collection} yet. Figures appear here once some are added.")
    }
}

/// The message of a chart's failure, as a page would show it (the detail of an unexpected
/// failure is logged, not shown).
fn failure(title: &str, error: crate::ops::Error) -> String {
    let error = Error::from(error);
    if error.status().is_server_error() {
        tracing::error!(chart = title, error = %error, "a dashboard chart failed");
    }
    error.message()
}

pub(super) fn card(
    index: usize,
    title: &str,
    kind: ChartKind,
    unit: &str,
    bars: bool,
    drawn: std::result::Result<Figure, String>,
    empty: impl FnOnce() -> String,
) -> Card {
    let id = format!("chart-{index}");
    let mut card = Card {
        id: id.clone(),
        title: title.to_owned(),
        kind: kind_name(kind),
        body: None,
        empty: None,
        error: None,
        wide: false,
    };
    match drawn {
        Err(message) => card.error = Some(message),
        Ok(figure) => {
            card.wide = matches!(figure, Figure::TimeBased { .. } | Figure::Leaderboard(_));
            if figure.is_empty() {
                card.empty = Some(empty());
            } else {
                card.body = Some(svg::draw(&id, title, &figure, unit, bars));
            }
        }
    }
    card
}

/// The cards of a dashboard (`None`: the home one) that `caller` may see, computed together.
pub async fn cards(ops: &Ops, caller: &Caller, dashboard: Option<&str>) -> Vec<Card> {
    let charts = dashboard::all_charts(ops, dashboard).await;
    let results = futures::future::join_all(
        charts
            .iter()
            .map(|chart| dashboard::evaluate(ops, caller, &chart.definition)),
    )
    .await;
    charts
        .iter()
        .zip(results)
        .enumerate()
        .filter_map(|(index, (chart, result))| {
            let definition = &chart.definition;
            let drawn = match result {
                Ok(None) => return None,
                Ok(Some(figure)) => Ok(figure),
                Err(error) => Err(failure(&definition.title, error)),
            };
            Some(card(
                index,
                &definition.title,
                definition.kind,
                definition.unit.as_deref().unwrap_or(""),
                definition.style == ChartStyle::Bars,
                drawn,
                || empty_message(definition),
            ))
        })
        .collect()
}

/// The plugin charts of the record `id` of `collection` (every chart the plugins add to the
/// collection; a `[[dashboard.chart]]` entry of kind `plugin` naming it gives its title and
/// unit).
pub async fn record_cards(ops: &Ops, caller: &Caller, collection: &str, id: &str) -> Vec<Card> {
    let Some(schema) = ops.schema().collections.get(collection) else {
        return Vec::new();
    };
    let mut cards = Vec::new();
    for (index, chart) in schema.charts.iter().enumerate() {
        let definition = ops.dashboard.iter().find(|d| {
            d.kind == ChartKind::Plugin
                && d.collection.as_deref() == Some(collection)
                && d.chart.as_deref() == Some(chart)
        });
        let title = definition.map_or_else(|| humane(chart), |d| d.title.clone());
        let unit = definition.and_then(|d| d.unit.as_deref()).unwrap_or("");
        let drawn = dashboard::record_chart(ops, caller, collection, chart, id)
            .await
            .map_err(|e| failure(&title, e));
        cards.push(card(
            index,
            &title,
            ChartKind::Plugin,
            unit,
            false,
            drawn,
            || "Nothing to show for this record yet.".to_owned(),
        ));
    }
    cards
}

/// `lifetime_value` → `Lifetime value`.
fn humane(name: &str) -> String {
    let spaced = name.replace(['_', '-'], " ");
    let mut chars = spaced.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The table page's link to the collection's dashboard, when it has one.
pub async fn dashboard_href(ops: &Ops, base: &str, collection: &str) -> Option<String> {
    dashboard::has_charts(ops, Some(collection))
        .await
        .then(|| format!("{base}/c/{}/dashboard", enc(collection)))
}

#[derive(Template)]
#[template(path = "dashboard.html")]
struct DashboardPage {
    layout: Layout,
    collection: String,
    table_href: String,
    /// Whether the dashboard has charts at all (else the page says how to add some).
    defined: bool,
    cards: Vec<Card>,
    /// For an admin: where to add a chart to this dashboard.
    add_href: Option<String>,
}

/// `GET /console/c/{collection}/dashboard`: the collection's charts, for a user who may
/// browse it.
async fn collection_dashboard(
    State(state): State<SharedState>,
    session: Session,
    Path(name): Path<String>,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    guarded(&data, &name, |r| r.browse).await?;
    let layout = Layout::new(&session, &data, &name, format!("{name} dashboard")).await?;
    let cards = cards(&state, &session.caller, Some(&name)).await;
    let admin = crate::ops::tokens::require_admin(&state.ops, &session.caller)
        .await
        .is_ok();
    let template = DashboardPage {
        table_href: format!("{}/c/{}", session.base, enc(&name)),
        defined: dashboard::has_charts(&state, Some(&name)).await,
        add_href: admin.then(|| format!("{}/admin/charts?dashboard={}", session.base, enc(&name))),
        collection: name,
        layout,
        cards,
    };
    page(StatusCode::OK, &template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_filter_on_a_relative_period_has_an_empty_state_about_the_period() {
        assert!(names_a_period(
            &json!({"field": "ordered_at", "operator": "PreviousXDays", "value": 30})
        ));
        assert!(names_a_period(&json!({"aggregator": "And", "conditions": [
            {"field": "status", "operator": "Equal", "value": "paid"},
            {"field": "ordered_at", "operator": "today"}
        ]})));
        assert!(!names_a_period(
            &json!({"field": "status", "operator": "Equal", "value": "paid"})
        ));
        assert_eq!(humane("lifetime_value"), "Lifetime value");
    }
}
