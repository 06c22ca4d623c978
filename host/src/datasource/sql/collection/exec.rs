//! Binds become driver arguments, and database errors become datasource errors (constraint
//! failures by `DatabaseError::kind()`, never by message).

use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::Arguments as _;
use sqlx::error::ErrorKind;
use sqlx::mysql::{MySqlArguments, MySqlDatabaseError};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgDatabaseError};
use sqlx::sqlite::SqliteArguments;
use sqlx::{Connection as _, Database, Executor, IntoArguments};

use crate::datasource::error::{ConstraintViolation, Error, Result};
use crate::datasource::sql::build::{Bind, SQLITE_TIMESTAMP_FORMAT};

#[allow(clippy::needless_pass_by_value, reason = "used as a map_err callback")]
fn bind_error(e: sqlx::error::BoxDynError) -> Error {
    Error::Internal(format!("cannot bind a value: {e}"))
}

/// PostgreSQL arguments: every bind has a native type.
pub(crate) fn pg_args(binds: &[Bind]) -> Result<PgArguments> {
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
pub(crate) fn mysql_args(binds: &[Bind]) -> Result<MySqlArguments> {
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
pub(crate) fn sqlite_args<'q>(binds: &'q [Bind]) -> Result<SqliteArguments<'q>> {
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

/// Runs one SELECT on the pool and returns its rows. Every read of a collection goes through here
/// (lists, counts, gets, aggregates, CSV, charts); writes never do.
///
/// A read whose connection was cut under it (the server restarted or failed over, an
/// administrator ended the session) runs once more, on a connection that answers a ping, so
/// that a failover costs no user-visible error. Only reads: a write whose connection broke may
/// have committed before the error reached us, and running it again could apply it twice.
pub(crate) async fn read<'q, DB, A>(
    pool: &sqlx::Pool<DB>,
    sql: &'q str,
    args: impl Fn() -> Result<A>,
    persistent: bool,
    retries: &AtomicU64,
) -> Result<Vec<DB::Row>>
where
    DB: Database + sqlx::database::HasStatementCache,
    A: IntoArguments<'q, DB> + 'q,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let first = sqlx::query_with(sql, args()?)
        .persistent(persistent)
        .fetch_all(pool)
        .await;
    let cause = match first {
        Ok(rows) => return Ok(rows),
        Err(error) => match connection_lost(&error) {
            Some(cause) => cause,
            None => return Err(db_error(error, Operation::Read)),
        },
    };
    retries.fetch_add(1, Ordering::Relaxed);
    // The cause only (an error code): never the statement or its values.
    tracing::warn!(%cause, "A read lost its database connection; running it once more on a fresh connection");
    let mut connection = live_connection(pool)
        .await
        .map_err(|e| db_error(e, Operation::Read))?;
    sqlx::query_with(sql, args()?)
        .persistent(persistent)
        .fetch_all(&mut *connection)
        .await
        .map_err(|e| db_error(e, Operation::Read))
}

/// A pooled connection that answers a ping. The server that cut one connection has often cut
/// every idle one (a restart, a failover, `pg_terminate_backend` on each): each dead one leaves
/// the pool now (so that a replacement can be opened) rather than failing the next request.
pub(crate) async fn live_connection<DB: Database>(
    pool: &sqlx::Pool<DB>,
) -> std::result::Result<PoolConnection<DB>, sqlx::Error> {
    for _ in 0..pool.options().get_max_connections() {
        let mut connection = pool.acquire().await?;
        if connection.ping().await.is_ok() {
            return Ok(connection);
        }
        drop(connection.detach());
    }
    // Every slot held a dead connection: this one is new.
    pool.acquire().await
}

/// Why an error means the connection itself is gone, as a code safe to log; `None` for every
/// other error (a statement the server refused, a pool timeout: running it again would not
/// help). I/O and protocol errors; PostgreSQL's SQLSTATE class 08 (connection exception) and
/// 57P01 to 57P03 (admin or crash shutdown, cannot connect now); MySQL/MariaDB 1053 (server
/// shutdown), 1927 (connection killed), 2006 (server gone away) and 2013 (connection lost).
pub(crate) fn connection_lost(error: &sqlx::Error) -> Option<String> {
    match error {
        sqlx::Error::Io(e) => Some(format!("I/O error ({:?})", e.kind())),
        sqlx::Error::Protocol(_) => Some("protocol error".to_owned()),
        sqlx::Error::Database(db) => {
            if let Some(pg) = db.try_downcast_ref::<PgDatabaseError>() {
                let code = pg.code();
                (code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03"))
                    .then(|| format!("SQLSTATE {code}"))
            } else if let Some(mysql) = db.try_downcast_ref::<MySqlDatabaseError>() {
                matches!(mysql.number(), 1053 | 1927 | 2006 | 2013)
                    .then(|| format!("error {}", mysql.number()))
            } else {
                None
            }
        }
        _ => None,
    }
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
