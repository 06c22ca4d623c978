//! The TOML config file: the createAgent options under the names the spec gives them
//! (`permissionsCacheDurationInSeconds`), plus the binary's own settings. Every key is optional;
//! an unknown key is an error so that a typo never passes silently.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// One config file, as written. Meanings and defaults are on [`super::ServeArgs`].
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileConfig {
    pub database_url: Option<String>,
    #[serde(default)]
    pub datasources: Vec<FileDatasource>,
    pub auth_secret: Option<String>,
    pub env_secret: Option<String>,
    pub is_production: Option<bool>,
    pub listen: Option<String>,
    pub prefix: Option<String>,
    pub schema_path: Option<PathBuf>,
    pub plugin_dir: Option<PathBuf>,
    pub workflows_dir: Option<PathBuf>,
    pub logger_level: Option<String>,
    pub log_format: Option<String>,
    pub otel_endpoint: Option<String>,
    pub typings_path: Option<PathBuf>,
    pub typings_max_depth: Option<u32>,
    pub skip_schema_update: Option<bool>,
    pub ignore_missing_schema_element_errors: Option<bool>,
    pub emulation_row_limit: Option<u64>,
    pub customize_error_message: Option<String>,
    pub instant_cache_refresh: Option<bool>,
    pub permissions_cache_duration_in_seconds: Option<u64>,
    pub skip_relation_read_permissions: Option<bool>,
    pub strict_scopes: Option<bool>,
    pub max_records_for_approval: Option<u64>,
    pub body_parser_options: Option<FileBodyParserOptions>,
    pub max_body_size: Option<Size>,
    pub limit_export_size: Option<u64>,
    pub use_unsafe_action_endpoint: Option<bool>,
    pub workflow_executor_url: Option<String>,
    pub audit_trail: Option<FileAuditTrail>,
    pub experimental: Option<FileExperimental>,
    #[serde(default)]
    pub no_code_actions: Vec<super::no_code::FileNoCodeAction>,
    pub max_header_size: Option<Size>,
    pub headers_timeout_in_seconds: Option<u64>,
    pub keep_alive_timeout_in_seconds: Option<u64>,
    pub body_timeout_in_seconds: Option<u64>,
    pub drain_delay_in_seconds: Option<u64>,
    pub shutdown_grace_in_seconds: Option<u64>,
    pub metrics_token: Option<String>,
    pub max_page_size: Option<u64>,
    pub cors_allowed_origins: Option<Vec<String>>,
    pub native_query_timeout_in_seconds: Option<u64>,
    pub state_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub project: Option<String>,
    pub environment: Option<String>,
    pub forest_server_url: Option<String>,
    pub permissions_file: Option<PathBuf>,
    pub activity_logs: Option<bool>,
    pub activity_log_retention_days: Option<u64>,
    pub activity_log_max_rows: Option<u64>,
    pub public_url: Option<String>,
    pub login_redirect_url: Option<String>,
    pub login_attempts_per_minute_per_ip: Option<u32>,
    pub login_attempts_per_minute_per_email: Option<u32>,
    pub oidc: Option<super::login::FileOidc>,
    pub api_rate_limit_per_minute: Option<u32>,
    pub api_rate_limit_burst: Option<u32>,
    pub api_rate_limit_per_minute_per_ip: Option<u32>,
    pub workflow_workers: Option<u32>,
    pub workflow_step_timeout_in_seconds: Option<u64>,
    pub workflow_lease_in_seconds: Option<u64>,
    pub workflow_webhook_keys: Option<String>,
    pub workflow_webhook_rate_limit_per_minute: Option<u32>,
    pub mcp: Option<super::mcp::FileMcp>,
    pub dashboard: Option<super::dashboard::FileDashboard>,
}

/// A `[[datasources]]` entry: one SQL database and what it publishes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileDatasource {
    pub url: Option<String>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    pub native_query_connection: Option<String>,
}

/// `[bodyParserOptions]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileBodyParserOptions {
    pub json_limit: Option<Size>,
    pub enable_raw_checking: Option<bool>,
}

/// `[auditTrail]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileAuditTrail {
    pub enabled: Option<bool>,
    pub database_url: Option<String>,
    pub critical: Option<bool>,
}

/// `[experimental]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileExperimental {
    pub webhook_custom_actions: Option<bool>,
    pub update_record_custom_actions: Option<bool>,
}

/// A size as the agent accepts it: a byte count (`1048576`) or a size string (`"50mb"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Size {
    Bytes(u64),
    Text(String),
}
