//! Native queries: exactly one read-only `SELECT` (or `WITH … SELECT`) with `$name` variables
//! bound as parameters.
//!
//! The text is scanned once, following each database's own lexical rules (string literals,
//! quoted identifiers, comments and PostgreSQL dollar quotes skipped), to replace `$name`
//! variables with placeholders and drop comments. The rewritten text — exactly what will run —
//! is then parsed with `sqlparser` in the database's dialect and must be one query statement
//! that neither writes (`SELECT … INTO`, data-modifying `WITH`) nor locks rows. Both the scanner
//! and the parser must see a single statement, so a disagreement between the two lexers is
//! refused rather than run. The parse also refuses calls to functions that a read-only
//! transaction still runs but that wait, lock, act on other sessions, change the session or run
//! SQL text the check never sees ([`REFUSED_FUNCTIONS`]). The query then runs inside a read-only
//! transaction (PostgreSQL `BEGIN READ ONLY`, MySQL `START TRANSACTION READ ONLY`) or, on SQLite,
//! with `PRAGMA query_only` set for the duration of the query; the database cancels it after the
//! `nativeQueryTimeoutInSeconds` timeout, and the session it ran in is reset before the pooled
//! connection is reused (or the connection is closed).

use std::ops::ControlFlow;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use sqlparser::ast::{Expr, ObjectName, Query, Select, Statement, TableFactor, Visit, Visitor};
use sqlparser::dialect::{MySqlDialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::parser::{Parser, ParserError};

use super::build::{Bind, Writer};
use super::collection::{
    Operation, connection_lost, db_error, live_connection, mysql_args, pg_args, sqlite_args,
};
use super::decode;
use super::dialect::Dialect;
use super::{Pool, Shared};
use crate::datasource::{Error, Record, Result, Value};

fn refuse(reason: impl Into<String>) -> Error {
    Error::Unprocessable(format!(
        "Only a single read-only SELECT query is allowed: {}",
        reason.into()
    ))
}

/// The query rewritten with placeholders, and the variables in placeholder order.
#[derive(Debug, PartialEq)]
pub(crate) struct Prepared {
    pub sql: String,
    pub binds: Vec<Bind>,
}

/// Checks that `query` is one read-only SELECT and binds its `$name` variables.
pub(crate) fn prepare(
    dialect: Dialect,
    query: &str,
    variables: &IndexMap<String, Value>,
) -> Result<Prepared> {
    let prepared = substitute(dialect, query, variables)?;
    check_read_only(dialect, &prepared.sql)?;
    Ok(prepared)
}

/// Replaces `$name` variables with placeholders and drops comments and trailing semicolons.
/// Refuses what the parser cannot judge: text after a statement's end, MySQL executable
/// comments (the parser reads them as comments, MySQL runs them) and raw placeholders (they
/// would shift the binds).
fn substitute(
    dialect: Dialect,
    query: &str,
    variables: &IndexMap<String, Value>,
) -> Result<Prepared> {
    let chars: Vec<char> = query.chars().collect();
    let mut w = Writer::new(dialect);
    // The user's SQL keeps every variable a bind, however many: the count is checked below.
    w.bind_budget = usize::MAX;
    let mut i = 0;
    let mut ended = false;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let comment = (c == '-' && next == Some('-')) || (c == '/' && next == Some('*'));
        if ended && !c.is_whitespace() && !comment && c != ';' {
            return Err(refuse("several statements"));
        }
        match c {
            '\'' | '"' | '`' => {
                // MySQL strings take backslash escapes (its identifiers do not).
                let backslash = dialect == Dialect::MySql && c != '`';
                let end = skip_quoted(&chars, i, c, backslash)?;
                push_chars(&mut w, &chars[i..end]);
                i = end;
            }
            '[' if dialect == Dialect::Sqlite => {
                // SQLite reads `[…]` as a quoted identifier, with no escapes.
                let end = chars[i..]
                    .iter()
                    .position(|&c| c == ']')
                    .map(|p| i + p + 1)
                    .ok_or_else(|| refuse("an unterminated quoted identifier"))?;
                push_chars(&mut w, &chars[i..end]);
                i = end;
            }
            '-' if next == Some('-') && line_comment_starts(&chars, i, dialect) => {
                let end = chars[i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(chars.len(), |p| i + p);
                i = end;
                w.push(" ");
            }
            '#' if dialect == Dialect::MySql => {
                let end = chars[i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(chars.len(), |p| i + p);
                i = end;
                w.push(" ");
            }
            '/' if next == Some('*') => {
                if dialect == Dialect::MySql && executable_comment(&chars[i + 2..]) {
                    return Err(refuse("MySQL executable comments"));
                }
                i = skip_block_comment(&chars, i, dialect)?;
                w.push(" ");
            }
            ';' => {
                ended = true;
                i += 1;
            }
            '?' if dialect != Dialect::Postgres => {
                return Err(refuse("positional parameters ('?'): use $name variables"));
            }
            '$' => {
                let name_len = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .count();
                let name: String = chars[i + 1..i + 1 + name_len].iter().collect();
                let after = chars.get(i + 1 + name_len).copied();
                if dialect == Dialect::Postgres
                    && (after == Some('$') || name_len == 0 && next == Some('$'))
                {
                    // A dollar-quoted string `$tag$ … $tag$`.
                    let end = skip_dollar_quoted(&chars, i, name_len)?;
                    push_chars(&mut w, &chars[i..end]);
                    i = end;
                    continue;
                }
                if name_len == 0 {
                    push_chars(&mut w, &chars[i..=i]);
                    i += 1;
                    continue;
                }
                if name.starts_with(|c: char| c.is_ascii_digit()) {
                    return Err(refuse("positional parameters ($1): use $name variables"));
                }
                let value = variables.get(&name).ok_or_else(|| {
                    Error::validation(format!("Unknown variable \"${name}\" in the query"))
                })?;
                push_variable(&mut w, &name, value)?;
                i += 1 + name_len;
            }
            c if c.is_alphabetic() || c == '_' => {
                let len = chars[i..]
                    .iter()
                    .take_while(|c| c.is_alphanumeric() || **c == '_' || **c == '$')
                    .count();
                push_chars(&mut w, &chars[i..i + len]);
                i += len;
                // PostgreSQL `E'…'` strings take backslash escapes: `E'\''` is one quote.
                if dialect == Dialect::Postgres
                    && len == 1
                    && matches!(c, 'E' | 'e')
                    && chars.get(i) == Some(&'\'')
                {
                    let end = skip_quoted(&chars, i, '\'', true)?;
                    push_chars(&mut w, &chars[i..end]);
                    i = end;
                }
            }
            other => {
                let mut buffer = [0u8; 4];
                w.push(other.encode_utf8(&mut buffer));
                i += 1;
            }
        }
    }
    let Writer { sql, binds, .. } = w;
    let most = max_binds(dialect);
    if binds.len() > most {
        return Err(Error::Unprocessable(format!(
            "The query uses {} variables; the database accepts at most {most} in one query",
            binds.len()
        )));
    }
    Ok(Prepared {
        sql: sql.trim().to_owned(),
        binds,
    })
}

/// The most binds the driver sends in one statement: PostgreSQL and MySQL number them with 16
/// bits, SQLite caps them at `SQLITE_MAX_VARIABLE_NUMBER`.
fn max_binds(dialect: Dialect) -> usize {
    match dialect {
        Dialect::Postgres | Dialect::MySql => usize::from(u16::MAX),
        Dialect::Sqlite => 32_766,
    }
}

fn push_chars(w: &mut Writer, chars: &[char]) {
    let text: String = chars.iter().collect();
    w.push(&text);
}

/// Whether a block comment's body (after `/*`) is one MySQL or MariaDB runs: `/*!…*/`
/// (MySQL, MariaDB), `/*M!…*/` (MariaDB only) or an optimizer hint `/*+…*/`.
fn executable_comment(body: &[char]) -> bool {
    matches!(body, ['!' | '+', ..] | ['M' | 'm', '!', ..])
}

/// Parses the rewritten query in the database's dialect: exactly one statement, a query that
/// reads and does not lock.
fn check_read_only(dialect: Dialect, sql: &str) -> Result<()> {
    let parsed = match dialect {
        Dialect::Postgres => Parser::parse_sql(&PostgreSqlDialect {}, sql),
        Dialect::MySql => Parser::parse_sql(&MySqlDialect {}, sql),
        Dialect::Sqlite => Parser::parse_sql(&SQLiteDialect {}, sql),
    };
    // The user wrote the SQL, so the parser's message (which quotes it) is theirs to see. Its
    // line and column count in the rewritten text, which differs from theirs only by comments
    // and variables.
    let statements = parsed.map_err(|error| {
        let message = match error {
            ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
            ParserError::RecursionLimitExceeded => "the query is nested too deeply".to_owned(),
        };
        Error::Unprocessable(format!("The query could not be parsed: {message}"))
    })?;
    let statement = match statements.as_slice() {
        [] => return Err(refuse("the query is empty")),
        [statement] => statement,
        _ => return Err(refuse("several statements")),
    };
    match statement.visit(&mut ReadOnly) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(reason) => Err(refuse(reason)),
    }
}

/// Walks every statement, query and SELECT of the tree, subqueries and `WITH` members
/// included, and stops at the first that writes or locks.
struct ReadOnly;

impl Visitor for ReadOnly {
    type Break = String;

    fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<String> {
        if matches!(statement, Statement::Query(_)) {
            return ControlFlow::Continue(());
        }
        // The statement's keyword names it; the whole statement would be the user's full text.
        let text = statement.to_string();
        let keyword = text.split_whitespace().next().unwrap_or("this statement");
        ControlFlow::Break(format!("{keyword} is not allowed"))
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        if query.locks.is_empty() {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break("row locks (FOR UPDATE, FOR SHARE) are not allowed".to_owned())
        }
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<String> {
        if select.into.is_none() {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break("SELECT … INTO is not allowed".to_owned())
        }
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<String> {
        match expr {
            Expr::Function(function) => refuse_function(&function.name),
            _ => ControlFlow::Continue(()),
        }
    }

    /// `FROM pg_sleep(5)`, `FROM dblink(…)`: functions in the FROM clause.
    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        match factor {
            TableFactor::Table {
                name,
                args: Some(_),
                ..
            }
            | TableFactor::Function { name, .. } => refuse_function(name),
            _ => ControlFlow::Continue(()),
        }
    }
}

/// Functions a read-only transaction still runs but a chart or segment query has no use for:
/// they wait (`pg_sleep`, `SLEEP`, `BENCHMARK`), take locks that outlive the query
/// (`pg_advisory_lock`, `GET_LOCK`), act on other sessions (`pg_terminate_backend`), change the
/// session (`set_config`), run SQL text this check never sees (`query_to_xml`, `dblink`), or
/// reach the server's files (`pg_read_file`, `lo_import`, `LOAD_FILE`). Lower case; entries
/// ending with `*` are prefixes. A function of the database's own (a user-defined one calling
/// these) is beyond any list: the statement timeout, the session reset after each query, and a
/// read-only database role (see the README) are what bound it.
const REFUSED_FUNCTIONS: &[&str] = &[
    // PostgreSQL
    "pg_sleep*",
    "pg_advisory_*",
    "pg_try_advisory_*",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_promote",
    "pg_switch_wal",
    "pg_create_restore_point",
    "pg_backup_*",
    "pg_start_backup",
    "pg_stop_backup",
    "pg_log_backend_memory_contexts",
    "pg_notify",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_*",
    "pg_stat_file",
    "pg_file_*",
    "pg_logdir_ls",
    "pg_create_*",
    "pg_drop_replication_slot",
    "pg_replication_*",
    "set_config",
    "dblink*",
    "lo_*",
    "query_to_xml*",
    "cursor_to_xml*",
    "ts_stat",
    // MySQL and MariaDB
    "sleep",
    "benchmark",
    "get_lock",
    "release_lock",
    "release_all_locks",
    "load_file",
    "master_pos_wait",
    "source_pos_wait",
    "master_gtid_wait",
    "wait_for_executed_gtid_set",
    "wait_until_sql_thread_after_gtids",
    "sys_exec",
    "sys_eval",
    // SQLite
    "load_extension",
    "readfile",
    "writefile",
];

/// Breaks on a call to one of [`REFUSED_FUNCTIONS`], whatever its schema (`pg_catalog.pg_sleep`)
/// and case.
fn refuse_function(name: &ObjectName) -> ControlFlow<String> {
    let Some(last) = name.0.last().and_then(|part| part.as_ident()) else {
        return ControlFlow::Continue(());
    };
    let called = last.value.to_ascii_lowercase();
    let refused = REFUSED_FUNCTIONS
        .iter()
        .any(|entry| match entry.strip_suffix('*') {
            Some(prefix) => called.starts_with(prefix),
            None => called == *entry,
        });
    if refused {
        ControlFlow::Break(format!(
            "the function {} is not allowed (it waits, locks, changes the session or reaches \
             beyond the query)",
            last.value
        ))
    } else {
        ControlFlow::Continue(())
    }
}

/// Where a quoted literal or identifier ends (after its closing quote). Doubled quotes escape;
/// so does a backslash when `backslash` is set.
fn skip_quoted(chars: &[char], start: usize, quote: char, backslash: bool) -> Result<usize> {
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        if backslash && c == '\\' {
            i += 2;
            continue;
        }
        if c == quote {
            if chars.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return Ok(i + 1);
        }
        i += 1;
    }
    Err(refuse("an unterminated quoted string"))
}

/// `--` starts a comment; on MySQL only when followed by whitespace (else `1--1` is arithmetic).
fn line_comment_starts(chars: &[char], i: usize, dialect: Dialect) -> bool {
    dialect != Dialect::MySql || chars.get(i + 2).is_none_or(|c| c.is_whitespace())
}

/// Where a block comment ends; PostgreSQL nests them.
fn skip_block_comment(chars: &[char], start: usize, dialect: Dialect) -> Result<usize> {
    let nests = dialect == Dialect::Postgres;
    let mut depth = 0;
    let mut i = start;
    while i + 1 < chars.len() {
        if chars[i] == '/' && chars[i + 1] == '*' && (depth == 0 || nests) {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars[i + 1] == '/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return Ok(i);
            }
        } else {
            i += 1;
        }
    }
    Err(refuse("an unterminated comment"))
}

