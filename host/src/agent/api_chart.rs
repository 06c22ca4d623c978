//! API charts (`addChart`, §1.2, §1.4, §8.10): the chart value of each result builder, and the
//! chart parameters of a request.

use std::collections::HashMap;

use chrono::NaiveDate;
use indexmap::IndexMap;
use serde_json::{Map, Value as Json, json};

use super::chart::{period_label, period_start, shift};
use crate::datasource::chart::ChartResult;
use crate::datasource::{DateOperation, Value};

/// A JSON number written as JavaScript writes it: integral values without a fraction.
fn number(n: f64) -> Json {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

/// The chart value the frontend reads, as the agent's `ResultBuilder` shapes it.
pub fn chart_value(result: &ChartResult) -> Json {
    match result {
        ChartResult::Value { current, previous } => {
            let mut out = Map::new();
            out.insert("countCurrent".into(), number(*current));
            if let Some(previous) = previous {
                out.insert("countPrevious".into(), number(*previous));
            }
            Json::Object(out)
        }
        ChartResult::Objective { value, objective } => {
            json!({"value": number(*value), "objective": number(*objective)})
        }
        ChartResult::Percentage(value) => number(*value),
        ChartResult::Distribution(entries) => key_values(entries.iter()),
        ChartResult::Leaderboard(entries) => {
            let mut sorted: Vec<(&String, &f64)> = entries.iter().collect();
            // Stable, so ties keep their order, as JavaScript's sort does.
            sorted.sort_by(|a, b| b.1.total_cmp(a.1));
            key_values(sorted.into_iter())
        }
        ChartResult::TimeBased { range, points } => {
            let rows = time_based(*range, points.iter().map(|(d, v)| (d, *v)));
            Json::Array(
                rows.into_iter()
                    .map(|(label, value)| json!({"label": label, "values": {"value": number(value)}}))
                    .collect(),
            )
        }
        ChartResult::MultipleTimeBased {
            range,
            dates,
            lines,
        } => multiple_time_based(*range, dates, lines),
        ChartResult::Smart(value) => value.clone(),
    }
}

fn key_values<'a>(entries: impl Iterator<Item = (&'a String, &'a f64)>) -> Json {
    Json::Array(
        entries
            .map(|(key, value)| json!({"key": key, "value": number(*value)}))
            .collect(),
    )
}

/// The day of a point: a date as is, an instant on the UTC calendar (the agent's process runs
/// in UTC).
fn day_of(value: &Value) -> Option<NaiveDate> {
    match value {
        Value::Dateonly(d) => Some(*d),
        Value::Date(t) => Some(t.date_naive()),
        Value::String(s) => crate::datasource::parse_datetime(s)
            .map(|t| t.date_naive())
            .or_else(|| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()),
        _ => None,
    }
}

