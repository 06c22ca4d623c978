//! MySQL and MariaDB catalog: `INFORMATION_SCHEMA` of the connection's database. Default values
//! are reported differently by the two servers (MariaDB quotes strings and writes expressions,
//! MySQL gives raw text and flags expressions in `EXTRA`), so the server is detected first.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::mysql::MySqlPool;

use super::super::dialect::Dialect;
use super::super::model::{Column, ForeignKey, Table};
use super::super::types;
use super::checks::{self, Declared};
use super::{RawDefault, is_number, sort_by_column_order, type_default, unquote};
use crate::datasource::Result;

// Every text column is read through CAST(… AS CHAR): some servers report catalog columns with a
// binary collation, which the driver would otherwise refuse to decode as text.

const TABLES: &str = "
SELECT CAST(TABLE_NAME AS CHAR) AS name, TABLE_TYPE = 'VIEW' AS is_view
FROM INFORMATION_SCHEMA.TABLES
WHERE TABLE_SCHEMA = ? AND TABLE_TYPE IN ('BASE TABLE', 'VIEW')
ORDER BY TABLE_NAME";

const COLUMNS: &str = "
SELECT CAST(TABLE_NAME AS CHAR) AS table_name,
       CAST(COLUMN_NAME AS CHAR) AS column_name,
       CAST(COLUMN_TYPE AS CHAR) AS column_type,
       CAST(DATA_TYPE AS CHAR) AS data_type,
       IS_NULLABLE = 'YES' AS nullable,
       CAST(COLUMN_DEFAULT AS CHAR) AS column_default,
       CAST(EXTRA AS CHAR) AS extra
FROM INFORMATION_SCHEMA.COLUMNS
WHERE TABLE_SCHEMA = ?
ORDER BY TABLE_NAME, ORDINAL_POSITION";

/// Primary key first, then unique indexes by name.
const UNIQUE: &str = "
SELECT CAST(TABLE_NAME AS CHAR) AS table_name,
       CAST(INDEX_NAME AS CHAR) AS index_name,
       CAST(COLUMN_NAME AS CHAR) AS column_name
FROM INFORMATION_SCHEMA.STATISTICS
WHERE TABLE_SCHEMA = ? AND NON_UNIQUE = 0
ORDER BY TABLE_NAME, INDEX_NAME <> 'PRIMARY', INDEX_NAME, SEQ_IN_INDEX";

const FOREIGN_KEYS: &str = "
SELECT CAST(CONSTRAINT_NAME AS CHAR) AS name,
       CAST(TABLE_NAME AS CHAR) AS table_name,
       CAST(COLUMN_NAME AS CHAR) AS column_name,
       CAST(REFERENCED_TABLE_SCHEMA AS CHAR) AS foreign_schema,
       CAST(REFERENCED_TABLE_NAME AS CHAR) AS foreign_table,
       CAST(REFERENCED_COLUMN_NAME AS CHAR) AS foreign_column
FROM INFORMATION_SCHEMA.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = ? AND REFERENCED_TABLE_NAME IS NOT NULL
ORDER BY TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION";

/// MariaDB only: MySQL's table has no `TABLE_NAME` (and MySQL has a real JSON type).
const CHECKS: &str = "
SELECT CAST(TABLE_NAME AS CHAR) AS table_name,
       CAST(CHECK_CLAUSE AS CHAR) AS check_clause
FROM INFORMATION_SCHEMA.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = ?
ORDER BY TABLE_NAME, CONSTRAINT_NAME";

