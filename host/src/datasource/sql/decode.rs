//! Rows become typed values and records. A decoder per result column is chosen once per result
//! set (from the expected column kind and the type the driver reports), then every row is read
//! by index with it: no per-row name lookups, no per-row string formatting.
//!
//! Decisions per database:
//! - PostgreSQL: int2/int4/int8 → `Int`, numeric → `Decimal` (scale kept), float4/8 → `Float`,
//!   timestamptz → `Date`, timestamp (no zone) → `Date` read as UTC, date → `Dateonly`, time →
//!   `Time`, json/jsonb → `Json`, bytea → `Binary`, arrays → `Array`, enums and `bit(1)` are
//!   selected as text (`bit` → `Bool`), interval → `Int` seconds (`Float` when fractional;
//!   months count 30 days, as `EXTRACT(EPOCH …)` does) because the agent types it Number.
//! - MySQL/MariaDB: tinyint(1)/bit(1) → `Bool`, integers → `Int` (BIGINT UNSIGNED above i64 →
//!   `Decimal`), DECIMAL → `Decimal`, DATETIME/TIMESTAMP → `Date` (UTC session), JSON text →
//!   `Json`.
//! - SQLite: by the declared kind, leniently across storage classes (integers stored as text,
//!   booleans as 0/1 or `'true'`, timestamps in any ISO-8601 spelling, uuids as text or 16 bytes).

mod generic;
mod mysql;
mod postgres;
mod sqlite;

use bigdecimal::{BigDecimal, ToPrimitive};

use super::model::SqlKind;
use crate::datasource::error::Result;
use crate::datasource::record::{Record, RecordShape, Value};

pub(crate) use generic::{mysql_generic, pg_generic, sqlite_generic};
pub(crate) use mysql::{mysql_each, mysql_rows};
pub(crate) use postgres::{pg_each, pg_rows};
pub(crate) use sqlite::{sqlite_each, sqlite_rows};

/// What the builder expects in a result column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expect {
    /// A value of a column of this kind.
    Column(SqlKind),
    /// A number computed by the database (counts, sums, averages, buckets): `Int` when integral
    /// and exactly representable, else `Float`.
    Number,
}

/// The result columns of a statement and how they form records.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    pub columns: Vec<Expect>,
    pub shape: Shape,
}

/// The fields of a record, in projection order.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Shape {
    pub fields: Vec<(String, Slot)>,
}

/// Where a field's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Slot {
    /// The result column at this index.
    Column(usize),
    /// A joined to-one relation: `Null` when the marker column (the join key of the related
    /// table) is NULL, else a nested record.
    Relation { marker: usize, shape: Shape },
    /// A ManyToOne read only for its target key: answered from the foreign key column, no join.
    ForeignKey { index: usize, field: String },
}

/// How each result column is used by the shape, so that values can be moved, not cloned, and
/// columns read only as NULL markers are not decoded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Only a NULL test (relation marker).
    Marker,
    /// One field: the value is moved into the record.
    Once,
    /// Several fields: cloned.
    Shared,
}

fn uses(layout: &Layout) -> Vec<Use> {
    fn visit(shape: &Shape, counts: &mut [(u8, bool)]) {
        for (_, slot) in &shape.fields {
            match slot {
                Slot::Column(i) | Slot::ForeignKey { index: i, .. } => {
                    if let Some(c) = counts.get_mut(*i) {
                        c.0 = c.0.saturating_add(1);
                    }
                }
                Slot::Relation { marker, shape } => {
                    if let Some(c) = counts.get_mut(*marker) {
                        c.1 = true;
                    }
                    visit(shape, counts);
                }
            }
        }
    }
    let mut counts = vec![(0u8, false); layout.columns.len()];
    visit(&layout.shape, &mut counts);
    counts
        .into_iter()
        .map(|(n, _)| match n {
            0 => Use::Marker,
            1 => Use::Once,
            _ => Use::Shared,
        })
        .collect()
}

/// A shape's field names, shared by the records of every row (no per-row name copies), and
/// the templates of its nested records.
struct Template {
    record: RecordShape,
    /// Per field of the shape: the template of a nested record (relations), if any.
    nested: Vec<Option<Template>>,
}

impl Template {
    fn new(shape: &Shape) -> Self {
        let record = RecordShape::new(shape.fields.iter().map(|(name, _)| name.as_str()));
        let nested = shape
            .fields
            .iter()
            .map(|(_, slot)| match slot {
                Slot::Column(_) => None,
                Slot::Relation { shape, .. } => Some(Template::new(shape)),
                Slot::ForeignKey { field, .. } => Some(Template {
                    record: RecordShape::new([field.as_str()]),
                    nested: vec![None],
                }),
            })
            .collect();
        Self { record, nested }
    }
}

/// Builds records from rows of decoded values, for one layout.
pub(crate) struct Assembler<'l> {
    layout: &'l Layout,
    uses: Vec<Use>,
    template: Template,
}

impl<'l> Assembler<'l> {
    pub fn new(layout: &'l Layout) -> Self {
        Self {
            layout,
            uses: uses(layout),
            template: Template::new(&layout.shape),
        }
    }

    /// Which columns need a real decode (the others are only NULL markers).
    pub fn needs(&self) -> Vec<bool> {
        self.uses.iter().map(|u| *u != Use::Marker).collect()
    }

    /// The record of one row; values used once are moved out of `values`.
    pub fn record(&self, values: &mut [Value]) -> Record {
        assemble(&self.layout.shape, &self.template, values, &self.uses)
    }
}

