//! The README is tested: its shell blocks run, in order, in one `bash` as a new user types them
//! in a terminal (variables and `cd` carry from block to block), in a fresh folder, against a
//! fresh `canopy demo` on a free port, with the `canopy` binary cargo built for this test on the
//! `PATH`. A block fails the test when one of its commands fails (`set -euo pipefail`; `curl`
//! runs with `--fail-with-body`, so an HTTP error is a failure too), when a command panics, or
//! when its output differs from the one the README shows.
//!
//! What the Markdown says to the harness, in HTML comments (invisible on GitHub) on the lines
//! just before a fenced block:
//! - every ```` ```sh ```` block runs, unless marked `<!-- readme-test: skip REASON -->`
//!   (the reason is required: the test command itself, a toolchain install, another server);
//! - `<!-- readme-test: demo -->`: the block is `canopy demo`, started in the background on the
//!   test's port; the test goes on once it serves;
//! - `<!-- readme-test: output -->` before a ```` ```text ```` block: the stdout of the block
//!   run last, which must match it line by line, where a line `...` stands for any lines and
//!   `[..]` for any text within a line;
//! - `<!-- readme-test: setup COMMAND -->`: run COMMAND before the block (used to share the
//!   test plugins' build folder with the plugin the README builds, so that CI does not compile
//!   its dependencies again).
//!
//! In commands and outputs, `127.0.0.1:3351` stands for the test's address. Any other block
//! (`toml`, `text` without a marker) is prose. A new paragraph with a shell block is tested as
//! it is; one that cannot run against the demo says why in a skip marker.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod support;
use support::{Server, TempDir, demo_started, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

/// The address the README's commands show, replaced by the test's.
const README_ADDRESS: &str = "127.0.0.1:3351";

/// How long one block may take: the plugin loop compiles a crate.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Marker {
    Skip(String),
    Demo,
    Output,
    Setup(String),
}

/// A fenced block of the README, with its markers.
#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    /// The info string's first word (`sh`, `text`, `toml`…).
    lang: String,
    text: String,
    markers: Vec<Marker>,
}

fn parse_marker(comment: &str, line: usize) -> Marker {
    let body = comment.trim();
    if let Some(reason) = body.strip_prefix("skip") {
        let reason = reason.trim();
        assert!(
            !reason.is_empty(),
            "README.md:{line}: a skip marker says why the block cannot run"
        );
        Marker::Skip(reason.to_owned())
    } else if body == "demo" {
        Marker::Demo
    } else if body == "output" {
        Marker::Output
    } else if let Some(command) = body.strip_prefix("setup ") {
        Marker::Setup(command.trim().to_owned())
    } else {
        panic!("README.md:{line}: unknown readme-test marker {body:?}")
    }
}

/// The fenced blocks of `markdown` with the markers placed before each (only blank lines may
/// stand between a marker and its block).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut pending: Vec<(usize, Marker)> = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let number = index + 1;
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("<!-- readme-test:") {
            let comment = rest
                .strip_suffix("-->")
                .unwrap_or_else(|| panic!("README.md:{number}: a marker holds on one line"));
            pending.push((number, parse_marker(comment, number)));
            continue;
        }
        if let Some(info) = trimmed.strip_prefix("```") {
            let indent = line.len() - trimmed.len();
            let mut text = String::new();
            let mut closed = false;
            for (_, inner) in lines.by_ref() {
                if inner.trim_start().starts_with("```") {
                    closed = true;
                    break;
                }
                text.push_str(inner.get(indent..).unwrap_or(inner.trim_start()));
                text.push('\n');
            }
            assert!(closed, "README.md:{number}: the block is never closed");
            blocks.push(Block {
                line: number,
                lang: info.split_whitespace().next().unwrap_or("").to_owned(),
                text,
                markers: pending.drain(..).map(|(_, m)| m).collect(),
            });
            continue;
        }
        if let Some((marker_line, _)) = pending.first()
            && !line.trim().is_empty()
        {
            panic!("README.md:{marker_line}: a marker stands just before its block")
        }
    }
    assert!(
        pending.is_empty(),
        "README.md: a marker after the last block"
    );
    blocks
}

