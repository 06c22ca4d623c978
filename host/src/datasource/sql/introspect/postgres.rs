//! PostgreSQL catalog: the tables (ordinary, partitioned and each partition) and views of the
//! current schema, their columns with enum labels and array element types, keys and foreign keys.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::postgres::PgPool;

use super::super::dialect::Dialect;
use super::super::model::{Column, ForeignKey, Table};
use super::super::types;
use super::{RawDefault, is_number, sort_by_column_order, type_default, unquote};
use crate::datasource::Result;
use crate::datasource::record::Value;
use crate::datasource::sql::model::{DefaultValue, SqlKind};

/// Tables as `information_schema.tables` lists them for the reference (`table_type LIKE '%TABLE'`
/// keeps base and partitioned tables, leaves foreign and temporary ones), and the schema's views.
/// Materialized views appear in neither.
const TABLES: &str = "
SELECT table_name::text AS name, false AS is_view
FROM information_schema.tables
WHERE table_schema = $1 AND table_type LIKE '%TABLE' AND table_name <> 'spatial_ref_sys'
UNION ALL
SELECT table_name::text, true FROM information_schema.views WHERE table_schema = $1
ORDER BY 1";

/// Every column of the schema. `information_schema` gives the type string the converter reads
/// (`data_type`, `character_maximum_length`); `pg_type` gives enum labels (through domains),
/// array element types and the names used in casts.
const COLUMNS: &str = "
SELECT c.table_name::text AS table_name,
       c.column_name::text AS column_name,
       c.is_nullable::text = 'YES' AS nullable,
       c.column_default::text AS column_default,
       c.data_type::text AS data_type,
       c.character_maximum_length::int4 AS char_length,
       c.udt_name::text AS udt_name,
       c.is_identity::text = 'YES' AS is_identity,
       t.typtype::text AS typtype,
       tn.nspname::text AS type_schema,
       t.typname::text AS type_name,
       format_type(a.atttypid, a.atttypmod) AS formatted,
       et.typtype::text AS element_typtype,
       etn.nspname::text AS element_schema,
       et.typname::text AS element_name,
       (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
          FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid) AS labels,
       (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
          FROM pg_catalog.pg_enum e WHERE e.enumtypid = et.oid) AS element_labels
FROM information_schema.columns c
JOIN pg_catalog.pg_namespace n ON n.nspname = c.table_schema
JOIN pg_catalog.pg_class cl ON cl.relnamespace = n.oid AND cl.relname = c.table_name
JOIN pg_catalog.pg_attribute a ON a.attrelid = cl.oid AND a.attname = c.column_name
JOIN pg_catalog.pg_type d ON d.oid = a.atttypid
JOIN pg_catalog.pg_type t ON t.oid = CASE WHEN d.typtype = 'd' THEN d.typbasetype ELSE d.oid END
JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_type et ON et.oid = t.typelem AND t.typcategory = 'A'
LEFT JOIN pg_catalog.pg_namespace etn ON etn.oid = et.typnamespace
WHERE c.table_schema = $1
ORDER BY c.table_name, c.ordinal_position";

/// Primary keys and unique indexes (key columns only, no expression indexes), by index name as
/// Sequelize's `showIndex` orders them.
const UNIQUE: &str = "
SELECT cl.relname::text AS table_name,
       ix.indisprimary AS is_primary,
       array_agg(a.attname::text ORDER BY k.ord) AS columns
FROM pg_catalog.pg_index ix
JOIN pg_catalog.pg_class cl ON cl.oid = ix.indrelid
JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace
JOIN pg_catalog.pg_class i ON i.oid = ix.indexrelid
CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = cl.oid AND a.attnum = k.attnum
WHERE n.nspname = $1 AND (ix.indisunique OR ix.indisprimary) AND k.ord <= ix.indnkeyatts
GROUP BY cl.relname, i.relname, ix.indexrelid, ix.indisprimary
HAVING bool_and(k.attnum > 0)
ORDER BY cl.relname, i.relname";

