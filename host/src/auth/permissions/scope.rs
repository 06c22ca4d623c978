//! Scopes (§5.6): the condition tree a team's rendering sets on a collection, with its
//! `{{currentUser.*}}` placeholders replaced by the caller's values from the users document
//! (never from the token) and the rendering's team, parsed against the collection's schema and
//! AND-ed by the routes into every filter of that collection.
//!
//! Parsed trees are cached per (rendering, user, collection). An entry is valid while the
//! rendering and users documents it was computed from are the cached ones (compared by pointer:
//! any refetch makes a new `Arc`) and the schema is the same; so a change through the store, a
//! time to live or `POST /forest/scope-cache-invalidation` is seen on the next request, and a
//! request in between costs a map lookup and a clone of the tree.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value as Json, json};

use super::{Permissions, Users};
use crate::auth::{Error, Result};
use crate::datasource::{Caller, CollectionSchema, ConditionTree, DataSourceSchema};
use crate::platform::documents::{Rendering, RenderingTeam, UserEntry};

/// Beyond this many cached scopes the cache starts over (users come and go).
const MAX_ENTRIES: usize = 10_000;

/// Schemas one collection's scope is kept parsed against at once: the served one, and the layers
/// plugins read from (their reads are scoped against the stack below their layer).
const MAX_SCHEMAS: usize = 8;

struct Entry {
    rendering: Arc<Rendering>,
    users: Arc<Users>,
    /// The address of the collection schema the tree was parsed against; the cache is cleared
    /// whenever a new generation of the stack is built (`forget_parsed_scopes`), so an address
    /// cannot be reused by another schema while an entry names it.
    schema: usize,
    tree: Option<ConditionTree>,
}

/// The parsed scopes of one (rendering, user), by collection name, one per schema parsed against.
type ByCollection = HashMap<String, Vec<Arc<Entry>>>;

/// Parsed scopes by (rendering, user), then by collection name.
#[derive(Default)]
pub(super) struct ScopeCache {
    entries: Mutex<HashMap<(i64, i64), ByCollection>>,
}

impl ScopeCache {
    pub(super) fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn get(&self, key: (i64, i64), collection: &str, schema: usize) -> Option<Arc<Entry>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(&key)?
            .get(collection)?
            .iter()
            .find(|e| e.schema == schema)
            .cloned()
    }

    fn put(&self, key: (i64, i64), collection: &str, entry: Entry) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        let parsed = entries
            .entry(key)
            .or_default()
            .entry(collection.to_owned())
            .or_default();
        parsed.retain(|e| e.schema != entry.schema);
        if parsed.len() >= MAX_SCHEMAS {
            parsed.remove(0);
        }
        parsed.push(Arc::new(entry));
    }
}

/// The `currentUser` of context variables: the caller's entry of the users document and the
/// team of their rendering.
#[derive(Debug, Clone)]
pub struct CurrentUser {
    pub user: UserEntry,
    pub team: RenderingTeam,
}

impl CurrentUser {
    /// The value of `currentUser.<property>` (`property` without the prefix): `id`, `email`,
    /// `firstName`, `lastName`, `fullName`, `permissionLevel`, `roleId`, `team.id`,
    /// `team.name`, `tags.<tag>`. `None` for anything else, or a role the user does not have.
    pub fn get(&self, property: &str) -> Option<Json> {
        user_property(&self.user, &self.team, property)
    }

    /// Every property, as `(property, value)` pairs (for the chart context variables).
    pub fn properties(&self) -> Vec<(String, Json)> {
        let user = &self.user;
        let mut out = vec![
            ("id".to_owned(), json!(user.id)),
            ("email".to_owned(), json!(user.email)),
            ("firstName".to_owned(), json!(user.first_name)),
            ("lastName".to_owned(), json!(user.last_name)),
            ("fullName".to_owned(), json!(user.full_name)),
            (
                "permissionLevel".to_owned(),
                json!(user.permission_level.as_str()),
            ),
            ("team.id".to_owned(), json!(self.team.id)),
            ("team.name".to_owned(), json!(self.team.name)),
        ];
        if let Some(role_id) = user.role_id {
            out.push(("roleId".to_owned(), json!(role_id)));
        }
        for (tag, value) in &user.tags {
            out.push((format!("tags.{tag}"), json!(value)));
        }
        out
    }
}

