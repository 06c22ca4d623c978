//! Benchmark: the activity log at 1,000,000 entries (issue 21 §3). Seeds the entries through
//! the logger's own writer (batches on its connection, names interned once), then prints:
//! - the write rate of the seeding;
//! - bytes per entry on disk, indexes and lookup tables included: on SQLite the file's
//!   `page_count * page_size` as written and after `VACUUM`, on PostgreSQL the
//!   `pg_total_relation_size` of the log's tables after `VACUUM`;
//! - for each filter of `GET …/activity-logs` with `limit=100`: the plan (`EXPLAIN QUERY PLAN`,
//!   `EXPLAIN`) and p50, p99 and max in milliseconds;
//! - the pruning rate: the oldest quarter of the entries deleted by the 90-day retention, in the
//!   served batches and pauses.
//!
//! The entries span 120 days, by 200 users in 10 teams (one entry in ten in a user's second
//! team), on 30 collections and 100,000 records: lists (no record), reads and writes of one
//! record, bulk deletes of 2 to 5, actions with a label, a few notes and approvals (the rare
//! actions); 15% come from the API with one of 5 tokens.
//!
//! Run: `cargo bench -p canopy --bench activity`. `ACTIVITY_BENCH_ONLY=sqlite` (or `postgres`)
//! runs one database (PostgreSQL at 127.0.0.1:5432, user postgres, a fresh database; skipped with
//! a message when unreachable), `ACTIVITY_BENCH_ENTRIES=n` seeds n entries,
//! `ACTIVITY_BENCH_ITERATIONS=n` times n calls per filter (default 200, after 20 warm-up calls).

use std::time::{Duration, Instant};

use canopy::platform::Store;
use canopy::platform::activity::{
    Action, ActivityFilter, ActivityLog, Actor, Entry, Kind, Origin, PruneSchedule, Retention,
};
use canopy::platform::listing::DateRange;
use canopy::platform::store::Dialect;
use sqlx::Connection as _;

const USERS: u64 = 200;
const TEAMS: u64 = 10;
const COLLECTIONS: u64 = 30;
const RECORDS: u64 = 100_000;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
const SPAN_DAYS: i64 = 120;

fn env_number(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn runs(name: &str) -> bool {
    std::env::var("ACTIVITY_BENCH_ONLY").map_or(true, |only| only.eq_ignore_ascii_case(name))
}

/// A cheap deterministic sequence (xorshift).
struct Values(u64);

impl Values {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below.max(1)
    }
}

fn actor(user: u64, second_team: bool) -> Actor {
    let team = if second_team {
        (user + 1) % TEAMS
    } else {
        user % TEAMS
    };
    Actor {
        id: i64::try_from(user + 1).unwrap_or_default(),
        email: format!("user{user}@bench.io"),
        username: format!("User {user}"),
        team: format!("team{team}"),
    }
}

/// Entry `i` of `count`, spread evenly over [`SPAN_DAYS`] days before `now`.
fn entry(values: &mut Values, i: i64, count: i64, now: i64) -> Entry {
    let user = values.next(USERS);
    let actor = actor(user, values.next(10) == 0);
    let roll = values.next(1000);
    let (action, records) = match roll {
        0..300 => (Action::Index, 0),
        300..380 => (Action::Search, 0),
        380..460 => (Action::Filter, 0),
        460..700 => (Action::Read, 1),
        700..780 => (Action::ListRelatedData, 1),
        780..860 => (Action::Update, 1),
        860..890 => (Action::Create, 1),
        890..920 => (Action::Delete, if values.next(3) == 0 { 5 } else { 1 }),
        920..950 => (Action::Action, 1),
        950..975 => (Action::Dashboard, 0),
        975..990 => (Action::Export, 0),
        990..996 => (Action::CreateNote, 1),
        _ => (Action::ApproveApproval, 1),
    };
    let origin = match values.next(100) {
        0..15 => Origin::Api,
        15..20 => Origin::Mcp,
        _ => Origin::Ui,
    };
    let mut entry = Entry::new(action, actor, origin);
    entry.created_at = now - SPAN_DAYS * DAY_MS + i * (SPAN_DAYS * DAY_MS / count.max(1));
    entry.request_id = Some(uuid::Uuid::now_v7().to_string());
    if action != Action::Dashboard {
        entry.collection = Some(format!("collection{}", values.next(COLLECTIONS)));
    }
    let count = if records == 5 {
        2 + values.next(4)
    } else {
        records
    };
    for _ in 0..count {
        entry.add_records([values.next(RECORDS).to_string()]);
    }
    if action == Action::Action {
        entry.label = Some("Refund order".to_owned());
    }
    if origin == Origin::Api {
        entry.token_id = Some(format!("tok_{}", values.next(5)));
    }
    entry
}

