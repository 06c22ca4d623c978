//! The write routes of `/forest` in-process on a small CRM: create (with ManyToOne and OneToOne
//! links), update and its re-read, and the relation routes (list and count related through
//! OneToMany and ManyToMany, associate, dissociate, delete, update to-one).

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use canopy::datasource::sql::Options;
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{serve, with_body};
use crate::http::{envelope, get, send};
use crate::list::portable;

/// customers ← orders (customer), orders ↔ tags through order_tags, orders ← invoices
/// (OneToOne: `invoices.order_id` is unique).
///
/// | order | customer | tags | invoice |
/// |---|---|---|---|
/// | 1 `a` | Ann | red, blue | 1 |
/// | 2 `b` | Ann | blue | — |
/// | 3 `c` | Bob | — | — |
///
/// Invoice 2 belongs to no order; tag 3 (green) to none.
async fn crm(backend: Backend) -> (TestDb, Router) {
    let db = TestDb::new(backend).await;
    db.execute(&portable(
        backend,
        "CREATE TABLE customers (id {pk}, name VARCHAR(255));
         CREATE TABLE orders (id {pk}, customer_id INT, label VARCHAR(255),
            FOREIGN KEY (customer_id) REFERENCES customers(id));
         CREATE TABLE tags (id {pk}, name VARCHAR(255) NOT NULL);
         CREATE TABLE order_tags (order_id INT NOT NULL, tag_id INT NOT NULL,
            PRIMARY KEY (order_id, tag_id), FOREIGN KEY (order_id) REFERENCES orders(id),
            FOREIGN KEY (tag_id) REFERENCES tags(id));
         CREATE TABLE invoices (id {pk}, order_id INT UNIQUE,
            FOREIGN KEY (order_id) REFERENCES orders(id));",
    ))
    .await;
    db.execute(
        "INSERT INTO customers (name) VALUES ('Ann');
         INSERT INTO customers (name) VALUES ('Bob');
         INSERT INTO orders (customer_id, label) VALUES (1, 'a');
         INSERT INTO orders (customer_id, label) VALUES (1, 'b');
         INSERT INTO orders (customer_id, label) VALUES (2, 'c');
         INSERT INTO tags (name) VALUES ('red');
         INSERT INTO tags (name) VALUES ('blue');
         INSERT INTO tags (name) VALUES ('green');
         INSERT INTO order_tags (order_id, tag_id) VALUES (1, 1);
         INSERT INTO order_tags (order_id, tag_id) VALUES (1, 2);
         INSERT INTO order_tags (order_id, tag_id) VALUES (2, 2);
         INSERT INTO invoices (order_id) VALUES (1);
         INSERT INTO invoices (order_id) VALUES (NULL);",
    )
    .await;
    let app = app_over(&db).await;
    (db, app)
}

/// The router over the database's tables.
async fn app_over(db: &TestDb) -> Router {
    let datasource = db.datasource(Options::default()).await;
    serve(Arc::new(datasource))
}

/// The selection body of these ids.
fn ids(ids: &[&str]) -> Json {
    json!({"data": {"attributes": {"ids": ids, "all_records": false}}})
}

