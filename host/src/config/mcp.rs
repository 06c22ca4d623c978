//! Settings of the MCP server (`mcp`, the spec's `mountAiMcpServer(options)`): whether it is
//! mounted, its `basePath`, `enabledTools`, `allowedOAuthClients`, `tokenTtl` and `fileUploads`.
//!
//! `canopy serve` reads them from flags, `CANOPY_MCP_*` and the file's `[mcp]` table; the
//! standalone `canopy mcp` also reads the spec's `SERVICE_MCP_*` variables and `MCP_SERVER_PORT`
//! ([`standalone_args`]), which a mounted server ignores.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap::builder::BoolishValueParser;
use serde::Deserialize;

use super::file::FileConfig;
use super::{ConfigError, Layers, Origin, Warning, invalid};

/// Every tool the server has, in the order `tools/list` gives them: the spec's eleven, then the
/// workflow tools of the newer Node server.
pub const TOOLS: &[&str] = &[
    "describeCollection",
    "list",
    "listRelated",
    "create",
    "update",
    "delete",
    "associate",
    "dissociate",
    "getActionForm",
    "executeAction",
    "requestActionFileUpload",
    "listWorkflows",
    "triggerWorkflow",
    "getWorkflowRun",
];

/// The tool a model needs to use any other: always enabled, whatever `enabledTools` says.
pub const ALWAYS_ENABLED: &str = "describeCollection";
/// The access token's lifetime when none is configured (the spec's default).
pub const DEFAULT_ACCESS_TTL: Duration = Duration::from_secs(3600);
/// The shortest token lifetime accepted: under a minute a client refreshes more often than the
/// token endpoint's rate limit allows.
pub const MIN_TTL_SECONDS: u64 = 60;
/// The standalone server's port (`MCP_SERVER_PORT`).
pub const DEFAULT_STANDALONE_PORT: u16 = 3931;
/// Upload defaults (mcp.md §3.9): one file, all files held in memory at once, how long an
/// upload URL and a file handle live.
pub const DEFAULT_UPLOAD_MAX_BYTES: u64 = 20 * 1024 * 1024;
pub const DEFAULT_UPLOAD_MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;
pub const DEFAULT_UPLOAD_URL_TTL: Duration = Duration::from_secs(900);
pub const DEFAULT_UPLOAD_HANDLE_TTL: Duration = Duration::from_secs(2700);

/// `canopy serve`'s MCP flags (flattened into [`super::ServeArgs`]).
#[derive(Debug, Default, Clone, Args)]
pub struct McpArgs {
    /// Mount the MCP server (`POST /mcp`, its OAuth authorization server under `/oauth` and its
    /// metadata under `/.well-known`). On as well when the file has an `[mcp]` table.
    /// [default: false] [file key: mcp.enabled]
    #[arg(long = "mcp", env = "CANOPY_MCP", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub mcp: Option<bool>,

    /// Serve only the MCP server (its OAuth routes and metadata included): the `/forest` and
    /// `/v1` routes still answer its tool calls in process, but not the network. Implies --mcp.
    /// [default: false]
    #[arg(long, env = "CANOPY_MCP_ONLY", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub mcp_only: Option<bool>,

    /// Prefix of the MCP and OAuth routes, e.g. `/ai` (`POST /ai/mcp`); needs --public-url
    /// without a path. [default: none, the routes at the root] [file key: mcp.basePath]
    #[arg(long, env = "CANOPY_MCP_BASE_PATH", value_name = "PATH")]
    pub mcp_base_path: Option<String>,

