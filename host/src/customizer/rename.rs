//! `renameField` (protocol §8.3, stack position 24, the top): a field (column or relation) is
//! exposed under a new name while every customization below keeps the old one. Names crossing
//! the layer are rewritten both ways: projections, condition trees, sorts and aggregations on
//! the way down (`:` paths through relations whose target collection renames fields too),
//! records, nested related records and aggregation groups on the way up; the relations of every
//! collection name their keys as exposed.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use indexmap::IndexMap;

use super::stack::StackOptions;
use super::stack::{Decorator, Layer, by_collection, decorated};
use super::{Customization, Kind};
use crate::datasource::action::{ActionResult, FormElement, FormPhase, FormValues};
use crate::datasource::schema::FieldSchema;
use crate::datasource::{
    AggregateResult, Aggregation, Caller, Collection, CollectionSchema, ConditionTree, DataSource,
    DataSourceSchema, Error, Filter, Group, Projection, Record, RelationSchema, Result, Sort,
    SortClause, Value,
};

/// The renames of one collection, both ways.
#[derive(Default)]
struct Names {
    /// Name below → exposed name.
    from_child: HashMap<String, String>,
    /// Exposed name → name below.
    to_child: HashMap<String, String>,
}

/// Every rename of the layer, and the exposed schema the paths are resolved in.
struct Renames {
    names: HashMap<String, Names>,
    exposed: DataSourceSchema,
}

/// The rename layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let source = child.schema();
    let mut names: HashMap<String, Names> = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        let schema = source.collection(&collection)?;
        let own = names.entry(collection.clone()).or_default();
        for customization in list {
            let Kind::RenameField { from, to } = &customization.kind else {
                continue;
            };
            let origin = &customization.origin;
            let exposed = |own: &Names, name: &str| -> bool {
                match own.to_child.get(name) {
                    Some(_) => true,
                    None => schema.fields.contains_key(name) && !own.from_child.contains_key(name),
                }
            };
            if !exposed(own, from) {
                options.missing(format!(
                    "{origin}: cannot rename '{collection}.{from}', which does not exist"
                ))?;
                continue;
            }
            if to.contains(' ') {
                return Err(Error::validation(format!(
                    "{origin}: the name of field '{to}' you configured on '{collection}' must \
                     not contain space. Something like '{}' should work has expected.",
                    camel_case(to)
                )));
            }
            if to != from && exposed(own, to) {
                return Err(Error::validation(format!(
                    "{origin}: cannot rename '{collection}.{from}' to '{to}': the field \
                     '{collection}.{to}' already exists"
                )));
            }
            // Renaming a renamed field starts again from the name below, so that a rename back
            // cancels and a chain of renames needs no recursion.
            let initial = match own.to_child.remove(from) {
                Some(below) => {
                    own.from_child.remove(&below);
                    below
                }
                None => from.clone(),
            };
            if initial != *to {
                own.from_child.insert(initial.clone(), to.clone());
                own.to_child.insert(to.clone(), initial);
            }
        }
    }
    names.retain(|_, own| !own.from_child.is_empty());
    let exposed = DataSourceSchema {
        collections: source
            .collections
            .iter()
            .map(|(name, schema)| (name.clone(), exposed_schema(&names, schema)))
            .collect(),
        charts: source.charts.clone(),
    };
    let renames = Arc::new(Renames { names, exposed });
    // Every collection is decorated: one without renames may still lead to renamed fields
    // through its relations (paths, nested records, relation keys).
    let layer = Layer::new(Arc::clone(child), |collection| {
        let name = collection.schema().name.clone();
        let schema = renames.exposed.collection(&name)?.clone();
        Ok(Some(decorated(Renamed {
            child: collection,
            name,
            schema,
            renames: Arc::clone(&renames),
        })))
    })?;
    Ok(Arc::new(layer))
}

