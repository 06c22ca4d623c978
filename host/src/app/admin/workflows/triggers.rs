//! `canopy workflows webhook url|enable|disable|regenerate <workflow>`: a workflow's webhook
//! trigger from the command line (the admin log names Canopy itself as the initiator). The URL
//! is signed with the keys `canopy serve` uses, so this command needs the same auth secret (or
//! `workflowWebhookKeys`), and the same public URL and prefix to print the address clients call.

use anyhow::Context as _;
use clap::{Args, Subcommand};

use super::super::{ACTOR, print_json};
use crate::config::{ServerSettings, TriggerConfig, parse_webhook_keys};
use crate::platform::Store;
use crate::workflows::triggers::{WebhookTrigger, WorkflowRef};
use crate::workflows::webhook::{KeyRing, PATH};

/// `canopy workflows webhook …`.
#[derive(Debug, Args)]
pub struct WebhookArgs {
    /// The secret `canopy serve` signs with (webhook URLs are derived from it unless
    /// --workflow-webhook-keys is given).
    #[arg(
        long,
        env = "CANOPY_AUTH_SECRET",
        hide_env_values = true,
        global = true
    )]
    pub auth_secret: Option<String>,
    /// The webhook signing keys of `canopy serve`, `kid:base64key,…`.
    #[arg(
        long,
        env = "CANOPY_WORKFLOW_WEBHOOK_KEYS",
        hide_env_values = true,
        global = true
    )]
    pub workflow_webhook_keys: Option<String>,
    /// Where clients reach the server. [default: http://127.0.0.1:3351]
    #[arg(long, env = "CANOPY_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,
    /// The routes' prefix, as `canopy serve --prefix`. [default: none]
    #[arg(long, env = "CANOPY_PREFIX", global = true)]
    pub prefix: Option<String>,
    #[command(subcommand)]
    pub command: WebhookCommand,
}

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Print the webhook's URL and state (the URL is a credential: keep it with the token).
    Url { workflow: String },
    /// Accept calls again, at the same URL.
    Enable { workflow: String },
    /// Answer calls with 404; the URL is kept.
    Disable { workflow: String },
    /// Give the webhook a new URL; the old one answers 400 from now on.
    Regenerate { workflow: String },
}

/// `server`: the config file's settings (the demo's after `canopy demo`), under the flags and
/// variables.
pub(super) async fn run(
    store: &Store,
    mut args: WebhookArgs,
    server: &ServerSettings,
    json: bool,
) -> anyhow::Result<()> {
    if args.auth_secret.is_none() {
        args.auth_secret.clone_from(&server.auth_secret);
    }
    if args.prefix.is_none() {
        args.prefix.clone_from(&server.prefix);
    }
    if args.public_url.is_none() {
        args.public_url = server
            .public_url
            .clone()
            .or_else(|| server.listen.as_ref().map(|l| format!("http://{l}")));
    }
    let keys = match &args.workflow_webhook_keys {
        Some(text) => parse_webhook_keys(text)
            .map_err(|problem| anyhow::anyhow!("--workflow-webhook-keys: {problem}"))?,
        None => TriggerConfig::default().webhook_keys,
    };
    let secret = args.auth_secret.as_deref().unwrap_or_default();
    if keys.is_empty() && secret.is_empty() {
        anyhow::bail!(
            "webhook URLs are signed with the auth secret of `canopy serve`: give --auth-secret \
             (or CANOPY_AUTH_SECRET, or authSecret in --config), or --workflow-webhook-keys"
        );
    }
    let ring = KeyRing::new(&keys, secret);
    let (name, trigger) = match &args.command {
        WebhookCommand::Url { workflow } => {
            let workflow = find(store, workflow).await?;
            (
                workflow.name.clone(),
                store.webhook_trigger(&workflow).await?,
            )
        }
        WebhookCommand::Enable { workflow } | WebhookCommand::Disable { workflow } => {
            let enabled = matches!(args.command, WebhookCommand::Enable { .. });
            let workflow = find(store, workflow).await?;
            (
                workflow.name.clone(),
                store
                    .set_webhook_enabled(&ACTOR, &workflow, enabled)
                    .await?,
            )
        }
        WebhookCommand::Regenerate { workflow } => {
            let workflow = find(store, workflow).await?;
            (
                workflow.name.clone(),
                store
                    .regenerate_webhook(&ACTOR, &workflow, ring.signing_kid())
                    .await?,
            )
        }
    };
    let url = url(store, &ring, &args, &trigger);
    if json {
        return print_json(&serde_json::json!({
            "workflow": name,
            "id": trigger.id,
            "enabled": trigger.enabled,
            "urlVersion": trigger.url_version,
            "rateLimitPerMinute": trigger.rate_limit_per_minute,
            "url": url,
        }));
    }
    let state = if trigger.enabled {
        "enabled"
    } else {
        "disabled"
    };
    crate::outln!(
        "Webhook of {name:?}: {state}, URL version {}.",
        trigger.url_version
    );
    crate::outln!("{url}");
    Ok(())
}

async fn find(store: &Store, workflow: &str) -> anyhow::Result<WorkflowRef> {
    store
        .workflow_ref(workflow)
        .await?
        .with_context(|| format!("no workflow {workflow:?} in this environment"))
}

fn url(store: &Store, ring: &KeyRing, args: &WebhookArgs, trigger: &WebhookTrigger) -> String {
    webhook_url(
        store,
        ring,
        args.public_url
            .as_deref()
            .unwrap_or("http://127.0.0.1:3351"),
        args.prefix.as_deref(),
        trigger,
    )
}

/// The URL clients call: `{origin}{/prefix}/v1/workflow-hooks/{signed segment}`.
pub(crate) fn webhook_url(
    store: &Store,
    ring: &KeyRing,
    origin: &str,
    prefix: Option<&str>,
    trigger: &WebhookTrigger,
) -> String {
    let origin = origin.trim_end_matches('/');
    let prefix = prefix
        .map(|p| p.trim_matches('/'))
        .filter(|p| !p.is_empty())
        .map(|p| format!("/{p}"))
        .unwrap_or_default();
    let segment = ring.sign(
        store.project(),
        store.environment(),
        &trigger.id,
        trigger.url_version,
        trigger.signing_kid.as_deref(),
    );
    format!("{origin}{prefix}/v1{PATH}/{segment}")
}
