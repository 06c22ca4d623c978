//! Benchmark: workflow webhook calls accepted per second (issue 13's target: ≥ 5,000 runs/s,
//! each 202 meaning the run is committed in the store), with Canopy's store on SQLite (a
//! temporary file) and on PostgreSQL (a temporary database on 127.0.0.1:5432, skipped when none
//! answers). The whole served stack answers each call in process (`tower::ServiceExt::oneshot`
//! on `Served::router()`): URL check, token (cached), the webhook's limiter (raised out of the
//! way), the trigger's lookup, the user's rights, the body, the run queued in a batch, the
//! activity entry. Every call names a distinct record. Each store is measured twice: with no
//! engine in the process, then with the run engine's workers executing the accepted runs
//! beside the accepts (issue 23: accepts must not wait behind the engine's steps).
//!
//! Prints runs/s and latency percentiles for each store. Run:
//! `cargo bench -p canopy --bench webhook` (`WEBHOOK_BENCH_CALLS`, `WEBHOOK_BENCH_CONCURRENCY`
//! change the defaults, `WEBHOOK_BENCH_WORKERS=0,1,4` the engine's workers per measurement, and
//! `WEBHOOK_BENCH_BACKLOG=100000` queues that many runs before the engine starts, so its workers
//! are busy with a long queue while the calls come: issue 23's "100k runs queued" row).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::app::Served;
use canopy::config::EngineConfig;
use canopy::config::{Config, ServeArgs};
use canopy::datasource::DataSource;
use canopy::datasource::sql::{Options, SqlDataSource};
use canopy::platform::{Actor, NewToken, Scope, Store};
use canopy::workflows::engine::{Engine, EngineSettings};
use canopy::workflows::runs::{NewRun, TriggerKind};
use tower::ServiceExt as _;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A workflow of one step on `orders`, as the definitions store keeps it.
async fn add_workflow(store: &Store) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "INSERT INTO workflows (id, project, environment, name, collection_name, description, \
         active, latest_version, source, created_by_user_id, created_at, updated_at) \
         VALUES ($1, $2, $3, 'bench', 'orders', NULL, 1, 1, 'api', NULL, $4, $4)",
    )
    .bind(&id)
    .bind(store.project())
    .bind(store.environment())
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();
    let definition = serde_json::json!({
        "name": "bench", "collection": "orders",
        "steps": [{"key": "done", "type": "end"}],
    });
    sqlx::query(
        "INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, \
         created_by_user_id, created_at) VALUES ($1, $2, 1, $3, 'bench', NULL, $4)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(&id)
    .bind(definition.to_string())
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();
    id
}

