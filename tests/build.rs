//! Builds the test plugins (tests/plugins, a wasm32-wasip2 workspace of its own) so the
//! end-to-end tests load real components. The nested cargo uses its own target directory: sharing
//! the outer one would wait forever on the build lock the outer cargo holds.
//! The plugins' directory is handed to the tests as `CANOPY_TEST_PLUGINS`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let plugins = manifest.join("plugins");
    let root = manifest.parent().expect("workspace root").to_path_buf();
    for path in ["Cargo.toml", "Cargo.lock", "hostile", "other-wit"] {
        println!("cargo:rerun-if-changed={}", plugins.join(path).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("guest-sdk").display()
    );
    println!("cargo:rerun-if-changed={}", root.join("wit").display());

    let target_dir = root.join("target").join("plugins");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(&plugins)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target_dir);
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
        "building tests/plugins for wasm32-wasip2 failed (is the target installed? \
         `rustup target add wasm32-wasip2`)"
    );
    let out = target_dir.join("wasm32-wasip2").join("release");
    println!("cargo:rustc-env=CANOPY_TEST_PLUGINS={}", out.display());
}
