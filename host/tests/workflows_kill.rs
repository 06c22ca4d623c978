//! The workflow engine survives `kill -9`: the real binary runs hundreds of runs (each reads its
//! order, writes it once, reads it again), is killed with SIGKILL while runs are in flight, and
//! started again on the same store. Then no run is lost, every run ended or waits visibly (a run
//! killed during its write waits for a person, reason `uncertain`), and no write ran twice: a
//! trigger of the user data counts every UPDATE of each order. On a SQLite store and on a
//! PostgreSQL store (user data on SQLite in both). Also `canopy workflows runs list|show|abort`
//! on the store the runs left. And with two instances on one PostgreSQL store and the default
//! lease, a killed instance's runs are taken over by the other within five seconds.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use canopy::platform::Store;
use canopy::workflows::runs::{NewRun, Queued, TriggerKind};
use serde_json::{Value as Json, json};

mod support;
use support::{Server, TempDir, drop_postgres, fresh_postgres};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const AUTH_SECRET: &str = "workflows-kill-test-auth-secret";
const ENV_SECRET: &str = "3333333333333333333333333333333333333333333333333333333333333333";
const RUNS: i64 = 300;

/// `canopy serve` on the data and store given, with two workers and the `lease` given
/// (`None`: the default one).
fn serve(dir: &Path, data_url: &str, state_url: &str, lease: Option<&str>) -> Server {
    let child = Command::new(BIN)
        .args([
            "serve",
            "--database-url",
            data_url,
            "--state-url",
            state_url,
        ])
        .args(["--auth-secret", AUTH_SECRET, "--env-secret", ENV_SECRET])
        .args(["--listen", "127.0.0.1:0", "--log-level", "warn"])
        .args(["--workflow-workers", "2"])
        .args(
            lease
                .map(|seconds| ["--workflow-lease-in-seconds", seconds])
                .into_iter()
                .flatten(),
        )
        .arg("--schema-path")
        .arg(dir.join(".forestadmin-schema.json"))
        .arg("--data-dir")
        .arg(dir.join("state"))
        .current_dir(dir)
        .env_remove("CANOPY_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("Canopy is serving on"), "{line:?}");
    server
}

/// The user data: orders, and a trigger counting each UPDATE of an order in `writes`.
async fn data(dir: &Path) -> String {
    let url = format!("sqlite:{}?mode=rwc", dir.join("data.sqlite").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, note TEXT);
         CREATE TABLE writes (order_id INTEGER NOT NULL);
         CREATE TRIGGER counted AFTER UPDATE ON orders
           BEGIN INSERT INTO writes (order_id) VALUES (NEW.id); END;",
    )
    .execute(&pool)
    .await
    .unwrap();
    for id in 1..=RUNS {
        sqlx::query("INSERT INTO orders (id, status, note) VALUES ($1, 'new', NULL)")
            .bind(id)
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    url
}

/// A workflow of four automatic steps, one of them a write, created as `wfdef` stores it.
async fn workflow(store: &Store) -> (String, String) {
    let definition = json!({"name": "settle", "collection": "orders", "steps": [
        {"key": "read", "type": "get-data", "fields": ["status"]},
        {"key": "write", "type": "update-data", "mode": "automatic", "values": {"note": "settled"}},
        {"key": "check", "type": "get-data", "fields": ["note"]},
        {"key": "end", "type": "end"},
    ]});
    let (id, version) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    sqlx::query(
        "INSERT INTO workflows (id, project, environment, name, collection_name, active, \
         latest_version, source, created_at, updated_at) \
         VALUES ($1, $2, $3, 'settle', 'orders', 1, 1, 'api', 0, 0)",
    )
    .bind(&id)
    .bind(store.project())
    .bind(store.environment())
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, \
         created_at) VALUES ($1, $2, 1, $3, 'x', 0)",
    )
    .bind(&version)
    .bind(&id)
    .bind(definition.to_string())
    .execute(store.pool())
    .await
    .unwrap();
    (id, version)
}

