//! The testing kit in each language, as a plugin author runs it: a plugin made by `canopy plugin
//! new`, given two charts, built, and tested by its own test suite through `canopy test-server`:
//! `cargo test` with `canopy-testing` (sdk/rust-testing) and `node --test` with
//! `@canopy/testing` (sdk/js-testing) on a Rust plugin, pytest with `canopy_sdk.testing` on a
//! Python one. The suites are in `host/tests/testing_kit/`; each checks a computed field, a
//! filtered count, an action's form and result, a collection chart and a datasource chart, a
//! create read back, and a delete the user's rights refuse.
//!
//! Builds are shared where the repository already shares them: the Rust plugin's dependencies
//! in `target/plugin-scaffold-test` (host/tests/binary.rs's), the Python component under
//! `target/python-plugins` by the sha256 of its sources, through the e2e tests' own cache
//! (tests/e2e/component_cache.rs, included from there: this file is in another package).

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

#[allow(
    dead_code,
    reason = "the e2e tests' cache: this file builds one component only"
)]
#[path = "../../tests/e2e/component_cache.rs"]
mod component_cache;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use canopy_testing::serde_json::{self, json};
use component_cache::root;
use support::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

/// The kit's test suites, copied into the scaffolded plugins.
fn suite(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testing_kit")
        .join(name)
}

/// `canopy ARGS`, without the `CANOPY_*` and `SERVICE_*` settings of the environment (as the
/// kit's clients start it): the test gives every setting.
fn canopy(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CANOPY_") || name.starts_with("SERVICE_") {
            command.env_remove(&*name);
        }
    }
    command
}

/// Runs `command`, panicking with its output when it fails.
fn run(what: &str, command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `canopy plugin new NAME` (with `extra` arguments) into `dir/NAME`.
fn scaffold(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let plugin = dir.join(name);
    run(
        "canopy plugin new",
        canopy(&["plugin", "new", name, "--dir"])
            .arg(&plugin)
            .args(extra),
    );
    plugin
}

/// Replaces the one `from` of the file at `path` by `to`.
fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        text.matches(from).count(),
        1,
        "{}: {from:?}",
        path.display()
    );
    std::fs::write(path, text.replace(from, to)).unwrap();
}

