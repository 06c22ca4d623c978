//! The console in a real browser: `canopy demo` (the real binary, the shop data, its three
//! logins) driven by headless Chromium (Debian's `chromium`, through `playwright-core` from
//! tests/clients/console) running `browser.mjs`: sign-in with a wrong password first, a search, a table
//! with a filter, a sort and a segment, a record with its relation tabs, an edit refused twice
//! (a type error, the datasource's validation) then saved, a create refused (empty, duplicate,
//! the shop's hook) then made, a delete and a bulk delete after their confirmation, a CSV export
//! of the filtered table,
//! CSRF-less, wrong-token, `text/plain` and cross-site posts refused without effect, a phone-width
//! screen, and the editor who sees only their collections and buttons and cannot reach an order
//! outside their scope by URL. axe-core runs on every main page (no serious or critical
//! violation). The screenshots it takes are the README's (`docs/screenshots`).
//!
//! A missing browser or client fails the test (`.ci/run` installs both), never skips it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

mod support;
use support::{TempDir, free_port, start_demo};

#[test]
fn console_in_headless_chromium_on_the_demo() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        Path::new(&chromium).exists(),
        "headless Chromium is required at {chromium} (apt-get install chromium; .ci/run does)"
    );
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let clients = root.join("tests/clients/console");
    for package in ["playwright-core", "axe-core"] {
        assert!(
            clients.join("node_modules").join(package).is_dir(),
            "{package} is not installed: run `npm ci` in {} (.ci/run does)",
            clients.display()
        );
    }
    let dir = TempDir::new("console-browser");
    let port = free_port();
    let (_server, printed) = start_demo(&dir.0, port, &[]);
    let origin = format!("http://127.0.0.1:{port}");
    // The demo says where the console is and who may sign in.
    assert!(
        printed.contains(&format!(
            "Open the console at {origin}/console and sign in as:"
        )),
        "{printed}"
    );
    for login in [
        "admin@canopy.local     canopy-demo-admin",
        "editor@canopy.local    canopy-demo-editor",
        "viewer@canopy.local    canopy-demo-viewer",
    ] {
        assert!(printed.contains(login), "{login} in:\n{printed}");
    }
    let shots = root.join("docs/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let output = Command::new("node")
        .arg("browser.mjs")
        .args([origin.as_str(), shots.to_str().unwrap()])
        .current_dir(&clients)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("node is required by the console test");
    assert!(
        output.status.success(),
        "the browser failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let seen: Json = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    for page in [
        "sign-in",
        "home",
        "table",
        "record",
        "edit-error",
        "create",
        "delete",
        "bulk-delete",
        "record-phone",
        "editor-table",
    ] {
        assert!(seen["axe"].get(page).is_some(), "axe ran on {page}: {seen}");
    }
    for name in [
        "console-sign-in",
        "console-home",
        "console-table",
        "console-record",
        "console-edit-error",
        "console-phone",
    ] {
        let file = shots.join(format!("{name}.png"));
        let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        assert!(bytes > 1000, "{} was written", file.display());
    }
}
