//! Benchmark: the floor under `bench/load.sh`'s list-15 and get-one rows. How fast can *any* HTTP
//! server built from Canopy's own parts (tokio's multi-thread runtime, axum, a sqlx pool of 10
//! connections without the ping, mimalloc, serde_json) answer the same SQL on this machine, as a
//! share of pgbench running that SQL alone?
//!
//! The server here does only what no admin back end can skip: it parses the HTTP request, runs
//! Canopy's SQL text with Canopy's binds on a pooled, prepared statement, decodes every column by
//! its type and writes the rows as a JSON array. No authentication, permissions, JSON:API
//! envelope, relationships, logging or activity entry. Canopy's share of pgbench cannot exceed
//! this one's, so this is the figure the issue's "share of pgbench" rows are measured against.
//!
//! It serves in process, then runs wrk (`--latency`, `$CONNECTIONS` connections, default 16, and
//! `$THREADS` threads, 2) for `$DURATION` seconds (10) on each scenario, then pgbench (`-M prepared`,
//! the same connections and duration) on the same SQL with the binds inlined, as load.sh does.
//! It prints req/s, p50 and p99, the process's CPU time per request (utime+stime from
//! /proc/self/stat), pgbench's rate and the share.
//!
//! Run: `cargo bench -p canopy --bench floor` on the shop data that `bash bench/load.sh` seeds
//! (the database `$DB`, default canopy_loadbench, on 127.0.0.1:5432 as user postgres). Needs
//! wrk and pgbench. Linux only (/proc).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly"
)]

use std::io::Write as _;
use std::process::Command;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{Column as _, Row as _, TypeInfo as _};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// list-15's SQL, as `canopy serve` sends it (bench/load.sh's trace of the scenario).
const LIST: &str = r#"SELECT "orders"."id", "orders"."status", "orders"."total", "orders"."ordered_at", "orders"."shipped_on", "customer"."email", "customer"."id" FROM "public"."orders" AS "orders" LEFT JOIN "public"."customers" AS "customer" ON "orders"."customer_id" = "customer"."id" ORDER BY "orders"."id" DESC LIMIT $1 OFFSET $2"#;
/// get-one's SQL, likewise.
const ONE: &str = r#"SELECT "orders"."id", "orders"."customer_id", "orders"."status", "orders"."total", "orders"."shipping_address", "orders"."ordered_at", "orders"."shipped_on", "customer"."first_name", "customer"."last_name", "customer"."email", "customer"."id", "customer"."address", "customer"."tags", "customer"."is_vip", "customer"."created_at" FROM "public"."orders" AS "orders" LEFT JOIN "public"."customers" AS "customer" ON "orders"."customer_id" = "customer"."id" WHERE "orders"."id" = $1"#;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// One row as a JSON object, each column decoded by its type (as a JSON writer must).
fn write_row(out: &mut Vec<u8>, row: &PgRow) {
    out.push(b'{');
    for (i, column) in row.columns().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, column.name()).unwrap();
        out.push(b':');
        let value = match column.type_info().name() {
            "INT2" | "INT4" => row
                .try_get::<Option<i32>, _>(i)
                .unwrap()
                .map(serde_json::Value::from),
            "INT8" => row
                .try_get::<Option<i64>, _>(i)
                .unwrap()
                .map(serde_json::Value::from),
            "BOOL" => row
                .try_get::<Option<bool>, _>(i)
                .unwrap()
                .map(serde_json::Value::from),
            "NUMERIC" => row
                .try_get::<Option<bigdecimal::BigDecimal>, _>(i)
                .unwrap()
                .map(|n| serde_json::Value::from(n.to_string())),
            "TIMESTAMP" => row
                .try_get::<Option<chrono::NaiveDateTime>, _>(i)
                .unwrap()
                .map(|t| serde_json::Value::from(t.and_utc().to_rfc3339())),
            "DATE" => row
                .try_get::<Option<chrono::NaiveDate>, _>(i)
                .unwrap()
                .map(|d| serde_json::Value::from(d.to_string())),
            "JSON" | "JSONB" => row.try_get::<Option<serde_json::Value>, _>(i).unwrap(),
            _ => row
                .try_get::<Option<String>, _>(i)
                .unwrap()
                .map(serde_json::Value::from),
        };
        serde_json::to_writer(&mut *out, &value.unwrap_or(serde_json::Value::Null)).unwrap();
    }
    out.push(b'}');
}

fn json(rows: &[PgRow]) -> impl IntoResponse + use<> {
    let mut out = Vec::with_capacity(256 * rows.len().max(1));
    out.push(b'[');
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_row(&mut out, row);
    }
    out.push(b']');
    ([(header::CONTENT_TYPE, "application/json")], out)
}

async fn list(State(pool): State<PgPool>) -> impl IntoResponse {
    let rows = sqlx::query(LIST)
        .bind(15_i64)
        .bind(0_i64)
        .fetch_all(&pool)
        .await
        .unwrap();
    json(&rows)
}

async fn one(State(pool): State<PgPool>, Path(id): Path<i32>) -> impl IntoResponse {
    let rows = sqlx::query(ONE).bind(id).fetch_all(&pool).await.unwrap();
    json(&rows)
}

