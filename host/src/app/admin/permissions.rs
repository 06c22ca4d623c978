//! `canopy permissions show|grant|revoke|scope|segments|ip|apply`: the environment's rights by
//! role, each team's scopes and segments, the IP whitelist, and the declarative file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Value as Json, json};

use super::{ACTOR, print_json, schema_view, table};
use crate::config::StoreConfig;
use crate::platform::declarative::{self, Part, Right, SchemaView};
use crate::platform::documents::{
    ActionPermissions, CollectionPermissions, EnvironmentPermissions, Grant, IpWhitelist,
    RenderingCollection, WILDCARD,
};
use crate::platform::{Role, Store};

#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// Show the environment's rights (collections and actions, by role), each team's scopes and
    /// segments, and the IP whitelist; `--json` prints the documents themselves.
    Show {
        /// Only the rights of this role.
        #[arg(long)]
        role: Option<String>,
        /// Only this team's scopes, segments and charts.
        #[arg(long)]
        team: Option<String>,
    },
    /// Give a role rights on a collection, e.g. `canopy permissions grant --role Support orders
    /// browse read`; with `--action NAME`, rights on one of its actions: trigger, approve,
    /// self-approve, require-approval. `all` gives every right. `'*'` as the collection (or the
    /// action) is every collection (or action), including those served later:
    /// `canopy permissions grant --role Admin '*' all --action '*'`.
    Grant {
        #[arg(long)]
        role: String,
        /// The collection, as the schema names it, or '*' for every collection.
        collection: String,
        /// Collection rights: browse, read, edit, add, delete, export, all. With --action:
        /// trigger, approve, self-approve, require-approval, all.
        #[arg(required = true)]
        rights: Vec<String>,
        /// An action of the collection (Canopy's, or of an agent whose permission server this
        /// is), or '*' for every action.
        #[arg(long)]
        action: Option<String>,
    },
    /// Take rights away from a role (same arguments as grant).
    Revoke {
        #[arg(long)]
        role: String,
        collection: String,
        #[arg(required = true)]
        rights: Vec<String>,
        #[arg(long)]
        action: Option<String>,
    },
    /// Set a team's scope on a collection: a condition tree AND-ed into every request of its
    /// users, e.g. `canopy permissions scope --team Ops orders
    /// '{"field":"region","operator":"equal","value":"{{currentUser.tags.region}}"}'`.
    Scope {
        #[arg(long)]
        team: String,
        collection: String,
        /// The condition tree, as JSON.
        #[arg(required_unless_present = "clear")]
        tree: Option<String>,
        /// Remove the scope.
        #[arg(long, conflicts_with = "tree")]
        clear: bool,
    },
    /// Set the SQL segments a team's users may run on a collection (none: clears them).
    Segments {
        #[arg(long)]
        team: String,
        collection: String,
        /// `SELECT … FROM …` queries.
        queries: Vec<String>,
    },
    /// The IP whitelist: show, on, off, add RULE…, remove RULE….
    #[command(subcommand)]
    Ip(IpCommand),
    /// Apply a permissions file now (its `mode` says seed or managed), checked against the
    /// schema file when there is one. Nothing is applied unless the whole file is valid.
    Apply {
        file: PathBuf,
        /// Check the file and stop.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum IpCommand {
    /// Show whether the whitelist is on and its rules.
    Show,
    /// Refuse requests from addresses no rule matches (loopback stays allowed).
    On,
    /// Accept requests from every address.
    Off,
    /// Add rules: an address (10.0.0.1), a range (10.0.0.1-10.0.0.9) or a CIDR block
    /// (10.0.0.0/24).
    Add {
        #[arg(required = true)]
        rules: Vec<String>,
    },
    /// Remove rules, written as they were added.
    Remove {
        #[arg(required = true)]
        rules: Vec<String>,
    },
}

