//! replaceFieldWriting and nested to-one writes (protocol §8.11, stack position 19).
//!
//! A create record or update patch is rewritten key by key: a key with a handler is replaced by
//! the patch its handler returns (other keys keep their value). The patches are deep-merged (two
//! different values for one column are an error); the keys of a returned patch other than the
//! handler's own field are rewritten in turn (a handler whose patch comes back to it is an
//! error, not an endless loop); a to-one relation key holding a record is rewritten with the
//! related collection's handlers. The field of a handler becomes writable.
//!
//! Then nested writes, as the agent's create-relations and update-relations decorators:
//! - create: `manyToOne: {…}` creates the related record first and sets the foreign key (or,
//!   when the foreign key is given, updates that record); `oneToOne: {…}` is created after the
//!   record, with its origin key set;
//! - update: the columns are updated, then for each relation record of the patch the related
//!   records of the updated records are updated, or created (and linked) where there is none.
//!
//! The HTTP routes never send relation records; they come from handlers (importField's writes a
//! field through its relation path).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;

use super::handlers::{Context, WriteAction, WriteContext, WriteHandler};
use super::operator::match_records;
use super::stack::{ColumnTarget, Decorator, Layer, StackOptions, by_collection, decorated};
use super::{Customization, Kind};
use crate::datasource::schema::FieldSchema;
use crate::datasource::{
    Caller, Collection, CollectionSchema, ConditionTree, DataSource, DataSourceSchema, Error,
    Filter, Operator, Projection, Record, RelationSchema, Result, Value,
};

/// A declared write handler.
struct Handler {
    origin: String,
    handler: Arc<dyn WriteHandler>,
}

/// collection → field → handler.
type Registry = HashMap<String, HashMap<String, Handler>>;

/// The write layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut schema = child.schema().clone();
    let mut registry: Registry = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        for customization in list {
            let Kind::Writing { field, handler } = customization.kind else {
                continue;
            };
            let origin = customization.origin;
            let target = ColumnTarget {
                origin: &origin,
                collection: &collection,
                field: &field,
                declared: "replaceFieldWriting",
                refused: "replace the writing of",
            };
            let Some(target) = target.find(&mut schema, options)? else {
                continue;
            };
            if let Some(FieldSchema::Column(column)) = target.fields.get_mut(&field) {
                column.is_read_only = false;
            }
            // The last declaration wins, as in the agent.
            registry
                .entry(collection.clone())
                .or_default()
                .insert(field, Handler { origin, handler });
        }
    }
    let shared = Arc::new(Shared {
        child: Arc::clone(child),
        schema,
        registry,
    });
    let layer = Layer::new(Arc::clone(child), |collection| {
        let name = collection.schema().name.clone();
        Ok(Some(decorated(Writer {
            child: collection,
            schema: shared.schema.collection(&name)?.clone(),
            shared: Arc::clone(&shared),
        })))
    })?;
    Ok(Arc::new(layer))
}

struct Shared {
    child: Arc<dyn DataSource>,
    /// This layer's schema (the child's with the handlers' fields writable).
    schema: DataSourceSchema,
    registry: Registry,
}

/// One rewriting: what the handlers' contexts share.
struct Rewrite<'a> {
    caller: &'a Caller,
    action: WriteAction,
    filter: Option<&'a Filter>,
}

impl Shared {
    fn collection_schema(&self, name: &str) -> Result<&CollectionSchema> {
        self.schema.collection(name)
    }

