//! Workflow definitions (issue 13 §1, §5) on a served stack, with Canopy's store on SQLite and on
//! PostgreSQL: the workflows folder loaded at start (a bad file stops it) and at each reload
//! (only changes make versions, a bad file changes nothing, a removed file deactivates its
//! workflow), files winning over the API, and every route of the definitions API with its
//! permissions and errors.

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use canopy::app::Served;
use canopy::datasource::DataSource;
use canopy::http::reload::Reload as _;
use canopy::platform::{Actor, NewToken, Scope, Store};
use canopy::workflows::versions::Source;
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};

use crate::admin::{TempDir, call, config, error, on_store_backends, token_for};

const BASE: &str = "/v1/project/acme/environment/production/workflows";

/// Ann is an admin; Sam (Support) may browse orders and customers; Tim has no role.
const PERMISSIONS: &str = r#"
mode = "managed"

[roles.Admin]
collections = { "*" = "all" }

[roles.Support]
collections = { orders = ["browse", "read"], customers = ["browse", "read"] }

[teams.Operations]
[teams.Ops]

[[users]]
email = "ann@acme.io"
level = "admin"
role = "Admin"
teams = ["Operations"]

[[users]]
email = "sam@acme.io"
level = "editor"
role = "Support"
teams = ["Ops"]

[[users]]
email = "tim@acme.io"
level = "editor"
teams = ["Ops"]
"#;

const REFUND: &str = r#"
collection = "orders"
description = "Refund a paid order"

[[steps]]
key = "read"
type = "get-data"
fields = ["status", "amount"]

[[steps]]
key = "check"
type = "decision"
options = [
  { name = "paid", when = { field = "context.read.status", operator = "Equal", value = "paid" }, next = "mark" },
  { name = "other", next = "done" },
]

[[steps]]
key = "mark"
type = "update-data"
mode = "automatic"
values = { status = "refunded", note = "{{context.read.amount}}" }

[[steps]]
key = "done"
type = "end"
"#;

/// REFUND with its keys in another order and another layout: the same definition.
const REFUND_REORDERED: &str = r#"
description = "Refund a paid order"
collection = "orders"

[[steps]]
type = "get-data"
fields = ["status", "amount"]
key = "read"

[[steps]]
key = "check"
type = "decision"

[[steps.options]]
next = "mark"
name = "paid"
when = { value = "paid", operator = "Equal", field = "context.read.status" }

[[steps.options]]
name = "other"
next = "done"

[[steps]]
key = "mark"
mode = "automatic"
type = "update-data"
values = { note = "{{context.read.amount}}", status = "refunded" }

[[steps]]
type = "end"
key = "done"
"#;

const NOTIFY: &str = "
collection: customers
steps:
  - {key: read, type: get-data, fields: [email]}
  - {key: call, type: guidance, prompt: Call them, answer: true}
";

/// A served stack with a workflows folder.
struct Env {
    router: Router,
    store: Store,
    served: Arc<Served>,
    folder: TempDir,
    _dir: TempDir,
    _data: TestDb,
    _state: TestDb,
}

impl Env {
    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.folder.0.join(name), text).unwrap();
    }

    fn remove(&self, name: &str) {
        std::fs::remove_file(self.folder.0.join(name)).unwrap();
    }

    async fn token(&self, email: &str) -> String {
        token_for(&self.store, email).await
    }
}

/// Serves the shop fixture with `files` in its workflows folder and the users above.
async fn serve(backend: Backend, files: &[(&str, &str)]) -> Result<Env, String> {
    let folder = TempDir::new();
    for (name, text) in files {
        std::fs::write(folder.0.join(name), text).unwrap();
    }
    let (data, datasource) = crate::list::shop(Backend::Sqlite).await;
    let state = TestDb::new(backend).await;
    let dir = TempDir::new();
    let permissions = dir.0.join("permissions.toml");
    std::fs::write(&permissions, PERMISSIONS).unwrap();
    let mut config = config(&data, &state, &dir.0, Some(&permissions));
    config.workflows_dir = Some(folder.0.clone());
    let base: Arc<dyn DataSource> = Arc::new(datasource);
    let served = Arc::new(
        Served::start(config, base)
            .await
            .map_err(|e| format!("{e:#}"))?,
    );
    Ok(Env {
        router: served.router(),
        store: served.platform().store.clone(),
        served,
        folder,
        _dir: dir,
        _data: data,
        _state: state,
    })
}

