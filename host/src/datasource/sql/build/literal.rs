//! Values written into the SQL text, for the binds of a statement past [`BIND_BUDGET`].
//!
//! The drivers refuse statements with more binds than their protocol counts (65,535 on
//! PostgreSQL and MySQL, 32,766 on SQLite), and users do send more values than that: an `In`
//! filter of 70,000 ids, a bulk delete of 70,000 records or all records but 70,000. The Node
//! agent's Sequelize writes such values into the text. Here the first [`BIND_BUDGET`] values of a
//! statement stay bound and the rest become literals, so every statement runs whatever its size.
//!
//! Each literal is built from the typed [`Bind`] alone, never from text the user wrote as SQL:
//! numbers by Rust's own formatting, dates in fixed formats of digits and separators, and text
//! in forms whose every character is literal (PostgreSQL `E'…'` with `\` and `'` doubled, MySQL
//! `_utf8mb4 X'…'` hex, SQLite `CAST(X'…' AS TEXT)` hex). Each has the type its bind would have
//! had, so the SQL around it (casts, exact comparisons) is the same. A statement with literals
//! is run unprepared (`Statement::inlined`), so that the drivers' statement caches never hold
//! one.

use std::fmt::Write as _;

use chrono::SecondsFormat;

use super::{Bind, SQLITE_TIMESTAMP_FORMAT};
use crate::datasource::sql::dialect::Dialect;

/// Binds a statement keeps before its next values are written as literals: well under every
/// driver's limit, well above any ordinary statement.
pub(crate) const BIND_BUDGET: usize = 10_000;

/// Writes `bind` as a literal of the type the driver would have sent it as.
pub(crate) fn write(out: &mut String, dialect: Dialect, bind: &Bind) {
    match dialect {
        Dialect::Postgres => postgres(out, bind),
        Dialect::MySql => mysql(out, bind),
        Dialect::Sqlite => sqlite(out, bind),
    }
}

/// A number, in parentheses when negative: after a `-` of the surrounding SQL, `--` would open
/// a comment. Non-negative numbers stay bare, as `LIMIT` takes only those on MySQL.
fn number(out: &mut String, text: impl std::fmt::Display) {
    let text = text.to_string();
    if text.starts_with('-') {
        let _ = write!(out, "({text})");
    } else {
        out.push_str(&text);
    }
}

fn hex(out: &mut String, bytes: &[u8]) {
    out.push_str(&hex::encode(bytes));
}

/// `E'…'`: in an escape string every backslash is an escape whatever
/// `standard_conforming_strings` says, so doubling `\` and `'` leaves every character literal.
/// A NUL never reaches here (see `nul`), and PostgreSQL text cannot hold one anyway.
fn pg_text(out: &mut String, text: &str) {
    out.push_str("E'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            c => out.push(c),
        }
    }
    out.push('\'');
}

fn postgres(out: &mut String, bind: &Bind) {
    match bind {
        Bind::Bool(b) => out.push_str(if *b { "TRUE" } else { "FALSE" }),
        Bind::Int(i) => {
            let _ = write!(out, "({i}::int8)");
        }
        // `{:?}` spells infinities `inf` and `-inf`, which float8 input reads.
        Bind::Float(f) => {
            let _ = write!(out, "'{f:?}'::float8");
        }
        Bind::Decimal(d) => {
            let _ = write!(out, "'{d}'::numeric");
        }
        Bind::Text(t) => {
            pg_text(out, t);
            out.push_str("::text");
        }
        Bind::Uuid(u) => {
            let _ = write!(out, "'{}'::uuid", u.hyphenated());
        }
        Bind::TimestampTz(t) => {
            let _ = write!(
                out,
                "'{}'::timestamptz",
                t.to_rfc3339_opts(SecondsFormat::Micros, true)
            );
        }
        Bind::Timestamp(t) => {
            let _ = write!(out, "'{}'::timestamp", t.format("%Y-%m-%dT%H:%M:%S%.6f"));
        }
        Bind::Date(d) => {
            let _ = write!(out, "'{}'::date", d.format("%Y-%m-%d"));
        }
        Bind::Time(t) => {
            let _ = write!(out, "'{}'::time", t.format("%H:%M:%S%.6f"));
        }
        Bind::Json(j) => {
            pg_text(out, &j.to_string());
            out.push_str("::jsonb");
        }
        Bind::Bytes(b) => {
            out.push_str("decode('");
            hex(out, b);
            out.push_str("', 'hex')");
        }
        Bind::TextArray(items) => {
            out.push_str("ARRAY[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match item {
                    Some(text) => pg_text(out, text),
                    None => out.push_str("NULL"),
                }
            }
            out.push_str("]::text[]");
        }
    }
}

/// `_utf8mb4 X'…'`: a hex literal is never read for escapes (whatever `sql_mode` holds), and the
/// introducer makes it a utf8mb4 string, as a bound string is.
fn mysql_text(out: &mut String, text: &str) {
    out.push_str("_utf8mb4 X'");
    hex(out, text.as_bytes());
    out.push('\'');
}

