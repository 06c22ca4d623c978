//! `[[dashboard.chart]]`: the charts of the console's dashboards. Each entry is one chart in the
//! terms of the Forest chart API (a Value, Objective, Pie, Line or Leaderboard body), a
//! percentage of two values, several time-based series, or a plugin's chart; `ops::dashboard`
//! evaluates them as the caller, through the same code as `POST /forest/stats/{collection}`.
//!
//! ```toml
//! [[dashboard.chart]]
//! title = "Orders by status"
//! kind = "distribution"
//! collection = "orders"
//! groupBy = "status"
//! ```
//!
//! A chart with `dashboard = "<collection>"` is on that collection's dashboard, else on the home
//! dashboard. The collection is checked against the served schema when the chart is drawn (the
//! schema is not known when the file is read): a wrong name shows its error in its card.

use serde::Deserialize;
use serde_json::{Map, Value as Json, json};

/// What a chart draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChartKind {
    /// One figure, with the previous period's when the filter names a relative period.
    Value,
    /// A figure toward a target (`objective`).
    Objective,
    /// The share of the records matching `filter` among those matching `of` (all by default).
    Percentage,
    /// A figure per value of `groupBy`.
    Distribution,
    /// A figure per period of the date field `groupBy`.
    TimeBased,
    /// Several time-based `series` on one chart.
    MultipleTimeBased,
    /// The `limit` records of `collection` with the largest figure over their `relation`.
    Leaderboard,
    /// A plugin's chart (`addChart`): `chart` names it; with a `collection`, it is drawn on each
    /// record of that collection.
    Plugin,
}

/// How a time-based chart is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChartStyle {
    #[default]
    Line,
    Bars,
}

/// One time-based series of a multiple time-based chart.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeriesDefinition {
    pub label: String,
    /// The condition tree of this series' records, AND-ed with the chart's `filter`.
    pub filter: Option<Json>,
}

/// One `[[dashboard.chart]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChartDefinition {
    pub title: String,
    pub kind: ChartKind,
    /// The collection the chart reads (a plugin chart: the collection it belongs to, if any).
    pub collection: Option<String>,
    /// The collection dashboard the chart is on; none: the home dashboard.
    pub dashboard: Option<String>,
    /// `Count` (the default), `Sum`, `Avg`, `Max` or `Min`.
    pub aggregate: Option<String>,
    /// The field summed or averaged (none counts records).
    pub field: Option<String>,
    /// Distribution: the grouped field; time-based: the date field.
    pub group_by: Option<String>,
    /// `Day`, `Week` (the default), `Month`, `Quarter` or `Year`.
    pub time_range: Option<String>,
    /// A condition tree, as the `filters` of the agent.
    pub filter: Option<Json>,
    /// Percentage: the records the share is taken of (all by default).
    pub of: Option<Json>,
    pub objective: Option<f64>,
    /// Leaderboard: the to-many relation counted or summed, the label of each row, how many.
    pub relation: Option<String>,
    pub label: Option<String>,
    pub limit: Option<u64>,
    #[serde(default)]
    pub series: Vec<SeriesDefinition>,
    #[serde(default)]
    pub style: ChartStyle,
    /// Written after each figure (`€`, `orders`).
    pub unit: Option<String>,
    /// Plugin: the chart's name.
    pub chart: Option<String>,
}

/// `[dashboard]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileDashboard {
    #[serde(default)]
    pub chart: Vec<ChartDefinition>,
}

const AGGREGATES: [&str; 5] = ["Count", "Sum", "Avg", "Max", "Min"];
const RANGES: [&str; 5] = ["Day", "Week", "Month", "Quarter", "Year"];

