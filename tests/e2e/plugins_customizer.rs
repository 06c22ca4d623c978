//! Issue 5's customizer kinds declared by a real plugin (tests/plugins/customizer2, one group of
//! kinds per test through its `kinds` option) and served through the `/forest` routes on the
//! shop fixture of `list` (plus `tags`, `customer_tags` and `files`); and plugins on plugins
//! (tests/plugins/applier): a plugin applying another to one collection with options, `[[use]]`
//! entries of a `.toml`, a cycle and a missing plugin refused by name, a bad definition refused
//! by plugin and customization.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use canopy::customizer::build_stack;
use canopy::datasource::DataSource;
use canopy::plugins::{PluginSet, Runtime};
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{allow_all, attribute, filters, get_ok, ids, with_body};
use crate::http::{get, send};
use crate::list::shop;

fn built(name: &str) -> PathBuf {
    Path::new(env!("CANOPY_TEST_PLUGINS")).join(format!("{name}.wasm"))
}

/// A plugin directory: `(built crate, installed name, .toml)` for each plugin.
fn plugin_dir(plugins: &[(&str, &str, Option<&str>)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("canopy-plugins-c2-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    for (crate_name, name, toml) in plugins {
        std::fs::copy(built(crate_name), dir.join(format!("{name}.wasm"))).unwrap();
        if let Some(toml) = toml {
            std::fs::write(dir.join(format!("{name}.toml")), toml).unwrap();
        }
    }
    dir
}

/// The shop fixture plus a many-to-many pair (`tags`, `customer_tags`) and a binary column
/// (`files.data` = 0xCAFE).
async fn fixture(backend: Backend) -> (TestDb, Arc<dyn DataSource>) {
    let (db, _) = shop(backend).await;
    let (pk, blob, cafe) = match backend {
        Backend::Sqlite => ("INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB", "X'CAFE'"),
        Backend::Postgres => ("SERIAL PRIMARY KEY", "BYTEA", "decode('cafe', 'hex')"),
        Backend::MySql => ("INT AUTO_INCREMENT PRIMARY KEY", "BLOB", "X'CAFE'"),
    };
    db.execute(&format!(
        "CREATE TABLE tags (id {pk}, name VARCHAR(255));
         CREATE TABLE customer_tags (id {pk}, customer_id INT, tag_id INT);
         CREATE TABLE files (id {pk}, data {blob});
         INSERT INTO tags (name) VALUES ('gold');
         INSERT INTO tags (name) VALUES ('new');
         INSERT INTO tags (name) VALUES ('unused');
         INSERT INTO customer_tags (customer_id, tag_id) VALUES (1, 1);
         INSERT INTO customer_tags (customer_id, tag_id) VALUES (1, 2);
         INSERT INTO customer_tags (customer_id, tag_id) VALUES (2, 2);
         INSERT INTO files (data) VALUES ({cafe});"
    ))
    .await;
    // Introspected again, so the added tables are in the schema.
    let ds = db.datasource(Default::default()).await;
    (db, Arc::new(ds))
}

/// The plugins of `dir` loaded over `base`, stacked and routed; `Err` names what refused them.
async fn serve(
    base: Arc<dyn DataSource>,
    dir: &Path,
) -> Result<(Router, Arc<dyn DataSource>), String> {
    let runtime = Runtime::new(None)?;
    let set = PluginSet::load(&runtime, dir, base.schema(), &allow_all()).await?;
    let customizations = set.customizations(base.schema())?;
    let stack = build_stack(base, customizations).map_err(|e| e.to_string())?;
    Ok((crate::harness::serve(stack.clone()), stack))
}

/// The shop served with customizer2 declaring the given groups of kinds.
async fn app(backend: Backend, kinds: &[&str]) -> (TestDb, Router, Arc<dyn DataSource>) {
    let (db, base) = fixture(backend).await;
    let toml = format!("[options]\nkinds = {kinds:?}\n");
    let dir = plugin_dir(&[("customizer2", "customizer2", Some(&toml))]);
    let (router, stack) = serve(base, &dir).await.unwrap_or_else(|e| panic!("{e}"));
    (db, router, stack)
}

fn included_names(body: &Json) -> Vec<String> {
    body["included"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["attributes"]["name"].as_str().map(str::to_owned))
        .collect()
}

async fn related_ids(app: &Router, path: &str) -> Vec<String> {
    let mut found = ids(&get_ok(app, &format!("/forest/{path}?timezone=UTC&sort=id")).await);
    found.sort();
    found
}

on_all_backends!(
    relations_declared_by_a_plugin,
    fields_imported_renamed_and_removed_by_a_plugin,
    validation_and_nullable_declared_by_a_plugin,
    field_writing_replaced_by_a_plugin,
    binary_mode_replaced_by_a_plugin,
    sorting_emulated_replaced_and_disabled_by_a_plugin,
    filtering_emulated_and_replaced_by_a_plugin,
    writes_overridden_by_a_plugin,
    count_disabled_by_a_plugin,
);

/// Many-to-one, one-to-many, one-to-one, many-to-many and an external relation.
async fn relations_declared_by_a_plugin(backend: Backend) {
    let (_db, app, _) = app(backend, &["relations"]).await;
    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,buyer&fields[buyer]=name&sort=id",
    )
    .await;
    let names = included_names(&body);
    assert!(
        names.contains(&"Ann".to_owned()) && names.contains(&"Bob".to_owned()),
        "{body}"
    );
    assert_eq!(
        related_ids(&app, "customers/1/relationships/myOrders").await,
        ["1", "2"]
    );
    assert_eq!(
        related_ids(&app, "customers/1/relationships/labels").await,
        ["1", "2"]
    );
    assert_eq!(
        related_ids(&app, "customers/2/relationships/labels").await,
        ["2"]
    );
    let body = get_ok(
        &app,
        "/forest/countries?timezone=UTC&fields[countries]=id,resident&fields[resident]=name&sort=id",
    )
    .await;
    assert!(included_names(&body).contains(&"Bob".to_owned()), "{body}");
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,notes&sort=id",
    )
    .await;
    assert_eq!(attribute(&body, "notes")[0], json!([{"text": "note 1"}]));
}

