//! The charts of the console's dashboards (`[[dashboard.chart]]`, `config::ChartDefinition`),
//! computed as one caller: each built-in chart body through [`charts::collection_chart`] (the
//! code of `POST /forest/stats/{collection}`: the chart permission, the caller's scope, relation
//! reads, one activity entry), each plugin chart through [`charts::api_chart`] (the code of
//! `/forest/_charts/…`). The answer is a typed [`Figure`] for the console to draw.
//!
//! Permissions: a chart on a collection the caller may not browse, or whose body the chart
//! permission refuses (a user below editor whose team's `charts` do not hold it), is not for
//! this caller ([`evaluate`] answers `None`): a dashboard shows what its reader may compute.

use chrono::{NaiveDate, Weekday};
use indexmap::IndexMap;
use serde_json::Value as Json;

use super::charts;
use super::{Error, Ops, Result};
use crate::agent::api_chart::chart_value;
use crate::agent::chart::{period_label, shift};
use crate::auth::CollectionRight;
use crate::config::{ChartDefinition, ChartKind};
use crate::datasource::chart::{ChartRequest, ChartResult};
use crate::datasource::{Caller, DateOperation, unpack_id};

/// What a chart shows, in numbers.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    /// One figure, and the previous period's when the chart compares periods.
    Value { current: f64, previous: Option<f64> },
    /// A figure toward a target.
    Objective { value: f64, objective: f64 },
    /// A share in percent; `None` when there is nothing to take a share of.
    Percentage(Option<f64>),
    /// A figure per group, in the order given.
    Distribution(Vec<(String, f64)>),
    /// A figure per row, largest first.
    Leaderboard(Vec<(String, f64)>),
    /// One figure per period and series; each series has one value per label.
    TimeBased {
        labels: Vec<String>,
        series: Vec<(String, Vec<f64>)>,
    },
    /// A plugin's free-form answer (`smart`).
    Smart(Json),
}

impl Figure {
    /// Whether there is nothing to draw (no row, no period).
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Value { current, previous } => {
                *current == 0.0 && previous.is_none_or(|p| p == 0.0)
            }
            Self::Objective { .. } => false,
            Self::Percentage(share) => share.is_none(),
            Self::Distribution(rows) | Self::Leaderboard(rows) => rows.is_empty(),
            Self::TimeBased { labels, .. } => labels.is_empty(),
            Self::Smart(value) => value.is_null(),
        }
    }
}

/// A JSON figure as a number: numbers, and decimals some databases answer as text.
fn number(value: &Json) -> f64 {
    match value {
        Json::Number(n) => n.as_f64().unwrap_or(0.0),
        Json::String(s) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// A group key as text (a status, a name; a missing one is "(empty)").
fn key_text(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        Json::Null => "(empty)".to_owned(),
        other => other.to_string(),
    }
}

/// `[{key, value}]` rows.
fn rows(value: &Json) -> Vec<(String, f64)> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| (key_text(&row["key"]), number(&row["value"])))
        .collect()
}

/// `[{label, values: {value}}]` points.
fn points(value: &Json) -> Vec<(String, f64)> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| (key_text(&row["label"]), number(&row["values"]["value"])))
        .collect()
}

/// The first day of the period a time-based label names (the labels of `period_label`).
fn label_date(label: &str, range: DateOperation) -> Option<NaiveDate> {
    match range {
        DateOperation::Day => NaiveDate::parse_from_str(label, "%d/%m/%Y").ok(),
        DateOperation::Week => {
            let (week, year) = label.strip_prefix('W')?.split_once('-')?;
            NaiveDate::from_isoywd_opt(year.parse().ok()?, week.parse().ok()?, Weekday::Mon)
        }
        DateOperation::Month => NaiveDate::parse_from_str(&format!("01 {label}"), "%d %b %y").ok(),
        DateOperation::Quarter => {
            let (quarter, year) = label.strip_prefix('Q')?.split_once('-')?;
            let quarter: u32 = quarter.parse().ok()?;
            NaiveDate::from_ymd_opt(year.parse().ok()?, quarter.checked_sub(1)? * 3 + 1, 1)
        }
        DateOperation::Year => NaiveDate::from_ymd_opt(label.parse().ok()?, 1, 1),
    }
}