/// A name among `names`, whatever its case (`sum`, `Sum`): the spelling of the list.
fn canonical(value: &str, names: &[&'static str]) -> Option<&'static str> {
    names
        .iter()
        .find(|n| n.eq_ignore_ascii_case(value.trim()))
        .copied()
}

impl ChartDefinition {
    /// What is wrong with the entry, if anything: each kind needs some keys.
    pub fn problem(&self) -> Option<String> {
        let need = |key: &str, value: bool| (!value).then(|| format!("needs `{key}`"));
        if self.title.trim().is_empty() {
            return Some("needs a `title`".to_owned());
        }
        if let Some(a) = &self.aggregate
            && canonical(a, &AGGREGATES).is_none()
        {
            return Some(format!("`aggregate` {a:?} is not one of {AGGREGATES:?}"));
        }
        if let Some(r) = &self.time_range
            && canonical(r, &RANGES).is_none()
        {
            return Some(format!("`timeRange` {r:?} is not one of {RANGES:?}"));
        }
        if self.kind != ChartKind::Plugin && self.collection.is_none() {
            return need("collection", false);
        }
        for tree in [&self.filter, &self.of]
            .into_iter()
            .flatten()
            .chain(self.series.iter().filter_map(|s| s.filter.as_ref()))
        {
            if !tree.is_object() {
                return Some("a filter is a table (`{ field, operator, value }`)".to_owned());
            }
        }
        match self.kind {
            ChartKind::Value | ChartKind::Percentage => None,
            ChartKind::Objective => need("objective", self.objective.is_some()),
            ChartKind::Distribution => need("groupBy", self.group_by.is_some()),
            ChartKind::TimeBased => need("groupBy", self.group_by.is_some()),
            ChartKind::MultipleTimeBased => need("groupBy", self.group_by.is_some())
                .or_else(|| need("series", !self.series.is_empty())),
            ChartKind::Leaderboard => need("relation", self.relation.is_some())
                .or_else(|| need("label", self.label.is_some())),
            ChartKind::Plugin => need("chart", self.chart.is_some()),
        }
    }

    /// The aggregate, as the chart API spells it.
    fn aggregator(&self) -> &'static str {
        self.aggregate
            .as_deref()
            .and_then(|a| canonical(a, &AGGREGATES))
            .unwrap_or("Count")
    }

    /// The time range, as the chart API spells it (a week by default).
    pub fn range(&self) -> &'static str {
        self.time_range
            .as_deref()
            .and_then(|r| canonical(r, &RANGES))
            .unwrap_or("Week")
    }

    /// The number of rows of a leaderboard (10 by default).
    pub fn rows(&self) -> u64 {
        self.limit.unwrap_or(10)
    }

    /// A chart body of the Forest chart API (`POST /forest/stats/{collection}`) of type
    /// `chart_type` with `filter`: only the keys given, so that its hash is the one a team's
    /// `charts` list holds for the same chart.
    fn body(&self, chart_type: &str, filter: Option<Json>) -> Json {
        let mut body = Map::new();
        body.insert("type".into(), json!(chart_type));
        if let Some(collection) = &self.collection {
            body.insert("sourceCollectionName".into(), json!(collection));
        }
        body.insert("aggregator".into(), json!(self.aggregator()));
        let mut put = |key: &str, value: Option<Json>| {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        };
        put("aggregateFieldName", self.field.as_ref().map(|f| json!(f)));
        match chart_type {
            "Pie" => put("groupByFieldName", self.group_by.as_ref().map(|f| json!(f))),
            "Line" => {
                put("groupByFieldName", self.group_by.as_ref().map(|f| json!(f)));
                put("timeRange", Some(json!(self.range())));
            }
            "Objective" => put("objective", self.objective.map(|o| json!(o))),
            "Leaderboard" => {
                put("labelFieldName", self.label.as_ref().map(|f| json!(f)));
                put(
                    "relationshipFieldName",
                    self.relation.as_ref().map(|f| json!(f)),
                );
                put("limit", Some(json!(self.rows())));
            }
            _ => {}
        }
        put("filter", filter);
        Json::Object(body)
    }

    /// The chart bodies this chart is computed from, in order: one for most kinds, the
    /// numerator then the denominator of a percentage, one per series of a multiple
    /// time-based chart, none for a plugin chart.
    pub fn bodies(&self) -> Vec<Json> {
        match self.kind {
            ChartKind::Value => vec![self.body("Value", self.filter.clone())],
            ChartKind::Objective => vec![self.body("Objective", self.filter.clone())],
            ChartKind::Percentage => {
                let of = self.of.clone();
                let share = match (&self.filter, &of) {
                    (Some(f), Some(o)) => Some(json!({"aggregator": "And", "conditions": [o, f]})),
                    (f, o) => f.clone().or_else(|| o.clone()),
                };
                vec![self.body("Value", share), self.body("Value", of)]
            }
            ChartKind::Distribution => vec![self.body("Pie", self.filter.clone())],
            ChartKind::TimeBased => vec![self.body("Line", self.filter.clone())],
            ChartKind::MultipleTimeBased => self
                .series
                .iter()
                .map(|series| {
                    let filter = match (&self.filter, &series.filter) {
                        (Some(f), Some(s)) => {
                            Some(json!({"aggregator": "And", "conditions": [f, s]}))
                        }
                        (f, s) => f.clone().or_else(|| s.clone()),
                    };
                    self.body("Line", filter)
                })
                .collect(),
            ChartKind::Leaderboard => vec![self.body("Leaderboard", self.filter.clone())],
            ChartKind::Plugin => Vec::new(),
        }
    }
}

