//! Operator equivalence (§9.2): rewrites operators into others, and time operators into
//! comparisons with bounds computed in the caller's timezone.
//!
//! Two entry points: [`lower_time_operators`] turns every time operator into comparisons (used by
//! the in-memory evaluator and by datasources that only compare dates), and [`rewrite`] replaces
//! every operator a datasource lacks by an equivalent tree made of operators it has (used by the
//! customizer's operators-equivalence decorator).
//!
//! Deliberate differences from the Node agent:
//! - Interval operators (Today, Yesterday, Previous*) use `GreaterThanOrEqual` for the lower bound of
//!   Date columns too. The agent uses `GreaterThan` there, so a row stamped exactly at local
//!   midnight falls out of Today, which is a bug.
//! - Contains/StartsWith/EndsWith (and the I-variants) escape `%`, `_` and `\` when they become
//!   `Like` patterns, so the user's text stays literal; the agent does not escape them.
//! - `In`/`NotIn` on strings are not rewritten into `Match` regexes: the regex crate has no
//!   lookahead (the agent's `NotIn` regex relies on one) and an OR of `Equal` is exact and needs a
//!   subset of the operators, so it is always preferred.
//! - Intervals need `GreaterThanOrEqual` and `LessThan` (what they are made of), not also
//!   `GreaterThan` as the agent requires.
//!
//! Kept as the agent does: weeks start on Monday; on Dateonly columns the bounds are local dates,
//! so `Past`/`Future` compare with today's date and the "to date" periods end before today.
//! `Like` patterns use `\` as the escape character (PostgreSQL's and MySQL's default).

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::condition_tree::{ConditionTree, Leaf};
use super::operator::Operator;
use crate::datasource::error::{Error, Result};
use crate::datasource::record::{Value, parse_datetime};
use crate::datasource::schema::{CollectionSchema, ColumnType, DataSourceSchema, PrimitiveType};

