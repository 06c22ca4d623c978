//! Pooled connections cut under the server (`pg_terminate_backend`, MariaDB's `KILL
//! CONNECTION`: what a failover or a restart does to them): the next reads all succeed through
//! HTTP, each retried once on a live connection, and a write is never run a second time.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use canopy::datasource::sql::{Options, Pool, SqlDataSource};
use canopy::datasource::{Caller, DataSource};
use canopy_e2e::{Backend, TestDb};
use indexmap::IndexMap;
use serde_json::json;
use sqlx::{Connection, Row};

use crate::harness::{get_ok, ids, post, serve};
use crate::http::send;

/// The pool size: every connection is warmed, then cut.
const CONNECTIONS: u32 = 5;

/// Opens `CONNECTIONS` connections at once, then returns them all to the pool, idle.
async fn warm(pool: &Pool) {
    async fn hold<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) {
        let mut held = Vec::new();
        for _ in 0..CONNECTIONS {
            held.push(pool.acquire().await.unwrap());
        }
        drop(held);
        // Connections go back to the pool in the background.
        for _ in 0..100 {
            if pool.num_idle() == CONNECTIONS as usize {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the pool did not get its {CONNECTIONS} connections back");
    }
    match pool {
        Pool::Postgres(p) => hold(p).await,
        Pool::MySql(p) => hold(p).await,
        Pool::Sqlite(p) => hold(p).await,
    }
}

/// Ends every other session on the test database from a connection of its own, waits until the
/// server has closed them, and returns how many there were.
async fn cut_every_connection(db: &TestDb) -> usize {
    match db.backend {
        Backend::Postgres => {
            let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
            let others = "FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid()";
            let cut: Vec<bool> =
                sqlx::query_scalar(&format!("SELECT pg_terminate_backend(pid) {others}"))
                    .fetch_all(&mut admin)
                    .await
                    .unwrap();
            for _ in 0..100 {
                let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) {others}"))
                    .fetch_one(&mut admin)
                    .await
                    .unwrap();
                if left == 0 {
                    return cut.into_iter().filter(|ok| *ok).count();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("terminated sessions did not end");
        }
        Backend::MySql => {
            let mut admin = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            let others = "FROM information_schema.PROCESSLIST
                WHERE DB = DATABASE() AND ID <> CONNECTION_ID()";
            let ids: Vec<i64> = sqlx::query(&format!("SELECT CAST(ID AS SIGNED) {others}"))
                .fetch_all(&mut admin)
                .await
                .unwrap()
                .iter()
                .map(|row| row.get::<i64, _>(0))
                .collect();
            for id in &ids {
                sqlx::raw_sql(&format!("KILL CONNECTION {id}"))
                    .execute(&mut admin)
                    .await
                    .unwrap();
            }
            for _ in 0..100 {
                let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) {others}"))
                    .fetch_one(&mut admin)
                    .await
                    .unwrap();
                if left == 0 {
                    return ids.len();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("killed sessions did not end");
        }
        Backend::Sqlite => unreachable!("SQLite has no server to cut connections"),
    }
}

async fn reads_survive_cut_connections_and_writes_are_not_retried(backend: Backend) {
    let db = TestDb::new(backend).await;
    db.execute(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20));
         INSERT INTO items (id, name) VALUES (1, 'a'), (2, 'b');",
    )
    .await;
    let pool = Pool::connect(&db.url, CONNECTIONS).await.unwrap();
    let options = Options {
        connection_name: Some("main".to_owned()),
        ..Options::default()
    };
    let datasource = Arc::new(
        SqlDataSource::from_pool(pool.clone(), options)
            .await
            .unwrap(),
    );
    let stack: Arc<dyn DataSource> = datasource.clone();
    let router = serve(stack);
    let list = "/forest/items?fields%5Bitems%5D=id&sort=id&timezone=UTC";

    warm(&pool).await;
    assert_eq!(cut_every_connection(&db).await, CONNECTIONS as usize);
    // Every pooled connection is dead: each read is retried once, and all succeed.
    for _ in 0..CONNECTIONS {
        assert_eq!(ids(&get_ok(&router, list).await), ["1", "2"]);
    }
    let retried = datasource.retried_reads();
    assert!(retried >= 1, "no read was retried");

    // A native query (charts and segments written in SQL) is read-only too: retried once.
    warm(&pool).await;
    assert_eq!(cut_every_connection(&db).await, CONNECTIONS as usize);
    let caller = Caller::system(chrono_tz::UTC);
    for _ in 0..CONNECTIONS {
        let rows = datasource
            .native_query(
                &caller,
                "main",
                "SELECT name FROM items ORDER BY id",
                &IndexMap::new(),
            )
            .await
            .expect("a native query on a cut connection failed");
        assert_eq!(rows.len(), 2);
    }
    assert!(
        datasource.retried_reads() > retried,
        "no native query was retried"
    );
    let retried = datasource.retried_reads();

    // A write on a dead connection is never run again: whether it failed (500, nothing
    // written) or reached a live connection first (200, written once), no retry happened.
    warm(&pool).await;
    assert_eq!(cut_every_connection(&db).await, CONNECTIONS as usize);
    let create = json!({"data": {"type": "items", "attributes": {"id": 3, "name": "c"}}});
    let (status, _, body) = send(&router, post("/forest/items?timezone=UTC", &create)).await;
    assert_eq!(
        datasource.retried_reads(),
        retried,
        "the write went through the read retry"
    );
    let expected: &[&str] = match status {
        StatusCode::OK => &["1", "2", "3"],
        StatusCode::INTERNAL_SERVER_ERROR => &["1", "2"],
        other => panic!("create answered {other}: {body}"),
    };
    // The reads after it still succeed, and see the write at most once.
    assert_eq!(ids(&get_ok(&router, list).await), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reads_survive_terminated_connections() {
    reads_survive_cut_connections_and_writes_are_not_retried(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_reads_survive_killed_connections() {
    reads_survive_cut_connections_and_writes_are_not_retried(Backend::MySql).await;
}