    /// `patch` (of `collection`) with every key rewritten; `used` are the fields whose handlers
    /// produced it.
    fn rewrite_patch<'a>(
        &'a self,
        run: &'a Rewrite<'a>,
        collection: &'a str,
        patch: &'a Record,
        used: &'a [String],
    ) -> BoxFuture<'a, Result<Record>> {
        Box::pin(async move {
            // Fast path: nothing in the patch has a handler or nests a record.
            let handlers = self.registry.get(collection);
            if patch.iter().all(|(key, value)| {
                !matches!(value, Value::Record(_)) && handlers.is_none_or(|h| !h.contains_key(key))
            }) {
                return Ok(patch.clone());
            }
            let ctx = WriteContext {
                base: Context {
                    collection: Some(collection.to_owned()),
                    datasource: Arc::clone(&self.child),
                },
                action: run.action,
                record: patch.clone(),
                filter: run.filter.cloned(),
            };
            let mut merged = Record::with_capacity(patch.len());
            for (key, value) in patch.iter() {
                let rewritten = self
                    .rewrite_key(run, &ctx, collection, key, value, used)
                    .await?;
                merge_into(&mut merged, &rewritten)?;
            }
            validate(&self.schema, self.collection_schema(collection)?, &merged)?;
            Ok(merged)
        })
    }

    async fn rewrite_key(
        &self,
        run: &Rewrite<'_>,
        ctx: &WriteContext,
        collection: &str,
        key: &str,
        value: &Value,
        used: &[String],
    ) -> Result<Record> {
        let own = |v: Value| -> Record { [(key, v)].into_iter().collect() };
        let schema = self.collection_schema(collection)?;
        match schema.fields.get(key) {
            Some(FieldSchema::Column(_)) => {
                let Some(handler) = self.registry.get(collection).and_then(|h| h.get(key)) else {
                    return Ok(own(value.clone()));
                };
                if used.iter().any(|u| u == key) {
                    let mut chain = used.to_vec();
                    chain.push(key.to_owned());
                    return Err(Error::Plugin(format!(
                        "{}: the write handlers of '{collection}' form a cycle: {}",
                        handler.origin,
                        chain.join(" -> ")
                    )));
                }
                let patch = handler
                    .handler
                    .write(run.caller, ctx, value)
                    .await?
                    .unwrap_or_default();
                // The handler's own field is kept as returned; the rest runs its handlers.
                let mine = patch.get(key).cloned();
                let rest: Record = patch
                    .iter()
                    .filter(|(k, _)| *k != key)
                    .map(|(k, v)| (k, v.clone()))
                    .collect();
                let mut chain = used.to_vec();
                chain.push(key.to_owned());
                let rest = if rest.is_empty() {
                    rest
                } else {
                    self.rewrite_patch(run, collection, &rest, &chain).await?
                };
                let mut out = match mine {
                    Some(v) => own(v),
                    None => Record::new(),
                };
                merge_into(&mut out, &rest)?;
                Ok(out)
            }
            Some(FieldSchema::Relation(relation)) if relation.is_to_one() => match value {
                Value::Record(sub) => {
                    let sub = self
                        .rewrite_patch(run, relation.foreign_collection(), sub, &[])
                        .await?;
                    Ok(own(Value::Record(Box::new(sub))))
                }
                other => Ok(own(other.clone())),
            },
            // Unknown keys and other relations: the layers below answer them.
            _ => Ok(own(value.clone())),
        }
    }

    /// Creates `records` of `collection`, with their nested to-one records.
    fn create<'a>(
        &'a self,
        caller: &'a Caller,
        collection: &'a str,
        mut records: Vec<Record>,
    ) -> BoxFuture<'a, Result<Vec<Record>>> {
        Box::pin(async move {
            let schema = self.collection_schema(collection)?;
            let target = self.child.collection(collection)?;
            // Relation records, by relation name: (index of the record, related record).
            let mut nested: Vec<(String, Vec<(usize, Record)>)> = Vec::new();
            for (index, record) in records.iter_mut().enumerate() {
                if !record
                    .iter()
                    .any(|(k, v)| matches!(v, Value::Record(_)) && schema.relation(k).is_some())
                {
                    continue;
                }
                let mut kept = Record::with_capacity(record.len());
                for (key, value) in record.iter() {
                    match value {
                        Value::Record(sub) if schema.relation(key).is_some() => {
                            match nested.iter_mut().find(|(k, _)| k == key) {
                                Some((_, list)) => list.push((index, (**sub).clone())),
                                None => {
                                    nested.push((key.to_owned(), vec![(index, (**sub).clone())]))
                                }
                            }
                        }
                        _ => kept.insert(key, value.clone()),
                    }
                }
                *record = kept;
            }
            if nested.is_empty() {
                return target.create(caller, records).await;
            }
            // Many-to-one first: the records need the foreign keys.
            for (key, entries) in &nested {
                if let Some(RelationSchema::ManyToOne {
                    foreign_collection,
                    foreign_key,
                    foreign_key_target,
                }) = schema.relation(key)
                {
                    let (updates, creations): (Vec<_>, Vec<_>) =
                        entries.iter().partition(|(i, _)| {
                            records[*i].get(foreign_key).is_some_and(|v| !v.is_null())
                        });
                    if !creations.is_empty() {
                        let subs = creations.iter().map(|(_, r)| r.clone()).collect();
                        let created = self.create(caller, foreign_collection, subs).await?;
                        for ((index, _), related) in creations.iter().zip(&created) {
                            let fk = related.get(foreign_key_target).cloned().ok_or_else(|| {
                                Error::Internal(format!(
                                    "the created '{foreign_collection}' record has no '{foreign_key_target}'"
                                ))
                            })?;
                            records[*index].insert(foreign_key.as_str(), fk);
                        }
                    }
                    for (index, sub) in updates {
                        let fk = records[*index]
                            .get(foreign_key)
                            .cloned()
                            .unwrap_or(Value::Null);
                        let filter = Filter::new(Some(ConditionTree::leaf(
                            foreign_key_target.as_str(),
                            Operator::Equal,
                            fk,
                        )));
                        self.update(caller, foreign_collection, &filter, sub)
                            .await?;
                    }
                }
            }
            let created = target.create(caller, records).await?;
            for (key, entries) in &nested {
                match schema.relation(key) {
                    Some(RelationSchema::OneToOne {
                        foreign_collection,
                        origin_key,
                        origin_key_target,
                    }) => {
                        let subs = entries
                            .iter()
                            .map(|(index, sub)| {
                                let mut sub = sub.clone();
                                let origin = created
                                    .get(*index)
                                    .and_then(|r| r.get(origin_key_target))
                                    .cloned()
                                    .ok_or_else(|| {
                                        Error::Internal(format!(
                                            "the created '{collection}' record has no '{origin_key_target}'"
                                        ))
                                    })?;
                                sub.insert(origin_key.as_str(), origin);
                                Ok(sub)
                            })
                            .collect::<Result<Vec<_>>>()?;
                        self.create(caller, foreign_collection, subs).await?;
                    }
                    Some(RelationSchema::ManyToOne { .. }) => {}
                    Some(other) => {
                        return Err(Error::validation(format!(
                            "'{collection}.{key}' is a {} relation: only to-one relations can be written with a record",
                            other.kind_name()
                        )));
                    }
                    None => {}
                }
            }
            Ok(created)
        })
    }

    /// Updates the records of `collection` that match `filter`, with the nested to-one records
    /// of `patch`.
    fn update<'a>(
        &'a self,
        caller: &'a Caller,
        collection: &'a str,
        filter: &'a Filter,
        patch: &'a Record,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let schema = self.collection_schema(collection)?;
            let target = self.child.collection(collection)?;
            let is_nested =
                |k: &str, v: &Value| matches!(v, Value::Record(_)) && schema.relation(k).is_some();
            if !patch.iter().any(|(k, v)| is_nested(k, v)) {
                return target.update(caller, filter, patch).await;
            }
            let columns: Record = patch
                .iter()
                .filter(|(k, v)| !is_nested(k, v))
                .map(|(k, v)| (k, v.clone()))
                .collect();
            if !columns.is_empty() {
                target.update(caller, filter, &columns).await?;
            }
            // The updated records, with what the relations need: their keys, the related keys.
            let mut projection = Projection::new(schema.primary_keys());
            for (key, value) in patch.iter() {
                if !is_nested(key, value) {
                    continue;
                }
                let Some(relation) = schema.relation(key) else {
                    continue;
                };
                let foreign = self.collection_schema(relation.foreign_collection())?;
                for pk in foreign.primary_keys() {
                    projection.push(format!("{key}:{pk}"));
                }
                match relation {
                    RelationSchema::ManyToOne {
                        foreign_key_target, ..
                    } => projection.push(format!("{key}:{foreign_key_target}")),
                    RelationSchema::OneToOne {
                        origin_key_target, ..
                    } => projection.push(origin_key_target.clone()),
                    other => {
                        return Err(Error::validation(format!(
                            "'{collection}.{key}' is a {} relation: only to-one relations can be written with a record",
                            other.kind_name()
                        )));
                    }
                }
            }
            let unpaged = Filter {
                page: None,
                sort: Default::default(),
                ..filter.clone()
            };
            let records = target.list(caller, &unpaged, &projection).await?;
            for (key, value) in patch.iter() {
                let (Value::Record(sub), Some(relation)) = (value, schema.relation(key)) else {
                    continue;
                };
                let (creates, updates): (Vec<&Record>, Vec<&Record>) = records
                    .iter()
                    .partition(|r| !matches!(r.get(key), Some(Value::Record(_))));
                let foreign_collection = relation.foreign_collection();
                if !creates.is_empty() {
                    match relation {
                        RelationSchema::ManyToOne {
                            foreign_key,
                            foreign_key_target,
                            ..
                        } => {
                            // One related record, linked from every record that had none.
                            let created = self
                                .create(caller, foreign_collection, vec![(**sub).clone()])
                                .await?;
                            let fk = created
                                .first()
                                .and_then(|r| r.get(foreign_key_target))
                                .cloned()
                                .ok_or_else(|| {
                                    Error::Internal(format!(
                                        "the created '{foreign_collection}' record has no '{foreign_key_target}'"
                                    ))
                                })?;
                            let link: Record = [(foreign_key.as_str(), fk)].into_iter().collect();
                            let filter = Filter::new(Some(match_records(schema, creates)));
                            target.update(caller, &filter, &link).await?;
                        }
                        RelationSchema::OneToOne {
                            origin_key,
                            origin_key_target,
                            ..
                        } => {
                            let subs = creates
                                .iter()
                                .map(|r| {
                                    let mut s = (**sub).clone();
                                    s.insert(
                                        origin_key.as_str(),
                                        r.get(origin_key_target).cloned().unwrap_or(Value::Null),
                                    );
                                    s
                                })
                                .collect();
                            self.create(caller, foreign_collection, subs).await?;
                        }
                        _ => {}
                    }
                }
                if !updates.is_empty() {
                    let related: Vec<&Record> = updates
                        .iter()
                        .filter_map(|r| match r.get(key) {
                            Some(Value::Record(related)) => Some(&**related),
                            _ => None,
                        })
                        .collect();
                    let foreign = self.collection_schema(foreign_collection)?;
                    let filter = Filter::new(Some(match_records(foreign, related)));
                    self.update(caller, foreign_collection, &filter, sub)
                        .await?;
                }
            }
            Ok(())
        })
    }
}

