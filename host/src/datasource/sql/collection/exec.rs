//! Binds become driver arguments, and database errors become datasource errors (constraint
//! failures by `DatabaseError::kind()`, never by message).

use sqlx::Arguments as _;
use sqlx::error::ErrorKind;
use sqlx::mysql::MySqlArguments;
use sqlx::postgres::PgArguments;
use sqlx::sqlite::SqliteArguments;

use crate::datasource::error::{ConstraintViolation, Error, Result};
use crate::datasource::sql::build::{Bind, SQLITE_TIMESTAMP_FORMAT};

#[allow(clippy::needless_pass_by_value, reason = "used as a map_err callback")]
fn bind_error(e: sqlx::error::BoxDynError) -> Error {
    Error::Internal(format!("cannot bind a value: {e}"))
}

/// PostgreSQL arguments: every bind has a native type.
pub(crate) fn pg_args(binds: Vec<Bind>) -> Result<PgArguments> {
    let mut args = PgArguments::default();
    for bind in binds {
        match bind {
            Bind::Bool(v) => args.add(v),
            Bind::Int(v) => args.add(v),
            Bind::Float(v) => args.add(v),
            Bind::Decimal(v) => args.add(v),
            Bind::Text(v) => args.add(v),
            Bind::Uuid(v) => args.add(v),
            Bind::TimestampTz(v) => args.add(v),
            Bind::Timestamp(v) => args.add(v),
            Bind::Date(v) => args.add(v),
            Bind::Time(v) => args.add(v),
            Bind::Json(v) => args.add(v),
            Bind::Bytes(v) => args.add(v),
            Bind::TextArray(v) => args.add(v),
        }
        .map_err(bind_error)?;
    }
    Ok(args)
}

/// MySQL/MariaDB arguments: instants are UTC wall clocks (the session runs in UTC), uuids and
/// JSON are text.
pub(crate) fn mysql_args(binds: Vec<Bind>) -> Result<MySqlArguments> {
    let mut args = MySqlArguments::default();
    for bind in binds {
        match bind {
            Bind::Bool(v) => args.add(v),
            Bind::Int(v) => args.add(v),
            Bind::Float(v) => args.add(v),
            Bind::Decimal(v) => args.add(v),
            Bind::Text(v) => args.add(v),
            Bind::Uuid(v) => args.add(v.hyphenated().to_string()),
            Bind::TimestampTz(v) => args.add(v.naive_utc()),
            Bind::Timestamp(v) => args.add(v),
            Bind::Date(v) => args.add(v),
            Bind::Time(v) => args.add(v),
            Bind::Json(v) => args.add(v.to_string()),
            Bind::Bytes(v) => args.add(v),
            Bind::TextArray(_) => {
                return Err(Error::validation(
                    "Array values are only supported on PostgreSQL",
                ));
            }
        }
        .map_err(bind_error)?;
    }
    Ok(args)
}

/// SQLite arguments: dates, times, uuids and JSON are text (timestamps in the canonical
/// `YYYY-MM-DD HH:MM:SS.SSS` UTC form), decimals are reals.
pub(crate) fn sqlite_args(binds: Vec<Bind>) -> Result<SqliteArguments<'static>> {
    let mut args = SqliteArguments::default();
    for bind in binds {
        match bind {
            Bind::Bool(v) => args.add(v),
            Bind::Int(v) => args.add(v),
            Bind::Float(v) => args.add(v),
            Bind::Decimal(v) => args.add(v.to_string()),
            Bind::Text(v) => args.add(v),
            Bind::Uuid(v) => args.add(v.hyphenated().to_string()),
            Bind::TimestampTz(v) => args.add(v.format(SQLITE_TIMESTAMP_FORMAT).to_string()),
            Bind::Timestamp(v) => args.add(v.format(SQLITE_TIMESTAMP_FORMAT).to_string()),
            Bind::Date(v) => args.add(v.format("%Y-%m-%d").to_string()),
            Bind::Time(v) => args.add(v.format("%H:%M:%S%.f").to_string()),
            Bind::Json(v) => args.add(v.to_string()),
            Bind::Bytes(v) => args.add(v),
            Bind::TextArray(_) => {
                return Err(Error::validation(
                    "Array values are only supported on PostgreSQL",
                ));
            }
        }
        .map_err(bind_error)?;
    }
    Ok(args)
}

/// What kind of statement failed, for the foreign-key message.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Read,
    Write,
    Delete,
}

/// Maps a driver error: constraint failures by their kind, a `Match` pattern the database's
/// regex engine refuses as a validation error, anything else as a database error.
pub(crate) fn db_error(error: sqlx::Error, operation: Operation) -> Error {
    if let Some(message) = refused_regex(&error) {
        return Error::validation(format!("Invalid regular expression: {message}"));
    }
    let kind = error.as_database_error().map(|e| e.kind());
    let violation = match kind {
        Some(ErrorKind::UniqueViolation) => ConstraintViolation::Unique,
        Some(ErrorKind::ForeignKeyViolation) if operation == Operation::Delete => {
            ConstraintViolation::ForeignKeyOnDelete
        }
        Some(ErrorKind::ForeignKeyViolation) => ConstraintViolation::ForeignKeyOnWrite,
        Some(ErrorKind::NotNullViolation) => ConstraintViolation::NotNull,
        Some(ErrorKind::CheckViolation) => ConstraintViolation::Check,
        _ => return Error::Database(error),
    };
    Error::Constraint(violation)
}

/// The message of a database that refused a regular expression. The `regex` crate checks
/// `Match` patterns first, but each engine has its own syntax: PostgreSQL's ARE refuses `a**`
/// (`/**/OR/**/1=1`) and MariaDB's PCRE2 `(?<=a+)`, both valid for the crate. Only `Match`
/// binds a pattern the user wrote, so these codes are theirs to fix: PostgreSQL's SQLSTATE
/// 2201B, MariaDB's 1139 and MySQL 8's ICU errors 3684 to 3700, SQLite's REGEXP function
/// failing (`SQLITE_CONSTRAINT_FUNCTION`, 3091: REGEXP is the only function registered).
fn refused_regex(error: &sqlx::Error) -> Option<String> {
    let db = error.as_database_error()?;
    let refused = if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        matches!(mysql.number(), 1139 | 3684..=3700)
    } else {
        matches!(db.code().as_deref(), Some("2201B" | "3091"))
    };
    refused.then(|| db.message().to_owned())
}
