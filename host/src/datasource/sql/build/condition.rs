//! Condition trees become WHERE clauses. Every operator a SQL column advertises
//! (`sql::operators::supported`) is written natively on every database; time-relative operators
//! are lowered to comparisons before this point.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::binds::{push_text, push_value};
use super::joins::Joins;
use super::{ColumnRef, Writer, nul};
use crate::datasource::error::{Error, Result};
use crate::datasource::query::equivalence::like_to_regex;
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
                many => match key_list(w.dialect, joins, *aggregator, many) {
                    Some(keys) => write_key_list(w, &keys)?,
                    None => write_branch(w, joins, glue, many)?,
                },
            }
            Ok(())
        }
    }
}

/// A long list of composite keys, as the agent writes the ids of a bulk action: `Or` of
/// `And(a = 1, b = 2)` per record (`match_ids`), or `And` of `Or(a <> 1, b <> 2)` per record
/// (`exclude_ids`). PostgreSQL plans these in time that grows faster than the square of the
/// count (27 s for 70,000 ids, and its row-list form overflows its stack); a row value against
/// a `VALUES` list is planned as one hashed semi- or anti-join.
struct KeyList<'j> {
    columns: Vec<ColumnRef<'j>>,
    rows: Vec<Vec<&'j Value>>,
    /// `NotEqual` per key: the rows *not* listed (and those with a NULL key).
    negated: bool,
}

/// The branch as a [`KeyList`], when it is one: more than [`FLAT_BRANCH`] records, each the
/// same two or more fields with non-null values, compared exactly by `=` (not MySQL strings nor
/// PostgreSQL `char(n)`, whose `=` is not the exact comparison).
fn key_list<'j>(
    dialect: Dialect,
    joins: &'j Joins<'_>,
    aggregator: Aggregator,
    conditions: &'j [ConditionTree],
) -> Option<KeyList<'j>> {
    let (inner, operator, negated) = match aggregator {
        Aggregator::Or => (Aggregator::And, Operator::Equal, false),
        Aggregator::And => (Aggregator::Or, Operator::NotEqual, true),
    };
    if conditions.len() <= FLAT_BRANCH {
        return None;
    }
    let leaves = |condition: &'j ConditionTree| -> Option<Vec<&'j Leaf>> {
        let ConditionTree::Branch {
            aggregator,
            conditions,
        } = condition
        else {
            return None;
        };
        if *aggregator != inner || conditions.len() < 2 {
            return None;
        }
        conditions
            .iter()
            .map(|c| match c {
                ConditionTree::Leaf(leaf) if leaf.operator == operator && !leaf.value.is_null() => {
                    Some(leaf)
                }
                _ => None,
            })
            .collect()
    };
    let first = leaves(&conditions[0])?;
    let fields: Vec<&str> = first.iter().map(|l| l.field.as_str()).collect();
    let columns = fields
        .iter()
        .map(|f| joins.lookup(f).ok())
        .collect::<Option<Vec<_>>>()?;
    if columns
        .iter()
        .any(|c| exactness(dialect, c) != Exactness::Plain)
    {
        return None;
    }
    let mut rows = Vec::with_capacity(conditions.len());
    for condition in conditions {
        let leaves = leaves(condition)?;
        if leaves.len() != fields.len() || leaves.iter().zip(&fields).any(|(l, f)| l.field != *f) {
            return None;
        }
        rows.push(leaves.iter().map(|l| &l.value).collect());
    }
    Some(KeyList {
        columns,
        rows,
        negated,
    })
}

