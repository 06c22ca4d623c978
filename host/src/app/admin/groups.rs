//! `canopy teams …` and `canopy roles …`: named groups, listed with their members.

use clap::Subcommand;

use super::{ACTOR, print_json, table};
use crate::platform::Store;
use crate::platform::declarative::{self, Part};

#[derive(Debug, Subcommand)]
pub enum TeamsCommand {
    /// List the teams, the id of each one's rendering in this environment (the `renderingId`
    /// of its users' session tokens, which `/liana/v4/permissions/renderings/{id}` serves to
    /// other agents) and their members.
    List,
    /// Add a team.
    Add { name: String },
    /// Rename a team (its members, scopes and charts stay).
    Rename { name: String, new_name: String },
    /// Remove a team, its memberships and its scopes, segments and charts.
    Remove { name: String },
}

#[derive(Debug, Subcommand)]
pub enum RolesCommand {
    /// List the roles and the users holding each.
    List,
    /// Add a role (with no rights: grant them with `canopy permissions grant --role NAME`).
    Add { name: String },
    /// Rename a role (its users and rights stay).
    Rename { name: String, new_name: String },
    /// Remove a role; refused while users hold it.
    Remove { name: String },
}

pub(super) async fn teams(store: &Store, command: TeamsCommand, json: bool) -> anyhow::Result<()> {
    match command {
        TeamsCommand::List => {
            let teams = store.teams().await?;
            let users = store.users().await?;
            let renderings = store.rendering_ids_by_team().await?;
            let rows: Vec<(i64, String, Option<i64>, Vec<&str>)> = teams
                .iter()
                .map(|team| {
                    let members = users
                        .iter()
                        .filter(|u| u.teams.iter().any(|t| t.id == team.id))
                        .map(|u| u.email.as_str())
                        .collect();
                    let rendering = renderings.get(&team.id).copied();
                    (team.id, team.name.clone(), rendering, members)
                })
                .collect();
            if json {
                let out: Vec<_> = rows
                    .iter()
                    .map(|(id, name, rendering, members)| {
                        serde_json::json!({"id": id, "name": name, "renderingId": rendering,
                            "members": members})
                    })
                    .collect();
                return print_json(&out);
            }
            let rows: Vec<Vec<String>> = rows
                .into_iter()
                .map(|(id, name, rendering, members)| {
                    vec![
                        id.to_string(),
                        name,
                        rendering.map_or_else(|| "-".to_owned(), |r| r.to_string()),
                        table::list(members),
                    ]
                })
                .collect();
            super::emit(&table::render(
                &["ID", "NAME", "RENDERING", "MEMBERS"],
                &rows,
            ));
        }
        TeamsCommand::Add { name } => {
            declarative::guard(store, Part::Teams).await?;
            let team = store.create_team(&ACTOR, &name).await?;
            let rendering = store.rendering_id(team.id).await?;
            if json {
                return print_json(
                    &serde_json::json!({"id": team.id, "name": team.name, "renderingId": rendering}),
                );
            }
            crate::outln!(
                "Added team {} (id {}, rendering {rendering} in environment {}).",
                team.name,
                team.id,
                store.environment()
            );
        }
        TeamsCommand::Rename { name, new_name } => {
            declarative::guard(store, Part::Teams).await?;
            let team = store.rename_team(&ACTOR, &name, &new_name).await?;
            if json {
                return print_json(&team);
            }
            crate::outln!("Renamed team {name} to {}.", team.name);
        }
        TeamsCommand::Remove { name } => {
            declarative::guard(store, Part::Teams).await?;
            store.remove_team(&ACTOR, &name).await?;
            if json {
                return print_json(&serde_json::json!({"removed": name}));
            }
            crate::outln!("Removed team {name}.");
        }
    }
    Ok(())
}

pub(super) async fn roles(store: &Store, command: RolesCommand, json: bool) -> anyhow::Result<()> {
    match command {
        RolesCommand::List => {
            let roles = store.roles().await?;
            let users = store.users().await?;
            let rows: Vec<(i64, String, Vec<&str>)> = roles
                .iter()
                .map(|role| {
                    let holders = users
                        .iter()
                        .filter(|u| u.role.as_ref().is_some_and(|r| r.id == role.id))
                        .map(|u| u.email.as_str())
                        .collect();
                    (role.id, role.name.clone(), holders)
                })
                .collect();
            if json {
                let out: Vec<_> = rows
                    .iter()
                    .map(|(id, name, users)| {
                        serde_json::json!({"id": id, "name": name, "users": users})
                    })
                    .collect();
                return print_json(&out);
            }
            let rows: Vec<Vec<String>> = rows
                .into_iter()
                .map(|(id, name, users)| vec![id.to_string(), name, table::list(users)])
                .collect();
            super::emit(&table::render(&["ID", "NAME", "USERS"], &rows));
        }
        RolesCommand::Add { name } => {
            declarative::guard(store, Part::Roles).await?;
            let role = store.create_role(&ACTOR, &name).await?;
            if json {
                return print_json(&role);
            }
            crate::outln!(
                "Added role {} (id {}); grant it rights with `canopy permissions grant --role {:?} COLLECTION RIGHT…`.",
                role.name,
                role.id,
                role.name
            );
        }
        RolesCommand::Rename { name, new_name } => {
            declarative::guard(store, Part::Roles).await?;
            let role = store.rename_role(&ACTOR, &name, &new_name).await?;
            if json {
                return print_json(&role);
            }
            crate::outln!("Renamed role {name} to {}.", role.name);
        }
        RolesCommand::Remove { name } => {
            declarative::guard(store, Part::Roles).await?;
            store.remove_role(&ACTOR, &name).await?;
            if json {
                return print_json(&serde_json::json!({"removed": name}));
            }
            crate::outln!("Removed role {name}.");
        }
    }
    Ok(())
}
