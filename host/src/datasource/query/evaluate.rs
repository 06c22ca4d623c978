//! In-memory evaluation of condition trees on records, with the same semantics as the SQL
//! datasource. Used by emulation (customizer), validation, and the property tests that check SQL
//! against it. Also in-memory sorting and aggregation, for emulation and as test oracles.
//!
//! Semantics (two-valued: every `Not*` operator is the plain negation of its positive form):
//! - `Equal null` ≡ `Missing`; `In` matches NULL when the list holds null; `NotEqual`, `NotIn`,
//!   `NotContains`, `NotIContains` and `IncludesNone` match NULL rows.
//! - Comparisons, patterns, lengths, `Match` and `IncludesAll` never match NULL.
//! - `Blank` is NULL or `""`; `Present` is its negation.
//! - Numbers compare numerically across Int, Float and Decimal; Date, Dateonly and Time
//!   chronologically (a Dateonly against a Date is midnight UTC, as the database sessions run in
//!   UTC); strings by code points.
//! - `Like` is case-sensitive with `%` and `_` wildcards and `\` as the escape character
//!   (PostgreSQL's and MySQL's default); `ILike` lower-cases both sides. `Contains`,
//!   `StartsWith`, `EndsWith` and their `I` forms are literal. `LongerThan`/`ShorterThan` count
//!   characters. `Match` is an unanchored search with the regex crate.
//! - Time operators are lowered with [`lower_time_operators`] (bounds in the caller's timezone).
//! - An empty `Or` is false, an empty `And` is true.

use std::cmp::Ordering;
use std::collections::HashMap;

use bigdecimal::{BigDecimal, ToPrimitive};
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc};
use chrono_tz::Tz;
use indexmap::IndexMap;
use regex::Regex;

use super::aggregation::{AggregateResult, Aggregation, AggregationOperation, DateOperation};
use super::condition_tree::{Aggregator, ConditionTree, Leaf};
use super::equivalence::lower_time_operators;
use super::operator::Operator;
use super::sort::Sort;
use crate::datasource::error::{Error, Result};
use crate::datasource::record::{Record, Value};
use crate::datasource::schema::{CollectionSchema, DataSourceSchema};

/// Whether `record` matches `tree`. Paths read nested relation records.
pub fn matches(
    tree: &ConditionTree,
    record: &Record,
    collection: &CollectionSchema,
    schema: &DataSourceSchema,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<bool> {
    Ok(Matcher::new(tree, collection, schema, tz, now)?.matches(record))
}

/// A condition tree prepared for matching many records: time operators lowered once, patterns
/// and regexes compiled once.
#[derive(Debug)]
pub struct Matcher {
    root: Node,
}

#[derive(Debug)]
enum Node {
    All(Vec<Node>),
    Any(Vec<Node>),
    Test { path: String, test: Test },
}

/// One leaf, ready to run on a value.
#[derive(Debug)]
enum Test {
    Blank,
    Present,
    Missing,
    Equal(Value),
    NotEqual(Value),
    In(Vec<Value>),
    NotIn(Vec<Value>),
    Compare(Operator, Value),
    Like {
        pattern: Vec<LikeToken>,
        case_insensitive: bool,
    },
    /// Contains / StartsWith / EndsWith and their I- and Not- forms.
    Substring {
        needle: String,
        position: Position,
        case_insensitive: bool,
        negated: bool,
    },
    LongerThan(f64),
    ShorterThan(f64),
    Match(Regex),
    IncludesAll(Vec<Value>),
    IncludesNone(Vec<Value>),
}

#[derive(Debug, Clone, Copy)]
enum Position {
    Anywhere,
    Start,
    End,
}

#[derive(Debug, Clone, PartialEq)]
enum LikeToken {
    /// `%`: any run of characters.
    Any,
    /// `_`: exactly one character.
    One,
    Literal(char),
}

impl Matcher {
    /// Prepares `tree`: lowers time operators in `tz` at `now`, compiles patterns. Fails on an
    /// unknown field path (time operators only), a bad regex or a value of the wrong kind.
    pub fn new(
        tree: &ConditionTree,
        collection: &CollectionSchema,
        schema: &DataSourceSchema,
        tz: Tz,
        now: DateTime<Utc>,
    ) -> Result<Self> {
        let lowered = lower_time_operators(tree, collection, schema, tz, now)?;
        Ok(Self {
            root: compile(&lowered)?,
        })
    }

    /// Whether the record matches.
    pub fn matches(&self, record: &Record) -> bool {
        self.root.eval(record)
    }
}

fn compile(tree: &ConditionTree) -> Result<Node> {
    Ok(match tree {
        ConditionTree::Branch {
            aggregator,
            conditions,
        } => {
            let children = conditions.iter().map(compile).collect::<Result<Vec<_>>>()?;
            match aggregator {
                Aggregator::And => Node::All(children),
                Aggregator::Or => Node::Any(children),
            }
        }
        ConditionTree::Leaf(leaf) => Node::Test {
            path: leaf.field.clone(),
            test: compile_leaf(leaf)?,
        },
    })
}

fn list(value: &Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    }
}

