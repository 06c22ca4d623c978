//! The workflow webhook on two real `canopy serve` processes sharing one PostgreSQL store:
//! 1,000 concurrent calls on one record spread over both give exactly one 202 and 999 409 (the
//! store's partial unique index decides, not either process); a URL regenerated with
//! `canopy workflows webhook regenerate` is refused as superseded by both at once, and the new
//! one works on both. Lives in the `canopy` package for `CARGO_BIN_EXE_canopy`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use canopy::platform::{Actor, NewToken, Scope, Store};
use support::{Server, TempDir, drop_postgres, fresh_postgres, serving_address};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const AUTH_SECRET: &str = "webhook-processes-auth-secret";
const ENV_SECRET: &str = "4444444444444444444444444444444444444444444444444444444444444444";

/// Starts `canopy serve` over `data` with its store at `state`; returns it and its address.
fn serve(data: &str, state: &str, dir: &Path, name: &str) -> (Server, String) {
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(["--database-url", data, "--state-url", state])
        .args(["--auth-secret", AUTH_SECRET, "--env-secret", ENV_SECRET])
        .args(["--listen", "127.0.0.1:0", "--log-level", "warn"])
        .args(["--project", "acme"])
        .arg("--schema-path")
        .arg(dir.join(format!("{name}-schema.json")))
        .env("CANOPY_ADMIN_PASSWORD", "first-admin-password")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address =
        serving_address(&mut child).unwrap_or_else(|line| panic!("{name} did not start: {line:?}"));
    (Server(child), address)
}

/// A workflow on `books` whose first step waits for a person (so a run stays ongoing while the
/// engines of both processes run it), stored as the definitions store keeps it; its id.
async fn add_workflow(store: &Store) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "INSERT INTO workflows (id, project, environment, name, collection_name, description, \
         active, latest_version, source, created_by_user_id, created_at, updated_at) \
         VALUES ($1, $2, $3, 'restock', 'books', NULL, 1, 1, 'api', NULL, $4, $4)",
    )
    .bind(&id)
    .bind(store.project())
    .bind(store.environment())
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, \
         created_by_user_id, created_at) VALUES ($1, $2, 1, $3, 'test', NULL, $4)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(&id)
    .bind(
        r#"{"name":"restock","collection":"books","steps":[{"key":"check","type":"guidance","prompt":"Count the copies"},{"key":"done","type":"end"}]}"#,
    )
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();
    id
}

/// `canopy workflows webhook <args…>` on the store; its stdout.
fn cli(state: &str, args: &[&str]) -> String {
    let output = Command::new(BIN)
        .args(["workflows", "webhook"])
        .args(args)
        .args(["--state-url", state, "--project", "acme"])
        .args([
            "--auth-secret",
            AUTH_SECRET,
            "--public-url",
            "http://example.test",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The path of the URL the CLI printed (its last line).
fn path_of(printed: &str) -> String {
    printed
        .lines()
        .last()
        .unwrap()
        .strip_prefix("http://example.test")
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_postgres_store_start_one_run_per_record() {
    let dir = TempDir::new("webhook-processes");
    let data = format!("sqlite:{}?mode=rwc", dir.0.join("books.sqlite").display());
    {
        let pool = sqlx::SqlitePool::connect(&data).await.unwrap();
        sqlx::query("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
    let state = fresh_postgres("webhook").await;
    // One after the other: the first creates the first admin.
    let (first, first_address) = serve(&data, &state, &dir.0, "first");
    let (second, second_address) = serve(&data, &state, &dir.0, "second");

    let store = Store::open(&state, "acme", "production").await.unwrap();
    let admin = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let (_, secret) = store
        .create_token(
            &Actor::System,
            admin.id,
            NewToken {
                name: "integration".into(),
                scopes: vec![Scope::WorkflowsTrigger],
                expires_at: None,
            },
        )
        .await
        .unwrap();
    let workflow_id = add_workflow(&store).await;
    let workflow = store.workflow_ref(&workflow_id).await.unwrap().unwrap();
    store
        .set_webhook_rate_limit(&Actor::System, &workflow, Some(1_000_000))
        .await
        .unwrap();
    let enabled = cli(&state, &["enable", "restock"]);
    assert!(enabled.contains("enabled, URL version 1"), "{enabled}");
    let url = path_of(&cli(&state, &["url", "restock"]));
    assert_eq!(path_of(&enabled), url);

    let client = reqwest::Client::new();
    let token = Arc::new(format!("Bearer {}", secret.expose()));
    let post = |address: &str, path: &str, record: &str| {
        let request = client
            .post(format!("http://{address}{path}"))
            .header("authorization", token.as_str())
            .header("content-type", "application/json")
            .body(format!(r#"{{"record_id":"{record}"}}"#));
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.unwrap_or_default();
            (status, body)
        }
    };
    let calls: Vec<_> = (0..1000)
        .map(|i| {
            let address = if i % 2 == 0 {
                first_address.clone()
            } else {
                second_address.clone()
            };
            let call = post(&address, &url, "7");
            tokio::spawn(call)
        })
        .collect();
    let mut accepted = Vec::new();
    let mut conflicts = 0;
    for call in calls {
        match call.await.unwrap() {
            (202, body) => accepted.push(body["runId"].as_str().unwrap().to_owned()),
            (409, _) => conflicts += 1,
            (status, body) => panic!("{status}: {body}"),
        }
    }
    assert_eq!(accepted.len(), 1);
    assert_eq!(conflicts, 999);
    let runs: Vec<String> =
        sqlx::query_scalar("SELECT id FROM workflow_runs WHERE record_id = '7'")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(runs, accepted);

    // Regenerated from the command line: the old URL is superseded on both processes at once.
    let regenerated = cli(&state, &["regenerate", "restock"]);
    assert!(regenerated.contains("URL version 2"), "{regenerated}");
    let new = path_of(&regenerated);
    assert_ne!(new, url);
    for address in [&first_address, &second_address] {
        let (status, body) = post(address, &url, "8").await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["code"], "webhook_url_superseded", "{body}");
    }
    let (status, body) = post(&first_address, &new, "8").await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = post(&second_address, &new, "8").await;
    assert_eq!(status, 409, "{body}");
    // Disabled from the command line: 404 on both, the URL kept.
    let disabled = cli(&state, &["disable", "restock"]);
    assert_eq!(path_of(&disabled), new);
    for address in [&first_address, &second_address] {
        let (status, _) = post(address, &new, "9").await;
        assert_eq!(status, 404);
    }

    store.close().await;
    drop(first);
    drop(second);
    drop_postgres(&state).await;
}
