//! Benchmark: `SqlCollection::list` of 100 orders with a to-one join (`customer:name`,
//! `customer:email`) against the same query hand-written with sqlx and decoded into a struct, on
//! the same pool in the same run, on SQLite (temporary file) and PostgreSQL (a fresh database on
//! 127.0.0.1:5432, user postgres; skipped with a message when unreachable).
//!
//! The two variants alternate (and swap order every iteration) so that drift cancels out.
//! Prints median and mean microseconds per call and the ratio list / hand-written (target ≤ 1.15).
//! Run: `cargo bench -p canopy --bench list_join`.
//!
//! For profiling: `LIST_JOIN_ONLY=sqlite` (or `postgres`) runs one database, and
//! `LIST_JOIN_ITERATIONS=n` changes the number of timed iterations (warm-up: a tenth of them).

use std::time::{Duration, Instant};

use bigdecimal::BigDecimal;
use canopy::datasource::sql::{Options, Pool, SqlDataSource};
use canopy::datasource::{Caller, DataSource, Filter, Page, Projection, Sort};
use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::{Connection, Row};

const CUSTOMERS: usize = 500;
const ORDERS: usize = 5_000;
const WARM_UP: usize = 200;
const ITERATIONS: usize = 2_000;

/// Timed iterations: `LIST_JOIN_ITERATIONS` or [`ITERATIONS`].
fn iterations() -> usize {
    std::env::var("LIST_JOIN_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ITERATIONS)
}

/// Warm-up iterations: [`WARM_UP`], or a tenth of an overridden iteration count.
fn warm_up() -> usize {
    match iterations() {
        ITERATIONS => WARM_UP,
        n => n / 10,
    }
}

/// Whether the database `name` runs (`LIST_JOIN_ONLY` unset, or naming it).
fn runs(name: &str) -> bool {
    std::env::var("LIST_JOIN_ONLY").map_or(true, |only| only.eq_ignore_ascii_case(name))
}

/// The hand-written row.
#[allow(dead_code, reason = "fields are decoded to measure decoding, not read")]
struct OrderRow<A, T> {
    id: i64,
    amount: Option<A>,
    status: String,
    placed_at: Option<T>,
    customer_name: Option<String>,
    customer_email: Option<String>,
}

fn seed_sql(serial: &str, timestamp: &str) -> String {
    let mut sql = format!(
        "CREATE TABLE customers (id {serial}, name VARCHAR(255) NOT NULL, email VARCHAR(255));
         CREATE TABLE orders (id {serial}, customer_id INT REFERENCES customers(id), amount DECIMAL(10,2),
            status VARCHAR(20) NOT NULL, placed_at {timestamp});
         CREATE INDEX orders_customer ON orders (customer_id);\n"
    );
    for chunk in (1..=CUSTOMERS).collect::<Vec<_>>().chunks(250) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| format!("('Customer {i}', 'customer{i}@example.com')"))
            .collect();
        sql.push_str(&format!(
            "INSERT INTO customers (name, email) VALUES {};\n",
            values.join(", ")
        ));
    }
    for chunk in (1..=ORDERS).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| {
                // Every 10th order has no customer, so the join yields null relations too.
                let customer = if i % 10 == 0 {
                    "NULL".to_owned()
                } else {
                    (i % CUSTOMERS + 1).to_string()
                };
                let day = i % 28 + 1;
                format!(
                    "({customer}, {}.{:02}, '{}', '2024-02-{day:02} {:02}:{:02}:00')",
                    i % 1000,
                    // Never whole: SQLite would store a whole DECIMAL as an INTEGER, which
                    // the hand-written `f64` decode refuses.
                    i % 99 + 1,
                    ["new", "paid", "cancelled"][i % 3],
                    i % 24,
                    i % 60
                )
            })
            .collect();
        sql.push_str(&format!(
            "INSERT INTO orders (customer_id, amount, status, placed_at) VALUES {};\n",
            values.join(", ")
        ));
    }
    sql
}

fn stats(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let median = samples[samples.len() / 2].as_secs_f64() * 1e6;
    let mean = samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len() as f64 * 1e6;
    (median, mean)
}

fn report(name: &str, list: &mut [Duration], hand: &mut [Duration]) {
    let (list_median, list_mean) = stats(list);
    let (hand_median, hand_mean) = stats(hand);
    println!(
        "{name}: {} iterations of 100 rows with a to-one join",
        iterations()
    );
    println!("  SqlCollection::list   median {list_median:8.1} µs   mean {list_mean:8.1} µs");
    println!("  hand-written sqlx     median {hand_median:8.1} µs   mean {hand_mean:8.1} µs");
    println!(
        "  ratio list/hand       median {:8.3}      mean {:8.3}      (target ≤ 1.15)",
        list_median / hand_median,
        list_mean / hand_mean
    );
}

/// Times `list` and `hand` alternately; returns their samples.
async fn measure<FL, FH>(mut list: FL, mut hand: FH) -> (Vec<Duration>, Vec<Duration>)
where
    FL: AsyncFnMut() -> usize,
    FH: AsyncFnMut() -> usize,
{
    for _ in 0..warm_up() {
        assert_eq!(list().await, 100);
        assert_eq!(hand().await, 100);
    }
    let iterations = iterations();
    let mut list_samples = Vec::with_capacity(iterations);
    let mut hand_samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let list_first = i % 2 == 0;
        for step in 0..2 {
            let run_list = (step == 0) == list_first;
            let start = Instant::now();
            let rows = if run_list { list().await } else { hand().await };
            let elapsed = start.elapsed();
            std::hint::black_box(rows);
            if run_list {
                list_samples.push(elapsed);
            } else {
                hand_samples.push(elapsed);
            }
        }
    }
    (list_samples, hand_samples)
}

