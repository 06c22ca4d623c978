//! The `canopy` binary: turns arguments, environment and signals into calls to `canopy::app`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use canopy::config::{Config, LogFormat, ServeArgs};
use clap::{Parser, Subcommand};

// Many small, short-lived allocations per request (records, JSON) across tokio workers: mimalloc
// serves them from per-thread pages where glibc malloc spent a third of a list request's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Canopy turns any SQL database into a secure admin back end.
#[derive(Debug, Parser)]
#[command(name = "canopy", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the `/forest` routes over the configured databases.
    Serve {
        #[command(flatten)]
        args: ServeArgs,
        /// Development: reload the plugins when a file of the plugin directory changes.
        #[arg(long)]
        watch: bool,
    },
    /// Serve only the MCP server (the spec's standalone server): `POST /mcp`, its OAuth
    /// authorization server and metadata. Reads SERVICE_MCP_ENABLED_TOOLS,
    /// SERVICE_MCP_ALLOWED_OAUTH_CLIENTS, SERVICE_MCP_ACCESS_TOKEN_TTL_SECONDS,
    /// SERVICE_MCP_REFRESH_TOKEN_TTL_SECONDS, and listens on MCP_SERVER_PORT (default 3931)
    /// unless --listen says otherwise. Takes the settings of `serve`.
    Mcp {
        #[command(flatten)]
        args: ServeArgs,
        /// Development: reload the plugins when a file of the plugin directory changes.
        #[arg(long)]
        watch: bool,
    },
    /// Write the schema file (`.forestadmin-schema.json`), and the typings when `typingsPath` is
    /// set, then exit without serving.
    Schema(ServeArgs),
    /// Write typed names of the customized schema (after the plugins) as a Rust or Python
    /// module for plugins: collections, fields, relations and `relation:field` paths as
    /// constants, so that a misspelt name is a compile (or mypy) error. Takes the settings of
    /// `serve`.
    Typings {
        #[command(flatten)]
        args: ServeArgs,
        /// Output file (e.g. `my-plugin/src/typings.rs`, `my-plugin/typings.py`). [default:
        /// typingsPath, else stdout]
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
        /// The module's language. [default: python when the output file ends in `.py`, ts when
        /// it ends in `.ts` (`typings.d.ts` too), else rust]
        #[arg(long, value_enum, value_name = "LANG")]
        lang: Option<canopy::typings::Language>,
        /// Relations followed in `relation:field` paths. [default: typingsMaxDepth, i.e. 5]
        #[arg(long, value_name = "DEPTH")]
        max_depth: Option<u32>,
    },
    /// Plugin development.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Ask a running `canopy serve` to reload its plugins (`POST /{prefix}/_canopy/reload` with
    /// the env secret as a bearer token). The server keeps its current plugins if any fails.
    Reload {
        /// The config file of `canopy serve`: its listen, prefix and envSecret are used.
        /// [default: .canopy/demo.toml when it exists and no env secret is given, written by
        /// `canopy demo`]
        #[arg(long, env = "CANOPY_CONFIG", value_name = "PATH")]
        config: Option<PathBuf>,
        /// Address the server listens on. [default: listen of the config file, else
        /// 127.0.0.1:3351]
        #[arg(long, env = "CANOPY_LISTEN")]
        listen: Option<String>,
        /// The server's route prefix. [default: prefix of the config file, else none]
        #[arg(long, env = "CANOPY_PREFIX")]
        prefix: Option<String>,
        /// The server's environment secret. [default: envSecret of the config file]
        #[arg(
            long,
            env = "CANOPY_ENV_SECRET",
            value_name = "HEX",
            hide_env_values = true
        )]
        env_secret: Option<String>,
    },
    /// Mint a session token for scripts and other agents: the store's user with this email,
    /// with their id, team, role, permission level and team rendering.
    Token(canopy::app::admin::TokenArgs),
    /// Introspect a database and print the collections Canopy would serve, as JSON.
    Inspect {
        /// Database URL: sqlite:path?mode=rwc, postgres://…, mysql://… or mariadb://….
        #[arg(long, env = "CANOPY_DATABASE_URL")]
        database_url: String,
        /// Log filter, e.g. `info`, `debug`, `canopy=debug`.
        #[arg(long, env = "CANOPY_LOG_LEVEL", default_value = "info")]
        log_level: String,
    },
    /// Create Canopy's store (users, permissions, logs) and its first admin, and print how to
    /// sign in. `canopy serve` does the same at its first start.
    Init(canopy::app::admin::InitArgs),
    /// Manage the project's users: list, add, set, remove.
    Users(canopy::app::admin::UsersArgs),
    /// Manage teams (a team's users share scopes, segments and charts): list, add, rename,
    /// remove.
    Teams(canopy::app::admin::TeamsArgs),
    /// Manage roles (a role's users share collection and action rights): list, add, rename,
    /// remove.
    Roles(canopy::app::admin::RolesArgs),
    /// Show and change rights, scopes, segments and the IP whitelist; apply a permissions file.
    Permissions(canopy::app::admin::PermissionsArgs),
    /// Manage the public API's application tokens: create (the secret shown once), list,
    /// revoke.
    Tokens(canopy::app::admin::TokensArgs),
    /// Workflows: definitions (list, show, apply a definition file, versions, activate,
    /// deactivate), runs (list, show with steps, abort) and webhook triggers (URL, enable,
    /// disable, regenerate).
    Workflows(canopy::app::admin::WorkflowsArgs),
    /// Start a throwaway server for a plugin's tests: a temporary store, schema file and (by
    /// default) SQLite database seeded with --seed, the given --plugin, a free port, and one user
    /// with the --rights asked for. Prints one JSON line once it accepts connections: `url`,
    /// `forestUrl`, `token` (that user's session token), `email`, `schemaPath`, `databaseUrl`,
    /// `authSecret`, `envSecret`. Stops, removing its temporary folder, when its standard input
    /// closes or on SIGTERM or Ctrl-C. The testing kit's clients (Rust, Python, JavaScript) run
    /// it for you.
    TestServer(Box<canopy::app::test_server::TestServerArgs>),
    /// Build the shop demo database (SQLite), serve it, and print the URL, a token and a curl
    /// line. Uses fixed, public demo secrets: never expose it beyond this machine.
    Demo {
        /// Where the demo database is written (replaced if it exists); its store, plugins,
        /// workflows and schema file go beside it.
        #[arg(long, default_value = ".canopy/shop.sqlite")]
        path: PathBuf,
        /// The shop plugin to serve: the Rust one (`examples/shop/plugin`, built with cargo), the
        /// Python one (`examples/shop/plugin-python`, built with componentize-py, which must be
        /// installed: `pip install componentize-py==0.25.1`, or COMPONENTIZE_PY) or the
        /// TypeScript one (`examples/shop/plugin-ts`, built with the toolchain `npm ci` installs
        /// in `sdk/ts`).
        #[arg(long, value_enum, value_name = "LANG", default_value_t)]
        plugin_lang: canopy::typings::Language,
        /// Every setting of `serve` (rate limits, logs, MCP…), except the database, the store,
        /// the plugin and workflow folders, the schema file and the secrets, which are the
        /// demo's own. The demo listens on 127.0.0.1:3351 unless told otherwise.
        #[command(flatten)]
        args: ServeArgs,
    },
}

