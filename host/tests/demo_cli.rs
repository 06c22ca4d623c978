//! What a user types after `canopy demo`, in the same folder: the management commands, `canopy
//! token`, `canopy reload` and the webhook URL act on the demo's store with its schema file and
//! secrets (from `.canopy/demo.toml`); the demo takes the settings of `serve`; a command on a
//! missing store creates nothing; a closed stdout ends a command quietly. The real binary
//! (`CARGO_BIN_EXE_canopy`) in a scratch folder.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value as Json;

mod support;
use support::{TempDir, free_port, start_demo};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

/// `canopy ARGS` in `dir` without any store setting from the environment: exit code, stdout,
/// stderr.
fn cli(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(BIN);
    command.args(args).current_dir(dir).stdin(Stdio::null());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CANOPY_") {
            command.env_remove(name);
        }
    }
    let out = command.output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, stdout, stderr) = cli(dir, args);
    assert_eq!(code, Some(0), "{args:?}: {stdout}{stderr}");
    stdout
}

/// A refusal: exit 1, one sentence naming `expected`.
fn refused(dir: &Path, args: &[&str], expected: &str) {
    let (code, stdout, stderr) = cli(dir, args);
    let error: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("Error: "))
        .collect();
    assert_eq!(code, Some(1), "{args:?}: {stdout}{stderr}");
    assert!(
        error.len() == 1 && error[0].contains(expected),
        "{args:?}: {expected:?} in {stderr}"
    );
}

/// One HTTP/1.1 request: status, head and body.
fn request(
    address: &str,
    method: &str,
    path: &str,
    token: &str,
    body: &str,
) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
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
    (status, head.to_owned(), body.to_owned())
}