fn compile_leaf(leaf: &Leaf) -> Result<Test> {
    use Operator::*;
    let text = || {
        leaf.value.as_str().map(str::to_owned).ok_or_else(|| {
            Error::validation(format!(
                "Wrong type for \"{}\": {}. Expects String",
                leaf.field, leaf.value
            ))
        })
    };
    let number = || {
        leaf.value.as_f64().ok_or_else(|| {
            Error::validation(format!(
                "Wrong type for \"{}\": {}. Expects Number",
                leaf.field, leaf.value
            ))
        })
    };
    let substring = |position, case_insensitive, negated| -> Result<Test> {
        let needle = text()?;
        let needle = if case_insensitive {
            needle.to_lowercase()
        } else {
            needle
        };
        Ok(Test::Substring {
            needle,
            position,
            case_insensitive,
            negated,
        })
    };
    Ok(match leaf.operator {
        Blank => Test::Blank,
        Present => Test::Present,
        Missing => Test::Missing,
        Equal => Test::Equal(leaf.value.clone()),
        NotEqual => Test::NotEqual(leaf.value.clone()),
        In => Test::In(list(&leaf.value)),
        NotIn => Test::NotIn(list(&leaf.value)),
        LessThan | GreaterThan | LessThanOrEqual | GreaterThanOrEqual => {
            Test::Compare(leaf.operator, leaf.value.clone())
        }
        Like => Test::Like {
            pattern: parse_like(&text()?, false),
            case_insensitive: false,
        },
        ILike => Test::Like {
            pattern: parse_like(&text()?, true),
            case_insensitive: true,
        },
        Contains => substring(Position::Anywhere, false, false)?,
        NotContains => substring(Position::Anywhere, false, true)?,
        IContains => substring(Position::Anywhere, true, false)?,
        NotIContains => substring(Position::Anywhere, true, true)?,
        StartsWith => substring(Position::Start, false, false)?,
        IStartsWith => substring(Position::Start, true, false)?,
        EndsWith => substring(Position::End, false, false)?,
        IEndsWith => substring(Position::End, true, false)?,
        LongerThan => Test::LongerThan(number()?),
        ShorterThan => Test::ShorterThan(number()?),
        Match => {
            let source = text()?;
            Test::Match(Regex::new(&source).map_err(|e| {
                Error::validation(format!(
                    "Invalid regular expression for \"{}\": {e}",
                    leaf.field
                ))
            })?)
        }
        IncludesAll => Test::IncludesAll(list(&leaf.value)),
        IncludesNone => Test::IncludesNone(list(&leaf.value)),
        // Lowered before compiling; reaching here means a tree that was not lowered.
        other => {
            return Err(Error::Internal(format!(
                "operator {other} reached the evaluator unlowered"
            )));
        }
    })
}

/// Splits a Like pattern into tokens; `\` escapes the next character (a trailing one is literal).
fn parse_like(pattern: &str, lowercase: bool) -> Vec<LikeToken> {
    let source = if lowercase {
        pattern.to_lowercase()
    } else {
        pattern.to_owned()
    };
    let mut out = Vec::new();
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '%' => {
                // Consecutive `%` are one.
                if out.last() == Some(&LikeToken::Any) {
                    continue;
                }
                LikeToken::Any
            }
            '_' => LikeToken::One,
            '\\' => LikeToken::Literal(chars.next().unwrap_or('\\')),
            other => LikeToken::Literal(other),
        });
    }
    out
}

/// Wildcard matching with backtracking on the last `%` (linear in practice).
fn like_matches(pattern: &[LikeToken], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(LikeToken::Any) => {
                star = Some((p, t));
                p += 1;
            }
            Some(LikeToken::One) => {
                p += 1;
                t += 1;
            }
            Some(LikeToken::Literal(c)) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|token| *token == LikeToken::Any)
}

impl Node {
    fn eval(&self, record: &Record) -> bool {
        match self {
            Node::All(children) => children.iter().all(|c| c.eval(record)),
            Node::Any(children) => children.iter().any(|c| c.eval(record)),
            Node::Test { path, test } => {
                // An absent path (not projected) reads as NULL.
                let value = record.get_path(path).unwrap_or(&Value::Null);
                test.eval(value)
            }
        }
    }
}

/// The text of a value for pattern operators: strings as they are, other scalars in their wire
/// form (a database would cast them to text).
fn text_of(value: &Value) -> Option<std::borrow::Cow<'_, str>> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(std::borrow::Cow::Borrowed(s)),
        other => Some(std::borrow::Cow::Owned(other.to_id_string())),
    }
}

