//! Charts: the body of `POST /stats/{collection}` (§2.8) parsed into a typed request with its
//! `{{var}}` context variables substituted (§5.6), its evaluation on a datasource (§8.10), and
//! the query charts of `POST /_internal/native_query` (§1.1).
//!
//! Deliberate differences from the Node agent, each a fix of one of its bugs:
//! - previous periods use an inclusive lower bound and an exclusive upper bound at the start of
//!   the next period (the agent uses `> start` and `< end of period`, which drops rows stamped
//!   exactly at midnight or in the last millisecond);
//! - `PreviousWeekToDate` compares with the whole previous week, as the other `*ToDate`
//!   operators compare with their whole previous period (the agent forgets that operator and
//!   compares the current week with itself);
//! - week labels use the ISO week-numbering year (`W1-2025` for 2024-12-30), not the calendar
//!   year;
//! - an unknown context variable is a validation error instead of the text `undefined`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, Utc};
use chrono_tz::Tz;
use indexmap::IndexMap;
use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value as Json, json};

use super::{Error, Result, wire};
use crate::datasource::query::equivalence::{days_before, start_of_day};
use crate::datasource::schema::Wire;
use crate::datasource::{
    AggregateResult, Aggregation, AggregationOperation, Caller, CollectionSchema, ConditionTree,
    DataSource, DataSourceSchema, DateOperation, Filter, Leaf, Operator, PrimitiveType,
    RelationSchema, Value,
};

// ------------------------------------------------------------------------------------------------
// Context variables

/// `{{ key }}` placeholders.
static PLACEHOLDER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\{\{\s*([^{}]+?)\s*\}\}").ok());

/// The values `{{key}}` placeholders stand for: `currentUser.*` from the caller, anything else
/// from the request's `contextVariables`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextVariables {
    user: IndexMap<String, Json>,
    request: Map<String, Json>,
}

impl ContextVariables {
    /// The caller's properties plus the request's `contextVariables` object (if any).
    pub fn new(caller: &Caller, request: Option<&Map<String, Json>>) -> Self {
        let mut user = IndexMap::new();
        user.insert("id".to_owned(), json!(caller.id));
        user.insert("email".to_owned(), json!(caller.email));
        user.insert("firstName".to_owned(), json!(caller.first_name));
        user.insert("lastName".to_owned(), json!(caller.last_name));
        user.insert(
            "fullName".to_owned(),
            json!(format!("{} {}", caller.first_name, caller.last_name)),
        );
        user.insert(
            "permissionLevel".to_owned(),
            json!(caller.permission_level.as_str()),
        );
        // The agent reads these two from the Forest server; Canopy knows them only when the
        // session token carries them, and otherwise leaves the variable unknown.
        if let Some(role_id) = caller.role_id {
            user.insert("roleId".to_owned(), json!(role_id));
        }
        if let Some(team_id) = caller.team_id {
            user.insert("team.id".to_owned(), json!(team_id));
        }
        user.insert("team.name".to_owned(), json!(caller.team));
        for (tag, value) in &caller.tags {
            user.insert(format!("tags.{tag}"), json!(value));
        }
        Self {
            user,
            request: request.cloned().unwrap_or_default(),
        }
    }

    /// Adds or replaces a `currentUser.<property>` (`roleId`, `team.id`) that a route knows
    /// better than the session token, e.g. from the Forest server's user list.
    pub fn insert_user_property(&mut self, property: impl Into<String>, value: Json) {
        self.user.insert(property.into(), value);
    }

    /// Replaces every `currentUser.<property>` by these: the values of the Forest server's user
    /// list and the rendering's team, which the agent uses rather than the token's claims.
    pub fn set_user(&mut self, properties: impl IntoIterator<Item = (String, Json)>) {
        self.user = properties.into_iter().collect();
    }

    /// The value of a variable; `currentUser.*` never falls back to the request, as the agent
    /// resolves those from the user alone.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match key.strip_prefix("currentUser.") {
            Some(property) => self.user.get(property),
            None => self.request.get(key),
        }
    }

    fn get_or_error(&self, key: &str) -> Result<&Json> {
        self.get(key)
            .ok_or_else(|| Error::validation(format!("Unknown context variable \"{{{{{key}}}}}\"")))
    }

    /// Replaces every `{{key}}` of `text` by the variable's text form (`String(value)`).
    pub fn substitute(&self, text: &str) -> Result<String> {
        let Some(re) = PLACEHOLDER.as_ref() else {
            return Ok(text.to_owned());
        };
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for captures in re.captures_iter(text) {
            let (Some(whole), Some(key)) = (captures.get(0), captures.get(1)) else {
                continue;
            };
            out.push_str(&text[last..whole.start()]);
            out.push_str(&json_text(self.get_or_error(key.as_str())?));
            last = whole.end();
        }
        out.push_str(&text[last..]);
        Ok(out)
    }

    /// Substitutes inside a JSON string (other JSON is returned as is).
    fn substitute_json(&self, value: &Json) -> Result<Json> {
        Ok(match value {
            Json::String(s) => Json::String(self.substitute(s)?),
            other => other.clone(),
        })
    }

    /// Substitutes in every leaf value of a plain condition tree (strings and strings in arrays).
    fn substitute_tree(&self, tree: &Json) -> Result<Json> {
        let Some(object) = tree.as_object() else {
            return Ok(tree.clone());
        };
        let mut out = object.clone();
        if let Some(Json::Array(conditions)) = object.get("conditions") {
            let conditions = conditions
                .iter()
                .map(|c| self.substitute_tree(c))
                .collect::<Result<Vec<_>>>()?;
            out.insert("conditions".to_owned(), Json::Array(conditions));
        }
        match object.get("value") {
            Some(Json::Array(items)) => {
                let items = items
                    .iter()
                    .map(|i| self.substitute_json(i))
                    .collect::<Result<Vec<_>>>()?;
                out.insert("value".to_owned(), Json::Array(items));
            }
            Some(value) => {
                out.insert("value".to_owned(), self.substitute_json(value)?);
            }
            None => {}
        }
        Ok(Json::Object(out))
    }

    /// Rewrites `{{a.b}}` placeholders of a SQL query into `$a_b` bind variables, and returns the
    /// values to bind: native queries never splice values into the SQL text.
    pub fn bind_sql(&self, query: &str) -> Result<(String, IndexMap<String, Value>)> {
        let mut variables = IndexMap::new();
        let Some(re) = PLACEHOLDER.as_ref() else {
            return Ok((query.to_owned(), variables));
        };
        let mut out = String::with_capacity(query.len());
        let mut last = 0;
        for captures in re.captures_iter(query) {
            let (Some(whole), Some(key)) = (captures.get(0), captures.get(1)) else {
                continue;
            };
            let name: String = key
                .as_str()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            variables.insert(
                name.clone(),
                json_to_value(self.get_or_error(key.as_str())?),
            );
            out.push_str(&query[last..whole.start()]);
            out.push('$');
            out.push_str(&name);
            last = whole.end();
        }
        out.push_str(&query[last..]);
        Ok((out, variables))
    }
}

/// JavaScript's `String(value)` for JSON scalars (strings without quotes).
fn json_text(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn json_to_value(value: &Json) -> Value {
    match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => n
            .as_i64()
            .map(Value::Int)
            .unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or(0.0))),
        Json::String(s) => Value::String(s.clone()),
        other => Value::Json(other.clone()),
    }
}

// ------------------------------------------------------------------------------------------------
// The request

/// The chart types of the Forest frontend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartType {
    Value,
    Objective,
    Pie,
    Line,
    Leaderboard,
}

/// A built-in chart request, placeholders substituted and values typed.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartRequest {
    pub chart_type: ChartType,
    pub aggregator: AggregationOperation,
    /// `None` counts rows.
    pub aggregate_field: Option<String>,
    /// Pie: the grouped field; Line: the date field.
    pub group_by_field: Option<String>,
    /// Line only.
    pub time_range: Option<DateOperation>,
    /// Leaderboard: the label field of the related collection, the relation, the row count.
    pub label_field: Option<String>,
    pub relationship_field: Option<String>,
    pub limit: Option<u64>,
    pub filter: Option<ConditionTree>,
}