pub(super) async fn introspect(pool: &MySqlPool) -> Result<Vec<Table>> {
    let (database, version): (Option<String>, String) =
        sqlx::query_as("SELECT CAST(DATABASE() AS CHAR), CAST(VERSION() AS CHAR)")
            .fetch_one(pool)
            .await?;
    let Some(database) = database else {
        // No database selected in the URL: nothing to serve.
        tracing::warn!("The MySQL connection has no database selected: no tables to introspect");
        return Ok(Vec::new());
    };
    let mariadb = version.to_ascii_lowercase().contains("mariadb");

    let mut tables: Vec<Table> = sqlx::query(TABLES)
        .bind(&database)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|row| -> Result<Table> {
            Ok(Table {
                name: row.try_get("name")?,
                schema: None,
                is_view: row.try_get("is_view")?,
                columns: Vec::new(),
                primary_key: Vec::new(),
                unique: Vec::new(),
                foreign_keys: Vec::new(),
            })
        })
        .collect::<Result<_>>()?;
    let index: HashMap<String, usize> = tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();

    // MariaDB's `JSON` is `LONGTEXT` with `CHECK (json_valid(col))`: served as Json.
    let mut declared: Vec<HashMap<String, Declared>> = vec![HashMap::new(); tables.len()];
    if mariadb {
        let mut per_table: Vec<Vec<Declared>> = vec![Vec::new(); tables.len()];
        // `CHECK_CONSTRAINTS` exists since MariaDB 10.2.22: without it, JSON stays a String.
        let rows = match sqlx::query(CHECKS).bind(&database).fetch_all(pool).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(
                    "Cannot read CHECK constraints ({e}): JSON columns are served as strings"
                );
                Vec::new()
            }
        };
        for row in rows {
            let table_name: String = row.try_get("table_name")?;
            let clause: String = row.try_get("check_clause")?;
            let Some(&i) = index.get(&table_name) else {
                continue;
            };
            // Only the JSON shape: MariaDB has a real ENUM type.
            if let Some(json @ Declared::Json { .. }) = checks::recognise(Dialect::MySql, &clause) {
                per_table[i].push(json);
            }
        }
        for (i, found) in per_table.into_iter().enumerate() {
            declared[i] = checks::by_column(found);
        }
    }

    let mut extras: HashMap<(usize, String), String> = HashMap::new();
    for row in sqlx::query(COLUMNS).bind(&database).fetch_all(pool).await? {
        let table_name: String = row.try_get("table_name")?;
        let Some(&i) = index.get(&table_name) else {
            continue;
        };
        let name: String = row.try_get("column_name")?;
        let column_type: String = row.try_get("column_type")?;
        let data_type: String = row.try_get("data_type")?;
        let extra: String = row
            .try_get::<Option<String>, _>("extra")?
            .unwrap_or_default();
        let default: Option<String> = row.try_get("column_default")?;

        // The converter reads COLUMN_TYPE upper-cased, except enum declarations (values keep case).
        let (raw_type, converted, enum_values) = if types::is_enum_declaration(&column_type) {
            let values = types::mysql_enum_values(&column_type).unwrap_or_default();
            (column_type.clone(), Ok(types::enumeration()), values)
        } else {
            let upper = column_type.to_ascii_uppercase();
            let converted = types::scalar(Dialect::MySql, &upper);
            (upper, converted, Vec::new())
        };
        let (kind, forest_type) = match converted {
            Ok(c) => c,
            Err(skip) => {
                types::warn_skipped(&table_name, &name, &raw_type, skip);
                continue;
            }
        };
        let ((kind, forest_type), _) =
            checks::apply(declared[i].get(&name.to_lowercase()), (kind, forest_type));
        let raw_default = if mariadb {
            parse_mariadb_default(default.as_deref())
        } else {
            parse_mysql_default(default.as_deref(), &extra, &data_type)
        };
        extras.insert((i, name.clone()), extra);
        let server = if mariadb {
            types::Server::MariaDb
        } else {
            types::Server::MySql
        };
        tables[i].columns.push(Column {
            name,
            wire: types::wire(server, &kind, &raw_type),
            raw_type,
            kind,
            default: type_default(raw_default, &forest_type),
            column_type: forest_type,
            nullable: row.try_get("nullable")?,
            auto_increment: false,
            is_primary_key: false,
            enum_values,
            pg_cast: None,
        });
    }

    // Rows come grouped by index; a functional key part (no column name) disqualifies its index.
    let mut indexes: Vec<(usize, String, Vec<Option<String>>)> = Vec::new();
    for row in sqlx::query(UNIQUE).bind(&database).fetch_all(pool).await? {
        let table_name: String = row.try_get("table_name")?;
        let Some(&i) = index.get(&table_name) else {
            continue;
        };
        let index_name: String = row.try_get("index_name")?;
        let column: Option<String> = row.try_get("column_name")?;
        match indexes.last_mut() {
            Some((t, n, columns)) if *t == i && *n == index_name => columns.push(column),
            _ => indexes.push((i, index_name, vec![column])),
        }
    }
    for (i, index_name, columns) in indexes {
        let Some(columns) = columns.into_iter().collect::<Option<Vec<String>>>() else {
            continue;
        };
        if index_name == "PRIMARY" {
            tables[i].primary_key = columns.clone();
        }
        tables[i].unique.push(columns);
    }

    let mut groups: Vec<(usize, String, Vec<ForeignKey>, String)> = Vec::new();
    for row in sqlx::query(FOREIGN_KEYS)
        .bind(&database)
        .fetch_all(pool)
        .await?
    {
        let table_name: String = row.try_get("table_name")?;
        let Some(&i) = index.get(&table_name) else {
            continue;
        };
        let name: String = row.try_get("name")?;
        let foreign_schema: String = row.try_get("foreign_schema")?;
        let fk = ForeignKey {
            column: row.try_get("column_name")?,
            foreign_table: row.try_get("foreign_table")?,
            foreign_column: row.try_get("foreign_column")?,
        };
        match groups.last_mut() {
            Some((t, n, group, _)) if *t == i && *n == name => group.push(fk),
            _ => groups.push((i, name, vec![fk], foreign_schema)),
        }
    }
    for (i, name, mut group, foreign_schema) in groups {
        let table = &mut tables[i];
        if foreign_schema != database {
            tracing::warn!(
                "Relations between different schemas are not supported: skipping '{name}' on '{}' (to '{foreign_schema}')",
                table.name
            );
            continue;
        }
        match (group.pop(), group.is_empty()) {
            (Some(fk), true) => table.foreign_keys.push(fk),
            _ => tracing::warn!(
                "Composite relations are not supported. skipping '{name}' on '{}'",
                table.name
            ),
        }
    }

    for (i, table) in tables.iter_mut().enumerate() {
        sort_by_column_order(table);
        for column in &mut table.columns {
            let extra = extras
                .get(&(i, column.name.clone()))
                .map(String::as_str)
                .unwrap_or_default();
            column.auto_increment = table.primary_key.contains(&column.name)
                && extra.to_ascii_lowercase().contains("auto_increment");
        }
    }
    Ok(tables)
}