    /// The tools offered, comma separated (describeCollection is always on).
    /// [default: every tool] [file key: mcp.enabledTools]
    #[arg(
        long,
        env = "CANOPY_MCP_ENABLED_TOOLS",
        value_name = "TOOLS",
        value_delimiter = ','
    )]
    pub mcp_enabled_tools: Option<Vec<String>>,

    /// Domains whose OAuth clients are accepted, comma separated: a client is accepted when
    /// every redirect URI it registered is http(s) on one of them or a subdomain.
    /// [default: any registered client] [file key: mcp.allowedOAuthClients]
    #[arg(long, env = "CANOPY_MCP_ALLOWED_OAUTH_CLIENTS", value_name = "DOMAINS")]
    pub mcp_allowed_oauth_clients: Option<String>,

    /// Lifetime of an MCP access token in seconds (at least 60). [default: 3600]
    /// [file key: mcp.tokenTtl.accessTokenSeconds]
    #[arg(
        long,
        env = "CANOPY_MCP_ACCESS_TOKEN_TTL_SECONDS",
        value_name = "SECONDS"
    )]
    pub mcp_access_token_ttl_seconds: Option<String>,

    /// Longest session a refresh token keeps alive, from the interactive sign-in, in seconds (at
    /// least 60). [default: unbounded] [file key: mcp.tokenTtl.refreshTokenSeconds]
    #[arg(
        long,
        env = "CANOPY_MCP_REFRESH_TOKEN_TTL_SECONDS",
        value_name = "SECONDS"
    )]
    pub mcp_refresh_token_ttl_seconds: Option<String>,

    /// Action file uploads through `requestActionFileUpload` (false turns the tool off).
    /// [default: true] [file key: mcp.fileUploads]
    #[arg(long, env = "CANOPY_MCP_FILE_UPLOADS", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub mcp_file_uploads: Option<bool>,

    /// Keep uploaded files in this directory instead of memory: several instances sharing it
    /// accept each other's uploads. [default: in memory, one instance only]
    /// [file key: mcp.fileUploads.directory]
    #[arg(long, env = "CANOPY_MCP_UPLOAD_DIR", value_name = "DIR")]
    pub mcp_upload_dir: Option<PathBuf>,

    /// Largest uploaded file, in bytes. [default: 20 MiB] [file key: mcp.fileUploads.maxBytes]
    #[arg(long, env = "CANOPY_MCP_UPLOAD_MAX_BYTES", value_name = "BYTES")]
    pub mcp_upload_max_bytes: Option<u64>,
}

/// `[mcp]` in the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileMcp {
    pub enabled: Option<bool>,
    pub base_path: Option<String>,
    pub enabled_tools: Option<Vec<String>>,
    #[serde(rename = "allowedOAuthClients")]
    pub allowed_oauth_clients: Option<Vec<String>>,
    pub token_ttl: Option<FileTokenTtl>,
    pub file_uploads: Option<FileUploads>,
}

/// `[mcp.tokenTtl]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileTokenTtl {
    pub access_token_seconds: Option<u64>,
    pub refresh_token_seconds: Option<u64>,
}

/// `fileUploads`: `false`, or a table of settings.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum FileUploads {
    Enabled(bool),
    Settings(FileUploadSettings),
}

/// `[mcp.fileUploads]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileUploadSettings {
    pub directory: Option<PathBuf>,
    pub max_bytes: Option<u64>,
    pub ephemeral_max_total_bytes: Option<u64>,
    pub upload_url_ttl_seconds: Option<u64>,
    pub handle_ttl_seconds: Option<u64>,
}

/// The MCP server's settings; `None` in [`super::Config`] when it is not mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    /// `basePath`, normalized (`/ai`); `None` at the root.
    pub base_path: Option<String>,
    /// The tools offered, in [`TOOLS`] order.
    pub enabled_tools: Vec<&'static str>,
    /// `allowedOAuthClients`, lowercase domains; `None` accepts any registered client.
    pub allowed_oauth_clients: Option<Vec<String>>,
    pub access_token_ttl: Duration,
    /// The longest session from the interactive sign-in; `None` unbounded.
    pub refresh_token_ttl: Option<Duration>,
    /// `None` when uploads are off.
    pub uploads: Option<UploadConfig>,
    /// `canopy mcp` / `serve --mcp-only`: only the MCP and OAuth routes are served.
    pub only: bool,
}

