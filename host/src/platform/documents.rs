//! The permission documents, in the exact JSON shapes of the Forest server's permission API
//! (protocol §5.1). Canopy's store builds them from its tables, the remote mode reads them from a
//! Forest-compatible server, and `http::liana` serves them: one model, so the check code in
//! `auth::permissions` never knows where they came from.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::datasource::PermissionLevel;

/// `GET /liana/v4/permissions/environment`: `true` in a development environment (everything is
/// allowed, approvals are never required), else the rights of each collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvironmentPermissions {
    /// The JSON `true` (`false` is not sent by the server; it reads as "no rights").
    AllowAll(bool),
    Collections {
        #[serde(default)]
        collections: BTreeMap<String, CollectionPermissions>,
    },
}

impl Default for EnvironmentPermissions {
    fn default() -> Self {
        Self::Collections {
            collections: BTreeMap::new(),
        }
    }
}

/// The key that stands for every collection in `collections`, and for every action in a
/// collection's `actions`, including those that appear later (a plugin reloaded, another agent's
/// schema uploaded). Stored as is; the checks read it through [`EnvironmentPermissions::rights`]
/// and [`EnvironmentPermissions::action`], and the documents served to other agents are
/// [`EnvironmentPermissions::expanded`] for the names they know.
pub const WILDCARD: &str = "*";

impl EnvironmentPermissions {
    /// Whether the document holds a `"*"` entry anywhere.
    pub fn has_wildcard(&self) -> bool {
        match self {
            Self::AllowAll(_) => false,
            Self::Collections { collections } => collections
                .iter()
                .any(|(name, c)| name == WILDCARD || c.actions.contains_key(WILDCARD)),
        }
    }

    /// The rights on `collection`: its own entry, with the rights of the `"*"` entry added.
    /// `None` when neither exists (no rights) or for a development document.
    pub fn rights<'a>(
        collections: &'a BTreeMap<String, CollectionPermissions>,
        collection: &str,
    ) -> Option<Cow<'a, CollectionRights>> {
        let own = collections.get(collection).map(|c| &c.collection);
        let any = collections.get(WILDCARD).map(|c| &c.collection);
        match (own, any) {
            (Some(one), None) | (None, Some(one)) => Some(Cow::Borrowed(one)),
            (Some(own), Some(any)) => Some(Cow::Owned(own.union(any))),
            (None, None) => None,
        }
    }

    /// The rights on `action` of `collection`: its own entry, with those of the collection's
    /// `"*"` action and of the `"*"` collection's `"*"` action added (a role's own condition
    /// wins over a wildcard's, being listed last).
    pub fn action<'a>(
        collections: &'a BTreeMap<String, CollectionPermissions>,
        collection: &str,
        action: &str,
    ) -> Option<Cow<'a, ActionPermissions>> {
        let own = collections.get(collection);
        let any = collections.get(WILDCARD);
        let found: Vec<&ActionPermissions> = [
            any.and_then(|c| c.actions.get(WILDCARD)),
            own.and_then(|c| c.actions.get(WILDCARD)),
            own.and_then(|c| c.actions.get(action)),
        ]
        .into_iter()
        .flatten()
        .collect();
        match found.as_slice() {
            [] => None,
            [one] => Some(Cow::Borrowed(*one)),
            [first, rest @ ..] => Some(Cow::Owned(
                rest.iter()
                    .fold((*first).clone(), |acc, next| acc.union(next)),
            )),
        }
    }

    /// Of these `(collection, action)` pairs, those no role (nor everyone) may trigger, in the
    /// order given: a development document (`true`) leaves none.
    pub fn untriggerable<'a>(
        &self,
        actions: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<(String, String)> {
        let Self::Collections { collections } = self else {
            return match self {
                Self::AllowAll(true) => Vec::new(),
                _ => actions
                    .into_iter()
                    .map(|(c, a)| (c.to_owned(), a.to_owned()))
                    .collect(),
            };
        };
        actions
            .into_iter()
            .filter(|(collection, action)| {
                !Self::action(collections, collection, action).is_some_and(|p| p.triggerable())
            })
            .map(|(c, a)| (c.to_owned(), a.to_owned()))
            .collect()
    }

    /// The document with its wildcards written out for these collections and their actions
    /// (and the names the document already lists), for a reader that does not know `"*"` (the
    /// Node agent). The `"*"` entries stay, so that a reader that knows them (another Canopy)
    /// also covers what `names` does not. A document without wildcard is returned as is.
    pub fn expanded(&self, names: &BTreeMap<String, BTreeSet<String>>) -> Self {
        let Self::Collections { collections } = self else {
            return self.clone();
        };
        if !self.has_wildcard() {
            return self.clone();
        }
        let mut all: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (name, actions) in names {
            all.entry(name.as_str())
                .or_default()
                .extend(actions.iter().map(String::as_str));
        }
        for (name, c) in collections {
            all.entry(name.as_str())
                .or_default()
                .extend(c.actions.keys().map(String::as_str));
        }
        let mut out = BTreeMap::new();
        for (collection, actions) in all {
            if collection == WILDCARD {
                continue;
            }
            let rights = Self::rights(collections, collection)
                .map(Cow::into_owned)
                .unwrap_or_default();
            let actions = actions
                .into_iter()
                .filter(|a| *a != WILDCARD)
                .filter_map(|a| {
                    Self::action(collections, collection, a).map(|p| (a.to_owned(), p.into_owned()))
                })
                .chain(
                    collections
                        .get(collection)
                        .and_then(|c| c.actions.get(WILDCARD))
                        .map(|p| (WILDCARD.to_owned(), p.clone())),
                )
                .collect();
            out.insert(
                collection.to_owned(),
                CollectionPermissions {
                    collection: rights,
                    actions,
                },
            );
        }
        if let Some(any) = collections.get(WILDCARD) {
            out.insert(WILDCARD.to_owned(), any.clone());
        }
        Self::Collections { collections: out }
    }
}

