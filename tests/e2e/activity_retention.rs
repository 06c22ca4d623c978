//! The bounded activity log (issue 21 §3), on SQLite and PostgreSQL stores: pruning deletes the
//! entries older than the retention and keeps the newer ones, the row cap keeps the newest N,
//! the `recordId` side rows go with their entries, the API keeps answering while batches are
//! deleted; `canopy serve` prunes by itself with `activityLogRetentionDays`; entries written
//! before the compact schema (migration 0015) are served unchanged after it.

use std::time::Duration;

use axum::http::StatusCode;
use canopy::platform::Store;
use canopy::platform::activity::{Action, Actor, Entry, Origin, PruneSchedule, Pruned, Retention};
use canopy_e2e::{Backend, TestDb};
use serde_json::Value as Json;

use crate::activity::{ACTIVITY, Fixture, fixture, request};
use crate::admin::{TempDir, on_store_backends};
use crate::http::send;

const DAY: i64 = 24 * 60 * 60 * 1000;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn sam() -> Actor {
    Actor {
        id: 7,
        email: "sam@acme.io".to_owned(),
        username: "Sam Lee".to_owned(),
        team: "Ops".to_owned(),
    }
}

/// A read of order `record` by Sam, `age_ms` ago.
fn read(record: &str, age_ms: i64) -> Entry {
    Entry {
        created_at: now_ms() - age_ms,
        ..Entry::new(Action::Read, sam(), Origin::Ui)
            .with_collection("orders")
            .with_records([record])
    }
}

