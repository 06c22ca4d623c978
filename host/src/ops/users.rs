//! The project's users, teams and roles as an admin manages them: the `/v1` user routes and the
//! console's administration are adapters over these functions. Each one checks that the caller
//! is an admin in the store now; the store writes the admin log entry of every change.

use crate::datasource::{Caller, PermissionLevel};
use crate::platform::declarative::{self, Part};
use crate::platform::{NewUser, Role, Store, Team, User, UserChange};

use super::tokens::{actor, require_admin, store};
use super::{Error, Ops, Result};

/// Every user of the project.
pub async fn list(ops: &Ops, caller: &Caller) -> Result<Vec<User>> {
    require_admin(ops, caller).await?;
    Ok(store(ops)?.users().await?)
}

/// Every role and every team, for the forms that pick them.
pub async fn roles_and_teams(ops: &Ops, caller: &Caller) -> Result<(Vec<Role>, Vec<Team>)> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    Ok((store.roles().await?, store.teams().await?))
}

/// One user; an unknown id is "user {id} not found".
pub async fn get(ops: &Ops, caller: &Caller, id: i64) -> Result<User> {
    require_admin(ops, caller).await?;
    find(store(ops)?, id).await
}

async fn find(store: &Store, id: i64) -> Result<User> {
    store
        .user(id)
        .await?
        .ok_or_else(|| crate::platform::Error::NotFound(format!("user {id}")).into())
}

/// Creates a user (enabled). Role and teams are named and must exist.
pub async fn create(ops: &Ops, caller: &Caller, new: NewUser) -> Result<User> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    declarative::guard(store, Part::Users).await?;
    check_names(store, new.role.as_deref(), &new.teams).await?;
    store
        .create_user(&actor(caller), new)
        .await
        .map_err(email_refused)
}

/// Changes user `id`. A change of the password alone is allowed when only the users' passwords
/// are not managed declaratively; an admin cannot disable or demote themselves.
pub async fn change(ops: &Ops, caller: &Caller, id: i64, change: UserChange) -> Result<User> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    let before = find(store, id).await?;
    let managed = declarative::managed(store).await?;
    if password_only(&change) {
        managed.check_password(&before.email)?;
    } else {
        managed.check(Part::Users)?;
    }
    check_names(
        store,
        change.role.clone().flatten().as_deref(),
        change.teams.as_deref().unwrap_or_default(),
    )
    .await?;
    let demoted = change
        .permission_level
        .is_some_and(|l| l != PermissionLevel::Admin);
    if id == caller.id && (change.disabled == Some(true) || demoted) {
        return Err(crate::platform::Error::Conflict(
            "an admin cannot disable or demote themselves: ask another admin".to_owned(),
        )
        .into());
    }
    store
        .update_user(&actor(caller), id, change)
        .await
        .map_err(email_refused)
}

/// Removes user `id`; an admin cannot remove themselves.
pub async fn remove(ops: &Ops, caller: &Caller, id: i64) -> Result<()> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    declarative::guard(store, Part::Users).await?;
    if id == caller.id {
        return Err(crate::platform::Error::Conflict(
            "an admin cannot remove themselves: ask another admin".to_owned(),
        )
        .into());
    }
    store.remove_user(&actor(caller), id).await?;
    Ok(())
}

/// Whether `change` touches nothing but the password.
fn password_only(change: &UserChange) -> bool {
    let UserChange {
        email,
        first_name,
        last_name,
        permission_level,
        role,
        teams,
        tags,
        disabled,
        password_hash: _,
    } = change;
    email.is_none()
        && first_name.is_none()
        && last_name.is_none()
        && permission_level.is_none()
        && role.is_none()
        && teams.is_none()
        && tags.is_none()
        && disabled.is_none()
}

/// The store's refusal of an email (malformed), as a refusal of the field.
fn email_refused(error: crate::platform::Error) -> Error {
    match error {
        crate::platform::Error::Invalid(message) => Error::field("email", message),
        other => other.into(),
    }
}