const HAND_SQL_SQLITE: &str = "SELECT o.id, o.amount, o.status, o.placed_at, c.name, c.email \
    FROM orders o LEFT JOIN customers c ON o.customer_id = c.id ORDER BY o.id ASC LIMIT ? OFFSET ?";
const HAND_SQL_PG: &str = "SELECT o.id, o.amount, o.status, o.placed_at, c.name, c.email \
    FROM orders o LEFT JOIN customers c ON o.customer_id = c.id ORDER BY o.id ASC LIMIT $1 OFFSET $2";

fn filter() -> Filter {
    Filter::default()
        .with_sort(Sort::asc("id"))
        .with_page(Page::new(200, 100))
}

fn projection() -> Projection {
    Projection::new([
        "id",
        "amount",
        "status",
        "placed_at",
        "customer:name",
        "customer:email",
    ])
}

async fn sqlite() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("canopy-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url = format!("sqlite://{}?mode=rwc", dir.join("bench.sqlite").display());
    {
        let mut conn = sqlx::SqliteConnection::connect(&url).await?;
        sqlx::raw_sql(&seed_sql("INTEGER PRIMARY KEY AUTOINCREMENT", "DATETIME"))
            .execute(&mut conn)
            .await?;
    }
    let pool = Pool::connect(&url, 4).await?;
    let Pool::Sqlite(sqlite) = pool.clone() else {
        unreachable!("a sqlite URL")
    };
    let ds = SqlDataSource::from_pool(pool, Options::default()).await?;
    let orders = ds.collection("orders")?;
    let caller = Caller::system(chrono_tz::UTC);
    let (filter, projection) = (filter(), projection());
    let (mut list, mut hand) = measure(
        async || {
            orders
                .list(&caller, &filter, &projection)
                .await
                .map(|r| r.len())
                .unwrap_or_default()
        },
        async || {
            let rows = sqlx::query(HAND_SQL_SQLITE)
                .bind(100_i64)
                .bind(200_i64)
                .fetch_all(&sqlite)
                .await
                .unwrap_or_default();
            let decoded: Vec<OrderRow<f64, NaiveDateTime>> = rows
                .iter()
                .map(|r| OrderRow {
                    id: r.get(0),
                    amount: r.get(1),
                    status: r.get(2),
                    placed_at: r.get(3),
                    customer_name: r.get(4),
                    customer_email: r.get(5),
                })
                .collect();
            decoded.len()
        },
    )
    .await;
    report("SQLite", &mut list, &mut hand);
    ds.pool().close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

async fn postgres() -> Result<(), Box<dyn std::error::Error>> {
    let admin = "postgres://postgres@127.0.0.1:5432/postgres";
    let name = format!("canopy_bench_{}", std::process::id());
    let mut conn = match sqlx::PgConnection::connect(admin).await {
        Ok(conn) => conn,
        Err(e) => {
            println!("PostgreSQL: skipped ({admin} unreachable: {e})");
            return Ok(());
        }
    };
    sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name}"))
        .execute(&mut conn)
        .await?;
    sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await?;
    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
    let result = async {
        {
            let mut seed = sqlx::PgConnection::connect(&url).await?;
            sqlx::raw_sql(&seed_sql("SERIAL PRIMARY KEY", "TIMESTAMPTZ"))
                .execute(&mut seed)
                .await?;
            sqlx::raw_sql("ANALYZE").execute(&mut seed).await?;
        }
        let pool = Pool::connect(&url, 4).await?;
        let Pool::Postgres(pg) = pool.clone() else {
            unreachable!("a postgres URL")
        };
        let ds = SqlDataSource::from_pool(pool, Options::default()).await?;
        let orders = ds.collection("orders")?;
        let caller = Caller::system(chrono_tz::UTC);
        let (filter, projection) = (filter(), projection());
        let (mut list, mut hand) = measure(
            async || {
                orders
                    .list(&caller, &filter, &projection)
                    .await
                    .map(|r| r.len())
                    .unwrap_or_default()
            },
            async || {
                let rows = sqlx::query(HAND_SQL_PG)
                    .bind(100_i64)
                    .bind(200_i64)
                    .fetch_all(&pg)
                    .await
                    .unwrap_or_default();
                let decoded: Vec<OrderRow<BigDecimal, DateTime<Utc>>> = rows
                    .iter()
                    .map(|r| OrderRow {
                        id: i64::from(r.get::<i32, _>(0)),
                        amount: r.get(1),
                        status: r.get(2),
                        placed_at: r.get(3),
                        customer_name: r.get(4),
                        customer_email: r.get(5),
                    })
                    .collect();
                decoded.len()
            },
        )
        .await;
        report("PostgreSQL", &mut list, &mut hand);
        ds.pool().close().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    }
    .await;
    let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await;
    result
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        if runs("sqlite") {
            sqlite().await?;
        }
        if runs("postgres") {
            postgres().await?;
        }
        Ok(())
    })
}
