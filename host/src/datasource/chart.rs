//! API chart results (`addChart`): the eight result builders of the spec, before the agent turns
//! them into the chart value the frontend reads (§8.10).

use indexmap::IndexMap;
use serde_json::Value as Json;

use super::query::DateOperation;
use super::record::Value;

/// What a chart handler answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ChartResult {
    /// `value(v, previous?)` → `{countCurrent, countPrevious}`.
    Value { current: f64, previous: Option<f64> },
    /// `objective(v, o)` → `{value, objective}`.
    Objective { value: f64, objective: f64 },
    /// `percentage(v)` → the number.
    Percentage(f64),
    /// `distribution({k: v})` → `[{key, value}]` in the given order.
    Distribution(IndexMap<String, f64>),
    /// `leaderboard({k: v})` → `[{key, value}]` sorted by value, largest first.
    Leaderboard(IndexMap<String, f64>),
    /// `timeBased(range, [{date, value}])` → `[{label, values: {value}}]`, every period from the
    /// first to the last filled (with 0), labelled as the frontend expects.
    TimeBased {
        range: DateOperation,
        /// `Date` or `Dateonly` values; several points in one period are summed.
        points: Vec<(Value, Option<f64>)>,
    },
    /// `multipleTimeBased(range, dates, [{label, values}])` → `{labels, values: [{key, values}]}`.
    MultipleTimeBased {
        range: DateOperation,
        dates: Vec<Value>,
        /// One line per label; `values` are aligned with `dates`.
        lines: Vec<(String, Vec<Option<f64>>)>,
    },
    /// `smart(any)`: answered as is.
    Smart(Json),
}

/// The request of a chart: the record of a collection chart and the chart parameters (every
/// scalar entry of the query string and body, stringified).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChartRequest {
    /// The record's primary key values (collection charts only).
    pub record_id: Option<Vec<Value>>,
    pub parameters: IndexMap<String, String>,
}