fn assemble(shape: &Shape, template: &Template, values: &mut [Value], uses: &[Use]) -> Record {
    let fields = shape.fields.iter().zip(&template.nested);
    template
        .record
        .record(fields.map(|((_, slot), nested)| match (slot, nested) {
            (Slot::Column(i), _) => take(values, uses, *i),
            (Slot::Relation { marker, shape }, Some(nested)) => {
                if values.get(*marker).is_none_or(Value::is_null) {
                    Value::Null
                } else {
                    Value::Record(Box::new(assemble(shape, nested, values, uses)))
                }
            }
            (Slot::ForeignKey { index, .. }, Some(nested)) => match take(values, uses, *index) {
                Value::Null => Value::Null,
                key => Value::Record(Box::new(nested.record.record([key]))),
            },
            (_, None) => Value::Null,
        }))
}

fn take(values: &mut [Value], uses: &[Use], index: usize) -> Value {
    match (values.get_mut(index), uses.get(index)) {
        (Some(v), Some(Use::Once)) => std::mem::replace(v, Value::Null),
        (Some(v), _) => v.clone(),
        (None, _) => Value::Null,
    }
}

/// Normalises a database-computed number: integral values that fit exactly become `Int`.
pub(crate) fn number_from_decimal(d: &BigDecimal) -> Value {
    if d.is_integer()
        && let Some(i) = d.to_i64()
    {
        return Value::Int(i);
    }
    d.to_f64().map_or(Value::Null, number_from_f64)
}

/// Normalises a float result: integral values within ±2^53 become `Int`.
pub(crate) fn number_from_f64(f: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if f.fract() == 0.0 && f.abs() <= EXACT {
        Value::Int(f as i64)
    } else {
        Value::Float(f)
    }
}

/// Seconds of a PostgreSQL interval (months of 30 days, as `EXTRACT(EPOCH …)`).
pub(crate) fn interval_seconds(months: i32, days: i32, microseconds: i64) -> Value {
    let micros = i128::from(months) * 30 * 86_400_000_000
        + i128::from(days) * 86_400_000_000
        + i128::from(microseconds);
    if micros % 1_000_000 == 0 {
        i64::try_from(micros / 1_000_000).map_or(Value::Float(micros as f64 / 1e6), Value::Int)
    } else {
        Value::Float(micros as f64 / 1e6)
    }
}

/// Rows decoded into records (statements with few rows: creates, re-reads).
pub(crate) fn into_records(rows: Vec<Vec<Value>>, layout: &Layout) -> Vec<Record> {
    let assembler = Assembler::new(layout);
    rows.into_iter()
        .map(|mut values| assembler.record(&mut values))
        .collect()
}

/// Which columns need a real decode (the others are NULL markers).
pub(crate) fn needs_value(layout: &Layout) -> Vec<bool> {
    Assembler::new(layout).needs()
}

/// Error for a value the driver could not convert.
pub(crate) fn decode_error(
    column: usize,
    e: impl std::fmt::Display,
) -> crate::datasource::error::Error {
    crate::datasource::error::Error::Internal(format!("cannot decode result column {column}: {e}"))
}

/// Result alias used by the driver modules.
pub(crate) type Rows = Result<Vec<Vec<Value>>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(fields: Vec<(&str, Slot)>) -> Shape {
        Shape {
            fields: fields.into_iter().map(|(n, s)| (n.to_owned(), s)).collect(),
        }
    }

    #[test]
    fn records_nest_relations_and_null_them_by_marker() {
        let layout = Layout {
            columns: vec![Expect::Number; 4],
            shape: shape(vec![
                ("id", Slot::Column(0)),
                (
                    "customer",
                    Slot::Relation {
                        marker: 2,
                        shape: shape(vec![("name", Slot::Column(1))]),
                    },
                ),
                (
                    "country",
                    Slot::ForeignKey {
                        index: 3,
                        field: "id".into(),
                    },
                ),
                ("again", Slot::Column(0)),
            ]),
        };
        let assembler = Assembler::new(&layout);
        assert_eq!(assembler.needs(), [true, true, false, true]);
        let mut present = vec![
            Value::Int(1),
            Value::from("Ann"),
            Value::Bool(true),
            Value::Int(7),
        ];
        let record = assembler.record(&mut present);
        assert_eq!(record.get_path("customer:name"), Some(&Value::from("Ann")));
        assert_eq!(record.get_path("country:id"), Some(&Value::Int(7)));
        assert_eq!(
            record.get("again"),
            Some(&Value::Int(1)),
            "shared columns are cloned"
        );
        let mut absent = vec![Value::Int(2), Value::Null, Value::Null, Value::Null];
        let record = assembler.record(&mut absent);
        assert_eq!(record.get("customer"), Some(&Value::Null));
        assert_eq!(record.get("country"), Some(&Value::Null));
        assert_eq!(
            record.keys().collect::<Vec<_>>(),
            ["id", "customer", "country", "again"]
        );
    }

    #[test]
    fn numbers_are_normalised() {
        assert_eq!(number_from_f64(3.0), Value::Int(3));
        assert_eq!(number_from_f64(2.5), Value::Float(2.5));
        let decimal: BigDecimal = "12.000".parse().unwrap_or_default();
        assert_eq!(number_from_decimal(&decimal), Value::Int(12));
        let decimal: BigDecimal = "12.30".parse().unwrap_or_default();
        assert_eq!(number_from_decimal(&decimal), Value::Float(12.3));
        assert_eq!(interval_seconds(0, 1, 7_200_000_000), Value::Int(93_600));
        assert_eq!(interval_seconds(1, 0, 500_000), Value::Float(2_592_000.5));
    }
}
