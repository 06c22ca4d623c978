//! One Canopy process as the permission server of another (`--server-url`): real `canopy serve`
//! processes over real sockets. The server keeps the permission model in its store (SQLite or
//! PostgreSQL), changed here through the store API on the same database; the client reads the
//! documents over HTTP with the env secret, sends its schema at start, applies the server's
//! rights on its own routes, follows the server's events, refuses to start with a secret the
//! server refuses, and starts but fails closed when the server is down. A real Node agent also
//! boots with a Canopy as its Forest server. Lives in the `canopy` package for `CARGO_BIN_EXE_canopy`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use canopy::auth::{PermissionLevel, SessionClaims, SessionKey};
use canopy::platform::documents::{
    CollectionPermissions, CollectionRights, EnvironmentPermissions, Grant,
};
use canopy::platform::{Actor, NewUser, Store};
use serde_json::Value as Json;

mod support;
use support::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const AUTH_SECRET: &str = "liana-test-auth-secret";
const ENV_SECRET: &str = "2222222222222222222222222222222222222222222222222222222222222222";
const OTHER_SECRET: &str = "3333333333333333333333333333333333333333333333333333333333333333";

/// A `canopy serve` process, killed if the test fails before stopping it.
struct Process {
    child: Child,
    /// `127.0.0.1:port`.
    address: String,
    /// Its stderr lines so far (logs), read by a thread.
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Process {
    fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn logs(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// The logs once they hold every one of `needles` (read by a thread, they lag a little), or
    /// a panic after 10 s.
    async fn wait_for_logs(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let logs = self.logs();
            if needles.iter().all(|n| logs.contains(n)) {
                return logs;
            }
            assert!(Instant::now() < deadline, "{needles:?} not logged:\n{logs}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then the exit within `within`.
    async fn stop(&mut self, within: Duration) -> std::process::ExitStatus {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + within;
        loop {
            if let Some(exit) = self.child.try_wait().unwrap() {
                return exit;
            }
            assert!(
                Instant::now() < deadline,
                "still running {within:?} after SIGTERM; logs:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A books database (ids 1..=3).
async fn seed_books(path: &Path) -> String {
    let url = format!("sqlite:{}?mode=rwc", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    for statement in [
        "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)",
        "INSERT INTO books (title) VALUES ('Dune'), ('Emma'), ('Ulysses')",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    pool.close().await;
    url
}

/// Starts `canopy serve` with these arguments (on a free port unless they name a `--listen`);
/// returns once it announced its address, or the exit status and logs of a start that failed.
fn serve(args: &[&str], dir: &Path, name: &str) -> Result<Process, (i32, String)> {
    let listen: &[&str] = if args.contains(&"--listen") {
        &[]
    } else {
        &["--listen", "127.0.0.1:0"]
    };
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .args(["--auth-secret", AUTH_SECRET])
        .args(listen)
        .args(["--log-level", "info"])
        .arg("--schema-path")
        .arg(dir.join(format!("{name}-schema.json")))
        .env("CANOPY_ADMIN_PASSWORD", "first-admin-password")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let lines = std::sync::Arc::clone(&stderr);
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            lines.lock().unwrap().push(line);
        }
    });
    let Ok(address) = support::serving_address(&mut child) else {
        let status = child.wait().unwrap();
        // Let the reader thread drain the pipe.
        std::thread::sleep(Duration::from_millis(100));
        let logs = stderr.lock().unwrap().join("\n");
        return Err((status.code().unwrap_or(-1), logs));
    };
    Ok(Process {
        address,
        child,
        stderr,
    })
}

/// Canopy's store of the server process: a SQLite file, or a fresh PostgreSQL database.
async fn state_url(postgres: bool, dir: &Path) -> String {
    if !postgres {
        return format!(
            "sqlite://{}?mode=rwc",
            dir.join("server-state.sqlite").display()
        );
    }
    use sqlx::Connection as _;
    let admin = std::env::var("CANOPY_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let name = format!("canopy_liana_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
    sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    let base = admin.rsplit_once('/').unwrap().0;
    format!("{base}/{name}")
}

/// Drops the PostgreSQL database of [`state_url`] (best effort), once nothing uses it.
async fn drop_state(url: &str) {
    use sqlx::Connection as _;
    let Some((base, name)) = url.rsplit_once('/') else {
        return;
    };
    if !url.starts_with("postgres") {
        return;
    }
    if let Ok(mut conn) = sqlx::PgConnection::connect(&format!("{base}/postgres")).await {
        let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn)
            .await;
    }
}

/// A session token for a user of the server's store.
fn token(id: i64, email: &str, role: &str) -> String {
    token_for(id, email, role, 1)
}

/// A session token for a user of the server's store, in that rendering.
fn token_for(id: i64, email: &str, role: &str, rendering_id: i64) -> String {
    let claims = SessionClaims {
        id,
        email: email.to_owned(),
        first_name: "T".to_owned(),
        last_name: "User".to_owned(),
        team: "Operations".to_owned(),
        team_id: None,
        role: role.to_owned(),
        role_id: None,
        permission_level: PermissionLevel::User,
        rendering_id,
        tags: BTreeMap::new(),
        iat: 0,
        exp: 0,
    };
    SessionKey::new(AUTH_SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap()
}

/// The server's model: the bootstrapped Admin role keeps every right on `books`, a Reader role
/// may only browse and read, and a reader user has it. Returns the reader's id.
async fn grant_readers(store: &Store) -> i64 {
    let admin = store.role_by_name("Admin").await.unwrap().unwrap();
    let reader = store.create_role(&Actor::System, "Reader").await.unwrap();
    let user = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "reader@canopy.local".to_owned(),
                role: Some("Reader".to_owned()),
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let both = Grant::Roles {
        roles: vec![admin.id, reader.id],
    };
    let admins = Grant::Roles {
        roles: vec![admin.id],
    };
    let books = CollectionPermissions {
        collection: CollectionRights {
            browse_enabled: both.clone(),
            read_enabled: both,
            edit_enabled: admins.clone(),
            add_enabled: admins.clone(),
            delete_enabled: admins.clone(),
            export_enabled: admins,
        },
        actions: BTreeMap::new(),
    };
    store
        .set_environment_document(
            &Actor::System,
            &EnvironmentPermissions::Collections {
                collections: BTreeMap::from([("books".to_owned(), books)]),
            },
        )
        .await
        .unwrap();
    user.id
}

async fn http(method: reqwest::Method, url: &str, token: &str) -> (u16, Json) {
    let response = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(token)
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Json::String(text)),
    )
}

async fn one_canopy_serves_its_permissions_to_another(postgres: bool) {
    let dir = TempDir::new("liana");
    let books = seed_books(&dir.0.join("books.sqlite")).await;
    let server_state = state_url(postgres, &dir.0).await;
    let mut server = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &server_state,
            "--env-secret",
            ENV_SECRET,
        ],
        &dir.0,
        "server",
    )
    .unwrap_or_else(|(code, logs)| panic!("server exited {code}:\n{logs}"));
    // The store of the server process, changed here as the CLI (or another instance) would.
    let store = Store::open(&server_state, "canopy", "production")
        .await
        .unwrap();
    let reader_id = grant_readers(&store).await;

    let client_state = format!(
        "sqlite://{}?mode=rwc",
        dir.0.join("client-state.sqlite").display()
    );
    let mut client = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &client_state,
            "--env-secret",
            ENV_SECRET,
            "--server-url",
            &server.url(),
        ],
        &dir.0,
        "client",
    )
    .unwrap_or_else(|(code, logs)| panic!("client exited {code}:\n{logs}"));

    // The client sent its schema at start (hash check, then upload), as a Node agent does.
    let apimap = store.apimap().await.unwrap().expect("the client's schema");
    assert_eq!(apimap.document["data"][0]["id"], "books");
    assert_eq!(apimap.document["meta"]["liana"], "forest-nodejs-agent");
    let schema: Json =
        serde_json::from_str(&std::fs::read_to_string(dir.0.join("client-schema.json")).unwrap())
            .unwrap();
    assert_eq!(
        apimap.document["data"][0]["attributes"]["fields"],
        schema["collections"][0]["fields"]
    );
    client
        .wait_for_logs(&[
            "permissions come from the permission server",
            "schema sent to the permission server",
            "following the permission server's events",
        ])
        .await;

    // The documents the client reads are the server's: the reader's entry is served to it.
    let users: Json = reqwest::Client::new()
        .get(format!("{}/liana/v4/permissions/users", server.url()))
        .header("forest-secret-key", ENV_SECRET)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        users
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["id"] == reader_id && u["email"] == "reader@canopy.local"),
        "{users}"
    );
    // The client's own data routes answer (the admin's token, id 1 on the server).
    let (status, body) = http(
        reqwest::Method::GET,
        &format!("{}/forest/books?timezone=UTC", client.url()),
        &token(1, "admin@canopy.local", "Admin"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // The client serves no permission documents of its own: it applies the server's.
    let (status, _) = http(
        reqwest::Method::GET,
        &format!("{}/liana/v4/permissions/users", client.url()),
        "",
    )
    .await;
    assert_eq!(status, 404);

    // The client follows the server's events; stopping the server ends that stream at once
    // (its graceful shutdown does not wait for it), and the client logs the lost connection.
    let exit = server.stop(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit:?}\n{}", server.logs());
    let exit = client.stop(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit:?}\n{}", client.logs());
    store.close().await;
    drop_state(&server_state).await;
}

#[tokio::test]
async fn one_canopy_serves_its_permissions_to_another_sqlite() {
    one_canopy_serves_its_permissions_to_another(false).await;
}

#[tokio::test]
async fn one_canopy_serves_its_permissions_to_another_postgres() {
    one_canopy_serves_its_permissions_to_another(true).await;
}

/// The client applies the server's rights on its own routes: the reader browses `books` but may
/// not delete, the admin may; a right granted on the server reaches the client through the
/// events; a client whose server is down refuses (503, fail closed).
#[tokio::test]
async fn the_servers_permissions_apply_to_the_clients_requests() {
    let dir = TempDir::new("liana");
    let books = seed_books(&dir.0.join("books.sqlite")).await;
    let server_state = state_url(false, &dir.0).await;
    let mut server = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &server_state,
            "--env-secret",
            ENV_SECRET,
        ],
        &dir.0,
        "server",
    )
    .unwrap_or_else(|(code, logs)| panic!("server exited {code}:\n{logs}"));
    let store = Store::open(&server_state, "canopy", "production")
        .await
        .unwrap();
    let reader_id = grant_readers(&store).await;
    let client_state = format!(
        "sqlite://{}?mode=rwc",
        dir.0.join("client-state.sqlite").display()
    );
    let client = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &client_state,
            "--env-secret",
            ENV_SECRET,
            "--server-url",
            &server.url(),
        ],
        &dir.0,
        "client",
    )
    .unwrap_or_else(|(code, logs)| panic!("client exited {code}:\n{logs}"));
    let reader = token(reader_id, "reader@canopy.local", "Reader");
    let admin = token(1, "admin@canopy.local", "Admin");
    let list = format!("{}/forest/books?timezone=UTC", client.url());
    let (status, body) = http(reqwest::Method::GET, &list, &reader).await;
    assert_eq!(status, 200, "{body}");
    let one = format!("{}/forest/books/1?timezone=UTC", client.url());
    let (status, body) = http(reqwest::Method::DELETE, &one, &reader).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["errors"][0]["detail"], "Forbidden");
    let (status, body) = http(reqwest::Method::DELETE, &one, &admin).await;
    assert_eq!(status, 204, "{body}");

    // Readers may delete now: the server's event refreshes the client's documents.
    let readers_too = store.role_by_name("Reader").await.unwrap().unwrap();
    let mut document = store.environment_document().await.unwrap();
    if let EnvironmentPermissions::Collections { collections } = &mut document {
        let rights = &mut collections.get_mut("books").unwrap().collection;
        if let Grant::Roles { roles } = &mut rights.delete_enabled {
            roles.push(readers_too.id);
        }
    }
    store
        .set_environment_document(&Actor::System, &document)
        .await
        .unwrap();
    let two = format!("{}/forest/books/2?timezone=UTC", client.url());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = http(reqwest::Method::DELETE, &two, &reader).await;
        if status == 204 {
            break;
        }
        assert!(Instant::now() < deadline, "{status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(server.stop(Duration::from_secs(10)).await.success());

    // A client started while its server is down refuses every checked request.
    let lonely = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &client_state,
            "--env-secret",
            ENV_SECRET,
            "--server-url",
            &server.url(),
        ],
        &dir.0,
        "lonely",
    )
    .unwrap_or_else(|(code, logs)| panic!("client exited {code}:\n{logs}"));
    let (status, body) = http(
        reqwest::Method::GET,
        &format!("{}/forest/books?timezone=UTC", lonely.url()),
        &admin,
    )
    .await;
    assert_eq!(status, 503, "{body}");
    drop(client);
}

