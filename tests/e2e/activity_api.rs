//! The listings of `/v1` over the logs, through HTTP on SQLite and PostgreSQL stores: every
//! filter of the activity log (platform-api.md §1.2) alone and combined, the `startingAfter`
//! cursor that a `createdAt.lt` bound cannot replace, bad parameters answered 400 naming them;
//! the admin-log filters (§1.3); and `canopy serve` writing buffered entries at shutdown.

use std::time::Duration;

use axum::http::StatusCode;
use canopy::auth::{SessionClaims, SessionKey};
use canopy::platform::Store;
use canopy::platform::activity::{Action, Actor, Entry, Origin};
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};

use crate::activity::{ACTIVITY, Fixture, fixture, request};
use crate::admin::{TempDir, on_store_backends};
use crate::harness::{AUTH_SECRET, encode};
use crate::http::send;

/// 2026-01-01T00:00:00Z.
const T: i64 = 1_767_225_600_000;

fn actor(id: i64, email: &str, team: &str) -> Actor {
    Actor {
        id,
        email: email.to_owned(),
        username: "Someone".to_owned(),
        team: team.to_owned(),
    }
}

fn at(entry: Entry, ms: i64) -> Entry {
    Entry {
        created_at: ms,
        ..entry
    }
}

/// Seven entries; five served in production (one failed, one in staging). Returns the ids of
/// the served ones, oldest first: e1 … e5 (e3 and e4 in the same millisecond).
async fn seed(store: &Store) -> Vec<String> {
    let sam = || actor(7, "sam@acme.io", "Ops");
    let lee = || actor(8, "lee@acme.io", "Sales");
    let entries = vec![
        at(
            Entry::new(Action::Index, sam(), Origin::Api).with_collection("orders"),
            T,
        ),
        at(
            Entry::new(Action::Read, sam(), Origin::Ui)
                .with_collection("orders")
                .with_records(["1"]),
            T + 1000,
        ),
        at(
            Entry::new(Action::Update, lee(), Origin::Ui)
                .with_collection("customers")
                .with_records(["1", "2"]),
            T + 2000,
        ),
        at(
            Entry::new(Action::Delete, lee(), Origin::Ui)
                .with_collection("orders")
                .with_records(["1"]),
            T + 2000,
        ),
        at(
            Entry::new(Action::Action, sam(), Origin::Ui)
                .with_collection("orders")
                .with_records(["3"])
                .with_label("Refund"),
            T + 3000,
        ),
        at(
            Entry::new(Action::Read, sam(), Origin::Ui)
                .with_collection("orders")
                .with_records(["1"])
                .failed(),
            T + 4000,
        ),
        at(
            Entry::new(Action::Read, sam(), Origin::Ui)
                .with_collection("orders")
                .with_records(["1"])
                .with_environment("staging"),
            T + 5000,
        ),
    ];
    store.insert_activity(&entries).await.unwrap();
    entries[..5].iter().map(|e| e.id.clone()).collect()
}

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

async fn list(f: &Fixture, query: &str) -> (StatusCode, Json) {
    let (status, _, body) = send(
        &f.app,
        request("GET", &format!("{ACTIVITY}?{query}"), &f.boss, None),
    )
    .await;
    (status, body)
}

/// The served ids of a query, as e-numbers (`e1` … `e5`).
async fn names(f: &Fixture, ids: &[String], query: &str) -> Vec<String> {
    let (status, body) = list(f, query).await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let id = e["id"].as_str().unwrap();
            let n = ids.iter().position(|i| i == id).unwrap_or_else(|| {
                panic!("{query}: unexpected entry {e}");
            });
            format!("e{}", n + 1)
        })
        .collect()
}

