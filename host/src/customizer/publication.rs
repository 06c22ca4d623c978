//! `removeField` and `removeCollection` (protocol §8.3, stack position 23): hidden from the
//! exposed schema, still usable by every customization below (they see the layers under this
//! one). A relation is hidden with it when one of its keys, its foreign collection or its
//! junction is hidden; a removed collection takes every relation to it along. Created records
//! come back without the hidden fields.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;

use super::stack::StackOptions;
use super::stack::{Decorator, Layer, by_collection, decorated};
use super::{Customization, Kind};
use crate::datasource::schema::FieldSchema;
use crate::datasource::{
    Caller, Collection, CollectionSchema, DataSource, DataSourceSchema, Error, Record,
    RelationSchema, Result,
};

/// What the layer hides: fields by collection, and whole collections.
#[derive(Default)]
struct Hidden {
    fields: HashMap<String, HashSet<String>>,
    collections: HashSet<String>,
}

impl Hidden {
    fn collection_published(&self, name: &str) -> bool {
        !self.collections.contains(name)
    }

    /// Whether `collection.field` is exposed: not hidden itself, and, for a relation, its
    /// collections and keys exposed too (the agent's implicit hiding).
    fn published(&self, schema: &DataSourceSchema, collection: &str, field: &str) -> bool {
        if self
            .fields
            .get(collection)
            .is_some_and(|hidden| hidden.contains(field))
        {
            return false;
        }
        let Some(FieldSchema::Relation(relation)) = schema
            .collections
            .get(collection)
            .and_then(|c| c.fields.get(field))
        else {
            return true;
        };
        match relation {
            RelationSchema::ManyToOne {
                foreign_collection,
                foreign_key,
                foreign_key_target,
            } => {
                self.collection_published(foreign_collection)
                    && self.published(schema, collection, foreign_key)
                    && self.published(schema, foreign_collection, foreign_key_target)
            }
            RelationSchema::OneToMany {
                foreign_collection,
                origin_key,
                origin_key_target,
            }
            | RelationSchema::OneToOne {
                foreign_collection,
                origin_key,
                origin_key_target,
            } => {
                self.collection_published(foreign_collection)
                    && self.published(schema, foreign_collection, origin_key)
                    && self.published(schema, collection, origin_key_target)
            }
            RelationSchema::ManyToMany {
                foreign_collection,
                through_collection,
                origin_key,
                origin_key_target,
                foreign_key,
                foreign_key_target,
            } => {
                self.collection_published(through_collection)
                    && self.collection_published(foreign_collection)
                    && self.published(schema, through_collection, foreign_key)
                    && self.published(schema, through_collection, origin_key)
                    && self.published(schema, collection, origin_key_target)
                    && self.published(schema, foreign_collection, foreign_key_target)
            }
        }
    }
}

/// The publication layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let source = child.schema();
    let mut hidden = Hidden::default();
    for (collection, list) in by_collection(customizations) {
        let schema = source.collection(&collection)?;
        for customization in list {
            let origin = &customization.origin;
            match &customization.kind {
                Kind::RemoveCollection => {
                    hidden.collections.insert(collection.clone());
                }
                Kind::RemoveField { name } => match schema.fields.get(name) {
                    None => options.missing(format!(
                        "{origin}: cannot remove '{collection}.{name}', which does not exist"
                    ))?,
                    Some(FieldSchema::Column(column)) if column.is_primary_key => {
                        return Err(Error::validation(format!(
                            "{origin}: cannot hide the primary key '{collection}.{name}'"
                        )));
                    }
                    Some(_) => {
                        hidden
                            .fields
                            .entry(collection.clone())
                            .or_default()
                            .insert(name.clone());
                    }
                },
                _ => {}
            }
        }
    }
    // The exposed schema of each collection that changes; the others are served as they are.
    let mut exposed: HashMap<String, (CollectionSchema, HashSet<String>)> = HashMap::new();
    for (name, schema) in &source.collections {
        if !hidden.collection_published(name) {
            continue;
        }
        let mut published = schema.clone();
        published
            .fields
            .retain(|field, _| hidden.published(source, name, field));
        let own = hidden.fields.get(name).cloned().unwrap_or_default();
        if published.fields.len() != schema.fields.len() || !own.is_empty() {
            exposed.insert(name.clone(), (published, own));
        }
    }
    let mut layer = Layer::new(Arc::clone(child), |collection| {
        Ok(exposed
            .remove(&collection.schema().name)
            .map(|(schema, hidden)| {
                decorated(Published {
                    child: collection,
                    schema,
                    hidden,
                })
            }))
    })?;
    for name in &hidden.collections {
        layer.remove_collection(name);
    }
    Ok(Arc::new(layer))
}

