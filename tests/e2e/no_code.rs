//! The no-code actions (`[[noCodeActions]]` with the `experimental` switches), served the way
//! `canopy serve --config` serves them, on the shop's orders on all three databases:
//! - a webhook action posts to a real HTTP server the test runs on loopback: method, headers,
//!   the agent's body with Canopy's `ids`, `values` and `user`; an endpoint's 500, a timeout and
//!   a closed port each answer the agent's `Error` result, and nothing else changes;
//! - an update-record action writes its values on the selection only, and is held for approval
//!   when the permissions say so, without writing;
//! - both are in the schema file (with `meta.liana_features`), in the activity log, and in
//!   `GET /liana/model-customizations` for agents that take this Canopy as their platform;
//! - a definition that cannot work (a read-only field) stops the start, naming it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;
use canopy::config::{Config, ServeArgs};
use canopy::platform::Actor;
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{AUTH_SECRET, ENV_SECRET, post, served};
use crate::http::{get, send};
use crate::plugins_http::Shop;

/// What the endpoint received: method, path, headers, JSON body.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: HeaderMap,
    body: Json,
}

type Log = Arc<Mutex<Vec<Received>>>;

/// A real HTTP server on loopback: `/hook` answers 204, `/fail` 500, `/slow` after 3 s.
async fn endpoint() -> (String, Log) {
    let log: Log = Arc::default();
    async fn receive(State(log): State<Log>, request: Request) -> StatusCode {
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        let path = parts.uri.path().to_owned();
        log.lock().unwrap().push(Received {
            method: parts.method.to_string(),
            path: path.clone(),
            headers: parts.headers,
            body: serde_json::from_slice(&bytes).unwrap_or(Json::Null),
        });
        match path.as_str() {
            "/fail" => StatusCode::INTERNAL_SERVER_ERROR,
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                StatusCode::OK
            }
            _ => StatusCode::NO_CONTENT,
        }
    }
    let app = Router::new()
        .route("/{*path}", any(receive))
        .with_state(Arc::clone(&log));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), log)
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The config file of the shop with the no-code actions on `endpoint`, and `extra` TOML.
fn config(shop: &Shop, endpoint: &str, extra: &str) -> Config {
    let file = shop.dir.join("canopy.toml");
    let closed = closed_port();
    std::fs::write(
        &file,
        format!(
            r#"
[experimental]
webhookCustomActions = true
updateRecordCustomActions = true

[[noCodeActions]]
collection = "orders"
name = "Notify the warehouse"
type = "webhook"
scope = "bulk"
url = "{endpoint}/hook?key=q-secret"
method = "PUT"
headers = {{ Authorization = "Bearer h-secret", X-Shop = "demo" }}
form = [{{ label = "Note", isRequired = true }}]

[[noCodeActions]]
collection = "orders"
name = "Label"
type = "webhook"
url = "{endpoint}/hook"

[[noCodeActions]]
collection = "orders"
name = "Broken endpoint"
type = "webhook"
url = "{endpoint}/fail"

[[noCodeActions]]
collection = "orders"
name = "Slow endpoint"
type = "webhook"
url = "{endpoint}/slow"
timeoutInSeconds = 1

[[noCodeActions]]
collection = "orders"
name = "Closed endpoint"
type = "webhook"
url = "http://127.0.0.1:{closed}/hook"

[[noCodeActions]]
collection = "orders"
name = "Mark as shipped"
type = "update-record"
scope = "bulk"
fields = {{ status = "shipped", shipped_on = "2024-06-01" }}
{extra}"#
        ),
    )
    .unwrap();
    let args = ServeArgs {
        config: Some(file),
        database_url: Some(shop.url.clone()),
        auth_secret: Some(AUTH_SECRET.to_owned()),
        env_secret: Some(ENV_SECRET.to_owned()),
        schema_path: Some(shop.schema_path()),
        plugin_dir: Some(shop.plugins.clone()),
        data_dir: Some(shop.dir.join(".canopy")),
        ..ServeArgs::default()
    };
    Config::load(args).unwrap().0
}

