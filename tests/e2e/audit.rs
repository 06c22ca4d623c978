//! The audit trail (`auditTrail`) through HTTP over the shop fixture of `list`: creates,
//! updates and deletes through the routes, writes made inside an action and by a hook, each
//! leaving one entry per record with its values before and after, the user and the request's
//! correlation id; an action's own row per record; the history, state and correlation routes
//! and their shapes; read permission and scope; a failing audit store refusing the change
//! (critical) or not; and, off by default, no layer, no routes and no entries. User data on
//! SQLite, PostgreSQL and MariaDB; the trail in Canopy's store (SQLite, PostgreSQL) or in a
//! database of its own (SQLite, PostgreSQL, MariaDB).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::app::Served;
use canopy::config::AuditTrailConfig;
use canopy::customizer::audit::{AuditRecorder, AuditTrail, Confirmation, PendingEntry};
use canopy::customizer::{
    Context, Customization, HookData, HookHandler, HookOperation, HookPosition, Kind, StackOptions,
    build_stack_with, closures,
};
use canopy::datasource::action::{ActionResult, ActionScope};
use canopy::datasource::{Caller, DataSource, Filter, Record, Value};
use canopy::platform::Store;
use canopy::platform::audit::AuditStore;
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};
use uuid::Uuid;

use crate::harness::{on, state};
use crate::http::{send, token};
use crate::list::shop;

/// Where the trail is kept.
#[derive(Debug, Clone, Copy)]
enum Keep {
    /// Canopy's store on this backend.
    Store(Backend),
    /// A database of its own (`auditTrail.databaseUrl`) on this backend.
    Named(Backend),
}

struct Fx {
    app: Router,
    audit: AuditStore,
    /// What the hook and the action saw, to check they ran.
    _data: TestDb,
    _trail: TestDb,
}

/// `Mark paid` (bulk, on orders): sets `status = paid` on the selection through its context.
fn mark_paid() -> Customization {
    let handler = closures::action(
        |_, _| Ok(Vec::new()),
        |caller: Caller, ctx: canopy::customizer::ActionContext| async move {
            let mut patch = Record::new();
            patch.insert("status", Value::String("paid".to_owned()));
            ctx.base
                .collection()?
                .update(&caller, &ctx.filter, &patch)
                .await?;
            Ok(ActionResult::success("Paid"))
        },
    );
    on(
        "orders",
        Kind::Action {
            name: "Mark paid".to_owned(),
            scope: ActionScope::Bulk,
            generate_file: false,
            description: None,
            submit_button_label: None,
            static_form: Some(Vec::new()),
            handler,
        },
    )
}

/// After an order noted "with a line" is created, a hook adds its first line through its
/// context's datasource.
struct FirstLine;

#[async_trait]
impl HookHandler for FirstLine {
    async fn run(
        &self,
        caller: &Caller,
        ctx: &Context,
        _position: HookPosition,
        data: &mut HookData,
    ) -> canopy::datasource::Result<()> {
        let HookData::Create {
            created: Some(created),
            ..
        } = data
        else {
            return Ok(());
        };
        let lines = ctx.datasource.collection("order_lines")?;
        let wanted = Value::String("with a line".to_owned());
        for order in created.iter().filter(|o| o.get("note") == Some(&wanted)) {
            let mut line = Record::new();
            line.insert("order_id", order.get("id").cloned().unwrap_or(Value::Null));
            line.insert("line_no", Value::Int(1));
            line.insert("qty", Value::Int(1));
            lines.create(caller, vec![line]).await?;
        }
        Ok(())
    }
}

fn first_line() -> Customization {
    on(
        "orders",
        Kind::Hook {
            position: HookPosition::After,
            operation: HookOperation::Create,
            handler: Arc::new(FirstLine),
        },
    )
}

/// The audit store of `keep`, in a fresh database.
async fn trail(keep: Keep) -> (TestDb, AuditStore) {
    match keep {
        Keep::Store(backend) => {
            let db = TestDb::new(backend).await;
            let store = Store::open(&db.url, "acme", "production").await.unwrap();
            (db, AuditStore::in_store(&store))
        }
        Keep::Named(backend) => {
            let db = TestDb::new(backend).await;
            let audit = AuditStore::open(&db.url, "acme", "production")
                .await
                .unwrap();
            (db, audit)
        }
    }
}