/// `cargo ARGS` in the plugin crate `dir`, with the shared target directory, and without the
/// outer test build's settings (meant for the workspace, not for the plugin): offline first
/// (the registry cache holds the pinned dependencies), then online.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let target = root().join("target/plugin-scaffold-test");
    let mut last = None;
    for offline in [true, false] {
        let mut command = Command::new(&cargo);
        command
            .current_dir(dir)
            .args(args)
            .env("CARGO_TARGET_DIR", &target)
            .env("CANOPY_BIN", BIN);
        if offline {
            command.arg("--offline");
        }
        for var in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_BUILD_TARGET",
            "RUSTC_WORKSPACE_WRAPPER",
            "CLIPPY_ARGS",
        ] {
            command.env_remove(var);
        }
        let output = command.output().unwrap();
        if output.status.success() {
            return output;
        }
        last = Some(output);
    }
    let output = last.unwrap();
    panic!(
        "cargo {args:?} in {} failed:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A Rust plugin tested by its own `cargo test` with the Rust client, then by `node --test` with
/// the JavaScript client, both through `canopy test-server`.
#[test]
fn a_scaffolded_rust_plugin_passes_its_kit_tests_in_rust_and_javascript() {
    let dir = TempDir::new("kit");
    let plugin = scaffold(&dir.0, "kit-rust", &[]);
    // What an author adds: a collection chart and a datasource chart, and the kit as a
    // dev-dependency.
    let lib = plugin.join("src/lib.rs");
    edit(
        &lib,
        "            );\n        });\n",
        "            );\n            c.add_chart(\"Seven\", |_ctx| Ok(ChartResult::value(7.0, None)));\n        });\n",
    );
    edit(
        &lib,
        "        });\n        Ok(())\n",
        "        });\n        ds.add_chart(\"Greetings\", |_ctx| Ok(ChartResult::value(42.0, None)));\n        Ok(())\n",
    );
    let manifest = plugin.join("Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str(&format!(
        "\n[dev-dependencies]\ncanopy-testing = {{ path = {:?} }}\n",
        root().join("sdk/rust-testing").display().to_string()
    ));
    std::fs::write(&manifest, text).unwrap();
    std::fs::create_dir_all(plugin.join("tests")).unwrap();
    std::fs::copy(suite("plugin.rs"), plugin.join("tests/plugin.rs")).unwrap();

    cargo(&plugin, &["build", "--release"]);
    let tested = cargo(&plugin, &["test", "--target", "host-tuple"]);
    let printed = String::from_utf8_lossy(&tested.stdout);
    assert!(
        printed.contains(
            "test the_plugin_serves_its_field_action_and_chart_within_the_users_rights ... ok"
        ),
        "{printed}"
    );

    // `npm install --save-dev <checkout>/sdk/js-testing` links the package the same way.
    let modules = plugin.join("node_modules/@canopy");
    std::fs::create_dir_all(&modules).unwrap();
    std::os::unix::fs::symlink(root().join("sdk/js-testing"), modules.join("testing")).unwrap();
    std::fs::create_dir_all(plugin.join("test")).unwrap();
    std::fs::copy(
        suite("plugin.test.mjs"),
        plugin.join("test/plugin.test.mjs"),
    )
    .unwrap();
    let tested = run(
        "node --test (Node.js 18 or later)",
        Command::new("node")
            .current_dir(&plugin)
            .args(["--test", "test/plugin.test.mjs"])
            .env("CANOPY_BIN", BIN)
            .env(
                "CARGO_TARGET_DIR",
                root().join("target/plugin-scaffold-test"),
            ),
    );
    let printed = String::from_utf8_lossy(&tested.stdout);
    assert!(printed.contains("# pass 1"), "{printed}");
}

