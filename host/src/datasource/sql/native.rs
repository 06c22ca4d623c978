//! Native queries: exactly one read-only `SELECT` (or `WITH … SELECT`) with `$name` variables
//! bound as parameters. The text is scanned once (string literals, quoted identifiers, comments
//! and PostgreSQL dollar quotes skipped) to refuse anything else, then it runs inside a
//! read-only transaction (PostgreSQL `BEGIN READ ONLY`, MySQL `START TRANSACTION READ ONLY`) or,
//! on SQLite, with `PRAGMA query_only` set for the duration of the query.

use indexmap::IndexMap;

use super::build::{Bind, Writer};
use super::collection::{Operation, db_error, mysql_args, pg_args, sqlite_args};
use super::decode;
use super::dialect::Dialect;
use super::{Pool, Shared};
use crate::datasource::{Error, Record, Result, Value};

/// Keywords that make a statement something other than a plain read.
const FORBIDDEN: &[&str] = &[
    "INSERT",
    "UPDATE",
    "DELETE",
    "MERGE",
    "UPSERT",
    "CREATE",
    "DROP",
    "ALTER",
    "TRUNCATE",
    "GRANT",
    "REVOKE",
    "COPY",
    "CALL",
    "EXEC",
    "EXECUTE",
    "DO",
    "LOCK",
    "UNLOCK",
    "VACUUM",
    "ATTACH",
    "DETACH",
    "PRAGMA",
    "INTO",
    "LOAD",
    "HANDLER",
    "RENAME",
    "COMMENT",
    "REINDEX",
    "CLUSTER",
    "LISTEN",
    "NOTIFY",
    "PREPARE",
    "DEALLOCATE",
    "SET",
    "RESET",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
];

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
    let chars: Vec<char> = query.chars().collect();
    let mut w = Writer::new(dialect);
    let mut keywords: Vec<String> = Vec::new();
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
                let end = skip_quoted(&chars, i, c, dialect)?;
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
                if dialect == Dialect::MySql && matches!(chars.get(i + 2), Some('!' | '+')) {
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
                let word: String = chars[i..i + len].iter().collect();
                keywords.push(word.to_ascii_uppercase());
                w.push(&word);
                i += len;
            }
            other => {
                let mut buffer = [0u8; 4];
                w.push(other.encode_utf8(&mut buffer));
                i += 1;
            }
        }
    }
    check_keywords(&keywords)?;
    let Writer { sql, binds, .. } = w;
    Ok(Prepared {
        sql: sql.trim().to_owned(),
        binds,
    })
}

fn push_chars(w: &mut Writer, chars: &[char]) {
    let text: String = chars.iter().collect();
    w.push(&text);
}

/// The first keyword must start a read, and no keyword may write, lock or change the session.
fn check_keywords(keywords: &[String]) -> Result<()> {
    match keywords.first().map(String::as_str) {
        Some("SELECT" | "WITH" | "VALUES" | "TABLE") => {}
        Some(other) => return Err(refuse(format!("the query starts with {other}"))),
        None => return Err(refuse("the query is empty")),
    }
    for (i, keyword) in keywords.iter().enumerate() {
        if FORBIDDEN.contains(&keyword.as_str()) {
            return Err(refuse(format!("{keyword} is not allowed")));
        }
        // `FOR SHARE` / `FOR KEY SHARE` / `FOR NO KEY UPDATE` lock rows.
        if keyword == "FOR"
            && matches!(
                keywords.get(i + 1).map(String::as_str),
                Some("SHARE" | "KEY" | "NO")
            )
        {
            return Err(refuse("row locks are not allowed"));
        }
    }
    Ok(())
}