impl Test {
    fn eval(&self, value: &Value) -> bool {
        match self {
            Test::Blank => is_blank(value),
            Test::Present => !is_blank(value),
            Test::Missing => value.is_null(),
            Test::Equal(expected) => equals(value, expected),
            Test::NotEqual(expected) => !equals(value, expected),
            Test::In(items) => items.iter().any(|i| equals(value, i)),
            Test::NotIn(items) => !items.iter().any(|i| equals(value, i)),
            Test::Compare(op, bound) => match compare(value, bound) {
                None => false,
                Some(ordering) => match op {
                    Operator::LessThan => ordering == Ordering::Less,
                    Operator::GreaterThan => ordering == Ordering::Greater,
                    Operator::LessThanOrEqual => ordering != Ordering::Greater,
                    _ => ordering != Ordering::Less,
                },
            },
            Test::Like {
                pattern,
                case_insensitive,
            } => text_of(value).is_some_and(|text| {
                let chars: Vec<char> = if *case_insensitive {
                    text.to_lowercase().chars().collect()
                } else {
                    text.chars().collect()
                };
                like_matches(pattern, &chars)
            }),
            Test::Substring {
                needle,
                position,
                case_insensitive,
                negated,
            } => {
                let found = text_of(value).is_some_and(|text| {
                    let haystack = if *case_insensitive {
                        text.to_lowercase()
                    } else {
                        text.into_owned()
                    };
                    match position {
                        Position::Anywhere => haystack.contains(needle.as_str()),
                        Position::Start => haystack.starts_with(needle.as_str()),
                        Position::End => haystack.ends_with(needle.as_str()),
                    }
                });
                found != *negated
            }
            Test::LongerThan(n) => text_of(value).is_some_and(|t| (t.chars().count() as f64) > *n),
            Test::ShorterThan(n) => text_of(value).is_some_and(|t| (t.chars().count() as f64) < *n),
            Test::Match(regex) => text_of(value).is_some_and(|t| regex.is_match(&t)),
            Test::IncludesAll(items) => match value {
                Value::Array(values) => items.iter().all(|i| values.iter().any(|v| equals(v, i))),
                _ => false,
            },
            Test::IncludesNone(items) => match value {
                Value::Array(values) => !items.iter().any(|i| values.iter().any(|v| equals(v, i))),
                Value::Null => true,
                _ => false,
            },
        }
    }
}

fn is_blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Equality as the database sees it: NULL equals only NULL (`Equal null` ≡ `Missing`), numbers
/// across representations, dates chronologically, uuids against their text.
pub fn equals(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Json(x), Value::Json(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(i, j)| equals(i, j))
        }
        (Value::Point(x1, y1), Value::Point(x2, y2)) => x1 == x2 && y1 == y2,
        _ => compare(a, b) == Some(Ordering::Equal),
    }
}

/// Midnight UTC of a date: how a database in a UTC session compares a DATE with a timestamp.
fn midnight_utc(d: NaiveDate) -> DateTime<Utc> {
    d.and_time(NaiveTime::MIN).and_utc()
}

fn to_decimal(value: &Value) -> Option<BigDecimal> {
    match value {
        Value::Int(i) => Some(BigDecimal::from(*i)),
        Value::Decimal(d) => Some(d.clone()),
        _ => None,
    }
}

/// The order of two non-null values of comparable kinds; `None` when they cannot be compared.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Int(_) | Decimal(_), Int(_) | Decimal(_)) => Some(to_decimal(a)?.cmp(&to_decimal(b)?)),
        (Int(_) | Decimal(_) | Float(_), Int(_) | Decimal(_) | Float(_)) => {
            a.as_f64()?.partial_cmp(&b.as_f64()?)
        }
        (String(x), String(y)) => Some(x.cmp(y)),
        (Bool(x), Bool(y)) => Some(x.cmp(y)),
        (Date(x), Date(y)) => Some(x.cmp(y)),
        (Dateonly(x), Dateonly(y)) => Some(x.cmp(y)),
        (Dateonly(x), Date(y)) => Some(midnight_utc(*x).cmp(y)),
        (Date(x), Dateonly(y)) => Some(x.cmp(&midnight_utc(*y))),
        (Time(x), Time(y)) => Some(x.cmp(y)),
        (Uuid(x), Uuid(y)) => Some(x.cmp(y)),
        (Uuid(x), String(y)) => ::uuid::Uuid::parse_str(y).ok().map(|y| x.cmp(&y)),
        (String(x), Uuid(y)) => ::uuid::Uuid::parse_str(x).ok().map(|x| x.cmp(y)),
        (Binary(x), Binary(y)) => Some(x.cmp(y)),
        (Json(x), Json(y)) => (x == y).then_some(Ordering::Equal),
        _ => None,
    }
}

// ------------------------------------------------------------------------------------------------
// Sorting

/// Sorts records in place by the clauses (stable). NULLs come first ascending and last
/// descending, as on SQLite and MySQL (PostgreSQL puts them last ascending unless told).
pub fn sort_records(records: &mut [Record], sort: &Sort) {
    records.sort_by(|a, b| {
        for clause in &sort.0 {
            let x = a.get_path(&clause.field).unwrap_or(&Value::Null);
            let y = b.get_path(&clause.field).unwrap_or(&Value::Null);
            let ordering = match (x, y) {
                (Value::Null, Value::Null) => Ordering::Equal,
                (Value::Null, _) => Ordering::Less,
                (_, Value::Null) => Ordering::Greater,
                _ => compare(x, y).unwrap_or_else(|| x.compare(y)),
            };
            let ordering = if clause.ascending {
                ordering
            } else {
                ordering.reverse()
            };
            if ordering != Ordering::Equal {
                return ordering;
            }
        }
        Ordering::Equal
    });
}