/// The body as the frontend sends it. Strings where placeholders may hide numbers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawChart {
    #[serde(rename = "type")]
    chart_type: Option<String>,
    aggregator: Option<Json>,
    aggregate_field_name: Option<String>,
    group_by_field_name: Option<String>,
    time_range: Option<Json>,
    label_field_name: Option<String>,
    relationship_field_name: Option<String>,
    limit: Option<Json>,
    objective: Option<Json>,
    filter: Option<Json>,
}

impl ChartRequest {
    /// Parses a `POST /stats/{collection}` body for `caller`, with the body's own
    /// `contextVariables`.
    pub fn parse(
        body: &Json,
        schema: &DataSourceSchema,
        collection: &str,
        caller: &Caller,
    ) -> Result<Self> {
        let variables = ContextVariables::new(
            caller,
            body.get("contextVariables").and_then(Json::as_object),
        );
        Self::parse_with(body, schema, collection, &variables)
    }

    /// Parses a body with the given variables (the route may add user properties first).
    pub fn parse_with(
        body: &Json,
        schema: &DataSourceSchema,
        collection: &str,
        variables: &ContextVariables,
    ) -> Result<Self> {
        let raw: RawChart = serde_json::from_value(body.clone())
            .map_err(|e| Error::validation(format!("Invalid chart body: {e}")))?;
        let collection = schema.collection(collection)?;
        let type_name = raw.chart_type.as_deref().unwrap_or("undefined");
        let chart_type = match type_name {
            "Value" => ChartType::Value,
            "Objective" => ChartType::Objective,
            "Pie" => ChartType::Pie,
            "Line" => ChartType::Line,
            "Leaderboard" => ChartType::Leaderboard,
            // Percentage and Smart charts are API charts; the agent refuses them here too.
            other => {
                return Err(Error::validation(format!("Invalid Chart type \"{other}\"")));
            }
        };
        let text = |value: &Option<Json>| -> Result<Option<Json>> {
            match value {
                None | Some(Json::Null) => Ok(None),
                Some(v) => Ok(Some(variables.substitute_json(v)?)),
            }
        };
        let aggregator = match text(&raw.aggregator)? {
            Some(Json::String(s)) => s
                .parse::<AggregationOperation>()
                .map_err(|_| Error::validation(format!("Invalid aggregator \"{s}\"")))?,
            Some(other) => {
                return Err(Error::validation(format!("Invalid aggregator {other}")));
            }
            None => return Err(Error::validation("Missing aggregator")),
        };
        let time_range = match text(&raw.time_range)? {
            Some(Json::String(s)) => Some(
                s.parse::<DateOperation>()
                    .map_err(|_| Error::validation(format!("Invalid time range \"{s}\"")))?,
            ),
            Some(other) => return Err(Error::validation(format!("Invalid time range {other}"))),
            None => None,
        };
        let limit = match text(&raw.limit)? {
            Some(Json::String(s)) => Some(parse_limit(parse_number(&s, "limit")?)?),
            Some(Json::Number(n)) => Some(parse_limit(n.as_f64().unwrap_or(-1.0))?),
            Some(other) => return Err(Error::validation(format!("Invalid limit {other}"))),
            None => None,
        };
        // The objective is the frontend's (the agent reads none of it), but a body that names one
        // must name a number, so that a malformed chart is refused rather than saved and shown.
        if chart_type == ChartType::Objective {
            match text(&raw.objective)? {
                None | Some(Json::Number(_)) => {}
                Some(Json::String(s)) if s.trim().is_empty() => {}
                Some(Json::String(s)) => {
                    parse_number(&s, "objective")?;
                }
                Some(other) => {
                    return Err(Error::validation(format!(
                        "Invalid objective {other}: expected a number"
                    )));
                }
            }
        }
        let filter = match raw.filter {
            None | Some(Json::Null) => None,
            // Older frontends send the tree as a JSON string.
            Some(Json::String(s)) if s.trim().is_empty() => None,
            Some(Json::String(s)) => Some(serde_json::from_str::<Json>(&s).map_err(|e| {
                Error::validation(format!("Invalid filter: not a JSON condition tree ({e})"))
            })?),
            Some(tree) => Some(tree),
        };
        let filter = filter
            .map(|tree| {
                let tree = variables.substitute_tree(&tree)?;
                ConditionTree::parse(&tree, collection, schema).map_err(|e| match e {
                    // A bad filter is a bad body: one error kind for every body problem, worded
                    // as the agent's filter parser words it.
                    crate::datasource::Error::Validation(message)
                    | crate::datasource::Error::MissingField(message)
                    | crate::datasource::Error::MissingRelation(message) => {
                        Error::Validation(format!("Invalid filters ({message})"))
                    }
                    other => Error::from(other),
                })
            })
            .transpose()?;
        let request = Self {
            chart_type,
            aggregator,
            aggregate_field: raw.aggregate_field_name.filter(|f| !f.is_empty()),
            group_by_field: raw.group_by_field_name.filter(|f| !f.is_empty()),
            time_range,
            label_field: raw.label_field_name.filter(|f| !f.is_empty()),
            relationship_field: raw.relationship_field_name.filter(|f| !f.is_empty()),
            limit,
            filter,
        };
        request.check_required()?;
        Ok(request)
    }

    /// Each chart type needs some fields; say which is missing rather than fail later.
    fn check_required(&self) -> Result<()> {
        let missing = |name: &str| {
            Err(Error::validation(format!(
                "Missing {name} for a {:?} chart",
                self.chart_type
            )))
        };
        match self.chart_type {
            ChartType::Value => {}
            // The objective is the frontend's: the agent reads none of it.
            ChartType::Objective => {}
            ChartType::Pie if self.group_by_field.is_none() => {
                return missing("groupByFieldName");
            }
            ChartType::Pie => {}
            ChartType::Line if self.group_by_field.is_none() => {
                return missing("groupByFieldName");
            }
            ChartType::Line if self.time_range.is_none() => return missing("timeRange"),
            ChartType::Line => {}
            ChartType::Leaderboard
                if self.relationship_field.is_none()
                    || self.label_field.is_none()
                    || self.limit.is_none() =>
            {
                return Err(leaderboard_error());
            }
            ChartType::Leaderboard => {}
        }
        Ok(())
    }
}

fn parse_number(text: &str, what: &str) -> Result<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .ok_or_else(|| Error::validation(format!("Invalid {what} \"{text}\": expected a number")))
}

fn parse_limit(limit: f64) -> Result<u64> {
    if limit >= 0.0 && limit.fract() == 0.0 && limit < u64::MAX as f64 {
        Ok(limit as u64)
    } else {
        Err(Error::validation(format!(
            "Invalid limit {limit}: expected a positive integer"
        )))
    }
}

fn leaderboard_error() -> Error {
    Error::validation(
        "Failed to generate leaderboard chart: parameters do not match pre-requisites",
    )
}

// ------------------------------------------------------------------------------------------------
// Evaluation

/// The JSON:API document the chart routes answer with.
pub fn stats_document(value: Json) -> Json {
    let mut attributes = Map::new();
    attributes.insert("value".to_owned(), value);
    json!({
        "data": {
            "id": uuid::Uuid::new_v4().to_string(),
            "type": "stats",
            "attributes": Json::Object(attributes),
        }
    })
}