pub(super) async fn run(
    store: &Store,
    config: &StoreConfig,
    command: PermissionsCommand,
    json: bool,
) -> anyhow::Result<()> {
    match command {
        PermissionsCommand::Show { role, team } => show(store, role, team, json).await,
        PermissionsCommand::Grant {
            role,
            collection,
            rights,
            action,
        } => {
            change(
                store,
                config,
                &role,
                &collection,
                &rights,
                action,
                true,
                json,
            )
            .await
        }
        PermissionsCommand::Revoke {
            role,
            collection,
            rights,
            action,
        } => {
            change(
                store,
                config,
                &role,
                &collection,
                &rights,
                action,
                false,
                json,
            )
            .await
        }
        PermissionsCommand::Scope {
            team,
            collection,
            tree,
            clear,
        } => {
            let tree = match tree {
                Some(text) if !clear => Some(
                    serde_json::from_str::<Json>(&text)
                        .map_err(|e| anyhow::anyhow!("the scope is not JSON: {e}"))?,
                ),
                _ => None,
            };
            if let (Some(tree), Some(view)) = (&tree, schema_view(config)?) {
                declarative::check_tree(tree, &collection, &view)
                    .map_err(|e| anyhow::anyhow!("scope of {collection}: {e}"))?;
            }
            edit_rendering(store, config, &team, &collection, json, |entry| {
                entry.scope = tree;
            })
            .await
        }
        PermissionsCommand::Segments {
            team,
            collection,
            queries,
        } => {
            for query in &queries {
                declarative::check_sql(query).map_err(anyhow::Error::msg)?;
            }
            edit_rendering(store, config, &team, &collection, json, |entry| {
                entry.segments = queries;
            })
            .await
        }
        PermissionsCommand::Ip(command) => ip(store, command, json).await,
        PermissionsCommand::Apply { file, dry_run } => {
            let view = names_view(store, config).await?;
            let checked = declarative::load(&file, view.as_ref())?;
            for warning in &checked.warnings {
                eprintln!("Warning: {warning}");
            }
            if view.is_none() {
                eprintln!(
                    "Note: no schema file at {}: collection and field names were not checked \
                     (write it with `canopy schema`).",
                    config.schema_path.display()
                );
            }
            if dry_run {
                crate::outln!(
                    "{} is valid (mode = \"{}\").",
                    file.display(),
                    checked.mode.as_str()
                );
                return Ok(());
            }
            let outcome = declarative::apply(store, &checked).await?;
            if json {
                return print_json(&json!({
                    "applied": outcome.applied,
                    "changes": outcome.changes,
                    "skipped": outcome.skipped,
                }));
            }
            if let Some(skipped) = outcome.skipped {
                crate::outln!("{skipped}");
            } else if outcome.changes.is_empty() {
                crate::outln!("{} applied: the store already matched it.", file.display());
            } else {
                crate::outln!("{} applied:", file.display());
                for change in &outcome.changes {
                    crate::outln!("  {change}");
                }
            }
            Ok(())
        }
    }
}

async fn role(store: &Store, name: &str) -> anyhow::Result<Role> {
    store
        .role_by_name(name)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no role {name:?} (see `canopy roles list`)"))
}

/// A right of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ActionRight {
    Trigger,
    Approve,
    SelfApprove,
    RequireApproval,
}

impl ActionRight {
    const ALL: [Self; 4] = [
        Self::Trigger,
        Self::Approve,
        Self::SelfApprove,
        Self::RequireApproval,
    ];

    fn parse(word: &str) -> Option<Self> {
        match word {
            "trigger" => Some(Self::Trigger),
            "approve" => Some(Self::Approve),
            "self-approve" => Some(Self::SelfApprove),
            "require-approval" => Some(Self::RequireApproval),
            _ => None,
        }
    }

    fn grant_mut(self, action: &mut ActionPermissions) -> &mut Grant {
        match self {
            Self::Trigger => &mut action.trigger_enabled,
            Self::Approve => &mut action.user_approval_enabled,
            Self::SelfApprove => &mut action.self_approval_enabled,
            Self::RequireApproval => &mut action.approval_required,
        }
    }
}

/// Gives (`on`) or takes (`!on`) `role_id` a right, keeping the others' as they are. A right
/// given to everyone (`true`) is taken from one role by listing every other role.
fn set_grant(grant: &mut Grant, role_id: i64, on: bool, all_roles: &[i64]) {
    let mut roles = match grant {
        Grant::All(true) => all_roles.to_vec(),
        Grant::All(false) => Vec::new(),
        Grant::Roles { roles } => roles.clone(),
    };
    roles.retain(|id| *id != role_id);
    if on {
        roles.push(role_id);
    }
    roles.sort_unstable();
    *grant = Grant::Roles { roles };
}

