//! Emulation and writes through the `/forest` routes, with closure handlers on the shop fixture
//! of `list`: filtering and sorting a computed field in memory (also through a relation, with
//! pages and counts), the emulation row limit's 400, a replaced operator and a replaced sort,
//! replaceFieldWriting (a patch writing other fields, a nested write through a relation that
//! updates or creates the related record), and overrides of create, update and delete.

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use canopy::customizer::{
    Customization, FilteringMode, Kind, OverrideOperation, SortingMode, StackOptions,
    build_stack_with, closures,
};
use canopy::datasource::{ConditionTree, Filter, Operator, Projection, Record, SortClause, Value};
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{filters, get_ok, ids, on, serve, string_field, text, with_body};
use crate::http::{delete, get, send};
use crate::list::shop;

/// A string computed field from one dependency.
fn computed(collection: &str, name: &str, dep: &str, f: fn(&str) -> String) -> Customization {
    string_field(
        "test-plugin",
        collection,
        name,
        &[dep],
        closures::compute(move |batch| {
            Ok(batch.columns[0]
                .values
                .iter()
                .map(|v| match v {
                    Value::Null => Value::Null,
                    v => Value::String(f(&text(v))),
                })
                .collect())
        }),
    )
}

fn record(pairs: &[(&str, Value)]) -> Record {
    pairs.iter().map(|(k, v)| (*k, v.clone())).collect()
}

/// customers:
/// - `shout` = upper-cased name: every operator emulated, sorting emulated; writing it writes
///   `name` (lower-cased) and `vip`;
/// - `countryName` = `country:name`: Equal replaced by `country:name Equal`, sorting replaced by
///   `country:name, name`; writing it writes the related country (nested write).
fn customizations() -> Vec<Customization> {
    vec![
        computed("customers", "shout", "name", str::to_uppercase),
        on(
            "customers",
            Kind::Filtering {
                field: "shout".into(),
                mode: FilteringMode::EmulateAll,
            },
        ),
        on(
            "customers",
            Kind::Sorting {
                field: "shout".into(),
                mode: SortingMode::Emulate,
            },
        ),
        on(
            "customers",
            Kind::Writing {
                field: "shout".into(),
                handler: closures::write(|value, _| {
                    Ok(Some(record(&[
                        ("name", Value::String(text(value).to_lowercase())),
                        ("vip", Value::Bool(true)),
                    ])))
                }),
            },
        ),
        computed("customers", "countryName", "country:name", str::to_owned),
        on(
            "customers",
            Kind::Filtering {
                field: "countryName".into(),
                mode: FilteringMode::Replace(
                    Operator::Equal,
                    closures::operator(|value| {
                        Ok(ConditionTree::leaf(
                            "country:name",
                            Operator::Equal,
                            value.clone(),
                        ))
                    }),
                ),
            },
        ),
        on(
            "customers",
            Kind::Sorting {
                field: "countryName".into(),
                mode: SortingMode::Replace(vec![
                    SortClause {
                        field: "country:name".into(),
                        ascending: true,
                    },
                    SortClause {
                        field: "name".into(),
                        ascending: true,
                    },
                ]),
            },
        ),
        on(
            "customers",
            Kind::Writing {
                field: "countryName".into(),
                handler: closures::write(|value, _| {
                    Ok(Some(record(&[(
                        "country",
                        Value::Record(Box::new(record(&[("name", value.clone())]))),
                    )])))
                }),
            },
        ),
    ]
}

