//! Types declared by a CHECK constraint rather than by the column type, so that one schema gives
//! one answer on every database:
//! - `json_valid(col)` on a text column: MariaDB's `JSON` is `LONGTEXT` with that check, served
//!   as Json exactly as a PostgreSQL `json`/`jsonb` column;
//! - `col IN ('a', 'b', …)` on a text column: SQLite has no enum type, and this is how one is
//!   declared there; served as an Enum with those values in declaration order, as a PostgreSQL
//!   enum type or a MySQL `ENUM(…)` is.
//!
//! Each check expression is parsed with `sqlparser` (already used for native queries), and only
//! those two shapes are recognised, optionally with `col IS NULL OR …` (either way round, and in
//! any parentheses): anything else in a check is left alone. On SQLite, the check expressions
//! are first cut out of the table's `CREATE TABLE` text by [`sqlite_check_bodies`], which only
//! needs to know where strings, quoted identifiers and comments start and end.

use std::collections::HashMap;

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, ObjectNamePart,
    Value as SqlValue,
};
use sqlparser::dialect::{MySqlDialect, SQLiteDialect};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use super::super::dialect::Dialect;
use super::super::model::SqlKind;
use super::super::types;
use crate::datasource::schema::{ColumnType, PrimitiveType};

/// What a check declares about one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Declared {
    /// `json_valid(column)`.
    Json { column: String },
    /// `column IN ('a', 'b')`: the values in declaration order.
    Enum { column: String, values: Vec<String> },
}

impl Declared {
    fn column(&self) -> &str {
        match self {
            Self::Json { column } | Self::Enum { column, .. } => column,
        }
    }
}

/// The declaration of one check expression (the text between the parentheses of `CHECK (…)`),
/// if it has one of the recognised shapes.
pub(crate) fn recognise(dialect: Dialect, check: &str) -> Option<Declared> {
    let expr = match dialect {
        Dialect::Sqlite => parse(&SQLiteDialect {}, check)?,
        Dialect::MySql => parse(&MySqlDialect {}, check)?,
        // PostgreSQL declares both with types of its own.
        Dialect::Postgres => return None,
    };
    declared(&expr)
}

fn parse(dialect: &dyn sqlparser::dialect::Dialect, check: &str) -> Option<Expr> {
    let mut parser = Parser::new(dialect).try_with_sql(check).ok()?;
    let expr = parser.parse_expr().ok()?;
    // The whole text must be the expression: `a IN ('x') AND b > 1` is not an enum.
    (parser.peek_token().token == Token::EOF).then_some(expr)
}

fn declared(expr: &Expr) -> Option<Declared> {
    match expr {
        Expr::Nested(inner) => declared(inner),
        // NULL passes a CHECK anyway, so `col IS NULL OR <shape>` declares the same.
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Or,
            right,
        } => {
            let (null, other) = match (is_null(left), is_null(right)) {
                (Some(column), _) => (column, right),
                (None, Some(column)) => (column, left),
                (None, None) => return None,
            };
            let shape = declared(other)?;
            shape.column().eq_ignore_ascii_case(null).then_some(shape)
        }
        Expr::InList {
            expr,
            list,
            negated: false,
        } => {
            let column = column(expr)?;
            let values = list.iter().map(string).collect::<Option<Vec<String>>>()?;
            if values.is_empty() {
                return None;
            }
            Some(Declared::Enum { column, values })
        }
        Expr::Function(function) => {
            let [ObjectNamePart::Identifier(name)] = function.name.0.as_slice() else {
                return None;
            };
            if !name.value.eq_ignore_ascii_case("json_valid") {
                return None;
            }
            let FunctionArguments::List(list) = &function.args else {
                return None;
            };
            let [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] = list.args.as_slice() else {
                return None;
            };
            Some(Declared::Json {
                column: column(arg)?,
            })
        }
        _ => None,
    }
}

/// `column IS NULL`, possibly in parentheses.
fn is_null(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Nested(inner) => is_null(inner),
        Expr::IsNull(inner) => column_ref(inner),
        _ => None,
    }
}

/// A bare or quoted column name (`status`, `"status"`, `` `status` ``, `[status]`). SQLite
/// reads a double-quoted word as a string only when it names no column: here it is the column.
fn column_ref(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Nested(inner) => column_ref(inner),
        Expr::Identifier(ident) => Some(&ident.value),
        _ => None,
    }
}

fn column(expr: &Expr) -> Option<String> {
    column_ref(expr).map(str::to_owned)
}

