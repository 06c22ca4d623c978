//! Checks a permissions file whole, before anything is applied, and turns it into what the store
//! must hold (`Desired`): wildcards kept as `"*"` entries (they cover what is served later), rights
//! as sets, conditions and scopes checked against the schema, users' roles and teams checked
//! against the file.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::{Value as Json, json};

use super::file::{
    ActionRule, ActionRuleSpec, ActionsSpec, IpRuleSpec, Mode, PermissionsFile, RightsSpec,
};
use super::schema::{SchemaView, check_tree};
use crate::datasource::PermissionLevel;
use crate::platform::documents::{
    ActionPermissions, CollectionPermissions, CollectionRights, EnvironmentPermissions, Grant,
    IpWhitelist, LiveQuerySegment, RenderingCollection, RoleCondition, WILDCARD,
};
use crate::platform::store::{normalize_email, parse_level};

/// A collection right (`collection:<name>:<right>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Right {
    Browse,
    Read,
    Edit,
    Add,
    Delete,
    Export,
}

impl Right {
    pub const ALL: [Self; 6] = [
        Self::Browse,
        Self::Read,
        Self::Edit,
        Self::Add,
        Self::Delete,
        Self::Export,
    ];

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

    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == word)
    }

    /// The right's grant in a collection's rights.
    pub fn grant_mut(self, rights: &mut CollectionRights) -> &mut Grant {
        match self {
            Self::Browse => &mut rights.browse_enabled,
            Self::Read => &mut rights.read_enabled,
            Self::Edit => &mut rights.edit_enabled,
            Self::Add => &mut rights.add_enabled,
            Self::Delete => &mut rights.delete_enabled,
            Self::Export => &mut rights.export_enabled,
        }
    }

    pub fn grant(self, rights: &CollectionRights) -> &Grant {
        match self {
            Self::Browse => &rights.browse_enabled,
            Self::Read => &rights.read_enabled,
            Self::Edit => &rights.edit_enabled,
            Self::Add => &rights.add_enabled,
            Self::Delete => &rights.delete_enabled,
            Self::Export => &rights.export_enabled,
        }
    }
}

/// One problem of a file: the table and key it is at, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub table: String,
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}: {}", self.table, self.key, self.message)
    }
}

/// One role's rights, expanded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleRights {
    pub collections: BTreeMap<String, BTreeSet<Right>>,
    /// Collection → action → the role's rule.
    pub actions: BTreeMap<String, BTreeMap<String, ActionRule>>,
}

/// A user as the file wants them.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredUser {
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub level: PermissionLevel,
    pub role: Option<String>,
    pub teams: Vec<String>,
    pub tags: BTreeMap<String, String>,
    /// `None`: the stored password is left as it is.
    pub password_hash: Option<String>,
    pub disabled: bool,
}

/// One team's rendering, as the file wants it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DesiredTeam {
    pub collections: BTreeMap<String, RenderingCollection>,
    pub stats: Vec<Json>,
}

/// What the store must hold after applying a file; `None` sections are left alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    pub roles: Option<BTreeMap<String, RoleRights>>,
    pub teams: Option<BTreeMap<String, DesiredTeam>>,
    pub users: Option<Vec<DesiredUser>>,
    pub ip_whitelist: Option<IpWhitelist>,
}

