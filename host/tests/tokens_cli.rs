//! `canopy tokens …` through the real binary, against a running `canopy serve`: a token created
//! on the command line (its secret printed once) reads the admin log over a real socket with
//! the rate-limit headers, is listed without its secret, and is refused once revoked from the
//! command line (the server re-reads a cached token within `auth::tokens::CACHE_TTL`). Mistakes
//! are one sentence and exit 1; every subcommand has help.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

mod support;
use support::{Server, TempDir, serving_address};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const AUTH_SECRET: &str = "tokens-cli-test-auth-secret";
const ENV_SECRET: &str = "2222222222222222222222222222222222222222222222222222222222222222";

/// Runs a management command in `dir` on the store in `dir/state`: exit code, stdout, stderr.
fn cli(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(dir.join("state"))
        .current_dir(dir)
        .env_remove("CANOPY_STATE_URL")
        .env_remove("CANOPY_DATA_DIR")
        .env_remove("CANOPY_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let result = cli(dir, args);
    assert_eq!(result.0, Some(0), "{args:?}: {result:?}");
    result.1
}

/// One GET on a fresh connection: status, head (lowercase) and body.
fn get(address: &str, path: &str, token: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_owned())
}

async fn start(dir: &Path) -> (Server, String) {
    let data = dir.join("data.sqlite");
    let url = format!("sqlite:{}?mode=rwc", data.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let child = Command::new(BIN)
        .args(["serve", "--database-url", &url])
        .args(["--auth-secret", AUTH_SECRET, "--env-secret", ENV_SECRET])
        .args(["--listen", "127.0.0.1:0", "--log-level", "warn"])
        .arg("--schema-path")
        .arg(dir.join(".forestadmin-schema.json"))
        .arg("--data-dir")
        .arg(dir.join("state"))
        .current_dir(dir)
        .env_remove("CANOPY_STATE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let address = serving_address(&mut server.0)
        .unwrap_or_else(|line| panic!("unexpected first line: {line:?}"));
    (server, address)
}

#[tokio::test]
async fn a_cli_token_works_on_the_served_api_until_revoked() {
    let dir = TempDir::new("tokens");
    let (_server, address) = start(&dir.0).await;
    let created: Json = serde_json::from_str(&ok(
        &dir.0,
        &[
            "tokens",
            "create",
            "--email",
            "admin@canopy.local",
            "--name",
            "SIEM",
            "--scope",
            "admin_logs:read",
            "--expires-in",
            "90d",
            "--json",
        ],
    ))
    .unwrap();
    let secret = created["token"].as_str().unwrap().to_owned();
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("cnp_") && secret.len() == 53, "{secret}");
    assert_eq!(created["scopes"], serde_json::json!(["admin_logs:read"]));
    assert!(created["expiresAt"].is_string(), "{created}");

    let (status, head, body) = get(&address, "/v1/project/canopy/admin-logs", &secret);
    assert_eq!(status, 200, "{body}");
    for name in [
        "x-ratelimit-limit: 60",
        "x-ratelimit-remaining: 59",
        "x-ratelimit-reset: ",
        "ratelimit-policy: ",
    ] {
        assert!(head.contains(name), "{name}: {head}");
    }

    let table = ok(&dir.0, &["tokens", "list"]);
    assert!(table.contains(&id) && table.contains("SIEM"), "{table}");
    assert!(!table.contains(&secret[4..]), "{table}");
    let listed: Json = serde_json::from_str(&ok(
        &dir.0,
        &["tokens", "list", "--email", "admin@canopy.local", "--json"],
    ))
    .unwrap();
    assert_eq!(listed[0]["id"], id.as_str());
    assert!(listed[0].get("token").is_none());

    let said = ok(&dir.0, &["tokens", "revoke", &id]);
    assert!(said.contains("Revoked"), "{said}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, _, body) = get(&address, "/v1/project/canopy/admin-logs", &secret);
        if status == 401 {
            assert!(body.contains("Invalid or missing API token"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "still {status}: {body}");
        std::thread::sleep(Duration::from_millis(250));
    }
    let listed = ok(&dir.0, &["tokens", "list", "--json"]);
    assert_eq!(listed.trim(), "[]");
}

#[test]
fn cli_mistakes_are_one_sentence_and_every_subcommand_has_help() {
    let dir = TempDir::new("tokens");
    ok(&dir.0, &["init"]);
    for (args, expected) in [
        (
            &[
                "tokens",
                "create",
                "--email",
                "nobody@x.io",
                "--name",
                "n",
                "--scope",
                "all",
            ][..],
            "no user",
        ),
        (
            &[
                "tokens",
                "create",
                "--email",
                "admin@canopy.local",
                "--name",
                "n",
                "--scope",
                "notes:delete",
            ][..],
            "notes:delete",
        ),
        (
            &[
                "tokens",
                "create",
                "--email",
                "admin@canopy.local",
                "--name",
                "n",
                "--scope",
                "all",
                "--expires-in",
                "soon",
            ][..],
            "soon",
        ),
        (&["tokens", "revoke", "0190"][..], "no live token"),
    ] {
        let (code, _, stderr) = cli(&dir.0, args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("Error: ")
                && stderr.lines().count() == 1
                && stderr.contains(expected),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(ok(&dir.0, &["tokens", "list", "--json"]).trim(), "[]");
    for command in [
        &["tokens"][..],
        &["tokens", "create"],
        &["tokens", "list"],
        &["tokens", "revoke"],
    ] {
        let out = Command::new(BIN)
            .args(command)
            .arg("--help")
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{command:?}");
        assert!(
            stdout.contains("Usage: canopy") && stdout.contains("--state-url"),
            "{command:?}: {stdout}"
        );
    }
}
