//! Scopes that reach plugin data (issue 21 §2), through HTTP on the shop demo served with its
//! real compiled plugin (`shop`) and the `scoped` test plugin, as a user of the Shipping team,
//! whose scopes keep shipped and delivered orders, customers 1 to 500 and products under 100:
//!
//! - every read a plugin makes for a request runs under the caller's scopes: the shop's
//!   `orders_by_status` and `lifetime_value` charts, its `Export orders` action, the `scoped`
//!   plugin's chart and its Before Create hook;
//! - `unscoped_reads = ["orders"]` in a plugin's settings lifts the scope on orders for that
//!   plugin, and only there; an unknown collection stops the start, naming plugin and file;
//! - a record included through a to-one relation outside the caller's scope on its collection is
//!   left out (`data: null`, nothing in `included`, empty CSV cells), unless
//!   `strictScopes = false`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::auth::{SessionClaims, SessionKey};
use canopy::datasource::PermissionLevel;
use canopy::platform::documents::{EnvironmentPermissions, RenderingCollection};
use canopy::platform::{Actor, NewUser, Store};
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{AUTH_SECRET, filters, plugin_config, served};
use crate::http::send;
use crate::plugins_http::Shop;

/// The statuses the Shipping team's scope on orders keeps.
const IN_SCOPE: [&str; 2] = ["shipped", "delivered"];
/// The same scope as SQL, to count what the plugin should see.
const ORDERS_SQL: &str = "status IN ('shipped', 'delivered')";

/// The Shipping team's rendering: its scopes on orders, customers and products.
fn scopes() -> BTreeMap<String, RenderingCollection> {
    serde_json::from_value(json!({
        "orders": {"scope": {"field": "status", "operator": "in", "value": IN_SCOPE}},
        "customers": {"scope": {"field": "id", "operator": "less_than", "value": 501}},
        "products": {"scope": {"field": "price", "operator": "less_than", "value": 100}},
    }))
    .unwrap()
}

/// A served shop (`shop` and `scoped` plugins, `scoped.toml` holding `settings` when given),
/// with `strict_scopes` as set, and the session token of a Shipping user.
struct Env {
    shop: Shop,
    app: Router,
    token: String,
    _served: std::sync::Arc<canopy::app::Served>,
}

async fn env(backend: Backend, settings: Option<&str>, strict_scopes: bool) -> Env {
    let shop = Shop::new(backend).await;
    shop.install("scoped", "scoped");
    if let Some(settings) = settings {
        std::fs::write(shop.plugins.join("scoped.toml"), settings).unwrap();
    }
    let mut config = shop.config();
    config.permissions.strict_scopes = strict_scopes;
    let (served, app) = served(config).await.unwrap();
    let store = served.platform().store.clone();
    let token = shipping_user(&store).await;
    Env {
        shop,
        app,
        token,
        _served: served,
    }
}