struct Figures {
    runs_per_second: f64,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

/// Queues `count` runs of `workflow_id` on records no call names, a thousand per transaction.
async fn backlog(store: &Store, workflow_id: &str, user_id: i64, count: usize) {
    let version_id: String =
        sqlx::query_scalar("SELECT id FROM workflow_versions WHERE workflow_id = $1")
            .bind(workflow_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    for start in (0..count).step_by(1_000) {
        let mut tx = store.pool().begin().await.unwrap();
        for n in start..count.min(start + 1_000) {
            store
                .queue_run_in(
                    &mut tx,
                    &NewRun::new(
                        workflow_id,
                        &version_id,
                        "orders",
                        (2_000_000_000 + n).to_string(),
                        TriggerKind::Manual,
                        user_id,
                    ),
                )
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
    }
}

async fn run(
    state_url: &str,
    dir: &std::path::Path,
    (calls, concurrency, queued): (usize, usize, usize),
    workers: u32,
) -> Figures {
    let data = dir.join("data.sqlite");
    let data_url = format!("sqlite://{}?mode=rwc", data.display());
    let pool = sqlx::SqlitePool::connect(&data_url).await.unwrap();
    sqlx::query("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, status TEXT)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let args = ServeArgs {
        database_url: Some(data_url.clone()),
        auth_secret: Some("a-benchmark-auth-secret-of-some-length".to_owned()),
        env_secret: Some("a".repeat(64)),
        schema_path: Some(dir.join(".forestadmin-schema.json")),
        state_url: Some(state_url.to_owned()),
        project: Some("bench".to_owned()),
        ..ServeArgs::default()
    };
    let config: Config = Config::load(args).unwrap().0;
    let base: Arc<dyn DataSource> = Arc::new(
        SqlDataSource::connect(&data_url, Options::default())
            .await
            .unwrap(),
    );
    let served = Arc::new(Served::start(config, base).await.unwrap());
    let platform = served.platform().clone();
    let store = platform.store.clone();
    let admin = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let (_, secret) = store
        .create_token(
            &Actor::System,
            admin.id,
            NewToken {
                name: "bench".into(),
                scopes: vec![Scope::WorkflowsTrigger],
                expires_at: None,
            },
        )
        .await
        .unwrap();
    let workflow_id = add_workflow(&store).await;
    let workflow = store.workflow_ref(&workflow_id).await.unwrap().unwrap();
    store
        .set_webhook_enabled(&Actor::System, &workflow, true)
        .await
        .unwrap();
    let trigger = store
        .set_webhook_rate_limit(&Actor::System, &workflow, Some(10_000_000))
        .await
        .unwrap();
    backlog(&store, &workflow_id, admin.id, queued).await;
    let path = Arc::new(format!(
        "/v1/workflow-hooks/{}",
        platform.triggers.hook_segment(&trigger)
    ));
    let token = Arc::new(format!("Bearer {}", secret.expose()));
    let router = served.router();
    // The engine of `canopy serve`, with its default settings and `workers` workers.
    let engine = (workers > 0).then(|| {
        let settings = EngineSettings {
            workers,
            ..EngineSettings::new(&EngineConfig::default(), state_url)
        };
        Engine::start(
            store.clone(),
            served.state(),
            platform.workflow_wakeup.clone(),
            settings,
        )
    });

    // Warm up: caches (token, permission documents, rendering) and connections.
    let call = move |record: usize| {
        let router = router.clone();
        let path = Arc::clone(&path);
        let token = Arc::clone(&token);
        async move {
            let request = Request::builder()
                .method("POST")
                .uri(path.as_str())
                .header(header::AUTHORIZATION, token.as_str())
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(format!(r#"{{"record_id":"{record}"}}"#)))
                .unwrap();
            let started = Instant::now();
            let response = router.oneshot(request).await.unwrap();
            let status = response.status();
            let _ = axum::body::to_bytes(response.into_body(), usize::MAX).await;
            (status, started.elapsed())
        }
    };
    for record in 0..200 {
        assert_eq!(call(1_000_000_000 + record).await.0, StatusCode::ACCEPTED);
    }

    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let next = Arc::clone(&next);
            let call = call.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let record = next.fetch_add(1, Ordering::Relaxed);
                    if record >= calls {
                        break;
                    }
                    let (status, latency) = call(record).await;
                    assert_eq!(status, StatusCode::ACCEPTED);
                    latencies.push(latency);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(calls);
    for worker in workers {
        latencies.extend(worker.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let stored: i64 =
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM workflow_runs WHERE workflow_id = $1")
            .bind(&workflow_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(
        stored as usize,
        calls + 200 + queued,
        "every accepted run is in the store"
    );
    if let Some(engine) = engine {
        engine.stop().await;
    }
    platform.flush_activity().await;
    store.close().await;
    Figures {
        runs_per_second: calls as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
        max: at(1.0),
    }
}

fn print(
    store: &str,
    (calls, concurrency, queued): (usize, usize, usize),
    workers: u32,
    figures: &Figures,
) {
    println!(
        "{store:<10} {workers} engine workers {:>8.0} runs/s accepted  p50 {:>7.2} ms  \
         p99 {:>7.2} ms  max {:>7.2} ms  ({calls} calls, {concurrency} concurrent, {queued} \
         runs queued before; targets: >= 5000 runs/s, p99 <= 50 ms; with 100k queued and 4 \
         workers, >= 3000 runs/s, p99 <= 100 ms)",
        figures.runs_per_second,
        figures.p50.as_secs_f64() * 1e3,
        figures.p99.as_secs_f64() * 1e3,
        figures.max.as_secs_f64() * 1e3,
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let load = (
        env_usize("WEBHOOK_BENCH_CALLS", 20_000),
        env_usize("WEBHOOK_BENCH_CONCURRENCY", 64),
        env_usize("WEBHOOK_BENCH_BACKLOG", 0),
    );
    let workers: Vec<u32> = std::env::var("WEBHOOK_BENCH_WORKERS")
        .unwrap_or_else(|_| "0,1".to_owned())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("WEBHOOK_BENCH_WORKERS: counts, comma-separated")
        })
        .collect();
    let root = std::env::temp_dir().join(format!("canopy_bench_webhook_{}", std::process::id()));
    let admin_url = "postgres://postgres@127.0.0.1:5432/postgres";
    let admin = sqlx::PgPool::connect(admin_url).await;
    if let Err(error) = &admin {
        println!("PostgreSQL skipped: {error}");
    }
    for (round, workers) in workers.into_iter().enumerate() {
        let dir = root.join(format!("sqlite-{round}"));
        std::fs::create_dir_all(&dir).unwrap();
        let sqlite = format!("sqlite://{}?mode=rwc", dir.join("state.sqlite").display());
        let figures = run(&sqlite, &dir, load, workers).await;
        print("SQLite", load, workers, &figures);

        if let Ok(admin) = &admin {
            let name = format!("canopy_bench_webhook_{}_{round}", std::process::id());
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(admin)
                .await
                .unwrap();
            let pg_dir = root.join(format!("pg-{round}"));
            std::fs::create_dir_all(&pg_dir).unwrap();
            let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
            let figures = run(&url, &pg_dir, load, workers).await;
            print("PostgreSQL", load, workers, &figures);
            let _ = sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
                .execute(admin)
                .await;
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
