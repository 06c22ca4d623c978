//! SQLite catalog: `sqlite_master` for tables and views, the `pragma_*` table-valued functions
//! (which take the table name as a bound parameter) for columns, indexes and foreign keys.

use sqlx::Row;
use sqlx::sqlite::SqlitePool;

use super::super::dialect::Dialect;
use super::super::model::{Column, ForeignKey, Table};
use super::super::types;
use super::checks;
use super::{RawDefault, is_number, sort_by_column_order, type_default, unquote};
use crate::datasource::Result;

/// Tables and views. `sqlite_sequence` (and SQLite's other internal tables, such as
/// `sqlite_stat1`) are not user data.
const TABLES: &str = "
SELECT name, type = 'view' AS is_view, COALESCE(sql, '') AS sql
FROM sqlite_master
WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
ORDER BY name";

pub(super) async fn introspect(pool: &SqlitePool) -> Result<Vec<Table>> {
    let mut tables = Vec::new();
    for row in sqlx::query(TABLES).fetch_all(pool).await? {
        let name: String = row.try_get("name")?;
        let is_view: bool = row.try_get("is_view")?;
        let sql: String = row.try_get("sql")?;
        tables.push(table(pool, name, is_view, &sql).await?);
    }
    // `REFERENCES t` without a column targets t's primary key.
    let snapshot = tables.clone();
    for table in &mut tables {
        table.foreign_keys.retain_mut(|fk| {
            if !fk.foreign_column.is_empty() {
                return true;
            }
            let target = snapshot.iter().find(|t| t.name == fk.foreign_table);
            match target.map(|t| t.primary_key.as_slice()) {
                Some([pk]) => {
                    fk.foreign_column = pk.clone();
                    true
                }
                _ => {
                    tracing::error!(
                        "Failed to load constraints on relation '{}.{}': '{}' has no single-column primary key",
                        table.name,
                        fk.column,
                        fk.foreign_table
                    );
                    false
                }
            }
        });
    }
    Ok(tables)
}

