//! What the tests that drive the real `canopy` binary share: a scratch directory and a server
//! process that never outlives its test. (`host/tests/support/` is a module, not a test target.)

use std::path::PathBuf;
use std::process::Child;

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `canopy-<purpose>-<uuid>`: the purpose tells a leftover directory's test.
    pub fn new(purpose: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("canopy-{purpose}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `canopy serve`, killed when the test ends however it ends, unless it already
/// stopped (a test of a clean shutdown waits for it itself).
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The PostgreSQL server of the tests (`CANOPY_TEST_POSTGRES_URL`, else the local one), as a URL
/// of its `postgres` database.
#[allow(dead_code, reason = "only the tests with a PostgreSQL store use it")]
fn postgres_admin() -> String {
    std::env::var("CANOPY_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A fresh PostgreSQL database `canopy_<purpose>_<uuid>`; its URL.
#[allow(dead_code, reason = "only the tests with a PostgreSQL store use it")]
pub async fn fresh_postgres(purpose: &str) -> String {
    use sqlx::Connection as _;
    let admin = postgres_admin();
    let name = format!("canopy_{purpose}_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("connect to PostgreSQL");
    sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create a database");
    let base = admin
        .rsplit_once('/')
        .map_or(admin.as_str(), |(base, _)| base);
    format!("{base}/{name}")
}

/// Drops the database of `url` (made by [`fresh_postgres`]), connections and all.
#[allow(dead_code, reason = "only the tests with a PostgreSQL store use it")]
pub async fn drop_postgres(url: &str) {
    use sqlx::Connection as _;
    let Some((_, name)) = url.rsplit_once('/') else {
        return;
    };
    if let Ok(mut conn) = sqlx::PgConnection::connect(&postgres_admin()).await {
        let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn)
            .await;
    }
}
