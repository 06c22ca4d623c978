//! Field-level customizations through the `/forest` routes and the schema file, on the shop
//! fixture of `list` (and the binary columns of `wire_values`): renamed fields (paths through a
//! renamed relation, sorts, counts, writes; a computed field over a renamed field and a renamed
//! computed field; a Before Create hook that sees the names below while validation, above hooks,
//! refuses first), removed fields and collections (still used by a computed field below), the
//! binary mode, validation rules and nullable fields, and the count and sorting toggles.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::StatusCode;
use canopy::customizer::{
    BinaryMode, Customization, HookData, HookOperation, HookPosition, Kind, SortingMode,
    build_stack, closures,
};
use canopy::datasource::sql::Options;
use canopy::datasource::{DataSource, Operator, Value};
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{
    attribute, filters, ids, joined, on, schema_collection, schema_field, schema_file, serve,
    with_body,
};
use crate::http::{envelope, get, send};
use crate::list::shop;

/// The router over `datasource` customized with `customizations`, and the schema file it serves.
fn app(datasource: Arc<dyn DataSource>, customizations: Vec<Customization>) -> (Router, Json) {
    let stack = build_stack(datasource, customizations).unwrap();
    let file = schema_file(&stack);
    (serve(stack), file)
}

fn rename(collection: &str, from: &str, to: &str) -> Customization {
    on(
        collection,
        Kind::RenameField {
            from: from.into(),
            to: to.into(),
        },
    )
}

