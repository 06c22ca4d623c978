//! The `canopy` binary: turns arguments and environment into calls to `canopy::app`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Canopy turns any SQL database into a secure admin back end.
#[derive(Debug, Parser)]
#[command(name = "canopy", version, about)]
struct Cli {
    /// Log filter, e.g. `info`, `debug`, `canopy=debug`.
    #[arg(long, env = "CANOPY_LOG_LEVEL", default_value = "info", global = true)]
    log_level: String,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Introspect a database and print the collections Canopy would serve, as JSON.
    Inspect {
        /// Database URL: sqlite:path?mode=rwc, postgres://…, mysql://… or mariadb://….
        #[arg(long, env = "CANOPY_DATABASE_URL")]
        database_url: String,
    },
    /// Build the shop demo database (SQLite) and show the datasource at work on it.
    Demo {
        /// Where the demo database is written (replaced if it exists).
        #[arg(long, default_value = ".canopy/shop.sqlite")]
        path: PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&cli.log_level)?)
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Inspect { database_url } => canopy::app::inspect(&database_url).await,
        Command::Demo { path } => canopy::app::demo(&path).await,
    }
}