/// Evaluates a built-in chart on `collection`, its filter restricted by the caller's scope, and
/// returns the `value` attribute of the stats document.
pub async fn evaluate(
    ds: &dyn DataSource,
    caller: &Caller,
    collection: &str,
    request: &ChartRequest,
    scope: Option<ConditionTree>,
) -> Result<Json> {
    let tree = ConditionTree::intersect([request.filter.clone(), scope]);
    match request.chart_type {
        ChartType::Value => value_chart(ds, caller, collection, request, tree).await,
        // `{value}` alone, as the agent answers: the frontend has the objective.
        ChartType::Objective => {
            let value = compute_value(ds, caller, collection, request, tree).await?;
            Ok(json!({ "value": value }))
        }
        ChartType::Pie => pie_chart(ds, caller, collection, request, tree).await,
        ChartType::Line => line_chart(ds, caller, collection, request, tree).await,
        ChartType::Leaderboard => leaderboard_chart(ds, caller, collection, request, tree).await,
    }
}

fn aggregation(request: &ChartRequest, field: Option<String>) -> Aggregation {
    Aggregation {
        operation: request.aggregator,
        field,
        groups: Vec::new(),
    }
}

/// The single value of an ungrouped aggregation (0 when there are no rows).
async fn compute_value(
    ds: &dyn DataSource,
    caller: &Caller,
    collection: &str,
    request: &ChartRequest,
    tree: Option<ConditionTree>,
) -> Result<Json> {
    let rows = ds
        .collection(collection)?
        .aggregate(
            caller,
            &Filter::new(tree),
            &aggregation(request, request.aggregate_field.clone()),
            None,
        )
        .await?;
    Ok(rows.first().map_or(json!(0), |row| number_json(&row.value)))
}

async fn value_chart(
    ds: &dyn DataSource,
    caller: &Caller,
    collection: &str,
    request: &ChartRequest,
    tree: Option<ConditionTree>,
) -> Result<Json> {
    let current = compute_value(ds, caller, collection, request, tree.clone()).await?;
    let mut out = Map::new();
    out.insert("countCurrent".to_owned(), current);
    if let Some(tree) = tree.filter(has_previous_period) {
        let schema = ds.schema();
        let previous = previous_period(
            &tree,
            schema.collection(collection)?,
            schema,
            caller.timezone,
            caller.now(),
        )?;
        let value = compute_value(ds, caller, collection, request, Some(previous)).await?;
        out.insert("countPrevious".to_owned(), value);
    }
    Ok(Json::Object(out))
}

/// The agent compares with the previous period only when some leaf uses an interval operator
/// and the root is not an `And` branch (an AND of periods has no single previous period).
pub fn has_previous_period(tree: &ConditionTree) -> bool {
    let is_and = matches!(
        tree,
        ConditionTree::Branch {
            aggregator: crate::datasource::Aggregator::And,
            ..
        }
    );
    !is_and && tree.leaves().iter().any(|l| l.operator.is_interval())
}