/// The field names of a collection in the schema file.
fn field_names(file: &Json, collection: &str) -> Vec<String> {
    schema_collection(file, collection)["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap().to_owned())
        .collect()
}

/// Renames over a computed field and a hook; validation (on the name below) above the hook.
async fn renamed_fields(backend: Backend) {
    let (_db, datasource) = shop(backend).await;
    // The field names each Before Create hook run saw.
    let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let hook_seen = Arc::clone(&seen);
    let customizations = vec![
        // Declared on the names below the renames: customizations never see the exposed names.
        joined("test-plugin", "orders", "label", &["note", "customer:name"]),
        on(
            "orders",
            Kind::Hook {
                position: HookPosition::Before,
                operation: HookOperation::Create,
                handler: closures::hook(move |_, _, data| {
                    if let HookData::Create { records, .. } = data {
                        for record in records.iter_mut() {
                            hook_seen
                                .lock()
                                .unwrap()
                                .push(record.keys().map(str::to_owned).collect());
                            record.insert("note", Value::String("hooked note".into()));
                        }
                    }
                    Ok(())
                }),
            },
        ),
        on(
            "orders",
            Kind::Validation {
                field: "note".into(),
                operator: Operator::LongerThan,
                value: Some(json!(2)),
            },
        ),
        rename("orders", "note", "comment"),
        rename("orders", "customer", "buyer"),
        rename("customers", "name", "fullName"),
        // The computed field itself, renamed.
        rename("orders", "label", "summary"),
    ];
    let (app, file) = app(Arc::new(datasource), customizations);

    let orders = field_names(&file, "orders");
    for name in ["comment", "buyer", "summary"] {
        assert!(orders.contains(&name.to_owned()), "{orders:?}");
    }
    for name in ["note", "customer", "label"] {
        assert!(!orders.contains(&name.to_owned()), "{orders:?}");
    }
    assert!(field_names(&file, "customers").contains(&"fullName".to_owned()));

    // A filter through the renamed relation on a renamed column, a sort on a renamed column,
    // the renamed computed field over renamed fields, the related record's renamed column.
    let ann = filters(&json!({"field": "buyer:fullName", "operator": "Equal", "value": "Ann"}));
    let (status, _, body) = send(
        &app,
        get(&format!(
            "/forest/orders?timezone=UTC&fields[orders]=id,comment,summary,buyer\
             &fields[buyer]=fullName&sort=comment&filters={ann}"
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids(&body), ["2", "1"]);
    assert_eq!(attribute(&body, "comment"), ["50% off", "first order"]);
    assert_eq!(
        attribute(&body, "summary"),
        ["50% off / Ann", "first order / Ann"]
    );
    let included: Vec<&Json> = body["included"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| &r["attributes"]["fullName"])
        .collect();
    assert_eq!(included, [&json!("Ann")], "{body}");

    // Validation sits above hooks: the client's short comment is refused under its name below,
    // before the hook that would have replaced it runs.
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/orders?timezone=UTC",
            &json!({"data": {"type": "orders", "attributes": {"comment": "ab", "status": "new"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body,
        envelope(
            "ValidationError",
            "'note' failed validation rule: 'LongerThan(2)'",
            400
        )
    );
    assert!(seen.lock().unwrap().is_empty());

    // The hook sees the name below; the created record comes back under the exposed name.
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/orders?timezone=UTC",
            &json!({"data": {"type": "orders", "attributes": {"comment": "abc", "status": "new"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["comment"], "hooked note",
        "{body}"
    );
    let keys = seen.lock().unwrap().clone();
    assert_eq!(keys.len(), 1);
    assert!(keys[0].contains(&"note".to_owned()), "{keys:?}");
    assert!(!keys[0].contains(&"comment".to_owned()), "{keys:?}");
    let id = body["data"]["id"].as_str().unwrap().to_owned();

    // Updates: only the patched fields are checked, under their exposed names.
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            &format!("/forest/orders/{id}?timezone=UTC"),
            &json!({"data": {"type": "orders", "attributes": {"comment": "xy"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            &format!("/forest/orders/{id}?timezone=UTC"),
            &json!({"data": {"type": "orders", "attributes": {"comment": "long enough"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["comment"], "long enough",
        "{body}"
    );

    // A count filtered on a renamed column: the 3 non-blank notes of the fixture and the new one.
    let present = filters(&json!({"field": "comment", "operator": "Present"}));
    let (status, _, body) = send(
        &app,
        get(&format!(
            "/forest/orders/count?timezone=UTC&filters={present}"
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"count": 4}));

    // The names below are not exposed.
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&fields[orders]=id,note"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

/// Removed fields and collections: gone from the schema and the routes, still usable below.
async fn removed_fields_and_collections(backend: Backend) {
    let (_db, datasource) = shop(backend).await;
    let customizations = vec![
        // Uses the removed collection through the relation that removal hides.
        joined("test-plugin", "customers", "place", &["country:name"]),
        on(
            "customers",
            Kind::RemoveField {
                name: "email".into(),
            },
        ),
        on("countries", Kind::RemoveCollection),
    ];
    let (app, file) = app(Arc::new(datasource), customizations);

    let names: Vec<&str> = file["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"countries"), "{names:?}");
    let customers = field_names(&file, "customers");
    assert!(!customers.contains(&"email".to_owned()), "{customers:?}");
    assert!(!customers.contains(&"country".to_owned()), "{customers:?}");
    assert!(
        customers.contains(&"country_id".to_owned()),
        "{customers:?}"
    );

    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,name,place&sort=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        attribute(&body, "place")[..2],
        [json!("France"), json!("Japan")]
    );

    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,email"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _, body) = send(&app, get("/forest/countries?timezone=UTC")).await;
    // The routes of a collection the datasource does not serve: none, as koa answers it.
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body, "Not Found");

    // A created record comes back without the hidden field.
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"name": "Eve"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["name"], "Eve", "{body}");
    assert!(body["data"]["attributes"].get("email").is_none(), "{body}");
}

/// Validation rules in the schema file and on writes, a nullable field, count and sorting off.
async fn validation_nullable_count_and_sorting(backend: Backend) {
    let (_db, datasource) = shop(backend).await;
    let base = datasource.schema().collection("countries").unwrap().clone();
    assert!(base.column("name").unwrap().is_required());
    let customizations = vec![
        on(
            "customers",
            Kind::Validation {
                field: "email".into(),
                operator: Operator::Contains,
                value: Some(json!("@")),
            },
        ),
        on(
            "countries",
            Kind::Nullable {
                field: "name".into(),
            },
        ),
        on("orders", Kind::DisableCount),
        on(
            "orders",
            Kind::Sorting {
                field: "note".into(),
                mode: SortingMode::Disable,
            },
        ),
    ];
    let (app, file) = app(Arc::new(datasource), customizations);

    let email = schema_field(&file, "customers", "email");
    let rules = email["validations"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["value"] == "@"), "{email}");
    let name = schema_field(&file, "countries", "name");
    assert_eq!(name["isRequired"], false, "{name}");
    assert!(
        !name["validations"]
            .as_array()
            .map(|v| v.iter().any(|r| r["type"] == "is present"))
            .unwrap_or(false),
        "{name}"
    );
    assert_eq!(schema_field(&file, "orders", "note")["isSortable"], false);
    assert_eq!(schema_field(&file, "orders", "amount")["isSortable"], true);

    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"name": "Eve", "email": "nope"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body,
        envelope(
            "ValidationError",
            "'email' failed validation rule: 'Contains(@)'",
            400
        )
    );
    // A null value only meets Present, which email does not have.
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/customers/1?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"email": null}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, _, body) = send(&app, get("/forest/orders/count?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"meta": {"count": "deactivated"}}));
    let (status, _, body) = send(&app, get("/forest/customers/count?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"count": 4}));

    let (status, _, body) = send(&app, get("/forest/orders?timezone=UTC&sort=note")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _, body) = send(&app, get("/forest/orders?timezone=UTC&sort=-amount")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// `replaceFieldBinaryMode`: an ordinary binary column served as hex (values, filters, writes,
/// the schema file's rule); a column that is not binary is refused by name.
async fn binary_mode(backend: Backend) {
    const PNG: &str = "89504e470d0a1a0a";
    let (db, _) = crate::wire_values::bank(backend).await;
    let datasource: Arc<dyn DataSource> = Arc::new(db.datasource(Options::default()).await);
    let hex = |field: &str| {
        on(
            "accounts",
            Kind::BinaryMode {
                field: field.into(),
                mode: BinaryMode::Hex,
            },
        )
    };
    let err = build_stack(Arc::clone(&datasource), vec![hex("big")])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("'accounts.big'"), "{err}");

    let (app, file) = app(datasource, vec![hex("avatar")]);
    let avatar = schema_field(&file, "accounts", "avatar");
    assert_eq!(avatar["type"], "String");
    assert_eq!(
        avatar["validations"],
        json!([{"type": "is like", "value": "/^[0-9a-f]+$/", "message": "Value must match /^[0-9a-f]+$/"}])
    );

    let by_avatar = filters(&json!({"field": "avatar", "operator": "Equal", "value": PNG}));
    let (status, _, body) = send(
        &app,
        get(&format!(
            "/forest/accounts?timezone=UTC&fields[accounts]=id,avatar&filters={by_avatar}"
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "avatar"), [json!(PNG)]);

    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/accounts/1?timezone=UTC",
            &json!({"data": {"type": "accounts", "attributes": {"avatar": "cafe"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["avatar"], "cafe", "{body}");
}

on_all_backends!(
    renamed_fields,
    removed_fields_and_collections,
    validation_nullable_count_and_sorting,
    binary_mode,
);