/// A string literal: `'a'`, or `"a"`, which SQLite (and MySQL by default) read as a string
/// when it names no column.
fn string(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Value(value) => match &value.value {
            SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        Expr::Identifier(ident) if ident.quote_style == Some('"') => Some(ident.value.clone()),
        _ => None,
    }
}

/// The declarations of a table's checks by lower-cased column name (SQLite and MySQL column
/// names are case-insensitive). Several enum checks on one column keep the values all of them
/// allow, in the first one's order; a column with both a JSON and an enum check keeps neither.
pub(crate) fn by_column(checks: impl IntoIterator<Item = Declared>) -> HashMap<String, Declared> {
    let mut out: HashMap<String, Option<Declared>> = HashMap::new();
    for check in checks {
        let key = check.column().to_lowercase();
        let merged = match (out.remove(&key), check) {
            (None, check) => Some(check),
            (Some(None), _) => None,
            (Some(Some(Declared::Json { column })), Declared::Json { .. }) => {
                Some(Declared::Json { column })
            }
            (
                Some(Some(Declared::Enum { column, values })),
                Declared::Enum { values: other, .. },
            ) => Some(Declared::Enum {
                column,
                values: values.into_iter().filter(|v| other.contains(v)).collect(),
            }),
            (Some(Some(_)), _) => None,
        };
        out.insert(key, merged);
    }
    out.into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

/// Applies a check's declaration to a column introspected as a string (kind `Text`): a JSON
/// check makes it Json, an enum check an Enum with its values. Other columns are left alone
/// (`x IN (1, 2)` on an integer is no enum, and a column already typed keeps its type).
pub(crate) fn apply(
    declared: Option<&Declared>,
    (kind, column_type): (SqlKind, ColumnType),
) -> ((SqlKind, ColumnType), Vec<String>) {
    let is_text =
        kind == SqlKind::Text && column_type == ColumnType::Primitive(PrimitiveType::String);
    match declared {
        Some(Declared::Json { .. }) if is_text => (
            (SqlKind::Json, ColumnType::Primitive(PrimitiveType::Json)),
            Vec::new(),
        ),
        Some(Declared::Enum { values, .. }) if is_text && !values.is_empty() => {
            (types::enumeration(), values.clone())
        }
        _ => ((kind, column_type), Vec::new()),
    }
}

/// The text of each `CHECK (…)` of a SQLite `CREATE TABLE` statement, column and table
/// constraints alike, without its outer parentheses. Strings (`'…'`), quoted identifiers
/// (`"…"`, `` `…` ``, `[…]`) and comments are skipped, so a column named `check` or a default
/// `'CHECK (x)'` is not taken for one.
pub(crate) fn sqlite_check_bodies(create: &str) -> Vec<&str> {
    let bytes = create.as_bytes();
    let mut bodies = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' | b'`' => i = skip_quoted(bytes, i, bytes[i]),
            b'[' => i = skip_quoted(bytes, i, b']'),
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |p| i + p + 1);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = create[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |p| i + 2 + p + 2);
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if !create[start..i].eq_ignore_ascii_case("check") {
                    continue;
                }
                let mut open = i;
                while open < bytes.len() && bytes[open].is_ascii_whitespace() {
                    open += 1;
                }
                if bytes.get(open) != Some(&b'(') {
                    continue;
                }
                if let Some(close) = matching_paren(bytes, open) {
                    bodies.push(&create[open + 1..close]);
                    i = close + 1;
                }
            }
            _ => i += 1,
        }
    }
    bodies
}

/// The index after a quoted run starting at `start` (a doubled closing quote is part of it).
fn skip_quoted(bytes: &[u8], start: usize, close: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == close {
            if close != b']' && bytes.get(i + 1) == Some(&close) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

/// The index of the parenthesis closing the one at `open`, skipping quoted runs.
fn matching_paren(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'\'' | b'"' | b'`' => {
                i = skip_quoted(bytes, i, bytes[i]);
                continue;
            }
            b'[' => {
                i = skip_quoted(bytes, i, b']');
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enumeration(column: &str, values: &[&str]) -> Option<Declared> {
        Some(Declared::Enum {
            column: column.to_owned(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        })
    }

    fn json(column: &str) -> Option<Declared> {
        Some(Declared::Json {
            column: column.to_owned(),
        })
    }

    #[test]
    fn enum_checks_in_every_spelling() {
        let lite = Dialect::Sqlite;
        for check in [
            "status IN ('a','b','c')",
            "status in ( 'a' , 'b', 'c' )",
            "\"status\" In ('a', \"b\", 'c')",
            "`status` IN ('a','b','c')",
            "[status] IN ('a','b','c')",
            "(status IN ('a','b','c'))",
            "status IS NULL OR status IN ('a','b','c')",
            "(status IN ('a','b','c')) or (STATUS is null)",
            "status\n  IN\n  ('a',\n'b',\n'c')",
        ] {
            assert_eq!(
                recognise(lite, check),
                enumeration("status", &["a", "b", "c"]),
                "{check}"
            );
        }
        assert_eq!(
            recognise(lite, "kind IN ('it''s', 'a,b', 'x)', '')"),
            enumeration("kind", &["it's", "a,b", "x)", ""])
        );
        assert_eq!(
            recognise(Dialect::MySql, "`y` in ('p','q')"),
            enumeration("y", &["p", "q"])
        );
    }

    #[test]
    fn other_checks_declare_nothing() {
        let lite = Dialect::Sqlite;
        for check in [
            "status NOT IN ('a','b')",
            "status IN ('a') AND length(status) < 3",
            "status IN (1, 2)",
            "status IN ('a', 1)",
            "status IN (SELECT x FROM t)",
            "lower(status) IN ('a')",
            "other IS NULL OR status IN ('a')",
            "status IS NULL AND status IN ('a')",
            "price > 0",
            "json_valid(a, b)",
            "json_valid('x')",
            "not json",
            "",
            "status IN ('a'",
        ] {
            assert_eq!(recognise(lite, check), None, "{check}");
        }
        assert_eq!(recognise(Dialect::Postgres, "status IN ('a')"), None);
    }

    #[test]
    fn json_checks() {
        assert_eq!(
            recognise(Dialect::MySql, "json_valid(`data`)"),
            json("data")
        );
        assert_eq!(
            recognise(Dialect::MySql, "JSON_VALID( `my col` )"),
            json("my col")
        );
        assert_eq!(
            recognise(Dialect::Sqlite, "data IS NULL OR json_valid(data)"),
            json("data")
        );
    }

    #[test]
    fn check_bodies_are_cut_out_of_create_table() {
        let sql = "CREATE TABLE \"t\" (
            id INTEGER PRIMARY KEY,
            \"check\" TEXT DEFAULT 'CHECK (no)', -- CHECK (comment)
            /* CHECK (block) */
            status TEXT NOT NULL CHECK(status IN ('a', 'b)')),
            [odd CHECK (x)] TEXT,
            kind TEXT CONSTRAINT kind_ok check ( kind in ('x','y') ),
            CONSTRAINT pair CHECK ((status = 'a') OR (kind = 'y'))
        )";
        assert_eq!(
            sqlite_check_bodies(sql),
            [
                "status IN ('a', 'b)')",
                " kind in ('x','y') ",
                "(status = 'a') OR (kind = 'y')"
            ]
        );
        assert!(sqlite_check_bodies("CREATE TABLE t (checked TEXT, x CHECK)").is_empty());
        assert!(sqlite_check_bodies("CREATE TABLE t (x CHECK (unclosed").is_empty());
    }

    #[test]
    fn several_checks_on_one_column() {
        let merged = by_column([
            enumeration("S", &["a", "b", "c"]).unwrap(),
            enumeration("s", &["c", "a"]).unwrap(),
            json("j").unwrap(),
            json("J").unwrap(),
            json("both").unwrap(),
            enumeration("both", &["x"]).unwrap(),
        ]);
        assert_eq!(merged.get("s"), enumeration("S", &["a", "c"]).as_ref());
        assert_eq!(merged.get("j"), json("j").as_ref());
        assert_eq!(merged.get("both"), None);
    }

    #[test]
    fn only_text_columns_take_a_declaration() {
        let text = (SqlKind::Text, ColumnType::Primitive(PrimitiveType::String));
        let number = (SqlKind::Int, ColumnType::Primitive(PrimitiveType::Number));
        let e = enumeration("s", &["a", "b"]);
        assert_eq!(
            apply(e.as_ref(), text.clone()),
            (types::enumeration(), vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(apply(e.as_ref(), number.clone()), (number, Vec::new()));
        assert_eq!(
            apply(json("s").as_ref(), text.clone()).0,
            (SqlKind::Json, ColumnType::Primitive(PrimitiveType::Json))
        );
        assert_eq!(apply(None, text.clone()), (text, Vec::new()));
    }
}
