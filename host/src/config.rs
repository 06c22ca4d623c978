//! Every setting of `canopy serve`, once, as one typed tree. Sources, weakest first: the TOML file
//! (`--config` / `CANOPY_CONFIG`), then `CANOPY_*` environment variables, then flags; a default
//! applies only where none of them gives a value. Loading has no side effect besides reading the
//! file: problems that do not stop the program come back as [`Warning`]s for `app` to log.
//!
//! File keys are the createAgent option names (`permissionsCacheDurationInSeconds`,
//! `bodyParserOptions.jsonLimit`), variables are `CANOPY_` + SCREAMING_SNAKE, flags kebab-case; the
//! help of [`ServeArgs`] documents each with its default and file key. Two options have no key:
//! `logger` (a function; `logFormat` selects text or JSON lines instead) and `forestAdminClient`
//! (a test seam of the Node agent, not a setting).

mod args;
mod dashboard;
mod engine;
mod file;
mod limits;
mod login;
mod mcp;
mod no_code;
mod platform;
mod ratelimit;
mod size;
mod store;
mod template;
mod triggers;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use args::ServeArgs;
pub use dashboard::{
    ChartDefinition, ChartKind, ChartStyle, SeriesDefinition, parse as parse_dashboard,
};
pub use engine::{EngineArgs, EngineConfig};
pub use limits::{
    DEFAULT_CORS_ALLOWED_ORIGINS, DEFAULT_HEADERS_TIMEOUT_SECONDS,
    DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS, DEFAULT_MAX_HEADER_SIZE, DEFAULT_MAX_PAGE_SIZE,
    DEFAULT_NATIVE_QUERY_TIMEOUT_SECONDS,
};
pub use login::{LoginArgs, LoginConfig, OidcConfig};
pub use mcp::{
    McpArgs, McpConfig, TOOLS as MCP_TOOLS, UploadConfig,
    normalize_base_path as normalize_mcp_base_path, standalone_args as mcp_standalone_args,
};
pub use no_code::{
    DEFAULT_WEBHOOK_TIMEOUT, NoCodeAction, NoCodeFormField, NoCodeKind, NoCodeScope, WebhookMethod,
    parse_definition as parse_no_code_action, shown_url,
};
pub use platform::PlatformConfig;
pub use ratelimit::{RateLimitArgs, RateLimitConfig};
pub use size::parse_size;
pub use store::{DEMO_SETTINGS, ServerSettings, StoreArgs, StoreConfig};
pub use template::ErrorMessageTemplate;
pub use triggers::{
    TriggerArgs, TriggerConfig, WebhookKey, parse_keys as parse_webhook_keys,
    valid_kid as valid_webhook_kid,
};

use file::{FileConfig, FileDatasource, Size};

/// The validated settings of `canopy serve`, grouped by the service that consumes them.
#[derive(Debug, Clone)]
pub struct Config {
    /// The databases served, in the order given; never empty.
    pub datasources: Vec<DatasourceConfig>,
    pub auth: AuthConfig,
    pub http: HttpConfig,
    pub schema: SchemaConfig,
    pub log: LogConfig,
    pub permissions: PermissionsConfig,
    pub actions: ActionsConfig,
    /// `isProduction`: read the schema file instead of writing it, hide error details.
    pub is_production: bool,
    /// Directory of WebAssembly plugins, if any.
    pub plugin_dir: Option<PathBuf>,
    /// `workflowsDir`: the folder of workflow definitions, if any.
    pub workflows_dir: Option<PathBuf>,
    /// `workflowExecutorUrl`: the external executor `/forest/_internal/executor/*` is proxied to.
    pub workflow_executor_url: Option<String>,
    /// `auditTrail`: record every create, update and delete with its values; `None` (the
    /// default) leaves the audit layer out of the stack.
    pub audit_trail: Option<AuditTrailConfig>,
    /// `experimental`: the no-code actions and the features `meta.liana_features` declares.
    pub experimental: ExperimentalConfig,
    /// `nativeQueryTimeoutInSeconds`: how long a native query (live-query segment, query chart)
    /// may run before the database cancels it.
    pub native_query_timeout: Duration,
    /// Canopy's own store and what this process serves of it.
    pub platform: PlatformConfig,
    /// Sign-in: the built-in page or an OpenID provider, redirects and rate limits.
    pub login: LoginConfig,
    /// The public API's rate limits.
    pub rate_limit: RateLimitConfig,
    /// The workflow run engine: workers, step timeout, lease.
    pub workflow_engine: EngineConfig,
    /// What starts workflow runs: webhook signing keys and rate limit.
    pub triggers: TriggerConfig,
    /// The MCP server (`mountAiMcpServer`); `None` when it is not mounted.
    pub mcp: Option<McpConfig>,
    /// `[[dashboard.chart]]`: the charts of the console's dashboards.
    pub dashboard: Vec<ChartDefinition>,
}

/// One `[[datasources]]` entry, or the lone `--database-url`.
#[derive(Clone, PartialEq, Eq)]
pub struct DatasourceConfig {
    pub url: String,
    /// Collections to publish; empty publishes all.
    pub include: Vec<String>,
    /// Collections to hide.
    pub exclude: Vec<String>,
    /// Collection renames, old name to new name.
    pub rename: BTreeMap<String, String>,
    /// Name under which `/_internal/native_query` reaches this database, if it may.
    pub native_query_connection: Option<String>,
}

