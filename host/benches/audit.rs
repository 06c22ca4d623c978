//! Benchmark: what the audit trail costs a write. One `update` of one order by id through the
//! stack without the trail (no layer), and with it (a pending entry before, a read of the
//! record before and after, a confirmation), the trail in Canopy's store; both on SQLite
//! (temporary files), the same data, alternating so that drift cancels out. Also a `list`, which
//! the layer forwards untouched. Prints the median and mean microseconds per call.
//! Run: `cargo bench -p canopy --bench audit` (`AUDIT_ITERATIONS=n` to change the count).

use std::sync::Arc;
use std::time::{Duration, Instant};

use canopy::customizer::{AuditTrail, StackOptions, build_stack_with};
use canopy::datasource::sql::{Options, Pool, SqlDataSource};
use canopy::datasource::{
    Caller, ConditionTree, DataSource, Filter, Operator, Projection, Record, Value,
};
use canopy::platform::Store;
use canopy::platform::audit::AuditStore;
use sqlx::Connection;

const ORDERS: usize = 1_000;

fn iterations() -> usize {
    std::env::var("AUDIT_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000)
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let median = samples[samples.len() / 2];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<28} median {:>8.1} µs   mean {:>8.1} µs",
        median.as_secs_f64() * 1e6,
        mean.as_secs_f64() * 1e6
    );
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("canopy-bench-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url = format!("sqlite://{}?mode=rwc", dir.join("data.sqlite").display());
    {
        let mut conn = sqlx::SqliteConnection::connect(&url).await?;
        let mut sql = String::from(
            "PRAGMA journal_mode = WAL; CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, \
             status VARCHAR(20) NOT NULL, note TEXT, amount INT);\n",
        );
        let rows: Vec<String> = (0..ORDERS)
            .map(|i| format!("('new', 'n{i}', {i})"))
            .collect();
        sql.push_str(&format!(
            "INSERT INTO orders (status, note, amount) VALUES {};",
            rows.join(", ")
        ));
        sqlx::raw_sql(&sql).execute(&mut conn).await?;
    }
    let base: Arc<dyn DataSource> = Arc::new(
        SqlDataSource::from_pool(Pool::connect(&url, 4).await?, Options::default()).await?,
    );
    let state = format!("sqlite://{}?mode=rwc", dir.join("canopy.sqlite").display());
    let store = Store::open(&state, "bench", "production").await?;
    let off = build_stack_with(Arc::clone(&base), Vec::new(), &StackOptions::default())?;
    let on = build_stack_with(
        Arc::clone(&base),
        Vec::new(),
        &StackOptions {
            audit: Some(AuditTrail {
                recorder: Arc::new(AuditStore::in_store(&store)),
                critical: true,
            }),
            ..StackOptions::default()
        },
    )?;
    let (off, on) = (off.collection("orders")?, on.collection("orders")?);
    let caller = Caller::system(chrono_tz::UTC);
    let by_id = |id: usize| {
        Filter::new(Some(ConditionTree::leaf(
            "id",
            Operator::Equal,
            Value::Int(id as i64 % ORDERS as i64 + 1),
        )))
    };
    let patch = |i: usize| {
        let mut patch = Record::new();
        patch.insert("note", Value::String(format!("changed {i}")));
        patch
    };
    let projection = Projection::new(["id", "status", "note", "amount"]);
    let n = iterations();
    let (mut update_off, mut update_on, mut list_off, mut list_on) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..n + n / 10 {
        let timed = i >= n / 10;
        let order = [(&off, false), (&on, true)];
        let order = if i % 2 == 0 {
            order
        } else {
            [order[1], order[0]]
        };
        for (collection, audited) in order {
            let started = Instant::now();
            collection.update(&caller, &by_id(i), &patch(i)).await?;
            let update = started.elapsed();
            let started = Instant::now();
            collection.list(&caller, &by_id(i), &projection).await?;
            let list = started.elapsed();
            if timed {
                if audited {
                    update_on.push(update);
                    list_on.push(list);
                } else {
                    update_off.push(update);
                    list_off.push(list);
                }
            }
        }
    }
    println!("audit trail, SQLite data and store, {n} iterations each");
    summary("update by id, trail off", update_off);
    summary("update by id, trail on", update_on);
    summary("list by id, trail off", list_off);
    summary("list by id, trail on", list_on);
    store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run())
}
