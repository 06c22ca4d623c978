//! The introspected shape of a SQL database: tables, columns with their SQL kinds, keys.
//! Introspection produces it; the query builder and the row decoder read it. Identifiers written
//! into SQL come only from here.

use crate::datasource::record::Value;
use crate::datasource::schema::{ColumnType, Wire};

use super::dialect::Dialect;

/// How a column's values are bound and decoded. One variant per distinct driver type, so that
/// every database returns the same `Value` for the same logical type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlKind {
    Bool,
    /// PostgreSQL `bit(1)`: read and written as text `'0'`/`'1'`.
    Bit,
    /// Integers that fit i64 on every database (int2/int4/int8, tinyint…bigint, SQLite INTEGER).
    Int,
    /// Floating point (real, double, float).
    Float,
    /// Exact decimals (numeric, decimal). SQLite stores them as numbers: decoded as Int/Float.
    Decimal,
    /// Text, varchar, char, citext, and PostgreSQL enums/user-defined types read as text.
    Text,
    /// An enum: PostgreSQL user-defined enum (`pg_type` names it) or MySQL `enum(...)`.
    Enum,
    Uuid,
    /// `json` (PostgreSQL keeps its text form) or MySQL json, SQLite JSON text.
    Json,
    /// PostgreSQL `jsonb`.
    Jsonb,
    /// An instant: timestamptz (PG), datetime/timestamp (MySQL, SQLite), stored as UTC.
    Timestamp,
    /// PostgreSQL `timestamp without time zone`: wall clock read as UTC.
    NaiveTimestamp,
    Date,
    Time,
    /// PostgreSQL `interval`: the agent exposes it as a Number column.
    Interval,
    Binary,
    /// PostgreSQL arrays of the element kind.
    Array(Box<SqlKind>),
}

/// A default value as introspected.
#[derive(Debug, Clone, PartialEq)]
pub enum DefaultValue {
    /// A constant, shown in the schema and written on create when the value is absent.
    Constant(Value),
    /// An SQL expression (`now()`, `nextval(…)`): left to the database, never shown.
    Expression(String),
}

/// One column of a table or view.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// SQL name, verbatim (case and spaces kept).
    pub name: String,
    /// The type string fed to the type converter (for logs and error messages).
    pub raw_type: String,
    pub kind: SqlKind,
    pub column_type: ColumnType,
    pub nullable: bool,
    pub default: Option<DefaultValue>,
    /// Auto-increment primary key (serial/identity, AUTO_INCREMENT, SQLite AUTOINCREMENT).
    pub auto_increment: bool,
    pub is_primary_key: bool,
    pub enum_values: Vec<String>,
    /// PostgreSQL: the quoted, schema-qualified type for casts of bound parameters
    /// (`"public"."mood"`, `"public"."mood"[]`, `integer[]`).
    pub pg_cast: Option<String>,
    /// The wire form of its values, which depends on the server (`types::wire`). Binary keys
    /// become `Wire::Hex` when the collection schema is built.
    pub wire: Wire,
}

/// A single-column foreign key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKey {
    pub column: String,
    pub foreign_table: String,
    pub foreign_column: String,
}

/// A table or view as introspected.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// SQL name, verbatim.
    pub name: String,
    /// PostgreSQL schema (always qualified in SQL); `None` on MySQL and SQLite.
    pub schema: Option<String>,
    pub is_view: bool,
    pub columns: Vec<Column>,
    /// Declared primary key, in column order. Empty when none was declared.
    pub primary_key: Vec<String>,
    /// Unique column sets (the PK and unique indexes).
    pub unique: Vec<Vec<String>>,
    pub foreign_keys: Vec<ForeignKey>,
}

impl Table {
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The quoted, qualified name to write after `FROM`/`INTO`/`UPDATE`.
    pub fn qualified_name(&self, dialect: Dialect) -> String {
        match &self.schema {
            Some(schema) => format!("{}.{}", dialect.quote(schema), dialect.quote(&self.name)),
            None => dialect.quote(&self.name),
        }
    }
}
