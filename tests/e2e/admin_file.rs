//! The declarative permissions file on SQLite and PostgreSQL stores: a seed file fills an empty
//! store once; a managed file makes the store equal to it, change by change in the admin log
//! (with an `initial` entry when it takes over), and its sections refuse other writes; every bad
//! file is refused whole, naming the file, table and key, with nothing applied.

use std::path::Path;

use canopy::datasource::PermissionLevel;
use canopy::platform::declarative::{self, Part, SchemaView};
use canopy::platform::documents::{EnvironmentPermissions, Grant};
use canopy::platform::{Actor, Error, NewUser, PermissionSource as _, Store, password};
use canopy_e2e::{Backend, TestDb};

use crate::admin::{TempDir, on_store_backends, serve};

/// The shop fixture's schema, as names and condition trees are checked against.
async fn schema() -> (TestDb, SchemaView) {
    let (db, datasource) = crate::list::shop(Backend::Sqlite).await;
    let view = SchemaView::served(canopy::datasource::DataSource::schema(&datasource));
    (db, view)
}

const MANAGED: &str = r#"
mode = "managed"

[roles.Admin]
collections = { "*" = "all" }

[roles.Support]
collections = { orders = ["browse", "read", "edit"], customers = ["browse", "read"] }

[roles.Support.actions]

[teams.Operations]

[teams.Ops.scopes]
orders = { field = "status", operator = "equal", value = "{{currentUser.tags.status}}" }

[teams.Ops.segments]
orders = ["SELECT id FROM orders WHERE amount > 10"]

[[users]]
email = "ann@acme.io"
first_name = "Ann"
level = "admin"
role = "Admin"
teams = ["Operations"]

[[users]]
email = "sam@acme.io"
first_name = "Sam"
level = "editor"
role = "Support"
teams = ["Ops"]
tags = { status = "paid" }

[ip_whitelist]
enabled = true
rules = [{ ip = "10.0.0.1" }, { range = "10.0.0.5-10.0.0.9" }, { cidr = "192.168.0.0/16" }]
"#;

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("permissions.toml");
    std::fs::write(&path, text).unwrap();
    path
}

async fn counts(store: &Store) -> (usize, usize, usize, usize, String) {
    (
        store.users().await.unwrap().len(),
        store.roles().await.unwrap().len(),
        store.teams().await.unwrap().len(),
        store.admin_logs(1000).await.unwrap().len(),
        serde_json::to_string(&store.environment_document().await.unwrap()).unwrap(),
    )
}

