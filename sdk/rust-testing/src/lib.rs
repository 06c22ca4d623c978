//! Test a built Canopy plugin from `cargo test`, as the Node agent's testing package tests an
//! agent: [`TestServer`] runs `canopy test-server` (a throwaway server with its own temporary
//! store, a SQLite database the test seeds, the plugin, a free port) and [`Client`] calls its
//! `/forest` routes as a user with the rights the test gives.
//!
//! ```no_run
//! use canopy_testing::serde_json::json;
//! use canopy_testing::{Query, TestServer};
//!
//! let server = TestServer::builder()
//!     .plugin("target/wasm32-wasip2/release/my_plugin.wasm")
//!     .settings("my-plugin.toml")
//!     .seed_sql("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);
//!                INSERT INTO customers VALUES (1, 'Ada');")
//!     .rights(&json!({"collections": {"customers": ["browse", "read"]},
//!                    "actions": {"customers": ["Say hello"]}}))
//!     .start()?;
//! let customers = server.client().collection("customers");
//! let rows = customers.list(&Query::new().fields(["id", "greeting"]))?;
//! assert_eq!(rows[0]["greeting"], "Hello from my-plugin, 1");
//! let result = customers.action("Say hello").execute(json!({}), &["1"])?;
//! assert_eq!(result["success"], "Hello, 1!");
//! # Ok::<(), canopy_testing::Error>(())
//! ```
//!
//! The server is found as `$CANOPY_BIN`, else `canopy` on the `PATH`; it stops when the
//! [`TestServer`] is dropped (or with [`TestServer::close`]), and when the test process dies.

mod client;
mod error;
mod http;
mod server;

pub use client::{Action, Client, Collection, Query};
pub use error::{Error, Result};
/// The JSON crate of the kit's values (`json!` for rights, form values and attributes), so that
/// a test needs no dependency of its own for it.
pub use serde_json;
pub use server::{Builder, TestServer};