/// `(a, b) IN (VALUES (…), …)`, or `(a IS NULL OR b IS NULL OR (a, b) NOT IN (VALUES …))`.
/// MySQL and MariaDB take a row list (`VALUES` needs `ROW()` on MySQL) and plan it themselves.
fn write_key_list(w: &mut Writer, keys: &KeyList<'_>) -> Result<()> {
    if keys.negated {
        w.push("(");
        for column in &keys.columns {
            is_null(w, column, true);
            w.push(" OR ");
        }
    }
    w.push("(");
    for (i, column) in keys.columns.iter().enumerate() {
        if i > 0 {
            w.push(", ");
        }
        column.write_compared(w);
    }
    w.push(if keys.negated { ") NOT IN (" } else { ") IN (" });
    if w.dialect != Dialect::MySql {
        w.push("VALUES ");
    }
    for (i, row) in keys.rows.iter().enumerate() {
        if i > 0 {
            w.push(", ");
        }
        w.push("(");
        for (j, (column, value)) in keys.columns.iter().zip(row).enumerate() {
            if j > 0 {
                w.push(", ");
            }
            push_compared_value(w, column, value)?;
        }
        w.push(")");
    }
    w.push(")");
    if keys.negated {
        w.push(")");
    }
    Ok(())
}

/// Conditions of one branch beyond which they are written as nested halves.
const FLAT_BRANCH: usize = 64;

/// `(a OR b OR …)`; a long branch (the keys of a bulk delete of composite ids, one condition
/// per record) as balanced halves `((…) OR (…))`. SQLite parses `a OR b OR c` as a chain and
/// refuses a chain deeper than 1,000 (`Expression tree is too large`); halves keep the depth at
/// the logarithm of the count.
fn write_branch(
    w: &mut Writer,
    joins: &Joins<'_>,
    glue: &str,
    conditions: &[ConditionTree],
) -> Result<()> {
    w.push("(");
    if conditions.len() > FLAT_BRANCH {
        let (left, right) = conditions.split_at(conditions.len() / 2);
        write_branch(w, joins, glue, left)?;
        w.push(glue);
        write_branch(w, joins, glue, right)?;
    } else {
        for (i, condition) in conditions.iter().enumerate() {
            if i > 0 {
                w.push(glue);
            }
            write(w, joins, condition)?;
        }
    }
    w.push(")");
    Ok(())
}

/// Constant conditions, written the same way on every database.
const TRUE: &str = "1 = 1";
const FALSE: &str = "1 = 0";

