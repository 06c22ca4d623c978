//! The TypeScript plugins the tests serve, built with the TypeScript SDK's toolchain
//! (`sdk/ts/build.mjs`: tsc, esbuild, ComponentizeJS) once per source tree: a build takes ~5-10 s
//! and gives a 12 MB component, so the component is cached under `target/ts-plugins/` by the
//! sha256 of what it is built from (the plugin's folder, the SDK's sources, build script and lock
//! file, the WIT folder) and the Node.js version. An unchanged tree reuses it, so the host's
//! compile cache, keyed by the component's bytes, hits too.
//!
//! The toolchain is `sdk/ts/node_modules` (`npm ci` there, which `.ci/run` does). Missing, the
//! tests that need it fail saying how to install it: a skipped test would pass in CI while
//! testing nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::component_cache::{cached, key, root, sources};

/// A TypeScript plugin of the repository.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TsPlugin {
    /// Its folder, from the repository's root.
    dir: &'static str,
    /// The entry module, in that folder.
    entry: &'static str,
}

/// The shop example's plugin (`examples/shop/plugin-ts`).
pub(crate) const SHOP: TsPlugin = TsPlugin {
    dir: "examples/shop/plugin-ts",
    entry: "shop.ts",
};

/// The SDK's misbehaving test plugin (`sdk/ts/tests/plugins/hostile.ts`).
pub(crate) const HOSTILE: TsPlugin = TsPlugin {
    dir: "sdk/ts/tests/plugins",
    entry: "hostile.ts",
};

/// What every TypeScript plugin is built from besides its folder.
const SDK: &[&str] = &[
    "sdk/ts/src",
    "sdk/ts/build.mjs",
    "sdk/ts/package-lock.json",
    "sdk/ts/tsconfig.json",
    "wit/plugin@0.3.0",
];

/// The path of `plugin`'s component, built now unless a build of the same sources is cached.
pub(crate) fn built(plugin: TsPlugin) -> PathBuf {
    let node = node_version();
    let key = source_key(plugin, node);
    let stem = plugin.entry.trim_end_matches(".ts");
    cached(
        "ts-plugins",
        stem,
        &key,
        &format!("node {node}"),
        |staging| {
            let output = Command::new("node")
                .current_dir(root())
                .arg("sdk/ts/build.mjs")
                .arg(Path::new(plugin.dir).join(plugin.entry))
                .arg(staging)
                .output()
                .expect("run node");
            assert!(
                output.status.success(),
                "sdk/ts/build.mjs failed to build {}/{}: {}{}",
                plugin.dir,
                plugin.entry,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        },
    )
}

/// Node.js's version, once the toolchain is known to be installed.
fn node_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let install = "`npm ci` in sdk/ts (what .ci/run does), with Node.js 20 or later";
        assert!(
            root()
                .join("sdk/ts/node_modules/@bytecodealliance/componentize-js")
                .is_dir(),
            "the TypeScript toolchain, needed to build the TypeScript plugins, is not installed: {install}"
        );
        let output = Command::new("node")
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("node cannot run ({e}): {install}"));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    })
}

/// The sha256 (hex) of the files `plugin` is built from, each with its path, and of the Node.js
/// version and the entry's name.
fn source_key(plugin: TsPlugin, node: &str) -> String {
    let mut files = Vec::new();
    for path in std::iter::once(plugin.dir).chain(SDK.iter().copied()) {
        sources(
            &root().join(path),
            &["node_modules", "generated"],
            &[".wasm"],
            &mut files,
        );
    }
    key(&format!("node {node}\0entry {}\0", plugin.entry), files)
}
