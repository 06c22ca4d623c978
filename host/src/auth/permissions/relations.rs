//! `skipRelationReadPermissions` (agent-library.md): a field reached through a relation path
//! (`customer:email`) in a projection, filter, sort, search or chart reads another collection,
//! so by default the caller needs `read` on each collection the path crosses; with the option
//! on, only the rights on the queried collection itself apply.

use super::{CollectionRight, Permissions};
use crate::auth::Result;
use crate::datasource::{Caller, CollectionSchema, DataSourceSchema};

/// The collections a field path crosses from `collection`: the foreign collection of each
/// relation of `a:b:c` before the last segment. Unknown names end the walk (the query parser
/// refuses them with its own error).
pub fn relation_collections<'a>(
    schema: &'a DataSourceSchema,
    collection: &'a CollectionSchema,
    path: &str,
) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut current = collection;
    let mut segments = path.split(':').peekable();
    while let Some(segment) = segments.next() {
        if segments.peek().is_none() {
            break;
        }
        let Some(relation) = current.relation(segment) else {
            break;
        };
        let foreign = relation.foreign_collection();
        out.push(foreign);
        match schema.collections.get(foreign) {
            Some(next) => current = next,
            None => break,
        }
    }
    out
}

impl Permissions {
    /// Whether relation reads are checked (enforced, and `skipRelationReadPermissions` off).
    pub fn checks_relation_reads(&self) -> bool {
        self.enforced() && !self.skip_relation_read_permissions
    }

    /// `read` on every collection the `paths` cross from `collection` (403 `Forbidden` on the
    /// first one denied); nothing with `skipRelationReadPermissions`.
    pub async fn can_read_through(
        &self,
        caller: &Caller,
        schema: &DataSourceSchema,
        collection: &CollectionSchema,
        paths: Vec<&str>,
    ) -> Result<()> {
        if !self.checks_relation_reads() {
            return Ok(());
        }
        let mut checked: Vec<&str> = Vec::new();
        for path in paths {
            if !path.contains(':') {
                continue;
            }
            for foreign in relation_collections(schema, collection, path) {
                if !checked.contains(&foreign) {
                    checked.push(foreign);
                    self.can(caller, foreign, CollectionRight::Read).await?;
                }
            }
        }
        Ok(())
    }

    /// Whether the caller may read every collection `path` crosses (for pruning a default
    /// projection rather than refusing it).
    pub async fn can_read_path(
        &self,
        caller: &Caller,
        schema: &DataSourceSchema,
        collection: &CollectionSchema,
        path: &str,
    ) -> Result<bool> {
        if !self.checks_relation_reads() || !path.contains(':') {
            return Ok(true);
        }
        for foreign in relation_collections(schema, collection, path) {
            if !self.has(caller, foreign, CollectionRight::Read).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
