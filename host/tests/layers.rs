//! The dependency rules of docs/architecture.md, checked on the sources: the operations layer
//! (`ops`) knows nothing of HTTP (no `axum`, no `http` module) nor of the surfaces above it
//! (`workflows`, `mcp`), and `workflows` and `mcp` never import `http`. A rule broken here is a
//! layer that would call back up into the router; the fix is an operation in `ops`.

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

/// Each line of `module`'s files that names one of `forbidden`, as `path:line: text`.
fn offenders(module: &str, forbidden: &[&str]) -> Vec<String> {
    let files = module_files(module);
    assert!(!files.is_empty(), "no source files found for `{module}`");
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        for (n, line) in text.lines().enumerate() {
            let code = code(line);
            if forbidden.iter().any(|f| code.contains(f)) {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

/// What importing the `http` module looks like from anywhere in the crate.
const HTTP: &[&str] = &[
    "crate::http",
    "super::http",
    "super::super::http",
    "canopy::http",
];

#[test]
fn workflows_import_nothing_from_http() {
    let found = offenders("workflows", HTTP);
    assert!(
        found.is_empty(),
        "workflows imports http:\n{}",
        found.join("\n")
    );
}

#[test]
fn mcp_imports_nothing_from_http() {
    let found = offenders("mcp", HTTP);
    assert!(found.is_empty(), "mcp imports http:\n{}", found.join("\n"));
}

#[test]
fn ops_knows_nothing_of_http_nor_of_the_surfaces_above_it() {
    let mut forbidden = HTTP.to_vec();
    forbidden.extend(["axum", "crate::workflows", "crate::mcp", "crate::console"]);
    let found = offenders("ops", &forbidden);
    assert!(
        found.is_empty(),
        "ops names a layer above it:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_an_import_in_code_and_not_in_a_comment() {
    assert!(code("use crate::http::AppState; // x").contains("crate::http"));
    assert!(!code("//! for `crate::http::approvals`").contains("crate::http"));
}