fn user_property(user: &UserEntry, team: &RenderingTeam, property: &str) -> Option<Json> {
    if let Some(prop) = property.strip_prefix("team.") {
        return match prop {
            "id" => Some(json!(team.id)),
            "name" => Some(json!(team.name)),
            _ => None,
        };
    }
    if let Some(tag) = property.strip_prefix("tags.") {
        return user.tags.get(tag).map(|v| json!(v));
    }
    match property {
        "id" => Some(json!(user.id)),
        "email" => Some(json!(user.email)),
        "firstName" => Some(json!(user.first_name)),
        "lastName" => Some(json!(user.last_name)),
        "fullName" => Some(json!(user.full_name)),
        "permissionLevel" => Some(json!(user.permission_level.as_str())),
        "roleId" => user.role_id.map(|id| json!(id)),
        _ => None,
    }
}

/// Replaces the `{{currentUser.…}}` placeholders of a plain scope tree's leaf values (strings,
/// and strings inside array values) by the user's values, as text (`String(value)`), with the
/// agent's pattern `{{([^}]+)}}`. A placeholder the user has no value for is an error naming it
/// (the agent would write `undefined` and filter on that text).
pub fn substitute_scope(tree: &Json, user: &CurrentUser) -> std::result::Result<Json, String> {
    let Some(object) = tree.as_object() else {
        return Ok(tree.clone());
    };
    let mut out = object.clone();
    if let Some(Json::Array(conditions)) = object.get("conditions") {
        let conditions = conditions
            .iter()
            .map(|c| substitute_scope(c, user))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        out.insert("conditions".to_owned(), Json::Array(conditions));
        return Ok(Json::Object(out));
    }
    let value = match object.get("value") {
        Some(Json::String(s)) => Json::String(substitute_text(s, user)?),
        Some(Json::Array(items)) => Json::Array(
            items
                .iter()
                .map(|item| match item {
                    Json::String(s) => substitute_text(s, user).map(Json::String),
                    other => Ok(other.clone()),
                })
                .collect::<std::result::Result<Vec<_>, _>>()?,
        ),
        _ => return Ok(Json::Object(out)),
    };
    out.insert("value".to_owned(), value);
    Ok(Json::Object(out))
}

fn substitute_text(text: &str, user: &CurrentUser) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        // `[^}]+` then `}}`: the key runs to the first `}`, which must open `}}`.
        let Some(end) = after.find('}') else { break };
        if end == 0 || !after[end..].starts_with("}}") {
            out.push_str(&rest[..start + 2]);
            rest = after;
            continue;
        }
        let key = &after[..end];
        let value = key
            .strip_prefix("currentUser.")
            .and_then(|property| user.get(property))
            .ok_or_else(|| format!("{{{{{key}}}}} has no value for this user"))?;
        out.push_str(&rest[..start]);
        out.push_str(&text_of(&value));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `String(value)` of the scalar values a user property holds.
