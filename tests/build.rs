//! Builds the test plugins (tests/plugins, a wasm32-wasip2 workspace of its own) so the
//! end-to-end tests load real components. The nested cargo uses its own target directory: sharing
//! the outer one would wait forever on the build lock the outer cargo holds.
//! The shop example's plugin (examples/shop/plugin, a workspace of its own too) is built into the
//! same directory after them. The plugins' directory is handed to the tests as
//! `CANOPY_TEST_PLUGINS`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let plugins = manifest.join("plugins");
    let root = manifest.parent().expect("workspace root").to_path_buf();
    for path in [
        "Cargo.toml",
        "Cargo.lock",
        "applier",
        "customizer2",
        "forms",
        "hostile",
        "keys",
        "legacy",
        "legacy2",
        "other-wit",
        "scoped",
        "steps",
    ] {
        println!("cargo:rerun-if-changed={}", plugins.join(path).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("guest-sdk").display()
    );
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    let example = root.join("examples").join("shop").join("plugin");
    for path in ["Cargo.toml", "Cargo.lock", "src"] {
        println!("cargo:rerun-if-changed={}", example.join(path).display());
    }

    // The flattener (plugins/flattener, a workspace of its own too).
    let flattener = root.join("plugins").join("flattener");
    for path in ["Cargo.toml", "Cargo.lock", "src"] {
        println!("cargo:rerun-if-changed={}", flattener.join(path).display());
    }

    let target_dir = root.join("target").join("plugins");
    for workspace in [&plugins, &example, &flattener] {
        build(workspace, &target_dir);
    }
    let out = target_dir.join("wasm32-wasip2").join("release");
    println!("cargo:rustc-env=CANOPY_TEST_PLUGINS={}", out.display());
}

/// `cargo build --release --target wasm32-wasip2` of the workspace in `dir`.
fn build(dir: &std::path::Path, target_dir: &std::path::Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(dir)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", target_dir);
    if std::env::var_os("CARGO_NET_OFFLINE").is_some() {
        command.arg("--offline");
    }
    // The outer build's settings are for the host target, not for the plugins.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        command.env_remove(var);
    }
    let status = command.status().expect("run cargo for the test plugins");
    assert!(
        status.success(),
        "building {} for wasm32-wasip2 failed (is the target installed? \
         `rustup target add wasm32-wasip2`)",
        dir.display()
    );
}
