//! `canopy workflows …` through the real binary: definition files applied (checked against the
//! schema file, a version only when they changed), listed, shown, versions, turned off and on;
//! and beside a running `canopy serve --workflows-dir`: the folder loaded at start, reloaded by
//! `canopy reload` (a bad file refused with its name, the previous definitions kept), and the
//! folder's workflows refusing the CLI's changes. Mistakes are one sentence and exit 1; every
//! subcommand has help.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value as Json;

mod support;
use support::{Server, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const AUTH_SECRET: &str = "workflows-cli-test-auth-secret";
const ENV_SECRET: &str = "3333333333333333333333333333333333333333333333333333333333333333";

/// Runs a command in `dir` on the store in `dir/state`: exit code, stdout, stderr.
fn cli(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("CANOPY_STATE_URL")
        .env_remove("CANOPY_DATA_DIR")
        .env_remove("CANOPY_CONFIG")
        .env("CANOPY_DATA_DIR", dir.join("state"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let result = cli(dir, args);
    assert_eq!(result.0, Some(0), "{args:?}: {result:?}");
    result.1
}

/// The error of a command that must fail: exit 1, one `Error: …` on stderr.
fn fails(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = cli(dir, args);
    assert_eq!(code, Some(1), "{args:?}: {out} {err}");
    assert!(err.starts_with("Error: "), "{args:?}: {err}");
    err
}

/// A schema file as `canopy schema` writes it, reduced to what the checks read.
const SCHEMA: &str = r#"{"collections": [
  {"name": "books", "fields": [
    {"field": "id", "isReadOnly": false},
    {"field": "title", "isReadOnly": false},
    {"field": "createdAt", "isReadOnly": true}
  ], "actions": [{"name": "Archive"}]}
], "meta": {}}"#;

const REVIEW: &str = r#"
collection = "books"

[[steps]]
key = "read"
type = "get-data"
fields = ["title"]

[[steps]]
key = "archive"
type = "trigger-action"
action = "Archive"

[[steps]]
key = "done"
type = "end"
"#;

#[test]
fn definition_files_are_applied_listed_shown_and_switched() {
    let dir = TempDir::new("workflows");
    // The store first, as a user starts: the other commands refuse a store that does not exist.
    ok(&dir.0, &["init"]);
    std::fs::write(dir.0.join(".forestadmin-schema.json"), SCHEMA).unwrap();
    std::fs::write(dir.0.join("review.toml"), REVIEW).unwrap();

    let said = ok(&dir.0, &["workflows", "apply", "review.toml"]);
    assert!(
        said.starts_with("Created workflow \"review\" on books (version 1, active), id "),
        "{said}"
    );
    let said = ok(&dir.0, &["workflows", "apply", "review.toml"]);
    assert_eq!(said.trim(), "Workflow \"review\" is unchanged (version 1).");
    std::fs::write(
        dir.0.join("review.toml"),
        format!("description = \"Archive old books\"\n{REVIEW}"),
    )
    .unwrap();
    let said = ok(&dir.0, &["workflows", "apply", "review.toml"]);
    assert_eq!(said.trim(), "Saved version 2 of workflow \"review\".");

    // The same definition as YAML, under another name.
    std::fs::write(
        dir.0.join("again.yaml"),
        "collection: books\nsteps:\n  - {key: read, type: get-data, fields: [title]}\n",
    )
    .unwrap();
    ok(&dir.0, &["workflows", "apply", "again.yaml"]);

    let table = ok(&dir.0, &["workflows", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{table}");
    assert!(lines[1].starts_with("again"), "{table}");
    assert!(lines[2].starts_with("review"), "{table}");
    assert!(
        lines[2].contains("books") && lines[2].contains("yes"),
        "{table}"
    );
    let listed: Json = serde_json::from_str(&ok(&dir.0, &["workflows", "list", "--json"])).unwrap();
    assert_eq!(listed[1]["name"], "review");
    assert_eq!(listed[1]["latestVersion"], 2);
    assert_eq!(listed[1]["source"], "api");

    let shown = ok(&dir.0, &["workflows", "show", "review"]);
    assert!(
        shown.starts_with("Workflow \"review\" on books\n"),
        "{shown}"
    );
    assert!(shown.contains("version:     2 of 2"), "{shown}");
    assert!(shown.contains("\"action\": \"Archive\""), "{shown}");
    let first: Json = serde_json::from_str(&ok(
        &dir.0,
        &["workflows", "show", "review", "--version", "1", "--json"],
    ))
    .unwrap();
    assert_eq!(first["version"]["version"], 1);
    assert_eq!(first["definition"]["description"], Json::Null);
    assert_eq!(first["definition"]["steps"][1]["action"], "Archive");
    let id = first["id"].as_str().unwrap().to_owned();
    // By id too.
    ok(&dir.0, &["workflows", "show", &id]);

    let versions = ok(&dir.0, &["workflows", "versions", "review"]);
    let rows: Vec<&str> = versions.lines().collect();
    assert_eq!(rows.len(), 3, "{versions}");
    assert!(
        rows[1].starts_with('2') && rows[2].starts_with('1'),
        "{versions}"
    );

    let said = ok(&dir.0, &["workflows", "deactivate", "review"]);
    assert_eq!(said.trim(), "Workflow \"review\" is now inactive.");
    let said = ok(&dir.0, &["workflows", "deactivate", "review"]);
    assert_eq!(said.trim(), "Workflow \"review\" was already inactive.");
    let after: Json =
        serde_json::from_str(&ok(&dir.0, &["workflows", "activate", "review", "--json"])).unwrap();
    assert_eq!(after["active"], true);
    assert_eq!(after["latestVersion"], 2);

    // --check saves nothing.
    std::fs::write(dir.0.join("checked.toml"), REVIEW).unwrap();
    let said = ok(&dir.0, &["workflows", "apply", "--check", "checked.toml"]);
    assert_eq!(said.trim(), "checked.toml: workflow \"checked\" is valid.");
    let listed: Json = serde_json::from_str(&ok(&dir.0, &["workflows", "list", "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
}

#[test]
fn cli_mistakes_are_one_sentence_and_every_subcommand_has_help() {
    let dir = TempDir::new("workflows");
    // Before `canopy init`, there is no store to read, and the command says how to make one.
    let error = fails(&dir.0, &["workflows", "list"]);
    assert!(
        error.contains("no Canopy store at") && error.contains("`canopy init` creates one"),
        "{error}"
    );
    assert!(
        !dir.0.join("state").exists(),
        "a refused command made a store"
    );
    ok(&dir.0, &["init"]);
    std::fs::write(dir.0.join(".forestadmin-schema.json"), SCHEMA).unwrap();
    std::fs::write(
        dir.0.join("bad.toml"),
        "collection = \"books\"\n[[steps]]\nkey = \"check\"\ntype = \"decision\"\n\
         options = [{ name = \"a\", next = \"dne\" }]\n[[steps]]\nkey = \"w\"\n\
         type = \"update-data\"\nvalues = { createdAt = 1 }\n",
    )
    .unwrap();
    std::fs::write(dir.0.join("broken.yaml"), "collection: books\nsteps: [\n").unwrap();
    std::fs::write(dir.0.join("notes.txt"), "hello").unwrap();
    let error = fails(&dir.0, &["workflows", "apply", "bad.toml"]);
    assert_eq!(
        error.trim(),
        "Error: bad.toml: step \"check\": options[0].next: no step \"dne\"\n\
         bad.toml: step \"w\": values.createdAt: books.createdAt is read-only"
    );
    let error = fails(&dir.0, &["workflows", "apply", "broken.yaml"]);
    assert!(error.starts_with("Error: broken.yaml: line "), "{error}");
    let error = fails(&dir.0, &["workflows", "apply", "notes.txt"]);
    assert!(error.contains("not a definition file"), "{error}");
    let error = fails(&dir.0, &["workflows", "apply", "missing.toml"]);
    assert!(error.contains("missing.toml: cannot read it"), "{error}");
    let error = fails(&dir.0, &["workflows", "show", "ghost"]);
    assert_eq!(
        error.trim(),
        "Error: no workflow \"ghost\" (see `canopy workflows list`)"
    );
    std::fs::write(dir.0.join("review.toml"), REVIEW).unwrap();
    ok(&dir.0, &["workflows", "apply", "review.toml"]);
    let error = fails(&dir.0, &["workflows", "show", "review", "--version", "9"]);
    assert!(
        error.contains("has no version 9 (it has 1 to 1)"),
        "{error}"
    );
    assert_eq!(ok(&dir.0, &["workflows", "list"]).lines().count(), 2);

    // Without a schema file, names are not checked, and it says so.
    std::fs::remove_file(dir.0.join(".forestadmin-schema.json")).unwrap();
    std::fs::write(
        dir.0.join("loose.toml"),
        "collection = \"anything\"\n[[steps]]\nkey = \"read\"\ntype = \"get-data\"\nfields = [\"x\"]\n",
    )
    .unwrap();
    let (code, _, err) = cli(&dir.0, &["workflows", "apply", "loose.toml"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("are not checked"), "{err}");

    for sub in [
        &["workflows", "--help"][..],
        &["workflows", "list", "--help"],
        &["workflows", "show", "--help"],
        &["workflows", "apply", "--help"],
        &["workflows", "versions", "--help"],
        &["workflows", "activate", "--help"],
        &["workflows", "deactivate", "--help"],
    ] {
        let help = ok(&dir.0, sub);
        assert!(help.contains("Usage: canopy workflows"), "{sub:?}: {help}");
    }
}

/// `canopy serve --workflows-dir`, its folder changed and reloaded with `canopy reload`.
#[tokio::test]
async fn the_served_folder_reloads_and_refuses_cli_changes() {
    let dir = TempDir::new("workflows");
    let folder = dir.0.join("workflows");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("review.toml"),
        REVIEW.replace("Archive", "Nope"),
    )
    .unwrap();
    let data = dir.0.join("books.sqlite");
    let url = format!("sqlite:{}?mode=rwc", data.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let serve = |dir: &Path| {
        Command::new(BIN)
            .args(["serve", "--database-url", &url])
            .args(["--auth-secret", AUTH_SECRET, "--env-secret", ENV_SECRET])
            .args(["--listen", "127.0.0.1:0", "--log-level", "warn"])
            .args(["--workflows-dir", "workflows"])
            .current_dir(dir)
            .env_remove("CANOPY_STATE_URL")
            .env("CANOPY_DATA_DIR", dir.join("state"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // A bad file: the start stops, saying which file, step and field.
    let out = serve(&dir.0).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("workflows/review.toml: step \"archive\": action: no action \"Nope\" on \"books\" (it has none)"),
        "{err}"
    );

    // Books have no action: a good folder.
    std::fs::write(
        folder.join("review.toml"),
        "collection = \"books\"\n[[steps]]\nkey = \"read\"\ntype = \"get-data\"\nfields = [\"title\"]\n",
    )
    .unwrap();
    let mut server = Server(serve(&dir.0));
    let address = support::serving_address(&mut server.0)
        .unwrap_or_else(|line| panic!("unexpected first line: {line:?}"));
    let listed: Json = serde_json::from_str(&ok(&dir.0, &["workflows", "list", "--json"])).unwrap();
    assert_eq!(listed[0]["name"], "review");
    assert_eq!(listed[0]["source"], "file");
    assert_eq!(listed[0]["sourceFile"], "workflows/review.toml");

    // The folder's workflows are the folder's.
    let error = fails(&dir.0, &["workflows", "deactivate", "review"]);
    assert!(
        error.contains("is defined by workflows/review.toml"),
        "{error}"
    );
    std::fs::write(
        dir.0.join("review.toml"),
        "collection = \"books\"\n[[steps]]\nkey = \"e\"\ntype = \"end\"\n",
    )
    .unwrap();
    let error = fails(&dir.0, &["workflows", "apply", "review.toml"]);
    assert!(
        error.contains("is defined by workflows/review.toml"),
        "{error}"
    );

    // A change, reloaded: version 2. A bad file, reloaded: refused, version 2 stays.
    std::fs::write(
        folder.join("review.toml"),
        "collection = \"books\"\ndescription = \"v2\"\n[[steps]]\nkey = \"read\"\n\
         type = \"get-data\"\nfields = [\"title\"]\n",
    )
    .unwrap();
    let reload = |dir: &Path| {
        cli(
            dir,
            &["reload", "--listen", &address, "--env-secret", ENV_SECRET],
        )
    };
    let (code, out, err) = reload(&dir.0);
    assert_eq!(code, Some(0), "{out} {err}");
    let shown: Json =
        serde_json::from_str(&ok(&dir.0, &["workflows", "show", "review", "--json"])).unwrap();
    assert_eq!(shown["latestVersion"], 2);
    std::fs::write(folder.join("other.yaml"), "collection: books\nsteps: []\n").unwrap();
    let (code, _, err) = reload(&dir.0);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("workflows/other.yaml: steps: a workflow needs at least one step"),
        "{err}"
    );
    let listed: Json = serde_json::from_str(&ok(&dir.0, &["workflows", "list", "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["latestVersion"], 2);
}