async fn activity_filters_through_http(backend: Backend) {
    let f = fixture(backend, true).await;
    let ids = seed(&f.store).await;
    let cases: Vec<(String, Vec<&str>)> = vec![
        ("limit=100".into(), vec!["e5", "e4", "e3", "e2", "e1"]),
        ("userEmail=sam%40acme.io".into(), vec!["e5", "e2", "e1"]),
        ("userId=8".into(), vec!["e4", "e3"]),
        ("teamName=Sales".into(), vec!["e4", "e3"]),
        ("collectionName=customers".into(), vec!["e3"]),
        ("recordId=1".into(), vec!["e4", "e3", "e2"]),
        ("recordId=1&collectionName=orders".into(), vec!["e4", "e2"]),
        ("action=read".into(), vec!["e2"]),
        ("action=delete".into(), vec!["e4"]),
        ("action=createNote".into(), vec![]),
        ("type=write".into(), vec!["e5", "e4", "e3"]),
        ("type=read&userId=7".into(), vec!["e2", "e1"]),
        (
            format!(
                "createdAt.gte={}&createdAt.lt={}",
                encode(&iso(T + 1000)),
                encode(&iso(T + 3000))
            ),
            vec!["e4", "e3", "e2"],
        ),
        (
            format!("createdAt.eq={}", encode(&iso(T + 2000))),
            vec!["e4", "e3"],
        ),
        (
            format!("createdAt.lte={}", encode(&iso(T + 1000))),
            vec!["e2", "e1"],
        ),
        (
            format!("createdAt.gt={}", encode(&iso(T + 2000))),
            vec!["e5"],
        ),
        // The platform's lenient form: minutes only, no zone (UTC).
        (
            "createdAt.gte=2026-01-01T00:00".into(),
            vec!["e5", "e4", "e3", "e2", "e1"],
        ),
        (
            format!(
                "userEmail=sam%40acme.io&type=write&recordId=3&createdAt.gte={}",
                encode(&iso(T))
            ),
            vec!["e5"],
        ),
        ("userEmail=nobody%40acme.io".into(), vec![]),
        ("teamName=Ops&collectionName=customers".into(), vec![]),
    ];
    for (query, expected) in cases {
        assert_eq!(names(&f, &ids, &query).await, expected, "{query}");
    }

    // The served shape of an entry with every optional field.
    let (_, body) = list(&f, "action=action").await;
    assert_eq!(
        body["data"][0],
        json!({"object": "activityLog", "id": ids[4], "type": "write", "action": "action",
            "label": "Refund", "recordIds": ["3"], "createdAt": "2026-01-01T00:00:03.000Z",
            "user": {"object": "user", "id": 7, "username": "Someone", "email": "sam@acme.io"},
            "environment": {"object": "environment", "name": "production"},
            "team": {"object": "team", "name": "Ops"},
            "collection": {"object": "collection", "name": "orders"}})
    );

    // Paging: `startingAfter` continues after an entry, same millisecond included; a
    // `createdAt.lt` bound taken from the last entry of a page skips e3.
    let (_, page) = list(&f, "limit=2").await;
    assert_eq!(page["hasMore"], true);
    assert_eq!(names(&f, &ids, "limit=2").await, ["e5", "e4"]);
    let next = format!("limit=2&startingAfter={}", ids[3]);
    let (_, body) = list(&f, &next).await;
    assert_eq!(body["hasMore"], true);
    assert_eq!(
        body["parameters"],
        json!({"projectName": "acme", "environmentName": "production", "limit": 2,
            "startingAfter": ids[3]})
    );
    assert_eq!(names(&f, &ids, &next).await, ["e3", "e2"]);
    let last = format!("limit=2&startingAfter={}", ids[1]);
    assert_eq!(names(&f, &ids, &last).await, ["e1"]);
    assert_eq!(list(&f, &last).await.1["hasMore"], false);
    let lt = format!("limit=2&createdAt.lt={}", encode(&iso(T + 2000)));
    assert_eq!(names(&f, &ids, &lt).await, ["e2", "e1"], "e3 is skipped");
    // Combined with a filter, the cursor keeps to it.
    let filtered = format!("userId=7&startingAfter={}", ids[4]);
    assert_eq!(names(&f, &ids, &filtered).await, ["e2", "e1"]);

    // Bad parameters: 400 naming them, whatever else is given.
    for (query, named) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("userId=abc", "userId"),
        ("userId=0", "userId"),
        ("userEmail=sam", "userEmail"),
        ("teamName=", "teamName"),
        ("action=drop", "action"),
        ("type=delete", "type"),
        ("createdAt.gte=yesterday", "createdAt.gte"),
        ("createdAt.eq=2026-13-01", "createdAt.eq"),
        ("startingAfter=no-such-entry", "startingAfter"),
        ("recordId=1&recordId=2", "recordId"),
    ] {
        let (status, body) = list(&f, query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["code"], "invalid_parameter", "{query}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(named), "{query}: {message}");
    }

    // Admins only, and only the served project and known environments.
    let (status, _, body) = send(&f.app, request("GET", ACTIVITY, &f.clerk, None)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _, body) = send(
        &f.app,
        request(
            "GET",
            "/v1/project/other/environment/production/activity-logs",
            &f.boss,
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, _) = send(
        &f.app,
        axum::http::Request::get(ACTIVITY)
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

async fn admin_logs(f: &Fixture, query: &str) -> (StatusCode, Json) {
    let (status, _, body) = send(
        &f.app,
        request(
            "GET",
            &format!("/v1/project/acme/admin-logs?{query}"),
            &f.boss,
            None,
        ),
    )
    .await;
    (status, body)
}

async fn admin_log_filters_through_http(backend: Backend) {
    let f = fixture(backend, true).await;
    let base = "/v1/project/acme";
    // Let the boss's entries come strictly after the set-up's.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let since = chrono::Utc::now().timestamp_millis();
    let (status, _, team) = send(
        &f.app,
        request(
            "POST",
            &format!("{base}/teams"),
            &f.boss,
            Some(&json!({"name": "Support"})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{team}");
    let (status, _, renamed) = send(
        &f.app,
        request(
            "PATCH",
            &format!("{base}/teams/{}", team["id"]),
            &f.boss,
            Some(&json!({"name": "Support EU"})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{renamed}");

    let summary = |body: &Json| -> Vec<String> {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| format!("{} {} {}", e["type"], e["resource"], e["initiator"]).replace('"', ""))
            .collect()
    };
    let admin = vec![
        "update team administrator".to_owned(),
        "add team administrator".to_owned(),
    ];
    for query in [
        "initiator=administrator".to_owned(),
        format!("userId={}", f.boss.id),
        "userEmail=boss%40acme.io".to_owned(),
        format!("createdAt.gte={}", encode(&iso(since))),
        format!("createdAt.gte={}&resource=team", encode(&iso(since))),
    ] {
        let (status, body) = admin_logs(&f, &query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        assert_eq!(summary(&body), admin, "{query}");
    }
    let (_, body) = admin_logs(&f, "type=add&resource=team").await;
    assert_eq!(
        summary(&body),
        [
            "add team administrator",
            "add team forestAdmin",
            "add team forestAdmin"
        ]
    );
    assert_eq!(
        body["parameters"],
        json!({"projectName": "acme", "limit": 10, "type": "add", "resource": "team"})
    );
    let (_, body) = admin_logs(&f, "type=add&resource=team&initiator=forestAdmin&limit=1").await;
    assert_eq!(summary(&body), ["add team forestAdmin"]);
    assert_eq!(body["hasMore"], true);
    assert!(body["data"][0].get("user").is_none(), "{body}");
    let (_, body) = admin_logs(&f, "resource=environment").await;
    assert_eq!(summary(&body), ["update environment forestAdmin"]);
    let (_, body) = admin_logs(
        &f,
        &format!(
            "createdAt.lt={}&initiator=administrator",
            encode(&iso(since))
        ),
    )
    .await;
    assert_eq!(summary(&body), Vec::<String>::new());
    let (_, body) = admin_logs(&f, "initiator=administrator&limit=1").await;
    assert_eq!(
        body["data"][0]["user"],
        json!({"object": "user", "id": f.boss.id, "username": "Boss Test", "email": "boss@acme.io"})
    );
    assert_eq!(body["data"][0]["previousValue"], json!({"name": "Support"}));

    for (query, named) in [
        ("type=rename", "type"),
        ("initiator=robot", "initiator"),
        ("resource=table", "resource"),
        ("userId=-1", "userId"),
        ("userEmail=boss", "userEmail"),
        ("createdAt.lte=later", "createdAt.lte"),
        ("limit=1000", "limit"),
    ] {
        let (status, body) = admin_logs(&f, query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["code"], "invalid_parameter");
        assert!(
            body["message"].as_str().unwrap().contains(named),
            "{query}: {body}"
        );
    }
}

on_store_backends!(
    activity_filters_through_http,
    admin_log_filters_through_http
);

/// `canopy serve` writes the entries still buffered when it stops: a request answered just
/// before the shutdown is in the store once `run` returns, with nobody flushing by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_writes_the_buffered_entries() {
    let (data, _datasource) = crate::list::shop(Backend::Sqlite).await;
    let state = TestDb::new(Backend::Sqlite).await;
    let dir = TempDir::new();
    let config = crate::admin::config(&data, &state, &dir.0, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = canopy::app::run(config, listener, async move {
        let _ = stopped.await;
    });
    let client = async {
        let client = reqwest::Client::new();
        // The store exists once the server answers its healthcheck.
        let mut ready = false;
        for _ in 0..200 {
            if client
                .get(format!("http://{address}/forest"))
                .send()
                .await
                .is_ok()
            {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(ready, "the server did not start");
        let token = admin_token(&state.url).await;
        let response = client
            .get(format!("http://{address}/forest/orders?timezone=UTC"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        // Stops at once: the entry is still in the logger's buffer (it waits up to 200 ms
        // for a batch) unless the shutdown writes it.
        stop.send(()).unwrap();
    };
    let (served, ()) = tokio::join!(server, client);
    served.unwrap();

    let store = Store::open(&state.url, "acme", "production").await.unwrap();
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT action, user_email, collection_name FROM activity_logs WHERE status = 'completed'",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        rows,
        [(
            "index".to_owned(),
            "admin@canopy.local".to_owned(),
            "orders".to_owned()
        )]
    );
    store.close().await;
}

/// A session token of the first admin of the store at `url`, as the sign-in would mint it.
async fn admin_token(url: &str) -> String {
    let store = Store::open(url, "acme", "production").await.unwrap();
    let admin = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let team = &admin.teams[0];
    let claims = SessionClaims {
        id: admin.id,
        email: admin.email.clone(),
        first_name: admin.first_name.clone(),
        last_name: admin.last_name.clone(),
        team: team.name.clone(),
        team_id: Some(team.id),
        role: admin
            .role
            .as_ref()
            .map(|r| r.name.clone())
            .unwrap_or_default(),
        role_id: admin.role.as_ref().map(|r| r.id),
        permission_level: admin.permission_level,
        rendering_id: store.rendering_id(team.id).await.unwrap(),
        tags: Default::default(),
        iat: 0,
        exp: 0,
    };
    store.close().await;
    SessionKey::new(AUTH_SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap()
}
