//! Hooks (`addHook`, §8.6): handlers run before and after list, create, update, delete and
//! aggregate, in declaration order. An error from a Before hook stops the operation with that
//! error. Before hooks may change the records to create and the update patch; the filter, the
//! projection and the aggregation they see are copies, so changing them has no effect.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::handlers::{Context, HookData, HookHandler, HookOperation, HookPosition};
use super::stack::StackOptions;
use super::stack::{Decorator, Layer, by_collection, decorated};
use super::{Customization, Kind};
use crate::datasource::{
    AggregateResult, Aggregation, Caller, Collection, DataSource, Error, Filter, Projection,
    Record, Result,
};

type Hooks = Vec<(HookPosition, HookOperation, Arc<dyn HookHandler>)>;

/// The hook layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    _options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut declared: HashMap<String, Hooks> = by_collection(customizations)
        .into_iter()
        .map(|(collection, list)| {
            let hooks = list
                .into_iter()
                .filter_map(|c| match c.kind {
                    Kind::Hook {
                        position,
                        operation,
                        handler,
                    } => Some((position, operation, handler)),
                    _ => None,
                })
                .collect();
            (collection, hooks)
        })
        .collect();
    let layer = Layer::new(Arc::clone(child), |collection| {
        let Some(hooks) = declared.remove(&collection.schema().name) else {
            return Ok(None);
        };
        Ok(Some(decorated(HookCollection {
            context: Context {
                collection: Some(collection.schema().name.clone()),
                datasource: Arc::clone(child),
            },
            child: collection,
            hooks,
        })))
    })?;
    Ok(Arc::new(layer))
}

struct HookCollection {
    child: Arc<dyn Collection>,
    context: Context,
    hooks: Hooks,
}

impl HookCollection {
    /// Runs the hooks of one position around one operation, in declaration order; the first
    /// error stops the rest.
    async fn run(
        &self,
        caller: &Caller,
        position: HookPosition,
        data: &mut HookData,
    ) -> Result<()> {
        let operation = data.operation();
        for (p, o, handler) in &self.hooks {
            if *p == position && *o == operation {
                handler.run(caller, &self.context, position, data).await?;
            }
        }
        Ok(())
    }

    fn has(&self, operation: HookOperation) -> bool {
        self.hooks.iter().any(|(_, o, _)| *o == operation)
    }
}

/// A hook handed back data of another operation: a handler bug, not the caller's.
fn mismatch() -> Error {
    Error::Internal("a hook changed the kind of its operation's data".into())
}

#[async_trait]
impl Decorator for HookCollection {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        if !self.has(HookOperation::List) {
            return self.child.list(caller, filter, projection).await;
        }
        let mut data = HookData::List {
            filter: filter.clone(),
            projection: projection.clone(),
            records: None,
        };
        self.run(caller, HookPosition::Before, &mut data).await?;
        let records = self.child.list(caller, filter, projection).await?;
        let mut data = HookData::List {
            filter: filter.clone(),
            projection: projection.clone(),
            records: Some(records),
        };
        self.run(caller, HookPosition::After, &mut data).await?;
        match data {
            HookData::List {
                records: Some(records),
                ..
            } => Ok(records),
            _ => Err(mismatch()),
        }
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        if !self.has(HookOperation::Create) {
            return self.child.create(caller, records).await;
        }
        let mut data = HookData::Create {
            records,
            created: None,
        };
        self.run(caller, HookPosition::Before, &mut data).await?;
        let HookData::Create { records, .. } = data else {
            return Err(mismatch());
        };
        let created = self.child.create(caller, records.clone()).await?;
        let mut data = HookData::Create {
            records,
            created: Some(created),
        };
        self.run(caller, HookPosition::After, &mut data).await?;
        match data {
            HookData::Create {
                created: Some(created),
                ..
            } => Ok(created),
            _ => Err(mismatch()),
        }
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        if !self.has(HookOperation::Update) {
            return self.child.update(caller, filter, patch).await;
        }
        let mut data = HookData::Update {
            filter: filter.clone(),
            patch: patch.clone(),
        };
        self.run(caller, HookPosition::Before, &mut data).await?;
        let HookData::Update { patch, .. } = data else {
            return Err(mismatch());
        };
        self.child.update(caller, filter, &patch).await?;
        let mut data = HookData::Update {
            filter: filter.clone(),
            patch,
        };
        self.run(caller, HookPosition::After, &mut data).await
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        if !self.has(HookOperation::Delete) {
            return self.child.delete(caller, filter).await;
        }
        let mut data = HookData::Delete {
            filter: filter.clone(),
        };
        self.run(caller, HookPosition::Before, &mut data).await?;
        self.child.delete(caller, filter).await?;
        let mut data = HookData::Delete {
            filter: filter.clone(),
        };
        self.run(caller, HookPosition::After, &mut data).await
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        if !self.has(HookOperation::Aggregate) {
            return self
                .child
                .aggregate(caller, filter, aggregation, limit)
                .await;
        }
        let mut data = HookData::Aggregate {
            filter: filter.clone(),
            aggregation: aggregation.clone(),
            limit,
            result: None,
        };
        self.run(caller, HookPosition::Before, &mut data).await?;
        let result = self
            .child
            .aggregate(caller, filter, aggregation, limit)
            .await?;
        let mut data = HookData::Aggregate {
            filter: filter.clone(),
            aggregation: aggregation.clone(),
            limit,
            result: Some(result),
        };
        self.run(caller, HookPosition::After, &mut data).await?;
        match data {
            HookData::Aggregate {
                result: Some(result),
                ..
            } => Ok(result),
            _ => Err(mismatch()),
        }
    }
}