/// The shop on `data`, served with the audit layer over the action and the hook, the trail in
/// `keep`; every right to everyone (the token is Ann's, user 1).
async fn fixture(data: Backend, keep: Keep) -> Fx {
    let (data_db, datasource) = shop(data).await;
    let (trail_db, audit) = trail(keep).await;
    let options = StackOptions {
        audit: Some(AuditTrail {
            recorder: Arc::new(audit.clone()),
            critical: true,
        }),
        ..StackOptions::default()
    };
    let stack = build_stack_with(
        Arc::new(datasource),
        vec![mark_paid(), first_line()],
        &options,
    )
    .unwrap();
    let mut state = state(stack);
    state.audit = Some(Arc::new(audit.clone()));
    Fx {
        app: canopy::http::router(Arc::new(state)),
        audit,
        _data: data_db,
        _trail: trail_db,
    }
}

fn request(method: &str, uri: &str, body: Option<&Json>) -> Request<Body> {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", token()));
    match body {
        Some(body) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .unwrap()
}

/// One request: status, correlation id and body.
async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    body: Option<&Json>,
) -> (StatusCode, String, Json) {
    let (status, headers, body) = send(app, request(method, uri, body)).await;
    let correlation = headers
        .get("x-forest-correlation-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, correlation, body)
}

/// The body of a GET that must answer 200.
async fn ok(app: &Router, uri: &str) -> Json {
    let (status, _, body) = call(app, "GET", uri, None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    body
}

/// Entries are stamped to the millisecond: a pause keeps two changes apart in time.
async fn tick() {
    tokio::time::sleep(Duration::from_millis(15)).await;
}

/// Create, update and delete through the routes: one entry each, newest first, with the
/// values before and after, Ann as the author, and each request's correlation id; the state
/// route replays them; the correlation routes find them.
async fn routes_record_before_and_after(data: Backend, keep: Keep) {
    let fx = fixture(data, keep).await;
    let app = &fx.app;
    let create = json!({"data": {"type": "orders", "attributes": {
        "status": "new", "note": "audit me"}}});
    let (status, created_key, body) =
        call(app, "POST", "/forest/orders?timezone=UTC", Some(&create)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    tick().await;
    let update = json!({"data": {"type": "orders", "id": id, "attributes": {"status": "paid"}}});
    let (status, updated_key, body) = call(
        app,
        "PUT",
        &format!("/forest/orders/{id}?timezone=UTC"),
        Some(&update),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    tick().await;
    let (status, deleted_key, body) = call(
        app,
        "DELETE",
        &format!("/forest/orders/{id}?timezone=UTC"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    let history = ok(app, &format!("/forest/_audit-trail/orders/{id}")).await;
    let data = history["data"].as_array().unwrap();
    let operations: Vec<&str> = data
        .iter()
        .map(|e| e["operation"].as_str().unwrap())
        .collect();
    assert_eq!(operations, ["delete", "update", "create"], "newest first");
    assert_eq!(history["meta"]["count"], 3);
    assert_eq!(
        history["meta"]["availableUsers"],
        json!([{"id": 1, "firstName": "Ann", "lastName": "Admin", "email": "ann@x.io"}])
    );
    let (deleted, updated, created) = (&data[0], &data[1], &data[2]);
    for (entry, key) in [
        (deleted, &deleted_key),
        (updated, &updated_key),
        (created, &created_key),
    ] {
        assert_eq!(entry["collection"], "orders");
        assert_eq!(entry["recordId"], id.as_str());
        assert_eq!(entry["userId"], 1);
        assert_eq!(entry["userEmail"], "ann@x.io");
        assert_eq!(entry["status"], "done");
        assert_eq!(entry["actionName"], Json::Null);
        assert_eq!(entry["correlationKey"], key.as_str(), "{entry}");
        assert!(entry["timestamp"].as_str().unwrap().ends_with('Z'));
    }
    assert_eq!(created["previousValues"], json!({}));
    assert_eq!(created["newValues"]["status"], "new");
    assert_eq!(created["newValues"]["note"], "audit me");
    assert_eq!(
        created["newValues"]["id"].to_string(),
        id,
        "the key is recorded"
    );
    assert_eq!(
        updated["previousValues"],
        json!({"status": "new"}),
        "only what changed"
    );
    assert_eq!(updated["newValues"], json!({"status": "paid"}));
    assert_eq!(
        deleted["previousValues"]["status"], "paid",
        "the whole record before"
    );
    assert_eq!(deleted["previousValues"]["note"], "audit me");
    assert_eq!(deleted["newValues"], json!({}));

    // The state at each instant.
    let at = |entry: &Json| entry["timestamp"].as_str().unwrap().to_owned();
    let state = |at: String| {
        let app = app.clone();
        let id = id.clone();
        async move {
            call(
                &app,
                "GET",
                &format!("/forest/_audit-trail/orders/{id}/state?at={at}"),
                None,
            )
            .await
        }
    };
    let (status, _, body) = state(at(created)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["status"], "new");
    assert_eq!(body["data"]["note"], "audit me");
    let (_, _, body) = state(at(updated)).await;
    assert_eq!(body["data"]["status"], "paid");
    for gone in [at(deleted), "2000-01-01".to_owned()] {
        let (status, _, body) = state(gone).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(
            body["errors"][0]["detail"],
            "Record did not exist at this timestamp"
        );
    }
    let (status, _, body) = call(
        app,
        "GET",
        &format!("/forest/_audit-trail/orders/{id}/state"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["errors"][0]["detail"],
        "Missing \"at\" query parameter"
    );

    // By correlation id: one, or several (query or body), oldest first.
    let one = ok(
        app,
        &format!("/forest/_audit-trail/correlation/{updated_key}?collection=orders&recordId={id}"),
    )
    .await;
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
    assert_eq!(one["data"][0]["operation"], "update");
    let many = ok(
        app,
        &format!(
            "/forest/_audit-trail/correlations?collection=orders&recordId={id}&correlationKeys={deleted_key},{created_key}"
        ),
    )
    .await;
    let operations: Vec<&str> = many["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["operation"].as_str().unwrap())
        .collect();
    assert_eq!(operations, ["create", "delete"]);
    let body =
        json!({"collection": "orders", "recordId": id, "correlationKeys": [updated_key, " "]});
    let (status, _, posted) = call(
        app,
        "POST",
        "/forest/_audit-trail/correlations",
        Some(&body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{posted}");
    assert_eq!(posted["data"].as_array().unwrap().len(), 1);
    let (status, _, body) = call(
        app,
        "GET",
        "/forest/_audit-trail/correlations?recordId=1",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errors"][0]["detail"], "Missing collection");
    // Another record shares nothing.
    let other = ok(app, "/forest/_audit-trail/orders/1").await;
    assert_eq!(
        other,
        json!({"data": [], "meta": {"count": 0, "availableUsers": []}})
    );
    // What the store holds is what was served.
    assert_eq!(
        fx.audit
            .count(&canopy::platform::audit::HistoryQuery {
                collection: "orders".to_owned(),
                record_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap(),
        3
    );
}

/// An action leaves a row per record it ran on; a write made inside it (through its context)
/// and one made by a hook are recorded too, under the correlation id of the request that ran
/// them.
async fn actions_and_hooks_writes_are_recorded(data: Backend, keep: Keep) {
    let fx = fixture(data, keep).await;
    let app = &fx.app;
    let selection = json!({"data": {"type": "custom-action-requests", "attributes": {
        "collection_name": "orders", "ids": ["1", "2"], "all_records": false,
        "all_records_ids_excluded": [], "values": {}, "smart_action_id": "orders-Mark@@@paid"}}});
    let (status, key, body) = call(
        app,
        "POST",
        "/forest/_actions/orders/0/mark-paid?timezone=UTC",
        Some(&selection),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "Paid");
    // Each selected order has the action's own row (who ran which action, with its form's
    // values) and the row of the write the action made, under one correlation id. Order 2 was
    // new: its change is recorded. Order 1 was already paid: the write still ran, so its entry
    // is confirmed with nothing changed.
    let by_operation = |history: &Json, operation: &str| {
        history["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["operation"] == operation)
            .unwrap_or_else(|| panic!("no {operation} entry in {history}"))
            .clone()
    };
    let two = ok(app, "/forest/_audit-trail/orders/2").await;
    assert_eq!(two["meta"]["count"], 2, "{two}");
    let ran = by_operation(&two, "action");
    assert_eq!(ran["actionName"], "Mark paid", "{ran}");
    assert_eq!(ran["recordId"], "2");
    assert_eq!(ran["status"], "done");
    assert_eq!(ran["userId"], 1);
    assert_eq!(ran["newValues"], json!({}));
    assert_eq!(ran["correlationKey"], key.as_str());
    let entry = by_operation(&two, "update");
    assert_eq!(entry["previousValues"], json!({"status": "new"}));
    assert_eq!(entry["newValues"], json!({"status": "paid"}));
    assert_eq!(entry["correlationKey"], key.as_str());
    let one = ok(app, "/forest/_audit-trail/orders/1").await;
    assert_eq!(by_operation(&one, "action")["actionName"], "Mark paid");
    let unchanged = by_operation(&one, "update");
    assert_eq!(unchanged["previousValues"], json!({}));
    assert_eq!(unchanged["newValues"], json!({}));
    assert_eq!(unchanged["status"], "done");
    let untouched = ok(app, "/forest/_audit-trail/orders/3").await;
    assert_eq!(untouched["meta"]["count"], 0);

    // The hook's line, created with the order, under the same correlation id.
    let create =
        json!({"data": {"type": "orders", "attributes": {"status": "new", "note": "with a line"}}});
    let (status, key, body) = call(app, "POST", "/forest/orders?timezone=UTC", Some(&create)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["data"]["id"].as_str().unwrap();
    let line = ok(app, &format!("/forest/_audit-trail/order_lines/{id}%7C1")).await;
    assert_eq!(line["meta"]["count"], 1, "{line}");
    assert_eq!(line["data"][0]["operation"], "create");
    assert_eq!(line["data"][0]["recordId"], format!("{id}|1"));
    assert_eq!(line["data"][0]["newValues"]["qty"], 1);
    assert_eq!(line["data"][0]["correlationKey"], key.as_str());
    let order = ok(app, &format!("/forest/_audit-trail/orders/{id}")).await;
    assert_eq!(order["data"][0]["correlationKey"], key.as_str());
}

/// Paging, sorting and every filter of the history route.
async fn history_filters_pages_and_sorts(data: Backend, keep: Keep) {
    let fx = fixture(data, keep).await;
    let app = &fx.app;
    let put = |attributes: Json| {
        let app = app.clone();
        async move {
            let body = json!({"data": {"type": "orders", "id": "5", "attributes": attributes}});
            let (status, _, body) =
                call(&app, "PUT", "/forest/orders/5?timezone=UTC", Some(&body)).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            tick().await;
        }
    };
    put(json!({"note": "first"})).await;
    put(json!({"status": "paid"})).await;
    put(json!({"note": "Lyon 50% off"})).await;
    put(json!({"status": "cancelled", "note": "last"})).await;
    let base = "/forest/_audit-trail/orders/5";
    let page = ok(app, &format!("{base}?page[size]=3")).await;
    assert_eq!(page["meta"]["count"], 4);
    assert_eq!(page["data"].as_array().unwrap().len(), 3);
    assert_eq!(
        page["data"][0]["newValues"]["note"], "last",
        "newest first by default"
    );
    assert!(page["meta"]["availableUsers"].is_array());
    let second = ok(app, &format!("{base}?page[size]=3&page[number]=2")).await;
    assert_eq!(second["data"].as_array().unwrap().len(), 1);
    assert_eq!(second["data"][0]["newValues"]["note"], "first");
    assert!(
        second["meta"].get("availableUsers").is_none(),
        "first fetch only"
    );
    let oldest = ok(app, &format!("{base}?sort=timestamp&page[size]=1")).await;
    assert_eq!(oldest["data"][0]["newValues"]["note"], "first");
    assert_eq!(oldest["meta"]["count"], 4, "count ignores the page");

    let count = |query: &str| {
        let app = app.clone();
        let uri = format!("{base}?{query}");
        async move { ok(&app, &uri).await["meta"]["count"].as_i64().unwrap() }
    };
    assert_eq!(count("fields=status").await, 2);
    assert_eq!(count("fields=note,status").await, 4);
    assert_eq!(count("fields=amount").await, 0);
    assert_eq!(
        count("search=lyon").await,
        2,
        "case-insensitive, before or after"
    );
    assert_eq!(
        count("search=50%25").await,
        2,
        "a % is a character, not a wildcard"
    );
    assert_eq!(count("search=r_sh").await, 0, "an _ too");
    assert_eq!(count("search=rush_").await, 1);
    assert_eq!(count("search=%20%20").await, 4, "blank is no filter");
    assert_eq!(count("search=ANN@X").await, 4, "the author's email");
    assert_eq!(count("userIds=1,abc").await, 4);
    assert_eq!(count("userIds=2").await, 0);
    assert_eq!(count("startDate=2000-01-01&endDate=2999-12-31").await, 4);
    assert_eq!(count("endDate=2000-01-01").await, 0);
    let first = ok(app, &format!("{base}?sort=timestamp")).await;
    let second_at = first["data"][1]["timestamp"].as_str().unwrap().to_owned();
    assert_eq!(
        count(&format!("startDate={second_at}")).await,
        3,
        "bounds are inclusive"
    );
    assert_eq!(count(&format!("endDate={second_at}")).await, 2);
    let (status, _, body) = call(app, "GET", &format!("{base}?startDate=yesterday"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("yesterday"),
        "{body}"
    );
    let (status, _, _) = call(app, "GET", &format!("{base}?timezone=Mars/Olympus"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = call(app, "GET", "/forest/_audit-trail/nowhere/1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// With Canopy's permissions: `read` on the collection is required, and a record that exists
/// outside the caller's scope is not found; the admin sees it.
async fn read_permission_and_scope_are_required(store: Backend) {
    let w = crate::permissions::world(store, Backend::Sqlite).await;
    w.rendering(
        json!({"orders": {"scope": {"field": "customer_id", "operator": "equal",
            "value": "{{currentUser.tags.customer}}"}, "segments": [], "liveQuerySegments": []}}),
        json!([]),
    )
    .await;
    let (data_db, datasource) = shop(Backend::Sqlite).await;
    let audit = AuditStore::in_store(&w.store);
    let options = StackOptions {
        audit: Some(AuditTrail {
            recorder: Arc::new(audit.clone()),
            critical: true,
        }),
        ..StackOptions::default()
    };
    let stack = build_stack_with(Arc::new(datasource), Vec::new(), &options).unwrap();
    let mut state = state(stack);
    state.audit = Some(Arc::new(audit));
    state.permissions = Arc::clone(&w.permissions);
    let app = canopy::http::router(Arc::new(state));
    let get = |who, uri: &str| {
        let app = app.clone();
        let uri = uri.to_owned();
        async move { crate::permissions::call(&app, who, "GET", &uri, None).await }
    };
    let (status, body) = get(w.sam, "/forest/_audit-trail/customers/1").await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "no read on customers: {body}"
    );
    let (status, body) = get(
        w.sam,
        "/forest/_audit-trail/customers/1/state?at=2024-01-01",
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = get(
        w.sam,
        "/forest/_audit-trail/correlations?collection=customers&recordId=1&correlationKeys=x",
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = get(w.sam, "/forest/_audit-trail/orders/2").await;
    assert_eq!(status, StatusCode::OK, "in scope: {body}");
    let (status, body) = get(w.sam, "/forest/_audit-trail/orders/3").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "out of scope: {body}");
    assert_eq!(body["errors"][0]["detail"], "Record does not exists");
    let (status, _) = get(w.admin, "/forest/_audit-trail/orders/3").await;
    assert_eq!(status, StatusCode::OK);
    // A record gone entirely: its history is served to the scoped user, without its values.
    let (status, body) = crate::permissions::call(
        &app,
        w.admin,
        "DELETE",
        "/forest/orders/4?timezone=UTC",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = get(w.admin, "/forest/_audit-trail/orders/4").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["data"][0]["previousValues"]["status"], "cancelled");
    let (status, body) = get(w.sam, "/forest/_audit-trail/orders/4").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"][0]["operation"], "delete");
    assert_eq!(body["data"][0]["previousValues"], json!({}));
    drop(data_db);
}

/// An audit store that fails every write.
struct Broken;

#[async_trait]
impl AuditRecorder for Broken {
    async fn insert_pending(&self, _: &[PendingEntry]) -> canopy::datasource::Result<()> {
        Err(canopy::datasource::Error::Internal(
            "the audit database is down".into(),
        ))
    }

    async fn confirm(&self, _: Uuid, _: &Confirmation) -> canopy::datasource::Result<()> {
        Err(canopy::datasource::Error::Internal(
            "the audit database is down".into(),
        ))
    }
}

/// Critical (the default): a change whose entry cannot be written is refused and nothing
/// changes. Not critical: the change is made (and the failure logged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_audit_store_refuses_the_change_when_critical() {
    for critical in [true, false] {
        let (_db, datasource) = shop(Backend::Sqlite).await;
        let options = StackOptions {
            audit: Some(AuditTrail {
                recorder: Arc::new(Broken),
                critical,
            }),
            ..StackOptions::default()
        };
        let stack = build_stack_with(Arc::new(datasource), Vec::new(), &options).unwrap();
        let orders = stack.collection("orders").unwrap();
        let caller = canopy_e2e::caller();
        let one = Filter::new(Some(crate::list::leaf(
            "id",
            canopy::datasource::Operator::Equal,
            Value::Int(2),
        )));
        let mut patch = Record::new();
        patch.insert("status", Value::String("paid".to_owned()));
        let outcome = orders.update(&caller, &one, &patch).await;
        let after = orders
            .list(
                &caller,
                &one,
                &canopy::datasource::Projection::new(["status"]),
            )
            .await
            .unwrap();
        let status = after[0].get("status").cloned();
        if critical {
            let error = outcome.unwrap_err().to_string();
            assert!(error.contains("audit trail"), "{error}");
            assert_eq!(status, Some(Value::String("new".into())), "nothing changed");
            let created = orders.create(&caller, vec![patch.clone()]).await;
            assert!(created.is_err());
            assert!(orders.delete(&caller, &one).await.is_err());
        } else {
            outcome.unwrap();
            assert_eq!(status, Some(Value::String("paid".into())));
        }
    }
}

/// A bulk change past the snapshot cap is refused when critical, rather than half audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_change_past_the_cap_is_refused_when_critical() {
    let (_db, datasource) = shop(Backend::Sqlite).await;
    let (_trail, audit) = trail(Keep::Store(Backend::Sqlite)).await;
    let many: Vec<String> = (0..1001).map(|i| format!("(3, {}, 1)", i + 10)).collect();
    _db.execute(&format!(
        "INSERT INTO order_lines (order_id, line_no, qty) VALUES {}",
        many.join(", ")
    ))
    .await;
    let options = StackOptions {
        audit: Some(AuditTrail {
            recorder: Arc::new(audit.clone()),
            critical: true,
        }),
        ..StackOptions::default()
    };
    let stack = build_stack_with(Arc::new(datasource), Vec::new(), &options).unwrap();
    let lines = stack.collection("order_lines").unwrap();
    let caller = canopy_e2e::caller();
    let error = lines
        .delete(&caller, &Filter::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("more than 1000"), "{error}");
    let left = lines
        .list(
            &caller,
            &Filter::default(),
            &canopy::datasource::Projection::new(["qty"]),
        )
        .await
        .unwrap();
    assert_eq!(left.len(), 1004, "nothing deleted");
}

/// Off (the default): no layer in the stack, no routes, no entries, `canUseAuditTrail` false.
/// On (`--audit-trail`), the served app records into Canopy's store and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_by_default_adds_no_layer_and_records_nothing() {
    let (_db, datasource) = shop(Backend::Sqlite).await;
    let base: Arc<dyn DataSource> = Arc::new(datasource);
    let off = build_stack_with(Arc::clone(&base), Vec::new(), &StackOptions::default()).unwrap();
    assert!(
        Arc::ptr_eq(
            &off.collection("orders").unwrap(),
            &base.collection("orders").unwrap()
        ),
        "without the trail, requests reach the datasource's own collection"
    );
    let (_trail, audit) = trail(Keep::Store(Backend::Sqlite)).await;
    let on = build_stack_with(
        Arc::clone(&base),
        Vec::new(),
        &StackOptions {
            audit: Some(AuditTrail {
                recorder: Arc::new(audit),
                critical: true,
            }),
            ..StackOptions::default()
        },
    )
    .unwrap();
    assert!(!Arc::ptr_eq(
        &on.collection("orders").unwrap(),
        &base.collection("orders").unwrap()
    ));

    for enabled in [false, true] {
        let served = served(enabled).await;
        let app = &served.router;
        let admin = crate::admin::token_for(&served.store, "admin@canopy.local").await;
        let send_as = |method: &str, uri: &str, body: Option<Json>| {
            let mut request = Request::builder()
                .method(method)
                .uri(uri)
                .header(header::AUTHORIZATION, format!("Bearer {admin}"));
            let body = match body {
                Some(body) => {
                    request = request.header(header::CONTENT_TYPE, "application/json");
                    Body::from(body.to_string())
                }
                None => Body::empty(),
            };
            let app = app.clone();
            let request = request.body(body).unwrap();
            async move { send(&app, request).await }
        };
        let update =
            json!({"data": {"type": "orders", "id": "2", "attributes": {"status": "paid"}}});
        let (status, _, body) = send_as("PUT", "/forest/orders/2?timezone=UTC", Some(update)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, _, body) = send_as(
            "POST",
            "/forest/_internal/capabilities",
            Some(json!({"collectionNames": []})),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["agentCapabilities"]["canUseAuditTrail"], enabled);
        let (status, _, body) = send_as("GET", "/forest/_audit-trail/orders/2", None).await;
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM canopy_audit_trail")
            .fetch_one(served.store.pool())
            .await
            .unwrap();
        if enabled {
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(body["data"][0]["newValues"], json!({"status": "paid"}));
            assert_eq!(rows, 1);
        } else {
            assert_eq!(status, StatusCode::NOT_FOUND, "no route: {body}");
            assert_eq!(rows, 0, "nothing recorded");
        }
    }
}

/// `canopy serve` over the shop (data on SQLite) with Canopy's store on SQLite, the trail on or
/// off, and what keeps it alive.
struct ServedShop {
    router: Router,
    store: Store,
    _served: Arc<Served>,
    _dbs: (TestDb, TestDb),
    _dir: crate::admin::TempDir,
}

async fn served(enabled: bool) -> ServedShop {
    let (data, datasource) = shop(Backend::Sqlite).await;
    let state = TestDb::new(Backend::Sqlite).await;
    let dir = crate::admin::TempDir::new();
    let mut config = crate::admin::config(&data, &state, &dir.0, None);
    assert_eq!(config.audit_trail, None, "off by default");
    if enabled {
        config.audit_trail = Some(AuditTrailConfig {
            database_url: None,
            critical: true,
        });
    }
    let served = Arc::new(Served::start(config, Arc::new(datasource)).await.unwrap());
    ServedShop {
        router: served.router(),
        store: served.platform().store.clone(),
        _served: served,
        _dbs: (data, state),
        _dir: dir,
    }
}

/// Two handles on one named database (another instance, or a restart) share the table, which
/// is created once; a table of that name that is not the trail's is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_database_gets_the_table_once_and_a_foreign_one_is_refused() {
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        let db = TestDb::new(backend).await;
        let first = AuditStore::open(&db.url, "acme", "production")
            .await
            .unwrap();
        let again = AuditStore::open(&db.url, "acme", "production")
            .await
            .unwrap();
        // Written through one handle, read through the other.
        let entry = |key: Uuid, user_id: i64| PendingEntry {
            key,
            timestamp: 1_700_000_000_000 + user_id,
            operation: canopy::customizer::audit::AuditOperation::Update,
            collection: "orders".to_owned(),
            record_id: Some("7".to_owned()),
            user_id,
            user_first_name: "Ann".to_owned(),
            user_last_name: "Lee".to_owned(),
            user_email: format!("u{user_id}@x.io"),
            correlation_key: format!("request-{user_id}"),
            action_name: None,
            previous_values: json!({"status": "new", "note": "Été à Lyon"})
                .as_object()
                .unwrap()
                .clone(),
        };
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        first
            .insert_pending(&[entry(a, 1), entry(b, 2)])
            .await
            .unwrap();
        let done = Confirmation {
            record_id: "7".to_owned(),
            previous_values: json!({"status": "new"}).as_object().unwrap().clone(),
            new_values: json!({"status": "paid"}).as_object().unwrap().clone(),
        };
        first.confirm(a, &done).await.unwrap();
        assert!(
            first.confirm(Uuid::now_v7(), &done).await.is_err(),
            "no such entry"
        );
        let query = canopy::platform::audit::HistoryQuery {
            collection: "orders".to_owned(),
            record_id: "7".to_owned(),
            ..Default::default()
        };
        let history = again
            .history(
                &query,
                canopy::platform::audit::Order::NewestFirst,
                0,
                Some(10),
            )
            .await
            .unwrap();
        let seen: Vec<(&str, &str)> = history
            .iter()
            .map(|e| (e.status.as_str(), e.correlation_key.as_str()))
            .collect();
        assert_eq!(
            seen,
            [("pending", "request-2"), ("done", "request-1")],
            "{backend:?}"
        );
        assert_eq!(history[0].previous_values["note"], "Été à Lyon");
        assert_eq!(history[1].new_values["status"], "paid");
        assert_eq!(again.count(&query).await.unwrap(), 2);
        assert_eq!(again.authors(&query).await.unwrap().len(), 2);
        let search = canopy::platform::audit::HistoryQuery {
            search: Some("lyon".to_owned()),
            fields: vec!["note".to_owned()],
            ..query.clone()
        };
        assert_eq!(again.count(&search).await.unwrap(), 1, "{backend:?}");
        let correlated = again
            .by_correlation("orders", "7", &["request-1".to_owned(), "other".to_owned()])
            .await
            .unwrap();
        assert_eq!(correlated.len(), 1);
        // Another environment sees none of it.
        let staging = AuditStore::open(&db.url, "acme", "staging").await.unwrap();
        assert_eq!(staging.count(&query).await.unwrap(), 0);
        drop((first, again));
        let foreign = TestDb::new(backend).await;
        foreign
            .execute("CREATE TABLE canopy_audit_trail (id INT PRIMARY KEY, what VARCHAR(10))")
            .await;
        let error = AuditStore::open(&foreign.url, "acme", "production")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not Canopy's audit trail table"),
            "{backend:?}: {error}"
        );
    }
}

/// Runs `$name(data, keep)` as one test per pairing: user data on each backend, the trail in
/// Canopy's store (SQLite, PostgreSQL) and in a named database (SQLite, PostgreSQL, MariaDB).
macro_rules! on_audit_pairs {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use canopy_e2e::Backend::{MySql, Postgres, Sqlite};
                use super::Keep::{Named, Store};
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_data_sqlite_store() { super::$name(Sqlite, Store(Sqlite)).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres_data_postgres_store() { super::$name(Postgres, Store(Postgres)).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn mysql_data_sqlite_store() { super::$name(MySql, Store(Sqlite)).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_data_named_mysql() { super::$name(Sqlite, Named(MySql)).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn mysql_data_named_postgres() { super::$name(MySql, Named(Postgres)).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres_data_named_sqlite() { super::$name(Postgres, Named(Sqlite)).await }
            }
        )*
    };
}

on_audit_pairs!(
    routes_record_before_and_after,
    actions_and_hooks_writes_are_recorded,
    history_filters_pages_and_sorts,
);

crate::admin::on_store_backends!(read_permission_and_scope_are_required);