/// A client whose env secret the server does not accept does not start: nothing could ever be
/// allowed, so the operator is told at once.
#[tokio::test]
async fn a_client_with_another_env_secret_does_not_start() {
    let dir = TempDir::new("liana");
    let books = seed_books(&dir.0.join("books.sqlite")).await;
    let server_state = state_url(false, &dir.0).await;
    let server = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &server_state,
            "--env-secret",
            ENV_SECRET,
        ],
        &dir.0,
        "server",
    )
    .unwrap_or_else(|(code, logs)| panic!("server exited {code}:\n{logs}"));
    let client_state = format!(
        "sqlite://{}?mode=rwc",
        dir.0.join("client-state.sqlite").display()
    );
    let refused = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &client_state,
            "--env-secret",
            OTHER_SECRET,
            "--server-url",
            &server.url(),
        ],
        &dir.0,
        "client",
    );
    let Err((code, logs)) = refused else {
        panic!("a client with another env secret started");
    };
    assert_eq!(code, 1, "{logs}");
    assert!(
        logs.contains("refused this instance's env secret") && logs.contains("Forbidden"),
        "{logs}"
    );
    assert!(
        !logs.contains(OTHER_SECRET),
        "the secret is never printed:\n{logs}"
    );
    // The server said why, without the secret either.
    let server_logs = server.logs();
    assert!(!server_logs.contains(OTHER_SECRET), "{server_logs}");
}