impl fmt::Debug for DatasourceConfig {
    // The URL may carry a password, and configs end up in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatasourceConfig")
            .field("url", &crate::datasource::sql::redact_url(&self.url))
            .field("include", &self.include)
            .field("exclude", &self.exclude)
            .field("rename", &self.rename)
            .field("native_query_connection", &self.native_query_connection)
            .finish()
    }
}

/// The two secrets.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// Signs and checks the users' session tokens.
    pub auth_secret: Secret,
    /// The platform's environment secret: 64 hexadecimal characters.
    pub env_secret: Secret,
}

/// A secret string that never shows in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// The HTTP server and what shapes its answers.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub listen: SocketAddr,
    /// `prefix` as configured; [`HttpConfig::mount_path`] is where routes live.
    pub prefix: String,
    /// `bodyParserOptions.jsonLimit` in bytes; larger bodies are answered 413.
    pub json_limit: u64,
    /// `bodyParserOptions.enableRawChecking`: accepted, without effect.
    pub enable_raw_checking: bool,
    /// `limitExportSize`: most records per CSV export, `None` for unlimited; never 0.
    pub limit_export_size: Option<u64>,
    /// `customizeErrorMessage`: the message of unexpected errors, `None` for the error's own.
    pub customize_error_message: Option<ErrorMessageTemplate>,
    /// `maxHeaderSize`: the largest request head (request line, URL and headers) in bytes;
    /// larger ones are answered 431.
    pub max_header_size: usize,
    /// `headersTimeoutInSeconds`: time a connection has to send a complete request head.
    pub headers_timeout: Duration,
    /// `keepAliveTimeoutInSeconds`: time an idle connection stays open after its last response.
    pub keep_alive_timeout: Duration,
    /// `bodyTimeoutInSeconds`: time a request has to deliver its whole body.
    pub body_timeout: Duration,
    /// `drainDelayInSeconds`: on SIGTERM, time `/readyz` fails before the listener closes.
    pub drain_delay: Duration,
    /// `shutdownGraceInSeconds`: on SIGTERM, time requests in flight have to finish.
    pub shutdown_grace: Duration,
    /// `metricsToken`: the bearer token `GET /metrics` requires, if any.
    pub metrics_token: Option<Secret>,
    /// `maxPageSize`: the largest `page[size]` of a list; larger ones are answered 400.
    pub max_page_size: u64,
    /// `corsAllowedOrigins`: the origins whose browser requests may carry credentials (`*`: any).
    pub cors_allowed_origins: Vec<String>,
}

impl Default for HttpConfig {
    /// The settings of a server configured with nothing but its secrets and database.
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 3351)),
            prefix: String::new(),
            json_limit: DEFAULT_JSON_LIMIT,
            enable_raw_checking: false,
            limit_export_size: None,
            customize_error_message: None,
            max_header_size: usize::try_from(DEFAULT_MAX_HEADER_SIZE).unwrap_or(usize::MAX),
            headers_timeout: Duration::from_secs(DEFAULT_HEADERS_TIMEOUT_SECONDS),
            keep_alive_timeout: Duration::from_secs(DEFAULT_KEEP_ALIVE_TIMEOUT_SECONDS),
            body_timeout: Duration::from_secs(limits::DEFAULT_BODY_TIMEOUT_SECONDS),
            drain_delay: Duration::from_secs(limits::DEFAULT_DRAIN_DELAY_SECONDS),
            shutdown_grace: Duration::from_secs(limits::DEFAULT_SHUTDOWN_GRACE_SECONDS),
            metrics_token: None,
            max_page_size: DEFAULT_MAX_PAGE_SIZE,
            cors_allowed_origins: DEFAULT_CORS_ALLOWED_ORIGINS
                .iter()
                .map(|o| (*o).to_owned())
                .collect(),
        }
    }
}

/// `/{prefix}/v1`, the public API's base, for a mount path `/{prefix}/forest`: where `/v1`
/// routes are mounted (`http`) and the URLs that name them are built (`workflows`).
pub fn api_base_path(mount_path: &str) -> String {
    format!("{}/v1", mount_path.strip_suffix("/forest").unwrap_or(""))
}

impl HttpConfig {
    /// `/{prefix}/forest` with empty segments dropped, as the agent's `path.posix.join('/',
    /// prefix, 'forest')` gives it (the prefix charset admits no `.` segment to resolve).
    pub fn mount_path(&self) -> String {
        let mut path = String::new();
        for segment in self.prefix.split('/').filter(|s| !s.is_empty()) {
            path.push('/');
            path.push_str(segment);
        }
        path.push_str("/forest");
        path
    }
}

/// The schema file and the customizations checked against the schema.
#[derive(Debug, Clone)]
pub struct SchemaConfig {
    pub path: PathBuf,
    /// Never send the schema to the platform.
    pub skip_schema_update: bool,
    pub ignore_missing_schema_element_errors: bool,
    /// The most records an emulated sort or filter may load (`emulationRowLimit`).
    pub emulation_row_limit: u64,
    /// `typingsPath`: the typings file rewritten at start outside production.
    pub typings_path: Option<PathBuf>,
    /// `typingsMaxDepth`: the most relations a typings path goes through.
    pub typings_max_depth: u32,
}

/// Logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// A `tracing_subscriber::EnvFilter` directive; the spec's level names are lowercased.
    pub filter: String,
    pub format: LogFormat,
    /// `otelEndpoint`: the OTLP/HTTP collector spans are exported to (`otel` builds only).
    pub traces: Option<String>,
}