// ------------------------------------------------------------------------------------------------
// Aggregation

/// The first day of the period containing a date value; Date values are first read in `tz`.
/// Weeks start on Monday.
pub fn date_group(value: &Value, operation: DateOperation, tz: Tz) -> Value {
    let date = match value {
        Value::Date(t) => t.with_timezone(&tz).date_naive(),
        Value::Dateonly(d) => *d,
        _ => return Value::Null,
    };
    let first_of_month =
        |month: u32| NaiveDate::from_ymd_opt(date.year(), month, 1).unwrap_or(date);
    Value::Dateonly(match operation {
        DateOperation::Day => date,
        DateOperation::Week => {
            // Checked: a date at the start of chrono's range has no Monday before it.
            date.checked_sub_signed(Duration::days(i64::from(
                date.weekday().num_days_from_monday(),
            )))
            .unwrap_or(date)
        }
        DateOperation::Month => first_of_month(date.month()),
        DateOperation::Quarter => first_of_month((date.month() - 1) / 3 * 3 + 1),
        DateOperation::Year => first_of_month(1),
    })
}

/// A hashable key for a group value: numbers by their value, others by their debug form.
fn group_key(value: &Value) -> String {
    match value {
        Value::Int(i) => format!("n:{i}"),
        Value::Decimal(d) => match d.to_i64() {
            Some(i) if d.is_integer() => format!("n:{i}"),
            _ => format!("n:{}", d.normalized()),
        },
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("n:{}", *f as i64),
        other => format!("{other:?}"),
    }
}

/// Running totals of one group.
#[derive(Default)]
struct Accumulator {
    rows: u64,
    count: u64,
    sum: Option<Value>,
    float_sum: f64,
    min: Option<Value>,
    max: Option<Value>,
}

fn add_numbers(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => match x.checked_add(*y) {
            Some(s) => Value::Int(s),
            None => Value::Decimal(BigDecimal::from(*x) + BigDecimal::from(*y)),
        },
        (Value::Int(_) | Value::Decimal(_), Value::Int(_) | Value::Decimal(_)) => {
            match (to_decimal(a), to_decimal(b)) {
                (Some(x), Some(y)) => Value::Decimal(x + y),
                _ => Value::Null,
            }
        }
        _ => Value::Float(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
    }
}

impl Accumulator {
    fn add(&mut self, value: Option<&Value>) {
        self.rows += 1;
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return;
        };
        self.count += 1;
        if let Some(f) = value.as_f64() {
            self.float_sum += f;
            self.sum = Some(match &self.sum {
                None => value.clone(),
                Some(sum) => add_numbers(sum, value),
            });
        }
        let smaller = |current: &Value| {
            compare(value, current).unwrap_or_else(|| value.compare(current)) == Ordering::Less
        };
        if self.min.as_ref().is_none_or(smaller) {
            self.min = Some(value.clone());
        }
        let larger = |current: &Value| {
            compare(value, current).unwrap_or_else(|| value.compare(current)) == Ordering::Greater
        };
        if self.max.as_ref().is_none_or(larger) {
            self.max = Some(value.clone());
        }
    }

    /// The aggregate as SQL computes it: `COUNT(*)`, `COUNT(field)` (non-null values), and NULL
    /// for Sum/Avg/Min/Max over no value. Avg is a Float.
    fn result(self, operation: AggregationOperation, has_field: bool) -> Value {
        match operation {
            AggregationOperation::Count if has_field => Value::Int(self.count as i64),
            AggregationOperation::Count => Value::Int(self.rows as i64),
            AggregationOperation::Sum => self.sum.unwrap_or(Value::Null),
            AggregationOperation::Avg if self.count == 0 => Value::Null,
            AggregationOperation::Avg => match &self.sum {
                Some(Value::Int(_) | Value::Decimal(_)) => {
                    let sum = self.sum.as_ref().and_then(to_decimal).unwrap_or_default();
                    Value::Float(
                        (sum / BigDecimal::from(self.count))
                            .to_f64()
                            .unwrap_or(f64::NAN),
                    )
                }
                _ => Value::Float(self.float_sum / self.count as f64),
            },
            AggregationOperation::Min => self.min.unwrap_or(Value::Null),
            AggregationOperation::Max => self.max.unwrap_or(Value::Null),
        }
    }
}

