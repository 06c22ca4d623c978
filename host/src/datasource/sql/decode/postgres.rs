//! PostgreSQL rows: the decoder of each column follows the type the server reports.

use bigdecimal::BigDecimal;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use sqlx::postgres::types::PgInterval;
use sqlx::postgres::{PgRow, PgValueFormat, PgValueRef, Postgres};
use sqlx::{Column as _, Decode, Row, TypeInfo, ValueRef};
use uuid::Uuid;

use super::{Expect, Rows, decode_error, interval_seconds, number_from_decimal, number_from_f64};
use crate::datasource::error::Result;
use crate::datasource::record::Value;
use crate::datasource::sql::model::SqlKind;

/// One column's decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dec {
    Skip,
    Bool,
    BitText,
    I16,
    I32,
    I64,
    F32,
    F64,
    Numeric,
    Text,
    Uuid,
    Json,
    TimestampTz,
    Timestamp,
    Date,
    Time,
    Bytes,
    Interval,
    Array(Elem),
    /// A type the decoders do not know: its bytes as text when they are UTF-8.
    Unknown,
}

/// Array element decoders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Elem {
    Bool,
    I16,
    I32,
    I64,
    F32,
    F64,
    Numeric,
    Text,
    Uuid,
    Json,
    TimestampTz,
    Timestamp,
    Date,
    Time,
    Bytes,
}

/// The decoder for a reported type name (`INT4`, `TEXT[]`, …).
pub(super) fn dec_for(type_name: &str) -> Dec {
    if let Some(element) = type_name.strip_suffix("[]") {
        return match element {
            "BOOL" => Dec::Array(Elem::Bool),
            "INT2" => Dec::Array(Elem::I16),
            "INT4" => Dec::Array(Elem::I32),
            "INT8" => Dec::Array(Elem::I64),
            "FLOAT4" => Dec::Array(Elem::F32),
            "FLOAT8" => Dec::Array(Elem::F64),
            "NUMERIC" => Dec::Array(Elem::Numeric),
            "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" => Dec::Array(Elem::Text),
            "UUID" => Dec::Array(Elem::Uuid),
            "JSON" | "JSONB" => Dec::Array(Elem::Json),
            "TIMESTAMPTZ" => Dec::Array(Elem::TimestampTz),
            "TIMESTAMP" => Dec::Array(Elem::Timestamp),
            "DATE" => Dec::Array(Elem::Date),
            "TIME" => Dec::Array(Elem::Time),
            "BYTEA" => Dec::Array(Elem::Bytes),
            _ => Dec::Unknown,
        };
    }
    match type_name {
        "BOOL" => Dec::Bool,
        "INT2" => Dec::I16,
        "INT4" => Dec::I32,
        "INT8" => Dec::I64,
        "FLOAT4" => Dec::F32,
        "FLOAT8" => Dec::F64,
        "NUMERIC" => Dec::Numeric,
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" | "CITEXT" | "citext" | "UNKNOWN" => Dec::Text,
        "UUID" => Dec::Uuid,
        "JSON" | "JSONB" => Dec::Json,
        "TIMESTAMPTZ" => Dec::TimestampTz,
        "TIMESTAMP" => Dec::Timestamp,
        "DATE" => Dec::Date,
        "TIME" => Dec::Time,
        "BYTEA" => Dec::Bytes,
        "INTERVAL" => Dec::Interval,
        "OID" => Dec::I64,
        _ => Dec::Unknown,
    }
}

/// Decodes every row into one reused buffer handed to `each`; `needs[i]` false means column
/// `i` is only tested for NULL.
pub(crate) fn pg_each(
    rows: &[PgRow],
    expects: &[Expect],
    needs: &[bool],
    mut each: impl FnMut(&mut Vec<Value>),
) -> Result<()> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let decs: Vec<(Dec, bool)> = first
        .columns()
        .iter()
        .enumerate()
        .map(|(i, column)| {
            if !needs.get(i).copied().unwrap_or(true) {
                return (Dec::Skip, false);
            }
            let mut dec = dec_for(column.type_info().name());
            let number = matches!(expects.get(i), Some(Expect::Number));
            if dec == Dec::Text && matches!(expects.get(i), Some(Expect::Column(SqlKind::Bit))) {
                dec = Dec::BitText;
            }
            (dec, number)
        })
        .collect();
    let mut values = Vec::with_capacity(decs.len());
    for row in rows {
        values.clear();
        for (i, (dec, number)) in decs.iter().enumerate() {
            let raw = row.try_get_raw(i).map_err(|e| decode_error(i, e))?;
            let value = if raw.is_null() {
                Value::Null
            } else {
                decode(raw, *dec, *number).map_err(|e| decode_error(i, e))?
            };
            values.push(value);
        }
        each(&mut values);
    }
    Ok(())
}

/// Decodes every row into its own vector of values.
pub(crate) fn pg_rows(rows: &[PgRow], expects: &[Expect], needs: &[bool]) -> Rows {
    let mut out = Vec::with_capacity(rows.len());
    pg_each(rows, expects, needs, |values| {
        out.push(std::mem::take(values))
    })?;
    Ok(out)
}

type DecodeResult = std::result::Result<Value, sqlx::error::BoxDynError>;

fn get<'r, T: Decode<'r, Postgres>>(
    raw: PgValueRef<'r>,
) -> std::result::Result<T, sqlx::error::BoxDynError> {
    T::decode(raw)
}