/// One log line per event, as text or as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// How permission documents are cached (protocol §5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionsConfig {
    pub instant_cache_refresh: bool,
    /// At least 60 seconds.
    pub cache_duration: Duration,
    pub skip_relation_read_permissions: bool,
    /// `strictScopes`: included to-one records outside the caller's scope on their collection
    /// are left out (`data: null`). Off restores the agent's behaviour.
    pub strict_scopes: bool,
}

/// Actions and their approvals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionsConfig {
    /// 1 to 500.
    pub max_records_for_approval: u32,
    pub use_unsafe_action_endpoint: bool,
}

/// `auditTrail`: on with `--audit-trail`, an `[auditTrail]` table in the file, or a database URL.
#[derive(Clone, PartialEq, Eq)]
pub struct AuditTrailConfig {
    /// `auditTrail.databaseUrl`: the SQLite, PostgreSQL or MariaDB database the trail is written
    /// to; `None` keeps it in Canopy's store.
    pub database_url: Option<String>,
    /// `auditTrail.critical` (default true): a change whose audit entry cannot be written is
    /// refused; false lets it through unaudited, with the error logged.
    pub critical: bool,
}

impl fmt::Debug for AuditTrailConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditTrailConfig")
            .field(
                "database_url",
                &self
                    .database_url
                    .as_deref()
                    .map(crate::datasource::sql::redact_url),
            )
            .field("critical", &self.critical)
            .finish()
    }
}

/// `experimental`: the no-code features, declared in the schema file's `meta.liana_features`;
/// any of them is incompatible with `skipSchemaUpdate`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExperimentalConfig {
    pub webhook_custom_actions: bool,
    pub update_record_custom_actions: bool,
    /// `[[noCodeActions]]` whose type is switched on (the others are left out with a warning).
    pub actions: Vec<NoCodeAction>,
}

impl ExperimentalConfig {
    /// Whether `action`'s type is switched on, and the switch's file key.
    pub fn switch_for(&self, action: &NoCodeAction) -> (bool, &'static str) {
        match action.kind {
            NoCodeKind::Webhook { .. } => (self.webhook_custom_actions, "webhookCustomActions"),
            NoCodeKind::UpdateRecord { .. } => (
                self.update_record_custom_actions,
                "updateRecordCustomActions",
            ),
        }
    }
}

/// Where a setting's value came from, so that a message can point at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A flag or its environment variable (clap does not say which).
    Cli {
        flag: &'static str,
        env: &'static str,
    },
    File(PathBuf),
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cli { flag, env } => write!(f, " (from {flag} or {env})"),
            Self::File(path) => write!(f, " (from {})", path.display()),
            Self::Default => Ok(()),
        }
    }
}

/// A setting that was accepted but deserves the operator's attention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The file key concerned, e.g. `maxBodySize`.
    pub key: &'static str,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// Why the configuration was refused; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("invalid configuration: {}: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("invalid configuration: {key} {problem}{origin}")]
    Invalid {
        key: String,
        problem: String,
        origin: Origin,
    },
}

impl ConfigError {
    /// The offending key, when one setting is at fault.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Invalid { key, .. } => Some(key),
            Self::Read { .. } | Self::Syntax { .. } => None,
        }
    }
}

fn invalid(key: impl Into<String>, problem: impl Into<String>, origin: &Origin) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        problem: problem.into(),
        origin: origin.clone(),
    }
}

const DEFAULT_LISTEN: &str = "127.0.0.1:3351";
const DEFAULT_SCHEMA_PATH: &str = ".forestadmin-schema.json";
/// `emulationRowLimit`: enough for an admin table, small enough to never exhaust memory.
const DEFAULT_EMULATION_ROW_LIMIT: u64 = 10_000;
const DEFAULT_TYPINGS_MAX_DEPTH: u32 = 5;
const DEFAULT_PERMISSIONS_CACHE_SECONDS: u64 = 900;
const MIN_PERMISSIONS_CACHE_SECONDS: u64 = 60;
/// The platform's cap on select-all approval actions.
const MAX_RECORDS_FOR_APPROVAL: u64 = 500;
const DEFAULT_JSON_LIMIT: u64 = 50 * 1024 * 1024;
const DATABASE_SCHEMES: [&str; 5] = [
    "sqlite:",
    "postgres://",
    "postgresql://",
    "mysql://",
    "mariadb://",
];

impl Config {
    /// Reads the config file named by `--config` / `CANOPY_CONFIG`, if any, and merges it under
    /// the flags and variables that clap already put in `args`.
    pub fn load(args: ServeArgs) -> Result<(Self, Vec<Warning>), ConfigError> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
                    path: path.clone(),
                    error,
                })?;
                Some((path.clone(), parse_file(path, &text)?))
            }
            None => None,
        };
        resolve(args, file)
    }
}

fn parse_file(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|error| ConfigError::Syntax {
        path: path.to_owned(),
        message: error.to_string().trim_end().to_owned(),
    })
}

/// A value and where it came from.
struct Sourced<T> {
    value: T,
    origin: Origin,
}

/// Picks the strongest of a flag-or-variable value and a file value.
struct Layers {
    file: Option<PathBuf>,
}

impl Layers {
    fn pick<T>(
        &self,
        cli: Option<T>,
        (flag, env): (&'static str, &'static str),
        file: Option<T>,
    ) -> Option<Sourced<T>> {
        match (cli, file) {
            (Some(value), _) => Some(Sourced {
                value,
                origin: Origin::Cli { flag, env },
            }),
            (None, Some(value)) => Some(Sourced {
                value,
                origin: self.file_origin(),
            }),
            (None, None) => None,
        }
    }

