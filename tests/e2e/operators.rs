//! Operators end to end: every date operator on Date and Dateonly columns against rows placed
//! just inside and just outside each bound, relative to the real clock, for callers east and west
//! of UTC; trees rewritten by the equivalence layer select the same rows as the originals; and
//! string operators compare by code points whatever the column's collation or type.
//!
//! The expected sets come from an independent, deliberately naive computation of the periods
//! (chrono only), not from Canopy's lowering.

use std::collections::BTreeSet;

use canopy::datasource::query::equivalence;
use canopy::datasource::query::evaluate::{self, Matcher};
use canopy::datasource::sql::{Options, SqlDataSource};
use canopy::datasource::{
    AggregateResult, Aggregation, Caller, Collection, ColumnType, ConditionTree, DataSource,
    Filter, Operator, PrimitiveType, Projection, Record, Value,
};
use canopy_e2e::{Backend, TestDb, caller_in, collection, on_all_backends};
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

/// DDL types per backend: a UTC timestamp column and an integer key.
fn timestamp_type(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "DATETIME",
        Backend::Postgres => "TIMESTAMPTZ",
        Backend::MySql => "DATETIME(3)",
    }
}

/// A UTC instant as a literal the backend stores as that instant.
fn timestamp_literal(backend: Backend, t: DateTime<Utc>) -> String {
    let text = t.format("%Y-%m-%d %H:%M:%S%.3f");
    match backend {
        Backend::Postgres => format!("'{text}+00'"),
        Backend::MySql | Backend::Sqlite => format!("'{text}'"),
    }
}

