//! Canopy: one binary that turns any SQL database into a secure admin back end.
//!
//! Layout (top to bottom; a layer only uses the ones below it):
//! - `agent`: the agent wire protocol (query strings, JSON:API, the schema file).
//! - `app`: the composition root and the commands of the `canopy` binary.
//! - `auth`: end-user session tokens (the agent's JWT) into a `Caller`, and the permission check.
//! - `config`: every setting of `canopy serve` as one typed tree (TOML file < env var < flag).
//! - `datasource`: what a collection is (schema, records, condition trees, filters, projections,
//!   aggregations, the `Caller`) and its SQL implementation over sqlx (`datasource::sql`, the only
//!   code that writes SQL for user data).
//! - `http`: the axum router of every route family, the shared middleware, and the one place
//!   errors become responses.
//! - `console`: the browser console served at `/{prefix}/console` (sign-in, tables, records,
//!   edit forms), over the same permission checks as the routes.
//! - `logging`: text or JSON log lines on stderr, written by a background thread.
//! - `health`, `metrics`: whether the instance should get traffic (`/readyz`, the drain on
//!   SIGTERM) and its Prometheus metrics (`/metrics`); `http::health` serves them.
//! - `customizer`: the decorator stack of customizations, in the Node agent's order.
//! - `plugins`: WebAssembly components loaded from the plugin directory, implementing the
//!   customizer's handlers.
//! - `typings`, `scaffold`: tools for plugin authors (`canopy typings`, `canopy plugin new`).
//! - `platform`: Canopy's own store (users, permissions, tokens, notes, logs, OAuth state).
//! - `workflows`: workflow definitions, triggers and the run engine.
//! - `mcp`: the MCP server, a transport over `ops`: its protocol handler and tools, OAuth
//!   authorization server, access tokens and uploads (`http::mcp` mounts its routes).
//!
//! `docs/architecture.md` holds the whole map.

/// `println!` for the commands' output, quiet when stdout is closed: `canopy users list | head`
/// ends the reader early, and the command then finishes its work without printing (and without
/// the panic `println!` raises on a broken pipe).
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `print!` as [`outln!`] does `println!`.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

pub mod agent;
pub mod app;
pub mod auth;
pub mod config;
pub mod console;
pub mod customizer;
pub mod datasource;
// The fuzz targets' way in (fuzz/, docs/fuzzing.md); not an API.
#[doc(hidden)]
pub mod fuzzing;
pub mod health;
pub mod http;
pub mod logging;
pub mod mcp;
pub mod metrics;
pub mod no_code;
pub mod ops;
pub mod platform;
pub mod plugins;
pub mod scaffold;
pub mod state;
pub mod typings;
pub mod workflows;
