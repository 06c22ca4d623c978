//! `INSERT`, `UPDATE` and `DELETE`. Writes filtered through relations target the primary keys
//! of the matching rows: a subquery on PostgreSQL and SQLite, keys selected first on MySQL
//! (which cannot read the table it updates in a subquery).

use super::binds::push_value;
use super::joins::{Joins, table_column};
use super::{Ctx, Statement, Writer, condition, nul};
use crate::datasource::error::{Error, Result};
use crate::datasource::query::{ConditionTree, Projection, Sort};
use crate::datasource::record::{Record, Value};
use crate::datasource::sql::decode::Layout;
use crate::datasource::sql::dialect::Dialect;

/// Which rows an `UPDATE` or `DELETE` touches.
pub(crate) enum Target<'t> {
    /// Rows matching a condition tree (all rows when `None`).
    Tree(Option<&'t ConditionTree>),
    /// Rows with these primary keys (values in primary-key order).
    Keys(&'t [Vec<Value>]),
}

/// Whether the tree reads through relations (and so needs joins).
pub(crate) fn needs_joins(
    ctx: Ctx<'_>,
    collection: &str,
    tree: Option<&ConditionTree>,
) -> Result<bool> {
    let mut joins = Joins::new(ctx, collection)?;
    if let Some(tree) = tree {
        condition::prepare(&mut joins, tree)?;
    }
    Ok(joins.has_joins())
}

/// `INSERT` of one record. With `returning` (PostgreSQL, SQLite), every column of the new row
/// is read back and the layout decodes it.
pub(crate) fn insert(
    ctx: Ctx<'_>,
    collection: &str,
    record: &Record,
    returning: bool,
) -> Result<(Statement, Option<Layout>)> {
    let table = ctx.table(collection)?;
    let mut w = Writer::new(ctx.dialect);
    w.push("INSERT INTO ");
    w.push(&table.qualified_name(ctx.dialect));
    if record.is_empty() {
        w.push(match ctx.dialect {
            Dialect::MySql => " () VALUES ()",
            Dialect::Postgres | Dialect::Sqlite => " DEFAULT VALUES",
        });
    } else {
        let columns = record
            .iter()
            .map(|(name, _)| table_column(table, name))
            .collect::<Result<Vec<_>>>()?;
        w.push(" (");
        for (i, column) in columns.iter().enumerate() {
            if i > 0 {
                w.push(", ");
            }
            w.ident(&column.name);
        }
        w.push(") VALUES (");
        for (i, (column, (name, value))) in columns.iter().zip(record.iter()).enumerate() {
            if i > 0 {
                w.push(", ");
            }
            if ctx.dialect == Dialect::Postgres {
                nul::check_write(name, value)?;
            }
            push_value(&mut w, column, value)?;
        }
        w.push(")");
    }
    let layout = if returning {
        let joins = Joins::unqualified(ctx, collection)?;
        let projection = Projection::columns(joins.root().collection);
        w.push(" RETURNING ");
        let mut columns = Vec::new();
        let mut fields = Vec::new();
        for (i, name) in projection.iter().enumerate() {
            if i > 0 {
                w.push(", ");
            }
            let column = joins.column_of(0, name)?;
            joins.reference(0, column).write_select(&mut w);
            columns.push(crate::datasource::sql::decode::Expect::Column(
                column.kind.clone(),
            ));
            fields.push((
                name.to_owned(),
                crate::datasource::sql::decode::Slot::Column(i),
            ));
        }
        Some(Layout {
            columns,
            shape: crate::datasource::sql::decode::Shape { fields },
        })
    } else {
        None
    };
    Ok((w.finish(), layout))
}

/// The primary keys of the rows matching `tree` (MySQL writes through relations).
pub(crate) fn select_primary_keys(
    ctx: Ctx<'_>,
    collection: &str,
    tree: Option<&ConditionTree>,
) -> Result<(Statement, Layout)> {
    let schema = ctx.collection(collection)?;
    let projection = Projection::new(schema.primary_keys());
    if projection.0.is_empty() {
        return Err(Error::NoPrimaryKey);
    }
    super::select::list(ctx, collection, tree, &Sort::default(), None, &projection)
}

/// `UPDATE t SET c = v, … WHERE …`.
pub(crate) fn update(
    ctx: Ctx<'_>,
    collection: &str,
    patch: &Record,
    target: &Target<'_>,
) -> Result<Statement> {
    let table = ctx.table(collection)?;
    let mut w = Writer::new(ctx.dialect);
    w.push("UPDATE ");
    w.push(&table.qualified_name(ctx.dialect));
    w.push(" SET ");
    for (i, (name, value)) in patch.iter().enumerate() {
        if i > 0 {
            w.push(", ");
        }
        let column = table_column(table, name)?;
        if ctx.dialect == Dialect::Postgres {
            nul::check_write(name, value)?;
        }
        w.ident(&column.name);
        w.push(" = ");
        push_value(&mut w, column, value)?;
    }
    write_target(&mut w, ctx, collection, target)?;
    Ok(w.finish())
}

/// `DELETE FROM t WHERE …`.
pub(crate) fn delete(ctx: Ctx<'_>, collection: &str, target: &Target<'_>) -> Result<Statement> {
    let table = ctx.table(collection)?;
    let mut w = Writer::new(ctx.dialect);
    w.push("DELETE FROM ");
    w.push(&table.qualified_name(ctx.dialect));
    write_target(&mut w, ctx, collection, target)?;
    Ok(w.finish())
}

fn write_target(w: &mut Writer, ctx: Ctx<'_>, collection: &str, target: &Target<'_>) -> Result<()> {
    match target {
        Target::Tree(None) => Ok(()),
        Target::Tree(Some(tree)) => {
            let mut joins = Joins::new(ctx, collection)?;
            condition::prepare(&mut joins, tree)?;
            if !joins.has_joins() {
                let joins = Joins::unqualified(ctx, collection)?;
                w.push(" WHERE ");
                return condition::write(w, &joins, tree);
            }
            if ctx.dialect == Dialect::MySql {
                return Err(Error::Internal(
                    "MySQL cannot filter a write through relations in a subquery: select the keys first".into(),
                ));
            }
            // WHERE (pk…) IN (SELECT alias.pk… FROM t AS alias LEFT JOIN … WHERE …)
            let keys = primary_key_columns(ctx, collection)?;
            w.push(" WHERE ");
            write_key_tuple(w, &keys);
            w.push(" IN (SELECT ");
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    w.push(", ");
                }
                joins.reference(0, key).write_raw(w);
            }
            joins.write_from(w);
            w.push(" WHERE ");
            condition::write(w, &joins, tree)?;
            w.push(")");
            Ok(())
        }
        Target::Keys(rows) => where_primary_keys(w, ctx, collection, rows),
    }
}

