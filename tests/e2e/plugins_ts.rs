//! The TypeScript shop plugin (`examples/shop/plugin-ts`, built by the TypeScript SDK's
//! toolchain, see `ts_build`) and the SDK's hostile plugin through `plugins_guest`'s checks, on
//! SQLite, PostgreSQL and MariaDB; a rejected promise fails its request as a throw does.
//!
//! Each test serves one stack for all its checks: loading the 12 MB component costs a fraction
//! of a second from the compile cache, a few seconds cold.

use canopy_e2e::{Backend, on_all_backends};

use crate::plugins_guest;
use crate::ts_build::{HOSTILE, SHOP, built};

async fn the_ts_shop_plugin_serves_what_the_rust_one_does(backend: Backend) {
    plugins_guest::the_shop_plugin_serves_what_the_rust_one_does(
        backend,
        &built(SHOP),
        "typescript",
    )
    .await;
}

async fn each_hostile_ts_call_fails_only_its_own_request(backend: Backend) {
    plugins_guest::each_hostile_call_fails_only_its_own_request(
        backend,
        &built(HOSTILE),
        "typescript",
        &[
            ("boom", "TypeError: "),
            ("rejected", "RangeError: rejected after an await"),
        ],
    )
    .await;
}

on_all_backends!(
    the_ts_shop_plugin_serves_what_the_rust_one_does,
    each_hostile_ts_call_fails_only_its_own_request,
);
