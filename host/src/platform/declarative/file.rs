//! The permissions file as written: serde types with `deny_unknown_fields`, so that a misspelt
//! key is an error rather than a right silently not granted. Condition trees are JSON values
//! (TOML inline tables read as JSON objects), in the agent's plain form.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value as Json;

/// `mode`: how the file relates to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Applied to an empty store only (the first start); later changes are made with the CLI or
    /// the API.
    Seed,
    /// The file is the truth: the store is made equal to it at each start and on `canopy
    /// permissions apply`; writes to its sections through the CLI or API are refused.
    Managed,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Seed => "seed",
            Self::Managed => "managed",
        }
    }
}

/// The whole file. A section left out is not managed (and, in seed mode, not seeded).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsFile {
    pub mode: Mode,
    /// Role name → its rights.
    pub roles: Option<BTreeMap<String, RoleSpec>>,
    /// Team name → what its members see in this environment.
    pub teams: Option<BTreeMap<String, TeamSpec>>,
    pub users: Option<Vec<UserSpec>>,
    pub ip_whitelist: Option<IpWhitelistSpec>,
}

/// One role's rights on collections and actions.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleSpec {
    /// Collection (or `*` for every collection of the schema) → `"all"` or a list of rights
    /// (`browse`, `read`, `edit`, `add`, `delete`, `export`).
    #[serde(default)]
    pub collections: BTreeMap<String, RightsSpec>,
    /// Collection (or `*`) → its actions: `"all"`, a list of action names (trigger only), or a
    /// table of action name → `true` or an [`ActionRule`].
    #[serde(default)]
    pub actions: BTreeMap<String, ActionsSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RightsSpec {
    Word(String),
    List(Vec<String>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ActionsSpec {
    Word(String),
    List(Vec<String>),
    Rules(BTreeMap<String, ActionRuleSpec>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ActionRuleSpec {
    Bool(bool),
    Rule(Box<ActionRule>),
}

/// One role's rights on one action (`custom:<collection>:<action>:*`).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ActionRule {
    #[serde(default = "yes")]
    pub trigger: bool,
    /// Only records matching this tree may be acted on.
    pub trigger_condition: Option<Json>,
    #[serde(default)]
    pub approval_required: bool,
    /// Approval is required only when a selected record matches this tree.
    pub approval_condition: Option<Json>,
    /// May approve others' requests (`userApprovalEnabled`).
    #[serde(default)]
    pub approve: bool,
    pub approve_condition: Option<Json>,
    /// May approve their own requests.
    #[serde(default)]
    pub self_approve: bool,
}

fn yes() -> bool {
    true
}

impl ActionRule {
    /// Every right, no condition (`"all"`).
    pub fn all() -> Self {
        Self {
            trigger: true,
            trigger_condition: None,
            approval_required: false,
            approval_condition: None,
            approve: true,
            approve_condition: None,
            self_approve: true,
        }
    }

    /// Trigger only.
    pub fn trigger() -> Self {
        Self {
            approve: false,
            self_approve: false,
            ..Self::all()
        }
    }
}

/// One team's view of this environment.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamSpec {
    /// Collection → condition tree AND-ed into every request (`{{currentUser.*}}` allowed).
    #[serde(default)]
    pub scopes: BTreeMap<String, Json>,
    /// Collection → SQL of the live-query segments the team's users may run.
    #[serde(default)]
    pub segments: BTreeMap<String, Vec<String>>,
    /// Collection → live-query segments allowed on a named connection.
    #[serde(default)]
    pub live_query_segments: BTreeMap<String, Vec<LiveQuerySegmentSpec>>,
    /// Chart definitions that users below editor may compute.
    #[serde(default)]
    pub charts: Vec<Json>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveQuerySegmentSpec {
    pub connection: String,
    pub query: String,
}

/// One user. No clear password, ever: `password_hash` is an argon2 PHC string, and without it
/// the user's password is left as it is (set with `canopy users set --password-stdin`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    pub email: String,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub last_name: String,
    /// `admin`, `developer`, `editor` or `user` (the default).
    pub level: Option<String>,
    pub role: Option<String>,
    #[serde(default)]
    pub teams: Vec<String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    pub password_hash: Option<String>,
    #[serde(default)]
    pub disabled: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpWhitelistSpec {
    pub enabled: bool,
    #[serde(default)]
    pub rules: Vec<IpRuleSpec>,
}

/// One rule: exactly one of `ip`, `range` (`first-last`) or `cidr`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpRuleSpec {
    pub ip: Option<String>,
    pub range: Option<String>,
    pub cidr: Option<String>,
}