/// utime + stime of this process, in clock ticks (100 per second on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A wrk run: (requests, seconds, p50 ms, p99 ms, errors + non-2xx).
struct Wrk {
    requests: u64,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
    failed: u64,
}

fn run_wrk(url: &str, path: &str, script: &std::path::Path, duration: &str) -> Wrk {
    let output = Command::new("wrk")
        // bench/lib.sh's script: it sends this header (ignored here) and requests BENCH_PATH.
        .env("CANOPY_TOKEN", "none")
        .env("BENCH_PATH", path)
        .args([
            "-c",
            &env_or("CONNECTIONS", "16"),
            "-t",
            &env_or("THREADS", "2"),
        ])
        .args(["-d", &format!("{duration}s"), "-s"])
        .arg(script)
        .arg(url)
        .output()
        .expect("wrk (apt-get install -y wrk)");
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("wrk printed no result:\n{text}"));
    let field = |key: &str| -> u64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    Wrk {
        requests: field("requests"),
        seconds: field("duration_us") as f64 / 1e6,
        p50_ms: field("p50_us") as f64 / 1e3,
        p99_ms: field("p99_us") as f64 / 1e3,
        failed: field("errors") + field("non2xx"),
    }
}

/// pgbench's transactions per second on `sql` (binds inlined), `-M prepared`.
fn run_pgbench(db: &str, sql: &str, dir: &std::path::Path, duration: &str) -> f64 {
    let file = dir.join("floor.pgbench");
    std::fs::write(&file, sql).unwrap();
    let output = Command::new("pgbench")
        .args(["-n", "-M", "prepared", "-h", "127.0.0.1", "-U", "postgres"])
        .args([
            "-c",
            &env_or("CONNECTIONS", "16"),
            "-j",
            &env_or("THREADS", "2"),
        ])
        .args(["-T", duration, "-f"])
        .arg(&file)
        .arg(db)
        .output()
        .expect("pgbench");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "pgbench printed no rate:\n{text}{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
}

fn main() {
    let db = env_or("DB", "canopy_loadbench");
    let duration = env_or("DURATION", "10");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let pool = runtime.block_on(async {
        PgPoolOptions::new()
            .max_connections(10)
            .test_before_acquire(false)
            .connect(&format!("postgres://postgres@127.0.0.1:5432/{db}"))
            .await
            .unwrap_or_else(|e| {
                panic!("database {db}: {e} (run `bash bench/load.sh` once to seed it)")
            })
    });
    let app = Router::new()
        .route("/list-15", get(list))
        .route("/orders/{id}", get(one))
        .with_state(pool);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = std::env::temp_dir().join(format!("canopy-floor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // load.sh's wrk script (bench/lib.sh), so that both servers get the same requests.
    let script = dir.join("floor.lua");
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/lib.sh");
    let written = Command::new("bash")
        .args(["-c", "source \"$1\" && wrk_lua \"$2\"", "wrk_lua"])
        .arg(lib)
        .arg(&script)
        .status()
        .unwrap();
    assert!(written.success(), "bench/lib.sh's wrk_lua failed");

    let scenarios = [
        (
            "list-15",
            "/list-15",
            LIST.replace("$1", "15").replace("$2", "0"),
        ),
        (
            "get-one",
            // lib.sh's script numbers the `ID` before a query string, as in load.sh's paths.
            "/orders/ID?timezone=UTC",
            format!("\\set id random(1, 5000)\n{}", ONE.replace("$1", ":id")),
        ),
    ];
    println!(
        "floor server (axum + sqlx + serde_json, no Canopy) on PostgreSQL {db}: {} connections, {duration} s per scenario, {} CPUs",
        env_or("CONNECTIONS", "16"),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<10} {:>9} {:>8} {:>8} {:>8} {:>10} {:>7} {:>9} {:>8}",
        "scenario",
        "requests",
        "req/s",
        "p50 ms",
        "p99 ms",
        "CPU us/rq",
        "failed",
        "pgbench",
        "% of pg"
    );
    for (name, path, sql) in scenarios {
        let url = format!("http://127.0.0.1:{port}");
        // Warms the pool's connections and their prepared statements first.
        run_wrk(&url, path, &script, "1");
        let before = cpu_ticks();
        let wrk = run_wrk(&url, path, &script, &duration);
        let cpu_us = (cpu_ticks() - before) as f64 * 10_000.0 / wrk.requests.max(1) as f64;
        let rate = wrk.requests as f64 / wrk.seconds;
        let pg = run_pgbench(&db, &format!("{sql};\n"), &dir, &duration);
        println!(
            "{:<10} {:>9} {:>8.0} {:>8.2} {:>8.2} {:>10.1} {:>7} {:>9.0} {:>7.0}%",
            name,
            wrk.requests,
            rate,
            wrk.p50_ms,
            wrk.p99_ms,
            cpu_us,
            wrk.failed,
            pg,
            100.0 * rate / pg
        );
        std::io::stdout().flush().unwrap();
    }
    std::fs::remove_dir_all(&dir).ok();
    runtime.shutdown_timeout(Duration::from_secs(1));
}