/// Whether `actual` matches `expected`: line by line, a line `...` matching any lines (none
/// included), `[..]` any text within a line.
fn matches(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| matches(rest, &actual[skip..])),
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, tail)| line_matches(first, line) && matches(rest, tail)),
    }
}

fn line_matches(pattern: &str, line: &str) -> bool {
    let mut parts = pattern.split("[..]");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

#[test]
fn the_matcher_understands_ellipses() {
    assert!(matches(&["a", "...", "d"], &["a", "b", "c", "d"]));
    assert!(matches(&["a", "...", "b"], &["a", "b"]));
    assert!(!matches(&["a", "...", "d"], &["a", "b"]));
    assert!(line_matches(
        "Token of [..] (valid 12 hours):",
        "Token of x@y (valid 12 hours):"
    ));
    assert!(!line_matches("valid [..] hours", "valid 12 days"));
    assert!(line_matches("[..]", "anything"));
    assert!(!line_matches("a", "ab"));
}

/// The environment of the README's commands: the user's, without any Canopy setting that would
/// change what the commands act on, with this build's `canopy` first on the `PATH`.
fn command_env(command: &mut Command, scratch: &Path) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CANOPY_") {
            command.env_remove(name);
        }
    }
    let bin_dir = scratch.join("bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin_dir];
    paths.extend(std::env::split_paths(&path));
    command
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("CURL_HOME", scratch.join("curl"))
        .env(
            "README_TEST_PLUGIN_TARGET",
            workspace_root().join("target/plugins"),
        )
        // The Python plugin's build: the componentize-py that .ci/run installs, unless the
        // reader's own is named.
        .env(
            "README_TEST_COMPONENTIZE_PY",
            std::env::var_os("COMPONENTIZE_PY").unwrap_or_else(|| {
                workspace_root()
                    .join("target/componentize-py/bin/componentize-py")
                    .into_os_string()
            }),
        )
        // The TypeScript plugin's build: the toolchain .ci/run installs in sdk/ts (`npm ci`),
        // linked into the scaffolded plugin instead of a second install.
        .env(
            "README_TEST_TS_NODE_MODULES",
            workspace_root().join("sdk/ts/node_modules"),
        )
        .env_remove("RUST_BACKTRACE")
        // CI lints its test build through clippy-driver: not a setting a reader's shell has.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS");
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `canopy demo` in the background, on `port`: returns once it serves, with what it printed.
fn start_demo(block: &Block, work: &Path, scratch: &Path, port: u16) -> (Server, String) {
    let command = block.text.trim();
    let args = command
        .strip_prefix("canopy demo")
        .unwrap_or_else(|| panic!("README.md:{}: a demo block is `canopy demo`", block.line));
    let mut demo = Command::new("bash");
    demo.arg("-c")
        .arg(format!("exec canopy demo{args} --listen 127.0.0.1:{port}"))
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(scratch.join("demo.err")).unwrap());
    command_env(&mut demo, scratch);
    let mut child = demo.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    match demo_started(stdout, BLOCK_TIMEOUT) {
        Ok(printed) => (server, printed),
        Err(printed) => panic!(
            "README.md:{}: `canopy demo` did not start:\n{printed}\n{}",
            block.line,
            std::fs::read_to_string(scratch.join("demo.err")).unwrap_or_default()
        ),
    }
}

/// The one `bash` the README's blocks run in.
struct Shell {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    dir: PathBuf,
    count: usize,
}

