//! Test harness: a fresh database per test on SQLite, PostgreSQL and MariaDB/MySQL.
//!
//! Server URLs come from `CANOPY_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) and `CANOPY_TEST_MYSQL_URL` (default
//! `mysql://root@127.0.0.1:3306`). A server that cannot be reached fails the test: the suite is
//! meant to run on all three databases, never to skip one silently.

use std::sync::Arc;

use canopy::datasource::sql::{Dialect, Options, Pool, SqlDataSource};
use canopy::datasource::{Caller, Collection, DataSource};
use sqlx::Connection;

/// The database servers the suite runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

impl Backend {
    pub fn dialect(self) -> Dialect {
        match self {
            Self::Sqlite => Dialect::Sqlite,
            Self::Postgres => Dialect::Postgres,
            Self::MySql => Dialect::MySql,
        }
    }
}

fn postgres_admin_url() -> String {
    std::env::var("CANOPY_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

fn mysql_admin_url() -> String {
    std::env::var("CANOPY_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned())
}

/// A freshly created, empty database. Dropped (best effort) when the value is dropped.
pub struct TestDb {
    pub backend: Backend,
    pub url: String,
    name: String,
    _dir: Option<TempDir>,
}

/// A temporary directory removed on drop (SQLite files).
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl TestDb {
    /// Creates an empty database on the backend's server.
    pub async fn new(backend: Backend) -> Self {
        let name = format!("canopy_t_{}", uuid::Uuid::new_v4().simple());
        match backend {
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(&name);
                std::fs::create_dir_all(&dir).expect("create temp dir");
                let url = format!("sqlite://{}?mode=rwc", dir.join("db.sqlite").display());
                Self {
                    backend,
                    url,
                    name,
                    _dir: Some(TempDir(dir)),
                }
            }
            Backend::Postgres => {
                let admin = postgres_admin_url();
                let mut conn = sqlx::PgConnection::connect(&admin)
                    .await
                    .unwrap_or_else(|e| {
                        panic!("PostgreSQL at {admin} is required by the test suite: {e}")
                    });
                sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .expect("create database");
                let base = admin
                    .rsplit_once('/')
                    .map(|(b, _)| b.to_owned())
                    .unwrap_or(admin);
                Self {
                    backend,
                    url: format!("{base}/{name}"),
                    name,
                    _dir: None,
                }
            }
            Backend::MySql => {
                let admin = mysql_admin_url();
                let mut conn = sqlx::MySqlConnection::connect(&admin)
                    .await
                    .unwrap_or_else(|e| {
                        panic!("MariaDB/MySQL at {admin} is required by the test suite: {e}")
                    });
                sqlx::raw_sql(&format!(
                    "CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
                ))
                .execute(&mut conn)
                .await
                .expect("create database");
                let base = admin.trim_end_matches('/').to_owned();
                Self {
                    backend,
                    url: format!("{base}/{name}"),
                    name,
                    _dir: None,
                }
            }
        }
    }

    /// Runs a batch of SQL statements (DDL and seed data) on the test database.
    pub async fn execute(&self, sql: &str) {
        match self.backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect");
                sqlx::raw_sql(sql).execute(&mut c).await.expect("run SQL");
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url)
                    .await
                    .expect("connect");
                sqlx::raw_sql(sql).execute(&mut c).await.expect("run SQL");
            }
            Backend::MySql => {
                let mut c = sqlx::MySqlConnection::connect(&self.url)
                    .await
                    .expect("connect");
                sqlx::raw_sql(sql).execute(&mut c).await.expect("run SQL");
            }
        }
    }

    /// Opens a pool on the test database.
    pub async fn pool(&self) -> Pool {
        Pool::connect(&self.url, 4).await.expect("connect pool")
    }

    /// Introspects the database and serves it.
    pub async fn datasource(&self, options: Options) -> SqlDataSource {
        SqlDataSource::from_pool(self.pool().await, options)
            .await
            .expect("introspect")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {}", self.name);
        let admin = match self.backend {
            Backend::Sqlite => return,
            Backend::Postgres => postgres_admin_url(),
            Backend::MySql => mysql_admin_url(),
        };
        let backend = self.backend;
        // Drop runs outside the test's runtime; a short-lived thread with its own runtime does the
        // cleanup so that servers do not fill up with test databases.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                match backend {
                    Backend::Postgres => {
                        if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                            let _ = sqlx::raw_sql(&format!("{sql} WITH (FORCE)"))
                                .execute(&mut c)
                                .await;
                        }
                    }
                    Backend::MySql => {
                        if let Ok(mut c) = sqlx::MySqlConnection::connect(&admin).await {
                            let _ = sqlx::raw_sql(&sql).execute(&mut c).await;
                        }
                    }
                    Backend::Sqlite => {}
                }
            });
        })
        .join();
    }
}

/// A caller in UTC for tests.
pub fn caller() -> Caller {
    Caller::system(chrono_tz::UTC)
}

/// A caller in the given IANA timezone.
pub fn caller_in(tz: &str) -> Caller {
    Caller::system(tz.parse().expect("valid timezone"))
}

/// Shorthand: the collection named `name`, or a panic.
pub fn collection(ds: &SqlDataSource, name: &str) -> Arc<dyn Collection> {
    ds.collection(name)
        .unwrap_or_else(|e| panic!("collection {name}: {e}"))
}

/// Generates one `#[tokio::test]` per backend for an `async fn(Backend)`.
#[macro_export]
macro_rules! on_all_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() { super::$name($crate::Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() { super::$name($crate::Backend::Postgres).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn mysql() { super::$name($crate::Backend::MySql).await }
            }
        )*
    };
}
