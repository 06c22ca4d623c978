//! `canopy tokens …`: the public API's application tokens from the command line — create one
//! for a user (its secret printed once), list them, revoke one. A revocation reaches a running
//! server within `auth::tokens::CACHE_TTL` (it re-reads a cached token that often).

use anyhow::Context as _;
use clap::{Args, Subcommand};

use super::{print_json, table};
use crate::config::StoreArgs;
use crate::platform::tokens::parse_scopes;
use crate::platform::{Actor, NewToken, Store, Token};

/// `canopy tokens …`.
#[derive(Debug, Args)]
pub struct TokensArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: TokensCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Create an application token for a user; its secret is printed once and cannot be read
    /// again.
    Create {
        /// The user the token acts as (with that user's rights at each call).
        #[arg(long, value_name = "EMAIL")]
        email: String,
        /// A name to recognise it by, e.g. "SIEM export".
        #[arg(long)]
        name: String,
        /// What it may do: activity_logs:read, admin_logs:read, notes:read, notes:write,
        /// workflows:trigger or all.
        /// Repeat the flag or separate with commas.
        #[arg(
            long = "scope",
            value_name = "SCOPE",
            required = true,
            value_delimiter = ','
        )]
        scopes: Vec<String>,
        /// Lifetime: a number followed by s, m, h or d (e.g. 90d). [default: no expiry]
        #[arg(long, value_name = "DURATION")]
        expires_in: Option<String>,
    },
    /// List the live (not revoked) tokens, of one user or of everyone.
    List {
        /// Only this user's tokens.
        #[arg(long, value_name = "EMAIL")]
        email: Option<String>,
    },
    /// Revoke a token by its id (from `canopy tokens list`).
    Revoke { id: String },
}

pub(super) async fn run(store: &Store, command: TokensCommand, json: bool) -> anyhow::Result<()> {
    match command {
        TokensCommand::Create {
            email,
            name,
            scopes,
            expires_in,
        } => {
            let user = store
                .user_by_email(&email)
                .await?
                .with_context(|| format!("no user {email:?} (see `canopy users list`)"))?;
            let scopes = parse_scopes(&scopes)?;
            let expires_at = match expires_in {
                Some(raw) => {
                    let ttl = crate::auth::parse_ttl(&raw)?;
                    let ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
                    Some(chrono::Utc::now().timestamp_millis().saturating_add(ms))
                }
                None => None,
            };
            let (token, secret) = store
                .create_token(
                    &Actor::System,
                    user.id,
                    NewToken {
                        name,
                        scopes,
                        expires_at,
                    },
                )
                .await?;
            if json {
                let mut out = token_json(&token, &user.email);
                out["token"] = secret.expose().into();
                return print_json(&out);
            }
            crate::outln!(
                "Created token {} ({}) for {} with {}.",
                token.id,
                token.name,
                user.email,
                scopes_text(&token)
            );
            crate::outln!("Token (shown once, keep it secret):\n{}", secret.expose());
        }
        TokensCommand::List { email } => {
            let users = store.users().await?;
            let owner = match &email {
                Some(email) => Some(
                    store
                        .user_by_email(email)
                        .await?
                        .with_context(|| format!("no user {email:?} (see `canopy users list`)"))?
                        .id,
                ),
                None => None,
            };
            let tokens = store.tokens(owner).await?;
            let email_of = |id: i64| {
                users
                    .iter()
                    .find(|u| u.id == id)
                    .map_or_else(|| id.to_string(), |u| u.email.clone())
            };
            if json {
                let out: Vec<_> = tokens
                    .iter()
                    .map(|t| token_json(t, &email_of(t.user_id)))
                    .collect();
                return print_json(&out);
            }
            let rows: Vec<Vec<String>> = tokens
                .iter()
                .map(|t| {
                    vec![
                        t.id.clone(),
                        t.name.clone(),
                        email_of(t.user_id),
                        scopes_text(t),
                        t.hint.clone(),
                        iso(t.created_at),
                        t.last_used_at.map_or_else(|| "-".to_owned(), iso),
                        t.expires_at.map_or_else(|| "-".to_owned(), iso),
                    ]
                })
                .collect();
            super::emit(&table::render(
                &[
                    "ID",
                    "NAME",
                    "USER",
                    "SCOPES",
                    "HINT",
                    "CREATED",
                    "LAST USED",
                    "EXPIRES",
                ],
                &rows,
            ));
        }
        TokensCommand::Revoke { id } => {
            if !store.revoke_token(&Actor::System, &id).await? {
                anyhow::bail!("no live token {id:?} (see `canopy tokens list`)");
            }
            if json {
                return print_json(&serde_json::json!({ "revoked": id }));
            }
            crate::outln!(
                "Revoked token {id}: running servers refuse it within {} seconds.",
                crate::auth::tokens::CACHE_TTL.as_secs()
            );
        }
    }
    Ok(())
}

fn scopes_text(token: &Token) -> String {
    table::list(token.scopes.iter().map(|s| s.as_str()))
}

fn token_json(token: &Token, email: &str) -> serde_json::Value {
    serde_json::json!({
        "id": token.id,
        "name": token.name,
        "email": email,
        "scopes": token.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "hint": token.hint,
        "createdAt": iso(token.created_at),
        "lastUsedAt": token.last_used_at.map(iso),
        "expiresAt": token.expires_at.map(iso),
    })
}

/// A stored time (unix ms) as the API prints it.
fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