#[derive(Debug, Subcommand)]
enum PluginCommand {
    /// Create a ready-to-build plugin: an example computed field and action, the `NAME.toml`
    /// settings and a README with the build and reload loop. Rust: a crate with its own
    /// workspace and wasm32-wasip2 as build target. Python: a module, a `build.sh` running
    /// componentize-py, and a copy of the SDK and the WIT contract this binary carries (the
    /// folder builds anywhere). TypeScript (`ts`): the same, with the `package.json` and
    /// `package-lock.json` of the pinned toolchain (`build.sh` runs `npm ci` the first time).
    /// Refuses to write into a folder that is not empty.
    New {
        /// The plugin's name: lower-case letters, digits, `-` and `_`; also its crate's (or
        /// Python module's, with `_plugin` appended) name and the `NAME.wasm` it is loaded as.
        name: String,
        /// The plugin's language.
        #[arg(long, value_enum, value_name = "LANG", default_value_t)]
        lang: canopy::typings::Language,
        /// The plugin's folder. [default: ./NAME]
        #[arg(long, value_name = "PATH")]
        dir: Option<PathBuf>,
        /// Rust only: the `guest-sdk` folder of a Canopy checkout, depended on by path.
        /// [default: $CANOPY_SDK, else the checkout this binary was built from]
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

/// Runs the command; an error is printed as its message and its causes on one line (`{:#}`),
/// never with a backtrace, whatever `RUST_BACKTRACE` says: a user's mistake is not a crash.
/// Exit codes: 0, 1 for an error, 2 for a usage error (clap's own).
#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse().command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `canopy serve` (and `canopy mcp`, which is `serve --mcp-only` with the spec's variables).
async fn serve(args: ServeArgs, watch: bool) -> anyhow::Result<()> {
    let (config, _log) = load(args)?;
    // The address is taken first, so that a port in use fails at once; connections are
    // accepted (and the start announced) only once the stack is ready.
    let config_listen = config.http.listen;
    let socket = reserve(config_listen)?;
    let mount_path = config.http.mount_path();
    let mcp = config.mcp.clone();
    // Signals count from here: one that arrives while the stack starts stops it there, at once
    // (before, the handler came only with the server, and a SIGTERM during the start killed
    // the process).
    let mut shutdown = Box::pin(shutdown_signal());
    let Some(ready) = until_stopped(canopy::app::prepare(config), &mut shutdown).await? else {
        return Ok(());
    };
    let listener = start_listening(socket, config_listen)?;
    let address = listener.local_addr()?;
    match &mcp {
        Some(mcp) if mcp.only => canopy::outln!(
            "Canopy is serving its MCP server on http://{address}{}/mcp",
            mcp.base_path.as_deref().unwrap_or("")
        ),
        Some(mcp) => {
            canopy::outln!("Canopy is serving on http://{address}{mount_path}");
            canopy::outln!(
                "MCP server: http://{address}{}/mcp",
                mcp.base_path.as_deref().unwrap_or("")
            );
        }
        None => canopy::outln!("Canopy is serving on http://{address}{mount_path}"),
    }
    let options = canopy::app::ServeOptions { watch };
    ready.serve(listener, shutdown, options).await
}

/// Runs `start` unless `shutdown` resolves first: `None` then (the command was stopped while
/// starting).
async fn until_stopped<T>(
    start: impl Future<Output = anyhow::Result<T>>,
    shutdown: &mut std::pin::Pin<Box<impl Future<Output = ()>>>,
) -> anyhow::Result<Option<T>> {
    tokio::select! {
        started = start => started.map(Some),
        () = shutdown.as_mut() => {
            tracing::info!("stopped while starting");
            Ok(None)
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve { args, watch } => serve(args, watch).await,
        Command::Mcp { mut args, watch } => {
            let port = canopy::config::mcp_standalone_args(&mut args.mcp, |name| {
                std::env::var(name).ok()
            })?;
            if args.listen.is_none() {
                args.listen = Some(format!("127.0.0.1:{port}"));
            }
            serve(args, watch).await
        }
        Command::Reload {
            config,
            listen,
            prefix,
            env_secret,
        } => {
            let demo_fallback = config.is_none() && env_secret.is_none();
            let server = canopy::config::ServerSettings::load(config.as_deref(), demo_fallback)?;
            let env_secret = env_secret.or(server.env_secret).context(
                "a reload is authorized by the server's env secret: give --env-secret (or \
                 CANOPY_ENV_SECRET, or envSecret in --config)",
            )?;
            let listen = listen
                .or(server.listen)
                .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
            let prefix = prefix.or(server.prefix).unwrap_or_default();
            canopy::outln!(
                "{}",
                canopy::app::request_reload(&listen, &prefix, &env_secret).await?
            );
            Ok(())
        }
        Command::Schema(args) => {
            let (config, _log) = load(args)?;
            canopy::app::schema(&config).await
        }
        Command::Typings {
            mut args,
            out,
            lang,
            max_depth,
        } => {
            // Typings neither serve nor sign anything: the secrets `serve` requires are not
            // asked for (placeholders stand in when none is given).
            args.auth_secret
                .get_or_insert_with(|| "unused-by-typings".to_owned());
            args.env_secret.get_or_insert_with(|| "0".repeat(64));
            let (config, _log) = load(args)?;
            canopy::app::typings(&config, out.as_deref(), max_depth, lang).await
        }
        Command::Plugin(PluginCommand::New {
            name,
            lang,
            dir,
            sdk,
        }) => {
            // CANOPY_SDK names a Rust SDK: read here rather than by clap, so that a variable set
            // for Rust plugins does not refuse `--lang python` or `--lang ts`.
            let sdk = sdk.or_else(|| match lang {
                canopy::typings::Language::Rust => {
                    std::env::var_os("CANOPY_SDK").map(PathBuf::from)
                }
                canopy::typings::Language::Python | canopy::typings::Language::Ts => None,
            });
            let created =
                canopy::scaffold::new_plugin(&name, lang, dir.as_deref(), sdk.as_deref())?;
            let dir = created.dir.display();
            canopy::outln!("Created the plugin {dir}. Next:");
            canopy::outln!("  cd {dir} && {}", created.build);
            canopy::outln!(
                "  cp {} PLUGIN_DIR/{}  (and {name}.toml beside it)",
                created.artifact.display(),
                created.plugin_file
            );
            canopy::outln!("  canopy reload   (or serve with --watch)");
            Ok(())
        }
        Command::Token(args) => {
            canopy::outln!("{}", canopy::app::admin::token(args).await?);
            Ok(())
        }
        Command::Inspect {
            database_url,
            log_level,
        } => {
            let _log = canopy::logging::init(&log_level, LogFormat::Text, None)?;
            canopy::app::inspect(&database_url).await
        }
        Command::Init(args) => canopy::app::admin::init(args).await,
        Command::Users(args) => canopy::app::admin::users(args).await,
        Command::Teams(args) => canopy::app::admin::teams(args).await,
        Command::Roles(args) => canopy::app::admin::roles(args).await,
        Command::Permissions(args) => canopy::app::admin::permissions(args).await,
        Command::Tokens(args) => canopy::app::admin::tokens(args).await,
        Command::Workflows(args) => canopy::app::admin::workflows(args).await,
        Command::Demo {
            path,
            plugin_lang,
            args,
        } => demo(&path, plugin_lang, args).await,
        Command::TestServer(args) => test_server(*args).await,
    }
}

/// `canopy test-server`: prepares the temporary folder and settings, seeds the database, starts
/// the stack as `serve` does, then prints the ready line and serves until stdin closes or a
/// signal arrives; the folder goes with the server.
async fn test_server(args: canopy::app::test_server::TestServerArgs) -> anyhow::Result<()> {
    use canopy::app::test_server;
    let prepared = test_server::prepare(args)?;
    let (config, _log) = load(prepared.serve.clone())?;
    let socket = reserve(config.http.listen)?;
    let database_url = config.datasources.first().map(|d| d.url.clone());
    if let Some(url) = &database_url {
        test_server::seed(url, &prepared.seeds).await?;
    } else if !prepared.seeds.is_empty() {
        anyhow::bail!("--seed: no database to seed");
    }
    let listen = config.http.listen;
    let mount_path = config.http.mount_path();
    let auth_secret = config.auth.auth_secret.expose().to_owned();
    let env_secret = config.auth.env_secret.expose().to_owned();
    let schema_path = config.schema.path.clone();
    let mut signal = Box::pin(shutdown_signal());
    let Some(ready) = until_stopped(canopy::app::prepare(config), &mut signal).await? else {
        return Ok(());
    };
    let token = test_server::token(ready.store(), &auth_secret, &prepared.email).await?;
    let listener = start_listening(socket, listen)?;
    let url = format!("http://{}", listener.local_addr()?);
    let line = test_server::ReadyLine {
        forest_url: format!("{url}{mount_path}"),
        url,
        token,
        email: prepared.email.clone(),
        schema_path,
        database_url,
        auth_secret,
        env_secret,
    };
    canopy::outln!("{}", serde_json::to_string(&line)?);
    // Stdin counts from here: a client that went away while the server started still gets it
    // stopped (at once), and `< /dev/null` prints the line before stopping.
    let shutdown = async move {
        tokio::select! {
            () = signal => {}
            () = stdin_closed() => tracing::info!("stdin closed: stopping"),
        }
    };
    let served = ready
        .serve(listener, shutdown, canopy::app::ServeOptions::default())
        .await;
    // The temporary folder goes last: the store is closed by now.
    drop(prepared);
    served
}

/// Resolves when stdin reaches its end: the test that started the server is gone, or closed
/// the pipe to stop it. Stdin is read on a thread of its own: tokio's stdin would need a feature
/// the binary does not otherwise use.
fn stdin_closed() -> impl Future<Output = ()> + Send + 'static {
    let (closed, on_close) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = closed.send(());
    });
    async move {
        // A dropped sender (the thread could not even start reading) counts as closed.
        let _ = on_close.await;
    }
}

