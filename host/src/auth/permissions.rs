//! The permission checks of the agent (protocol §5), over cached permission documents.
//!
//! The documents (`platform::documents`) come from a `PermissionSource`: Canopy's store, or a
//! Forest-compatible server. Checks are in-memory lookups on the cached copies:
//! - a change made through this instance's store bumps the source's generation, and the next
//!   check refetches (so it takes effect on the next request);
//! - with `instantCacheRefresh = false`, documents also expire after
//!   `permissionsCacheDurationInSeconds`, and a denied check refetches once and retries, as the
//!   agent does, so that a right granted elsewhere is seen at once;
//! - `POST /forest/scope-cache-invalidation` drops one rendering.
//!
//! Without a source (`Permissions::allow_all`, used by route tests over a bare stack) every check
//! passes and there are no scopes.
//!
//! The checks beyond collection rights live beside: `scope` (§5.6, scopes with `{{currentUser.*}}`
//! and their cache of parsed trees), `rendering` (§5.5, charts by hash and SQL segments),
//! `object_hash` (the npm package's hash of a chart), `ip` (§5.7, the whitelist) and `relations`
//! (`skipRelationReadPermissions`).

mod ip;
pub mod object_hash;
mod relations;
mod rendering;
mod scope;

pub use ip::{IpRule, forwarded_for};
pub use relations::relation_collections;
pub use rendering::{
    is_segment_query_allowed, is_segment_query_allowed_on_connection, verify_sql_query,
};
pub use scope::{CurrentUser, substitute_scope};

mod actions;

pub use actions::{ActionRequest, ActionRight};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use super::{Error, Result};
use crate::datasource::{Caller, PermissionLevel};
use crate::platform::documents::{
    CollectionRights, EnvironmentPermissions, IpWhitelist, Rendering, UserEntry,
};
use crate::platform::{self, PermissionSource};

/// The six collection rights of §5.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollectionRight {
    Browse,
    Read,
    Edit,
    Add,
    Delete,
    Export,
}

impl CollectionRight {
    /// The identifier's last part (`collection:<name>:<right>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Browse => "browse",
            Self::Read => "read",
            Self::Edit => "edit",
            Self::Add => "add",
            Self::Delete => "delete",
            Self::Export => "export",
        }
    }
}

/// How long cached documents live; `None` keeps them until the source's generation changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    pub ttl: Option<Duration>,
}

impl CachePolicy {
    /// The agent's policy for these settings (§5.2).
    pub fn new(instant_cache_refresh: bool, cache_duration: Duration) -> Self {
        Self {
            ttl: (!instant_cache_refresh).then_some(cache_duration),
        }
    }

    /// Whether a denied check refetches once and retries (only with a time to live).
    pub fn refetch_on_denial(self) -> bool {
        self.ttl.is_some()
    }
}

/// One cached document with when, and from which generation, it was fetched.
struct Entry<T> {
    value: Arc<T>,
    fetched_at: Instant,
    generation: u64,
}

/// A lock-free slot for one cached document.
struct Slot<T>(ArcSwapOption<Entry<T>>);

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self(ArcSwapOption::empty())
    }
}

impl<T> Slot<T> {
    fn fresh(&self, policy: CachePolicy, generation: u64) -> Option<Arc<T>> {
        let guard = self.0.load();
        let entry = guard.as_ref()?;
        let expired = policy
            .ttl
            .is_some_and(|ttl| entry.fetched_at.elapsed() >= ttl);
        (!expired && entry.generation == generation).then(|| Arc::clone(&entry.value))
    }

    fn store(&self, value: T, generation: u64) -> Arc<T> {
        let value = Arc::new(value);
        self.0.store(Some(Arc::new(Entry {
            value: Arc::clone(&value),
            fetched_at: Instant::now(),
            generation,
        })));
        value
    }

    fn clear(&self) {
        self.0.store(None);
    }
}

/// The users document, indexed by id.
pub type Users = HashMap<i64, UserEntry>;

/// The permission service every route asks. Shared by every generation of the served stack.
pub struct Permissions {
    source: Option<Arc<dyn PermissionSource>>,
    policy: CachePolicy,
    /// `skipRelationReadPermissions`.
    pub skip_relation_read_permissions: bool,
    /// `strictScopes` (default on): a to-one record included in an answer is left out (the
    /// relationship's `data: null`) when it is outside the caller's scope on its own
    /// collection. Off: the agent's behaviour, scopes apply to the route's collection only.
    pub strict_scopes: bool,
    environment: Slot<EnvironmentPermissions>,
    users: Slot<Users>,
    ip_whitelist: Slot<IpWhitelist>,
    renderings: std::sync::Mutex<HashMap<i64, Arc<Slot<Rendering>>>>,
    /// Parsed scopes by rendering, user and collection (`scope`).
    scopes: scope::ScopeCache,
    /// The hashes of each rendering's allowed charts (`rendering`).
    chart_hashes: rendering::ChartHashes,
    /// The IP whitelist's rules, parsed once per fetched document (`ip`).
    ip_rules: ip::RuleCache,
}

