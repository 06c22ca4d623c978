//! The real `canopy` binary over a real socket: `canopy serve` on a SQLite database, a token from
//! `canopy token`, a list read with a hand-written HTTP/1.1 request, then SIGTERM and a clean
//! exit. Lives in the `canopy` package because Cargo only builds (and names, through
//! `CARGO_BIN_EXE_canopy`) the binaries of the package whose integration tests run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const AUTH_SECRET: &str = "binary-test-auth-secret";
const ENV_SECRET: &str = "1111111111111111111111111111111111111111111111111111111111111111";

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("canopy-binary-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Kills the server if the test fails before its clean shutdown.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

async fn seed(path: &Path) -> String {
    let url = format!("sqlite:{}?mode=rwc", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    for statement in [
        "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)",
        "INSERT INTO books (title) VALUES ('Dune')",
        "INSERT INTO books (title) VALUES ('Emma')",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    pool.close().await;
    url
}

/// One request on a fresh connection (`Connection: close`): status and body.
fn request(address: &str, path: &str, token: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\n{authorization}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // axum sends JSON bodies with a Content-Length, never chunked.
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    Ok((status, body.to_owned()))
}

#[tokio::test]
async fn serve_answers_over_tcp_and_stops_cleanly_on_sigterm() {
    let dir = TempDir::new();
    let database_url = seed(&dir.0.join("books.sqlite")).await;
    let child = Command::new(BIN)
        .args(["serve", "--database-url", &database_url])
        .args(["--auth-secret", AUTH_SECRET, "--env-secret", ENV_SECRET])
        .args(["--listen", "127.0.0.1:0", "--log-level", "warn"])
        .arg("--schema-path")
        .arg(dir.0.join(".forestadmin-schema.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut server = Server(child);

    // Port 0: the server prints the address it got, so no port can be taken in between.
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix("Canopy is serving on http://")
        .and_then(|rest| rest.strip_suffix("/forest"))
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();

    // The listener is bound before the datasource connects: wait for the healthcheck.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match request(&address, "/forest", None) {
            Ok((200, body)) => {
                assert_eq!(
                    serde_json::from_str::<Json>(&body).unwrap(),
                    serde_json::json!({ "error": null, "message": "Agent is running" })
                );
                break;
            }
            other => assert!(Instant::now() < deadline, "no healthcheck: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let minted = Command::new(BIN)
        .args(["token", "--email", "ann@x.io", "--auth-secret", AUTH_SECRET])
        .output()
        .unwrap();
    assert!(minted.status.success(), "{minted:?}");
    let token = String::from_utf8(minted.stdout).unwrap().trim().to_owned();

    let (status, body) = request(
        &address,
        "/forest/books?timezone=Europe/Paris&sort=id",
        Some(&token),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let body: Json = serde_json::from_str(&body).unwrap();
    assert_eq!(body["jsonapi"]["version"], "1.0");
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["type"], "books");
    assert_eq!(data[0]["id"], "1");
    assert_eq!(data[1]["attributes"]["title"], "Emma");
    let (status, _) = request(&address, "/forest/books?timezone=UTC", None).unwrap();
    assert_eq!(status, 401);
    assert!(dir.0.join(".forestadmin-schema.json").exists());

    let killed = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = server.0.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit:?}");
}