/// A numeric with its display scale, as PostgreSQL prints it (`12.30`, `10000`): the driver
/// gives the scale of the base-10000 digits (`12.3000`, `1E+4`), so the scale is set again from
/// the value's header (`dscale`, bytes 6 and 7 of the binary form).
fn numeric(raw: PgValueRef<'_>) -> std::result::Result<BigDecimal, sqlx::error::BoxDynError> {
    let dscale = match raw.format() {
        PgValueFormat::Binary => raw
            .as_bytes()?
            .get(6..8)
            .map(|b| i64::from(u16::from_be_bytes([b[0], b[1]]))),
        PgValueFormat::Text => None,
    };
    let decimal = get::<BigDecimal>(raw)?;
    Ok(match dscale {
        Some(scale) => decimal.with_scale(scale),
        None => decimal,
    })
}

/// A `numeric[]` element with its display scale: the array decoder hands each element to this
/// type's decoder, which reads the element's own header as [`numeric`] does for scalars.
struct ScaledNumeric(BigDecimal);

impl sqlx::Type<Postgres> for ScaledNumeric {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <BigDecimal as sqlx::Type<Postgres>>::type_info()
    }

    fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
        <BigDecimal as sqlx::Type<Postgres>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Postgres> for ScaledNumeric {
    fn decode(raw: PgValueRef<'r>) -> std::result::Result<Self, sqlx::error::BoxDynError> {
        numeric(raw).map(Self)
    }
}

/// Decodes a non-NULL value.
pub(super) fn decode(raw: PgValueRef<'_>, dec: Dec, number: bool) -> DecodeResult {
    Ok(match dec {
        Dec::Skip => Value::Bool(true),
        Dec::Bool => Value::Bool(get::<bool>(raw)?),
        Dec::BitText => Value::Bool(get::<&str>(raw)? == "1"),
        Dec::I16 => Value::Int(i64::from(get::<i16>(raw)?)),
        Dec::I32 => Value::Int(i64::from(get::<i32>(raw)?)),
        Dec::I64 => Value::Int(get::<i64>(raw)?),
        Dec::F32 if number => number_from_f64(f64::from(get::<f32>(raw)?)),
        Dec::F32 => Value::Float(f64::from(get::<f32>(raw)?)),
        Dec::F64 if number => number_from_f64(get::<f64>(raw)?),
        Dec::F64 => Value::Float(get::<f64>(raw)?),
        Dec::Numeric if number => number_from_decimal(&get::<BigDecimal>(raw)?),
        Dec::Numeric => Value::Decimal(numeric(raw)?),
        Dec::Text => Value::String(get::<&str>(raw)?.to_owned()),
        Dec::Uuid => Value::Uuid(get::<Uuid>(raw)?),
        Dec::Json => Value::Json(get::<serde_json::Value>(raw)?),
        Dec::TimestampTz => Value::Date(get::<DateTime<Utc>>(raw)?),
        Dec::Timestamp => Value::Date(get::<NaiveDateTime>(raw)?.and_utc()),
        Dec::Date => Value::Dateonly(get::<NaiveDate>(raw)?),
        Dec::Time => Value::Time(get::<NaiveTime>(raw)?),
        Dec::Bytes => Value::Binary(get::<Vec<u8>>(raw)?),
        Dec::Interval => {
            let i = get::<PgInterval>(raw)?;
            interval_seconds(i.months, i.days, i.microseconds)
        }
        Dec::Array(elem) => Value::Array(array(raw, elem)?),
        Dec::Unknown => match raw.as_bytes() {
            Ok(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => Value::String(text.to_owned()),
                Err(_) => Value::Binary(bytes.to_vec()),
            },
            Err(_) => Value::Null,
        },
    })
}

fn array(
    raw: PgValueRef<'_>,
    elem: Elem,
) -> std::result::Result<Vec<Value>, sqlx::error::BoxDynError> {
    fn map<T>(items: Vec<Option<T>>, f: impl Fn(T) -> Value) -> Vec<Value> {
        items
            .into_iter()
            .map(|i| i.map_or(Value::Null, &f))
            .collect()
    }
    Ok(match elem {
        Elem::Bool => map(get::<Vec<Option<bool>>>(raw)?, Value::Bool),
        Elem::I16 => map(get::<Vec<Option<i16>>>(raw)?, |v| Value::Int(i64::from(v))),
        Elem::I32 => map(get::<Vec<Option<i32>>>(raw)?, |v| Value::Int(i64::from(v))),
        Elem::I64 => map(get::<Vec<Option<i64>>>(raw)?, Value::Int),
        Elem::F32 => map(get::<Vec<Option<f32>>>(raw)?, |v| {
            Value::Float(f64::from(v))
        }),
        Elem::F64 => map(get::<Vec<Option<f64>>>(raw)?, Value::Float),
        Elem::Numeric => map(get::<Vec<Option<ScaledNumeric>>>(raw)?, |v| {
            Value::Decimal(v.0)
        }),
        Elem::Text => map(get::<Vec<Option<String>>>(raw)?, Value::String),
        Elem::Uuid => map(get::<Vec<Option<Uuid>>>(raw)?, Value::Uuid),
        Elem::Json => map(get::<Vec<Option<serde_json::Value>>>(raw)?, Value::Json),
        Elem::TimestampTz => map(get::<Vec<Option<DateTime<Utc>>>>(raw)?, Value::Date),
        Elem::Timestamp => map(get::<Vec<Option<NaiveDateTime>>>(raw)?, |v| {
            Value::Date(v.and_utc())
        }),
        Elem::Date => map(get::<Vec<Option<NaiveDate>>>(raw)?, Value::Dateonly),
        Elem::Time => map(get::<Vec<Option<NaiveTime>>>(raw)?, Value::Time),
        Elem::Bytes => map(get::<Vec<Option<Vec<u8>>>>(raw)?, Value::Binary),
    })
}
