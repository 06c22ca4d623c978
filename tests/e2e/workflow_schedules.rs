//! Triggers beyond the spec (issue 13 §4), with Canopy's store on SQLite and PostgreSQL: cron
//! schedules start runs on the records their filter matches, within the schedule user's rights
//! and scope, once per tick across instances; record-change triggers start runs after creates
//! and updates whose record matches their condition, as the user who wrote.

use std::sync::Arc;

use axum::http::StatusCode;
use canopy::http::reload::Reload as _;
use canopy::workflows::definition::{
    ChangeKind, Definition, Kind, RecordChange, Schedule, Step, Triggers,
};
use canopy::workflows::schedule::Scheduler;
use canopy_e2e::Backend;
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::Row as _;

use crate::admin::{Env, on_store_backends, token_for};
use crate::workflow_triggers::{add_definition, send, serve};

fn definition(name: &str, triggers: Triggers) -> Definition {
    Definition {
        name: name.to_owned(),
        collection: "orders".to_owned(),
        description: None,
        active: Some(true),
        triggers,
        steps: vec![Step {
            key: "done".to_owned(),
            title: None,
            mode: None,
            next: None,
            kind: Kind::End {
                outcome: None,
                message: None,
            },
        }],
    }
}

/// Runs of `workflow`: (record, trigger kind, user id), by record.
async fn runs(env: &Env, workflow: &str) -> Vec<(String, String, i64)> {
    let mut runs: Vec<(String, String, i64)> = sqlx::query(
        "SELECT record_id, trigger_kind, user_id FROM workflow_runs WHERE workflow_id = $1",
    )
    .bind(workflow)
    .fetch_all(env.store.pool())
    .await
    .unwrap()
    .iter()
    .map(|row| (row.get(0), row.get(1), row.get(2)))
    .collect();
    runs.sort();
    runs
}

