//! The rights of each role in the served environment, as the console's permission editor reads
//! and changes them (admins): one role's collection rights as a grid, its action rights with
//! their conditions, the teams' scopes, and what one user can do.
//!
//! The grid edits the role's own entries of the environment document (`collections.<name>` and
//! `collections."*"`); a right a role holds through the `"*"` entry shows as such, and is
//! changed on that row. Saving writes the whole document back through the store (with its admin
//! log entry), as `PUT …/permissions` does, unless a declarative file manages the roles.

use std::collections::BTreeMap;

use crate::datasource::Caller;
use crate::platform::declarative::{self, Part, Right};
use crate::platform::documents::{
    ActionPermissions, CollectionPermissions, CollectionRights, EnvironmentPermissions, Grant,
    WILDCARD,
};
use crate::platform::{Role, Team, User};

use super::tokens::{actor, require_admin, store};
use super::{Error, Ops, Result};

/// The six rights of one grid row, in [`Right::ALL`]'s order.
pub type Row = [bool; 6];

/// One role's rights as the editor shows them.
#[derive(Debug, Clone)]
pub struct RoleRights {
    pub role: Role,
    /// Every right allowed to everyone (a development environment): nothing to edit.
    pub allow_all: bool,
    /// `"*"` first, then each served collection: the role's own rights on that row, and the
    /// rights it holds there through `"*"` (for the served collections).
    pub rows: Vec<(String, Row, Row)>,
    /// The role's action rights: (collection, action, what it may do, its conditions as JSON).
    pub actions: Vec<ActionRights>,
}

/// One action's rights for a role.
#[derive(Debug, Clone)]
pub struct ActionRights {
    pub collection: String,
    pub action: String,
    pub trigger: bool,
    pub approval_required: bool,
    pub may_approve: bool,
    /// The role's conditions (trigger, approval required, approval), as compact JSON.
    pub conditions: Vec<(&'static str, String)>,
}

/// A team's scopes: (collection, condition tree as compact JSON).
#[derive(Debug, Clone)]
pub struct TeamScopes {
    pub team: Team,
    pub scopes: Vec<(String, String)>,
}

/// Every role of the project.
pub async fn roles(ops: &Ops, caller: &Caller) -> Result<Vec<Role>> {
    require_admin(ops, caller).await?;
    Ok(store(ops)?.roles().await?)
}

fn row_of(rights: &CollectionRights, role_id: i64) -> Row {
    Right::ALL.map(|right| right.grant(rights).allows(Some(role_id)))
}

fn conditions(
    of: &[crate::platform::documents::RoleCondition],
    role_id: i64,
    label: &'static str,
) -> Vec<(&'static str, String)> {
    of.iter()
        .filter(|c| c.role_id == role_id)
        .map(|c| (label, c.filter.to_string()))
        .collect()
}

/// The rights of role `role_id`.
pub async fn role_rights(ops: &Ops, caller: &Caller, role_id: i64) -> Result<RoleRights> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    let role = store
        .roles()
        .await?
        .into_iter()
        .find(|r| r.id == role_id)
        .ok_or_else(|| crate::platform::Error::NotFound(format!("role {role_id}")))?;
    let document = store.environment_document().await?;
    let collections = match document {
        EnvironmentPermissions::AllowAll(all) => {
            return Ok(RoleRights {
                role,
                allow_all: all,
                rows: Vec::new(),
                actions: Vec::new(),
            });
        }
        EnvironmentPermissions::Collections { collections } => collections,
    };
    let none = CollectionPermissions::default();
    let any = collections.get(WILDCARD).unwrap_or(&none);
    let any_row = row_of(&any.collection, role_id);
    let mut rows = vec![(WILDCARD.to_owned(), any_row, [false; 6])];
    for name in ops.schema().collections.keys() {
        let own = collections.get(name).unwrap_or(&none);
        rows.push((name.clone(), row_of(&own.collection, role_id), any_row));
    }
    let mut actions = Vec::new();
    for (collection, permissions) in &collections {
        for (action, rights) in &permissions.actions {
            actions.push(action_rights(collection, action, rights, role_id));
        }
    }
    Ok(RoleRights {
        role,
        allow_all: false,
        rows,
        actions,
    })
}

fn action_rights(
    collection: &str,
    action: &str,
    rights: &ActionPermissions,
    role_id: i64,
) -> ActionRights {
    let role = Some(role_id);
    let mut all = conditions(&rights.trigger_conditions, role_id, "trigger");
    all.extend(conditions(
        &rights.approval_required_conditions,
        role_id,
        "approval required",
    ));
    all.extend(conditions(
        &rights.user_approval_conditions,
        role_id,
        "approval",
    ));
    ActionRights {
        collection: collection.to_owned(),
        action: action.to_owned(),
        trigger: rights.trigger_enabled.allows(role),
        approval_required: rights.approval_required.allows(role),
        may_approve: rights.user_approval_enabled.allows(role),
        conditions: all,
    }
}

