//! To-one relation paths (`author:country:name`) become LEFT JOINs aliased by the relation path
//! (`"author"`, `"author->country"`), as the Node agent names them.

use super::{ColumnRef, Ctx, Writer};

/// The longest alias written as the relation path itself (PostgreSQL keeps 63 bytes).
const MAX_ALIAS: usize = 60;
use crate::datasource::error::{Error, Result};
use crate::datasource::schema::{CollectionSchema, RelationSchema};
use crate::datasource::sql::model::{Column, Table};

/// A table the statement reads: the root collection or a joined to-one relation.
pub(crate) struct Source<'a> {
    pub collection: &'a CollectionSchema,
    pub table: &'a Table,
    pub alias: String,
    /// The relation path from the root (`""` for the root, `author:country` for a nested join).
    pub path: String,
    pub join: Option<JoinOn<'a>>,
}

/// `LEFT JOIN child ON parent.parent_column = child.child_column`.
pub(crate) struct JoinOn<'a> {
    pub parent: usize,
    pub parent_column: &'a Column,
    pub child_column: &'a Column,
}

/// The root table and the joins the statement needs, in creation order (parents first).
pub(crate) struct Joins<'a> {
    ctx: Ctx<'a>,
    sources: Vec<Source<'a>>,
    /// Single-table writes reference bare column names and allow no joins.
    qualify: bool,
}

impl<'a> Joins<'a> {
    /// Reading `collection`: the root is aliased by its table name.
    pub fn new(ctx: Ctx<'a>, collection: &str) -> Result<Self> {
        let schema = ctx.collection(collection)?;
        let table = ctx.table(collection)?;
        let root = Source {
            collection: schema,
            table,
            alias: table.name.clone(),
            path: String::new(),
            join: None,
        };
        Ok(Self {
            ctx,
            sources: vec![root],
            qualify: true,
        })
    }

    /// A single table written by `UPDATE`/`DELETE` without joins: columns are not qualified.
    pub fn unqualified(ctx: Ctx<'a>, collection: &str) -> Result<Self> {
        let mut joins = Self::new(ctx, collection)?;
        joins.qualify = false;
        Ok(joins)
    }

