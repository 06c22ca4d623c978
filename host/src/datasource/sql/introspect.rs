//! Reads the database catalog into the table model (§14.2): one submodule per database for the
//! catalog queries, and here what every database shares — typing of default values, the checks
//! on foreign keys, and the primary-key guess for tables that declare none.
//!
//! Catalog queries bind every value (schema names…); identifiers read from the catalog are data
//! and are only ever written into SQL later, quoted, by the query builder.

mod checks;
mod mysql;
mod postgres;
mod sqlite;

use std::collections::HashSet;

use super::Pool;
use super::model::{DefaultValue, Table};
use crate::datasource::Result;
use crate::datasource::record::Value;
use crate::datasource::schema::{ColumnType, PrimitiveType};

/// Tables and views with their columns, keys and foreign keys, in table-name order.
pub async fn introspect(pool: &Pool) -> Result<Vec<Table>> {
    let mut tables = match pool {
        Pool::Postgres(pool) => postgres::introspect(pool).await?,
        Pool::MySql(pool) => mysql::introspect(pool).await?,
        Pool::Sqlite(pool) => sqlite::introspect(pool).await?,
    };
    drop_dangling_keys(&mut tables);
    for table in &mut tables {
        guess_primary_key(table);
    }
    Ok(tables)
}

/// A default value as the dialect parser reads it, before typing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RawDefault {
    /// A constant: the unquoted text, and the SQL it came from.
    Constant { value: String, sql: String },
    /// An SQL expression (`now()`, `nextval(…)`, `CURRENT_TIMESTAMP`).
    Literal(String),
}

/// Types a parsed default by the column's type, as the reference's default-value parser does:
/// arrays never get one, expressions stay SQL, constants become values of the column type.
/// Constants of types that have no value form there (Time, Uuid, Binary) are kept as SQL too,
/// so that the database applies them; they are never shown in the schema.
pub(crate) fn type_default(
    raw: Option<RawDefault>,
    column_type: &ColumnType,
) -> Option<DefaultValue> {
    let primitive = match column_type {
        ColumnType::Primitive(p) => *p,
        ColumnType::Array(_) | ColumnType::Composite(_) => return None,
    };
    let (value, sql) = match raw? {
        RawDefault::Literal(sql) => return Some(DefaultValue::Expression(sql)),
        RawDefault::Constant { value, sql } => (value, sql),
    };
    let typed = match primitive {
        PrimitiveType::Enum | PrimitiveType::String => Value::String(value),
        PrimitiveType::Boolean => {
            Value::Bool(matches!(value.as_str(), "true" | "TRUE" | "b'1'" | "1"))
        }
        PrimitiveType::Number => match parse_float(&value) {
            Some(v) => v,
            None => return Some(DefaultValue::Expression(sql)),
        },
        // The reference keeps the string; a typed value is what a create with that value would
        // carry, so the write path binds it like any other value of the column.
        PrimitiveType::Date | PrimitiveType::Dateonly => {
            Value::from_json_typed(&serde_json::Value::String(value.clone()), primitive)
                .filter(|v| !v.is_null())
                .unwrap_or(Value::String(value))
        }
        PrimitiveType::Json => match serde_json::from_str(&value) {
            Ok(json) => Value::Json(json),
            Err(_) => return Some(DefaultValue::Expression(sql)),
        },
        PrimitiveType::Time
        | PrimitiveType::Uuid
        | PrimitiveType::Binary
        | PrimitiveType::Point => {
            return Some(DefaultValue::Expression(sql));
        }
    };
    Some(DefaultValue::Constant(typed))
}

/// JavaScript `parseFloat`: the longest numeric prefix, as a double. Integral results become
/// `Int` (a bigint default thus loses precision above 2^53, exactly as the reference shows it).
fn parse_float(text: &str) -> Option<Value> {
    let t = text.trim_start();
    let bytes = t.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let digits_start = end;
    while bytes.get(end).is_some_and(u8::is_ascii_digit) {
        end += 1;
    }
    if bytes.get(end) == Some(&b'.') {
        end += 1;
        while bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
    }
    if !t[digits_start..end].bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut exp = end + 1;
        if matches!(bytes.get(exp), Some(b'+' | b'-')) {
            exp += 1;
        }
        if bytes.get(exp).is_some_and(u8::is_ascii_digit) {
            while bytes.get(exp).is_some_and(u8::is_ascii_digit) {
                exp += 1;
            }
            end = exp;
        }
    }
    let f: f64 = t[..end].parse().ok()?;
    // 2^63 as f64: integral values below it convert to i64 exactly.
    if f.fract() == 0.0 && f.abs() < 9.223_372_036_854_776e18 {
        return Some(Value::Int(f as i64));
    }
    Some(Value::Float(f))
}