async fn list(f: &Fixture, query: &str) -> Json {
    let (status, _, body) = send(
        &f.app,
        request("GET", &format!("{ACTIVITY}?{query}"), &f.boss, None),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    body
}

/// The record ids of the served entries, newest first.
async fn records(f: &Fixture, query: &str) -> Vec<String> {
    list(f, query).await["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["recordIds"][0].as_str().unwrap().to_owned())
        .collect()
}

async fn side_rows(store: &Store) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM activity_records")
        .fetch_one(store.pool())
        .await
        .unwrap()
}

fn fast() -> PruneSchedule {
    PruneSchedule {
        interval: Duration::from_millis(50),
        batch: 3,
        pause: Duration::from_millis(1),
    }
}

async fn pruning_keeps_the_retention_and_the_newest_rows(backend: Backend) {
    let f = fixture(backend, false).await;
    f.store
        .insert_activity(&[
            read("old1", 120 * DAY),
            read("old2", 91 * DAY),
            read("old3", 90 * DAY + 60_000),
            read("new1", 89 * DAY),
            read("new2", DAY),
            read("new3", 1000),
        ])
        .await
        .unwrap();
    assert_eq!(side_rows(&f.store).await, 6);
    let retention = Retention {
        days: Some(90),
        max_rows: None,
    };
    let pruned = f
        .store
        .prune_activity(retention, fast(), now_ms())
        .await
        .unwrap();
    assert_eq!(
        pruned,
        Pruned {
            expired: 3,
            over_cap: 0
        }
    );
    assert_eq!(
        records(&f, "limit=100").await,
        ["new3", "new2", "new1"],
        "entries older than 90 days are gone, newer ones stay"
    );
    // Their `recordId` rows went with them.
    assert_eq!(side_rows(&f.store).await, 3);
    assert!(records(&f, "recordId=old2").await.is_empty());
    assert_eq!(records(&f, "recordId=new1").await, ["new1"]);
    // Nothing more to prune.
    let again = f
        .store
        .prune_activity(retention, fast(), now_ms())
        .await
        .unwrap();
    assert_eq!(again.total(), 0);

    // The cap keeps the newest entries, whatever their age.
    let capped = Retention {
        days: None,
        max_rows: Some(2),
    };
    let pruned = f
        .store
        .prune_activity(capped, fast(), now_ms())
        .await
        .unwrap();
    assert_eq!(pruned.over_cap, 1);
    assert_eq!(records(&f, "limit=100").await, ["new3", "new2"]);
    assert_eq!(side_rows(&f.store).await, 2);
    // Under its cap, the log is left alone.
    let pruned = f
        .store
        .prune_activity(
            Retention {
                days: None,
                max_rows: Some(5),
            },
            fast(),
            now_ms(),
        )
        .await
        .unwrap();
    assert_eq!(pruned.total(), 0);

    // Another environment's entries are its own process's business.
    let staging = f.store.for_environment("staging");
    staging
        .insert_activity(&[read("staging", 200 * DAY)])
        .await
        .unwrap();
    f.store
        .prune_activity(retention, fast(), now_ms())
        .await
        .unwrap();
    let kept: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM activity_logs WHERE environment = 'staging'")
            .fetch_one(f.store.pool())
            .await
            .unwrap();
    assert_eq!(kept, 1);
}

/// A large pruning deletes in batches while the listing keeps answering, each request as
/// usual: pages stay whole and ordered, never an error.
async fn the_api_answers_while_pruning(backend: Backend) {
    let f = fixture(backend, false).await;
    let old: Vec<Entry> = (0..3000)
        .map(|n| read(&format!("old{n}"), 200 * DAY - n))
        .collect();
    for chunk in old.chunks(500) {
        f.store.insert_activity(chunk).await.unwrap();
    }
    let fresh: Vec<Entry> = (0..50).map(|n| read(&format!("new{n}"), 50 - n)).collect();
    f.store.insert_activity(&fresh).await.unwrap();
    // 30 batches, 40 ms apart: the requests below (paced under the API's rate limit) land
    // between and during them.
    let schedule = PruneSchedule {
        interval: Duration::from_secs(60),
        batch: 100,
        pause: Duration::from_millis(40),
    };
    let store = f.store.clone();
    let pruning = tokio::spawn(async move {
        store
            .prune_activity(
                Retention {
                    days: Some(90),
                    max_rows: None,
                },
                schedule,
                now_ms(),
            )
            .await
            .unwrap()
    });
    let mut answered = 0;
    while !pruning.is_finished() {
        let body = list(&f, "limit=10").await;
        let data = body["data"].as_array().unwrap();
        assert_eq!(data.len(), 10, "{body}");
        assert_eq!(data[0]["recordIds"][0], "new49");
        answered += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pruned = pruning.await.unwrap();
    assert_eq!(pruned.expired, 3000);
    assert!(answered > 0);
    let all = list(&f, "limit=100").await;
    assert_eq!(all["data"].as_array().unwrap().len(), 50);
    assert_eq!(all["hasMore"], false);
    assert_eq!(side_rows(&f.store).await, 50);
}

on_store_backends!(
    pruning_keeps_the_retention_and_the_newest_rows,
    the_api_answers_while_pruning
);

/// `canopy serve` with `activityLogRetentionDays = 30` deletes a 40-day-old entry by itself
/// (its pruning task runs at start), and keeps recording and serving the new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prunes_by_itself() {
    let (data, _datasource) = crate::list::shop(Backend::Sqlite).await;
    let state = TestDb::new(Backend::Sqlite).await;
    let dir = TempDir::new();
    let mut config = crate::admin::config(&data, &state, &dir.0, None);
    config.platform.activity_retention = Retention {
        days: Some(30),
        max_rows: None,
    };
    let store = Store::open(&state.url, "acme", "production").await.unwrap();
    store
        .insert_activity(&[read("ancient", 40 * DAY), read("recent", 10 * DAY)])
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(canopy::app::run(config, listener, async move {
        let _ = stopped.await;
    }));
    let mut left = Vec::new();
    for _ in 0..400 {
        left = sqlx::query_scalar::<_, String>("SELECT record_ids FROM activity_logs")
            .fetch_all(store.pool())
            .await
            .unwrap();
        if left.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(left, [r#"["recent"]"#]);
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    store.close().await;
}

/// Entries written before migration 0015 (the wide `activity_logs` table) are served with the
/// same answers after it, `recordId` included.
async fn entries_written_before_the_compact_schema_are_kept(backend: Backend) {
    let db = TestDb::new(backend).await;
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
    // The store as the previous release left it: migrations 0001 to 0014.
    let dialect = match backend {
        Backend::Postgres => "postgres",
        _ => "sqlite",
    };
    let dir = TempDir::new();
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../host/migrations")
        .join(dialect);
    for file in std::fs::read_dir(&source).unwrap() {
        let path = file.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.as_str() < "0015" {
            std::fs::copy(&path, dir.0.join(&name)).unwrap();
        }
    }
    sqlx::migrate::Migrator::new(dir.0.as_path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    let id1 = "019a0000-0000-7000-8000-000000000001";
    let id2 = "019a0000-0000-7000-8000-000000000002";
    for (id, created_at, action, kind, records, label, status) in [
        (
            id1,
            1000_i64,
            "read",
            "read",
            Some(r#"["1"]"#),
            None,
            "completed",
        ),
        (
            id2,
            2000,
            "action",
            "write",
            Some(r#"["1","2|3"]"#),
            Some("Refund"),
            "completed",
        ),
        (
            "019a0000-0000-7000-8000-000000000003",
            3000,
            "delete",
            "write",
            None,
            None,
            "failed",
        ),
    ] {
        sqlx::query(
            "INSERT INTO activity_logs (id, project, environment, created_at, type, action, \
             label, status, user_id, user_email, username, team_name, collection_name, \
             record_ids, origin, token_id, request_id) VALUES ($1, 'acme', 'production', $2, \
             $3, $4, $5, $6, 7, 'sam@acme.io', 'Sam Lee', 'Ops', 'orders', $7, 'api', 'tok', \
             '019a0000-0000-7000-8000-0000000000ff')",
        )
        .bind(id)
        .bind(created_at)
        .bind(kind)
        .bind(action)
        .bind(label)
        .bind(status)
        .bind(records)
        .execute(&pool)
        .await
        .unwrap();
        if let Some(records) = records {
            let ids: Vec<String> = serde_json::from_str(records).unwrap();
            for record in ids {
                sqlx::query(
                    "INSERT INTO activity_log_records (activity_log_id, project, environment, \
                     record_id, created_at) VALUES ($1, 'acme', 'production', $2, $3)",
                )
                .bind(id)
                .bind(record)
                .bind(created_at)
                .execute(&pool)
                .await
                .unwrap();
            }
        }
    }
    pool.close().await;

    let store = Store::open(&db.url, "acme", "production").await.unwrap();
    let filter = |record: Option<&str>| canopy::platform::activity::ActivityFilter {
        limit: 100,
        record_id: record.map(str::to_owned),
        ..Default::default()
    };
    let rows = store.activity_logs(&filter(None)).await.unwrap();
    // id, user id, action, collection, record id, record ids
    type Row<'a> = (&'a str, i64, &'a str, &'a str, Option<&'a str>, Vec<String>);
    let served: Vec<Row> = rows
        .iter()
        .map(|r| {
            (
                r.id.as_str(),
                r.created_at,
                r.action.as_str(),
                r.kind.as_str(),
                r.label.as_deref(),
                r.record_ids.clone(),
            )
        })
        .collect();
    assert_eq!(
        served,
        [
            (
                id2,
                2000,
                "action",
                "write",
                Some("Refund"),
                vec!["1".to_owned(), "2|3".to_owned()]
            ),
            (id1, 1000_i64, "read", "read", None, vec!["1".to_owned()]),
        ]
    );
    assert_eq!(rows[0].user_email, "sam@acme.io");
    assert_eq!(rows[0].username, "Sam Lee");
    assert_eq!(rows[0].team_name, "Ops");
    assert_eq!(rows[0].collection_name.as_deref(), Some("orders"));
    let by_record: Vec<String> = store
        .activity_logs(&filter(Some("2|3")))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(by_record, [id2]);
    // The view keeps the old columns for whoever reads the store.
    let old: (String, String, String, String, String) = sqlx::query_as(
        "SELECT id, record_ids, origin, token_id, request_id FROM activity_logs \
         WHERE action = 'action'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(
        old,
        (
            id2.to_owned(),
            r#"["1","2|3"]"#.to_owned(),
            "api".to_owned(),
            "tok".to_owned(),
            "019a0000-0000-7000-8000-0000000000ff".to_owned()
        )
    );
    store.close().await;
}

on_store_backends!(entries_written_before_the_compact_schema_are_kept);
