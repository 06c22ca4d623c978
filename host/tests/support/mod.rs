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

/// The address (`127.0.0.1:PORT`) a `canopy serve` started with a piped stdout says it serves
/// on, read from its first line; `Err` with that line when it is not the serving line (the
/// server stopped instead).
#[allow(
    dead_code,
    reason = "only the tests that start `canopy serve` themselves use it"
)]
pub fn serving_address(child: &mut Child) -> Result<String, String> {
    use std::io::BufRead as _;
    let mut line = String::new();
    let stdout = child.stdout.take().expect("the server's stdout is piped");
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the server's first line");
    line.trim()
        .strip_prefix("Canopy is serving on http://")
        .and_then(|rest| rest.strip_suffix("/forest"))
        .map(str::to_owned)
        .ok_or(line)
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

/// A free port on the loopback (taken back right away: the demo binds it next).
#[allow(dead_code, reason = "only the tests that start `canopy demo` use it")]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Reads a starting `canopy demo`'s stdout until it says it serves (`Press Ctrl-C…`), waiting at
/// most `timeout` for each line: `Ok` with everything it printed, or `Err` with what it printed
/// before it stopped or went quiet. The lines are read on a thread that keeps draining the pipe
/// afterwards, so the demo never blocks on a full one.
#[allow(dead_code, reason = "only the tests that start `canopy demo` use it")]
pub fn demo_started(
    stdout: std::process::ChildStdout,
    timeout: std::time::Duration,
) -> Result<String, String> {
    use std::io::BufRead as _;
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = send.send(line);
        }
    });
    let mut printed = String::new();
    while let Ok(line) = lines.recv_timeout(timeout) {
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("Press Ctrl-C") {
            return Ok(printed);
        }
    }
    Err(printed)
}

/// `canopy demo` in `dir` on `port` with `extra` settings and no `CANOPY_*` setting from the
/// environment; returns once it serves (at most 10 minutes, a cold demo builds its plugins),
/// with what it printed.
#[allow(dead_code, reason = "only the tests that start `canopy demo` use it")]
pub fn start_demo(dir: &std::path::Path, port: u16, extra: &[&str]) -> (Server, String) {
    use std::process::{Command, Stdio};
    let mut command = Command::new(env!("CARGO_BIN_EXE_canopy"));
    command
        .args(["demo", "--listen", &format!("127.0.0.1:{port}")])
        .args(extra)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CANOPY_") {
            command.env_remove(name);
        }
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    match demo_started(stdout, std::time::Duration::from_secs(600)) {
        Ok(printed) => (server, printed),
        Err(printed) => panic!("the demo did not start:\n{printed}"),
    }
}