/// One collection's entry of the environment document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CollectionPermissions {
    #[serde(default)]
    pub collection: CollectionRights,
    #[serde(default)]
    pub actions: BTreeMap<String, ActionPermissions>,
}

/// The six collection rights (`collection:<name>:<right>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectionRights {
    #[serde(default)]
    pub browse_enabled: Grant,
    #[serde(default)]
    pub read_enabled: Grant,
    #[serde(default)]
    pub edit_enabled: Grant,
    #[serde(default)]
    pub add_enabled: Grant,
    #[serde(default)]
    pub delete_enabled: Grant,
    #[serde(default)]
    pub export_enabled: Grant,
}

impl CollectionRights {
    /// Each right held in either.
    pub fn union(&self, other: &Self) -> Self {
        Self {
            browse_enabled: self.browse_enabled.union(&other.browse_enabled),
            read_enabled: self.read_enabled.union(&other.read_enabled),
            edit_enabled: self.edit_enabled.union(&other.edit_enabled),
            add_enabled: self.add_enabled.union(&other.add_enabled),
            delete_enabled: self.delete_enabled.union(&other.delete_enabled),
            export_enabled: self.export_enabled.union(&other.export_enabled),
        }
    }
}

/// One action's rights (`custom:<collection>:<action>:<right>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionPermissions {
    #[serde(default)]
    pub trigger_enabled: Grant,
    #[serde(default)]
    pub trigger_conditions: Vec<RoleCondition>,
    #[serde(default)]
    pub approval_required: Grant,
    #[serde(default)]
    pub approval_required_conditions: Vec<RoleCondition>,
    #[serde(default)]
    pub user_approval_enabled: Grant,
    #[serde(default)]
    pub user_approval_conditions: Vec<RoleCondition>,
    #[serde(default)]
    pub self_approval_enabled: Grant,
}

impl ActionPermissions {
    /// Each right held in either; `other`'s conditions come last, so that a role's condition
    /// there wins (the checks take a role's last condition, as the agent does).
    pub fn union(&self, other: &Self) -> Self {
        let both = |a: &[RoleCondition], b: &[RoleCondition]| {
            a.iter().chain(b).cloned().collect::<Vec<_>>()
        };
        Self {
            trigger_enabled: self.trigger_enabled.union(&other.trigger_enabled),
            trigger_conditions: both(&self.trigger_conditions, &other.trigger_conditions),
            approval_required: self.approval_required.union(&other.approval_required),
            approval_required_conditions: both(
                &self.approval_required_conditions,
                &other.approval_required_conditions,
            ),
            user_approval_enabled: self
                .user_approval_enabled
                .union(&other.user_approval_enabled),
            user_approval_conditions: both(
                &self.user_approval_conditions,
                &other.user_approval_conditions,
            ),
            self_approval_enabled: self
                .self_approval_enabled
                .union(&other.self_approval_enabled),
        }
    }

    /// Whether some role (or everyone) may trigger the action.
    pub fn triggerable(&self) -> bool {
        match &self.trigger_enabled {
            Grant::All(all) => *all,
            Grant::Roles { roles } => !roles.is_empty(),
        }
    }
}

/// A right: `true`/`false` for everyone, or the ids of the roles that have it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Grant {
    All(bool),
    Roles { roles: Vec<i64> },
}

impl Default for Grant {
    fn default() -> Self {
        Self::All(false)
    }
}