fn scheduler(env: &Env) -> Scheduler {
    let state = env.served().state();
    Scheduler::new(
        Arc::clone(&env.served().platform().triggers),
        Arc::new(move || {
            let state = state.load();
            (
                Arc::clone(&state.datasource),
                Arc::clone(&state.permissions),
            )
        }),
    )
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// A tick fires once (two schedulers, as two instances, see one tick: one starts the runs), on
/// the records the filter matches within the user's scope; no tick, no run.
async fn a_schedule_starts_runs_on_its_records_once_per_tick(backend: Backend) {
    let env = serve(backend, 1_000).await;
    let paid = add_definition(
        &env.store,
        &definition(
            "nightly paid",
            Triggers {
                schedules: vec![Schedule {
                    cron: "0 3 * * *".to_owned(),
                    user: "ann@acme.io".to_owned(),
                    filter: Some(json!({"field": "status", "operator": "equal", "value": "paid"})),
                    limit: 100,
                }],
                record_changes: Vec::new(),
            },
        ),
    )
    .await;
    // Sam's team sees only the new orders (2: 20.00, 5: 7.00); the filter keeps those above 10.
    let scoped = add_definition(
        &env.store,
        &definition(
            "big new ones",
            Triggers {
                schedules: vec![Schedule {
                    cron: "*/10 * * * * *".to_owned(),
                    user: "sam@acme.io".to_owned(),
                    filter: Some(
                        json!({"field": "amount", "operator": "greater_than", "value": 10}),
                    ),
                    limit: 100,
                }],
                record_changes: Vec::new(),
            },
        ),
    )
    .await;
    let first = scheduler(&env);
    let second = scheduler(&env);
    // No tick in the window: nothing.
    let queued = first
        .fire_due(at("2026-03-01T02:59:41Z"), at("2026-03-01T02:59:49Z"))
        .await
        .unwrap();
    assert_eq!(queued, 0);
    assert!(runs(&env, &paid).await.is_empty());
    // 03:00:00 is a tick of both.
    let window = (at("2026-03-01T02:59:55Z"), at("2026-03-01T03:00:01Z"));
    assert_eq!(first.fire_due(window.0, window.1).await.unwrap(), 3);
    assert_eq!(second.fire_due(window.0, window.1).await.unwrap(), 0);
    let ann = env
        .store
        .user_by_email("ann@acme.io")
        .await
        .unwrap()
        .unwrap()
        .id;
    let sam = env
        .store
        .user_by_email("sam@acme.io")
        .await
        .unwrap()
        .unwrap()
        .id;
    assert_eq!(
        runs(&env, &paid).await,
        [
            ("1".into(), "schedule".into(), ann),
            ("3".into(), "schedule".into(), ann)
        ]
    );
    assert_eq!(
        runs(&env, &scoped).await,
        [("2".into(), "schedule".into(), sam)]
    );
    // The next tick: the runs are still ongoing, so none is started twice.
    let queued = first
        .fire_due(at("2026-03-01T03:00:05Z"), at("2026-03-01T03:00:11Z"))
        .await
        .unwrap();
    assert_eq!(queued, 0);
    assert_eq!(runs(&env, &scoped).await.len(), 1);
    let ticks: i64 = sqlx::query("SELECT COUNT(*) FROM workflow_schedule_ticks")
        .fetch_one(env.store.pool())
        .await
        .unwrap()
        .get(0);
    assert_eq!(ticks, 3);
}

/// After a reload installs their hooks: a create and an update whose record matches `when`
/// start a run as the writer; a write that does not match starts none.
async fn record_changes_start_runs_as_the_writer(backend: Backend) {
    let env = serve(backend, 1_000).await;
    let workflow = add_definition(
        &env.store,
        &definition(
            "ship",
            Triggers {
                schedules: Vec::new(),
                record_changes: vec![RecordChange {
                    on: vec![ChangeKind::Create, ChangeKind::Update],
                    when: Some(json!({"field": "status", "operator": "equal", "value": "shipped"})),
                }],
            },
        ),
    )
    .await;
    env.served().reload().await.unwrap();
    let ann = token_for(&env.store, "ann@acme.io").await;
    let ann_id = env
        .store
        .user_by_email("ann@acme.io")
        .await
        .unwrap()
        .unwrap()
        .id;
    let app = &env.router;
    // An update that does not match.
    let body = json!({"data": {"type": "orders", "id": "1", "attributes": {"status": "paid"}}});
    let got = send(
        app,
        "PUT",
        "/forest/orders/1?timezone=Europe/Paris",
        Some(&ann),
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(got.0, StatusCode::OK, "{}", got.2);
    assert!(runs(&env, &workflow).await.is_empty());
    // An update that matches.
    let body = json!({"data": {"type": "orders", "id": "1", "attributes": {"status": "shipped"}}});
    let got = send(
        app,
        "PUT",
        "/forest/orders/1?timezone=Europe/Paris",
        Some(&ann),
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(got.0, StatusCode::OK, "{}", got.2);
    // A create that matches, one that does not.
    let body =
        json!({"data": {"type": "orders", "attributes": {"status": "shipped", "amount": 3}}});
    let got = send(
        app,
        "POST",
        "/forest/orders?timezone=Europe/Paris",
        Some(&ann),
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(got.0, StatusCode::OK, "{}", got.2);
    let created = got.2["data"]["id"].as_str().unwrap().to_owned();
    let body = json!({"data": {"type": "orders", "attributes": {"status": "new", "amount": 4}}});
    let got = send(
        app,
        "POST",
        "/forest/orders?timezone=Europe/Paris",
        Some(&ann),
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(got.0, StatusCode::OK, "{}", got.2);
    let mut expected = vec![
        ("1".to_owned(), "record_change".to_owned(), ann_id),
        (created, "record_change".to_owned(), ann_id),
    ];
    expected.sort();
    assert_eq!(runs(&env, &workflow).await, expected);
}

on_store_backends!(
    a_schedule_starts_runs_on_its_records_once_per_tick,
    record_changes_start_runs_as_the_writer,
);