/// Where `canopy serve` and the demo listen unless told otherwise.
const DEFAULT_LISTEN: &str = "127.0.0.1:3351";

/// The demo's secrets: fixed so that the printed token keeps working across restarts, and
/// public, which is why the demo only listens where you tell it (loopback by default).
const DEMO_AUTH_SECRET: &str = "canopy-demo-auth-secret-do-not-use-in-production";
const DEMO_ENV_SECRET: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Seeds the shop database, builds the shop plugin when it can, then serves both like
/// `canopy serve --plugins` would, with the user's other settings of `serve` (file, variables,
/// flags). Writes the demo's settings to `.canopy/demo.toml`, which the CLI then reads.
async fn demo(
    path: &std::path::Path,
    plugin_lang: canopy::typings::Language,
    mut args: ServeArgs,
) -> anyhow::Result<()> {
    let path = std::path::absolute(path)
        .with_context(|| format!("--path {}: cannot resolve it", path.display()))?;
    let dir = path
        .parent()
        .context("--path: expected a file path such as .canopy/shop.sqlite")?
        .to_owned();
    let plugin_dir = dir.join("plugins");
    let store_dir = dir.join("demo-store");
    // The demo's own: its database, its store (rebuilt at each run with its users, see
    // `admin::demo`), its folders, its schema file and its public secrets. Everything else is
    // the user's settings, with serve's defaults.
    args.database_url = Some(format!("sqlite://{}?mode=rwc", path.display()));
    args.state_url = Some(canopy::platform::store::default_sqlite_url(&store_dir));
    args.data_dir = Some(store_dir.clone());
    args.auth_secret = Some(DEMO_AUTH_SECRET.to_owned());
    args.env_secret = Some(DEMO_ENV_SECRET.to_owned());
    args.schema_path = Some(dir.join(".forestadmin-schema.json"));
    args.plugin_dir = Some(plugin_dir.clone());
    // The MCP server, for AI assistants: they sign in as one of the logins printed below.
    if args.mcp.mcp.is_none() {
        args.mcp.mcp = Some(true);
    }
    // The audit trail, so that a record's history (the console's History tab, `/_audit-trail`)
    // shows each change with its values before and after.
    if args.audit_trail.is_none() && args.audit_trail_database_url.is_none() {
        args.audit_trail = Some(true);
    }
    // Before seeding and building: bad settings and a port in use fail at once.
    let (early, _log) = load(args.clone())?;
    let address = early.http.listen;
    let socket = reserve(address)?;
    let database_url = canopy::app::seed_demo(&path).await?;
    let plugins = match canopy::app::shop_plugin_in(plugin_lang, &plugin_dir) {
        Ok(()) => {
            eprintln!("Loading the shop plugin from {}", plugin_dir.display());
            true
        }
        // Asked for by name: without it the demo would not be what was asked.
        Err(why) if plugin_lang == canopy::typings::Language::Python => {
            anyhow::bail!("cannot serve the Python shop plugin: {why}")
        }
        Err(why) if plugin_lang == canopy::typings::Language::Ts => {
            anyhow::bail!("cannot serve the TypeScript shop plugin: {why}")
        }
        Err(why) => {
            eprintln!("Serving without the shop plugin: {why}");
            // An empty plugin folder: the demo serves the shop's tables as they are.
            std::fs::create_dir_all(&plugin_dir)
                .with_context(|| format!("cannot create {}", plugin_dir.display()))?;
            false
        }
    };
    let (_, permissions_file) = canopy::app::admin::demo_permissions_file(&store_dir, plugins)?;
    args.permissions_file = Some(permissions_file);
    // The refund workflow needs the plugin's `Refund` action: without the plugin, no workflow.
    args.workflows_dir = if plugins {
        Some(canopy::app::admin::demo_workflows_dir(
            &dir.join("workflows"),
        )?)
    } else {
        None
    };
    args.database_url = Some(database_url.clone());
    let (mut config, warnings) = Config::load(args)?;
    // The shop's dashboards, unless the config file has its own.
    if config.dashboard.is_empty() {
        config.dashboard = canopy::app::admin::demo_dashboard()?;
    }
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    let mount_path = config.http.mount_path();
    let settings = demo_settings(&config, &database_url);
    let workflows = config.workflows_dir.is_some();
    let admin = &canopy::app::admin::DEMO_LOGINS[0];
    let mut shutdown = Box::pin(shutdown_signal());
    let Some(ready) = until_stopped(canopy::app::prepare(config), &mut shutdown).await? else {
        return Ok(());
    };
    let token = canopy::app::admin::demo_session_token(ready.store(), DEMO_AUTH_SECRET).await?;
    let listener = start_listening(socket, address)?;
    let bound = listener.local_addr()?;
    let origin = format!("http://{bound}");
    let settings_file = write_demo_settings(&settings, bound)?;
    let base = format!("{origin}{mount_path}");
    canopy::outln!("\nCanopy is serving the shop demo on {base}");
    let console = canopy::console::base_path(&mount_path);
    canopy::outln!("\nOpen the console at {origin}{console} and sign in as:");
    for login in &canopy::app::admin::DEMO_LOGINS {
        canopy::outln!(
            "  {:<22} {:<20} {}",
            login.email,
            login.password,
            login.what
        );
    }
    canopy::outln!(
        "\nSettings (database, store, plugin folder, public demo secrets): {settings_file}\n\
         `canopy users list`, `canopy tokens create`, `canopy reload`, … run here use them."
    );
    canopy::outln!(
        "\nToken of {} (valid {} hours):\n{token}",
        admin.email,
        canopy::app::admin::DEMO_TOKEN_HOURS
    );
    canopy::outln!(
        "\nTry:\ncurl -g -H \"Authorization: Bearer {token}\" \\\n  '{base}/orders?timezone=Europe/Paris&page[size]=3&sort=-total&fields[orders]=id,status,total,customer&fields[customer]=email'"
    );
    if workflows {
        let (url, webhook_token) =
            canopy::app::admin::demo_webhook(ready.store(), DEMO_AUTH_SECRET, &origin).await?;
        let order = canopy::app::demo_refundable_order(&database_url)
            .await?
            .context("the demo database has no paid order to refund")?;
        canopy::outln!(
            "\nStart the refund workflow on order {order} (paid, not refunded yet) through its signed webhook (as {}):\ncurl -i -X POST \\\n  -H \"Authorization: Bearer {webhook_token}\" -H \"Content-Type: application/json\" \\\n  -d '{{\"record_id\": {order}}}' \\\n  '{url}'",
            admin.email
        );
        canopy::outln!(
            "Then follow the run (the 202's Location):\ncurl -H \"Authorization: Bearer {token}\" '{origin}/v1/project/canopy/environment/production/workflow-runs?limit=1'"
        );
    }
    canopy::outln!(
        "\nMCP server for AI assistants (OAuth: they open a sign-in page; use a login above):\n  {origin}/mcp\n  e.g. npx @modelcontextprotocol/inspector, transport \"Streamable HTTP\", URL {origin}/mcp"
    );
    canopy::outln!("\nPress Ctrl-C to stop.");
    ready
        .serve(listener, shutdown, canopy::app::ServeOptions::default())
        .await
}

