//! Sorts: ordered clauses on fields or `:` paths.

use crate::datasource::error::{Error, Result};
use crate::datasource::schema::{CollectionSchema, DataSourceSchema};

/// One sort clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortClause {
    pub field: String,
    pub ascending: bool,
}

/// An ordered list of clauses; empty means the database's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sort(pub Vec<SortClause>);

impl Sort {
    pub fn asc(field: impl Into<String>) -> Self {
        Self(vec![SortClause {
            field: field.into(),
            ascending: true,
        }])
    }

    pub fn desc(field: impl Into<String>) -> Self {
        Self(vec![SortClause {
            field: field.into(),
            ascending: false,
        }])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every sortable primary key, ascending, in schema order: the agent's default
    /// (`SortFactory.byPrimaryKeys`), so that pages of a list without `sort` follow one order
    /// whatever plan the database picks.
    pub fn by_primary_keys(collection: &CollectionSchema) -> Self {
        Self(
            collection
                .primary_keys()
                .into_iter()
                .filter(|pk| collection.column(pk).is_some_and(|c| c.is_sortable))
                .map(|pk| SortClause {
                    field: pk.to_owned(),
                    ascending: true,
                })
                .collect(),
        )
    }

    /// Parses the agent's `sort` query value: comma list, `-` for descending, first `.` → `:`.
    pub fn parse(s: &str) -> Self {
        Self(
            s.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (ascending, field) = match p.strip_prefix('-') {
                        Some(f) => (false, f),
                        None => (true, p),
                    };
                    SortClause {
                        field: field.replacen('.', ":", 1),
                        ascending,
                    }
                })
                .collect(),
        )
    }

    /// Every clause must target a sortable column reachable through to-one relations.
    pub fn validate(&self, collection: &CollectionSchema, schema: &DataSourceSchema) -> Result<()> {
        for clause in &self.0 {
            let (_, column) = schema
                .resolve_column(collection, &clause.field)
                .map_err(|e| Error::validation(format!("Invalid sort: {e}")))?;
            if !column.is_sortable {
                return Err(Error::validation(format!(
                    "Invalid sort: the field '{}' is not sortable",
                    clause.field
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_agent_sort_syntax() {
        let sort = Sort::parse("-createdAt, author.name,id");
        assert_eq!(
            sort.0,
            [
                SortClause {
                    field: "createdAt".into(),
                    ascending: false
                },
                SortClause {
                    field: "author:name".into(),
                    ascending: true
                },
                SortClause {
                    field: "id".into(),
                    ascending: true
                },
            ]
        );
        assert!(Sort::parse(" , ").is_empty());
    }
}
