//! Pure SQL building: filters, projections, sorts, pages, aggregations and writes become one SQL
//! text per dialect plus the values to bind. Nothing here touches a connection, so every shape
//! is unit-tested without a database.
//!
//! Two rules hold everywhere: values are bound (never written into the text from the user's
//! spelling), and identifiers only come from the introspected [`Table`] model, quoted by
//! [`Dialect::quote`]. The only literals written are SQL keywords, fixed units (`'day'`), `NULL`
//! and `''`, and the values of a statement past its bind budget, which `literal` writes from
//! their typed form (a list of 70,000 ids would exceed what the drivers bind).

mod binds;
mod condition;
mod joins;
mod literal;
mod nul;
mod select;
mod write;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use bigdecimal::BigDecimal;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use uuid::Uuid;

use super::dialect::Dialect;
use super::model::{Column, SqlKind, Table};
use crate::datasource::error::{Error, Result};
use crate::datasource::schema::{CollectionSchema, DataSourceSchema};

pub(crate) use binds::value_to_array_text;
pub(crate) use select::{
    AggregatePlan, AggregateValue, BUCKET_SECONDS, GroupKind, aggregate, list,
};
pub(crate) use write::{Target, delete, insert, needs_joins, select_primary_keys, update};

/// A value to bind, already converted to what the driver sends for the target column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bind {
    Bool(bool),
    Int(i64),
    Float(f64),
    Decimal(BigDecimal),
    Text(String),
    Uuid(Uuid),
    /// An instant (PostgreSQL `timestamptz`).
    TimestampTz(DateTime<Utc>),
    /// A UTC wall clock (PostgreSQL `timestamp`, MySQL `DATETIME`/`TIMESTAMP` in a UTC session).
    Timestamp(NaiveDateTime),
    Date(NaiveDate),
    Time(NaiveTime),
    Json(serde_json::Value),
    Bytes(Vec<u8>),
    /// PostgreSQL arrays travel as `text[]` and are cast to the column's array type in SQL, so
    /// one bind shape serves every element type (enums included).
    TextArray(Vec<Option<String>>),
}

/// SQL text and its binds, in placeholder order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Statement {
    pub sql: String,
    pub binds: Vec<Bind>,
    /// Some values are written in the text ([`literal`]): the text is one of a kind, and is run
    /// unprepared so that no statement cache keeps it.
    pub inlined: bool,
}

/// What the builder reads: the dialect, the served schema and the table behind each collection.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub dialect: Dialect,
    pub schema: &'a DataSourceSchema,
    pub tables: &'a HashMap<String, Arc<Table>>,
}

impl<'a> Ctx<'a> {
    pub fn collection(&self, name: &str) -> Result<&'a CollectionSchema> {
        self.schema.collection(name)
    }

    pub fn table(&self, collection: &str) -> Result<&'a Table> {
        self.tables
            .get(collection)
            .map(|t| &**t)
            .ok_or_else(|| Error::MissingCollection(collection.to_owned()))
    }
}

/// Accumulates SQL text and binds; placeholders are numbered as binds are pushed, so text must
/// be written in order (MySQL and SQLite placeholders are positional).
pub(crate) struct Writer {
    pub dialect: Dialect,
    pub sql: String,
    pub binds: Vec<Bind>,
    /// Binds kept before values are written as literals ([`literal::BIND_BUDGET`]).
    pub bind_budget: usize,
    inlined: bool,
}

impl Writer {
    pub fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            sql: String::with_capacity(256),
            binds: Vec::new(),
            bind_budget: literal::BIND_BUDGET,
            inlined: false,
        }
    }

    pub fn push(&mut self, text: &str) {
        self.sql.push_str(text);
    }

    /// Writes a quoted identifier (quote characters doubled, as [`Dialect::quote`] does).
    pub fn ident(&mut self, name: &str) {
        let q = match self.dialect {
            Dialect::Postgres | Dialect::Sqlite => '"',
            Dialect::MySql => '`',
        };
        self.sql.reserve(name.len() + 2);
        self.sql.push(q);
        for c in name.chars() {
            if c == q {
                self.sql.push(q);
            }
            self.sql.push(c);
        }
        self.sql.push(q);
    }

    /// Writes a placeholder and records its value; past the bind budget, writes the value as a
    /// literal instead.
    pub fn bind(&mut self, value: Bind) {
        if self.binds.len() >= self.bind_budget {
            literal::write(&mut self.sql, self.dialect, &value);
            self.inlined = true;
            return;
        }
        self.binds.push(value);
        let placeholder = self.dialect.placeholder(self.binds.len());
        self.sql.push_str(&placeholder);
    }

    pub fn finish(self) -> Statement {
        Statement {
            sql: self.sql,
            binds: self.binds,
            inlined: self.inlined,
        }
    }
}