/// Adds `patch` to `acc`: new keys are added, records (and JSON objects) present in both are
/// merged, two values for one key are a conflict.
fn merge_into(acc: &mut Record, patch: &Record) -> Result<()> {
    for (key, value) in patch.iter() {
        match (acc.get_mut(key), value) {
            (None, _) => acc.insert(key, value.clone()),
            (Some(Value::Record(existing)), Value::Record(more)) => {
                merge_into(existing, more)?;
            }
            (
                Some(Value::Json(serde_json::Value::Object(existing))),
                Value::Json(serde_json::Value::Object(more)),
            ) => {
                merge_json(key, existing, more)?;
            }
            (Some(_), _) => return Err(conflict(key)),
        }
    }
    Ok(())
}

fn merge_json(
    key: &str,
    acc: &mut serde_json::Map<String, serde_json::Value>,
    more: &serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    for (k, v) in more {
        match (acc.get_mut(k), v) {
            (None, _) => {
                acc.insert(k.clone(), v.clone());
            }
            (Some(serde_json::Value::Object(a)), serde_json::Value::Object(b)) => {
                merge_json(k, a, b)?;
            }
            (Some(_), _) => return Err(conflict(&format!("{key}.{k}"))),
        }
    }
    Ok(())
}

fn conflict(key: &str) -> Error {
    Error::validation(format!(
        "Conflict value on the field \"{key}\". It received several values."
    ))
}

