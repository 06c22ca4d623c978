//! The Python shop plugin (`examples/shop/plugin-python`, built by componentize-py, see
//! `python_build`) and the SDK's hostile plugin through `plugins_guest`'s checks, on SQLite,
//! PostgreSQL and MariaDB.
//!
//! Each test serves one stack for all its checks: loading the 18 MB component costs ~0.2 s from
//! the compile cache, several seconds cold.

use canopy_e2e::{Backend, on_all_backends};

use crate::plugins_guest;
use crate::python_build::{HOSTILE, SHOP, built};

async fn the_python_shop_plugin_serves_what_the_rust_one_does(backend: Backend) {
    plugins_guest::the_shop_plugin_serves_what_the_rust_one_does(backend, &built(SHOP), "python")
        .await;
}

async fn each_hostile_python_call_fails_only_its_own_request(backend: Backend) {
    plugins_guest::each_hostile_call_fails_only_its_own_request(
        backend,
        &built(HOSTILE),
        "python",
        &[("boom", "KeyError: 'missing'")],
    )
    .await;
}

on_all_backends!(
    the_python_shop_plugin_serves_what_the_rust_one_does,
    each_hostile_python_call_fails_only_its_own_request,
);