/// Several time-based lines on one axis: every period from the first to the last of any line,
/// each line 0 where it has no point.
fn merge_lines(range: DateOperation, lines: Vec<(String, Vec<(String, f64)>)>) -> Figure {
    let dates: Vec<NaiveDate> = lines
        .iter()
        .flat_map(|(_, points)| points.iter().filter_map(|(l, _)| label_date(l, range)))
        .collect();
    let (Some(first), Some(last)) = (dates.iter().min(), dates.iter().max()) else {
        return Figure::TimeBased {
            labels: Vec::new(),
            series: lines.into_iter().map(|(n, _)| (n, Vec::new())).collect(),
        };
    };
    let mut labels = Vec::new();
    let mut day = *first;
    while day <= *last {
        labels.push(period_label(day, range));
        let next = shift(day, range, 1);
        if next <= day {
            break;
        }
        day = next;
    }
    let series = lines
        .into_iter()
        .map(|(name, points)| {
            let by_label: IndexMap<String, f64> = points.into_iter().collect();
            let values = labels
                .iter()
                .map(|l| by_label.get(l).copied().unwrap_or(0.0))
                .collect();
            (name, values)
        })
        .collect();
    Figure::TimeBased { labels, series }
}

/// The figure of a plugin chart's answer.
pub fn api_figure(result: &ChartResult) -> Figure {
    match result {
        ChartResult::Value { current, previous } => Figure::Value {
            current: *current,
            previous: *previous,
        },
        ChartResult::Objective { value, objective } => Figure::Objective {
            value: *value,
            objective: *objective,
        },
        ChartResult::Percentage(share) => Figure::Percentage(Some(*share)),
        ChartResult::Distribution(entries) => {
            Figure::Distribution(entries.iter().map(|(k, v)| (k.clone(), *v)).collect())
        }
        ChartResult::Leaderboard(_) => Figure::Leaderboard(rows(&chart_value(result))),
        ChartResult::TimeBased { .. } => {
            let points = points(&chart_value(result));
            Figure::TimeBased {
                labels: points.iter().map(|(l, _)| l.clone()).collect(),
                series: vec![(String::new(), points.into_iter().map(|(_, v)| v).collect())],
            }
        }
        ChartResult::MultipleTimeBased { .. } => {
            let value = chart_value(result);
            let labels = value["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .map(key_text)
                .collect();
            let series = value["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|line| {
                    let values = line["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(number)
                        .collect();
                    (key_text(&line["key"]), values)
                })
                .collect();
            Figure::TimeBased { labels, series }
        }
        ChartResult::Smart(value) => Figure::Smart(value.clone()),
    }
}

/// Whether an operation failed because the caller may not run it (then the chart is not shown).
fn refused(error: &Error) -> bool {
    matches!(
        error,
        Error::Auth(crate::auth::Error::Forbidden(_))
            | Error::Datasource(crate::datasource::Error::Forbidden(_))
    )
}

/// The chart `definition` computed as `caller`, in the caller's timezone; `None` when it is not
/// for this caller (no browse right on its collection, the chart permission refuses it). A
/// plugin chart of a collection needs a record: see [`record_chart`].
pub async fn evaluate(
    ops: &Ops,
    caller: &Caller,
    definition: &ChartDefinition,
) -> Result<Option<Figure>> {
    if let Some(collection) = &definition.collection {
        ops.collection(collection).map_err(|_| {
            crate::agent::Error::validation(format!(
                "This chart reads the collection \"{collection}\", which is not served: fix \
                 `collection` in its [[dashboard.chart]] entry"
            ))
        })?;
        if definition.kind != ChartKind::Plugin
            && !ops
                .permissions
                .has(caller, collection, CollectionRight::Browse)
                .await?
        {
            return Ok(None);
        }
    }
    match compute(ops, caller, definition).await {
        Err(error) if refused(&error) => Ok(None),
        other => other.map(Some),
    }
}

async fn compute(ops: &Ops, caller: &Caller, definition: &ChartDefinition) -> Result<Figure> {
    let collection = definition.collection.as_deref().unwrap_or_default();
    let mut values = Vec::new();
    for body in definition.bodies() {
        values.push(charts::collection_chart(ops, caller, collection, &body).await?);
    }
    let first = values.first().cloned().unwrap_or(Json::Null);
    Ok(match definition.kind {
        ChartKind::Value => Figure::Value {
            current: number(&first["countCurrent"]),
            previous: first.get("countPrevious").map(number),
        },
        ChartKind::Objective => Figure::Objective {
            value: number(&first["value"]),
            objective: definition.objective.unwrap_or_default(),
        },
        ChartKind::Percentage => {
            let part = number(&first["countCurrent"]);
            let whole = values.get(1).map_or(0.0, |v| number(&v["countCurrent"]));
            Figure::Percentage((whole != 0.0).then(|| part / whole * 100.0))
        }
        ChartKind::Distribution => Figure::Distribution(rows(&first)),
        ChartKind::Leaderboard => Figure::Leaderboard(rows(&first)),
        ChartKind::TimeBased => {
            let points = points(&first);
            Figure::TimeBased {
                labels: points.iter().map(|(l, _)| l.clone()).collect(),
                series: vec![(String::new(), points.into_iter().map(|(_, v)| v).collect())],
            }
        }
        ChartKind::MultipleTimeBased => {
            let range = definition
                .range()
                .parse::<DateOperation>()
                .unwrap_or(DateOperation::Week);
            let lines = definition
                .series
                .iter()
                .zip(&values)
                .map(|(series, value)| (series.label.clone(), points(value)))
                .collect();
            merge_lines(range, lines)
        }
        ChartKind::Plugin => {
            let name = definition.chart.as_deref().unwrap_or_default();
            if !ops.schema().charts.iter().any(|c| c == name) {
                return Err(crate::agent::Error::validation(format!(
                    "No plugin adds the chart \"{name}\": is its plugin loaded?"
                ))
                .into());
            }
            let result =
                charts::api_chart(ops, caller, None, name, &ChartRequest::default()).await?;
            api_figure(&result)
        }
    })
}

/// The plugin chart `chart` of the record `packed_id` of `collection` (`lifetime_value` on a
/// customer), as `GET /forest/_charts/{collection}/{chart}?record_id=…` computes it.
pub async fn record_chart(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    chart: &str,
    packed_id: &str,
) -> Result<Figure> {
    let schema = ops.collection(collection)?;
    let record_id = unpack_id(schema, packed_id)?
        .into_iter()
        .map(|(_, value)| value)
        .collect();
    let mut parameters = IndexMap::new();
    parameters.insert("record_id".to_owned(), packed_id.to_owned());
    let request = ChartRequest {
        record_id: Some(record_id),
        parameters,
    };
    let result = charts::api_chart(ops, caller, Some(collection), chart, &request).await?;
    Ok(api_figure(&result))
}

/// The charts of the home dashboard (those without a `dashboard`), or of a collection's.
pub fn charts_of<'a>(ops: &'a Ops, dashboard: Option<&str>) -> Vec<&'a ChartDefinition> {
    ops.dashboard
        .iter()
        .filter(|c| c.dashboard.as_deref() == dashboard)
        .filter(|c| !(c.kind == ChartKind::Plugin && c.collection.is_some()))
        .collect()
}