async fn table(pool: &SqlitePool, name: String, is_view: bool, sql: &str) -> Result<Table> {
    // A key column is auto-increment only when the table is declared with AUTOINCREMENT: a bare
    // `INTEGER PRIMARY KEY` is writable (and required) in the reference.
    let autoincrement = sql.to_ascii_uppercase().contains("AUTOINCREMENT");
    let mut table = Table {
        name,
        schema: None,
        is_view,
        columns: Vec::new(),
        primary_key: Vec::new(),
        unique: Vec::new(),
        foreign_keys: Vec::new(),
    };

    let rows = sqlx::query(
        "SELECT name, COALESCE(type, '') AS type, \"notnull\" AS not_null, dflt_value, pk
         FROM pragma_table_info(?1) ORDER BY cid",
    )
    .bind(&table.name)
    .fetch_all(pool)
    .await?;
    // Enums (`CHECK (status IN ('a', 'b'))`) and JSON text (`CHECK (json_valid(data))`).
    let declared = checks::by_column(
        checks::sqlite_check_bodies(sql)
            .into_iter()
            .filter_map(|body| checks::recognise(Dialect::Sqlite, body)),
    );
    let mut keyed: Vec<(i64, String)> = Vec::new();
    for row in rows {
        let column_name: String = row.try_get("name")?;
        let declared_type: String = row.try_get("type")?;
        let not_null: bool = row.try_get("not_null")?;
        let pk: i64 = row.try_get("pk")?;
        let dflt: Option<String> = row.try_get("dflt_value")?;
        let converted = match types::scalar(Dialect::Sqlite, &declared_type) {
            Ok(converted) => converted,
            Err(skip) => {
                types::warn_skipped(&table.name, &column_name, &declared_type, skip);
                continue;
            }
        };
        let ((kind, column_type), enum_values) =
            checks::apply(declared.get(&column_name.to_lowercase()), converted);
        if pk > 0 {
            keyed.push((pk, column_name.clone()));
        }
        table.columns.push(Column {
            name: column_name,
            wire: types::wire(types::Server::Sqlite, &kind, &declared_type),
            raw_type: declared_type,
            kind,
            default: type_default(dflt.as_deref().and_then(parse_default), &column_type),
            column_type,
            nullable: !not_null && pk == 0,
            auto_increment: pk > 0 && autoincrement,
            is_primary_key: false,
            enum_values,
            pg_cast: None,
        });
    }
    if is_view {
        // Views have no keys; SQLite reports none anyway, but the rule is explicit.
        return Ok(table);
    }
    keyed.sort();
    table.primary_key = keyed.into_iter().map(|(_, c)| c).collect();
    sort_by_column_order(&mut table);
    // The declared key is a unique set even when SQLite keeps it as the rowid (no index).
    if !table.primary_key.is_empty() {
        table.unique.push(table.primary_key.clone());
    }

    let indexes =
        sqlx::query("SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1 ORDER BY seq")
            .bind(&table.name)
            .fetch_all(pool)
            .await?;
    for index in indexes {
        let index_name: String = index.try_get("name")?;
        let columns: Vec<Option<String>> =
            sqlx::query_scalar("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
                .bind(&index_name)
                .fetch_all(pool)
                .await?;
        // Expression indexes have unnamed parts: not a column set.
        let Some(columns) = columns.into_iter().collect::<Option<Vec<String>>>() else {
            continue;
        };
        if !columns.is_empty() && !table.unique.contains(&columns) {
            table.unique.push(columns);
        }
    }

    let fks = sqlx::query(
        "SELECT id, \"table\" AS foreign_table, \"from\" AS column_name, \"to\" AS foreign_column
         FROM pragma_foreign_key_list(?1) ORDER BY id, seq",
    )
    .bind(&table.name)
    .fetch_all(pool)
    .await?;
    let mut groups: Vec<(i64, Vec<ForeignKey>)> = Vec::new();
    for row in fks {
        let id: i64 = row.try_get("id")?;
        let fk = ForeignKey {
            column: row.try_get("column_name")?,
            foreign_table: row.try_get("foreign_table")?,
            foreign_column: row
                .try_get::<Option<String>, _>("foreign_column")?
                .unwrap_or_default(),
        };
        match groups.last_mut() {
            Some((last, group)) if *last == id => group.push(fk),
            _ => groups.push((id, vec![fk])),
        }
    }
    for (id, mut group) in groups {
        match (group.pop(), group.is_empty()) {
            (Some(fk), true) => table.foreign_keys.push(fk),
            _ => tracing::warn!(
                "Composite relations are not supported. skipping '{id}' on '{}'",
                table.name
            ),
        }
    }
    // SQLite lists foreign keys last-declared first; the declaration order reads better.
    table.foreign_keys.reverse();
    Ok(table)
}

/// SQLite's `dflt_value` → constant or expression: `NULL` is none, `'…'` is the unquoted text,
/// a number a constant, anything else (`CURRENT_TIMESTAMP`, `(datetime('now'))`) an expression.
fn parse_default(sql: &str) -> Option<RawDefault> {
    let trimmed = sql.trim();
    if trimmed.eq_ignore_ascii_case("NULL") {
        return None;
    }
    let constant = |value: String| RawDefault::Constant {
        value,
        sql: sql.to_owned(),
    };
    if let Some(value) = unquote(trimmed, false) {
        return Some(constant(value));
    }
    if is_number(trimmed) {
        return Some(constant(trimmed.to_owned()));
    }
    Some(RawDefault::Literal(sql.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        assert_eq!(parse_default("NULL"), None);
        assert_eq!(
            parse_default("'it''s'"),
            Some(RawDefault::Constant {
                value: "it's".to_owned(),
                sql: "'it''s'".to_owned()
            })
        );
        assert_eq!(
            parse_default("-1"),
            Some(RawDefault::Constant {
                value: "-1".to_owned(),
                sql: "-1".to_owned()
            })
        );
        assert_eq!(
            parse_default("CURRENT_TIMESTAMP"),
            Some(RawDefault::Literal("CURRENT_TIMESTAMP".to_owned()))
        );
        // `'a' || 'b'` is not one quoted string.
        assert_eq!(
            parse_default("'a' || 'b'"),
            Some(RawDefault::Literal("'a' || 'b'".to_owned()))
        );
    }
}
