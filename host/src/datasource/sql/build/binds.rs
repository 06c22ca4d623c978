//! Typed values become binds for a target column: the driver type each database expects for
//! that column kind, plus the PostgreSQL cast when a bind's own type would not match (enums,
//! arrays, json, bit, interval).

use std::str::FromStr;

use bigdecimal::{BigDecimal, ToPrimitive};
use chrono::NaiveDate;

use super::{Bind, SQLITE_TIMESTAMP_FORMAT, Writer};
use crate::datasource::error::{Error, Result};
use crate::datasource::record::{Value, format_datetime};
use crate::datasource::sql::dialect::Dialect;
use crate::datasource::sql::model::{Column, SqlKind};

/// Writes the placeholder (with its cast) for `value` written to or compared with `column`.
/// `NULL` is written as the keyword: an untyped NULL fits every column on every database.
pub(crate) fn push_value(w: &mut Writer, column: &Column, value: &Value) -> Result<()> {
    if value.is_null() {
        w.push("NULL");
        return Ok(());
    }
    let dialect = w.dialect;
    let wrong = || {
        Error::validation(format!(
            "Wrong type for \"{}\": {value}. Expects {}",
            column.name,
            column.column_type.to_json()
        ))
    };
    match &column.kind {
        SqlKind::Array(inner) => {
            let Value::Array(items) = value else {
                return Err(wrong());
            };
            if dialect != Dialect::Postgres {
                return Err(Error::validation(format!(
                    "Array values are only supported on PostgreSQL (column \"{}\")",
                    column.name
                )));
            }
            let texts = items
                .iter()
                .map(value_to_array_text)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(wrong)?;
            w.bind(Bind::TextArray(texts));
            w.push("::");
            w.push(&pg_array_cast(column, inner));
        }
        SqlKind::Bit => {
            let Value::Bool(b) = value else {
                return Err(wrong());
            };
            w.bind(Bind::Text(if *b { "1" } else { "0" }.to_owned()));
            w.push("::bit(1)");
        }
        SqlKind::Interval => {
            let seconds = value.as_f64().ok_or_else(wrong)?;
            w.push("make_interval(secs => ");
            w.bind(Bind::Float(seconds));
            w.push(")");
        }
        SqlKind::Json | SqlKind::Jsonb => {
            let json = match value {
                Value::Json(j) => j.clone(),
                other => serde_json::to_value(other).map_err(|_| wrong())?,
            };
            match dialect {
                Dialect::Postgres => {
                    w.bind(Bind::Json(json));
                    w.push(if column.kind == SqlKind::Json {
                        "::json"
                    } else {
                        "::jsonb"
                    });
                }
                Dialect::MySql | Dialect::Sqlite => w.bind(Bind::Text(json.to_string())),
            }
        }
        SqlKind::Enum | SqlKind::Text => {
            let text = match value {
                Value::String(s) => s.clone(),
                _ => return Err(wrong()),
            };
            w.bind(Bind::Text(text));
            if dialect == Dialect::Postgres
                && let Some(cast) = pg_scalar_cast(column)
            {
                w.push("::");
                w.push(cast);
            }
        }
        kind => {
            let bind = scalar_bind(dialect, kind, value).ok_or_else(wrong)?;
            // sqlx caches one PostgreSQL statement per SQL text, typed by its first call's binds:
            // a later float or numeric bind where an int8 was (or the reverse) is misread (float
            // bits as an integer) or refused. A cast puts the bind's type into the text.
            let cast = match (&bind, kind) {
                (Bind::Float(_), SqlKind::Float) | (Bind::Decimal(_), SqlKind::Decimal) => None,
                (Bind::Float(_), _) => Some("float8"),
                (Bind::Decimal(_), _) => Some("numeric"),
                (Bind::Int(_), SqlKind::Float | SqlKind::Decimal) => Some("int8"),
                _ => None,
            };
            w.bind(bind);
            if let (Dialect::Postgres, Some(cast)) = (dialect, cast) {
                w.push("::");
                w.push(cast);
            }
        }
    }
    Ok(())
}

