//! The demo's users: an admin, an editor whose team sees only paid and shipped orders, and a
//! read-only user, seeded through a permissions file (mode "seed") into a store of the demo's
//! own, rebuilt at each run like the demo database. Their passwords are public: the demo only
//! listens where it is told (loopback by default).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::toml_inline;
use super::workflows::triggers::webhook_url;
use crate::config::ChartDefinition;
use crate::platform::{Actor, NewToken, Scope, Store, password};
use crate::workflows::webhook::KeyRing;

/// One login the demo prints.
#[derive(Debug, Clone, Copy)]
pub struct DemoLogin {
    pub email: &'static str,
    pub password: &'static str,
    /// What the user may do, in a few words.
    pub what: &'static str,
}

pub const DEMO_LOGINS: [DemoLogin; 3] = [
    DemoLogin {
        email: "admin@canopy.local",
        password: "canopy-demo-admin",
        what: "admin: every right, the admin API",
    },
    DemoLogin {
        email: "editor@canopy.local",
        password: "canopy-demo-editor",
        what: "editor, role Support: edits orders and customers, sees only paid and shipped orders, offers coupons (VIP needs approval)",
    },
    DemoLogin {
        email: "viewer@canopy.local",
        password: "canopy-demo-viewer",
        what: "user, role Viewer: reads everything, changes nothing",
    },
];

/// The demo's permissions file, with the hashes of the demo passwords.
const TEMPLATE: &str = r#"# Written by `canopy demo` at each run: the demo's roles, teams and users.
mode = "seed"

[roles.Admin]
collections = { "*" = "all" }
actions = { "*" = "all" }

[roles.Support]
collections = { orders = ["browse", "read", "edit", "export"], customers = ["browse", "read", "edit", "add"], order_items = ["browse", "read"], products = ["browse", "read", "edit"], tags = ["browse", "read", "edit"], product_tags = ["browse", "read", "add", "delete"] }

[roles.Support.actions.customers]
"Offer a coupon" = true
"Mark as VIP" = { trigger = true, approval_required = true }

[roles.Support.actions.orders]
"Attach a document" = true

[roles.Viewer]
collections = { "*" = ["browse", "read"] }

# Users below editor (the viewer) may compute only these charts of the dashboard.
[teams.Operations]
charts = {operations_charts}

[teams.Shipping.scopes]
orders = { field = "status", operator = "in", value = ["paid", "shipped"] }

[[users]]
email = "admin@canopy.local"
first_name = "Ada"
last_name = "Admin"
level = "admin"
role = "Admin"
teams = ["Operations"]
password_hash = "{admin}"

[[users]]
email = "editor@canopy.local"
first_name = "Ed"
last_name = "Itor"
level = "editor"
role = "Support"
teams = ["Shipping"]
tags = { region = "EU" }
password_hash = "{editor}"

[[users]]
email = "viewer@canopy.local"
first_name = "Vi"
last_name = "Ewer"
level = "user"
role = "Viewer"
teams = ["Operations"]
password_hash = "{viewer}"
"#;

/// Clears the demo's store folder and writes its permissions file there; returns the folder
/// (`dataDir`) and the file (`permissionsFile`) for the demo's settings.
pub fn demo_permissions_file(dir: &Path, plugin: bool) -> anyhow::Result<(PathBuf, PathBuf)> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("cannot replace the demo store {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut text = TEMPLATE.replace("{operations_charts}", &viewer_charts()?);
    // Without the shop plugin the schema has none of its actions, and a grant of an unknown
    // action makes the whole file refused: the Support role's action grants go.
    if !plugin
        && let (Some(start), Some(end)) = (
            text.find("[roles.Support.actions.customers]"),
            text.find("[roles.Viewer]"),
        )
    {
        text.replace_range(start..end, "");
    }
    for (placeholder, login) in ["{admin}", "{editor}", "{viewer}"].iter().zip(DEMO_LOGINS) {
        text = text.replace(placeholder, &password::hash(login.password)?);
    }
    let file = dir.join("permissions.toml");
    std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    Ok((dir.to_owned(), file))
}

/// The shop's dashboards (`examples/shop/dashboard.toml`), which the demo serves unless the
/// config file has its own `[[dashboard.chart]]` entries.
const DASHBOARD: &str = include_str!("../../../../examples/shop/dashboard.toml");

/// The charts of the demo's dashboards.
pub fn demo_dashboard() -> anyhow::Result<Vec<ChartDefinition>> {
    crate::config::parse_dashboard(DASHBOARD)
        .map_err(|e| anyhow::anyhow!("examples/shop/dashboard.toml: {e}"))
}

/// The charts of the dashboard the demo's viewer (a user, below editor) may compute: the
/// chart permission lets them run only the charts their team lists (§5.5).
const VIEWER_CHARTS: [&str; 2] = ["Revenue, last 24 months", "Orders by status"];