/// A client whose server is down starts (the server may come up later) and says clearly that
/// every check is refused until it answers.
#[tokio::test]
async fn a_client_whose_server_is_down_starts_and_says_checks_are_refused() {
    let dir = TempDir::new("liana");
    let books = seed_books(&dir.0.join("books.sqlite")).await;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let client_state = format!(
        "sqlite://{}?mode=rwc",
        dir.0.join("client-state.sqlite").display()
    );
    let mut client = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &client_state,
            "--env-secret",
            ENV_SECRET,
            "--server-url",
            &format!("http://127.0.0.1:{port}"),
        ],
        &dir.0,
        "client",
    )
    .unwrap_or_else(|(code, logs)| panic!("client exited {code}:\n{logs}"));
    client
        .wait_for_logs(&[
            "Failed to reach the permission server at http://127.0.0.1:",
            "every permission check is refused until it answers",
        ])
        .await;
    let exit = client.stop(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit:?}");
}

/// `tests/clients/node-agent`: a real `@forestadmin/agent` (npm) serving a PostgreSQL database.
fn node_agent_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/clients/node-agent");
    assert!(
        dir.join("node_modules/@forestadmin/agent").exists(),
        "the Node agent is not installed: run `npm ci` in {} (.ci/run does)",
        dir.display()
    );
    dir
}

