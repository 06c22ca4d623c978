//! The permission documents, in the exact JSON shapes of the Forest server's permission API
//! (protocol §5.1). Canopy's store builds them from its tables, the remote mode reads them from a
//! Forest-compatible server, and `http::liana` serves them: one model, so the check code in
//! `auth::permissions` never knows where they came from.

use std::collections::BTreeMap;

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
