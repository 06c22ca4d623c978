//! The real compiled plugins served the way `canopy serve --plugins` serves them (`app::Served`):
//! every customization kind of the shop example driven through the `/forest` routes, the admin
//! reload route, a hot swap under 16 concurrent request loops, failed reloads that keep the
//! served stack, and `--watch`; and keys read by a plugin (`keys`) exactly as the routes serve
//! them.
//!
//! On all three databases: SQLite through `canopy demo`'s own seeding (`examples/shop/seed.sql`),
//! PostgreSQL and MariaDB through the same rows in their dialects (`seed.postgres.sql`,
//! `seed.mysql.sql`). PostgreSQL's NUMERIC money crosses to the plugin as text (`"12.30"`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::app::{Optimized, Served};
use canopy::config::Config;
use canopy::http::reload::Reload as _;
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::{Value as Json, json};
use sqlx::Connection as _;

use crate::harness::{ENV_SECRET, attribute, ids, plugin_config, post, served};
use crate::http::{get, send};

const SEED_POSTGRES: &str = include_str!("../../examples/shop/seed.postgres.sql");
const SEED_MYSQL: &str = include_str!("../../examples/shop/seed.mysql.sql");

fn built(name: &str) -> PathBuf {
    Path::new(env!("CANOPY_TEST_PLUGINS")).join(format!("{name}.wasm"))
}

/// A temporary directory for one test (the schema file and the plugin directory) and its
/// database.
pub(crate) struct Shop {
    pub(crate) dir: PathBuf,
    pub(crate) plugins: PathBuf,
    pub(crate) url: String,
    pub(crate) backend: Backend,
    /// The server database (dropped with the test); `None` for the demo's SQLite file.
    db: Option<TestDb>,
}

impl Drop for Shop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Shop {
    /// The demo database, and a plugin directory holding `shop.wasm` (the example). On SQLite
    /// the database is built by `canopy demo`'s seeding; elsewhere by the dialect's seed file.
    pub(crate) async fn new(backend: Backend) -> Self {
        let shop = Self::seeded(backend).await;
        shop.install("shop_plugin", "shop");
        shop
    }

    /// The demo database and an empty plugin directory.
    pub(crate) async fn seeded(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let mut shop = Self::in_dir(backend, None);
                shop.url = canopy::app::seed_demo(&shop.dir.join("shop.sqlite"))
                    .await
                    .unwrap();
                shop
            }
            Backend::Postgres | Backend::MySql => {
                let db = TestDb::new(backend).await;
                db.execute(if backend == Backend::Postgres {
                    SEED_POSTGRES
                } else {
                    SEED_MYSQL
                })
                .await;
                Self::in_dir(backend, Some(db))
            }
        }
    }

    /// An empty database and plugin directory.
    async fn empty(backend: Backend) -> Self {
        Self::in_dir(backend, Some(TestDb::new(backend).await))
    }

    fn in_dir(backend: Backend, db: Option<TestDb>) -> Self {
        let dir =
            std::env::temp_dir().join(format!("canopy-plugins-http-{}", uuid::Uuid::new_v4()));
        let plugins = dir.join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        Self {
            dir,
            plugins,
            url: db.as_ref().map(|db| db.url.clone()).unwrap_or_default(),
            backend,
            db,
        }
    }

    /// Copies a built plugin into the directory as `<as_name>.wasm`, replacing it atomically (a
    /// rename, as a deployment would).
    pub(crate) fn install(&self, built_name: &str, as_name: &str) {
        self.install_file(&built(built_name), as_name);
    }

    /// [`Self::install`] for a component built elsewhere (the Python plugins).
    pub(crate) fn install_file(&self, built: &Path, as_name: &str) {
        let staging = self.dir.join(format!("{as_name}.wasm.new"));
        std::fs::copy(built, &staging).unwrap();
        std::fs::rename(&staging, self.plugins.join(format!("{as_name}.wasm"))).unwrap();
    }

    pub(crate) fn schema_path(&self) -> PathBuf {
        self.dir.join(".forestadmin-schema.json")
    }

    pub(crate) fn config(&self) -> Config {
        plugin_config(&self.url, &self.plugins, &self.schema_path())
    }

    /// What `canopy serve --plugins` serves.
    pub(crate) async fn serve(&self) -> Result<(Arc<Served>, Router), String> {
        served(self.config()).await
    }

    /// One number from the database itself (`sql` is a query of one value), to compare with what
    /// the routes answer.
    pub(crate) async fn scalar(&self, sql: &str) -> f64 {
        match self.backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(&format!("SELECT CAST(({sql}) AS REAL)"))
                    .fetch_one(&mut c)
                    .await
                    .unwrap()
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(&format!("SELECT CAST(({sql}) AS DOUBLE PRECISION)"))
                    .fetch_one(&mut c)
                    .await
                    .unwrap()
            }
            Backend::MySql => {
                let mut c = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(&format!("SELECT CAST(({sql}) AS DOUBLE)"))
                    .fetch_one(&mut c)
                    .await
                    .unwrap()
            }
        }
    }

    /// One text value from the database itself.
    pub(crate) async fn text(&self, sql: &str) -> String {
        match self.backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
            }
            Backend::MySql => {
                // The test databases' binary collation makes text columns VARBINARY to sqlx.
                let mut c = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
                let bytes: Vec<u8> = sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap();
                String::from_utf8(bytes).unwrap()
            }
        }
    }

    /// Runs SQL on the database (DDL and rows for a test); the demo's SQLite file has no test
    /// database to go through.
    pub(crate) async fn execute(&self, sql: &str) {
        match &self.db {
            Some(db) => db.execute(sql).await,
            None => {
                let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
            }
        }
    }
}

