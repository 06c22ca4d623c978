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
    /// Write typed names of the customized schema (after the plugins) as a Rust module for
    /// plugin crates: collections, fields, relations and `relation:field` paths as constants, so
    /// that a misspelt name is a compile error. Takes the settings of `serve`.
    Typings {
        #[command(flatten)]
        args: ServeArgs,
        /// Output file (e.g. `my-plugin/src/typings.rs`). [default: typingsPath, else stdout]
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
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
        /// Address the server listens on.
        #[arg(long, env = "CANOPY_LISTEN", default_value = "127.0.0.1:3351")]
        listen: String,
        /// The server's route prefix.
        #[arg(long, env = "CANOPY_PREFIX", default_value = "")]
        prefix: String,
        /// The server's environment secret.
        #[arg(
            long,
            env = "CANOPY_ENV_SECRET",
            value_name = "HEX",
            hide_env_values = true
        )]
        env_secret: String,
    },
    /// Mint a session token for local use (an admin user with the given email).
    Token {
        /// Email of the user the token is for.
        #[arg(long)]
        email: String,
        /// Lifetime: a whole number followed by s, m, h or d.
        #[arg(long, default_value = "1h")]
        expires: String,
        /// The secret `canopy serve` verifies tokens with.
        #[arg(
            long,
            env = "CANOPY_AUTH_SECRET",
            value_name = "SECRET",
            hide_env_values = true
        )]
        auth_secret: String,
    },
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
    /// Build the shop demo database (SQLite), serve it, and print the URL, a token and a curl
    /// line. Uses fixed, public demo secrets: never expose it beyond this machine.
    Demo {
        /// Where the demo database is written (replaced if it exists).
        #[arg(long, default_value = ".canopy/shop.sqlite")]
        path: PathBuf,
        /// Address to serve on.
        #[arg(long, default_value = "127.0.0.1:3351")]
        listen: String,
        /// Log filter, e.g. `info`, `debug`, `canopy=debug`.
        #[arg(long, env = "CANOPY_LOG_LEVEL", default_value = "info")]
        log_level: String,
    },
}

#[derive(Debug, Subcommand)]
enum PluginCommand {
    /// Create a ready-to-build plugin crate: an example computed field and action, its own
    /// workspace, wasm32-wasip2 as build target, the `NAME.toml` settings and a README with the
    /// build and reload loop. Refuses to write into a folder that is not empty.
    New {
        /// The plugin's name: lower-case letters, digits, `-` and `_`; also its crate's name
        /// and the `NAME.wasm` it is loaded as.
        name: String,
        /// The crate's folder. [default: ./NAME]
        #[arg(long, value_name = "PATH")]
        dir: Option<PathBuf>,
        /// The `guest-sdk` folder of a Canopy checkout, depended on by path. [default: the
        /// checkout this binary was built from]
        #[arg(long, env = "CANOPY_SDK", value_name = "PATH")]
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
    let ready = canopy::app::prepare(config).await?;
    let listener = start_listening(socket, config_listen)?;
    let address = listener.local_addr()?;
    match &mcp {
        Some(mcp) if mcp.only => println!(
            "Canopy is serving its MCP server on http://{address}{}/mcp",
            mcp.base_path.as_deref().unwrap_or("")
        ),
        Some(mcp) => {
            println!("Canopy is serving on http://{address}{mount_path}");
            println!(
                "MCP server: http://{address}{}/mcp",
                mcp.base_path.as_deref().unwrap_or("")
            );
        }
        None => println!("Canopy is serving on http://{address}{mount_path}"),
    }
    let options = canopy::app::ServeOptions { watch };
    ready.serve(listener, shutdown_signal(), options).await
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
            listen,
            prefix,
            env_secret,
        } => {
            println!(
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
            max_depth,
        } => {
            // Typings neither serve nor sign anything: the secrets `serve` requires are not
            // asked for (placeholders stand in when none is given).
            args.auth_secret
                .get_or_insert_with(|| "unused-by-typings".to_owned());
            args.env_secret.get_or_insert_with(|| "0".repeat(64));
            let (config, _log) = load(args)?;
            canopy::app::typings(&config, out.as_deref(), max_depth).await
        }
        Command::Plugin(PluginCommand::New { name, dir, sdk }) => {
            let created = canopy::scaffold::new_plugin(&name, dir.as_deref(), sdk.as_deref())?;
            let dir = created.dir.display();
            println!("Created the plugin crate {dir}. Next:");
            println!("  cd {dir} && cargo build --release");
            println!(
                "  cp {} PLUGIN_DIR/{}  (and {name}.toml beside it)",
                created.artifact.display(),
                created.plugin_file
            );
            println!("  canopy reload   (or serve with --watch)");
            Ok(())
        }
        Command::Token {
            email,
            expires,
            auth_secret,
        } => {
            println!("{}", canopy::app::token(&auth_secret, &email, &expires)?);
            Ok(())
        }
        Command::Inspect {
            database_url,
            log_level,
        } => {
            let _log = canopy::logging::init(&log_level, LogFormat::Text)?;
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
            listen,
            log_level,
        } => {
            let _log = canopy::logging::init(&log_level, LogFormat::Text)?;
            demo(&path, listen).await
        }
    }
}