/// The router over the customized shop.
async fn app_with(
    backend: Backend,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> (canopy_e2e::TestDb, Router) {
    let (db, datasource) = shop(backend).await;
    let stack = build_stack_with(Arc::new(datasource), customizations, options).unwrap();
    (db, serve(stack))
}

async fn emulated_filter_and_sort_on_a_computed_field(backend: Backend) {
    let (_db, app) = app_with(backend, customizations(), &StackOptions::default()).await;
    // ANN, BOB, CARL, DORA.
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,shout&sort=-shout",
    )
    .await;
    assert_eq!(ids(&body), ["4", "3", "2", "1"]);
    let shouts: Vec<&Json> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["attributes"]["shout"])
        .collect();
    assert_eq!(
        shouts,
        [&json!("DORA"), &json!("CARL"), &json!("BOB"), &json!("ANN")]
    );
    // Paginated in memory.
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,shout&sort=shout&page[number]=2&page[size]=3",
    )
    .await;
    assert_eq!(ids(&body), ["4"]);

    // Filtered in memory, then sorted in memory.
    let contains_a = filters(&json!({"field": "shout", "operator": "contains", "value": "A"}));
    let body = get_ok(
        &app,
        &format!(
            "/forest/customers?timezone=UTC&fields[customers]=id&filters={contains_a}&sort=-shout"
        ),
    )
    .await;
    assert_eq!(ids(&body), ["4", "3", "1"]);
    let (status, _, body) = send(
        &app,
        get(&format!(
            "/forest/customers/count?timezone=UTC&filters={contains_a}"
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"count": 3}));
    // Combined with a native condition.
    let tree = filters(&json!({"aggregator": "and", "conditions": [
        {"field": "shout", "operator": "starts_with", "value": "B"},
        {"field": "vip", "operator": "equal", "value": false},
    ]}));
    let body = get_ok(
        &app,
        &format!("/forest/customers?timezone=UTC&fields[customers]=id&filters={tree}"),
    )
    .await;
    assert_eq!(ids(&body), ["2"]);
    // Through a relation: the customers' rule, nested under orders.customer.
    let tree = filters(&json!({"field": "customer:shout", "operator": "equal", "value": "ANN"}));
    let body = get_ok(
        &app,
        &format!("/forest/orders?timezone=UTC&fields[orders]=id&filters={tree}&sort=id"),
    )
    .await;
    assert_eq!(ids(&body), ["1", "2"]);
    // An operator the column type does not allow is still refused.
    let tree = filters(&json!({"field": "shout", "operator": "today"}));
    let (status, _, body) = send(
        &app,
        get(&format!("/forest/customers?timezone=UTC&filters={tree}")),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

async fn the_row_limit_stops_emulation_with_a_clear_error(backend: Backend) {
    let options = StackOptions {
        emulation_row_limit: 3,
        ..StackOptions::default()
    };
    let (_db, app) = app_with(backend, customizations(), &options).await;
    // Four customers: one too many to sort or filter in memory.
    let (status, _, body) = send(&app, get("/forest/customers?timezone=UTC&sort=shout")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errors"][0]["name"], "ValidationError", "{body}");
    let detail = body["errors"][0]["detail"].as_str().unwrap();
    for part in ["customers.shout", "3 records", "emulationRowLimit"] {
        assert!(detail.contains(part), "{detail}");
    }
    let tree = filters(&json!({"field": "shout", "operator": "equal", "value": "ANN"}));
    let (status, _, body) = send(
        &app,
        get(&format!("/forest/customers?timezone=UTC&filters={tree}")),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("emulationRowLimit"),
        "{body}"
    );
    // A sort whose filter keeps the records under the limit is answered.
    let tree = filters(&json!({"field": "id", "operator": "greater_than", "value": 1}));
    let body = get_ok(
        &app,
        &format!("/forest/customers?timezone=UTC&fields[customers]=id&filters={tree}&sort=-shout"),
    )
    .await;
    assert_eq!(ids(&body), ["4", "3", "2"]);
}

async fn replaced_operator_and_sort(backend: Backend) {
    let (_db, app) = app_with(backend, customizations(), &StackOptions::default()).await;
    let tree = filters(&json!({"field": "countryName", "operator": "equal", "value": "France"}));
    let body = get_ok(
        &app,
        &format!(
            "/forest/customers?timezone=UTC&fields[customers]=id,countryName&filters={tree}&sort=id"
        ),
    )
    .await;
    assert_eq!(ids(&body), ["1", "4"]);
    // Only the replaced operator is advertised: another one is refused.
    let tree = filters(&json!({"field": "countryName", "operator": "contains", "value": "F"}));
    let (status, _, body) = send(
        &app,
        get(&format!("/forest/customers?timezone=UTC&filters={tree}")),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // Sorting by countryName sorts by country name, then name (Carl, without email nor country,
    // is left out: where NULLs go differs between databases).
    let present = filters(&json!({"field": "email", "operator": "present"}));
    let body = get_ok(
        &app,
        &format!(
            "/forest/customers?timezone=UTC&fields[customers]=id&filters={present}&sort=countryName"
        ),
    )
    .await;
    assert_eq!(ids(&body), ["1", "4", "2"]);
    // Descending inverts every replacing clause.
    let body = get_ok(
        &app,
        &format!("/forest/customers?timezone=UTC&fields[customers]=id&filters={present}&sort=-countryName"),
    )
    .await;
    assert_eq!(ids(&body), ["2", "4", "1"]);
}

async fn replaced_writing(backend: Backend) {
    let (_db, app) = app_with(backend, customizations(), &StackOptions::default()).await;
    // `shout` is writable; its patch writes `name` and `vip` instead.
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"shout": "EVE", "email": "eve@x.io"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let attributes = &body["data"]["attributes"];
    assert_eq!(attributes["name"], "eve", "{body}");
    assert_eq!(attributes["vip"], true, "{body}");
    assert_eq!(attributes["email"], "eve@x.io", "{body}");

    // A nested write: Bob's country is renamed.
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/customers/2?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"countryName": "Nippon"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body = get_ok(&app, "/forest/countries/2?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["name"], "Nippon", "{body}");
    // Carl has no country: one is created and linked.
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/customers/3?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"countryName": "Peru"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body = get_ok(
        &app,
        "/forest/customers/3?timezone=UTC&fields[customers]=id,countryName",
    )
    .await;
    assert_eq!(body["data"]["attributes"]["countryName"], "Peru", "{body}");
    // On create, the related record is created first and linked.
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"name": "Fay", "countryName": "Chile"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    let body = get_ok(
        &app,
        &format!("/forest/customers/{id}?timezone=UTC&fields[customers]=id,name,countryName"),
    )
    .await;
    assert_eq!(body["data"]["attributes"]["countryName"], "Chile", "{body}");
    let (status, _, body) = send(&app, get("/forest/countries/count?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"count": 4}));
}

/// orders: create, update and delete overridden: creates add a note, updates add a note, deletes
/// cancel instead. countries: a create override that forgets the key.
fn overrides() -> Vec<Customization> {
    let handler = closures::overrides(|caller, ctx, call| async move {
        use closures::Overridden::{Create, Delete, Update};
        let orders = ctx.collection()?;
        match call {
            Create(records) => {
                let records = records
                    .into_iter()
                    .map(|mut r| {
                        r.insert("note", Value::String("via override".into()));
                        r
                    })
                    .collect();
                orders.create(&caller, records).await
            }
            Update(filter, mut patch) => {
                patch.insert("note", Value::String("updated by override".into()));
                orders.update(&caller, &filter, &patch).await?;
                Ok(Vec::new())
            }
            Delete(filter) => {
                let patch = record(&[("status", Value::String("cancelled".into()))]);
                orders.update(&caller, &filter, &patch).await?;
                Ok(Vec::new())
            }
        }
    });
    let mut out: Vec<Customization> = [
        OverrideOperation::Create,
        OverrideOperation::Update,
        OverrideOperation::Delete,
    ]
    .into_iter()
    .map(|operation| {
        on(
            "orders",
            Kind::Override {
                operation,
                handler: Arc::clone(&handler),
            },
        )
    })
    .collect();
    out.push(on(
        "countries",
        Kind::Override {
            operation: OverrideOperation::Create,
            handler: closures::overrides(|_, _, _| async move {
                Ok(vec![record(&[("name", Value::String("Keyless".into()))])])
            }),
        },
    ));
    out
}

async fn overrides_of_each_operation(backend: Backend) {
    let (_db, app) = app_with(backend, overrides(), &StackOptions::default()).await;
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/orders?timezone=UTC",
            &json!({"data": {"type": "orders", "attributes": {"status": "new", "note": "typed"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["note"], "via override", "{body}");

    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/orders/1?timezone=UTC",
            &json!({"data": {"type": "orders", "attributes": {"status": "new"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["note"], "updated by override",
        "{body}"
    );
    assert_eq!(body["data"]["attributes"]["status"], "new", "{body}");

    let (status, _, body) = send(&app, delete("/forest/orders/2?timezone=UTC")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // Still there, cancelled.
    let body = get_ok(&app, "/forest/orders/2?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["status"], "cancelled", "{body}");

    // A created record without its primary key.
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/countries?timezone=UTC",
            &json!({"data": {"type": "countries", "attributes": {"name": "Chile"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let detail = body["errors"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("without its primary key (id)"), "{detail}");
}

/// The layers serve code too (not only HTTP): an emulated sort on a page of a filtered list.
async fn emulated_sort_on_the_datasource(backend: Backend) {
    let (_db, datasource) = shop(backend).await;
    let stack = build_stack_with(
        Arc::new(datasource),
        customizations(),
        &StackOptions::default(),
    )
    .unwrap();
    let filter = Filter {
        sort: canopy::datasource::Sort(vec![SortClause {
            field: "customer:shout".into(),
            ascending: false,
        }]),
        condition_tree: Some(ConditionTree::leaf(
            "customer_id",
            Operator::Present,
            Value::Null,
        )),
        page: Some(canopy::datasource::Page::new(0, 2)),
        ..Filter::default()
    };
    let records = stack
        .collection("orders")
        .unwrap()
        .list(
            &canopy::datasource::Caller::system(chrono_tz::UTC),
            &filter,
            &Projection::new(["id", "customer:shout"]),
        )
        .await
        .unwrap();
    // CARL's order, then BOB's.
    let got: Vec<(Value, Option<Value>)> = records
        .iter()
        .map(|r| {
            (
                r.get("id").cloned().unwrap(),
                r.get_path("customer:shout").cloned(),
            )
        })
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].1, Some(Value::String("CARL".into())), "{got:?}");
    assert_eq!(got[1].1, Some(Value::String("BOB".into())), "{got:?}");
}

on_all_backends!(
    emulated_filter_and_sort_on_a_computed_field,
    the_row_limit_stops_emulation_with_a_clear_error,
    replaced_operator_and_sort,
    replaced_writing,
    overrides_of_each_operation,
    emulated_sort_on_the_datasource,
);