    fn file_origin(&self) -> Origin {
        self.file.clone().map_or(Origin::Default, Origin::File)
    }
}

/// Merges the layers, applies defaults and validates, key by key. Each part takes its settings
/// out of `args` and `file` with `Option::take`, so the parts can share both structs.
fn resolve(
    mut args: ServeArgs,
    file: Option<(PathBuf, FileConfig)>,
) -> Result<(Config, Vec<Warning>), ConfigError> {
    let (path, mut file) = match file {
        Some((path, file)) => (Some(path), file),
        None => (None, FileConfig::default()),
    };
    let layers = Layers { file: path };
    let mut warnings = Vec::new();

    let datasources = resolve_datasources(
        &layers,
        args.database_url.take(),
        file.database_url.take(),
        std::mem::take(&mut file.datasources),
    )?;
    let auth = resolve_auth(&layers, &mut args, &mut file)?;
    let is_production = value_or(
        layers.pick(
            args.production.take(),
            ("--production", "CANOPY_PRODUCTION"),
            file.is_production.take(),
        ),
        false,
    );
    let plugin_dir = layers
        .pick(
            args.plugin_dir.take(),
            ("--plugins", "CANOPY_PLUGIN_DIR"),
            file.plugin_dir.take(),
        )
        .map(|p| p.value);
    let workflows_dir = layers
        .pick(
            args.workflows_dir.take(),
            ("--workflows-dir", "CANOPY_WORKFLOWS_DIR"),
            file.workflows_dir.take(),
        )
        .map(|p| p.value);
    let log = resolve_log(&layers, &mut args, &mut file)?;
    let schema = resolve_schema(&layers, &mut args, &mut file, &mut warnings);
    let limits = limits::resolve_limits(&layers, &mut args, &mut file)?;
    let mut http = resolve_http(&layers, &mut args, &mut file, &mut warnings)?;
    http.max_header_size = limits.max_header_size;
    http.headers_timeout = limits.headers_timeout;
    http.keep_alive_timeout = limits.keep_alive_timeout;
    http.body_timeout = limits.body_timeout;
    http.drain_delay = limits.drain_delay;
    http.shutdown_grace = limits.shutdown_grace;
    http.max_page_size = limits.max_page_size;
    http.cors_allowed_origins = limits.cors_allowed_origins;
    let permissions = resolve_permissions(&layers, &mut args, &mut file, &mut warnings);
    let actions = resolve_actions(&layers, &mut args, &mut file)?;
    let workflow_executor_url = resolve_workflow_executor_url(&layers, &mut args, &mut file)?;
    let audit_trail = resolve_audit_trail(&layers, &mut args, &mut file)?;
    let experimental = resolve_experimental(&layers, &mut args, &mut file, &mut warnings)?;
    let platform = platform::resolve_platform(&layers, &mut args, &mut file)?;
    let login = login::resolve_login(&layers, &mut args.login, &mut file)?;
    let rate_limit = ratelimit::resolve_rate_limits(&layers, &mut args.rate_limit, &mut file)?;
    let workflow_engine = engine::resolve_engine(&layers, &mut args.workflow_engine, &mut file)?;
    let triggers = triggers::resolve_triggers(&layers, &mut args.triggers, &mut file)?;
    let mcp = mcp::resolve_mcp(
        &layers,
        &mut args.mcp,
        &mut file,
        login.public_url.as_deref(),
        &mut warnings,
    )?;
    // The experimental no-code features are configured from the schema the platform receives.
    if schema.skip_schema_update
        && (experimental.webhook_custom_actions || experimental.update_record_custom_actions)
    {
        return Err(invalid(
            "experimental",
            "is incompatible with skipSchemaUpdate: turn one of them off",
            &Origin::Default,
        ));
    }

    let dashboard = dashboard::resolve(file.dashboard.take()).map_err(|(index, problem)| {
        invalid(
            format!("dashboard.chart[{index}]"),
            problem,
            &layers.file_origin(),
        )
    })?;
    let config = Config {
        datasources,
        auth,
        http,
        schema,
        log,
        permissions,
        actions,
        is_production,
        plugin_dir,
        workflows_dir,
        workflow_executor_url,
        audit_trail,
        experimental,
        native_query_timeout: limits.native_query_timeout,
        platform,
        login,
        rate_limit,
        workflow_engine,
        triggers,
        mcp,
        dashboard,
    };
    Ok((config, warnings))
}

fn value_or<T>(picked: Option<Sourced<T>>, default: T) -> T {
    picked.map_or(default, |p| p.value)
}

fn resolve_auth(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
) -> Result<AuthConfig, ConfigError> {
    let auth_secret = layers
        .pick(
            args.auth_secret.take(),
            ("--auth-secret", "CANOPY_AUTH_SECRET"),
            file.auth_secret.take(),
        )
        .filter(|s| !s.value.is_empty())
        .ok_or_else(|| {
            invalid(
                "authSecret",
                "is required: set --auth-secret, CANOPY_AUTH_SECRET or authSecret in the config file",
                &Origin::Default,
            )
        })?;
    let env_secret = layers
        .pick(
            args.env_secret.take(),
            ("--env-secret", "CANOPY_ENV_SECRET"),
            file.env_secret.take(),
        )
        .ok_or_else(|| {
            invalid(
                "envSecret",
                "is required: set --env-secret, CANOPY_ENV_SECRET or envSecret in the config file",
                &Origin::Default,
            )
        })?;
    if env_secret.value.len() != 64 || !env_secret.value.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid(
            "envSecret",
            "must be 64 hexadecimal characters",
            &env_secret.origin,
        ));
    }
    Ok(AuthConfig {
        auth_secret: Secret(auth_secret.value),
        env_secret: Secret(env_secret.value),
    })
}

