//! Benchmark: the notes listing (`Store::notes`, what `GET …/notes` runs: the notes, their
//! authors and teams, and their threads) with `limit=100` under each single filter of the spec,
//! over 1,000,000 notes (one message each) of 50 users, 10 teams, 20 collections and 100,000
//! records, 10% of them updated later and 5% archived. SQLite (a temporary file, as served:
//! no ANALYZE) and PostgreSQL (a fresh database on 127.0.0.1:5432, user postgres, ANALYZEd as
//! autovacuum would; skipped with a message when unreachable).
//!
//! Each filter runs with a value that changes every iteration (another user, team, record, date),
//! so no page is answered twice from a warm cache line. Prints p50, p99 and max in milliseconds
//! per filter; the target is p99 ≤ 5 ms for each.
//!
//! Run: `cargo bench -p canopy --bench notes`. `NOTES_BENCH_ONLY=sqlite` (or `postgres`) runs one
//! database, `NOTES_BENCH_NOTES=n` seeds n notes, `NOTES_BENCH_ITERATIONS=n` times n calls per
//! filter (default 300, after 30 warm-up calls).

use std::time::{Duration, Instant};

use canopy::datasource::PermissionLevel;
use canopy::platform::listing::DateRange;
use canopy::platform::notes::NoteFilter;
use canopy::platform::store::Dialect;
use canopy::platform::{Actor, NewUser, Store};
use sqlx::Connection as _;

const USERS: i64 = 50;
const TEAMS: i64 = 10;
const COLLECTIONS: i64 = 20;
const RECORDS: i64 = 100_000;
/// The first note's `created_at` (2026-01-01T00:00:00Z); each next one is 1 ms later.
const BASE_MS: i64 = 1_767_225_600_000;