/// The tree with every interval leaf moved one period back: Today → Yesterday, Yesterday → the
/// day before, PreviousX → the X before, PreviousXDays(n) → the n days before those,
/// PreviousXDaysToDate(n) → the same span n days earlier, and the *ToDate operators → the
/// whole previous period (as the agent does). Other leaves are kept.
pub fn previous_period(
    tree: &ConditionTree,
    collection: &CollectionSchema,
    schema: &DataSourceSchema,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<ConditionTree> {
    tree.replace_leaves(&mut |leaf| {
        if !leaf.operator.is_interval() {
            return Ok(ConditionTree::Leaf(leaf.clone()));
        }
        let (_, column) = schema.resolve_column(collection, &leaf.field)?;
        let dateonly = column.column_type.primitive() == Some(PrimitiveType::Dateonly);
        previous_leaf(leaf, dateonly, tz, now)
    })
    .map_err(Error::from)
}

fn previous_leaf(
    leaf: &Leaf,
    dateonly: bool,
    tz: Tz,
    now: DateTime<Utc>,
) -> crate::datasource::Result<ConditionTree> {
    use Operator::*;
    let today = now.with_timezone(&tz).date_naive();
    let same = |operator: Operator| ConditionTree::leaf(leaf.field.clone(), operator, Value::Null);
    let day = |d: NaiveDate| {
        if dateonly {
            Value::Dateonly(d)
        } else {
            Value::Date(start_of_day(d, tz))
        }
    };
    let interval = |start: Value, end: Value| {
        ConditionTree::and(vec![
            ConditionTree::leaf(leaf.field.clone(), GreaterThanOrEqual, start),
            ConditionTree::leaf(leaf.field.clone(), LessThan, end),
        ])
    };
    // The period two units back, e.g. the week before last for PreviousWeek.
    let before_previous = |unit: DateOperation| {
        let current = period_start(today, unit);
        interval(day(shift(current, unit, -2)), day(shift(current, unit, -1)))
    };
    // A whole number of days, as the user gave it (`1e18` included): the dates below saturate at
    // the filter path's bounds instead of overflowing.
    let days = || -> crate::datasource::Result<f64> {
        leaf.value
            .as_f64()
            .filter(|f| f.is_finite())
            .map(f64::trunc)
            .ok_or_else(|| {
                crate::datasource::Error::validation(format!(
                    "Wrong type for \"{}\": {}. Expects Number",
                    leaf.field, leaf.value
                ))
            })
    };
    Ok(match leaf.operator {
        Today => same(Yesterday),
        Yesterday => before_previous(DateOperation::Day),
        PreviousWeek => before_previous(DateOperation::Week),
        PreviousMonth => before_previous(DateOperation::Month),
        PreviousQuarter => before_previous(DateOperation::Quarter),
        PreviousYear => before_previous(DateOperation::Year),
        PreviousWeekToDate => same(PreviousWeek),
        PreviousMonthToDate => same(PreviousMonth),
        PreviousQuarterToDate => same(PreviousQuarter),
        PreviousYearToDate => same(PreviousYear),
        PreviousXDays => {
            let n = days()?;
            interval(day(days_before(today, 2.0 * n)), day(days_before(today, n)))
        }
        PreviousXDaysToDate => {
            let n = days()?;
            // "Now" n days ago, on the caller's calendar (same local time of day); the day
            // saturates as above, and a local time that does not exist that day (a DST gap)
            // falls back to the day's start.
            let local_now = now.with_timezone(&tz).naive_local();
            let end_day = days_before(local_now.date(), n);
            let end = end_day
                .and_time(local_now.time())
                .and_local_timezone(tz)
                .earliest()
                .map_or_else(|| start_of_day(end_day, tz), |t| t.with_timezone(&Utc));
            let end = if dateonly {
                Value::Dateonly(end_day)
            } else {
                Value::Date(end)
            };
            interval(day(days_before(today, 2.0 * n)), end)
        }
        _ => ConditionTree::Leaf(leaf.clone()),
    })
}

/// The first day of the period containing `date`; weeks start on Monday (ISO).
pub fn period_start(date: NaiveDate, unit: DateOperation) -> NaiveDate {
    let first_of = |month: u32| NaiveDate::from_ymd_opt(date.year(), month, 1).unwrap_or(date);
    match unit {
        DateOperation::Day => date,
        // Checked: a date at the start of chrono's range has no Monday before it.
        DateOperation::Week => date
            .checked_sub_signed(Duration::days(i64::from(
                date.weekday().num_days_from_monday(),
            )))
            .unwrap_or(date),
        DateOperation::Month => first_of(date.month()),
        DateOperation::Quarter => first_of((date.month() - 1) / 3 * 3 + 1),
        DateOperation::Year => first_of(1),
    }
}

/// `date` moved by `n` periods (months keep the day when it exists, else the month's last day).
/// At the ends of chrono's range (dates a plugin or the database hands back) the date stays
/// where it is, which ends the line chart's walk instead of overflowing.
pub fn shift(date: NaiveDate, unit: DateOperation, n: i32) -> NaiveDate {
    let months = |m: i64| {
        let Ok(count) = u32::try_from(m.unsigned_abs()) else {
            return date;
        };
        let result = if m >= 0 {
            date.checked_add_months(Months::new(count))
        } else {
            date.checked_sub_months(Months::new(count))
        };
        result.unwrap_or(date)
    };
    let days = |d: i64| date.checked_add_signed(Duration::days(d)).unwrap_or(date);
    let n = i64::from(n);
    match unit {
        DateOperation::Day => days(n),
        DateOperation::Week => days(7 * n),
        DateOperation::Month => months(n),
        DateOperation::Quarter => months(3 * n),
        DateOperation::Year => months(12 * n),
    }
}

/// The label of the period starting on `date`, as the frontend displays it.
pub fn period_label(date: NaiveDate, unit: DateOperation) -> String {
    match unit {
        DateOperation::Day => date.format("%d/%m/%Y").to_string(),
        DateOperation::Week => {
            let week = date.iso_week();
            format!("W{}-{:04}", week.week(), week.year())
        }
        // chrono's `%b` is always the English abbreviation, as luxon's default locale gives.
        DateOperation::Month => date.format("%b %y").to_string(),
        DateOperation::Quarter => format!("Q{}-{:04}", (date.month() - 1) / 3 + 1, date.year()),
        DateOperation::Year => format!("{:04}", date.year()),
    }
}

async fn pie_chart(
    ds: &dyn DataSource,
    caller: &Caller,
    collection: &str,
    request: &ChartRequest,
    tree: Option<ConditionTree>,
) -> Result<Json> {
    let group = request.group_by_field.clone().unwrap_or_default();
    let aggregation =
        aggregation(request, request.aggregate_field.clone()).group_by(group.clone(), None);
    let rows = ds
        .collection(collection)?
        .aggregate(caller, &Filter::new(tree), &aggregation, None)
        .await?;
    let wire = group_wire(ds.schema(), collection, &group);
    Ok(key_values(&rows, &group, wire))
}

/// The wire form of the column a group path (`field` or `relation:field`) reaches from
/// `collection`: group keys are values of that column and travel as its values do (binary keys
/// as data URIs or hex, bigints as strings), as the Node agent's binary decorator and drivers
/// hand them to the chart.
fn group_wire(schema: &DataSourceSchema, collection: &str, path: &str) -> Wire {
    schema
        .collection(collection)
        .and_then(|c| schema.resolve_column(c, path))
        .map_or(Wire::Plain, |(_, column)| column.wire)
}

fn key_values(rows: &[AggregateResult], group: &str, wire: Wire) -> Json {
    Json::Array(
        rows.iter()
            .map(|row| {
                let key = row
                    .group
                    .get(group)
                    .map_or(Json::Null, |k| wire::to_json(k, wire).unwrap_or(Json::Null));
                json!({ "key": key, "value": number_json(&row.value) })
            })
            .collect(),
    )
}

async fn line_chart(
    ds: &dyn DataSource,
    caller: &Caller,
    collection: &str,
    request: &ChartRequest,
    tree: Option<ConditionTree>,
) -> Result<Json> {
    let field = request.group_by_field.clone().unwrap_or_default();
    let range = request.time_range.unwrap_or(DateOperation::Day);
    // Rows without a date have no period; the agent leaves them out.
    let tree = ConditionTree::intersect([
        tree,
        Some(ConditionTree::leaf(
            field.clone(),
            Operator::Present,
            Value::Null,
        )),
    ]);
    let aggregation =
        aggregation(request, request.aggregate_field.clone()).group_by(field.clone(), Some(range));
    let rows = ds
        .collection(collection)?
        .aggregate(caller, &Filter::new(tree), &aggregation, None)
        .await?;
    let mut values: BTreeMap<NaiveDate, Json> = BTreeMap::new();
    for row in &rows {
        let date = match row.group.get(&field) {
            Some(Value::Dateonly(d)) => *d,
            Some(Value::Date(t)) => t.with_timezone(&caller.timezone).date_naive(),
            _ => continue,
        };
        values.insert(period_start(date, range), number_json(&row.value));
    }
    let (Some(first), Some(last)) = (
        values.keys().next().copied(),
        values.keys().next_back().copied(),
    ) else {
        return Ok(Json::Array(Vec::new()));
    };
    let mut points = Vec::new();
    let mut current = first;
    while current <= last {
        let value = values.get(&current).cloned().unwrap_or(json!(0));
        points.push(json!({ "label": period_label(current, range), "values": { "value": value } }));
        let next = shift(current, range, 1);
        // A date at the end of chrono's range cannot move on; stop rather than loop.
        if next <= current {
            break;
        }
        current = next;
    }
    Ok(Json::Array(points))
}

/// Prefixes every leaf field with `relation:`, so a tree on a collection filters the rows of a
/// collection that reaches it through that to-one relation.
fn nest(tree: Option<ConditionTree>, relation: &str) -> Result<Option<ConditionTree>> {
    tree.map(|t| {
        t.replace_leaves(&mut |leaf| {
            Ok(ConditionTree::Leaf(Leaf {
                field: format!("{relation}:{}", leaf.field),
                ..leaf.clone()
            }))
        })
    })
    .transpose()
    .map_err(Error::from)
}

/// The ManyToOne relation of `on` that points at `target` through `key` → `key_target`.
fn many_to_one_to<'a>(
    on: &'a CollectionSchema,
    target: &str,
    key: &str,
    key_target: &str,
) -> Option<&'a str> {
    on.relations().find_map(|(name, relation)| match relation {
        RelationSchema::ManyToOne {
            foreign_collection,
            foreign_key,
            foreign_key_target,
        } if foreign_collection == target
            && foreign_key == key
            && foreign_key_target == key_target =>
        {
            Some(name.as_str())
        }
        _ => None,
    })
}

async fn leaderboard_chart(
    ds: &dyn DataSource,
    caller: &Caller,
    collection: &str,
    request: &ChartRequest,
    tree: Option<ConditionTree>,
) -> Result<Json> {
    let schema = ds.schema();
    let source = schema.collection(collection)?;
    // The agent looks the relation up first: an unknown one lists those the collection has.
    if let Some(relationship) = request.relationship_field.as_deref()
        && source.relation(relationship).is_none()
    {
        return Err(source.missing_relation(relationship).into());
    }
    let (Some(relationship), Some(label), Some(limit)) = (
        request.relationship_field.as_deref(),
        request.label_field.as_deref(),
        request.limit,
    ) else {
        return Err(leaderboard_error());
    };
    // Aggregate on the collection that holds one row per (source record, related record), and
    // group by the source record's label reached through its to-one relation.
    let (on, group, field) = match source.relation(relationship) {
        Some(RelationSchema::OneToMany {
            foreign_collection,
            origin_key,
            origin_key_target,
        }) => {
            let foreign = schema.collection(foreign_collection)?;
            let inverse = many_to_one_to(foreign, collection, origin_key, origin_key_target)
                .ok_or_else(leaderboard_error)?;
            let tree = nest(tree, inverse)?;
            (
                foreign_collection.as_str(),
                (format!("{inverse}:{label}"), tree),
                request.aggregate_field.clone(),
            )
        }
        Some(RelationSchema::ManyToMany {
            foreign_collection,
            through_collection,
            origin_key,
            origin_key_target,
            foreign_key,
            foreign_key_target,
        }) => {
            let through = schema.collection(through_collection)?;
            let origin = many_to_one_to(through, collection, origin_key, origin_key_target)
                .ok_or_else(leaderboard_error)?;
            let target =
                many_to_one_to(through, foreign_collection, foreign_key, foreign_key_target)
                    .ok_or_else(leaderboard_error)?;
            let tree = nest(tree, origin)?;
            (
                through_collection.as_str(),
                (format!("{origin}:{label}"), tree),
                request
                    .aggregate_field
                    .as_ref()
                    .map(|f| format!("{target}:{f}")),
            )
        }
        _ => return Err(leaderboard_error()),
    };
    let (group, tree) = group;
    let aggregation = aggregation(request, field).group_by(group.clone(), None);
    let mut rows = ds
        .collection(on)?
        .aggregate(caller, &Filter::new(tree), &aggregation, Some(limit))
        .await?;
    // Datasources order groups by value already; sorting again keeps the contract whatever the
    // datasource (stable, so ties keep the datasource's order).
    rows.sort_by(|a, b| b.value.compare(&a.value));
    Ok(key_values(&rows, &group, group_wire(schema, on, &group)))
}