/// The values of `collection::exec::mysql_args`, as literals.
fn mysql(out: &mut String, bind: &Bind) {
    match bind {
        Bind::Bool(b) => out.push_str(if *b { "TRUE" } else { "FALSE" }),
        Bind::Int(i) => number(out, i),
        // A literal with an exponent is a DOUBLE; MySQL has no infinity nor NaN.
        Bind::Float(f) if f.is_finite() => number(out, format!("{f:e}")),
        Bind::Float(_) => out.push_str("NULL"),
        Bind::Decimal(d) => number(out, d),
        Bind::Text(t) => mysql_text(out, t),
        Bind::Uuid(u) => mysql_text(out, &u.hyphenated().to_string()),
        Bind::TimestampTz(t) => {
            let _ = write!(
                out,
                "TIMESTAMP'{}'",
                t.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f")
            );
        }
        Bind::Timestamp(t) => {
            let _ = write!(out, "TIMESTAMP'{}'", t.format("%Y-%m-%d %H:%M:%S%.6f"));
        }
        Bind::Date(d) => {
            let _ = write!(out, "DATE'{}'", d.format("%Y-%m-%d"));
        }
        Bind::Time(t) => {
            let _ = write!(out, "TIME'{}'", t.format("%H:%M:%S%.6f"));
        }
        Bind::Json(j) => mysql_text(out, &j.to_string()),
        Bind::Bytes(b) => {
            out.push_str("X'");
            hex(out, b);
            out.push('\'');
        }
        // Refused before binding (`push_value`): arrays are PostgreSQL's only.
        Bind::TextArray(_) => out.push_str("NULL"),
    }
}

/// `CAST(X'…' AS TEXT)`: hex, so no character (a quote, a NUL) is ever read as SQL.
fn sqlite_text(out: &mut String, text: &str) {
    out.push_str("CAST(X'");
    hex(out, text.as_bytes());
    out.push_str("' AS TEXT)");
}

/// The values of `collection::exec::sqlite_args`, as literals.
fn sqlite(out: &mut String, bind: &Bind) {
    match bind {
        Bind::Bool(b) => out.push_str(if *b { "1" } else { "0" }),
        Bind::Int(i) => number(out, i),
        Bind::Float(f) if f.is_finite() => number(out, format!("{f:e}")),
        // SQLite reads an overflowing real as infinity; NaN binds as NULL.
        Bind::Float(f) if f.is_nan() => out.push_str("NULL"),
        Bind::Float(f) => out.push_str(if *f > 0.0 { "9e999" } else { "-9e999" }),
        Bind::Decimal(d) => sqlite_text(out, &d.to_string()),
        Bind::Text(t) => sqlite_text(out, t),
        Bind::Uuid(u) => sqlite_text(out, &u.hyphenated().to_string()),
        Bind::TimestampTz(t) => sqlite_text(out, &t.format(SQLITE_TIMESTAMP_FORMAT).to_string()),
        Bind::Timestamp(t) => sqlite_text(out, &t.format(SQLITE_TIMESTAMP_FORMAT).to_string()),
        Bind::Date(d) => sqlite_text(out, &d.format("%Y-%m-%d").to_string()),
        Bind::Time(t) => sqlite_text(out, &t.format("%H:%M:%S%.f").to_string()),
        Bind::Json(j) => sqlite_text(out, &j.to_string()),
        Bind::Bytes(b) => {
            out.push_str("X'");
            hex(out, b);
            out.push('\'');
        }
        Bind::TextArray(_) => out.push_str("NULL"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(dialect: Dialect, bind: &Bind) -> String {
        let mut out = String::new();
        write(&mut out, dialect, bind);
        out
    }

    #[test]
    fn text_is_written_so_that_no_character_is_read_as_sql() {
        let hostile = Bind::Text("it's \\'; DROP TABLE t; --é".into());
        assert_eq!(
            lit(Dialect::Postgres, &hostile),
            "E'it''s \\\\''; DROP TABLE t; --é'::text"
        );
        assert_eq!(
            lit(Dialect::MySql, &hostile),
            "_utf8mb4 X'69742773205c273b2044524f50205441424c4520743b202d2dc3a9'"
        );
        assert_eq!(
            lit(Dialect::Sqlite, &hostile),
            "CAST(X'69742773205c273b2044524f50205441424c4520743b202d2dc3a9' AS TEXT)"
        );
    }

    #[test]
    fn each_bind_keeps_its_type() {
        let date = chrono::NaiveDate::from_ymd_opt(2024, 2, 3).expect("date");
        let instant = date.and_hms_micro_opt(4, 5, 6, 7).expect("time").and_utc();
        let cases = [
            (Bind::Int(-5), ["(-5::int8)", "(-5)", "(-5)"]),
            (Bind::Int(15), ["(15::int8)", "15", "15"]),
            (Bind::Float(1.5), ["'1.5'::float8", "1.5e0", "1.5e0"]),
            (Bind::Bool(true), ["TRUE", "TRUE", "1"]),
            (
                Bind::TimestampTz(instant),
                [
                    "'2024-02-03T04:05:06.000007Z'::timestamptz",
                    "TIMESTAMP'2024-02-03 04:05:06.000007'",
                    "CAST(X'323032342d30322d30332030343a30353a30362e303030' AS TEXT)",
                ],
            ),
            (
                Bind::Date(date),
                [
                    "'2024-02-03'::date",
                    "DATE'2024-02-03'",
                    "CAST(X'323032342d30322d3033' AS TEXT)",
                ],
            ),
            (
                Bind::Bytes(vec![0, 255]),
                ["decode('00ff', 'hex')", "X'00ff'", "X'00ff'"],
            ),
        ];
        for (bind, [pg, my, lite]) in cases {
            assert_eq!(lit(Dialect::Postgres, &bind), pg);
            assert_eq!(lit(Dialect::MySql, &bind), my);
            assert_eq!(lit(Dialect::Sqlite, &bind), lite);
        }
        assert_eq!(
            lit(
                Dialect::Postgres,
                &Bind::TextArray(vec![Some("a'".into()), None])
            ),
            "ARRAY[E'a''', NULL]::text[]"
        );
        assert_eq!(
            lit(Dialect::Postgres, &Bind::Float(f64::INFINITY)),
            "'inf'::float8"
        );
    }
}
