//! Activity logs of the `/forest` routes and of approvals, on SQLite and PostgreSQL stores (user
//! data on SQLite): every operation of each kind leaves exactly one entry with the right action,
//! type, user, team, collection, record ids and origin; refused operations are kept as failed
//! and not served; nothing is recorded when activity logging is off.
//!
//! The fixture is the shop of `list` with a `Refund` action on orders, a real store with a
//! `Boss` (admin, every right, approves) and a `Clerk` (whose `Refund` needs an approval), and
//! the router with the permission service and the activity logger over that store.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::auth::{CachePolicy, PermissionLevel, Permissions, SessionClaims, SessionKey};
use canopy::customizer::{Kind, build_stack, closures};
use canopy::datasource::action::{ActionResult, ActionScope};
use canopy::http::{ApprovalSettings, router};
use canopy::platform::documents::EnvironmentPermissions;
use canopy::platform::{ActivityLog, Actor, NewUser, Store};
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};

use crate::admin::on_store_backends;
use crate::harness::{AUTH_SECRET, ENV_SECRET, encode, filters, on, state};
use crate::http::send;

pub(crate) const ACTIVITY: &str = "/v1/project/acme/environment/production/activity-logs";
const APPROVALS: &str = "/v1/project/acme/environment/production/approval-requests";
const REFUND: &str = "/forest/_actions/orders/0/refund?timezone=UTC";

/// A user of the fixture: id, email and session token.
pub(crate) struct User {
    pub id: i64,
    pub email: String,
    pub username: String,
    pub token: String,
}

pub(crate) struct Fixture {
    _data: TestDb,
    _state: TestDb,
    pub store: Store,
    pub activity: ActivityLog,
    pub app: Router,
    pub boss: User,
    pub clerk: User,
}

/// Every collection right on the shop's collections; `Refund` triggered by both roles, with an
/// approval for the clerk, approved by the boss.
fn environment(boss: i64, clerk: i64) -> EnvironmentPermissions {
    let all = json!({"browseEnabled": true, "readEnabled": true, "editEnabled": true,
        "addEnabled": true, "deleteEnabled": true, "exportEnabled": true});
    let refund = json!({
        "triggerEnabled": {"roles": [boss, clerk]},
        "triggerConditions": [],
        "approvalRequired": {"roles": [clerk]},
        "approvalRequiredConditions": [],
        "userApprovalEnabled": {"roles": [boss]},
        "userApprovalConditions": [],
        "selfApprovalEnabled": {"roles": [boss]},
    });
    serde_json::from_value(json!({"collections": {
        "orders": {"collection": all, "actions": {"Refund": refund}},
        "customers": {"collection": all, "actions": {}},
        "order_lines": {"collection": all, "actions": {}},
        "countries": {"collection": all, "actions": {}},
    }}))
    .unwrap()
}

