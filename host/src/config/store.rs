//! The settings of the commands that only manage Canopy's store (`canopy users|teams|roles|
//! permissions|init`): the same store, project and environment as `canopy serve` reads from the
//! same flags, variables and config file, without asking for a database or secrets.

use std::path::{Path, PathBuf};

use clap::Args;

use super::file::FileConfig;
use super::{ConfigError, DEFAULT_SCHEMA_PATH, Layers, PlatformConfig, ServeArgs, parse_file};

/// Where Canopy's store is. Precedence: config file < environment variable < flag.
#[derive(Debug, Default, Clone, Args)]
pub struct StoreArgs {
    /// The config file of `canopy serve` (only its store, project, environment and schema path
    /// settings are read here, and the secrets and address a command needs). [default:
    /// .canopy/demo.toml when it exists and no store setting is given, written by `canopy demo`]
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
    /// What the config file says of the server, for the commands that sign or call it.
    pub server: ServerSettings,
}

/// Where `canopy demo` writes its settings: a config file in `canopy serve`'s format naming the
/// demo's database, store, schema file, plugin and workflow folders, address and (public)
/// secrets. The command-line tools read it when no store setting is given, so that what a user
/// types after `canopy demo` acts on the demo.
pub const DEMO_SETTINGS: &str = ".canopy/demo.toml";

/// The settings of a running server that the command-line tools need besides its store: to
/// sign tokens and webhook URLs (`authSecret`), to call it (`envSecret`, `listen`, `prefix`,
/// `publicUrl`). Read from the config file only; each command's flags and variables win.
#[derive(Debug, Clone, Default)]
pub struct ServerSettings {
    pub auth_secret: Option<String>,
    pub env_secret: Option<String>,
    pub listen: Option<String>,
    pub prefix: Option<String>,
    pub public_url: Option<String>,
}

impl ServerSettings {
    /// The server settings of the config file `named`, else of the demo's settings file when
    /// `demo_fallback` and it exists (said on stderr), else none.
    pub fn load(named: Option<&Path>, demo_fallback: bool) -> Result<Self, ConfigError> {
        Ok(match read_config(named, demo_fallback)? {
            Some((_, file)) => Self::from_file(&file),
            None => Self::default(),
        })
    }

    fn from_file(file: &FileConfig) -> Self {
        Self {
            auth_secret: file.auth_secret.clone(),
            env_secret: file.env_secret.clone(),
            listen: file.listen.clone(),
            prefix: file.prefix.clone(),
            public_url: file.public_url.clone(),
        }
    }
}

/// The config file a command reads, parsed: the one `named`, else (when `demo_fallback`) the
/// demo's settings file if it exists, announced on stderr so that nobody wonders which store
/// they changed.
fn read_config(
    named: Option<&Path>,
    demo_fallback: bool,
) -> Result<Option<(PathBuf, FileConfig)>, ConfigError> {
    let path = match named {
        Some(path) => path.to_owned(),
        None if demo_fallback && Path::new(DEMO_SETTINGS).is_file() => {
            eprintln!(
                "Using the demo's settings ({DEMO_SETTINGS}): its store, schema file and secrets \
                 (--config, --state-url or --data-dir choose another store)."
            );
            PathBuf::from(DEMO_SETTINGS)
        }
        None => return Ok(None),
    };
    let text = std::fs::read_to_string(&path).map_err(|error| ConfigError::Read {
        path: path.clone(),
        error,
    })?;
    let file = parse_file(&path, &text)?;
    Ok(Some((path, file)))
}

impl StoreArgs {
    /// Merges the flags with the config file, as `Config::load` does for `canopy serve`.
    /// Without a config file, store URL or data folder, the demo's settings file
    /// ([`DEMO_SETTINGS`]) is the config file when it exists.
    pub fn load(self) -> Result<StoreConfig, ConfigError> {
        let demo_fallback =
            self.config.is_none() && self.state_url.is_none() && self.data_dir.is_none();
        let (path, mut file) = match read_config(self.config.as_deref(), demo_fallback)? {
            Some((path, file)) => (Some(path), file),
            None => (None, FileConfig::default()),
        };
        let server = ServerSettings::from_file(&file);
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
            server,
        })
    }
}
