//! overrideCreate, overrideUpdate and overrideDelete (protocol §8.12, stack position 1): the
//! handler replaces the operation. The layer sits right above the datasource, so a handler
//! receives what every other layer produced (validated, hooked, rewritten records) and its
//! `ctx.datasource` is the bare datasource.
//!
//! Created records must carry their primary key (the agent answers with them and re-reads them
//! by id); keys that are not columns of the collection are dropped from them.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::handlers::{Context, OverrideHandler};
use super::stack::{Decorator, Layer, StackOptions, by_collection, decorated};
use super::{Customization, Kind, OverrideOperation};
use crate::datasource::{
    Caller, Collection, CollectionSchema, DataSource, Error, Filter, Record, Result,
};

/// A declared override: who declared it, and its handler.
#[derive(Clone)]
struct Handler {
    origin: String,
    handler: Arc<dyn OverrideHandler>,
}

/// The overrides of one collection; the last declaration of an operation wins, as in the agent.
#[derive(Clone, Default)]
struct Overrides {
    create: Option<Handler>,
    update: Option<Handler>,
    delete: Option<Handler>,
}

/// The override layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut registry: HashMap<String, Overrides> = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        for customization in list {
            let Kind::Override { operation, handler } = customization.kind else {
                continue;
            };
            if child.schema().collection(&collection).is_err() {
                options.missing(format!(
                    "{}: override{operation:?} targets the collection '{collection}', which does not exist",
                    customization.origin
                ))?;
                continue;
            }
            let declared = Some(Handler {
                origin: customization.origin,
                handler,
            });
            let overrides = registry.entry(collection.clone()).or_default();
            match operation {
                OverrideOperation::Create => overrides.create = declared,
                OverrideOperation::Update => overrides.update = declared,
                OverrideOperation::Delete => overrides.delete = declared,
            }
        }
    }
    let layer = Layer::new(Arc::clone(child), |collection| {
        let name = collection.schema().name.clone();
        Ok(registry.get(&name).map(|overrides| {
            decorated(Overridden {
                child: collection,
                ctx: Context {
                    collection: Some(name),
                    datasource: Arc::clone(child),
                },
                overrides: overrides.clone(),
            })
        }))
    })?;
    Ok(Arc::new(layer))
}

struct Overridden {
    child: Arc<dyn Collection>,
    ctx: Context,
    overrides: Overrides,
}

impl Overridden {
    /// Keeps the column keys of each created record; each must hold a primary key column.
    fn clean(&self, origin: &str, records: Vec<Record>) -> Result<Vec<Record>> {
        let schema = self.child.schema();
        records
            .into_iter()
            .map(|record| {
                let mut has_key = false;
                let cleaned: Record = record
                    .iter()
                    .filter_map(|(name, value)| {
                        let column = schema.column(name)?;
                        has_key |= column.is_primary_key;
                        Some((name, value.clone()))
                    })
                    .collect();
                if has_key {
                    Ok(cleaned)
                } else {
                    Err(Error::validation(format!(
                        "{origin}: the create override of '{}' returned a record without its primary key ({}): {record:?}",
                        schema.name,
                        schema.primary_keys().join(", ")
                    )))
                }
            })
            .collect()
    }
}

