//! SQLite rows: values are decoded by the column's declared kind, leniently across storage
//! classes, because SQLite stores whatever it was given (integers as text, booleans as
//! `'true'`, timestamps in any ISO-8601 spelling, uuids as text or blobs).

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::sqlite::{Sqlite, SqliteRow, SqliteValueRef};
use sqlx::{Decode, Row, TypeInfo, ValueRef};

use super::{Expect, Rows, decode_error, number_from_f64};
use crate::datasource::error::Result;
use crate::datasource::record::{Value, parse_datetime, parse_number, parse_time};
use crate::datasource::sql::model::SqlKind;

/// A value's storage class.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Integer,
    Real,
    Text,
    Blob,
}

/// Decodes every row into one reused buffer handed to `each`; `needs[i]` false means column
/// `i` is only tested for NULL.
pub(crate) fn sqlite_each(
    rows: &[SqliteRow],
    expects: &[Expect],
    needs: &[bool],
    mut each: impl FnMut(&mut Vec<Value>),
) -> Result<()> {
    let mut values = Vec::with_capacity(expects.len());
    for row in rows {
        values.clear();
        for i in 0..row.len() {
            let raw = row.try_get_raw(i).map_err(|e| decode_error(i, e))?;
            let value = if raw.is_null() {
                Value::Null
            } else if !needs.get(i).copied().unwrap_or(true) {
                Value::Bool(true)
            } else {
                decode(raw, expects.get(i)).map_err(|e| decode_error(i, e))?
            };
            values.push(value);
        }
        each(&mut values);
    }
    Ok(())
}

/// Decodes every row into its own vector of values.
pub(crate) fn sqlite_rows(rows: &[SqliteRow], expects: &[Expect], needs: &[bool]) -> Rows {
    let mut out = Vec::with_capacity(rows.len());
    sqlite_each(rows, expects, needs, |values| {
        out.push(std::mem::take(values))
    })?;
    Ok(out)
}

type DecodeResult = std::result::Result<Value, sqlx::error::BoxDynError>;

fn get<'r, T: Decode<'r, Sqlite>>(
    raw: SqliteValueRef<'r>,
) -> std::result::Result<T, sqlx::error::BoxDynError> {
    T::decode(raw)
}

fn class(raw: &SqliteValueRef<'_>) -> Class {
    match raw.type_info().name() {
        "INTEGER" => Class::Integer,
        "REAL" => Class::Real,
        "BLOB" => Class::Blob,
        _ => Class::Text,
    }
}