/// A PostgreSQL database with `books` (ids 1..=3) for the Node agent; its URL.
async fn postgres_books() -> String {
    use sqlx::Connection as _;
    let url = state_url(true, Path::new("")).await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE books (id SERIAL PRIMARY KEY, title TEXT NOT NULL);
         INSERT INTO books (title) VALUES ('Dune'), ('Emma'), ('Ulysses');",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    url
}

/// The Node agent process: started with `forestServerUrl` = a Canopy, ready once `agent.start()`
/// resolved (schema sent, events subscribed, IP whitelist loaded).
fn start_node_agent(server_url: &str, database_url: &str, dir: &Path) -> Process {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut child = Command::new("node")
        .arg("agent.js")
        .current_dir(node_agent_dir())
        .env("AGENT_PORT", port.to_string())
        .env("FOREST_AUTH_SECRET", AUTH_SECRET)
        .env("FOREST_ENV_SECRET", ENV_SECRET)
        .env("FOREST_SERVER_URL", server_url)
        .env("SCHEMA_PATH", dir.join("node-schema.json"))
        .env("DATABASE_URL", database_url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node (Node.js 18 or later) runs the agent");
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let lines = std::sync::Arc::clone(&stderr);
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            lines.lock().unwrap().push(line);
        }
    });
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let process = Process {
        address: format!("127.0.0.1:{port}"),
        child,
        stderr,
    };
    assert_eq!(
        line.trim(),
        format!("ready {port}"),
        "the agent did not start:\n{}",
        {
            std::thread::sleep(Duration::from_millis(200));
            process.logs()
        }
    );
    process
}