fn resolve_log(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
) -> Result<LogConfig, ConfigError> {
    let filter = match layers.pick(
        args.log_level.take(),
        ("--log-level", "CANOPY_LOG_LEVEL"),
        file.logger_level.take(),
    ) {
        Some(level) => log_filter(&level.value).ok_or_else(|| {
            invalid(
                "loggerLevel",
                format!(
                    "must be Debug, Info, Warn or Error, or a tracing filter such as \
                     `info,canopy=debug`, not `{}`",
                    level.value
                ),
                &level.origin,
            )
        })?,
        None => "info".to_owned(),
    };
    let format = match layers.pick(
        args.log_format.take(),
        ("--log-format", "CANOPY_LOG_FORMAT"),
        file.log_format.take(),
    ) {
        Some(format) => match format.value.to_ascii_lowercase().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => {
                return Err(invalid(
                    "logFormat",
                    format!("must be `text` or `json`, not `{}`", format.value),
                    &format.origin,
                ));
            }
        },
        None => LogFormat::Text,
    };
    let traces = match layers.pick(
        args.otel_endpoint.take(),
        ("--otel-endpoint", "CANOPY_OTEL_ENDPOINT"),
        file.otel_endpoint.take(),
    ) {
        Some(endpoint) => {
            if !crate::logging::TRACES_BUILT {
                return Err(invalid(
                    "otelEndpoint",
                    crate::logging::TRACES_NOT_BUILT,
                    &endpoint.origin,
                ));
            }
            let url = endpoint.value.trim();
            let parsed = reqwest::Url::parse(url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
            if parsed.is_none() {
                return Err(invalid(
                    "otelEndpoint",
                    format!(
                        "must be the http(s) URL of an OTLP/HTTP collector, such as \
                         `http://127.0.0.1:4318`, not `{url}`"
                    ),
                    &endpoint.origin,
                ));
            }
            Some(url.to_owned())
        }
        None => None,
    };
    Ok(LogConfig {
        filter,
        format,
        traces,
    })
}

fn resolve_schema(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
    warnings: &mut Vec<Warning>,
) -> SchemaConfig {
    let skip_schema_update = value_or(
        layers.pick(
            args.skip_schema_update.take(),
            ("--skip-schema-update", "CANOPY_SKIP_SCHEMA_UPDATE"),
            file.skip_schema_update.take(),
        ),
        false,
    );
    if skip_schema_update {
        warnings.push(Warning {
            key: "skipSchemaUpdate",
            message: "is set: the schema is never sent to the platform, so changes to it will not \
                      show in the UI"
                .into(),
        });
    }
    SchemaConfig {
        path: layers
            .pick(
                args.schema_path.take(),
                ("--schema-path", "CANOPY_SCHEMA_PATH"),
                file.schema_path.take(),
            )
            .map_or_else(|| PathBuf::from(DEFAULT_SCHEMA_PATH), |p| p.value),
        skip_schema_update,
        ignore_missing_schema_element_errors: value_or(
            layers.pick(
                args.ignore_missing_schema_element_errors.take(),
                (
                    "--ignore-missing-schema-element-errors",
                    "CANOPY_IGNORE_MISSING_SCHEMA_ELEMENT_ERRORS",
                ),
                file.ignore_missing_schema_element_errors.take(),
            ),
            false,
        ),
        emulation_row_limit: value_or(
            layers.pick(
                args.emulation_row_limit.take(),
                ("--emulation-row-limit", "CANOPY_EMULATION_ROW_LIMIT"),
                file.emulation_row_limit.take(),
            ),
            DEFAULT_EMULATION_ROW_LIMIT,
        ),
        typings_path: layers
            .pick(
                args.typings_path.take(),
                ("--typings-path", "CANOPY_TYPINGS_PATH"),
                file.typings_path.take(),
            )
            .map(|p| p.value),
        typings_max_depth: value_or(
            layers.pick(
                args.typings_max_depth.take(),
                ("--typings-max-depth", "CANOPY_TYPINGS_MAX_DEPTH"),
                file.typings_max_depth.take(),
            ),
            DEFAULT_TYPINGS_MAX_DEPTH,
        ),
    }
}