fn write_leaf(w: &mut Writer, joins: &Joins<'_>, leaf: &Leaf) -> Result<()> {
    use Operator::*;
    let column = joins.lookup(&leaf.field)?;
    if w.dialect == Dialect::Postgres
        && let Some(rewritten) = nul::rewrite(leaf)
    {
        return match rewritten {
            nul::Rewritten::Constant(matches) => {
                w.push(if matches { TRUE } else { FALSE });
                Ok(())
            }
            nul::Rewritten::Leaf(leaf) => write_leaf(w, joins, &leaf),
        };
    }
    let value = &leaf.value;
    match leaf.operator {
        // Present is the negation of Blank: a string must also be non-empty (§9.2).
        Present => {
            if is_string(&column) {
                w.push("(");
                is_empty(w, &column, true);
                w.push(" AND ");
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
                is_empty(w, &column, false);
                w.push(" OR ");
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
                equality(w, &column, &[value], Form::Single, false)?;
            }
        }
        NotEqual => {
            if value.is_null() {
                is_null(w, &column, false);
            } else {
                // NULL rows differ from any value: they are included, as in the Node agent.
                w.push("(");
                equality(w, &column, &[value], Form::Single, true)?;
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
    if is_string(column) {
        return compare_strings(w, column, op, value);
    }
    column.write_compared(w);
    w.push(op);
    push_compared_value(w, column, value)
}

/// `<`, `>`, `<=`, `>=` on strings, in code point order on every database, as the evaluator
/// compares them (and whatever the column's collation): the UTF-8 bytes on MySQL (a
/// binary string keeps trailing spaces), the `"C"` collation on PostgreSQL (of the padded text
/// of a `char(n)`), SQLite's default BINARY collation.
fn compare_strings(w: &mut Writer, column: &ColumnRef<'_>, op: &str, value: &Value) -> Result<()> {
    let exactness = exactness(w.dialect, column);
    match w.dialect {
        Dialect::MySql => {
            write_exact(w, column, Exactness::Bytes);
            w.push(op);
            w.push("CAST(");
            push_compared_value(w, column, value)?;
            w.push(" AS BINARY)");
        }
        Dialect::Postgres => {
            write_exact(w, column, exactness);
            w.push(" COLLATE \"C\"");
            w.push(op);
            push_compared_value(w, column, value)?;
        }
        Dialect::Sqlite => {
            column.write_compared(w);
            w.push(op);
            push_compared_value(w, column, value)?;
        }
    }
    Ok(())
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
    let write_list = |w: &mut Writer| equality(w, column, &values, Form::List, negated);
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

/// How a string equality is made exact: the evaluator compares strings by code points, and so
/// must every database.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Exactness {
    /// `=` is already exact (SQLite's default BINARY collation, PostgreSQL text).
    Plain,
    /// MySQL/MariaDB strings and enums. Their collations compare with PAD SPACE (`'b' = 'b '`,
    /// even in `utf8mb4_bin`) and, in the `_ci` collations most real databases use, ignore case
    /// and accents (`'A' = 'a'`, `'é' = 'e'`). The collation comparison stays, because it is the
    /// one the column's index can answer; the comparison of the UTF-8 bytes then makes it exact.
    /// `CONVERT(… USING utf8mb4)` first, so that a column in another character set (latin1…)
    /// yields the same bytes as the bound value.
    Bytes,
    /// PostgreSQL `char(n)` (`bpchar`). Values are read with their padding (see
    /// `pg_text_needs_cast`), but `bpchar` ignores trailing spaces when compared and a text
    /// value is compared with the column's trimmed text: `Equal 'b  '` would miss the row the
    /// evaluator sees as `"b  "`, `Equal 'b'` would find it, and `CHAR_LENGTH` would not count
    /// the padding. The padded text (`textin(bpcharout(c))`) is compared instead, after
    /// `c = $n::bpchar`, which the index can answer.
    Padded,
}

fn exactness(dialect: Dialect, column: &ColumnRef<'_>) -> Exactness {
    match dialect {
        Dialect::MySql
            if matches!(
                column.column.column_type,
                ColumnType::Primitive(PrimitiveType::String | PrimitiveType::Enum)
            ) =>
        {
            Exactness::Bytes
        }
        Dialect::Postgres if column.column.kind == SqlKind::Text && is_bpchar(column) => {
            Exactness::Padded
        }
        _ => Exactness::Plain,
    }
}

/// `character(n)`, `char(n)`, `bpchar` (but not `character varying`).
fn is_bpchar(column: &ColumnRef<'_>) -> bool {
    let raw = column.column.raw_type.trim().to_ascii_lowercase();
    let base = raw.split('(').next().unwrap_or_default().trim();
    matches!(base, "character" | "char" | "bpchar")
}

/// The column as the evaluator reads its text: the padded text of a PostgreSQL `char(n)`, the
/// compared expression otherwise.
fn write_text(w: &mut Writer, column: &ColumnRef<'_>) {
    if exactness(w.dialect, column) == Exactness::Padded {
        w.push("textin(bpcharout(");
        column.write_raw(w);
        w.push("))");
    } else {
        column.write_compared(w);
    }
}

/// The column in the form compared exactly (see [`Exactness`]).
fn write_exact(w: &mut Writer, column: &ColumnRef<'_>, exactness: Exactness) {
    if exactness == Exactness::Bytes {
        w.push("CAST(CONVERT(");
        column.write_compared(w);
        w.push(" USING utf8mb4) AS BINARY)");
    } else {
        write_text(w, column);
    }
}

/// Whether the values are compared with `=` / `<>` (one value) or `IN` / `NOT IN` (a list).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Single,
    List,
}

/// `c = v` / `c IN (v, …)` (or `<>` / `NOT IN` when negated) on non-null values, exact on every
/// database (see [`Exactness`]): positive forms are `(c = v AND exact(c) = exact(v))`, so the
/// index narrows and the second comparison decides; negated forms compare exactly only (no
/// index answers a negation). NULL rows are left to the caller (the expression is NULL for
/// them).
fn equality(
    w: &mut Writer,
    column: &ColumnRef<'_>,
    values: &[&Value],
    form: Form,
    negated: bool,
) -> Result<()> {
    let exactness = exactness(w.dialect, column);
    if exactness == Exactness::Plain || negated {
        return comparison(w, column, values, form, negated, Some(exactness));
    }
    w.push("(");
    comparison(w, column, values, form, false, None)?;
    w.push(" AND ");
    comparison(w, column, values, form, false, Some(exactness))?;
    w.push(")");
    Ok(())
}

/// One comparison of [`equality`]: exact (`Some`) or in the database's own collation (`None`).
fn comparison(
    w: &mut Writer,
    column: &ColumnRef<'_>,
    values: &[&Value],
    form: Form,
    negated: bool,
    exact: Option<Exactness>,
) -> Result<()> {
    match exact {
        Some(exactness) => write_exact(w, column, exactness),
        None => column.write_compared(w),
    }
    w.push(match (form, negated) {
        (Form::Single, false) => " = ",
        (Form::Single, true) => " <> ",
        (Form::List, false) => " IN (",
        (Form::List, true) => " NOT IN (",
    });
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            w.push(", ");
        }
        match exact {
            Some(Exactness::Bytes) => {
                w.push("CAST(");
                push_compared_value(w, column, value)?;
                w.push(" AS BINARY)");
            }
            None if exactness(w.dialect, column) == Exactness::Padded => {
                push_compared_value(w, column, value)?;
                w.push("::bpchar");
            }
            _ => push_compared_value(w, column, value)?,
        }
    }
    if form == Form::List {
        w.push(")");
    }
    Ok(())
}