/// A role or team that does not exist is a refusal naming the field, not a missing user.
async fn check_names(store: &Store, role: Option<&str>, teams: &[String]) -> Result<()> {
    if let Some(role) = role
        && store.role_by_name(role).await?.is_none()
    {
        return Err(Error::field("role", format!("no role named {role:?}")));
    }
    for (i, team) in teams.iter().enumerate() {
        if store.team_by_name(team).await?.is_none() {
            return Err(Error::field(
                &format!("teams[{i}]"),
                format!("no team named {team:?}"),
            ));
        }
    }
    Ok(())
}

/// A team or a role: the groups an admin creates, renames and removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Team,
    Role,
}

impl Group {
    /// `team` or `role`, as messages and the admin log name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Team => "team",
            Self::Role => "role",
        }
    }

    fn part(self) -> Part {
        match self {
            Self::Team => Part::Teams,
            Self::Role => Part::Roles,
        }
    }
}

/// The name of group `id`; an unknown id is "{team|role} {id} not found".
async fn group_name(store: &Store, kind: Group, id: i64) -> Result<String> {
    let found = match kind {
        Group::Team => store
            .teams()
            .await?
            .into_iter()
            .find(|t| t.id == id)
            .map(|t| t.name),
        Group::Role => store
            .roles()
            .await?
            .into_iter()
            .find(|r| r.id == id)
            .map(|r| r.name),
    };
    found.ok_or_else(|| crate::platform::Error::NotFound(format!("{} {id}", kind.as_str())).into())
}

/// A group's name as typed: not blank.
fn group_name_of(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::field("name", "must not be empty"));
    }
    Ok(name.to_owned())
}

/// Creates a team or a role named `name`; answers its id. A name taken is a conflict.
pub async fn create_group(ops: &Ops, caller: &Caller, kind: Group, name: &str) -> Result<i64> {
    require_admin(ops, caller).await?;
    let name = group_name_of(name)?;
    let store = store(ops)?;
    declarative::guard(store, kind.part()).await?;
    Ok(match kind {
        Group::Team => store.create_team(&actor(caller), &name).await?.id,
        Group::Role => store.create_role(&actor(caller), &name).await?.id,
    })
}

/// Renames team or role `id`; answers the new name.
pub async fn rename_group(
    ops: &Ops,
    caller: &Caller,
    kind: Group,
    id: i64,
    new_name: &str,
) -> Result<String> {
    require_admin(ops, caller).await?;
    let new_name = group_name_of(new_name)?;
    let store = store(ops)?;
    let name = group_name(store, kind, id).await?;
    declarative::guard(store, kind.part()).await?;
    Ok(match kind {
        Group::Team => {
            store
                .rename_team(&actor(caller), &name, &new_name)
                .await?
                .name
        }
        Group::Role => {
            store
                .rename_role(&actor(caller), &name, &new_name)
                .await?
                .name
        }
    })
}

/// Removes team or role `id`, refused while a user is in the team or holds the role (so that
/// nobody silently loses their rights or their scope).
pub async fn remove_group(ops: &Ops, caller: &Caller, kind: Group, id: i64) -> Result<()> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    let name = group_name(store, kind, id).await?;
    declarative::guard(store, kind.part()).await?;
    match kind {
        Group::Team => {
            let members = store
                .users()
                .await?
                .iter()
                .filter(|u| u.teams.iter().any(|t| t.id == id))
                .count();
            if members > 0 {
                return Err(crate::platform::Error::Conflict(format!(
                    "team {name:?} has {members} member(s); take them out of it first"
                ))
                .into());
            }
            store.remove_team(&actor(caller), &name).await?;
        }
        Group::Role => store.remove_role(&actor(caller), &name).await?,
    }
    Ok(())
}

/// How many users each team and each role has (by id), for the pages that offer removal.
pub async fn group_members(
    ops: &Ops,
    caller: &Caller,
) -> Result<(
    std::collections::BTreeMap<i64, usize>,
    std::collections::BTreeMap<i64, usize>,
)> {
    let users = list(ops, caller).await?;
    let mut teams = std::collections::BTreeMap::new();
    let mut roles = std::collections::BTreeMap::new();
    for user in &users {
        for team in &user.teams {
            *teams.entry(team.id).or_insert(0) += 1;
        }
        if let Some(role) = &user.role {
            *roles.entry(role.id).or_insert(0) += 1;
        }
    }
    Ok((teams, roles))
}