/// Aggregates records in memory, as the SQL datasource would: one row per group (one row in
/// all when there are no groups, even over no record), date groups bucketed in `tz` with weeks
/// starting on Monday, rows ordered by value descending (NULLs last, ties in first-seen order),
/// at most `limit` rows.
pub fn aggregate(
    records: &[Record],
    aggregation: &Aggregation,
    tz: Tz,
    limit: Option<u64>,
) -> Vec<AggregateResult> {
    let mut order: Vec<(IndexMap<String, Value>, Accumulator)> = Vec::new();
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    if aggregation.groups.is_empty() {
        order.push((IndexMap::new(), Accumulator::default()));
        index.insert(Vec::new(), 0);
    }
    for record in records {
        let mut group = IndexMap::with_capacity(aggregation.groups.len());
        for g in &aggregation.groups {
            let raw = record.get_path(&g.field).cloned().unwrap_or(Value::Null);
            let value = match g.operation {
                Some(op) => date_group(&raw, op, tz),
                None => raw,
            };
            group.insert(g.field.clone(), value);
        }
        let key: Vec<String> = group.values().map(group_key).collect();
        let slot = *index.entry(key).or_insert_with(|| {
            order.push((group, Accumulator::default()));
            order.len() - 1
        });
        let value = aggregation
            .field
            .as_deref()
            .map(|f| record.get_path(f).unwrap_or(&Value::Null));
        order[slot].1.add(value);
    }
    let has_field = aggregation.field.is_some();
    let mut rows: Vec<AggregateResult> = order
        .into_iter()
        .map(|(group, acc)| AggregateResult {
            value: acc.result(aggregation.operation, has_field),
            group,
        })
        .collect();
    rows.sort_by(|a, b| match (&a.value, &b.value) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Greater,
        (_, Value::Null) => Ordering::Less,
        (x, y) => compare(y, x).unwrap_or(Ordering::Equal),
    });
    if let Some(limit) = limit {
        rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::query::SortClause;
    use crate::datasource::record::parse_datetime;
    use crate::datasource::schema::{ColumnSchema, FieldSchema, PrimitiveType, RelationSchema};
    use std::str::FromStr;

    fn schema() -> (CollectionSchema, DataSourceSchema) {
        let mut books = CollectionSchema::new("books");
        for (name, ty) in [
            ("id", PrimitiveType::Number),
            ("title", PrimitiveType::String),
            ("price", PrimitiveType::Number),
            ("published", PrimitiveType::Dateonly),
            ("stamp", PrimitiveType::Date),
            ("flag", PrimitiveType::Boolean),
        ] {
            books
                .fields
                .insert(name.into(), FieldSchema::Column(ColumnSchema::new(ty)));
        }
        books.fields.insert(
            "tags".into(),
            FieldSchema::Column(ColumnSchema::new(crate::datasource::ColumnType::Array(
                Box::new(PrimitiveType::String.into()),
            ))),
        );
        books.fields.insert(
            "author".into(),
            FieldSchema::Relation(RelationSchema::ManyToOne {
                foreign_collection: "authors".into(),
                foreign_key: "author_id".into(),
                foreign_key_target: "id".into(),
            }),
        );
        let mut authors = CollectionSchema::new("authors");
        authors.fields.insert(
            "id".into(),
            FieldSchema::Column(ColumnSchema::new(PrimitiveType::Number)),
        );
        authors.fields.insert(
            "name".into(),
            FieldSchema::Column(ColumnSchema::new(PrimitiveType::String)),
        );
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("books".into(), books.clone());
        schema.collections.insert("authors".into(), authors);
        (books, schema)
    }

    fn record(pairs: &[(&str, Value)]) -> Record {
        let mut r = Record::new();
        for (k, v) in pairs {
            r.set_path(k, v.clone());
        }
        r
    }

    fn now() -> DateTime<Utc> {
        parse_datetime("2024-05-20T12:00:00Z").expect("date")
    }

    fn check(tree: &ConditionTree, r: &Record) -> bool {
        let (books, schema) = schema();
        matches(tree, r, &books, &schema, chrono_tz::UTC, now()).expect("evaluates")
    }

    fn leaf(field: &str, op: Operator, value: impl Into<Value>) -> ConditionTree {
        ConditionTree::leaf(field, op, value)
    }

    fn s(v: &str) -> Value {
        Value::String(v.to_owned())
    }

    #[test]
    fn null_semantics() {
        use Operator::*;
        let null = record(&[("title", Value::Null), ("price", Value::Null)]);
        assert!(check(&leaf("title", NotEqual, "a"), &null));
        assert!(check(
            &leaf("title", NotIn, Value::Array(vec![s("a")])),
            &null
        ));
        assert!(!check(
            &leaf("title", NotIn, Value::Array(vec![s("a"), Value::Null])),
            &null
        ));
        assert!(check(
            &leaf("title", In, Value::Array(vec![s("a"), Value::Null])),
            &null
        ));
        assert!(!check(
            &leaf("title", In, Value::Array(vec![s("a")])),
            &null
        ));
        assert!(check(&leaf("title", Equal, Value::Null), &null));
        assert!(check(&leaf("title", NotContains, "a"), &null));
        assert!(check(&leaf("title", NotIContains, "a"), &null));
        assert!(!check(&leaf("title", Contains, "a"), &null));
        assert!(!check(&leaf("title", Like, "%"), &null));
        assert!(!check(&leaf("title", Match, ".*"), &null));
        assert!(!check(&leaf("title", LongerThan, Value::Int(-1)), &null));
        assert!(!check(&leaf("price", LessThan, Value::Int(5)), &null));
        assert!(!check(
            &leaf("price", GreaterThanOrEqual, Value::Int(5)),
            &null
        ));
        assert!(check(&leaf("title", Blank, Value::Null), &null));
        assert!(!check(&leaf("title", Present, Value::Null), &null));
        assert!(check(
            &leaf("tags", IncludesNone, Value::Array(vec![s("x")])),
            &record(&[("tags", Value::Null)])
        ));
        assert!(!check(
            &leaf("tags", IncludesAll, Value::Array(vec![s("x")])),
            &record(&[("tags", Value::Null)])
        ));
        // NULL compared with NULL is not "equal" for comparisons.
        assert!(!check(&leaf("price", LessThanOrEqual, Value::Null), &null));
    }

    #[test]
    fn blank_and_present_on_strings() {
        use Operator::*;
        let empty = record(&[("title", s(""))]);
        assert!(check(&leaf("title", Blank, Value::Null), &empty));
        assert!(!check(&leaf("title", Present, Value::Null), &empty));
        assert!(!check(&leaf("title", Missing, Value::Null), &empty));
        let zero = record(&[("price", Value::Int(0))]);
        assert!(!check(&leaf("price", Blank, Value::Null), &zero));
        assert!(check(&leaf("price", Present, Value::Null), &zero));
    }

    #[test]
    fn numbers_compare_across_representations() {
        use Operator::*;
        let r = record(&[(
            "price",
            Value::Decimal(BigDecimal::from_str("12.30").expect("decimal")),
        )]);
        assert!(check(&leaf("price", Equal, Value::Float(12.3)), &r));
        assert!(check(&leaf("price", GreaterThan, Value::Int(12)), &r));
        assert!(check(&leaf("price", LessThan, Value::Int(13)), &r));
        assert!(check(
            &leaf(
                "price",
                In,
                Value::Array(vec![
                    Value::Int(1),
                    Value::Decimal(BigDecimal::from_str("12.3").expect("d"))
                ])
            ),
            &r
        ));
        let big = record(&[(
            "price",
            Value::Decimal(BigDecimal::from_str("9007199254740993").expect("d")),
        )]);
        assert!(!check(
            &leaf("price", Equal, Value::Int(9_007_199_254_740_992)),
            &big
        ));
        assert!(check(
            &leaf("price", Equal, Value::Int(9_007_199_254_740_993)),
            &big
        ));
        assert!(check(
            &leaf("price", LessThanOrEqual, Value::Int(9_007_199_254_740_993)),
            &big
        ));
    }

    #[test]
    fn patterns() {
        use Operator::*;
        let r = record(&[("title", s("Ab%c_d"))]);
        assert!(check(&leaf("title", Like, "Ab%"), &r));
        assert!(!check(&leaf("title", Like, "ab%"), &r));
        assert!(check(&leaf("title", ILike, "ab%"), &r));
        assert!(check(&leaf("title", Like, "A_%c\\_d"), &r));
        assert!(!check(&leaf("title", Like, "A_%c\\%d"), &r));
        assert!(check(&leaf("title", Like, "%%"), &r));
        assert!(!check(&leaf("title", Like, "Ab"), &r));
        assert!(check(&leaf("title", Like, "_b%c_d"), &r));
        // Contains is literal: `%` and `_` are not wildcards.
        assert!(check(&leaf("title", Contains, "%c_"), &r));
        assert!(!check(&leaf("title", Contains, "A%d"), &r));
        assert!(!check(&leaf("title", Contains, "ab"), &r));
        assert!(check(&leaf("title", IContains, "aB%"), &r));
        assert!(check(&leaf("title", StartsWith, "Ab%"), &r));
        assert!(!check(&leaf("title", StartsWith, "b"), &r));
        assert!(check(&leaf("title", IStartsWith, "aB"), &r));
        assert!(check(&leaf("title", EndsWith, "_d"), &r));
        assert!(check(&leaf("title", IEndsWith, "C_D"), &r));
        assert!(!check(&leaf("title", NotContains, "b%"), &r));
        assert!(check(&leaf("title", NotIContains, "zz"), &r));
        assert!(check(&leaf("title", LongerThan, Value::Int(5)), &r));
        assert!(!check(&leaf("title", LongerThan, Value::Int(6)), &r));
        assert!(check(&leaf("title", ShorterThan, Value::Int(7)), &r));
        assert!(check(&leaf("title", Match, "b%c"), &r));
        assert!(!check(&leaf("title", Match, "^b"), &r));
        assert!(check(&leaf("title", Match, "(?i)^ab"), &r));
        let unicode = record(&[("title", s("Émile"))]);
        assert!(check(&leaf("title", ILike, "émile"), &unicode));
        assert!(check(&leaf("title", Like, "_mile"), &unicode));
        assert!(check(&leaf("title", ShorterThan, Value::Int(6)), &unicode));
        let (books, schema) = schema();
        assert!(
            matches(
                &leaf("title", Match, "("),
                &unicode,
                &books,
                &schema,
                chrono_tz::UTC,
                now()
            )
            .is_err()
        );
    }

    #[test]
    fn like_backtracking() {
        let p = parse_like("%a%b%c", false);
        let t: Vec<char> = "xxaxxbxxbxxc".chars().collect();
        assert!(like_matches(&p, &t));
        let t: Vec<char> = "xxaxxbxxbxx".chars().collect();
        assert!(!like_matches(&p, &t));
        assert!(like_matches(&parse_like("", false), &[]));
        assert!(!like_matches(&parse_like("", false), &['a']));
        assert!(like_matches(&parse_like("a\\", false), &['a', '\\']));
    }

    #[test]
    fn branches_and_relations() {
        use Operator::*;
        let r = record(&[("title", s("x")), ("author:name", s("Ann"))]);
        assert!(check(&ConditionTree::and(vec![]), &r));
        assert!(!check(&ConditionTree::or(vec![]), &r));
        assert!(check(&leaf("author:name", Equal, "Ann"), &r));
        assert!(check(
            &ConditionTree::or(vec![
                leaf("title", Equal, "y"),
                leaf("author:name", StartsWith, "A")
            ]),
            &r
        ));
        assert!(!check(
            &ConditionTree::and(vec![
                leaf("title", Equal, "y"),
                leaf("author:name", StartsWith, "A")
            ]),
            &r
        ));
        // A null relation reads as null fields.
        let orphan = record(&[("author", Value::Null)]);
        assert!(check(&leaf("author:name", Missing, Value::Null), &orphan));
        assert!(check(
            &leaf("tags", IncludesAll, Value::Array(vec![s("a"), s("b")])),
            &record(&[("tags", Value::Array(vec![s("b"), s("c"), s("a")]))])
        ));
        assert!(!check(
            &leaf("tags", IncludesNone, Value::Array(vec![s("a"), s("z")])),
            &record(&[("tags", Value::Array(vec![s("a")]))])
        ));
    }

    #[test]
    fn time_operators_use_the_callers_day_and_include_midnight() {
        use Operator::*;
        let (books, schema) = schema();
        let tz: Tz = "Pacific/Auckland".parse().expect("tz");
        // 2024-05-20 12:00 UTC = 2024-05-21 00:00 in Auckland (UTC+12).
        let at = |s: &str| record(&[("stamp", Value::Date(parse_datetime(s).expect("date")))]);
        let today = leaf("stamp", Today, Value::Null);
        let run = |tree: &ConditionTree, r: &Record| {
            matches(tree, r, &books, &schema, tz, now()).expect("ok")
        };
        assert!(
            run(&today, &at("2024-05-20T12:00:00Z")),
            "local midnight belongs to today"
        );
        assert!(!run(&today, &at("2024-05-20T11:59:59.999Z")));
        assert!(run(&today, &at("2024-05-21T11:59:59Z")));
        assert!(!run(&today, &at("2024-05-21T12:00:00Z")));
        assert!(run(
            &leaf("stamp", Yesterday, Value::Null),
            &at("2024-05-20T11:59:59Z")
        ));
        assert!(run(
            &leaf("stamp", Past, Value::Null),
            &at("2024-05-20T11:59:59Z")
        ));
        assert!(!run(
            &leaf("stamp", Future, Value::Null),
            &at("2024-05-20T11:59:59Z")
        ));
        let day = |s: &str| {
            record(&[(
                "published",
                Value::Dateonly(NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("d")),
            )])
        };
        assert!(run(
            &leaf("published", Today, Value::Null),
            &day("2024-05-21")
        ));
        assert!(!run(
            &leaf("published", Today, Value::Null),
            &day("2024-05-20")
        ));
        assert!(run(
            &leaf("published", Past, Value::Null),
            &day("2024-05-20")
        ));
        assert!(!run(
            &leaf("published", Past, Value::Null),
            &day("2024-05-21")
        ));
        assert!(run(
            &leaf(
                "published",
                Before,
                Value::Dateonly(NaiveDate::from_ymd_opt(2024, 5, 21).expect("d"))
            ),
            &day("2024-05-20")
        ));
    }

    #[test]
    fn sorting() {
        let mut records = vec![
            record(&[("id", Value::Int(1)), ("price", Value::Int(5))]),
            record(&[("id", Value::Int(2)), ("price", Value::Null)]),
            record(&[("id", Value::Int(3)), ("price", Value::Float(2.5))]),
            record(&[("id", Value::Int(4)), ("price", Value::Int(5))]),
        ];
        sort_records(
            &mut records,
            &Sort(vec![SortClause {
                field: "price".into(),
                ascending: true,
            }]),
        );
        let ids: Vec<_> = records.iter().map(|r| r.get("id").cloned()).collect();
        assert_eq!(
            ids,
            vec![
                Some(Value::Int(2)),
                Some(Value::Int(3)),
                Some(Value::Int(1)),
                Some(Value::Int(4))
            ]
        );
        sort_records(
            &mut records,
            &Sort(vec![
                SortClause {
                    field: "price".into(),
                    ascending: false,
                },
                SortClause {
                    field: "id".into(),
                    ascending: false,
                },
            ]),
        );
        let ids: Vec<_> = records.iter().map(|r| r.get("id").cloned()).collect();
        assert_eq!(
            ids,
            vec![
                Some(Value::Int(4)),
                Some(Value::Int(1)),
                Some(Value::Int(3)),
                Some(Value::Int(2))
            ]
        );
    }

    #[test]
    fn aggregation() {
        let d = |s: &str| Value::Date(parse_datetime(s).expect("date"));
        let records = vec![
            record(&[
                ("price", Value::Int(5)),
                ("title", s("a")),
                ("stamp", d("2024-03-31T23:30:00Z")),
            ]),
            record(&[
                ("price", Value::Int(7)),
                ("title", s("b")),
                ("stamp", d("2024-04-01T10:00:00Z")),
            ]),
            record(&[
                ("price", Value::Null),
                ("title", s("a")),
                ("stamp", d("2024-04-03T10:00:00Z")),
            ]),
            record(&[
                ("price", Value::Int(1)),
                ("title", s("a")),
                ("stamp", Value::Null),
            ]),
        ];
        let tz = chrono_tz::UTC;
        let count = aggregate(&records, &Aggregation::count(), tz, None);
        assert_eq!(
            count,
            vec![AggregateResult {
                value: Value::Int(4),
                group: IndexMap::new()
            }]
        );
        let none = aggregate(
            &[],
            &Aggregation::new(AggregationOperation::Sum, Some("price")),
            tz,
            None,
        );
        assert_eq!(none[0].value, Value::Null);
        assert_eq!(
            aggregate(
                &records,
                &Aggregation::new(AggregationOperation::Count, Some("price")),
                tz,
                None
            )[0]
            .value,
            Value::Int(3)
        );
        assert_eq!(
            aggregate(
                &records,
                &Aggregation::new(AggregationOperation::Sum, Some("price")),
                tz,
                None
            )[0]
            .value,
            Value::Int(13)
        );
        assert_eq!(
            aggregate(
                &records,
                &Aggregation::new(AggregationOperation::Avg, Some("price")),
                tz,
                None
            )[0]
            .value,
            Value::Float(13.0 / 3.0)
        );
        assert_eq!(
            aggregate(
                &records,
                &Aggregation::new(AggregationOperation::Min, Some("price")),
                tz,
                None
            )[0]
            .value,
            Value::Int(1)
        );
        assert_eq!(
            aggregate(
                &records,
                &Aggregation::new(AggregationOperation::Max, Some("stamp")),
                tz,
                None
            )[0]
            .value,
            d("2024-04-03T10:00:00Z")
        );

        let by_title = aggregate(
            &records,
            &Aggregation::count().group_by("title", None),
            tz,
            None,
        );
        assert_eq!(by_title.len(), 2);
        assert_eq!(by_title[0].group["title"], s("a"));
        assert_eq!(by_title[0].value, Value::Int(3));
        let limited = aggregate(
            &records,
            &Aggregation::count().group_by("title", None),
            tz,
            Some(1),
        );
        assert_eq!(limited.len(), 1);

        // Month buckets in Paris: 2024-03-31 23:30 UTC is already April there.
        let paris: Tz = "Europe/Paris".parse().expect("tz");
        let by_month = aggregate(
            &records,
            &Aggregation::new(AggregationOperation::Sum, Some("price"))
                .group_by("stamp", Some(DateOperation::Month)),
            paris,
            None,
        );
        let april = Value::Dateonly(NaiveDate::from_ymd_opt(2024, 4, 1).expect("d"));
        assert_eq!(by_month[0].group["stamp"], april);
        assert_eq!(by_month[0].value, Value::Int(12));
        assert_eq!(by_month[1].group["stamp"], Value::Null);
        let by_week = aggregate(
            &records,
            &Aggregation::count().group_by("stamp", Some(DateOperation::Week)),
            tz,
            None,
        );
        // 2024-03-31 is a Sunday (week of Monday 03-25); 04-01 and 04-03 share the week of 04-01.
        assert_eq!(by_week[0].group["stamp"], april);
        assert_eq!(by_week[0].value, Value::Int(2));
        assert!(by_week.iter().any(|r| r.group["stamp"]
            == Value::Dateonly(NaiveDate::from_ymd_opt(2024, 3, 25).expect("d"))));
        assert_eq!(
            date_group(
                &Value::Dateonly(NaiveDate::from_ymd_opt(2024, 8, 15).expect("d")),
                DateOperation::Quarter,
                tz
            ),
            Value::Dateonly(NaiveDate::from_ymd_opt(2024, 7, 1).expect("d"))
        );
    }
}