/// The claims of a session token (its payload, unverified: the server verifies it).
fn claims(token: &str) -> Json {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// After `canopy demo`, in its folder: the commands act on the demo's store (its users, its
/// schema file refusing a misspelt collection), `canopy token` mints the named user's own
/// claims, `canopy reload` and `canopy workflows webhook url` find the demo's secrets, the
/// webhook curl the demo prints works on an order it can still refund, and the default store
/// is never created. The demo honours serve's settings (here a rate limit).
#[tokio::test]
async fn the_cli_after_canopy_demo_acts_on_the_demos_store() {
    let dir = TempDir::new("demo-cli");
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let (_demo, printed) = start_demo(&dir.0, port, &["--api-rate-limit-per-minute", "7"]);
    assert!(printed.contains("valid 12 hours"), "{printed}");

    // The demo's users, with the demo's settings said on stderr.
    let (code, stdout, stderr) = cli(&dir.0, &["users", "list", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains(".canopy/demo.toml"), "{stderr}");
    let users: Json = serde_json::from_str(&stdout).unwrap();
    let emails: Vec<&str> = users
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["email"].as_str().unwrap())
        .collect();
    assert_eq!(
        emails,
        [
            "admin@canopy.local",
            "editor@canopy.local",
            "viewer@canopy.local"
        ]
    );
    // Names are checked against the demo's schema file.
    refused(
        &dir.0,
        &[
            "permissions",
            "grant",
            "--role",
            "Viewer",
            "ordrs",
            "browse",
        ],
        "ordrs",
    );
    ok(
        &dir.0,
        &[
            "permissions",
            "grant",
            "--role",
            "Viewer",
            "orders",
            "export",
        ],
    );
    let created = ok(
        &dir.0,
        &[
            "tokens",
            "create",
            "--email",
            "viewer@canopy.local",
            "--name",
            "script",
            "--scope",
            "notes:read",
        ],
    );
    assert!(created.contains("for viewer@canopy.local"), "{created}");

    // `canopy token`: the viewer's own id, level, role, team and rendering.
    let viewer = users
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == "viewer@canopy.local")
        .unwrap();
    let token = ok(&dir.0, &["token", "--email", "viewer@canopy.local"])
        .trim()
        .to_owned();
    let viewer_claims = claims(&token);
    assert_eq!(viewer_claims["id"], viewer["id"], "{viewer_claims}");
    assert_ne!(viewer_claims["id"], 1);
    assert_eq!(viewer_claims["permissionLevel"], "user", "{viewer_claims}");
    assert_eq!(viewer_claims["role"], "Viewer", "{viewer_claims}");
    assert_eq!(viewer_claims["team"], "Operations", "{viewer_claims}");
    let admin_claims = claims(ok(&dir.0, &["token", "--email", "admin@canopy.local"]).trim());
    let editor_claims = claims(ok(&dir.0, &["token", "--email", "editor@canopy.local"]).trim());
    assert_eq!(editor_claims["team"], "Shipping", "{editor_claims}");
    assert_ne!(
        editor_claims["renderingId"], admin_claims["renderingId"],
        "each team has its rendering"
    );
    // The server accepts it as the viewer: they read, and may not delete.
    let (status, _, body) = request(
        &address,
        "GET",
        "/forest/orders/count?timezone=Europe/Paris",
        &token,
        "",
    );
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = request(
        &address,
        "DELETE",
        "/forest/orders/1?timezone=Europe/Paris",
        &token,
        "",
    );
    assert_eq!(status, 403, "{body}");
    refused(
        &dir.0,
        &["token", "--email", "nobody@canopy.local"],
        "no user \"nobody@canopy.local\"",
    );

    // The demo's secrets, found by the commands that need them.
    let reloaded = ok(&dir.0, &["reload"]);
    assert!(!reloaded.trim().is_empty());
    let url = ok(&dir.0, &["workflows", "webhook", "url", "refund"]);
    let url = url.lines().last().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("http://{address}/v1/workflow-hooks/")),
        "{url}"
    );

    // The demo's settings are serve's: the rate limit given on its command line.
    let (status, head, body) = request(&address, "GET", "/v1/project/canopy/users", &token, "");
    assert_eq!(status, 403, "{body}");
    assert!(
        head.to_ascii_lowercase().contains("x-ratelimit-limit: 7"),
        "{head}"
    );

    // The printed webhook call targets an order the workflow can still refund.
    let order: i64 = printed
        .split("\"record_id\": ")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .and_then(|id| id.trim().parse().ok())
        .unwrap_or_else(|| panic!("no record_id in\n{printed}"));
    let database = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        dir.0.join(".canopy/shop.sqlite").display()
    ))
    .await
    .unwrap();
    let status: String = sqlx::query_scalar("SELECT status FROM orders WHERE id = ?")
        .bind(order)
        .fetch_one(&database)
        .await
        .unwrap();
    database.close().await;
    assert!(
        ["paid", "shipped", "delivered"].contains(&status.as_str()),
        "order {order} is {status}"
    );

    assert!(
        !dir.0.join(".canopy/canopy.sqlite").exists(),
        "a command created the default store"
    );
}

/// A command that needs existing data, on a folder without a store, says so and creates
/// nothing (it used to create an empty store, which every later command then read).
#[test]
fn a_command_on_a_missing_store_refuses_and_creates_nothing() {
    let dir = TempDir::new("demo-cli");
    for args in [
        &[
            "tokens", "create", "--email", "a@b.io", "--name", "x", "--scope", "all",
        ][..],
        &["users", "list"],
        &["workflows", "runs", "list"],
        &["token", "--email", "a@b.io", "--auth-secret", "s"],
    ] {
        refused(&dir.0, args, "no Canopy store at .canopy/canopy.sqlite");
    }
    assert!(!dir.0.join(".canopy").exists());
    // `canopy init` creates it; then the same command works.
    ok(&dir.0, &["init"]);
    ok(&dir.0, &["users", "list"]);
}

/// `canopy users list | head`: the reader went away before the output was written; the
/// command ends quietly with success, where it used to panic with "Broken pipe".
#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let dir = TempDir::new("demo-cli");
    ok(&dir.0, &["init"]);
    for args in [
        &["users", "list"][..],
        &["users", "list", "--json"],
        &["permissions", "show"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(BIN)
            .args(args)
            .current_dir(&dir.0)
            .env_remove("CANOPY_STATE_URL")
            .env_remove("CANOPY_DATA_DIR")
            .env_remove("CANOPY_CONFIG")
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("panicked"),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
}