/// Whether `text` is a plain number literal (`5`, `-1.5`, `1e3`), as the dialect parsers test.
pub(crate) fn is_number(text: &str) -> bool {
    let t = text.trim();
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    let (mantissa, exponent) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let mut parts = mantissa.splitn(2, '.');
    let int = parts.next().unwrap_or_default();
    let frac = parts.next().unwrap_or_default();
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// Removes the quotes of a quoted SQL string and undoes `''`, and backslash escapes when the
/// database uses them (MySQL/MariaDB; PostgreSQL and SQLite strings keep backslashes as is).
pub(crate) fn unquote(text: &str, backslash_escapes: bool) -> Option<String> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' if chars.peek() == Some(&'\'') => {
                chars.next();
                out.push('\'');
            }
            // A lone quote ends the string early: `'a' || 'b'` is an expression.
            '\'' => return None,
            '\\' if backslash_escapes => match chars.next() {
                Some(next) => out.push(next),
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    Some(out)
}

/// Drops foreign keys whose column, target table or target column was not introspected (a
/// skipped column, a table of a materialized view…), and unique sets with a skipped column.
fn drop_dangling_keys(tables: &mut [Table]) {
    let columns: HashSet<(String, String)> = tables
        .iter()
        .filter(|t| !t.is_view)
        .flat_map(|t| t.columns.iter().map(|c| (t.name.clone(), c.name.clone())))
        .collect();
    for table in tables.iter_mut() {
        let name = table.name.clone();
        table.foreign_keys.retain(|fk| {
            let ok = columns.contains(&(name.clone(), fk.column.clone()))
                && columns.contains(&(fk.foreign_table.clone(), fk.foreign_column.clone()));
            if !ok {
                tracing::error!(
                    "Failed to load constraints on relation '{}.{}' → '{}.{}': the column or its target was not introspected",
                    name,
                    fk.column,
                    fk.foreign_table,
                    fk.foreign_column
                );
            }
            ok
        });
        let present: HashSet<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
        table
            .unique
            .retain(|set| set.iter().all(|c| present.contains(c.as_str())));
        table.primary_key.retain(|c| present.contains(c.as_str()));
    }
}

/// For a table without a declared primary key, marks the columns the reference's model would
/// use as one (§14.2): the `id` column, else the shortest unique index, else both columns of a
/// two-column table whose columns are both foreign keys, else (views) the first column.
/// `Table::primary_key` stays empty, so such tables are never junction tables.
fn guess_primary_key(table: &mut Table) {
    if !table.primary_key.is_empty() {
        for column in &mut table.columns {
            column.is_primary_key = table.primary_key.contains(&column.name);
        }
        return;
    }
    let guess: Vec<String> = if let Some(id) = table
        .columns
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case("id"))
    {
        vec![id.name.clone()]
    } else if let Some(shortest) = table
        .unique
        .iter()
        .filter(|u| !u.is_empty())
        .min_by_key(|u| u.len())
    {
        // `min_by_key` keeps the first of equally short sets: the catalog's index order.
        shortest.clone()
    } else if table.columns.len() == 2
        && table
            .columns
            .iter()
            .all(|c| table.foreign_keys.iter().any(|fk| fk.column == c.name))
    {
        table.columns.iter().map(|c| c.name.clone()).collect()
    } else if table.is_view {
        table
            .columns
            .first()
            .map(|c| vec![c.name.clone()])
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    if !guess.is_empty() && !table.is_view {
        tracing::warn!(
            "Table \"{}\" has no primary key. Using \"{}\".",
            table.name,
            guess.join(", ")
        );
    }
    for column in &mut table.columns {
        column.is_primary_key = guess.contains(&column.name);
    }
}