/// The rewritten record fits the schema: known fields, values of their column's type, records
/// only under to-one relations (checked in their own collection).
fn validate(
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    record: &Record,
) -> Result<()> {
    for (key, value) in record.iter() {
        match collection.fields.get(key) {
            Some(FieldSchema::Column(column)) => {
                if !column.column_type.accepts(value) {
                    return Err(Error::validation(format!(
                        "Wrong type for \"{key}\": {value:?}. Expects {}",
                        column.column_type.to_json()
                    )));
                }
            }
            Some(FieldSchema::Relation(relation)) if relation.is_to_one() => {
                if let Value::Record(sub) = value {
                    validate(
                        schema,
                        schema.collection(relation.foreign_collection())?,
                        sub,
                    )?;
                }
            }
            Some(FieldSchema::Relation(relation)) => {
                return Err(Error::validation(format!(
                    "Unexpected field type: '{}.{key}' (found '{}' expected 'Column')",
                    collection.name,
                    relation.kind_name()
                )));
            }
            None => {
                return Err(Error::validation(format!("Unknown field \"{key}\"")));
            }
        }
    }
    Ok(())
}

struct Writer {
    child: Arc<dyn Collection>,
    schema: CollectionSchema,
    shared: Arc<Shared>,
}

#[async_trait]
impl Decorator for Writer {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        let run = Rewrite {
            caller,
            action: WriteAction::Create,
            filter: None,
        };
        let mut rewritten = Vec::with_capacity(records.len());
        for record in &records {
            rewritten.push(
                self.shared
                    .rewrite_patch(&run, &self.schema.name, record, &[])
                    .await?,
            );
        }
        self.shared
            .create(caller, &self.schema.name, rewritten)
            .await
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        let run = Rewrite {
            caller,
            action: WriteAction::Update,
            filter: Some(filter),
        };
        let patch = self
            .shared
            .rewrite_patch(&run, &self.schema.name, patch, &[])
            .await?;
        self.shared
            .update(caller, &self.schema.name, filter, &patch)
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::customizer::test_support::{
        base, by_id, caller, computed, full_name, record, string,
    };
    use crate::customizer::{WriteContext, build_stack, closures};