#[allow(
    clippy::too_many_arguments,
    reason = "the arguments of grant and revoke"
)]
async fn change(
    store: &Store,
    config: &StoreConfig,
    role_name: &str,
    collection: &str,
    words: &[String],
    action: Option<String>,
    on: bool,
    json: bool,
) -> anyhow::Result<()> {
    declarative::guard(store, Part::Roles).await?;
    let role = role(store, role_name).await?;
    check_wildcards(collection, action.as_deref())?;
    if collection != WILDCARD
        && let Some(view) = names_view(store, config).await?
    {
        check_names(&view, collection, action.as_deref())?;
    }
    let all_roles: Vec<i64> = store.roles().await?.iter().map(|r| r.id).collect();
    let mut document = store.environment_document().await?;
    let EnvironmentPermissions::Collections { collections } = &mut document else {
        anyhow::bail!(
            "environment {} allows everything (a development environment): there are no rights \
             to change",
            store.environment()
        );
    };
    let entry = collections
        .entry(collection.to_owned())
        .or_insert_with(CollectionPermissions::default);
    match &action {
        None => {
            let rights = parse_words(
                words,
                Right::parse,
                &Right::ALL,
                "browse, read, edit, add, delete, export or all",
            )?;
            for right in rights {
                set_grant(
                    right.grant_mut(&mut entry.collection),
                    role.id,
                    on,
                    &all_roles,
                );
            }
        }
        Some(action) => {
            let rights = parse_words(
                words,
                ActionRight::parse,
                &ActionRight::ALL,
                "trigger, approve, self-approve, require-approval or all",
            )?;
            let permissions = entry.actions.entry(action.clone()).or_default();
            for right in rights {
                set_grant(right.grant_mut(permissions), role.id, on, &all_roles);
                if !on {
                    // A condition of a right the role no longer has would be dead weight.
                    let conditions = match right {
                        ActionRight::Trigger => Some(&mut permissions.trigger_conditions),
                        ActionRight::Approve => Some(&mut permissions.user_approval_conditions),
                        ActionRight::RequireApproval => {
                            Some(&mut permissions.approval_required_conditions)
                        }
                        ActionRight::SelfApprove => None,
                    };
                    if let Some(conditions) = conditions {
                        conditions.retain(|c| c.role_id != role.id);
                    }
                }
            }
        }
    }
    store.set_environment_document(&ACTOR, &document).await?;
    if json {
        return print_json(&document);
    }
    let target = match &action {
        Some(action) => format!("action {action:?} of {collection}"),
        None => collection.to_owned(),
    };
    let verb = if on { "Granted" } else { "Revoked" };
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    crate::outln!(
        "{verb} {} on {target} {} role {}.",
        words.join(", "),
        if on { "to" } else { "from" },
        role.name
    );
    Ok(())
}

fn parse_words<T: Copy + PartialEq>(
    words: &[String],
    parse: impl Fn(&str) -> Option<T>,
    all: &[T],
    expected: &str,
) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::new();
    for word in words {
        if word == "all" {
            return Ok(all.to_vec());
        }
        let right = parse(word)
            .ok_or_else(|| anyhow::anyhow!("{word:?} is not a right: expected {expected}"))?;
        if !out.contains(&right) {
            out.push(right);
        }
    }
    Ok(out)
}

/// `"*"` as the collection takes only `--action '*'` (a rule of one action of every collection
/// would name nothing); other names must be in the view.
fn check_wildcards(collection: &str, action: Option<&str>) -> anyhow::Result<()> {
    if collection == WILDCARD && action.is_some_and(|a| a != WILDCARD) {
        anyhow::bail!(
            "the collection \"*\" (every collection) only takes --action '*' (every action)"
        );
    }
    Ok(())
}

fn check_names(view: &SchemaView, collection: &str, action: Option<&str>) -> anyhow::Result<()> {
    if !view.has_collection(collection) {
        anyhow::bail!("unknown collection {collection:?} (not in {})", view.source);
    }
    if let Some(action) = action
        && action != WILDCARD
        && !view.has_action(collection, action)
    {
        anyhow::bail!(
            "{collection:?} has no action {action:?} (not in {})",
            view.source
        );
    }
    Ok(())
}

/// The names rules may use: the schema file's, and those of the schema the environment's other
/// agents uploaded (their own actions). `None` without a schema file.
async fn names_view(store: &Store, config: &StoreConfig) -> anyhow::Result<Option<SchemaView>> {
    let Some(view) = schema_view(config)? else {
        return Ok(None);
    };
    let apimap = store.apimap().await?;
    Ok(Some(view.with_agents(apimap.as_ref().map(|a| &a.document))))
}