/// `import_field` (read-only), `rename_field`, `remove_field`, `remove_collection`.
async fn fields_imported_renamed_and_removed_by_a_plugin(backend: Backend) {
    let (_db, app, _) = app(backend, &["fields"]).await;
    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,buyerName&sort=id",
    )
    .await;
    assert_eq!(
        attribute(&body, "buyerName"),
        [
            json!("Ann"),
            json!("Ann"),
            json!("Bob"),
            Json::Null,
            json!("Carl")
        ]
    );
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/orders/1?timezone=UTC",
            &json!({"data": {"type": "orders", "id": "1", "attributes": {"buyerName": "X"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "read-only import: {body}");
    let body = get_ok(&app, "/forest/orders/1?timezone=UTC").await;
    let attributes = body["data"]["attributes"].as_object().unwrap();
    assert!(!attributes.contains_key("note"), "{body}");
    let body = get_ok(&app, "/forest/customers/1?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["mail"], "ann@x.io", "{body}");
    assert!(body["data"]["attributes"].get("email").is_none(), "{body}");
    let (status, _, body) = send(&app, get("/forest/order_lines?timezone=UTC")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

/// `add_field_validation` refuses a short name (400 naming the rule); `set_field_nullable`
/// drops `status`'s Present rule and allows null.
async fn validation_and_nullable_declared_by_a_plugin(backend: Backend) {
    let (_db, app, stack) = app(backend, &["validation"]).await;
    let create = |name: &str| {
        with_body(
            "POST",
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"name": name}}}),
        )
    };
    let (status, _, body) = send(&app, create("A")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("LongerThan"), "{body}");
    let (status, _, body) = send(&app, create("Al")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let orders = stack.collection("orders").unwrap();
    let status = orders.schema().column("status").unwrap();
    assert!(status.allow_null, "{:?}", status.validation);
    assert!(
        !format!("{:?}", status.validation).contains("Present"),
        "{:?}",
        status.validation
    );
}

/// `replace_field_writing` on a computed field: writing `displayName` writes `name`; the
/// handler reads the action and the whole created record.
async fn field_writing_replaced_by_a_plugin(backend: Backend) {
    let (_db, app, _) = app(backend, &["writing"]).await;
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"displayName": "Zed!", "vip": true}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["name"], "VIP Zed", "{body}");
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/customers/2?timezone=UTC",
            &json!({"data": {"type": "customers", "id": "2", "attributes": {"displayName": "Bobby!"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["name"], "Bobby", "{body}");
    assert_eq!(
        body["data"]["attributes"]["displayName"], "Bobby!",
        "{body}"
    );
}

/// `replace_field_binary_mode(Hex)`: a column that is not a key is served in hex, not as a
/// data URI.
async fn binary_mode_replaced_by_a_plugin(backend: Backend) {
    let (_db, app, _) = app(backend, &["binary"]).await;
    let body = get_ok(&app, "/forest/files/1?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["data"], "cafe", "{body}");
}

/// Emulated sorting on a computed field (both directions), a replaced sort (`status` sorts by
/// `amount` descending), a disabled one (`isSortable: false`).
async fn sorting_emulated_replaced_and_disabled_by_a_plugin(backend: Backend) {
    let (_db, app, stack) = app(backend, &["sorting"]).await;
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,displayName&sort=displayName",
    )
    .await;
    assert_eq!(ids(&body), ["1", "2", "3", "4"]);
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,displayName&sort=-displayName",
    )
    .await;
    assert_eq!(ids(&body), ["4", "3", "2", "1"]);
    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,status&sort=status",
    )
    .await;
    assert_eq!(ids(&body), ["4", "2", "1", "5", "3"]);
    let orders = stack.collection("orders").unwrap();
    assert!(!orders.schema().column("note").unwrap().is_sortable);
}

/// A replaced operator (`displayName = "Bob!"` becomes `name = "Bob"`), an emulated one
/// (`Contains` on the computed field) and emulated filtering on a column.
async fn filtering_emulated_and_replaced_by_a_plugin(backend: Backend) {
    let (_db, app, _) = app(backend, &["filtering"]).await;
    let equal = json!({"field": "displayName", "operator": "equal", "value": "Bob!"});
    let body = get_ok(
        &app,
        &format!(
            "/forest/customers?timezone=UTC&sort=id&filters={}",
            filters(&equal)
        ),
    )
    .await;
    assert_eq!(ids(&body), ["2"]);
    let contains = json!({"field": "displayName", "operator": "contains", "value": "o"});
    let body = get_ok(
        &app,
        &format!(
            "/forest/customers?timezone=UTC&sort=id&filters={}",
            filters(&contains)
        ),
    )
    .await;
    assert_eq!(ids(&body), ["2", "4"]);
    let paid = json!({"field": "status", "operator": "equal", "value": "paid"});
    let body = get_ok(
        &app,
        &format!(
            "/forest/orders?timezone=UTC&sort=id&filters={}",
            filters(&paid)
        ),
    )
    .await;
    assert_eq!(ids(&body), ["1", "3"]);
}

/// `override_create` (upper-cases names), `override_update` (marks them edited),
/// `override_delete` (cancels orders instead of deleting them).
async fn writes_overridden_by_a_plugin(backend: Backend) {
    let (_db, app, _) = app(backend, &["overrides"]).await;
    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/countries?timezone=UTC",
            &json!({"data": {"type": "countries", "attributes": {"name": "Peru"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["name"], "PERU", "{body}");
    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            "/forest/countries/1?timezone=UTC",
            &json!({"data": {"type": "countries", "id": "1", "attributes": {"name": "Gaul"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["name"], "Gaul (edited)",
        "{body}"
    );
    let (status, _, body) = send(
        &app,
        with_body("DELETE", "/forest/orders/5?timezone=UTC", &json!({})),
    )
    .await;
    assert!(status.is_success(), "{status}: {body}");
    let body = get_ok(&app, "/forest/orders/5?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["status"], "cancelled", "{body}");
}

/// `disable_count`: the count route answers `deactivated`.
async fn count_disabled_by_a_plugin(backend: Backend) {
    let (_db, app, _) = app(backend, &["count"]).await;
    let body = get_ok(&app, "/forest/customers/count?timezone=UTC").await;
    assert_eq!(body, json!({"meta": {"count": "deactivated"}}));
    let body = get_ok(&app, "/forest/orders/count?timezone=UTC").await;
    assert_eq!(body, json!({"count": 5}));
}

/// Loads `dir` over the SQLite fixture, expecting a refusal.
async fn refused(dir: &Path) -> String {
    let (_db, base) = fixture(Backend::Sqlite).await;
    match serve(base, dir).await {
        Ok(_) => panic!("the plugins of {} were accepted", dir.display()),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_definition_is_refused_by_plugin_and_name() {
    let dir = plugin_dir(&[(
        "customizer2",
        "customizer2",
        Some("[options]\nkinds = [\"bad\"]\n"),
    )]);
    let e = refused(&dir).await;
    assert!(
        e.contains("plugin `customizer2`") && e.contains("`name`") && e.contains("Bogus"),
        "{e}"
    );
}

/// `outer` applies `inner` twice, to `customers` and to `orders`, each with its own options:
/// each application answers its own options and scope; `inner` (`use = []`) is not applied by
/// itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_applies_another_to_one_collection_with_options() {
    let outer = r#"[options]
uses = [
  { plugin = "inner", collection = "customers", options = { field = "tag", value = "from outer on customers" } },
  { plugin = "inner", collection = "orders", options = { field = "tag", value = "from outer on orders" } },
]
"#;
    let dir = plugin_dir(&[
        ("applier", "outer", Some(outer)),
        ("applier", "inner", Some("use = []\n")),
    ]);
    let (_db, base) = fixture(Backend::Sqlite).await;
    let (app, stack) = serve(base, &dir).await.unwrap();
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,tag&sort=id",
    )
    .await;
    assert_eq!(attribute(&body, "tag")[0], "from outer on customers");
    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,tag&sort=id",
    )
    .await;
    assert_eq!(attribute(&body, "tag")[4], "from outer on orders");
    assert!(
        stack
            .collection("countries")
            .unwrap()
            .schema()
            .column("tag")
            .is_none()
    );
}

/// `[[use]]` entries apply the plugin once per entry, each to its collection with its options.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_entries_of_a_toml_apply_a_plugin_per_collection() {
    let toml = r#"[[use]]
collection = "customers"
[use.options]
field = "origin"
value = "C"

[[use]]
collection = "countries"
[use.options]
field = "origin"
value = "K"
"#;
    let dir = plugin_dir(&[("applier", "applier", Some(toml))]);
    let (_db, base) = fixture(Backend::Sqlite).await;
    let (app, stack) = serve(base, &dir).await.unwrap();
    let body = get_ok(
        &app,
        "/forest/customers?timezone=UTC&fields[customers]=id,origin&sort=id",
    )
    .await;
    assert_eq!(attribute(&body, "origin"), vec![json!("C"); 4]);
    let body = get_ok(
        &app,
        "/forest/countries?timezone=UTC&fields[countries]=id,origin&sort=id",
    )
    .await;
    assert_eq!(attribute(&body, "origin"), vec![json!("K"); 2]);
    assert!(
        stack
            .collection("orders")
            .unwrap()
            .schema()
            .column("origin")
            .is_none()
    );
}

/// `a` uses `b`, which uses `a` again: refused with the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_use_cycle_is_refused() {
    let a = r#"[options]
uses = [{ plugin = "b", options = { uses = [{ plugin = "a" }] } }]
"#;
    let dir = plugin_dir(&[
        ("applier", "a", Some(a)),
        ("applier", "b", Some("use = []\n")),
    ]);
    let e = refused(&dir).await;
    assert!(e.contains("cycle") && e.contains("a → b → a"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn using_a_missing_plugin_is_refused_by_name() {
    let dir = plugin_dir(&[(
        "applier",
        "a",
        Some("[options]\nuses = [{ plugin = \"nowhere\" }]\n"),
    )]);
    let e = refused(&dir).await;
    assert!(e.contains("`a` uses `nowhere`"), "{e}");
}

fn number(v: &Json) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The shop example's plugin on `canopy demo`'s SQLite database: its relations, imported
/// field, replaced operator and sort, validation, delete override, emulated sort and disabled
/// count, each through the routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shop_plugin_uses_the_new_kinds() {
    let dir = plugin_dir(&[("shop_plugin", "shop", None)]);
    let url = canopy::app::seed_demo(&dir.join("db").join("shop.sqlite"))
        .await
        .unwrap();
    let base = canopy::datasource::sql::SqlDataSource::connect(&url, Default::default())
        .await
        .unwrap();
    let (app, _) = serve(Arc::new(base), &dir)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let purchases = related_ids(&app, "customers/1/relationships/purchases").await;
    let tree = json!({"field": "customer_id", "operator": "equal", "value": 1});
    let mut orders = ids(&get_ok(
        &app,
        &format!("/forest/orders?timezone=UTC&filters={}", filters(&tree)),
    )
    .await);
    orders.sort();
    assert!(!purchases.is_empty());
    assert_eq!(purchases, orders);

    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,customer_email&sort=id",
    )
    .await;
    assert!(
        attribute(&body, "customer_email")[0]
            .as_str()
            .unwrap()
            .contains('@')
    );

    let premium = json!({"field": "price_band", "operator": "equal", "value": "premium"});
    let body = get_ok(
        &app,
        &format!(
            "/forest/products?timezone=UTC&fields[products]=id,price,price_band&sort=price_band&filters={}",
            filters(&premium)
        ),
    )
    .await;
    let prices: Vec<f64> = attribute(&body, "price").iter().map(number).collect();
    assert!(
        !prices.is_empty() && prices.iter().all(|p| *p >= 20.0),
        "{prices:?}"
    );
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    assert!(
        attribute(&body, "price_band")
            .iter()
            .all(|b| b == "premium")
    );

    let body = get_ok(&app, "/forest/order_items/count?timezone=UTC").await;
    assert_eq!(body, json!({"meta": {"count": "deactivated"}}));

    let (status, _, body) = send(
        &app,
        with_body(
            "POST",
            "/forest/products?timezone=UTC",
            &json!({"data": {"type": "products", "attributes": {"name": "Free", "price": 0, "category": "x"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, _, body) = send(
        &app,
        with_body("DELETE", "/forest/products/1?timezone=UTC", &json!({})),
    )
    .await;
    assert!(status.is_success(), "{status}: {body}");
    let body = get_ok(&app, "/forest/products/1?timezone=UTC").await;
    assert_eq!(body["data"]["attributes"]["stock"], 0, "{body}");

    let (status, _, body) = send(
        &app,
        get("/forest/products/1/relationships/labels?timezone=UTC&sort=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let body = get_ok(
        &app,
        "/forest/orders?timezone=UTC&fields[orders]=id,customer_name&sort=customer_name",
    )
    .await;
    let names: Vec<String> = attribute(&body, "customer_name")
        .iter()
        .map(|n| n.as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(names.windows(2).all(|w| w[0] <= w[1]), "{names:?}");
}

/// `p0` uses `p1`, which uses `p2`, … nine levels down: refused past the depth limit, naming
/// the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_use_chain_deeper_than_the_limit_is_refused() {
    let levels = canopy::plugins::MAX_USE_DEPTH + 1;
    let mut options = String::from("{}");
    for i in (1..=levels).rev() {
        options = format!("{{ uses = [{{ plugin = \"p{i}\", options = {options} }}] }}");
    }
    let root = format!(
        "[options]\nuses = {}\n",
        &options["{ uses = ".len()..options.len() - 2]
    );
    let names: Vec<String> = (0..=levels).map(|i| format!("p{i}")).collect();
    let plugins: Vec<(&str, &str, Option<&str>)> = names
        .iter()
        .map(|n| {
            let toml = if n == "p0" {
                root.as_str()
            } else {
                "use = []\n"
            };
            ("applier", n.as_str(), Some(toml))
        })
        .collect();
    let e = refused(&plugin_dir(&plugins)).await;
    assert!(
        e.contains("levels deep") && e.contains("p0 → p1 → p2"),
        "{e}"
    );
}
