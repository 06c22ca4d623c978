//! Condition trees become WHERE clauses. Every operator a SQL column advertises
//! (`sql::operators::supported`) is written natively on every database; time-relative operators
//! are lowered to comparisons before this point.

use super::binds::{push_text, push_value};
use super::joins::Joins;
use super::{ColumnRef, Writer};
use crate::datasource::error::{Error, Result};
use crate::datasource::query::{Aggregator, ConditionTree, Leaf, Operator};
use crate::datasource::record::Value;
use crate::datasource::schema::{ColumnType, PrimitiveType};
use crate::datasource::sql::dialect::Dialect;
use crate::datasource::sql::model::SqlKind;

/// Joins every relation path used by the tree (before the FROM clause is written).
pub(crate) fn prepare(joins: &mut Joins<'_>, tree: &ConditionTree) -> Result<()> {
    for leaf in tree.leaves() {
        joins.resolve(&leaf.field)?;
    }
    Ok(())
}

/// Writes the tree as a boolean SQL expression.
pub(crate) fn write(w: &mut Writer, joins: &Joins<'_>, tree: &ConditionTree) -> Result<()> {
    match tree {
        ConditionTree::Leaf(leaf) => write_leaf(w, joins, leaf),
        ConditionTree::Branch {
            aggregator,
            conditions,
        } => {
            let (glue, empty) = match aggregator {
                Aggregator::And => (" AND ", TRUE),
                Aggregator::Or => (" OR ", FALSE),
            };
            match conditions.as_slice() {
                [] => w.push(empty),
                [only] => write(w, joins, only)?,
                many => {
                    w.push("(");
                    for (i, condition) in many.iter().enumerate() {
                        if i > 0 {
                            w.push(glue);
                        }
                        write(w, joins, condition)?;
                    }
                    w.push(")");
                }
            }
            Ok(())
        }
    }
}

/// Constant conditions, written the same way on every database.
const TRUE: &str = "1 = 1";
const FALSE: &str = "1 = 0";

fn write_leaf(w: &mut Writer, joins: &Joins<'_>, leaf: &Leaf) -> Result<()> {
    use Operator::*;
    let column = joins.lookup(&leaf.field)?;
    let value = &leaf.value;
    match leaf.operator {
        // Present is the negation of Blank: a string must also be non-empty (§9.2).
        Present => {
            if is_string(&column) {
                w.push("(");
                column.write_compared(w);
                w.push(" <> '' AND ");
                is_null(w, &column, false);
                w.push(")");
            } else {
                is_null(w, &column, false);
            }
        }
        Missing => is_null(w, &column, true),
        Blank => {
            if is_string(&column) {
                w.push("(");
                column.write_compared(w);
                w.push(" = '' OR ");
                column.write_compared(w);
                w.push(" IS NULL)");
            } else {
                is_null(w, &column, true);
            }
        }
        Equal => {
            if value.is_null() {
                is_null(w, &column, true);
            } else {
                compare(w, &column, " = ", value)?;
            }
        }
        NotEqual => {
            if value.is_null() {
                is_null(w, &column, false);
            } else {
                // NULL rows differ from any value: they are included, as in the Node agent.
                w.push("(");
                compare(w, &column, " <> ", value)?;
                w.push(" OR ");
                is_null(w, &column, true);
                w.push(")");
            }
        }
        LessThan | Before => compare_or_false(w, &column, " < ", value)?,
        GreaterThan | After => compare_or_false(w, &column, " > ", value)?,
        LessThanOrEqual => compare_or_false(w, &column, " <= ", value)?,
        GreaterThanOrEqual => compare_or_false(w, &column, " >= ", value)?,
        In => write_in(w, &column, list(leaf)?, false)?,
        NotIn => write_in(w, &column, list(leaf)?, true)?,
        Like => pattern(
            w,
            &column,
            Case::Sensitive,
            &Pattern::Like(text(leaf)?),
            false,
        ),
        ILike => pattern(
            w,
            &column,
            Case::Insensitive,
            &Pattern::Like(text(leaf)?),
            false,
        ),
        Contains => pattern(
            w,
            &column,
            Case::Sensitive,
            &Pattern::Contains(text(leaf)?),
            false,
        ),
        NotContains => pattern(
            w,
            &column,
            Case::Sensitive,
            &Pattern::Contains(text(leaf)?),
            true,
        ),
        IContains => pattern(
            w,
            &column,
            Case::Insensitive,
            &Pattern::Contains(text(leaf)?),
            false,
        ),
        NotIContains => pattern(
            w,
            &column,
            Case::Insensitive,
            &Pattern::Contains(text(leaf)?),
            true,
        ),
        StartsWith => pattern(
            w,
            &column,
            Case::Sensitive,
            &Pattern::StartsWith(text(leaf)?),
            false,
        ),
        IStartsWith => pattern(
            w,
            &column,
            Case::Insensitive,
            &Pattern::StartsWith(text(leaf)?),
            false,
        ),
        EndsWith => pattern(
            w,
            &column,
            Case::Sensitive,
            &Pattern::EndsWith(text(leaf)?),
            false,
        ),
        IEndsWith => pattern(
            w,
            &column,
            Case::Insensitive,
            &Pattern::EndsWith(text(leaf)?),
            false,
        ),
        LongerThan => length(w, &column, " > ", leaf)?,
        ShorterThan => length(w, &column, " < ", leaf)?,
        Match => regex(w, &column, text(leaf)?)?,
        IncludesAll | IncludesNone => includes(w, &column, leaf)?,
        op if op.is_time_relative() => {
            return Err(Error::Internal(format!(
                "time operator {op} on '{}' reached the SQL builder unlowered",
                leaf.field
            )));
        }
        op => {
            return Err(Error::validation(format!(
                "The given operator '{}' is not supported by the column: '{}'.",
                op.snake_case(),
                leaf.field
            )));
        }
    }
    Ok(())
}