/// Creates the Shipping role, team (with its scopes) and user; every right for everyone, so that
/// only scopes restrict; the user's session token.
async fn shipping_user(store: &Store) -> String {
    let actor = Actor::System;
    let role = store.create_role(&actor, "Shipping").await.unwrap();
    let team = store.create_team(&actor, "Shipping").await.unwrap();
    let user = store
        .create_user(
            &actor,
            NewUser {
                email: "sam@shop.example".to_owned(),
                first_name: "Sam".to_owned(),
                last_name: "Shipper".to_owned(),
                permission_level: PermissionLevel::User,
                role: Some("Shipping".to_owned()),
                teams: vec!["Shipping".to_owned()],
                tags: BTreeMap::new(),
                password_hash: None,
            },
        )
        .await
        .unwrap();
    store
        .set_environment_document(&actor, &EnvironmentPermissions::AllowAll(true))
        .await
        .unwrap();
    store
        .set_rendering(&actor, "Shipping", scopes(), Vec::new())
        .await
        .unwrap();
    let claims = SessionClaims {
        id: user.id,
        email: user.email.clone(),
        first_name: user.first_name.clone(),
        last_name: user.last_name.clone(),
        team: team.name.clone(),
        team_id: Some(team.id),
        role: role.name.clone(),
        role_id: Some(role.id),
        permission_level: PermissionLevel::User,
        rendering_id: store.rendering_id(team.id).await.unwrap(),
        tags: BTreeMap::new(),
        iat: 0,
        exp: 0,
    };
    SessionKey::new(AUTH_SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap()
}

impl Env {
    fn request(&self, method: &str, uri: &str, body: Option<&Json>) -> Request<Body> {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token));
        match body {
            Some(body) => request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string())),
            None => request.body(Body::empty()),
        }
        .unwrap()
    }

    async fn get(&self, uri: &str) -> Json {
        let (status, _, body) = send(&self.app, self.request("GET", uri, None)).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {body}");
        body
    }

    async fn count(&self, sql_where: &str, table: &str) -> f64 {
        self.shop
            .scalar(&format!("SELECT COUNT(*) FROM {table} WHERE {sql_where}"))
            .await
    }

    /// The `scoped` plugin's chart: how many orders and customers it counts.
    async fn visible_counts(&self) -> (f64, f64) {
        let body = self
            .get("/forest/_charts/visible_counts?timezone=UTC")
            .await;
        let value = |key: &str| {
            body.as_array()
                .unwrap_or_else(|| panic!("{body}"))
                .iter()
                .find(|e| e["key"] == key)
                .and_then(|e| e["value"].as_f64())
                .unwrap_or_else(|| panic!("no {key} in {body}"))
        };
        (value("orders"), value("customers"))
    }

    /// Creates a tag through the route: the `scoped` hook appends the orders it read.
    async fn created_tag_label(&self, label: &str) -> String {
        let body = json!({"data": {"type": "tags", "attributes": {"label": label}}});
        let (status, _, body) = send(
            &self.app,
            self.request("POST", "/forest/tags?timezone=UTC", Some(&body)),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["data"]["attributes"]["label"]
            .as_str()
            .unwrap_or_else(|| panic!("{body}"))
            .to_owned()
    }
}

