//! The first start of a store: with no user yet, creates the first admin (role `Admin`, team
//! `Operations`) and prints how to sign in; with no permissions yet for this environment, gives
//! the `Admin` role every right on every collection and action, as the `"*"` wildcard (so those
//! served later are covered too). Everyone else starts with no rights at all, so a fresh install
//! is closed by default.
//!
//! A store whose first start predates the wildcard keeps the rights it was given by name: they
//! are the administrators' to change (`canopy permissions grant --role Admin '*' all`), and a
//! reload that serves an action no role may trigger says so in the log.

use std::collections::BTreeMap;

use super::documents::{
    ActionPermissions, CollectionPermissions, CollectionRights, EnvironmentPermissions, Grant,
    WILDCARD,
};
use super::store::{Actor, NewUser, Store};
use super::{Result, password};
use crate::datasource::PermissionLevel;

/// The first admin's email when none is configured.
pub const DEFAULT_ADMIN_EMAIL: &str = "admin@canopy.local";
/// The role and team created with the first admin.
pub const ADMIN_ROLE: &str = "Admin";
pub const ADMIN_TEAM: &str = "Operations";

/// The first admin, created by this start, with the password to print once.
#[derive(Debug, Clone)]
pub struct FirstAdmin {
    pub email: String,
    pub password: String,
}

/// What `bootstrap` did.
#[derive(Debug, Clone, Default)]
pub struct Bootstrapped {
    pub first_admin: Option<FirstAdmin>,
    /// Whether this environment's permissions were created (the Admin role got every right).
    pub granted_admin: bool,
}

/// Makes a fresh store usable; does nothing to a store that already has users and permissions.
/// `password` is the first admin's (a random one is generated when `None`).
pub async fn bootstrap(store: &Store, email: &str, password: Option<&str>) -> Result<Bootstrapped> {
    let mut done = Bootstrapped {
        first_admin: first_admin(store, email, password).await?,
        granted_admin: false,
    };
    if !store.has_environment_document().await?
        && let Some(role) = store.role_by_name(ADMIN_ROLE).await?
    {
        let document = full_rights(&Grant::Roles {
            roles: vec![role.id],
        });
        store
            .set_environment_document(&Actor::System, &document)
            .await?;
        done.granted_admin = true;
    }
    Ok(done)
}

/// Every right on every collection and action, for `grant`; no approval required. Written as the
/// `"*"` wildcard, so that collections and actions served later (a plugin reloaded with a new
/// action) are covered too: the admin who adds an action may run it at once.
pub fn full_rights(grant: &Grant) -> EnvironmentPermissions {
    let action = ActionPermissions {
        trigger_enabled: grant.clone(),
        user_approval_enabled: grant.clone(),
        self_approval_enabled: grant.clone(),
        ..ActionPermissions::default()
    };
    let collections = BTreeMap::from([(
        WILDCARD.to_owned(),
        CollectionPermissions {
            collection: CollectionRights {
                browse_enabled: grant.clone(),
                read_enabled: grant.clone(),
                edit_enabled: grant.clone(),
                add_enabled: grant.clone(),
                delete_enabled: grant.clone(),
                export_enabled: grant.clone(),
            },
            actions: BTreeMap::from([(WILDCARD.to_owned(), action)]),
        },
    )]);
    EnvironmentPermissions::Collections { collections }
}

/// With no user yet, creates the first admin (role `Admin`, team `Operations`, level admin) and
/// returns them with the password to print once; `None` when the store has users. `canopy init`
/// calls this alone: the Admin role's rights are given at the first start of `serve`.
pub async fn first_admin(
    store: &Store,
    email: &str,
    password: Option<&str>,
) -> Result<Option<FirstAdmin>> {
    if !store.users().await?.is_empty() {
        return Ok(None);
    }
    let role = match store.role_by_name(ADMIN_ROLE).await? {
        Some(role) => role,
        None => store.create_role(&Actor::System, ADMIN_ROLE).await?,
    };
    if store.team_by_name(ADMIN_TEAM).await?.is_none() {
        store.create_team(&Actor::System, ADMIN_TEAM).await?;
    }
    let clear = password.map_or_else(generate_password, str::to_owned);
    store
        .create_user(
            &Actor::System,
            NewUser {
                email: email.to_owned(),
                first_name: "Admin".to_owned(),
                last_name: String::new(),
                permission_level: PermissionLevel::Admin,
                role: Some(role.name),
                teams: vec![ADMIN_TEAM.to_owned()],
                password_hash: Some(password::hash(&clear)?),
                ..NewUser::default()
            },
        )
        .await?;
    Ok(Some(FirstAdmin {
        email: email.to_owned(),
        password: clear,
    }))
}

/// A random password for the first admin: 24 characters from two v4 UUIDs' random bits.
fn generate_password() -> String {
    let raw = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    raw.chars().take(24).collect()
}
