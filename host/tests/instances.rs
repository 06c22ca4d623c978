//! Three real `canopy serve` processes on one PostgreSQL store, behind a real HAProxy (Debian's
//! package, installed by `.ci/run`) that routes on `/readyz`, all on loopback:
//!
//! - an application token revoked through one instance is refused by the other two within 1 s,
//!   and so is a user disabled through the store (the admin log's trigger announces both on
//!   `canopy_changes`, each instance `LISTEN`s);
//! - the `/v1` rate limit of a token holds across the three (its state is in the store): 6
//!   requests spread over them pass, the 7th is refused wherever it goes;
//! - `canopy reload` asked of one instance reloads the other two within 1 s;
//! - 1,000 concurrent webhook calls on one record through the balancer start exactly one run
//!   (202) and are refused as a duplicate 999 times (409), whichever instance each reaches;
//! - a reload of all three, then SIGTERM to one, under load through the balancer lose no request: the instance
//!   fails `/readyz` while it still accepts, HAProxy stops routing to it, then it closes;
//! - SIGKILL to another under webhook calls loses no accepted run: each 202 is a run in the
//!   store, taken up by the survivor once the killed one's lease ends.
//!
//! Lives in the `canopy` package for `CARGO_BIN_EXE_canopy`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use canopy::platform::{Actor, NewToken, Scope, Store, UserChange};
use support::{Server, TempDir, drop_postgres, free_port, fresh_postgres, serving_address};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const AUTH_SECRET: &str = "instances-auth-secret-of-the-test";
const ENV_SECRET: &str = "6666666666666666666666666666666666666666666666666666666666666666";
const ADMIN: &str = "admin@canopy.local";

/// Starts `canopy serve` on `port` over `data` with its store at `state`.
fn serve(data: &str, state: &str, dir: &Path, name: &str, port: u16) -> Server {
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(["--database-url", data, "--state-url", state])
        .args(["--auth-secret", AUTH_SECRET, "--env-secret", ENV_SECRET])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--log-level",
            "warn",
        ])
        .args(["--project", "acme"])
        .args(["--drain-delay-in-seconds", "2"])
        .arg("--workflows-dir")
        .arg(dir.join("workflows"))
        .args(["--workflow-webhook-rate-limit-per-minute", "1000000"])
        // Low enough to reach in a test; the per-address quota keeps its default.
        .args([
            "--api-rate-limit-per-minute",
            "6",
            "--api-rate-limit-burst",
            "6",
        ])
        .arg("--schema-path")
        .arg(dir.join(format!("{name}-schema.json")))
        .env("CANOPY_ADMIN_PASSWORD", "first-admin-password")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    if let Err(line) = serving_address(&mut child) {
        panic!("{name} did not start: {line:?}");
    }
    Server(child)
}

/// HAProxy on `port` in front of `backends`, checking `/readyz` every 200 ms, retrying a
/// request whose connection failed on another instance. A check may take 3 s (docs/deployment.md's
/// setting): during the 1,000-call burst `/readyz` waits its turn, and the default (`inter`, 200
/// ms) pulled every instance in turn, answering 503.
fn haproxy(dir: &Path, port: u16, backends: &[u16]) -> Server {
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, p)| format!("    server s{i} 127.0.0.1:{p} check\n"))
        .collect();
    let config = format!(
        "global\n    maxconn 4096\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n    \
         timeout server 30s\n    retries 3\n    option redispatch\n\
         frontend front\n    bind 127.0.0.1:{port}\n    default_backend canopy\n\
         backend canopy\n    balance roundrobin\n    option httpchk GET /readyz\n    \
         http-check expect status 200\n    timeout check 3s\n    \
         default-server inter 200ms fall 1 rise 1\n{servers}"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).unwrap();
    let binary = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("HAProxy is installed (.ci/run installs Debian's haproxy)");
    let child: Child = Command::new(binary)
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Server(child)
}