/// The route of an orders action, from the schema file the start wrote (the index is the
/// agent's, so the test does not guess it).
fn route(schema: &Json, name: &str) -> String {
    let orders = schema["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "orders")
        .unwrap();
    let action = orders["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no action {name} in {orders}"));
    format!("{}?timezone=UTC", action["endpoint"].as_str().unwrap())
}

fn selection(ids: &[&str], values: &Json) -> Json {
    json!({"data": {"type": "custom-action-requests", "attributes": {
        "collection_name": "orders", "ids": ids, "values": values,
        "all_records": false, "all_records_ids_excluded": []}}})
}

async fn webhook_and_update_record_actions_run_as_any_action(backend: Backend) {
    let shop = Shop::seeded(backend).await;
    let (base, log) = endpoint().await;
    let (served_app, app) = served(config(&shop, &base, "")).await.unwrap();
    let schema: Json =
        serde_json::from_str(&std::fs::read_to_string(shop.schema_path()).unwrap()).unwrap();
    assert_eq!(
        schema["meta"]["liana_features"],
        json!({"webhook-custom-actions": "1.0.0", "update-record-actions": "1.0.0"})
    );
    let orders = &schema["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "orders")
        .unwrap()["actions"];
    let notify = orders
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "Notify the warehouse")
        .unwrap();
    assert_eq!(notify["type"], "bulk");
    assert_eq!(notify["fields"][0]["field"], "Note");
    assert_eq!(notify["fields"][0]["isRequired"], true);

    // The webhook: the configured method and headers, the agent's body and Canopy's keys.
    let (status, _, body) = send(
        &app,
        post(
            &route(&schema, "Notify the warehouse"),
            &selection(&["2", "1"], &json!({"Note": "rush"})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "Success");
    let received = log.lock().unwrap().clone();
    assert_eq!(received.len(), 1, "{received:?}");
    let call = &received[0];
    assert_eq!((call.method.as_str(), call.path.as_str()), ("PUT", "/hook"));
    assert_eq!(call.headers["authorization"], "Bearer h-secret");
    assert_eq!(call.headers["x-shop"], "demo");
    assert_eq!(call.headers["content-type"], "application/json");
    let mut ids: Vec<String> = serde_json::from_value(call.body["ids"].clone()).unwrap();
    ids.sort();
    assert_eq!(ids, ["1", "2"]);
    let mut records = call.body["records"].as_array().unwrap().clone();
    records.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(records, [json!({"id": 1}), json!({"id": 2})]);
    assert_eq!(
        call.body["action"],
        json!({"name": "Notify the warehouse", "scope": "bulk"})
    );
    assert_eq!(call.body["collection"], "orders");
    assert_eq!(call.body["values"], json!({"Note": "rush"}));
    assert_eq!(call.body["user"]["email"], "ann@x.io");

    // A Single action sends `record`, not `records`.
    let (status, _, body) = send(
        &app,
        post(&route(&schema, "Label"), &selection(&["3"], &json!({}))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let single = log.lock().unwrap()[1].body.clone();
    assert_eq!(single["record"], json!({"id": 3}));
    assert!(single.get("records").is_none(), "{single}");
    assert_eq!(single["action"]["scope"], "single");

    // Failures are the action's error result, with the endpoint's status or the cause.
    for (name, expected) in [
        (
            "Broken endpoint",
            "Error received from the webhook endpoint: 500 Internal Server Error.".to_owned(),
        ),
        (
            "Slow endpoint",
            "Could not execute the action: the webhook endpoint did not answer within 1 s."
                .to_owned(),
        ),
    ] {
        let (status, _, body) = send(
            &app,
            post(&route(&schema, name), &selection(&["1"], &json!({}))),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {body}");
        assert_eq!(body["error"], expected, "{name}");
    }
    let (status, _, body) = send(
        &app,
        post(
            &route(&schema, "Closed endpoint"),
            &selection(&["1"], &json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["error"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Could not execute the action: cannot connect to the webhook endpoint http://127.0.0.1:"
        ),
        "{message}"
    );

    // The update: the selection only.
    let (status, _, body) = send(
        &app,
        post(
            &route(&schema, "Mark as shipped"),
            &selection(&["4", "5"], &json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "Success");
    let shipped = shop
        .scalar("SELECT COUNT(*) FROM orders WHERE status = 'shipped' AND id IN (4, 5)")
        .await;
    assert_eq!(shipped, 2.0);
    assert_eq!(
        shop.text("SELECT CAST(shipped_on AS CHAR(10)) FROM orders WHERE id = 4")
            .await,
        "2024-06-01"
    );
    let before = shop
        .scalar("SELECT COUNT(*) FROM orders WHERE status = 'shipped'")
        .await;

    // The activity log has one `action` entry per run, as for any action.
    let platform = served_app.platform();
    platform.activity.flush().await;
    let (status, _, body) = send(
        &app,
        get("/v1/project/canopy/environment/production/activity-logs?limit=100"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let actions: Vec<&Json> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "action")
        .collect();
    assert_eq!(actions.len(), 6, "{body}");
    assert!(
        actions
            .iter()
            .any(|e| e["label"] == "Mark as shipped" && e["recordIds"] == json!(["4", "5"])),
        "{actions:?}"
    );

    // An approval required by the permissions holds the update: nothing is written.
    let all = json!({"browseEnabled": true, "readEnabled": true, "editEnabled": true,
        "addEnabled": true, "deleteEnabled": true, "exportEnabled": true});
    let environment = serde_json::from_value(json!({"collections": {"orders": {
        "collection": all,
        "actions": {"Mark as shipped": {
            "triggerEnabled": true, "triggerConditions": [],
            "approvalRequired": true, "approvalRequiredConditions": [],
            "userApprovalEnabled": true, "userApprovalConditions": [],
            "selfApprovalEnabled": false,
        }},
    }}}))
    .unwrap();
    platform
        .store
        .set_environment_document(&Actor::System, &environment)
        .await
        .unwrap();
    platform.permissions.invalidate_all();
    let (status, _, body) = send(
        &app,
        post(
            &route(&schema, "Mark as shipped"),
            &selection(&["6"], &json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["errors"][0]["name"],
        "CustomActionRequiresApprovalError"
    );
    assert_eq!(
        shop.scalar("SELECT COUNT(*) FROM orders WHERE status = 'shipped'")
            .await,
        before
    );

    // An agent that takes this Canopy as its platform reads the definitions, without the
    // header values.
    let request = axum::http::Request::builder()
        .uri("/liana/model-customizations")
        .header("forest-secret-key", ENV_SECRET)
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let notify = body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Notify the warehouse")
        .unwrap();
    assert_eq!(notify["type"], "action");
    assert_eq!(notify["modelName"], "orders");
    assert_eq!(notify["configuration"]["type"], "webhook");
    assert_eq!(notify["configuration"]["scope"], "bulk");
    assert_eq!(
        notify["configuration"]["configuration"]["url"],
        format!("{base}/hook?key=q-secret")
    );
    assert!(!body.to_string().contains("h-secret"), "{body}");
    let ship = body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Mark as shipped")
        .unwrap();
    assert_eq!(
        ship["configuration"]["configuration"]["fields"],
        // The file's table, read in key order.
        json!([{"fieldName": "shipped_on", "value": "2024-06-01"},
               {"fieldName": "status", "value": "shipped"}])
    );
}

async fn a_definition_that_cannot_work_stops_the_start(backend: Backend) {
    let shop = Shop::seeded(backend).await;
    let (base, _log) = endpoint().await;
    for (extra, expected) in [
        (
            "[[noCodeActions]]\ncollection = \"invoices\"\nname = \"X\"\ntype = \"update-record\"\nfields = { a = 1 }\n",
            "the action 'X' is on 'invoices', which is not a served collection",
        ),
        (
            "[[noCodeActions]]\ncollection = \"orders\"\nname = \"X\"\ntype = \"update-record\"\nfields = { total = \"lots\" }\n",
            "the action 'X' of 'orders' cannot be served: The given value has a wrong type for \"total\"",
        ),
        (
            "[[noCodeActions]]\ncollection = \"orders\"\nname = \"X\"\ntype = \"update-record\"\nfields = { colour = \"red\" }\n",
            "the action 'X' of 'orders' cannot be served",
        ),
    ] {
        let Err(error) = served(config(&shop, &base, extra)).await else {
            panic!("started with {extra}")
        };
        assert!(error.contains(expected), "{extra}: {error}");
    }
}

/// What an admin adds from the console (`ops::no_code`, the code of the console's page): checked
/// as a load would, stored with an admin log entry that masks the header values, served after
/// the reload the page asks for, and gone after a removal.
async fn actions_added_from_the_console_serve_after_a_reload(backend: Backend) {
    use canopy::http::reload::Reload as _;
    let shop = Shop::seeded(backend).await;
    let (base, log) = endpoint().await;
    let (served_app, app) = served(config(&shop, &base, "")).await.unwrap();
    let ops = std::sync::Arc::clone(&served_app.state().load().ops);
    let mut admin = canopy::datasource::Caller::system(chrono_tz::UTC);
    admin.id = 1;
    let ping = json!({"collection": "customers", "name": "Ping", "type": "webhook",
        "url": format!("{base}/ping"), "headers": {"X-Key": "k-secret"}});

    // Refused with the reason: a name the collection has, a value of the wrong type, a switch
    // that is off is covered by the page (both are on here).
    let taken = json!({"collection": "orders", "name": "Mark as shipped",
        "type": "update-record", "fields": {"status": "x"}});
    let refused = canopy::ops::no_code::add(&ops, &admin, &taken)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("already has an action named 'Mark as shipped'"),
        "{refused}"
    );
    let wrong = json!({"collection": "orders", "name": "Bad", "type": "update-record",
        "fields": {"total": "lots"}});
    let refused = canopy::ops::no_code::add(&ops, &admin, &wrong)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("wrong type"), "{refused}");
    // Not an admin: refused.
    let mut viewer = admin.clone();
    viewer.id = 999;
    assert!(
        canopy::ops::no_code::add(&ops, &viewer, &ping)
            .await
            .is_err()
    );

    let id = canopy::ops::no_code::add(&ops, &admin, &ping)
        .await
        .unwrap();
    let logged = served_app.platform().store.admin_logs(10).await.unwrap();
    let entry = logged
        .iter()
        .find(|e| e.resource == "noCodeAction")
        .expect("an admin log entry");
    assert_eq!(entry.new_value.as_ref().unwrap()["headers"]["X-Key"], "***");
    let listed = canopy::ops::no_code::list(&ops, &admin).await.unwrap();
    let stored = listed.iter().find(|l| l.id == Some(id)).unwrap();
    assert!(!stored.definition.to_string().contains("k-secret"));
    assert!(
        stored
            .problem
            .as_deref()
            .unwrap_or_default()
            .contains("reload"),
        "{stored:?}"
    );
    assert_eq!(listed.iter().filter(|l| l.id.is_none()).count(), 6);

    served_app.reload().await.unwrap();
    let schema: Json =
        serde_json::from_str(&std::fs::read_to_string(shop.schema_path()).unwrap()).unwrap();
    let customers = schema["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "customers")
        .unwrap();
    let endpoint = customers["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "Ping")
        .expect("served after the reload")["endpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = json!({"data": {"attributes": {"collection_name": "customers", "ids": ["7"],
        "values": {}}}});
    let (status, _, answer) = send(&app, post(&format!("{endpoint}?timezone=UTC"), &body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let received = log.lock().unwrap().clone();
    let call = received.iter().find(|r| r.path == "/ping").unwrap();
    assert_eq!(call.headers["x-key"], "k-secret");
    assert_eq!(call.body["record"], json!({"id": 7}));

    canopy::ops::no_code::remove(&ops, &admin, id)
        .await
        .unwrap();
    served_app.reload().await.unwrap();
    let (status, _, _) = send(&app, post(&format!("{endpoint}?timezone=UTC"), &body)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

on_all_backends!(webhook_and_update_record_actions_run_as_any_action);
on_all_backends!(actions_added_from_the_console_serve_after_a_reload);
on_all_backends!(a_definition_that_cannot_work_stops_the_start);