impl Shell {
    fn start(work: &Path, scratch: &Path) -> Self {
        let mut command = Command::new("bash");
        command
            .args(["--noprofile", "--norc"])
            .current_dir(work)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command_env(&mut command, scratch);
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = send.send(line);
            }
        });
        let dir = scratch.join("blocks");
        std::fs::create_dir_all(&dir).unwrap();
        let mut shell = Self {
            child,
            lines,
            dir,
            count: 0,
        };
        shell.write("set -euo pipefail\n");
        shell
    }

    fn write(&mut self, text: &str) {
        self.child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    /// Runs `script` in the shell; its stdout, or the failure with its stderr.
    fn run(&mut self, script: &str) -> Result<String, String> {
        self.count += 1;
        let out = self.dir.join(format!("{}.out", self.count));
        let err = self.dir.join(format!("{}.err", self.count));
        let done = format!("@@readme-block-done {}", self.count);
        self.write(&format!(
            "{{\n{script}\n}} < /dev/null > '{}' 2> '{}'\necho '{done}'\n",
            out.display(),
            err.display()
        ));
        let finished = loop {
            match self.lines.recv_timeout(BLOCK_TIMEOUT) {
                Ok(line) if line == done => break true,
                Ok(_) => {}
                Err(_) => break false,
            }
        };
        let stdout = std::fs::read_to_string(&out).unwrap_or_default();
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        if !finished {
            let status = self.child.try_wait().ok().flatten();
            return Err(format!(
                "it failed (shell: {status:?}).\nstdout:\n{stdout}\nstderr:\n{stderr}"
            ));
        }
        if stderr.contains("panicked") {
            return Err(format!("a command panicked:\n{stderr}"));
        }
        Ok(stdout)
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The README's shell blocks, run in order against a fresh demo, print what it shows.
#[test]
fn the_readme_commands_run_as_printed_against_the_demo() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let scratch = TempDir::new("readme");
    let work = scratch.0.join("work");
    let bin_dir = scratch.0.join("bin");
    let curl = scratch.0.join("curl");
    for dir in [&work, &bin_dir, &curl] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::symlink(BIN, bin_dir.join("canopy")).unwrap();
    // An HTTP error is a failed command, as it is for a reader who sees the error body.
    std::fs::write(curl.join(".curlrc"), "fail-with-body\nsilent\nshow-error\n").unwrap();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let local = |text: &str| text.replace(README_ADDRESS, &address);

    let mut shell = Shell::start(&work, &scratch.0);
    let mut demo: Option<Server> = None;
    let mut last_output: Option<(usize, String)> = None;
    let mut ran = 0;
    for block in blocks(&readme) {
        if block.markers.contains(&Marker::Output) {
            let (line, actual) = last_output.take().unwrap_or_else(|| {
                panic!(
                    "README.md:{}: an output block follows the block it shows",
                    block.line
                )
            });
            let expected = local(&block.text);
            let expected: Vec<&str> = expected.lines().collect();
            let actual_lines: Vec<&str> = actual.lines().collect();
            assert!(
                matches(&expected, &actual_lines),
                "README.md:{}: the block of line {line} printed\n{actual}\nwhere the README shows\n{}",
                block.line,
                block.text
            );
            continue;
        }
        if block.lang != "sh" || block.markers.iter().any(|m| matches!(m, Marker::Skip(_))) {
            continue;
        }
        if block.markers.contains(&Marker::Demo) {
            assert!(demo.is_none(), "README.md:{}: a second demo", block.line);
            let (server, printed) = start_demo(&block, &work, &scratch.0, port);
            demo = Some(server);
            last_output = Some((block.line, printed));
            ran += 1;
            continue;
        }
        assert!(
            demo.is_some(),
            "README.md:{}: a command block before the demo block",
            block.line
        );
        for marker in &block.markers {
            if let Marker::Setup(command) = marker {
                shell
                    .run(command)
                    .unwrap_or_else(|e| panic!("README.md:{}: setup {command:?}: {e}", block.line));
            }
        }
        let output = shell.run(&local(&block.text)).unwrap_or_else(|why| {
            panic!(
                "README.md:{}: the block\n{}\n{why}\ndemo's stderr:\n{}",
                block.line,
                block.text,
                std::fs::read_to_string(scratch.0.join("demo.err")).unwrap_or_default()
            )
        });
        last_output = Some((block.line, output));
        ran += 1;
    }
    assert!(demo.is_some(), "README.md has no demo block");
    assert!(ran > 5, "only {ran} blocks ran");
}
