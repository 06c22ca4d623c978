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

/// A console browser script (`tests/clients/console/<script>`) run by `node` against a fresh
/// `canopy demo`: what the demo printed and what the script saw (its last stdout line). The
/// script's screenshots go to `docs/screenshots`.
struct Run {
    printed: String,
    origin: String,
    seen: Json,
    shots: PathBuf,
}

fn run_script(script: &str) -> Run {
    run_script_with(script, &[])
}

/// [`run_script`] against a demo started with `demo_args` too.
fn run_script_with(script: &str, demo_args: &[&str]) -> Run {
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
    let dir = TempDir::new(&format!("console-{}", script.trim_end_matches(".mjs")));
    let port = free_port();
    let (_server, printed) = start_demo(&dir.0, port, demo_args);
    let origin = format!("http://127.0.0.1:{port}");
    let shots = root.join("docs/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let output = Command::new("node")
        .arg(script)
        .args([origin.as_str(), shots.to_str().unwrap()])
        .current_dir(&clients)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("node is required by the console test");
    assert!(
        output.status.success(),
        "{script} failed in the browser:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let seen: Json = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    Run {
        printed,
        origin,
        seen,
        shots,
    }
}

impl Run {
    /// axe-core ran on each of `pages` (the script fails on a serious or critical violation).
    fn audited(&self, pages: &[&str]) {
        for page in pages {
            assert!(
                self.seen["axe"].get(page).is_some(),
                "axe ran on {page}: {}",
                self.seen
            );
        }
    }

    /// Each of the screenshots `names` was written.
    fn photographed(&self, names: &[&str]) {
        for name in names {
            let file = self.shots.join(format!("{name}.png"));
            let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            assert!(bytes > 1000, "{} was written", file.display());
        }
    }
}

#[test]
fn console_in_headless_chromium_on_the_demo() {
    let run = run_script("browser.mjs");
    let (printed, origin) = (&run.printed, &run.origin);
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
    run.audited(&[
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
    ]);
    run.photographed(&[
        "console-sign-in",
        "console-home",
        "console-table",
        "console-record",
        "console-edit-error",
        "console-phone",
    ]);
}

/// Actions and approvals (`actions.mjs`): a dynamic form whose reason field appears as the amount
/// is typed, a bulk action on selected rows, an action's error with the form kept, a file
/// download, a file field, an approval filed by the editor and approved by the admin from the
/// inbox (its sidebar badge), and the viewer without buttons and refused by URL; a form of two
/// pages (Next checks the page, Back keeps the values, the server checks them all); a webhook
/// result called by the browser (a local listener records the call, the page's CSP names that
/// origin only, a CORS refusal explained).
#[test]
fn console_actions_in_chromium() {
    let run = run_script("actions.mjs");
    assert!(
        run.seen["coupon"]
            .as_str()
            .is_some_and(|c| c.starts_with("Coupon of 75 (Percent) sent to ")),
        "{}",
        run.seen
    );
    run.audited(&[
        "action-form",
        "action-result",
        "action-form-error",
        "action-error",
        "approval-request",
        "inbox",
        "approval-decided",
        "action-pages",
        "action-webhook",
    ]);
    assert!(
        run.seen["shipped"].as_str().is_some_and(
            |s| s.ends_with("shipped by Courier (TRK-43); the customer is told: On its way")
        ),
        "{}",
        run.seen
    );
    run.photographed(&[
        "console-action-form",
        "console-inbox",
        "console-action-pages",
        "console-action-webhook",
    ]);
}

/// Dashboards (`charts.mjs`): the demo opens on the home dashboard, one chart of every kind
/// drawn as SVG with the seed's figures and the wire's (`POST /forest/stats/{c}`), a
/// collection's dashboard from its table, a plugin chart on a record, a plugin chart that fails
/// (its message in its place, the rest of the page drawn), another timezone's weeks, the
/// viewer's fewer charts and the editor's scoped figures.
#[test]
fn console_charts_in_chromium() {
    let run = run_script("charts.mjs");
    let home = run.seen["home"].as_array().unwrap();
    assert_eq!(home.len(), 8, "{home:?}");
    assert_eq!(
        run.seen["viewer"].as_array().unwrap().len(),
        3,
        "{}",
        run.seen
    );
    run.audited(&[
        "dashboard",
        "collection-dashboard",
        "record-chart",
        "record-chart-failed",
        "viewer-dashboard",
    ]);
    assert!(
        run.seen["failedChart"]
            .as_str()
            .is_some_and(|m| m.contains("This order is cancelled")),
        "{}",
        run.seen
    );
    run.photographed(&["console-dashboard", "console-collection-dashboard"]);
}

/// Collaboration on a record (`collab.mjs`): a note refused without a message then added,
/// replied to and archived (the viewer sees it without an archive button); an order edited
/// through the console and the change in History with its value before and after; the Activity
/// tab; the review workflow started on the order, its manual step refused empty then completed,
/// its manual update's form (a bad total refused next to its field, nothing written; then the
/// total written), the runs list agreeing with the run's picture, and the run's steps drawn
/// done. axe-core on the record page with each tab.
#[test]
fn console_collaboration_in_chromium() {
    let run = run_script("collab.mjs");
    run.audited(&[
        "collab-notes-empty",
        "collab-notes",
        "collab-history",
        "collab-activity",
        "collab-runs-empty",
        "collab-run-waiting",
        "collab-step-form",
        "collab-run",
        "collab-phone",
    ]);
    run.photographed(&[
        "console-notes",
        "console-history",
        "console-run",
        "console-step-form",
    ]);
}

#[test]
fn console_administration_in_chromium() {
    // Both no-code switches on, for the "No-code actions" page.
    let run = run_script_with(
        "admin.mjs",
        &[
            "--experimental-webhook-custom-actions",
            "--experimental-update-record-custom-actions",
        ],
    );
    run.audited(&[
        "admin-tokens",
        "admin-token-errors",
        "admin-token-created",
        "admin-token-revoke",
        "admin-users",
        "admin-user",
        "admin-user-error",
        "admin-permissions",
        "admin-permissions-user",
        "admin-groups",
        "admin-groups-error",
        "admin-action-rights",
        "admin-action-rights-error",
        "admin-user-new",
        "admin-user-new-errors",
        "admin-scope",
        "admin-user-remove",
        "admin-charts",
        "admin-charts-errors",
        "admin-phone-charts",
        "admin-no-code",
        "admin-no-code-error",
        "admin-phone-no-code",
        "admin-phone-tokens",
        "admin-phone-users",
        "admin-phone-user-new",
        "admin-phone-groups",
        "admin-phone-permissions",
        "admin-phone-action-rights",
        "admin-phone-scope",
        "admin-phone-workflows",
        "admin-phone-plugins",
        "admin-phone-logs",
        "admin-workflows",
        "admin-plugins",
        "admin-logs",
        "admin-logs-filtered",
        "admin-forbidden",
        "my-tokens",
    ]);
    run.photographed(&[
        "console-admin-tokens",
        "console-admin-users",
        "console-admin-permissions",
        "console-admin-groups",
        "console-admin-action-rights",
        "console-admin-scope",
        "console-admin-chart",
        "console-admin-phone-scope",
        "console-admin-phone-users",
        "console-admin-phone-permissions",
    ]);
}

/// The data pages' gaps (`data.mjs`): a tag linked to a product from its relation tab (found by
/// the tags' own search) and removed after a confirmation; a missing id, a non-id, an empty
/// choice and an order outside the editor's scope refused with a message and no change; no
/// "Remove" where the foreign key may not be empty, no "Delete" without the delete right; a
/// composite-key order item edited (its keys read-only) and deleted; a nested OR-in-AND filter
/// built partly from the keyboard, its address (`filters=<tree>`) shared with another user; and
/// "Select all N matching records" deleting every matching record but the unchecked one.
#[test]
fn console_data_gaps_in_chromium() {
    let run = run_script("data.mjs");
    assert_eq!(run.seen["associated"], 2, "{}", run.seen);
    assert_eq!(run.seen["dissociated"], 1, "{}", run.seen);
    assert!(
        run.seen["composite"]
            .as_str()
            .is_some_and(|id| id.contains("%7C")),
        "{}",
        run.seen
    );
    let deleted = run.seen["selectAll"]["deleted"].as_u64().unwrap();
    assert_eq!(
        deleted + 1,
        run.seen["selectAll"]["matching"].as_u64().unwrap()
    );
    run.audited(&[
        "relation-add",
        "relation-error",
        "relation-remove-confirm",
        "nested-filter",
        "select-all-confirm",
        "editor-relation",
    ]);
    run.photographed(&["console-relation-add", "console-nested-filter"]);
}