/// Where and how uploaded action files are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadConfig {
    /// `None`: in memory (one instance only).
    pub directory: Option<PathBuf>,
    pub max_bytes: u64,
    pub max_total_bytes: u64,
    pub url_ttl: Duration,
    pub handle_ttl: Duration,
}

impl Default for UploadConfig {
    fn default() -> Self {
        Self {
            directory: None,
            max_bytes: DEFAULT_UPLOAD_MAX_BYTES,
            max_total_bytes: DEFAULT_UPLOAD_MAX_TOTAL_BYTES,
            url_ttl: DEFAULT_UPLOAD_URL_TTL,
            handle_ttl: DEFAULT_UPLOAD_HANDLE_TTL,
        }
    }
}

/// Normalizes `basePath` as the spec's server does: trimmed, one leading `/`, `//` collapsed, no
/// trailing `/`; each segment of letters, digits, `_` and `-`. `Ok(None)` for an empty path.
pub fn normalize_base_path(text: &str) -> Result<Option<String>, String> {
    let segments: Vec<&str> = text.trim().split('/').filter(|s| !s.is_empty()).collect();
    if segments.is_empty() {
        return Ok(None);
    }
    if let Some(bad) = segments.iter().find(|s| {
        !s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }) {
        return Err(format!(
            "{text:?} has the segment {bad:?}: segments are letters, digits, `_` and `-`"
        ));
    }
    Ok(Some(format!("/{}", segments.join("/"))))
}

/// Reads `allowedOAuthClients`: bare domains, trimmed, lowercased, without a trailing dot;
/// empties dropped. An empty list is refused (it would lock every client out, which nobody
/// means), and so is an entry with a scheme, path, port or credentials.
pub fn parse_allowed_clients<S: AsRef<str>>(entries: &[S]) -> Result<Vec<String>, String> {
    let mut domains = Vec::new();
    for entry in entries {
        let entry = entry.as_ref().trim();
        if entry.is_empty() {
            continue;
        }
        if entry
            .chars()
            .any(|c| matches!(c, '/' | ':' | '@' | '?' | '#' | '\\') || c.is_whitespace())
        {
            return Err(format!(
                "{entry:?} must be a bare domain such as `claude.ai` (no scheme, port or path)"
            ));
        }
        let domain = entry.trim_end_matches('.').to_ascii_lowercase();
        if !domains.contains(&domain) {
            domains.push(domain);
        }
    }
    if domains.is_empty() {
        return Err("must name at least one domain (leave it unset to accept any client)".into());
    }
    Ok(domains)
}

/// Reads a token lifetime in whole seconds, at least [`MIN_TTL_SECONDS`].
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let seconds: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} must be a whole number of seconds"))?;
    check_ttl(seconds)
}

fn check_ttl(seconds: u64) -> Result<Duration, String> {
    if seconds < MIN_TTL_SECONDS {
        return Err(format!(
            "{seconds} must be at least {MIN_TTL_SECONDS} seconds"
        ));
    }
    Ok(Duration::from_secs(seconds))
}