    fn writing(
        collection: &str,
        field: &str,
        f: impl Fn(&Value, &WriteContext) -> Result<Option<Record>> + Send + Sync + 'static,
    ) -> Customization {
        Customization::collection(
            "test",
            collection,
            Kind::Writing {
                field: field.into(),
                handler: closures::write(f),
            },
        )
    }

    /// A computed copy of a relation path (what importField declares).
    fn imported(collection: &str, name: &str, path: &str) -> Customization {
        computed(
            collection,
            name,
            &[path],
            closures::compute(|batch| Ok(batch.columns[0].values.clone())),
        )
    }

    /// `fullName` writes `first_name` and `last_name`; `last_name` upper-cases itself.
    fn name_writers(seen: Arc<Mutex<Vec<(WriteAction, bool)>>>) -> Vec<Customization> {
        vec![
            full_name(),
            writing("customers", "fullName", move |value, ctx| {
                seen.lock()
                    .unwrap()
                    .push((ctx.action, ctx.filter.is_some()));
                let text = value.as_str().unwrap_or("");
                let (first, last) = text.split_once(' ').unwrap_or((text, ""));
                Ok(Some(record(&[
                    ("first_name", string(first)),
                    ("last_name", string(last)),
                ])))
            }),
            writing("customers", "last_name", |value, _| {
                let upper = value.as_str().map(str::to_uppercase);
                Ok(Some(record(&[(
                    "last_name",
                    upper.map_or(Value::Null, Value::String),
                )])))
            }),
        ]
    }

    async fn names(stack: &Arc<dyn DataSource>, id: i64) -> (Value, Value) {
        let filter = Filter::new(Some(ConditionTree::leaf(
            "id",
            Operator::Equal,
            Value::Int(id),
        )));
        let records = stack
            .collection("customers")
            .unwrap()
            .list(
                &caller(),
                &filter,
                &Projection::new(["first_name", "last_name"]),
            )
            .await
            .unwrap();
        let r = &records[0];
        (
            r.get("first_name").cloned().unwrap(),
            r.get("last_name").cloned().unwrap(),
        )
    }