fn shown(folder: &Path, name: &str) -> String {
    folder.join(name).display().to_string()
}

/// The folder is read at start; a reload saves a new version only of what changed (the same
/// definition written differently is no change); a reload with a bad file fails, names it and
/// saves nothing, not even the good changes beside it; a removed file's workflow is deactivated
/// and handed back to the API.
async fn the_folder_is_loaded_at_start_and_each_reload_saves_only_changes(backend: Backend) {
    let env = serve(backend, &[("refund.toml", REFUND), ("notify.yaml", NOTIFY)])
        .await
        .unwrap();
    let store = &env.store;
    let refund = store.workflow_by_name("refund").await.unwrap().unwrap();
    assert_eq!(refund.collection_name, "orders");
    assert_eq!(refund.latest_version, 1);
    assert!(refund.active);
    assert_eq!(refund.source, Source::File);
    assert_eq!(
        refund.source_file.as_deref(),
        Some(shown(&env.folder.0, "refund.toml").as_str())
    );
    let notify = store.workflow_by_name("notify").await.unwrap().unwrap();
    assert_eq!(notify.collection_name, "customers");
    let logged: Vec<_> = store
        .admin_logs(100)
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.resource == "workflow")
        .collect();
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert!(
        logged
            .iter()
            .all(|l| l.r#type == "add" && l.initiator == "forestAdmin")
    );

    // Unchanged, then the same definition written in another order: no new version.
    env.served.reload().await.unwrap();
    env.write("refund.toml", REFUND_REORDERED);
    env.served.reload().await.unwrap();
    let same = store.workflow_by_name("refund").await.unwrap().unwrap();
    assert_eq!(same.latest_version, 1);
    assert_eq!(same.updated_at, refund.updated_at);

    // A change makes version 2; version 1 stays as it was.
    env.write(
        "refund.toml",
        &REFUND.replace("Refund a paid order", "Refund a paid order, now"),
    );
    env.served.reload().await.unwrap();
    let changed = store.workflow_by_name("refund").await.unwrap().unwrap();
    assert_eq!(changed.latest_version, 2);
    assert_eq!(
        changed.description.as_deref(),
        Some("Refund a paid order, now")
    );
    let first = store
        .workflow_version(&refund.id, 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first.definition.description.as_deref(),
        Some("Refund a paid order")
    );
    let second = store
        .workflow_version(&refund.id, 2)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(first.definition_hash, second.definition_hash);

    // A bad file beside a good change: the reload fails naming the file, nothing is saved.
    env.write("refund.toml", &REFUND.replace("Refund a paid order", "v3"));
    env.write(
        "broken.toml",
        "collection = \"orders\"\n[[steps]]\nkey = \"check\"\ntype = \"decision\"\n\
         options = [{ name = \"a\", next = \"dne\" }]\n",
    );
    let failed = env.served.reload().await.unwrap_err();
    assert!(
        failed.contains(&format!(
            "{}: step \"check\": options[0].next: no step \"dne\"",
            shown(&env.folder.0, "broken.toml")
        )),
        "{failed}"
    );
    assert_eq!(
        store
            .workflow_by_name("refund")
            .await
            .unwrap()
            .unwrap()
            .latest_version,
        2
    );
    assert!(store.workflow_by_name("broken").await.unwrap().is_none());

    // The bad file goes, and so does refund.toml: refund is deactivated, notify untouched.
    env.remove("broken.toml");
    env.remove("refund.toml");
    env.served.reload().await.unwrap();
    let gone = store.workflow_by_name("refund").await.unwrap().unwrap();
    assert!(!gone.active);
    assert_eq!(gone.source, Source::Api);
    assert_eq!(gone.source_file, None);
    assert_eq!(gone.latest_version, 2);
    assert!(
        store
            .workflow_by_name("notify")
            .await
            .unwrap()
            .unwrap()
            .active
    );
    // It is the API's now: an admin may turn it on again.
    let ann = env.token("ann@acme.io").await;
    let (status, body) = call(
        &env.router,
        "POST",
        &format!("{BASE}/{}/activate", gone.id),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["active"], true);
}

