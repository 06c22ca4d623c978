//! Turns introspected tables into collection schemas: flags, operators, relations and names.

use super::dialect::Dialect;
use super::model::Table;
use crate::datasource::schema::CollectionSchema;

/// One schema per table, in the same order as `tables`.
pub fn build(tables: &[Table], _dialect: Dialect) -> Vec<CollectionSchema> {
    tables.iter().map(|t| CollectionSchema::new(t.name.clone())).collect()
}