async fn user(store: &Store, email: &str, role: &str, team: &str, level: PermissionLevel) -> User {
    let created = store
        .create_user(
            &Actor::System,
            NewUser {
                email: email.to_owned(),
                first_name: role.to_owned(),
                last_name: "Test".to_owned(),
                permission_level: level,
                role: Some(role.to_owned()),
                teams: vec![team.to_owned()],
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let team_id = created.teams[0].id;
    let claims = SessionClaims {
        id: created.id,
        email: email.to_owned(),
        first_name: role.to_owned(),
        last_name: "Test".to_owned(),
        team: team.to_owned(),
        team_id: Some(team_id),
        role: role.to_owned(),
        role_id: created.role.as_ref().map(|r| r.id),
        permission_level: level,
        rendering_id: store.rendering_id(team_id).await.unwrap(),
        tags: Default::default(),
        iat: 0,
        exp: 0,
    };
    User {
        id: created.id,
        email: email.to_owned(),
        username: format!("{role} Test"),
        token: SessionKey::new(AUTH_SECRET)
            .mint(claims, Duration::from_secs(3600))
            .unwrap(),
    }
}

/// The fixture with its store on `backend`; `logging` false serves with activity logging off.
pub(crate) async fn fixture(backend: Backend, logging: bool) -> Fixture {
    let (data, datasource) = crate::list::shop(Backend::Sqlite).await;
    let state_db = TestDb::new(backend).await;
    let store = Store::open(&state_db.url, "acme", "production")
        .await
        .unwrap();
    let boss_role = store.create_role(&Actor::System, "Boss").await.unwrap().id;
    let clerk_role = store.create_role(&Actor::System, "Clerk").await.unwrap().id;
    for team in ["Ops", "Clerks"] {
        store.create_team(&Actor::System, team).await.unwrap();
    }
    let boss = user(
        &store,
        "boss@acme.io",
        "Boss",
        "Ops",
        PermissionLevel::Admin,
    )
    .await;
    let clerk = user(
        &store,
        "clerk@acme.io",
        "Clerk",
        "Clerks",
        PermissionLevel::User,
    )
    .await;
    store
        .set_environment_document(&Actor::System, &environment(boss_role, clerk_role))
        .await
        .unwrap();
    let refund = Kind::Action {
        name: "Refund".to_owned(),
        scope: ActionScope::Bulk,
        generate_file: false,
        description: None,
        submit_button_label: None,
        static_form: None,
        handler: closures::action(
            |_, _| Ok(Vec::new()),
            |_, _| async { Ok(ActionResult::success("Refunded".to_owned())) },
        ),
    };
    let stack = build_stack(Arc::new(datasource), vec![on("orders", refund)]).unwrap();
    let activity = if logging {
        ActivityLog::start(store.clone())
    } else {
        ActivityLog::disabled()
    };
    let mut state = state(stack);
    state.permissions = Arc::new(Permissions::new(
        Arc::new(store.clone()),
        CachePolicy::new(true, Duration::from_secs(900)),
    ));
    state.store = Some(store.clone());
    state.approvals = ApprovalSettings::new(ENV_SECRET, 100);
    state.activity = activity.clone();
    Fixture {
        _data: data,
        _state: state_db,
        store,
        activity,
        app: router(Arc::new(state)),
        boss,
        clerk,
    }
}

/// A request with `user`'s session token and, when given, a JSON body.
pub(crate) fn request(method: &str, uri: &str, user: &User, body: Option<&Json>) -> Request<Body> {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", user.token));
    match body {
        Some(body) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .unwrap()
}

impl Fixture {
    /// Sends and asserts the status.
    async fn ok(&self, method: &str, uri: &str, user: &User, body: Option<Json>, expected: u16) {
        let (status, _, answer) = send(&self.app, request(method, uri, user, body.as_ref())).await;
        assert_eq!(status.as_u16(), expected, "{method} {uri}: {answer}");
    }

    /// The served activity log (flushed first), oldest first.
    pub(crate) async fn served(&self) -> Vec<Json> {
        self.activity.flush().await;
        let (status, _, body) = send(
            &self.app,
            request("GET", &format!("{ACTIVITY}?limit=100"), &self.boss, None),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut data = body["data"].as_array().unwrap().clone();
        data.reverse();
        data
    }
}

/// An expected entry: action, type, collection, record ids, user, team.
type Expected<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    Vec<&'a str>,
    &'a User,
    &'a str,
);

fn refund_body(ids: &[&str]) -> Json {
    json!({"data": {"type": "custom-action-requests", "attributes": {
        "collection_name": "orders", "ids": ids, "all_records": false,
        "all_records_ids_excluded": [], "values": {}, "smart_action_id": "orders-Refund",
    }}})
}

/// What one entry must say: action, type, collection, record ids, label (when checked).
fn expect(
    entry: &Json,
    action: &str,
    kind: &str,
    collection: Option<&str>,
    ids: &[&str],
    user: &User,
    team: &str,
) {
    assert_eq!(entry["object"], "activityLog", "{entry}");
    assert_eq!(entry["action"], action, "{entry}");
    assert_eq!(entry["type"], kind, "{entry}");
    assert_eq!(
        entry["user"],
        json!({"object": "user", "id": user.id, "username": user.username,
            "email": user.email}),
        "{entry}"
    );
    assert_eq!(entry["team"], json!({"object": "team", "name": team}));
    assert_eq!(
        entry["environment"],
        json!({"object": "environment", "name": "production"})
    );
    match collection {
        Some(name) => assert_eq!(
            entry["collection"],
            json!({"object": "collection", "name": name}),
            "{entry}"
        ),
        None => assert!(entry.get("collection").is_none(), "{entry}"),
    }
    if ids.is_empty() {
        assert!(entry.get("recordIds").is_none(), "{entry}");
    } else {
        assert_eq!(entry["recordIds"], json!(ids), "{entry}");
    }
    assert!(entry["id"].as_str().is_some_and(|id| id.len() == 36));
    assert!(entry["createdAt"].as_str().unwrap().ends_with('Z'));
    // Exactly the platform's fields: no status, origin or token in the served shape.
    for key in entry.as_object().unwrap().keys() {
        assert!(
            [
                "object",
                "id",
                "type",
                "action",
                "label",
                "recordIds",
                "createdAt",
                "user",
                "environment",
                "team",
                "collection"
            ]
            .contains(&key.as_str()),
            "unexpected field {key} in {entry}"
        );
    }
}

async fn every_operation_leaves_one_entry(backend: Backend) {
    let f = fixture(backend, true).await;
    let boss = &f.boss;
    let q = "timezone=UTC";
    f.ok("GET", &format!("/forest/orders?{q}"), boss, None, 200)
        .await;
    f.ok(
        "GET",
        &format!("/forest/orders?{q}&search=paid"),
        boss,
        None,
        200,
    )
    .await;
    let status_paid = filters(&json!({"field": "status", "operator": "equal", "value": "paid"}));
    f.ok(
        "GET",
        &format!("/forest/orders?{q}&filters={status_paid}"),
        boss,
        None,
        200,
    )
    .await;
    // A count belongs to the list's screen: no entry of its own.
    f.ok("GET", &format!("/forest/orders/count?{q}"), boss, None, 200)
        .await;
    f.ok("GET", &format!("/forest/orders/1?{q}"), boss, None, 200)
        .await;
    f.ok(
        "GET",
        &format!("/forest/order_lines/{}?{q}", encode("1|2")),
        boss,
        None,
        200,
    )
    .await;
    let eve = json!({"data": {"type": "customers", "attributes": {"name": "Eve"}}});
    f.ok(
        "POST",
        &format!("/forest/customers?{q}"),
        boss,
        Some(eve),
        200,
    )
    .await;
    let eva = json!({"data": {"type": "customers", "id": "5", "attributes": {"name": "Eva"}}});
    f.ok(
        "PUT",
        &format!("/forest/customers/5?{q}"),
        boss,
        Some(eva),
        200,
    )
    .await;
    f.ok(
        "DELETE",
        &format!("/forest/customers/5?{q}"),
        boss,
        None,
        204,
    )
    .await;
    let selection = json!({"data": {"type": "action-requests", "attributes": {
        "collection_name": "orders", "ids": ["4"], "all_records": false,
        "all_records_ids_excluded": []}}});
    f.ok(
        "DELETE",
        &format!("/forest/orders?{q}"),
        boss,
        Some(selection),
        204,
    )
    .await;
    f.ok(
        "GET",
        &format!("/forest/orders.csv?{q}&fields%5Borders%5D=id,status&header=id,status"),
        boss,
        None,
        200,
    )
    .await;
    f.ok(
        "GET",
        &format!("/forest/customers/1/relationships/orders?{q}"),
        boss,
        None,
        200,
    )
    .await;
    let order_5 = json!({"data": [{"id": "5", "type": "orders"}]});
    f.ok(
        "POST",
        &format!("/forest/customers/2/relationships/orders?{q}"),
        boss,
        Some(order_5.clone()),
        204,
    )
    .await;
    f.ok(
        "DELETE",
        &format!("/forest/customers/2/relationships/orders?{q}"),
        boss,
        Some(order_5),
        204,
    )
    .await;
    let customer_1 = json!({"data": {"id": "1", "type": "customers"}});
    f.ok(
        "PUT",
        &format!("/forest/orders/5/relationships/customer?{q}"),
        boss,
        Some(customer_1),
        204,
    )
    .await;
    let chart = json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count"});
    f.ok(
        "POST",
        &format!("/forest/stats/orders?{q}"),
        boss,
        Some(chart),
        200,
    )
    .await;
    f.ok("POST", REFUND, boss, Some(refund_body(&["1", "2"])), 200)
        .await;

    // The clerk's Refund needs an approval: refused (failed, not served), then filed.
    f.ok("POST", REFUND, &f.clerk, Some(refund_body(&["2"])), 403)
        .await;
    let filed = |ids: &[&str]| json!({"action": "Refund", "data": {"attributes": refund_body(ids)["data"]["attributes"]}});
    let (status, _, first) = send(
        &f.app,
        request("POST", APPROVALS, &f.clerk, Some(&filed(&["2"]))),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, _, second) = send(
        &f.app,
        request("POST", APPROVALS, &f.clerk, Some(&filed(&["3"]))),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    f.ok(
        "POST",
        &format!("{APPROVALS}/{}/approve", first["id"]),
        boss,
        Some(json!({})),
        200,
    )
    .await;
    f.ok(
        "POST",
        &format!("{APPROVALS}/{}/reject", second["id"]),
        boss,
        Some(json!({"comment": "no"})),
        200,
    )
    .await;
    // Refused: an unknown record (404) leaves a failed entry, not served.
    f.ok("GET", &format!("/forest/orders/999?{q}"), boss, None, 404)
        .await;
    // A path without a collection records nothing.
    f.ok("GET", &format!("/forest/nothing?{q}"), boss, None, 404)
        .await;

    let entries = f.served().await;
    let (b, c) = (&f.boss, &f.clerk);
    let expected: Vec<Expected<'_>> = vec![
        ("index", "read", Some("orders"), vec![], b, "Ops"),
        ("search", "read", Some("orders"), vec![], b, "Ops"),
        ("filter", "read", Some("orders"), vec![], b, "Ops"),
        ("read", "read", Some("orders"), vec!["1"], b, "Ops"),
        ("read", "read", Some("order_lines"), vec!["1|2"], b, "Ops"),
        ("create", "write", Some("customers"), vec!["5"], b, "Ops"),
        ("update", "write", Some("customers"), vec!["5"], b, "Ops"),
        ("delete", "write", Some("customers"), vec!["5"], b, "Ops"),
        ("delete", "write", Some("orders"), vec!["4"], b, "Ops"),
        ("export", "read", Some("orders"), vec![], b, "Ops"),
        (
            "listRelatedData",
            "read",
            Some("customers"),
            vec!["1"],
            b,
            "Ops",
        ),
        ("update", "write", Some("customers"), vec!["2"], b, "Ops"),
        ("update", "write", Some("customers"), vec!["2"], b, "Ops"),
        ("update", "write", Some("orders"), vec!["5"], b, "Ops"),
        ("dashboard", "read", Some("orders"), vec![], b, "Ops"),
        ("action", "write", Some("orders"), vec!["1", "2"], b, "Ops"),
        (
            "createApproval",
            "write",
            Some("orders"),
            vec!["2"],
            c,
            "Clerks",
        ),
        (
            "createApproval",
            "write",
            Some("orders"),
            vec!["3"],
            c,
            "Clerks",
        ),
        (
            "approveApproval",
            "write",
            Some("orders"),
            vec!["2"],
            b,
            "Ops",
        ),
        (
            "rejectApproval",
            "write",
            Some("orders"),
            vec!["3"],
            b,
            "Ops",
        ),
    ];
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        expected.iter().map(|e| e.0).collect::<Vec<_>>(),
        "one entry per operation, in order"
    );
    for (entry, (action, kind, collection, ids, user, team)) in entries.iter().zip(&expected) {
        expect(entry, action, kind, *collection, ids, user, team);
    }
    assert_eq!(entries[15]["label"], "Refund");
    assert_eq!(entries[11]["label"], "associated to orders");
    assert_eq!(entries[12]["label"], "dissociated from orders");
    assert_eq!(entries[13]["label"], "changed customer");

    // Stored but not served: the two refused operations, as failed, with origin ui.
    let failed: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT action, user_email, origin FROM activity_logs WHERE status = 'failed' \
         ORDER BY created_at, id",
    )
    .fetch_all(f.store.pool())
    .await
    .unwrap();
    assert_eq!(
        failed,
        [
            (
                "action".to_owned(),
                "clerk@acme.io".to_owned(),
                "ui".to_owned()
            ),
            (
                "read".to_owned(),
                "boss@acme.io".to_owned(),
                "ui".to_owned()
            ),
        ]
    );
    let origins: Vec<(String,)> = sqlx::query_as("SELECT DISTINCT origin FROM activity_logs")
        .fetch_all(f.store.pool())
        .await
        .unwrap();
    assert_eq!(origins, [("ui".to_owned(),)]);
    assert_eq!(f.activity.dropped(), 0);
}

async fn nothing_is_recorded_when_logging_is_off(backend: Backend) {
    let f = fixture(backend, false).await;
    f.ok("GET", "/forest/orders?timezone=UTC", &f.boss, None, 200)
        .await;
    f.ok(
        "DELETE",
        "/forest/orders/4?timezone=UTC",
        &f.boss,
        None,
        204,
    )
    .await;
    assert!(f.served().await.is_empty());
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM activity_logs")
        .fetch_one(f.store.pool())
        .await
        .unwrap();
    assert_eq!(count, 0);
}

on_store_backends!(
    every_operation_leaves_one_entry,
    nothing_is_recorded_when_logging_is_off
);
