//! Segments (`addSegment`, §8.5): named filters listed in the schema. When a filter names one of
//! this layer's segments, its condition tree (fixed, or computed per request by a handler) is
//! validated and AND-ed to the filter, and the name is dropped: the layers below do not know it.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use indexmap::IndexMap;

use super::handlers::Context;
use super::stack::StackOptions;
use super::stack::{FilterRefiner, Layer, by_collection, refining};
use super::{Customization, Kind, SegmentSource};
use crate::datasource::{
    Caller, Collection, CollectionSchema, ConditionTree, DataSource, Error, Filter, Result,
};

/// The segment layer over `child`. A segment name used twice on a collection is refused.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    _options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut declared: HashMap<String, IndexMap<String, SegmentSource>> = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        let schema = child.schema().collection(&collection)?;
        let segments = declared.entry(collection.clone()).or_default();
        for customization in list {
            let Kind::Segment { name, source } = customization.kind else {
                continue;
            };
            if schema.segments.contains(&name) || segments.contains_key(&name) {
                return Err(Error::validation(format!(
                    "{}: the segment '{collection}.{name}' is defined twice",
                    customization.origin
                )));
            }
            if let SegmentSource::Static(tree) = &source {
                tree.validate(schema, child.schema()).map_err(|e| {
                    Error::validation(format!(
                        "{}: the segment '{collection}.{name}' is invalid: {e}",
                        customization.origin
                    ))
                })?;
            }
            segments.insert(name, source);
        }
    }
    let layer = Layer::new(Arc::clone(child), |collection| {
        let Some(segments) = declared.remove(&collection.schema().name) else {
            return Ok(None);
        };
        let mut schema = collection.schema().clone();
        schema.segments.extend(segments.keys().cloned());
        Ok(Some(refining(Segments {
            child: collection,
            datasource: Arc::clone(child),
            schema,
            segments,
        })))
    })?;
    Ok(Arc::new(layer))
}

struct Segments {
    child: Arc<dyn Collection>,
    datasource: Arc<dyn DataSource>,
    schema: CollectionSchema,
    segments: IndexMap<String, SegmentSource>,
}

#[async_trait]
impl FilterRefiner for Segments {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    /// The filter with this layer's segment turned into its condition tree.
    async fn refine(&self, caller: &Caller, filter: &Filter) -> Result<Filter> {
        let Some(source) = filter.segment.as_ref().and_then(|s| self.segments.get(s)) else {
            return Ok(filter.clone());
        };
        let tree = match source {
            SegmentSource::Static(tree) => Some(tree.clone()),
            SegmentSource::Dynamic(handler) => {
                let ctx = Context {
                    collection: Some(self.schema.name.clone()),
                    datasource: Arc::clone(&self.datasource),
                };
                let tree = handler.tree(caller, &ctx).await?;
                if let Some(tree) = &tree {
                    tree.validate(&self.schema, self.datasource.schema())?;
                }
                tree
            }
        };
        Ok(Filter {
            condition_tree: ConditionTree::intersect([filter.condition_tree.clone(), tree]),
            segment: None,
            ..filter.clone()
        })
    }
}
