//! The management commands: `canopy users|teams|roles|permissions|tokens|workflows …` and
//! `canopy init`, over the same store as `canopy serve` (`config::StoreArgs`), with
//! `Actor::System` as the admin log's initiator. Human tables by default, `--json` for scripts; an error is one sentence.
//!
//! Also what `serve` and `demo` need of the same model: applying the permissions file at start
//! (`startup`), the sign-in instructions, and the demo's users (`demo`).

mod demo;
mod groups;
mod permissions;
mod table;
mod tokens;
mod users;
mod workflows;

use std::io::Read as _;

use anyhow::Context as _;
use clap::Args;

pub use demo::{
    DEMO_LOGINS, DEMO_TOKEN_HOURS, DemoLogin, demo_dashboard, demo_permissions_file,
    demo_session_token, demo_webhook, demo_workflows_dir,
};
pub use groups::{RolesCommand, TeamsCommand};
pub use permissions::{IpCommand, PermissionsCommand};
pub use tokens::{TokensArgs, TokensCommand};
pub use users::UsersCommand;
pub use workflows::{RunsCommand, WorkflowsArgs, WorkflowsCommand};

use crate::config::{Config, StoreArgs, StoreConfig};
use crate::datasource::DataSourceSchema;
use crate::platform::bootstrap::{self, FirstAdmin};
use crate::platform::declarative::{self, Mode, SchemaView};
use crate::platform::{Actor, Store};

/// `canopy users …`.
#[derive(Debug, Args)]
pub struct UsersArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: UsersCommand,
}

/// `canopy teams …`.
#[derive(Debug, Args)]
pub struct TeamsArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: TeamsCommand,
}

/// `canopy roles …`.
#[derive(Debug, Args)]
pub struct RolesArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: RolesCommand,
}

/// `canopy permissions …`.
#[derive(Debug, Args)]
pub struct PermissionsArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: PermissionsCommand,
}

/// `canopy token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Email of the user the token is for: a user of the store, whose id, team, role,
    /// permission level and team rendering the token carries, as signing in would give.
    #[arg(long)]
    pub email: String,
    /// Lifetime: a whole number followed by s, m, h or d.
    #[arg(long, default_value = "1h")]
    pub expires: String,
    /// The secret `canopy serve` verifies tokens with. [default: authSecret of the config file]
    #[arg(
        long,
        env = "CANOPY_AUTH_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub auth_secret: Option<String>,
}

/// `canopy init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The first admin's email.
    #[arg(long, env = "CANOPY_ADMIN_EMAIL", default_value = bootstrap::DEFAULT_ADMIN_EMAIL)]
    pub admin_email: String,
    /// Read the first admin's password from the first line of stdin (at least 8 characters)
    /// instead of generating one.
    #[arg(long)]
    pub admin_password_stdin: bool,
}

/// The store named by the settings, opened and migrated. A SQLite store that does not exist
/// is refused rather than created: a command that reads or changes existing data would only
/// find an empty store (and leave it behind), which hides a wrong folder or a missing setting.
/// `canopy init` and `canopy serve` create stores.
pub(crate) async fn open(args: StoreArgs) -> anyhow::Result<(Store, StoreConfig)> {
    open_store(args, false).await
}

async fn open_store(args: StoreArgs, create: bool) -> anyhow::Result<(Store, StoreConfig)> {
    let config = args.load()?;
    let platform = &config.platform;
    if !create
        && let Some(path) = crate::platform::store::sqlite_path(&platform.state_url)
        && !std::path::Path::new(path).exists()
    {
        anyhow::bail!(
            "no Canopy store at {path}: `canopy init` creates one (`canopy serve` too, at its \
             first start), and --state-url, --data-dir or --config name another"
        );
    }
    let store = Store::open(
        &platform.state_url,
        &platform.project,
        &platform.environment,
    )
    .await
    .context("opening Canopy's store (--state-url)")?;
    Ok((store, config))
}

/// The schema file as names to check against, when it exists.
fn schema_view(config: &StoreConfig) -> anyhow::Result<Option<SchemaView>> {
    SchemaView::from_schema_file(&config.schema_path).map_err(anyhow::Error::msg)
}

