//! The stack over an in-memory SQLite database, with closure handlers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::closures;
use super::test_support::{caller, computed, sqlite, string};
use super::*;
use crate::datasource::action::{
    ActionOutcome, ActionResult, ActionScope, FieldType, FormElement, FormField, FormPhase,
    FormValues,
};
use crate::datasource::chart::{ChartRequest, ChartResult};
use crate::datasource::{
    Aggregation, Caller, DataSource, Error, Filter, Operator, Projection, Record, Sort, Value,
};

const SEED: &str = "
CREATE TABLE customers (id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, customer_id INTEGER REFERENCES customers(id));
INSERT INTO customers VALUES (1, 'Ada', 'Lovelace'), (2, 'Alan', 'Turing');
INSERT INTO orders VALUES (1, 10, 1), (2, 20, 1), (3, 30, 2), (4, 40, NULL), (5, 10, 1);
";

async fn base() -> Arc<dyn DataSource> {
    sqlite(SEED).await
}

/// The name of the orders → customers relation, as the SQL datasource names it.
fn customer_relation(ds: &dyn DataSource) -> String {
    ds.schema()
        .collection("orders")
        .unwrap()
        .relations()
        .find(|(_, r)| r.foreign_collection() == "customers")
        .map(|(n, _)| n.clone())
        .unwrap()
}

/// `fullName` on customers, counting its calls and the rows it got.
fn full_name(calls: Arc<Mutex<Vec<usize>>>) -> Customization {
    computed(
        "customers",
        "fullName",
        &["first_name", "last_name"],
        closures::compute(move |batch| {
            calls.lock().unwrap().push(batch.len);
            Ok((0..batch.len)
                .map(|i| {
                    let row = batch.row(i);
                    string(&format!(
                        "{} {}",
                        row.get("first_name").and_then(Value::as_str).unwrap_or(""),
                        row.get("last_name").and_then(Value::as_str).unwrap_or("")
                    ))
                })
                .collect())
        }),
    )
}

#[tokio::test]
async fn computed_fields_through_relations_and_on_computed_fields_are_batched_once_on_distinct_rows()
 {
    let base = base().await;
    let relation = customer_relation(base.as_ref());
    let full_calls = Arc::new(Mutex::new(Vec::new()));
    let label_calls = Arc::new(Mutex::new(Vec::new()));
    let label_calls2 = Arc::clone(&label_calls);
    let stack = build_stack(
        base,
        vec![
            full_name(Arc::clone(&full_calls)),
            // Depends on a computed field of another collection, through the relation.
            computed(
                "orders",
                "label",
                &[&format!("{relation}:fullName"), "amount"],
                closures::compute(move |batch| {
                    label_calls2.lock().unwrap().push(batch.len);
                    let names = batch.column(&batch.columns[0].path).unwrap();
                    let amounts = batch.column("amount").unwrap();
                    Ok(names
                        .iter()
                        .zip(amounts)
                        .map(|(n, a)| string(&format!("{n} {a}")))
                        .collect())
                }),
            ),
        ],
    )
    .unwrap();
    let orders = stack.collection("orders").unwrap();
    let schema = orders.schema().column("label").unwrap();
    assert!(schema.is_read_only && !schema.is_sortable && schema.filter_operators.is_empty());
    let records = orders
        .list(
            &caller(),
            &Filter::default().with_sort(Sort::asc("id")),
            &Projection::new(["id", "label"]),
        )
        .await
        .unwrap();
    let labels: Vec<&Value> = records.iter().map(|r| r.get("label").unwrap()).collect();
    assert_eq!(
        labels,
        [
            &string("Ada Lovelace 10"),
            &string("Ada Lovelace 20"),
            &string("Alan Turing 30"),
            // A null relation gives a null dependency, not a skipped row.
            &string("null 40"),
            &string("Ada Lovelace 10"),
        ]
    );
    // Only what was asked: the dependencies are not in the records.
    assert_eq!(records[0].keys().collect::<Vec<_>>(), ["id", "label"]);
    // One call per field; fullName on the 2 distinct (first, last) pairs of non-null customers,
    // label on the 4 distinct (fullName, amount) rows out of 5.
    assert_eq!(*full_calls.lock().unwrap(), [2]);
    assert_eq!(*label_calls.lock().unwrap(), [4]);
}