impl Grant {
    /// Everyone if either grants everyone, else the roles of both.
    pub fn union(&self, other: &Self) -> Self {
        match (self, other) {
            (Self::All(true), _) | (_, Self::All(true)) => Self::All(true),
            (Self::All(false), other) | (other, Self::All(false)) => other.clone(),
            (Self::Roles { roles: a }, Self::Roles { roles: b }) => {
                let mut roles: Vec<i64> = a.iter().chain(b).copied().collect();
                roles.sort_unstable();
                roles.dedup();
                Self::Roles { roles }
            }
        }
    }

    /// Whether a user of this role has the right (§5.3).
    pub fn allows(&self, role_id: Option<i64>) -> bool {
        match self {
            Self::All(all) => *all,
            Self::Roles { roles } => role_id.is_some_and(|id| roles.contains(&id)),
        }
    }
}

/// A condition attached to one role: a condition tree in the agent's plain JSON form, whose leaves
/// may carry `source: "data" | "input"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleCondition {
    pub role_id: i64,
    pub filter: Json,
}

/// One entry of `GET /liana/v4/permissions/users`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserEntry {
    pub id: i64,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub last_name: String,
    #[serde(default)]
    pub full_name: String,
    pub email: String,
    #[serde(default)]
    pub permission_level: PermissionLevel,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    #[serde(default)]
    pub role_id: Option<i64>,
}

/// `GET /liana/v4/permissions/renderings/{renderingId}`: one team's view of one environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rendering {
    pub team: RenderingTeam,
    #[serde(default)]
    pub collections: BTreeMap<String, RenderingCollection>,
    /// The chart definitions users below editor may compute (matched by hash, §5.5).
    #[serde(default)]
    pub stats: Vec<Json>,
}

/// The team a rendering belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderingTeam {
    pub id: i64,
    pub name: String,
}

/// One collection of a rendering: its scope and the SQL segments its users may run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderingCollection {
    /// A condition tree with `{{currentUser.*}}` placeholders, AND-ed into every filter.
    #[serde(default)]
    pub scope: Option<Json>,
    /// The SQL of the live-query segments allowed on this collection.
    #[serde(default)]
    pub segments: Vec<String>,
    #[serde(default)]
    pub live_query_segments: Vec<LiveQuerySegment>,
}

/// A live-query segment allowed on one connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveQuerySegment {
    pub connection_name: String,
    pub query: String,
}

/// `GET /liana/v1/ip-whitelist-rules`, in the server's JSON:API-like envelope.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IpWhitelistDocument {
    pub data: IpWhitelistData,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IpWhitelistData {
    #[serde(default = "ip_whitelist_type")]
    pub r#type: String,
    #[serde(default)]
    pub id: String,
    pub attributes: IpWhitelist,
}

fn ip_whitelist_type() -> String {
    "ip-whitelist-rules".to_owned()
}

/// Whether the whitelist is on, and its rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IpWhitelist {
    pub use_ip_whitelist: bool,
    /// Kept as JSON: the agent ignores rules it cannot read, so one bad rule must not make the
    /// whole document unreadable. `auth::permissions` parses each into an `IpRule`.
    #[serde(default)]
    pub rules: Vec<Json>,
}