/// A bad file stops the start with its message: the file, the step and the field, or the
/// parser's line and column.
async fn a_bad_file_stops_the_start(backend: Backend) {
    let error = serve(
        backend,
        &[(
            "refund.toml",
            &REFUND.replace("fields = [\"status\", \"amount\"]", "fields = [\"ghost\"]"),
        )],
    )
    .await
    .err()
    .unwrap();
    assert!(error.contains("loading the workflows folder"), "{error}");
    assert!(
        error.contains("refund.toml: step \"read\": fields[0]: \"orders\" has no field \"ghost\""),
        "{error}"
    );
    let error = serve(
        backend,
        &[("notify.yaml", "collection: customers\nsteps: [\n")],
    )
    .await
    .err()
    .unwrap();
    assert!(error.contains("notify.yaml: line "), "{error}");
}

/// A workflow a file defines refuses the API's writes with a 409 naming the file; a file whose
/// name matches a workflow made through the API takes it over at the next reload.
async fn the_folder_wins_over_the_api(backend: Backend) {
    let env = serve(backend, &[("refund.toml", REFUND)]).await.unwrap();
    let ann = env.token("ann@acme.io").await;
    let refund = env.store.workflow_by_name("refund").await.unwrap().unwrap();
    let file = shown(&env.folder.0, "refund.toml");
    for (method, path, body) in [
        (
            "PUT",
            format!("{BASE}/{}", refund.id),
            Some(definition("refund")),
        ),
        ("POST", format!("{BASE}/{}/deactivate", refund.id), None),
        ("POST", format!("{BASE}/{}/activate", refund.id), None),
    ] {
        let (status, body) = call(&env.router, method, &path, Some(&ann), body.as_ref()).await;
        let message = error(status, &body, StatusCode::CONFLICT, "conflict");
        assert!(message.contains(&file), "{message}");
    }
    assert_eq!(
        env.store
            .workflow_by_name("refund")
            .await
            .unwrap()
            .unwrap()
            .latest_version,
        1
    );

    // Made through the API, then defined by a file: the file takes it over.
    let (status, created) = call(
        &env.router,
        "POST",
        BASE,
        Some(&ann),
        Some(&definition("audit")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["source"], "api");
    env.write("audit.toml", REFUND);
    env.served.reload().await.unwrap();
    let audit = env.store.workflow_by_name("audit").await.unwrap().unwrap();
    assert_eq!(audit.id, created["id"]);
    assert_eq!(audit.source, Source::File);
    assert_eq!(audit.latest_version, 2);
}

/// A JSON definition of orders named `name`.
fn definition(name: &str) -> Json {
    json!({
        "name": name,
        "collection": "orders",
        "steps": [
            {"key": "read", "type": "get-data", "fields": ["status", "customer:name"]},
            {"key": "check", "type": "decision", "mode": "manual", "options": [
                {"name": "refund", "next": "mark"},
                {"name": "keep", "next": "done"}]},
            {"key": "mark", "type": "update-data", "values": {"status": "refunded"}},
            {"key": "done", "type": "end"},
        ],
    })
}

/// Every route of the definitions API, as an admin: create, read, save (unchanged and changed),
/// versions, activate and deactivate, the listing's filters and pages; each write logged.
async fn the_definitions_api_keeps_versions(backend: Backend) {
    let env = serve(backend, &[]).await.unwrap();
    let app = &env.router;
    let ann = env.token("ann@acme.io").await;

    let (status, created) = call(app, "POST", BASE, Some(&ann), Some(&definition("refund"))).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["object"], "workflow");
    assert_eq!(created["name"], "refund");
    assert_eq!(created["collectionName"], "orders");
    assert_eq!(created["active"], true);
    assert_eq!(created["latestVersion"], 1);
    assert_eq!(created["source"], "api");
    assert_eq!(created["sourceFile"], Json::Null);
    assert_eq!(
        created["definition"]["steps"][0]["fields"][1],
        "customer:name"
    );
    let id = created["id"].as_str().unwrap().to_owned();

    let (status, read) = call(app, "GET", &format!("{BASE}/{id}"), Some(&ann), None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["definition"], created["definition"]);

    // The same definition (keys in another order, `name` left out): no new version.
    let mut same = definition("refund");
    same.as_object_mut().unwrap().remove("name");
    let (status, saved) = call(app, "PUT", &format!("{BASE}/{id}"), Some(&ann), Some(&same)).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["versionCreated"], false);
    assert_eq!(saved["latestVersion"], 1);

    let mut changed = definition("refund");
    changed["description"] = json!("with a description");
    let (status, saved) = call(
        app,
        "PUT",
        &format!("{BASE}/{id}"),
        Some(&ann),
        Some(&changed),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["versionCreated"], true);
    assert_eq!(saved["latestVersion"], 2);
    assert_eq!(saved["description"], "with a description");

    let (status, versions) = call(
        app,
        "GET",
        &format!("{BASE}/{id}/versions"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{versions}");
    let numbers: Vec<&Json> = versions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["version"])
        .collect();
    assert_eq!(numbers, [&json!(2), &json!(1)]);
    assert_eq!(versions["hasMore"], false);
    let (status, first) = call(
        app,
        "GET",
        &format!("{BASE}/{id}/versions/1"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["object"], "workflow_version");
    assert_eq!(first["definition"], created["definition"]);

    // Turned off and on: no new version.
    let (status, off) = call(
        app,
        "POST",
        &format!("{BASE}/{id}/deactivate"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{off}");
    assert_eq!(off["active"], false);
    assert_eq!(off["latestVersion"], 2);

    // A second workflow, on customers; the listing's filters and pages.
    let notify = json!({"name": "notify", "collection": "customers", "steps": [
        {"key": "call", "type": "guidance", "prompt": "Call {{context.read.email}}"},
    ]});
    let (status, body) = call(app, "POST", BASE, Some(&ann), Some(&notify)).await;
    let message = error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    assert_eq!(
        message,
        "step \"call\": prompt: {{context.read.email}}: no step \"read\""
    );
    let notify = json!({"name": "notify", "collection": "customers", "active": false, "steps": [
        {"key": "call", "type": "guidance", "prompt": "Call them"},
    ]});
    let (status, body) = call(app, "POST", BASE, Some(&ann), Some(&notify)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["active"], false);

    let names = |body: &Json| -> Vec<String> {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, all) = call(app, "GET", BASE, Some(&ann), None).await;
    assert_eq!(names(&all), ["notify", "refund"]);
    let (_, page) = call(app, "GET", &format!("{BASE}?limit=1"), Some(&ann), None).await;
    assert_eq!(names(&page), ["notify"]);
    assert_eq!(page["hasMore"], true);
    assert_eq!(page["parameters"]["limit"], 1);
    let (_, orders) = call(
        app,
        "GET",
        &format!("{BASE}?collectionName=orders"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(names(&orders), ["refund"]);
    let (_, inactive) = call(
        app,
        "GET",
        &format!("{BASE}?active=false"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(names(&inactive), ["notify", "refund"]);
    let (_, active) = call(app, "GET", &format!("{BASE}?active=true"), Some(&ann), None).await;
    assert_eq!(names(&active), Vec::<String>::new());
    let (status, on) = call(
        app,
        "POST",
        &format!("{BASE}/{id}/activate"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{on}");
    let (_, active) = call(app, "GET", &format!("{BASE}?active=true"), Some(&ann), None).await;
    assert_eq!(names(&active), ["refund"]);

    // Every change is in the admin log, by Ann.
    let logged: Vec<(String, String)> = env
        .store
        .admin_logs(100)
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.resource == "workflow")
        .map(|l| {
            assert_eq!(l.initiator, "administrator");
            assert_eq!(l.actor_email.as_deref(), Some("ann@acme.io"));
            (l.r#type, l.target_ref.unwrap_or_default())
        })
        .collect();
    assert_eq!(logged.len(), 5, "{logged:?}");
    let (status, logs) = call(
        app,
        "GET",
        "/v1/project/acme/admin-logs?resource=workflow&limit=100",
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{logs}");
    assert_eq!(logs["data"].as_array().unwrap().len(), 5);
}

/// Bad input is a clear 400, a taken name or another collection a 409 or 400, unknown things a
/// 404; and nothing is created or changed by any of them.
async fn bad_requests_change_nothing(backend: Backend) {
    let env = serve(backend, &[]).await.unwrap();
    let app = &env.router;
    let ann = env.token("ann@acme.io").await;
    let (status, created) = call(app, "POST", BASE, Some(&ann), Some(&definition("refund"))).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();

    let bad = |value: Json| value;
    for (body, expected) in [
        (
            bad(json!({"name": "x", "collection": "orders", "steps": [
                {"key": "check", "type": "decision", "options": [{"name": "a", "next": "dne"}]}]})),
            "step \"check\": options[0].next: no step \"dne\"",
        ),
        (
            bad(json!({"name": "x", "collection": "orders", "steps": "none"})),
            "steps: invalid type",
        ),
        (
            bad(json!({"name": "x", "collection": "orders", "steps": [
                {"key": "read", "type": "get-data", "fields": ["status"], "colour": "red"}]})),
            "step \"read\": unknown field `colour`",
        ),
        (
            bad(json!({"name": "x", "collection": "orders", "steps": [
                {"key": "read", "type": "teleport"}]})),
            "unknown variant `teleport`",
        ),
        (
            bad(
                json!({"name": "x", "collection": "invoices", "steps": [{"key": "e", "type": "end"}]}),
            ),
            "collection: no collection \"invoices\" in the served schema",
        ),
    ] {
        let (status, body) = call(app, "POST", BASE, Some(&ann), Some(&body)).await;
        let message = error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
        assert!(
            message.contains(expected),
            "{message} (expected {expected})"
        );
    }
    let (status, body) = call(app, "POST", BASE, Some(&ann), Some(&definition("refund"))).await;
    let message = error(status, &body, StatusCode::CONFLICT, "conflict");
    assert!(message.contains("\"refund\" already exists"), "{message}");

    let mut moved = definition("refund");
    moved["collection"] = json!("customers");
    moved["steps"] = json!([{"key": "e", "type": "end"}]);
    let (status, body) = call(
        app,
        "PUT",
        &format!("{BASE}/{id}"),
        Some(&ann),
        Some(&moved),
    )
    .await;
    let message = error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    assert!(message.contains("keeps its collection"), "{message}");

    for (method, path) in [
        ("GET", format!("{BASE}/nope")),
        ("PUT", format!("{BASE}/nope")),
        ("POST", format!("{BASE}/nope/activate")),
        ("GET", format!("{BASE}/{id}/versions/9")),
        (
            "GET",
            "/v1/project/acme/environment/staging/workflows".to_owned(),
        ),
        (
            "GET",
            "/v1/project/other/environment/production/workflows".to_owned(),
        ),
    ] {
        let body = (method == "PUT").then(|| definition("refund"));
        let (status, body) = call(app, method, &path, Some(&ann), body.as_ref()).await;
        error(status, &body, StatusCode::NOT_FOUND, "not_found");
    }
    let (status, body) = call(
        app,
        "GET",
        &format!("{BASE}/{id}/versions/x"),
        Some(&ann),
        None,
    )
    .await;
    error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    let (status, body) = call(
        app,
        "GET",
        &format!("{BASE}?active=maybe"),
        Some(&ann),
        None,
    )
    .await;
    error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");

    let all = env.store.all_workflows().await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].latest_version, 1);
    assert_eq!(all[0].collection_name, "orders");
}

/// Readers see the workflows of the collections they may browse (admins every one); only
/// admins write; a token needs `all`; no credentials is a 401.
async fn reading_needs_browse_and_writing_an_admin(backend: Backend) {
    let env = serve(backend, &[]).await.unwrap();
    let app = &env.router;
    let ann = env.token("ann@acme.io").await;
    let sam = env.token("sam@acme.io").await;
    let tim = env.token("tim@acme.io").await;
    let (_, orders) = call(app, "POST", BASE, Some(&ann), Some(&definition("refund"))).await;
    let countries = json!({"name": "geo", "collection": "countries", "steps": [
        {"key": "read", "type": "get-data", "fields": ["name"]}]});
    let (status, geo) = call(app, "POST", BASE, Some(&ann), Some(&countries)).await;
    assert_eq!(status, StatusCode::CREATED, "{geo}");

    let names = |body: &Json| -> Vec<String> {
        body["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"))
            .iter()
            .map(|w| w["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, listed) = call(app, "GET", BASE, Some(&ann), None).await;
    assert_eq!(names(&listed), ["geo", "refund"]);
    let (_, listed) = call(app, "GET", BASE, Some(&sam), None).await;
    assert_eq!(names(&listed), ["refund"]);
    let (_, listed) = call(app, "GET", BASE, Some(&tim), None).await;
    assert_eq!(names(&listed), Vec::<String>::new());

    let refund_id = orders["id"].as_str().unwrap();
    let geo_id = geo["id"].as_str().unwrap();
    let (status, _) = call(app, "GET", &format!("{BASE}/{refund_id}"), Some(&sam), None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        app,
        "GET",
        &format!("{BASE}/{refund_id}/versions/1"),
        Some(&sam),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    for path in [
        format!("{BASE}/{geo_id}"),
        format!("{BASE}/{geo_id}/versions"),
        format!("{BASE}/{geo_id}/versions/1"),
    ] {
        let (status, body) = call(app, "GET", &path, Some(&sam), None).await;
        error(status, &body, StatusCode::NOT_FOUND, "not_found");
    }
    let (status, body) = call(app, "GET", &format!("{BASE}/{refund_id}"), Some(&tim), None).await;
    error(status, &body, StatusCode::NOT_FOUND, "not_found");

    // Writing: admins only.
    for (method, path, body) in [
        ("POST", BASE.to_owned(), Some(definition("other"))),
        (
            "PUT",
            format!("{BASE}/{refund_id}"),
            Some(definition("refund")),
        ),
        ("POST", format!("{BASE}/{refund_id}/deactivate"), None),
    ] {
        let (status, body) = call(app, method, &path, Some(&sam), body.as_ref()).await;
        error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    }
    let (status, body) = call(app, "GET", BASE, None, None).await;
    error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");

    // Application tokens: `all` reads and writes, a narrower one does neither.
    let narrow = api_token(&env.store, "ann@acme.io", Scope::NotesRead).await;
    let (status, body) = call(app, "GET", BASE, Some(&narrow), None).await;
    error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    let full = api_token(&env.store, "ann@acme.io", Scope::All).await;
    let (status, body) = call(app, "GET", BASE, Some(&full), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(app, "POST", BASE, Some(&full), Some(&definition("third"))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let sams = api_token(&env.store, "sam@acme.io", Scope::All).await;
    let (status, body) = call(app, "GET", BASE, Some(&sams), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(names(&body), ["third", "refund"]);
}

async fn api_token(store: &Store, email: &str, scope: Scope) -> String {
    let user = store.user_by_email(email).await.unwrap().unwrap();
    let (_, secret) = store
        .create_token(
            &Actor::System,
            user.id,
            NewToken {
                name: format!("{scope:?}"),
                scopes: vec![scope],
                expires_at: None,
            },
        )
        .await
        .unwrap();
    secret.expose().to_owned()
}

on_store_backends!(
    the_folder_is_loaded_at_start_and_each_reload_saves_only_changes,
    a_bad_file_stops_the_start,
    the_folder_wins_over_the_api,
    the_definitions_api_keeps_versions,
    bad_requests_change_nothing,
    reading_needs_browse_and_writing_an_admin,
);
