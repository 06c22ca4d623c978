//! The flattener plugin (plugins/flattener) served the way `canopy serve --plugins` serves it, on
//! the demo database with the demo's `flattener.toml`: `address@@@city` and friends in lists and
//! in the schema file, the filtering and sorting rules of protocol §10 (column fields neither
//! filterable nor sortable, relation fields like their column), creates and updates written back
//! into the JSON column, read-only fields, and options that refuse the load.
//!
//! SQLite only: the demo's seed is SQLite SQL, and the plugin sits above the datasource.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use canopy::app::Served;
use serde_json::{Value as Json, json};

use crate::harness::{attribute, filters, plugin_config, served, with_body};
use crate::http::{get, send};

/// The options file the demo loads.
fn demo_options() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/flattener/flattener.toml");
    std::fs::read_to_string(path).unwrap()
}

/// A temporary directory: the demo database, the schema file, and a plugin directory holding
/// `flattener.wasm` with the given options file.
struct Demo {
    dir: PathBuf,
    plugins: PathBuf,
    url: String,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Demo {
    async fn new(options_toml: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("canopy-flattener-{}", uuid::Uuid::new_v4()));
        let plugins = dir.join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        let url = canopy::app::seed_demo(&dir.join("shop.sqlite"))
            .await
            .unwrap();
        let built = Path::new(env!("CANOPY_TEST_PLUGINS")).join("flattener.wasm");
        std::fs::copy(built, plugins.join("flattener.wasm")).unwrap();
        std::fs::write(plugins.join("flattener.toml"), options_toml).unwrap();
        Self { dir, plugins, url }
    }

    fn schema_path(&self) -> PathBuf {
        self.dir.join(".forestadmin-schema.json")
    }

    async fn serve(&self) -> Result<(Arc<Served>, Router), String> {
        served(plugin_config(&self.url, &self.plugins, &self.schema_path())).await
    }

    /// One text from the database itself.
    async fn text(&self, sql: &str) -> Option<String> {
        let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
        let value: Option<String> = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        value
    }

    /// The JSON of a column of one row, parsed.
    async fn json(&self, sql: &str) -> Json {
        self.text(sql)
            .await
            .map_or(Json::Null, |t| serde_json::from_str(&t).unwrap())
    }

    /// A field of a collection in the schema file written at start.
    fn schema_field(&self, collection: &str, field: &str) -> Option<Json> {
        let file: Json =
            serde_json::from_str(&std::fs::read_to_string(self.schema_path()).unwrap()).unwrap();
        file["collections"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == collection)?["fields"]
            .as_array()?
            .iter()
            .find(|f| f["field"] == field)
            .cloned()
    }
}

/// `field Operator value` as the list route's `filters` parameter, URL-encoded.
fn filter(field: &str, operator: &str, value: &Json) -> String {
    filters(&json!({"field": field, "operator": operator, "value": value}))
}