/// The Operations team's `charts`, as a TOML array of the chart bodies of [`VIEWER_CHARTS`]:
/// the very bodies the console sends, so that their hashes match.
fn viewer_charts() -> anyhow::Result<String> {
    let dashboard = demo_dashboard()?;
    let mut bodies = Vec::new();
    for title in VIEWER_CHARTS {
        let chart = dashboard
            .iter()
            .find(|c| c.title == title)
            .with_context(|| format!("the demo dashboard has no chart {title:?}"))?;
        bodies.extend(chart.bodies().iter().map(toml_inline));
    }
    Ok(format!("[{}]", bodies.join(", ")))
}

/// The shop's refund workflow (`examples/shop/workflows/refund.toml`), which the demo serves.
const REFUND_WORKFLOW: &str = include_str!("../../../../examples/shop/workflows/refund.toml");
/// The review workflow, with a manual step a person completes (from the console).
const REVIEW_WORKFLOW: &str = include_str!("../../../../examples/shop/workflows/review.toml");
/// The coupon workflow, whose manual step is an action's form (`Offer a coupon`).
const COUPON_WORKFLOW: &str = include_str!("../../../../examples/shop/workflows/coupon.toml");

/// Writes the demo's workflows folder (`workflowsDir`) beside its store: the refund, review
/// and coupon workflows.
pub fn demo_workflows_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, text) in [
        ("refund.toml", REFUND_WORKFLOW),
        ("review.toml", REVIEW_WORKFLOW),
        ("coupon.toml", COUPON_WORKFLOW),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(dir.to_owned())
}

/// The refund workflow's webhook, ready for a curl: enabled, its URL (signed with the demo's
/// auth secret, at `origin`), and an application token of the demo admin with the
/// `workflows:trigger` scope only. The demo store is rebuilt at each run, so the token does not
/// pile up.
pub async fn demo_webhook(
    store: &Store,
    auth_secret: &str,
    origin: &str,
) -> anyhow::Result<(String, String)> {
    let workflow = store
        .workflow_ref("refund")
        .await?
        .context("the demo's refund workflow is not loaded")?;
    let trigger = store
        .set_webhook_enabled(&Actor::System, &workflow, true)
        .await?;
    let url = webhook_url(
        store,
        &KeyRing::new(&[], auth_secret),
        origin,
        None,
        &trigger,
    );
    let user = demo_admin(store).await?;
    let (_, secret) = store
        .create_token(
            &Actor::System,
            user.id,
            NewToken {
                name: "demo refund webhook".to_owned(),
                scopes: vec![Scope::WorkflowsTrigger],
                expires_at: None,
            },
        )
        .await?;
    Ok((url, secret.expose().to_owned()))
}

/// How long the demo's printed token is valid: a working day, where a token from signing in
/// lasts an hour, so that the curl lines keep working while one tries the demo.
pub const DEMO_TOKEN_HOURS: u64 = 12;

/// A session token of the demo admin valid [`DEMO_TOKEN_HOURS`], as signing in would give:
/// their first team's rendering, so the printed curl lines see what the admin sees in the UI.
pub async fn demo_session_token(store: &Store, auth_secret: &str) -> anyhow::Result<String> {
    let ttl = std::time::Duration::from_secs(DEMO_TOKEN_HOURS * 3600);
    super::session_token(store, auth_secret, DEMO_LOGINS[0].email, ttl).await
}

/// The demo admin (the first of [`DEMO_LOGINS`]) as the store holds them.
async fn demo_admin(store: &Store) -> anyhow::Result<crate::platform::User> {
    let admin = DEMO_LOGINS[0].email;
    store
        .user_by_email(admin)
        .await?
        .with_context(|| format!("the demo user {admin} is missing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the shop plugin, the permissions file grants none of its actions (the schema
    /// has none, and an unknown action refuses the whole file); with it, the Support role's
    /// grants are there. Both stay valid TOML with every role, team and user.
    #[test]
    fn the_permissions_file_grants_the_plugins_actions_only_with_the_plugin() {
        let root = std::env::temp_dir().join(format!("canopy-demo-perms-{}", std::process::id()));
        for plugin in [true, false] {
            let (_, file) = demo_permissions_file(&root.join(plugin.to_string()), plugin).unwrap();
            let text = std::fs::read_to_string(&file).unwrap();
            let parsed: toml::Table = toml::from_str(&text).unwrap();
            let roles = parsed["roles"].as_table().unwrap();
            assert_eq!(roles.len(), 3, "{text}");
            assert_eq!(parsed["users"].as_array().unwrap().len(), 3, "{text}");
            assert_eq!(
                roles["Support"].get("actions").is_some(),
                plugin,
                "Support's action grants with the plugin {plugin}: {text}"
            );
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