impl std::fmt::Debug for Permissions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permissions")
            .field("enforced", &self.source.is_some())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Permissions {
    /// Checks against the documents of `source`, cached by `policy`.
    pub fn new(source: Arc<dyn PermissionSource>, policy: CachePolicy) -> Self {
        Self {
            source: Some(source),
            policy,
            skip_relation_read_permissions: false,
            strict_scopes: true,
            environment: Slot::default(),
            users: Slot::default(),
            ip_whitelist: Slot::default(),
            renderings: std::sync::Mutex::new(HashMap::new()),
            scopes: scope::ScopeCache::default(),
            chart_hashes: rendering::ChartHashes::default(),
            ip_rules: ip::RuleCache::default(),
        }
    }

    /// No checks at all: every caller has every right. Only for route tests over a bare stack
    /// and internal tools; `canopy serve` always enforces.
    pub fn allow_all() -> Self {
        Self {
            source: None,
            policy: CachePolicy { ttl: None },
            skip_relation_read_permissions: false,
            strict_scopes: true,
            environment: Slot::default(),
            users: Slot::default(),
            ip_whitelist: Slot::default(),
            renderings: std::sync::Mutex::new(HashMap::new()),
            scopes: scope::ScopeCache::default(),
            chart_hashes: rendering::ChartHashes::default(),
            ip_rules: ip::RuleCache::default(),
        }
    }

    /// Whether checks are enforced (a source is configured).
    pub fn enforced(&self) -> bool {
        self.source.is_some()
    }

    pub fn policy(&self) -> CachePolicy {
        self.policy
    }

    /// The environment document (`true` when not enforced).
    pub async fn environment(&self) -> Result<Arc<EnvironmentPermissions>> {
        let Some(source) = &self.source else {
            return Ok(Arc::new(EnvironmentPermissions::AllowAll(true)));
        };
        let generation = source.generation();
        if let Some(doc) = self.environment.fresh(self.policy, generation) {
            return Ok(doc);
        }
        let doc = source
            .environment_permissions()
            .await
            .map_err(unavailable)?;
        Ok(self.environment.store(doc, generation))
    }

    /// The users document, by id.
    pub async fn users(&self) -> Result<Arc<Users>> {
        let Some(source) = &self.source else {
            return Ok(Arc::new(Users::new()));
        };
        let generation = source.generation();
        if let Some(users) = self.users.fresh(self.policy, generation) {
            return Ok(users);
        }
        let users = source.users().await.map_err(unavailable)?;
        let users = users.into_iter().map(|u| (u.id, u)).collect();
        Ok(self.users.store(users, generation))
    }

    /// The users document, refetched once (with a time to live) when the caller is not in it.
    /// A caller whose id is not there (removed or disabled since the token was issued) is
    /// refused with 403 on every route: its token may still be valid for an hour, its rights
    /// are not.
    async fn users_with(&self, caller: &Caller) -> Result<Arc<Users>> {
        self.users_containing(caller.id).await
    }

    async fn users_containing(&self, user_id: i64) -> Result<Arc<Users>> {
        let users = self.users().await?;
        if users.contains_key(&user_id) {
            return Ok(users);
        }
        if self.policy.refetch_on_denial() {
            self.users.clear();
            let users = self.users().await?;
            if users.contains_key(&user_id) {
                return Ok(users);
            }
        }
        tracing::debug!(user = user_id, "not an enabled user: refused");
        Err(Error::forbidden())
    }

    /// 403 `Forbidden` unless `user_id` is an enabled user of the users document (nothing when
    /// not enforced): checked on every private route, so that a removed or disabled user's live
    /// token opens nothing.
    pub async fn enabled_user(&self, user_id: i64) -> Result<()> {
        if self.enforced() {
            self.users_containing(user_id).await?;
        }
        Ok(())
    }

    /// The caller's entry in the users document. `None` when not enforced; 403 for a caller that
    /// is not an enabled user.
    pub async fn user(&self, caller: &Caller) -> Result<Option<UserEntry>> {
        if !self.enforced() {
            return Ok(None);
        }
        Ok(self.users_with(caller).await?.get(&caller.id).cloned())
    }

    /// The caller's role id, from the users document (§5.3: never from the token).
    pub async fn role_id(&self, caller: &Caller) -> Result<Option<i64>> {
        if !self.enforced() {
            return Ok(None);
        }
        Ok(self
            .users_with(caller)
            .await?
            .get(&caller.id)
            .and_then(|u| u.role_id))
    }

    /// The caller's permission level from the users document (the token's when not enforced).
    pub async fn permission_level(&self, caller: &Caller) -> Result<PermissionLevel> {
        if !self.enforced() {
            return Ok(caller.permission_level);
        }
        Ok(self
            .users_with(caller)
            .await?
            .get(&caller.id)
            .map_or(PermissionLevel::User, |u| u.permission_level))
    }

    /// A rendering document (empty when not enforced).
    pub async fn rendering(&self, rendering_id: i64) -> Result<Arc<Rendering>> {
        let Some(source) = &self.source else {
            return Ok(Arc::new(Rendering::default()));
        };
        let slot = {
            let mut renderings = self
                .renderings
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(renderings.entry(rendering_id).or_default())
        };
        let generation = source.generation();
        if let Some(doc) = slot.fresh(self.policy, generation) {
            return Ok(doc);
        }
        let doc = match source.rendering(rendering_id).await {
            Ok(doc) => doc,
            // A rendering the server does not know has no scope, no segment and no chart.
            Err(platform::Error::NotFound(_)) => Rendering::default(),
            Err(error) => return Err(unavailable(error)),
        };
        Ok(slot.store(doc, generation))
    }

    /// The IP whitelist (off when not enforced).
    pub async fn ip_whitelist(&self) -> Result<Arc<IpWhitelist>> {
        let Some(source) = &self.source else {
            return Ok(Arc::new(IpWhitelist::default()));
        };
        let generation = source.generation();
        if let Some(doc) = self.ip_whitelist.fresh(self.policy, generation) {
            return Ok(doc);
        }
        let doc = source.ip_whitelist().await.map_err(unavailable)?;
        Ok(self.ip_whitelist.store(doc, generation))
    }

    /// Drops one rendering's cached copy (`POST /forest/scope-cache-invalidation`).
    pub fn invalidate_rendering(&self, rendering_id: i64) {
        let renderings = self
            .renderings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = renderings.get(&rendering_id) {
            slot.clear();
        }
    }

    /// Forgets the parsed scopes: called when a new generation of the served stack is built,
    /// since a parsed scope is typed against one generation's schema.
    pub fn forget_parsed_scopes(&self) {
        self.scopes.clear();
    }

    /// Drops every cached document, so that the next check refetches them all.
    pub fn invalidate_all(&self) {
        self.environment.clear();
        self.users.clear();
        self.ip_whitelist.clear();
        let renderings = self
            .renderings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for slot in renderings.values() {
            slot.clear();
        }
    }

    /// §5.3: may the caller exercise `right` on `collection`? Denied → 403 `Forbidden`.
    pub async fn can(
        &self,
        caller: &Caller,
        collection: &str,
        right: CollectionRight,
    ) -> Result<()> {
        if self.has(caller, collection, right).await? {
            Ok(())
        } else {
            Err(Error::forbidden())
        }
    }

    /// Whether the caller has `right` on `collection`, with the agent's one refetch on a denial
    /// when documents have a time to live.
    pub async fn has(
        &self,
        caller: &Caller,
        collection: &str,
        right: CollectionRight,
    ) -> Result<bool> {
        if !self.enforced() {
            return Ok(true);
        }
        if self.allows(caller, collection, right).await? {
            return Ok(true);
        }
        if self.policy.refetch_on_denial() {
            self.environment.clear();
            self.users.clear();
            if self.allows(caller, collection, right).await? {
                return Ok(true);
            }
        }
        tracing::debug!(
            user = caller.id,
            collection,
            right = right.as_str(),
            "permission denied"
        );
        Ok(false)
    }

    /// `assertCanBrowse`: browse on `collection`, and when the request runs a live-query segment
    /// (`segmentQuery`, `connectionName`), the segment rules of §5.5. As in the agent, the
    /// segment is judged before the browse right (an invalid query is an error even without the
    /// right), and either refusal is a 403.
    pub async fn can_browse(
        &self,
        caller: &Caller,
        collection: &str,
        segment_query: Option<(&str, Option<&str>)>,
    ) -> Result<()> {
        let allowed = self
            .has(caller, collection, CollectionRight::Browse)
            .await?;
        if let Some((query, connection)) = segment_query
            && !self
                .can_execute_segment_query(caller, collection, query, connection)
                .await?
        {
            return Err(Error::forbidden());
        }
        if allowed {
            Ok(())
        } else {
            Err(Error::forbidden())
        }
    }

    async fn allows(
        &self,
        caller: &Caller,
        collection: &str,
        right: CollectionRight,
    ) -> Result<bool> {
        let role_id = self.role_id(caller).await?;
        let environment = self.environment().await?;
        Ok(match &*environment {
            EnvironmentPermissions::AllowAll(all) => *all,
            EnvironmentPermissions::Collections { collections } => {
                EnvironmentPermissions::rights(collections, collection)
                    .is_some_and(|c| grant_of(&c, right).allows(role_id))
            }
        })
    }
}

fn grant_of(
    rights: &CollectionRights,
    right: CollectionRight,
) -> &crate::platform::documents::Grant {
    match right {
        CollectionRight::Browse => &rights.browse_enabled,
        CollectionRight::Read => &rights.read_enabled,
        CollectionRight::Edit => &rights.edit_enabled,
        CollectionRight::Add => &rights.add_enabled,
        CollectionRight::Delete => &rights.delete_enabled,
        CollectionRight::Export => &rights.export_enabled,
    }
}

/// The permission documents could not be read: the check cannot be made, so it fails closed.
#[expect(
    clippy::needless_pass_by_value,
    reason = "called as `map_err(unavailable)`"
)]
fn unavailable(error: platform::Error) -> Error {
    tracing::error!(%error, "permission documents unavailable");
    Error::PermissionsUnavailable(error.to_string())
}
