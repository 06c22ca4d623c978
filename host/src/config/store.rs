//! The settings of the commands that only manage Canopy's store (`canopy users|teams|roles|
//! permissions|init`): the same store, project and environment as `canopy serve` reads from the
//! same flags, variables and config file, without asking for a database or secrets.

use std::path::PathBuf;

use clap::Args;

use super::file::FileConfig;
use super::{ConfigError, DEFAULT_SCHEMA_PATH, Layers, PlatformConfig, ServeArgs, parse_file};

/// Where Canopy's store is. Precedence: config file < environment variable < flag.
#[derive(Debug, Default, Clone, Args)]
pub struct StoreArgs {
    /// The config file of `canopy serve` (only its store, project, environment and schema path
    /// settings are read here). [default: none]
    #[arg(long, env = "CANOPY_CONFIG", value_name = "PATH", global = true)]
    pub config: Option<PathBuf>,

    /// Canopy's own store: sqlite:path?mode=rwc or postgres://…. [default: sqlite file
    /// canopy.sqlite in --data-dir] [file key: stateUrl]
    #[arg(long, env = "CANOPY_STATE_URL", value_name = "URL", global = true)]
    pub state_url: Option<String>,

    /// Folder of Canopy's own files (the default SQLite store). [default: .canopy]
    /// [file key: dataDir]
    #[arg(long, env = "CANOPY_DATA_DIR", value_name = "PATH", global = true)]
    pub data_dir: Option<PathBuf>,

    /// The project, as named in /v1/project/{project}/… paths. [default: canopy]
    /// [file key: project]
    #[arg(long, env = "CANOPY_PROJECT", value_name = "NAME", global = true)]
    pub project: Option<String>,

    /// The environment whose permissions are read and changed. [default: production]
    /// [file key: environment]
    #[arg(long, env = "CANOPY_ENVIRONMENT", value_name = "NAME", global = true)]
    pub environment: Option<String>,

    /// The schema file that collection, field and action names are checked against.
    /// [default: .forestadmin-schema.json] [file key: schemaPath]
    #[arg(long, env = "CANOPY_SCHEMA_PATH", value_name = "PATH", global = true)]
    pub schema_path: Option<PathBuf>,
}

/// The store settings and the schema file, resolved.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub platform: PlatformConfig,
    pub schema_path: PathBuf,
}

impl StoreArgs {
    /// Merges the flags with the config file, as `Config::load` does for `canopy serve`.
    pub fn load(self) -> Result<StoreConfig, ConfigError> {
        let (path, mut file) = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
                    path: path.clone(),
                    error,
                })?;
                (Some(path.clone()), parse_file(path, &text)?)
            }
            None => (None, FileConfig::default()),
        };
        let layers = Layers { file: path };
        let schema_path = layers
            .pick(
                self.schema_path,
                ("--schema-path", "CANOPY_SCHEMA_PATH"),
                file.schema_path.take(),
            )
            .map_or_else(|| PathBuf::from(DEFAULT_SCHEMA_PATH), |p| p.value);
        let mut args = ServeArgs {
            state_url: self.state_url,
            data_dir: self.data_dir,
            project: self.project,
            environment: self.environment,
            ..ServeArgs::default()
        };
        let platform = super::platform::resolve_platform(&layers, &mut args, &mut file)?;
        Ok(StoreConfig {
            platform,
            schema_path,
        })
    }
}
