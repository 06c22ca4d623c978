//! `canopy mcp`, the standalone MCP server, as a real process over a PostgreSQL store: it reads
//! the spec's variables (`SERVICE_MCP_*`, `MCP_SERVER_PORT`), serves only the MCP namespaces, and
//! a client signs in through its OAuth server and sees only the enabled tools. Bad variables stop
//! it with a message that names them; a mounted server (`canopy serve --mcp`) ignores them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

mod support;

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde_json::{Value as Json, json};
use sha2::Digest as _;
use support::{Server, TempDir, drop_postgres, fresh_postgres};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const PASSWORD: &str = "first-admin-password";

/// A one-table SQLite database in `dir`; its URL.
async fn books(dir: &Path) -> String {
    let url = format!("sqlite:{}?mode=rwc", dir.join("books.sqlite").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    url
}

/// `canopy <command>` over the database and store, with these variables.
fn command(command: &str, data: &str, state: &str, dir: &Path, vars: &[(&str, &str)]) -> Command {
    let mut c = Command::new(BIN);
    c.arg(command)
        .args(["--database-url", data, "--state-url", state])
        .args(["--auth-secret", "mcp-standalone-auth-secret-0123"])
        .args(["--env-secret", &"7".repeat(64)])
        .args(["--log-level", "warn"])
        .arg("--schema-path")
        .arg(dir.join(format!("{command}-schema.json")))
        .env("CANOPY_ADMIN_PASSWORD", PASSWORD)
        .envs(vars.iter().copied());
    c
}

/// Starts it and reads the address it announces.
fn start(mut command: Command) -> (Server, String, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    // The rest is drained: a closed pipe would fail its next line (`serve --mcp` prints two).
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let server = Server(child);
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address announced: {line:?}"))
        .to_owned();
    let origin = url.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
    (server, origin, line)
}

/// Signs in as the first admin through the OAuth server; the access token.
async fn sign_in(http: &reqwest::Client, origin: &str) -> String {
    let redirect = "http://127.0.0.1:9/callback";
    let client: Json = http
        .post(format!("{origin}/oauth/register"))
        .json(&json!({"redirect_uris": [redirect], "client_name": "standalone"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = client["client_id"].as_str().unwrap();
    let verifier = "v".repeat(50);
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    let page = http
        .get(format!("{origin}/oauth/authorize"))
        .query(&[
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", redirect),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .send()
        .await
        .unwrap();
    // The page's CSRF cookie goes back with the form.
    let cookie = page.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = page.text().await.unwrap();
    let hidden = regex::Regex::new(r#"type="hidden" name="([^"]+)" value="([^"]*)""#).unwrap();
    let mut form: Vec<(String, String)> = hidden
        .captures_iter(&page)
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect();
    form.push(("email".into(), "admin@canopy.local".into()));
    form.push(("password".into(), PASSWORD.into()));
    form.push(("decision".into(), "allow".into()));
    let redirected = http
        .post(format!("{origin}/oauth/authorize"))
        .header("cookie", cookie)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(redirected.status(), 302);
    let location = reqwest::Url::parse(redirected.headers()["location"].to_str().unwrap()).unwrap();
    let code = location
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let tokens: Json = http
        .post(format!("{origin}/oauth/token"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", &verifier),
            ("client_id", client_id),
            ("redirect_uri", redirect),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tokens["expires_in"], 600, "{tokens}");
    tokens["access_token"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canopy_mcp_reads_the_service_variables_and_serves_only_the_mcp_server() {
    let dir = TempDir::new("mcp-standalone");
    let data = books(&dir.0).await;
    let state = fresh_postgres("mcp").await;
    let (_server, origin, announced) = start(command(
        "mcp",
        &data,
        &state,
        &dir.0,
        &[
            ("MCP_SERVER_PORT", "0"),
            ("SERVICE_MCP_ENABLED_TOOLS", "list,triggerWorkflow"),
            ("SERVICE_MCP_ACCESS_TOKEN_TTL_SECONDS", "600"),
        ],
    ));
    assert!(announced.contains("MCP server"), "{announced}");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // Only the MCP namespaces are served.
    let forest = http.get(format!("{origin}/forest")).send().await.unwrap();
    assert_eq!(forest.status(), 404);
    let metadata: Json = http
        .get(format!("{origin}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["issuer"], origin.as_str());
    let token = sign_in(&http, &origin).await;
    let listed: Json = http
        .post(format!("{origin}/mcp"))
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["describeCollection", "list", "triggerWorkflow"]);
    // The tools still reach the data, in process.
    let called: Json = http
        .post(format!("{origin}/mcp"))
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "list", "arguments": {"collectionName": "books"}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(called["result"]["isError"], json!(false), "{called}");
    drop(_server);
    drop_postgres(&state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_service_variables_stop_canopy_mcp_and_a_mounted_server_ignores_them() {
    let dir = TempDir::new("mcp-standalone-bad");
    let data = books(&dir.0).await;
    let state = format!("sqlite:{}?mode=rwc", dir.0.join("state.sqlite").display());
    for (name, value, expected) in [
        (
            "SERVICE_MCP_ALLOWED_OAUTH_CLIENTS",
            " , ",
            "at least one domain",
        ),
        (
            "SERVICE_MCP_ALLOWED_OAUTH_CLIENTS",
            "https://claude.ai",
            "bare domain",
        ),
        ("SERVICE_MCP_ACCESS_TOKEN_TTL_SECONDS", "30", "at least 60"),
        (
            "SERVICE_MCP_REFRESH_TOKEN_TTL_SECONDS",
            "1.5",
            "whole number",
        ),
        ("MCP_SERVER_PORT", "70000", "MCP_SERVER_PORT"),
    ] {
        let output = command("mcp", &data, &state, &dir.0, &[(name, value)])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{name}={value} should stop it");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{name}={value}: {stderr}");
    }
    // `serve --mcp`: the variables are the standalone server's, not its.
    let mut serve = command(
        "serve",
        &data,
        &state,
        &dir.0,
        &[("SERVICE_MCP_ALLOWED_OAUTH_CLIENTS", " , ")],
    );
    serve.args(["--mcp", "--listen", "127.0.0.1:0"]);
    let (_server, origin, announced) = start(serve);
    assert!(announced.contains("/forest"), "{announced}");
    let response = reqwest::get(format!("{origin}/.well-known/oauth-protected-resource/mcp"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}