    pub fn root(&self) -> &Source<'a> {
        &self.sources[0]
    }

    pub fn source(&self, index: usize) -> &Source<'a> {
        &self.sources[index]
    }

    pub fn has_joins(&self) -> bool {
        self.sources.len() > 1
    }

    /// Whether the relation path (`author` or `author:country`) is joined.
    pub fn is_joined(&self, relation_path: &str) -> bool {
        self.sources.iter().any(|s| s.path == relation_path)
    }

    /// The source reached through `relations` from the root, joined if needed.
    pub fn source_for(&mut self, relations: &[&str]) -> Result<usize> {
        let mut current = 0;
        for relation in relations {
            let path = match self.sources[current].path.as_str() {
                "" => (*relation).to_owned(),
                parent => format!("{parent}:{relation}"),
            };
            if let Some(existing) = self.sources.iter().position(|s| s.path == path) {
                current = existing;
                continue;
            }
            if !self.qualify {
                return Err(Error::Internal(format!(
                    "relation '{path}' needs a join in a single-table statement"
                )));
            }
            current = self.add_join(current, relation, path)?;
        }
        Ok(current)
    }

    fn add_join(&mut self, parent: usize, relation: &str, path: String) -> Result<usize> {
        let parent_source = &self.sources[parent];
        let schema = parent_source.collection;
        let relation_schema = schema
            .relation(relation)
            .ok_or_else(|| schema.missing_relation(relation))?;
        let foreign_name = relation_schema.foreign_collection();
        let collection = self.ctx.collection(foreign_name)?;
        let table = self.ctx.table(foreign_name)?;
        let (parent_key, child_key) = match relation_schema {
            RelationSchema::ManyToOne {
                foreign_key,
                foreign_key_target,
                ..
            } => (foreign_key, foreign_key_target),
            RelationSchema::OneToOne {
                origin_key,
                origin_key_target,
                ..
            } => (origin_key_target, origin_key),
            other => {
                return Err(Error::validation(format!(
                    "Unexpected field type: '{}.{relation}' (found '{}' expected 'ManyToOne' or 'OneToOne')",
                    schema.name,
                    other.kind_name()
                )));
            }
        };
        let parent_column = table_column(parent_source.table, parent_key)?;
        let child_column = table_column(table, child_key)?;
        let mut alias = path.replace(':', "->");
        // PostgreSQL cuts identifiers at 63 bytes, so two deep paths with a common start would
        // get the same alias (`manager->manager->…` eight relations deep); MySQL refuses table
        // aliases past 64 characters. A long path keeps its start, for reading the SQL, and its
        // source's position, which makes it unique.
        if alias.len() > MAX_ALIAS {
            let cut = (0..=MAX_ALIAS - 8)
                .rev()
                .find(|i| alias.is_char_boundary(*i))
                .unwrap_or(0);
            alias = format!("{}~{}", &alias[..cut], self.sources.len());
        }
        // A relation named like the root table would shadow it; the Node naming rules prevent
        // this, but a hand-made schema might not.
        while self.sources.iter().any(|s| s.alias == alias) {
            alias.push('_');
        }
        self.sources.push(Source {
            collection,
            table,
            alias,
            path,
            join: Some(JoinOn {
                parent,
                parent_column,
                child_column,
            }),
        });
        Ok(self.sources.len() - 1)
    }

    /// Resolves a field path to its source (joining as needed) and column.
    pub fn resolve(&mut self, path: &str) -> Result<(usize, &'a Column)> {
        crate::datasource::schema::check_relation_depth(path)?;
        let segments: Vec<&str> = path.split(':').collect();
        let (field, relations) = segments
            .split_last()
            .ok_or_else(|| Error::validation(format!("Invalid field path: '{path}'")))?;
        let source = self.source_for(relations)?;
        let column = self.column_of(source, field)?;
        Ok((source, column))
    }

    /// The column `field` of a source, checked against both the schema and the table model.
    pub fn column_of(&self, source: usize, field: &str) -> Result<&'a Column> {
        let source = &self.sources[source];
        if source.collection.column(field).is_none() {
            return Err(source.collection.missing_field(field));
        }
        table_column(source.table, field)
    }

    /// A reference to a column of a source, qualified by the source's alias when needed.
    pub fn reference<'s>(&'s self, source: usize, column: &'s Column) -> ColumnRef<'s> {
        ColumnRef {
            alias: self.qualify.then(|| self.sources[source].alias.as_str()),
            column,
        }
    }

    /// Resolves a path that was already joined (no new join may appear while writing SQL,
    /// because the FROM clause is already written).
    pub fn lookup(&self, path: &str) -> Result<ColumnRef<'_>> {
        let segments: Vec<&str> = path.split(':').collect();
        let (field, relations) = segments
            .split_last()
            .ok_or_else(|| Error::validation(format!("Invalid field path: '{path}'")))?;
        let relation_path = relations.join(":");
        let source = self
            .sources
            .iter()
            .position(|s| s.path == relation_path)
            .ok_or_else(|| {
                Error::Internal(format!("'{path}' was not joined before writing SQL"))
            })?;
        let column = self.column_of(source, field)?;
        Ok(self.reference(source, column))
    }

    /// `FROM root AS "root" LEFT JOIN … AS "rel" ON …` (or the bare table name when unqualified).
    pub fn write_from(&self, w: &mut Writer) {
        let root = self.root();
        w.push(" FROM ");
        w.push(&root.table.qualified_name(w.dialect));
        if self.qualify {
            w.push(" AS ");
            w.ident(&root.alias);
        }
        for (index, source) in self.sources.iter().enumerate().skip(1) {
            let Some(join) = &source.join else { continue };
            w.push(" LEFT JOIN ");
            w.push(&source.table.qualified_name(w.dialect));
            w.push(" AS ");
            w.ident(&source.alias);
            w.push(" ON ");
            self.reference(join.parent, join.parent_column).write_raw(w);
            w.push(" = ");
            self.reference(index, join.child_column).write_raw(w);
        }
    }
}

/// A column of the table model; a schema column missing from the model is a bug.
pub(crate) fn table_column<'t>(table: &'t Table, name: &str) -> Result<&'t Column> {
    table.column(name).ok_or_else(|| {
        Error::Internal(format!(
            "column '{}.{name}' is not in the table model",
            table.name
        ))
    })
}