#[tokio::test]
async fn computed_field_under_a_null_relation_stays_null_and_aggregates_in_memory() {
    let base = base().await;
    let relation = customer_relation(base.as_ref());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let stack = build_stack(base, vec![full_name(Arc::clone(&calls))]).unwrap();
    let orders = stack.collection("orders").unwrap();
    let path = format!("{relation}:fullName");
    let records = orders
        .list(
            &caller(),
            &Filter::default().with_sort(Sort::asc("id")),
            &Projection::new(["id".to_owned(), path.clone()]),
        )
        .await
        .unwrap();
    assert_eq!(records[0].get_path(&path), Some(&string("Ada Lovelace")));
    assert_eq!(records[3].get(&relation), Some(&Value::Null));
    let customers = stack.collection("customers").unwrap();
    let groups = customers
        .aggregate(
            &caller(),
            &Filter::default(),
            &Aggregation::count().group_by("fullName", None),
            None,
        )
        .await
        .unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].value, Value::Int(1));
}

#[tokio::test]
async fn computed_fields_refuse_missing_dependencies_and_cycles() {
    let base = base().await;
    let noop = || closures::compute(|b| Ok(vec![Value::Null; b.len]));
    let missing = build_stack(
        Arc::clone(&base),
        vec![computed("customers", "x", &["nope"], noop())],
    );
    assert!(matches!(missing, Err(Error::Validation(m)) if m.contains("nope")));
    let cycle = build_stack(
        base,
        vec![
            computed("customers", "a", &["b"], noop()),
            computed("customers", "b", &["a"], noop()),
        ],
    );
    assert!(matches!(cycle, Err(Error::Validation(m)) if m.contains("depends on itself")));
}

#[tokio::test]
async fn computed_field_returning_the_wrong_count_or_type_fails_the_request() {
    let base = base().await;
    let stack = build_stack(
        base,
        vec![
            computed(
                "customers",
                "short",
                &["first_name"],
                closures::compute(|_| Ok(vec![])),
            ),
            computed(
                "customers",
                "typed",
                &["first_name"],
                closures::compute(|b| Ok(vec![Value::Int(1); b.len])),
            ),
        ],
    )
    .unwrap();
    let customers = stack.collection("customers").unwrap();
    for field in ["short", "typed"] {
        let result = customers
            .list(&caller(), &Filter::default(), &Projection::new([field]))
            .await;
        assert!(matches!(result, Err(Error::Internal(_))), "{field}");
    }
}

fn hook(
    operation: HookOperation,
    position: HookPosition,
    f: impl Fn(&Caller, HookPosition, &mut HookData) -> crate::datasource::Result<()>
    + Send
    + Sync
    + 'static,
) -> Customization {
    Customization::collection(
        "test",
        "customers",
        Kind::Hook {
            position,
            operation,
            handler: closures::hook(f),
        },
    )
}