fn primary_key_columns<'a>(
    ctx: Ctx<'a>,
    collection: &str,
) -> Result<Vec<&'a crate::datasource::sql::model::Column>> {
    let schema = ctx.collection(collection)?;
    let table = ctx.table(collection)?;
    let keys = schema
        .primary_keys()
        .into_iter()
        .map(|name| table_column(table, name))
        .collect::<Result<Vec<_>>>()?;
    if keys.is_empty() {
        return Err(Error::NoPrimaryKey);
    }
    Ok(keys)
}

fn write_key_tuple(w: &mut Writer, keys: &[&crate::datasource::sql::model::Column]) {
    if keys.len() > 1 {
        w.push("(");
    }
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            w.push(", ");
        }
        w.ident(&key.name);
    }
    if keys.len() > 1 {
        w.push(")");
    }
}

/// ` WHERE pk IN (…)`, or `(a = … AND b = …) OR …` for composite keys. No rows → no row.
pub(crate) fn where_primary_keys(
    w: &mut Writer,
    ctx: Ctx<'_>,
    collection: &str,
    rows: &[Vec<Value>],
) -> Result<()> {
    let keys = primary_key_columns(ctx, collection)?;
    // PostgreSQL stores no NUL character: a key holding one matches no row (and cannot be bound).
    let rows: Vec<&Vec<Value>> = rows
        .iter()
        .filter(|row| ctx.dialect != Dialect::Postgres || !row.iter().any(nul::has_nul))
        .collect();
    w.push(" WHERE ");
    if rows.is_empty() {
        w.push("1 = 0");
        return Ok(());
    }
    if let [key] = keys.as_slice() {
        w.ident(&key.name);
        w.push(" IN (");
        for (i, row) in rows.iter().enumerate() {
            if i > 0 {
                w.push(", ");
            }
            let value = row
                .first()
                .ok_or_else(|| Error::Internal("empty primary key".into()))?;
            push_value(w, key, value)?;
        }
        w.push(")");
        return Ok(());
    }
    w.push("(");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            w.push(" OR ");
        }
        if row.len() != keys.len() {
            return Err(Error::Internal("primary key arity mismatch".into()));
        }
        w.push("(");
        for (j, (key, value)) in keys.iter().zip(row.iter()).enumerate() {
            if j > 0 {
                w.push(" AND ");
            }
            w.ident(&key.name);
            w.push(" = ");
            push_value(w, key, value)?;
        }
        w.push(")");
    }
    w.push(")");
    Ok(())
}