async fn edit_rendering(
    store: &Store,
    config: &StoreConfig,
    team_name: &str,
    collection: &str,
    json: bool,
    edit: impl FnOnce(&mut RenderingCollection),
) -> anyhow::Result<()> {
    declarative::guard(store, Part::Teams).await?;
    let team = store
        .team_by_name(team_name)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no team {team_name:?} (see `canopy teams list`)"))?;
    if let Some(view) = schema_view(config)? {
        check_names(&view, collection, None)?;
    }
    let id = store.rendering_id(team.id).await?;
    let rendering = store.rendering_document(id).await?.unwrap_or_default();
    let mut collections = rendering.collections;
    let entry = collections.entry(collection.to_owned()).or_default();
    edit(entry);
    if entry == &RenderingCollection::default() {
        collections.remove(collection);
    }
    store
        .set_rendering(&ACTOR, &team.name, collections.clone(), rendering.stats)
        .await?;
    if json {
        return print_json(&json!({"team": team, "renderingId": id, "collections": collections}));
    }
    crate::outln!("Changed what team {} sees of {collection}.", team.name);
    Ok(())
}

async fn show(
    store: &Store,
    role_filter: Option<String>,
    team_filter: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let roles = store.roles().await?;
    let teams = store.teams().await?;
    let document = store.environment_document().await?;
    let whitelist = store.ip_whitelist_document().await?;
    let mut renderings = Vec::new();
    for team in &teams {
        if team_filter.as_ref().is_some_and(|t| t != &team.name) {
            continue;
        }
        let id = store.rendering_id(team.id).await?;
        let rendering = store.rendering_document(id).await?.unwrap_or_default();
        renderings.push((team, id, rendering));
    }
    if let Some(team) = &team_filter
        && renderings.is_empty()
    {
        anyhow::bail!("no team {team:?} (see `canopy teams list`)");
    }
    let role_id = match &role_filter {
        Some(name) => Some(role(store, name).await?.id),
        None => None,
    };
    if json {
        let renderings: Vec<Json> = renderings
            .iter()
            .map(|(team, id, r)| {
                json!({"team": team, "renderingId": id, "collections": r.collections, "stats": r.stats})
            })
            .collect();
        return print_json(&json!({
            "project": store.project(),
            "environment": store.environment(),
            "permissions": document,
            "renderings": renderings,
            "ipWhitelist": whitelist,
        }));
    }
    let names: BTreeMap<i64, &str> = roles.iter().map(|r| (r.id, r.name.as_str())).collect();
    let who = |grant: &Grant| -> String {
        match grant {
            Grant::All(true) => "everyone".to_owned(),
            Grant::All(false) => "-".to_owned(),
            Grant::Roles { roles } => table::list(
                roles
                    .iter()
                    .filter(|id| role_id.is_none_or(|only| only == **id))
                    .map(|id| names.get(id).copied().unwrap_or("(removed role)")),
            ),
        }
    };
    crate::outln!(
        "Project {}, environment {}.",
        store.project(),
        store.environment()
    );
    if team_filter.is_none() {
        match &document {
            EnvironmentPermissions::AllowAll(true) => {
                crate::outln!("\nEvery right is given to everyone (a development environment).");
            }
            EnvironmentPermissions::AllowAll(false) => crate::outln!("\nNo rights at all."),
            EnvironmentPermissions::Collections { collections } => {
                let rows: Vec<Vec<String>> = collections
                    .iter()
                    .map(|(name, c)| {
                        let mut row = vec![name.clone()];
                        row.extend(Right::ALL.iter().map(|r| who(r.grant(&c.collection))));
                        row
                    })
                    .collect();
                crate::outln!("\nCollection rights:");
                super::emit(&table::render(
                    &[
                        "COLLECTION",
                        "BROWSE",
                        "READ",
                        "EDIT",
                        "ADD",
                        "DELETE",
                        "EXPORT",
                    ],
                    &rows,
                ));
                let rows: Vec<Vec<String>> = collections
                    .iter()
                    .flat_map(|(name, c)| {
                        c.actions.iter().map(move |(action, a)| (name, action, a))
                    })
                    .map(|(name, action, a)| {
                        let conditions = a.trigger_conditions.len()
                            + a.approval_required_conditions.len()
                            + a.user_approval_conditions.len();
                        vec![
                            name.clone(),
                            action.clone(),
                            who(&a.trigger_enabled),
                            who(&a.approval_required),
                            who(&a.user_approval_enabled),
                            who(&a.self_approval_enabled),
                            conditions.to_string(),
                        ]
                    })
                    .collect();
                if !rows.is_empty() {
                    crate::outln!("\nAction rights:");
                    super::emit(&table::render(
                        &[
                            "COLLECTION",
                            "ACTION",
                            "TRIGGER",
                            "REQUIRE APPROVAL",
                            "APPROVE",
                            "SELF-APPROVE",
                            "CONDITIONS",
                        ],
                        &rows,
                    ));
                }
            }
        }
    }
    if role_filter.is_none() {
        let rows: Vec<Vec<String>> = renderings
            .iter()
            .flat_map(|(team, _, r)| {
                r.collections.iter().map(move |(name, c)| {
                    vec![
                        team.name.clone(),
                        name.clone(),
                        c.scope
                            .as_ref()
                            .map_or_else(|| "-".to_owned(), Json::to_string),
                        c.segments.len().to_string(),
                    ]
                })
            })
            .collect();
        crate::outln!("\nTeam scopes and segments:");
        if rows.is_empty() {
            crate::outln!("(none)");
        } else {
            super::emit(&table::render(
                &["TEAM", "COLLECTION", "SCOPE", "SEGMENTS"],
                &rows,
            ));
        }
        for (team, _, r) in &renderings {
            if !r.stats.is_empty() {
                crate::outln!("Team {} may compute {} chart(s).", team.name, r.stats.len());
            }
        }
        if team_filter.is_none() {
            print_whitelist(&whitelist);
        }
    }
    let managed = declarative::managed(store).await?;
    if let Some(file) = managed.this_environment() {
        let parts: Vec<&str> = file.parts.iter().map(|p| p.as_str()).collect();
        crate::outln!(
            "\nManaged by {} ({}): change the file, not the store.",
            file.path,
            parts.join(", ")
        );
    }
    Ok(())
}