fn is_string(column: &ColumnRef<'_>) -> bool {
    column.column.column_type == ColumnType::Primitive(PrimitiveType::String)
}

fn is_null(w: &mut Writer, column: &ColumnRef<'_>, null: bool) {
    column.write_raw(w);
    w.push(if null { " IS NULL" } else { " IS NOT NULL" });
}

fn compare(w: &mut Writer, column: &ColumnRef<'_>, op: &str, value: &Value) -> Result<()> {
    column.write_compared(w);
    w.push(op);
    push_compared_value(w, column, value)
}

/// A comparison with NULL matches no row.
fn compare_or_false(w: &mut Writer, column: &ColumnRef<'_>, op: &str, value: &Value) -> Result<()> {
    if value.is_null() {
        w.push(FALSE);
        Ok(())
    } else {
        compare(w, column, op, value)
    }
}

/// A value on the other side of [`ColumnRef::write_compared`]: PostgreSQL intervals are compared
/// as seconds, so their value is a plain number; every other kind binds as for a write (SQLite
/// timestamps are already in the normalised text form).
fn push_compared_value(w: &mut Writer, column: &ColumnRef<'_>, value: &Value) -> Result<()> {
    if w.dialect == Dialect::Postgres && column.column.kind == SqlKind::Interval {
        let seconds = value.as_f64().ok_or_else(|| {
            Error::validation(format!(
                "Wrong type for \"{}\": {value}. Expects Number",
                column.column.name
            ))
        })?;
        w.bind(super::Bind::Float(seconds));
        return Ok(());
    }
    push_value(w, column.column, value)
}

fn list(leaf: &Leaf) -> Result<&[Value]> {
    match &leaf.value {
        Value::Array(items) => Ok(items),
        other => Err(Error::validation(format!(
            "Wrong type for \"{}\": {other}. Expects an array",
            leaf.field
        ))),
    }
}

fn text(leaf: &Leaf) -> Result<&str> {
    leaf.value.as_str().ok_or_else(|| {
        Error::validation(format!(
            "Wrong type for \"{}\": {}. Expects String",
            leaf.field, leaf.value
        ))
    })
}