#[async_trait]
impl Decorator for Overridden {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        self.child.schema()
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        match &self.overrides.create {
            Some(h) => {
                let created = h.handler.create(caller, &self.ctx, records).await?;
                self.clean(&h.origin, created)
            }
            None => self.child.create(caller, records).await,
        }
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        match &self.overrides.update {
            Some(h) => h.handler.update(caller, &self.ctx, filter, patch).await,
            None => self.child.update(caller, filter, patch).await,
        }
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        match &self.overrides.delete {
            Some(h) => h.handler.delete(caller, &self.ctx, filter).await,
            None => self.child.delete(caller, filter).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::customizer::build_stack;
    use crate::customizer::closures::{self, Overridden as Call};
    use crate::customizer::test_support::{base, by_id, caller, ids, record, string};
    use crate::datasource::{ConditionTree, Operator, Value};

    fn override_of(
        operation: OverrideOperation,
        log: Arc<Mutex<Vec<String>>>,
        created: Vec<Record>,
    ) -> Customization {
        Customization::collection(
            "test",
            "customers",
            Kind::Override {
                operation,
                handler: closures::overrides(move |caller, ctx, call| {
                    let log = Arc::clone(&log);
                    let created = created.clone();
                    async move {
                        let collection = ctx.collection()?;
                        match call {
                            Call::Create(records) => {
                                log.lock()
                                    .unwrap()
                                    .push(format!("create {}", records.len()));
                                Ok(created)
                            }
                            Call::Update(filter, patch) => {
                                log.lock().unwrap().push(format!("update {patch:?}"));
                                // Writes something else through the datasource below.
                                let mut other = patch.clone();
                                other.insert("last_name", Value::String("overridden".into()));
                                collection.update(&caller, &filter, &other).await?;
                                Ok(Vec::new())
                            }
                            Call::Delete(_) => {
                                log.lock().unwrap().push("delete".into());
                                Ok(Vec::new())
                            }
                        }
                    }
                }),
            },
        )
    }

    #[tokio::test]
    async fn overrides_replace_create_update_and_delete() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let returned = vec![record(&[
            ("id", Value::Int(42)),
            ("first_name", string("Made")),
            ("not_a_column", string("dropped")),
        ])];
        let stack = build_stack(
            base().await,
            vec![
                override_of(OverrideOperation::Create, Arc::clone(&log), returned),
                override_of(OverrideOperation::Update, Arc::clone(&log), Vec::new()),
                override_of(OverrideOperation::Delete, Arc::clone(&log), Vec::new()),
            ],
        )
        .unwrap();
        let customers = stack.collection("customers").unwrap();
        let created = customers
            .create(&caller(), vec![record(&[("first_name", string("x"))])])
            .await
            .unwrap();
        assert_eq!(
            created,
            [record(&[
                ("id", Value::Int(42)),
                ("first_name", string("Made"))
            ])]
        );
        let one = Filter::new(Some(ConditionTree::leaf(
            "id",
            Operator::Equal,
            Value::Int(1),
        )));
        customers
            .update(&caller(), &one, &record(&[("first_name", string("A."))]))
            .await
            .unwrap();
        customers.delete(&caller(), &one).await.unwrap();
        // Nothing was created or deleted; the update wrote what the handler chose.
        assert_eq!(
            ids(&stack, "customers", &by_id(None)).await.unwrap(),
            [1, 2, 3]
        );
        let tree = ConditionTree::leaf("last_name", Operator::Equal, string("overridden"));
        assert_eq!(
            ids(&stack, "customers", &by_id(Some(tree))).await.unwrap(),
            [1]
        );
        assert_eq!(log.lock().unwrap().len(), 3, "{log:?}");
        // Other collections keep their own writes.
        stack
            .collection("orders")
            .unwrap()
            .delete(
                &caller(),
                &Filter::new(Some(ConditionTree::leaf(
                    "id",
                    Operator::Equal,
                    Value::Int(4),
                ))),
            )
            .await
            .unwrap();
        assert_eq!(
            ids(&stack, "orders", &by_id(None)).await.unwrap(),
            [1, 2, 3, 5]
        );
    }

    #[tokio::test]
    async fn a_created_record_without_its_primary_key_is_a_clear_error() {
        let stack = build_stack(
            base().await,
            vec![override_of(
                OverrideOperation::Create,
                Arc::default(),
                vec![record(&[("first_name", string("Made"))])],
            )],
        )
        .unwrap();
        let err = stack
            .collection("customers")
            .unwrap()
            .create(&caller(), vec![record(&[("first_name", string("x"))])])
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Validation(_)), "{err:?}");
        assert!(
            err.to_string().contains("without its primary key (id)"),
            "{err}"
        );
    }
}