/// Seeds `count` entries through the logger; returns the entries per second.
async fn seed(store: &Store, count: i64, now: i64) -> f64 {
    let log = ActivityLog::with_capacity(store.clone(), 16_384);
    let mut values = Values(0x9E37_79B9_7F4A_7C15);
    let started = Instant::now();
    for i in 0..count {
        let entry = entry(&mut values, i, count, now);
        // The buffer drops when full: wait for the writer rather than losing entries.
        if i % 8_192 == 8_191 {
            log.flush().await;
        }
        log.record(entry);
    }
    log.flush().await;
    assert_eq!(log.dropped(), 0, "no entry dropped while seeding");
    count as f64 / started.elapsed().as_secs_f64()
}

/// Bytes on disk of the log, as written and compacted.
async fn bytes(store: &Store) -> Result<(i64, i64), Box<dyn std::error::Error>> {
    match store.dialect() {
        Dialect::Sqlite => {
            let size = || async {
                sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                    .execute(store.pool())
                    .await?;
                let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
                    .fetch_one(store.pool())
                    .await?;
                let page: i64 = sqlx::query_scalar("PRAGMA page_size")
                    .fetch_one(store.pool())
                    .await?;
                Ok::<i64, sqlx::Error>(pages * page)
            };
            let written = size().await?;
            sqlx::query("VACUUM").execute(store.pool()).await?;
            Ok((written, size().await?))
        }
        Dialect::Postgres => {
            let total = || async {
                sqlx::query_scalar::<_, i64>(
                    "SELECT CAST(SUM(pg_total_relation_size(c.oid)) AS BIGINT) FROM pg_class c \
                     WHERE c.relname IN ('activity_entries', 'activity_records', \
                     'activity_actors', 'activity_names', 'activity_scopes', 'activity_actions')",
                )
                .fetch_one(store.pool())
                .await
            };
            let written = total().await?;
            sqlx::query("VACUUM ANALYZE activity_entries")
                .execute(store.pool())
                .await?;
            sqlx::query("VACUUM ANALYZE activity_records")
                .execute(store.pool())
                .await?;
            Ok((written, total().await?))
        }
    }
}

type MakeFilter = fn(&mut Values, i64, &[String]) -> ActivityFilter;

fn base() -> ActivityFilter {
    ActivityFilter {
        limit: 101,
        ..ActivityFilter::default()
    }
}