/// Orders a declared primary key by column position, as the model lists its attributes.
pub(crate) fn sort_by_column_order(table: &mut Table) {
    let position = |name: &String| {
        table
            .columns
            .iter()
            .position(|c| &c.name == name)
            .unwrap_or(usize::MAX)
    };
    let mut key = std::mem::take(&mut table.primary_key);
    key.sort_by_key(position);
    table.primary_key = key;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::sql::model::{Column, ForeignKey, SqlKind};

    fn column(name: &str) -> Column {
        Column {
            name: name.to_owned(),
            raw_type: "INTEGER".to_owned(),
            kind: SqlKind::Int,
            column_type: ColumnType::Primitive(PrimitiveType::Number),
            nullable: true,
            default: None,
            auto_increment: false,
            is_primary_key: false,
            enum_values: Vec::new(),
            pg_cast: None,
            wire: Default::default(),
        }
    }

    fn table(name: &str, columns: &[&str]) -> Table {
        Table {
            name: name.to_owned(),
            schema: None,
            is_view: false,
            columns: columns.iter().map(|c| column(c)).collect(),
            primary_key: Vec::new(),
            unique: Vec::new(),
            foreign_keys: Vec::new(),
        }
    }

    fn pk(t: &Table) -> Vec<&str> {
        t.columns
            .iter()
            .filter(|c| c.is_primary_key)
            .map(|c| c.name.as_str())
            .collect()
    }

    #[test]
    fn primary_key_guesses_follow_the_rules_in_order() {
        let mut t = table("t", &["a", "ID", "b"]);
        t.unique = vec![vec!["a".to_owned()]];
        guess_primary_key(&mut t);
        assert_eq!(pk(&t), ["ID"]);
        assert!(t.primary_key.is_empty());

        let mut t = table("t", &["a", "b", "c"]);
        t.unique = vec![
            vec!["a".to_owned(), "b".to_owned()],
            vec!["c".to_owned()],
            vec!["b".to_owned()],
        ];
        guess_primary_key(&mut t);
        assert_eq!(pk(&t), ["c"]);

        let mut t = table("t", &["a", "b"]);
        t.foreign_keys = ["a", "b"]
            .iter()
            .map(|c| ForeignKey {
                column: (*c).to_owned(),
                foreign_table: "x".to_owned(),
                foreign_column: "id".to_owned(),
            })
            .collect();
        guess_primary_key(&mut t);
        assert_eq!(pk(&t), ["a", "b"]);

        let mut t = table("v", &["name", "n"]);
        t.is_view = true;
        guess_primary_key(&mut t);
        assert_eq!(pk(&t), ["name"]);

        let mut t = table("t", &["a", "b"]);
        guess_primary_key(&mut t);
        assert!(pk(&t).is_empty());
    }

    #[test]
    fn defaults_are_typed_by_column_type() {
        let constant = |v: &str| {
            Some(RawDefault::Constant {
                value: v.to_owned(),
                sql: format!("'{v}'"),
            })
        };
        let number = ColumnType::Primitive(PrimitiveType::Number);
        assert_eq!(
            type_default(constant("5"), &number),
            Some(DefaultValue::Constant(Value::Int(5)))
        );
        assert_eq!(
            type_default(constant("-1.5"), &number),
            Some(DefaultValue::Constant(Value::Float(-1.5)))
        );
        assert_eq!(
            type_default(constant("9007199254740993"), &number),
            Some(DefaultValue::Constant(Value::Int(9_007_199_254_740_992)))
        );
        assert_eq!(
            type_default(constant("1 day"), &number),
            Some(DefaultValue::Constant(Value::Int(1)))
        );
        let boolean = ColumnType::Primitive(PrimitiveType::Boolean);
        assert_eq!(
            type_default(constant("b'1'"), &boolean),
            Some(DefaultValue::Constant(Value::Bool(true)))
        );
        assert_eq!(
            type_default(constant("0"), &boolean),
            Some(DefaultValue::Constant(Value::Bool(false)))
        );
        let json = ColumnType::Primitive(PrimitiveType::Json);
        assert_eq!(
            type_default(constant("[]"), &json),
            Some(DefaultValue::Constant(Value::Json(serde_json::json!([]))))
        );
        let uuid = ColumnType::Primitive(PrimitiveType::Uuid);
        assert!(matches!(
            type_default(constant("x"), &uuid),
            Some(DefaultValue::Expression(_))
        ));
        let array = ColumnType::Array(Box::new(number.clone()));
        assert_eq!(type_default(constant("{}"), &array), None);
        assert_eq!(
            type_default(Some(RawDefault::Literal("now()".to_owned())), &number),
            Some(DefaultValue::Expression("now()".to_owned()))
        );
    }

    #[test]
    fn numbers_and_quotes() {
        for n in ["5", "-1", "1.50", "-1500", "1e3", ".5", "+2"] {
            assert!(is_number(n), "{n}");
        }
        for n in ["", "-", "abc", "1a", "1e", "current_timestamp()", "b'1'"] {
            assert!(!is_number(n), "{n}");
        }
        assert_eq!(unquote("'it''s'", false).as_deref(), Some("it's"));
        assert_eq!(unquote("'it\\'s'", true).as_deref(), Some("it's"));
        assert_eq!(
            unquote("'back\\\\slash'", true).as_deref(),
            Some("back\\slash")
        );
        assert_eq!(
            unquote("'back\\slash'", false).as_deref(),
            Some("back\\slash")
        );
        assert_eq!(unquote("''", false).as_deref(), Some(""));
        assert_eq!(unquote("x", false), None);
    }
}