/// The settings of `canopy mcp` from the spec's variables, over `args` (an explicit flag still
/// wins): `SERVICE_MCP_ENABLED_TOOLS`, `SERVICE_MCP_ALLOWED_OAUTH_CLIENTS` (set but empty is an
/// error: it fails closed), `SERVICE_MCP_ACCESS_TOKEN_TTL_SECONDS`,
/// `SERVICE_MCP_REFRESH_TOKEN_TTL_SECONDS`; and the port, `MCP_SERVER_PORT` (default 3931).
pub fn standalone_args(
    args: &mut McpArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<u16, ConfigError> {
    let origin = |name: &'static str| Origin::Cli {
        flag: name,
        env: name,
    };
    args.mcp = Some(true);
    args.mcp_only = Some(true);
    if args.mcp_enabled_tools.is_none()
        && let Some(tools) = env("SERVICE_MCP_ENABLED_TOOLS")
    {
        args.mcp_enabled_tools = Some(tools.split(',').map(|t| t.trim().to_owned()).collect());
    }
    if args.mcp_allowed_oauth_clients.is_none()
        && let Some(clients) = env("SERVICE_MCP_ALLOWED_OAUTH_CLIENTS")
    {
        let entries: Vec<&str> = clients.split(',').collect();
        parse_allowed_clients(&entries).map_err(|problem| {
            invalid(
                "SERVICE_MCP_ALLOWED_OAUTH_CLIENTS",
                problem,
                &origin("SERVICE_MCP_ALLOWED_OAUTH_CLIENTS"),
            )
        })?;
        args.mcp_allowed_oauth_clients = Some(clients);
    }
    if args.mcp_access_token_ttl_seconds.is_none() {
        args.mcp_access_token_ttl_seconds = env("SERVICE_MCP_ACCESS_TOKEN_TTL_SECONDS");
    }
    if args.mcp_refresh_token_ttl_seconds.is_none() {
        args.mcp_refresh_token_ttl_seconds = env("SERVICE_MCP_REFRESH_TOKEN_TTL_SECONDS");
    }
    match env("MCP_SERVER_PORT") {
        None => Ok(DEFAULT_STANDALONE_PORT),
        Some(port) => port.trim().parse::<u16>().map_err(|_| {
            invalid(
                "MCP_SERVER_PORT",
                format!("{port:?} must be a port number from 0 to 65535"),
                &origin("MCP_SERVER_PORT"),
            )
        }),
    }
}