/// Where a PostgreSQL dollar-quoted string `$tag$…$tag$` ends.
fn skip_dollar_quoted(chars: &[char], start: usize, tag_len: usize) -> Result<usize> {
    let tag: Vec<char> = chars[start..start + tag_len + 2].to_vec();
    let body = start + tag.len();
    let mut i = body;
    while i + tag.len() <= chars.len() {
        if chars[i..i + tag.len()] == tag[..] {
            return Ok(i + tag.len());
        }
        i += 1;
    }
    Err(refuse("an unterminated dollar-quoted string"))
}

/// A variable's placeholder and bind. NULL is written as the keyword (a typed NULL bind would
/// not compare with every column type on PostgreSQL).
fn push_variable(w: &mut Writer, name: &str, value: &Value) -> Result<()> {
    let bind = match value {
        Value::Null => {
            w.push("NULL");
            return Ok(());
        }
        Value::Bool(b) => Bind::Bool(*b),
        Value::Int(i) => Bind::Int(*i),
        Value::Float(f) => Bind::Float(*f),
        Value::Decimal(d) => Bind::Decimal(d.clone()),
        Value::String(s) => Bind::Text(s.clone()),
        Value::Date(d) => Bind::TimestampTz(*d),
        Value::Dateonly(d) => Bind::Date(*d),
        Value::Time(t) => Bind::Time(*t),
        Value::Uuid(u) => Bind::Uuid(*u),
        Value::Json(j) => Bind::Json(j.clone()),
        Value::Binary(b) => Bind::Bytes(b.clone()),
        Value::Array(items) if w.dialect == Dialect::Postgres => Bind::TextArray(
            items
                .iter()
                .map(super::build::value_to_array_text)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    Error::validation(format!("Variable \"${name}\" cannot be bound"))
                })?,
        ),
        _ => {
            return Err(Error::validation(format!(
                "Variable \"${name}\" cannot be bound"
            )));
        }
    };
    w.bind(bind);
    Ok(())
}