fn print_whitelist(whitelist: &IpWhitelist) {
    let state = if whitelist.use_ip_whitelist {
        "on"
    } else {
        "off"
    };
    let rules: Vec<String> = whitelist
        .rules
        .iter()
        .map(declarative::ip_rule_text)
        .collect();
    crate::outln!(
        "\nIP whitelist: {state}; rules: {}",
        table::list(rules.iter().map(String::as_str))
    );
}

async fn ip(store: &Store, command: IpCommand, json: bool) -> anyhow::Result<()> {
    let mut whitelist = store.ip_whitelist_document().await?;
    match command {
        IpCommand::Show => {
            if json {
                return print_json(&whitelist);
            }
            print_whitelist(&whitelist);
            return Ok(());
        }
        IpCommand::On => {
            if whitelist.rules.is_empty() {
                anyhow::bail!(
                    "the whitelist has no rules: add some first (`canopy permissions ip add \
                     10.0.0.0/24`), or every remote address would be refused"
                );
            }
            whitelist.use_ip_whitelist = true;
        }
        IpCommand::Off => whitelist.use_ip_whitelist = false,
        IpCommand::Add { rules } => {
            for text in &rules {
                let rule = declarative::parse_ip_rule(text).map_err(anyhow::Error::msg)?;
                if !whitelist.rules.contains(&rule) {
                    whitelist.rules.push(rule);
                }
            }
        }
        IpCommand::Remove { rules } => {
            for text in &rules {
                let rule = declarative::parse_ip_rule(text).map_err(anyhow::Error::msg)?;
                let before = whitelist.rules.len();
                whitelist.rules.retain(|r| r != &rule);
                if whitelist.rules.len() == before {
                    anyhow::bail!("the whitelist has no rule {text:?}");
                }
            }
            if whitelist.use_ip_whitelist && whitelist.rules.is_empty() {
                anyhow::bail!(
                    "that would leave the whitelist on without rules: turn it off first \
                     (`canopy permissions ip off`)"
                );
            }
        }
    }
    declarative::guard(store, Part::IpWhitelist).await?;
    store.set_ip_whitelist(&ACTOR, &whitelist).await?;
    if json {
        return print_json(&whitelist);
    }
    print_whitelist(&whitelist);
    Ok(())
}