fn resolve_http(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
    warnings: &mut Vec<Warning>,
) -> Result<HttpConfig, ConfigError> {
    let listen = match layers.pick(
        args.listen.take(),
        ("--listen", "CANOPY_LISTEN"),
        file.listen.take(),
    ) {
        Some(listen) => listen.value.parse::<SocketAddr>().map_err(|_| {
            invalid(
                "listen",
                format!(
                    "must be an IP address and a port such as {DEFAULT_LISTEN}, not `{}`",
                    listen.value
                ),
                &listen.origin,
            )
        })?,
        None => SocketAddr::from(([127, 0, 0, 1], 3351)),
    };

    let prefix = match layers.pick(
        args.prefix.take(),
        ("--prefix", "CANOPY_PREFIX"),
        file.prefix.take(),
    ) {
        Some(prefix) => {
            // The agent's `^[-~/\w]*$`, where JavaScript's `\w` is ASCII only.
            let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '~' | '/' | '_');
            if !prefix.value.chars().all(allowed) {
                return Err(invalid(
                    "prefix",
                    format!(
                        "may only hold `-`, `~`, `/`, ASCII letters, digits and `_`, not `{}`",
                        prefix.value
                    ),
                    &prefix.origin,
                ));
            }
            prefix.value
        }
        None => String::new(),
    };

    let body_parser = file.body_parser_options.take().unwrap_or_default();
    let max_body_size = file.max_body_size.take();
    if max_body_size.is_some() {
        warnings.push(Warning {
            key: "maxBodySize",
            message:
                "is deprecated; use bodyParserOptions.jsonLimit (--json-limit, CANOPY_JSON_LIMIT)"
                    .into(),
        });
    }
    // As in the agent: jsonLimit first, the deprecated maxBodySize only in its absence.
    let json_limit = match layers.pick(
        args.json_limit.take().map(Size::Text),
        ("--json-limit", "CANOPY_JSON_LIMIT"),
        body_parser.json_limit,
    ) {
        Some(size) => size_bytes("bodyParserOptions.jsonLimit", &size)?,
        None => match max_body_size {
            Some(size) => size_bytes(
                "maxBodySize",
                &Sourced {
                    value: size,
                    origin: layers.file_origin(),
                },
            )?,
            None => DEFAULT_JSON_LIMIT,
        },
    };

    let limit_export_size = match layers.pick(
        args.limit_export_size.take(),
        ("--limit-export-size", "CANOPY_LIMIT_EXPORT_SIZE"),
        file.limit_export_size.take(),
    ) {
        Some(limit) if limit.value == 0 => {
            return Err(invalid(
                "limitExportSize",
                "must be at least 1; leave it unset for unlimited exports",
                &limit.origin,
            ));
        }
        limit => limit.map(|l| l.value),
    };

    let customize_error_message = match layers.pick(
        args.customize_error_message.take(),
        (
            "--customize-error-message",
            "CANOPY_CUSTOMIZE_ERROR_MESSAGE",
        ),
        file.customize_error_message.take(),
    ) {
        Some(template) => Some(
            ErrorMessageTemplate::parse(&template.value)
                .map_err(|problem| invalid("customizeErrorMessage", problem, &template.origin))?,
        ),
        None => None,
    };

    Ok(HttpConfig {
        listen,
        prefix,
        json_limit,
        enable_raw_checking: value_or(
            layers.pick(
                args.enable_raw_checking.take(),
                ("--enable-raw-checking", "CANOPY_ENABLE_RAW_CHECKING"),
                body_parser.enable_raw_checking,
            ),
            false,
        ),
        limit_export_size,
        customize_error_message,
        metrics_token: match layers.pick(
            args.metrics_token.take(),
            ("--metrics-token", "CANOPY_METRICS_TOKEN"),
            file.metrics_token.take(),
        ) {
            // A short token is guessable: the metrics name plugins and traffic.
            Some(token) if token.value.len() < 16 => {
                return Err(invalid(
                    "metricsToken",
                    "must be at least 16 characters",
                    &token.origin,
                ));
            }
            token => token.map(|t| Secret(t.value)),
        },
        // Set by `resolve` from the limits.
        ..HttpConfig::default()
    })
}

fn resolve_permissions(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
    warnings: &mut Vec<Warning>,
) -> PermissionsConfig {
    let instant_cache_refresh = value_or(
        layers.pick(
            args.instant_cache_refresh.take(),
            ("--instant-cache-refresh", "CANOPY_INSTANT_CACHE_REFRESH"),
            file.instant_cache_refresh.take(),
        ),
        true,
    );
    let seconds = match layers.pick(
        args.permissions_cache_duration_in_seconds.take(),
        (
            "--permissions-cache-duration-in-seconds",
            "CANOPY_PERMISSIONS_CACHE_DURATION_IN_SECONDS",
        ),
        file.permissions_cache_duration_in_seconds.take(),
    ) {
        Some(seconds) => {
            if instant_cache_refresh {
                warnings.push(Warning {
                    key: "permissionsCacheDurationInSeconds",
                    message: "is ignored while instantCacheRefresh is true".into(),
                });
            }
            if seconds.value < MIN_PERMISSIONS_CACHE_SECONDS {
                warnings.push(Warning {
                    key: "permissionsCacheDurationInSeconds",
                    message: format!(
                        "{} is below the minimum; raised to {MIN_PERMISSIONS_CACHE_SECONDS}",
                        seconds.value
                    ),
                });
            }
            seconds.value.max(MIN_PERMISSIONS_CACHE_SECONDS)
        }
        None => DEFAULT_PERMISSIONS_CACHE_SECONDS,
    };
    let skip_relation_read_permissions = value_or(
        layers.pick(
            args.skip_relation_read_permissions.take(),
            (
                "--skip-relation-read-permissions",
                "CANOPY_SKIP_RELATION_READ_PERMISSIONS",
            ),
            file.skip_relation_read_permissions.take(),
        ),
        false,
    );
    if skip_relation_read_permissions {
        warnings.push(Warning {
            key: "skipRelationReadPermissions",
            message: "is set: columns of collections without read permission are served when \
                      reached through a relation"
                .into(),
        });
    }
    let strict_scopes = value_or(
        layers.pick(
            args.strict_scopes.take(),
            ("--strict-scopes", "CANOPY_STRICT_SCOPES"),
            file.strict_scopes.take(),
        ),
        true,
    );
    if !strict_scopes {
        warnings.push(Warning {
            key: "strictScopes",
            message: "is false: records included through a to-one relation are served even \
                      when the caller's scope on their collection excludes them"
                .into(),
        });
    }
    PermissionsConfig {
        instant_cache_refresh,
        cache_duration: Duration::from_secs(seconds),
        skip_relation_read_permissions,
        strict_scopes,
    }
}