/// A chart of a dashboard: from the config file (`stored` none), or added by an admin from the
/// console (`stored` its id in the store, so that it can be removed).
#[derive(Debug, Clone)]
pub struct DashboardChart {
    pub stored: Option<i64>,
    pub definition: ChartDefinition,
}

/// The charts added from the console to `dashboard` (none: the home one), oldest first; an
/// entry that no longer reads is left out (and logged), never the whole dashboard.
pub async fn stored_charts(ops: &Ops, dashboard: Option<&str>) -> Vec<DashboardChart> {
    let Some(store) = &ops.store else {
        return Vec::new();
    };
    let stored = match store.dashboard_charts().await {
        Ok(stored) => stored,
        Err(error) => {
            tracing::error!(%error, "the dashboard charts of the store cannot be read");
            return Vec::new();
        }
    };
    stored
        .into_iter()
        .filter(|c| c.dashboard.as_deref() == dashboard)
        .filter_map(
            |c| match serde_json::from_value::<ChartDefinition>(c.definition) {
                Ok(definition) => Some(DashboardChart {
                    stored: Some(c.id),
                    definition,
                }),
                Err(error) => {
                    tracing::error!(chart = c.id, %error, "a stored dashboard chart does not read");
                    None
                }
            },
        )
        .collect()
}

/// Every chart of `dashboard` (none: the home one): the config file's, then those added from
/// the console.
pub async fn all_charts(ops: &Ops, dashboard: Option<&str>) -> Vec<DashboardChart> {
    let mut all: Vec<DashboardChart> = charts_of(ops, dashboard)
        .into_iter()
        .map(|d| DashboardChart {
            stored: None,
            definition: d.clone(),
        })
        .collect();
    all.extend(stored_charts(ops, dashboard).await);
    all
}

