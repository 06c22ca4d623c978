//! The `kit-rust` plugin, built, served by a throwaway Canopy and called as a user who may
//! browse, read and add customers and say hello, but not delete. (Copied into a plugin made by
//! `canopy plugin new kit-rust` as `tests/plugin.rs` by host/tests/testing_kit.rs; run with
//! `cargo build --release && cargo test --target host-tuple`.)

use std::path::PathBuf;

use canopy_testing::serde_json::json;
use canopy_testing::{Query, TestServer};

const SEED: &str = "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
                    INSERT INTO customers (id, name) VALUES (1, 'Ada'), (2, 'Grace');";

/// Where `cargo build --release` put the component (`$CARGO_TARGET_DIR` moves it).
fn component() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("wasm32-wasip2/release/kit_rust.wasm")
}

fn server() -> TestServer {
    TestServer::builder()
        .plugin(component())
        .settings(concat!(env!("CARGO_MANIFEST_DIR"), "/kit-rust.toml"))
        .seed_sql(SEED)
        .rights(&json!({
            "collections": {"customers": ["browse", "read", "add"]},
            "actions": {"customers": ["Say hello"]},
        }))
        .level("user")
        .start()
        .expect("the test server starts")
}

#[test]
fn the_plugin_serves_its_field_action_and_chart_within_the_users_rights() {
    let server = server();
    let client = server.client();
    let customers = client.collection("customers");

    let rows = customers
        .list(&Query::new().fields(["id", "greeting"]).sort("id"))
        .expect("list");
    assert_eq!(
        rows,
        [
            json!({"id": 1, "greeting": "Hello from kit-rust, 1"}),
            json!({"id": 2, "greeting": "Hello from kit-rust, 2"}),
        ]
    );
    let ada = json!({"field": "name", "operator": "equal", "value": "Ada"});
    assert_eq!(
        customers.count(&Query::new().filter(ada)).expect("count"),
        Some(1)
    );

    let form = customers.action("Say hello").form(&["2"]).expect("form");
    assert_eq!(form["fields"], json!([]));
    let said = customers
        .action("Say hello")
        .execute(json!({}), &["2"])
        .expect("execute");
    assert_eq!(said["success"], "Hello from kit-rust to record 2");

    assert_eq!(
        customers.chart("Seven", "1").expect("collection chart"),
        json!({"countCurrent": 7})
    );
    assert_eq!(
        client.chart("Greetings").expect("chart"),
        json!({"countCurrent": 42})
    );

    let created = customers.create(json!({"name": "Linus"})).expect("create");
    assert_eq!(created["id"], 3);
    let linus = customers.get("3").expect("get");
    assert_eq!(linus["greeting"], "Hello from kit-rust, 3");
    assert_eq!(customers.count(&Query::new()).expect("count"), Some(3));

    let refused = customers.delete("3").expect_err("no delete right");
    assert_eq!(refused.status(), Some(403), "{refused}");

    server.close().expect("the server stops cleanly");
}