/// How native queries of one datasource run.
#[derive(Debug)]
pub(crate) struct Settings {
    /// The database cancels a query that runs longer (`nativeQueryTimeoutInSeconds`).
    pub timeout: Duration,
    /// MySQL or MariaDB, learnt at the first native query: they name the timeout differently.
    mariadb: OnceLock<bool>,
}

impl Settings {
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            mariadb: OnceLock::new(),
        }
    }
}

/// A database error of the user's own SQL is reported to them; connection failures stay
/// internal. A query the database cancelled for its timeout says so.
fn query_error(error: sqlx::Error, timeout: Duration) -> Error {
    let Some(db) = error.as_database_error() else {
        return db_error(error, Operation::Read);
    };
    // PostgreSQL `query_canceled`, MariaDB `ER_STATEMENT_TIMEOUT`, MySQL `ER_QUERY_TIMEOUT`,
    // SQLite `SQLITE_INTERRUPT` (raised by the progress handler below).
    let timed_out = match db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        Some(mysql) => matches!(mysql.number(), 1969 | 3024),
        None => matches!(db.code().as_deref(), Some("57014" | "9")),
    };
    if timed_out {
        return Error::Unprocessable(format!(
            "The query was cancelled after {} s (nativeQueryTimeoutInSeconds)",
            timeout.as_secs()
        ));
    }
    Error::Unprocessable(format!("The query failed: {}", db.message()))
}

