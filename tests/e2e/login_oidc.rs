//! Sign-in through a real OpenID Connect provider: `oidc-provider` (npm, installed in
//! tests/clients/login by `npm ci`) started by the test with one client and known accounts. A
//! scripted browser (reqwest, cookie jar, following redirects) goes from
//! `POST /forest/authentication` through the provider's login and consent forms, back to
//! Canopy's OpenID callback, and ends on the agent's callback with `{token, tokenData}`. Users
//! are matched or created by email, teams and role mapped from the `groups` and `canopy_role`
//! claims, and the admin log names the identity provider. On a SQLite and a PostgreSQL store.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use canopy::config::LoginArgs;
use canopy::datasource::PermissionLevel;
use canopy::platform::{Actor, NewUser, Store};
use canopy_e2e::{Backend, TestDb};
use reqwest::StatusCode;
use serde_json::{Value as Json, json};

use crate::login::{
    assert_token, authorization_url, browser, form, listener, seed, serve_on, serve_with_mcp,
};

/// The provider's node process, killed when dropped.
struct Provider {
    issuer: String,
    child: Child,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/login")
}

/// Starts `provider.mjs` with its one client redirecting to `redirect_uri`.
fn start_provider(redirect_uri: &str, accounts: &Json) -> Provider {
    let dir = clients_dir();
    assert!(
        dir.join("node_modules/oidc-provider").is_dir(),
        "the OpenID provider of the login tests is not installed: run `npm ci` in {} (.ci/run does)",
        dir.display()
    );
    let mut child = Command::new("node")
        .arg("provider.mjs")
        .current_dir(&dir)
        .env("REDIRECT_URI", redirect_uri)
        .env("ACCOUNTS", accounts.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node is required by the login tests");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // Whatever the provider prints later is drained: a closed pipe would kill it (EPIPE).
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let issuer = line
        .trim()
        .strip_prefix("issuer ")
        .unwrap_or_else(|| panic!("the provider did not start: {line:?}"))
        .to_owned();
    Provider { issuer, child }
}

fn accounts() -> Json {
    json!({
        // New to Canopy: created, in Ops (the unknown group is ignored), with role Support.
        "alice": {
            "email": "alice@idp.test", "email_verified": true,
            "given_name": "Alice", "family_name": "Liddell",
            "groups": ["Nope", "Ops"], "canopy_role": "Support",
        },
        // Known to Canopy (team Sales, no role): matched by email, moved to Ops, given Support.
        "carol": {
            "email": "Carol@IdP.test", "email_verified": true, "name": "Carol Danvers",
            "groups": "Ops", "canopy_role": "Support",
        },
        // No group nor role claim: the default team.
        "dave": {"email": "dave@idp.test", "email_verified": true, "name": "Dave"},
        // Claims a Canopy user's email without the provider vouching for it.
        "mallory": {"email": "ada@acme.test", "email_verified": false},
        // A disabled Canopy user.
        "dis": {"email": "dis@acme.test", "email_verified": true},
    })
}

/// Signs `account` in with a fresh browser, submitting the provider's forms, and returns the
/// last answer (Canopy's callback) with its JSON body.
async fn sign_in(base: &str, issuer: &str, account: &str) -> (reqwest::Url, StatusCode, Json) {
    let client = browser();
    let url = authorization_url(&client, base).await;
    let authorize = reqwest::Url::parse(&url).unwrap();
    assert!(url.starts_with(&format!("{issuer}/auth?")), "{url}");
    let param = |key: &str| {
        authorize
            .query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(param("code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(param("response_type").as_deref(), Some("code"));
    assert!(param("nonce").is_some() && param("code_challenge").is_some());
    assert_eq!(
        param("redirect_uri"),
        Some(format!("{base}/forest/authentication/oidc/callback"))
    );
    // The provider's state is Canopy's signed login request, not the client's state.
    assert!(!param("state").unwrap().contains("renderingId"));

    let mut response = client.get(&url).send().await.unwrap();
    // The login form, then the consent form.
    for _ in 0..4 {
        if !response.url().as_str().starts_with(&format!("{issuer}/")) {
            break;
        }
        assert_eq!(response.status(), StatusCode::OK, "{}", response.url());
        let page_url = response.url().clone();
        let (action, mut fields) = form(&response.text().await.unwrap(), &page_url);
        for (name, value) in &mut fields {
            match name.as_str() {
                "login" => *value = account.to_owned(),
                "password" => *value = "the provider's own password".to_owned(),
                _ => {}
            }
        }
        response = client.post(action).form(&fields).send().await.unwrap();
    }
    let url = response.url().clone();
    let status = response.status();
    (url, status, response.json().await.unwrap())
}

fn logs_by_identity_provider(logs: &[canopy::platform::AdminLog], user_id: i64) -> Vec<String> {
    logs.iter()
        .filter(|l| l.target_ref.as_deref() == Some(&user_id.to_string()))
        .filter(|l| l.initiator == "identityProvider")
        .map(|l| l.r#type.clone())
        .collect()
}

async fn users_sign_in_through_the_provider(backend: Backend) {
    let store_db = TestDb::new(backend).await;
    let store: Store = seed(&store_db).await;
    store
        .create_user(
            &Actor::System,
            NewUser {
                email: "carol@idp.test".into(),
                first_name: "Carol".into(),
                permission_level: PermissionLevel::Editor,
                teams: vec!["Sales".into()],
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let listener = listener().await;
    let base = format!("http://{}", listener.local_addr().unwrap());
    let provider = start_provider(
        &format!("{base}/forest/authentication/oidc/callback"),
        &accounts(),
    );
    let canopy = serve_on(
        listener,
        &store_db,
        LoginArgs {
            oidc_issuer_url: Some(provider.issuer.clone()),
            oidc_client_id: Some("canopy".into()),
            oidc_client_secret: Some("canopy-secret".into()),
            oidc_team_claim: Some("groups".into()),
            oidc_role_claim: Some("canopy_role".into()),
            oidc_default_team: Some("Sales".into()),
            ..LoginArgs::default()
        },
    )
    .await;
    assert_eq!(canopy.base, base);
    let issuer = provider.issuer.as_str();

    // A new user, created from the claims.
    let (url, status, body) = sign_in(&base, issuer, "alice").await;
    assert_eq!(url.path(), "/forest/authentication/callback");
    assert_eq!(status, StatusCode::OK, "{body}");
    let data = assert_token(&body, &store, "alice@idp.test", "Ops").await;
    assert_eq!(data["firstName"], "Alice");
    assert_eq!(data["lastName"], "Liddell");
    assert_eq!(data["role"], "Support");
    assert_eq!(data["permissionLevel"], "user");
    let alice = store
        .user_by_email("alice@idp.test")
        .await
        .unwrap()
        .unwrap();
    assert!(!alice.has_password, "no password for a provider's user");
    let logs = store.admin_logs(100).await.unwrap();
    assert_eq!(logs_by_identity_provider(&logs, alice.id), ["add"]);

    // Again: matched, nothing to change, nothing logged.
    let (_, status, _) = sign_in(&base, issuer, "alice").await;
    assert_eq!(status, StatusCode::OK);
    let logs = store.admin_logs(100).await.unwrap();
    assert_eq!(logs_by_identity_provider(&logs, alice.id), ["add"]);

    // An existing user, matched by email whatever its case, teams and role mapped.
    let (_, status, body) = sign_in(&base, issuer, "carol").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let data = assert_token(&body, &store, "carol@idp.test", "Ops").await;
    assert_eq!(data["role"], "Support");
    assert_eq!(
        data["permissionLevel"], "editor",
        "the level stays Canopy's"
    );
    let carol = store
        .user_by_email("carol@idp.test")
        .await
        .unwrap()
        .unwrap();
    let teams: Vec<&str> = carol.teams.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(teams, ["Ops"]);
    let logs = store.admin_logs(100).await.unwrap();
    assert_eq!(logs_by_identity_provider(&logs, carol.id), ["update"]);

    // No mapped claims: the default team, no role.
    let (_, status, body) = sign_in(&base, issuer, "dave").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["tokenData"]["team"], "Sales");
    assert_eq!(body["tokenData"]["firstName"], "Dave");

    // An unverified email matches nobody: the agent's 401 with the client's state.
    let (_, status, body) = sign_in(&base, issuer, "mallory").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "access_denied");
    assert_eq!(body["state"], r#"{"renderingId":42}"#);
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("not verified"),
        "{body}"
    );

    // A disabled user: the agent's 403.
    let (_, status, body) = sign_in(&base, issuer, "dis").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"], 403);

    // The password page is off while a provider is configured.
    let response = reqwest::get(format!("{base}/forest/authentication/sign-in"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(response.text().await.unwrap().contains(issuer));
}

#[tokio::test]
async fn login_oidc_sqlite() {
    users_sign_in_through_the_provider(Backend::Sqlite).await;
}

#[tokio::test]
async fn login_oidc_postgres() {
    users_sign_in_through_the_provider(Backend::Postgres).await;
}

/// An MCP client's authorization with an OpenID provider configured: Canopy's consent page sends
/// the user to the provider, whose callback comes back to the MCP server, which gives the client
/// its code; the token then works at `/mcp`.
#[tokio::test]
async fn an_mcp_client_signs_in_through_the_provider() {
    let store_db = TestDb::new(Backend::Sqlite).await;
    let _store: Store = seed(&store_db).await;
    let listener = listener().await;
    let base = format!("http://{}", listener.local_addr().unwrap());
    let provider = start_provider(
        &format!("{base}/forest/authentication/oidc/callback"),
        &accounts(),
    );
    let _canopy = serve_with_mcp(
        listener,
        &store_db,
        LoginArgs {
            oidc_issuer_url: Some(provider.issuer.clone()),
            oidc_client_id: Some("canopy".into()),
            oidc_client_secret: Some("canopy-secret".into()),
            oidc_team_claim: Some("groups".into()),
            oidc_role_claim: Some("canopy_role".into()),
            oidc_default_team: Some("Sales".into()),
            ..LoginArgs::default()
        },
        canopy::config::McpArgs {
            mcp: Some(true),
            ..canopy::config::McpArgs::default()
        },
    )
    .await;
    let issuer = provider.issuer.as_str();
    // A browser that stops at the MCP client's redirect (nothing listens there).
    let http = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            if attempt.url().port() == Some(9) {
                attempt.stop()
            } else if attempt.previous().len() > 10 {
                attempt.error("too many redirects")
            } else {
                attempt.follow()
            }
        }))
        .build()
        .unwrap();
    let (mut flow, registered) =
        crate::mcp::Flow::register_with(http.clone(), &base, "", "http://127.0.0.1:9/callback")
            .await;
    let registered: Json = registered.json().await.unwrap();
    flow.client_id = registered["client_id"].as_str().unwrap().to_owned();
    let (verifier, challenge) = crate::mcp::pkce();
    let page = flow.authorize_page(&challenge, &[]).await;
    let page_url = page.url().clone();
    let page = page.text().await.unwrap();
    assert!(page.contains(issuer), "the page names the provider: {page}");
    assert!(
        !page.contains("type=\"password\""),
        "no password field: {page}"
    );
    let (action, mut fields) = form(&page, &page_url);
    fields.push(("decision".into(), "allow".into()));
    let mut response = http.post(action).form(&fields).send().await.unwrap();
    for _ in 0..4 {
        if !response.url().as_str().starts_with(&format!("{issuer}/")) {
            break;
        }
        let page_url = response.url().clone();
        let (action, mut fields) = form(&response.text().await.unwrap(), &page_url);
        for (name, value) in &mut fields {
            match name.as_str() {
                "login" => *value = "alice".to_owned(),
                "password" => *value = "the provider's own password".to_owned(),
                _ => {}
            }
        }
        response = http.post(action).form(&fields).send().await.unwrap();
    }
    assert_eq!(response.status(), StatusCode::FOUND, "{}", response.url());
    let location = reqwest::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
    assert!(
        location.as_str().starts_with(&flow.redirect_uri),
        "{location}"
    );
    let param = |key: &str| {
        location
            .query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(param("state").as_deref(), Some("st4te"));
    assert_eq!(param("iss").as_deref(), Some(base.as_str()));
    let tokens: Json = flow
        .exchange(&param("code").unwrap(), &verifier)
        .await
        .json()
        .await
        .unwrap();
    let listed = flow
        .rpc(
            tokens["access_token"].as_str().unwrap(),
            "tools/list",
            json!({}),
        )
        .await;
    assert_eq!(listed.status(), StatusCode::OK);
}