/// Whether `dashboard` (none: the home one) has a chart.
pub async fn has_charts(ops: &Ops, dashboard: Option<&str>) -> bool {
    !charts_of(ops, dashboard).is_empty() || !stored_charts(ops, dashboard).await.is_empty()
}

/// The kinds a chart added from the console may have (a plugin's chart and several series are
/// the config file's).
pub const ADDABLE: [ChartKind; 6] = [
    ChartKind::Value,
    ChartKind::Objective,
    ChartKind::Percentage,
    ChartKind::Distribution,
    ChartKind::TimeBased,
    ChartKind::Leaderboard,
];

/// Reads and checks a chart an admin writes (a `[[dashboard.chart]]` entry in JSON) for
/// `dashboard`: the kind is one of [`ADDABLE`], what the kind needs is there, the collection
/// and the dashboard's collection are served. A refusal names the field (`title`, `kind`,
/// `collection`, `dashboard`, or `chart` for the rest).
pub fn check_chart(
    ops: &Ops,
    dashboard: Option<&str>,
    definition: &Json,
) -> Result<ChartDefinition> {
    let chart: ChartDefinition = serde_json::from_value(definition.clone())
        .map_err(|e| Error::field("chart", format!("does not read: {e}")))?;
    if chart.title.trim().is_empty() {
        return Err(Error::field("title", "a chart needs a title"));
    }
    if !ADDABLE.contains(&chart.kind) {
        return Err(Error::field(
            "kind",
            "choose a value, objective, percentage, distribution, time-based or leaderboard chart",
        ));
    }
    let Some(collection) = chart.collection.as_deref() else {
        return Err(Error::field("collection", "choose the collection it reads"));
    };
    if ops.collection(collection).is_err() {
        return Err(Error::field(
            "collection",
            format!("{collection:?} is not served"),
        ));
    }
    if let Some(dashboard) = dashboard
        && ops.collection(dashboard).is_err()
    {
        return Err(Error::field(
            "dashboard",
            format!("{dashboard:?} is not served"),
        ));
    }
    if let Some(problem) = chart.problem() {
        return Err(Error::field("chart", problem));
    }
    Ok(chart)
}

/// A chart as it would draw for `caller` (an admin), before it is added: checked, then
/// computed.
pub async fn preview(
    ops: &Ops,
    caller: &Caller,
    dashboard: Option<&str>,
    definition: &Json,
) -> Result<(ChartDefinition, Figure)> {
    super::tokens::require_admin(ops, caller).await?;
    let chart = check_chart(ops, dashboard, definition)?;
    let figure = compute(ops, caller, &chart).await?;
    Ok((chart, figure))
}

/// Adds a chart to `dashboard` (none: the home one), after checking it and computing it once
/// (a chart that cannot be computed is refused, with the reason); answers its id.
pub async fn add_chart(
    ops: &Ops,
    caller: &Caller,
    dashboard: Option<&str>,
    definition: &Json,
) -> Result<i64> {
    preview(ops, caller, dashboard, definition).await?;
    let store = super::tokens::store(ops)?;
    Ok(store
        .add_dashboard_chart(&super::tokens::actor(caller), dashboard, definition)
        .await?)
}

/// Removes chart `id`, added from the console (the config file's charts are the file's).
pub async fn remove_chart(ops: &Ops, caller: &Caller, id: i64) -> Result<()> {
    super::tokens::require_admin(ops, caller).await?;
    super::tokens::store(ops)?
        .remove_dashboard_chart(&super::tokens::actor(caller), id)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::datasource::sql::{Options, Pool, SqlDataSource};

    const SHOP: &str = "
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, status TEXT, placed DATE,
  customer_id INTEGER REFERENCES customers(id));
INSERT INTO customers VALUES (1, 'Ada'), (2, 'Alan');
INSERT INTO orders VALUES (1, 10, 'paid', '2024-01-03', 1), (2, 20, 'sent', '2024-03-05', 2),
  (3, 30, 'paid', '2024-03-09', 1);