/// Why one run of a native query failed: its connection was lost (the server restarted or failed
/// over, an administrator ended the session), which a second run on a live connection may
/// survive, or anything else, already in its public form.
enum Failure {
    Lost(sqlx::Error),
    Other(Error),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Self::Other(error)
    }
}

/// Sorts a driver error of one run: a lost connection is kept for the retry.
fn failure(error: sqlx::Error, timeout: Duration) -> Failure {
    if connection_lost(&error).is_some() {
        Failure::Lost(error)
    } else {
        Failure::Other(query_error(error, timeout))
    }
}

/// Runs a native query: checked (one read-only SELECT, no function that waits, locks or reaches
/// outside the query), in a read-only transaction, under the statement timeout. The connection
/// goes back to the pool with its session state reset, or is closed when the reset fails.
///
/// A run whose connection was lost runs once more, on a connection that answers a ping, as the
/// collections' reads do (`collection::exec::read`): a native query is read-only, so a second
/// run cannot apply anything twice.
pub(crate) async fn run(
    shared: &Shared,
    settings: &Settings,
    query: &str,
    variables: &IndexMap<String, Value>,
) -> Result<Vec<Record>> {
    let Prepared { sql, binds } = prepare(shared.dialect, query, variables)?;
    let timeout = settings.timeout;
    let error = match run_once(shared, settings, &sql, &binds, false).await {
        Ok(records) => return Ok(records),
        Err(Failure::Other(error)) => return Err(error),
        Err(Failure::Lost(error)) => error,
    };
    shared
        .retried_reads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cause = connection_lost(&error).unwrap_or_default();
    // The cause only (an error code): never the statement or its values.
    tracing::warn!(%cause, "A native query lost its database connection; running it once more on a fresh connection");
    match run_once(shared, settings, &sql, &binds, true).await {
        Ok(records) => Ok(records),
        Err(Failure::Other(error)) => Err(error),
        Err(Failure::Lost(error)) => Err(query_error(error, timeout)),
    }
}