fn sql_value(backend: Backend, value: &Option<Bound>) -> String {
    match value {
        None => "NULL".to_owned(),
        Some(Bound::Instant(t)) => timestamp_literal(backend, *t),
        Some(Bound::Day(d)) => format!("'{}'", d.format("%Y-%m-%d")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Bound {
    Instant(DateTime<Utc>),
    Day(NaiveDate),
}

/// The first instant of a local date (test-side: the earliest valid local time at or after
/// midnight, found minute by minute).
fn local_midnight(tz: Tz, date: NaiveDate) -> DateTime<Utc> {
    let midnight = date.and_time(NaiveTime::MIN);
    (0..24 * 60)
        .find_map(|m| {
            tz.from_local_datetime(&(midnight + Duration::minutes(m)))
                .earliest()
        })
        .expect("a day has a first instant")
        .with_timezone(&Utc)
}

/// Calendar facts about "now" for the caller, computed naively.
struct Calendar {
    tz: Tz,
    now: DateTime<Utc>,
    today: NaiveDate,
}

impl Calendar {
    fn new(tz: Tz, now: DateTime<Utc>) -> Self {
        Self {
            tz,
            now,
            today: now.with_timezone(&tz).date_naive(),
        }
    }

    fn week_start(&self, weeks_back: i64) -> NaiveDate {
        let monday =
            self.today - Duration::days(i64::from(self.today.weekday().num_days_from_monday()));
        monday - Duration::weeks(weeks_back)
    }

    /// First day of the period of `span` months (1 = month, 3 = quarter, 12 = year) that is
    /// `back` periods before the current one.
    fn period_start(&self, span: u32, back: i32) -> NaiveDate {
        let first_month0 = self.today.month0() / span * span;
        let index = self.today.year() * 12 + first_month0 as i32 - back * span as i32;
        NaiveDate::from_ymd_opt(index.div_euclid(12), index.rem_euclid(12) as u32 + 1, 1)
            .expect("valid month")
    }

    /// `[start, end)` of an operator, as local dates (None = the instant "now").
    fn interval(&self, op: Operator) -> Option<(NaiveDate, Option<NaiveDate>)> {
        use Operator::*;
        let t = self.today;
        Some(match op {
            Today => (t, Some(t + Duration::days(1))),
            Yesterday => (t - Duration::days(1), Some(t)),
            PreviousWeek => (self.week_start(1), Some(self.week_start(0))),
            PreviousWeekToDate => (self.week_start(0), None),
            PreviousMonth => (self.period_start(1, 1), Some(self.period_start(1, 0))),
            PreviousMonthToDate => (self.period_start(1, 0), None),
            PreviousQuarter => (self.period_start(3, 1), Some(self.period_start(3, 0))),
            PreviousQuarterToDate => (self.period_start(3, 0), None),
            PreviousYear => (self.period_start(12, 1), Some(self.period_start(12, 0))),
            PreviousYearToDate => (self.period_start(12, 0), None),
            PreviousXDays => (t - Duration::days(X_DAYS), Some(t)),
            PreviousXDaysToDate => (t - Duration::days(X_DAYS), None),
            _ => return None,
        })
    }

    /// Whether an instant of a Date column satisfies the operator.
    fn date_matches(&self, op: Operator, at: DateTime<Utc>) -> bool {
        use Operator::*;
        if let Some((start, end)) = self.interval(op) {
            let end = end.map_or(self.now, |e| local_midnight(self.tz, e));
            return local_midnight(self.tz, start) <= at && at < end;
        }
        let hours_ago = self.now - Duration::hours(X_HOURS);
        match op {
            Past => at < self.now,
            Future => at > self.now,
            BeforeXHoursAgo => at < hours_ago,
            AfterXHoursAgo => at > hours_ago,
            Before => at < local_midnight(self.tz, self.today),
            After => at > local_midnight(self.tz, self.today),
            other => panic!("not a date operator: {other}"),
        }
    }

    /// Whether a date of a Dateonly column satisfies the operator. "To date" periods and
    /// Past/Future compare with today's date, as the agent does.
    fn dateonly_matches(&self, op: Operator, day: NaiveDate) -> bool {
        use Operator::*;
        if let Some((start, end)) = self.interval(op) {
            return start <= day && day < end.unwrap_or(self.today);
        }
        match op {
            Past | Before => day < self.today,
            Future | After => day > self.today,
            other => panic!("not a Dateonly operator: {other}"),
        }
    }

    /// Every calendar bound of every operator, as local dates.
    fn day_bounds(&self) -> Vec<NaiveDate> {
        let mut out = vec![self.today];
        for op in DATE_OPERATORS {
            if let Some((start, end)) = self.interval(*op) {
                out.push(start);
                out.extend(end);
            }
        }
        out
    }

    /// Instants near every bound of the Date operators: each local midnight bound and one
    /// second on each side, and one minute on each side of the moving bounds (`now`, `now - X
    /// hours`), far enough that the query's own clock reading cannot cross them.
    fn instants(&self) -> BTreeSet<DateTime<Utc>> {
        let mut out = BTreeSet::new();
        for day in self.day_bounds() {
            let midnight = local_midnight(self.tz, day);
            out.extend([
                midnight - Duration::seconds(1),
                midnight,
                midnight + Duration::seconds(1),
            ]);
        }
        for moving in [self.now, self.now - Duration::hours(X_HOURS)] {
            out.extend([moving - Duration::minutes(1), moving + Duration::minutes(1)]);
        }
        // Milliseconds are stored by every backend (DATETIME(3) on MySQL).
        out.into_iter()
            .map(|t| DateTime::from_timestamp_millis(t.timestamp_millis()).expect("valid instant"))
            .collect()
    }

    /// Dates around every calendar bound.
    fn days(&self) -> BTreeSet<NaiveDate> {
        self.day_bounds()
            .into_iter()
            .flat_map(|d| [d - Duration::days(1), d, d + Duration::days(1)])
            .collect()
    }
}

const X_DAYS: i64 = 3;
const X_HOURS: i64 = 2;

const DATE_OPERATORS: &[Operator] = &[
    Operator::Today,
    Operator::Yesterday,
    Operator::PreviousWeek,
    Operator::PreviousWeekToDate,
    Operator::PreviousMonth,
    Operator::PreviousMonthToDate,
    Operator::PreviousQuarter,
    Operator::PreviousQuarterToDate,
    Operator::PreviousYear,
    Operator::PreviousYearToDate,
    Operator::PreviousXDays,
    Operator::PreviousXDaysToDate,
    Operator::Past,
    Operator::Future,
    Operator::BeforeXHoursAgo,
    Operator::AfterXHoursAgo,
    Operator::Before,
    Operator::After,
];

/// The leaf value an operator takes in these tests.
fn operator_value(op: Operator, calendar: &Calendar, dateonly: bool) -> Value {
    use Operator::*;
    match op {
        PreviousXDays | PreviousXDaysToDate => Value::Int(X_DAYS),
        BeforeXHoursAgo | AfterXHoursAgo => Value::Int(X_HOURS),
        Before | After if dateonly => Value::Dateonly(calendar.today),
        Before | After => Value::Date(local_midnight(calendar.tz, calendar.today)),
        _ => Value::Null,
    }
}

async fn ids_where(c: &dyn Collection, caller: &Caller, tree: ConditionTree) -> BTreeSet<i64> {
    let records = c
        .list(
            caller,
            &Filter::new(Some(tree.clone())),
            &Projection::new(["id"]),
        )
        .await
        .unwrap_or_else(|e| panic!("list failed for {tree:?}: {e:?}"));
    records
        .iter()
        .map(|r| match r.get("id") {
            Some(Value::Int(i)) => *i,
            other => panic!("expected an integer id, got {other:?}"),
        })
        .collect()
}

/// Rows around every bound, one query per operator and column; returns the mismatches (the
/// clock may cross a local midnight during the run, which the caller detects and retries).
async fn check_date_operators(backend: Backend, tz_name: &str) -> Vec<String> {
    let caller = caller_in(tz_name);
    let tz = caller.timezone;
    let calendar = Calendar::new(tz, Utc::now());
    let db = TestDb::new(backend).await;
    db.execute(&format!(
        "CREATE TABLE events (id INT PRIMARY KEY, at {} NULL, day DATE NULL)",
        timestamp_type(backend)
    ))
    .await;

    // Row 1 has neither value: no time operator matches NULL.
    let mut rows: Vec<(i64, Option<Bound>, Option<Bound>)> = vec![(1, None, None)];
    for t in calendar.instants() {
        rows.push((rows.len() as i64 + 1, Some(Bound::Instant(t)), None));
    }
    for d in calendar.days() {
        rows.push((rows.len() as i64 + 1, None, Some(Bound::Day(d))));
    }
    let values: Vec<String> = rows
        .iter()
        .map(|(id, at, day)| {
            format!(
                "({id}, {}, {})",
                sql_value(backend, at),
                sql_value(backend, day)
            )
        })
        .collect();
    db.execute(&format!(
        "INSERT INTO events (id, at, day) VALUES {}",
        values.join(", ")
    ))
    .await;
    let ds = db.datasource(Options::default()).await;
    let events = collection(&ds, "events");

    let mut mismatches = Vec::new();
    for op in DATE_OPERATORS {
        for (field, dateonly) in [("at", false), ("day", true)] {
            if dateonly && matches!(op, Operator::BeforeXHoursAgo | Operator::AfterXHoursAgo) {
                continue;
            }
            let expected: BTreeSet<i64> = rows
                .iter()
                .filter(|(_, at, day)| match (at, day, dateonly) {
                    (Some(Bound::Instant(t)), _, false) => calendar.date_matches(*op, *t),
                    (_, Some(Bound::Day(d)), true) => calendar.dateonly_matches(*op, *d),
                    _ => false,
                })
                .map(|(id, _, _)| *id)
                .collect();
            let tree = ConditionTree::leaf(field, *op, operator_value(*op, &calendar, dateonly));
            let actual = ids_where(events.as_ref(), &caller, tree).await;
            if actual != expected {
                let describe = |ids: &BTreeSet<i64>| -> Vec<String> {
                    ids.iter()
                        .map(|id| format!("{id}:{:?}", rows[*id as usize - 1]))
                        .collect()
                };
                mismatches.push(format!(
                    "{op} on {field} ({tz_name}, now {}): missing {:?}, unexpected {:?}",
                    calendar.now,
                    describe(&expected.difference(&actual).copied().collect()),
                    describe(&actual.difference(&expected).copied().collect()),
                ));
            }
        }
    }

    // The fix over the agent: a row exactly at local midnight belongs to Today.
    let midnight = local_midnight(tz, calendar.today);
    let midnight_row = rows
        .iter()
        .find(|(_, at, _)| *at == Some(Bound::Instant(midnight)))
        .map(|(id, _, _)| *id)
        .expect("a row at local midnight");
    let today = ids_where(
        events.as_ref(),
        &caller,
        ConditionTree::leaf("at", Operator::Today, Value::Null),
    )
    .await;
    if !today.contains(&midnight_row) {
        mismatches.push(format!(
            "the row at local midnight ({midnight}) is not in Today"
        ));
    }
    // Whether the local date changed while we ran: then the mismatches may be the clock's.
    if Utc::now().with_timezone(&tz).date_naive() != calendar.today {
        return vec!["RETRY".to_owned()];
    }
    mismatches
}

async fn date_operators(backend: Backend, tz_name: &str) {
    let mut mismatches = check_date_operators(backend, tz_name).await;
    if mismatches == ["RETRY"] {
        mismatches = check_date_operators(backend, tz_name).await;
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// East of UTC (UTC+12/+13, southern-hemisphere DST).
async fn date_operators_in_auckland(backend: Backend) {
    date_operators(backend, "Pacific/Auckland").await;
}

/// West of UTC (UTC-5/-4).
async fn date_operators_in_new_york(backend: Backend) {
    date_operators(backend, "America/New_York").await;
}

// ------------------------------------------------------------------------------------------------
// Equivalence: rewritten trees select the same rows

/// The native operators of the agent's SQL (Sequelize) datasource (§9.1): what the equivalence
/// layer must reach everything else from.
fn sequelize_native(column_type: &ColumnType) -> BTreeSet<Operator> {
    use Operator::*;
    let mut ops: BTreeSet<Operator> = [Present, Missing, Equal, NotEqual, In, NotIn].into();
    match column_type.primitive() {
        Some(PrimitiveType::Number | PrimitiveType::Date | PrimitiveType::Dateonly) => {
            ops.extend([LessThan, GreaterThan, LessThanOrEqual, GreaterThanOrEqual]);
        }
        Some(PrimitiveType::String) => {
            ops.extend([
                LessThan,
                GreaterThan,
                LessThanOrEqual,
                GreaterThanOrEqual,
                Like,
                ILike,
                NotContains,
                NotIContains,
            ]);
        }
        _ => {}
    }
    ops
}

/// A deliberately poor datasource: equality, strict comparisons and regexes only.
fn minimal_native(_: &ColumnType) -> BTreeSet<Operator> {
    use Operator::*;
    [Equal, NotEqual, LessThan, GreaterThan, Match].into()
}

async fn rewritten_trees_select_the_same_rows(backend: Backend) {
    use Operator::*;
    let db = TestDb::new(backend).await;
    db.execute(&format!(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40) NULL, qty INT NULL, at {} NULL, day DATE NULL)",
        timestamp_type(backend)
    ))
    .await;
    let now = Utc::now();
    let ts = |hours: i64| timestamp_literal(backend, now - Duration::hours(hours));
    let day = |days: i64| {
        format!(
            "'{}'",
            (now.date_naive() - Duration::days(days)).format("%Y-%m-%d")
        )
    };
    db.execute(&format!(
        "INSERT INTO items (id, name, qty, at, day) VALUES
           (1, 'Apple pie', 3, {}, {}),
           (2, 'apple', 0, {}, {}),
           (3, '50% off_sale', -2, {}, {}),
           (4, '', NULL, NULL, NULL),
           (5, NULL, 10, {}, {}),
           (6, 'Banana.split', 3, {}, {})",
        ts(1),
        day(0),
        ts(30),
        day(2),
        ts(24 * 40),
        day(40),
        ts(-5),
        day(-3),
        ts(24 * 400),
        day(400),
    ))
    .await;
    let ds: SqlDataSource = db.datasource(Options::default()).await;
    let items = collection(&ds, "items");
    let caller = caller_in("America/New_York");
    let leaf = |field: &str, op: Operator, value: Value| ConditionTree::leaf(field, op, value);
    let s = |v: &str| Value::String(v.to_owned());
    let cases = vec![
        leaf("name", Blank, Value::Null),
        leaf("name", Present, Value::Null),
        leaf("name", Missing, Value::Null),
        leaf("qty", Blank, Value::Null),
        leaf("qty", Present, Value::Null),
        leaf("name", Equal, s("apple")),
        leaf("name", NotEqual, s("apple")),
        leaf(
            "name",
            In,
            Value::Array(vec![s("apple"), s(""), Value::Null]),
        ),
        leaf(
            "name",
            NotIn,
            Value::Array(vec![s("apple"), s("Apple pie")]),
        ),
        leaf("name", NotIn, Value::Array(vec![s("apple"), Value::Null])),
        leaf("qty", In, Value::Array(vec![Value::Int(3), Value::Int(0)])),
        leaf("qty", In, Value::Array(vec![])),
        leaf("qty", NotIn, Value::Array(vec![])),
        leaf("qty", LessThanOrEqual, Value::Int(0)),
        leaf("qty", GreaterThanOrEqual, Value::Int(3)),
        leaf("name", Contains, s("pp")),
        leaf("name", Contains, s("0%")),
        leaf("name", Contains, s("f_s")),
        leaf("name", StartsWith, s("App")),
        leaf("name", EndsWith, s("split")),
        leaf("name", IContains, s("APP")),
        leaf("name", IStartsWith, s("apple")),
        leaf("name", IEndsWith, s("PIE")),
        leaf("name", Like, s("%p_e%")),
        leaf("name", Like, s("Banana.%")),
        leaf("name", ILike, s("a%")),
        leaf("name", ILike, s("50\\%%")),
        leaf("at", Today, Value::Null),
        leaf("at", Yesterday, Value::Null),
        leaf("at", PreviousXDaysToDate, Value::Int(2)),
        leaf("at", Past, Value::Null),
        leaf("at", Future, Value::Null),
        leaf("at", AfterXHoursAgo, Value::Int(12)),
        leaf("at", PreviousYear, Value::Null),
        leaf("day", PreviousMonthToDate, Value::Null),
        leaf("day", PreviousXDays, Value::Int(7)),
        leaf("day", Future, Value::Null),
        leaf("day", Before, Value::Dateonly(now.date_naive())),
    ];
    let schema = ds.schema();
    let items_schema = schema.collection("items").expect("items");
    let mut failures = Vec::new();
    for tree in cases {
        let original = ids_where(items.as_ref(), &caller, tree.clone()).await;
        for (name, native) in [
            (
                "sequelize",
                &sequelize_native as &dyn Fn(&ColumnType) -> BTreeSet<Operator>,
            ),
            ("minimal", &minimal_native),
        ] {
            let rewritten = match equivalence::rewrite(
                &tree,
                items_schema,
                schema,
                native,
                caller.timezone,
                caller.now(),
            ) {
                Ok(t) => t,
                // Not every operator is reachable from the minimal set (e.g. Missing needs Equal
                // with null, which it has; IContains needs ILike or Match, which it has).
                Err(e) => {
                    failures.push(format!("{name}: no rewrite for {tree:?}: {e}"));
                    continue;
                }
            };
            // Every leaf of the rewrite uses a native operator.
            for l in rewritten.leaves() {
                let column = items_schema.column(&l.field).expect("column");
                assert!(
                    native(&column.column_type).contains(&l.operator),
                    "{name}: {l:?} is not native"
                );
            }
            let got = ids_where(items.as_ref(), &caller, rewritten.clone()).await;
            if got != original {
                failures.push(format!("{name}: {tree:?} selects {original:?} but its rewrite {rewritten:?} selects {got:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The words of `strings_compare_exactly`, one row each (ids from 1), then a NULL row.
const WORDS: &[&str] = &[
    "a", "A", "b", "b ", "é", "É", "e", "", " ", "a\\", "ab", "x%_",
];

/// Strings compare by code points on every database, as the evaluator does, whatever the column:
/// on MySQL a `utf8mb4_general_ci` column (the harness creates `utf8mb4_bin` databases, real
/// ones mostly use `_ci` collations: case- and accent-insensitive, and PAD SPACE like every
/// MySQL collation but the `NO PAD` ones) and a latin1 one; `char(3)` everywhere (padded when
/// read on PostgreSQL, trimmed on MySQL). Filters must select exactly the rows whose values, as
/// read, the evaluator accepts; groups must not merge values that differ.
async fn strings_compare_exactly(backend: Backend) {
    use Operator::*;
    let db = TestDb::new(backend).await;
    let (ci, latin) = match backend {
        Backend::MySql => (
            "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            "VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci",
        ),
        Backend::Postgres | Backend::Sqlite => ("VARCHAR(20)", "VARCHAR(20)"),
    };
    db.execute(&format!(
        "CREATE TABLE words (id INT PRIMARY KEY, ci {ci} NULL, latin {latin} NULL, fixed CHAR(3) NULL)"
    ))
    .await;
    let literal = |w: &str| {
        let quoted = w.replace('\'', "''");
        // MySQL reads backslashes in literals as escapes.
        if backend == Backend::MySql {
            format!("'{}'", quoted.replace('\\', "\\\\"))
        } else {
            format!("'{quoted}'")
        }
    };
    let rows: Vec<String> = WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let fixed = if w.chars().count() <= 3 {
                literal(w)
            } else {
                "NULL".to_owned()
            };
            format!("({}, {}, {}, {fixed})", i + 1, literal(w), literal(w))
        })
        .chain([format!("({}, NULL, NULL, NULL)", WORDS.len() + 1)])
        .collect();
    db.execute(&format!(
        "INSERT INTO words (id, ci, latin, fixed) VALUES {}",
        rows.join(", ")
    ))
    .await;
    let ds: SqlDataSource = db.datasource(Options::default()).await;
    let words = collection(&ds, "words");
    let caller = caller_in("UTC");
    let id_of = |w: &str| WORDS.iter().position(|x| *x == w).expect("a word") as i64 + 1;
    let ids = |ws: &[&str]| ws.iter().map(|w| id_of(w)).collect::<BTreeSet<i64>>();
    let null_row = WORDS.len() as i64 + 1;
    let text = |w: &str| Value::String(w.to_owned());

    // The cases a collation gets wrong, spelled out.
    for column in ["ci", "latin"] {
        let check = |op: Operator, value: Value, expected: BTreeSet<i64>| {
            let tree = ConditionTree::leaf(column, op, value);
            let words = words.clone();
            let caller = caller.clone();
            async move {
                assert_eq!(
                    ids_where(words.as_ref(), &caller, tree.clone()).await,
                    expected,
                    "{backend:?}: {tree:?}"
                );
            }
        };
        check(Equal, text("A"), ids(&["A"])).await;
        check(Equal, text("a"), ids(&["a"])).await;
        check(Equal, text("b"), ids(&["b"])).await;
        check(Equal, text("b "), ids(&["b "])).await;
        check(Equal, text("e"), ids(&["e"])).await;
        check(Equal, text(""), ids(&[""])).await;
        check(
            In,
            Value::Array(vec![text("A"), text("b ")]),
            ids(&["A", "b "]),
        )
        .await;
        let mut not_b = ids(WORDS);
        not_b.remove(&id_of("b "));
        not_b.insert(null_row);
        check(NotIn, Value::Array(vec![text("b ")]), not_b.clone()).await;
        check(NotEqual, text("b "), not_b).await;
        check(Blank, Value::Null, [id_of(""), null_row].into()).await;
        check(Like, text("a\\"), ids(&["a\\"])).await;
        check(ILike, text("A\\"), ids(&["a\\"])).await;
        check(ILike, text("É"), ids(&["é", "É"])).await;
        check(IContains, text("é"), ids(&["é", "É"])).await;
        check(Like, text("é"), ids(&["é"])).await;
        check(Like, text("_"), ids(&["a", "A", "b", "é", "É", "e", " "])).await;
        check(Like, text("b_"), ids(&["b "])).await;
    }

    // Every operator on every column against the evaluator, on the values as read.
    let schema = ds.schema();
    let collection_schema = schema.collection("words").expect("words collection");
    let records: Vec<Record> = words
        .list(
            &caller,
            &Filter::default(),
            &Projection::new(["id", "ci", "latin", "fixed"]),
        )
        .await
        .expect("list words");
    let id = |r: &Record| match r.get("id") {
        Some(Value::Int(i)) => *i,
        other => panic!("expected an integer id, got {other:?}"),
    };
    let mut values: Vec<Value> = WORDS.iter().map(|w| text(w)).collect();
    for r in &records {
        if let Some(v @ Value::String(_)) = r.get("fixed") {
            values.push(v.clone());
        }
    }
    let patterns = ["%", "_", "A%", "%\\", "b_", "_ ", "%É%", "x\\%\\_", "\\"];
    let mut failures = Vec::new();
    for column in ["ci", "latin", "fixed"] {
        let mut trees = vec![
            ConditionTree::leaf(column, Blank, Value::Null),
            ConditionTree::leaf(column, Present, Value::Null),
            ConditionTree::leaf(column, LongerThan, Value::Int(1)),
            ConditionTree::leaf(column, ShorterThan, Value::Int(3)),
        ];
        for value in &values {
            for op in [
                Equal,
                NotEqual,
                Contains,
                NotContains,
                IContains,
                NotIContains,
                StartsWith,
                IStartsWith,
                EndsWith,
                IEndsWith,
                Like,
                ILike,
            ] {
                trees.push(ConditionTree::leaf(column, op, value.clone()));
            }
            for op in [In, NotIn] {
                trees.push(ConditionTree::leaf(
                    column,
                    op,
                    Value::Array(vec![value.clone()]),
                ));
                trees.push(ConditionTree::leaf(
                    column,
                    op,
                    Value::Array(vec![value.clone(), Value::Null]),
                ));
            }
        }
        for pattern in patterns {
            for op in [Like, ILike] {
                trees.push(ConditionTree::leaf(column, op, text(pattern)));
            }
        }
        for tree in trees {
            let matcher =
                Matcher::new(&tree, collection_schema, schema, chrono_tz::UTC, Utc::now())
                    .expect("the evaluator accepts the tree");
            let expected: BTreeSet<i64> = records
                .iter()
                .filter(|r| matcher.matches(r))
                .map(id)
                .collect();
            let got = ids_where(words.as_ref(), &caller, tree.clone()).await;
            if got != expected {
                failures.push(format!("{tree:?}: {got:?} instead of {expected:?}"));
            }
        }
        // Groups keep apart the values that differ.
        let aggregation = Aggregation::count().group_by(column, None);
        let got = words
            .aggregate(&caller, &Filter::default(), &aggregation, None)
            .await
            .expect("aggregate");
        let expected = evaluate::aggregate(&records, &aggregation, chrono_tz::UTC, None);
        let key = |rows: &[AggregateResult]| {
            let mut out: Vec<String> = rows
                .iter()
                .map(|r| format!("{:?} {:?}", r.group, r.value))
                .collect();
            out.sort();
            out
        };
        if key(&got) != key(&expected) {
            failures.push(format!(
                "groups of {column}: {:?} instead of {:?}",
                key(&got),
                key(&expected)
            ));
        }
    }
    assert!(failures.is_empty(), "{backend:?}:\n{}", failures.join("\n"));
}

on_all_backends!(
    date_operators_in_auckland,
    date_operators_in_new_york,
    rewritten_trees_select_the_same_rows,
    strings_compare_exactly
);
