//! Settings of Canopy's own store and of where permissions come from.

use std::path::PathBuf;

use super::file::FileConfig;
use super::{ConfigError, Layers, Origin, ServeArgs, invalid, value_or};
use crate::platform::activity::Retention;

const DEFAULT_DATA_DIR: &str = ".canopy";
const DEFAULT_PROJECT: &str = "canopy";
const DEFAULT_ENVIRONMENT: &str = "production";
const DEFAULT_PERMISSIONS_FILE: &str = "permissions.toml";
/// `activityLogRetentionDays`: a quarter of entries, then they go.
pub const DEFAULT_ACTIVITY_LOG_RETENTION_DAYS: u32 = 90;
/// The longest retention accepted (100 years): beyond, say 0 (forever).
const MAX_ACTIVITY_LOG_RETENTION_DAYS: u64 = 36_500;

/// Canopy's store, the project and environment this process serves, and the permission source.
#[derive(Clone, PartialEq, Eq)]
pub struct PlatformConfig {
    /// `stateUrl`: `sqlite:` or `postgres:`; defaults to a SQLite file in `data_dir`.
    pub state_url: String,
    pub data_dir: PathBuf,
    pub project: String,
    pub environment: String,
    /// `forestServerUrl`: read the permission documents from this server instead of the store.
    pub server_url: Option<String>,
    /// The declarative permissions file, when given or when `permissions.toml` exists.
    pub permissions_file: Option<PathBuf>,
    /// `activityLogs`: record the users' operations in the activity log (default true).
    pub activity_logs: bool,
    /// `activityLogRetentionDays` and `activityLogMaxRows`: what the activity log keeps.
    pub activity_retention: Retention,
}

impl std::fmt::Debug for PlatformConfig {
    // The state URL may carry a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlatformConfig")
            .field(
                "state_url",
                &crate::datasource::sql::redact_url(&self.state_url),
            )
            .field("data_dir", &self.data_dir)
            .field("project", &self.project)
            .field("environment", &self.environment)
            .field("server_url", &self.server_url)
            .field("permissions_file", &self.permissions_file)
            .field("activity_logs", &self.activity_logs)
            .field("activity_retention", &self.activity_retention)
            .finish()
    }
}

impl PlatformConfig {
    /// The settings of a process with its store in `data_dir` and nothing else configured.
    pub fn in_dir(data_dir: impl Into<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        Self {
            state_url: crate::platform::store::default_sqlite_url(&data_dir),
            data_dir,
            project: DEFAULT_PROJECT.to_owned(),
            environment: DEFAULT_ENVIRONMENT.to_owned(),
            server_url: None,
            permissions_file: None,
            activity_logs: true,
            activity_retention: Retention {
                days: Some(DEFAULT_ACTIVITY_LOG_RETENTION_DAYS),
                max_rows: None,
            },
        }
    }
}

/// A project or environment name: it appears in URL paths, so it is kept to a safe alphabet.
fn check_name(key: &'static str, value: &str, origin: &Origin) -> Result<(), ConfigError> {
    let valid = !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(())
    } else {
        Err(invalid(
            key,
            format!("{value:?} must be 1 to 64 ASCII letters, digits, '-', '_' or '.'"),
            origin,
        ))
    }
}