pub(super) fn resolve_mcp(
    layers: &Layers,
    args: &mut McpArgs,
    file: &mut FileConfig,
    public_url: Option<&str>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<McpConfig>, ConfigError> {
    let mut table = file.mcp.take();
    let only = args.mcp_only.take().unwrap_or(false);
    let enabled = only
        || match layers.pick(
            args.mcp.take(),
            ("--mcp", "CANOPY_MCP"),
            table.as_mut().and_then(|t| t.enabled.take()),
        ) {
            Some(v) => v.value,
            None => table.is_some(),
        };
    if !enabled {
        return Ok(None);
    }
    let mut table = table.unwrap_or_default();
    let base_path = match layers.pick(
        args.mcp_base_path.take(),
        ("--mcp-base-path", "CANOPY_MCP_BASE_PATH"),
        table.base_path.take(),
    ) {
        Some(path) => {
            let normalized = normalize_base_path(&path.value)
                .map_err(|problem| invalid("mcp.basePath", problem, &path.origin))?;
            if normalized.is_some()
                && let Some(url) = public_url
                && reqwest::Url::parse(url).is_ok_and(|u| u.path() != "/" && !u.path().is_empty())
            {
                return Err(invalid(
                    "mcp.basePath",
                    format!(
                        "needs Canopy at the root of its domain, but publicUrl {url:?} has a path"
                    ),
                    &path.origin,
                ));
            }
            normalized
        }
        None => None,
    };
    let enabled_tools = match layers.pick(
        args.mcp_enabled_tools.take(),
        ("--mcp-enabled-tools", "CANOPY_MCP_ENABLED_TOOLS"),
        table.enabled_tools.take(),
    ) {
        Some(listed) => {
            let listed: Vec<String> = listed
                .value
                .iter()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect();
            for unknown in listed.iter().filter(|t| !TOOLS.contains(&t.as_str())) {
                warnings.push(Warning {
                    key: "mcp.enabledTools",
                    message: format!(
                        "{unknown:?} is not a tool and is ignored; the tools are {}",
                        TOOLS.join(", ")
                    ),
                });
            }
            TOOLS
                .iter()
                .copied()
                .filter(|t| *t == ALWAYS_ENABLED || listed.iter().any(|l| l == t))
                .collect()
        }
        None => TOOLS.to_vec(),
    };
    let allowed_oauth_clients = match layers.pick(
        args.mcp_allowed_oauth_clients
            .take()
            .map(|s| s.split(',').map(str::to_owned).collect::<Vec<_>>()),
        (
            "--mcp-allowed-oauth-clients",
            "CANOPY_MCP_ALLOWED_OAUTH_CLIENTS",
        ),
        table.allowed_oauth_clients.take(),
    ) {
        Some(list) => Some(
            parse_allowed_clients(&list.value)
                .map_err(|problem| invalid("mcp.allowedOAuthClients", problem, &list.origin))?,
        ),
        None => None,
    };
    let mut ttl = table.token_ttl.take().unwrap_or_default();
    let access_token_ttl = match layers.pick(
        args.mcp_access_token_ttl_seconds.take(),
        (
            "--mcp-access-token-ttl-seconds",
            "CANOPY_MCP_ACCESS_TOKEN_TTL_SECONDS",
        ),
        ttl.access_token_seconds.take().map(|s| s.to_string()),
    ) {
        Some(v) => parse_ttl(&v.value)
            .map_err(|problem| invalid("mcp.tokenTtl.accessTokenSeconds", problem, &v.origin))?,
        None => DEFAULT_ACCESS_TTL,
    };
    let refresh_token_ttl =
        match layers.pick(
            args.mcp_refresh_token_ttl_seconds.take(),
            (
                "--mcp-refresh-token-ttl-seconds",
                "CANOPY_MCP_REFRESH_TOKEN_TTL_SECONDS",
            ),
            ttl.refresh_token_seconds.take().map(|s| s.to_string()),
        ) {
            Some(v) => Some(parse_ttl(&v.value).map_err(|problem| {
                invalid("mcp.tokenTtl.refreshTokenSeconds", problem, &v.origin)
            })?),
            None => None,
        };
    if let Some(refresh) = refresh_token_ttl
        && refresh < access_token_ttl
    {
        warnings.push(Warning {
            key: "mcp.tokenTtl",
            message: format!(
                "refreshTokenSeconds ({}) is shorter than accessTokenSeconds ({}): sessions end \
                 before their first access token expires",
                refresh.as_secs(),
                access_token_ttl.as_secs()
            ),
        });
    }
    let uploads = resolve_uploads(layers, args, table.file_uploads.take())?;
    Ok(Some(McpConfig {
        base_path,
        enabled_tools,
        allowed_oauth_clients,
        access_token_ttl,
        refresh_token_ttl,
        uploads,
        only,
    }))
}

fn resolve_uploads(
    layers: &Layers,
    args: &mut McpArgs,
    file: Option<FileUploads>,
) -> Result<Option<UploadConfig>, ConfigError> {
    let (file_enabled, mut settings) = match file {
        None => (None, FileUploadSettings::default()),
        Some(FileUploads::Enabled(on)) => (Some(on), FileUploadSettings::default()),
        Some(FileUploads::Settings(settings)) => (Some(true), settings),
    };
    let on = layers
        .pick(
            args.mcp_file_uploads.take(),
            ("--mcp-file-uploads", "CANOPY_MCP_FILE_UPLOADS"),
            file_enabled,
        )
        .is_none_or(|v| v.value);
    if !on {
        return Ok(None);
    }
    let defaults = UploadConfig::default();
    let positive = |key: &'static str, v: Option<super::Sourced<u64>>, default: u64| match v {
        Some(v) if v.value == 0 => Err(invalid(key, "must be at least 1", &v.origin)),
        Some(v) => Ok(v.value),
        None => Ok(default),
    };
    let max_bytes = positive(
        "mcp.fileUploads.maxBytes",
        layers.pick(
            args.mcp_upload_max_bytes.take(),
            ("--mcp-upload-max-bytes", "CANOPY_MCP_UPLOAD_MAX_BYTES"),
            settings.max_bytes.take(),
        ),
        defaults.max_bytes,
    )?;
    let origin = Origin::File(layers.file.clone().unwrap_or_default());
    let seconds = |key: &'static str, v: Option<u64>, default: Duration| match v {
        Some(0) => Err(invalid(key, "must be at least 1", &origin)),
        Some(s) => Ok(Duration::from_secs(s)),
        None => Ok(default),
    };
    Ok(Some(UploadConfig {
        directory: layers
            .pick(
                args.mcp_upload_dir.take(),
                ("--mcp-upload-dir", "CANOPY_MCP_UPLOAD_DIR"),
                settings.directory.take(),
            )
            .map(|d| d.value),
        max_bytes,
        max_total_bytes: settings
            .ephemeral_max_total_bytes
            .filter(|b| *b > 0)
            .unwrap_or(defaults.max_total_bytes)
            .max(max_bytes),
        url_ttl: seconds(
            "mcp.fileUploads.uploadUrlTtlSeconds",
            settings.upload_url_ttl_seconds,
            defaults.url_ttl,
        )?,
        handle_ttl: seconds(
            "mcp.fileUploads.handleTtlSeconds",
            settings.handle_ttl_seconds,
            defaults.handle_ttl,
        )?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_paths_are_normalized_and_bad_segments_named() {
        assert_eq!(
            normalize_base_path(" ai/ ").unwrap().as_deref(),
            Some("/ai")
        );
        assert_eq!(
            normalize_base_path("//ai//tools/").unwrap().as_deref(),
            Some("/ai/tools")
        );
        assert_eq!(normalize_base_path("/").unwrap(), None);
        assert!(normalize_base_path("/a i").unwrap_err().contains("\"a i\""));
        assert!(normalize_base_path("/a.b").is_err());
    }

    #[test]
    fn allowed_clients_are_bare_domains_and_never_empty() {
        assert_eq!(
            parse_allowed_clients(&[" Claude.AI. ", "", "example.com"]).unwrap(),
            ["claude.ai", "example.com"]
        );
        assert!(parse_allowed_clients(&["", " "]).is_err());
        assert!(parse_allowed_clients(&["https://claude.ai"]).is_err());
        assert!(parse_allowed_clients(&["claude.ai:443"]).is_err());
    }

    #[test]
    fn token_lifetimes_are_whole_seconds_of_at_least_a_minute() {
        assert_eq!(parse_ttl("60").unwrap(), Duration::from_secs(60));
        assert!(parse_ttl("59").unwrap_err().contains("at least 60"));
        assert!(parse_ttl("1.5").is_err());
        assert!(parse_ttl("-5").is_err());
        assert!(parse_ttl("abc").is_err());
    }

    #[test]
    fn standalone_variables_fill_the_flags_and_fail_closed() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let mut args = McpArgs::default();
        let port = standalone_args(
            &mut args,
            vars(&[
                ("SERVICE_MCP_ENABLED_TOOLS", "list, create"),
                ("SERVICE_MCP_ACCESS_TOKEN_TTL_SECONDS", "120"),
                ("MCP_SERVER_PORT", "4000"),
            ]),
        )
        .unwrap();
        assert_eq!(port, 4000);
        assert_eq!(args.mcp, Some(true));
        assert_eq!(
            args.mcp_enabled_tools.unwrap(),
            ["list".to_owned(), "create".to_owned()]
        );
        assert_eq!(args.mcp_access_token_ttl_seconds.as_deref(), Some("120"));
        assert_eq!(
            standalone_args(&mut McpArgs::default(), vars(&[])).unwrap(),
            DEFAULT_STANDALONE_PORT
        );
        let empty = standalone_args(
            &mut McpArgs::default(),
            vars(&[("SERVICE_MCP_ALLOWED_OAUTH_CLIENTS", " , ")]),
        );
        assert!(
            empty
                .unwrap_err()
                .to_string()
                .contains("at least one domain")
        );
        let port = standalone_args(&mut McpArgs::default(), vars(&[("MCP_SERVER_PORT", "x")]));
        assert!(port.unwrap_err().to_string().contains("MCP_SERVER_PORT"));
    }
}
