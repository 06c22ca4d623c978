//! End-to-end tests of the SQL datasource on SQLite, PostgreSQL and MariaDB. One binary, one
//! module per feature; every test gets a fresh database (see `canopy_e2e::TestDb`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

mod actions_permissions;
mod activity;
mod activity_api;
mod activity_retention;
mod admin;
mod admin_api;
mod admin_file;
mod aggregate;
mod approvals;
mod approvals_fixture;
mod approvals_served;
mod audit;
mod charts;
mod component_cache;
mod composite;
mod context;
mod customizer;
mod customizer_emulation;
mod customizer_fields;
mod customizer_relations;
mod declared_checks;
mod flattener;
mod harness;
mod hostile;
mod http;
mod http_props;
mod http_stats;
mod http_time_props;
mod http_write;
mod introspection;
mod liana;
mod list;
mod list_order;
mod login;
mod login_browser;
mod login_oidc;
mod mcp;
mod mcp_edges;
mod no_code;
mod notes;
mod notes_sanitize;
mod openapi;
mod operators;
mod permissions;
mod permissions_charts;
mod permissions_ip;
mod permissions_links;
mod platform_store;
mod plugin_steps;
mod plugins;
mod plugins_customizer;
mod plugins_guest;
mod plugins_http;
mod plugins_python;
mod plugins_scopes;
mod plugins_ts;
mod properties;
mod python_build;
mod reconnect;
mod safety;
mod snapshots;
mod tokens;
mod ts_build;
mod wire_snapshots;
mod wire_values;
mod workflow_api;
mod workflow_definitions;
mod workflow_executor;
mod workflow_fixture;
mod workflow_refund;
mod workflow_runs;
mod workflow_schedules;
mod workflow_triggers;
mod write;