impl IpWhitelist {
    pub fn into_document(self) -> IpWhitelistDocument {
        IpWhitelistDocument {
            data: IpWhitelistData {
                r#type: ip_whitelist_type(),
                id: "1".to_owned(),
                attributes: self,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn environment_true_and_collections_both_read() {
        let all: EnvironmentPermissions = serde_json::from_value(json!(true)).unwrap();
        assert_eq!(all, EnvironmentPermissions::AllowAll(true));
        let doc: EnvironmentPermissions = serde_json::from_value(json!({
            "collections": {"orders": {
                "collection": {"browseEnabled": true, "readEnabled": {"roles": [2]}},
                "actions": {"Refund": {"triggerEnabled": {"roles": [1]},
                    "triggerConditions": [{"roleId": 1, "filter": {"field": "id", "operator": "greater_than", "value": 3}}]}}
            }}
        }))
        .unwrap();
        let EnvironmentPermissions::Collections { collections } = doc else {
            panic!("expected collections");
        };
        let orders = &collections["orders"];
        assert!(orders.collection.browse_enabled.allows(None));
        assert!(orders.collection.read_enabled.allows(Some(2)));
        assert!(!orders.collection.read_enabled.allows(Some(1)));
        assert!(!orders.collection.edit_enabled.allows(Some(2)));
        assert_eq!(orders.actions["Refund"].trigger_conditions[0].role_id, 1);
    }

    /// `"*"` covers names the document never listed; rights add up with named entries; a role's
    /// own condition wins over the wildcard's.
    #[test]
    fn wildcards_cover_later_names_and_add_up() {
        let doc: EnvironmentPermissions = serde_json::from_value(json!({"collections": {
            "*": {"collection": {"browseEnabled": {"roles": [1]}},
                  "actions": {"*": {"triggerEnabled": {"roles": [1]},
                      "triggerConditions": [{"roleId": 1, "filter": {"field": "a"}}]}}},
            "orders": {"collection": {"browseEnabled": {"roles": [2]}, "readEnabled": true},
                "actions": {"Refund": {"triggerEnabled": {"roles": [2]},
                    "triggerConditions": [{"roleId": 1, "filter": {"field": "b"}}]},
                    "*": {"userApprovalEnabled": {"roles": [3]}}}},
        }}))
        .unwrap();
        assert!(doc.has_wildcard());
        let EnvironmentPermissions::Collections { collections } = &doc else {
            panic!("collections");
        };
        let later = EnvironmentPermissions::rights(collections, "later").unwrap();
        assert!(later.browse_enabled.allows(Some(1)) && !later.read_enabled.allows(Some(1)));
        let orders = EnvironmentPermissions::rights(collections, "orders").unwrap();
        assert_eq!(orders.browse_enabled, Grant::Roles { roles: vec![1, 2] });
        assert_eq!(orders.read_enabled, Grant::All(true));
        let refund = EnvironmentPermissions::action(collections, "orders", "Refund").unwrap();
        assert_eq!(refund.trigger_enabled, Grant::Roles { roles: vec![1, 2] });
        assert_eq!(
            refund.user_approval_enabled,
            Grant::Roles { roles: vec![3] }
        );
        // The named entry's condition for role 1 is listed last: it is the one that applies.
        assert_eq!(
            refund.trigger_conditions.last().unwrap().filter,
            json!({"field": "b"})
        );
        let new = EnvironmentPermissions::action(collections, "books", "New").unwrap();
        assert!(new.trigger_enabled.allows(Some(1)) && !new.trigger_enabled.allows(Some(2)));
        assert_eq!(
            doc.untriggerable([("books", "New"), ("orders", "Refund")]),
            Vec::<(String, String)>::new()
        );
        let by_name: EnvironmentPermissions = serde_json::from_value(json!({"collections": {
            "orders": {"actions": {"Refund": {"triggerEnabled": {"roles": [2]}}}}}}))
        .unwrap();
        assert!(!by_name.has_wildcard());
        assert_eq!(
            by_name.untriggerable([("orders", "Refund"), ("orders", "New")]),
            [("orders".to_owned(), "New".to_owned())]
        );
        assert!(
            EnvironmentPermissions::AllowAll(true)
                .untriggerable([("a", "b")])
                .is_empty()
        );
    }

    /// The document served to a Node agent names each collection and action of its schema,
    /// and keeps the `"*"` entries for readers that know them.
    #[test]
    fn expanded_documents_name_what_the_reader_knows() {
        let doc: EnvironmentPermissions = serde_json::from_value(json!({"collections": {
            "*": {"collection": {"browseEnabled": {"roles": [1]}},
                  "actions": {"*": {"triggerEnabled": {"roles": [1]}}}},
            "orders": {"collection": {"readEnabled": {"roles": [2]}}},
        }}))
        .unwrap();
        let names = BTreeMap::from([
            (
                "books".to_owned(),
                BTreeSet::from(["Mark as read".to_owned()]),
            ),
            ("orders".to_owned(), BTreeSet::new()),
        ]);
        let served = serde_json::to_value(doc.expanded(&names)).unwrap();
        let books = &served["collections"]["books"];
        assert_eq!(books["collection"]["browseEnabled"], json!({"roles": [1]}));
        assert_eq!(
            books["actions"]["Mark as read"]["triggerEnabled"],
            json!({"roles": [1]})
        );
        let orders = &served["collections"]["orders"]["collection"];
        assert_eq!(orders["browseEnabled"], json!({"roles": [1]}));
        assert_eq!(orders["readEnabled"], json!({"roles": [2]}));
        assert!(served["collections"]["*"].is_object());
        let plain = EnvironmentPermissions::AllowAll(true);
        assert_eq!(plain.expanded(&names), plain);
    }

    #[test]
    fn ip_whitelist_round_trips_in_the_server_envelope() {
        let doc: IpWhitelistDocument =
            serde_json::from_value(json!({"data": {"type": "ip-whitelist-rules", "id": "1",
            "attributes": {"use_ip_whitelist": true, "rules": [{"type": 0, "ip": "10.0.0.1"}]}}}))
            .unwrap();
        assert!(doc.data.attributes.use_ip_whitelist);
        assert_eq!(doc.data.attributes.rules.len(), 1);
    }
}
