//! MySQL/MariaDB rows: the reported type picks the driver decoder, the expected column kind
//! picks the value (tinyint(1) → `Bool`, JSON text → `Json`, uuid text → `Uuid`).

use bigdecimal::BigDecimal;
use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use sqlx::mysql::{MySql, MySqlRow, MySqlValueRef};
use sqlx::{Column as _, Decode, Row, TypeInfo, ValueRef};

use super::{Expect, Rows, decode_error, number_from_decimal, number_from_f64};
use crate::datasource::error::Result;
use crate::datasource::record::Value;
use crate::datasource::sql::model::SqlKind;

/// One column's decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dec {
    Skip,
    Int,
    UInt,
    F32,
    F64,
    Decimal,
    Text,
    Bytes,
    DateTime,
    Date,
    Time,
    Bit,
    Null,
}

/// The decoder for a reported type name.
pub(super) fn dec_for(type_name: &str) -> Dec {
    match type_name {
        "BOOLEAN" | "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "BIGINT" | "YEAR" => Dec::Int,
        "TINYINT UNSIGNED" | "SMALLINT UNSIGNED" | "MEDIUMINT UNSIGNED" | "INT UNSIGNED"
        | "BIGINT UNSIGNED" => Dec::UInt,
        "FLOAT" => Dec::F32,
        "DOUBLE" => Dec::F64,
        "DECIMAL" => Dec::Decimal,
        "DATETIME" | "TIMESTAMP" => Dec::DateTime,
        "DATE" => Dec::Date,
        "TIME" => Dec::Time,
        "BIT" => Dec::Bit,
        "NULL" => Dec::Null,
        "BINARY" | "VARBINARY" | "TINYBLOB" | "BLOB" | "MEDIUMBLOB" | "LONGBLOB" | "GEOMETRY" => {
            Dec::Bytes
        }
        _ => Dec::Text,
    }
}

/// Decodes every row into one reused buffer handed to `each`; `needs[i]` false means column
/// `i` is only tested for NULL.
pub(crate) fn mysql_each(
    rows: &[MySqlRow],
    expects: &[Expect],
    needs: &[bool],
    mut each: impl FnMut(&mut Vec<Value>),
) -> Result<()> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let decs: Vec<(Dec, Option<&Expect>)> = first
        .columns()
        .iter()
        .enumerate()
        .map(|(i, column)| {
            if !needs.get(i).copied().unwrap_or(true) {
                return (Dec::Skip, None);
            }
            (dec_for(column.type_info().name()), expects.get(i))
        })
        .collect();
    let mut values = Vec::with_capacity(decs.len());
    for row in rows {
        values.clear();
        for (i, (dec, expect)) in decs.iter().enumerate() {
            let raw = row.try_get_raw(i).map_err(|e| decode_error(i, e))?;
            let value = if raw.is_null() {
                Value::Null
            } else {
                decode(raw, *dec, *expect).map_err(|e| decode_error(i, e))?
            };
            values.push(value);
        }
        each(&mut values);
    }
    Ok(())
}

/// Decodes every row into its own vector of values.
pub(crate) fn mysql_rows(rows: &[MySqlRow], expects: &[Expect], needs: &[bool]) -> Rows {
    let mut out = Vec::with_capacity(rows.len());
    mysql_each(rows, expects, needs, |values| {
        out.push(std::mem::take(values))
    })?;
    Ok(out)
}

type DecodeResult = std::result::Result<Value, sqlx::error::BoxDynError>;

fn get<'r, T: Decode<'r, MySql>>(
    raw: MySqlValueRef<'r>,
) -> std::result::Result<T, sqlx::error::BoxDynError> {
    T::decode(raw)
}

/// Decodes a non-NULL value as the expected kind (`None`: as the driver type says).
pub(super) fn decode(raw: MySqlValueRef<'_>, dec: Dec, expect: Option<&Expect>) -> DecodeResult {
    let kind = match expect {
        Some(Expect::Column(kind)) => Some(kind),
        _ => None,
    };
    let number = matches!(expect, Some(Expect::Number));
    Ok(match dec {
        Dec::Skip => Value::Bool(true),
        Dec::Null => Value::Null,
        Dec::Int => {
            let i = get::<i64>(raw)?;
            if kind == Some(&SqlKind::Bool) {
                Value::Bool(i != 0)
            } else {
                Value::Int(i)
            }
        }
        Dec::UInt => {
            let u = get::<u64>(raw)?;
            match (kind, i64::try_from(u)) {
                (Some(SqlKind::Bool), _) => Value::Bool(u != 0),
                (_, Ok(i)) => Value::Int(i),
                (_, Err(_)) => Value::Decimal(BigDecimal::from(u)),
            }
        }
        Dec::Bit => {
            let u = get::<u64>(raw)?;
            if matches!(kind, Some(SqlKind::Int)) || number {
                Value::Int(u as i64)
            } else {
                Value::Bool(u != 0)
            }
        }
        Dec::F32 if number => number_from_f64(f64::from(get::<f32>(raw)?)),
        Dec::F32 => Value::Float(f64::from(get::<f32>(raw)?)),
        Dec::F64 if number => number_from_f64(get::<f64>(raw)?),
        Dec::F64 => Value::Float(get::<f64>(raw)?),
        Dec::Decimal if number => number_from_decimal(&get::<BigDecimal>(raw)?),
        Dec::Decimal => Value::Decimal(get::<BigDecimal>(raw)?),
        Dec::DateTime => Value::Date(get::<NaiveDateTime>(raw)?.and_utc()),
        Dec::Date => Value::Dateonly(get::<NaiveDate>(raw)?),
        Dec::Time => Value::Time(get::<NaiveTime>(raw)?),
        Dec::Bytes => {
            let bytes = get::<&[u8]>(raw)?;
            match kind {
                Some(SqlKind::Text | SqlKind::Enum | SqlKind::Json | SqlKind::Uuid) => {
                    text_value(String::from_utf8_lossy(bytes).into_owned(), kind)
                }
                // Native queries: `_bin` collations flag text columns as binary; UTF-8 bytes
                // are taken as text there.
                None if expect.is_none() => match std::str::from_utf8(bytes) {
                    Ok(text) => Value::String(text.to_owned()),
                    Err(_) => Value::Binary(bytes.to_vec()),
                },
                _ => Value::Binary(bytes.to_vec()),
            }
        }
        Dec::Text => {
            let text = get::<&str>(raw)?;
            if kind == Some(&SqlKind::Binary) {
                Value::Binary(text.as_bytes().to_vec())
            } else {
                text_value(text.to_owned(), kind)
            }
        }
    })
}

/// A text result as the expected kind: JSON parsed, uuids typed, numbers parsed.
fn text_value(text: String, kind: Option<&SqlKind>) -> Value {
    match kind {
        Some(SqlKind::Json | SqlKind::Jsonb) => match serde_json::from_str(&text) {
            Ok(json) => Value::Json(json),
            Err(_) => Value::Json(serde_json::Value::String(text)),
        },
        Some(SqlKind::Uuid) => match uuid::Uuid::parse_str(&text) {
            Ok(u) => Value::Uuid(u),
            Err(_) => Value::String(text),
        },
        _ => Value::String(text),
    }
}