impl Desired {
    /// The environment document of these roles, with their ids.
    pub fn document(
        roles: &BTreeMap<String, RoleRights>,
        ids: &BTreeMap<String, i64>,
    ) -> EnvironmentPermissions {
        let mut collections: BTreeMap<String, CollectionPermissions> = BTreeMap::new();
        let add = |grant: &mut Grant, id: i64| {
            if let Grant::Roles { roles } = grant {
                if !roles.contains(&id) {
                    roles.push(id);
                    roles.sort_unstable();
                }
            } else {
                *grant = Grant::Roles { roles: vec![id] };
            }
        };
        let empty = || Grant::Roles { roles: Vec::new() };
        let fresh_collection = || CollectionPermissions {
            collection: CollectionRights {
                browse_enabled: empty(),
                read_enabled: empty(),
                edit_enabled: empty(),
                add_enabled: empty(),
                delete_enabled: empty(),
                export_enabled: empty(),
            },
            actions: BTreeMap::new(),
        };
        for (name, rights) in roles {
            let Some(&id) = ids.get(name) else { continue };
            for (collection, set) in &rights.collections {
                let entry = collections
                    .entry(collection.clone())
                    .or_insert_with(fresh_collection);
                for right in set {
                    add(right.grant_mut(&mut entry.collection), id);
                }
            }
            for (collection, actions) in &rights.actions {
                let entry = collections
                    .entry(collection.clone())
                    .or_insert_with(fresh_collection);
                for (action, rule) in actions {
                    let permissions =
                        entry
                            .actions
                            .entry(action.clone())
                            .or_insert_with(|| ActionPermissions {
                                trigger_enabled: empty(),
                                approval_required: empty(),
                                user_approval_enabled: empty(),
                                self_approval_enabled: empty(),
                                ..ActionPermissions::default()
                            });
                    let condition = |filter: &Option<Json>| {
                        filter.as_ref().map(|filter| RoleCondition {
                            role_id: id,
                            filter: filter.clone(),
                        })
                    };
                    if rule.trigger {
                        add(&mut permissions.trigger_enabled, id);
                        permissions
                            .trigger_conditions
                            .extend(condition(&rule.trigger_condition));
                    }
                    if rule.approval_required {
                        add(&mut permissions.approval_required, id);
                        permissions
                            .approval_required_conditions
                            .extend(condition(&rule.approval_condition));
                    }
                    if rule.approve {
                        add(&mut permissions.user_approval_enabled, id);
                        permissions
                            .user_approval_conditions
                            .extend(condition(&rule.approve_condition));
                    }
                    if rule.self_approve {
                        add(&mut permissions.self_approval_enabled, id);
                    }
                }
            }
        }
        EnvironmentPermissions::Collections { collections }
    }
}

struct Problems(Vec<Problem>);

impl Problems {
    fn add(
        &mut self,
        table: impl Into<String>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.0.push(Problem {
            table: table.into(),
            key: key.into(),
            message: message.into(),
        });
    }
}

