//! Relations added by customizations, importField, and early/late computed fields, through the
//! `/forest` routes: the shop fixture of `list` plus tags joined to orders, on all three
//! databases; and a relation from a SQLite collection to a PostgreSQL one.
//!
//! The decorator-order cases: a computed field reading an added relation (late computed), a
//! relation whose key is an imported field and one whose target is a computed field with an
//! emulated `In` (both under the relation layer).

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use canopy::customizer::{
    Customization, FilteringMode, Kind, RelationDefinition, StackOptions, build_stack_with,
    closures,
};
use canopy::datasource::sql::Options;
use canopy::datasource::{
    ColumnType, CompositeDataSource, DataSource, Operator, PrimitiveType, Value,
};
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{
    attribute, filters, get_ok, ids, joined, schema_field, schema_file, serve, with_body,
};
use crate::http::{get, send};
use crate::list::{portable, shop};

const PLUGIN: &str = "relations-plugin";

fn relation(collection: &str, name: &str, definition: RelationDefinition) -> Customization {
    Customization::collection(
        PLUGIN,
        collection,
        Kind::Relation {
            name: name.to_owned(),
            definition,
        },
    )
}

fn many_to_one(collection: &str, name: &str, foreign: &str, key: &str) -> Customization {
    relation(
        collection,
        name,
        RelationDefinition::ManyToOne {
            foreign_collection: foreign.to_owned(),
            foreign_key: key.to_owned(),
            foreign_key_target: None,
        },
    )
}

fn import(collection: &str, name: &str, path: &str, readonly: Option<bool>) -> Customization {
    Customization::collection(
        PLUGIN,
        collection,
        Kind::ImportField {
            name: name.to_owned(),
            path: path.to_owned(),
            readonly,
        },
    )
}