/// The agent's suggestion for a name with spaces: each letter after a space upper-cased.
fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == ' ' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A collection's schema as exposed: its fields renamed in place (order kept), and the keys of
/// its relations named as their collections expose them.
fn exposed_schema(names: &HashMap<String, Names>, schema: &CollectionSchema) -> CollectionSchema {
    let rename = |collection: &str, field: &String| -> String {
        names
            .get(collection)
            .and_then(|n| n.from_child.get(field))
            .unwrap_or(field)
            .clone()
    };
    let own = schema.name.as_str();
    let fields = schema
        .fields
        .iter()
        .map(|(name, field)| {
            let field = match field {
                FieldSchema::Column(_) => field.clone(),
                FieldSchema::Relation(relation) => FieldSchema::Relation(match relation {
                    RelationSchema::ManyToOne {
                        foreign_collection,
                        foreign_key,
                        foreign_key_target,
                    } => RelationSchema::ManyToOne {
                        foreign_key: rename(own, foreign_key),
                        foreign_key_target: rename(foreign_collection, foreign_key_target),
                        foreign_collection: foreign_collection.clone(),
                    },
                    RelationSchema::OneToMany {
                        foreign_collection,
                        origin_key,
                        origin_key_target,
                    } => RelationSchema::OneToMany {
                        origin_key: rename(foreign_collection, origin_key),
                        origin_key_target: rename(own, origin_key_target),
                        foreign_collection: foreign_collection.clone(),
                    },
                    RelationSchema::OneToOne {
                        foreign_collection,
                        origin_key,
                        origin_key_target,
                    } => RelationSchema::OneToOne {
                        origin_key: rename(foreign_collection, origin_key),
                        origin_key_target: rename(own, origin_key_target),
                        foreign_collection: foreign_collection.clone(),
                    },
                    RelationSchema::ManyToMany {
                        foreign_collection,
                        through_collection,
                        origin_key,
                        origin_key_target,
                        foreign_key,
                        foreign_key_target,
                    } => RelationSchema::ManyToMany {
                        origin_key: rename(through_collection, origin_key),
                        foreign_key: rename(through_collection, foreign_key),
                        origin_key_target: rename(own, origin_key_target),
                        foreign_key_target: rename(foreign_collection, foreign_key_target),
                        foreign_collection: foreign_collection.clone(),
                        through_collection: through_collection.clone(),
                    },
                }),
            };
            (rename(own, name), field)
        })
        .collect();
    CollectionSchema {
        fields,
        ..schema.clone()
    }
}

impl Renames {
    /// The collection a relation (by exposed name) of `collection` leads to.
    fn foreign(&self, collection: &str, relation: &str) -> Option<&str> {
        self.exposed
            .collections
            .get(collection)?
            .relation(relation)
            .map(RelationSchema::foreign_collection)
    }

    /// An exposed `:` path of `collection` as the layer below names it. A path that does not
    /// resolve is passed on as it is, for the layers below to refuse.
    fn to_child_path(&self, collection: &str, path: &str) -> String {
        let (head, rest) = match path.split_once(':') {
            Some((head, rest)) => (head, Some(rest)),
            None => (path, None),
        };
        let below = self
            .names
            .get(collection)
            .and_then(|n| n.to_child.get(head))
            .map_or(head, String::as_str);
        match rest {
            None => below.to_owned(),
            Some(rest) => match self.foreign(collection, head) {
                Some(foreign) => format!("{below}:{}", self.to_child_path(foreign, rest)),
                None => format!("{below}:{rest}"),
            },
        }
    }

    /// A `:` path of the layer below as `collection` exposes it.
    fn path_from_child(&self, collection: &str, path: &str) -> String {
        let (head, rest) = match path.split_once(':') {
            Some((head, rest)) => (head, Some(rest)),
            None => (path, None),
        };
        let exposed = self
            .names
            .get(collection)
            .and_then(|n| n.from_child.get(head))
            .map_or(head, String::as_str);
        match rest {
            None => exposed.to_owned(),
            Some(rest) => match self.foreign(collection, exposed) {
                Some(foreign) => format!("{exposed}:{}", self.path_from_child(foreign, rest)),
                None => format!("{exposed}:{rest}"),
            },
        }
    }

    fn filter_to_child(&self, collection: &str, filter: &Filter) -> Result<Filter> {
        let condition_tree = match &filter.condition_tree {
            Some(tree) => Some(tree.replace_leaves(&mut |leaf| {
                let mut leaf = leaf.clone();
                leaf.field = self.to_child_path(collection, &leaf.field);
                Ok(ConditionTree::Leaf(leaf))
            })?),
            None => None,
        };
        let sort = Sort(
            filter
                .sort
                .0
                .iter()
                .map(|clause| SortClause {
                    field: self.to_child_path(collection, &clause.field),
                    ascending: clause.ascending,
                })
                .collect(),
        );
        Ok(Filter {
            condition_tree,
            sort,
            ..filter.clone()
        })
    }

