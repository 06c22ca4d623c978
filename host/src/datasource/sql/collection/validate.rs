//! Record values are checked against the schema before any SQL is written: unknown fields,
//! relations, read-only columns and values of the wrong type are validation errors.

use crate::datasource::error::{Error, Result};
use crate::datasource::record::{Record, Value};
use crate::datasource::schema::{
    CollectionSchema, ColumnSchema, ColumnType, FieldSchema, PrimitiveType,
};
use crate::datasource::sql::dialect::Dialect;
use crate::datasource::sql::model::{DefaultValue, Table};

/// Checks every field of a record to create (`creating`) or of an update patch.
pub(crate) fn record(schema: &CollectionSchema, record: &Record, creating: bool) -> Result<()> {
    for (field, value) in record.iter() {
        let column = match schema.fields.get(field) {
            Some(FieldSchema::Column(column)) => column,
            Some(FieldSchema::Relation(_)) => {
                return Err(Error::validation(format!(
                    "Cannot write the relation '{field}' of '{}': write its foreign key instead",
                    schema.name
                )));
            }
            None => {
                return Err(Error::validation(format!(
                    "Unknown field \"{field}\" in '{}'",
                    schema.name
                )));
            }
        };
        // An auto-increment key takes an explicit value on insert, as the agent lets it.
        if column.is_read_only && !(creating && column.is_primary_key) {
            let action = if creating { "created" } else { "updated" };
            return Err(Error::validation(format!(
                "Read only fields cannot be {action}: \"{field}\" of '{}'",
                schema.name
            )));
        }
        check_value(field, column, value)?;
    }
    Ok(())
}

fn check_value(field: &str, column: &ColumnSchema, value: &Value) -> Result<()> {
    if !column.column_type.accepts(value) {
        return Err(Error::validation(format!(
            "Wrong type for \"{field}\": {value}. Expects {}",
            column.column_type.to_json()
        )));
    }
    column.check_enum_value(value)
}

/// The record with constant defaults written for absent columns (as the Node agent does) and,
/// on MySQL, a generated uuid for an absent uuid key whose default is `uuid()` (the row could
/// not be read back otherwise: MySQL has no RETURNING and no LAST_INSERT_ID for it).
pub(crate) fn with_defaults(
    schema: &CollectionSchema,
    table: &Table,
    dialect: Dialect,
    mut record: Record,
) -> Record {
    for (name, column) in schema.columns() {
        if record.get(name).is_some() {
            continue;
        }
        if let Some(default) = &column.default_value {
            record.insert(name.clone(), default.clone());
            continue;
        }
        if dialect == Dialect::MySql && column.is_primary_key {
            let generated = table.column(name).is_some_and(|c| {
                matches!(&c.default, Some(DefaultValue::Expression(e)) if e.to_ascii_lowercase().contains("uuid("))
            });
            if generated {
                let id = uuid::Uuid::new_v4();
                let value = match column.column_type {
                    ColumnType::Primitive(PrimitiveType::Uuid) => Value::Uuid(id),
                    _ => Value::String(id.to_string()),
                };
                record.insert(name.clone(), value);
            }
        }
    }
    record
}