async fn plugin_reads_run_under_the_callers_scopes(backend: Backend) {
    let env = env(backend, None, true).await;

    // A chart grouping orders by status: only the statuses in scope, with their counts.
    let body = env
        .get("/forest/_charts/orders_by_status?timezone=UTC")
        .await;
    let entries = body.as_array().unwrap_or_else(|| panic!("{body}"));
    let keys: BTreeSet<&str> = entries.iter().filter_map(|e| e["key"].as_str()).collect();
    assert_eq!(keys, BTreeSet::from(IN_SCOPE), "{body}");
    for entry in entries {
        let status = entry["key"].as_str().unwrap();
        let expected = env.count(&format!("status = '{status}'"), "orders").await;
        assert_eq!(entry["value"].as_f64(), Some(expected), "{body}");
    }

    // A per-record chart: a customer's orders all have one status (`seed.sql`), so the lifetime
    // value of a customer whose orders are in scope is their sum, and of one whose orders are
    // out of scope nothing, though they have orders.
    for (scope_sql, in_scope) in [
        (ORDERS_SQL.to_owned(), true),
        (format!("NOT ({ORDERS_SQL})"), false),
    ] {
        let customer = env
            .shop
            .scalar(&format!(
                "SELECT MIN(customer_id) FROM orders WHERE {scope_sql}"
            ))
            .await as i64;
        let body = env
            .get(&format!(
                "/forest/_charts/customers/lifetime_value?timezone=UTC&record_id={customer}"
            ))
            .await;
        let got = body["countCurrent"]
            .as_f64()
            .unwrap_or_else(|| panic!("{body}"));
        let all = env
            .shop
            .scalar(&format!(
                "SELECT SUM(total) FROM orders WHERE customer_id = {customer}"
            ))
            .await;
        assert!(all > 0.0, "customer {customer} has orders");
        let expected = if in_scope { all } else { 0.0 };
        assert!(
            (got - expected).abs() < 1e-6,
            "customer {customer}: {got} vs {expected}"
        );
    }

    // An action reading through its context: the export lists in-scope orders only.
    let request = env.request(
        "POST",
        "/forest/_actions/orders/0/export-orders?timezone=UTC",
        Some(
            &json!({"data": {"attributes": {"collection_name": "orders", "ids": [],
            "values": {}}}}),
        ),
    );
    let response = tower::ServiceExt::oneshot(env.app.clone(), request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let csv = String::from_utf8(bytes.to_vec()).unwrap();
    let statuses: BTreeSet<&str> = csv
        .lines()
        .skip(1)
        .filter_map(|line| line.split(',').nth(1))
        .collect();
    assert_eq!(statuses, BTreeSet::from(IN_SCOPE), "{csv}");
    assert_eq!(csv.lines().count(), 101, "{csv}");

    // A hook reading through its context: the orders of customers 1 to 10 in scope.
    let expected = env
        .count(&format!("customer_id < 11 AND {ORDERS_SQL}"), "orders")
        .await;
    assert!(expected > 0.0);
    let label = env.created_tag_label("scoped").await;
    assert_eq!(label, format!("scoped orders={expected}"));

    // Both host reads (aggregate) of a chart, each under the scope of its own collection.
    let (orders, customers) = env.visible_counts().await;
    assert_eq!(orders, env.count(ORDERS_SQL, "orders").await);
    assert_eq!(customers, 500.0);
}

async fn unscoped_reads_grant_exactly_the_named_collections(backend: Backend) {
    let env = env(backend, Some("unscoped_reads = [\"orders\"]\n"), true).await;
    // Every order, but still only the customers in scope.
    let (orders, customers) = env.visible_counts().await;
    assert_eq!(orders, env.count("1 = 1", "orders").await);
    assert_eq!(customers, 500.0);
    let every = env.count("customer_id < 11", "orders").await;
    assert_eq!(
        env.created_tag_label("unscoped").await,
        format!("unscoped orders={every}")
    );
    // The other plugin keeps the caller's scope on orders.
    let body = env
        .get("/forest/_charts/orders_by_status?timezone=UTC")
        .await;
    assert_eq!(body.as_array().map(Vec::len), Some(2), "{body}");
}

async fn an_unknown_collection_in_unscoped_reads_stops_the_start(backend: Backend) {
    let shop = Shop::new(backend).await;
    shop.install("scoped", "scoped");
    std::fs::write(
        shop.plugins.join("scoped.toml"),
        "unscoped_reads = [\"ordrs\"]\n",
    )
    .unwrap();
    let config = plugin_config(
        &shop.url,
        &shop.plugins,
        &shop.dir.join(".forestadmin-schema.json"),
    );
    let Err(error) = served(config).await else {
        panic!("an unknown collection must stop the start");
    };
    assert!(error.contains("plugin `scoped`"), "{error}");
    assert!(error.contains("scoped.toml"), "{error}");
    assert!(error.contains("`ordrs`"), "{error}");
}

/// The `customer` linkage of each order of a list body, and the ids of the included customers.
fn customers_of(body: &Json) -> (Vec<Json>, BTreeSet<i64>) {
    let linkage = body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|order| order["relationships"]["customer"]["data"].clone())
        .collect();
    let included = body["included"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"] == "customers")
        .filter_map(|r| r["id"].as_str()?.parse().ok())
        .collect();
    (linkage, included)
}

/// Orders 1 to 40: the customer of order `i` is `1 + (i * 31 % 1000)` (`seed.sql`), so orders
/// 17 to 32 have customers beyond 500.
fn first_orders() -> String {
    let tree = filters(&json!({"field": "id", "operator": "less_than", "value": 41}));
    format!("/forest/orders?timezone=UTC&sort=id&page[size]=40&filters={tree}")
}

async fn included_records_outside_the_scope_are_left_out(backend: Backend) {
    let env = env(backend, None, true).await;
    let body = env.get(&first_orders()).await;
    let (linkage, included) = customers_of(&body);
    assert!(!linkage.is_empty(), "{body}");
    let nulls = linkage.iter().filter(|l| l.is_null()).count();
    assert!(nulls > 0, "some orders have customers beyond 500: {body}");
    assert!(nulls < linkage.len(), "{body}");
    assert!(!included.is_empty(), "{body}");
    assert!(included.iter().all(|id| *id <= 500), "{included:?}");
    for order in body["data"].as_array().unwrap() {
        let customer = order["attributes"]["customer_id"].as_i64().unwrap();
        let link = &order["relationships"]["customer"]["data"];
        assert_eq!(link.is_null(), customer > 500, "{order}");
    }

    // Get one: an in-scope order whose customer is out of scope.
    let order = env
        .shop
        .scalar(&format!(
            "SELECT MIN(id) FROM orders WHERE {ORDERS_SQL} AND customer_id > 500"
        ))
        .await as i64;
    let body = env
        .get(&format!("/forest/orders/{order}?timezone=UTC"))
        .await;
    assert!(
        body["data"]["relationships"]["customer"]["data"].is_null(),
        "{body}"
    );
    assert!(
        body["included"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|r| r["type"] != "customers"),
        "{body}"
    );

    // CSV: the customer's columns are empty, as for an order without one.
    let ids = filters(&json!({"field": "id", "operator": "in", "value": [2, order]}));
    let request = env.request(
        "GET",
        &format!(
            "/forest/orders.csv?timezone=UTC&fields[orders]=id,customer&fields[customer]=email\
             &header=id,email&sort=id&filters={ids}"
        ),
        None,
    );
    let response = tower::ServiceExt::oneshot(env.app.clone(), request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let csv = String::from_utf8(bytes.to_vec()).unwrap();
    // Order 2's customer is 63 (in scope), order `order`'s beyond 500.
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines,
        ["id,email", "2,customer63@example.com", &format!("{order},")],
        "{csv}"
    );

    // A related list: the orders of a product (many-to-many through order_items), each
    // including its customer, those beyond 500 left out.
    let product = env
        .shop
        .scalar(&format!(
            "SELECT MIN(i.product_id) FROM order_items i JOIN orders o ON o.id = i.order_id \
             JOIN products p ON p.id = i.product_id \
             WHERE o.{ORDERS_SQL} AND o.customer_id > 500 AND p.price < 100"
        ))
        .await as i64;
    let body = env
        .get(&format!(
            "/forest/products/{product}/relationships/orders?timezone=UTC&page[size]=100"
        ))
        .await;
    let (linkage, included) = customers_of(&body);
    assert!(linkage.iter().any(Json::is_null), "{body}");
    assert!(!included.is_empty(), "{body}");
    assert!(included.iter().all(|id| *id <= 500), "{included:?}");
    for order in body["data"].as_array().unwrap() {
        let customer = order["attributes"]["customer_id"].as_i64().unwrap();
        let link = &order["relationships"]["customer"]["data"];
        assert_eq!(link.is_null(), customer > 500, "{order}");
    }
}

async fn strict_scopes_off_includes_them_as_the_agent_does(backend: Backend) {
    let env = env(backend, None, false).await;
    let body = env.get(&first_orders()).await;
    let (linkage, included) = customers_of(&body);
    assert!(linkage.iter().all(|l| !l.is_null()), "{body}");
    assert!(included.iter().any(|id| *id > 500), "{included:?}");
}

on_all_backends!(plugin_reads_run_under_the_callers_scopes);

mod sqlite {
    use canopy_e2e::Backend;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unscoped_reads_grant_exactly_the_named_collections() {
        super::unscoped_reads_grant_exactly_the_named_collections(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_collection_in_unscoped_reads_stops_the_start() {
        super::an_unknown_collection_in_unscoped_reads_stops_the_start(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn included_records_outside_the_scope_are_left_out() {
        super::included_records_outside_the_scope_are_left_out(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn strict_scopes_off_includes_them_as_the_agent_does() {
        super::strict_scopes_off_includes_them_as_the_agent_does(Backend::Sqlite).await;
    }
}
