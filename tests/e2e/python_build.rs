//! The Python plugins the tests serve, built with componentize-py once per source tree: a build
//! takes ~10 s (more on a busy machine) and gives an 18 MB component that is not
//! byte-reproducible, so the component is cached under `target/python-plugins/` by the sha256 of
//! what it is built from (the plugin's folder, the SDK's sources, the WIT folder) and the
//! componentize-py version. An unchanged tree reuses it, so the host's compile cache, keyed by
//! the component's bytes, hits too and no test compiles the 18 MB again.
//!
//! componentize-py comes from `COMPONENTIZE_PY`, else `target/componentize-py/bin/` (the venv
//! `.ci/run` makes). Missing, the tests that need it fail saying how to install it: a skipped
//! test would pass in CI while testing nothing.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::component_cache::{cached, key, root, sources};

/// A Python plugin of the repository.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PythonPlugin {
    /// Its folder, from the repository's root.
    dir: &'static str,
    /// The module componentize-py imports.
    module: &'static str,
}

/// The shop example's plugin (`examples/shop/plugin-python`).
pub(crate) const SHOP: PythonPlugin = PythonPlugin {
    dir: "examples/shop/plugin-python",
    module: "shop_plugin",
};

/// The SDK's misbehaving test plugin (`sdk/python/tests/plugins/hostile.py`).
pub(crate) const HOSTILE: PythonPlugin = PythonPlugin {
    dir: "sdk/python/tests/plugins",
    module: "hostile",
};

const SDK: &str = "sdk/python/src";
const WIT: &str = "wit/plugin@0.3.0";

/// The path of `plugin`'s component, built now unless a build of the same sources is cached.
pub(crate) fn built(plugin: PythonPlugin) -> PathBuf {
    let tool = componentize_py();
    let key = source_key(plugin, &tool.version);
    cached(
        "python-plugins",
        plugin.module,
        &key,
        &format!("componentize-py {}", tool.version),
        |staging| {
            let output = Command::new(&tool.path)
                .current_dir(root())
                .args([
                    "-d",
                    WIT,
                    "-w",
                    "customization",
                    "componentize",
                    "-p",
                    plugin.dir,
                    "-p",
                    SDK,
                ])
                .arg(plugin.module)
                .arg("-o")
                .arg(staging)
                .output()
                .expect("run componentize-py");
            assert!(
                output.status.success(),
                "componentize-py failed to build {}: {}",
                plugin.dir,
                String::from_utf8_lossy(&output.stderr)
            );
        },
    )
}

struct Tool {
    path: PathBuf,
    version: String,
}

/// componentize-py, at the version the SDK is written against.
fn componentize_py() -> &'static Tool {
    static TOOL: OnceLock<Tool> = OnceLock::new();
    TOOL.get_or_init(|| {
        let want = canopy::scaffold::COMPONENTIZE_PY;
        let path = std::env::var_os("COMPONENTIZE_PY").map_or_else(
            || root().join("target/componentize-py/bin/componentize-py"),
            PathBuf::from,
        );
        let install = format!(
            "python3 -m venv target/componentize-py && target/componentize-py/bin/pip install \
             componentize-py=={want} (what .ci/run does), or set COMPONENTIZE_PY to its path"
        );
        let output = Command::new(&path).arg("--version").output().unwrap_or_else(|e| {
            panic!(
                "componentize-py, needed to build the Python plugins, cannot run ({}: {e}): {install}",
                path.display()
            )
        });
        let printed = String::from_utf8_lossy(&output.stdout);
        let version = printed.split_whitespace().last().unwrap_or_default().to_owned();
        assert_eq!(
            version,
            want,
            "{} is componentize-py {version}; the Python SDK is built with {want}: {install}",
            path.display()
        );
        Tool { path, version }
    })
}

/// The sha256 (hex) of the files `plugin` is built from, each with its path, and of the tool's
/// version and the module's name.
fn source_key(plugin: PythonPlugin, version: &str) -> String {
    let mut files = Vec::new();
    for dir in [plugin.dir, SDK, WIT] {
        sources(
            &root().join(dir),
            &["__pycache__", ".mypy_cache", ".pytest_cache", "build"],
            &[".wasm", ".pyc"],
            &mut files,
        );
    }
    key(
        &format!("componentize-py {version}\0module {}\0", plugin.module),
        files,
    )
}