/// Checks `file` whole; `schema` (when known) checks every collection, action, field and
/// condition it names. Returns what the store must hold and the warnings, or every problem.
pub fn check(
    file: &PermissionsFile,
    schema: Option<&SchemaView>,
) -> Result<(Desired, Vec<String>), Vec<Problem>> {
    let mut problems = Problems(Vec::new());
    let mut warnings = Vec::new();
    let mut desired = Desired::default();

    if let Some(roles) = &file.roles {
        let mut out = BTreeMap::new();
        for (name, spec) in roles {
            let table = format!("roles.{}", quote_key(name));
            if name.trim().is_empty() || name.trim() != name {
                problems.add(
                    "roles",
                    quote_key(name),
                    "a role name must not be empty nor start or end with spaces",
                );
            }
            let mut rights = RoleRights::default();
            check_collections(&table, spec, schema, &mut rights, &mut problems);
            check_actions(&table, spec, schema, &mut rights, &mut problems);
            out.insert(name.clone(), rights);
        }
        desired.roles = Some(out);
    }

    if let Some(teams) = &file.teams {
        let mut out = BTreeMap::new();
        for (name, spec) in teams {
            let table = format!("teams.{}", quote_key(name));
            if name.trim().is_empty() || name.trim() != name {
                problems.add(
                    "teams",
                    quote_key(name),
                    "a team name must not be empty nor start or end with spaces",
                );
            }
            let mut team = DesiredTeam::default();
            let known = |what: &str, collection: &str, problems: &mut Problems| -> bool {
                match schema {
                    Some(schema) if !schema.has_collection(collection) => {
                        problems.add(
                            format!("{table}.{what}"),
                            quote_key(collection),
                            format!("unknown collection (not in {})", schema.source),
                        );
                        false
                    }
                    _ => true,
                }
            };
            for (collection, scope) in &spec.scopes {
                if !known("scopes", collection, &mut problems) {
                    continue;
                }
                if let Some(schema) = schema
                    && let Err(message) = check_tree(scope, collection, schema)
                {
                    problems.add(format!("{table}.scopes"), quote_key(collection), message);
                }
                team.collections
                    .entry(collection.clone())
                    .or_default()
                    .scope = Some(scope.clone());
            }
            for (collection, queries) in &spec.segments {
                if !known("segments", collection, &mut problems) {
                    continue;
                }
                for query in queries {
                    if let Err(message) = check_sql(query) {
                        problems.add(format!("{table}.segments"), quote_key(collection), message);
                    }
                }
                team.collections
                    .entry(collection.clone())
                    .or_default()
                    .segments
                    .clone_from(queries);
            }
            for (collection, segments) in &spec.live_query_segments {
                if !known("live_query_segments", collection, &mut problems) {
                    continue;
                }
                for segment in segments {
                    if let Err(message) = check_sql(&segment.query) {
                        problems.add(
                            format!("{table}.live_query_segments"),
                            quote_key(collection),
                            message,
                        );
                    }
                    if segment.connection.trim().is_empty() {
                        problems.add(
                            format!("{table}.live_query_segments"),
                            quote_key(collection),
                            "a live-query segment needs a connection name",
                        );
                    }
                }
                team.collections
                    .entry(collection.clone())
                    .or_default()
                    .live_query_segments = segments
                    .iter()
                    .map(|s| LiveQuerySegment {
                        connection_name: s.connection.clone(),
                        query: s.query.clone(),
                    })
                    .collect();
            }
            for (index, chart) in spec.charts.iter().enumerate() {
                if !chart.get("type").is_some_and(Json::is_string) {
                    problems.add(
                        table.clone(),
                        format!("charts[{index}]"),
                        "a chart is a table with at least a `type` (Value, Objective, Pie, …)",
                    );
                }
            }
            team.stats.clone_from(&spec.charts);
            out.insert(name.clone(), team);
        }
        desired.teams = Some(out);
    }

    if let Some(users) = &file.users {
        let mut out = Vec::new();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (index, spec) in users.iter().enumerate() {
            let key = format!("users[{index}] ({})", spec.email);
            let email = match normalize_email(&spec.email) {
                Ok(email) => email,
                Err(e) => {
                    problems.add("users", key, e.to_string());
                    continue;
                }
            };
            if let Some(first) = seen.insert(email.to_lowercase(), index) {
                problems.add(
                    "users",
                    key.clone(),
                    format!("the email is also given to users[{first}]: each user once"),
                );
            }
            let level = match spec.level.as_deref().map(parse_level).transpose() {
                Ok(level) => level.unwrap_or_default(),
                Err(e) => {
                    problems.add("users", key.clone(), format!("level: {e}"));
                    PermissionLevel::default()
                }
            };
            if let (Some(role), Some(roles)) = (&spec.role, &file.roles)
                && !roles.contains_key(role)
            {
                problems.add(
                    "users",
                    key.clone(),
                    format!("role {role:?} is not defined under [roles]"),
                );
            }
            let mut teams_seen = BTreeSet::new();
            for team in &spec.teams {
                if !teams_seen.insert(team) {
                    problems.add(
                        "users",
                        key.clone(),
                        format!("team {team:?} is listed twice"),
                    );
                }
                if let Some(teams) = &file.teams
                    && !teams.contains_key(team)
                {
                    problems.add(
                        "users",
                        key.clone(),
                        format!("team {team:?} is not defined under [teams]"),
                    );
                }
            }
            if spec.tags.keys().any(|k| k.trim().is_empty()) {
                problems.add("users", key.clone(), "a tag needs a non-empty key");
            }
            if let Some(hash) = &spec.password_hash
                && !is_argon2(hash)
            {
                problems.add(
                    "users",
                    key.clone(),
                    "password_hash must be an argon2 PHC string ($argon2id$…); clear passwords \
                     never go in this file",
                );
            }
            out.push(DesiredUser {
                email,
                first_name: spec.first_name.clone(),
                last_name: spec.last_name.clone(),
                level,
                role: spec.role.clone(),
                teams: spec.teams.clone(),
                tags: spec.tags.clone(),
                password_hash: spec.password_hash.clone(),
                disabled: spec.disabled,
            });
        }
        if file.mode == Mode::Managed
            && !out
                .iter()
                .any(|u| u.level == PermissionLevel::Admin && !u.disabled)
        {
            warnings.push(
                "no enabled user has level \"admin\": nobody can use the admin API (the CLI \
                 still can)"
                    .to_owned(),
            );
        }
        desired.users = Some(out);
    }

    if let Some(ip) = &file.ip_whitelist {
        let mut rules = Vec::new();
        for (index, rule) in ip.rules.iter().enumerate() {
            match rule_text(rule).and_then(|text| parse_ip_rule(&text)) {
                Ok(rule) => rules.push(rule),
                Err(message) => problems.add("ip_whitelist", format!("rules[{index}]"), message),
            }
        }
        if ip.enabled && rules.is_empty() {
            problems.add(
                "ip_whitelist",
                "enabled",
                "the whitelist is on without rules: every remote address would be refused",
            );
        }
        desired.ip_whitelist = Some(IpWhitelist {
            use_ip_whitelist: ip.enabled,
            rules,
        });
    }

    if problems.0.is_empty() {
        Ok((desired, warnings))
    } else {
        Err(problems.0)
    }
}