/// Each filter of the API, with a value drawn per call (the entries' `now`, cursor ids).
fn filters() -> Vec<(&'static str, MakeFilter)> {
    vec![
        ("none (newest first)", |_, _, _| base()),
        ("userEmail", |v, _, _| ActivityFilter {
            user_email: Some(format!("user{}@bench.io", v.next(USERS))),
            ..base()
        }),
        ("userId", |v, _, _| ActivityFilter {
            user_id: Some(i64::try_from(v.next(USERS) + 1).unwrap_or(1)),
            ..base()
        }),
        ("teamName", |v, _, _| ActivityFilter {
            team_name: Some(format!("team{}", v.next(TEAMS))),
            ..base()
        }),
        ("collectionName", |v, _, _| ActivityFilter {
            collection_name: Some(format!("collection{}", v.next(COLLECTIONS))),
            ..base()
        }),
        ("recordId", |v, _, _| ActivityFilter {
            record_id: Some(v.next(RECORDS).to_string()),
            ..base()
        }),
        ("action=read", |_, _, _| ActivityFilter {
            action: Some(Action::Read),
            ..base()
        }),
        ("action=approveApproval (0.4%)", |_, _, _| ActivityFilter {
            action: Some(Action::ApproveApproval),
            ..base()
        }),
        ("type=write", |_, _, _| ActivityFilter {
            kind: Some(Kind::Write),
            ..base()
        }),
        ("createdAt (one day)", |v, now, _| {
            let day = i64::try_from(v.next(100)).unwrap_or(0) + 1;
            ActivityFilter {
                created_at: DateRange {
                    gte: Some(now - day * DAY_MS),
                    lt: Some(now - (day - 1) * DAY_MS),
                    ..DateRange::default()
                },
                ..base()
            }
        }),
        ("startingAfter", |v, _, cursors| ActivityFilter {
            starting_after: cursors
                .get(usize::try_from(v.next(cursors.len() as u64)).unwrap_or(0))
                .cloned(),
            ..base()
        }),
        ("userId + collectionName", |v, _, _| ActivityFilter {
            user_id: Some(i64::try_from(v.next(USERS) + 1).unwrap_or(1)),
            collection_name: Some(format!("collection{}", v.next(COLLECTIONS))),
            ..base()
        }),
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn bench(name: &str, store: &Store, count: i64) -> Result<(), Box<dyn std::error::Error>> {
    let iterations = usize::try_from(env_number("ACTIVITY_BENCH_ITERATIONS", 200)).unwrap_or(200);
    let now = chrono::Utc::now().timestamp_millis();
    println!("\n{name}: seeding {count} entries…");
    let rate = seed(store, count, now).await;
    println!("  written at {rate:.0} entries/s");
    let (written, compact) = bytes(store).await?;
    println!(
        "  on disk: {:.1} bytes/entry as written ({} MB), {:.1} after VACUUM ({} MB), \
         indexes and lookup tables included",
        written as f64 / count as f64,
        written / 1_000_000,
        compact as f64 / count as f64,
        compact / 1_000_000
    );
    // Cursors: ids spread over the log (a page's last entry).
    let mut cursors = Vec::new();
    for day in 1..60 {
        let page = store
            .activity_logs(&ActivityFilter {
                limit: 1,
                created_at: DateRange {
                    lt: Some(now - day * DAY_MS),
                    ..DateRange::default()
                },
                ..ActivityFilter::default()
            })
            .await?;
        cursors.extend(page.into_iter().map(|row| row.id));
    }
    println!("  listing, limit=100 (p50 / p99 / max ms, rows of the last call):");
    let mut values = Values(0x2545_F491_4F6C_DD1D);
    for (filter_name, make) in filters() {
        let plan = store
            .explain_activity_logs(&make(&mut values, now, &cursors))
            .await?;
        for _ in 0..20 {
            store
                .activity_logs(&make(&mut values, now, &cursors))
                .await?;
        }
        let mut times = Vec::with_capacity(iterations);
        let mut rows = 0;
        for _ in 0..iterations {
            let filter = make(&mut values, now, &cursors);
            let started = Instant::now();
            rows = store.activity_logs(&filter).await?.len();
            times.push(started.elapsed());
        }
        times.sort();
        let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
        println!(
            "    {filter_name:32} {:7.2} {:7.2} {:7.2}  ({rows} rows)",
            ms(at(0.5)),
            ms(at(0.99)),
            ms(times[times.len() - 1])
        );
        for line in plan {
            println!("        {}", line.trim_end());
        }
    }
    let started = Instant::now();
    let pruned = store
        .prune_activity(
            Retention {
                days: Some(90),
                max_rows: None,
            },
            PruneSchedule::default(),
            now,
        )
        .await?;
    let took = started.elapsed();
    println!(
        "  pruning (90 days, batches of {} with {} ms pauses): {} entries in {:.1} s, \
         {:.0} entries/s",
        PruneSchedule::default().batch,
        PruneSchedule::default().pause.as_millis(),
        pruned.expired,
        took.as_secs_f64(),
        pruned.expired as f64 / took.as_secs_f64()
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let count = env_number("ACTIVITY_BENCH_ENTRIES", 1_000_000);
        if runs("sqlite") {
            let path = std::env::temp_dir().join(format!(
                "canopy-activity-bench-{}.sqlite",
                uuid::Uuid::new_v4()
            ));
            let url = format!("sqlite://{}?mode=rwc", path.display());
            let store = Store::open(&url, "bench", "production").await?;
            let result = bench("SQLite", &store, count).await;
            store.close().await;
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            result?;
        }
        if runs("postgres") {
            let admin = "postgres://postgres@127.0.0.1:5432/postgres";
            let name = format!("canopy_activity_bench_{}", uuid::Uuid::new_v4().simple());
            match sqlx::PgConnection::connect(admin).await {
                Err(error) => println!("\nPostgreSQL skipped: {error}"),
                Ok(mut connection) => {
                    sqlx::query(&format!("CREATE DATABASE {name}"))
                        .execute(&mut connection)
                        .await?;
                    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
                    let store = Store::open(&url, "bench", "production").await?;
                    let result = bench("PostgreSQL", &store, count).await;
                    store.close().await;
                    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
                        .execute(&mut connection)
                        .await?;
                    result?;
                }
            }
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