/// Every period from the first point's to the last one's, with the sum of its values (0 when
/// none, nulls ignored).
fn time_based<'a>(
    range: DateOperation,
    points: impl Iterator<Item = (&'a Value, Option<f64>)>,
) -> Vec<(String, f64)> {
    let mut sums: HashMap<String, f64> = HashMap::new();
    let mut days = Vec::new();
    for (date, value) in points {
        let Some(day) = day_of(date) else { continue };
        days.push(day);
        if let Some(value) = value {
            *sums.entry(period_label(day, range)).or_default() += value;
        }
    }
    let (Some(first), Some(last)) = (days.iter().min(), days.iter().max()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut current = period_start(*first, range);
    while current <= *last {
        let label = period_label(current, range);
        let value = sums.get(&label).copied().unwrap_or(0.0);
        out.push((label, value));
        current = shift(current, range, 1);
    }
    out
}

fn multiple_time_based(
    range: DateOperation,
    dates: &[Value],
    lines: &[(String, Vec<Option<f64>>)],
) -> Json {
    let mut labels: Option<Vec<String>> = None;
    let values: Vec<Json> = lines
        .iter()
        .map(|(label, values)| {
            let rows = time_based(
                range,
                dates
                    .iter()
                    .enumerate()
                    .map(|(i, d)| (d, values.get(i).copied().flatten())),
            );
            if labels.is_none() {
                labels = Some(rows.iter().map(|(l, _)| l.clone()).collect());
            }
            json!({"key": label, "values": rows.iter().map(|(_, v)| number(*v)).collect::<Vec<_>>()})
        })
        .collect();
    let has_labels = labels.as_ref().is_some_and(|l| !l.is_empty());
    json!({
        "labels": labels,
        "values": if has_labels { Json::Array(values) } else { Json::Null },
    })
}

/// Chart parameters: every scalar entry of the query string and of the body, stringified as
/// JavaScript's `String(v)`; body entries win.
pub fn parameters(
    query: impl IntoIterator<Item = (String, String)>,
    body: &Json,
) -> IndexMap<String, String> {
    let mut out: IndexMap<String, String> = query.into_iter().collect();
    if let Json::Object(map) = body {
        for (key, value) in map {
            if value.is_array() || value.is_object() {
                continue;
            }
            let text = super::js::string(value);
            out.insert(key.clone(), text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builder_gives_the_agents_value() {
        let map = |pairs: &[(&str, f64)]| -> IndexMap<String, f64> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
        };
        assert_eq!(
            chart_value(&ChartResult::Value {
                current: 3.0,
                previous: Some(1.5)
            }),
            json!({"countCurrent": 3, "countPrevious": 1.5})
        );
        assert_eq!(
            chart_value(&ChartResult::Objective {
                value: 1.0,
                objective: 2.0
            }),
            json!({"value": 1, "objective": 2})
        );
        assert_eq!(chart_value(&ChartResult::Percentage(12.5)), json!(12.5));
        assert_eq!(
            chart_value(&ChartResult::Distribution(map(&[("a", 1.0), ("b", 3.0)]))),
            json!([{"key": "a", "value": 1}, {"key": "b", "value": 3}])
        );
        assert_eq!(
            chart_value(&ChartResult::Leaderboard(map(&[("a", 1.0), ("b", 3.0)]))),
            json!([{"key": "b", "value": 3}, {"key": "a", "value": 1}])
        );
        let day = |s: &str| Value::Dateonly(NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap());
        assert_eq!(
            chart_value(&ChartResult::TimeBased {
                range: DateOperation::Month,
                points: vec![
                    (day("2022-01-07"), Some(1.0)),
                    (day("2022-03-02"), Some(2.0)),
                    (day("2022-01-01"), Some(3.0)),
                    (day("2022-03-09"), None),
                ],
            }),
            json!([
                {"label": "Jan 22", "values": {"value": 4}},
                {"label": "Feb 22", "values": {"value": 0}},
                {"label": "Mar 22", "values": {"value": 2}},
            ])
        );
        assert_eq!(
            chart_value(&ChartResult::MultipleTimeBased {
                range: DateOperation::Year,
                dates: vec![day("2020-05-01"), day("2021-05-01")],
                lines: vec![("l1".into(), vec![Some(1.0), None])],
            }),
            json!({"labels": ["2020", "2021"], "values": [{"key": "l1", "values": [1, 0]}]})
        );
        assert_eq!(
            chart_value(&ChartResult::Smart(json!({"any": [1]}))),
            json!({"any": [1]})
        );
    }

    #[test]
    fn parameters_are_scalar_entries_stringified() {
        let params = parameters(
            [("timezone".to_owned(), "UTC".to_owned())],
            &json!({"a": 1, "b": true, "c": {"x": 1}, "d": "s"}),
        );
        assert_eq!(
            params.into_iter().collect::<Vec<_>>(),
            [
                ("timezone".to_owned(), "UTC".to_owned()),
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "true".to_owned()),
                ("d".to_owned(), "s".to_owned()),
            ]
        );
    }
}
