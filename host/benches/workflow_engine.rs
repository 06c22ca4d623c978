//! Benchmark: throughput of the workflow engine — runs completed per second with 1, 2 and 4
//! workers, on a SQLite store (a temporary file) and on a PostgreSQL store (a fresh database on
//! 127.0.0.1:5432, user postgres; skipped with a message when unreachable). The user data is a
//! SQLite file of orders in both cases.
//!
//! Two workflows, as the run's user (the store's first admin) through the permission layer,
//! with their activity log entries:
//! - `read`, 4 read-only steps (issue 23's figure): `get-data` (status), `decision` (status =
//!   new), `get-data` (status and note), `end`;
//! - `write`, 5 steps: `get-data` (status), `decision`, `update-data` (a note, under the
//!   write-ahead marker), `get-data` (the note), `end`.
//!
//! Runs are queued first, on distinct orders, then the engine starts; the time until the last
//! run succeeded is measured.
//!
//! Run: `cargo bench -p canopy --bench workflow_engine`. `WORKFLOW_BENCH_ONLY=sqlite` (or
//! `postgres`) runs one store, `WORKFLOW_BENCH_RUNS=n` queues n runs per measurement (default
//! 2,000), `WORKFLOW_BENCH_WORKERS=1,4` picks the worker counts, `WORKFLOW_BENCH_SHAPES=read`
//! one workflow, `WORKFLOW_BENCH_LOG=sqlx=debug` logs every statement (to count them per run).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use canopy::auth::{CachePolicy, Permissions, SessionKey};
use canopy::config::HttpConfig;
use canopy::datasource::DataSource;
use canopy::datasource::sql::{Options, SqlDataSource};
use canopy::http::AppState;
use canopy::platform::{ActivityLog, Store, bootstrap};
use canopy::workflows::engine::{Engine, EngineSettings, Wakeup};
use canopy::workflows::runs::{NewRun, TriggerKind};
use serde_json::json;
use sqlx::Connection as _;

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

fn runs_wanted() -> i64 {
    std::env::var("WORKFLOW_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000)
}

/// A comma-separated list from the environment, or the default.
fn list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|item| item.trim().to_owned())
        .filter(|item| !item.is_empty())
        .collect()
}

fn runs(name: &str) -> bool {
    std::env::var("WORKFLOW_BENCH_ONLY").map_or(true, |only| only.eq_ignore_ascii_case(name))
}

/// The orders the runs work on.
async fn user_data(dir: &std::path::Path, count: i64) -> Result<String> {
    let url = format!("sqlite://{}?mode=rwc", dir.join("data.sqlite").display());
    let pool = sqlx::SqlitePool::connect(&url).await?;
    sqlx::raw_sql("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, note TEXT)")
        .execute(&pool)
        .await?;
    let mut tx = pool.begin().await?;
    for id in 1..=count {
        sqlx::query("INSERT INTO orders (id, status) VALUES ($1, 'new')")
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    pool.close().await;
    Ok(url)
}

/// The steps of the `shape` workflow (`read` or `write`, see the module's comment).
fn steps(shape: &str) -> Result<serde_json::Value> {
    Ok(match shape {
        "read" => json!([
            {"key": "read", "type": "get-data", "fields": ["status"]},
            {"key": "check", "type": "decision", "options": [
                {"name": "new", "when": {"field": "status", "operator": "equal", "value": "new"},
                 "next": "again"},
                {"name": "other", "next": "end"}]},
            {"key": "again", "type": "get-data", "fields": ["status", "note"]},
            {"key": "end", "type": "end"},
        ]),
        "write" => json!([
            {"key": "read", "type": "get-data", "fields": ["status"]},
            {"key": "check", "type": "decision", "options": [
                {"name": "new", "when": {"field": "status", "operator": "equal", "value": "new"},
                 "next": "write"},
                {"name": "other", "next": "end"}]},
            {"key": "write", "type": "update-data", "mode": "automatic", "values": {"note": "seen"}},
            {"key": "again", "type": "get-data", "fields": ["note"]},
            {"key": "end", "type": "end"},
        ]),
        other => return Err(format!("no workflow shape {other:?}: read or write").into()),
    })
}

/// A workflow of automatic steps, stored as `wfdef` stores it; its id and version.
async fn workflow(store: &Store, name: &str, steps: serde_json::Value) -> Result<(String, String)> {
    let definition = json!({"name": name, "collection": "orders", "steps": steps});
    let id = uuid::Uuid::new_v4().to_string();
    let version = uuid::Uuid::new_v4().to_string();
    sqlx::query(
        "INSERT INTO workflows (id, project, environment, name, collection_name, active, \
         latest_version, source, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, 'orders', 1, 1, 'api', 0, 0)",
    )
    .bind(&id)
    .bind(store.project())
    .bind(store.environment())
    .bind(name)
    .execute(store.pool())
    .await?;
    sqlx::query(
        "INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, \
         created_at) VALUES ($1, $2, 1, $3, 'bench', 0)",
    )
    .bind(&version)
    .bind(&id)
    .bind(definition.to_string())
    .execute(store.pool())
    .await?;
    Ok((id, version))
}

/// The runs of `workflow` that succeeded, and those that failed or wait (which stops the
/// measurement), in one query.
async fn counts(store: &Store, workflow: &str) -> Result<(i64, i64)> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT state, COUNT(*) FROM workflow_runs WHERE workflow_id = $1 GROUP BY state",
    )
    .bind(workflow)
    .fetch_all(store.pool())
    .await?;
    let of = |states: &[&str]| -> i64 {
        rows.iter()
            .filter(|(state, _)| states.contains(&state.as_str()))
            .map(|(_, n)| n)
            .sum()
    };
    Ok((of(&["succeeded"]), of(&["failed", "awaiting_input"])))
}