    #[tokio::test]
    async fn write_handlers_rewrite_the_patch_recursively_and_make_the_field_writable() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stack = build_stack(base().await, name_writers(Arc::clone(&seen))).unwrap();
        let customers = stack.collection("customers").unwrap();
        assert!(!customers.schema().column("fullName").unwrap().is_read_only);

        let created = customers
            .create(
                &caller(),
                vec![record(&[("fullName", string("Ada Byron"))])],
            )
            .await
            .unwrap();
        let Some(Value::Int(id)) = created[0].get("id").cloned() else {
            panic!("{created:?}")
        };
        assert_eq!(names(&stack, id).await, (string("Ada"), string("BYRON")));

        let filter = Filter::new(Some(ConditionTree::leaf(
            "id",
            Operator::Equal,
            Value::Int(3),
        )));
        customers
            .update(
                &caller(),
                &filter,
                &record(&[("fullName", string("Grace Kelly"))]),
            )
            .await
            .unwrap();
        assert_eq!(names(&stack, 3).await, (string("Grace"), string("KELLY")));
        // A column without a handler of its own keeps its value; one with a handler runs it.
        customers
            .update(
                &caller(),
                &filter,
                &record(&[("first_name", string("G.")), ("last_name", string("k"))]),
            )
            .await
            .unwrap();
        assert_eq!(names(&stack, 3).await, (string("G."), string("K")));
        assert_eq!(
            *seen.lock().unwrap(),
            [(WriteAction::Create, false), (WriteAction::Update, true)]
        );
    }

    #[tokio::test]
    async fn conflicting_values_and_handler_cycles_are_errors() {
        let stack = build_stack(base().await, name_writers(Arc::default())).unwrap();
        let err = stack
            .collection("customers")
            .unwrap()
            .create(
                &caller(),
                vec![record(&[
                    ("fullName", string("Ada Byron")),
                    ("first_name", string("Other")),
                ])],
            )
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Validation(_)), "{err:?}");
        assert!(
            err.to_string()
                .contains("Conflict value on the field \"first_name\""),
            "{err}"
        );

        let stack = build_stack(
            base().await,
            vec![
                writing("customers", "first_name", |v, _| {
                    Ok(Some(record(&[("last_name", v.clone())])))
                }),
                writing("customers", "last_name", |v, _| {
                    Ok(Some(record(&[("first_name", v.clone())])))
                }),
            ],
        )
        .unwrap();
        let err = stack
            .collection("customers")
            .unwrap()
            .create(&caller(), vec![record(&[("first_name", string("x"))])])
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("cycle: first_name -> last_name -> first_name"),
            "{err}"
        );
        // A handler returning a value of the wrong type is refused before the write.
        let stack = build_stack(
            base().await,
            vec![writing("customers", "first_name", |_, _| {
                Ok(Some(record(&[("last_name", Value::Int(1))])))
            })],
        )
        .unwrap();
        let err = stack
            .collection("customers")
            .unwrap()
            .create(&caller(), vec![record(&[("first_name", string("x"))])])
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("Wrong type for \"last_name\""),
            "{err}"
        );
    }

    #[tokio::test]
    async fn many_to_one_nested_writes_create_or_update_the_related_record() {
        let stack = build_stack(
            base().await,
            vec![
                imported("orders", "customerName", "customer:first_name"),
                writing("orders", "customerName", |v, _| {
                    Ok(Some(record(&[(
                        "customer",
                        Value::Record(Box::new(record(&[("first_name", v.clone())]))),
                    )])))
                }),
            ],
        )
        .unwrap();
        assert!(
            stack
                .schema()
                .collection("orders")
                .unwrap()
                .relation("customer")
                .is_some()
        );
        let orders = stack.collection("orders").unwrap();
        let name_of = |id: i64| {
            let stack = Arc::clone(&stack);
            async move {
                let filter = Filter::new(Some(ConditionTree::leaf(
                    "id",
                    Operator::Equal,
                    Value::Int(id),
                )));
                let records = stack
                    .collection("orders")
                    .unwrap()
                    .list(
                        &caller(),
                        &filter,
                        &Projection::new(["customer_id", "customerName"]),
                    )
                    .await
                    .unwrap();
                (
                    records[0].get("customer_id").cloned().unwrap(),
                    records[0].get("customerName").cloned().unwrap(),
                )
            }
        };
        // No foreign key: the customer is created first and linked.
        let created = orders
            .create(
                &caller(),
                vec![record(&[
                    ("amount", Value::Int(5)),
                    ("customerName", string("Zed")),
                ])],
            )
            .await
            .unwrap();
        let Some(Value::Int(order)) = created[0].get("id").cloned() else {
            panic!("{created:?}")
        };
        assert_eq!(name_of(order).await, (Value::Int(4), string("Zed")));
        // A foreign key given: that customer is updated.
        orders
            .create(
                &caller(),
                vec![record(&[
                    ("customer_id", Value::Int(2)),
                    ("customerName", string("Alonzo")),
                ])],
            )
            .await
            .unwrap();
        assert_eq!(name_of(3).await.1, string("Grace"));
        assert_eq!(name_of(2).await, (Value::Int(2), string("Alonzo")));
        // Update: the related customer is updated, or created and linked where there is none.
        let filter = Filter::new(Some(ConditionTree::leaf(
            "id",
            Operator::In,
            Value::Array(vec![Value::Int(1), Value::Int(4)]),
        )));
        orders
            .update(
                &caller(),
                &filter,
                &record(&[("customerName", string("Eve"))]),
            )
            .await
            .unwrap();
        assert_eq!(name_of(1).await, (Value::Int(1), string("Eve")));
        assert_eq!(name_of(4).await, (Value::Int(5), string("Eve")));
        // Order 5 shares customer 1.
        assert_eq!(name_of(5).await.1, string("Eve"));
        let customers = crate::customizer::test_support::ids(&stack, "customers", &by_id(None))
            .await
            .unwrap();
        assert_eq!(customers, [1, 2, 3, 4, 5]);
    }

    #[tokio::test]
    async fn one_to_one_nested_writes_are_created_after_the_record_with_its_key() {
        let stack = build_stack(
            base().await,
            vec![
                imported("customers", "bio", "profile:bio"),
                writing("customers", "bio", |v, _| {
                    Ok(Some(record(&[(
                        "profile",
                        Value::Record(Box::new(record(&[("bio", v.clone())]))),
                    )])))
                }),
            ],
        )
        .unwrap();
        assert!(matches!(
            stack
                .schema()
                .collection("customers")
                .unwrap()
                .relation("profile"),
            Some(RelationSchema::OneToOne { .. })
        ));
        let customers = stack.collection("customers").unwrap();
        let bio_of = |id: i64| {
            let stack = Arc::clone(&stack);
            async move {
                let filter = Filter::new(Some(ConditionTree::leaf(
                    "id",
                    Operator::Equal,
                    Value::Int(id),
                )));
                stack
                    .collection("customers")
                    .unwrap()
                    .list(&caller(), &filter, &Projection::new(["bio"]))
                    .await
                    .unwrap()[0]
                    .get("bio")
                    .cloned()
                    .unwrap()
            }
        };
        let created = customers
            .create(
                &caller(),
                vec![record(&[
                    ("first_name", string("Kay")),
                    ("bio", string("smalltalk")),
                ])],
            )
            .await
            .unwrap();
        let Some(Value::Int(id)) = created[0].get("id").cloned() else {
            panic!("{created:?}")
        };
        assert_eq!(bio_of(id).await, string("smalltalk"));
        let filter = Filter::new(Some(ConditionTree::leaf(
            "id",
            Operator::In,
            Value::Array(vec![Value::Int(1), Value::Int(2)]),
        )));
        customers
            .update(&caller(), &filter, &record(&[("bio", string("logic"))]))
            .await
            .unwrap();
        assert_eq!(bio_of(1).await, string("logic"));
        assert_eq!(bio_of(2).await, string("logic"));
        let profiles = crate::customizer::test_support::ids(&stack, "profiles", &by_id(None))
            .await
            .unwrap();
        assert_eq!(profiles.len(), 3, "profile 1 updated, two created");
    }
}
