//! Charts: the [`ChartContext`] a chart handler receives and the [`ChartResult`] builders.

use serde_json::{Value, json};

use crate::data::{Caller, Context};
use crate::error::{Error, Result};

/// The period of a time-based chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    missing_docs,
    reason = "each variant is the spec's range of the same name"
)]
pub enum TimeRange {
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl TimeRange {
    fn as_str(self) -> &'static str {
        match self {
            Self::Day => "Day",
            Self::Week => "Week",
            Self::Month => "Month",
            Self::Quarter => "Quarter",
            Self::Year => "Year",
        }
    }
}

/// What a chart handler receives.
pub struct ChartContext {
    context: Context,
    record_id: Option<Value>,
    record_filter: Value,
    parameters: Value,
}

impl ChartContext {
    pub(crate) fn from_json(context: Context, json: &Value) -> Self {
        Self {
            context,
            record_id: json.get("recordId").filter(|v| !v.is_null()).cloned(),
            record_filter: json.get("recordFilter").cloned().unwrap_or(Value::Null),
            parameters: json.get("parameters").cloned().unwrap_or(Value::Null),
        }
    }

    /// The request's caller (its `timezone` is the chart's).
    pub fn caller(&self) -> &Caller {
        &self.context.caller
    }

    /// The handler context (data access through the host).
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The record's id for a collection chart (its packed id, `"1"` or `"1|2"`).
    pub fn record_id(&self) -> Option<&Value> {
        self.record_id.as_ref()
    }

    /// The chart's query parameters.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// The record of a collection chart with these fields.
    pub fn get_record(&self, fields: &[&str]) -> Result<Value> {
        if self.record_id.is_none() {
            return Err(Error::internal("a datasource chart has no record"));
        }
        let rows = self.context.this()?.list(&self.record_filter, fields)?;
        if rows.is_empty() {
            return Err(Error::NotFound("Record does not exist".to_owned()));
        }
        Ok(rows.record(0))
    }
}

/// A chart's result (the spec's eight result builders). The host turns it into the agent's
/// response shape (`countCurrent`, `[{key, value}]`, filled time periods, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct ChartResult(Value);

impl ChartResult {
    /// A single value, with the previous period's for comparison.
    pub fn value(value: f64, previous: Option<f64>) -> Self {
        Self(json!({"type": "Value", "value": value, "previousValue": previous}))
    }

    /// A distribution (pie): label → number.
    pub fn distribution<S: Into<String>>(entries: impl IntoIterator<Item = (S, f64)>) -> Self {
        Self(json!({"type": "Distribution", "entries": entries_json(entries)}))
    }

    /// Points of one line: `(ISO date, value)`; missing periods are filled with 0.
    pub fn time_based<S: Into<String>>(
        range: TimeRange,
        points: impl IntoIterator<Item = (S, Option<f64>)>,
    ) -> Self {
        let points: Vec<Value> = points
            .into_iter()
            .map(|(d, v)| json!({"date": d.into(), "value": v}))
            .collect();
        Self(json!({"type": "TimeBased", "range": range.as_str(), "points": points}))
    }

    /// Several lines over the same ISO dates: `(label, values)` with one value per date.
    pub fn multiple_time_based<S: Into<String>, L: Into<String>>(
        range: TimeRange,
        dates: impl IntoIterator<Item = S>,
        lines: impl IntoIterator<Item = (L, Vec<Option<f64>>)>,
    ) -> Self {
        let dates: Vec<String> = dates.into_iter().map(Into::into).collect();
        let lines: Vec<Value> = lines
            .into_iter()
            .map(|(l, v)| json!({"label": l.into(), "values": v}))
            .collect();
        Self(
            json!({"type": "MultipleTimeBased", "range": range.as_str(), "dates": dates, "lines": lines}),
        )
    }

    /// A percentage.
    pub fn percentage(value: f64) -> Self {
        Self(json!({"type": "Percentage", "value": value}))
    }

    /// A value against an objective.
    pub fn objective(value: f64, objective: f64) -> Self {
        Self(json!({"type": "Objective", "value": value, "objective": objective}))
    }

    /// A leaderboard: label → number, sorted descending by the host.
    pub fn leaderboard<S: Into<String>>(entries: impl IntoIterator<Item = (S, f64)>) -> Self {
        Self(json!({"type": "Leaderboard", "entries": entries_json(entries)}))
    }

    /// Free-form data, returned as is.
    pub fn smart(data: Value) -> Self {
        let mut o = serde_json::Map::new();
        o.insert("type".into(), json!("Smart"));
        o.insert("data".into(), data);
        Self(Value::Object(o))
    }

    pub(crate) fn into_json(self) -> Value {
        self.0
    }
}

fn entries_json<S: Into<String>>(entries: impl IntoIterator<Item = (S, f64)>) -> Value {
    entries
        .into_iter()
        .map(|(k, v)| json!({"key": k.into(), "value": v}))
        .collect()
}