#[tokio::test]
async fn hooks_run_before_and_after_each_operation_and_before_errors_stop_it() {
    let base = base().await;
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut customizations = Vec::new();
    for operation in [
        HookOperation::List,
        HookOperation::Create,
        HookOperation::Update,
        HookOperation::Delete,
        HookOperation::Aggregate,
    ] {
        for position in [HookPosition::Before, HookPosition::After] {
            let seen = Arc::clone(&seen);
            customizations.push(hook(operation, position, move |_, p, data| {
                seen.lock()
                    .unwrap()
                    .push(format!("{p:?} {:?}", data.operation()));
                match data {
                    // Before Create rewrites the records, After Create sees the result.
                    HookData::Create { records, created } => match created {
                        None => records[0].insert("last_name", string("Hooked")),
                        Some(created) => assert_eq!(created.len(), 1),
                    },
                    // Before Update rewrites the patch.
                    HookData::Update { patch, .. } if p == HookPosition::Before => {
                        patch.insert("last_name", string("Patched"));
                    }
                    HookData::List {
                        records: Some(records),
                        ..
                    } => records.truncate(1),
                    // A Before Delete refuses to delete Ada.
                    HookData::Delete { filter }
                        if p == HookPosition::Before && format!("{filter:?}").contains("Ada") =>
                    {
                        return Err(Error::Forbidden("Ada stays".into()));
                    }
                    _ => {}
                }
                Ok(())
            }));
        }
    }
    let stack = build_stack(base, customizations).unwrap();
    let customers = stack.collection("customers").unwrap();
    let c = caller();
    let listed = customers
        .list(&c, &Filter::default(), &Projection::new(["id"]))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "the After List hook truncated the records");
    let mut record = Record::new();
    record.insert("id", Value::Int(3));
    record.insert("first_name", string("Grace"));
    let created = customers.create(&c, vec![record]).await.unwrap();
    assert_eq!(created[0].get("last_name"), Some(&string("Hooked")));
    let grace = Filter::new(Some(ConditionTree::leaf(
        "id",
        Operator::Equal,
        Value::Int(3),
    )));
    let mut patch = Record::new();
    patch.insert("first_name", string("G."));
    customers.update(&c, &grace, &patch).await.unwrap();
    let ada = Filter::new(Some(ConditionTree::leaf(
        "first_name",
        Operator::Equal,
        string("Ada"),
    )));
    let refused = customers.delete(&c, &ada).await;
    assert!(matches!(refused, Err(Error::Forbidden(m)) if m == "Ada stays"));
    customers.delete(&c, &grace).await.unwrap();
    customers
        .aggregate(&c, &Filter::default(), &Aggregation::count(), None)
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            "Before List",
            "After List",
            "Before Create",
            "After Create",
            "Before Update",
            "After Update",
            "Before Delete",
            // Ada's delete stopped here: no After Delete, and Ada is still there.
            "Before Delete",
            "After Delete",
            "Before Aggregate",
            "After Aggregate",
        ]
    );
    // The patch of the Before Update hook was applied before Grace was deleted: check Ada stayed.
    let count = stack
        .collection("customers")
        .unwrap()
        .aggregate(&c, &ada, &Aggregation::count(), None)
        .await
        .unwrap();
    assert_eq!(count[0].value, Value::Int(1));
}