/// `grant` with role `role_id` given or taken away, the other roles unchanged (a grant to
/// everyone taken from one role becomes a grant to every other role).
fn regrant(grant: &Grant, role_id: i64, on: bool, all_roles: &[i64]) -> Grant {
    let mut roles: Vec<i64> = match grant {
        Grant::All(true) => all_roles.to_vec(),
        Grant::All(false) => Vec::new(),
        Grant::Roles { roles } => roles.clone(),
    };
    roles.retain(|id| *id != role_id);
    if on {
        roles.push(role_id);
    }
    roles.sort_unstable();
    if matches!(grant, Grant::All(true)) && on {
        return Grant::All(true);
    }
    if roles.is_empty() {
        Grant::All(false)
    } else {
        Grant::Roles { roles }
    }
}

/// Sets the collection rights of role `role_id`: each row given (`"*"` or a served collection)
/// is the role's own rights there; rows not given are left as they are.
pub async fn set_role_rights(
    ops: &Ops,
    caller: &Caller,
    role_id: i64,
    rows: &BTreeMap<String, Row>,
) -> Result<()> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    declarative::guard(store, Part::Roles).await?;
    let all_roles: Vec<i64> = store.roles().await?.iter().map(|r| r.id).collect();
    if !all_roles.contains(&role_id) {
        return Err(crate::platform::Error::NotFound(format!("role {role_id}")).into());
    }
    let mut collections = match store.environment_document().await? {
        EnvironmentPermissions::AllowAll(_) => {
            return Err(Error::field(
                "rights",
                "every right is allowed in this environment (a development environment)",
            ));
        }
        EnvironmentPermissions::Collections { collections } => collections,
    };
    for (name, row) in rows {
        if name != WILDCARD && !ops.schema().collections.contains_key(name) {
            return Err(Error::field(name, "no such collection is served"));
        }
        let entry = collections.entry(name.clone()).or_default();
        for (right, on) in Right::ALL.into_iter().zip(row) {
            let grant = right.grant_mut(&mut entry.collection);
            *grant = regrant(grant, role_id, *on, &all_roles);
        }
    }
    let document = EnvironmentPermissions::Collections { collections };
    store
        .set_environment_document(&actor(caller), &document)
        .await?;
    Ok(())
}

/// Each team's scopes in the served environment.
pub async fn team_scopes(ops: &Ops, caller: &Caller) -> Result<Vec<TeamScopes>> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    let by_team = store.rendering_ids_by_team().await?;
    let mut out = Vec::new();
    for team in store.teams().await? {
        let rendering = match by_team.get(&team.id) {
            Some(id) => store.rendering_document(*id).await?.unwrap_or_default(),
            None => crate::platform::Rendering::default(),
        };
        let scopes = rendering
            .collections
            .into_iter()
            .filter_map(|(name, c)| c.scope.map(|scope| (name, scope.to_string())))
            .collect();
        out.push(TeamScopes { team, scopes });
    }
    Ok(out)
}

/// What user `id` can do: the user (level, role, teams), their role's rights, and the scopes
/// of their teams.
pub async fn of_user(
    ops: &Ops,
    caller: &Caller,
    id: i64,
) -> Result<(User, Option<RoleRights>, Vec<TeamScopes>)> {
    let user = super::users::get(ops, caller, id).await?;
    let rights = match &user.role {
        Some(role) => Some(role_rights(ops, caller, role.id).await?),
        None => None,
    };
    let teams = team_scopes(ops, caller)
        .await?
        .into_iter()
        .filter(|t| user.teams.iter().any(|u| u.id == t.team.id))
        .collect();
    Ok((user, rights, teams))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_changes_for_one_role_only() {
        let all = [1, 2, 3];
        assert_eq!(
            regrant(&Grant::All(false), 2, true, &all),
            Grant::Roles { roles: vec![2] }
        );
        assert_eq!(regrant(&Grant::All(true), 2, true, &all), Grant::All(true));
        assert_eq!(
            regrant(&Grant::All(true), 2, false, &all),
            Grant::Roles { roles: vec![1, 3] }
        );
        assert_eq!(
            regrant(&Grant::Roles { roles: vec![2] }, 2, false, &all),
            Grant::All(false)
        );
        assert_eq!(
            regrant(&Grant::Roles { roles: vec![3] }, 1, true, &all),
            Grant::Roles { roles: vec![1, 3] }
        );
    }
}
