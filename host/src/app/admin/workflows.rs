//! `canopy workflows …`: workflows from the command line, over the same store as `canopy serve`.
//! One sub-command per concern, each in its own file: `webhook` (`triggers`).

mod triggers;

use clap::{Args, Subcommand};

pub use triggers::WebhookArgs;

use crate::config::StoreArgs;

/// `canopy workflows …`.
#[derive(Debug, Args)]
pub struct WorkflowsArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of text (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: WorkflowsCommand,
}

#[derive(Debug, Subcommand)]
pub enum WorkflowsCommand {
    /// A workflow's webhook trigger: print its URL, enable, disable or regenerate it.
    Webhook(WebhookArgs),
}

/// Runs `canopy workflows …`.
pub async fn run(args: WorkflowsArgs) -> anyhow::Result<()> {
    let (store, _config) = super::open(args.store).await?;
    let done = match args.command {
        WorkflowsCommand::Webhook(webhook) => triggers::run(&store, webhook, args.json).await,
    };
    store.close().await;
    done
}
