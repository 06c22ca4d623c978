//! Sign-in end to end, over a real `canopy serve` on a TCP port and a scripted browser (reqwest
//! with a cookie jar): `POST /forest/authentication`, Canopy's sign-in page, the redirect with a
//! one-time code, and `GET /forest/authentication/callback` answering `{token, tokenData}` with
//! the §4.2 claims. On a SQLite store and a PostgreSQL store. Also: one generic failure message,
//! rate limits, codes that are spent, expired, or for a user since disabled, CSRF, the agent's
//! error shapes, and logout. The OpenID Connect source is in `login_oidc`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use canopy::app::ServeOptions;
use canopy::auth::SessionKey;
use canopy::config::{Config, LoginArgs, ServeArgs};
use canopy::datasource::PermissionLevel;
use canopy::platform::{Actor, NewUser, Store, UserChange, password};
use canopy_e2e::{Backend, TestDb};
use regex::Regex;
use reqwest::StatusCode;
use reqwest::redirect::Policy;
use serde_json::{Value as Json, json};

pub(crate) const AUTH_SECRET: &str = "a-login-test-auth-secret";
pub(crate) const PASSWORD: &str = "correct horse battery";
const GENERIC: &str = "Wrong email or password.";

/// A `canopy serve` listening on a free port, stopped when dropped.
pub(crate) struct Canopy {
    pub base: String,
    pub store: Store,
    _stop: tokio::sync::oneshot::Sender<()>,
    _user_data: TestDb,
    _dir: TempDir,
}