async fn a_managed_file_is_applied_change_by_change(backend: Backend) {
    let (_data, view) = schema().await;
    let db = TestDb::new(backend).await;
    let store = Store::open(&db.url, "acme", "production").await.unwrap();
    let dir = TempDir::new();
    // What was there before the file took over.
    store.create_role(&Actor::System, "Legacy").await.unwrap();
    store
        .create_user(
            &Actor::System,
            NewUser {
                email: "old@acme.io".into(),
                role: Some("Legacy".into()),
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let path = write(&dir.0, MANAGED);
    let checked = declarative::load(&path, Some(&view)).unwrap();
    let generation = store.generation();
    let outcome = declarative::apply(&store, &checked).await.unwrap();
    assert!(outcome.applied);
    assert!(
        store.generation() > generation,
        "the permission cache is told"
    );
    let users = store.users().await.unwrap();
    let emails: Vec<&str> = users.iter().map(|u| u.email.as_str()).collect();
    assert_eq!(emails, ["ann@acme.io", "sam@acme.io"]);
    let sam = &users[1];
    assert_eq!(sam.permission_level, PermissionLevel::Editor);
    assert_eq!(sam.teams[0].name, "Ops");
    assert_eq!(sam.tags["status"], "paid");
    assert!(store.role_by_name("Legacy").await.unwrap().is_none());
    let support = store.role_by_name("Support").await.unwrap().unwrap();
    let admin = store.role_by_name("Admin").await.unwrap().unwrap();
    let EnvironmentPermissions::Collections { collections } =
        store.environment_document().await.unwrap()
    else {
        panic!("rights by collection");
    };
    // The Admin role's `"*"` is kept as the wildcard; the rights of a collection add it up
    // with its named entry.
    let orders = EnvironmentPermissions::rights(&collections, "orders").unwrap();
    assert_eq!(
        orders.edit_enabled,
        Grant::Roles {
            roles: vec![admin.id, support.id]
        }
    );
    assert_eq!(
        orders.delete_enabled,
        Grant::Roles {
            roles: vec![admin.id]
        }
    );
    assert!(
        collections.contains_key("*") && !collections.contains_key("order_lines"),
        "\"*\" is every collection, those served later too"
    );
    let later = EnvironmentPermissions::rights(&collections, "served_later").unwrap();
    assert!(later.delete_enabled.allows(Some(admin.id)));
    assert!(!later.delete_enabled.allows(Some(support.id)));
    let ops = store.team_by_name("Ops").await.unwrap().unwrap();
    let rendering = store
        .rendering_document(store.rendering_id(ops.id).await.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rendering.collections["orders"].segments,
        ["SELECT id FROM orders WHERE amount > 10"]
    );
    let whitelist = store.ip_whitelist_document().await.unwrap();
    assert!(whitelist.use_ip_whitelist);
    assert_eq!(whitelist.rules.len(), 3);

    // The log: the baseline first, then one entry per change.
    let logs = store.admin_logs(100).await.unwrap();
    let initial = logs.iter().find(|l| l.r#type == "initial").unwrap();
    assert_eq!(initial.resource, "environment");
    assert_eq!(initial.initiator, "forestAdmin");
    assert_eq!(
        initial.previous_value.as_ref().unwrap()["users"][0],
        "old@acme.io"
    );
    assert!(logs.iter().any(|l| l.r#type == "remove"
        && l.resource == "user-project"
        && l.previous_value.as_ref().unwrap()["user"]["email"] == "old@acme.io"));
    assert!(logs.iter().any(|l| l.r#type == "remove"
        && l.resource == "role"
        && l.previous_value.as_ref().unwrap()["name"] == "Legacy"));

    // Applying the same file again changes nothing and logs nothing.
    let before = store.admin_logs(1000).await.unwrap().len();
    let again = declarative::apply(&store, &checked).await.unwrap();
    assert!(
        again.applied && again.changes.is_empty(),
        "{:?}",
        again.changes
    );
    assert_eq!(store.admin_logs(1000).await.unwrap().len(), before);

    // A change of the file: only what changed is written and logged.
    let edited = MANAGED.replace("level = \"editor\"", "level = \"user\"");
    let path = write(&dir.0, &edited);
    let checked = declarative::load(&path, Some(&view)).unwrap();
    let outcome = declarative::apply(&store, &checked).await.unwrap();
    assert_eq!(outcome.changes, ["user sam@acme.io updated"]);
    let logs = store.admin_logs(1).await.unwrap();
    assert_eq!(
        logs[0].previous_value.as_ref().unwrap()["permissionLevel"],
        "editor"
    );
    assert_eq!(
        logs[0].new_value.as_ref().unwrap()["permissionLevel"],
        "user"
    );

    // The managed sections refuse other writes, naming the file.
    let managed = declarative::managed(&store).await.unwrap();
    for part in [Part::Roles, Part::Teams, Part::Users, Part::IpWhitelist] {
        let refused = managed.check(part);
        assert!(
            matches!(&refused, Err(Error::Conflict(m)) if m.contains("permissions.toml")),
            "{refused:?}"
        );
    }
    // Sam's password is not in the file: it may be set.
    assert!(managed.check_password("sam@acme.io").is_ok());
    // Released, the store is its own again.
    assert!(declarative::release(&store).await.unwrap().is_some());
    assert!(declarative::guard(&store, Part::Users).await.is_ok());
}

async fn a_seed_file_fills_an_empty_store_once(backend: Backend) {
    let hash = password::hash("ann-password").unwrap();
    let seed = format!(
        r#"
mode = "seed"

[roles.Admin]
collections = {{ "*" = "all" }}

[teams.Operations]

[[users]]
email = "ann@acme.io"
level = "admin"
role = "Admin"
teams = ["Operations"]
password_hash = "{hash}"
"#
    );
    // Through a real start: the file is applied before the first admin would be created.
    let env = serve(backend, Some(&seed)).await.unwrap();
    let users = env.store.users().await.unwrap();
    assert_eq!(
        users.len(),
        1,
        "the seed's admin stands for the first admin"
    );
    assert_eq!(users[0].email, "ann@acme.io");
    let stored = env.store.password_hash(users[0].id).await.unwrap().unwrap();
    assert!(password::verify("ann-password", &stored));
    assert!(
        declarative::managed(&env.store)
            .await
            .unwrap()
            .this_environment()
            .is_none(),
        "a seed manages nothing"
    );
    // Later, the store has data: the seed is not applied again.
    env.store.create_team(&Actor::System, "Ops").await.unwrap();
    let (_data, view) = schema().await;
    let path = env.dir.0.join("permissions.toml");
    let checked = declarative::load(&path, Some(&view)).unwrap();
    let outcome = declarative::apply(&env.store, &checked).await.unwrap();
    assert!(!outcome.applied);
    assert!(outcome.skipped.unwrap().contains("already"));
    assert!(env.store.team_by_name("Ops").await.unwrap().is_some());
}

async fn bad_files_are_refused_whole(backend: Backend) {
    let (_data, view) = schema().await;
    let db = TestDb::new(backend).await;
    let store = Store::open(&db.url, "acme", "production").await.unwrap();
    let dir = TempDir::new();
    store.create_role(&Actor::System, "Keep").await.unwrap();
    let before = counts(&store).await;
    let cases: [(&str, &str, &[&str]); 14] = [
        ("not toml [", "", &["not a valid permissions file"]),
        (
            "mode = \"sometimes\"",
            "",
            &["not a valid permissions file"],
        ),
        ("mode = \"managed\"\n[rolez.A]\n", "", &["rolez"]),
        (
            "mode = \"managed\"\n[[users]]\nemail = \"a@acme.io\"\nrole = \"Ghost\"\n[roles.Admin]\n",
            "users",
            &["users[0] (a@acme.io)", "Ghost"],
        ),
        (
            "mode = \"managed\"\n[teams.Ops]\n[[users]]\nemail = \"a@acme.io\"\nteams = [\"Nowhere\"]\n",
            "users",
            &["Nowhere"],
        ),
        (
            "mode = \"managed\"\n[roles.A]\ncollections = { ordrs = [\"browse\"] }\n",
            "roles.A.collections",
            &["ordrs", "unknown collection"],
        ),
        (
            "mode = \"managed\"\n[roles.A]\ncollections = { orders = [\"browse\", \"peek\"] }\n",
            "roles.A.collections",
            &["peek"],
        ),
        (
            "mode = \"managed\"\n[teams.Ops.scopes]\norders = { field = \"regio\", operator = \"equal\", value = \"EU\" }\n",
            "teams.Ops.scopes",
            &["regio"],
        ),
        (
            "mode = \"managed\"\n[[users]]\nemail = \"a@acme.io\"\nlevel = \"boss\"\n",
            "users",
            &["boss"],
        ),
        (
            "mode = \"managed\"\n[[users]]\nemail = \"a@acme.io\"\n[[users]]\nemail = \"A@acme.io\"\n",
            "users",
            &["users[1]", "also given to users[0]"],
        ),
        (
            "mode = \"managed\"\n[roles.A]\ncollections = { \"*\" = [\"browse\"], orders = \"all\" }\n",
            "roles.A.collections",
            &["conflicts with \"*\""],
        ),
        (
            "mode = \"managed\"\n[roles.A.actions.orders.Refund]\ntrigger = false\ntrigger_condition = { field = \"amount\", operator = \"less_than\", value = 5 }\n",
            "roles.A.actions",
            &["unknown action"],
        ),
        (
            "mode = \"managed\"\n[[users]]\nemail = \"a@acme.io\"\npassword_hash = \"hunter2\"\n",
            "users",
            &["argon2"],
        ),
        (
            "mode = \"managed\"\n[ip_whitelist]\nenabled = true\nrules = [{ cidr = \"10.0.0.0/40\" }]\n",
            "ip_whitelist",
            &["rules[0]"],
        ),
    ];
    for (text, table, expected) in cases {
        let path = write(&dir.0, text);
        let error = declarative::load(&path, Some(&view))
            .unwrap_err()
            .to_string();
        assert!(error.contains("permissions.toml"), "{error}");
        assert!(error.contains("nothing was applied"), "{error}");
        if !table.is_empty() {
            assert!(error.contains(&format!("[{table}]")), "{table}: {error}");
        }
        for piece in expected {
            assert!(error.contains(piece), "{piece}: {error}");
        }
    }
    assert_eq!(counts(&store).await, before, "no bad file applied anything");
    // A file valid on its own that does not fit the store: checked inside the transaction.
    let path = write(
        &dir.0,
        "mode = \"managed\"\n[[users]]\nemail = \"a@acme.io\"\nrole = \"Ghost\"\n",
    );
    let checked = declarative::load(&path, Some(&view)).unwrap();
    let error = declarative::apply(&store, &checked)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("Ghost") && error.contains("nothing was applied"),
        "{error}"
    );
    // Removing a role that unmanaged users hold is refused too.
    store
        .create_user(
            &Actor::System,
            NewUser {
                email: "keeper@acme.io".into(),
                role: Some("Keep".into()),
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let before = counts(&store).await;
    let path = write(&dir.0, "mode = \"managed\"\n[roles.Other]\n");
    let checked = declarative::load(&path, Some(&view)).unwrap();
    let error = declarative::apply(&store, &checked)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("keeper@acme.io"), "{error}");
    assert_eq!(counts(&store).await, before, "nothing was applied");
    assert!(store.role_by_name("Other").await.unwrap().is_none());
    // A condition on a right not given is a conflicting rule (checked without a schema too).
    let path = write(
        &dir.0,
        "mode = \"managed\"\n[roles.A.actions.orders.Refund]\ntrigger = false\ntrigger_condition = { field = \"amount\", operator = \"less_than\", value = 5 }\n",
    );
    let error = declarative::load(&path, None).unwrap_err().to_string();
    assert!(
        error.contains("trigger_condition is given but trigger is false"),
        "{error}"
    );
    assert_eq!(counts(&store).await, before);
}

/// A bad file stops the start, and the store is left as it was.
async fn a_bad_file_stops_the_start(backend: Backend) {
    let bad = "mode = \"managed\"\n[roles.A]\ncollections = { ordrs = [\"browse\"] }\n";
    let error = serve(backend, Some(bad)).await.err().unwrap();
    assert!(
        error.contains("permissions.toml") && error.contains("ordrs"),
        "{error}"
    );
}

on_store_backends!(
    a_managed_file_is_applied_change_by_change,
    a_seed_file_fills_an_empty_store_once,
    bad_files_are_refused_whole,
    a_bad_file_stops_the_start,
);

/// `examples/permissions.toml` fits the shop demo as served (its database and its plugin's
/// actions), and applies at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_file_fits_the_shop_demo() {
    let dir = TempDir::new();
    let plugins = dir.0.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(
        Path::new(env!("CANOPY_TEST_PLUGINS")).join("shop_plugin.wasm"),
        plugins.join("shop.wasm"),
    )
    .unwrap();
    let url = canopy::app::seed_demo(&dir.0.join("shop.sqlite"))
        .await
        .unwrap();
    let mut config =
        crate::harness::plugin_config(&url, &plugins, &dir.0.join(".forestadmin-schema.json"));
    config.platform.permissions_file = Some(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("examples/permissions.toml"),
    );
    let (served, _) = crate::harness::served(config)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let store = &served.platform().store;
    let users = store.users().await.unwrap();
    assert_eq!(users.len(), 3);
    assert_eq!(users[1].teams.len(), 2);
    let support = store.role_by_name("Support").await.unwrap().unwrap();
    let EnvironmentPermissions::Collections { collections } =
        store.environment_document().await.unwrap()
    else {
        panic!("rights by collection");
    };
    let vip = &collections["customers"].actions["Mark as VIP"];
    assert!(vip.trigger_enabled.allows(Some(support.id)));
    assert!(vip.approval_required.allows(Some(support.id)));
    assert_eq!(vip.approval_required_conditions[0].role_id, support.id);
    let managed = declarative::managed(store).await.unwrap();
    assert!(managed.by(Part::Users).is_some() && managed.by(Part::IpWhitelist).is_some());
}
