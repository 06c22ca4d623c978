//! The dependency rules of docs/architecture.md, checked on the sources: the operations layer
//! (`ops`) knows nothing of HTTP (no `axum`, no `http` module) nor of the surfaces above it
//! (`workflows`, `mcp`, `console`); `workflows` and `mcp` never import `http`; and the console
//! and `http`, transports side by side, never import each other (nor the console `mcp`): the
//! composition root (`app`) mounts the console beside the HTTP routes. A rule broken here is a
//! layer that would call back up into, or across to, another surface; the fix is an operation
//! in `ops` (or a type in the layer both use).

use std::path::{Path, PathBuf};

/// Every `.rs` file of a module: `src/<name>.rs` and everything under `src/<name>/`.
fn module_files(name: &str) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let root = src.join(format!("{name}.rs"));
    if root.is_file() {
        files.push(root);
    }
    let mut dirs = vec![src.join(name)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The code of a line, without its `//` comment (doc comments may name any module).
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(at) => &line[..at],
        None => line,
    }
}

/// The top-level modules a source text reaches through `crate::`, with the 1-based line of each:
/// `crate::http::X` and the names of a group, `use crate::{agent, http};` (over several lines
/// too), as `(line, "http")`. Comments are left out.
fn crate_modules(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().map(code).collect();
    let joined = lines.join("\n");
    let line_of = |at: usize| joined[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = joined[from..].find("crate::") {
        let start = from + at + "crate::".len();
        from = start;
        let rest = &joined[start..];
        if let Some(group) = rest.strip_prefix('{') {
            // The group's top-level names, up to its closing brace.
            let mut depth = 0usize;
            let mut name_start = Some(0);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        if let Some(s) = name_start {
                            push_name(&group[s..i], start + 1 + s, &line_of, &mut found);
                        }
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        if let Some(s) = name_start {
                            push_name(&group[s..i], start + 1 + s, &line_of, &mut found);
                        }
                        name_start = Some(i + 1);
                    }
                    _ => {}
                }
            }
        } else {
            push_name(rest, start, &line_of, &mut found);
        }
    }
    found
}

/// The first path segment of `path` (an identifier), if any, recorded at byte `at`.
fn push_name(
    path: &str,
    at: usize,
    line_of: &impl Fn(usize) -> usize,
    found: &mut Vec<(usize, String)>,
) {
    let trimmed = path.trim_start();
    let name: String = trimmed
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if !name.is_empty() {
        found.push((line_of(at + path.len() - trimmed.len()), name));
    }
}

/// Each line of `text` that names one of `forbidden` (a text such as `super::http` or `axum`)
/// or reaches one of the crate's modules `modules` (`crate::http`, `crate::{http}`), as
/// `line: text`.
fn offending_lines(text: &str, forbidden: &[&str], modules: &[&str]) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut hits: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| forbidden.iter().any(|f| code(line).contains(f)))
        .map(|(n, _)| n + 1)
        .collect();
    hits.extend(
        crate_modules(text)
            .into_iter()
            .filter(|(_, name)| modules.contains(&name.as_str()))
            .map(|(line, _)| line),
    );
    hits.sort_unstable();
    hits.dedup();
    hits.into_iter()
        .map(|n| format!("{n}: {}", lines[n - 1].trim()))
        .collect()
}

/// Each line of `module`'s files that names one of `forbidden` or reaches one of `modules`
/// (see [`offending_lines`]), as `path:line: text`.
fn offenders(module: &str, forbidden: &[&str], modules: &[&str]) -> Vec<String> {
    let files = module_files(module);
    assert!(!files.is_empty(), "no source files found for `{module}`");
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        for hit in offending_lines(&text, forbidden, modules) {
            found.push(format!("{}:{hit}", path.display()));
        }
    }
    found
}

/// What importing the `http` module looks like from anywhere in the crate, beside `crate::http`
/// (which [`crate_modules`] finds, in groups too).
const HTTP: &[&str] = &["super::http", "super::super::http", "canopy::http"];

#[test]
fn workflows_import_nothing_from_http() {
    let found = offenders("workflows", HTTP, &["http"]);
    assert!(
        found.is_empty(),
        "workflows imports http:\n{}",
        found.join("\n")
    );
}

#[test]
fn mcp_imports_nothing_from_http() {
    let found = offenders("mcp", HTTP, &["http"]);
    assert!(found.is_empty(), "mcp imports http:\n{}", found.join("\n"));
}

#[test]
fn ops_knows_nothing_of_http_nor_of_the_surfaces_above_it() {
    let mut forbidden = HTTP.to_vec();
    forbidden.push("axum");
    let found = offenders("ops", &forbidden, &["http", "workflows", "mcp", "console"]);
    assert!(
        found.is_empty(),
        "ops names a layer above it:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_console_imports_nothing_from_http_nor_mcp() {
    let mut forbidden = HTTP.to_vec();
    forbidden.extend(["super::mcp", "super::super::mcp", "canopy::mcp"]);
    let found = offenders("console", &forbidden, &["http", "mcp"]);
    assert!(
        found.is_empty(),
        "the console imports another transport:\n{}",
        found.join("\n")
    );
}

#[test]
fn http_imports_nothing_from_the_console() {
    let forbidden = ["super::console", "super::super::console", "canopy::console"];
    let found = offenders("http", &forbidden, &["console"]);
    assert!(
        found.is_empty(),
        "http imports the console (the composition root mounts it):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_an_import_in_code_and_not_in_a_comment() {
    assert!(code("use crate::http::AppState; // x").contains("crate::http"));
    assert!(!code("//! for `crate::http::approvals`").contains("crate::http"));
}

/// Lines the console and `http` held before the console became an adapter over `ops` alone:
/// each is caught, and the same lines without the import are not.
#[test]
fn the_rules_catch_the_imports_the_transports_had() {
    let console = "use crate::http::{ApiError, ApiResult, CallerContext};
use crate::ops::permission::{LiveSegmentQuery, scoped};
fn f() {
    if let Err(error) =
        crate::http::security::private_checks(state, claims.id, &parts.headers, socket).await
    {}
    // crate::http::reload::reload_with is named in a comment only
}
use crate::{
    agent,
    http::ApiError,
};
use crate::{datasource, mcp};
";
    let found = offending_lines(console, &["canopy::http"], &["http", "mcp"]);
    assert_eq!(
        found,
        [
            "1: use crate::http::{ApiError, ApiResult, CallerContext};",
            "5: crate::http::security::private_checks(state, claims.id, &parts.headers, socket).await",
            "11: http::ApiError,",
            "13: use crate::{datasource, mcp};",
        ]
    );
    let http = "data.merge(mcp::router(&state, dispatch))
    .merge(crate::console::router(&state))";
    assert_eq!(
        offending_lines(http, &[], &["console"]),
        ["2: .merge(crate::console::router(&state))"]
    );
    let now = "use crate::ops::Result as OpsResult;
use crate::state::reload_with;
use crate::{agent, auth, datasource, ops};";
    assert!(offending_lines(now, HTTP, &["http", "mcp", "console"]).is_empty());
}
