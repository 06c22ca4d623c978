//! Native query results: no schema, so each column is decoded by the type the driver reports,
//! and records are keyed by the result's column names.

use sqlx::mysql::MySqlRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Column as _, Row, TypeInfo, ValueRef};

use super::{decode_error, mysql, postgres, sqlite};
use crate::datasource::error::Result;
use crate::datasource::record::{Record, RecordShape, Value};

/// Builds records from rows with a per-column decode function; the column names are shared by
/// every record.
fn collect<R: Row>(
    rows: &[R],
    mut decode: impl FnMut(&R, usize) -> Result<Value>,
) -> Result<Vec<Record>> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let columns = first.columns();
    let shape = RecordShape::new(columns.iter().map(|c| c.name()));
    rows.iter()
        .map(|row| {
            let values = (0..columns.len())
                .map(|i| decode(row, i))
                .collect::<Result<Vec<_>>>()?;
            Ok(shape.record(values))
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