pub(crate) struct TempDir(pub std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Canopy's store on `store_db`, its users created by `seed` before the server starts (so that
/// the first start creates no admin of its own), then served with these sign-in settings on the
/// already bound `listener`.
pub(crate) async fn serve_on(
    listener: tokio::net::TcpListener,
    store_db: &TestDb,
    login: LoginArgs,
) -> Canopy {
    serve_with_mcp(
        listener,
        store_db,
        login,
        canopy::config::McpArgs::default(),
    )
    .await
}

/// [`serve_on`] with the MCP server's settings.
pub(crate) async fn serve_with_mcp(
    listener: tokio::net::TcpListener,
    store_db: &TestDb,
    login: LoginArgs,
    mcp: canopy::config::McpArgs,
) -> Canopy {
    let user_data = TestDb::new(Backend::Sqlite).await;
    user_data
        .execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .await;
    let dir = TempDir(std::env::temp_dir().join(format!("canopy-login-{}", uuid::Uuid::new_v4())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let args = ServeArgs {
        database_url: Some(user_data.url.clone()),
        auth_secret: Some(AUTH_SECRET.to_owned()),
        env_secret: Some("0".repeat(64)),
        schema_path: Some(dir.0.join(".forestadmin-schema.json")),
        data_dir: Some(dir.0.join(".canopy")),
        state_url: Some(store_db.url.clone()),
        login,
        mcp,
        ..ServeArgs::default()
    };
    let (config, _) = Config::load(args).unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let ready = canopy::app::prepare(config).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(ready.serve(
        listener,
        async {
            let _ = stopped.await;
        },
        ServeOptions::default(),
    ));
    Canopy {
        base: format!("http://{addr}"),
        store: Store::open(&store_db.url, "canopy", "production")
            .await
            .unwrap(),
        _stop: stop,
        _user_data: user_data,
        _dir: dir,
    }
}

pub(crate) async fn listener() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// The project's users: `ada` (teams Sales then Ops, role Support, editor, a tag), `dis`
/// (disabled) and `lone` (no team), all with [`PASSWORD`].
pub(crate) async fn seed(store_db: &TestDb) -> Store {
    let store = Store::open(&store_db.url, "canopy", "production")
        .await
        .unwrap();
    store.create_role(&Actor::System, "Support").await.unwrap();
    store.create_team(&Actor::System, "Ops").await.unwrap();
    store.create_team(&Actor::System, "Sales").await.unwrap();
    let hash = password::hash(PASSWORD).unwrap();
    let user = |email: &str, teams: &[&str]| NewUser {
        email: email.to_owned(),
        first_name: "Ada".to_owned(),
        last_name: "Lovelace".to_owned(),
        permission_level: PermissionLevel::Editor,
        role: Some("Support".to_owned()),
        teams: teams.iter().map(|t| (*t).to_owned()).collect(),
        tags: BTreeMap::from([("region".to_owned(), "EU".to_owned())]),
        password_hash: Some(hash.clone()),
    };
    store
        .create_user(&Actor::System, user("ada@acme.test", &["Sales", "Ops"]))
        .await
        .unwrap();
    let dis = store
        .create_user(&Actor::System, user("dis@acme.test", &["Ops"]))
        .await
        .unwrap();
    store
        .update_user(
            &Actor::System,
            dis.id,
            UserChange {
                disabled: Some(true),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();
    store
        .create_user(&Actor::System, user("lone@acme.test", &[]))
        .await
        .unwrap();
    store
}

pub(crate) async fn started(backend: Backend, login: LoginArgs) -> (Canopy, TestDb) {
    let store_db = TestDb::new(backend).await;
    seed(&store_db).await;
    let canopy = serve_on(listener().await, &store_db, login).await;
    (canopy, store_db)
}

/// A browser: a cookie jar, following redirects.
pub(crate) fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(Policy::limited(10))
        .build()
        .unwrap()
}

/// A browser that stops at each redirect, to read its `Location`.
fn stepping_browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// `POST /forest/authentication {renderingId}`'s authorization URL.
pub(crate) async fn authorization_url(client: &reqwest::Client, base: &str) -> String {
    authorization_url_for(client, base, &json!({"renderingId": 42})).await
}

/// The authorization URL for this `POST /forest/authentication` body.
async fn authorization_url_for(client: &reqwest::Client, base: &str, body: &Json) -> String {
    let response = client
        .post(format!("{base}/forest/authentication"))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Json = response.json().await.unwrap();
    body["authorizationUrl"].as_str().unwrap().to_owned()
}

/// The first form of an HTML page: its absolute action and every named input with its value.
pub(crate) fn form(page: &str, page_url: &reqwest::Url) -> (reqwest::Url, Vec<(String, String)>) {
    let action = Regex::new(r#"<form[^>]*action="([^"]*)""#).unwrap();
    let action = action
        .captures(page)
        .unwrap_or_else(|| panic!("no form in {page}"))[1]
        .replace("&amp;", "&");
    let input = Regex::new(r"<input([^>]*)>").unwrap();
    let name = Regex::new(r#"name="([^"]*)""#).unwrap();
    let value = Regex::new(r#"value="([^"]*)""#).unwrap();
    let fields = input
        .captures_iter(page)
        .filter_map(|c| {
            let attributes = &c[1];
            let name = name.captures(attributes)?[1].to_owned();
            let value = value
                .captures(attributes)
                .map(|v| v[1].replace("&amp;", "&").replace("&quot;", "\""))
                .unwrap_or_default();
            Some((name, value))
        })
        .collect();
    (page_url.join(&action).unwrap(), fields)
}

/// Submits the sign-in page's form with this email and password.
async fn submit(
    client: &reqwest::Client,
    sign_in_url: &str,
    email: &str,
    secret: &str,
) -> reqwest::Response {
    let page = client.get(sign_in_url).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let url = page.url().clone();
    let (action, mut fields) = form(&page.text().await.unwrap(), &url);
    for (name, value) in &mut fields {
        match name.as_str() {
            "email" => *value = email.to_owned(),
            "password" => *value = secret.to_owned(),
            _ => {}
        }
    }
    client.post(action).form(&fields).send().await.unwrap()
}

/// Checks a callback answer: the token verifies with the auth secret and carries ada's claims,
/// with the rendering of her first team (Sales) in this environment.
pub(crate) async fn assert_token(body: &Json, store: &Store, email: &str, team: &str) -> Json {
    let token = body["token"].as_str().unwrap();
    let claims = SessionKey::new(AUTH_SECRET).verify(token).unwrap();
    let data = &body["tokenData"];
    assert_eq!(data, &serde_json::to_value(&claims).unwrap());
    let user = store.user_by_email(email).await.unwrap().unwrap();
    let team = store.team_by_name(team).await.unwrap().unwrap();
    let rendering_id = store.rendering_id(team.id).await.unwrap();
    assert_eq!(data["id"], user.id);
    assert_eq!(data["email"], email);
    assert_eq!(data["firstName"], json!(user.first_name));
    assert_eq!(data["lastName"], json!(user.last_name));
    assert_eq!(data["team"], json!(team.name));
    assert_eq!(data["teamId"], team.id);
    assert_eq!(data["role"], json!(user.role.as_ref().unwrap().name));
    assert_eq!(data["roleId"], user.role.as_ref().unwrap().id);
    assert_eq!(data["permissionLevel"], user.permission_level.as_str());
    assert_eq!(data["renderingId"], rendering_id);
    assert_eq!(data["tags"], json!(user.tags));
    let (iat, exp) = (data["iat"].as_u64().unwrap(), data["exp"].as_u64().unwrap());
    assert_eq!(exp - iat, 3600);
    data.clone()
}

async fn the_browser_flow_ends_with_a_session_token(backend: Backend) {
    let (canopy, _db) = started(backend, LoginArgs::default()).await;
    let browser = browser();
    let url = authorization_url(&browser, &canopy.base).await;
    assert!(
        url.starts_with(&format!(
            "{}/forest/authentication/sign-in?request=",
            canopy.base
        )),
        "{url}"
    );
    let page = browser.get(&url).send().await.unwrap();
    let headers = page.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(
        headers["set-cookie"]
            .to_str()
            .unwrap()
            .contains("HttpOnly; SameSite=Lax")
    );
    let response = submit(&browser, &url, "ada@acme.test", PASSWORD).await;
    // The browser followed the 303 to the default redirect target, this agent's callback.
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.url().path(), "/forest/authentication/callback");
    let state = response
        .url()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .into_owned();
    assert_eq!(state, r#"{"renderingId":42}"#);
    // No session cookie: as the agent, the application stores the token itself.
    assert!(response.headers().get("set-cookie").is_none());
    let body: Json = response.json().await.unwrap();
    assert_token(&body, &canopy.store, "ada@acme.test", "Sales").await;

    // The token opens the authenticated routes.
    let capabilities = browser
        .post(format!("{}/forest/_internal/capabilities", canopy.base))
        .bearer_auth(body["token"].as_str().unwrap())
        .json(&json!({"collectionNames": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(capabilities.status(), StatusCode::OK);

    // Without `renderingId` (the agent answers 400 there): the same sign-in, the same token,
    // since its rendering is the user's team's; the state carries no rendering.
    let browser = self::browser();
    let url = authorization_url_for(&browser, &canopy.base, &json!({})).await;
    let response = submit(&browser, &url, "ada@acme.test", PASSWORD).await;
    assert_eq!(response.status(), StatusCode::OK);
    let state = response
        .url()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .into_owned();
    assert_eq!(state, "{}");
    let body: Json = response.json().await.unwrap();
    assert_token(&body, &canopy.store, "ada@acme.test", "Sales").await;
}

#[tokio::test]
async fn login_builtin_browser_flow_sqlite() {
    the_browser_flow_ends_with_a_session_token(Backend::Sqlite).await;
}

#[tokio::test]
async fn login_builtin_browser_flow_postgres() {
    the_browser_flow_ends_with_a_session_token(Backend::Postgres).await;
}

/// Signs ada in with a browser that stops at the redirect: the one-time code and its state.
async fn code_for(canopy: &Canopy, email: &str) -> (String, String) {
    let client = stepping_browser();
    let url = authorization_url(&client, &canopy.base).await;
    let response = submit(&client, &url, email, PASSWORD).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let location = reqwest::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
    let param = |key: &str| {
        location
            .query_pairs()
            .find(|(k, _)| k == key)
            .unwrap()
            .1
            .into_owned()
    };
    (param("code"), param("state"))
}

async fn exchange(canopy: &Canopy, code: &str, state: &str) -> (StatusCode, Json) {
    let response = reqwest::Client::new()
        .get(format!("{}/forest/authentication/callback", canopy.base))
        .query(&[("code", code), ("state", state)])
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap())
}

fn invalid_grant() -> Json {
    json!({"error": "invalid_grant", "error_description": "grant request is invalid"})
}

async fn codes_are_single_use_short_lived_and_checked_against_the_user(backend: Backend) {
    let (canopy, _db) = started(backend, LoginArgs::default()).await;

    // Spent by its first exchange.
    let (code, state) = code_for(&canopy, "ada@acme.test").await;
    let (status, body) = exchange(&canopy, &code, &state).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        exchange(&canopy, &code, &state).await,
        (StatusCode::UNAUTHORIZED, invalid_grant())
    );

    // Only the hash is stored.
    let stored: Vec<String> = sqlx::query_scalar::<_, String>("SELECT code_hash FROM login_codes")
        .fetch_all(canopy.store.pool())
        .await
        .unwrap();
    assert!(!stored.is_empty());
    assert!(stored.iter().all(|hash| hash.len() == 64 && hash != &code));

    // A code presented with another state is refused, and spent.
    let (code, state) = code_for(&canopy, "ada@acme.test").await;
    assert_eq!(
        exchange(&canopy, &code, r#"{"renderingId":7}"#).await,
        (StatusCode::UNAUTHORIZED, invalid_grant())
    );
    assert_eq!(
        exchange(&canopy, &code, &state).await.0,
        StatusCode::UNAUTHORIZED
    );

    // Expired: its minute has passed.
    let (code, state) = code_for(&canopy, "ada@acme.test").await;
    sqlx::query("UPDATE login_codes SET expires_at = 0")
        .execute(canopy.store.pool())
        .await
        .unwrap();
    assert_eq!(
        exchange(&canopy, &code, &state).await,
        (StatusCode::UNAUTHORIZED, invalid_grant())
    );

    // Disabled between sign-in and exchange: the agent's 403 shape.
    let (code, state) = code_for(&canopy, "ada@acme.test").await;
    let ada = canopy
        .store
        .user_by_email("ada@acme.test")
        .await
        .unwrap()
        .unwrap();
    canopy
        .store
        .update_user(
            &Actor::System,
            ada.id,
            UserChange {
                disabled: Some(true),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();
    let (status, body) = exchange(&canopy, &code, &state).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"], 403);
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("disabled")
    );

    // A user in no team has no rendering to sign in to.
    let (code, state) = code_for(&canopy, "lone@acme.test").await;
    let (status, body) = exchange(&canopy, &code, &state).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("no team")
    );

    // Removed: the code goes with the user.
    let lone = canopy
        .store
        .user_by_email("lone@acme.test")
        .await
        .unwrap()
        .unwrap();
    let (code, state) = code_for(&canopy, "lone@acme.test").await;
    canopy
        .store
        .remove_user(&Actor::System, lone.id)
        .await
        .unwrap();
    assert_eq!(
        exchange(&canopy, &code, &state).await,
        (StatusCode::UNAUTHORIZED, invalid_grant())
    );
}

#[tokio::test]
async fn login_codes_sqlite() {
    codes_are_single_use_short_lived_and_checked_against_the_user(Backend::Sqlite).await;
}

#[tokio::test]
async fn login_codes_postgres() {
    codes_are_single_use_short_lived_and_checked_against_the_user(Backend::Postgres).await;
}

/// The page's text without the echoed email, to compare failures.
fn without_email(page: &str, email: &str) -> String {
    page.replace(email, "")
}

#[tokio::test]
async fn login_failures_share_one_generic_message() {
    let (canopy, _db) = started(Backend::Sqlite, LoginArgs::default()).await;
    let client = stepping_browser();
    let url = authorization_url(&client, &canopy.base).await;
    let mut pages = Vec::new();
    for (email, secret) in [
        ("ada@acme.test", "wrong password!"),
        ("nobody@acme.test", PASSWORD),
        ("dis@acme.test", PASSWORD),
    ] {
        let response = submit(&client, &url, email, secret).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{email}");
        assert!(response.headers().get("location").is_none());
        let page = response.text().await.unwrap();
        assert!(page.contains(GENERIC), "{page}");
        // The form comes back with the email typed, and a fresh CSRF token of the same cookie.
        assert!(page.contains(&format!("value=\"{email}\"")));
        pages.push(without_email(&page, email));
    }
    assert_eq!(
        pages[0], pages[1],
        "unknown email and wrong password look the same"
    );
    assert_eq!(
        pages[0], pages[2],
        "a disabled user looks like a wrong password"
    );
}

#[tokio::test]
async fn login_attempts_are_rate_limited_per_email_and_per_address() {
    let (canopy, _db) = started(Backend::Sqlite, LoginArgs::default()).await;
    let client = stepping_browser();
    let url = authorization_url(&client, &canopy.base).await;
    // Five attempts a minute on one email (the default), then 429 with Retry-After.
    for _ in 0..5 {
        let response = submit(&client, &url, "ada@acme.test", "not the password").await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
    let refused = submit(&client, &url, "ada@acme.test", PASSWORD).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("Too many sign-in attempts")
    );
    // The email case does not make another key.
    let refused = submit(&client, &url, "ADA@acme.test", PASSWORD).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    drop(canopy);

    // Per address: three a minute here, whatever the emails.
    let (canopy, _db) = started(
        Backend::Sqlite,
        LoginArgs {
            login_attempts_per_minute_per_ip: Some(3),
            ..LoginArgs::default()
        },
    )
    .await;
    let url = authorization_url(&client, &canopy.base).await;
    for email in ["a@acme.test", "b@acme.test", "c@acme.test"] {
        assert_eq!(
            submit(&client, &url, email, PASSWORD).await.status(),
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        submit(&client, &url, "ada@acme.test", PASSWORD)
            .await
            .status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn login_forms_posted_without_their_cookie_or_request_are_refused() {
    let (canopy, _db) = started(Backend::Sqlite, LoginArgs::default()).await;
    let client = stepping_browser();
    let url = authorization_url(&client, &canopy.base).await;
    let page = client.get(&url).send().await.unwrap();
    let page_url = page.url().clone();
    let (action, fields) = form(&page.text().await.unwrap(), &page_url);
    let filled = |fields: &[(String, String)]| -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(name, value)| match name.as_str() {
                "email" => (name.clone(), "ada@acme.test".to_owned()),
                "password" => (name.clone(), PASSWORD.to_owned()),
                _ => (name.clone(), value.clone()),
            })
            .collect()
    };
    // Another site posting the form: the browser sends no SameSite=Lax cookie with it.
    let cross_site = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let response = cross_site
        .post(action.clone())
        .form(&filled(&fields))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    // A forged login request.
    let mut forged = filled(&fields);
    for (name, value) in &mut forged {
        if name == "request" {
            value.replace_range(..1, if value.starts_with('e') { "f" } else { "e" });
        }
    }
    let response = client
        .post(action.clone())
        .form(&forged)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("expired"));
    // The genuine form still works.
    let response = client
        .post(action)
        .form(&filled(&fields))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn login_routes_answer_the_agents_errors() {
    let (canopy, _db) = started(Backend::Sqlite, LoginArgs::default()).await;
    let client = reqwest::Client::new();
    let base = &canopy.base;
    // NaN renderingId (an absent one is accepted: see the browser flow).
    for body in [json!({"renderingId": "abc"}), json!({"renderingId": {}})] {
        let response = client
            .post(format!("{base}/forest/authentication"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            response.json::<Json>().await.unwrap(),
            json!({"errors": [{"name": "ValidationError", "detail": "Rendering id must be a number", "status": 400}]})
        );
    }
    // A renderingId JavaScript reads as a number is accepted, as `Number()` does.
    let response = client
        .post(format!("{base}/forest/authentication"))
        .json(&json!({"renderingId": "12"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    let callback = |query: &'static [(&'static str, &'static str)]| {
        client
            .get(format!("{base}/forest/authentication/callback"))
            .query(query)
            .send()
    };
    let response = callback(&[("code", "x"), ("state", "not json")])
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        response.json::<Json>().await.unwrap()["errors"][0]["detail"],
        "Failed to retrieve renderingId from query[state]"
    );
    // The provider's error, as openid-client raises it: 401 with the state.
    let response = callback(&[
        ("error", "access_denied"),
        ("error_description", "End-User aborted interaction"),
        ("state", r#"{"renderingId":1}"#),
    ])
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.json::<Json>().await.unwrap(),
        json!({"error": "access_denied", "error_description": "End-User aborted interaction", "state": "{\"renderingId\":1}"})
    );
    let response = callback(&[("code", "unknown"), ("state", r#"{"renderingId":1}"#)])
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.json::<Json>().await.unwrap(), invalid_grant());

    // An expired or foreign sign-in link.
    let response = client
        .get(format!(
            "{base}/forest/authentication/sign-in?request=abc.def"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);

    // Logout clears the session cookie, without a token.
    let response = client
        .post(format!("{base}/forest/authentication/logout"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let cookie = response.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with("forest_session_token=;") && cookie.contains("Max-Age=0"),
        "{cookie}"
    );
}

#[tokio::test]
async fn login_redirects_to_the_configured_application_callback() {
    let (canopy, _db) = started(
        Backend::Sqlite,
        LoginArgs {
            login_redirect_url: Some("https://admin.acme.test/login/callback?tenant=1".into()),
            public_url: Some("https://canopy.acme.test".into()),
            ..LoginArgs::default()
        },
    )
    .await;
    let client = stepping_browser();
    let url = authorization_url(&client, &canopy.base).await;
    // The page is announced at the public URL; the test reaches it at its real address.
    let path = url
        .strip_prefix("https://canopy.acme.test")
        .unwrap_or_else(|| panic!("{url}"));
    let response = submit(
        &client,
        &format!("{}{path}", canopy.base),
        "ada@acme.test",
        PASSWORD,
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let location = reqwest::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(location.host_str(), Some("admin.acme.test"));
    assert_eq!(location.path(), "/login/callback");
    let pairs: Vec<(String, String)> = location.query_pairs().into_owned().collect();
    assert_eq!(pairs[0], ("tenant".into(), "1".into()));
    assert_eq!(pairs[2], ("state".into(), r#"{"renderingId":42}"#.into()));
    // The application exchanges the code at the agent's callback.
    let (status, body) = exchange(&canopy, &pairs[1].1, &pairs[2].1).await;
    assert_eq!(status, StatusCode::OK);
    assert_token(&body, &canopy.store, "ada@acme.test", "Sales").await;
}