    /// A written record (create, update patch) as the layer below names its fields.
    fn record_to_child(&self, collection: &str, record: &Record) -> Record {
        let Some(names) = self.names.get(collection) else {
            return record.clone();
        };
        record
            .iter()
            .map(|(key, value)| {
                let key = names.to_child.get(key).map_or(key, String::as_str);
                (key.to_owned(), value.clone())
            })
            .collect()
    }

    /// Records of the layer below as `collection` exposes them, related records included.
    fn records_from_child(&self, collection: &str, records: Vec<Record>) -> Vec<Record> {
        let mut shape = None;
        records
            .into_iter()
            .map(|record| self.record_from_child(collection, record, &mut shape))
            .collect()
    }

    /// One record, with the shape of the previous record of the same collection reused when the
    /// field names are the same (the rows of one list share them), so that the renamed records
    /// share their names too instead of building a list of names each.
    fn record_from_child(
        &self,
        collection: &str,
        mut record: Record,
        shape: &mut Option<Shape>,
    ) -> Record {
        if !shape
            .as_ref()
            .is_some_and(|s| record.keys().eq(s.child.iter().map(String::as_str)))
        {
            *shape = None;
        }
        let shape = shape.get_or_insert_with(|| self.shape(collection, &record));
        let mut out = shape.template.clone();
        for (i, key) in shape.child.iter().enumerate() {
            let value = record
                .get_mut(key)
                .map_or(Value::Null, |v| std::mem::replace(v, Value::Null));
            let value = match (&mut shape.relations[i], value) {
                (Some((foreign, nested)), Value::Record(inner)) => {
                    Value::Record(Box::new(self.record_from_child(foreign, *inner, nested)))
                }
                (_, value) => value,
            };
            if let Some(slot) = out.get_mut(&shape.exposed[i]) {
                *slot = value;
            }
        }
        out
    }

    fn shape(&self, collection: &str, record: &Record) -> Shape {
        let names = self.names.get(collection);
        let mut shape = Shape {
            child: Vec::with_capacity(record.len()),
            exposed: Vec::with_capacity(record.len()),
            relations: Vec::with_capacity(record.len()),
            template: Record::with_capacity(record.len()),
        };
        for key in record.keys() {
            let exposed = names
                .and_then(|n| n.from_child.get(key))
                .map_or(key, String::as_str);
            shape.child.push(key.to_owned());
            shape.exposed.push(exposed.to_owned());
            shape.relations.push(
                self.foreign(collection, exposed)
                    .map(|foreign| (foreign.to_owned(), None)),
            );
            shape.template.insert(exposed, Value::Null);
        }
        shape
    }
}

/// The field names of records of one collection, below and exposed, with a record of the
/// exposed names whose copies share them.
struct Shape {
    child: Vec<String>,
    exposed: Vec<String>,
    /// For each field that is a relation: its collection, and the shape of its records.
    relations: Vec<Option<(String, Option<Shape>)>>,
    template: Record,
}

struct Renamed {
    child: Arc<dyn Collection>,
    name: String,
    schema: CollectionSchema,
    renames: Arc<Renames>,
}

