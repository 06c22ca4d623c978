//! Projections: the list of field paths to load; `:` crosses a to-one relation.

use crate::datasource::error::{Error, Result};
use crate::datasource::schema::{CollectionSchema, DataSourceSchema, FieldSchema};

/// Field paths to load, in order. Duplicates are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projection(pub Vec<String>);

impl Projection {
    pub fn new<S: Into<String>>(paths: impl IntoIterator<Item = S>) -> Self {
        let mut p = Self::default();
        for path in paths {
            p.push(path.into());
        }
        p
    }

    pub fn push(&mut self, path: String) {
        if !self.0.contains(&path) {
            self.0.push(path);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// Every column of the collection, without relations.
    pub fn columns(collection: &CollectionSchema) -> Self {
        Self::new(collection.columns().map(|(n, _)| n.clone()))
    }

    /// The agent's default: every column, plus every column of each to-one relation.
    pub fn with_to_one_relations(collection: &CollectionSchema, schema: &DataSourceSchema) -> Self {
        let mut p = Self::columns(collection);
        for (name, relation) in collection.relations() {
            if relation.is_to_one()
                && let Ok(foreign) = schema.collection(relation.foreign_collection())
            {
                for (column, _) in foreign.columns() {
                    p.push(format!("{name}:{column}"));
                }
            }
        }
        p
    }

    /// Root columns (paths without `:`).
    pub fn columns_only(&self) -> impl Iterator<Item = &str> {
        self.iter().filter(|p| !p.contains(':'))
    }

    /// Relation names at the root, in first-seen order.
    pub fn relations(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for p in self.iter() {
            if let Some((head, _)) = p.split_once(':')
                && !out.contains(&head)
            {
                out.push(head);
            }
        }
        out
    }

    /// The sub-projection under one relation (`author:name` → `name`).
    pub fn under(&self, relation: &str) -> Projection {
        let prefix = format!("{relation}:");
        Self::new(
            self.iter()
                .filter_map(|p| p.strip_prefix(&prefix).map(str::to_owned)),
        )
    }

    /// Every path must reach a column through to-one relations.
    pub fn validate(&self, collection: &CollectionSchema, schema: &DataSourceSchema) -> Result<()> {
        for path in self.iter() {
            match collection.fields.get(path) {
                // A bare relation name is not a projection path.
                Some(FieldSchema::Relation(_)) => {
                    return Err(Error::validation(format!(
                        "Invalid projection: '{path}' is a relation"
                    )));
                }
                _ => {
                    schema
                        .resolve_column(collection, path)
                        .map_err(|e| Error::validation(format!("Invalid projection: {e}")))?;
                }
            }
        }
        Ok(())
    }
}