/// What the demo serves, as `.canopy/demo.toml` says it to the CLI (its address is added once
/// bound): every path absolute, so that the file works from any folder with `--config`.
fn demo_settings(config: &Config, database_url: &str) -> Vec<(&'static str, String)> {
    let mut settings = vec![
        ("databaseUrl", database_url.to_owned()),
        ("stateUrl", config.platform.state_url.clone()),
        ("project", config.platform.project.clone()),
        ("environment", config.platform.environment.clone()),
        ("schemaPath", config.schema.path.display().to_string()),
        ("authSecret", DEMO_AUTH_SECRET.to_owned()),
        ("envSecret", DEMO_ENV_SECRET.to_owned()),
    ];
    if let Some(dir) = &config.plugin_dir {
        settings.push(("pluginDir", dir.display().to_string()));
    }
    if let Some(dir) = &config.workflows_dir {
        settings.push(("workflowsDir", dir.display().to_string()));
    }
    if !config.http.prefix.is_empty() {
        settings.push(("prefix", config.http.prefix.clone()));
    }
    settings
}

/// Writes [`canopy::config::DEMO_SETTINGS`] (a config file of `serve`'s format) and returns its
/// path.
fn write_demo_settings(
    settings: &[(&'static str, String)],
    bound: SocketAddr,
) -> anyhow::Result<&'static str> {
    let path = canopy::config::DEMO_SETTINGS;
    let mut text = String::from(
        "# Written by `canopy demo` at each start: what the demo serves, with its public secrets.\n\
         # The CLI reads this file when no store setting is given (`canopy users list`,\n\
         # `canopy reload`, `canopy token`, …); from another folder, give it with --config.\n",
    );
    let listen = bound.to_string();
    for (key, value) in settings
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain([("listen", listen.as_str())])
    {
        // A JSON string is a valid TOML basic string.
        text.push_str(&format!("{key} = {}\n", serde_json::Value::from(value)));
    }
    if let Some(parent) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {path}"))?;
    Ok(path)
}

/// The listen backlog (connections the kernel queues before they are accepted), as tokio's
/// `TcpListener::bind` sets it.
const LISTEN_BACKLOG: u32 = 1024;

/// Binds a socket to `address` without listening yet: the port is ours (a port in use is an
/// error now, saying that `--listen` picks another), but connections are refused until the
/// caller listens, once the stack is ready.
fn reserve(address: SocketAddr) -> anyhow::Result<tokio::net::TcpSocket> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .context("cannot open a socket")?;
    // As std's `TcpListener::bind` does on Unix: a restart may take the port back while
    // connections of the previous process linger in TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuseaddr(true).context("cannot open a socket")?;
    socket
        .bind(address)
        .map_err(|error| listen_error(address, &error))?;
    Ok(socket)
}