fn text_of(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Permissions {
    /// The caller's `currentUser` for context variables: their users-document entry and their
    /// rendering's team. `None` when not enforced (the token's claims then stand in).
    pub async fn current_user(&self, caller: &Caller) -> Result<Option<CurrentUser>> {
        if !self.enforced() {
            return Ok(None);
        }
        let users = self.users_with(caller).await?;
        let rendering = self.rendering(caller.rendering_id).await?;
        Ok(users.get(&caller.id).map(|user| CurrentUser {
            user: user.clone(),
            team: rendering.team.clone(),
        }))
    }

    /// The caller's scope on `collection` (§5.6), parsed against its schema; `None` without one.
    /// A scope that does not parse (a field the collection does not have, a placeholder the
    /// user has no value for) refuses the request with a 403 naming the problem: no data is
    /// served unscoped.
    pub async fn scope(
        &self,
        caller: &Caller,
        collection: &CollectionSchema,
        schema: &DataSourceSchema,
    ) -> Result<Option<ConditionTree>> {
        if !self.enforced() {
            return Ok(None);
        }
        let users = self.users_with(caller).await?;
        let mut rendering = self.rendering(caller.rendering_id).await?;
        if !rendering.collections.contains_key(&collection.name) && self.policy.refetch_on_denial()
        {
            // As the agent: a collection missing from the rendering may be a stale copy.
            self.invalidate_rendering(caller.rendering_id);
            rendering = self.rendering(caller.rendering_id).await?;
        }
        let Some(raw) = rendering
            .collections
            .get(&collection.name)
            .and_then(|c| c.scope.as_ref())
            .filter(|s| !s.is_null())
        else {
            return Ok(None);
        };
        let key = (caller.rendering_id, caller.id);
        let schema_address = std::ptr::from_ref(collection) as usize;
        if let Some(entry) = self.scopes.get(key, &collection.name, schema_address)
            && Arc::ptr_eq(&entry.rendering, &rendering)
            && Arc::ptr_eq(&entry.users, &users)
        {
            return Ok(entry.tree.clone());
        }
        let Some(user) = users.get(&caller.id) else {
            return Err(Error::forbidden());
        };
        let current = CurrentUser {
            user: user.clone(),
            team: rendering.team.clone(),
        };
        let invalid = |message: String| {
            tracing::warn!(
                rendering = caller.rendering_id,
                collection = %collection.name,
                %message,
                "invalid scope: request refused"
            );
            Error::InvalidScope(format!(
                "The scope of '{}' cannot be applied: {message}",
                collection.name
            ))
        };
        let substituted = substitute_scope(raw, &current).map_err(invalid)?;
        let tree = ConditionTree::parse(&substituted, collection, schema)
            .map_err(|e| invalid(e.to_string()))?;
        self.scopes.put(
            key,
            &collection.name,
            Entry {
                rendering: Arc::clone(&rendering),
                users: Arc::clone(&users),
                schema: schema_address,
                tree: Some(tree.clone()),
            },
        );
        Ok(Some(tree))
    }

    /// The scope of the collection named `collection` of `schema`: a helper for routes that hold
    /// a name (actions use it for their trigger conditions). An unknown collection has no scope.
    pub async fn scope_of(
        &self,
        caller: &Caller,
        schema: &DataSourceSchema,
        collection: &str,
    ) -> Result<Option<ConditionTree>> {
        match schema.collections.get(collection) {
            Some(collection) => self.scope(caller, collection, schema).await,
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::PermissionLevel;

    fn user() -> CurrentUser {
        CurrentUser {
            user: UserEntry {
                id: 7,
                first_name: "Sam".into(),
                last_name: "Lee".into(),
                full_name: "Sam Lee".into(),
                email: "sam@acme.io".into(),
                permission_level: PermissionLevel::User,
                tags: [("region".to_owned(), "EU".to_owned())].into(),
                role_id: Some(3),
            },
            team: RenderingTeam {
                id: 2,
                name: "Ops".into(),
            },
        }
    }

    #[test]
    fn placeholders_take_the_users_document_values() {
        let tree = json!({"aggregator": "and", "conditions": [
            {"field": "owner", "operator": "equal", "value": "{{currentUser.email}}"},
            {"field": "region", "operator": "in", "value": ["{{currentUser.tags.region}}", "X"]},
            {"field": "team", "operator": "equal", "value": "team {{currentUser.team.name}} #{{currentUser.team.id}}"},
            {"field": "n", "operator": "equal", "value": "{{currentUser.id}}{{currentUser.roleId}}"},
            {"field": "k", "operator": "equal", "value": 5},
            {"field": "lit", "operator": "equal", "value": "{{ not closed"}
        ]});
        let out = substitute_scope(&tree, &user()).unwrap();
        let values: Vec<&Json> = out["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["value"])
            .collect();
        assert_eq!(values[0], "sam@acme.io");
        assert_eq!(values[1], &json!(["EU", "X"]));
        assert_eq!(values[2], "team Ops #2");
        assert_eq!(values[3], "73");
        assert_eq!(values[4], &json!(5));
        assert_eq!(values[5], "{{ not closed");
    }

    #[test]
    fn a_placeholder_without_a_value_is_named() {
        for key in [
            "currentUser.tags.country",
            "currentUser.nope",
            "somethingElse",
        ] {
            let tree =
                json!({"field": "x", "operator": "equal", "value": format!("{{{{{key}}}}}")});
            let err = substitute_scope(&tree, &user()).unwrap_err();
            assert!(err.contains(key), "{err}");
        }
        let mut no_role = user();
        no_role.user.role_id = None;
        let tree = json!({"field": "x", "operator": "equal", "value": "{{currentUser.roleId}}"});
        assert!(substitute_scope(&tree, &no_role).is_err());
    }

    #[test]
    fn properties_list_every_variable() {
        let props: HashMap<String, Json> = user().properties().into_iter().collect();
        assert_eq!(props["fullName"], "Sam Lee");
        assert_eq!(props["roleId"], 3);
        assert_eq!(props["team.name"], "Ops");
        assert_eq!(props["tags.region"], "EU");
        assert_eq!(props["permissionLevel"], "user");
    }
}