pub(super) fn resolve_platform(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
) -> Result<PlatformConfig, ConfigError> {
    let data_dir = value_or(
        layers.pick(
            args.data_dir.take(),
            ("--data-dir", "CANOPY_DATA_DIR"),
            file.data_dir.take(),
        ),
        PathBuf::from(DEFAULT_DATA_DIR),
    );
    let state_url = match layers.pick(
        args.state_url.take(),
        ("--state-url", "CANOPY_STATE_URL"),
        file.state_url.take(),
    ) {
        Some(url) => {
            let ok = ["sqlite:", "postgres://", "postgresql://"]
                .iter()
                .any(|scheme| url.value.starts_with(scheme));
            if !ok {
                return Err(invalid(
                    "stateUrl",
                    "must start with sqlite: or postgres:// (Canopy's store runs on SQLite or PostgreSQL)",
                    &url.origin,
                ));
            }
            url.value
        }
        None => crate::platform::store::default_sqlite_url(&data_dir),
    };
    let mut names = Vec::new();
    for (key, flag, cli, from_file, default) in [
        (
            "project",
            ("--project", "CANOPY_PROJECT"),
            args.project.take(),
            file.project.take(),
            DEFAULT_PROJECT,
        ),
        (
            "environment",
            ("--environment", "CANOPY_ENVIRONMENT"),
            args.environment.take(),
            file.environment.take(),
            DEFAULT_ENVIRONMENT,
        ),
    ] {
        let value = match layers.pick(cli, flag, from_file) {
            Some(picked) => {
                check_name(key, &picked.value, &picked.origin)?;
                picked.value
            }
            None => default.to_owned(),
        };
        names.push(value);
    }
    let server_url = match layers.pick(
        args.server_url.take(),
        ("--server-url", "SERVICE_SERVER_URL"),
        file.forest_server_url.take(),
    ) {
        Some(url) => {
            if !(url.value.starts_with("http://") || url.value.starts_with("https://")) {
                return Err(invalid(
                    "forestServerUrl",
                    format!("{:?} must be an http:// or https:// URL", url.value),
                    &url.origin,
                ));
            }
            Some(url.value.trim_end_matches('/').to_owned())
        }
        None => None,
    };
    let permissions_file = match layers.pick(
        args.permissions_file.take(),
        ("--permissions-file", "CANOPY_PERMISSIONS_FILE"),
        file.permissions_file.take(),
    ) {
        Some(path) => Some(path.value),
        None => {
            let default = PathBuf::from(DEFAULT_PERMISSIONS_FILE);
            default.exists().then_some(default)
        }
    };
    let activity_logs = layers
        .pick(
            args.activity_logs.take(),
            ("--activity-logs", "CANOPY_ACTIVITY_LOGS"),
            file.activity_logs.take(),
        )
        .is_none_or(|picked| picked.value);
    let activity_retention = resolve_retention(layers, args, file)?;
    let environment = names.pop().unwrap_or_default();
    let project = names.pop().unwrap_or_default();
    Ok(PlatformConfig {
        state_url,
        data_dir,
        project,
        environment,
        server_url,
        permissions_file,
        activity_logs,
        activity_retention,
    })
}

/// `activityLogRetentionDays` (0: forever) and `activityLogMaxRows` (0: no cap).
fn resolve_retention(
    layers: &Layers,
    args: &mut ServeArgs,
    file: &mut FileConfig,
) -> Result<Retention, ConfigError> {
    let days = match layers.pick(
        args.activity_log_retention_days.take(),
        (
            "--activity-log-retention-days",
            "CANOPY_ACTIVITY_LOG_RETENTION_DAYS",
        ),
        file.activity_log_retention_days.take(),
    ) {
        None => Some(DEFAULT_ACTIVITY_LOG_RETENTION_DAYS),
        Some(picked) if picked.value == 0 => None,
        Some(picked) => Some(
            u32::try_from(picked.value)
                .ok()
                .filter(|days| u64::from(*days) <= MAX_ACTIVITY_LOG_RETENTION_DAYS)
                .ok_or_else(|| {
                    invalid(
                        "activityLogRetentionDays",
                        format!(
                            "{} must be at most {MAX_ACTIVITY_LOG_RETENTION_DAYS} (0 keeps the \
                             entries forever)",
                            picked.value
                        ),
                        &picked.origin,
                    )
                })?,
        ),
    };
    let max_rows = layers
        .pick(
            args.activity_log_max_rows.take(),
            ("--activity-log-max-rows", "CANOPY_ACTIVITY_LOG_MAX_ROWS"),
            file.activity_log_max_rows.take(),
        )
        .map(|picked| picked.value)
        .filter(|rows| *rows > 0);
    Ok(Retention { days, max_rows })
}