/// A chart number: integers stay integers, decimals become JSON numbers (never strings), and an
/// empty aggregate (SQL `NULL`) is 0.
fn number_json(value: &Value) -> Json {
    match value {
        Value::Int(i) => json!(i),
        Value::Null => json!(0),
        other => match other.as_f64() {
            Some(f) => serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number),
            None => serde_json::to_value(other).unwrap_or(Json::Null),
        },
    }
}

// ------------------------------------------------------------------------------------------------
// Native query charts

/// The body of `POST /_internal/native_query`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawQueryChart {
    #[serde(rename = "type")]
    chart_type: Option<String>,
    query: Option<String>,
    connection_name: Option<String>,
    context_variables: Option<Map<String, Json>>,
}

/// Runs a query chart: `{{var}}` placeholders become bound variables, the result columns are
/// checked against the chart type, and the `value` attribute is returned.
pub async fn evaluate_native(ds: &dyn DataSource, caller: &Caller, body: &Json) -> Result<Json> {
    evaluate_native_with(ds, caller, body, |request| {
        ContextVariables::new(caller, request)
    })
    .await
}

/// Checks a query chart body as the agent does before its permission check: a query chart
/// (a query and a known type), a connection that exists. 422 otherwise.
pub fn check_native(ds: &dyn DataSource, body: &Json) -> Result<()> {
    read_native(ds, body).map(drop)
}

/// The body, its query and its connection, checked (see [`check_native`]).
fn read_native(ds: &dyn DataSource, body: &Json) -> Result<RawQueryChart> {
    let raw: RawQueryChart = serde_json::from_value(body.clone())
        .map_err(|e| Error::validation(format!("Invalid query chart body: {e}")))?;
    let query = raw.query.as_deref().filter(|q| !q.is_empty());
    let chart_type = raw.chart_type.as_deref().unwrap_or_default();
    let known = matches!(
        chart_type,
        "Value" | "Objective" | "Pie" | "Line" | "Leaderboard" | "Percentage"
    );
    let (Some(_), true) = (query, known) else {
        return Err(Error::Unprocessable(
            "Native query endpoint only supports Query Chart Requests".to_owned(),
        ));
    };
    let connection = raw
        .connection_name
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            Error::Unprocessable("Missing native query connection attribute".to_owned())
        })?;
    if !ds
        .native_query_connections()
        .iter()
        .any(|c| c == connection)
    {
        return Err(Error::Unprocessable(format!(
            "Native query connection '{connection}' is unknown"
        )));
    }
    Ok(raw)
}

/// [`evaluate_native`] with the context variables built by `variables` from the body's
/// `contextVariables` (the route gives `currentUser.*` from the permission documents).
pub async fn evaluate_native_with(
    ds: &dyn DataSource,
    caller: &Caller,
    body: &Json,
    variables: impl FnOnce(Option<&Map<String, Json>>) -> ContextVariables,
) -> Result<Json> {
    let raw = read_native(ds, body)?;
    let chart_type = raw.chart_type.as_deref().unwrap_or_default();
    // Both checked by `read_native`.
    let query = raw.query.as_deref().unwrap_or_default();
    let connection = raw.connection_name.as_deref().unwrap_or_default();
    let variables = variables(raw.context_variables.as_ref());
    let (sql, binds) = variables.bind_sql(query)?;
    let rows = ds
        .native_query(caller, connection, &sql, &binds)
        .await
        .map_err(|e| {
            Error::Unprocessable(format!("Error during chart native query execution: {e}"))
        })?;
    let row_json = |row: &crate::datasource::Record| -> Map<String, Json> {
        row.iter()
            .map(|(k, v)| (k.to_owned(), serde_json::to_value(v).unwrap_or(Json::Null)))
            .collect()
    };
    let column = |row: &crate::datasource::Record, name: &str| row.get(name).map(number_json);
    match chart_type {
        "Value" => match rows.first() {
            None => Ok(json!([])),
            Some(row) => {
                let value = column(row, "value").ok_or_else(|| columns_error(row, &["value"]))?;
                let mut out = Map::new();
                out.insert("countCurrent".to_owned(), value);
                if let Some(previous) = column(row, "previous") {
                    out.insert("countPrevious".to_owned(), previous);
                }
                Ok(Json::Object(out))
            }
        },
        "Objective" => match rows.first() {
            None => Ok(json!([])),
            Some(row) => match (column(row, "value"), column(row, "objective")) {
                (Some(value), Some(objective)) => {
                    Ok(json!({ "value": value, "objective": objective }))
                }
                _ => Err(columns_error(row, &["value", "objective"])),
            },
        },
        "Pie" | "Leaderboard" | "Line" => {
            let mut out = Vec::with_capacity(rows.len());
            for row in &rows {
                let (Some(key), Some(value)) = (row.get("key"), column(row, "value")) else {
                    return Err(columns_error(row, &["key", "value"]));
                };
                let key = serde_json::to_value(key).unwrap_or(Json::Null);
                out.push(if chart_type == "Line" {
                    json!({ "label": key, "values": { "value": value } })
                } else {
                    let mut object = row_json(row);
                    object.insert("value".to_owned(), value);
                    Json::Object(object)
                });
            }
            Ok(Json::Array(out))
        }
        // The agent lets Percentage through its type check and then fails on it.
        _ => Err(Error::Unprocessable("Unknown Chart type".to_owned())),
    }
}

