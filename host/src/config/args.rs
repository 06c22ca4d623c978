//! `canopy serve`'s flags. Each flag also reads its `CANOPY_*` environment variable (clap's `env`),
//! and every one is optional here: a flag or variable that is absent leaves the config file's value,
//! then the default, in place. Defaults are therefore written in the help text, not given to clap,
//! which would otherwise hide the file behind them.
//!
//! A boolean flag alone means true (`--production`); `--flag=false` turns off a setting that the
//! file or the default turned on. Its variable takes `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`.

use std::path::PathBuf;

use clap::Args;
use clap::builder::BoolishValueParser;

/// Settings of `canopy serve`. Precedence: config file < environment variable < flag.
#[derive(Debug, Default, Clone, Args)]
pub struct ServeArgs {
    /// TOML config file holding any of the settings below under their camelCase names
    /// (`permissionsCacheDurationInSeconds`), and `[[datasources]]`. [default: none]
    #[arg(long, env = "CANOPY_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Database to serve: sqlite:path?mode=rwc, postgres://…, mysql://… or mariadb://…. Required
    /// unless the config file lists `[[datasources]]`; with exactly one entry there, replaces its
    /// url. [file key: databaseUrl]
    #[arg(long, env = "CANOPY_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<String>,

    /// Secret that signs the users' session tokens (HS256); a long random string. Required.
    /// [file key: authSecret]
    #[arg(
        long,
        env = "CANOPY_AUTH_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub auth_secret: Option<String>,