/// A real Node agent (`@forestadmin/agent` from npm) whose Forest server is a Canopy process:
/// it boots against it (schema hash check and upload, events, IP whitelist), and applies the
/// rights, users, scope and events Canopy serves from its store: the reader lists the scoped
/// books but may not delete, the admin may, and a right granted in Canopy's store reaches the
/// agent through the event stream (the agent refetches on no denial with instantCacheRefresh).
#[tokio::test]
async fn a_node_agent_boots_against_canopy_and_applies_its_permissions() {
    let dir = TempDir::new("liana");
    let agent_db = postgres_books().await;
    let books = seed_books(&dir.0.join("books.sqlite")).await;
    let server_state = state_url(false, &dir.0).await;
    let mut server = serve(
        &[
            "--database-url",
            &books,
            "--state-url",
            &server_state,
            "--env-secret",
            ENV_SECRET,
        ],
        &dir.0,
        "server",
    )
    .unwrap_or_else(|(code, logs)| panic!("server exited {code}:\n{logs}"));
    let store = Store::open(&server_state, "canopy", "production")
        .await
        .unwrap();
    let reader_id = grant_readers(&store).await;
    store
        .update_user(
            &Actor::System,
            reader_id,
            canopy::platform::UserChange {
                teams: Some(vec!["Operations".to_owned()]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // The Operations team's scope on books: Ulysses is out of its sight.
    let rendering_id = store
        .set_rendering(
            &Actor::System,
            "Operations",
            BTreeMap::from([(
                "books".to_owned(),
                canopy::platform::documents::RenderingCollection {
                    scope: Some(serde_json::json!({
                        "field": "title", "operator": "not_equal", "value": "Ulysses"
                    })),
                    segments: Vec::new(),
                    live_query_segments: Vec::new(),
                },
            )]),
            Vec::new(),
        )
        .await
        .unwrap();

    let mut agent = start_node_agent(&server.url(), &agent_db, &dir.0);

    // The agent's start went through Canopy: its schema is stored, as the Forest server keeps it.
    let apimap = store.apimap().await.unwrap().expect("the agent's schema");
    assert_eq!(apimap.document["meta"]["liana"], "forest-nodejs-agent");
    assert_eq!(apimap.document["meta"]["stack"]["engine"], "nodejs");
    assert_eq!(apimap.document["data"][0]["id"], "books");
    agent
        .wait_for_logs(&["Schema was updated, sending new version"])
        .await;

    let reader = token_for(reader_id, "reader@canopy.local", "Reader", rendering_id);
    let admin = token_for(1, "admin@canopy.local", "Admin", rendering_id);
    let list = format!("{}/forest/books?timezone=UTC&sort=id", agent.url());
    let (status, body) = http(reqwest::Method::GET, &list, &reader).await;
    assert_eq!(status, 200, "{body}");
    let titles: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["attributes"]["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Dune", "Emma"], "the team's scope applies");

    let one = format!("{}/forest/books/1?timezone=UTC", agent.url());
    let (status, body) = http(reqwest::Method::DELETE, &one, &reader).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["errors"][0]["name"], "ForbiddenError");
    let (status, body) = http(reqwest::Method::DELETE, &one, &admin).await;
    assert_eq!(status, 204, "{body}");
    // Someone the users document does not list is refused.
    let stranger = token_for(424_242, "who@nowhere", "Admin", rendering_id);
    let (status, body) = http(reqwest::Method::GET, &list, &stranger).await;
    assert_eq!(status, 403, "{body}");

    // Readers may delete now: Canopy's event stream tells the agent, which refetches.
    let readers = store.role_by_name("Reader").await.unwrap().unwrap();
    let mut document = store.environment_document().await.unwrap();
    if let EnvironmentPermissions::Collections { collections } = &mut document {
        let rights = &mut collections.get_mut("books").unwrap().collection;
        if let Grant::Roles { roles } = &mut rights.delete_enabled {
            roles.push(readers.id);
        }
    }
    store
        .set_environment_document(&Actor::System, &document)
        .await
        .unwrap();
    let two = format!("{}/forest/books/2?timezone=UTC", agent.url());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, body) = http(reqwest::Method::DELETE, &two, &reader).await;
        if status == 204 {
            break;
        }
        assert_eq!(status, 403, "{body}");
        assert!(
            Instant::now() < deadline,
            "the grant did not reach the agent:\n{}",
            agent.logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let exit = agent.stop(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit:?}\n{}", agent.logs());
    // Canopy stops while the agent's event stream may still be open.
    let exit = server.stop(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit:?}");
    store.close().await;
    drop_state(&agent_db).await;
}

/// Triggers the Node agent's own `Mark as read` on book `id` with `token`: status and body.
async fn mark_as_read(agent: &Process, token: &str, id: &str) -> (u16, Json) {
    let response = reqwest::Client::new()
        .post(format!(
            "{}/forest/_actions/books/0/mark-as-read?timezone=UTC",
            agent.url()
        ))
        .bearer_auth(token)
        .json(&serde_json::json!({"data": {"attributes": {
            "collection_name": "books", "ids": [id], "values": {},
            "all_records": false, "all_records_ids_excluded": [],
            "smart_action_id": "books-Mark as read"}}}))
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Json::String(text)),
    )
}