fn check_collections(
    table: &str,
    spec: &super::file::RoleSpec,
    schema: Option<&SchemaView>,
    rights: &mut RoleRights,
    problems: &mut Problems,
) {
    let table = format!("{table}.collections");
    let wildcard = spec.collections.contains_key("*");
    for (collection, words) in &spec.collections {
        let key = quote_key(collection);
        let set = match words {
            RightsSpec::Word(word) if word == "all" => Right::ALL.into_iter().collect(),
            RightsSpec::Word(word) => {
                problems.add(
                    &table,
                    &key,
                    format!(
                        "{word:?} is not a right: give \"all\" or a list of browse, read, edit, \
                         add, delete, export"
                    ),
                );
                continue;
            }
            RightsSpec::List(list) => {
                let mut set = BTreeSet::new();
                for word in list {
                    match Right::parse(word) {
                        Some(right) if !set.insert(right) => {
                            problems.add(&table, &key, format!("{word:?} is listed twice"));
                        }
                        Some(_) => {}
                        None => problems.add(
                            &table,
                            &key,
                            format!(
                                "{word:?} is not a right: expected browse, read, edit, add, \
                                 delete or export"
                            ),
                        ),
                    }
                }
                set
            }
        };
        if collection == WILDCARD {
            // Kept as the wildcard: it covers the collections served later too.
            rights.collections.insert(WILDCARD.to_owned(), set);
            continue;
        }
        if wildcard {
            problems.add(
                &table,
                &key,
                "conflicts with \"*\", which already gives this collection its rights: keep one",
            );
        }
        if let Some(schema) = schema
            && !schema.has_collection(collection)
        {
            problems.add(
                &table,
                &key,
                format!("unknown collection (not in {})", schema.source),
            );
            continue;
        }
        rights.collections.insert(collection.clone(), set);
    }
}

