//! The rights of each role in the served environment, as the console's permission editor reads
//! and changes them (admins): one role's collection rights as a grid, its action rights with
//! their conditions, the teams' scopes, and what one user can do.
//!
//! The grid edits the role's own entries of the environment document (`collections.<name>` and
//! `collections."*"`); a right a role holds through the `"*"` entry shows as such, and is
//! changed on that row. Saving writes the whole document back through the store (with its admin
//! log entry), as `PUT …/permissions` does, unless a declarative file manages the roles.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::datasource::Caller;
use crate::platform::declarative::SchemaView;
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
    pub self_approval: bool,
    /// The role's conditions (trigger, approval required, approval), as compact JSON.
    pub conditions: Vec<(&'static str, String)>,
    /// The role's condition of each kind, as a tree (the last one counts, as the checks read
    /// them): who may trigger, when an approval is required, what they may approve.
    pub trigger_condition: Option<Json>,
    pub approval_required_condition: Option<Json>,
    pub approval_condition: Option<Json>,
}

/// One action's rights for a role, as the console's form sets them.
#[derive(Debug, Clone, Default)]
pub struct ActionChange {
    pub trigger: bool,
    pub approval_required: bool,
    pub may_approve: bool,
    pub self_approval: bool,
    pub trigger_condition: Option<Json>,
    pub approval_required_condition: Option<Json>,
    pub approval_condition: Option<Json>,
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
    // Every served action (an action without an entry has no right yet), then the entries of
    // actions the schema does not serve (`"*"`, or a stale name), as they are.
    let none_action = ActionPermissions::default();
    let mut actions = Vec::new();
    for (name, collection) in &ops.schema().collections {
        let own = collections.get(name);
        for action in collection.actions.keys() {
            let rights = own
                .and_then(|c| c.actions.get(action))
                .unwrap_or(&none_action);
            actions.push(action_rights(name, action, rights, role_id));
        }
    }
    for (collection, permissions) in &collections {
        for (action, rights) in &permissions.actions {
            let served = ops
                .schema()
                .collections
                .get(collection)
                .is_some_and(|c| c.actions.contains_key(action));
            if !served {
                actions.push(action_rights(collection, action, rights, role_id));
            }
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
        self_approval: rights.self_approval_enabled.allows(role),
        conditions: all,
        trigger_condition: last_condition(&rights.trigger_conditions, role_id),
        approval_required_condition: last_condition(&rights.approval_required_conditions, role_id),
        approval_condition: last_condition(&rights.user_approval_conditions, role_id),
    }
}

fn last_condition(of: &[crate::platform::documents::RoleCondition], role_id: i64) -> Option<Json> {
    of.iter()
        .rev()
        .find(|c| c.role_id == role_id)
        .map(|c| c.filter.clone())
}

/// `conditions` with role `role_id`'s replaced by `condition` (none: the role has none).
fn recondition(
    conditions: &mut Vec<crate::platform::documents::RoleCondition>,
    role_id: i64,
    condition: Option<&Json>,
) {
    conditions.retain(|c| c.role_id != role_id);
    if let Some(filter) = condition {
        conditions.push(crate::platform::documents::RoleCondition {
            role_id,
            filter: filter.clone(),
        });
    }
}

/// The role and the environment's collections, for a change of its rights: refused when a
/// declarative file manages the roles, the role is unknown, or every right is allowed.
async fn editable(
    ops: &Ops,
    caller: &Caller,
    role_id: i64,
) -> Result<(Vec<i64>, BTreeMap<String, CollectionPermissions>)> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    declarative::guard(store, Part::Roles).await?;
    let all_roles: Vec<i64> = store.roles().await?.iter().map(|r| r.id).collect();
    if !all_roles.contains(&role_id) {
        return Err(crate::platform::Error::NotFound(format!("role {role_id}")).into());
    }
    match store.environment_document().await? {
        EnvironmentPermissions::AllowAll(_) => Err(Error::field(
            "rights",
            "every right is allowed in this environment (a development environment)",
        )),
        EnvironmentPermissions::Collections { collections } => Ok((all_roles, collections)),
    }
}

/// Checks that `collection` is served and has `action`.
fn served_action(ops: &Ops, collection: &str, action: &str) -> Result<()> {
    let served =
        ops.schema().collections.get(collection).ok_or_else(|| {
            crate::platform::Error::NotFound(format!("collection {collection:?}"))
        })?;
    if !served.actions.contains_key(action) {
        return Err(
            crate::platform::Error::NotFound(format!("action {action:?} on {collection}")).into(),
        );
    }
    Ok(())
}

