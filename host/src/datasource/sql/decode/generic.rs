//! Native query results: no schema, so each column is decoded by the type the driver reports,
//! and records are keyed by the result's column names.

use sqlx::mysql::MySqlRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Column as _, Row, TypeInfo, ValueRef};

use super::{decode_error, mysql, postgres, sqlite};
use crate::datasource::error::Result;
use crate::datasource::record::{Record, Value};

fn names<R: Row>(row: &R) -> Vec<String> {
    row.columns().iter().map(|c| c.name().to_owned()).collect()
}

/// Builds records from rows with a per-column decode function.
fn collect<R: Row>(
    rows: &[R],
    mut decode: impl FnMut(&R, usize) -> Result<Value>,
) -> Result<Vec<Record>> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let names = names(first);
    rows.iter()
        .map(|row| {
            let mut record = Record::with_capacity(names.len());
            for (i, name) in names.iter().enumerate() {
                record.insert(name.clone(), decode(row, i)?);
            }
            Ok(record)
        })
        .collect()
}

pub(crate) fn pg_generic(rows: &[PgRow]) -> Result<Vec<Record>> {
    let decs: Vec<postgres::Dec> = rows
        .first()
        .map(|r| {
            r.columns()
                .iter()
                .map(|c| postgres::dec_for(c.type_info().name()))
                .collect()
        })
        .unwrap_or_default();
    collect(rows, |row, i| {
        let raw = row.try_get_raw(i).map_err(|e| decode_error(i, e))?;
        if raw.is_null() {
            return Ok(Value::Null);
        }
        let dec = decs.get(i).copied().unwrap_or(postgres::Dec::Unknown);
        postgres::decode(raw, dec, false).map_err(|e| decode_error(i, e))
    })
}

pub(crate) fn mysql_generic(rows: &[MySqlRow]) -> Result<Vec<Record>> {
    let decs: Vec<mysql::Dec> = rows
        .first()
        .map(|r| {
            r.columns()
                .iter()
                .map(|c| mysql::dec_for(c.type_info().name()))
                .collect()
        })
        .unwrap_or_default();
    collect(rows, |row, i| {
        let raw = row.try_get_raw(i).map_err(|e| decode_error(i, e))?;
        if raw.is_null() {
            return Ok(Value::Null);
        }
        let dec = decs.get(i).copied().unwrap_or(mysql::Dec::Text);
        mysql::decode(raw, dec, None).map_err(|e| decode_error(i, e))
    })
}

pub(crate) fn sqlite_generic(rows: &[SqliteRow]) -> Result<Vec<Record>> {
    collect(rows, |row, i| {
        let raw = row.try_get_raw(i).map_err(|e| decode_error(i, e))?;
        if raw.is_null() {
            return Ok(Value::Null);
        }
        sqlite::decode_generic(raw).map_err(|e| decode_error(i, e))
    })
}