fn check_actions(
    table: &str,
    spec: &super::file::RoleSpec,
    schema: Option<&SchemaView>,
    rights: &mut RoleRights,
    problems: &mut Problems,
) {
    let table = format!("{table}.actions");
    let wildcard = spec.actions.contains_key("*");
    for (collection, actions) in &spec.actions {
        let key = quote_key(collection);
        if collection == "*" {
            if !matches!(actions, ActionsSpec::Word(word) if word == "all") {
                problems.add(
                    &table,
                    &key,
                    "\"*\" only takes \"all\" (every right on every action)",
                );
                continue;
            }
            // Kept as the wildcard: every action of every collection, those added later too.
            rights.actions.insert(
                WILDCARD.to_owned(),
                BTreeMap::from([(WILDCARD.to_owned(), ActionRule::all())]),
            );
            continue;
        }
        if wildcard {
            problems.add(
                &table,
                &key,
                "conflicts with \"*\", which already gives this collection's actions: keep one",
            );
        }
        if let Some(schema) = schema
            && !schema.has_collection(collection)
        {
            problems.add(
                &table,
                &key,
                format!("unknown collection (not in {})", schema.source),
            );
            continue;
        }
        let known = |action: &str, problems: &mut Problems| -> bool {
            match schema {
                Some(schema) if action != WILDCARD && !schema.has_action(collection, action) => {
                    problems.add(
                        &table,
                        format!("{key}.{}", quote_key(action)),
                        format!(
                            "unknown action of {collection:?} (not in {})",
                            schema.source
                        ),
                    );
                    false
                }
                _ => true,
            }
        };
        let mut out = BTreeMap::new();
        match actions {
            // Every action of the collection, those a plugin adds later too.
            ActionsSpec::Word(word) if word == "all" => {
                out.insert(WILDCARD.to_owned(), ActionRule::all());
            }
            ActionsSpec::Word(word) => problems.add(
                &table,
                &key,
                format!("{word:?}: give \"all\", a list of action names, or a table of rules"),
            ),
            ActionsSpec::List(names) => {
                for name in names {
                    if out.contains_key(name) {
                        problems.add(&table, &key, format!("{name:?} is listed twice"));
                    } else if known(name, problems) {
                        out.insert(name.clone(), ActionRule::trigger());
                    }
                }
            }
            ActionsSpec::Rules(rules) => {
                for (name, rule) in rules {
                    if !known(name, problems) {
                        continue;
                    }
                    let rule = match rule {
                        ActionRuleSpec::Bool(true) => ActionRule::trigger(),
                        ActionRuleSpec::Bool(false) => continue,
                        ActionRuleSpec::Rule(rule) => (**rule).clone(),
                    };
                    let rule_key = format!("{key}.{}", quote_key(name));
                    for (condition, right, granted) in [
                        ("trigger_condition", "trigger", rule.trigger),
                        (
                            "approval_condition",
                            "approval_required",
                            rule.approval_required,
                        ),
                        ("approve_condition", "approve", rule.approve),
                    ] {
                        let tree = match condition {
                            "trigger_condition" => &rule.trigger_condition,
                            "approval_condition" => &rule.approval_condition,
                            _ => &rule.approve_condition,
                        };
                        let Some(tree) = tree else { continue };
                        if !granted {
                            problems.add(
                                &table,
                                &rule_key,
                                format!(
                                    "{condition} is given but {right} is false: a condition \
                                     only narrows a right the role has"
                                ),
                            );
                        }
                        if let Some(schema) = schema
                            && let Err(message) = check_tree(tree, collection, schema)
                        {
                            problems.add(&table, &rule_key, format!("{condition}: {message}"));
                        }
                    }
                    out.insert(name.clone(), rule);
                }
            }
        }
        if !out.is_empty() {
            rights.actions.insert(collection.clone(), out);
        }
    }
}

/// A SQL segment must be one `SELECT … FROM …` (the agent's rule, §5.5).
pub fn check_sql(query: &str) -> Result<(), String> {
    let trimmed = query.trim().trim_end_matches(';').trim();
    let lower = trimmed.to_ascii_lowercase();
    if !lower.starts_with("select") || !lower.contains(" from ") {
        return Err(format!(
            "{query:?} is not a SELECT … FROM … query (only those can be segments)"
        ));
    }
    if trimmed.contains(';') {
        return Err(format!("{query:?} holds more than one statement"));
    }
    Ok(())
}

fn is_argon2(hash: &str) -> bool {
    argon2::PasswordHash::new(hash)
        .is_ok_and(|parsed| parsed.algorithm.as_str().starts_with("argon2"))
}

/// A TOML key as it would be written: bare when it can be, quoted otherwise.
pub(super) fn quote_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

fn rule_text(rule: &IpRuleSpec) -> Result<String, String> {
    match (&rule.ip, &rule.range, &rule.cidr) {
        (Some(ip), None, None) => {
            if ip.contains('-') || ip.contains('/') {
                Err(format!(
                    "ip = {ip:?}: a range goes in `range`, a CIDR block in `cidr`"
                ))
            } else {
                Ok(ip.clone())
            }
        }
        (None, Some(range), None) => {
            if range.contains('-') {
                Ok(range.clone())
            } else {
                Err(format!("range = {range:?}: expected first-last"))
            }
        }
        (None, None, Some(cidr)) => {
            if cidr.contains('/') {
                Ok(cidr.clone())
            } else {
                Err(format!("cidr = {cidr:?}: expected address/prefix"))
            }
        }
        _ => Err("give exactly one of ip, range or cidr".to_owned()),
    }
}

