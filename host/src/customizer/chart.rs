//! API charts (`addChart`, §8.10): collection charts (rendered for one record) and datasource
//! (dashboard) charts. A chart name is unique per collection, and among datasource charts.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use indexmap::IndexMap;

use super::handlers::{ChartHandler, Context};
use super::stack::StackOptions;
use super::stack::{Decorator, Layer, decorated};
use super::{Customization, Kind};
use crate::datasource::chart::{ChartRequest, ChartResult};
use crate::datasource::{Caller, Collection, CollectionSchema, DataSource, Error, Result};

/// The chart layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    _options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut by_collection: HashMap<String, IndexMap<String, Arc<dyn ChartHandler>>> =
        HashMap::new();
    let mut global = Vec::new();
    for customization in customizations {
        let Kind::Chart { name, handler } = customization.kind else {
            continue;
        };
        match customization.collection {
            None => global.push((customization.origin, name, handler)),
            Some(collection) => {
                let existing = &child.schema().collection(&collection)?.charts;
                let charts = by_collection.entry(collection.clone()).or_default();
                if existing.contains(&name) || charts.contains_key(&name) {
                    return Err(Error::validation(format!(
                        "{}: the chart '{name}' is defined twice on '{collection}'",
                        customization.origin
                    )));
                }
                charts.insert(name, handler);
            }
        }
    }
    let mut layer = Layer::new(Arc::clone(child), |collection| {
        let Some(charts) = by_collection.remove(&collection.schema().name) else {
            return Ok(None);
        };
        let mut schema = collection.schema().clone();
        schema.charts.extend(charts.keys().cloned());
        Ok(Some(decorated(Charts {
            child: collection,
            datasource: Arc::clone(child),
            schema,
            charts,
        })))
    })?;
    for (origin, name, handler) in global {
        layer.add_chart(&origin, name, handler)?;
    }
    Ok(Arc::new(layer))
}

struct Charts {
    child: Arc<dyn Collection>,
    datasource: Arc<dyn DataSource>,
    schema: CollectionSchema,
    charts: IndexMap<String, Arc<dyn ChartHandler>>,
}

#[async_trait]
impl Decorator for Charts {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn render_chart(
        &self,
        caller: &Caller,
        name: &str,
        request: &ChartRequest,
    ) -> Result<ChartResult> {
        match self.charts.get(name) {
            Some(handler) => {
                let ctx = Context {
                    collection: Some(self.schema.name.clone()),
                    datasource: Arc::clone(&self.datasource),
                };
                handler.render(caller, &ctx, request).await
            }
            None => self.child.render_chart(caller, name, request).await,
        }
    }
}