/// Rewrites every time-relative leaf (Today, Yesterday, Previous*, Past, Future,
/// BeforeXHoursAgo, AfterXHoursAgo) and Before/After into GreaterThan / GreaterThanOrEqual /
/// LessThan leaves whose bounds are computed in `tz` at `now` (Date bounds as UTC instants,
/// Dateonly bounds as dates). Other leaves are kept.
pub fn lower_time_operators(
    tree: &ConditionTree,
    collection: &CollectionSchema,
    schema: &DataSourceSchema,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<ConditionTree> {
    let clock = Clock::new(tz, now);
    tree.replace_leaves(&mut |leaf| {
        if !is_time_operator(leaf.operator) {
            return Ok(ConditionTree::Leaf(leaf.clone()));
        }
        let (_, column) = schema.resolve_column(collection, &leaf.field)?;
        lower_time_leaf(leaf, &column.column_type, &clock)
    })
}

/// Rewrites every leaf whose operator is not in `supported(column type)` into an equivalent tree
/// of supported operators, following the §9.2 table: alternatives are tried in order and the
/// first one whose needed operators are all supported or themselves derivable wins. An operator
/// with no such path is a validation error.
pub fn rewrite(
    tree: &ConditionTree,
    collection: &CollectionSchema,
    schema: &DataSourceSchema,
    supported: impl Fn(&ColumnType) -> BTreeSet<Operator>,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<ConditionTree> {
    let clock = Clock::new(tz, now);
    tree.replace_leaves(&mut |leaf| {
        let (_, column) = schema.resolve_column(collection, &leaf.field)?;
        let native = supported(&column.column_type);
        rewrite_leaf(leaf, &column.column_type, &native, &clock, &mut Vec::new())?.ok_or_else(
            || {
                Error::validation(format!(
                    "The given operator '{}' is not supported by the column: '{}'.",
                    leaf.operator.snake_case(),
                    leaf.field
                ))
            },
        )
    })
}

/// Whether `operator` is native or derivable from `native` on a column of this type.
pub fn is_derivable(
    operator: Operator,
    column_type: &ColumnType,
    native: &BTreeSet<Operator>,
) -> bool {
    find_alternative(operator, column_type, native, &mut Vec::new()).is_some()
}

/// Every operator allowed for the column type that is native or derivable from `native`: what a
/// collection behind the equivalence layer advertises.
pub fn derivable_operators(
    column_type: &ColumnType,
    native: &BTreeSet<Operator>,
) -> BTreeSet<Operator> {
    Operator::ALL
        .iter()
        .copied()
        .filter(|op| op.allowed_for(column_type) && is_derivable(*op, column_type, native))
        .collect()
}

/// Escapes a literal for use inside a `Like`/`ILike` pattern: `\` is the escape character, as in
/// PostgreSQL's and MySQL's default, so `%`, `_` and `\` itself are prefixed with it.
pub fn escape_like(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The regex equivalent of a `Like` pattern: `%` → `.*`, `_` → `.`, `\x` → literal `x`,
/// anchored at both ends; `(?s)` because `%` and `_` also match newlines in SQL, `(?i)` for ILike.
pub fn like_to_regex(pattern: &str, case_insensitive: bool) -> String {
    let mut out = String::from(if case_insensitive { "(?is)^" } else { "(?s)^" });
    let mut chars = pattern.chars();
    let mut buf = [0u8; 4];
    while let Some(c) = chars.next() {
        match c {
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            // A trailing lone backslash stands for itself (MySQL's reading; PostgreSQL errors).
            '\\' => {
                let literal = chars.next().unwrap_or('\\');
                out.push_str(&regex::escape(literal.encode_utf8(&mut buf)));
            }
            other => out.push_str(&regex::escape(other.encode_utf8(&mut buf))),
        }
    }
    out.push('$');
    out
}

// ------------------------------------------------------------------------------------------------
// Time

/// Time-relative operators plus Before/After: everything `lower_time_operators` rewrites.
fn is_time_operator(op: Operator) -> bool {
    op.is_time_relative() || matches!(op, Operator::Before | Operator::After)
}

/// Calendar units of the Previous* operators.
#[derive(Debug, Clone, Copy)]
enum Unit {
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

/// "Now" seen from the caller: the instant and the local date in the caller's timezone.
#[derive(Debug, Clone, Copy)]
struct Clock {
    tz: Tz,
    /// Truncated to milliseconds: the agent sends bounds as ISO strings with millisecond
    /// precision, and finer bounds would make text-stored dates (SQLite) compare oddly.
    now: DateTime<Utc>,
    today: NaiveDate,
}

impl Clock {
    fn new(tz: Tz, now: DateTime<Utc>) -> Self {
        let millis = now.timestamp_millis();
        let now = DateTime::<Utc>::from_timestamp_millis(millis).unwrap_or(now);
        Self {
            tz,
            now,
            today: now.with_timezone(&tz).date_naive(),
        }
    }
}

/// The first instant of a local date in `tz`. Days are not always 24 hours long and midnight may
/// not exist (DST gaps at midnight, e.g. America/Sao_Paulo before 2019) or exist twice; the day
/// then starts at the first local time that exists, or at the earlier of the two midnights.
pub fn start_of_day(date: NaiveDate, tz: Tz) -> DateTime<Utc> {
    let midnight = date.and_time(NaiveTime::MIN);
    match tz.from_local_datetime(&midnight) {
        LocalResult::Single(t) => t.with_timezone(&Utc),
        LocalResult::Ambiguous(earliest, _) => earliest.with_timezone(&Utc),
        LocalResult::None => {
            // Gaps are whole minutes in the tz database and at most a day long (Samoa, 2011).
            // Checked: at the ends of chrono's range (a date the user typed) the next minutes may
            // not exist.
            for minutes in 1..=25 * 60 {
                if let Some(t) = midnight
                    .checked_add_signed(Duration::minutes(minutes))
                    .and_then(|local| tz.from_local_datetime(&local).earliest())
                {
                    return t.with_timezone(&Utc);
                }
            }
            midnight.and_utc()
        }
    }
}

/// The first day of the period containing `date`. Weeks start on Monday: the agent computes
/// periods with luxon's `startOf('week')`, which is ISO (Monday) by default.
fn period_start(date: NaiveDate, unit: Unit) -> NaiveDate {
    let first_of_month =
        |month: u32| NaiveDate::from_ymd_opt(date.year(), month, 1).unwrap_or(date);
    match unit {
        Unit::Day => date,
        Unit::Week => date
            .checked_sub_signed(Duration::days(i64::from(
                date.weekday().num_days_from_monday(),
            )))
            .unwrap_or(date),
        Unit::Month => first_of_month(date.month()),
        Unit::Quarter => first_of_month((date.month() - 1) / 3 * 3 + 1),
        Unit::Year => first_of_month(1),
    }
}

/// The first day of the period before the one containing `date`.
fn previous_period_start(date: NaiveDate, unit: Unit) -> NaiveDate {
    let start = period_start(date, unit);
    period_start(start.pred_opt().unwrap_or(start), unit)
}

/// The number a `PreviousXDays`/`…HoursAgo` leaf carries.
fn number_value(leaf: &Leaf) -> Result<f64> {
    leaf.value
        .as_f64()
        .filter(|f| f.is_finite())
        .ok_or_else(|| {
            Error::validation(format!(
                "Wrong type for \"{}\": {}. Expects Number",
                leaf.field, leaf.value
            ))
        })
}

/// The first day a relative bound may fall on. A count of hours or days is the user's (`1e18`,
/// `9.9e307`): bounds saturate at these days, as JavaScript dates stop at their own range, instead
/// of overflowing chrono. Every database stores the years 1 to 9999 (MySQL's `DATETIME` no
/// more), and the second day keeps the first local midnight within year 1 in every timezone.
const EARLIEST_DAY: NaiveDate = NaiveDate::from_yo_opt(1, 2).expect("a valid date");
/// The last day a relative bound may fall on (see [`EARLIEST_DAY`]).
const LATEST_DAY: NaiveDate = NaiveDate::from_yo_opt(9999, 364).expect("a valid date");

/// An instant `millis` milliseconds after the epoch, saturated to the bounds' days.
fn saturated_instant(millis: f64) -> DateTime<Utc> {
    let earliest = EARLIEST_DAY.and_time(NaiveTime::MIN).and_utc();
    let latest = LATEST_DAY.and_time(NaiveTime::MIN).and_utc();
    let clamped = millis.clamp(
        earliest.timestamp_millis() as f64,
        latest.timestamp_millis() as f64,
    );
    // In range by construction: the fallback is unreachable.
    DateTime::from_timestamp_millis(clamped.round() as i64).unwrap_or(earliest)
}

/// `now` minus a number of hours (absolute duration, as luxon's `minus({hours})`), saturated.
fn hours_ago(clock: &Clock, hours: f64) -> DateTime<Utc> {
    saturated_instant(clock.now.timestamp_millis() as f64 - hours * 3_600_000.0)
}

/// The local date `days` calendar days before today, saturated; a fractional part is
/// subtracted as a duration first, as luxon does with `minus({days})`.
fn days_ago(clock: &Clock, days: f64) -> NaiveDate {
    let whole = days.trunc();
    let fraction = days - whole;
    let shifted = saturated_instant(clock.now.timestamp_millis() as f64 - fraction * 86_400_000.0);
    days_before(shifted.with_timezone(&clock.tz).date_naive(), whole)
}

/// `date` moved `days` whole calendar days back (forward when negative), saturated at
/// [`EARLIEST_DAY`] and [`LATEST_DAY`]: a count of days is the user's (`1e18`, `-9.9e307`,
/// infinite once doubled), so that no relative bound overflows chrono.
pub fn days_before(date: NaiveDate, days: f64) -> NaiveDate {
    let whole = days.trunc();
    if whole.is_nan() {
        return date;
    }
    if whole >= (date - EARLIEST_DAY).num_days() as f64 {
        EARLIEST_DAY
    } else if -whole >= (LATEST_DAY - date).num_days() as f64 {
        LATEST_DAY
    } else {
        // Within the bounds: `whole` fits an i64 and the subtraction cannot overflow.
        date.checked_sub_signed(Duration::days(whole as i64))
            .unwrap_or(date)
    }
}

/// A point in time expressed as a bound for one column type.
enum Bound {
    /// A local date: midnight in the caller's timezone for Date columns, the date for Dateonly.
    Day(NaiveDate),
    /// An instant: itself for Date columns, its local date for Dateonly.
    Instant(DateTime<Utc>),
}

impl Bound {
    fn value(&self, dateonly: bool, tz: Tz) -> Value {
        match (self, dateonly) {
            (Bound::Day(d), true) => Value::Dateonly(*d),
            (Bound::Day(d), false) => Value::Date(start_of_day(*d, tz)),
            (Bound::Instant(t), true) => Value::Dateonly(t.with_timezone(&tz).date_naive()),
            (Bound::Instant(t), false) => Value::Date(*t),
        }
    }
}

/// Coerces the value of a Before/After leaf to the column's type (a date string, a Dateonly on a
/// Date column or the reverse), interpreting dates in the caller's timezone.
fn comparison_value(value: &Value, dateonly: bool, tz: Tz) -> Value {
    let bound = match value {
        Value::Date(t) => Bound::Instant(*t),
        Value::Dateonly(d) => Bound::Day(*d),
        Value::String(s) => {
            if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
                Bound::Day(d)
            } else if let Some(t) = parse_datetime(s) {
                Bound::Instant(t)
            } else {
                return value.clone();
            }
        }
        other => return other.clone(),
    };
    bound.value(dateonly, tz)
}

/// The tree for one time operator on a column of the given type.
fn lower_time_leaf(leaf: &Leaf, column_type: &ColumnType, clock: &Clock) -> Result<ConditionTree> {
    use Operator::*;
    let dateonly = match column_type.primitive() {
        Some(PrimitiveType::Dateonly) => true,
        Some(PrimitiveType::Date) => false,
        _ => {
            return Err(Error::validation(format!(
                "The given operator '{}' is not allowed on the field '{}' (not a date).",
                leaf.operator.snake_case(),
                leaf.field
            )));
        }
    };
    let tz = clock.tz;
    let single = |operator: Operator, bound: Bound| {
        ConditionTree::leaf(leaf.field.clone(), operator, bound.value(dateonly, tz))
    };
    // Lower bound inclusive for both Date and Dateonly (see the module notes).
    let interval = |start: Bound, end: Bound| {
        ConditionTree::and(vec![
            single(GreaterThanOrEqual, start),
            single(LessThan, end),
        ])
    };
    let previous = |unit: Unit| {
        interval(
            Bound::Day(previous_period_start(clock.today, unit)),
            Bound::Day(period_start(clock.today, unit)),
        )
    };
    let to_date = |unit: Unit| {
        interval(
            Bound::Day(period_start(clock.today, unit)),
            Bound::Instant(clock.now),
        )
    };
    Ok(match leaf.operator {
        Before => ConditionTree::leaf(
            leaf.field.clone(),
            LessThan,
            comparison_value(&leaf.value, dateonly, tz),
        ),
        After => ConditionTree::leaf(
            leaf.field.clone(),
            GreaterThan,
            comparison_value(&leaf.value, dateonly, tz),
        ),
        Past => single(LessThan, Bound::Instant(clock.now)),
        Future => single(GreaterThan, Bound::Instant(clock.now)),
        BeforeXHoursAgo => single(
            LessThan,
            Bound::Instant(hours_ago(clock, number_value(leaf)?)),
        ),
        AfterXHoursAgo => single(
            GreaterThan,
            Bound::Instant(hours_ago(clock, number_value(leaf)?)),
        ),
        Today => interval(
            Bound::Day(clock.today),
            Bound::Day(clock.today.succ_opt().unwrap_or(clock.today)),
        ),
        Yesterday => previous(Unit::Day),
        PreviousWeek => previous(Unit::Week),
        PreviousMonth => previous(Unit::Month),
        PreviousQuarter => previous(Unit::Quarter),
        PreviousYear => previous(Unit::Year),
        PreviousWeekToDate => to_date(Unit::Week),
        PreviousMonthToDate => to_date(Unit::Month),
        PreviousQuarterToDate => to_date(Unit::Quarter),
        PreviousYearToDate => to_date(Unit::Year),
        PreviousXDays => interval(
            Bound::Day(days_ago(clock, number_value(leaf)?)),
            Bound::Day(clock.today),
        ),
        PreviousXDaysToDate => interval(
            Bound::Day(days_ago(clock, number_value(leaf)?)),
            Bound::Instant(clock.now),
        ),
        _ => ConditionTree::Leaf(leaf.clone()),
    })
}

// ------------------------------------------------------------------------------------------------
// The equivalence graph

/// One way to express an operator with others.
struct Alternative {
    /// Operators the replacement tree is made of; all must be native or derivable.
    needs: &'static [Operator],
    /// Column types the alternative applies to; `None` for every type.
    for_types: Option<&'static [PrimitiveType]>,
    build: fn(&Leaf, &ColumnType, &Clock) -> Result<ConditionTree>,
}

const STRING: &[PrimitiveType] = &[PrimitiveType::String];
const DATES: &[PrimitiveType] = &[PrimitiveType::Date, PrimitiveType::Dateonly];

impl Alternative {
    fn applies_to(&self, column_type: &ColumnType) -> bool {
        self.for_types
            .is_none_or(|types| column_type.primitive().is_some_and(|p| types.contains(&p)))
    }
}

fn with(leaf: &Leaf, operator: Operator, value: Value) -> ConditionTree {
    ConditionTree::leaf(leaf.field.clone(), operator, value)
}

/// The items of a list leaf (a lone value counts as a one-item list).
fn items(leaf: &Leaf) -> Vec<Value> {
    match &leaf.value {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    }
}

fn pattern(leaf: &Leaf) -> Result<&str> {
    leaf.value.as_str().ok_or_else(|| {
        Error::validation(format!(
            "Wrong type for \"{}\": {}. Expects String",
            leaf.field, leaf.value
        ))
    })
}

/// The §9.2 table, in the order alternatives are tried.
fn alternatives(op: Operator) -> Vec<Alternative> {
    use Operator::*;
    let time = |needs: &'static [Operator]| Alternative {
        needs,
        for_types: Some(DATES),
        build: |leaf, ty, clock| lower_time_leaf(leaf, ty, clock),
    };
    match op {
        Blank => vec![
            Alternative {
                needs: &[In],
                for_types: Some(STRING),
                build: |leaf, _, _| {
                    Ok(with(
                        leaf,
                        In,
                        Value::Array(vec![Value::Null, Value::String(String::new())]),
                    ))
                },
            },
            Alternative {
                needs: &[Missing],
                for_types: None,
                build: |leaf, _, _| Ok(with(leaf, Missing, Value::Null)),
            },
        ],
        Missing => vec![Alternative {
            needs: &[Equal],
            for_types: None,
            build: |leaf, _, _| Ok(with(leaf, Equal, Value::Null)),
        }],
        Present => vec![
            Alternative {
                needs: &[NotIn],
                for_types: Some(STRING),
                build: |leaf, _, _| {
                    Ok(with(
                        leaf,
                        NotIn,
                        Value::Array(vec![Value::Null, Value::String(String::new())]),
                    ))
                },
            },
            Alternative {
                needs: &[NotEqual],
                for_types: None,
                build: |leaf, _, _| Ok(with(leaf, NotEqual, Value::Null)),
            },
        ],
        Equal => vec![Alternative {
            needs: &[In],
            for_types: None,
            build: |leaf, _, _| Ok(with(leaf, In, Value::Array(vec![leaf.value.clone()]))),
        }],
        In => vec![Alternative {
            needs: &[Equal],
            for_types: None,
            // An empty list matches nothing: an empty OR.
            build: |leaf, _, _| {
                Ok(ConditionTree::or(
                    items(leaf)
                        .into_iter()
                        .map(|v| with(leaf, Equal, v))
                        .collect(),
                ))
            },
        }],
        NotEqual => vec![Alternative {
            needs: &[NotIn],
            for_types: None,
            build: |leaf, _, _| Ok(with(leaf, NotIn, Value::Array(vec![leaf.value.clone()]))),
        }],
        NotIn => vec![Alternative {
            needs: &[NotEqual],
            for_types: None,
            build: |leaf, _, _| {
                Ok(ConditionTree::and(
                    items(leaf)
                        .into_iter()
                        .map(|v| with(leaf, NotEqual, v))
                        .collect(),
                ))
            },
        }],
        LessThanOrEqual => vec![Alternative {
            needs: &[LessThan, Equal],
            for_types: None,
            build: |leaf, _, _| {
                Ok(ConditionTree::or(vec![
                    with(leaf, LessThan, leaf.value.clone()),
                    with(leaf, Equal, leaf.value.clone()),
                ]))
            },
        }],
        GreaterThanOrEqual => vec![Alternative {
            needs: &[GreaterThan, Equal],
            for_types: None,
            build: |leaf, _, _| {
                Ok(ConditionTree::or(vec![
                    with(leaf, GreaterThan, leaf.value.clone()),
                    with(leaf, Equal, leaf.value.clone()),
                ]))
            },
        }],
        Contains => vec![like_alternative(Like)],
        StartsWith => vec![like_alternative(Like)],
        EndsWith => vec![like_alternative(Like)],
        IContains => vec![like_alternative(ILike)],
        IStartsWith => vec![like_alternative(ILike)],
        IEndsWith => vec![like_alternative(ILike)],
        Like => vec![Alternative {
            needs: &[Match],
            for_types: Some(STRING),
            build: |leaf, _, _| {
                Ok(with(
                    leaf,
                    Match,
                    Value::String(like_to_regex(pattern(leaf)?, false)),
                ))
            },
        }],
        ILike => vec![Alternative {
            needs: &[Match],
            for_types: Some(STRING),
            build: |leaf, _, _| {
                Ok(with(
                    leaf,
                    Match,
                    Value::String(like_to_regex(pattern(leaf)?, true)),
                ))
            },
        }],
        Before | Past | BeforeXHoursAgo => vec![time(&[LessThan])],
        After | Future | AfterXHoursAgo => vec![time(&[GreaterThan])],
        Today
        | Yesterday
        | PreviousWeek
        | PreviousMonth
        | PreviousQuarter
        | PreviousYear
        | PreviousWeekToDate
        | PreviousMonthToDate
        | PreviousQuarterToDate
        | PreviousYearToDate
        | PreviousXDays
        | PreviousXDaysToDate => vec![time(&[GreaterThanOrEqual, LessThan])],
        _ => Vec::new(),
    }
}

/// Contains-like operators become a `Like` (or `ILike`) pattern around the escaped literal; the
/// pattern's shape follows the source operator (see [`like_pattern`]).
fn like_alternative(target: Operator) -> Alternative {
    if target == Operator::Like {
        Alternative {
            needs: &[Operator::Like],
            for_types: Some(STRING),
            build: |leaf, _, _| {
                Ok(with(
                    leaf,
                    Operator::Like,
                    Value::String(like_pattern(leaf)?),
                ))
            },
        }
    } else {
        Alternative {
            needs: &[Operator::ILike],
            for_types: Some(STRING),
            build: |leaf, _, _| {
                Ok(with(
                    leaf,
                    Operator::ILike,
                    Value::String(like_pattern(leaf)?),
                ))
            },
        }
    }
}

/// The Like pattern for a Contains-like leaf, with the literal escaped.
fn like_pattern(leaf: &Leaf) -> Result<String> {
    use Operator::*;
    let literal = escape_like(pattern(leaf)?);
    Ok(match leaf.operator {
        Contains | IContains => format!("%{literal}%"),
        StartsWith | IStartsWith => format!("{literal}%"),
        EndsWith | IEndsWith => format!("%{literal}"),
        _ => literal,
    })
}

/// The first alternative of `op` whose needs are all derivable, or `Some(None)` when `op` is
/// native; `None` when there is no path. `path` holds the operators being derived, so that
/// cycles (Equal ↔ In) end.
fn find_alternative(
    op: Operator,
    column_type: &ColumnType,
    native: &BTreeSet<Operator>,
    path: &mut Vec<Operator>,
) -> Option<Option<Alternative>> {
    if native.contains(&op) {
        return Some(None);
    }
    if path.contains(&op) {
        return None;
    }
    path.push(op);
    let found = alternatives(op).into_iter().find(|alt| {
        alt.applies_to(column_type)
            && alt
                .needs
                .iter()
                .all(|need| find_alternative(*need, column_type, native, path).is_some())
    });
    path.pop();
    found.map(Some)
}

/// The leaf rewritten with native operators only, or `None` when impossible.
fn rewrite_leaf(
    leaf: &Leaf,
    column_type: &ColumnType,
    native: &BTreeSet<Operator>,
    clock: &Clock,
    path: &mut Vec<Operator>,
) -> Result<Option<ConditionTree>> {
    let alternative = match find_alternative(leaf.operator, column_type, native, path) {
        None => return Ok(None),
        Some(None) => return Ok(Some(ConditionTree::Leaf(leaf.clone()))),
        Some(Some(alt)) => alt,
    };
    let replacement = (alternative.build)(leaf, column_type, clock)?;
    path.push(leaf.operator);
    let mut impossible = false;
    let result = replacement.replace_leaves(&mut |sub| match rewrite_leaf(
        sub,
        column_type,
        native,
        clock,
        path,
    )? {
        Some(tree) => Ok(tree),
        None => {
            impossible = true;
            Ok(ConditionTree::Leaf(sub.clone()))
        }
    });
    path.pop();
    let result = result?;
    Ok(if impossible { None } else { Some(result) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::schema::{ColumnSchema, FieldSchema};
    use chrono_tz::{America, Pacific};

    fn schema_with(columns: &[(&str, PrimitiveType)]) -> (CollectionSchema, DataSourceSchema) {
        let mut collection = CollectionSchema::new("things");
        for (name, ty) in columns {
            let mut column = ColumnSchema::new(*ty);
            column.filter_operators = Operator::ALL
                .iter()
                .copied()
                .filter(|o| o.allowed_for(&column.column_type))
                .collect();
            collection
                .fields
                .insert((*name).to_owned(), FieldSchema::Column(column));
        }
        let mut schema = DataSourceSchema::default();
        schema
            .collections
            .insert("things".into(), collection.clone());
        (collection, schema)
    }

    fn utc(s: &str) -> DateTime<Utc> {
        parse_datetime(s).expect("valid date")
    }

    fn date(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("valid date")
    }

    fn lower(op: Operator, value: Value, ty: PrimitiveType, tz: Tz, now: &str) -> ConditionTree {
        let (collection, schema) = schema_with(&[("d", ty)]);
        lower_time_operators(
            &ConditionTree::leaf("d", op, value),
            &collection,
            &schema,
            tz,
            utc(now),
        )
        .expect("lowered")
    }

    fn range(start: Value, end: Value) -> ConditionTree {
        ConditionTree::and(vec![
            ConditionTree::leaf("d", Operator::GreaterThanOrEqual, start),
            ConditionTree::leaf("d", Operator::LessThan, end),
        ])
    }

    #[test]
    fn today_in_auckland_uses_local_midnights_for_dates_and_local_dates_for_dateonly() {
        // 2024-03-10 20:00 UTC is 2024-03-11 09:00 in Auckland (UTC+13 in March).
        let now = "2024-03-10T20:00:00Z";
        assert_eq!(
            lower(
                Operator::Today,
                Value::Null,
                PrimitiveType::Date,
                Pacific::Auckland,
                now
            ),
            range(
                Value::Date(utc("2024-03-10T11:00:00Z")),
                Value::Date(utc("2024-03-11T11:00:00Z"))
            )
        );
        assert_eq!(
            lower(
                Operator::Today,
                Value::Null,
                PrimitiveType::Dateonly,
                Pacific::Auckland,
                now
            ),
            range(
                Value::Dateonly(date("2024-03-11")),
                Value::Dateonly(date("2024-03-12"))
            )
        );
    }

    #[test]
    fn days_are_not_always_24_hours() {
        // New York springs forward on 2024-03-10: that day lasts 23 hours.
        let tree = lower(
            Operator::Today,
            Value::Null,
            PrimitiveType::Date,
            America::New_York,
            "2024-03-10T15:00:00Z",
        );
        assert_eq!(
            tree,
            range(
                Value::Date(utc("2024-03-10T05:00:00Z")),
                Value::Date(utc("2024-03-11T04:00:00Z"))
            )
        );
        // And falls back on 2024-11-03: 25 hours.
        let tree = lower(
            Operator::Yesterday,
            Value::Null,
            PrimitiveType::Date,
            America::New_York,
            "2024-11-04T15:00:00Z",
        );
        assert_eq!(
            tree,
            range(
                Value::Date(utc("2024-11-03T04:00:00Z")),
                Value::Date(utc("2024-11-04T05:00:00Z"))
            )
        );
    }

    #[test]
    fn a_day_whose_midnight_does_not_exist_starts_at_the_transition() {
        // São Paulo skipped 2018-11-04 00:00 → 01:00 (UTC-3 → UTC-2).
        let start = start_of_day(date("2018-11-04"), chrono_tz::America::Sao_Paulo);
        assert_eq!(start, utc("2018-11-04T03:00:00Z"));
    }

    #[test]
    fn weeks_start_on_monday() {
        // 2024-03-13 is a Wednesday.
        let now = "2024-03-13T12:00:00Z";
        assert_eq!(
            lower(
                Operator::PreviousWeek,
                Value::Null,
                PrimitiveType::Dateonly,
                chrono_tz::UTC,
                now
            ),
            range(
                Value::Dateonly(date("2024-03-04")),
                Value::Dateonly(date("2024-03-11"))
            )
        );
        assert_eq!(
            lower(
                Operator::PreviousWeekToDate,
                Value::Null,
                PrimitiveType::Date,
                chrono_tz::UTC,
                now
            ),
            range(
                Value::Date(utc("2024-03-11T00:00:00Z")),
                Value::Date(utc(now))
            )
        );
        // On a Monday the current week starts today; on a Sunday six days ago.
        assert_eq!(
            period_start(date("2024-03-11"), Unit::Week),
            date("2024-03-11")
        );
        assert_eq!(
            period_start(date("2024-03-17"), Unit::Week),
            date("2024-03-11")
        );
    }

    #[test]
    fn months_quarters_and_years() {
        let now = "2024-05-20T12:00:00Z";
        let tz = chrono_tz::UTC;
        let d = |s| Value::Dateonly(date(s));
        assert_eq!(
            lower(
                Operator::PreviousMonth,
                Value::Null,
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            range(d("2024-04-01"), d("2024-05-01"))
        );
        assert_eq!(
            lower(
                Operator::PreviousQuarter,
                Value::Null,
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            range(d("2024-01-01"), d("2024-04-01"))
        );
        assert_eq!(
            lower(
                Operator::PreviousYear,
                Value::Null,
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            range(d("2023-01-01"), d("2024-01-01"))
        );
        // "To date" on Dateonly ends before today, as the agent does.
        assert_eq!(
            lower(
                Operator::PreviousMonthToDate,
                Value::Null,
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            range(d("2024-05-01"), d("2024-05-20"))
        );
        assert_eq!(
            lower(
                Operator::PreviousQuarterToDate,
                Value::Null,
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            range(d("2024-04-01"), d("2024-05-20"))
        );
        assert_eq!(
            lower(
                Operator::PreviousYearToDate,
                Value::Null,
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            range(d("2024-01-01"), d("2024-05-20"))
        );
        // Previous month from a 31st crosses into a short month correctly.
        assert_eq!(
            previous_period_start(date("2024-03-31"), Unit::Month),
            date("2024-02-01")
        );
        assert_eq!(
            previous_period_start(date("2024-01-15"), Unit::Quarter),
            date("2023-10-01")
        );
    }

    #[test]
    fn previous_x_days_and_hours() {
        let now = "2024-05-20T12:34:56.789123Z";
        let tz = America::New_York; // 08:34 local, 2024-05-20
        assert_eq!(
            lower(
                Operator::PreviousXDays,
                Value::Int(3),
                PrimitiveType::Date,
                tz,
                now
            ),
            range(
                Value::Date(utc("2024-05-17T04:00:00Z")),
                Value::Date(utc("2024-05-20T04:00:00Z"))
            )
        );
        assert_eq!(
            lower(
                Operator::PreviousXDaysToDate,
                Value::Int(3),
                PrimitiveType::Date,
                tz,
                now
            ),
            range(
                Value::Date(utc("2024-05-17T04:00:00Z")),
                Value::Date(utc("2024-05-20T12:34:56.789Z"))
            )
        );
        assert_eq!(
            lower(
                Operator::BeforeXHoursAgo,
                Value::Int(2),
                PrimitiveType::Date,
                tz,
                now
            ),
            ConditionTree::leaf(
                "d",
                Operator::LessThan,
                Value::Date(utc("2024-05-20T10:34:56.789Z"))
            )
        );
        assert_eq!(
            lower(
                Operator::AfterXHoursAgo,
                Value::Float(0.5),
                PrimitiveType::Date,
                tz,
                now
            ),
            ConditionTree::leaf(
                "d",
                Operator::GreaterThan,
                Value::Date(utc("2024-05-20T12:04:56.789Z"))
            )
        );
        assert_eq!(
            lower(
                Operator::PreviousXDays,
                Value::Int(2),
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            range(
                Value::Dateonly(date("2024-05-18")),
                Value::Dateonly(date("2024-05-20"))
            )
        );
    }

    #[test]
    fn huge_counts_of_days_and_hours_saturate_at_the_bounds_instead_of_panicking() {
        let now = "2024-05-20T12:34:56.789Z";
        let earliest = || Value::Date(utc("0001-01-02T00:00:00Z"));
        let latest = || Value::Date(utc("9999-12-30T00:00:00Z"));
        // The values: beyond i64, 1e18 and near f64::MAX, both ways.
        for huge in [
            Value::Decimal("9223372036854775808".parse().expect("decimal")),
            Value::Float(1e18),
            Value::Float(9.9e307),
        ] {
            let negated = Value::Float(-huge.as_f64().expect("a number"));
            let lowered = |op: Operator, value: &Value| {
                lower(op, value.clone(), PrimitiveType::Date, chrono_tz::UTC, now)
            };
            assert_eq!(
                lowered(Operator::PreviousXDays, &huge),
                range(earliest(), Value::Date(utc("2024-05-20T00:00:00Z")))
            );
            assert_eq!(
                lowered(Operator::PreviousXDaysToDate, &huge),
                range(earliest(), Value::Date(utc(now)))
            );
            assert_eq!(
                lowered(Operator::BeforeXHoursAgo, &huge),
                ConditionTree::leaf("d", Operator::LessThan, earliest())
            );
            assert_eq!(
                lowered(Operator::AfterXHoursAgo, &negated),
                ConditionTree::leaf("d", Operator::GreaterThan, latest())
            );
            assert_eq!(
                lowered(Operator::PreviousXDays, &negated),
                range(latest(), Value::Date(utc("2024-05-20T00:00:00Z")))
            );
            // Dateonly columns and a timezone far from UTC saturate at the same days.
            assert_eq!(
                lower(
                    Operator::PreviousXDays,
                    huge.clone(),
                    PrimitiveType::Dateonly,
                    Pacific::Kiritimati,
                    now
                ),
                range(
                    Value::Dateonly(date("0001-01-02")),
                    Value::Dateonly(date("2024-05-21"))
                )
            );
        }
    }

    #[test]
    fn past_future_before_after() {
        let now = "2024-05-20T02:00:00Z"; // 2024-05-19 22:00 in New York
        let tz = America::New_York;
        assert_eq!(
            lower(Operator::Past, Value::Null, PrimitiveType::Date, tz, now),
            ConditionTree::leaf("d", Operator::LessThan, Value::Date(utc(now)))
        );
        assert_eq!(
            lower(
                Operator::Future,
                Value::Null,
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            ConditionTree::leaf(
                "d",
                Operator::GreaterThan,
                Value::Dateonly(date("2024-05-19"))
            )
        );
        assert_eq!(
            lower(
                Operator::Before,
                Value::Dateonly(date("2024-01-01")),
                PrimitiveType::Dateonly,
                tz,
                now
            ),
            ConditionTree::leaf("d", Operator::LessThan, Value::Dateonly(date("2024-01-01")))
        );
        assert_eq!(
            lower(
                Operator::After,
                Value::Date(utc("2024-01-01T10:00:00Z")),
                PrimitiveType::Date,
                tz,
                now
            ),
            ConditionTree::leaf(
                "d",
                Operator::GreaterThan,
                Value::Date(utc("2024-01-01T10:00:00Z"))
            )
        );
        // A bare date on a Date column means local midnight.
        assert_eq!(
            lower(
                Operator::Before,
                Value::String("2024-01-01".into()),
                PrimitiveType::Date,
                tz,
                now
            ),
            ConditionTree::leaf(
                "d",
                Operator::LessThan,
                Value::Date(utc("2024-01-01T05:00:00Z"))
            )
        );
    }

    #[test]
    fn non_time_leaves_are_kept_and_time_operators_on_other_types_fail() {
        let (collection, schema) = schema_with(&[("n", PrimitiveType::Number)]);
        let tree = ConditionTree::leaf("n", Operator::Equal, Value::Int(1));
        assert_eq!(
            lower_time_operators(&tree, &collection, &schema, chrono_tz::UTC, Utc::now())
                .expect("ok"),
            tree
        );
        let tree = ConditionTree::leaf("n", Operator::Today, Value::Null);
        assert!(
            lower_time_operators(&tree, &collection, &schema, chrono_tz::UTC, Utc::now()).is_err()
        );
    }

    fn native(ops: &[Operator]) -> impl Fn(&ColumnType) -> BTreeSet<Operator> {
        let set: BTreeSet<Operator> = ops.iter().copied().collect();
        move |_| set.clone()
    }

    fn rewrite_one(
        leaf: &ConditionTree,
        ty: PrimitiveType,
        ops: &[Operator],
    ) -> Result<ConditionTree> {
        let (collection, schema) = schema_with(&[("f", ty)]);
        rewrite(
            leaf,
            &collection,
            &schema,
            native(ops),
            chrono_tz::UTC,
            utc("2024-05-20T12:00:00Z"),
        )
    }

    #[test]
    fn native_operators_are_kept() {
        use Operator::*;
        let leaf = ConditionTree::leaf("f", Equal, "a");
        assert_eq!(
            rewrite_one(&leaf, PrimitiveType::String, &[Equal]).expect("ok"),
            leaf
        );
    }

    #[test]
    fn presence_operators() {
        use Operator::*;
        let blank = ConditionTree::leaf("f", Blank, Value::Null);
        assert_eq!(
            rewrite_one(&blank, PrimitiveType::String, &[In]).expect("ok"),
            ConditionTree::leaf("f", In, Value::Array(vec![Value::Null, "".into()]))
        );
        assert_eq!(
            rewrite_one(&blank, PrimitiveType::Number, &[In, Missing]).expect("ok"),
            ConditionTree::leaf("f", Missing, Value::Null)
        );
        // Blank → Missing → Equal null.
        assert_eq!(
            rewrite_one(&blank, PrimitiveType::Number, &[Equal]).expect("ok"),
            ConditionTree::leaf("f", Equal, Value::Null)
        );
        let present = ConditionTree::leaf("f", Present, Value::Null);
        assert_eq!(
            rewrite_one(&present, PrimitiveType::String, &[NotEqual]).expect("ok"),
            ConditionTree::and(vec![
                ConditionTree::leaf("f", NotEqual, Value::Null),
                ConditionTree::leaf("f", NotEqual, ""),
            ])
        );
        assert_eq!(
            rewrite_one(&present, PrimitiveType::Boolean, &[NotIn]).expect("ok"),
            ConditionTree::leaf("f", NotIn, Value::Array(vec![Value::Null]))
        );
    }

    #[test]
    fn equal_and_in_rewrite_into_each_other_without_looping() {
        use Operator::*;
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", Equal, Value::Int(1)),
                PrimitiveType::Number,
                &[In]
            )
            .expect("ok"),
            ConditionTree::leaf("f", In, Value::Array(vec![Value::Int(1)]))
        );
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", In, Value::Array(vec![Value::Int(1), Value::Int(2)])),
                PrimitiveType::Number,
                &[Equal]
            )
            .expect("ok"),
            ConditionTree::or(vec![
                ConditionTree::leaf("f", Equal, Value::Int(1)),
                ConditionTree::leaf("f", Equal, Value::Int(2))
            ])
        );
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", NotIn, Value::Array(vec!["a".into()])),
                PrimitiveType::String,
                &[NotEqual]
            )
            .expect("ok"),
            ConditionTree::and(vec![ConditionTree::leaf("f", NotEqual, "a")])
        );
        let err = rewrite_one(
            &ConditionTree::leaf("f", Equal, Value::Int(1)),
            PrimitiveType::Number,
            &[GreaterThan],
        );
        assert!(matches!(err, Err(Error::Validation(_))), "{err:?}");
    }

    #[test]
    fn comparisons_with_equality() {
        use Operator::*;
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", LessThanOrEqual, Value::Int(3)),
                PrimitiveType::Number,
                &[LessThan, In]
            )
            .expect("ok"),
            ConditionTree::or(vec![
                ConditionTree::leaf("f", LessThan, Value::Int(3)),
                ConditionTree::leaf("f", In, Value::Array(vec![Value::Int(3)])),
            ])
        );
        assert!(
            rewrite_one(
                &ConditionTree::leaf("f", GreaterThanOrEqual, Value::Int(3)),
                PrimitiveType::Number,
                &[LessThan, Equal]
            )
            .is_err()
        );
    }

    #[test]
    fn patterns_escape_the_literal_and_like_becomes_a_regex() {
        use Operator::*;
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", Contains, "5%_a\\"),
                PrimitiveType::String,
                &[Like]
            )
            .expect("ok"),
            ConditionTree::leaf("f", Like, "%5\\%\\_a\\\\%")
        );
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", IStartsWith, "ab"),
                PrimitiveType::String,
                &[ILike]
            )
            .expect("ok"),
            ConditionTree::leaf("f", ILike, "ab%")
        );
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", EndsWith, "ab"),
                PrimitiveType::String,
                &[Match]
            )
            .expect("ok"),
            ConditionTree::leaf("f", Match, "(?s)^.*ab$")
        );
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", ILike, "a.b_%"),
                PrimitiveType::String,
                &[Match]
            )
            .expect("ok"),
            ConditionTree::leaf("f", Match, "(?is)^a\\.b..*$")
        );
        // Contains → Like → Match keeps the escaped characters literal.
        let tree = rewrite_one(
            &ConditionTree::leaf("f", Contains, "1%"),
            PrimitiveType::String,
            &[Match],
        )
        .expect("ok");
        let ConditionTree::Leaf(leaf) = tree else {
            panic!("a leaf")
        };
        let re = regex::Regex::new(leaf.value.as_str().expect("string")).expect("valid regex");
        assert!(re.is_match("x1%y"));
        assert!(!re.is_match("x12y"));
        // Like on a number column has no path.
        assert!(
            rewrite_one(
                &ConditionTree::leaf("f", Contains, "1"),
                PrimitiveType::Number,
                &[Like, Match]
            )
            .is_err()
        );
    }

    #[test]
    fn time_operators_need_comparisons() {
        use Operator::*;
        let today = ConditionTree::leaf("f", Today, Value::Null);
        assert_eq!(
            rewrite_one(
                &today,
                PrimitiveType::Dateonly,
                &[GreaterThan, LessThan, Equal]
            )
            .expect("ok"),
            ConditionTree::and(vec![
                ConditionTree::or(vec![
                    ConditionTree::leaf("f", GreaterThan, Value::Dateonly(date("2024-05-20"))),
                    ConditionTree::leaf("f", Equal, Value::Dateonly(date("2024-05-20"))),
                ]),
                ConditionTree::leaf("f", LessThan, Value::Dateonly(date("2024-05-21"))),
            ])
        );
        assert!(rewrite_one(&today, PrimitiveType::Dateonly, &[GreaterThan, LessThan]).is_err());
        assert_eq!(
            rewrite_one(
                &ConditionTree::leaf("f", Past, Value::Null),
                PrimitiveType::Date,
                &[LessThan]
            )
            .expect("ok"),
            ConditionTree::leaf("f", LessThan, Value::Date(utc("2024-05-20T12:00:00Z")))
        );
    }

    #[test]
    fn advertised_operators_match_the_agent_for_the_sequelize_native_set() {
        use Operator::*;
        // §14.3: native set of the agent's SQL datasource for Number columns.
        let number = ColumnType::Primitive(PrimitiveType::Number);
        let native: BTreeSet<_> = [
            Present,
            Missing,
            Equal,
            NotEqual,
            In,
            NotIn,
            LessThan,
            GreaterThan,
            LessThanOrEqual,
            GreaterThanOrEqual,
        ]
        .into();
        let expected: BTreeSet<_> = [
            Blank,
            Equal,
            GreaterThan,
            GreaterThanOrEqual,
            In,
            LessThan,
            LessThanOrEqual,
            Missing,
            NotEqual,
            NotIn,
            Present,
        ]
        .into();
        assert_eq!(derivable_operators(&number, &native), expected);
        let string = ColumnType::Primitive(PrimitiveType::String);
        let mut native_string = native.clone();
        native_string.extend([Like, ILike, NotContains, NotIContains]);
        let advertised = derivable_operators(&string, &native_string);
        for op in [
            Contains,
            EndsWith,
            IContains,
            IEndsWith,
            ILike,
            IStartsWith,
            Like,
            NotContains,
            NotIContains,
            StartsWith,
        ] {
            assert!(advertised.contains(&op), "{op}");
        }
        assert!(!advertised.contains(&LongerThan));
        assert!(!advertised.contains(&Match));
        let dates = derivable_operators(&ColumnType::Primitive(PrimitiveType::Date), &native);
        for op in [
            After,
            Before,
            Future,
            Past,
            Today,
            Yesterday,
            PreviousWeekToDate,
            PreviousXDays,
            BeforeXHoursAgo,
            AfterXHoursAgo,
        ] {
            assert!(dates.contains(&op), "{op}");
        }
    }
}