    /// Environment secret issued by the platform: 64 hexadecimal characters. Required.
    /// [file key: envSecret]
    #[arg(
        long,
        env = "CANOPY_ENV_SECRET",
        value_name = "HEX",
        hide_env_values = true
    )]
    pub env_secret: Option<String>,

    /// Production mode: the schema file is read instead of written, typings are not generated,
    /// and error details are not logged. [default: false] [file key: isProduction]
    #[arg(long, env = "CANOPY_PRODUCTION", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub production: Option<bool>,

    /// Address the HTTP server listens on, as IP:port. [default: 127.0.0.1:3351]
    /// [file key: listen]
    #[arg(long, env = "CANOPY_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,

    /// Path the routes are mounted under: `/{prefix}/forest`. Only `-`, `~`, `/`, ASCII letters,
    /// digits and `_`. [default: empty, i.e. /forest] [file key: prefix]
    #[arg(long, env = "CANOPY_PREFIX")]
    pub prefix: Option<String>,

    /// Schema file: written at every start outside production, read at start in production.
    /// [default: .forestadmin-schema.json] [file key: schemaPath]
    #[arg(long, env = "CANOPY_SCHEMA_PATH", value_name = "PATH")]
    pub schema_path: Option<PathBuf>,

    /// Directory of WebAssembly plugins to load. [default: none] [file key: pluginDir]
    #[arg(long = "plugins", env = "CANOPY_PLUGIN_DIR", value_name = "DIR")]
    pub plugin_dir: Option<PathBuf>,

    /// Folder of workflow definitions (`*.toml`, `*.yaml`, `*.yml`, one workflow per file, named
    /// after the file unless it says `name`), loaded at start and at each reload; a bad file
    /// stops the start, and a reload with one keeps the previous definitions. [default: none]
    /// [file key: workflowsDir]
    #[arg(long, env = "CANOPY_WORKFLOWS_DIR", value_name = "DIR")]
    pub workflows_dir: Option<PathBuf>,

    /// Log level: Debug, Info, Warn or Error (any case), or a tracing filter such as
    /// `info,canopy=debug`. [default: Info] [file key: loggerLevel]
    #[arg(long, env = "CANOPY_LOG_LEVEL", value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// Log line format on stderr: `text`, or `json` for one flat JSON object per line
    /// (`timestamp`, `level`, `target`, `message` and the event's fields, e.g. `method`, `path`,
    /// `status`, `duration_ms`, `correlation_id` for each request). Stands in for the agent's
    /// `logger` function. [default: text] [file key: logFormat]
    #[arg(long, env = "CANOPY_LOG_FORMAT", value_name = "FORMAT")]
    pub log_format: Option<String>,

    /// OpenTelemetry: the OTLP/HTTP collector to send traces to, e.g. `http://127.0.0.1:4318`
    /// (spans of each request, plugin call and SQL read; a request's `traceparent` header is
    /// continued). Only in a build with the `otel` feature (`cargo build --release --features
    /// otel`). The SDK's `OTEL_*` variables apply (`OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`).
    /// [default: none] [file key: otelEndpoint]
    #[arg(long, env = "CANOPY_OTEL_ENDPOINT", value_name = "URL")]
    pub otel_endpoint: Option<String>,

    /// Typings file for plugin crates (a Rust module of the customized schema's names, see
    /// `canopy typings`), rewritten at start and at each reload when its content changed;
    /// nothing is written when unset or in production. [default: none] [file key: typingsPath]
    #[arg(long, env = "CANOPY_TYPINGS_PATH", value_name = "PATH")]
    pub typings_path: Option<PathBuf>,

    /// Relationship depth introspected for typings: the most relations a `relation:field` path
    /// of the typings goes through. [default: 5] [file key: typingsMaxDepth]
    #[arg(long, env = "CANOPY_TYPINGS_MAX_DEPTH", value_name = "DEPTH")]
    pub typings_max_depth: Option<u32>,

    /// Never send the schema to the platform (logs a warning); incompatible with the experimental
    /// options. [default: false] [file key: skipSchemaUpdate]
    #[arg(long, env = "CANOPY_SKIP_SCHEMA_UPDATE", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub skip_schema_update: Option<bool>,

    /// Do not fail when a customization targets a missing collection or field. [default: false]
    /// [file key: ignoreMissingSchemaElementErrors]
    #[arg(long, env = "CANOPY_IGNORE_MISSING_SCHEMA_ELEMENT_ERRORS", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub ignore_missing_schema_element_errors: Option<bool>,

    /// The most records an emulated sort or filter (`emulateFieldSorting`,
    /// `emulateFieldFiltering`, `emulateFieldOperator`) may load into memory; a request past it
    /// fails with a 400 that names the field, instead of loading a large table silently.
    /// [default: 10000] [file key: emulationRowLimit]
    #[arg(long, env = "CANOPY_EMULATION_ROW_LIMIT", value_name = "ROWS")]
    pub emulation_row_limit: Option<u64>,

    /// Message shown in the UI for unexpected errors, as a template: `{message}` is the error's
    /// message, `{name}` its error name, `{{` and `}}` literal braces. [default: none, the
    /// error's own message] [file key: customizeErrorMessage]
    #[arg(long, env = "CANOPY_CUSTOMIZE_ERROR_MESSAGE", value_name = "TEMPLATE")]
    pub customize_error_message: Option<String>,

    /// Canopy's own store (users, permissions, tokens, logs): sqlite:path?mode=rwc or
    /// postgres://… (share one PostgreSQL store between instances). [default: sqlite file
    /// canopy.sqlite in --data-dir] [file key: stateUrl]
    #[arg(long, env = "CANOPY_STATE_URL", value_name = "URL")]
    pub state_url: Option<String>,

    /// Folder of Canopy's own files (the default SQLite store). [default: .canopy]
    /// [file key: dataDir]
    #[arg(long, env = "CANOPY_DATA_DIR", value_name = "PATH")]
    pub data_dir: Option<PathBuf>,

    /// The project this process serves, as named in /v1/project/{project}/… paths.
    /// [default: canopy] [file key: project]
    #[arg(long, env = "CANOPY_PROJECT", value_name = "NAME")]
    pub project: Option<String>,

    /// The environment of the project this process serves; several environments may share one
    /// PostgreSQL store. [default: production] [file key: environment]
    #[arg(long, env = "CANOPY_ENVIRONMENT", value_name = "NAME")]
    pub environment: Option<String>,

    /// Read permissions from a Forest-compatible permission server (another Canopy, say)
    /// instead of the local store, authenticated with the env secret. [default: none]
    /// [file key: forestServerUrl]
    #[arg(long, env = "SERVICE_SERVER_URL", value_name = "URL")]
    pub server_url: Option<String>,

    /// Declarative permissions (users, teams, roles, rights, scopes) applied at start.
    /// [default: permissions.toml when it exists] [file key: permissionsFile]
    #[arg(long, env = "CANOPY_PERMISSIONS_FILE", value_name = "PATH")]
    pub permissions_file: Option<PathBuf>,

    /// Record every operation of the users (lists, reads, writes, actions, exports, charts,
    /// approvals, notes) in the activity log served at /v1/…/activity-logs: who, when, which
    /// collection and record ids, never values. Written in batches off the request path; false
    /// records nothing. [default: true] [file key: activityLogs]
    #[arg(long, env = "CANOPY_ACTIVITY_LOGS", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub activity_logs: Option<bool>,

    /// Delete activity log entries older than this many days, in batches, from a background
    /// task of `canopy serve` (every 10 minutes); 0 keeps them forever. [default: 90]
    /// [file key: activityLogRetentionDays]
    #[arg(long, env = "CANOPY_ACTIVITY_LOG_RETENTION_DAYS", value_name = "DAYS")]
    pub activity_log_retention_days: Option<u64>,

    /// Keep at most this many activity log entries, the newest (checked with the retention,
    /// every 10 minutes, so the log may pass the cap by what 10 minutes add); 0 sets no cap.
    /// [default: no cap] [file key: activityLogMaxRows]
    #[arg(long, env = "CANOPY_ACTIVITY_LOG_MAX_ROWS", value_name = "COUNT")]
    pub activity_log_max_rows: Option<u64>,

    /// Keep permissions in sync over a server-sent-events connection; false refreshes them
    /// periodically instead. [default: true]
    /// [file key: instantCacheRefresh]
    #[arg(long, env = "CANOPY_INSTANT_CACHE_REFRESH", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub instant_cache_refresh: Option<bool>,

    /// Permission cache lifetime when instantCacheRefresh is false; below 60 is raised to 60.
    /// [default: 900]
    /// [file key: permissionsCacheDurationInSeconds]
    #[arg(
        long,
        env = "CANOPY_PERMISSIONS_CACHE_DURATION_IN_SECONDS",
        value_name = "SECONDS"
    )]
    pub permissions_cache_duration_in_seconds: Option<u64>,

    /// Serve columns of unreadable collections when reached through a relation (logs a
    /// warning). [default: false]
    /// [file key: skipRelationReadPermissions]
    #[arg(long, env = "CANOPY_SKIP_RELATION_READ_PERMISSIONS", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub skip_relation_read_permissions: Option<bool>,

    /// Leave out records included through a to-one relation (`data: null`) when they are
    /// outside the caller's scope on their own collection; false serves them, as the Node agent
    /// does (logs a warning). [default: true]
    /// [file key: strictScopes]
    #[arg(long, env = "CANOPY_STRICT_SCOPES", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub strict_scopes: Option<bool>,

    /// Most records a select-all approval request may target (checked when it is filed);
    /// 1 to 500. [default: 500] [file key: maxRecordsForApproval]
    #[arg(long, env = "CANOPY_MAX_RECORDS_FOR_APPROVAL", value_name = "COUNT")]
    pub max_records_for_approval: Option<u64>,

    /// Largest JSON request body: bytes (`1048576`) or a size (`1kb`, `50mb`; powers of 1024);
    /// larger bodies get 413. [default: 50mb] [file key: bodyParserOptions.jsonLimit]
    #[arg(long, env = "CANOPY_JSON_LIMIT", value_name = "SIZE")]
    pub json_limit: Option<String>,

    /// The body parser's `enableRawChecking`. Accepted and without effect: no other layer
    /// parses bodies before Canopy's. [default: false]
    /// [file key: bodyParserOptions.enableRawChecking]
    #[arg(long, env = "CANOPY_ENABLE_RAW_CHECKING", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub enable_raw_checking: Option<bool>,

    /// Most records a CSV export returns; at least 1. [default: unlimited]
    /// [file key: limitExportSize]
    #[arg(long, env = "CANOPY_LIMIT_EXPORT_SIZE", value_name = "COUNT")]
    pub limit_export_size: Option<u64>,

    /// Largest request head (request line, URL and headers): bytes or a size (`16kb`); larger
    /// heads are answered 431, as Node does past its own 16 KiB. At least 1kb. [default: 16kb]
    /// [file key: maxHeaderSize]
    #[arg(long, env = "CANOPY_MAX_HEADER_SIZE", value_name = "SIZE")]
    pub max_header_size: Option<String>,

    /// Time a connection has to send a complete request head, counted from its opening or from
    /// its previous response; a client that sends nothing is closed after it. [default: 30]
    /// [file key: headersTimeoutInSeconds]
    #[arg(
        long,
        env = "CANOPY_HEADERS_TIMEOUT_IN_SECONDS",
        value_name = "SECONDS"
    )]
    pub headers_timeout_in_seconds: Option<u64>,

    /// Time an idle keep-alive connection stays open after its last response, as Node's
    /// `keepAliveTimeout`. [default: 5] [file key: keepAliveTimeoutInSeconds]
    #[arg(
        long,
        env = "CANOPY_KEEP_ALIVE_TIMEOUT_IN_SECONDS",
        value_name = "SECONDS"
    )]
    pub keep_alive_timeout_in_seconds: Option<u64>,

    /// Time a request has to deliver its whole body, counted from its head; a client that
    /// dribbles a body is answered 408 and closed, as Node's `requestTimeout` does.
    /// [default: 300] [file key: bodyTimeoutInSeconds]
    #[arg(long, env = "CANOPY_BODY_TIMEOUT_IN_SECONDS", value_name = "SECONDS")]
    pub body_timeout_in_seconds: Option<u64>,

    /// On SIGTERM, time `/readyz` answers 503 while the server still accepts connections, so
    /// that a load balancer stops sending requests here first; then the listener closes. Set it
    /// above the balancer's health-check interval. [default: 0] [file key: drainDelayInSeconds]
    #[arg(long, env = "CANOPY_DRAIN_DELAY_IN_SECONDS", value_name = "SECONDS")]
    pub drain_delay_in_seconds: Option<u64>,

    /// On SIGTERM, time requests in flight have to finish once the listener is closed; the
    /// process then exits, cutting those left. [default: 30] [file key: shutdownGraceInSeconds]
    #[arg(long, env = "CANOPY_SHUTDOWN_GRACE_IN_SECONDS", value_name = "SECONDS")]
    pub shutdown_grace_in_seconds: Option<u64>,

    /// Bearer token that `GET /metrics` requires (`Authorization: Bearer <token>`). Unset, the
    /// metrics are open to whoever reaches the port: keep it off the public route of the load
    /// balancer. [default: none] [file key: metricsToken]
    #[arg(
        long,
        env = "CANOPY_METRICS_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub metrics_token: Option<String>,

    /// Largest `page[size]` of a list (records and related records); a larger page is answered
    /// 400 instead of reading a whole table at once. [default: 1000] [file key: maxPageSize]
    #[arg(long, env = "CANOPY_MAX_PAGE_SIZE", value_name = "COUNT")]
    pub max_page_size: Option<u64>,

    /// Origins whose browser requests may carry credentials (the session cookie), comma
    /// separated, each `scheme://host[:port]`; `*` allows any, as the Node agent does. Other
    /// origins still get CORS answers, without `Access-Control-Allow-Credentials`.
    /// [default: https://app.forestadmin.com] [file key: corsAllowedOrigins]
    #[arg(
        long,
        env = "CANOPY_CORS_ALLOWED_ORIGINS",
        value_name = "ORIGINS",
        value_delimiter = ','
    )]
    pub cors_allowed_origins: Option<Vec<String>>,

    /// Time a native query (live-query segment, query chart) may run before the database
    /// cancels it; answered 422. [default: 30] [file key: nativeQueryTimeoutInSeconds]
    #[arg(
        long,
        env = "CANOPY_NATIVE_QUERY_TIMEOUT_IN_SECONDS",
        value_name = "SECONDS"
    )]
    pub native_query_timeout_in_seconds: Option<u64>,

    /// Action routes without the positional index (`/_actions/{collection}/{slug}`).
    /// [default: false] [file key: useUnsafeActionEndpoint]
    #[arg(long, env = "CANOPY_USE_UNSAFE_ACTION_ENDPOINT", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub use_unsafe_action_endpoint: Option<bool>,

    /// Base URL (http or https) of an external workflow executor that the agent's
    /// `/forest/_internal/executor/*` routes are proxied to (404 while unset). Canopy's own
    /// workflows (`--workflows-dir`, the `/v1` workflow API) do not need it. [default: none]
    /// [file key: workflowExecutorUrl]
    #[arg(long, env = "CANOPY_WORKFLOW_EXECUTOR_URL", value_name = "URL")]
    pub workflow_executor_url: Option<String>,

    /// Record every create, update and delete with its values before and after (the audit
    /// trail, served by the `/_audit-trail` routes). On as well when the file has an
    /// `[auditTrail]` table or a database URL is given. [default: false] [file key:
    /// auditTrail.enabled]
    #[arg(long, env = "CANOPY_AUDIT_TRAIL", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub audit_trail: Option<bool>,

    /// Database the audit trail is written to (SQLite, PostgreSQL or MariaDB; its table
    /// `canopy_audit_trail` is created when missing); turns the trail on. [default: Canopy's
    /// store] [file key: auditTrail.databaseUrl]
    #[arg(long, env = "CANOPY_AUDIT_TRAIL_DATABASE_URL", value_name = "URL")]
    pub audit_trail_database_url: Option<String>,

    /// Refuse a change whose audit entry cannot be written (false: let it through unaudited and
    /// log the error). [default: true] [file key: auditTrail.critical]
    #[arg(long, env = "CANOPY_AUDIT_TRAIL_CRITICAL", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub audit_trail_critical: Option<bool>,

    /// Serve the config file's no-code webhook actions (`[[noCodeActions]]` with `type =
    /// "webhook"`: post the selected records to a URL); incompatible with skipSchemaUpdate.
    /// Declares `webhook-custom-actions` in the schema file's `meta.liana_features` and, as in
    /// the agent, makes production rebuild the schema file instead of reading it.
    /// [default: false] [file key: experimental.webhookCustomActions]
    #[arg(long, env = "CANOPY_EXPERIMENTAL_WEBHOOK_CUSTOM_ACTIONS", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub experimental_webhook_custom_actions: Option<bool>,

    /// Serve the config file's no-code update-record actions (`[[noCodeActions]]` with `type =
    /// "update-record"`: set fixed values on the selected records); incompatible with
    /// skipSchemaUpdate. Declares `update-record-actions` in the schema file's
    /// `meta.liana_features`. [default: false] [file key: experimental.updateRecordCustomActions]
    #[arg(long, env = "CANOPY_EXPERIMENTAL_UPDATE_RECORD_CUSTOM_ACTIONS", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub experimental_update_record_custom_actions: Option<bool>,

    /// Sign-in: public URL, login redirect, rate limits, OpenID Connect provider.
    #[command(flatten)]
    pub login: super::LoginArgs,

    /// The public API's rate limits: per token, burst, per address.
    #[command(flatten)]
    pub rate_limit: super::RateLimitArgs,

    /// The workflow run engine: workers, step timeout, lease.
    #[command(flatten)]
    pub workflow_engine: super::EngineArgs,
    /// Workflow triggers: webhook signing keys and rate limit.
    #[command(flatten)]
    pub triggers: super::TriggerArgs,
    /// The MCP server: mount, base path, tools, OAuth clients, token lifetimes, uploads.
    #[command(flatten)]
    pub mcp: super::McpArgs,
}