/// One run of a prepared native query on a pooled connection (`live`: one that answered a ping).
async fn run_once(
    shared: &Shared,
    settings: &Settings,
    sql: &str,
    binds: &[Bind],
    live: bool,
) -> std::result::Result<Vec<Record>, Failure> {
    let timeout = settings.timeout;
    let failed = |e| failure(e, timeout);
    match &shared.pool {
        Pool::Postgres(pool) => {
            let acquired = if live {
                live_connection(pool).await
            } else {
                pool.acquire().await
            };
            let mut conn = acquired.map_err(failed)?;
            let result = run_postgres(&mut conn, sql, binds, timeout).await;
            // A read-only transaction still lets functions change the session: advisory locks
            // (session-scoped, kept after the rollback) and settings (`set_config(…, false)`).
            // `RESET ALL` keeps the connection's startup settings (its UTC timezone).
            let reset =
                sqlx::Executor::execute(&mut *conn, "RESET ALL; SELECT pg_advisory_unlock_all()")
                    .await;
            if reset.is_err() {
                // Never hand a connection in an unknown state back to the pool.
                let _ = conn.detach();
            }
            result
        }
        Pool::MySql(pool) => {
            let acquired = if live {
                live_connection(pool).await
            } else {
                pool.acquire().await
            };
            let mut conn = acquired.map_err(failed)?;
            let mariadb = match settings.mariadb.get() {
                Some(known) => *known,
                None => {
                    let version: String = sqlx::query_scalar("SELECT VERSION()")
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(failed)?;
                    *settings
                        .mariadb
                        .get_or_init(|| version.to_ascii_lowercase().contains("mariadb"))
                }
            };
            let result = run_mysql(&mut conn, mariadb, sql, binds, timeout).await;
            // Named locks (`GET_LOCK`) live as long as the session.
            let unset = if mariadb {
                "SET SESSION max_statement_time = DEFAULT; DO RELEASE_ALL_LOCKS()"
            } else {
                "SET SESSION max_execution_time = DEFAULT; DO RELEASE_ALL_LOCKS()"
            };
            if sqlx::Executor::execute(&mut *conn, unset).await.is_err() {
                let _ = conn.detach();
            }
            result
        }
        Pool::Sqlite(pool) => {
            // An embedded database has no connection to lose: one run.
            let mut conn = pool
                .acquire()
                .await
                .map_err(|e| Failure::Other(query_error(e, timeout)))?;
            let result = run_sqlite(&mut conn, sql, binds, timeout)
                .await
                .map_err(Failure::Other);
            let unhooked = match conn.lock_handle().await {
                Ok(mut handle) => {
                    handle.remove_progress_handler();
                    Ok(())
                }
                Err(e) => Err(e),
            };
            let reset = match unhooked {
                Ok(()) => sqlx::query("PRAGMA query_only = OFF")
                    .execute(&mut *conn)
                    .await
                    .map(drop),
                Err(e) => Err(e),
            };
            if reset.is_err() {
                // Never hand a read-only (or broken) connection back to the pool.
                let _ = conn.detach();
            }
            result
        }
    }
}

/// The timeout in whole milliseconds, at least one: written into SET statements, never user text.
fn millis(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_millis())
        .unwrap_or(u64::MAX)
        .clamp(1, u64::from(u32::MAX))
}

async fn run_postgres(
    conn: &mut sqlx::PgConnection,
    sql: &str,
    binds: &[Bind],
    timeout: Duration,
) -> std::result::Result<Vec<Record>, Failure> {
    let failed = |e| failure(e, timeout);
    let mut tx = sqlx::Connection::begin_with(conn, "BEGIN READ ONLY")
        .await
        .map_err(failed)?;
    // `SET LOCAL`: the timeout ends with the transaction.
    let set = format!("SET LOCAL statement_timeout = {}", millis(timeout));
    sqlx::Executor::execute(&mut *tx, set.as_str())
        .await
        .map_err(failed)?;
    let rows = sqlx::query_with(sql, pg_args(binds)?)
        .persistent(false)
        .fetch_all(&mut *tx)
        .await
        .map_err(failed)?;
    tx.rollback().await.map_err(failed)?;
    Ok(decode::pg_generic(&rows)?)
}

async fn run_mysql(
    conn: &mut sqlx::MySqlConnection,
    mariadb: bool,
    sql: &str,
    binds: &[Bind],
    timeout: Duration,
) -> std::result::Result<Vec<Record>, Failure> {
    let failed = |e| failure(e, timeout);
    // MariaDB counts seconds for any statement, MySQL milliseconds for SELECTs.
    let millis = millis(timeout);
    let set = if mariadb {
        format!(
            "SET SESSION max_statement_time = {}.{:03}",
            millis / 1000,
            millis % 1000
        )
    } else {
        format!("SET SESSION max_execution_time = {millis}")
    };
    sqlx::Executor::execute(&mut *conn, set.as_str())
        .await
        .map_err(failed)?;
    let mut tx = sqlx::Connection::begin_with(conn, "START TRANSACTION READ ONLY")
        .await
        .map_err(failed)?;
    let rows = sqlx::query_with(sql, mysql_args(binds)?)
        .persistent(false)
        .fetch_all(&mut *tx)
        .await
        .map_err(failed)?;
    tx.rollback().await.map_err(failed)?;
    Ok(decode::mysql_generic(&rows)?)
}