/// The status `GET url` answers with `authorization`.
async fn status(client: &reqwest::Client, url: &str, authorization: &str) -> u16 {
    client
        .get(url)
        .header("authorization", authorization)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Waits until `GET url` answers one of `refusals` instead of 200 with `authorization`; how
/// long it took.
async fn refused_after(
    client: &reqwest::Client,
    url: &str,
    authorization: &str,
    refusals: &[u16],
) -> Duration {
    let started = Instant::now();
    loop {
        match status(client, url, authorization).await {
            200 => {}
            status if refusals.contains(&status) => return started.elapsed(),
            other => panic!("{url} answered {other}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{url} still accepted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_one_postgres_store_behind_haproxy() {
    let dir = TempDir::new("instances");
    let data = format!("sqlite:{}?mode=rwc", dir.0.join("books.sqlite").display());
    {
        let pool = sqlx::SqlitePool::connect(&data).await.unwrap();
        sqlx::query("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("INSERT INTO books (title) VALUES ('Dune'), ('Emma')")
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
    // A workflow whose first step waits for a person: its run stays ongoing during the calls.
    std::fs::create_dir_all(dir.0.join("workflows")).unwrap();
    std::fs::write(
        dir.0.join("workflows").join("restock.toml"),
        "description = \"Restock a book\"\ncollection = \"books\"\n\n\
         [[steps]]\nkey = \"check\"\ntype = \"guidance\"\nprompt = \"Count the copies\"\n\n\
         [[steps]]\nkey = \"done\"\ntype = \"end\"\noutcome = \"succeeded\"\n",
    )
    .unwrap();
    let state = fresh_postgres("instances").await;
    let ports = [free_port(), free_port(), free_port()];
    // One after the other: the first creates the first admin.
    let mut instances: Vec<Server> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| serve(&data, &state, &dir.0, &format!("i{i}"), *port))
        .collect();
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    let client = reqwest::Client::new();

    // An application token, used on every instance (each caches it).
    let store = Store::open(&state, "acme", "production").await.unwrap();
    let admin = store.user_by_email(ADMIN).await.unwrap().unwrap();
    let (token, secret) = store
        .create_token(
            &Actor::System,
            admin.id,
            NewToken {
                name: "instances".into(),
                scopes: vec![Scope::All],
                expires_at: None,
            },
        )
        .await
        .unwrap();
    let bearer = format!("Bearer {}", secret.expose());
    let tokens_path = "/v1/project/acme/tokens";

    // One quota for the three: 6 requests of another token pass, spread over them; the next
    // is refused by each.
    let (_, quota_secret) = store
        .create_token(
            &Actor::System,
            admin.id,
            NewToken {
                name: "quota".into(),
                scopes: vec![Scope::All],
                expires_at: None,
            },
        )
        .await
        .unwrap();
    let quota = format!("Bearer {}", quota_secret.expose());
    for i in 0..6 {
        let url = format!("{}{tokens_path}", urls[i % 3]);
        assert_eq!(status(&client, &url, &quota).await, 200, "request {i}");
    }
    for url in &urls {
        let refused = client
            .get(format!("{url}{tokens_path}"))
            .header("authorization", &quota)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 429, "{url}");
        assert_eq!(refused.headers()["x-ratelimit-remaining"], "0");
        let retry: u64 = refused.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=10).contains(&retry), "{retry}");
    }

    // A reload asked of the first instance reaches the two others.
    let reloaded = client
        .post(format!("{}/_canopy/reload", urls[0]))
        .bearer_auth(ENV_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(reloaded.status(), 200);
    let asked = Instant::now();
    for url in &urls[1..] {
        loop {
            let metrics = client
                .get(format!("{url}/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if metrics.contains("canopy_reloads_total{outcome=\"ok\"} 1") {
                break;
            }
            assert!(
                asked.elapsed() < Duration::from_secs(1),
                "{url} did not reload"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    for url in &urls {
        assert_eq!(
            status(&client, &format!("{url}{tokens_path}"), &bearer).await,
            200
        );
    }
    // Revoked through the first instance: the other two refuse it within 1 s.
    let revoked = client
        .delete(format!("{}{tokens_path}/{}", urls[0], token.id))
        .header("authorization", &bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 204);
    for url in &urls[1..] {
        let took = refused_after(&client, &format!("{url}{tokens_path}"), &bearer, &[401]).await;
        assert!(took < Duration::from_secs(1), "{url} took {took:?}");
    }

    // A user's session on the agent's routes, on every instance; disabling the user (here
    // through the store, as `canopy users` does) reaches all three within 1 s.
    let minted = Command::new(BIN)
        .args(["token", "--email", ADMIN, "--auth-secret", AUTH_SECRET])
        .args(["--state-url", &state, "--project", "acme"])
        .output()
        .unwrap();
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let session = format!(
        "Bearer {}",
        String::from_utf8(minted.stdout).unwrap().trim()
    );
    let books = "/forest/books?timezone=UTC&fields[books]=id,title";
    for url in &urls {
        assert_eq!(
            status(&client, &format!("{url}{books}"), &session).await,
            200
        );
    }
    store
        .update_user(
            &Actor::System,
            admin.id,
            UserChange {
                disabled: Some(true),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();
    for url in &urls {
        let took = refused_after(&client, &format!("{url}{books}"), &session, &[401, 403]).await;
        assert!(took < Duration::from_secs(1), "{url} took {took:?}");
    }
    store
        .update_user(
            &Actor::System,
            admin.id,
            UserChange {
                disabled: Some(false),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();

    // Behind HAProxy: SIGTERM to one instance under load loses no request.
    let front_port = free_port();
    let _balancer = haproxy(&dir.0, front_port, &ports);
    let front = format!("http://127.0.0.1:{front_port}{books}");
    let started = Instant::now();
    // HAProxy listens, then finds the instances ready.
    while !client
        .get(&front)
        .header("authorization", &session)
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "HAProxy does not route"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The webhook: enabled by an admin, called by an integration's token.
    let webhook = |args: &[&str]| {
        let output = Command::new(BIN)
            .args(["workflows", "webhook"])
            .args(args)
            .args(["--state-url", &state, "--project", "acme"])
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
        let printed = String::from_utf8(output.stdout).unwrap();
        printed
            .lines()
            .last()
            .unwrap()
            .strip_prefix("http://example.test")
            .unwrap()
            .to_owned()
    };
    webhook(&["enable", "restock"]);
    let hook = format!(
        "http://127.0.0.1:{front_port}{}",
        webhook(&["url", "restock"])
    );
    let (_, trigger_secret) = store
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
    let trigger = format!("Bearer {}", trigger_secret.expose());
    let calls: Vec<_> = (0..1000)
        .map(|_| {
            let request = client
                .post(&hook)
                .header("authorization", &trigger)
                .header("content-type", "application/json")
                .body(r#"{"record_id":"1"}"#);
            tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) })
        })
        .collect();
    let (mut accepted, mut duplicates) = (0, 0);
    for call in calls {
        match call.await.unwrap() {
            Ok(202) => accepted += 1,
            Ok(409) => duplicates += 1,
            other => panic!("a webhook call answered {other:?}"),
        }
    }
    assert_eq!((accepted, duplicates), (1, 999));

    let answered = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let load_until = Instant::now() + Duration::from_secs(6);
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (client, front, session) = (client.clone(), front.clone(), session.clone());
            let (answered, failed) = (Arc::clone(&answered), Arc::clone(&failed));
            tokio::spawn(async move {
                while Instant::now() < load_until {
                    let ok = client
                        .get(&front)
                        .header("authorization", &session)
                        .send()
                        .await
                        .is_ok_and(|r| r.status() == 200);
                    let counter = if ok { &answered } else { &failed };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    // A reload of every instance (asked of one, announced to the others) under this load.
    let reloaded = client
        .post(format!("{}/_canopy/reload", urls[0]))
        .bearer_auth(ENV_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(reloaded.status(), 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopping = instances.remove(1);
    let killed = Command::new("kill")
        .args(["-TERM", &stopping.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for worker in workers {
        worker.await.unwrap();
    }
    let mut stopping = stopping;
    let exited = stopping.0.wait().unwrap();
    assert!(exited.success(), "{exited:?}");
    let (answered, failed) = (
        answered.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
    );
    assert!(answered > 100, "only {answered} requests answered");
    assert_eq!(
        failed,
        0,
        "{failed} of {} requests failed",
        answered + failed
    );

    // SIGKILL to one of the two left, under webhook calls on distinct records: every call it
    // accepted (202) is a run in the store, which the survivor takes up once its lease ends.
    let accepted = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let calls_until = Instant::now() + Duration::from_secs(3);
    let callers: Vec<_> = (0..4)
        .map(|n| {
            let (client, hook, trigger) = (client.clone(), hook.clone(), trigger.clone());
            let accepted = Arc::clone(&accepted);
            tokio::spawn(async move {
                let mut record = 1_000 * (n + 1);
                while Instant::now() < calls_until {
                    record += 1;
                    let Ok(answer) = client
                        .post(&hook)
                        .header("authorization", &trigger)
                        .header("content-type", "application/json")
                        .body(format!(r#"{{"record_id":"{record}"}}"#))
                        .send()
                        .await
                    else {
                        // In flight on the killed instance: not accepted, so nothing to keep.
                        continue;
                    };
                    if answer.status() == 202 {
                        let body: serde_json::Value = answer.json().await.unwrap();
                        let run = body["runId"].as_str().unwrap().to_owned();
                        accepted.lock().unwrap().push(run);
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut killed = instances.pop().unwrap();
    killed.0.kill().unwrap();
    killed.0.wait().unwrap();
    for caller in callers {
        caller.await.unwrap();
    }
    let accepted = accepted.lock().unwrap().clone();
    assert!(accepted.len() > 50, "only {} runs accepted", accepted.len());
    let started = Instant::now();
    loop {
        let mut waiting = 0;
        for run in &accepted {
            let state: Option<String> =
                sqlx::query_scalar("SELECT state FROM workflow_runs WHERE id = $1")
                    .bind(run)
                    .fetch_optional(store.pool())
                    .await
                    .unwrap();
            match state.as_deref() {
                None => panic!("the accepted run {run} is not in the store"),
                Some("queued" | "running") => waiting += 1,
                Some(_) => {}
            }
        }
        if waiting == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{waiting} of {} accepted runs still queued or running",
            accepted.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    drop(instances);
    store.close().await;
    drop_postgres(&state).await;
}