/// `In` / `NotIn`, with NULL handled explicitly because `x IN (NULL)` is never true:
/// `In [a, null]` → `(c IN (a) OR c IS NULL)`; `NotIn [a]` → `(c NOT IN (a) OR c IS NULL)`;
/// `NotIn [a, null]` → `(c IS NOT NULL AND c NOT IN (a))`.
fn write_in(w: &mut Writer, column: &ColumnRef<'_>, items: &[Value], negated: bool) -> Result<()> {
    let has_null = items.iter().any(Value::is_null);
    let values: Vec<&Value> = items.iter().filter(|v| !v.is_null()).collect();
    if values.is_empty() {
        match (has_null, negated) {
            (false, false) => w.push(FALSE),
            (false, true) => w.push(TRUE),
            (true, _) => is_null(w, column, !negated),
        }
        return Ok(());
    }
    let write_list = |w: &mut Writer| -> Result<()> {
        column.write_compared(w);
        w.push(if negated { " NOT IN (" } else { " IN (" });
        for (i, value) in values.iter().enumerate() {
            if i > 0 {
                w.push(", ");
            }
            push_compared_value(w, column, value)?;
        }
        w.push(")");
        Ok(())
    };
    match (has_null, negated) {
        (false, false) => write_list(w)?,
        (true, false) | (false, true) => {
            w.push("(");
            write_list(w)?;
            w.push(" OR ");
            is_null(w, column, true);
            w.push(")");
        }
        (true, true) => {
            w.push("(");
            is_null(w, column, false);
            w.push(" AND ");
            write_list(w)?;
            w.push(")");
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    Sensitive,
    Insensitive,
}

/// A pattern: a user LIKE pattern (`%`, `_` wildcards, `\` escapes), or a literal fragment whose
/// `%`, `_` and `\` are escaped before wildcards are added around it.
enum Pattern<'v> {
    Like(&'v str),
    Contains(&'v str),
    StartsWith(&'v str),
    EndsWith(&'v str),
}

impl Pattern<'_> {
    /// The LIKE pattern (escape character `\`).
    fn to_like(&self) -> String {
        match self {
            Self::Like(p) => (*p).to_owned(),
            Self::Contains(v) => format!("%{}%", escape_like(v)),
            Self::StartsWith(v) => format!("{}%", escape_like(v)),
            Self::EndsWith(v) => format!("%{}", escape_like(v)),
        }
    }
}

/// Escapes LIKE metacharacters so the text matches literally.
pub(crate) fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Converts a LIKE pattern (escape `\`) to a SQLite GLOB pattern: `%` → `*`, `_` → `?`, and GLOB
/// metacharacters of the text (`*`, `?`, `[`) wrapped in brackets so they match literally.
pub(crate) fn like_to_glob(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => out.push('*'),
            '_' => out.push('?'),
            '\\' => match chars.next() {
                Some(escaped) => push_glob_literal(&mut out, escaped),
                None => out.push('\\'),
            },
            other => push_glob_literal(&mut out, other),
        }
    }
    out
}

fn push_glob_literal(out: &mut String, c: char) {
    match c {
        '*' | '?' | '[' => {
            out.push('[');
            out.push(c);
            out.push(']');
        }
        other => out.push(other),
    }
}

/// Pattern operators. Case-sensitive: PG `LIKE`, MySQL `CAST(c AS BINARY) LIKE`, SQLite `GLOB`.
/// Case-insensitive: PG `ILIKE`, MySQL/SQLite `LOWER(c) LIKE LOWER(p)`. Negated forms include
/// NULL rows (`NotContains` is true for a missing value, as in the Node agent).
fn pattern(
    w: &mut Writer,
    column: &ColumnRef<'_>,
    case: Case,
    pattern: &Pattern<'_>,
    negated: bool,
) {
    if negated {
        w.push("(NOT ");
    }
    let like = pattern.to_like();
    match (w.dialect, case) {
        (Dialect::Postgres, Case::Sensitive) => {
            column.write_compared(w);
            w.push(" LIKE ");
            push_text(w, like);
        }
        (Dialect::Postgres, Case::Insensitive) => {
            column.write_compared(w);
            w.push(" ILIKE ");
            push_text(w, like);
        }
        (Dialect::MySql, Case::Sensitive) => {
            w.push("CAST(");
            column.write_compared(w);
            w.push(" AS BINARY) LIKE ");
            push_text(w, like);
        }
        (Dialect::Sqlite, Case::Sensitive) => {
            column.write_compared(w);
            w.push(" GLOB ");
            push_text(w, like_to_glob(&like));
        }
        (Dialect::MySql | Dialect::Sqlite, Case::Insensitive) => {
            w.push("LOWER(");
            column.write_compared(w);
            w.push(") LIKE LOWER(");
            push_text(w, like);
            w.push(")");
            if w.dialect == Dialect::Sqlite {
                // SQLite's LIKE has no default escape character.
                w.push(" ESCAPE '\\'");
            }
        }
    }
    if negated {
        w.push(" OR ");
        is_null(w, column, true);
        w.push(")");
    }
}

/// `LongerThan` / `ShorterThan`: the length in characters.
fn length(w: &mut Writer, column: &ColumnRef<'_>, op: &str, leaf: &Leaf) -> Result<()> {
    let bound = match &leaf.value {
        Value::Int(i) => super::Bind::Int(*i),
        Value::Float(f) => super::Bind::Float(*f),
        Value::Decimal(d) => {
            super::Bind::Float(bigdecimal::ToPrimitive::to_f64(d).unwrap_or(f64::MAX))
        }
        other => {
            return Err(Error::validation(format!(
                "Wrong type for \"{}\": {other}. Expects Number",
                leaf.field
            )));
        }
    };
    w.push(match w.dialect {
        Dialect::Postgres | Dialect::MySql => "CHAR_LENGTH(",
        Dialect::Sqlite => "LENGTH(",
    });
    column.write_compared(w);
    w.push(")");
    w.push(op);
    w.bind(bound);
    Ok(())
}

/// `Match`: an unanchored search with a regex of the `regex` crate's syntax (checked here, so a
/// bad pattern is a validation error on every database; `(?i)` makes it case-insensitive).
/// PG `~`; MySQL/MariaDB `REGEXP` with `(?-i)` prepended so the column's collation does not
/// decide the case; SQLite `REGEXP` (the regex crate itself, registered by `Pool::connect`).
fn regex(w: &mut Writer, column: &ColumnRef<'_>, pattern: &str) -> Result<()> {
    regex::Regex::new(pattern)
        .map_err(|e| Error::validation(format!("Invalid regular expression {pattern:?}: {e}")))?;
    column.write_compared(w);
    match w.dialect {
        Dialect::Postgres => {
            w.push(" ~ ");
            push_text(w, pattern.to_owned());
        }
        Dialect::MySql => {
            w.push(" REGEXP ");
            push_text(w, format!("(?-i){pattern}"));
        }
        Dialect::Sqlite => {
            w.push(" REGEXP ");
            push_text(w, pattern.to_owned());
        }
    }
    Ok(())
}

/// `IncludesAll` (`c @> v`) and `IncludesNone` (`c IS NULL OR NOT (c && v)`) on PostgreSQL
/// arrays.
fn includes(w: &mut Writer, column: &ColumnRef<'_>, leaf: &Leaf) -> Result<()> {
    if w.dialect != Dialect::Postgres || !matches!(column.column.kind, SqlKind::Array(_)) {
        return Err(Error::validation(format!(
            "The given operator '{}' is only supported on PostgreSQL arrays (field '{}')",
            leaf.operator.snake_case(),
            leaf.field
        )));
    }
    if leaf.operator == Operator::IncludesAll {
        column.write_raw(w);
        w.push(" @> ");
        push_value(w, column.column, &leaf.value)?;
    } else {
        w.push("(");
        is_null(w, column, true);
        w.push(" OR NOT (");
        column.write_raw(w);
        w.push(" && ");
        push_value(w, column.column, &leaf.value)?;
        w.push("))");
    }
    Ok(())
}
