//! `canopy users list|add|set|remove`.

use std::collections::BTreeMap;

use clap::{Subcommand, ValueEnum};

use super::{ACTOR, print_json, read_password, table};
use crate::datasource::PermissionLevel;
use crate::platform::declarative::{self, Part};
use crate::platform::{NewUser, Store, User, UserChange, password};

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// List the project's users: id, email, name, level, role, teams, tags, status.
    List,
    /// Add a user, e.g. `canopy users add ann@x.io --level editor --role Support --team Ops
    /// --tag region=EU --password-stdin`. The role and teams must exist.
    Add {
        /// The user's email (their login).
        email: String,
        #[arg(long, default_value = "")]
        first_name: String,
        #[arg(long, default_value = "")]
        last_name: String,
        /// Permission level: admins use the admin API and CLI; admins, developers and editors
        /// compute any chart; users only the charts of their team.
        #[arg(long, value_enum, default_value_t = Level::User)]
        level: Level,
        /// The role whose rights the user has (see `canopy roles list`).
        #[arg(long)]
        role: Option<String>,
        /// A team of the user (repeat for several; the first is their team in the UI).
        #[arg(long = "team", value_name = "TEAM")]
        teams: Vec<String>,
        /// A tag, KEY=VALUE, for `{{currentUser.tags.KEY}}` in scopes (repeat for several).
        #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
        tags: Vec<(String, String)>,
        /// Read the password from the first line of stdin (at least 8 characters); without it
        /// the user cannot sign in with a password (an identity provider may still sign them in).
        #[arg(long)]
        password_stdin: bool,
    },
    /// Change a user (by email or id); only the options given change.
    Set {
        /// The user's email or id.
        user: String,
        /// A new email.
        #[arg(long)]
        email: Option<String>,
        #[arg(long)]
        first_name: Option<String>,
        #[arg(long)]
        last_name: Option<String>,
        #[arg(long, value_enum)]
        level: Option<Level>,
        /// A new role.
        #[arg(long, conflicts_with = "no_role")]
        role: Option<String>,
        /// Take the user's role away (no rights at all).
        #[arg(long)]
        no_role: bool,
        /// The user's teams, replacing the current ones (repeat for several).
        #[arg(long = "team", value_name = "TEAM", conflicts_with = "no_teams")]
        teams: Vec<String>,
        /// Remove the user from every team.
        #[arg(long)]
        no_teams: bool,
        /// Set a tag, KEY=VALUE (repeat for several).
        #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
        tags: Vec<(String, String)>,
        /// Remove a tag (repeat for several).
        #[arg(long = "untag", value_name = "KEY")]
        untag: Vec<String>,
        /// Disable the user: their sessions stop working at their next request.
        #[arg(long, conflicts_with = "enable")]
        disable: bool,
        #[arg(long)]
        enable: bool,
        /// Read a new password from the first line of stdin.
        #[arg(long, conflicts_with = "no_password")]
        password_stdin: bool,
        /// Remove the password (no built-in sign-in).
        #[arg(long)]
        no_password: bool,
    },
    /// Remove a user (by email or id); their sessions stop working at their next request.
    Remove {
        /// The user's email or id.
        user: String,
    },
}

/// A permission level on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Level {
    Admin,
    Developer,
    Editor,
    User,
}

impl From<Level> for PermissionLevel {
    fn from(level: Level) -> Self {
        match level {
            Level::Admin => Self::Admin,
            Level::Developer => Self::Developer,
            Level::Editor => Self::Editor,
            Level::User => Self::User,
        }
    }
}

fn parse_tag(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("expected KEY=VALUE, not {text:?}")),
    }
}

/// A user by id or email; not found is an error naming what was asked.
pub(super) async fn find(store: &Store, key: &str) -> anyhow::Result<User> {
    let found = match key.parse::<i64>() {
        Ok(id) => store.user(id).await?,
        Err(_) => store.user_by_email(key.trim()).await?,
    };
    found.ok_or_else(|| anyhow::anyhow!("no user {key:?} (see `canopy users list`)"))
}