/// Issue 21 §5: the Node agent's own action (`Mark as read`, only in the schema it uploads) is
/// covered by the `"*"` the first start gave the Admin role (the served document writes it out
/// for the uploaded schema), and a permissions file may name it: Canopy checks names against
/// the agents' schema too, where it stopped the start with "unknown action". PostgreSQL store.
#[tokio::test]
async fn a_node_agents_own_actions_are_covered_by_the_wildcard_and_can_be_named() {
    let dir = TempDir::new("liana");
    let agent_db = postgres_books().await;
    let books = seed_books(&dir.0.join("books.sqlite")).await;
    let server_state = state_url(true, &dir.0).await;
    let args = [
        "--database-url",
        &books,
        "--state-url",
        &server_state,
        "--env-secret",
        ENV_SECRET,
    ];
    let mut server = serve(&args, &dir.0, "server")
        .unwrap_or_else(|(code, logs)| panic!("server exited {code}:\n{logs}"));
    let store = Store::open(&server_state, "canopy", "production")
        .await
        .unwrap();
    store.create_role(&Actor::System, "Reader").await.unwrap();
    let reader = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "reader@canopy.local".to_owned(),
                role: Some("Reader".to_owned()),
                teams: vec!["Operations".to_owned()],
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let team = store.team_by_name("Operations").await.unwrap().unwrap();
    let rendering_id = store.rendering_id(team.id).await.unwrap();

    let mut agent = start_node_agent(&server.url(), &agent_db, &dir.0);
    let admin_role = store.role_by_name("Admin").await.unwrap().unwrap().id;
    // The document the agent reads names its action, for the Admin role, through the wildcard.
    let document: Json = reqwest::Client::new()
        .get(format!("{}/liana/v4/permissions/environment", server.url()))
        .header("forest-secret-key", ENV_SECRET)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        document["collections"]["books"]["actions"]["Mark as read"]["triggerEnabled"],
        serde_json::json!({"roles": [admin_role]}),
        "{document}"
    );
    let admin = token_for(1, "admin@canopy.local", "Admin", rendering_id);
    let reader_token = token_for(reader.id, "reader@canopy.local", "Reader", rendering_id);
    let (status, body) = mark_as_read(&agent, &admin, "1").await;
    assert_eq!(status, 200, "{body}\n{}", agent.logs());
    assert_eq!(body["success"], "Marked as read");
    let (status, body) = mark_as_read(&agent, &reader_token, "1").await;
    assert_eq!(status, 403, "{body}");

    // A permissions file naming the agent's action: the restarted server applies it. It listens
    // where the agent's event stream reconnects (a server moves only with the agent's settings),
    // and the agent reloads everything once its stream is open again.
    let address = server.address.clone();
    let exit = server.stop(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit:?}");
    let file = dir.0.join("permissions.toml");
    std::fs::write(
        &file,
        "mode = \"managed\"\n\n[roles.Admin]\ncollections = { \"*\" = \"all\" }\n\
         actions = { \"*\" = \"all\" }\n\n[roles.Reader]\n\
         collections = { books = [\"browse\", \"read\"] }\n\n[roles.Reader.actions.books]\n\
         \"Mark as read\" = true\n",
    )
    .unwrap();
    let with_file = [
        &args[..],
        &[
            "--permissions-file",
            file.to_str().unwrap(),
            "--listen",
            &address,
        ],
    ]
    .concat();
    let mut server = serve(&with_file, &dir.0, "server")
        .unwrap_or_else(|(code, logs)| panic!("server exited {code}:\n{logs}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    for attempt in 0u32.. {
        let (status, body) = mark_as_read(&agent, &reader_token, "2").await;
        if status == 200 {
            assert_eq!(body["success"], "Marked as read");
            break;
        }
        assert_eq!(status, 403, "{body}");
        if attempt % 8 == 7 {
            // A change the restarted server's event stream tells the agent about (the file was
            // applied before the agent's stream reconnected), as an admin's edit would.
            store
                .update_user(
                    &Actor::System,
                    reader.id,
                    canopy::platform::UserChange {
                        tags: Some(BTreeMap::from([("nudge".to_owned(), attempt.to_string())])),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the reader never got the action: {status} {body}\n{}",
            agent.logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let exit = agent.stop(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit:?}\n{}", agent.logs());
    let exit = server.stop(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit:?}");
    store.close().await;
    drop_state(&server_state).await;
    drop_state(&agent_db).await;
}