#[async_trait]
impl Decorator for Renamed {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        let filter = self.renames.filter_to_child(&self.name, filter)?;
        let child_projection = Projection::new(
            projection
                .iter()
                .map(|path| self.renames.to_child_path(&self.name, path)),
        );
        let records = self.child.list(caller, &filter, &child_projection).await?;
        // The records hold the projected paths only: when none was renamed, neither is a key.
        if child_projection == *projection {
            return Ok(records);
        }
        Ok(self.renames.records_from_child(&self.name, records))
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        let filter = self.renames.filter_to_child(&self.name, filter)?;
        let aggregation = Aggregation {
            operation: aggregation.operation,
            field: aggregation
                .field
                .as_deref()
                .map(|f| self.renames.to_child_path(&self.name, f)),
            groups: aggregation
                .groups
                .iter()
                .map(|g| Group {
                    field: self.renames.to_child_path(&self.name, &g.field),
                    operation: g.operation,
                })
                .collect(),
        };
        let rows = self
            .child
            .aggregate(caller, &filter, &aggregation, limit)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| AggregateResult {
                value: row.value,
                group: row
                    .group
                    .into_iter()
                    .map(|(path, value)| (self.renames.path_from_child(&self.name, &path), value))
                    .collect::<IndexMap<_, _>>(),
            })
            .collect())
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        let records = records
            .iter()
            .map(|r| self.renames.record_to_child(&self.name, r))
            .collect();
        let created = self.child.create(caller, records).await?;
        Ok(self.renames.records_from_child(&self.name, created))
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        let filter = self.renames.filter_to_child(&self.name, filter)?;
        let patch = self.renames.record_to_child(&self.name, patch);
        self.child.update(caller, &filter, &patch).await
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        let filter = self.renames.filter_to_child(&self.name, filter)?;
        self.child.delete(caller, &filter).await
    }

    async fn execute(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
    ) -> Result<ActionResult> {
        let filter = self.renames.filter_to_child(&self.name, filter)?;
        self.child.execute(caller, name, &filter, values).await
    }

    async fn get_form(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
        phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        let filter = self.renames.filter_to_child(&self.name, filter)?;
        self.child
            .get_form(caller, name, &filter, values, phase)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::super::{build_stack, build_stack_with};
    use super::*;
    use crate::customizer::test_support::{caller, sqlite};
    use crate::datasource::{AggregationOperation, Operator};

    async fn base() -> Arc<dyn DataSource> {
        sqlite(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, first_name TEXT);
                 CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, \
                   customer_id INTEGER REFERENCES customers(id));
                 INSERT INTO customers VALUES (1, 'Ada'), (2, 'Alan');
                 INSERT INTO orders VALUES (1, 10, 1), (2, 20, 1), (3, 30, 2), (4, 40, NULL);",
        )
        .await
    }

    fn rename(collection: &str, from: &str, to: &str) -> Customization {
        Customization::collection(
            "test",
            collection,
            Kind::RenameField {
                from: from.into(),
                to: to.into(),
            },
        )
    }

    fn relation(ds: &dyn DataSource, collection: &str) -> (String, RelationSchema) {
        ds.schema()
            .collection(collection)
            .unwrap()
            .relations()
            .next()
            .map(|(n, r)| (n.clone(), r.clone()))
            .unwrap()
    }

    #[tokio::test]
    async fn renamed_fields_are_read_filtered_sorted_and_aggregated_through_relations() {
        let base = base().await;
        let (to_customer, _) = relation(base.as_ref(), "orders");
        let stack = build_stack(
            base,
            vec![
                rename("customers", "first_name", "firstName"),
                rename("orders", "amount", "total"),
                rename("orders", &to_customer, "buyer"),
                rename("orders", "customer_id", "buyerId"),
            ],
        )
        .unwrap();
        let orders_schema = stack.schema().collection("orders").unwrap();
        assert_eq!(
            orders_schema.fields.keys().collect::<Vec<_>>(),
            ["id", "total", "buyerId", "buyer"]
        );
        // Relation keys are named as exposed, here and in the other collection.
        assert!(matches!(
            orders_schema.relation("buyer"),
            Some(RelationSchema::ManyToOne { foreign_key, .. }) if foreign_key == "buyerId"
        ));
        let customers_schema = stack.schema().collection("customers").unwrap();
        let (_, inverse) = customers_schema.relations().next().unwrap();
        assert!(
            matches!(inverse, RelationSchema::OneToMany { origin_key, .. } if origin_key == "buyerId"),
            "{inverse:?}"
        );

        let orders = stack.collection("orders").unwrap();
        let filter = Filter::new(Some(ConditionTree::leaf(
            "buyer:firstName",
            Operator::Equal,
            Value::String("Ada".into()),
        )))
        .with_sort(Sort::desc("total"));
        let rows = orders
            .list(
                &caller(),
                &filter,
                &Projection::new(["id", "total", "buyer:firstName"]),
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].get("total"), Some(&Value::Int(20)));
        assert_eq!(
            rows[1].get_path("buyer:firstName"),
            Some(&Value::String("Ada".into()))
        );
        assert!(rows[0].get("amount").is_none());

        let aggregation = Aggregation::new(AggregationOperation::Sum, Some("total"))
            .group_by("buyer:firstName", None);
        let groups = orders
            .aggregate(&caller(), &Filter::default(), &aggregation, None)
            .await
            .unwrap();
        // Groups keyed by the exposed path: Ada 10 + 20, Alan 30, no buyer 40.
        let mut sums: Vec<(Value, Option<f64>)> = groups
            .iter()
            .map(|g| {
                assert_eq!(g.group.keys().collect::<Vec<_>>(), ["buyer:firstName"]);
                (g.group["buyer:firstName"].clone(), g.value.as_f64())
            })
            .collect();
        sums.sort_by(|a, b| a.0.compare(&b.0));
        assert_eq!(
            sums,
            [
                (Value::Null, Some(40.0)),
                (Value::String("Ada".into()), Some(30.0)),
                (Value::String("Alan".into()), Some(30.0)),
            ]
        );

        // Records with and without a related record, renamed alike; a null relation stays null.
        let rows = orders
            .list(
                &caller(),
                &Filter::default().with_sort(Sort::asc("id")),
                &Projection::new(["id", "buyer:firstName"]),
            )
            .await
            .unwrap();
        let names: Vec<Option<&Value>> =
            rows.iter().map(|r| r.get_path("buyer:firstName")).collect();
        assert_eq!(
            names,
            [
                Some(&Value::String("Ada".into())),
                Some(&Value::String("Ada".into())),
                Some(&Value::String("Alan".into())),
                Some(&Value::Null),
            ]
        );
        assert_eq!(rows[3].get("buyer"), Some(&Value::Null));
    }

    #[tokio::test]
    async fn writes_use_the_exposed_names_both_ways() {
        let stack = build_stack(base().await, vec![rename("orders", "amount", "total")]).unwrap();
        let orders = stack.collection("orders").unwrap();
        let mut record = Record::new();
        record.insert("total", Value::Int(99));
        let created = orders.create(&caller(), vec![record]).await.unwrap();
        assert_eq!(created[0].get("total"), Some(&Value::Int(99)));
        assert!(created[0].get("amount").is_none());
        let id = created[0].get("id").cloned().unwrap();
        let mut patch = Record::new();
        patch.insert("total", Value::Int(100));
        let only = Filter::new(Some(ConditionTree::leaf("id", Operator::Equal, id)));
        orders.update(&caller(), &only, &patch).await.unwrap();
        let rows = orders
            .list(&caller(), &only, &Projection::new(["total"]))
            .await
            .unwrap();
        assert_eq!(rows[0].get("total"), Some(&Value::Int(100)));
    }

    #[tokio::test]
    async fn chained_renames_compose_and_renaming_back_cancels() {
        let stack = build_stack(
            base().await,
            vec![
                rename("orders", "amount", "a"),
                rename("orders", "a", "b"),
                rename("customers", "first_name", "x"),
                rename("customers", "x", "first_name"),
            ],
        )
        .unwrap();
        let orders = stack.schema().collection("orders").unwrap();
        assert!(orders.fields.contains_key("b"));
        assert!(!orders.fields.contains_key("a") && !orders.fields.contains_key("amount"));
        let customers = stack.schema().collection("customers").unwrap();
        assert!(customers.fields.contains_key("first_name"));
        let rows = stack
            .collection("orders")
            .unwrap()
            .list(&caller(), &Filter::default(), &Projection::new(["b"]))
            .await
            .unwrap();
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.get("b").is_some()));
    }

    #[tokio::test]
    async fn bad_renames_are_refused() {
        let err = build_stack(base().await, vec![rename("orders", "amount", "the total")])
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("must not contain space") && err.contains("'theTotal'"),
            "{err}"
        );
        let err = build_stack(base().await, vec![rename("orders", "nope", "x")])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("'orders.nope'"), "{err}");
        // Once renamed, the old name is gone.
        let err = build_stack(
            base().await,
            vec![
                rename("orders", "amount", "a"),
                rename("orders", "amount", "b"),
            ],
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("'orders.amount'"), "{err}");
        let err = build_stack(base().await, vec![rename("orders", "amount", "id")])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("already exists"), "{err}");
        let options = StackOptions {
            ignore_missing_schema_element_errors: true,
            ..StackOptions::default()
        };
        assert!(
            build_stack_with(base().await, vec![rename("orders", "nope", "x")], &options).is_ok()
        );
    }
}