fn selection(collection: &str, ids: &[&str], values: &Json) -> Json {
    json!({"data": {"attributes": {"collection_name": collection, "ids": ids, "values": values}}})
}

async fn computed_fields_of_the_shop_plugin_are_served_through_relations(backend: Backend) {
    let shop = Shop::new(backend).await;
    // Multi-byte characters and an empty cell: the packed offsets are bytes, and an empty cell
    // is not a null one.
    shop.execute("UPDATE customers SET first_name = 'Zoë', last_name = '' WHERE id = 2")
        .await;
    let (_served, app) = shop.serve().await.unwrap();
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,full_name&sort=id&page[size]=3"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        attribute(&body, "full_name"),
        ["Boris Customer1", "Zoë ", "Dave Customer3"]
    );
    // orders.customer_name depends on customer:full_name, a computed field through a relation.
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&fields[orders]=id,customer_name&sort=id&page[size]=2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        attribute(&body, "customer_name"),
        ["Cleo Customer32", "Dave Customer63"]
    );
    // And the schema file describes them, with the actions and segments.
    let file: Json =
        serde_json::from_str(&std::fs::read_to_string(shop.schema_path()).unwrap()).unwrap();
    let customers = file["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "customers")
        .unwrap();
    let full_name = customers["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "full_name")
        .unwrap_or_else(|| panic!("{customers}"));
    assert_eq!(full_name["type"], "String");
    assert_eq!(full_name["isReadOnly"], true);
    let names = |key: &str| -> Vec<Json> {
        customers[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].clone())
            .collect()
    };
    assert_eq!(
        names("actions"),
        [json!("Mark as VIP"), json!("Offer a coupon")]
    );
    assert_eq!(names("segments"), [json!("VIP customers")]);
}

async fn the_shop_plugin_hook_refuses_bad_emails_and_lowercases_good_ones(backend: Backend) {
    let shop = Shop::new(backend).await;
    let (_served, app) = shop.serve().await.unwrap();
    let create = |email: &str| {
        post(
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"first_name": "Zoe",
                "last_name": "Hook", "email": email, "created_at": "2024-01-02T03:04:05.000Z"}}}),
        )
    };
    let (status, _, body) = send(&app, create("not-an-email")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["errors"][0]["detail"],
        "`not-an-email` is not an email address"
    );
    let (status, _, body) = send(&app, create("Zoe.HOOK@Example.COM")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["email"], "zoe.hook@example.com");
}

async fn the_shop_plugin_segments_and_searches_filter_the_lists(backend: Backend) {
    let shop = Shop::new(backend).await;
    let (_served, app) = shop.serve().await.unwrap();
    let count = |uri: &str| {
        let app = app.clone();
        let uri = uri.to_owned();
        async move {
            let (status, _, body) = send(&app, get(&uri)).await;
            assert_eq!(status, StatusCode::OK, "{uri}: {body}");
            body["count"].as_f64().unwrap_or_else(|| panic!("{body}"))
        }
    };
    // Static segment.
    assert_eq!(
        count("/forest/customers/count?timezone=UTC&segment=VIP%20customers").await,
        shop.scalar("SELECT COUNT(*) FROM customers WHERE is_vip")
            .await
    );
    // Dynamic segment: computed from an aggregate the plugin asks the host for.
    assert_eq!(
        count("/forest/orders/count?timezone=UTC&segment=Above%20average").await,
        shop.scalar("SELECT COUNT(*) FROM orders WHERE total > (SELECT AVG(total) FROM orders)")
            .await
    );
    // Field selection: names and email only.
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&search=Customer10&fields[customers]=id,last_name&page[size]=50"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let names = attribute(&body, "last_name");
    assert_eq!(names.len(), 12, "Customer10, 100–109, 1000: {body}");
    assert!(
        names
            .iter()
            .all(|n| n.as_str().unwrap().contains("Customer10"))
    );
    // Search handler: an id, a status, anything else nothing.
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&search=42&fields[orders]=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "id"), [json!(42)]);
    assert_eq!(
        count("/forest/orders/count?timezone=UTC&search=PAID").await,
        shop.scalar("SELECT COUNT(*) FROM orders WHERE status = 'paid'")
            .await
    );
    assert_eq!(
        count("/forest/orders/count?timezone=UTC&search=nothing").await,
        0.0
    );
    // Extended search is refused on a collection with a search handler.
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&search=paid&searchExtended=true&fields[orders]=id"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}