#[tokio::test]
async fn static_and_dynamic_segments_filter_and_are_listed_in_the_schema() {
    let base = base().await;
    let stack = build_stack(
        base,
        vec![
            Customization::collection(
                "test",
                "orders",
                Kind::Segment {
                    name: "Big".into(),
                    source: SegmentSource::Static(ConditionTree::leaf(
                        "amount",
                        Operator::GreaterThan,
                        Value::Int(15),
                    )),
                },
            ),
            Customization::collection(
                "test",
                "orders",
                Kind::Segment {
                    name: "Mine".into(),
                    source: SegmentSource::Dynamic(closures::segment(|caller| {
                        // The system caller has id 0: orders of customer 1 + id.
                        Ok(Some(ConditionTree::leaf(
                            "customer_id",
                            Operator::Equal,
                            Value::Int(caller.id + 1),
                        )))
                    })),
                },
            ),
        ],
    )
    .unwrap();
    let orders = stack.collection("orders").unwrap();
    assert_eq!(orders.schema().segments, ["Big", "Mine"]);
    let ids = |segment: &str| {
        let orders = Arc::clone(&orders);
        let filter = Filter {
            segment: Some(segment.to_owned()),
            sort: Sort::asc("id"),
            ..Filter::default()
        };
        async move {
            orders
                .list(&caller(), &filter, &Projection::new(["id"]))
                .await
                .unwrap()
                .iter()
                .map(|r| r.get("id").cloned().unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ids("Big").await,
        [Value::Int(2), Value::Int(3), Value::Int(4)]
    );
    assert_eq!(
        ids("Mine").await,
        [Value::Int(1), Value::Int(2), Value::Int(5)]
    );
}

fn search(mode: SearchMode) -> Customization {
    Customization::collection("test", "customers", Kind::Search(mode))
}

async fn search_ids(
    stack: &Arc<dyn DataSource>,
    text: &str,
    extended: bool,
) -> crate::datasource::Result<Vec<Value>> {
    let filter = Filter {
        search: Some(text.to_owned()),
        search_extended: extended,
        sort: Sort::asc("id"),
        ..Filter::default()
    };
    Ok(stack
        .collection("customers")?
        .list(&caller(), &filter, &Projection::new(["id"]))
        .await?
        .iter()
        .map(|r| r.get("id").cloned().unwrap())
        .collect())
}

#[tokio::test]
async fn replaced_search_uses_the_field_selection_or_the_handler() {
    let only_last = build_stack(
        base().await,
        vec![search(SearchMode::Fields(FieldSelection {
            only: Some(vec!["last_name".into()]),
            ..FieldSelection::default()
        }))],
    )
    .unwrap();
    // "Ada" is a first name: not searched; "Turing" is a last name.
    assert!(
        search_ids(&only_last, "Ada", false)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        search_ids(&only_last, "turing", false).await.unwrap(),
        [Value::Int(2)]
    );
    let excluded = build_stack(
        base().await,
        vec![search(SearchMode::Fields(FieldSelection {
            exclude: vec!["first_name".into()],
            ..FieldSelection::default()
        }))],
    )
    .unwrap();
    assert!(
        search_ids(&excluded, "Alan", false)
            .await
            .unwrap()
            .is_empty()
    );
    let handled = build_stack(
        base().await,
        vec![search(SearchMode::Handler(closures::search(|text, _| {
            Ok(Some(ConditionTree::leaf(
                "first_name",
                Operator::StartsWith,
                string(text),
            )))
        })))],
    )
    .unwrap();
    assert_eq!(
        search_ids(&handled, "Al", false).await.unwrap(),
        [Value::Int(2)]
    );
    let extended = search_ids(&handled, "Al", true).await;
    assert!(matches!(extended, Err(Error::Forbidden(_))));
}

#[tokio::test]
async fn disabled_search_marks_the_collection_unsearchable() {
    let stack = build_stack(base().await, vec![search(SearchMode::Disabled)]).unwrap();
    let customers = stack.collection("customers").unwrap();
    assert!(!customers.schema().searchable);
    assert!(search_ids(&stack, "Ada", false).await.is_err());
}

#[tokio::test]
async fn actions_are_declared_executed_and_their_forms_computed() {
    let static_form = vec![FormElement::Field(FormField {
        value: Some(json!("default")),
        ..FormField::new("Reason", FieldType::String)
    })];
    let executed = Arc::new(AtomicUsize::new(0));
    let executed2 = Arc::clone(&executed);
    let stack = build_stack(
        base().await,
        vec![
            Customization::collection(
                "test",
                "customers",
                Kind::Action {
                    name: "Rename".into(),
                    scope: ActionScope::Bulk,
                    generate_file: false,
                    description: None,
                    submit_button_label: None,
                    static_form: Some(static_form),
                    handler: closures::action(
                        |_, _| panic!("a static form is not computed by the handler"),
                        move |caller, ctx| {
                            let executed = Arc::clone(&executed2);
                            async move {
                                let ids = ctx.get_record_ids(&caller).await?;
                                executed.fetch_add(ids.len(), Ordering::SeqCst);
                                Ok(ActionResult::success(format!(
                                    "{} renamed to {}",
                                    ids.join(","),
                                    ctx.form_values["Reason"]
                                )))
                            }
                        },
                    ),
                },
            ),
            Customization::collection(
                "test",
                "customers",
                Kind::Action {
                    name: "Dynamic".into(),
                    scope: ActionScope::Global,
                    generate_file: false,
                    description: None,
                    submit_button_label: None,
                    static_form: None,
                    handler: closures::action(
                        |ctx, phase| {
                            let mut a = FormField::new("A", FieldType::String);
                            a.watch_changes = true;
                            let mut b = FormField::new("B", FieldType::String);
                            b.value = Some(json!(format!(
                                "{:?} changed={}",
                                phase,
                                ctx.has_field_changed("A")
                            )));
                            Ok(vec![FormElement::Field(a), FormElement::Field(b)])
                        },
                        |_, _| async {
                            Ok(ActionResult::from(ActionOutcome::Redirect {
                                path: "/x".into(),
                            }))
                        },
                    ),
                },
            ),
        ],
    )
    .unwrap();
    let customers = stack.collection("customers").unwrap();
    assert_eq!(
        customers.schema().actions.keys().collect::<Vec<_>>(),
        ["Rename", "Dynamic"]
    );
    let c = caller();
    let mut values = FormValues::new();
    let form = customers
        .get_form(&c, "Rename", &Filter::default(), &values, &FormPhase::Load)
        .await
        .unwrap();
    assert_eq!(form[0].fields()[0].value, Some(json!("default")));
    values.insert("Reason".into(), json!("typo"));
    let result = customers
        .execute(&c, "Rename", &Filter::default(), &values)
        .await
        .unwrap();
    assert_eq!(result, ActionResult::success("1,2 renamed to \"typo\""));
    assert_eq!(executed.load(Ordering::SeqCst), 2);
    let change = FormPhase::Change {
        changed_field: "A".into(),
    };
    let form = customers
        .get_form(&c, "Dynamic", &Filter::default(), &values, &change)
        .await
        .unwrap();
    assert_eq!(form.len(), 2);
    assert!(form[0].fields()[0].watch_changes);
    assert_eq!(
        form[1].fields()[0].value,
        Some(json!(format!("{change:?} changed=true")))
    );
    let search = FormPhase::Search {
        field: "B".into(),
        search_value: None,
    };
    let form = customers
        .get_form(&c, "Dynamic", &Filter::default(), &values, &search)
        .await
        .unwrap();
    assert_eq!(
        form.len(),
        1,
        "a search hook answers the searched field only"
    );
    let unknown = customers
        .execute(&c, "Nope", &Filter::default(), &values)
        .await;
    assert!(matches!(unknown, Err(Error::Validation(_))));
}

#[tokio::test]
async fn charts_of_collections_and_of_the_datasource_render_through_every_layer() {
    let stack = build_stack(
        base().await,
        vec![
            Customization::collection(
                "test",
                "customers",
                Kind::Chart {
                    name: "score".into(),
                    handler: closures::chart(|_, request| {
                        Ok(ChartResult::Value {
                            current: request.record_id.as_ref().map_or(0, |id| id.len()) as f64,
                            previous: None,
                        })
                    }),
                },
            ),
            Customization::datasource(
                "test",
                Kind::Chart {
                    name: "total".into(),
                    handler: closures::chart(|_, _| Ok(ChartResult::Percentage(42.0))),
                },
            ),
            // A hook layer above the chart layer must forward charts.
            hook(HookOperation::List, HookPosition::Before, |_, _, _| Ok(())),
        ],
    )
    .unwrap();
    assert_eq!(stack.schema().charts, ["total"]);
    let customers = stack.collection("customers").unwrap();
    assert_eq!(customers.schema().charts, ["score"]);
    let request = ChartRequest {
        record_id: Some(vec![Value::Int(1)]),
        ..ChartRequest::default()
    };
    assert_eq!(
        customers
            .render_chart(&caller(), "score", &request)
            .await
            .unwrap(),
        ChartResult::Value {
            current: 1.0,
            previous: None
        }
    );
    assert_eq!(
        stack
            .render_chart(&caller(), "total", &ChartRequest::default())
            .await
            .unwrap(),
        ChartResult::Percentage(42.0)
    );
    let duplicate = build_stack(
        base().await,
        vec![
            Customization::datasource(
                "a",
                Kind::Chart {
                    name: "total".into(),
                    handler: closures::chart(|_, _| Ok(ChartResult::Percentage(1.0))),
                },
            ),
            Customization::datasource(
                "b",
                Kind::Chart {
                    name: "total".into(),
                    handler: closures::chart(|_, _| Ok(ChartResult::Percentage(1.0))),
                },
            ),
        ],
    );
    assert!(matches!(duplicate, Err(Error::Validation(m)) if m.contains("twice")));
}

#[tokio::test]
async fn a_customization_of_a_missing_collection_names_its_plugin() {
    let result = build_stack(
        base().await,
        vec![Customization::collection(
            "my-plugin",
            "nope",
            Kind::Search(SearchMode::Disabled),
        )],
    );
    assert!(
        matches!(result, Err(Error::Validation(m)) if m.contains("my-plugin") && m.contains("nope"))
    );
}

#[tokio::test]
async fn a_single_action_runs_on_exactly_one_record_and_reads_it_with_get_field() {
    let ran = Arc::new(AtomicUsize::new(0));
    let ran2 = Arc::clone(&ran);
    let relation = customer_relation(base().await.as_ref());
    let stack = build_stack(
        base().await,
        vec![Customization::collection(
            "test",
            "orders",
            Kind::Action {
                name: "Who".into(),
                scope: ActionScope::Single,
                generate_file: false,
                description: None,
                submit_button_label: None,
                static_form: Some(Vec::new()),
                handler: closures::action(
                    |_, _| Ok(Vec::new()),
                    move |caller, ctx| {
                        let ran = Arc::clone(&ran2);
                        let path = format!("{relation}:first_name");
                        async move {
                            ran.fetch_add(1, Ordering::SeqCst);
                            let name = ctx.get_field(&caller, &path).await?;
                            let id = ctx.get_composite_record_id(&caller).await?;
                            Ok(ActionResult::success(format!("{id:?} {name:?}")))
                        }
                    },
                ),
            },
        )],
    )
    .unwrap();
    let orders = stack.collection("orders").unwrap();
    let c = caller();
    let values = FormValues::new();
    let id = |n: i64| {
        Filter::new(Some(ConditionTree::leaf(
            "id",
            Operator::Equal,
            Value::Int(n),
        )))
    };
    let result = orders.execute(&c, "Who", &id(3), &values).await.unwrap();
    assert_eq!(
        result,
        ActionResult::success(format!("{:?} {:?}", [Value::Int(3)], string("Alan")))
    );
    for filter in [Filter::default(), id(42)] {
        let refused = orders.execute(&c, "Who", &filter, &values).await;
        assert!(matches!(refused, Err(Error::Validation(_))), "{refused:?}");
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "refused selections do not run"
    );
}

/// The column customizations (sorting, writing, filtering) name the plugin, the target and what
/// was attempted when the target is a relation or a missing field; a missing one may be skipped.
#[tokio::test]
async fn column_customizations_name_their_missing_or_relation_target() {
    let base = base().await;
    let relation = customer_relation(base.as_ref());
    let error = |c: Customization| match build_stack(Arc::clone(&base), vec![c]) {
        Err(Error::Validation(m)) => m,
        Err(other) => panic!("refused as invalid, not {other:?}"),
        Ok(_) => panic!("refused"),
    };
    let sorting = Customization::collection(
        "p",
        "orders",
        Kind::Sorting {
            field: relation.clone(),
            mode: SortingMode::Emulate,
        },
    );
    assert_eq!(
        error(sorting),
        format!(
            "p: cannot emulate or replace the sorting of 'orders.{relation}': it is a relation, \
             not a column"
        )
    );
    let writing = |collection: &str, field: &str| {
        Customization::collection(
            "p",
            collection,
            Kind::Writing {
                field: field.into(),
                handler: closures::write(|_, _| Ok(None)),
            },
        )
    };
    assert_eq!(
        error(writing("customers", "nope")),
        "p: replaceFieldWriting on 'customers.nope' targets a field that does not exist"
    );
    let filtering = Customization::collection(
        "p",
        "orders",
        Kind::Filtering {
            field: relation.clone(),
            mode: FilteringMode::Emulate(Operator::Equal),
        },
    );
    assert_eq!(
        error(filtering),
        format!(
            "p: cannot emulate or replace operators of 'orders.{relation}': it is a relation, \
             not a column"
        )
    );
    let lenient = StackOptions {
        ignore_missing_schema_element_errors: true,
        ..StackOptions::default()
    };
    assert!(
        build_stack_with(
            Arc::clone(&base),
            vec![writing("customers", "nope")],
            &lenient
        )
        .is_ok()
    );
}

/// The schema-level column customizations keep their own wording for a relation or a missing
/// field: `disableFieldSorting`, `addFieldValidation` and the nullable override.
#[tokio::test]
async fn schema_column_customizations_name_their_missing_or_relation_target() {
    let base = base().await;
    let relation = customer_relation(base.as_ref());
    let error = |collection: &str, kind: Kind| match build_stack(
        Arc::clone(&base),
        vec![Customization::collection("p", collection, kind)],
    ) {
        Err(Error::Validation(m)) => m,
        Err(other) => panic!("refused as invalid, not {other:?}"),
        Ok(_) => panic!("refused"),
    };
    let disable = |field: &str| Kind::Sorting {
        field: field.into(),
        mode: SortingMode::Disable,
    };
    assert_eq!(
        error("customers", disable("nope")),
        "p: cannot disable sorting on 'customers.nope', which does not exist"
    );
    assert_eq!(
        error("orders", disable(&relation)),
        format!("p: cannot disable sorting on 'orders.{relation}', which is a relation")
    );
    assert_eq!(
        error(
            "orders",
            Kind::Nullable {
                field: relation.clone()
            }
        ),
        format!("p: cannot make the relation 'orders.{relation}' nullable")
    );
    assert_eq!(
        error(
            "customers",
            Kind::Nullable {
                field: "nope".into()
            }
        ),
        "p: cannot make 'customers.nope' nullable, it does not exist"
    );
    assert_eq!(
        error(
            "customers",
            Kind::Validation {
                field: "nope".into(),
                operator: Operator::Present,
                value: None,
            }
        ),
        "p: cannot add a validator on 'customers.nope', which does not exist"
    );
}

fn step(origin: &str, name: &str, option: &'static str) -> Customization {
    Customization::datasource(
        origin,
        Kind::WorkflowStep {
            name: name.to_owned(),
            handler: closures::workflow_step(move |_, _| {
                Ok(WorkflowStepOutput {
                    option: Some(option.to_owned()),
                    values: serde_json::Map::new(),
                })
            }),
        },
    )
}

#[tokio::test]
async fn workflow_steps_are_collected_by_plugin_and_name_and_the_stack_ignores_them() {
    let ds = base().await;
    let customizations = vec![
        step("shop", "review", "a"),
        step("shop", "score", "b"),
        step("billing", "review", "c"),
        full_name(Arc::default()),
    ];
    let steps = workflow_steps(&customizations).unwrap();
    let keys: Vec<(&str, &str)> = steps
        .keys()
        .map(|(p, h)| (p.as_str(), h.as_str()))
        .collect();
    assert_eq!(
        keys,
        [("billing", "review"), ("shop", "review"), ("shop", "score")]
    );
    let input = WorkflowStepInput {
        collection: "orders".into(),
        record_id: "1".into(),
        context: json!({}),
        settings: json!(null),
    };
    let ctx = Context {
        collection: Some("orders".into()),
        datasource: Arc::clone(&ds),
    };
    let out = steps[&("billing".to_owned(), "review".to_owned())]
        .run(&caller(), &ctx, &input)
        .await
        .unwrap();
    assert_eq!(out.option.as_deref(), Some("c"));
    // The stack builds over the same list: steps add no layer and nothing to the schema.
    let stack = build_stack(Arc::clone(&ds), customizations).unwrap();
    assert!(
        stack
            .schema()
            .collection("customers")
            .unwrap()
            .column("fullName")
            .is_some()
    );
}

#[test]
fn a_workflow_step_declared_twice_by_one_plugin_is_refused_naming_both() {
    let twice = [step("shop", "review", "a"), step("shop", "review", "b")];
    let Err(message) = workflow_steps(&twice) else {
        panic!("a duplicate step was accepted")
    };
    assert!(
        message.contains("plugin `shop` declares the workflow step `review` more than once"),
        "{message}"
    );
}