/// Where a quoted literal or identifier ends (after its closing quote). Doubled quotes escape;
/// MySQL strings also take backslash escapes.
fn skip_quoted(chars: &[char], start: usize, quote: char, dialect: Dialect) -> Result<usize> {
    let backslash = dialect == Dialect::MySql && quote != '`';
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

/// A database error of the user's own SQL is reported to them; connection failures stay
/// internal.
fn query_error(error: sqlx::Error) -> Error {
    match error.as_database_error() {
        Some(db) => Error::Unprocessable(format!("The query failed: {}", db.message())),
        None => db_error(error, Operation::Read),
    }
}

pub(crate) async fn run(
    shared: &Shared,
    query: &str,
    variables: &IndexMap<String, Value>,
) -> Result<Vec<Record>> {
    let Prepared { sql, binds } = prepare(shared.dialect, query, variables)?;
    match &shared.pool {
        Pool::Postgres(pool) => {
            let mut tx = pool
                .begin_with("BEGIN READ ONLY")
                .await
                .map_err(query_error)?;
            let rows = sqlx::query_with(&sql, pg_args(binds)?)
                .fetch_all(&mut *tx)
                .await
                .map_err(query_error)?;
            tx.rollback().await.map_err(query_error)?;
            decode::pg_generic(&rows)
        }
        Pool::MySql(pool) => {
            let mut tx = pool
                .begin_with("START TRANSACTION READ ONLY")
                .await
                .map_err(query_error)?;
            let rows = sqlx::query_with(&sql, mysql_args(binds)?)
                .fetch_all(&mut *tx)
                .await
                .map_err(query_error)?;
            tx.rollback().await.map_err(query_error)?;
            decode::mysql_generic(&rows)
        }
        Pool::Sqlite(pool) => {
            let mut conn = pool.acquire().await.map_err(query_error)?;
            let connection = &mut *conn;
            sqlx::query("PRAGMA query_only = ON")
                .execute(&mut *connection)
                .await
                .map_err(query_error)?;
            let result = sqlx::query_with(&sql, sqlite_args(binds)?)
                .fetch_all(&mut *connection)
                .await;
            let reset = sqlx::query("PRAGMA query_only = OFF")
                .execute(&mut *connection)
                .await;
            if reset.is_err() {
                // Never hand a read-only (or broken) connection back to the pool.
                let _ = conn.detach();
            }
            let rows = result.map_err(query_error)?;
            decode::sqlite_generic(&rows)
        }
    }
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

    #[test]
    fn refuses_writes_and_multiple_statements() {
        let none = IndexMap::new();
        for (dialect, query) in [
            (Dialect::Postgres, "DELETE FROM t"),
            (Dialect::Postgres, "SELECT 1; DELETE FROM t"),
            (
                Dialect::Postgres,
                "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
            ),
            (Dialect::Postgres, "SELECT * INTO copy FROM t"),
            (Dialect::Postgres, "SELECT * FROM t FOR UPDATE"),
            (Dialect::Postgres, "SELECT * FROM t FOR SHARE"),
            (Dialect::MySql, "SELECT * FROM t LOCK IN SHARE MODE"),
            (Dialect::MySql, "SELECT 1--1; DROP TABLE t"),
            (Dialect::MySql, "SELECT /*! 1; DROP TABLE t */ 1"),
            (Dialect::Sqlite, "ATTACH 'x' AS y"),
            (Dialect::Sqlite, "SELECT 1; PRAGMA query_only = OFF"),
            (Dialect::Postgres, "CREATE TABLE x (a int)"),
            (Dialect::Postgres, "   "),
            (Dialect::Sqlite, "SELECT * FROM t WHERE a = ?"),
            (Dialect::Postgres, "SELECT $1"),
            (Dialect::Postgres, "SELECT 'unterminated"),
        ] {
            let result = prepare(dialect, query, &none);
            assert!(
                matches!(result, Err(Error::Unprocessable(_))),
                "{dialect:?} {query}: {result:?}"
            );
        }
    }

    #[test]
    fn accepts_reads_with_comments_literals_and_trailing_semicolon() {
        let none = IndexMap::new();
        for (dialect, query) in [
            (
                Dialect::Postgres,
                "SELECT 'DELETE; DROP' AS a -- DELETE\n FROM t;",
            ),
            (
                Dialect::Postgres,
                "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
            ),
            (Dialect::Postgres, "SELECT $$it's; DELETE$$ AS a"),
            (Dialect::Postgres, "SELECT \"update\" FROM t /* delete */"),
            (
                Dialect::MySql,
                "SELECT `delete`, 'it\\'s; drop' FROM t # comment",
            ),
            (Dialect::Sqlite, "select count(*) as value from t;  "),
            (Dialect::MySql, "SELECT 1--1"),
        ] {
            let result = prepare(dialect, query, &none);
            assert!(result.is_ok(), "{dialect:?} {query}: {result:?}");
        }
    }

    #[test]
    fn unknown_variables_are_validation_errors() {
        let result = prepare(Dialect::Postgres, "SELECT $missing", &IndexMap::new());
        assert!(matches!(result, Err(Error::Validation(_))));
    }
}