/// A column of one record, read through `GET /{c}/{id}`.
async fn attribute(app: &Router, collection: &str, id: &str, column: &str) -> Json {
    let (status, _, body) =
        send(app, get(&format!("/forest/{collection}/{id}?timezone=UTC"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["data"]["attributes"][column].clone()
}

/// Ids of a related list, sorted.
async fn related_ids(app: &Router, path: &str) -> Vec<String> {
    let separator = if path.contains('?') { '&' } else { '?' };
    let uri = format!("/forest/{path}{separator}timezone=UTC");
    let (status, _, body) = send(app, get(&uri)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut ids = crate::harness::ids(&body);
    ids.sort();
    ids
}

async fn related_count(app: &Router, path: &str) -> Json {
    let (status, _, body) = send(app, get(&format!("/forest/{path}/count?timezone=UTC"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn create_and_update(backend: Backend) {
    let (_db, app) = crm(backend).await;
    let create = json!({"data": {"type": "orders", "attributes": {"label": "new"},
        "relationships": {"customer": {"data": {"type": "customers", "id": "2"}}}}});
    let (status, _, body) = send(
        &app,
        with_body("POST", "/forest/orders?timezone=UTC", &create),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["id"], "4");
    assert_eq!(body["data"]["attributes"]["label"], "new");
    assert_eq!(body["data"]["attributes"]["customer_id"], 2);
    assert_eq!(
        body["data"]["relationships"]["customer"]["data"],
        json!({"type": "customers", "id": "2"})
    );
    assert_eq!(body["included"][0]["id"], "2");
    assert_eq!(attribute(&app, "orders", "4", "customer_id").await, 2);

    // A OneToOne link is applied after the creation; `data: null` sets a ManyToOne key null.
    let create = json!({"data": {"type": "orders", "attributes": {"label": "x"},
        "relationships": {"invoice": {"data": {"type": "invoices", "id": "2"}},
            "customer": {"data": null}}}});
    let (status, _, body) = send(
        &app,
        with_body("POST", "/forest/orders?timezone=UTC", &create),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["id"], "5");
    assert_eq!(body["data"]["attributes"]["customer_id"], Json::Null);
    assert_eq!(
        body["data"]["relationships"]["customer"]["data"],
        Json::Null
    );
    assert_eq!(
        body["data"]["relationships"]["invoice"]["data"],
        json!({"type": "invoices", "id": "2"})
    );
    assert_eq!(attribute(&app, "invoices", "2", "order_id").await, 5);

    let invalid = json!({"data": {"type": "orders", "attributes": {"label": 12}}});
    let (status, _, body) = send(
        &app,
        with_body("POST", "/forest/orders?timezone=UTC", &invalid),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        envelope(
            "ValidationError",
            "The given value has a wrong type for \"label\": 12.\n Expects \"String\",null",
            400
        )
    );

    let update = json!({"data": {"type": "orders", "id": "1", "attributes": {"label": "edited"}}});
    let (status, _, body) = send(
        &app,
        with_body("PUT", "/forest/orders/1?timezone=UTC", &update),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["id"], "1");
    assert_eq!(body["data"]["attributes"]["label"], "edited");
    assert_eq!(body["data"]["attributes"]["customer_id"], 1);
    // Re-read with the to-one relations' columns: the customer comes included with its name.
    assert_eq!(
        body["data"]["relationships"]["customer"]["data"],
        json!({"type": "customers", "id": "1"})
    );
    let included = body["included"].as_array().unwrap();
    assert!(
        included
            .iter()
            .any(|r| r["type"] == "customers" && r["attributes"]["name"] == "Ann"),
        "{body}"
    );
    assert!(
        included
            .iter()
            .any(|r| r["type"] == "invoices" && r["id"] == "1"),
        "{body}"
    );
    let missing = send(
        &app,
        with_body("PUT", "/forest/orders/99?timezone=UTC", &update),
    )
    .await;
    // The agent re-reads the record it updated and serializes what it finds: nothing.
    assert_eq!(missing.0, StatusCode::OK);
    assert_eq!(
        missing.2,
        json!({"data": null, "jsonapi": {"version": "1.0"}})
    );
}

async fn list_and_count_related(backend: Backend) {
    let (_db, app) = crm(backend).await;
    assert_eq!(
        related_ids(&app, "customers/1/relationships/orders").await,
        ["1", "2"]
    );
    assert_eq!(
        related_count(&app, "customers/1/relationships/orders").await,
        json!({"count": 2})
    );
    assert_eq!(
        related_ids(&app, "orders/1/relationships/tags").await,
        ["1", "2"]
    );
    assert_eq!(
        related_ids(&app, "tags/2/relationships/orders").await,
        ["1", "2"]
    );
    assert_eq!(
        related_count(&app, "orders/1/relationships/tags").await,
        json!({"count": 2})
    );
    assert_eq!(
        related_count(&app, "orders/3/relationships/tags").await,
        json!({"count": 0})
    );
    assert!(
        related_ids(&app, "orders/3/relationships/tags")
            .await
            .is_empty()
    );
    // The request's filters apply on top of the relation.
    let filtered = related_ids(
        &app,
        "orders/1/relationships/tags?filters=%7B%22field%22%3A%22name%22%2C%22operator%22%3A%22equal%22%2C%22value%22%3A%22red%22%7D",
    );
    assert_eq!(filtered.await, ["1"]);
    let (status, _, csv) = send(
        &app,
        get("/forest/orders/1/relationships/tags.csv?timezone=UTC&fields[tags]=id,name&header=id,name"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{csv}");
    assert_eq!(csv, json!("id,name\n1,red\n2,blue\n"));
    // To-one relations have no list route.
    let (status, _, _) = send(
        &app,
        get("/forest/orders/1/relationships/customer?timezone=UTC"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn associate_dissociate_and_delete(backend: Backend) {
    let (_db, app) = crm(backend).await;
    let associate = |path: &str, id: &str| {
        with_body(
            "POST",
            &format!("/forest/{path}?timezone=UTC"),
            &json!({"data": [{"type": "x", "id": id}]}),
        )
    };
    let dissociate =
        |path: &str, body: Json| with_body("DELETE", &format!("/forest/{path}"), &body);

    // OneToMany: associate moves the order, dissociate nulls its key, delete removes it.
    let (status, _, body) = send(&app, associate("customers/2/relationships/orders", "1")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        related_ids(&app, "customers/2/relationships/orders").await,
        ["1", "3"]
    );
    let (status, _, body) = send(
        &app,
        dissociate("customers/2/relationships/orders?timezone=UTC", ids(&["1"])),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        attribute(&app, "orders", "1", "customer_id").await,
        Json::Null
    );
    // A selected record that is not related to the parent is left alone.
    send(
        &app,
        dissociate("customers/1/relationships/orders?timezone=UTC", ids(&["3"])),
    )
    .await;
    assert_eq!(attribute(&app, "orders", "3", "customer_id").await, 2);
    let (status, _, body) = send(
        &app,
        dissociate(
            "customers/2/relationships/orders?timezone=UTC&delete=true",
            ids(&["3"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let gone = send(&app, get("/forest/orders/3?timezone=UTC")).await;
    assert_eq!(gone.0, StatusCode::NOT_FOUND);

    let (status, _, body) = send(
        &app,
        dissociate("customers/1/relationships/orders?timezone=UTC", ids(&[])),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        envelope("ValidationError", "Expected no empty id list", 400)
    );

    // ManyToMany: associate creates a through row, dissociate deletes it, delete also removes
    // the foreign record.
    let (status, _, body) = send(&app, associate("orders/2/relationships/tags", "3")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        related_ids(&app, "orders/2/relationships/tags").await,
        ["2", "3"]
    );
    let (status, _, body) = send(
        &app,
        dissociate("orders/1/relationships/tags?timezone=UTC", ids(&["2"])),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        related_ids(&app, "orders/1/relationships/tags").await,
        ["1"]
    );
    assert_eq!(
        related_ids(&app, "orders/2/relationships/tags").await,
        ["2", "3"]
    );
    let (status, _, body) = send(
        &app,
        dissociate(
            "orders/2/relationships/tags?timezone=UTC&delete=true",
            ids(&["3"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        related_ids(&app, "orders/2/relationships/tags").await,
        ["2"]
    );
    let tags = send(&app, get("/forest/tags/count?timezone=UTC")).await;
    assert_eq!(tags.2, json!({"count": 2}));
}

async fn update_to_one(backend: Backend) {
    let (_db, app) = crm(backend).await;
    let set = |path: &str, data: Json| {
        with_body(
            "PUT",
            &format!("/forest/{path}?timezone=UTC"),
            &json!({ "data": data }),
        )
    };
    // ManyToOne: the parent's key.
    let (status, _, body) = send(
        &app,
        set(
            "orders/3/relationships/customer",
            json!({"type": "customers", "id": "1"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(attribute(&app, "orders", "3", "customer_id").await, 1);
    let (status, _, _) = send(&app, set("orders/3/relationships/customer", Json::Null)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        attribute(&app, "orders", "3", "customer_id").await,
        Json::Null
    );

    // OneToOne: the previous holder is unlinked before the new one is linked.
    let invoice = json!({"type": "invoices", "id": "2"});
    let (status, _, body) = send(&app, set("orders/1/relationships/invoice", invoice)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(attribute(&app, "invoices", "2", "order_id").await, 1);
    assert_eq!(
        attribute(&app, "invoices", "1", "order_id").await,
        Json::Null
    );
    let (status, _, _) = send(&app, set("orders/1/relationships/invoice", Json::Null)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        attribute(&app, "invoices", "2", "order_id").await,
        Json::Null
    );
}

/// `PUT /{c}/{id}/relationships/{field}/{index}` replaces one element of an array column; arrays
/// are PostgreSQL's only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_field_update_postgres() {
    let db = TestDb::new(Backend::Postgres).await;
    db.execute(
        "CREATE TABLE docs (id SERIAL PRIMARY KEY, items JSONB[]);
         INSERT INTO docs (items) VALUES (ARRAY['{\"a\":1}'::jsonb, '{\"a\":2}'::jsonb]);",
    )
    .await;
    let app = app_over(&db).await;
    let body = json!({"data": {"attributes": {"a": 3}}});
    let (status, _, response) = send(
        &app,
        with_body(
            "PUT",
            "/forest/docs/1/relationships/items/1?timezone=UTC",
            &body,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{response}");
    assert_eq!(
        attribute(&app, "docs", "1", "items").await,
        json!([{"a": 1}, {"a": 3}])
    );
    let (status, _, response) = send(
        &app,
        with_body(
            "PUT",
            "/forest/docs/1/relationships/items/5?timezone=UTC",
            &body,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        response,
        envelope("ValidationError", "Field 'items' is too short", 400)
    );
}

on_all_backends!(
    create_and_update,
    list_and_count_related,
    associate_dissociate_and_delete,
    update_to_one
);