fn env_number(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn runs(name: &str) -> bool {
    std::env::var("NOTES_BENCH_ONLY").map_or(true, |only| only.eq_ignore_ascii_case(name))
}

/// Users `user0…user49@bench.io` (ids contiguous) and teams `team0…team9`; returns the first
/// user id and the first team id.
async fn people(store: &Store) -> Result<(i64, i64), Box<dyn std::error::Error>> {
    let mut team0 = None;
    for t in 0..TEAMS {
        let team = store
            .create_team(&Actor::System, &format!("team{t}"))
            .await?;
        team0.get_or_insert(team.id);
        assert_eq!(
            team.id,
            team0.unwrap_or_default() + t,
            "team ids are contiguous"
        );
    }
    let mut user0 = None;
    for u in 0..USERS {
        let user = store
            .create_user(
                &Actor::System,
                NewUser {
                    email: format!("user{u}@bench.io"),
                    first_name: format!("User{u}"),
                    permission_level: PermissionLevel::Admin,
                    teams: vec![format!("team{}", u % TEAMS)],
                    ..NewUser::default()
                },
            )
            .await?;
        user0.get_or_insert(user.id);
        assert_eq!(
            user.id,
            user0.unwrap_or_default() + u,
            "user ids are contiguous"
        );
    }
    Ok((user0.unwrap_or_default(), team0.unwrap_or_default()))
}

/// Seeds `count` notes and their first messages in two set-based statements.
async fn seed(store: &Store, count: i64) -> Result<(), Box<dyn std::error::Error>> {
    let (user0, team0) = people(store).await?;
    let (source, i) = match store.dialect() {
        Dialect::Sqlite => (
            format!(
                "WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq \
                 WHERE i < {}) ",
                count - 1
            ),
            "seq",
        ),
        Dialect::Postgres => (String::new(), ""),
    };
    let from = if i.is_empty() {
        format!("generate_series(CAST(0 AS BIGINT), {}) AS s(i)", count - 1)
    } else {
        i.to_owned()
    };
    // A deterministic spread: authors, teams and collections cycle, records scatter, one note in
    // ten was updated later (up to ~3 hours), one in twenty archived an hour after creation.
    let sql = format!(
        "{source}INSERT INTO notes (project, environment, team_id, team_name, collection_name, \
         record_id, title, created_by, created_by_email, created_by_username, created_at, \
         updated_at, archived_at, archived_by) \
         SELECT 'bench', 'production', {team0} + (i % {USERS}) % {TEAMS}, \
         'team' || CAST((i % {USERS}) % {TEAMS} AS TEXT), \
         'collection' || CAST((i * 7) % {COLLECTIONS} AS TEXT), \
         CAST((i * 104729) % {RECORDS} AS TEXT), 'note ' || CAST(i AS TEXT), \
         {user0} + i % {USERS}, 'user' || CAST(i % {USERS} AS TEXT) || '@bench.io', \
         'User' || CAST(i % {USERS} AS TEXT), {BASE_MS} + i, \
         {BASE_MS} + i + CASE WHEN i % 10 = 3 THEN (i * 7919) % 10000000 ELSE 0 END, \
         CASE WHEN i % 20 = 7 THEN {BASE_MS} + i + 3600000 ELSE NULL END, \
         CASE WHEN i % 20 = 7 THEN {user0} ELSE NULL END \
         FROM {from}"
    );
    sqlx::query(&sql).execute(store.pool()).await?;
    sqlx::query(
        "INSERT INTO note_messages (note_id, author_id, author_email, author_username, \
         content_html, content_text, created_at) \
         SELECT id, created_by, created_by_email, created_by_username, \
         '<p>' || title || '</p>', title, created_at FROM notes",
    )
    .execute(store.pool())
    .await?;
    sqlx::query("INSERT INTO notes_clock (project, environment, last_ms) VALUES ($1, $2, $3)")
        .bind("bench")
        .bind("production")
        .bind(BASE_MS + count - 1)
        .execute(store.pool())
        .await?;
    Ok(())
}

/// A cheap deterministic sequence (xorshift), for the filter values.
struct Values(u64);

impl Values {
    fn next(&mut self, below: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        i64::try_from(self.0 % u64::try_from(below.max(1)).unwrap_or(1)).unwrap_or_default()
    }
}

type MakeFilter = fn(&mut Values, i64, i64) -> NoteFilter;

/// Each single filter of the spec, with a value drawn per call (`count` notes, first user id).
fn filters() -> Vec<(&'static str, MakeFilter)> {
    fn at(v: &mut Values, count: i64) -> i64 {
        BASE_MS + v.next(count)
    }
    fn range(set: impl FnOnce(&mut DateRange)) -> DateRange {
        let mut r = DateRange::default();
        set(&mut r);
        r
    }
    /// Types each closure as the function pointer the table holds.
    fn f(make: MakeFilter) -> MakeFilter {
        make
    }
    vec![
        ("(none)", f(|_, _, _| NoteFilter::default())),
        (
            "userId",
            f(|v, _, user0| NoteFilter {
                user_id: Some(user0 + v.next(USERS)),
                ..NoteFilter::default()
            }),
        ),
        (
            "userEmail",
            f(|v, _, _| NoteFilter {
                user_email: Some(format!("user{}@bench.io", v.next(USERS))),
                ..NoteFilter::default()
            }),
        ),
        (
            "teamName",
            f(|v, _, _| NoteFilter {
                team_name: Some(format!("team{}", v.next(TEAMS))),
                ..NoteFilter::default()
            }),
        ),
        (
            "collectionName",
            f(|v, _, _| NoteFilter {
                collection_name: Some(format!("collection{}", v.next(COLLECTIONS))),
                ..NoteFilter::default()
            }),
        ),
        (
            "recordId",
            f(|v, _, _| NoteFilter {
                record_id: Some(v.next(RECORDS).to_string()),
                ..NoteFilter::default()
            }),
        ),
        (
            "createdAt.eq",
            f(|v, n, _| NoteFilter {
                created_at: range(|r| r.eq = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "createdAt.lt",
            f(|v, n, _| NoteFilter {
                created_at: range(|r| r.lt = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "createdAt.lte",
            f(|v, n, _| NoteFilter {
                created_at: range(|r| r.lte = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "createdAt.gt",
            f(|v, n, _| NoteFilter {
                created_at: range(|r| r.gt = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "createdAt.gte",
            f(|v, n, _| NoteFilter {
                created_at: range(|r| r.gte = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "updatedAt.eq",
            f(|v, n, _| NoteFilter {
                updated_at: range(|r| r.eq = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "updatedAt.lt",
            f(|v, n, _| NoteFilter {
                updated_at: range(|r| r.lt = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "updatedAt.lte",
            f(|v, n, _| NoteFilter {
                updated_at: range(|r| r.lte = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "updatedAt.gt",
            f(|v, n, _| NoteFilter {
                updated_at: range(|r| r.gt = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "updatedAt.gte",
            f(|v, n, _| NoteFilter {
                updated_at: range(|r| r.gte = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "archivedAt.eq",
            f(|v, n, _| NoteFilter {
                // An archive date that exists: note i (i % 20 = 7) archived at +1 h.
                archived_at: range(|r| {
                    r.eq = Some(BASE_MS + (v.next(n) / 20) * 20 + 7 + 3_600_000);
                }),
                ..NoteFilter::default()
            }),
        ),
        (
            "archivedAt.lt",
            f(|v, n, _| NoteFilter {
                archived_at: range(|r| r.lt = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "archivedAt.lte",
            f(|v, n, _| NoteFilter {
                archived_at: range(|r| r.lte = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "archivedAt.gt",
            f(|v, n, _| NoteFilter {
                archived_at: range(|r| r.gt = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
        (
            "archivedAt.gte",
            f(|v, n, _| NoteFilter {
                archived_at: range(|r| r.gte = Some(at(v, n))),
                ..NoteFilter::default()
            }),
        ),
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn measure(name: &str, store: &Store, count: i64) -> Result<(), Box<dyn std::error::Error>> {
    let user0: i64 = sqlx::query_scalar("SELECT MIN(id) FROM users WHERE project = 'bench'")
        .fetch_one(store.pool())
        .await?;
    let iterations = usize::try_from(env_number("NOTES_BENCH_ITERATIONS", 300)).unwrap_or(300);
    let warm_up = (iterations / 10).max(1);
    println!("{name}: {count} notes, limit=100, {iterations} calls per filter");
    println!(
        "  {:<16} {:>8} {:>8} {:>8} {:>7}",
        "filter", "p50 ms", "p99 ms", "max ms", "rows"
    );
    let mut worst: f64 = 0.0;
    for (label, make) in filters() {
        let mut values = Values(0x9E37_79B9_7F4A_7C15);
        let mut times = Vec::with_capacity(iterations);
        let mut rows = 0;
        for n in 0..warm_up + iterations {
            let filter = make(&mut values, count, user0);
            let start = Instant::now();
            let notes = store.notes(&filter, 101).await?;
            let took = start.elapsed();
            if n >= warm_up {
                times.push(took);
                rows += notes.len();
            }
        }
        times.sort_unstable();
        let p = |q: f64| {
            let index = ((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1;
            ms(times[index])
        };
        worst = worst.max(p(0.99));
        println!(
            "  {label:<16} {:>8.3} {:>8.3} {:>8.3} {:>7}",
            p(0.50),
            p(0.99),
            ms(*times.last().unwrap_or(&Duration::ZERO)),
            rows / iterations.max(1)
        );
    }
    println!("  worst p99: {worst:.3} ms (target ≤ 5 ms)");
    Ok(())
}

async fn sqlite(count: i64) -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("canopy-notes-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url = format!("sqlite://{}?mode=rwc", dir.join("state.sqlite").display());
    let result = async {
        let store = Store::open(&url, "bench", "production").await?;
        let start = Instant::now();
        seed(&store, count).await?;
        println!("SQLite: seeded in {:.1} s", start.elapsed().as_secs_f64());
        measure("SQLite", &store, count).await?;
        store.close().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn postgres(count: i64) -> Result<(), Box<dyn std::error::Error>> {
    let admin = "postgres://postgres@127.0.0.1:5432/postgres";
    let name = format!("canopy_notes_bench_{}", std::process::id());
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
        let start = Instant::now();
        seed(&store, count).await?;
        sqlx::query("ANALYZE").execute(store.pool()).await?;
        println!(
            "PostgreSQL: seeded in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        measure("PostgreSQL", &store, count).await?;
        store.close().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    }
    .await;
    let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await;
    result
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count = env_number("NOTES_BENCH_NOTES", 1_000_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        if runs("sqlite") {
            sqlite(count).await?;
        }
        if runs("postgres") {
            postgres(count).await?;
        }
        Ok(())
    })
}
