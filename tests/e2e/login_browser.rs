//! The built-in sign-in in a real browser: headless Chromium (Debian's `chromium`, driven by
//! `playwright-core` from tests/clients/login) opens the authorization URL, types the email and
//! password into Canopy's page and submits it; the redirects end on the agent's callback with the
//! session token. Proves what a scripted client cannot: the page works under its own
//! Content-Security-Policy, and the browser sends the SameSite CSRF cookie back with the form.
//! A missing browser fails the test (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use canopy::config::LoginArgs;
use canopy_e2e::Backend;
use serde_json::Value as Json;

use crate::login::{PASSWORD, assert_token, authorization_url, started};

#[tokio::test]
async fn login_builtin_in_headless_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        Path::new(&chromium).exists(),
        "headless Chromium is required at {chromium} (apt-get install chromium; .ci/run does)"
    );
    let clients = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/login");
    assert!(
        clients.join("node_modules/playwright-core").is_dir(),
        "playwright-core is not installed: run `npm ci` in {} (.ci/run does)",
        clients.display()
    );
    let (canopy, _db) = started(Backend::Sqlite, LoginArgs::default()).await;
    let url = authorization_url(&reqwest::Client::new(), &canopy.base).await;
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("browser.mjs")
            .args([url.as_str(), "ada@acme.test", PASSWORD])
            .current_dir(clients)
            .env("CHROMIUM", chromium)
            .output()
            .expect("node is required by the login tests")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "the browser failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let last: Json = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let url = reqwest::Url::parse(last["url"].as_str().unwrap()).unwrap();
    assert_eq!(url.path(), "/forest/authentication/callback", "{last}");
    assert_eq!(last["status"], 200, "{last}");
    let body: Json = serde_json::from_str(last["body"].as_str().unwrap()).unwrap();
    assert_token(&body, &canopy.store, "ada@acme.test", "Sales").await;
}