/// `c = ''` (or `c <> ''` when negated), exact as [`equality`]: on MySQL `' ' = ''` (PAD
/// SPACE), on PostgreSQL `'   '::char(3) = ''`.
fn is_empty(w: &mut Writer, column: &ColumnRef<'_>, negated: bool) {
    let exactness = exactness(w.dialect, column);
    let narrow = exactness == Exactness::Bytes && !negated;
    if narrow {
        w.push("(");
        column.write_compared(w);
        w.push(" = '' AND ");
    }
    write_exact(w, column, exactness);
    w.push(if negated { " <> ''" } else { " = ''" });
    if narrow {
        w.push(")");
    }
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
            Self::Like(p) => complete_trailing_escape(p),
            Self::Contains(v) => format!("%{}%", escape_like(v)),
            Self::StartsWith(v) => format!("{}%", escape_like(v)),
            Self::EndsWith(v) => format!("%{}", escape_like(v)),
        }
    }
}

/// A user pattern ending with a lone escape character gets it escaped. The evaluator (and
/// MySQL) read a trailing lone `\` as a literal backslash, while PostgreSQL rejects the pattern
/// (22025 "LIKE pattern must not end with escape character") and SQLite's `ESCAPE` matches
/// nothing: doubling it spells that literal backslash for every database.
fn complete_trailing_escape(pattern: &str) -> String {
    let trailing = pattern.chars().rev().take_while(|c| *c == '\\').count();
    let mut out = pattern.to_owned();
    if trailing % 2 == 1 {
        out.push('\\');
    }
    out
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

/// Pattern operators. Negated forms include NULL rows (`NotContains` is true for a missing
/// value, as in the Node agent).
///
/// Case-sensitive: PG `LIKE`; SQLite `GLOB`; MySQL `LIKE` in `utf8mb4_bin`, whatever the
/// column's collation (a `_ci` one would ignore case and accents), after converting the column
/// to utf8mb4 (the bound pattern is utf8mb4). Not `CAST(c AS BINARY)`: on bytes `_` matches one
/// byte of a multi-byte character, where the evaluator matches one character.
///
/// Case-insensitive, as the evaluator: both sides lower-cased (Unicode, character by
/// character). PG `ILIKE` (which lower-cases both sides with the database's ctype); MySQL
/// `LOWER(c) LIKE LOWER(p)`, compared in `utf8mb4_bin` as above; SQLite `REGEXP` with the
/// pattern of [`folded_regex`], because SQLite's `LOWER` and `LIKE` only fold ASCII letters
/// (`'é' LIKE 'É'` is false).
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
            w.push("CONVERT(");
            column.write_compared(w);
            w.push(" USING utf8mb4) COLLATE utf8mb4_bin LIKE ");
            push_text(w, like);
        }
        (Dialect::MySql, Case::Insensitive) => {
            w.push("LOWER(CONVERT(");
            column.write_compared(w);
            w.push(" USING utf8mb4)) COLLATE utf8mb4_bin LIKE LOWER(");
            push_text(w, like);
            w.push(")");
        }
        // SQLite's GLOB reads both sides up to their first NUL (`'Mort' GLOB '*Mort<NUL>x*'` is
        // true); its REGEXP (the regex crate) reads whole texts.
        (Dialect::Sqlite, Case::Sensitive) if like.contains('\0') => {
            column.write_compared(w);
            w.push(" REGEXP ");
            push_text(w, like_to_regex(&like, false));
        }
        (Dialect::Sqlite, Case::Sensitive) => {
            column.write_compared(w);
            w.push(" GLOB ");
            push_text(w, like_to_glob(&like));
        }
        (Dialect::Sqlite, Case::Insensitive) => {
            column.write_compared(w);
            w.push(" REGEXP ");
            push_text(w, folded_regex(&like));
        }
    }
    if negated {
        w.push(" OR ");
        is_null(w, column, true);
        w.push(")");
    }
}