pub(super) async fn run(store: &Store, command: UsersCommand, json: bool) -> anyhow::Result<()> {
    match command {
        UsersCommand::List => {
            let users = store.users().await?;
            if json {
                return print_json(&users);
            }
            super::emit(&render(&users));
        }
        UsersCommand::Add {
            email,
            first_name,
            last_name,
            level,
            role,
            teams,
            tags,
            password_stdin,
        } => {
            declarative::guard(store, Part::Users).await?;
            super::require_names(store, role.as_deref(), &teams).await?;
            let password_hash = if password_stdin {
                Some(password::hash(&read_password()?)?)
            } else {
                None
            };
            let user = store
                .create_user(
                    &ACTOR,
                    NewUser {
                        email,
                        first_name,
                        last_name,
                        permission_level: level.into(),
                        role,
                        teams,
                        tags: tags.into_iter().collect(),
                        password_hash,
                    },
                )
                .await?;
            if json {
                return print_json(&user);
            }
            crate::outln!("Added user {} ({}).", user.email, describe(&user));
        }
        UsersCommand::Set {
            user,
            email,
            first_name,
            last_name,
            level,
            role,
            no_role,
            teams,
            no_teams,
            tags,
            untag,
            disable,
            enable,
            password_stdin,
            no_password,
        } => {
            let before = find(store, &user).await?;
            let mut change = UserChange {
                email,
                first_name,
                last_name,
                permission_level: level.map(Into::into),
                role: if no_role { Some(None) } else { role.map(Some) },
                teams: if no_teams {
                    Some(Vec::new())
                } else if teams.is_empty() {
                    None
                } else {
                    Some(teams)
                },
                disabled: if disable {
                    Some(true)
                } else if enable {
                    Some(false)
                } else {
                    None
                },
                ..UserChange::default()
            };
            if !tags.is_empty() || !untag.is_empty() {
                let mut all: BTreeMap<String, String> = before.tags.clone();
                for key in &untag {
                    if all.remove(key).is_none() {
                        anyhow::bail!("{} has no tag {key:?}", before.email);
                    }
                }
                all.extend(tags);
                change.tags = Some(all);
            }
            let only_password = change.email.is_none()
                && change.first_name.is_none()
                && change.last_name.is_none()
                && change.permission_level.is_none()
                && change.role.is_none()
                && change.teams.is_none()
                && change.tags.is_none()
                && change.disabled.is_none();
            super::require_names(
                store,
                change.role.clone().flatten().as_deref(),
                change.teams.as_deref().unwrap_or_default(),
            )
            .await?;
            let managed = declarative::managed(store).await?;
            if only_password {
                managed.check_password(&before.email)?;
            } else {
                managed.check(Part::Users)?;
            }
            if password_stdin {
                change.password_hash = Some(Some(password::hash(&read_password()?)?));
            } else if no_password {
                change.password_hash = Some(None);
            }
            if only_password && change.password_hash.is_none() {
                anyhow::bail!("nothing to change: give at least one option (see --help)");
            }
            let after = store.update_user(&ACTOR, before.id, change).await?;
            if json {
                return print_json(&after);
            }
            crate::outln!("Changed user {} ({}).", after.email, describe(&after));
        }
        UsersCommand::Remove { user } => {
            declarative::guard(store, Part::Users).await?;
            let user = find(store, &user).await?;
            store.remove_user(&ACTOR, user.id).await?;
            if json {
                return print_json(&serde_json::json!({"removed": user}));
            }
            crate::outln!("Removed user {} (id {}).", user.email, user.id);
        }
    }
    Ok(())
}

/// `editor, role Support, teams Ops`.
fn describe(user: &User) -> String {
    let mut parts = vec![user.permission_level.as_str().to_owned()];
    match &user.role {
        Some(role) => parts.push(format!("role {}", role.name)),
        None => parts.push("no role".to_owned()),
    }
    if !user.teams.is_empty() {
        parts.push(format!(
            "teams {}",
            table::list(user.teams.iter().map(|t| t.name.as_str()))
        ));
    }
    if user.disabled {
        parts.push("disabled".to_owned());
    }
    parts.join(", ")
}

fn render(users: &[User]) -> String {
    let rows: Vec<Vec<String>> = users
        .iter()
        .map(|user| {
            let tags: Vec<String> = user.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            vec![
                user.id.to_string(),
                user.email.clone(),
                user.full_name(),
                user.permission_level.as_str().to_owned(),
                user.role
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |r| r.name.clone()),
                table::list(user.teams.iter().map(|t| t.name.as_str())),
                table::list(tags.iter().map(String::as_str)),
                if user.disabled { "disabled" } else { "enabled" }.to_owned(),
                if user.has_password { "yes" } else { "no" }.to_owned(),
            ]
        })
        .collect();
    table::render(
        &[
            "ID", "EMAIL", "NAME", "LEVEL", "ROLE", "TEAMS", "TAGS", "STATUS", "PASSWORD",
        ],
        &rows,
    )
}