async fn run_sqlite(
    conn: &mut sqlx::SqliteConnection,
    sql: &str,
    binds: &[Bind],
    timeout: Duration,
) -> Result<Vec<Record>> {
    let failed = |e| query_error(e, timeout);
    sqlx::query("PRAGMA query_only = ON")
        .execute(&mut *conn)
        .await
        .map_err(failed)?;
    // SQLite has no statement timeout: a progress handler interrupts the query once the deadline
    // has passed (checked every 1,000 virtual machine instructions).
    let deadline = Instant::now() + timeout;
    conn.lock_handle()
        .await
        .map_err(failed)?
        .set_progress_handler(1_000, move || Instant::now() < deadline);
    let rows = sqlx::query_with(sql, sqlite_args(binds)?)
        .persistent(false)
        .fetch_all(&mut *conn)
        .await
        .map_err(failed)?;
    decode::sqlite_generic(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, Value)]) -> IndexMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn variables_become_placeholders_outside_literals() {
        let v = vars(&[("name", Value::from("x")), ("n", Value::Int(3))]);
        let p = prepare(
            Dialect::Postgres,
            "SELECT * FROM t WHERE a = $name AND b > $n AND c = '$name'",
            &v,
        )
        .expect("valid");
        assert_eq!(
            p.sql,
            "SELECT * FROM t WHERE a = $1 AND b > $2 AND c = '$name'"
        );
        assert_eq!(p.binds, vec![Bind::Text("x".into()), Bind::Int(3)]);
        let p = prepare(Dialect::MySql, "select a from t where a = $n;", &v).expect("valid");
        assert_eq!(p.sql, "select a from t where a = ?");
        let p = prepare(Dialect::Sqlite, "SELECT $n, $n", &v).expect("valid");
        assert_eq!(p.sql, "SELECT ?, ?");
        assert_eq!(p.binds.len(), 2);
    }

    #[test]
    fn null_variables_are_the_keyword() {
        let v = vars(&[("x", Value::Null)]);
        let p = prepare(Dialect::Postgres, "SELECT $x", &v).expect("valid");
        assert_eq!(p.sql, "SELECT NULL");
        assert!(p.binds.is_empty());
    }

    const ALL: [Dialect; 3] = [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite];

    fn refused(dialect: Dialect, query: &str) -> bool {
        matches!(
            prepare(dialect, query, &IndexMap::new()),
            Err(Error::Unprocessable(_))
        )
    }

    #[track_caller]
    fn assert_accepted(dialect: Dialect, query: &str) {
        let result = prepare(dialect, query, &IndexMap::new());
        assert!(result.is_ok(), "{dialect:?} {query}: {result:?}");
    }

    #[track_caller]
    fn assert_refused(dialect: Dialect, query: &str) {
        let result = prepare(dialect, query, &IndexMap::new());
        assert!(
            matches!(result, Err(Error::Unprocessable(_))),
            "{dialect:?} {query}: {result:?}"
        );
    }

    #[test]
    fn accepts_identifiers_named_like_keywords() {
        // The keyword scanner this replaced refused every one of these.
        for dialect in ALL {
            for query in [
                "SELECT comment, set FROM t",
                "SELECT load, lock, into_x, comment_count FROM t",
                "SELECT t.do, t.update, t.delete FROM t",
                "SELECT id AS comment FROM t WHERE set > 1 ORDER BY load",
                "SELECT grant_id, revoked_at, copy, execute FROM t",
            ] {
                assert_accepted(dialect, query);
            }
        }
        for dialect in [Dialect::MySql, Dialect::Sqlite] {
            assert_accepted(dialect, "SELECT do FROM t");
        }
    }

    #[test]
    fn accepts_read_queries() {
        for dialect in ALL {
            for query in [
                "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) \
                 SELECT i FROM n",
                "SELECT * FROM t WHERE id IN (SELECT t_id FROM u WHERE u.x = t.x)",
                "SELECT (SELECT COUNT(*) FROM u) AS c FROM t",
                "SELECT * FROM (SELECT a, b FROM t) AS s WHERE EXISTS (SELECT 1 FROM u)",
                "SELECT a FROM t UNION SELECT b FROM u ORDER BY 1",
                "SELECT a FROM t UNION ALL SELECT b FROM u",
                "SELECT g, ROW_NUMBER() OVER (PARTITION BY g ORDER BY id) AS rn FROM t",
                "SELECT SUM(x) OVER w AS running FROM t WINDOW w AS (ORDER BY id)",
                "SELECT status AS label, COUNT(*) AS value FROM orders \
                 GROUP BY status HAVING COUNT(*) > 1",
                "SELECT 'a; DELETE FROM t' AS s, 'DROP TABLE t' AS d",
                "SELECT CASE WHEN a > 1 THEN 'x' ELSE 'y' END AS c FROM t LIMIT 10 OFFSET 5",
                "select count(*) as value from t;  ",
                "SELECT a FROM t -- DELETE FROM t\n WHERE b = 1;",
                "SELECT a /* ; DELETE FROM t */ FROM t",
            ] {
                assert_accepted(dialect, query);
            }
        }
        for query in [
            "SELECT $$it's; DELETE$$ AS a",
            "SELECT $tag$ $$ ; DROP TABLE t $tag$ AS a",
            "SELECT \"update\", \"a;b\" FROM t /* delete /* nested */ still */",
            "SELECT E'it\\'s; DROP TABLE t' AS a",
            "SELECT a::text, b::numeric(10, 2) FROM t",
            "SELECT data -> 'k' ->> 'v' FROM t WHERE data ? 'k'",
            "SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b DESC",
            "VALUES (1, 'a'), (2, 'b')",
        ] {
            assert_accepted(Dialect::Postgres, query);
        }
        for query in [
            "SELECT `delete`, 'it\\'s; drop', \"also; a string\" FROM t # comment",
            "SELECT 1--1",
            "SELECT DATE_FORMAT(created_at, '%Y-%m') AS label FROM t",
        ] {
            assert_accepted(Dialect::MySql, query);
        }
        for query in [
            "SELECT [a;b], `c` FROM [t]",
            "SELECT strftime('%Y', created_at) AS label FROM t",
        ] {
            assert_accepted(Dialect::Sqlite, query);
        }
    }

    #[test]
    fn pg_casts_on_variables() {
        let v = vars(&[("id", Value::Int(3)), ("day", Value::from("2024-01-01"))]);
        let p = prepare(
            Dialect::Postgres,
            "SELECT * FROM t WHERE id = $id::int AND d >= $day::date",
            &v,
        )
        .expect("valid");
        assert_eq!(
            p.sql,
            "SELECT * FROM t WHERE id = $1::int AND d >= $2::date"
        );
        assert_eq!(p.binds.len(), 2);
    }

    #[test]
    fn refuses_several_statements() {
        for dialect in ALL {
            for query in [
                "SELECT 1; SELECT 2",
                "SELECT 1; DELETE FROM t",
                "SELECT 1 /* */; DELETE FROM t",
                "SELECT * FROM t; -- comment\nDELETE FROM t",
                "SELECT 'a'; SELECT 'b';",
            ] {
                assert_refused(dialect, query);
            }
        }
        // Where the database reads the quotes differently from a naive scan.
        assert_refused(Dialect::Postgres, "SELECT E'\\'' ; DELETE FROM t; --'");
        assert_refused(Dialect::Sqlite, "SELECT [it's]; DELETE FROM t; --'");
        assert_refused(Dialect::MySql, "SELECT 1--1; DROP TABLE t");
        assert_refused(Dialect::MySql, "SELECT 'it\\'s'; DROP TABLE t; -- '");
    }

    #[test]
    fn refuses_other_statements() {
        for dialect in ALL {
            for query in [
                "DELETE FROM t",
                "DELETE FROM t WHERE id IN (SELECT id FROM u)",
                "INSERT INTO t (a) VALUES (1)",
                "INSERT INTO t (a) SELECT a FROM u",
                "UPDATE t SET a = 1",
                "CREATE TABLE x (a int)",
                "CREATE TABLE x AS SELECT * FROM t",
                "CREATE VIEW v AS SELECT * FROM t",
                "DROP TABLE t",
                "ALTER TABLE t ADD COLUMN c int",
                "CREATE INDEX i ON t (a)",
                "EXPLAIN SELECT 1",
                "EXPLAIN DELETE FROM t",
            ] {
                assert_refused(dialect, query);
            }
        }
        for query in [
            "TRUNCATE t",
            "COPY t TO '/tmp/x'",
            "SET ROLE postgres",
            "SET search_path = x",
            "LISTEN x",
            "NOTIFY x",
            "CALL p()",
            "DO $$ BEGIN DELETE FROM t; END $$",
            "BEGIN",
            "COMMIT",
            "LOCK TABLE t",
            "GRANT SELECT ON t TO u",
            "PREPARE p AS SELECT 1",
            "EXPLAIN ANALYZE DELETE FROM t",
            "MERGE INTO t USING u ON t.id = u.id WHEN MATCHED THEN DELETE",
        ] {
            assert_refused(Dialect::Postgres, query);
        }
        for query in [
            "SET @a = 1",
            "DO SLEEP(1)",
            "LOCK TABLES t READ",
            "HANDLER t OPEN",
            "LOAD DATA INFILE '/tmp/x' INTO TABLE t",
            "REPLACE INTO t (a) VALUES (1)",
        ] {
            assert_refused(Dialect::MySql, query);
        }
        for query in [
            "ATTACH 'x' AS y",
            "DETACH y",
            "PRAGMA query_only = OFF",
            "VACUUM",
            "REPLACE INTO t (a) VALUES (1)",
        ] {
            assert_refused(Dialect::Sqlite, query);
        }
    }

    #[test]
    fn refuses_writes_and_locks_inside_a_select() {
        for query in [
            "SELECT * INTO copy FROM t",
            "SELECT * FROM t FOR UPDATE",
            "SELECT * FROM t FOR SHARE",
            "SELECT * FROM t FOR NO KEY UPDATE",
            "SELECT * FROM t FOR KEY SHARE",
            "SELECT * FROM t FOR UPDATE OF t SKIP LOCKED",
            "SELECT * FROM (SELECT * FROM t FOR UPDATE) AS s",
            "SELECT a FROM t UNION SELECT a FROM (SELECT * INTO x FROM u) AS s",
            "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
            "WITH d AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM d",
            "WITH d AS (INSERT INTO t (a) VALUES (1) RETURNING *) SELECT * FROM d",
            "WITH x AS (SELECT 1), d AS (DELETE FROM t RETURNING *) SELECT * FROM x",
            "WITH d AS (SELECT * FROM t FOR UPDATE) SELECT * FROM d",
            "SELECT * FROM t WHERE id IN \
             (WITH d AS (DELETE FROM t RETURNING id) SELECT id FROM d)",
        ] {
            assert_refused(Dialect::Postgres, query);
        }
        for query in [
            "SELECT * FROM t FOR UPDATE",
            "SELECT * FROM t FOR SHARE",
            "SELECT * FROM t LOCK IN SHARE MODE",
            "SELECT a INTO @x FROM t",
            "SELECT * FROM t INTO OUTFILE '/tmp/x'",
            "SELECT * INTO OUTFILE '/tmp/x' FROM t",
            "SELECT * FROM t WHERE id IN (SELECT id FROM u FOR UPDATE)",
        ] {
            assert_refused(Dialect::MySql, query);
        }
        for query in ["SELECT * FROM t FOR UPDATE", "SELECT * INTO copy FROM t"] {
            assert_refused(Dialect::Sqlite, query);
        }
    }

    #[test]
    fn refuses_functions_that_wait_lock_or_reach_outside_the_query() {
        for dialect in ALL {
            for query in [
                "SELECT pg_sleep(5)",
                "SELECT PG_SLEEP(5)",
                "SELECT pg_catalog.pg_sleep_for('5 seconds')",
                "SELECT 1 WHERE pg_advisory_lock(4242) IS NOT NULL",
                "SELECT pg_try_advisory_xact_lock(1)",
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
                "SELECT pg_cancel_backend(1)",
                "SELECT set_config('statement_timeout', '0', false)",
                "SELECT lo_import('/etc/passwd')",
                "SELECT pg_read_file('/etc/passwd')",
                "SELECT query_to_xml('SELECT pg_sleep(5)', true, true, '')",
                "SELECT a FROM t WHERE b IN (SELECT sleep(5))",
                "SELECT BENCHMARK(100000000, MD5('a'))",
                "SELECT GET_LOCK('a', 10)",
                "SELECT LOAD_FILE('/etc/passwd')",
                "SELECT COUNT(*) AS value FROM t WHERE (SELECT pg_sleep(1)) IS NULL",
                "WITH s AS (SELECT pg_sleep(1)) SELECT * FROM s",
            ] {
                let result = prepare(dialect, query, &IndexMap::new());
                assert!(
                    matches!(&result, Err(Error::Unprocessable(m)) if m.contains("is not allowed")),
                    "{dialect:?} {query}: {result:?}"
                );
            }
        }
        assert_refused(Dialect::Postgres, "SELECT * FROM pg_sleep(1)");
        assert_refused(
            Dialect::Postgres,
            "SELECT * FROM dblink('dbname=x', 'DELETE FROM t') AS t(a int)",
        );
        // Ordinary functions, and columns or tables named like the refused ones, pass.
        for dialect in ALL {
            for query in [
                "SELECT COUNT(*) AS value, MAX(sleep) FROM t",
                "SELECT lower(name), coalesce(a, b) FROM sleep",
            ] {
                assert_accepted(dialect, query);
            }
        }
    }

    #[test]
    fn refuses_mysql_executable_comments() {
        for query in [
            "SELECT /*! 1; DROP TABLE t */ 1",
            "SELECT 1 /*!50000 , SLEEP(1) */",
            "SELECT 1 /*M! , SLEEP(1) */",
            "SELECT 1 /*M!100000 , SLEEP(1) */",
            "SELECT /*+ MAX_EXECUTION_TIME(1) */ 1",
        ] {
            assert_refused(Dialect::MySql, query);
        }
        // Elsewhere these are plain comments.
        assert_accepted(Dialect::Postgres, "SELECT /*! DROP TABLE t */ 1");
        assert_accepted(Dialect::MySql, "SELECT /* ! not executable */ 1");
    }

    #[test]
    fn refuses_empty_unparsable_and_raw_placeholders() {
        for dialect in ALL {
            for query in [
                "",
                "   ",
                ";",
                "-- only a comment",
                "/* only a comment */ ;",
                "SELECT 'unterminated",
                "SELECT \"unterminated",
                "SELECT 1 /* unterminated",
                "SELECT a FROM",
                "SELECT * FROM t WHERE",
                "SELEC 1",
                "SELECT $1",
            ] {
                assert_refused(dialect, query);
            }
        }
        for dialect in [Dialect::MySql, Dialect::Sqlite] {
            assert_refused(dialect, "SELECT * FROM t WHERE a = ?");
        }
        assert_refused(Dialect::Postgres, "SELECT $$unterminated");
        assert_refused(Dialect::Sqlite, "SELECT [unterminated");
    }

    #[test]
    fn parse_errors_carry_the_parser_message() {
        let Err(Error::Unprocessable(message)) =
            prepare(Dialect::Postgres, "SELECT a FROM", &IndexMap::new())
        else {
            panic!("a parse error");
        };
        assert!(
            message.starts_with("The query could not be parsed: "),
            "{message}"
        );
        assert!(message.contains("Expected"), "{message}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let depth = 500;
        let query = format!("SELECT {}1{}", "(".repeat(depth), ")".repeat(depth));
        for dialect in ALL {
            assert!(refused(dialect, &query), "{dialect:?}");
        }
    }

    #[test]
    fn more_variables_than_the_driver_binds_are_refused_without_driver_detail() {
        let v = vars(&[("id", Value::Int(1))]);
        for dialect in ALL {
            let count = max_binds(dialect) + 5;
            let query = format!("SELECT 1 WHERE 1 IN ({})", vec!["$id"; count].join(", "));
            let Err(Error::Unprocessable(message)) = prepare(dialect, &query, &v) else {
                panic!("{dialect:?}: accepted");
            };
            assert_eq!(
                message,
                format!(
                    "The query uses {count} variables; the database accepts at most {} in one query",
                    max_binds(dialect)
                )
            );
            let query = format!("SELECT 1 WHERE 1 IN ({})", vec!["$id"; 20_000].join(", "));
            let prepared = prepare(dialect, &query, &v).expect("under the limit");
            assert_eq!(prepared.binds.len(), 20_000, "no variable is inlined");
        }
    }

    #[test]
    fn unknown_variables_are_validation_errors() {
        let result = prepare(Dialect::Postgres, "SELECT $missing", &IndexMap::new());
        assert!(matches!(result, Err(Error::Validation(_))));
    }
}