/// Foreign keys declared on the schema's tables. The copies PostgreSQL makes on the referencing
/// table for each partition of a referenced partitioned table are left out (same `conrelid` as
/// their parent constraint); the copies on each partition of a referencing table are kept.
const FOREIGN_KEYS: &str = "
SELECT co.conname::text AS name,
       cl.relname::text AS table_name,
       fcl.relname::text AS foreign_table,
       fn.nspname::text AS foreign_schema,
       ARRAY(SELECT a.attname::text FROM unnest(co.conkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = co.conrelid AND a.attnum = k.attnum
             ORDER BY k.ord) AS columns,
       ARRAY(SELECT a.attname::text FROM unnest(co.confkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = co.confrelid AND a.attnum = k.attnum
             ORDER BY k.ord) AS foreign_columns
FROM pg_catalog.pg_constraint co
JOIN pg_catalog.pg_class cl ON cl.oid = co.conrelid
JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace
JOIN pg_catalog.pg_class fcl ON fcl.oid = co.confrelid
JOIN pg_catalog.pg_namespace fn ON fn.oid = fcl.relnamespace
WHERE co.contype = 'f' AND n.nspname = $1
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint p
                  WHERE p.oid = co.conparentid AND p.conrelid = co.conrelid)
ORDER BY cl.relname, co.conname";

pub(super) async fn introspect(pool: &PgPool) -> Result<Vec<Table>> {
    let schema: Option<String> = sqlx::query_scalar("SELECT current_schema()::text")
        .fetch_one(pool)
        .await?;
    let schema = schema.unwrap_or_else(|| "public".to_owned());

    let mut tables: Vec<Table> = sqlx::query(TABLES)
        .bind(&schema)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|row| -> Result<Table> {
            Ok(Table {
                name: row.try_get("name")?,
                schema: Some(schema.clone()),
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

    let mut identity: HashMap<(usize, String), bool> = HashMap::new();
    for row in sqlx::query(COLUMNS).bind(&schema).fetch_all(pool).await? {
        let table_name: String = row.try_get("table_name")?;
        let Some(&i) = index.get(&table_name) else {
            continue;
        };
        let name: String = row.try_get("column_name")?;
        let Some(column) = column(&table_name, &name, &row)? else {
            continue;
        };
        let is_identity: bool = row.try_get("is_identity")?;
        identity.insert((i, name), is_identity);
        tables[i].columns.push(column);
    }

    for row in sqlx::query(UNIQUE).bind(&schema).fetch_all(pool).await? {
        let table_name: String = row.try_get("table_name")?;
        let Some(&i) = index.get(&table_name) else {
            continue;
        };
        let columns: Vec<String> = row.try_get("columns")?;
        if row.try_get("is_primary")? {
            tables[i].primary_key = columns.clone();
        }
        tables[i].unique.push(columns);
    }

    for row in sqlx::query(FOREIGN_KEYS)
        .bind(&schema)
        .fetch_all(pool)
        .await?
    {
        let table_name: String = row.try_get("table_name")?;
        let Some(&i) = index.get(&table_name) else {
            continue;
        };
        let name: String = row.try_get("name")?;
        let foreign_schema: String = row.try_get("foreign_schema")?;
        let mut columns: Vec<String> = row.try_get("columns")?;
        let mut foreign_columns: Vec<String> = row.try_get("foreign_columns")?;
        if foreign_schema != schema {
            tracing::warn!(
                "Relations between different schemas are not supported: skipping '{name}' on '{table_name}' (to '{foreign_schema}')"
            );
            continue;
        }
        if columns.len() != 1 || foreign_columns.len() != 1 {
            tracing::warn!(
                "Composite relations are not supported. skipping '{name}' on '{table_name}'"
            );
            continue;
        }
        let (Some(column), Some(foreign_column)) = (columns.pop(), foreign_columns.pop()) else {
            continue;
        };
        tables[i].foreign_keys.push(ForeignKey {
            column,
            foreign_table: row.try_get("foreign_table")?,
            foreign_column,
        });
    }

    for (i, table) in tables.iter_mut().enumerate() {
        sort_by_column_order(table);
        // Auto-increment only for a declared primary-key column: a sequence default or an
        // identity. Non-key serial/identity columns are plain writable columns.
        for column in &mut table.columns {
            let serial = matches!(&column.default, Some(DefaultValue::Expression(e)) if e.starts_with("nextval("));
            let identity = identity
                .get(&(i, column.name.clone()))
                .copied()
                .unwrap_or(false);
            column.auto_increment =
                table.primary_key.contains(&column.name) && (serial || identity);
        }
    }
    Ok(tables)
}

/// Reads one column, or `None` (logged) when its type is not supported.
fn column(table: &str, name: &str, row: &sqlx::postgres::PgRow) -> Result<Option<Column>> {
    let data_type: String = row.try_get("data_type")?;
    let char_length: Option<i32> = row.try_get("char_length")?;
    let udt_name: String = row.try_get("udt_name")?;
    let typtype: Option<String> = row.try_get("typtype")?;
    let type_schema: String = row.try_get("type_schema")?;
    let type_name: String = row.try_get("type_name")?;
    let formatted: String = row.try_get("formatted")?;
    let labels: Option<Vec<String>> = row.try_get("labels")?;
    let element_typtype: Option<String> = row.try_get("element_typtype")?;
    let element_schema: Option<String> = row.try_get("element_schema")?;
    let element_name: Option<String> = row.try_get("element_name")?;
    let element_labels: Option<Vec<String>> = row.try_get("element_labels")?;

    // The type string as the reference builds it: `udt_name` for hstore, else `data_type` with
    // its length (`character varying(255)`, `bit(1)`).
    let hstore = udt_name == "hstore";
    let raw_type = if hstore {
        udt_name
    } else {
        match char_length {
            Some(len) => format!("{data_type}({len})"),
            None => data_type.clone(),
        }
    };
    let quoted = |s: &str, n: &str| {
        format!(
            "{}.{}",
            Dialect::Postgres.quote(s),
            Dialect::Postgres.quote(n)
        )
    };

    let mut enum_values = Vec::new();
    let mut pg_cast = None;
    let converted = if data_type == "ARRAY" {
        // `format_type` of the array minus `[]` names the element with its modifiers.
        let element = formatted.strip_suffix("[]").unwrap_or(&formatted);
        if element_typtype.as_deref() == Some("e") {
            enum_values = element_labels.unwrap_or_default();
            if let (Some(s), Some(n)) = (&element_schema, &element_name) {
                pg_cast = Some(format!("{}[]", quoted(s, n)));
            }
            Ok(types::array(types::enumeration()))
        } else {
            pg_cast = Some(formatted.clone());
            types::scalar(Dialect::Postgres, element).map(types::array)
        }
    } else if data_type == "USER-DEFINED" && !hstore {
        pg_cast = Some(quoted(&type_schema, &type_name));
        if typtype.as_deref() == Some("e") {
            enum_values = labels.unwrap_or_default();
            Ok(types::enumeration())
        } else {
            // citext, PostGIS types, composites: no labels, so a string.
            Ok((
                SqlKind::Text,
                crate::datasource::schema::PrimitiveType::String.into(),
            ))
        }
    } else {
        types::scalar(Dialect::Postgres, &raw_type)
    };
    let (kind, column_type) = match converted {
        Ok(c) => c,
        Err(skip) => {
            let shown = if data_type == "ARRAY" {
                formatted.as_str()
            } else {
                raw_type.as_str()
            };
            types::warn_skipped(table, name, shown, skip);
            return Ok(None);
        }
    };

    let raw_default: Option<String> = row.try_get("column_default")?;
    let mut default = type_default(raw_default.as_deref().and_then(parse_default), &column_type);
    // The reference gives boolean columns without a default the default `false` (shown in the
    // schema and written on create).
    if raw_default.is_none() && data_type == "boolean" {
        default = Some(DefaultValue::Constant(Value::Bool(false)));
    }

    // An array's values take its element's form (`bigint[]` → strings).
    let scalar_type = if data_type == "ARRAY" {
        formatted.strip_suffix("[]").unwrap_or(&formatted)
    } else {
        raw_type.as_str()
    };
    let wire = types::wire(types::Server::Postgres, &kind, scalar_type);
    Ok(Some(Column {
        name: name.to_owned(),
        wire,
        raw_type,
        kind,
        column_type,
        nullable: row.try_get("nullable")?,
        default,
        auto_increment: false,
        is_primary_key: false,
        enum_values,
        pg_cast,
    }))
}

/// PostgreSQL's `column_default` text → constant or expression: `NULL::…` is no default,
/// `true`/`false` and numbers are constants, `'…'::type` is the unquoted text, anything else
/// (`now()`, `nextval(…)`, `CURRENT_DATE`) an expression.
fn parse_default(sql: &str) -> Option<RawDefault> {
    let trimmed = sql.trim();
    if trimmed.eq_ignore_ascii_case("NULL") || trimmed.to_ascii_uppercase().starts_with("NULL::") {
        return None;
    }
    let constant = |value: String| RawDefault::Constant {
        value,
        sql: sql.to_owned(),
    };
    if trimmed == "true" || trimmed == "false" || is_number(trimmed) {
        return Some(constant(trimmed.to_owned()));
    }
    if let Some(value) = quoted_cast(trimmed) {
        return Some(constant(value));
    }
    Some(RawDefault::Literal(sql.to_owned()))
}

/// `'text'::type` → `text` (with `''` → `'`); `None` for anything else.
fn quoted_cast(sql: &str) -> Option<String> {
    let rest = sql.strip_prefix('\'')?;
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            let (quoted, cast) = sql.split_at(i + 2);
            // Only a bare type may follow (`::character varying`, `::"public"."mood"[]`), not an
            // operator and another operand (`'a'::text || 'b'::text` is an expression).
            let is_type = |t: &str| {
                t.chars()
                    .all(|c| c.is_alphanumeric() || " _.\"[](),".contains(c))
            };
            return match cast.strip_prefix("::") {
                Some(ty) if is_type(ty) => unquote(quoted, false),
                _ => None,
            };
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constant(v: &str) -> Option<String> {
        match parse_default(v) {
            Some(RawDefault::Constant { value, .. }) => Some(value),
            _ => None,
        }
    }

    #[test]
    fn defaults() {
        assert_eq!(parse_default("NULL::character varying"), None);
        assert_eq!(constant("true").as_deref(), Some("true"));
        assert_eq!(constant("12.30").as_deref(), Some("12.30"));
        assert_eq!(constant("'-1.5'::numeric").as_deref(), Some("-1.5"));
        assert_eq!(constant("'it''s'::text").as_deref(), Some("it's"));
        assert_eq!(constant("'ok'::mood").as_deref(), Some("ok"));
        assert_eq!(constant("'{}'::text[]").as_deref(), Some("{}"));
        assert_eq!(constant("''::character varying").as_deref(), Some(""));
        for literal in [
            "now()",
            "nextval('users_id_seq'::regclass)",
            "CURRENT_DATE",
            "gen_random_uuid()",
            "B'1'::\"bit\"",
        ] {
            assert_eq!(
                parse_default(literal),
                Some(RawDefault::Literal(literal.to_owned())),
                "{literal}"
            );
        }
        assert_eq!(
            parse_default("('a'::text || 'b'::text)"),
            Some(RawDefault::Literal("('a'::text || 'b'::text)".to_owned()))
        );
        assert_eq!(
            parse_default("'a'::text || 'b'::text"),
            Some(RawDefault::Literal("'a'::text || 'b'::text".to_owned()))
        );
    }
}