/// A LIKE pattern (escape `\`, a trailing lone one literal) as an anchored regex of the `regex`
/// crate that matches what the evaluator's `ILike` matches: the evaluator lower-cases the
/// pattern and the text (`str::to_lowercase`) and compares them character by character, so each
/// literal of the lower-cased pattern becomes the class of itself and of every character whose
/// lowercase it is (`é` → `[éÉ]`, `k` → `[kKK]` with the Kelvin sign).
///
/// Not `(?i)`: its simple case folding also pairs characters whose lowercase differ (`s` and
/// `ſ`, `β` and `ϐ`, `σ` and `ς`), which the evaluator (and PostgreSQL) keep apart. What remains
/// different is the evaluator's own context: a word-final `Σ` lowercases to `ς` there, and `İ`
/// to two characters (`i̇`).
pub(crate) fn folded_regex(like: &str) -> String {
    let lowered = like.to_lowercase();
    let mut out = String::from("(?s)\\A");
    let mut chars = lowered.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            '\\' => push_folded(&mut out, chars.next().unwrap_or('\\')),
            other => push_folded(&mut out, other),
        }
    }
    out.push_str("\\z");
    out
}

/// A literal of [`folded_regex`]: the lower-case character, or the class of it and of the
/// characters that lowercase to it.
fn push_folded(out: &mut String, lower: char) {
    let mut buf = [0u8; 4];
    match uppercases().get(&lower) {
        None => out.push_str(&regex::escape(lower.encode_utf8(&mut buf))),
        Some(others) => {
            out.push('[');
            for c in std::iter::once(&lower).chain(others) {
                if c.is_alphanumeric() {
                    out.push(*c);
                } else {
                    out.push_str(&format!("\\x{{{:X}}}", u32::from(*c)));
                }
            }
            out.push(']');
        }
    }
}

/// For each character, the other characters whose (single-character) lowercase it is. Built
/// once from the standard library's case tables, the ones the evaluator uses.
fn uppercases() -> &'static HashMap<char, Vec<char>> {
    static TABLE: OnceLock<HashMap<char, Vec<char>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: HashMap<char, Vec<char>> = HashMap::new();
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
            let mut lower = c.to_lowercase();
            if let (Some(l), None) = (lower.next(), lower.next())
                && l != c
            {
                table.entry(l).or_default().push(c);
            }
        }
        table
    })
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
    write_text(w, column);
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