/// Runs by state (and waiting reason).
async fn states(store: &Store) -> HashMap<String, i64> {
    let rows: Vec<(String, Option<String>, i64)> = sqlx::query_as(
        "SELECT state, waiting_reason, COUNT(*) FROM workflow_runs GROUP BY state, waiting_reason",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    rows.into_iter()
        .map(|(state, reason, n)| {
            let key = match reason {
                Some(reason) => format!("{state}:{reason}"),
                None => state,
            };
            (key, n)
        })
        .collect()
}

fn count(states: &HashMap<String, i64>, key: &str) -> i64 {
    states.get(key).copied().unwrap_or(0)
}

/// Waits until `done` holds for the runs' states; panics after two minutes.
async fn until(store: &Store, what: &str, done: impl Fn(&HashMap<String, i64>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = states(store).await;
        if done(&now) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: still {now:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Opens the store a first start bootstrapped and queues one run of the `settle` workflow per
/// order, as its first admin (who has every right); the store and the workflow's id.
async fn queue(state_url: &str) -> (Store, String) {
    let store = Store::open(state_url, "canopy", "production")
        .await
        .unwrap();
    let user_id = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap()
        .id;
    let (workflow_id, version_id) = workflow(&store).await;
    for order in 1..=RUNS {
        let queued = store
            .queue_run(&NewRun::new(
                &workflow_id,
                &version_id,
                "orders",
                order.to_string(),
                TriggerKind::Manual,
                user_id,
            ))
            .await
            .unwrap();
        assert!(matches!(queued, Queued::Created(_)));
    }
    (store, workflow_id)
}

/// Every run ended, or waits for a person because it was stopped during its write, and no
/// write ran twice.
async fn settled_once(store: &Store, data_url: &str) {
    let settled = states(store).await;
    let succeeded = count(&settled, "succeeded");
    let uncertain = count(&settled, "awaiting_input:uncertain");
    // No run lost; each ended, or waits for a person because it was killed during its write.
    assert_eq!(succeeded + uncertain, RUNS, "{settled:?}");

    // No write twice: one UPDATE per succeeded run's order, at most one for an uncertain one.
    let pool = sqlx::SqlitePool::connect(data_url).await.unwrap();
    let writes: HashMap<i64, i64> =
        sqlx::query_as::<_, (i64, i64)>("SELECT order_id, COUNT(*) FROM writes GROUP BY order_id")
            .fetch_all(&pool)
            .await
            .unwrap()
            .into_iter()
            .collect();
    pool.close().await;
    assert!(writes.values().all(|n| *n == 1), "{writes:?}");
    let runs: Vec<(String, String, String)> =
        sqlx::query_as("SELECT id, record_id, state FROM workflow_runs")
            .fetch_all(store.pool())
            .await
            .unwrap();
    for (id, record, state) in &runs {
        let order: i64 = record.parse().unwrap();
        let steps = store.workflow_run_steps(id).await.unwrap();
        if state == "succeeded" {
            assert_eq!(writes.get(&order), Some(&1), "run {id}");
            // Each step once: none ran again after the kill.
            let keys: Vec<&str> = steps.iter().map(|s| s.key.as_str()).collect();
            assert_eq!(keys, ["read", "write", "check", "end"], "run {id}");
        } else {
            let write = steps.iter().find(|s| s.key == "write").unwrap();
            assert_eq!(write.phase.as_deref(), Some("executing"), "run {id}");
        }
    }
}

async fn kill_and_restart(state_url: &str) {
    let dir = TempDir::new("workflows-kill");
    let data_url = data(&dir.0).await;
    // The first start bootstraps the store: its first admin has every right.
    let mut server = serve(&dir.0, &data_url, state_url, Some("2"));
    let (store, workflow_id) = queue(state_url).await;
    // Killed once some runs are done, with others in flight and the rest queued.
    until(&store, "the first runs", |s| count(s, "succeeded") >= 10).await;
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let at_kill = states(&store).await;
    assert!(count(&at_kill, "succeeded") < RUNS, "{at_kill:?}");

    let _again = serve(&dir.0, &data_url, state_url, Some("2"));
    until(&store, "every run settled", |s| {
        count(s, "queued") == 0 && count(s, "running") == 0
    })
    .await;
    let settled = states(&store).await;
    println!("runs by state when killed: {at_kill:?}; after the restart: {settled:?}");
    settled_once(&store, &data_url).await;

    cli_runs(&dir.0, state_url, &workflow_id);
    store.close().await;
}

/// `canopy workflows runs …` on the store the runs left.
fn cli_runs(dir: &Path, state_url: &str, workflow_id: &str) {
    let cli = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .args(["--state-url", state_url])
            .current_dir(dir)
            .env_remove("CANOPY_CONFIG")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, out, err) = cli(&[
        "workflows",
        "runs",
        "list",
        "--state",
        "succeeded",
        "--limit",
        "3",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let listed: Vec<Json> = serde_json::from_str(&out).unwrap();
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|r| r["workflowId"] == workflow_id));
    let id = listed[0]["id"].as_str().unwrap();
    let (code, out, err) = cli(&["workflows", "runs", "show", id]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("succeeded") && out.contains("write"), "{out}");
    let (code, _, err) = cli(&[
        "workflows",
        "runs",
        "abort",
        id,
        "--user",
        "admin@canopy.local",
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already succeeded"), "{err}");
    let (code, _, err) = cli(&["workflows", "runs", "list", "--state", "done"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no run state \"done\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_run_and_writes_nothing_twice_on_a_sqlite_store() {
    let dir = TempDir::new("workflows-kill-store");
    let url = format!("sqlite:{}?mode=rwc", dir.0.join("canopy.sqlite").display());
    kill_and_restart(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_run_and_writes_nothing_twice_on_a_postgres_store() {
    let url = fresh_postgres("kill").await;
    kill_and_restart(&url).await;
    drop_postgres(&url).await;
}

/// Runs `locked_by` a worker of the instance whose workers' ids start with `prefix`.
async fn held_by(store: &Store, prefix: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM workflow_runs WHERE state = 'running' AND locked_by LIKE $1",
    )
    .bind(format!("{prefix}-%"))
    .fetch_one(store.pool())
    .await
    .unwrap()
}

/// Two instances share a PostgreSQL store with the default lease; one is killed with runs in
/// flight. The other takes them over within five seconds (heartbeats every second, four
/// seconds without one hand a run on; the old default lease took thirty), and still every
/// run ends once, with no write twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_runs_are_taken_over_by_another_within_five_seconds() {
    let state_url = fresh_postgres("takeover").await;
    let dir = TempDir::new("workflows-takeover");
    let other_dir = TempDir::new("workflows-takeover-other");
    let data_url = data(&dir.0).await;
    let mut doomed = serve(&dir.0, &data_url, &state_url, None);
    let (store, _) = queue(&state_url).await;
    // The first instance's id, from a run it claimed before the other one started.
    let deadline = Instant::now() + Duration::from_secs(60);
    let prefix = loop {
        let holder: Option<String> = sqlx::query_scalar(
            "SELECT locked_by FROM workflow_runs WHERE state = 'running' LIMIT 1",
        )
        .fetch_optional(store.pool())
        .await
        .unwrap()
        .flatten();
        if let Some(holder) = holder {
            break holder.split('-').next().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "no run was claimed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    until(&store, "the first runs", |s| count(s, "succeeded") >= 10).await;
    let _other = serve(&other_dir.0, &data_url, &state_url, None);
    // Killed while it holds runs: frozen (SIGSTOP) until it is seen holding one, then killed.
    let pid = doomed.0.id().to_string();
    let signal = |name: &str| {
        let status = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(status.success(), "kill {name}");
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (killed, at_kill) = loop {
        signal("-STOP");
        let frozen = Instant::now();
        let held = held_by(&store, &prefix).await;
        if held > 0 {
            break (frozen, held);
        }
        signal("-CONT");
        assert!(Instant::now() < deadline, "the first instance holds no run");
        tokio::time::sleep(Duration::from_millis(3)).await;
    };
    doomed.0.kill().unwrap();
    doomed.0.wait().unwrap();
    while held_by(&store, &prefix).await > 0 {
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "the killed instance's runs are still held after 5 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "{at_kill} runs of the killed instance taken over {} ms after the kill",
        killed.elapsed().as_millis()
    );
    until(&store, "every run settled", |s| {
        count(s, "queued") == 0 && count(s, "running") == 0
    })
    .await;
    settled_once(&store, &data_url).await;
    store.close().await;
    drop_postgres(&state_url).await;
}