/// Role `role_id`'s rights on `action` of `collection` (none yet: every right off).
pub async fn action_rights_of(
    ops: &Ops,
    caller: &Caller,
    role_id: i64,
    collection: &str,
    action: &str,
) -> Result<(Role, ActionRights)> {
    served_action(ops, collection, action)?;
    let rights = role_rights(ops, caller, role_id).await?;
    let found = rights
        .actions
        .iter()
        .find(|a| a.collection == collection && a.action == action)
        .cloned()
        .unwrap_or_else(|| {
            action_rights(collection, action, &ActionPermissions::default(), role_id)
        });
    Ok((rights.role, found))
}

/// Sets role `role_id`'s rights on `action` of `collection`, the other roles' unchanged. Each
/// condition is a condition tree over the collection's fields (checked as `PUT …/permissions`
/// checks them; a refusal names `triggerCondition`, `approvalRequiredCondition` or
/// `approvalCondition`).
pub async fn set_action_rights(
    ops: &Ops,
    caller: &Caller,
    role_id: i64,
    collection: &str,
    action: &str,
    change: &ActionChange,
) -> Result<()> {
    served_action(ops, collection, action)?;
    let (all_roles, mut collections) = editable(ops, caller, role_id).await?;
    let view = SchemaView::served(ops.schema());
    for (field, condition) in [
        ("triggerCondition", &change.trigger_condition),
        (
            "approvalRequiredCondition",
            &change.approval_required_condition,
        ),
        ("approvalCondition", &change.approval_condition),
    ] {
        if let Some(tree) = condition {
            declarative::check_tree(tree, collection, &view).map_err(|e| Error::field(field, e))?;
        }
    }
    let entry = collections
        .entry(collection.to_owned())
        .or_default()
        .actions
        .entry(action.to_owned())
        .or_default();
    for (grant, on) in [
        (&mut entry.trigger_enabled, change.trigger),
        (&mut entry.approval_required, change.approval_required),
        (&mut entry.user_approval_enabled, change.may_approve),
        (&mut entry.self_approval_enabled, change.self_approval),
    ] {
        *grant = regrant(grant, role_id, on, &all_roles);
    }
    recondition(
        &mut entry.trigger_conditions,
        role_id,
        change.trigger_condition.as_ref(),
    );
    recondition(
        &mut entry.approval_required_conditions,
        role_id,
        change.approval_required_condition.as_ref(),
    );
    recondition(
        &mut entry.user_approval_conditions,
        role_id,
        change.approval_condition.as_ref(),
    );
    let document = EnvironmentPermissions::Collections { collections };
    store(ops)?
        .set_environment_document(&actor(caller), &document)
        .await?;
    Ok(())
}

/// Team `team_id` and its scope on `collection` (none: it sees every record it has rights on).
pub async fn team_scope(
    ops: &Ops,
    caller: &Caller,
    team_id: i64,
    collection: &str,
) -> Result<(Team, Option<Json>)> {
    require_admin(ops, caller).await?;
    ops.collection(collection)?;
    let store = store(ops)?;
    let team = find_team(store, team_id).await?;
    let id = store.rendering_id(team.id).await?;
    let rendering = store.rendering_document(id).await?.unwrap_or_default();
    let scope = rendering
        .collections
        .get(collection)
        .and_then(|c| c.scope.clone());
    Ok((team, scope))
}

async fn find_team(store: &crate::platform::Store, team_id: i64) -> Result<Team> {
    Ok(store
        .teams()
        .await?
        .into_iter()
        .find(|t| t.id == team_id)
        .ok_or_else(|| crate::platform::Error::NotFound(format!("team {team_id}")))?)
}

/// Sets team `team_id`'s scope on `collection` (a condition tree whose values may be
/// `{{currentUser.*}}` variables; none: no scope), its other scopes, segments and charts
/// unchanged; written as `PUT …/teams/{id}/rendering` writes it (admin log entry, caches
/// dropped).
pub async fn set_team_scope(
    ops: &Ops,
    caller: &Caller,
    team_id: i64,
    collection: &str,
    scope: Option<Json>,
) -> Result<()> {
    require_admin(ops, caller).await?;
    ops.collection(collection)?;
    let store = store(ops)?;
    declarative::guard(store, Part::Teams).await?;
    let team = find_team(store, team_id).await?;
    if let Some(tree) = &scope {
        declarative::check_tree(tree, collection, &SchemaView::served(ops.schema()))
            .map_err(|e| Error::field("scope", e))?;
    }
    let id = store.rendering_id(team.id).await?;
    let rendering = store.rendering_document(id).await?.unwrap_or_default();
    let mut collections = rendering.collections;
    collections.entry(collection.to_owned()).or_default().scope = scope;
    store
        .set_rendering(&actor(caller), &team.name, collections, rendering.stats)
        .await?;
    Ok(())
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