";

    async fn ops(charts: &str) -> Ops {
        let pool = Pool::connect("sqlite::memory:", 1).await.unwrap();
        if let Pool::Sqlite(sqlite) = &pool {
            sqlx::raw_sql(SHOP).execute(sqlite).await.unwrap();
        }
        let datasource = SqlDataSource::from_pool(pool, Options::default())
            .await
            .unwrap();
        let mut ops = Ops::new(Arc::new(datasource), 100);
        ops.dashboard = Arc::new(crate::config::parse_dashboard(charts).unwrap());
        ops
    }

    #[tokio::test]
    async fn every_kind_is_computed_through_the_chart_api_and_a_bad_chart_fails_alone() {
        let ops = ops(r#"
[[dashboard.chart]]
title = "Revenue"
kind = "value"
collection = "orders"
aggregate = "Sum"
field = "amount"

[[dashboard.chart]]
title = "Goal"
kind = "objective"
collection = "orders"
objective = 6

[[dashboard.chart]]
title = "Paid"
kind = "percentage"
collection = "orders"
filter = { field = "status", operator = "Equal", value = "paid" }

[[dashboard.chart]]
title = "By status"
kind = "distribution"
collection = "orders"
groupBy = "status"

[[dashboard.chart]]
title = "Per month"
kind = "multiple-time-based"
collection = "orders"
groupBy = "placed"
timeRange = "Month"
series = [{ label = "paid", filter = { field = "status", operator = "Equal", value = "paid" } }, { label = "all" }]

[[dashboard.chart]]
title = "Best customers"
kind = "leaderboard"
collection = "customers"
aggregate = "Sum"
field = "amount"
relation = "orders"
label = "name"
limit = 1

[[dashboard.chart]]
title = "Nowhere"
kind = "value"
collection = "nope"

[[dashboard.chart]]
title = "Missing plugin"
kind = "plugin"
chart = "nope"
"#)
        .await;
        let caller = Caller::system(chrono_tz::UTC);
        let mut figures = Vec::new();
        for chart in charts_of(&ops, None) {
            figures.push(evaluate(&ops, &caller, chart).await);
        }
        let figure = |i: usize| figures[i].as_ref().unwrap().clone().unwrap();
        assert_eq!(
            figure(0),
            Figure::Value {
                current: 60.0,
                previous: None
            }
        );
        assert_eq!(
            figure(1),
            Figure::Objective {
                value: 3.0,
                objective: 6.0
            }
        );
        let Figure::Percentage(Some(share)) = figure(2) else {
            panic!()
        };
        assert!((share - 200.0 / 3.0).abs() < 1e-9, "{share}");
        let Figure::Distribution(mut rows) = figure(3) else {
            panic!()
        };
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(rows, [("paid".to_owned(), 2.0), ("sent".to_owned(), 1.0)]);
        assert_eq!(
            figure(4),
            Figure::TimeBased {
                labels: vec!["Jan 24".into(), "Feb 24".into(), "Mar 24".into()],
                series: vec![
                    ("paid".into(), vec![1.0, 0.0, 1.0]),
                    ("all".into(), vec![1.0, 0.0, 2.0]),
                ],
            }
        );
        assert_eq!(figure(5), Figure::Leaderboard(vec![("Ada".into(), 40.0)]));
        let nowhere = figures[6].as_ref().unwrap_err().to_string();
        assert!(
            nowhere.contains("\"nope\", which is not served"),
            "{nowhere}"
        );
        let plugin = figures[7].as_ref().unwrap_err().to_string();
        assert!(plugin.contains("No plugin adds the chart"), "{plugin}");
    }

    #[test]
    fn time_based_labels_name_the_first_day_of_their_period() {
        for range in DateOperation::ALL {
            let day = crate::agent::chart::period_start(
                NaiveDate::from_ymd_opt(2024, 12, 31).unwrap(),
                range,
            );
            assert_eq!(
                label_date(&period_label(day, range), range),
                Some(day),
                "{range:?}"
            );
        }
    }

    #[test]
    fn several_lines_share_every_period_from_the_first_to_the_last() {
        let figure = merge_lines(
            DateOperation::Month,
            vec![
                (
                    "a".into(),
                    vec![("Jan 24".into(), 1.0), ("Feb 24".into(), 2.0)],
                ),
                ("b".into(), vec![("Apr 24".into(), 5.0)]),
            ],
        );
        assert_eq!(
            figure,
            Figure::TimeBased {
                labels: vec![
                    "Jan 24".into(),
                    "Feb 24".into(),
                    "Mar 24".into(),
                    "Apr 24".into()
                ],
                series: vec![
                    ("a".into(), vec![1.0, 2.0, 0.0, 0.0]),
                    ("b".into(), vec![0.0, 0.0, 0.0, 5.0]),
                ],
            }
        );
    }
}