/// Where a column is read from: a source of the [`Joins`] (root table or joined relation) and
/// whether references are qualified by its alias (they are not in single-table writes).
#[derive(Clone, Copy)]
pub(crate) struct ColumnRef<'a> {
    pub alias: Option<&'a str>,
    pub column: &'a Column,
}

impl ColumnRef<'_> {
    /// The bare reference: `"alias"."column"` or `"column"`.
    pub fn write_raw(&self, w: &mut Writer) {
        if let Some(alias) = self.alias {
            w.ident(alias);
            w.push(".");
        }
        w.ident(&self.column.name);
    }

    /// The expression selected for decoding. PostgreSQL enums, `bit` and user-defined string
    /// types are read as text so that every value decodes with the same driver type.
    pub fn write_select(&self, w: &mut Writer) {
        self.write_raw(w);
        if w.dialect == Dialect::Postgres
            && let Some(cast) = pg_select_cast(self.column)
        {
            w.push(cast);
        }
    }

    /// The expression used in comparisons, sorts and groups. SQLite timestamps are normalised
    /// to the canonical text form (see [`SQLITE_TIMESTAMP_FORMAT`]) so rows written by other
    /// tools (`…T…Z`, `… +00:00`) compare and sort by instant, not by spelling.
    pub fn write_compared(&self, w: &mut Writer) {
        match (w.dialect, &self.column.kind) {
            (Dialect::Sqlite, SqlKind::Timestamp | SqlKind::NaiveTimestamp) => {
                w.push("strftime('%Y-%m-%d %H:%M:%f', ");
                self.write_raw(w);
                w.push(")");
            }
            (Dialect::Postgres, SqlKind::Interval) => {
                // Intervals are Number columns: compared as seconds.
                w.push("EXTRACT(EPOCH FROM ");
                self.write_raw(w);
                w.push(")");
            }
            (Dialect::Postgres, SqlKind::Enum) if self.column.pg_cast.is_none() => {
                // Without its type name a bound label cannot be cast to the enum: compare text.
                self.write_raw(w);
                w.push("::text");
            }
            _ => self.write_raw(w),
        }
    }
}

/// SQLite stores timestamps as UTC text `YYYY-MM-DD HH:MM:SS.SSS`: the format of SQLite's own
/// `strftime('%Y-%m-%d %H:%M:%f')`, text-sortable, and readable by every SQLite date function.
pub(crate) const SQLITE_TIMESTAMP_FORMAT: &str = "%Y-%m-%d %H:%M:%S%.3f";

/// The cast appended to a selected PostgreSQL column, if any.
fn pg_select_cast(column: &Column) -> Option<&'static str> {
    match &column.kind {
        SqlKind::Enum | SqlKind::Bit => Some("::text"),
        SqlKind::Text if pg_text_needs_cast(column) => Some("::text"),
        // Arrays of strings may hold enums or user-defined element types: read them as text[].
        SqlKind::Array(inner)
            if matches!(**inner, SqlKind::Enum | SqlKind::Bit | SqlKind::Text) =>
        {
            Some("::text[]")
        }
        _ => None,
    }
}

/// Whether a PostgreSQL string column has a type the driver does not decode as a string
/// (user-defined types such as PostGIS shapes or domains): those are read as `::text`.
/// `char(n)` is never cast, because the cast would strip its padding.
fn pg_text_needs_cast(column: &Column) -> bool {
    let raw = column.raw_type.to_ascii_lowercase();
    let known = [
        "text",
        "character",
        "varchar",
        "char",
        "bpchar",
        "citext",
        "name",
    ];
    !known.iter().any(|k| raw.starts_with(k))
}