async fn the_shop_plugin_actions_run_with_their_forms_for_each_scope(backend: Backend) {
    let shop = Shop::new(backend).await;
    let (_served, app) = shop.serve().await.unwrap();
    // Single, form load: a dynamic value from the selected record; Reason hidden at Amount 10.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/0/offer-a-coupon/hooks/load?timezone=UTC",
            &selection("customers", &["1"], &json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let fields: Vec<&Json> = body["fields"].as_array().unwrap().iter().collect();
    let labels: Vec<&Json> = fields.iter().map(|f| &f["field"]).collect();
    assert_eq!(
        labels,
        [&json!("Amount"), &json!("Kind"), &json!("Message")],
        "{body}"
    );
    assert_eq!(fields[0]["value"], 10, "{body}");
    assert_eq!(fields[0]["isRequired"], true);
    assert_eq!(fields[1]["enums"], json!(["Fixed", "Percent"]), "{body}");
    assert_eq!(fields[2]["value"], "Hello Boris, here is a gift.");
    // Change: above the threshold, Reason appears.
    let change = json!({"data": {"attributes": {"collection_name": "customers", "ids": ["1"],
        "changed_field": "Amount",
        "fields": [{"field": "Amount", "value": 80}, {"field": "Kind", "value": "Fixed"},
                   {"field": "Message", "value": "Hi"}]}}});
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/0/offer-a-coupon/hooks/change?timezone=UTC",
            &change,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["field"] == "Reason"),
        "{body}"
    );
    // Execute: success with HTML.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/0/offer-a-coupon?timezone=UTC",
            &selection("customers", &["1"], &json!({"Amount": 20, "Kind": "Fixed"})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["success"],
        "Coupon of 20 (Fixed) sent to Boris Customer1"
    );
    let email = shop_email(&shop, 1).await;
    assert_eq!(body["html"], format!("<p>Sent to <b>{email}</b></p>"));
    // Bulk: writes through the host, invalidates a relation.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/1/mark-as-vip?timezone=UTC",
            &selection("customers", &["3", "4"], &json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"success": "2 customers are now VIP", "refresh": {"relationships": ["orders"]}})
    );
    assert_eq!(
        shop.scalar("SELECT COUNT(*) FROM customers WHERE id IN (3, 4) AND is_vip")
            .await,
        2.0
    );
    // Global with a generated file.
    let request = post(
        "/forest/_actions/orders/0/export-orders?timezone=UTC",
        &selection("orders", &[], &json!({})),
    );
    let response = tower::ServiceExt::oneshot(app.clone(), request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "text/csv");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let csv = String::from_utf8(bytes.to_vec()).unwrap();
    assert!(csv.starts_with("id,status,total\n1,paid,"), "{csv}");
    assert_eq!(csv.lines().count(), 101, "{csv}");
    // The total the plugin read is the one the routes serve: PostgreSQL's NUMERIC as its text
    // (`"123.40"`, the scale kept), MariaDB's and SQLite's as a number.
    let (status, _, body) = send(&app, get("/forest/orders/1?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let total = &body["data"]["attributes"]["total"];
    let served = js_text(total);
    assert_eq!(backend == Backend::Postgres, total.is_string(), "{body}");
    assert_eq!(
        csv.lines().nth(1),
        Some(format!("1,paid,{served}").as_str()),
        "{csv}"
    );
}

async fn action_forms_carry_separators_html_blocks_rows_and_pages(backend: Backend) {
    let shop = Shop::new(backend).await;
    shop.install("forms", "forms");
    let (_served, app) = shop.serve().await.unwrap();
    // A static form: its layout is in the schema file, values moved to defaults.
    let file: Json =
        serde_json::from_str(&std::fs::read_to_string(shop.schema_path()).unwrap()).unwrap();
    let products = file["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "products")
        .unwrap();
    let restock = products["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "Restock")
        .unwrap();
    assert_eq!(
        restock["layout"],
        json!([
            {"component": "htmlBlock", "content": "<p>Restock the selected products</p>"},
            {"component": "separator"},
            {"component": "row", "fields": [
                {"component": "input", "fieldId": "Count"},
                {"component": "input", "fieldId": "Supplier"},
            ]},
        ]),
        "{restock}"
    );
    let fields: Vec<&Json> = restock["fields"].as_array().unwrap().iter().collect();
    assert_eq!(fields.len(), 2, "{restock}");
    assert_eq!(fields[0]["field"], "Count");
    assert_eq!(fields[0]["defaultValue"], 5);
    assert_eq!(restock["hooks"]["load"], false);
    // The same static form from hooks/load, without calling the plugin.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/products/0/restock/hooks/load?timezone=UTC",
            &selection("products", &["1"], &json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["layout"], restock["layout"]);
    assert_eq!(body["fields"][0]["value"], 5, "{body}");
    // A dynamic multi-page form: pages with their button labels, an HTML block computed from a
    // form value (whose field is then watched), a row inside a page.
    let change = json!({"data": {"attributes": {"collection_name": "products", "ids": ["1"],
        "changed_field": "New name",
        "fields": [{"field": "New name", "value": "Lamp"}]}}});
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/products/1/rename/hooks/change?timezone=UTC",
            &change,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["layout"],
        json!([
            {"component": "page", "nextButtonLabel": "Continue", "elements": [
                {"component": "input", "fieldId": "New name"},
                {"component": "htmlBlock", "content": "<p>New name: Lamp</p>"},
            ]},
            {"component": "page", "nextButtonLabel": "Done", "previousButtonLabel": "Back",
             "elements": [{"component": "row", "fields": [
                {"component": "input", "fieldId": "Reason"},
                {"component": "input", "fieldId": "Notify"},
            ]}]},
        ]),
        "{body}"
    );
    let ids: Vec<&Json> = body["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["field"])
        .collect();
    assert_eq!(
        ids,
        [&json!("New name"), &json!("Reason"), &json!("Notify")]
    );
    assert_eq!(body["fields"][0]["hook"], "changeHook", "{body}");
    assert_eq!(body["fields"][0]["value"], "Lamp");
    // Execute reads the values of every page.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/products/1/rename?timezone=UTC",
            &selection(
                "products",
                &["2"],
                &json!({"New name": "Lamp", "Notify": true}),
            ),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "\"Product 2\" renamed to \"Lamp\"");
    // A Single action given two records is refused before the plugin runs.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/products/1/rename?timezone=UTC",
            &selection("products", &["2", "3"], &json!({"New name": "Lamp"})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errors"][0]["name"], "ValidationError", "{body}");
}

async fn shop_email(shop: &Shop, id: i64) -> String {
    shop.text(&format!("SELECT email FROM customers WHERE id = {id}"))
        .await
}

async fn the_shop_plugin_charts_answer_on_the_chart_routes(backend: Backend) {
    let shop = Shop::new(backend).await;
    let (_served, app) = shop.serve().await.unwrap();
    let (status, _, body) = send(
        &app,
        get("/forest/_charts/customers/lifetime_value?timezone=UTC&record_id=1"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let expected = shop
        .scalar("SELECT SUM(total) FROM orders WHERE customer_id = 1")
        .await;
    let got = body["countCurrent"]
        .as_f64()
        .unwrap_or_else(|| panic!("{body}"));
    assert!((got - expected).abs() < 1e-6, "{got} vs {expected}");
    let (status, _, body) = send(&app, get("/forest/_charts/orders_by_status?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let entries = body.as_array().unwrap_or_else(|| panic!("{body}"));
    assert_eq!(entries.len(), 5, "{body}");
    let total: f64 = entries.iter().map(|e| e["value"].as_f64().unwrap()).sum();
    assert_eq!(total, 5000.0);
}

async fn a_plugin_that_fails_to_load_stops_the_start_with_its_name(backend: Backend) {
    let shop = Shop::new(backend).await;
    std::fs::write(shop.plugins.join("broken.wasm"), b"not a component").unwrap();
    let Err(error) = shop.serve().await else {
        panic!("a broken plugin must stop the start");
    };
    assert!(error.contains("plugin `broken`"), "{error}");
}

fn admin_reload(secret: Option<&str>) -> Request<Body> {
    let mut request = Request::post("/_canopy/reload");
    if let Some(secret) = secret {
        request = request.header(header::AUTHORIZATION, format!("Bearer {secret}"));
    }
    request.body(Body::empty()).unwrap()
}

async fn a_failed_reload_keeps_serving_the_old_stack(backend: Backend) {
    let shop = Shop::new(backend).await;
    let (served, app) = shop.serve().await.unwrap();
    let full_names =
        "/forest/customers?timezone=UTC&fields[customers]=id,full_name&sort=id&page[size]=1";
    // The admin route wants the env secret.
    let (status, _, _) = send(&app, admin_reload(None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(&app, admin_reload(Some("wrong"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A broken plugin beside the good one: the reload is refused, the old stack still served.
    std::fs::write(shop.plugins.join("broken.wasm"), b"not a component").unwrap();
    let (status, _, body) = send(&app, admin_reload(Some(ENV_SECRET))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["reloaded"], false);
    assert!(
        body["error"].as_str().unwrap().contains("plugin `broken`"),
        "{body}"
    );
    let (status, _, body) = send(&app, get(full_names)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "full_name"), ["Boris Customer1"]);

    // A plugin whose customizations do not apply (another collection's field) is refused too.
    std::fs::remove_file(shop.plugins.join("broken.wasm")).unwrap();
    shop.install("hostile", "zz_hostile");
    std::fs::write(
        shop.plugins.join("zz_hostile.toml"),
        "[options]\ncollection = \"no_such_collection\"\n",
    )
    .unwrap();
    let error = served.reload().await.unwrap_err();
    assert!(error.contains("no_such_collection"), "{error}");
    let (status, _, body) = send(&app, get(full_names)).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Fixed: the reload goes through.
    std::fs::remove_file(shop.plugins.join("zz_hostile.toml")).unwrap();
    let (status, _, body) = send(&app, admin_reload(Some(ENV_SECRET))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["reloaded"], true);
    assert_eq!(body["plugins"], 2);
    // rustc's producers section says the language of both.
    assert_eq!(
        body["languages"],
        json!({"shop": "rust", "zz_hostile": "rust"}),
        "{body}"
    );
    let (status, _, body) = send(
        &app,
        get(
            "/forest/customers?timezone=UTC&fields[customers]=id,full_name,ok&sort=id&page[size]=1",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "ok"), [json!(2)]);
    assert_eq!(attribute(&body, "full_name"), ["Boris Customer1"]);
}

async fn a_hot_swap_under_sixteen_concurrent_request_loops_loses_no_request(backend: Backend) {
    let shop = Shop::new(backend).await;
    let (served, app) = shop.serve().await.unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut loops = Vec::new();
    for _ in 0..16 {
        let (app, stop, done, failed) = (app.clone(), stop.clone(), done.clone(), failed.clone());
        loops.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                // Fields both plugin generations serve.
                let (status, _, body) = send(
                    &app,
                    get("/forest/customers?timezone=UTC&fields[customers]=id,email&page[size]=5"),
                )
                .await;
                if status == StatusCode::OK && body["data"].as_array().is_some_and(|d| d.len() == 5)
                {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    eprintln!("failed request: {status} {body}");
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Three swaps: the shop example, then `hostile`, then the example, then `hostile` again, each
    // replacing shop.wasm in place.
    let mut durations = Vec::new();
    for (i, next) in ["hostile", "shop_plugin", "hostile"]
        .into_iter()
        .enumerate()
    {
        shop.install(next, "shop");
        let started = Instant::now();
        let report = served.reload().await.unwrap();
        durations.push(started.elapsed());
        assert_eq!(report.plugins, 1, "swap {i}");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.await.unwrap();
    }
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("hot swap: {done} requests, {failed} failed, reloads took {durations:?}");
    assert_eq!(failed, 0);
    assert!(done > 16, "the loops ran: {done}");
    // The new plugin's behaviour is visible, the old one's gone.
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,ok&sort=id&page[size]=2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "ok"), [json!(2), json!(4)]);
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,full_name&page[size]=2"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

async fn a_changed_plugin_serves_at_once_on_quick_code_then_on_cranelifts(backend: Backend) {
    let shop = Shop::new(backend).await;
    let (served, app) = shop.serve().await.unwrap();
    let full_names =
        "/forest/customers?timezone=UTC&fields[customers]=id,full_name&sort=id&page[size]=1";
    let full_name = |app: Router| async move {
        let (status, _, body) = send(&app, get(full_names)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        attribute(&body, "full_name")
    };
    // Other bytes, the same code: the reload serves Winch's code at once.
    crate::plugins::change(&shop.plugins.join("shop.wasm"));
    let report = served.reload().await.unwrap();
    assert_eq!(report.quick, ["shop"]);
    assert_eq!(full_name(app.clone()).await, ["Boris Customer1"]);
    // Cranelift's, compiled in the background, is swapped in, and answers the same.
    assert_eq!(served.optimized().await, Some(Optimized::Swapped));
    assert!(served.plugins().quick().is_empty());
    assert_eq!(full_name(app.clone()).await, ["Boris Customer1"]);
    // Unchanged files: nothing compiles, nothing is left to do in the background.
    let report = served.reload().await.unwrap();
    assert!(report.quick.is_empty(), "{:?}", report.quick);
    assert_eq!(served.optimized().await, None);

    // A file added after a quick reload is not loaded by the background swap: only a reload
    // loads what is in the directory.
    crate::plugins::change(&shop.plugins.join("shop.wasm"));
    assert_eq!(served.reload().await.unwrap().quick, ["shop"]);
    shop.install("hostile", "zz_hostile");
    // Bytes no test compiled before: a build whose Cranelift code is in the cache folder would
    // be read from there instead of compiled by Winch.
    crate::plugins::change(&shop.plugins.join("zz_hostile.wasm"));
    assert_eq!(served.optimized().await, Some(Optimized::FilesChanged));
    assert_eq!(served.plugins().plugins.len(), 1);
    assert_eq!(full_name(app.clone()).await, ["Boris Customer1"]);
    // The next reload loads it, and the shop plugin from Cranelift's component in memory.
    let report = served.reload().await.unwrap();
    assert_eq!(report.plugins, 2);
    assert_eq!(report.quick, ["zz_hostile"]);
}

async fn watch_reloads_when_the_plugin_directory_changes(backend: Backend) {
    let shop = Shop::new(backend).await;
    let (served, app) = shop.serve().await.unwrap();
    served.reload_on_change();
    // Give the watcher its first look, then replace the plugin.
    tokio::time::sleep(Duration::from_millis(100)).await;
    shop.install("hostile", "shop");
    let uri = "/forest/customers?timezone=UTC&fields[customers]=id,ok&sort=id&page[size]=1";
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _, body) = send(&app, get(uri)).await;
        if status == StatusCode::OK {
            assert_eq!(attribute(&body, "ok"), [json!(2)]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no reload after the change: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 10: eight concurrent requests on a looping computed field (`hostile`'s `loops`, as
/// `zz_hostile`) while a plain route is asked again and again. The plugin runs at most two calls
/// at once (`concurrency`), so the plain route keeps answering; after four timeouts in a row its
/// circuit breaker opens, the calls still waiting are refused instead of run, and the next ones
/// fail at once, naming the plugin, with none of its handlers called (even the good `ok`), until
/// a reload starts it afresh. SQLite only: the bound is in the plugin runtime, above the data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_plugin_is_bounded_and_its_breaker_opens_while_other_routes_answer() {
    let shop = Shop::new(Backend::Sqlite).await;
    shop.install("hostile", "zz_hostile");
    std::fs::write(
        shop.plugins.join("zz_hostile.toml"),
        "[options]\ncollection = \"customers\"\n[limits]\ncompute_ms = 1500\nconcurrency = 2\n\
         queue_ms = 10000\nbreaker_failures = 4\nbreaker_cooldown_ms = 600000\n",
    )
    .unwrap();
    let (served, app) = shop.serve().await.unwrap();
    let looping = "/forest/customers?timezone=UTC&fields[customers]=id,loops&page[size]=1";
    let detail = |body: &Json| {
        body["errors"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };

    let started = Instant::now();
    let loops: Vec<_> = (0..8)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { send(&app, get(looping)).await })
        })
        .collect();
    // The plain route answers while the eight looping requests run (each in well under the
    // 1.5 s a looping call takes; the p99 is measured by `benches/plugins.rs`).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut slowest = Duration::ZERO;
    while loops.iter().any(|l| !l.is_finished()) {
        let asked = Instant::now();
        let (status, _, body) = send(&app, get("/forest/tags/count?timezone=UTC")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body["count"].as_u64().is_some(), "{body}");
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("plain route beside 8 looping requests: slowest {slowest:?}");
    assert!(slowest < Duration::from_secs(1), "slowest {slowest:?}");

    let (mut timed_out, mut refused) = (0, 0);
    for l in loops {
        let (status, _, body) = l.await.unwrap();
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        let message = detail(&body);
        assert!(message.contains("Plugin `zz_hostile`"), "{message}");
        if message.contains("time limit of 1500 ms") {
            timed_out += 1;
        } else {
            assert!(message.contains("circuit breaker is open"), "{message}");
            refused += 1;
        }
    }
    // Two at a time: two waves of two timeouts opened the breaker, and the calls still waiting
    // were refused. (The first of the second wave to end hands its permit on before the fourth
    // timeout is recorded: that one call may still run.)
    assert!((4..=5).contains(&timed_out), "{timed_out} timed out");
    assert_eq!(timed_out + refused, 8);
    assert!(started.elapsed() < Duration::from_secs(10));

    // Open: the plugin's calls fail at once (a looping call would take 1.5 s), naming it.
    for uri in [
        looping,
        "/forest/customers?timezone=UTC&fields[customers]=id,ok&page[size]=1",
    ] {
        let asked = Instant::now();
        let (status, _, body) = send(&app, get(uri)).await;
        assert!(
            asked.elapsed() < Duration::from_millis(1000),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        let message = detail(&body);
        assert!(
            message.starts_with(
                "Plugin `zz_hostile` is not called for now: its last 4 calls timed out or \
                 crashed, so its circuit breaker is open (next try in "
            ),
            "{message}"
        );
    }
    // The other plugin and the plain routes are untouched.
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,full_name&sort=id&page[size]=1"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "full_name"), ["Boris Customer1"]);

    // A reload starts the plugin afresh: its good handler answers again.
    served.reload().await.unwrap();
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,ok&sort=id&page[size]=1"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(attribute(&body, "ok"), [json!(2)]);
}

/// Issue 21: the first start gives the Admin role `"*"`, stored as the wildcard, so an action a
/// plugin adds on a later reload is the admin's at once (it was a 403
/// `CustomActionTriggerForbiddenError` until granted by hand). A store whose rights were given by
/// name (a first start before the wildcard) keeps them, and a reload that adds an action no role
/// may trigger names it in its report (and warns in the log).
async fn an_action_a_reload_adds_is_the_admins_through_the_wildcard(backend: Backend) {
    let shop = Shop::new(backend).await;
    // The first start serves no plugin: no action at all.
    std::fs::remove_file(shop.plugins.join("shop.wasm")).unwrap();
    let (served, app) = shop.serve().await.unwrap();
    let store = served.platform().store.clone();
    let document = serde_json::to_value(store.environment_document().await.unwrap()).unwrap();
    assert!(
        document["collections"]["*"]["actions"]["*"]["triggerEnabled"]["roles"].is_array(),
        "{document}"
    );
    let mark = "/forest/_actions/customers/1/mark-as-vip?timezone=UTC";
    let (status, _, body) = send(
        &app,
        post(mark, &selection("customers", &["3"], &json!({}))),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no such action yet: {body}");

    shop.install("shop_plugin", "shop");
    let report = served.reload().await.unwrap();
    assert!(
        report.untriggerable.is_empty(),
        "{:?}",
        report.untriggerable
    );
    let (status, _, body) = send(
        &app,
        post(mark, &selection("customers", &["3"], &json!({}))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "1 customers are now VIP");

    // Rights by name, as an earlier first start gave them: the new actions are nobody's.
    let admin = store.role_by_name("Admin").await.unwrap().unwrap().id;
    let by_name: canopy::platform::EnvironmentPermissions = serde_json::from_value(json!({
        "collections": {"customers": {
            "collection": {"browseEnabled": {"roles": [admin]}, "readEnabled": {"roles": [admin]}},
            "actions": {}}}
    }))
    .unwrap();
    store
        .set_environment_document(&canopy::platform::Actor::System, &by_name)
        .await
        .unwrap();
    std::fs::remove_file(shop.plugins.join("shop.wasm")).unwrap();
    served.reload().await.unwrap();
    shop.install("shop_plugin", "shop");
    let report = served.reload().await.unwrap();
    assert!(
        report
            .untriggerable
            .contains(&"customers.Mark as VIP".to_owned()),
        "{:?}",
        report.untriggerable
    );
    let (status, _, body) = send(
        &app,
        post(mark, &selection("customers", &["4"], &json!({}))),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["errors"][0]["name"],
        "CustomActionTriggerForbiddenError"
    );
}

on_all_backends!(
    an_action_a_reload_adds_is_the_admins_through_the_wildcard,
    computed_fields_of_the_shop_plugin_are_served_through_relations,
    the_shop_plugin_hook_refuses_bad_emails_and_lowercases_good_ones,
    the_shop_plugin_segments_and_searches_filter_the_lists,
    the_shop_plugin_actions_run_with_their_forms_for_each_scope,
    action_forms_carry_separators_html_blocks_rows_and_pages,
    the_shop_plugin_charts_answer_on_the_chart_routes,
    a_plugin_that_fails_to_load_stops_the_start_with_its_name,
    a_failed_reload_keeps_serving_the_old_stack,
    a_hot_swap_under_sixteen_concurrent_request_loops_loses_no_request,
    a_changed_plugin_serves_at_once_on_quick_code_then_on_cranelifts,
    watch_reloads_when_the_plugin_directory_changes,
    keys_read_by_a_plugin_are_the_ids_the_routes_serve,
);

/// A served value as JavaScript's `String(value)` writes it (strings as they are, integral
/// numbers without a fraction): how a packed id or a CSV cell shows it.
fn js_text(value: &Json) -> String {
    match value {
        Json::String(text) => text.clone(),
        Json::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap();
            if f.fract() == 0.0 {
                format!("{}", f as i64)
            } else {
                f.to_string()
            }
        }
        other => other.to_string(),
    }
}

/// What the `keys` plugin's `Round trip` action answers.
async fn round_trip(app: &Router, collection: &str) -> Json {
    let (status, _, body) = send(
        app,
        post(
            &format!("/forest/_actions/{collection}/0/round-trip?timezone=UTC"),
            &selection(collection, &[], &json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{collection}: {body}");
    serde_json::from_str(body["success"].as_str().unwrap_or_else(|| panic!("{body}"))).unwrap()
}

/// Keys whose wire form is text reach a plugin exactly, as the list route serves them: a
/// PostgreSQL decimal key keeps its scale (`12.30`, where an `f64` made it `12.3`), a bigint past
/// 2^53 its last digit on PostgreSQL and MariaDB, a binary key crosses as hex (not JSON), through
/// `collections.list` and in a computed field's batch. Given back as they came, in an `In` filter
/// they find their records and written into another column they store the same value (the
/// binary one then served as a data URI, that column's form). MariaDB and SQLite decimals and
/// SQLite bigints are numbers on the wire, and cross as numbers.
async fn keys_read_by_a_plugin_are_the_ids_the_routes_serve(backend: Backend) {
    /// 2^53 + 1. On SQLite a bigint is a number on the wire (the Node agent's driver returns a
    /// JavaScript number), so there the key is 2^53 - 1, the largest a number holds exactly.
    const BIG: &str = "9007199254740993";
    const SQLITE_BIG: &str = "9007199254740991";
    let shop = Shop::empty(backend).await;
    let (money, key, bytes) = match backend {
        Backend::Postgres => ("NUMERIC(10,2)", "BYTEA", "BYTEA"),
        Backend::MySql => ("DECIMAL(10,2)", "VARBINARY(16)", "BLOB"),
        Backend::Sqlite => ("DECIMAL(10,2)", "BLOB", "BLOB"),
    };
    let big = if backend == Backend::Sqlite {
        SQLITE_BIG
    } else {
        BIG
    };
    let (cafe, zero_ff) = match backend {
        Backend::Postgres => ("'\\xcafe'", "'\\x00ff'"),
        Backend::MySql | Backend::Sqlite => ("X'cafe'", "X'00ff'"),
    };
    shop.execute(&format!(
        "CREATE TABLE dec_keys (id {money} NOT NULL PRIMARY KEY, copied {money});
         CREATE TABLE big_keys (id BIGINT NOT NULL PRIMARY KEY, copied BIGINT);
         CREATE TABLE bin_keys (id {key} NOT NULL PRIMARY KEY, copied {bytes});
         INSERT INTO dec_keys (id) VALUES (12.30), (5.00);
         INSERT INTO big_keys (id) VALUES (42), ({big});
         INSERT INTO bin_keys (id) VALUES ({cafe}), ({zero_ff});"
    ))
    .await;
    shop.install("keys", "keys");
    std::fs::write(
        shop.plugins.join("keys.toml"),
        "[options]\ncollections = [\"dec_keys\", \"big_keys\", \"bin_keys\"]\n",
    )
    .unwrap();
    let (_served, app) = shop.serve().await.unwrap();

    let decimals = match backend {
        Backend::Postgres => ["5.00", "12.30"],
        Backend::MySql | Backend::Sqlite => ["5", "12.3"],
    };
    let cases: [(&str, [&str; 2], &str); 3] = [
        (
            "dec_keys",
            decimals,
            if backend == Backend::Postgres {
                "strings"
            } else {
                "numbers"
            },
        ),
        (
            "big_keys",
            ["42", big],
            if backend == Backend::Sqlite {
                "numbers"
            } else {
                "strings"
            },
        ),
        ("bin_keys", ["00ff", "cafe"], "strings"),
    ];
    for (collection, expected, kind) in cases {
        let list =
            format!("/forest/{collection}?timezone=UTC&sort=id&fields[{collection}]=id,key_text");
        let (status, _, body) = send(&app, get(&list)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let ids = ids(&body);
        assert_eq!(ids, expected, "{collection}: {body}");
        // The computed field received the keys in the batch and wrote them as text.
        assert_eq!(attribute(&body, "key_text"), ids, "{collection}: {body}");

        let answer = round_trip(&app, collection).await;
        assert_eq!(answer["ids"], json!(ids), "{collection}");
        assert_eq!(answer["kind"], kind, "{collection}");
        assert_eq!(
            answer["matched"], 2,
            "{collection}: the cells as filter values"
        );

        // The keys, written back as they came, are stored exactly.
        let uri = format!("/forest/{collection}?timezone=UTC&sort=id");
        let (status, _, body) = send(&app, get(&uri)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let copied = attribute(&body, "copied");
        if collection == "bin_keys" {
            assert_eq!(
                copied,
                [
                    "data:application/octet-stream;base64,AP8=",
                    "data:application/octet-stream;base64,yv4="
                ],
                "{body}"
            );
        } else {
            let copied: Vec<String> = copied.iter().map(js_text).collect();
            assert_eq!(copied, expected, "{collection}: {body}");
            // In the same JSON form as the key itself.
            assert_eq!(
                attribute(&body, "copied"),
                attribute(&body, "id"),
                "{collection}: {body}"
            );
        }
    }
}