/// Starts listening on a socket [`reserve`]d for `address`.
fn start_listening(
    socket: tokio::net::TcpSocket,
    address: SocketAddr,
) -> anyhow::Result<tokio::net::TcpListener> {
    socket
        .listen(LISTEN_BACKLOG)
        .map_err(|error| listen_error(address, &error))
}

/// `cannot listen on ADDRESS: …`, saying that `--listen` picks another address when the port is
/// in use (at bind, or at listen when another process bound it too and listened first).
fn listen_error(address: SocketAddr, error: &std::io::Error) -> anyhow::Error {
    let hint = if error.kind() == std::io::ErrorKind::AddrInUse {
        let mut other = address;
        other.set_port(address.port().wrapping_add(1).max(1));
        format!(
            "; another process uses this port: pick another with --listen (e.g. --listen {other})"
        )
    } else {
        String::new()
    };
    anyhow::anyhow!("cannot listen on {address}: {error}{hint}")
}

/// Loads the configuration, starts logging with its settings, and logs its warnings. The guard
/// must live until the command ends: dropping it writes out the lines still queued.
fn load(args: ServeArgs) -> anyhow::Result<(Config, canopy::logging::LogGuard)> {
    let (config, warnings) = Config::load(args)?;
    let guard = canopy::logging::init(
        &config.log.filter,
        config.log.format,
        config.log.traces.as_deref(),
    )?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    Ok((config, guard))
}

/// Listens for SIGINT (Ctrl-C) and SIGTERM from the moment it is called, not from its first
/// poll, and resolves on the first one; in-flight requests then finish.
#[cfg(unix)]
fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let interrupt = signal(SignalKind::interrupt());
    let terminate = signal(SignalKind::terminate());
    async move {
        tokio::select! {
            () = received(interrupt, "SIGINT") => {}
            () = received(terminate, "SIGTERM") => {}
        }
        tracing::info!("shutting down: finishing requests in flight");
    }
}

/// Resolves when `signal` arrives; never when it could not be listened for (said once).
#[cfg(unix)]
async fn received(signal: std::io::Result<tokio::signal::unix::Signal>, name: &str) {
    match signal {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(error) => {
            tracing::error!(%error, "cannot listen for {name}");
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves on Ctrl-C; in-flight requests then finish.
#[cfg(not(unix))]
fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down: finishing requests in flight");
    }
}