/// `auditTrail`: on when `--audit-trail` (or `enabled` in the file's `[auditTrail]`) says so,
/// else when the file has an `[auditTrail]` table or a database URL is given anywhere.
fn resolve_audit_trail(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
) -> Result<Option<AuditTrailConfig>, ConfigError> {
    let table = file.audit_trail.take();
    let in_file = table.is_some();
    let table = table.unwrap_or_default();
    let url = layers.pick(
        args.audit_trail_database_url.take(),
        (
            "--audit-trail-database-url",
            "CANOPY_AUDIT_TRAIL_DATABASE_URL",
        ),
        table.database_url,
    );
    if let Some(url) = &url {
        check_database_url("auditTrail.databaseUrl", url)?;
    }
    let enabled = layers.pick(
        args.audit_trail.take(),
        ("--audit-trail", "CANOPY_AUDIT_TRAIL"),
        table.enabled,
    );
    let on = match enabled {
        Some(enabled) => enabled.value,
        None => in_file || url.is_some(),
    };
    let critical = value_or(
        layers.pick(
            args.audit_trail_critical.take(),
            ("--audit-trail-critical", "CANOPY_AUDIT_TRAIL_CRITICAL"),
            table.critical,
        ),
        true,
    );
    Ok(on.then(|| AuditTrailConfig {
        database_url: url.map(|u| u.value),
        critical,
    }))
}

fn resolve_actions(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
) -> Result<ActionsConfig, ConfigError> {
    let max_records_for_approval = match layers.pick(
        args.max_records_for_approval.take(),
        (
            "--max-records-for-approval",
            "CANOPY_MAX_RECORDS_FOR_APPROVAL",
        ),
        file.max_records_for_approval.take(),
    ) {
        Some(max) => u32::try_from(max.value)
            .ok()
            .filter(|&m| (1..=MAX_RECORDS_FOR_APPROVAL).contains(&u64::from(m)))
            .ok_or_else(|| {
                invalid(
                    "maxRecordsForApproval",
                    format!(
                        "must be between 1 and {MAX_RECORDS_FOR_APPROVAL} (the platform's cap), not {}",
                        max.value
                    ),
                    &max.origin,
                )
            })?,
        None => 500,
    };
    Ok(ActionsConfig {
        max_records_for_approval,
        use_unsafe_action_endpoint: value_or(
            layers.pick(
                args.use_unsafe_action_endpoint.take(),
                (
                    "--use-unsafe-action-endpoint",
                    "CANOPY_USE_UNSAFE_ACTION_ENDPOINT",
                ),
                file.use_unsafe_action_endpoint.take(),
            ),
            false,
        ),
    })
}

fn resolve_workflow_executor_url(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
) -> Result<Option<String>, ConfigError> {
    let Some(url) = layers.pick(
        args.workflow_executor_url.take(),
        ("--workflow-executor-url", "CANOPY_WORKFLOW_EXECUTOR_URL"),
        file.workflow_executor_url.take(),
    ) else {
        return Ok(None);
    };
    let rest = url
        .value
        .strip_prefix("https://")
        .or_else(|| url.value.strip_prefix("http://"));
    if rest.is_none_or(str::is_empty) {
        return Err(invalid(
            "workflowExecutorUrl",
            format!("must be an http:// or https:// URL, not `{}`", url.value),
            &url.origin,
        ));
    }
    Ok(Some(url.value))
}

fn resolve_experimental(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
    warnings: &mut Vec<Warning>,
) -> Result<ExperimentalConfig, ConfigError> {
    let file_experimental = file.experimental.take().unwrap_or_default();
    let webhook_custom_actions = value_or(
        layers.pick(
            args.experimental_webhook_custom_actions.take(),
            (
                "--experimental-webhook-custom-actions",
                "CANOPY_EXPERIMENTAL_WEBHOOK_CUSTOM_ACTIONS",
            ),
            file_experimental.webhook_custom_actions,
        ),
        false,
    );
    let update_record_custom_actions = value_or(
        layers.pick(
            args.experimental_update_record_custom_actions.take(),
            (
                "--experimental-update-record-custom-actions",
                "CANOPY_EXPERIMENTAL_UPDATE_RECORD_CUSTOM_ACTIONS",
            ),
            file_experimental.update_record_custom_actions,
        ),
        false,
    );
    let defined = no_code::resolve(std::mem::take(&mut file.no_code_actions)).map_err(
        |(index, problem)| {
            invalid(
                format!("noCodeActions[{index}]"),
                problem,
                &layers.file_origin(),
            )
        },
    )?;
    // As in the agent, a type is served only when its switch is on.
    let mut experimental = ExperimentalConfig {
        webhook_custom_actions,
        update_record_custom_actions,
        actions: Vec::new(),
    };
    for action in defined {
        match experimental.switch_for(&action) {
            (true, _) => experimental.actions.push(action),
            (false, switch) => warnings.push(Warning {
                key: "noCodeActions",
                message: format!(
                    "the {} action '{}' of '{}' is not served: turn on experimental.{switch}",
                    action.type_name(),
                    action.name,
                    action.collection
                ),
            }),
        }
    }
    Ok(experimental)
}