/// The demo's secrets: fixed so that the printed token keeps working across restarts, and
/// public, which is why the demo only listens where you tell it (loopback by default).
const DEMO_AUTH_SECRET: &str = "canopy-demo-auth-secret-do-not-use-in-production";
const DEMO_ENV_SECRET: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Seeds the shop database, builds the shop plugin when it can, then serves both like
/// `canopy serve --plugins` would.
async fn demo(path: &std::path::Path, listen: String) -> anyhow::Result<()> {
    // Before seeding and building: a port in use fails at once.
    let address: SocketAddr = listen.parse().with_context(|| {
        format!("--listen {listen}: expected an address such as 127.0.0.1:3351")
    })?;
    let socket = reserve(address)?;
    let database_url = canopy::app::seed_demo(path).await?;
    let plugin_dir = path.with_file_name("plugins");
    let plugin_dir = match canopy::app::shop_plugin(&plugin_dir) {
        Ok(()) => {
            eprintln!("Loading the shop plugin from {}", plugin_dir.display());
            Some(plugin_dir)
        }
        Err(why) => {
            eprintln!("Serving without plugins: {why}");
            None
        }
    };
    // The demo's own store, rebuilt at each run with its users (see `admin::demo`).
    let (data_dir, permissions_file) =
        canopy::app::admin::demo_permissions_file(&path.with_file_name("demo-store"))?;
    // The refund workflow needs the plugin's `Refund` action: without the plugin, no workflow.
    let workflows_dir = plugin_dir
        .as_ref()
        .map(|_| canopy::app::admin::demo_workflows_dir(&path.with_file_name("workflows")))
        .transpose()?;
    let args = ServeArgs {
        database_url: Some(database_url),
        data_dir: Some(data_dir),
        permissions_file: Some(permissions_file),
        auth_secret: Some(DEMO_AUTH_SECRET.to_owned()),
        env_secret: Some(DEMO_ENV_SECRET.to_owned()),
        listen: Some(listen),
        schema_path: Some(path.with_file_name(".forestadmin-schema.json")),
        plugin_dir,
        workflows_dir: workflows_dir.clone(),
        // The MCP server, for AI assistants: they sign in as one of the logins below.
        mcp: canopy::config::McpArgs {
            mcp: Some(true),
            ..canopy::config::McpArgs::default()
        },
        ..ServeArgs::default()
    };
    let (config, warnings) = Config::load(args)?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    let mount_path = config.http.mount_path();
    let workflows = workflows_dir.is_some();
    let admin = &canopy::app::admin::DEMO_LOGINS[0];
    let ready = canopy::app::prepare(config).await?;
    let token = canopy::app::admin::demo_session_token(ready.store(), DEMO_AUTH_SECRET).await?;
    let listener = start_listening(socket, address)?;
    let origin = format!("http://{}", listener.local_addr()?);
    let base = format!("{origin}{mount_path}");
    println!("\nCanopy is serving the shop demo on {base}");
    println!("\nSign in at {base} as:");
    for login in &canopy::app::admin::DEMO_LOGINS {
        println!(
            "  {:<22} {:<20} {}",
            login.email, login.password, login.what
        );
    }
    println!("\nToken of {} (12 hours):\n{token}", admin.email);
    println!(
        "\nTry:\ncurl -g -H \"Authorization: Bearer {token}\" \\\n  '{base}/orders?timezone=Europe/Paris&page[size]=3&sort=-total&fields[orders]=id,status,total,customer&fields[customer]=email'"
    );
    if workflows {
        let (url, webhook_token) =
            canopy::app::admin::demo_webhook(ready.store(), DEMO_AUTH_SECRET, &origin).await?;
        println!(
            "\nStart the refund workflow on order 1 through its signed webhook (as {}):\ncurl -i -X POST \\\n  -H \"Authorization: Bearer {webhook_token}\" -H \"Content-Type: application/json\" \\\n  -d '{{\"record_id\": 1}}' \\\n  '{url}'",
            admin.email
        );
        println!(
            "Then follow the run (the 202's Location):\ncurl -H \"Authorization: Bearer {token}\" '{origin}/v1/project/canopy/environment/production/workflow-runs?limit=1'"
        );
    }
    println!(
        "\nMCP server for AI assistants (OAuth: they open a sign-in page; use a login above):\n  {origin}/mcp\n  e.g. npx @modelcontextprotocol/inspector, transport \"Streamable HTTP\", URL {origin}/mcp"
    );
    println!("\nPress Ctrl-C to stop.");
    ready
        .serve(
            listener,
            shutdown_signal(),
            canopy::app::ServeOptions::default(),
        )
        .await
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
    let guard = canopy::logging::init(&config.log.filter, config.log.format)?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    Ok((config, guard))
}

/// Resolves on the first SIGINT (Ctrl-C) or SIGTERM; in-flight requests then finish.
async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutting down: finishing requests in flight");
}