/// Changes made from the command line.
const ACTOR: Actor = Actor::System;

/// The first line of stdin, without its line ending: a password piped or typed.
fn read_password() -> anyhow::Result<String> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("cannot read the password from stdin")?;
    let line = input.lines().next().unwrap_or("").to_owned();
    if line.is_empty() {
        anyhow::bail!("no password on stdin: pipe it, e.g. `echo \"$PASSWORD\" | canopy …`");
    }
    Ok(line)
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    emit(&format!("{}\n", serde_json::to_string_pretty(value)?));
    Ok(())
}

/// Writes to stdout; a reader that went away (`| head`) ends the output quietly.
fn emit(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Refuses, in one sentence saying how to fix it, a role or team that does not exist.
async fn require_names(store: &Store, role: Option<&str>, teams: &[String]) -> anyhow::Result<()> {
    if let Some(role) = role
        && store.role_by_name(role).await?.is_none()
    {
        anyhow::bail!("no role {role:?}: create it first with `canopy roles add {role:?}`");
    }
    for team in teams {
        if store.team_by_name(team).await?.is_none() {
            anyhow::bail!("no team {team:?}: create it first with `canopy teams add {team:?}`");
        }
    }
    Ok(())
}

/// `canopy token`: a session token of a user of the store, for scripts and other agents, with
/// the claims signing in would give them (their first team and its rendering).
pub async fn token(args: TokenArgs) -> anyhow::Result<String> {
    let ttl = crate::auth::parse_ttl(&args.expires)?;
    let (store, config) = open(args.store).await?;
    let minted = async {
        let secret = args.auth_secret.or(config.server.auth_secret).context(
            "tokens are signed with the auth secret of `canopy serve`: give --auth-secret \
                 (or CANOPY_AUTH_SECRET, or authSecret in --config)",
        )?;
        session_token(&store, &secret, &args.email, ttl).await
    }
    .await;
    store.close().await;
    minted
}

/// A session token of the store's user `email`, valid `ttl`, with the claims signing in would
/// give them (their first team and its rendering): `canopy token`'s, and `canopy test-server`'s.
pub async fn session_token(
    store: &Store,
    auth_secret: &str,
    email: &str,
    ttl: std::time::Duration,
) -> anyhow::Result<String> {
    let user = store
        .user_by_email(email)
        .await?
        .with_context(|| format!("no user {email:?} (see `canopy users list`)"))?;
    let team = user.teams.first().with_context(|| {
        format!("{email} is in no team: add them to one (`canopy users set {email} --team …`)")
    })?;
    let rendering_id = store.rendering_id(team.id).await?;
    let claims = crate::auth::SessionClaims::for_user(&user, team, rendering_id);
    Ok(crate::auth::SessionKey::new(auth_secret).mint(claims, ttl)?)
}

pub async fn users(args: UsersArgs) -> anyhow::Result<()> {
    let (store, config) = open(args.store).await?;
    let done = users::run(&store, args.command, args.json).await;
    store.close().await;
    drop(config);
    done
}

pub async fn teams(args: TeamsArgs) -> anyhow::Result<()> {
    let (store, config) = open(args.store).await?;
    let done = groups::teams(&store, args.command, args.json).await;
    store.close().await;
    drop(config);
    done
}

pub async fn roles(args: RolesArgs) -> anyhow::Result<()> {
    let (store, config) = open(args.store).await?;
    let done = groups::roles(&store, args.command, args.json).await;
    store.close().await;
    drop(config);
    done
}

pub async fn tokens(args: TokensArgs) -> anyhow::Result<()> {
    let (store, _config) = open(args.store).await?;
    let done = tokens::run(&store, args.command, args.json).await;
    store.close().await;
    done
}

pub async fn workflows(args: WorkflowsArgs) -> anyhow::Result<()> {
    let (store, config) = open(args.store).await?;
    let done = workflows::run(&store, &config, args.command, args.json).await;
    store.close().await;
    done
}

pub async fn permissions(args: PermissionsArgs) -> anyhow::Result<()> {
    let (store, config) = open(args.store).await?;
    let done = permissions::run(&store, &config, args.command, args.json).await;
    store.close().await;
    done
}

/// `canopy init`: creates the store and its first admin, and says how to sign in. A store that
/// already has users is left as it is.
pub async fn init(args: InitArgs) -> anyhow::Result<()> {
    let password = if args.admin_password_stdin {
        Some(read_password()?)
    } else {
        None
    };
    let (store, config) = open_store(args.store, true).await?;
    let created = bootstrap::first_admin(&store, &args.admin_email, password.as_deref())
        .await
        .context("creating the first admin")?;
    let location = crate::datasource::sql::redact_url(&config.platform.state_url);
    match created {
        Some(admin) => {
            crate::outln!(
                "Created Canopy's store at {location} (project {}, environment {}).",
                store.project(),
                store.environment()
            );
            crate::out!(
                "{}",
                sign_in_instructions(&admin, password.is_some(), DEFAULT_BASE_URL)
            );
        }
        None => {
            let users = store.users().await?.len();
            crate::outln!(
                "Canopy's store at {location} already has {users} user(s): nothing to do \
                 (see `canopy users list`)."
            );
        }
    }
    store.close().await;
    Ok(())
}

/// Where `canopy serve` listens by default.
const DEFAULT_BASE_URL: &str = "http://127.0.0.1:3351";

/// What to tell the operator once the first admin exists: the login, the password (once, unless
/// they chose it), and where to sign in.
pub fn sign_in_instructions(admin: &FirstAdmin, chosen_password: bool, base_url: &str) -> String {
    let password = if chosen_password {
        "the one you gave".to_owned()
    } else {
        format!("{}   (shown once: keep it)", admin.password)
    };
    format!(
        "\nFirst admin: {email}\nPassword:    {password}\n\nSign in: with `canopy serve` \
         running, point your admin front end at {base_url}/forest and sign in with this email \
         and password (the built-in sign-in page).\nAdmin API: {base_url}/v1/project/…/users \
         with the session token of an admin.\nChange the password: canopy users set {email} \
         --password-stdin\n",
        email = admin.email,
    )
}

/// What a serve start does with Canopy's store before the first admin is made: applies the
/// permissions file (a seed file to an empty store; a managed one every time), or gives back
/// the parts a file managed when the settings no longer name a managed file.
pub async fn startup(
    store: &Store,
    config: &Config,
    schema: &DataSourceSchema,
) -> anyhow::Result<()> {
    let Some(path) = &config.platform.permissions_file else {
        if let Some(path) = declarative::release(store).await? {
            tracing::info!(file = %path, "permissions are no longer managed by a file");
        }
        return Ok(());
    };
    // The names of the agents that take their permissions from this Canopy count too.
    let apimap = store.apimap().await?;
    let view = SchemaView::served(schema).with_agents(apimap.as_ref().map(|a| &a.document));
    let checked = declarative::load(path, Some(&view))?;
    for warning in &checked.warnings {
        tracing::warn!(file = %path.display(), "{warning}");
    }
    let outcome = declarative::apply(store, &checked).await?;
    if let Some(skipped) = outcome.skipped {
        tracing::info!("{skipped}");
    } else {
        for change in &outcome.changes {
            tracing::info!(file = %path.display(), "{change}");
        }
        tracing::info!(
            file = %path.display(),
            mode = checked.mode.as_str(),
            changes = outcome.changes.len(),
            "permissions file applied"
        );
    }
    if checked.mode == Mode::Seed {
        // Seeded (or not, on a store with data): the store is the truth from now on.
        declarative::release(store).await?;
    }
    Ok(())
}

/// A JSON value written as an inline TOML value (JSON strings are TOML basic strings): the
/// permissions files the demo and `canopy test-server` write.
pub(crate) fn toml_inline(value: &serde_json::Value) -> String {
    use serde_json::Value as Json;
    match value {
        Json::Null => "\"\"".to_owned(),
        Json::Bool(_) | Json::Number(_) | Json::String(_) => value.to_string(),
        Json::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_inline).collect::<Vec<_>>().join(", ")
        ),
        Json::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{} = {}", Json::String(k.clone()), toml_inline(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