/// A collection served without its hidden fields.
struct Published {
    child: Arc<dyn Collection>,
    schema: CollectionSchema,
    /// The fields hidden explicitly, stripped from created records.
    hidden: HashSet<String>,
}

#[async_trait]
impl Decorator for Published {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        let created = self.child.create(caller, records).await?;
        if self.hidden.is_empty() {
            return Ok(created);
        }
        Ok(created
            .into_iter()
            .map(|record| {
                record
                    .iter()
                    .filter(|(key, _)| !self.hidden.contains(*key))
                    .map(|(key, value)| (key.to_owned(), value.clone()))
                    .collect()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{build_stack, build_stack_with};
    use super::*;
    use crate::customizer::test_support::{caller, sqlite};
    use crate::datasource::{Filter, Projection, Value};

    async fn base() -> Arc<dyn DataSource> {
        sqlite(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, secret TEXT);
                 CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, \
                   customer_id INTEGER REFERENCES customers(id));
                 INSERT INTO customers VALUES (1, 'Ada', 's1');
                 INSERT INTO orders VALUES (1, 10, 1);",
        )
        .await
    }

    fn remove(collection: &str, name: &str) -> Customization {
        Customization::collection("test", collection, Kind::RemoveField { name: name.into() })
    }

    /// The orders → customers relation name, as the SQL datasource names it.
    fn relation(ds: &dyn DataSource) -> String {
        ds.schema()
            .collection("orders")
            .unwrap()
            .relations()
            .next()
            .map(|(n, _)| n.clone())
            .unwrap()
    }

    #[tokio::test]
    async fn removed_fields_are_hidden_but_still_served_below_and_stripped_from_creates() {
        let base = base().await;
        let to_customer = relation(base.as_ref());
        let stack = build_stack(
            Arc::clone(&base),
            vec![
                remove("customers", "secret"),
                remove("orders", "customer_id"),
            ],
        )
        .unwrap();
        let customers = stack.schema().collection("customers").unwrap();
        assert!(customers.fields.get("secret").is_none());
        let orders = stack.schema().collection("orders").unwrap();
        // The foreign key is hidden, so is the relation that uses it (and its inverse).
        assert!(orders.fields.get("customer_id").is_none());
        assert!(orders.fields.get(&to_customer).is_none(), "{orders:?}");
        assert!(customers.relations().next().is_none(), "{customers:?}");
        assert_eq!(stack.collection("orders").unwrap().schema(), orders);

        let collection = stack.collection("customers").unwrap();
        let mut record = Record::new();
        record.insert("name", Value::String("Bob".into()));
        record.insert("secret", Value::String("s2".into()));
        let created = collection.create(&caller(), vec![record]).await.unwrap();
        assert!(created[0].get("secret").is_none(), "{created:?}");
        assert_eq!(created[0].get("name"), Some(&Value::String("Bob".into())));
        // The hidden value was written: the layer below reads it.
        let rows = base
            .collection("customers")
            .unwrap()
            .list(&caller(), &Filter::default(), &Projection::new(["secret"]))
            .await
            .unwrap();
        assert_eq!(rows[1].get("secret"), Some(&Value::String("s2".into())));
    }

    #[tokio::test]
    async fn a_removed_collection_disappears_with_the_relations_to_it() {
        let base = base().await;
        let to_customer = relation(base.as_ref());
        let stack = build_stack(
            base,
            vec![Customization::collection(
                "test",
                "customers",
                Kind::RemoveCollection,
            )],
        )
        .unwrap();
        assert!(stack.schema().collections.get("customers").is_none());
        assert!(matches!(
            stack.collection("customers").err(),
            Some(Error::MissingCollection(_))
        ));
        let orders = stack.schema().collection("orders").unwrap();
        assert!(orders.fields.get(&to_customer).is_none());
        assert!(orders.fields.get("customer_id").is_some());
    }

    #[tokio::test]
    async fn the_primary_key_cannot_be_hidden_and_missing_fields_are_refused_unless_ignored() {
        let err = build_stack(base().await, vec![remove("customers", "id")])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("primary key 'customers.id'"), "{err}");
        let err = build_stack(base().await, vec![remove("customers", "nope")])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("'customers.nope'"), "{err}");
        let options = StackOptions {
            ignore_missing_schema_element_errors: true,
            ..StackOptions::default()
        };
        let stack =
            build_stack_with(base().await, vec![remove("customers", "nope")], &options).unwrap();
        assert!(
            stack
                .schema()
                .collection("customers")
                .unwrap()
                .fields
                .contains_key("name")
        );
    }
}