/// MariaDB's `COLUMN_DEFAULT` is SQL: `NULL`, a quoted string, a number, or an expression
/// (`current_timestamp()`, `uuid()`).
fn parse_mariadb_default(sql: Option<&str>) -> Option<RawDefault> {
    let sql = sql?;
    let trimmed = sql.trim();
    if trimmed.eq_ignore_ascii_case("NULL") {
        return None;
    }
    let constant = |value: String| RawDefault::Constant {
        value,
        sql: sql.to_owned(),
    };
    if let Some(value) = unquote(trimmed, true) {
        return Some(constant(value));
    }
    if is_number(trimmed) {
        return Some(constant(trimmed.to_owned()));
    }
    Some(RawDefault::Literal(sql.to_owned()))
}

/// MySQL's `COLUMN_DEFAULT` is the raw value; expressions are flagged `DEFAULT_GENERATED` in
/// `EXTRA` (and, before 8.0.13, `CURRENT_TIMESTAMP` on a datetime column is not flagged).
fn parse_mysql_default(raw: Option<&str>, extra: &str, data_type: &str) -> Option<RawDefault> {
    let raw = raw?;
    let extra = extra.to_ascii_uppercase();
    let timestamp = matches!(
        data_type.to_ascii_lowercase().as_str(),
        "datetime" | "timestamp"
    );
    if extra.contains("DEFAULT_GENERATED")
        || extra.contains("AUTO_INCREMENT")
        || (timestamp && raw.to_ascii_uppercase().starts_with("CURRENT_TIMESTAMP"))
    {
        return Some(RawDefault::Literal(raw.to_owned()));
    }
    // The raw value as an SQL string literal, for the rare cases it is kept as an expression.
    let sql = format!("'{}'", raw.replace('\\', "\\\\").replace('\'', "''"));
    Some(RawDefault::Constant {
        value: raw.to_owned(),
        sql,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constant(value: &str, sql: &str) -> Option<RawDefault> {
        Some(RawDefault::Constant {
            value: value.to_owned(),
            sql: sql.to_owned(),
        })
    }

    #[test]
    fn mariadb_defaults() {
        assert_eq!(parse_mariadb_default(None), None);
        assert_eq!(parse_mariadb_default(Some("NULL")), None);
        assert_eq!(
            parse_mariadb_default(Some("'it''s'")),
            constant("it's", "'it''s'")
        );
        assert_eq!(
            parse_mariadb_default(Some("'it\\'s'")),
            constant("it's", "'it\\'s'")
        );
        assert_eq!(
            parse_mariadb_default(Some("'back\\\\slash'")),
            constant("back\\slash", "'back\\\\slash'")
        );
        assert_eq!(
            parse_mariadb_default(Some("1.50")),
            constant("1.50", "1.50")
        );
        assert_eq!(
            parse_mariadb_default(Some("current_timestamp()")),
            Some(RawDefault::Literal("current_timestamp()".to_owned()))
        );
        assert_eq!(
            parse_mariadb_default(Some("b'1'")),
            Some(RawDefault::Literal("b'1'".to_owned()))
        );
    }

    #[test]
    fn mysql_defaults() {
        assert_eq!(parse_mysql_default(None, "", "int"), None);
        assert_eq!(
            parse_mysql_default(Some("it's"), "", "varchar"),
            constant("it's", "'it''s'")
        );
        assert_eq!(
            parse_mysql_default(Some("CURRENT_TIMESTAMP"), "DEFAULT_GENERATED", "datetime"),
            Some(RawDefault::Literal("CURRENT_TIMESTAMP".to_owned()))
        );
        assert_eq!(
            parse_mysql_default(Some("CURRENT_TIMESTAMP"), "", "timestamp"),
            Some(RawDefault::Literal("CURRENT_TIMESTAMP".to_owned()))
        );
    }
}