/// Decodes a non-NULL value as the expected kind; `None` decodes by storage class.
pub(super) fn decode(raw: SqliteValueRef<'_>, expect: Option<&Expect>) -> DecodeResult {
    let class = class(&raw);
    let kind = match expect {
        Some(Expect::Column(kind)) => kind,
        Some(Expect::Number) => {
            return Ok(match class {
                Class::Integer => Value::Int(get::<i64>(raw)?),
                Class::Real => number_from_f64(get::<f64>(raw)?),
                Class::Text => parse_number(get::<&str>(raw)?).unwrap_or(Value::Null),
                Class::Blob => Value::Null,
            });
        }
        None => return by_class(raw, class),
    };
    Ok(match kind {
        SqlKind::Bool | SqlKind::Bit => match class {
            Class::Integer => Value::Bool(get::<i64>(raw)? != 0),
            Class::Real => Value::Bool(get::<f64>(raw)? != 0.0),
            Class::Text => {
                let text = get::<&str>(raw)?;
                match text.trim().to_ascii_lowercase().as_str() {
                    "1" | "true" | "t" | "yes" | "y" => Value::Bool(true),
                    "0" | "false" | "f" | "no" | "n" | "" => Value::Bool(false),
                    _ => Value::String(text.to_owned()),
                }
            }
            Class::Blob => by_class(raw, class)?,
        },
        SqlKind::Int | SqlKind::Decimal | SqlKind::Interval => match class {
            Class::Integer => Value::Int(get::<i64>(raw)?),
            Class::Real => {
                let f = get::<f64>(raw)?;
                if *kind == SqlKind::Int {
                    number_from_f64(f)
                } else {
                    Value::Float(f)
                }
            }
            Class::Text => {
                let text = get::<&str>(raw)?;
                parse_number(text).unwrap_or_else(|| Value::String(text.to_owned()))
            }
            Class::Blob => by_class(raw, class)?,
        },
        SqlKind::Float => match class {
            Class::Integer => Value::Float(get::<i64>(raw)? as f64),
            Class::Real => Value::Float(get::<f64>(raw)?),
            Class::Text => {
                let text = get::<&str>(raw)?;
                text.trim()
                    .parse::<f64>()
                    .map_or_else(|_| Value::String(text.to_owned()), Value::Float)
            }
            Class::Blob => by_class(raw, class)?,
        },
        SqlKind::Text | SqlKind::Enum => match class {
            Class::Text => Value::String(get::<&str>(raw)?.to_owned()),
            Class::Integer => Value::String(get::<i64>(raw)?.to_string()),
            Class::Real => Value::String(get::<f64>(raw)?.to_string()),
            Class::Blob => Value::String(String::from_utf8_lossy(get::<&[u8]>(raw)?).into_owned()),
        },
        SqlKind::Uuid => match class {
            Class::Blob => {
                let bytes = get::<&[u8]>(raw)?;
                uuid::Uuid::from_slice(bytes)
                    .map_or_else(|_| Value::Binary(bytes.to_vec()), Value::Uuid)
            }
            Class::Text => {
                let text = get::<&str>(raw)?;
                uuid::Uuid::parse_str(text)
                    .map_or_else(|_| Value::String(text.to_owned()), Value::Uuid)
            }
            _ => by_class(raw, class)?,
        },
        SqlKind::Json | SqlKind::Jsonb => match class {
            Class::Text => {
                let text = get::<&str>(raw)?;
                Value::Json(
                    serde_json::from_str(text)
                        .unwrap_or_else(|_| serde_json::Value::String(text.to_owned())),
                )
            }
            Class::Integer => Value::Json(get::<i64>(raw)?.into()),
            Class::Real => Value::Json(
                serde_json::Number::from_f64(get::<f64>(raw)?)
                    .map_or(serde_json::Value::Null, Into::into),
            ),
            Class::Blob => by_class(raw, class)?,
        },
        SqlKind::Timestamp | SqlKind::NaiveTimestamp => match class {
            Class::Text => {
                let text = get::<&str>(raw)?;
                parse_sqlite_datetime(text)
                    .map_or_else(|| Value::String(text.to_owned()), Value::Date)
            }
            // Integers are Unix seconds; reals are Julian days (SQLite's numeric date forms).
            Class::Integer => DateTime::<Utc>::from_timestamp(get::<i64>(raw)?, 0)
                .map_or(Value::Null, Value::Date),
            Class::Real => {
                let days = get::<f64>(raw)?;
                let millis = ((days - 2_440_587.5) * 86_400_000.0).round() as i64;
                DateTime::<Utc>::from_timestamp_millis(millis).map_or(Value::Null, Value::Date)
            }
            Class::Blob => by_class(raw, class)?,
        },
        SqlKind::Date => match class {
            Class::Text => {
                let text = get::<&str>(raw)?;
                text.get(..10)
                    .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
                    .map_or_else(|| Value::String(text.to_owned()), Value::Dateonly)
            }
            Class::Integer => DateTime::<Utc>::from_timestamp(get::<i64>(raw)?, 0)
                .map_or(Value::Null, |d| Value::Dateonly(d.date_naive())),
            _ => by_class(raw, class)?,
        },
        SqlKind::Time => match class {
            Class::Text => {
                let text = get::<&str>(raw)?;
                parse_time(text).map_or_else(|| Value::String(text.to_owned()), Value::Time)
            }
            _ => by_class(raw, class)?,
        },
        SqlKind::Binary => match class {
            Class::Blob => Value::Binary(get::<&[u8]>(raw)?.to_vec()),
            Class::Text => Value::Binary(get::<&str>(raw)?.as_bytes().to_vec()),
            _ => by_class(raw, class)?,
        },
        SqlKind::Array(_) => by_class(raw, class)?,
    })
}

