//! Benchmark: what the MCP layer costs (issue 14's targets).
//!
//! 1. `tools/call list` (a page of 15) against `GET /forest/orders?page[size]=15` in the same
//!    run, on the same served stack and data (10,000 orders in SQLite), as the same admin:
//!    throughput and latency percentiles of each, and the MCP layer's cost in throughput. Target:
//!    at most 25%. Both go through the whole router in process (`oneshot`), so the figures are
//!    the server's, not a socket's.
//! 2. Access token verification, cold (a token never seen: signature, claims, audience) and warm
//!    (the token remembered until its `exp`). Target: at most 5 µs.
//!
//! Run: `cargo bench -p canopy --bench mcp` (`MCP_BENCH_CALLS`, `MCP_BENCH_CONCURRENCY`).
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
use canopy::auth::{SessionClaims, SessionKey};
use canopy::config::{Config, McpArgs, ServeArgs};
use canopy::datasource::DataSource;
use canopy::datasource::sql::{Options, SqlDataSource};
use canopy::mcp::token::{AccessClaims, AccessKeys};
use tower::ServiceExt as _;

// The allocator `canopy serve` runs with (host/src/main.rs): both paths allocate, the MCP one
// more, and the figures should be the served binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SECRET: &str = "a-benchmark-auth-secret-of-some-length";
const AUDIENCE: &str = "http://localhost/mcp";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// Runs `calls` requests made by `make` with `concurrency` workers.
async fn measure(
    router: &axum::Router,
    make: Arc<dyn Fn() -> Request<Body> + Send + Sync>,
    calls: usize,
    concurrency: usize,
) -> Figures {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let next = Arc::clone(&next);
            let make = Arc::clone(&make);
            let router = router.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < calls {
                    let request = make();
                    let began = Instant::now();
                    let response = router.clone().oneshot(request).await.unwrap();
                    assert_eq!(response.status(), StatusCode::OK);
                    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                        .await
                        .unwrap();
                    assert!(!body.is_empty());
                    latencies.push(began.elapsed());
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
    Figures {
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

async fn seed(url: &str) {
    let pool = sqlx::SqlitePool::connect(url).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, \
         total NUMERIC NOT NULL, note TEXT);
         DELETE FROM orders;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
         INSERT INTO orders (status, total, note) SELECT CASE i % 3 WHEN 0 THEN 'paid' \
         ELSE 'shipped' END, i * 1.5, 'order number ' || i FROM n;",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let calls = env_usize("MCP_BENCH_CALLS", 20_000);
    let concurrency = env_usize("MCP_BENCH_CONCURRENCY", 16);
    let dir = std::env::temp_dir().join(format!("canopy-mcp-bench-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let data_url = format!("sqlite://{}?mode=rwc", dir.join("data.sqlite").display());
    seed(&data_url).await;
    let args = ServeArgs {
        database_url: Some(data_url.clone()),
        auth_secret: Some(SECRET.to_owned()),
        env_secret: Some("a".repeat(64)),
        schema_path: Some(dir.join(".forestadmin-schema.json")),
        state_url: Some(format!(
            "sqlite://{}?mode=rwc",
            dir.join("state.sqlite").display()
        )),
        mcp: McpArgs {
            mcp: Some(true),
            ..McpArgs::default()
        },
        ..ServeArgs::default()
    };
    let config: Config = Config::load(args).unwrap().0;
    let base: Arc<dyn DataSource> = Arc::new(
        SqlDataSource::connect(&data_url, Options::default())
            .await
            .unwrap(),
    );
    let served = Arc::new(Served::start(config, base).await.unwrap());
    let store = served.platform().store.clone();
    let admin = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let team = admin.teams.first().unwrap();
    let rendering = store.rendering_id(team.id).await.unwrap();
    let claims = SessionClaims::for_user(&admin, team, rendering);
    let session = SessionKey::new(SECRET)
        .mint(claims.clone(), Duration::from_secs(3600))
        .unwrap();
    // A real sign-in (client and refresh family), as the token endpoint makes them: the bearer
    // check reads whether it was revoked.
    let client = store
        .register_oauth_client(canopy::platform::NewOAuthClient {
            client_name: Some("bench".to_owned()),
            redirect_uris: vec!["http://127.0.0.1/cb".to_owned()],
            metadata: serde_json::json!({}),
        })
        .await
        .unwrap();
    let family = store
        .start_oauth_grant(&client.client_id, admin.id, AUDIENCE, "mcp:read")
        .await
        .unwrap();
    let access_claims = AccessClaims {
        user: claims,
        exp: 0,
        aud: AUDIENCE.to_owned(),
        iss: "http://localhost".to_owned(),
        scope: "mcp:read mcp:write mcp:action".to_owned(),
        client_id: client.client_id.clone(),
        fam: family.family_id.clone(),
        typ: String::new(),
    };
    let mcp = served.platform().mcp.clone().unwrap();
    let access = mcp
        .keys
        .mint(access_claims.clone(), Duration::from_secs(3600))
        .unwrap();
    let router = served.router();

    let forest: Arc<dyn Fn() -> Request<Body> + Send + Sync> = {
        let bearer = format!("Bearer {session}");
        Arc::new(move || {
            Request::builder()
                .uri("/forest/orders?timezone=UTC&page[size]=15&page[number]=1")
                .header(header::AUTHORIZATION, bearer.as_str())
                .body(Body::empty())
                .unwrap()
        })
    };
    let tool: Arc<dyn Fn() -> Request<Body> + Send + Sync> = {
        let bearer = format!("Bearer {access}");
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list", "arguments": {"collectionName": "orders", "pagination": {"size": 15, "number": 1}}}})
        .to_string();
        Arc::new(move || {
            Request::builder()
                .method("POST")
                .uri("/mcp")
                .header(header::HOST, "localhost")
                .header(header::AUTHORIZATION, bearer.as_str())
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-11-25")
                .body(Body::from(body.clone()))
                .unwrap()
        })
    };
    // The protocol alone (rmcp and the bearer check, no tool): where the layer's cost goes.
    let ping: Arc<dyn Fn() -> Request<Body> + Send + Sync> = {
        let bearer = format!("Bearer {access}");
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        Arc::new(move || {
            Request::builder()
                .method("POST")
                .uri("/mcp")
                .header(header::HOST, "localhost")
                .header(header::AUTHORIZATION, bearer.as_str())
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-11-25")
                .body(Body::from(body))
                .unwrap()
        })
    };
    // A call of each, checked, then a warm-up.
    let answer = router.clone().oneshot(tool()).await.unwrap();
    let text = axum::body::to_bytes(answer.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains("records") && !text.contains("\"isError\":true"),
        "{text}"
    );
    measure(&router, Arc::clone(&forest), 1_000, concurrency).await;
    measure(&router, Arc::clone(&tool), 1_000, concurrency).await;

    println!("list of 15 orders (10,000 in SQLite), {calls} calls, {concurrency} at a time:");
    // Alternated rounds, so a slow moment of the machine weighs on both.
    let (mut forest_total, mut tool_total) = (Vec::new(), Vec::new());
    for round in 1..=3 {
        let f = measure(&router, Arc::clone(&forest), calls / 3, concurrency).await;
        let t = measure(&router, Arc::clone(&tool), calls / 3, concurrency).await;
        println!(
            "  round {round}: GET /forest/orders {:>8.0} req/s p50 {:>7.2?} p99 {:>7.2?} | tools/call list {:>8.0} req/s p50 {:>7.2?} p99 {:>7.2?}",
            f.per_second, f.p50, f.p99, t.per_second, t.p50, t.p99
        );
        forest_total.push(f);
        tool_total.push(t);
    }
    let p = measure(&router, Arc::clone(&ping), calls / 3, concurrency).await;
    println!(
        "  ping (the protocol and bearer check alone): {:>8.0} req/s p50 {:>7.2?} p99 {:>7.2?}",
        p.per_second, p.p50, p.p99
    );
    let mean = |v: &[Figures]| v.iter().map(|f| f.per_second).sum::<f64>() / v.len() as f64;
    let (f, t) = (mean(&forest_total), mean(&tool_total));
    println!(
        "  mean: /forest {f:.0} req/s, MCP {t:.0} req/s: the MCP layer costs {:.1}% of throughput (target ≤ 25%)",
        (1.0 - t / f) * 100.0
    );

    // Token verification.
    let keys = AccessKeys::new(SECRET);
    let rounds = 100_000u32;
    let tokens: Vec<String> = (0..rounds)
        .map(|i| {
            let mut claims = access_claims.clone();
            claims.fam = format!("f{i}");
            keys.mint(claims, Duration::from_secs(3600)).unwrap()
        })
        .collect();
    let began = Instant::now();
    for token in &tokens {
        assert!(keys.verify(token, AUDIENCE).is_ok());
    }
    let cold = began.elapsed() / rounds;
    let began = Instant::now();
    for _ in 0..rounds {
        assert!(keys.verify(&tokens[0], AUDIENCE).is_ok());
    }
    let warm = began.elapsed() / rounds;
    println!(
        "access token verification: cold (first sight) {cold:.2?}, warm (remembered) {warm:.2?} (target ≤ 5 µs)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
