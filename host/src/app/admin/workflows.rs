//! `canopy workflows …`: workflows from the command line, over the same store as `canopy
//! serve`. Each part is one subcommand in its own file: `runs` (list, show, abort).

mod runs;

use clap::{Args, Subcommand};

pub use runs::RunsCommand;

use crate::config::StoreArgs;

/// `canopy workflows …`.
#[derive(Debug, Args)]
pub struct WorkflowsArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: WorkflowsCommand,
}

#[derive(Debug, Subcommand)]
pub enum WorkflowsCommand {
    /// The runs of workflows: list them, show one with its steps, abort one.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
}

pub async fn workflows(args: WorkflowsArgs) -> anyhow::Result<()> {
    let (store, _config) = super::open(args.store).await?;
    let done = match args.command {
        WorkflowsCommand::Runs { command } => runs::run(&store, command, args.json).await,
    };
    store.close().await;
    done
}
