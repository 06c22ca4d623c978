//! Default search: turns a search string into a condition tree over the collection's columns,
//! following the agent's per-type rules (§8.7).

use chrono_tz::Tz;

use super::condition_tree::ConditionTree;
use crate::datasource::error::Result;
use crate::datasource::schema::{CollectionSchema, DataSourceSchema};

/// The condition tree for `search`; with `extended`, first-level to-one relations' columns are
/// searched too. A search that can match nothing yields a tree that matches nothing.
pub fn build_tree(
    _search: &str,
    _extended: bool,
    _collection: &CollectionSchema,
    _schema: &DataSourceSchema,
    _tz: Tz,
) -> Result<ConditionTree> {
    Ok(ConditionTree::or(Vec::new()))
}
