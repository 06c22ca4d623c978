//! Set-up shared by the admin tests (`admin_api`, `admin_file`): a served stack over the shop
//! fixture with Canopy's store on SQLite or PostgreSQL, session tokens of the store's users, and
//! requests to the admin API.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::app::Served;
use canopy::auth::{SessionClaims, SessionKey};
use canopy::config::{Config, ServeArgs};
use canopy::datasource::DataSource;
use canopy::platform::{Store, User};
use canopy_e2e::{Backend, TestDb};
use serde_json::Value as Json;
use tower::ServiceExt as _;

use crate::harness::{AUTH_SECRET, ENV_SECRET};

/// Runs `$name(backend)` as a test on a SQLite store and on a PostgreSQL store.
macro_rules! on_store_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_store() { super::$name(canopy_e2e::Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres_store() { super::$name(canopy_e2e::Backend::Postgres).await }
            }
        )*
    };
}
pub(crate) use on_store_backends;

/// A directory removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("canopy-admin-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A served stack and what keeps it alive.
pub(crate) struct Env {
    pub router: Router,
    pub store: Store,
    pub dir: TempDir,
    /// Kept alive with the router: the served stack and both databases.
    _served: Arc<Served>,
    _data: TestDb,
    _state: TestDb,
}

impl Env {
    /// The served stack (its platform, its generations).
    pub(crate) fn served(&self) -> &Arc<Served> {
        &self._served
    }
}

/// The configuration of a server over `data` with its store at `state`, project `acme`.
pub(crate) fn config(
    data: &TestDb,
    state: &TestDb,
    dir: &Path,
    permissions: Option<&Path>,
) -> Config {
    let args = ServeArgs {
        database_url: Some(data.url.clone()),
        auth_secret: Some(AUTH_SECRET.to_owned()),
        env_secret: Some(ENV_SECRET.to_owned()),
        schema_path: Some(dir.join(".forestadmin-schema.json")),
        state_url: Some(state.url.clone()),
        project: Some("acme".to_owned()),
        permissions_file: permissions.map(Path::to_owned),
        ..ServeArgs::default()
    };
    Config::load(args).unwrap().0
}

/// Serves the shop fixture (data on SQLite) with Canopy's store on `backend`; the first start
/// creates the first admin (`admin@canopy.local`). `permissions` is written as the permissions
/// file when given.
pub(crate) async fn serve(backend: Backend, permissions: Option<&str>) -> Result<Env, String> {
    serve_with(backend, permissions, |_| {}).await
}

/// [`serve`], with the configuration changed by `adjust` first.
pub(crate) async fn serve_with(
    backend: Backend,
    permissions: Option<&str>,
    adjust: impl FnOnce(&mut canopy::config::Config),
) -> Result<Env, String> {
    let (data, datasource) = crate::list::shop(Backend::Sqlite).await;
    let state = TestDb::new(backend).await;
    let dir = TempDir::new();
    let file = permissions.map(|text| {
        let path = dir.0.join("permissions.toml");
        std::fs::write(&path, text).unwrap();
        path
    });
    let mut config = config(&data, &state, &dir.0, file.as_deref());
    adjust(&mut config);
    let base: Arc<dyn DataSource> = Arc::new(datasource);
    let served = Arc::new(
        Served::start(config, base)
            .await
            .map_err(|e| format!("{e:#}"))?,
    );
    let router = served.router();
    let store = served.platform().store.clone();
    Ok(Env {
        router,
        store,
        dir,
        _served: served,
        _data: data,
        _state: state,
    })
}

/// A session token of `user`, as the sign-in would mint it.
pub(crate) fn token_of(user: &User) -> String {
    let claims = SessionClaims {
        id: user.id,
        email: user.email.clone(),
        first_name: user.first_name.clone(),
        last_name: user.last_name.clone(),
        team: user
            .teams
            .first()
            .map(|t| t.name.clone())
            .unwrap_or_default(),
        team_id: user.teams.first().map(|t| t.id),
        role: user
            .role
            .as_ref()
            .map(|r| r.name.clone())
            .unwrap_or_default(),
        role_id: user.role.as_ref().map(|r| r.id),
        permission_level: user.permission_level,
        rendering_id: 0,
        tags: user.tags.clone(),
        iat: 0,
        exp: 0,
    };
    SessionKey::new(AUTH_SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap()
}

/// The token of the user with this email.
pub(crate) async fn token_for(store: &Store, email: &str) -> String {
    token_of(&store.user_by_email(email).await.unwrap().unwrap())
}

/// One request: status and JSON body (`Json::Null` when empty).
pub(crate) async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Option<&Json>,
) -> (StatusCode, Json) {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    }
    .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = if bytes.is_empty() {
        Json::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (status, body)
}

/// Asserts the public API's error shape and code, and returns the message.
pub(crate) fn error(status: StatusCode, body: &Json, expected: StatusCode, code: &str) -> String {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["code"], code, "{body}");
    let message = body["message"].as_str().unwrap_or_else(|| panic!("{body}"));
    assert!(!message.is_empty());
    message.to_owned()
}