/// The shop with `tags` and the `order_tags` junction (order 1: gift, urgent; order 3: urgent)
/// and `profiles` (a unique `customer_id`: Ann's, and a spare one), under the customizations.
async fn app(
    backend: Backend,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> (TestDb, Result<(Router, Json), String>) {
    let (db, _) = shop(backend).await;
    db.execute(&portable(
        backend,
        "CREATE TABLE tags (id {pk}, label VARCHAR(50) NOT NULL);
         CREATE TABLE order_tags (order_id INT NOT NULL, tag_id INT NOT NULL,
            PRIMARY KEY (order_id, tag_id));
         INSERT INTO tags (label) VALUES ('gift');
         INSERT INTO tags (label) VALUES ('urgent');
         INSERT INTO order_tags (order_id, tag_id) VALUES (1, 1), (1, 2), (3, 2);
         CREATE TABLE profiles (id {pk}, customer_id INT UNIQUE, bio VARCHAR(50));
         INSERT INTO profiles (customer_id, bio) VALUES (1, 'ann bio');
         INSERT INTO profiles (customer_id, bio) VALUES (NULL, 'spare');",
    ))
    .await;
    let datasource = db
        .datasource(Options {
            connection_name: Some("main".to_owned()),
            ..Options::default()
        })
        .await;
    let served = build_stack_with(Arc::new(datasource), customizations, options)
        .map(|stack| {
            let file = schema_file(&stack);
            (serve(stack), file)
        })
        .map_err(|e| e.to_string());
    (db, served)
}

/// The id each record links to through a to-one relation (`None` for null).
fn linked(body: &Json, relation: &str) -> Vec<Option<String>> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| {
            r["relationships"][relation]["data"]["id"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// The value of `field` of the included record `type/id`.
fn included<'a>(body: &'a Json, kind: &str, id: &str, field: &str) -> &'a Json {
    body["included"]
        .as_array()
        .unwrap_or_else(|| panic!("no included records: {body}"))
        .iter()
        .find(|r| r["type"] == kind && r["id"] == id)
        .map(|r| &r["attributes"][field])
        .unwrap_or_else(|| panic!("{kind} {id} is not included: {body}"))
}

async fn count(app: &Router, uri: &str) -> u64 {
    get_ok(app, uri).await["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("{uri}: no count"))
}

fn relations() -> Vec<Customization> {
    vec![
        many_to_one("orders", "buyer", "customers", "customer_id"),
        relation(
            "customers",
            "purchases",
            RelationDefinition::OneToMany {
                foreign_collection: "orders".into(),
                origin_key: "customer_id".into(),
                origin_key_target: None,
            },
        ),
        relation(
            "customers",
            "profile",
            RelationDefinition::OneToOne {
                foreign_collection: "profiles".into(),
                origin_key: "customer_id".into(),
                origin_key_target: None,
            },
        ),
        relation(
            "orders",
            "tags",
            RelationDefinition::ManyToMany {
                foreign_collection: "tags".into(),
                through_collection: "order_tags".into(),
                origin_key: "order_id".into(),
                foreign_key: "tag_id".into(),
                origin_key_target: None,
                foreign_key_target: None,
            },
        ),
    ]
}

/// ManyToOne projected and filtered through; OneToMany and ManyToMany listed, counted,
/// associated and dissociated by the relation routes.
async fn added_relations_through_the_routes(backend: Backend) {
    let (_db, app) = app(backend, relations(), &StackOptions::default()).await;
    let (app, file) = app.unwrap();
    for (collection, field, kind, reference) in [
        ("orders", "buyer", "BelongsTo", "customers.id"),
        ("customers", "purchases", "HasMany", "orders.id"),
        ("orders", "tags", "BelongsToMany", "tags.id"),
    ] {
        let field = schema_field(&file, collection, field);
        assert_eq!(field["relationship"], kind, "{field}");
        assert_eq!(field["reference"], reference, "{field}");
    }
    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,buyer&fields[buyer]=name&sort=id",
    )
    .await;
    assert_eq!(
        linked(&body, "buyer"),
        [
            Some("1".into()),
            Some("1".into()),
            Some("2".into()),
            None,
            Some("3".into())
        ]
    );
    assert_eq!(included(&body, "customers", "2", "name"), "Bob");

    let ann = filters(&json!({"field": "buyer:name", "operator": "equal", "value": "Ann"}));
    let body = get_ok(
        &app,
        &format!("/forest/orders?timezone=UTC&fields[orders]=id&sort=id&filters={ann}"),
    )
    .await;
    assert_eq!(ids(&body), ["1", "2"]);
    assert_eq!(
        count(
            &app,
            &format!("/forest/orders/count?timezone=UTC&filters={ann}")
        )
        .await,
        2
    );

    // Setting the ManyToOne writes the foreign key.
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/orders/4/relationships/buyer?timezone=UTC",
            &json!({"data": {"type": "customers", "id": "4"}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let body = get_ok(
        &app,
        "/forest/orders/4?timezone=UTC&fields[orders]=id,customer_id,buyer&fields[buyer]=name",
    )
    .await;
    assert_eq!(body["data"]["attributes"]["customer_id"], 4, "{body}");
    assert_eq!(included(&body, "customers", "4", "name"), "dora");
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/orders/4/relationships/buyer?timezone=UTC",
            &json!({"data": null}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    // OneToOne: projected and filtered through the origin key; set by the to-one route.
    let profiles =
        "/forest/customers?timezone=UTC&fields[customers]=id,profile&fields[profile]=bio&sort=id";
    let body = get_ok(&app, profiles).await;
    assert_eq!(
        linked(&body, "profile"),
        [Some("1".into()), None, None, None]
    );
    assert_eq!(included(&body, "profiles", "1", "bio"), "ann bio");
    let ann_bio =
        filters(&json!({"field": "profile:bio", "operator": "equal", "value": "ann bio"}));
    let body = get_ok(
        &app,
        &format!("/forest/customers?timezone=UTC&fields[customers]=id&filters={ann_bio}"),
    )
    .await;
    assert_eq!(ids(&body), ["1"]);
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/customers/2/relationships/profile?timezone=UTC",
            &json!({"data": {"type": "profiles", "id": "2"}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let body = get_ok(&app, profiles).await;
    assert_eq!(
        linked(&body, "profile"),
        [Some("1".into()), Some("2".into()), None, None]
    );

    // OneToMany: the routes go through the foreign collection's origin key.
    let purchases = "/forest/customers/1/relationships/purchases";
    let body = get_ok(&app, &format!("{purchases}?timezone=UTC&sort=id")).await;
    assert_eq!(ids(&body), ["1", "2"]);
    assert_eq!(
        count(&app, &format!("{purchases}/count?timezone=UTC")).await,
        2
    );
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            &format!("{purchases}?timezone=UTC"),
            &json!({"data": [{"type": "orders", "id": "4"}]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        count(&app, &format!("{purchases}/count?timezone=UTC")).await,
        3
    );
    let (status, _, body) = send(
        &app,
        with_body(
            "DELETE",
            &format!("{purchases}?timezone=UTC"),
            &json!({"data": {"attributes": {"ids": ["1"], "all_records": false}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let body = get_ok(&app, &format!("{purchases}?timezone=UTC&sort=id")).await;
    assert_eq!(ids(&body), ["2", "4"]);

    // ManyToMany through order_tags.
    let tags = |order: u32| format!("/forest/orders/{order}/relationships/tags");
    let body = get_ok(&app, &format!("{}?timezone=UTC&sort=id", tags(1))).await;
    assert_eq!(ids(&body), ["1", "2"]);
    assert_eq!(attribute(&body, "label"), [json!("gift"), json!("urgent")]);
    assert_eq!(
        count(&app, &format!("{}/count?timezone=UTC", tags(3))).await,
        1
    );
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            &format!("{}?timezone=UTC", tags(2)),
            &json!({"data": [{"type": "tags", "id": "2"}]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        ids(&get_ok(&app, &format!("{}?timezone=UTC", tags(2))).await),
        ["2"]
    );
    let (status, _, body) = send(
        &app,
        with_body(
            "DELETE",
            &format!("{}?timezone=UTC", tags(1)),
            &json!({"data": {"attributes": {"ids": ["1"], "all_records": false}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        ids(&get_ok(&app, &format!("{}?timezone=UTC", tags(1))).await),
        ["2"]
    );
    // Dissociating unlinks only: the tag is still there.
    assert_eq!(count(&app, "/forest/tags/count?timezone=UTC").await, 2);
}

/// A computed field reading an added relation sits above the relation layer (late); a relation
/// may use an imported field as its key, or a computed field with an emulated `In` as its
/// target (both under the relation layer).
async fn decorator_order_with_relations(backend: Backend) {
    let mut customizations = relations();
    customizations.extend([
        joined(PLUGIN, "orders", "buyer_label", &["buyer:name", "status"]),
        import(
            "orders",
            "buyer_country_id",
            "customer:country_id",
            Some(true),
        ),
        many_to_one("orders", "destination", "countries", "buyer_country_id"),
        Customization::collection(
            PLUGIN,
            "countries",
            Kind::ComputedField {
                name: "key".to_owned(),
                column_type: PrimitiveType::Number.into(),
                dependencies: vec!["id".to_owned()],
                default_value: None,
                enum_values: None,
                handler: closures::compute(|batch| Ok(batch.columns[0].values.clone())),
            },
        ),
        Customization::collection(
            PLUGIN,
            "countries",
            Kind::Filtering {
                field: "key".to_owned(),
                mode: FilteringMode::Emulate(Operator::In),
            },
        ),
        relation(
            "customers",
            "homeland",
            RelationDefinition::ManyToOne {
                foreign_collection: "countries".into(),
                foreign_key: "country_id".into(),
                foreign_key_target: Some("key".into()),
            },
        ),
    ]);
    let (_db, app) = app(backend, customizations, &StackOptions::default()).await;
    let (app, file) = app.unwrap();
    assert_eq!(
        schema_field(&file, "customers", "homeland")["reference"],
        "countries.key"
    );

    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,buyer_label&sort=id",
    )
    .await;
    assert_eq!(
        attribute(&body, "buyer_label"),
        [
            json!("Ann / paid"),
            json!("Ann / new"),
            json!("Bob / paid"),
            json!(" / cancelled"),
            json!("Carl / new")
        ]
    );

    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,destination&fields[destination]=name&sort=id",
    )
    .await;
    assert_eq!(
        linked(&body, "destination"),
        [
            Some("1".into()),
            Some("1".into()),
            Some("2".into()),
            None,
            None
        ]
    );
    assert_eq!(included(&body, "countries", "2", "name"), "Japan");
    let japan =
        filters(&json!({"field": "destination:name", "operator": "equal", "value": "Japan"}));
    let body = get_ok(
        &app,
        &format!("/forest/orders?timezone=UTC&fields[orders]=id&filters={japan}"),
    )
    .await;
    assert_eq!(ids(&body), ["3"]);

    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,homeland&fields[homeland]=name&sort=id",
    )
    .await;
    assert_eq!(
        linked(&body, "homeland"),
        [Some("1".into()), Some("2".into()), None, Some("1".into())]
    );
    let france =
        filters(&json!({"field": "homeland:name", "operator": "equal", "value": "France"}));
    let body = get_ok(
        &app,
        &format!("/forest/customers?timezone=UTC&fields[customers]=id&sort=id&filters={france}"),
    )
    .await;
    assert_eq!(ids(&body), ["1", "4"]);
}

/// importField: read, filtered and sorted through the path, written back as a nested update of
/// the related record; a read-only import refuses writes.
async fn import_field(backend: Backend) {
    let customizations = vec![
        import("customers", "country_name", "country:name", None),
        import("orders", "buyer_email", "customer:email", Some(true)),
    ];
    let (_db, app) = app(backend, customizations, &StackOptions::default()).await;
    let (app, file) = app.unwrap();
    let imported = schema_field(&file, "customers", "country_name");
    assert_eq!(imported["type"], "String", "{imported}");
    assert_eq!(imported["isReadOnly"], false, "{imported}");
    assert_eq!(imported["isSortable"], true, "{imported}");
    assert_eq!(imported["isFilterable"], true, "{imported}");
    assert_eq!(
        schema_field(&file, "orders", "buyer_email")["isReadOnly"],
        true
    );
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,country_name&sort=id",
    )
    .await;
    assert_eq!(
        attribute(&body, "country_name"),
        [json!("France"), json!("Japan"), Json::Null, json!("France")]
    );
    let japan = filters(&json!({"field": "country_name", "operator": "equal", "value": "Japan"}));
    let body = get_ok(
        &app,
        &format!("/forest/customers?timezone=UTC&fields[customers]=id&filters={japan}"),
    )
    .await;
    assert_eq!(ids(&body), ["2"]);
    let present = filters(&json!({"field": "country_name", "operator": "present"}));
    let body = get_ok(
        &app,
        &format!(
            "/forest/customers?timezone=UTC&fields[customers]=id,country_name\
             &sort=-country_name&filters={present}"
        ),
    )
    .await;
    assert_eq!(
        attribute(&body, "country_name"),
        [json!("Japan"), json!("France"), json!("France")]
    );
    assert_eq!(ids(&body)[0], "2");

    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,buyer_email&sort=id",
    )
    .await;
    assert_eq!(attribute(&body, "buyer_email")[2], json!("bob@x.io"));

    // Writing the import updates the country of the customer.
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/customers/2?timezone=UTC",
            &json!({"data": {"type": "customers", "id": "2",
                "attributes": {"country_name": "Nippon"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["country_name"], "Nippon",
        "{body}"
    );
    let body = get_ok(&app, "/forest/countries/2?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["name"], "Nippon", "{body}");

    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/orders/1?timezone=UTC",
            &json!({"data": {"type": "orders", "id": "1",
                "attributes": {"buyer_email": "x@x.io"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let body = get_ok(&app, "/forest/customers/1?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["email"], "ann@x.io");
}

/// A relation or an import naming a missing collection or field fails the build with a message
/// naming the plugin and the customization, unless missing elements are ignored: then it is
/// skipped and the rest is served.
async fn missing_targets(backend: Backend) {
    let lenient = StackOptions {
        ignore_missing_schema_element_errors: true,
        ..StackOptions::default()
    };
    let cases = [
        (
            many_to_one("orders", "shopper", "shoppers", "customer_id"),
            "the relation 'orders.shopper' cannot be added: the foreign collection 'shoppers' does not exist",
        ),
        (
            many_to_one("orders", "shopper", "customers", "shopper_id"),
            "the relation 'orders.shopper' cannot be added: the key 'orders.shopper_id' does not exist",
        ),
        (
            relation(
                "orders",
                "shopper",
                RelationDefinition::ManyToMany {
                    foreign_collection: "tags".into(),
                    through_collection: "order_labels".into(),
                    origin_key: "order_id".into(),
                    foreign_key: "tag_id".into(),
                    origin_key_target: None,
                    foreign_key_target: None,
                },
            ),
            "the through collection 'order_labels' does not exist",
        ),
        (
            import("orders", "shopper", "customer:nickname", None),
            "importField 'orders.shopper' from 'customer:nickname': the field 'customers.nickname' does not exist",
        ),
    ];
    for (customization, expected) in cases {
        let (_db, refused) = app(
            backend,
            vec![customization.clone()],
            &StackOptions::default(),
        )
        .await;
        let message = refused.expect_err("the stack must be refused");
        assert!(
            message.starts_with(PLUGIN) && message.contains(expected),
            "{message}"
        );
        let (_db, app) = app(
            backend,
            vec![
                customization,
                joined(PLUGIN, "orders", "tagline", &["status"]),
            ],
            &lenient,
        )
        .await;
        let (app, file) = app.unwrap();
        assert!(
            file.to_string().contains("tagline") && !file.to_string().contains("shopper"),
            "{file}"
        );
        // Skipped: the field is unknown, the rest is served.
        let (status, _, body) = send(
            &app,
            get("/forest/orders?timezone=UTC&fields[orders]=id,shopper&sort=id"),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let body = get_ok(
            &app,
            "/forest/orders?timezone=UTC&fields[orders]=id,tagline&sort=id",
        )
        .await;
        assert_eq!(attribute(&body, "tagline")[0], "paid");
    }
    // Keys that exist but do not match are an error even when missing elements are ignored.
    let (_db, refused) = app(
        backend,
        vec![many_to_one("orders", "shopper", "customers", "status")],
        &lenient,
    )
    .await;
    let message = refused.expect_err("mismatched key types are refused");
    assert!(message.contains("do not match"), "{message}");
}

/// What `addExternalRelation` declares: a computed field whose type is a list of objects, here
/// the orders of the customer as `[{id, status}]` objects, served by list and get.
async fn external_relation_as_a_computed_list_of_objects(backend: Backend) {
    let column_type = ColumnType::Array(Box::new(ColumnType::Composite(
        [
            ("id".to_owned(), ColumnType::from(PrimitiveType::Number)),
            ("status".to_owned(), PrimitiveType::String.into()),
        ]
        .into_iter()
        .collect(),
    )));
    let external = Customization::collection(
        PLUGIN,
        "customers",
        Kind::ComputedField {
            name: "history".to_owned(),
            column_type,
            dependencies: vec!["id".to_owned()],
            default_value: None,
            enum_values: None,
            handler: closures::compute(|batch| {
                Ok(batch.columns[0]
                    .values
                    .iter()
                    .map(|id| match id {
                        // As a plugin's listRecords answers: JSON objects.
                        Value::Int(1) => Value::Array(vec![
                            Value::Json(json!({"id": 1, "status": "paid"})),
                            Value::Json(json!({"id": 2, "status": "new"})),
                        ]),
                        _ => Value::Array(Vec::new()),
                    })
                    .collect())
            }),
        },
    );
    let (_db, app) = app(backend, vec![external], &StackOptions::default()).await;
    let (app, file) = app.unwrap();
    assert_eq!(
        schema_field(&file, "customers", "history")["type"],
        json!([{"fields": [{"field": "id", "type": "Number"}, {"field": "status", "type": "String"}]}])
    );
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,history&sort=id",
    )
    .await;
    let history = attribute(&body, "history");
    assert_eq!(
        history[0],
        json!([{"id": 1, "status": "paid"}, {"id": 2, "status": "new"}])
    );
    assert_eq!(history[1], json!([]));
    let body = get_ok(&app, "/forest/customers/1?timezone=UTC").await;
    assert_eq!(
        body["data"]["attributes"]["history"],
        json!([{"id": 1, "status": "paid"}, {"id": 2, "status": "new"}]),
        "{body}"
    );
}

on_all_backends!(
    external_relation_as_a_computed_list_of_objects,
    added_relations_through_the_routes,
    decorator_order_with_relations,
    import_field,
    missing_targets,
);

/// Books in SQLite, their authors in PostgreSQL: the relation crosses datasources, so every
/// crossing is a query of its own on the other database.
#[tokio::test]
async fn a_relation_across_datasources() {
    let sqlite = TestDb::new(Backend::Sqlite).await;
    sqlite
        .execute(
            "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL, author_id INTEGER);
             INSERT INTO books (title, author_id) VALUES ('Dune', 1), ('Emma', 2),
                ('Children of Dune', 1), ('Anonymous', NULL);",
        )
        .await;
    let postgres = TestDb::new(Backend::Postgres).await;
    postgres
        .execute(
            "CREATE TABLE authors (id SERIAL PRIMARY KEY, name TEXT NOT NULL);
             INSERT INTO authors (name) VALUES ('Frank Herbert'), ('Jane Austen');",
        )
        .await;
    let books: Arc<dyn DataSource> = Arc::new(sqlite.datasource(Options::default()).await);
    let authors: Arc<dyn DataSource> = Arc::new(postgres.datasource(Options::default()).await);
    let composite = CompositeDataSource::new(vec![books, authors]).unwrap();
    let customizations = vec![
        many_to_one("books", "author", "authors", "author_id"),
        relation(
            "authors",
            "books",
            RelationDefinition::OneToMany {
                foreign_collection: "books".into(),
                origin_key: "author_id".into(),
                origin_key_target: None,
            },
        ),
        joined(PLUGIN, "books", "byline", &["title", "author:name"]),
        import("books", "author_name", "author:name", None),
    ];
    let stack = build_stack_with(
        Arc::new(composite),
        customizations,
        &StackOptions::default(),
    )
    .unwrap();
    let app = serve(stack);

    let body = get_ok(
        &app,
        "/forest/books?timezone=UTC&fields[books]=id,byline,author&fields[author]=name&sort=id",
    )
    .await;
    assert_eq!(
        linked(&body, "author"),
        [Some("1".into()), Some("2".into()), Some("1".into()), None]
    );
    assert_eq!(included(&body, "authors", "2", "name"), "Jane Austen");
    assert_eq!(
        attribute(&body, "byline"),
        [
            json!("Dune / Frank Herbert"),
            json!("Emma / Jane Austen"),
            json!("Children of Dune / Frank Herbert"),
            json!("Anonymous / ")
        ]
    );
    let herbert =
        filters(&json!({"field": "author:name", "operator": "contains", "value": "Herbert"}));
    let body = get_ok(
        &app,
        &format!("/forest/books?timezone=UTC&fields[books]=id&sort=id&filters={herbert}"),
    )
    .await;
    assert_eq!(ids(&body), ["1", "3"]);
    let by_import =
        filters(&json!({"field": "author_name", "operator": "equal", "value": "Jane Austen"}));
    assert_eq!(
        count(
            &app,
            &format!("/forest/books/count?timezone=UTC&filters={by_import}")
        )
        .await,
        1
    );
    // Writing the import through the added relation updates the author in PostgreSQL.
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/books/2?timezone=UTC",
            &json!({"data": {"type": "books", "id": "2",
                "attributes": {"author_name": "J. Austen"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["author_name"], "J. Austen",
        "{body}"
    );
    let body = get_ok(&app, "/forest/authors/2?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["name"], "J. Austen", "{body}");
    let body = get_ok(
        &app,
        "/forest/authors/1/relationships/books?timezone=UTC&sort=id",
    )
    .await;
    assert_eq!(ids(&body), ["1", "3"]);
    assert_eq!(
        count(
            &app,
            "/forest/authors/2/relationships/books/count?timezone=UTC"
        )
        .await,
        1
    );
}