/// The bind for scalar kinds that need no cast.
fn scalar_bind(dialect: Dialect, kind: &SqlKind, value: &Value) -> Option<Bind> {
    Some(match kind {
        SqlKind::Bool => match value {
            Value::Bool(b) => Bind::Bool(*b),
            _ => return None,
        },
        SqlKind::Int => match value {
            Value::Int(i) => Bind::Int(*i),
            Value::Float(f) => Bind::Float(*f),
            Value::Decimal(d) => match (d.is_integer(), d.to_i64()) {
                (true, Some(i)) => Bind::Int(i),
                _ if dialect == Dialect::Sqlite => Bind::Float(d.to_f64()?),
                _ => Bind::Decimal(d.clone()),
            },
            _ => return None,
        },
        SqlKind::Float => Bind::Float(value.as_f64()?),
        SqlKind::Decimal => match (dialect, value) {
            (_, Value::Int(i)) => Bind::Int(*i),
            (Dialect::Sqlite, v) => Bind::Float(v.as_f64()?),
            (_, Value::Float(f)) => Bind::Decimal(BigDecimal::from_str(&f.to_string()).ok()?),
            (_, Value::Decimal(d)) => Bind::Decimal(d.clone()),
            _ => return None,
        },
        SqlKind::Uuid => {
            let uuid = match value {
                Value::Uuid(u) => *u,
                Value::String(s) => uuid::Uuid::parse_str(s).ok()?,
                _ => return None,
            };
            match dialect {
                Dialect::Postgres => Bind::Uuid(uuid),
                // MySQL/MariaDB and SQLite keep uuids as text (sqlx would send 16 raw bytes).
                Dialect::MySql | Dialect::Sqlite => Bind::Text(uuid.hyphenated().to_string()),
            }
        }
        SqlKind::Timestamp | SqlKind::NaiveTimestamp => {
            let Value::Date(instant) = value else {
                return None;
            };
            match (dialect, kind) {
                (Dialect::Postgres, SqlKind::Timestamp) => Bind::TimestampTz(*instant),
                (Dialect::Postgres | Dialect::MySql, _) => Bind::Timestamp(instant.naive_utc()),
                (Dialect::Sqlite, _) => {
                    Bind::Text(instant.format(SQLITE_TIMESTAMP_FORMAT).to_string())
                }
            }
        }
        SqlKind::Date => {
            let date: NaiveDate = match value {
                Value::Dateonly(d) => *d,
                Value::Date(d) => d.date_naive(),
                _ => return None,
            };
            match dialect {
                Dialect::Sqlite => Bind::Text(date.format("%Y-%m-%d").to_string()),
                Dialect::Postgres | Dialect::MySql => Bind::Date(date),
            }
        }
        SqlKind::Time => {
            let Value::Time(time) = value else {
                return None;
            };
            match dialect {
                Dialect::Sqlite => Bind::Text(time.format("%H:%M:%S%.f").to_string()),
                Dialect::Postgres | Dialect::MySql => Bind::Time(*time),
            }
        }
        SqlKind::Binary => match value {
            Value::Binary(b) => Bind::Bytes(b.clone()),
            _ => return None,
        },
        // Handled by `push_value`.
        SqlKind::Text
        | SqlKind::Enum
        | SqlKind::Json
        | SqlKind::Jsonb
        | SqlKind::Bit
        | SqlKind::Interval
        | SqlKind::Array(_) => return None,
    })
}

/// A bind for a text pattern (LIKE, GLOB, regex, lengths are bound separately).
pub(crate) fn push_text(w: &mut Writer, text: String) {
    w.bind(Bind::Text(text));
}

/// The PostgreSQL cast of a bound scalar, for enums and user-defined string types.
fn pg_scalar_cast(column: &Column) -> Option<&str> {
    match column.kind {
        SqlKind::Enum => column.pg_cast.as_deref(),
        SqlKind::Text if super::pg_text_needs_cast(column) => column.pg_cast.as_deref(),
        _ => None,
    }
}

/// The PostgreSQL array type a `text[]` bind is cast to.
fn pg_array_cast(column: &Column, inner: &SqlKind) -> String {
    if let Some(cast) = &column.pg_cast {
        return cast.clone();
    }
    // Without the introspected type name, the element kind gives a compatible type.
    let element = match inner {
        SqlKind::Bool => "boolean",
        SqlKind::Int => "bigint",
        SqlKind::Float => "double precision",
        SqlKind::Decimal => "numeric",
        SqlKind::Uuid => "uuid",
        SqlKind::Json => "json",
        SqlKind::Jsonb => "jsonb",
        SqlKind::Timestamp => "timestamptz",
        SqlKind::NaiveTimestamp => "timestamp",
        SqlKind::Date => "date",
        SqlKind::Time => "time",
        SqlKind::Binary => "bytea",
        _ => "text",
    };
    format!("{element}[]")
}

/// The PostgreSQL text form of an array element (`None` for NULL); `None` overall when the value
/// cannot be an array element.
pub(crate) fn value_to_array_text(value: &Value) -> Option<Option<String>> {
    Some(Some(match value {
        Value::Null => return Some(None),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Decimal(d) => d.to_string(),
        Value::String(s) => s.clone(),
        Value::Date(d) => format_datetime(d),
        Value::Dateonly(d) => d.format("%Y-%m-%d").to_string(),
        Value::Time(t) => t.format("%H:%M:%S%.f").to_string(),
        Value::Uuid(u) => u.to_string(),
        Value::Json(j) => j.to_string(),
        Value::Binary(b) => format!("\\x{}", hex::encode(b)),
        Value::Point(..) | Value::Array(_) | Value::Record(_) => return None,
    }))
}