/// Reads one IP rule as written on the command line or in the file: `10.0.0.1` (exact),
/// `10.0.0.1-10.0.0.9` (range) or `10.0.0.0/24` (CIDR), as the server's rule document
/// (`{type: 0, ip}`, `{type: 1, ipMinimum, ipMaximum}`, `{type: 2, range}`).
pub fn parse_ip_rule(text: &str) -> Result<Json, String> {
    let text = text.trim();
    let ip = |s: &str| -> Result<IpAddr, String> {
        s.trim()
            .parse::<IpAddr>()
            .map_err(|_| format!("{:?} is not an IP address", s.trim()))
    };
    if let Some((first, last)) = text.split_once('-') {
        let (first, last) = (ip(first)?, ip(last)?);
        if first.is_ipv4() != last.is_ipv4() {
            return Err(format!("{text:?} mixes IPv4 and IPv6"));
        }
        if first > last {
            return Err(format!("{text:?}: the first address is after the last"));
        }
        return Ok(
            json!({"type": 1, "ipMinimum": first.to_string(), "ipMaximum": last.to_string()}),
        );
    }
    if let Some((address, prefix)) = text.split_once('/') {
        let address = ip(address)?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        match prefix.parse::<u8>() {
            Ok(bits) if bits <= max => {}
            _ => {
                return Err(format!("{text:?}: the prefix length must be 0 to {max}"));
            }
        }
        return Ok(json!({"type": 2, "range": format!("{address}/{prefix}")}));
    }
    Ok(json!({"type": 0, "ip": ip(text)?.to_string()}))
}

/// The rules of an IP whitelist document that this module can read, in their text form; the
/// others are kept as they are (the agent ignores rules it cannot read).
pub fn check_ip_rules(rules: &[Json]) -> Result<(), String> {
    for (index, rule) in rules.iter().enumerate() {
        let text = match rule.get("type").and_then(Json::as_i64) {
            Some(0) => rule.get("ip").and_then(Json::as_str).map(str::to_owned),
            Some(1) => match (
                rule.get("ipMinimum").and_then(Json::as_str),
                rule.get("ipMaximum").and_then(Json::as_str),
            ) {
                (Some(a), Some(b)) => Some(format!("{a}-{b}")),
                _ => None,
            },
            Some(2) => rule.get("range").and_then(Json::as_str).map(str::to_owned),
            _ => None,
        };
        let Some(text) = text else {
            return Err(format!(
                "rules[{index}]: expected {{type: 0, ip}}, {{type: 1, ipMinimum, ipMaximum}} or \
                 {{type: 2, range}}"
            ));
        };
        parse_ip_rule(&text).map_err(|e| format!("rules[{index}]: {e}"))?;
    }
    Ok(())
}

/// A rule of the document in its text form (`10.0.0.1`, `a-b`, `cidr`), for listings.
pub fn ip_rule_text(rule: &Json) -> String {
    match rule.get("type").and_then(Json::as_i64) {
        Some(0) => rule
            .get("ip")
            .and_then(Json::as_str)
            .unwrap_or("?")
            .to_owned(),
        Some(1) => format!(
            "{}-{}",
            rule.get("ipMinimum").and_then(Json::as_str).unwrap_or("?"),
            rule.get("ipMaximum").and_then(Json::as_str).unwrap_or("?")
        ),
        Some(2) => rule
            .get("range")
            .and_then(Json::as_str)
            .unwrap_or("?")
            .to_owned(),
        _ => rule.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_rules_read_in_their_three_forms() {
        assert_eq!(
            parse_ip_rule("10.0.0.1").unwrap(),
            json!({"type": 0, "ip": "10.0.0.1"})
        );
        assert_eq!(
            parse_ip_rule("10.0.0.1-10.0.0.9").unwrap(),
            json!({"type": 1, "ipMinimum": "10.0.0.1", "ipMaximum": "10.0.0.9"})
        );
        assert_eq!(
            parse_ip_rule("10.0.0.0/24").unwrap(),
            json!({"type": 2, "range": "10.0.0.0/24"})
        );
        assert!(parse_ip_rule("10.0.0.9-10.0.0.1").is_err());
        assert!(parse_ip_rule("10.0.0.0/33").is_err());
        assert!(parse_ip_rule("nope").is_err());
        assert!(parse_ip_rule("10.0.0.1-::1").is_err());
    }

    #[test]
    fn sql_segments_must_be_one_select() {
        assert!(check_sql("SELECT id FROM orders").is_ok());
        assert!(check_sql("select id from orders;").is_ok());
        assert!(check_sql("DELETE FROM orders").is_err());
        assert!(check_sql("SELECT id FROM orders; DROP TABLE orders").is_err());
    }
}