fn columns_error(row: &crate::datasource::Record, expected: &[&str]) -> Error {
    let actual: Vec<&str> = row.keys().collect();
    Error::Unprocessable(format!(
        "The result columns must be named {} instead of '{}'.",
        expected.join(", "),
        actual.join("', '")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::parse_datetime;
    use crate::datasource::schema::{ColumnSchema, FieldSchema};

    fn schema() -> DataSourceSchema {
        let mut collection = CollectionSchema::new("orders");
        for (name, ty) in [
            ("id", PrimitiveType::Number),
            ("status", PrimitiveType::String),
            ("placed_at", PrimitiveType::Date),
            ("day", PrimitiveType::Dateonly),
        ] {
            let mut column = ColumnSchema::new(ty);
            column.filter_operators = Operator::ALL
                .iter()
                .copied()
                .filter(|o| o.allowed_for(&column.column_type))
                .collect();
            collection
                .fields
                .insert(name.to_owned(), FieldSchema::Column(column));
        }
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("orders".into(), collection);
        schema
    }

    fn caller() -> Caller {
        let mut caller = Caller::system(chrono_tz::Europe::Paris);
        caller.id = 42;
        caller.first_name = "Ann".into();
        caller.last_name = "Lee".into();
        caller.team = "Ops".into();
        caller.tags.insert("region".into(), "EU".into());
        caller
    }

    fn date(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("valid date")
    }

    fn utc(s: &str) -> DateTime<Utc> {
        parse_datetime(s).expect("valid date")
    }

    #[test]
    fn substitutes_user_and_request_variables_textually() {
        let request = json!({"threshold": 10, "name": "x"});
        let vars = ContextVariables::new(&caller(), request.as_object());
        assert_eq!(
            vars.substitute("{{currentUser.id}}-{{ currentUser.fullName }}-{{threshold}}")
                .expect("substituted"),
            "42-Ann Lee-10"
        );
        assert_eq!(
            vars.substitute("{{currentUser.team.name}}/{{currentUser.tags.region}}")
                .expect("substituted"),
            "Ops/EU"
        );
        // currentUser.* never comes from the request.
        let spoof = json!({"currentUser.email": "evil"});
        let vars = ContextVariables::new(&caller(), spoof.as_object());
        assert_eq!(
            vars.substitute("{{currentUser.email}}").expect("ok"),
            "system@canopy.local"
        );
        let err = vars.substitute("{{nope}}").expect_err("unknown");
        assert_eq!(err.to_string(), "Unknown context variable \"{{nope}}\"");
    }

    #[test]
    fn current_user_level_role_and_team_id_are_variables() {
        let mut user = caller();
        user.permission_level = crate::datasource::PermissionLevel::Editor;
        user.role_id = Some(3);
        user.team_id = Some(12);
        let vars = ContextVariables::new(&user, None);
        assert_eq!(
            vars.substitute(
                "{{currentUser.permissionLevel}}/{{currentUser.roleId}}/{{currentUser.team.id}}"
            )
            .expect("substituted"),
            "editor/3/12"
        );
        // Typed values in filters and SQL binds: the ids are numbers, as in the agent.
        assert_eq!(vars.get("currentUser.roleId"), Some(&json!(3)));
        let (_, binds) = vars
            .bind_sql("SELECT 1 AS value FROM t WHERE team = {{currentUser.team.id}}")
            .expect("bound");
        assert_eq!(binds.get("currentUser_team_id"), Some(&Value::Int(12)));
        // Without them in the token the variables are unknown rather than guessed.
        user.role_id = None;
        user.team_id = None;
        let vars = ContextVariables::new(&user, None);
        let err = vars
            .substitute("{{currentUser.roleId}}")
            .expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "Unknown context variable \"{{currentUser.roleId}}\""
        );
        assert!(vars.substitute("{{currentUser.team.id}}").is_err());
        // A route that knows better (the Forest server's user list) can still set them.
        let mut vars = ContextVariables::new(&user, None);
        vars.insert_user_property("roleId", json!(5));
        assert_eq!(vars.substitute("{{currentUser.roleId}}").expect("set"), "5");
    }

    #[test]
    fn binds_sql_variables_instead_of_splicing_them() {
        let request = json!({"status": "paid' OR 1=1 --"});
        let vars = ContextVariables::new(&caller(), request.as_object());
        let (sql, binds) = vars
            .bind_sql(
                "SELECT COUNT(*) AS value FROM t WHERE s = {{status}} AND u = {{currentUser.id}}",
            )
            .expect("bound");
        assert_eq!(
            sql,
            "SELECT COUNT(*) AS value FROM t WHERE s = $status AND u = $currentUser_id"
        );
        assert_eq!(binds.get("status"), Some(&Value::from("paid' OR 1=1 --")));
        assert_eq!(binds.get("currentUser_id"), Some(&Value::Int(42)));
    }

    #[test]
    fn parses_a_body_with_placeholders_everywhere() {
        let body = json!({
            "type": "Line",
            "sourceCollectionName": "orders",
            "aggregator": "{{agg}}",
            "aggregateFieldName": "id",
            "groupByFieldName": "placed_at",
            "timeRange": "{{range}}",
            "filter": {"aggregator": "and", "conditions": [
                {"field": "id", "operator": "greater_than", "value": "{{min}}"},
                {"field": "status", "operator": "in", "value": ["{{currentUser.tags.region}}", "b"]}
            ]},
            "contextVariables": {"agg": "Sum", "range": "Month", "min": 3}
        });
        let request = ChartRequest::parse(&body, &schema(), "orders", &caller()).expect("parsed");
        assert_eq!(request.chart_type, ChartType::Line);
        assert_eq!(request.aggregator, AggregationOperation::Sum);
        assert_eq!(request.time_range, Some(DateOperation::Month));
        assert_eq!(
            request.filter,
            Some(ConditionTree::and(vec![
                ConditionTree::leaf("id", Operator::GreaterThan, Value::Int(3)),
                ConditionTree::leaf(
                    "status",
                    Operator::In,
                    Value::Array(vec![Value::from("EU"), Value::from("b")])
                ),
            ]))
        );
        // The objective is not read, but must be a number when given (see `parse_with`).
        for objective in [
            json!({"type": "Objective", "aggregator": "Count"}),
            json!({"type": "Objective", "aggregator": "Count", "objective": null}),
            json!({"type": "Objective", "aggregator": "Count", "objective": 120.5}),
            json!({"type": "Objective", "aggregator": "Count", "objective": "{{goal}}",
                "contextVariables": {"goal": 40}}),
            json!({"type": "Objective", "aggregator": "Count", "objective": " 12 "}),
        ] {
            let request =
                ChartRequest::parse(&objective, &schema(), "orders", &caller()).expect("objective");
            assert_eq!(request.chart_type, ChartType::Objective);
        }
        let leaderboard = json!({"type": "Leaderboard", "aggregator": "Count", "limit": "{{n}}",
            "relationshipFieldName": "r", "labelFieldName": "l", "contextVariables": {"n": 5}});
        let request =
            ChartRequest::parse(&leaderboard, &schema(), "orders", &caller()).expect("limit");
        assert_eq!(request.limit, Some(5));
        // A stringified filter, as older frontends send.
        let stringified = json!({"type": "Value", "aggregator": "Count",
            "filter": "{\"field\":\"status\",\"operator\":\"equal\",\"value\":\"paid\"}"});
        let request =
            ChartRequest::parse(&stringified, &schema(), "orders", &caller()).expect("string");
        assert_eq!(
            request.filter,
            Some(ConditionTree::leaf("status", Operator::Equal, "paid"))
        );
    }

    #[test]
    fn refuses_bad_bodies_with_validation_errors() {
        let cases = [
            (
                json!({"type": "Percentage", "aggregator": "Count"}),
                "Invalid Chart type \"Percentage\"",
            ),
            (json!({"type": "Smart"}), "Invalid Chart type \"Smart\""),
            (
                json!({"type": "Value", "aggregator": "Median"}),
                "Invalid aggregator \"Median\"",
            ),
            (json!({"type": "Value"}), "Missing aggregator"),
            (
                json!({"type": "Line", "aggregator": "Count", "groupByFieldName": "placed_at",
                "timeRange": "Decade"}),
                "Invalid time range \"Decade\"",
            ),
            (
                json!({"type": "Line", "aggregator": "Count", "groupByFieldName": "placed_at"}),
                "Missing timeRange for a Line chart",
            ),
            (
                json!({"type": "Pie", "aggregator": "Count"}),
                "Missing groupByFieldName for a Pie chart",
            ),
            (
                json!({"type": "Leaderboard", "aggregator": "Count", "relationshipFieldName": "r",
                "labelFieldName": "l"}),
                "Failed to generate leaderboard chart: parameters do not match pre-requisites",
            ),
            (
                json!({"type": "Leaderboard", "aggregator": "Count", "limit": -1}),
                "Invalid limit -1: expected a positive integer",
            ),
            (
                json!({"type": "Value", "aggregator": "Count", "filter": {"field": "nope",
                "operator": "equal", "value": 1}}),
                "",
            ),
            // Each field with a value of the wrong type.
            (
                json!({"type": "Objective", "aggregator": "Count", "objective": {"a": 1}}),
                "Invalid objective {\"a\":1}: expected a number",
            ),
            (
                json!({"type": "Objective", "aggregator": "Count", "objective": [10]}),
                "Invalid objective [10]: expected a number",
            ),
            (
                json!({"type": "Objective", "aggregator": "Count", "objective": true}),
                "Invalid objective true: expected a number",
            ),
            (
                json!({"type": "Objective", "aggregator": "Count", "objective": "a lot"}),
                "Invalid objective \"a lot\": expected a number",
            ),
            (
                json!({"type": "Objective", "aggregator": "Count", "objective": "{{goal}}",
                "contextVariables": {"goal": "a lot"}}),
                "Invalid objective \"a lot\": expected a number",
            ),
            (json!({"type": {"x": 1}, "aggregator": "Count"}), ""),
            (
                json!({"type": "Value", "aggregator": ["Count"]}),
                "Invalid aggregator [\"Count\"]",
            ),
            (
                json!({"type": "Value", "aggregator": "Sum", "aggregateFieldName": {"f": 1}}),
                "",
            ),
            (
                json!({"type": "Pie", "aggregator": "Count", "groupByFieldName": 3}),
                "",
            ),
            (
                json!({"type": "Line", "aggregator": "Count", "groupByFieldName": "placed_at",
                "timeRange": 7}),
                "Invalid time range 7",
            ),
            (
                json!({"type": "Leaderboard", "aggregator": "Count", "relationshipFieldName": "r",
                "labelFieldName": "l", "limit": {"n": 5}}),
                "Invalid limit {\"n\":5}",
            ),
            (
                json!({"type": "Leaderboard", "aggregator": "Count", "relationshipFieldName": "r",
                "labelFieldName": "l", "limit": 2.5}),
                "Invalid limit 2.5: expected a positive integer",
            ),
            (
                json!({"type": "Value", "aggregator": "Count", "filter": 5}),
                "",
            ),
            (
                json!({"type": "Value", "aggregator": "Count", "filter": [1]}),
                "",
            ),
            (
                json!({"type": "Value", "aggregator": "Count", "filter": "{"}),
                "",
            ),
        ];
        for (body, message) in cases {
            let err = ChartRequest::parse(&body, &schema(), "orders", &caller())
                .expect_err(&body.to_string());
            assert!(matches!(err, Error::Validation(_)), "{body}: {err:?}");
            if !message.is_empty() {
                assert_eq!(err.to_string(), message, "{body}");
            }
        }
    }

    fn previous(op: Operator, value: Value, field: &str, now: &str) -> ConditionTree {
        let schema = schema();
        let tree = ConditionTree::leaf(field, op, value);
        previous_period(
            &tree,
            schema.collection("orders").expect("orders"),
            &schema,
            chrono_tz::Europe::Paris,
            utc(now),
        )
        .expect("previous")
    }

    fn range(field: &str, start: Value, end: Value) -> ConditionTree {
        ConditionTree::and(vec![
            ConditionTree::leaf(field, Operator::GreaterThanOrEqual, start),
            ConditionTree::leaf(field, Operator::LessThan, end),
        ])
    }

    #[test]
    fn previous_periods_move_one_period_back_in_the_callers_timezone() {
        // 2024-03-15 00:30 in Paris (23:30 UTC the day before): "today" is the 15th.
        let now = "2024-03-14T23:30:00Z";
        let d = |s: &str| Value::Date(utc(s));
        assert_eq!(
            previous(Operator::Today, Value::Null, "placed_at", now),
            ConditionTree::leaf("placed_at", Operator::Yesterday, Value::Null)
        );
        assert_eq!(
            previous(Operator::Yesterday, Value::Null, "placed_at", now),
            range(
                "placed_at",
                d("2024-03-12T23:00:00Z"),
                d("2024-03-13T23:00:00Z")
            )
        );
        // The week of the 15th starts Monday the 11th; the week before last starts the 26th.
        assert_eq!(
            previous(Operator::PreviousWeek, Value::Null, "placed_at", now),
            range(
                "placed_at",
                d("2024-02-25T23:00:00Z"),
                d("2024-03-03T23:00:00Z")
            )
        );
        assert_eq!(
            previous(Operator::PreviousMonth, Value::Null, "day", now),
            range(
                "day",
                Value::Dateonly(date("2024-01-01")),
                Value::Dateonly(date("2024-02-01"))
            )
        );
        assert_eq!(
            previous(Operator::PreviousQuarter, Value::Null, "day", now),
            range(
                "day",
                Value::Dateonly(date("2023-07-01")),
                Value::Dateonly(date("2023-10-01"))
            )
        );
        assert_eq!(
            previous(Operator::PreviousYear, Value::Null, "day", now),
            range(
                "day",
                Value::Dateonly(date("2022-01-01")),
                Value::Dateonly(date("2023-01-01"))
            )
        );
        for (to_date, whole) in [
            (Operator::PreviousWeekToDate, Operator::PreviousWeek),
            (Operator::PreviousMonthToDate, Operator::PreviousMonth),
            (Operator::PreviousQuarterToDate, Operator::PreviousQuarter),
            (Operator::PreviousYearToDate, Operator::PreviousYear),
        ] {
            assert_eq!(
                previous(to_date, Value::Null, "placed_at", now),
                ConditionTree::leaf("placed_at", whole, Value::Null)
            );
        }
        // Last 3 days = 12th..14th; the 3 before = 9th..11th.
        assert_eq!(
            previous(Operator::PreviousXDays, Value::Int(3), "placed_at", now),
            range(
                "placed_at",
                d("2024-03-08T23:00:00Z"),
                d("2024-03-11T23:00:00Z")
            )
        );
        // Same span 3 days earlier: from the 9th to "now" 3 days ago. The DST change of the
        // 31st is not crossed, so the offset stays +01:00.
        assert_eq!(
            previous(
                Operator::PreviousXDaysToDate,
                Value::Int(3),
                "placed_at",
                now
            ),
            range(
                "placed_at",
                d("2024-03-08T23:00:00Z"),
                d("2024-03-11T23:30:00Z")
            )
        );
        // Non-interval leaves are kept.
        assert_eq!(
            previous(Operator::Past, Value::Null, "placed_at", now),
            ConditionTree::leaf("placed_at", Operator::Past, Value::Null)
        );
    }

    #[test]
    fn previous_period_only_without_an_and_root() {
        let today = ConditionTree::leaf("placed_at", Operator::Today, Value::Null);
        let paid = ConditionTree::leaf("status", Operator::Equal, "paid");
        assert!(has_previous_period(&today));
        assert!(has_previous_period(&ConditionTree::or(vec![
            today.clone(),
            paid.clone()
        ])));
        assert!(!has_previous_period(&ConditionTree::and(vec![
            today,
            paid.clone()
        ])));
        assert!(!has_previous_period(&paid));
        assert!(!has_previous_period(&ConditionTree::leaf(
            "placed_at",
            Operator::Past,
            Value::Null
        )));
    }

    #[test]
    fn labels_follow_the_frontend_formats() {
        let d = date("2024-12-30");
        assert_eq!(
            period_label(date("2024-03-05"), DateOperation::Day),
            "05/03/2024"
        );
        assert_eq!(period_label(d, DateOperation::Week), "W1-2025");
        assert_eq!(
            period_label(date("2024-03-04"), DateOperation::Week),
            "W10-2024"
        );
        assert_eq!(
            period_label(date("2024-09-01"), DateOperation::Month),
            "Sep 24"
        );
        assert_eq!(
            period_label(date("2024-10-01"), DateOperation::Quarter),
            "Q4-2024"
        );
        assert_eq!(
            period_label(date("2024-01-01"), DateOperation::Year),
            "2024"
        );
    }

    #[test]
    fn periods_start_and_shift() {
        assert_eq!(
            period_start(date("2024-03-15"), DateOperation::Week),
            date("2024-03-11")
        );
        assert_eq!(
            period_start(date("2024-05-15"), DateOperation::Quarter),
            date("2024-04-01")
        );
        assert_eq!(
            shift(date("2024-11-01"), DateOperation::Quarter, 1),
            date("2025-02-01")
        );
        assert_eq!(
            shift(date("2024-01-01"), DateOperation::Month, -2),
            date("2023-11-01")
        );
        assert_eq!(
            shift(date("2024-12-30"), DateOperation::Week, 1),
            date("2025-01-06")
        );
    }

    #[test]
    fn stats_document_wraps_the_value() {
        let doc = stats_document(json!({"countCurrent": 3}));
        assert_eq!(doc["data"]["type"], "stats");
        assert_eq!(doc["data"]["attributes"]["value"]["countCurrent"], 3);
        assert!(doc["data"]["id"].as_str().is_some_and(|id| id.len() == 36));
    }

    #[test]
    fn chart_numbers_are_json_numbers() {
        assert_eq!(number_json(&Value::Int(3)), json!(3));
        assert_eq!(number_json(&Value::Null), json!(0));
        let decimal: bigdecimal::BigDecimal = "12.50".parse().expect("decimal");
        assert_eq!(number_json(&Value::Decimal(decimal)), json!(12.5));
    }

    #[test]
    fn group_keys_take_the_wire_form_of_their_column() {
        use crate::datasource::schema::RelationSchema;
        let mut schema = schema();
        let mut files = CollectionSchema::new("files");
        let mut key = ColumnSchema::new(PrimitiveType::Binary);
        key.wire = Wire::Hex;
        files.fields.insert("id".into(), FieldSchema::Column(key));
        let body = ColumnSchema::new(PrimitiveType::Binary);
        files
            .fields
            .insert("body".into(), FieldSchema::Column(body));
        schema.collections.insert("files".into(), files);
        let orders = schema.collections.get_mut("orders").expect("orders");
        orders.fields.insert(
            "file".into(),
            FieldSchema::Relation(RelationSchema::ManyToOne {
                foreign_collection: "files".into(),
                foreign_key: "file_id".into(),
                foreign_key_target: "id".into(),
            }),
        );
        assert_eq!(group_wire(&schema, "files", "body"), Wire::DataUri);
        assert_eq!(group_wire(&schema, "files", "id"), Wire::Hex);
        assert_eq!(group_wire(&schema, "orders", "file:body"), Wire::DataUri);
        assert_eq!(group_wire(&schema, "orders", "status"), Wire::Plain);
        assert_eq!(group_wire(&schema, "orders", "nowhere"), Wire::Plain);

        let row = |key: Value, value: i64| AggregateResult {
            value: Value::Int(value),
            group: [("file:body".to_owned(), key)].into_iter().collect(),
        };
        let rows = [row(Value::Binary(b"%PDF".to_vec()), 2), row(Value::Null, 1)];
        assert_eq!(
            key_values(&rows, "file:body", Wire::DataUri),
            json!([
                {"key": "data:application/pdf;base64,JVBERg==", "value": 2},
                {"key": null, "value": 1}
            ])
        );
        assert_eq!(
            key_values(&rows[..1], "file:body", Wire::Hex),
            json!([{"key": "25504446", "value": 2}])
        );
    }

    #[test]
    fn huge_previous_periods_saturate_at_the_filter_bounds() {
        let now = "2024-05-20T12:34:56.789Z";
        let earliest_day = date("0001-01-02");
        let latest_day = date("9999-12-30");
        // The issue's value, i64's bounds and near f64::MAX, both ways (was a panic:
        // `NaiveDate - TimeDelta overflowed`).
        for huge in [1e18, i64::MAX as f64, 9.9e307] {
            assert_eq!(
                previous(Operator::PreviousXDays, Value::Float(huge), "day", now),
                range(
                    "day",
                    Value::Dateonly(earliest_day),
                    Value::Dateonly(earliest_day)
                )
            );
            assert_eq!(
                previous(Operator::PreviousXDays, Value::Float(-huge), "day", now),
                range(
                    "day",
                    Value::Dateonly(latest_day),
                    Value::Dateonly(latest_day)
                )
            );
            assert_eq!(
                previous(
                    Operator::PreviousXDaysToDate,
                    Value::Float(huge),
                    "day",
                    now
                ),
                range(
                    "day",
                    Value::Dateonly(earliest_day),
                    Value::Dateonly(earliest_day)
                )
            );
            let ConditionTree::Branch { conditions, .. } = previous(
                Operator::PreviousXDaysToDate,
                Value::Float(huge),
                "placed_at",
                now,
            ) else {
                panic!("a range");
            };
            assert!(
                conditions.iter().all(
                    |c| matches!(c, ConditionTree::Leaf(Leaf { value: Value::Date(t), .. })
                        if t.date_naive() <= earliest_day)
                ),
                "{conditions:?}"
            );
        }
        // Ordinary counts are unchanged: the 3 days before the last 3 (Paris).
        assert_eq!(
            previous(Operator::PreviousXDays, Value::Int(3), "day", now),
            range(
                "day",
                Value::Dateonly(date("2024-05-14")),
                Value::Dateonly(date("2024-05-17"))
            )
        );
    }

    #[test]
    fn periods_and_shifts_at_the_ends_of_chrono_stay_in_range() {
        for unit in [
            DateOperation::Day,
            DateOperation::Week,
            DateOperation::Month,
            DateOperation::Quarter,
            DateOperation::Year,
        ] {
            assert_eq!(shift(NaiveDate::MAX, unit, 1), NaiveDate::MAX);
            assert_eq!(shift(NaiveDate::MIN, unit, -1), NaiveDate::MIN);
            assert_eq!(shift(NaiveDate::MIN, unit, i32::MIN), NaiveDate::MIN);
            assert_eq!(shift(NaiveDate::MAX, unit, i32::MAX), NaiveDate::MAX);
            assert!(period_start(NaiveDate::MIN, unit) >= NaiveDate::MIN);
            let _ = period_label(period_start(NaiveDate::MAX, unit), unit);
        }
    }

    mod properties {
        use proptest::prelude::*;
        use proptest::sample::select;

        use super::*;

        const INTERVALS: &[Operator] = &[
            Operator::Today,
            Operator::Yesterday,
            Operator::PreviousWeek,
            Operator::PreviousMonth,
            Operator::PreviousQuarter,
            Operator::PreviousYear,
            Operator::PreviousWeekToDate,
            Operator::PreviousMonthToDate,
            Operator::PreviousQuarterToDate,
            Operator::PreviousYearToDate,
            Operator::PreviousXDays,
            Operator::PreviousXDaysToDate,
        ];

        /// Timezones with odd offsets, DST gaps at midnight and a skipped day.
        const ZONES: &[Tz] = &[
            chrono_tz::UTC,
            chrono_tz::Pacific::Kiritimati,
            chrono_tz::Pacific::Apia,
            chrono_tz::Etc::GMTPlus12,
            chrono_tz::Asia::Kathmandu,
            chrono_tz::America::Sao_Paulo,
            chrono_tz::Australia::Lord_Howe,
        ];

        fn number() -> impl Strategy<Value = Value> {
            prop_oneof![
                any::<i64>().prop_map(Value::Int),
                select(vec![i64::MIN, i64::MAX, 0, -1, 1]).prop_map(Value::Int),
                any::<f64>().prop_map(Value::Float),
                select(vec![
                    1e18,
                    -1e18,
                    9.9e307,
                    -9.9e307,
                    f64::MAX,
                    f64::MIN,
                    0.5,
                    -0.5
                ])
                .prop_map(Value::Float),
                any::<u64>().prop_map(|n| Value::Decimal(n.into())),
            ]
        }

        proptest! {
            /// Any count, timezone and "now" within the databases' years: the previous period
            /// is computed or refused, never a panic.
            #[test]
            fn previous_periods_never_panic(
                operator in select(INTERVALS),
                value in number(),
                tz in select(ZONES),
                field in select(vec!["placed_at", "day"]),
                seconds in -62_000_000_000_i64..253_000_000_000,
            ) {
                let schema = schema();
                let now = DateTime::from_timestamp(seconds, 0).expect("in range");
                let tree = ConditionTree::leaf(field, operator, value);
                let _ = previous_period(
                    &tree,
                    schema.collection("orders").expect("orders"),
                    &schema,
                    tz,
                    now,
                );
            }

            /// Any date chrono holds, moved by any count of any unit, labelled.
            #[test]
            fn shifts_and_periods_never_panic(
                days in (NaiveDate::MIN.num_days_from_ce())..=(NaiveDate::MAX.num_days_from_ce()),
                n in any::<i32>(),
                unit in select(vec![DateOperation::Day, DateOperation::Week,
                    DateOperation::Month, DateOperation::Quarter, DateOperation::Year]),
            ) {
                let date = NaiveDate::from_num_days_from_ce_opt(days).expect("in range");
                let start = period_start(date, unit);
                let _ = period_label(shift(start, unit, n), unit);
            }
        }
    }
}