/// A value by its storage class alone (native queries, unexpected shapes).
fn by_class(raw: SqliteValueRef<'_>, class: Class) -> DecodeResult {
    Ok(match class {
        Class::Integer => Value::Int(get::<i64>(raw)?),
        Class::Real => Value::Float(get::<f64>(raw)?),
        Class::Text => Value::String(get::<&str>(raw)?.to_owned()),
        Class::Blob => Value::Binary(get::<&[u8]>(raw)?.to_vec()),
    })
}

/// Decodes a non-NULL value by its storage class (native queries).
pub(super) fn decode_generic(raw: SqliteValueRef<'_>) -> DecodeResult {
    let class = class(&raw);
    by_class(raw, class)
}

/// The common spellings `YYYY-MM-DD HH:MM:SS[.fff][Z]` (space or `T`), read by hand because
/// this runs for every timestamp of every row.
fn fast_datetime(text: &str) -> Option<DateTime<Utc>> {
    let b = text.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b' ' | b'T')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        b.get(range)?.iter().try_fold(0u32, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let mut rest = &b[19..];
    let mut nanos = 0u32;
    if let Some((b'.', fraction)) = rest.split_first() {
        let digits = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        for (i, c) in fraction[..digits].iter().enumerate() {
            nanos += u32::from(c - b'0') * 10u32.pow(8 - i as u32);
        }
        rest = &fraction[digits..];
    }
    if !(rest.is_empty() || rest == b"Z") {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(i32::try_from(num(0..4)?).ok()?, num(5..7)?, num(8..10)?)?;
    let time =
        chrono::NaiveTime::from_hms_nano_opt(num(11..13)?, num(14..16)?, num(17..19)?, nanos)?;
    Some(date.and_time(time).and_utc())
}

/// Parses SQLite timestamp text: the canonical `YYYY-MM-DD HH:MM:SS.SSS`, ISO-8601 with `T`,
/// `Z` or an offset (also Sequelize's `… +00:00`), or a bare date (midnight UTC).
pub(crate) fn parse_sqlite_datetime(text: &str) -> Option<DateTime<Utc>> {
    if let Some(instant) = fast_datetime(text) {
        return Some(instant);
    }
    let trimmed = text.trim();
    parse_datetime(trimmed)
        .or_else(|| {
            // `2024-05-06 05:08:09.123 +00:00`: drop the space before the offset.
            let (head, offset) = trimmed.rsplit_once(' ')?;
            if offset.starts_with('+') || offset.starts_with('-') {
                parse_datetime(&format!("{head}{offset}"))
            } else {
                None
            }
        })
        .or_else(|| {
            let date = NaiveDate::parse_from_str(trimmed, "%Y-%m-%d").ok()?;
            date.and_hms_opt(0, 0, 0).map(|d| d.and_utc())
        })
        .or_else(|| {
            // Minutes only: `2024-05-06 05:08`.
            ["%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"].iter().find_map(|f| {
                chrono::NaiveDateTime::parse_from_str(trimmed, f)
                    .ok()
                    .map(|d| d.and_utc())
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_in_every_common_spelling() {
        let expected = chrono::DateTime::parse_from_rfc3339("2024-03-01T10:00:00.120Z")
            .map(|d| d.to_utc())
            .ok();
        for text in [
            "2024-03-01 10:00:00.12",
            "2024-03-01T10:00:00.120Z",
            "2024-03-01 10:00:00.120 +00:00",
            "2024-03-01T11:00:00.12+01:00",
        ] {
            assert_eq!(parse_sqlite_datetime(text), expected, "{text}");
        }
        let midnight = chrono::DateTime::parse_from_rfc3339("2024-03-01T00:00:00Z")
            .map(|d| d.to_utc())
            .ok();
        assert_eq!(parse_sqlite_datetime("2024-03-01"), midnight);
        assert_eq!(parse_sqlite_datetime("2024-03-01 00:00"), midnight);
        assert_eq!(parse_sqlite_datetime("not a date"), None);
        assert_eq!(fast_datetime("2024-13-01 00:00:00"), None);
    }
}