/// The charts of a `[dashboard]` table, each checked; the error is the index of the first bad
/// entry and what is wrong with it.
pub fn resolve(file: Option<FileDashboard>) -> Result<Vec<ChartDefinition>, (usize, String)> {
    let charts = file.map(|d| d.chart).unwrap_or_default();
    for (index, chart) in charts.iter().enumerate() {
        if let Some(problem) = chart.problem() {
            return Err((index, format!("({:?}) {problem}", chart.title)));
        }
    }
    Ok(charts)
}

/// Parses a dashboard file (a `[[dashboard.chart]]` list alone), as the demo's.
pub fn parse(text: &str) -> Result<Vec<ChartDefinition>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Only {
        dashboard: Option<FileDashboard>,
    }
    let only: Only = toml::from_str(text).map_err(|e| e.to_string())?;
    resolve(only.dashboard)
        .map_err(|(index, problem)| format!("dashboard.chart[{index}] {problem}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_becomes_the_bodies_of_the_chart_api() {
        let charts = parse(
            r#"
[[dashboard.chart]]
title = "Paid share"
kind = "percentage"
collection = "orders"
filter = { field = "status", operator = "Equal", value = "paid" }

[[dashboard.chart]]
title = "Orders"
kind = "multiple-time-based"
collection = "orders"
groupBy = "ordered_at"
timeRange = "month"
series = [{ label = "paid", filter = { field = "status", operator = "Equal", value = "paid" } }, { label = "all" }]
"#,
        )
        .unwrap();
        let share = charts[0].bodies();
        assert_eq!(
            share[0],
            json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count",
                   "filter": {"field": "status", "operator": "Equal", "value": "paid"}})
        );
        assert_eq!(
            share[1],
            json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count"})
        );
        let lines = charts[1].bodies();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["timeRange"], "Month");
        assert_eq!(lines[1].get("filter"), None);
    }

    #[test]
    fn a_chart_missing_what_its_kind_needs_is_refused_by_name() {
        let error = parse(
            "[[dashboard.chart]]\ntitle = \"Goal\"\nkind = \"objective\"\ncollection = \"orders\"\n",
        )
        .unwrap_err();
        assert!(
            error.contains("\"Goal\"") && error.contains("objective"),
            "{error}"
        );
        let error = parse("[[dashboard.chart]]\ntitle = \"x\"\nkind = \"pie\"\n").unwrap_err();
        assert!(error.contains("pie"), "{error}");
        let error = parse(
            "[[dashboard.chart]]\ntitle = \"x\"\nkind = \"value\"\ncollection = \"o\"\naggregate = \"median\"\n",
        )
        .unwrap_err();
        assert!(error.contains("median"), "{error}");
    }
}