/// How often the measurement looks whether every run is done: each look reads every run of
/// the workflow, so a tight loop would cost the engine it measures (three counts every 10 ms
/// read some 600,000 rows a second with 2,000 runs).
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// Queues `runs` runs, starts `workers` workers, and times them until every run succeeded.
async fn measure(
    label: &str,
    store: &Store,
    state: &Arc<ArcSwap<AppState>>,
    listen_url: Option<String>,
    user_id: i64,
    (shape, workers): (&str, u32),
    runs: i64,
) -> Result<()> {
    let steps = steps(shape)?;
    let per_run = steps.as_array().map_or(0, Vec::len) as i64;
    let (workflow_id, version_id) =
        workflow(store, &format!("bench-{shape}-{workers}"), steps).await?;
    for order in 1..=runs {
        store
            .queue_run(&NewRun::new(
                &workflow_id,
                &version_id,
                "orders",
                order.to_string(),
                TriggerKind::Manual,
                user_id,
            ))
            .await?;
    }
    let wakeup = state.load().workflow_wakeup.clone();
    let settings = EngineSettings {
        workers,
        step_timeout: Duration::from_secs(300),
        lease: Duration::from_secs(4),
        poll: Duration::from_millis(100),
        retry_base: Duration::from_millis(500),
        listen_url,
    };
    let started = Instant::now();
    let engine = Engine::start(store.clone(), Arc::clone(state), wakeup, settings);
    loop {
        let (done, stuck) = counts(store, &workflow_id).await?;
        if done == runs {
            break;
        }
        if stuck > 0 {
            return Err(format!("{label}: {stuck} runs failed or wait").into());
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
    let elapsed = started.elapsed();
    engine.stop().await;
    println!(
        "  {label}, {shape}, {workers} worker{}: {runs} runs of {per_run} steps in {:.2} s = {:.0} runs/s ({:.0} steps/s)",
        if workers == 1 { "" } else { "s" },
        elapsed.as_secs_f64(),
        runs as f64 / elapsed.as_secs_f64(),
        (runs * per_run) as f64 / elapsed.as_secs_f64(),
    );
    Ok(())
}

/// The served state over the orders, with permissions, activity log and wake-ups on `store`.
async fn bench(
    label: &str,
    store: Store,
    data_url: &str,
    listen_url: Option<String>,
) -> Result<()> {
    let datasource: Arc<dyn DataSource> =
        Arc::new(SqlDataSource::connect(data_url, Options::default()).await?);
    let done = bootstrap::bootstrap(&store, "admin@bench.io", None).await?;
    let admin = done
        .first_admin
        .map(|a| a.email)
        .unwrap_or_else(|| "admin@bench.io".to_owned());
    let user_id = store
        .user_by_email(&admin)
        .await?
        .ok_or("no first admin")?
        .id;
    let wakeup = Wakeup::new();
    wakeup.announce(&store);
    let activity = ActivityLog::start(store.clone());
    let mut state = AppState::new(
        datasource,
        SessionKey::new("bench-auth-secret"),
        &HttpConfig::default(),
    );
    state.permissions = Arc::new(Permissions::new(
        Arc::new(store.clone()),
        CachePolicy::new(true, Duration::from_secs(900)),
    ));
    state.store = Some(store.clone());
    state.activity = activity.clone();
    state.workflow_wakeup = wakeup;
    let state = Arc::new(ArcSwap::from_pointee(state));
    let runs = runs_wanted();
    println!("{label} store ({runs} runs per measurement):");
    for shape in list("WORKFLOW_BENCH_SHAPES", "read,write") {
        for workers in list("WORKFLOW_BENCH_WORKERS", "1,2,4") {
            let workers: u32 = workers
                .parse()
                .map_err(|_| format!("WORKFLOW_BENCH_WORKERS: {workers:?} is not a count"))?;
            measure(
                label,
                &store,
                &state,
                listen_url.clone(),
                user_id,
                (&shape, workers),
                runs,
            )
            .await?;
        }
    }
    activity.flush().await;
    store.close().await;
    Ok(())
}

async fn sqlite(dir: &std::path::Path, data_url: &str) -> Result<()> {
    let url = format!("sqlite://{}?mode=rwc", dir.join("state.sqlite").display());
    let store = Store::open(&url, "bench", "production").await?;
    bench("SQLite", store, data_url, None).await
}

async fn postgres(data_url: &str) -> Result<()> {
    let admin = "postgres://postgres@127.0.0.1:5432/postgres";
    let name = format!("canopy_workflow_bench_{}", std::process::id());
    let mut conn = match sqlx::PgConnection::connect(admin).await {
        Ok(conn) => conn,
        Err(e) => {
            println!("PostgreSQL: skipped ({admin} unreachable: {e})");
            return Ok(());
        }
    };
    sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await?;
    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
    let result = async {
        let store = Store::open(&url, "bench", "production").await?;
        bench("PostgreSQL", store, data_url, Some(url.clone())).await
    }
    .await;
    let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await;
    result
}

fn main() -> Result<()> {
    // `WORKFLOW_BENCH_LOG=sqlx=debug` prints each statement the store runs (to count them).
    if let Ok(filter) = std::env::var("WORKFLOW_BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::try_new(filter)?)
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let dir =
            std::env::temp_dir().join(format!("canopy-workflow-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let result = async {
            let data_url = user_data(&dir, runs_wanted()).await?;
            if runs("sqlite") {
                sqlite(&dir, &data_url).await?;
            }
            if runs("postgres") {
                postgres(&data_url).await?;
            }
            Ok::<_, Box<dyn std::error::Error>>(())
        }
        .await;
        let _ = std::fs::remove_dir_all(&dir);
        result
    })
}