#[tokio::test]
async fn lists_show_the_flattened_fields_and_the_schema_hides_the_json_column() {
    let demo = Demo::new(&demo_options()).await;
    let (_served, app) = demo.serve().await.unwrap();
    let (status, _, body) = send(
        &app,
        get(
            "/forest/customers?timezone=UTC&fields[customers]=id,address@@@street,address@@@city,\
             address@@@zip&sort=id&page[size]=2",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "address@@@city"), ["Lyon", "Berlin"]);
    assert_eq!(
        attribute(&body, "address@@@street"),
        ["1 Main Street", "2 Main Street"]
    );
    assert_eq!(attribute(&body, "address@@@zip"), ["00007", "00014"]);

    let city = demo.schema_field("customers", "address@@@city").unwrap();
    assert_eq!(city["type"], "String", "{city}");
    assert_eq!(city["isReadOnly"], false, "{city}");
    assert_eq!(city["isFilterable"], false, "{city}");
    assert_eq!(city["isSortable"], false, "{city}");
    // flattenJsonColumn hides the column itself; keepOriginalColumn keeps it.
    assert_eq!(demo.schema_field("customers", "address"), None);
    assert!(demo.schema_field("orders", "shipping_address").is_some());
    let shipping = demo
        .schema_field("orders", "shipping_address@@@city")
        .unwrap();
    assert_eq!(shipping["isReadOnly"], true, "{shipping}");

    // The relation fields of orders: the customer's columns, filterable and sortable.
    let email = demo.schema_field("orders", "customer@@@email").unwrap();
    assert_eq!(email["type"], "String", "{email}");
    assert_eq!(email["isSortable"], true, "{email}");
    assert_eq!(email["isFilterable"], true, "{email}");
    let (status, _, body) = send(
        &app,
        get(
            "/forest/orders?timezone=UTC&fields[orders]=id,customer@@@email,customer@@@first_name,\
             shipping_address@@@city&sort=id&page[size]=2",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Order i belongs to customer 1 + (i * 31 % 1000); its shipping city cycles on i % 3.
    assert_eq!(
        attribute(&body, "customer@@@email"),
        ["customer32@example.com", "customer63@example.com"]
    );
    assert_eq!(attribute(&body, "customer@@@first_name"), ["Cleo", "Dave"]);
    assert_eq!(
        attribute(&body, "shipping_address@@@city"),
        ["Lyon", "Berlin"]
    );
}

#[tokio::test]
async fn column_fields_refuse_filters_and_sorts_and_relation_fields_accept_them() {
    let demo = Demo::new(&demo_options()).await;
    let (_served, app) = demo.serve().await.unwrap();
    let (status, _, body) = send(
        &app,
        get(&format!(
            "/forest/customers?timezone=UTC&fields[customers]=id&filters={}",
            filter("address@@@city", "Equal", &json!("Paris"))
        )),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id&sort=address@@@city"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, _, body) = send(
        &app,
        get(&format!(
            "/forest/orders?timezone=UTC&fields[orders]=id,customer@@@email&sort=id&filters={}",
            filter(
                "customer@@@email",
                "Equal",
                &json!("customer32@example.com")
            )
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let emails = attribute(&body, "customer@@@email");
    assert!(!emails.is_empty());
    assert!(
        emails.iter().all(|e| *e == "customer32@example.com"),
        "{body}"
    );
    let (status, _, body) = send(
        &app,
        get(
            "/forest/orders?timezone=UTC&fields[orders]=id,customer@@@email\
             &sort=-customer@@@email&page[size]=1",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Descending as text: `@` sorts after the digits, so customer9@ comes first.
    assert_eq!(
        attribute(&body, "customer@@@email"),
        ["customer9@example.com"]
    );
}

/// The flattener's docs say how to make a column field filterable: `emulate_field_filtering`
/// from another plugin (here `applier`), loaded before or after the flattener (file-name order),
/// since the emulated operators sit above every computed field of the stack.
#[tokio::test]
async fn another_plugin_makes_a_column_field_filterable_in_either_load_order() {
    for name in ["aa_filtering", "zz_filtering"] {
        let demo = Demo::new(&demo_options()).await;
        std::fs::copy(
            Path::new(env!("CANOPY_TEST_PLUGINS")).join("applier.wasm"),
            demo.plugins.join(format!("{name}.wasm")),
        )
        .unwrap();
        std::fs::write(
            demo.plugins.join(format!("{name}.toml")),
            "[options]\nemulateFiltering = [{ collection = \"customers\", field = \"address@@@city\" }]\n",
        )
        .unwrap();
        let (_served, app) = demo.serve().await.unwrap();
        let city = demo.schema_field("customers", "address@@@city").unwrap();
        assert_eq!(city["isFilterable"], true, "{name}: {city}");
        let (status, _, body) = send(
            &app,
            get(&format!(
                "/forest/customers?timezone=UTC&fields[customers]=id,address@@@city&sort=id\
                 &page[size]=3&filters={}",
                filter("address@@@city", "Equal", &json!("Berlin"))
            )),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(
            attribute(&body, "address@@@city"),
            ["Berlin", "Berlin", "Berlin"],
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_create_writes_the_flattened_fields_into_the_json_column() {
    let demo = Demo::new(&demo_options()).await;
    let (_served, app) = demo.serve().await.unwrap();
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {
                "first_name": "Zoe", "last_name": "Flat", "email": "zoe.flat@example.com",
                "created_at": "2024-01-02T03:04:05.000Z",
                "address@@@city": "Rome", "address@@@zip": "00100"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        demo.json("SELECT address FROM customers WHERE email = 'zoe.flat@example.com'")
            .await,
        json!({"city": "Rome", "zip": "00100"})
    );
}

#[tokio::test]
async fn an_update_merges_the_flattened_fields_into_the_current_json_value() {
    let demo = Demo::new(&demo_options()).await;
    let (_served, app) = demo.serve().await.unwrap();
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/customers/1?timezone=UTC",
            &json!({"data": {"type": "customers", "id": "1",
                "attributes": {"address@@@city": "Nice"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Street and zip kept: the patch is merged into the record's address.
    assert_eq!(
        demo.json("SELECT address FROM customers WHERE id = 1")
            .await,
        json!({"street": "1 Main Street", "city": "Nice", "zip": "00007"})
    );
    // Other customers untouched.
    assert_eq!(
        demo.json("SELECT address FROM customers WHERE id = 2")
            .await,
        json!({"street": "2 Main Street", "city": "Berlin", "zip": "00014"})
    );
    // Updating through a relation field writes the customer.
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/orders/1?timezone=UTC",
            &json!({"data": {"type": "orders", "id": "1",
                "attributes": {"customer@@@first_name": "Renamed"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        demo.text("SELECT first_name FROM customers WHERE id = 32")
            .await
            .as_deref(),
        Some("Renamed")
    );
}

#[tokio::test]
async fn readonly_flattened_fields_are_not_written() {
    let demo = Demo::new(&demo_options()).await;
    let (_served, app) = demo.serve().await.unwrap();
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/orders/1?timezone=UTC",
            &json!({"data": {"type": "orders", "id": "1",
                "attributes": {"shipping_address@@@city": "Oslo"}}}),
        ),
    )
    .await;
    assert!(status.is_client_error(), "{status} {body}");
    assert_eq!(
        demo.json("SELECT shipping_address FROM orders WHERE id = 1")
            .await,
        json!({"city": "Lyon"})
    );

    // readonly on a relation: the imported field is read-only.
    let options = "[[options.orders.flattenRelation]]\nrelationName = \"customer\"\n\
                   include = [\"email\"]\nreadonly = true\n";
    let demo = Demo::new(options).await;
    let (_served, _app) = demo.serve().await.unwrap();
    let email = demo.schema_field("orders", "customer@@@email").unwrap();
    assert_eq!(email["isReadOnly"], true, "{email}");
}

#[tokio::test]
async fn bad_options_refuse_the_load_with_a_clear_message() {
    let cases = [
        (
            "[[options.customers.flattenJsonColumn]]\ncolumnName = \"address\"\n",
            "customers.flattenJsonColumn[0]: options.columnName and options.columnType are \
             required.",
        ),
        (
            "[[options.customers.flattenColumn]]\ncolumnName = \"address\"\n",
            "'customers.address' cannot be flattened using flattenColumn without columnType",
        ),
        (
            "[[options.customers.flattenColumn]]\ncolumnName = \"email\"\n",
            "(primitive type 'String' not supported)",
        ),
        (
            "[[options.customers.flattenJsonColumn]]\ncolumnName = \"address\"\n\
             columnType = { city = \"String\" }\nlevel = 0\n",
            "options.level must be greater than 0.",
        ),
        (
            "[[options.customers.flattenColumn]]\ncolumnName = \"address\"\n\
             columnType = { city = \"String\" }\nexclude = [\"city\"]\n",
            "(no fields match level/include/exclude)",
        ),
        (
            "[[options.customers.flattenRelation]]\nrelationName = \"orders\"\n",
            "'customers.orders' is not a ManyToOne or OneToOne relation",
        ),
        (
            "[[options.orders.flattenRelation]]\nrelationName = \"total\"\n",
            "'orders.total' is a column, not a relation",
        ),
        (
            "[[options.orders.flattenRelation]]\n",
            "options.relationName is required.",
        ),
        (
            "[[options.customers.flattenColumn]]\ncolumName = \"address\"\n",
            "unknown option 'columName'",
        ),
    ];
    for (options, expected) in cases {
        let demo = Demo::new(options).await;
        let Err(error) = demo.serve().await else {
            panic!("loaded with {options}")
        };
        assert!(
            error.contains(expected) && error.contains("flattener"),
            "{options}\n→ {error}"
        );
    }
}

#[tokio::test]
async fn a_use_entry_applies_the_functions_to_its_collection() {
    let options = "[[use]]\ncollection = \"customers\"\n\
                   [use.options.flattenJsonColumn]\ncolumnName = \"address\"\n\
                   columnType = { city = \"String\" }\nkeepOriginalColumn = true\n";
    let demo = Demo::new(options).await;
    let (_served, app) = demo.serve().await.unwrap();
    let (status, _, body) = send(
        &app,
        get(
            "/forest/customers?timezone=UTC&fields[customers]=id,address,address@@@city\
             &sort=id&page[size]=1",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "address@@@city"), ["Lyon"]);
    assert_eq!(
        attribute(&body, "address")[0],
        json!({"street": "1 Main Street", "city": "Lyon", "zip": "00007"})
    );
    assert_eq!(demo.schema_field("customers", "address@@@street"), None);
}