/// A Python plugin tested by its own pytest with `canopy_sdk.testing` (which the scaffold's
/// vendored SDK carries) through `canopy test-server`.
#[test]
fn a_scaffolded_python_plugin_passes_its_kit_tests_with_pytest() {
    let dir = TempDir::new("kit");
    let plugin = scaffold(&dir.0, "kit-py", &["--lang", "python"]);
    let module = plugin.join("kit_py_plugin.py");
    edit(
        &module,
        "    ActionResult,\n",
        "    ActionResult,\n    ChartResult,\n",
    );
    edit(
        &module,
        "\n\n# componentize-py looks",
        "\n    customized.add_chart(\"Seven\", lambda ctx: ChartResult.value(7.0))\n    ds.add_chart(\"Greetings\", lambda ctx: ChartResult.value(42.0))\n\n\n# componentize-py looks",
    );
    let component = python_component(&plugin);
    std::fs::copy(&component, plugin.join("kit-py.wasm")).unwrap();
    std::fs::create_dir_all(plugin.join("tests")).unwrap();
    std::fs::copy(suite("test_plugin.py"), plugin.join("tests/test_plugin.py")).unwrap();

    let python = componentize_py().with_file_name("python");
    let tested = run(
        "pytest",
        Command::new(&python)
            .current_dir(&plugin)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
            .env("PYTHONPATH", plugin.join("vendor"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("CANOPY_BIN", BIN),
    );
    let printed = String::from_utf8_lossy(&tested.stdout);
    assert!(printed.contains("1 passed"), "{printed}");
}

/// componentize-py: `COMPONENTIZE_PY`, else the venv `.ci/run` makes (with pytest beside it).
fn componentize_py() -> PathBuf {
    std::env::var_os("COMPONENTIZE_PY").map_or_else(
        || root().join("target/componentize-py/bin/componentize-py"),
        PathBuf::from,
    )
}

/// The plugin folder's component, built by its `build.sh` unless a build of the same files (and
/// componentize-py version) is cached under `target/python-plugins` (the e2e tests' cache).
fn python_component(plugin: &Path) -> PathBuf {
    let tool = componentize_py();
    let version = run(
        "componentize-py --version (python3 -m venv target/componentize-py && \
         target/componentize-py/bin/pip install componentize-py pytest, as .ci/run does)",
        Command::new(&tool).arg("--version"),
    );
    let mut files = Vec::new();
    component_cache::sources(plugin, &[], &[], &mut files);
    let key = component_cache::key_under(&String::from_utf8_lossy(&version.stdout), plugin, files);
    component_cache::cached(
        "python-plugins",
        "kit-py",
        &key,
        "componentize-py",
        |staging| {
            run(
                "build.sh",
                Command::new("bash")
                    .arg(plugin.join("build.sh"))
                    .arg(staging)
                    .env("COMPONENTIZE_PY", &tool),
            );
        },
    )
}

/// The agent's remote workflow (`createForestServerSandbox`, `SERVICE_SERVER_URL`,
/// `createAgentTestClient`): a test server stands in for the platform, a `canopy serve
/// --server-url` takes its permissions from it, and the kit's client calls that server with the
/// test server's token, getting exactly the rights the test server gave its user.
#[test]
fn a_serve_with_server_url_at_a_test_server_applies_its_users_rights() {
    let platform = canopy_testing::TestServer::builder()
        .binary(BIN)
        .seed_sql(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
             INSERT INTO customers (id, name) VALUES (1, 'Ada'), (2, 'Grace');",
        )
        .rights(&json!({"collections": {"customers": ["browse", "read"]}}))
        .level("user")
        .start()
        .unwrap();
    let dir = TempDir::new("kit-remote");
    let schema = dir.0.join("agent-schema.json");
    // The Canopy under test serves the same database file, with a store of its own.
    let database_url = platform.info()["databaseUrl"].as_str().unwrap().to_owned();
    let mut child = canopy(&["serve", "--listen", "127.0.0.1:0", "--log-level", "warn"])
        .args(["--server-url", platform.url()])
        .args(["--env-secret", platform.env_secret()])
        .args(["--auth-secret", platform.auth_secret()])
        .args(["--database-url", &database_url])
        .arg("--data-dir")
        .arg(dir.0.join("agent-store"))
        .arg("--schema-path")
        .arg(&schema)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _agent = support::Server(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let forest_url = line
        .trim()
        .strip_prefix("Canopy is serving on ")
        .unwrap_or_else(|| panic!("not serving: {line:?}"));

    let client = canopy_testing::Client::new(forest_url, platform.token(), &schema).unwrap();
    let customers = client.collection("customers");
    let rows = customers
        .list(
            &canopy_testing::Query::new()
                .fields(["id", "name"])
                .sort("id"),
        )
        .unwrap();
    assert_eq!(
        rows,
        [
            json!({"id": 1, "name": "Ada"}),
            json!({"id": 2, "name": "Grace"})
        ]
    );
    let refused = customers.create(json!({"name": "Linus"})).unwrap_err();
    assert_eq!(refused.status(), Some(403), "{refused}");
    platform.close().unwrap();
}

/// The folder of a test server (its store, schema file, database) goes with it, whether its
/// stdin closes (what the clients do) or it gets SIGTERM.
#[test]
fn a_test_server_removes_its_folder_when_stdin_closes_or_on_sigterm() {
    let folder = |info: &serde_json::Value| {
        PathBuf::from(info["schemaPath"].as_str().unwrap())
            .parent()
            .unwrap()
            .to_owned()
    };
    let server = canopy_testing::TestServer::builder()
        .binary(BIN)
        .start()
        .unwrap();
    let closed = folder(server.info());
    assert!(closed.is_dir(), "{}", closed.display());
    server.close().unwrap();
    assert!(!closed.exists(), "{} is left", closed.display());

    let mut child = canopy(&["test-server"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let terminated = folder(&serde_json::from_str(&line).unwrap());
    assert!(terminated.is_dir(), "{}", terminated.display());
    run(
        "kill -TERM",
        Command::new("kill").args(["-TERM", &child.id().to_string()]),
    );
    // Stdin stays open: only the signal stops it.
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!terminated.exists(), "{} is left", terminated.display());
}
