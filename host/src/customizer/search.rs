//! Search (`replaceSearch`, `disableSearch`, §8.7): a collection with a replaced search turns the
//! filter's search text into a condition tree here, AND-ed with the filter's own, and the layers
//! below never see the text. Collections without a replacement keep the default search, which
//! the SQL collection answers itself with the same per-type rules.

use std::sync::Arc;

use async_trait::async_trait;

use super::handlers::Context;
use super::stack::StackOptions;
use super::stack::{FilterRefiner, Layer, by_collection, refining};
use super::{Customization, Kind, SearchMode};
use crate::datasource::query::search;
use crate::datasource::{
    Caller, Collection, CollectionSchema, ConditionTree, DataSource, Error, Filter, Result,
};

/// The search layer over `child`. The last declaration for a collection wins, as a second
/// `replaceSearch` call replaces the first in the agent.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    _options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut modes = by_collection(customizations)
        .into_iter()
        .filter_map(|(collection, list)| {
            list.into_iter()
                .filter_map(|c| match c.kind {
                    Kind::Search(mode) => Some(mode),
                    _ => None,
                })
                .last()
                .map(|mode| (collection, mode))
        })
        .collect::<std::collections::HashMap<_, _>>();
    let layer = Layer::new(Arc::clone(child), |collection| {
        let Some(mode) = modes.remove(&collection.schema().name) else {
            return Ok(None);
        };
        let mut schema = collection.schema().clone();
        schema.searchable = !matches!(mode, SearchMode::Disabled);
        Ok(Some(refining(Search {
            child: collection,
            datasource: Arc::clone(child),
            schema,
            mode,
        })))
    })?;
    Ok(Arc::new(layer))
}

struct Search {
    child: Arc<dyn Collection>,
    datasource: Arc<dyn DataSource>,
    schema: CollectionSchema,
    mode: SearchMode,
}

#[async_trait]
impl FilterRefiner for Search {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    /// The filter with its search replaced by a condition tree.
    async fn refine(&self, caller: &Caller, filter: &Filter) -> Result<Filter> {
        let Some(text) = filter.search_text() else {
            return Ok(filter.clone());
        };
        let tree: Option<ConditionTree> = match &self.mode {
            // The agent refuses the search before it gets here; a direct call is refused too.
            SearchMode::Disabled => {
                return Err(Error::validation("Collection is not searchable"));
            }
            SearchMode::Handler(handler) => {
                // Spec search rule 6 (agent ≥ 1.97.3): a handler cannot answer extended search.
                if filter.search_extended {
                    return Err(Error::Forbidden(format!(
                        "Extended search is not available on the collection '{}'",
                        self.schema.name
                    )));
                }
                let ctx = Context {
                    collection: Some(self.schema.name.clone()),
                    datasource: Arc::clone(&self.datasource),
                };
                let tree = handler.search(caller, &ctx, text, false).await?;
                if let Some(tree) = &tree {
                    tree.validate(&self.schema, self.datasource.schema())?;
                }
                tree
            }
            SearchMode::Fields(selection) => Some(search::build_tree_with_fields(
                text,
                filter.search_extended,
                (
                    selection.only.as_deref(),
                    &selection.include,
                    &selection.exclude,
                ),
                &self.schema,
                self.datasource.schema(),
                caller.timezone,
            )?),
        };
        Ok(Filter {
            condition_tree: ConditionTree::intersect([filter.condition_tree.clone(), tree]),
            search: None,
            search_extended: false,
            ..filter.clone()
        })
    }
}
