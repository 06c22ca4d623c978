//! Schemathesis (PyPI, pinned in `.ci/run`) against the real `canopy` binary: a store made by
//! `canopy init`, `canopy serve` on a port of its own, an admin's session token from
//! `canopy token`, then `schemathesis run <url>/v1/openapi.json` with every check, a bounded
//! number of examples per operation and a time budget (`host/tests/schemathesis.toml`). The
//! test passes only with 0 failures. Without schemathesis it fails, saying how to install it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::{Server, TempDir, serving_address};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const AUTH_SECRET: &str = "openapi-test-auth-secret";
const ENV_SECRET: &str = "2222222222222222222222222222222222222222222222222222222222222222";
/// The version `.ci/run` installs.
const SCHEMATHESIS_VERSION: &str = "4.32.5";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// `$SCHEMATHESIS`, else the virtualenv `.ci/run` makes under `target/`, else `schemathesis` on
/// the `PATH`; none of them is a failure that says how to install it.
fn schemathesis() -> PathBuf {
    let candidates = std::env::var_os("SCHEMATHESIS")
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace().join("target/schemathesis/bin/schemathesis")])
        .chain([PathBuf::from("schemathesis")]);
    for candidate in candidates {
        let version = Command::new(&candidate).arg("--version").output();
        if let Ok(out) = version
            && out.status.success()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains(SCHEMATHESIS_VERSION),
                "{} is {text}, the suite pins {SCHEMATHESIS_VERSION}: run .ci/run, or \
                 python3 -m venv target/schemathesis && \
                 target/schemathesis/bin/pip install schemathesis=={SCHEMATHESIS_VERSION}",
                candidate.display()
            );
            return candidate;
        }
    }
    panic!(
        "schemathesis is not installed: run .ci/run, or\n  python3 -m venv target/schemathesis && \
         target/schemathesis/bin/pip install schemathesis=={SCHEMATHESIS_VERSION}\n\
         (or set SCHEMATHESIS to its path)"
    );
}

/// A SQLite database to serve (the API under test does not read it, but serve needs one).
fn seed(dir: &Path) -> String {
    let path = dir.join("books.sqlite");
    let url = format!("sqlite:{}?mode=rwc", path.display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        for statement in [
            "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)",
            "INSERT INTO books (title) VALUES ('Dune')",
        ] {
            sqlx::query(statement).execute(&pool).await.unwrap();
        }
        pool.close().await;
    });
    url
}

/// Runs a management command on the store in `state`; stdout.
fn manage(dir: &Path, state: &Path, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(state)
        .current_dir(dir)
        .env_remove("CANOPY_STATE_URL")
        .env_remove("CANOPY_DATA_DIR")
        .env_remove("CANOPY_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `GET path` on a fresh connection: status and body.
fn get(address: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
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
    (status, body.to_owned())
}

#[test]
fn schemathesis_finds_no_failure_in_the_v1_api() {
    let schemathesis = schemathesis();
    let dir = TempDir::new("openapi");
    let state = dir.0.join("state");
    let database_url = seed(&dir.0);
    manage(
        &dir.0,
        &state,
        &[
            "init",
            "--admin-email",
            "ann@x.io",
            "--admin-password-stdin",
        ],
        "ann-long-password\n",
    );
    // Some users, teams and roles, so that reads and changes of existing ones are exercised.
    manage(&dir.0, &state, &["roles", "add", "Support"], "");
    manage(&dir.0, &state, &["teams", "add", "Ops"], "");
    manage(
        &dir.0,
        &state,
        &[
            "users", "add", "sam@x.io", "--role", "Support", "--team", "Ops",
        ],
        "",
    );

    let child = Command::new(BIN)
        .args(["serve", "--database-url", &database_url])
        .args(["--auth-secret", AUTH_SECRET, "--env-secret", ENV_SECRET])
        .args(["--listen", "127.0.0.1:0", "--log-level", "error"])
        // Schemathesis sends thousands of requests with one token: the default 60 a minute
        // would answer most of them 429 and test nothing else.
        .args(["--api-rate-limit-per-minute", "1000000"])
        .arg("--schema-path")
        .arg(dir.0.join(".forestadmin-schema.json"))
        .arg("--data-dir")
        .arg(&state)
        .current_dir(&dir.0)
        .env_remove("CANOPY_STATE_URL")
        .env_remove("CANOPY_DATA_DIR")
        .env_remove("CANOPY_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let address = serving_address(&mut server.0)
        .unwrap_or_else(|line| panic!("unexpected first line: {line:?}"));
    let (status, body) = get(&address, "/v1/openapi.json");
    assert_eq!(status, 200, "{body}");

    // `canopy token` looks the user up in the served store: the first admin, made by `canopy init`.
    let minted = Command::new(BIN)
        .args(["token", "--email", "ann@x.io", "--expires", "1h"])
        .args(["--auth-secret", AUTH_SECRET])
        .arg("--data-dir")
        .arg(&state)
        .current_dir(&dir.0)
        .env_remove("CANOPY_STATE_URL")
        .env_remove("CANOPY_DATA_DIR")
        .env_remove("CANOPY_CONFIG")
        .output()
        .unwrap();
    assert!(minted.status.success(), "{minted:?}");
    let token = String::from_utf8(minted.stdout).unwrap().trim().to_owned();

    let reports = dir.0.join("reports");
    let out = Command::new(&schemathesis)
        .arg("--config-file")
        .arg(workspace().join("host/tests/schemathesis.toml"))
        .arg("run")
        .arg(format!("http://{address}/v1/openapi.json"))
        .args(["--url", &format!("http://{address}")])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .arg("--report-dir")
        .arg(&reports)
        .args(["--no-color"])
        // Hypothesis and schemathesis keep state in the working directory: the temporary one.
        .current_dir(&dir.0)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The summary names each operation, check and failure: shown whether it passes or not.
    println!("{stdout}");
    assert!(
        out.status.success(),
        "schemathesis found failures (exit {:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
    assert!(
        !stdout.contains("FAILURES") && !stdout.contains("ERRORS"),
        "{stdout}"
    );
    // It did test the API: every operation of the document was exercised.
    let (_, document) = get(&address, "/v1/openapi.json");
    let document: serde_json::Value = serde_json::from_str(&document).unwrap();
    let operations: usize = document["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|item| item.as_object().unwrap().len())
        .sum();
    assert!(
        stdout.contains(&format!("{operations} selected")),
        "expected {operations} operations under test:\n{stdout}"
    );
    drop(server);
}