/// The file's `databaseUrl` or `[[datasources]]`, under `--database-url`.
fn resolve_datasources(
    layers: &Layers,
    cli_url: Option<String>,
    file_url: Option<String>,
    file_datasources: Vec<FileDatasource>,
) -> Result<Vec<DatasourceConfig>, ConfigError> {
    if file_url.is_some() && !file_datasources.is_empty() {
        return Err(invalid(
            "databaseUrl",
            "cannot be combined with [[datasources]] in the same file; give the URL in its entry",
            &layers.file_origin(),
        ));
    }
    // Errors about a URL given as `databaseUrl` name that key rather than `datasources[0].url`.
    let mut named_by_database_url =
        file_url.is_some() || (cli_url.is_some() && file_datasources.is_empty());
    let mut entries: Vec<(FileDatasource, Origin)> = match file_url {
        Some(url) => vec![(
            FileDatasource {
                url: Some(url),
                ..FileDatasource::default()
            },
            layers.file_origin(),
        )],
        None => file_datasources
            .into_iter()
            .map(|entry| (entry, layers.file_origin()))
            .collect(),
    };
    // A lone entry takes the URL from the environment, so that its password stays out of the file.
    if let Some(url) = cli_url {
        let origin = Origin::Cli {
            flag: "--database-url",
            env: "CANOPY_DATABASE_URL",
        };
        match entries.as_mut_slice() {
            [] => entries.push((
                FileDatasource {
                    url: Some(url),
                    ..FileDatasource::default()
                },
                origin,
            )),
            [(entry, entry_origin)] => {
                entry.url = Some(url);
                *entry_origin = origin;
                named_by_database_url = true;
            }
            several => {
                return Err(invalid(
                    "databaseUrl",
                    format!(
                        "cannot stand for the {} [[datasources]] of the config file; set each url there",
                        several.len()
                    ),
                    &origin,
                ));
            }
        }
    }
    if entries.is_empty() {
        return Err(invalid(
            "databaseUrl",
            "is required: set --database-url, CANOPY_DATABASE_URL, or [[datasources]] in a config file",
            &Origin::Default,
        ));
    }

    let mut connections = BTreeSet::new();
    let mut datasources = Vec::with_capacity(entries.len());
    for (index, (entry, origin)) in entries.into_iter().enumerate() {
        let key = |field: &str| format!("datasources[{index}].{field}");
        let url = entry
            .url
            .ok_or_else(|| invalid(key("url"), "is required", &origin))?;
        let url_key = if named_by_database_url {
            "databaseUrl".to_owned()
        } else {
            key("url")
        };
        check_database_url(
            &url_key,
            &Sourced {
                value: url.clone(),
                origin: origin.clone(),
            },
        )?;
        let file_origin = layers.file_origin();
        let mut targets = BTreeSet::new();
        for (from, to) in &entry.rename {
            if to.is_empty() {
                return Err(invalid(
                    key("rename"),
                    format!("renames `{from}` to an empty name"),
                    &file_origin,
                ));
            }
            if !targets.insert(to) {
                return Err(invalid(
                    key("rename"),
                    format!("renames two collections to `{to}`"),
                    &file_origin,
                ));
            }
        }
        if let Some(name) = &entry.native_query_connection {
            if name.is_empty() {
                return Err(invalid(
                    key("nativeQueryConnection"),
                    "must not be empty",
                    &file_origin,
                ));
            }
            if !connections.insert(name.clone()) {
                return Err(invalid(
                    key("nativeQueryConnection"),
                    format!("`{name}` already names another datasource's connection"),
                    &file_origin,
                ));
            }
        }
        datasources.push(DatasourceConfig {
            url,
            include: entry.include,
            exclude: entry.exclude,
            rename: entry.rename,
            native_query_connection: entry.native_query_connection,
        });
    }
    Ok(datasources)
}

fn check_database_url(key: &str, url: &Sourced<String>) -> Result<(), ConfigError> {
    if DATABASE_SCHEMES
        .iter()
        .any(|scheme| url.value.starts_with(scheme))
    {
        return Ok(());
    }
    Err(invalid(
        key,
        format!(
            "must start with sqlite:, postgres://, postgresql://, mysql:// or mariadb://, not `{}`",
            crate::datasource::sql::redact_url(&url.value)
        ),
        &url.origin,
    ))
}

fn size_bytes(key: &str, size: &Sourced<Size>) -> Result<u64, ConfigError> {
    match &size.value {
        Size::Bytes(bytes) => Ok(*bytes),
        Size::Text(text) => parse_size(text).ok_or_else(|| {
            invalid(
                key,
                format!("must be a byte count or a size such as `50mb` or `1kb`, not `{text}`"),
                &size.origin,
            )
        }),
    }
}

/// The spec's level names (any case) become tracing's; anything with a target or several
/// directives must parse as a tracing filter. A lone unknown word is refused rather than read as
/// a target name, which would turn a typo like `inf` into "log everything from target inf".
fn log_filter(level: &str) -> Option<String> {
    let lower = level.trim().to_ascii_lowercase();
    match lower.as_str() {
        "trace" | "debug" | "info" | "warn" | "error" | "off" => Some(lower),
        _ if level.contains(['=', ',']) => tracing_subscriber::EnvFilter::try_new(level)
            .ok()
            .map(|_| level.trim().to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
