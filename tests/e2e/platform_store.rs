//! Canopy's own store on SQLite and PostgreSQL: migrations (concurrent starts migrate once), the
//! permission model's writes with their admin log entries, the documents it serves, approvals.

use canopy::datasource::PermissionLevel;
use canopy::platform::documents::{EnvironmentPermissions, RenderingCollection};
use canopy::platform::{
    Actor, ApprovalStatus, Error, NewUser, PermissionSource, Store, UserChange, bootstrap,
};
use canopy_e2e::{Backend, TestDb};
use serde_json::json;

async fn store(db: &TestDb) -> Store {
    Store::open(&db.url, "acme", "production").await.unwrap()
}

async fn writes_are_logged_and_served_as_documents(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = store(&db).await;
    let before = PermissionSource::generation(&store);
    let role = store.create_role(&Actor::System, "Support").await.unwrap();
    store.create_team(&Actor::System, "Ops").await.unwrap();
    let user = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "sam@acme.io".into(),
                first_name: "Sam".into(),
                last_name: "Lee".into(),
                permission_level: PermissionLevel::User,
                role: Some("Support".into()),
                teams: vec!["Ops".into()],
                tags: [("region".to_owned(), "EU".to_owned())].into(),
                password_hash: None,
            },
        )
        .await
        .unwrap();
    assert!(
        PermissionSource::generation(&store) > before,
        "a write bumps the generation"
    );
    assert_eq!(user.teams[0].name, "Ops");
    assert_eq!(user.role.as_ref().unwrap().id, role.id);

    // The same email twice is a conflict, whatever its case... of the first insert.
    let again = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "sam@acme.io".into(),
                ..NewUser::default()
            },
        )
        .await;
    assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
    // An unknown role is named, and nothing is created.
    let unknown = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "x@acme.io".into(),
                role: Some("Nope".into()),
                ..NewUser::default()
            },
        )
        .await;
    assert!(
        matches!(unknown, Err(Error::NotFound(ref m)) if m.contains("Nope")),
        "{unknown:?}"
    );
    assert!(store.user_by_email("x@acme.io").await.unwrap().is_none());

    let users = PermissionSource::users(&store).await.unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].role_id, Some(role.id));
    assert_eq!(users[0].full_name, "Sam Lee");
    assert_eq!(users[0].tags["region"], "EU");

    // Disabled users leave the users document.
    store
        .update_user(
            &Actor::System,
            user.id,
            UserChange {
                disabled: Some(true),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();
    assert!(PermissionSource::users(&store).await.unwrap().is_empty());

    let document: EnvironmentPermissions = serde_json::from_value(json!({"collections": {
        "orders": {"collection": {"browseEnabled": {"roles": [role.id]}}, "actions": {}}}}))
    .unwrap();
    assert!(!store.has_environment_document().await.unwrap());
    store
        .set_environment_document(&Actor::System, &document)
        .await
        .unwrap();
    assert_eq!(store.environment_permissions().await.unwrap(), document);
    // Another environment of the same project has its own document.
    let staging = store.for_environment("staging");
    assert_eq!(
        staging.environment_permissions().await.unwrap(),
        EnvironmentPermissions::default()
    );

    let rendering_id = store
        .set_rendering(
            &Actor::System,
            "Ops",
            [(
                "orders".to_owned(),
                RenderingCollection {
                    scope: Some(json!({"field": "region", "operator": "equal", "value": "{{currentUser.tags.region}}"})),
                    ..RenderingCollection::default()
                },
            )]
            .into(),
            vec![json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count"})],
        )
        .await
        .unwrap();
    let rendering = PermissionSource::rendering(&store, rendering_id)
        .await
        .unwrap();
    assert_eq!(rendering.team.name, "Ops");
    assert!(rendering.collections["orders"].scope.is_some());
    assert_eq!(rendering.stats.len(), 1);
    assert!(matches!(
        PermissionSource::rendering(&store, rendering_id + 100).await,
        Err(Error::NotFound(_))
    ));

    // Every change above left one admin log entry, newest first.
    let logs = store.admin_logs(100).await.unwrap();
    let kinds: Vec<_> = logs
        .iter()
        .map(|l| (l.r#type.as_str(), l.resource.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("update", "team"),
            ("update", "environment"),
            ("update", "user-project"),
            ("add", "user-project"),
            ("add", "team"),
            ("add", "role"),
        ]
    );
    let update = &logs[2];
    assert_eq!(
        update.previous_value.as_ref().unwrap()["disabled"],
        json!(false)
    );
    assert_eq!(update.new_value.as_ref().unwrap()["disabled"], json!(true));
    assert_eq!(update.initiator, "forestAdmin");

    // A role that users hold cannot be removed.
    assert!(matches!(
        store.remove_role(&Actor::System, "Support").await,
        Err(Error::Conflict(_))
    ));
    store.close().await;
}

async fn approvals_are_decided_once(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = store(&db).await;
    let approval = store
        .create_approval(
            7,
            "req@acme.io",
            "orders",
            "Refund",
            &json!({"ids": ["1"], "values": {"amount": 3}}),
        )
        .await
        .unwrap();
    assert_eq!(approval.status, ApprovalStatus::Pending);
    let decided = store
        .decide_approval(
            approval.id,
            ApprovalStatus::Approved,
            8,
            "boss@acme.io",
            Some("ok"),
        )
        .await
        .unwrap();
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.decided_by_id, Some(8));
    let twice = store
        .decide_approval(
            approval.id,
            ApprovalStatus::Rejected,
            9,
            "other@acme.io",
            None,
        )
        .await;
    assert!(matches!(twice, Err(Error::Conflict(_))), "{twice:?}");
    assert_eq!(
        store
            .approvals(Some(ApprovalStatus::Pending))
            .await
            .unwrap()
            .len(),
        0
    );
    assert_eq!(store.approvals(None).await.unwrap().len(), 1);
    store.close().await;
}

async fn a_fresh_store_gets_a_first_admin(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = store(&db).await;
    let done = bootstrap::bootstrap(&store, "root@acme.io", None)
        .await
        .unwrap();
    let admin = done.first_admin.unwrap();
    assert!(admin.password.len() >= 20);
    assert!(done.granted_admin);
    let user = store.user_by_email("ROOT@acme.io").await.unwrap().unwrap();
    assert_eq!(user.permission_level, PermissionLevel::Admin);
    // The Admin role's rights are the `"*"` wildcard, not the names served at this start.
    let admin_role = user.role.as_ref().unwrap().id;
    let document = store.environment_document().await.unwrap();
    assert_eq!(
        serde_json::to_value(&document).unwrap()["collections"]["*"]["actions"]["*"]["triggerEnabled"],
        serde_json::json!({"roles": [admin_role]})
    );
    assert_eq!(
        document,
        bootstrap::full_rights(&canopy::platform::documents::Grant::Roles {
            roles: vec![admin_role]
        })
    );
    let hash = store.password_hash(user.id).await.unwrap().unwrap();
    assert!(canopy::platform::password::verify(&admin.password, &hash));
    // A second start changes nothing.
    let again = bootstrap::bootstrap(&store, "root@acme.io", None)
        .await
        .unwrap();
    assert!(again.first_admin.is_none() && !again.granted_admin);
    store.close().await;
}

/// A team's rendering is made with the team (its id known before anyone signs in), and
/// migration 0016 gives the teams of an older store theirs, in team order, for each environment
/// the store knows.
async fn teams_have_their_rendering_from_the_start(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = store(&db).await;
    let ops = store.create_team(&Actor::System, "Ops").await.unwrap();
    let sales = store.create_team(&Actor::System, "Sales").await.unwrap();
    let made = store.rendering_ids_by_team().await.unwrap();
    assert_eq!(made.len(), 2, "{made:?}");
    assert!(made[&ops.id] < made[&sales.id]);
    assert!(
        store
            .rendering_document(made[&ops.id])
            .await
            .unwrap()
            .is_some()
    );

    // An older store: teams without renderings, two environments with permissions.
    store
        .set_environment_document(&Actor::System, &EnvironmentPermissions::default())
        .await
        .unwrap();
    store
        .for_environment("staging")
        .set_environment_document(&Actor::System, &EnvironmentPermissions::default())
        .await
        .unwrap();
    sqlx::query("DELETE FROM renderings")
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 16")
        .execute(store.pool())
        .await
        .unwrap();
    store.close().await;
    let store = self::store(&db).await;
    for environment in ["production", "staging"] {
        let ids = store
            .for_environment(environment)
            .rendering_ids_by_team()
            .await
            .unwrap();
        assert_eq!(
            ids.keys().copied().collect::<Vec<_>>(),
            [ops.id, sales.id],
            "{environment}"
        );
        assert!(ids[&ops.id] < ids[&sales.id], "{environment}: {ids:?}");
    }
    store.close().await;
}

#[tokio::test]
async fn store_sqlite() {
    writes_are_logged_and_served_as_documents(Backend::Sqlite).await;
    approvals_are_decided_once(Backend::Sqlite).await;
    a_fresh_store_gets_a_first_admin(Backend::Sqlite).await;
    teams_have_their_rendering_from_the_start(Backend::Sqlite).await;
}

#[tokio::test]
async fn store_postgres() {
    writes_are_logged_and_served_as_documents(Backend::Postgres).await;
    approvals_are_decided_once(Backend::Postgres).await;
    a_fresh_store_gets_a_first_admin(Backend::Postgres).await;
    teams_have_their_rendering_from_the_start(Backend::Postgres).await;
}

/// Several instances starting at once on one PostgreSQL store migrate it once (sqlx's advisory
/// lock), and all of them open.
#[tokio::test]
async fn concurrent_starts_migrate_once_postgres() {
    let db = TestDb::new(Backend::Postgres).await;
    let opens = (0..4).map(|i| {
        let url = db.url.clone();
        tokio::spawn(async move { Store::open(&url, "acme", &format!("env{i}")).await })
    });
    for open in futures::future::join_all(opens).await {
        open.unwrap().unwrap();
    }
    let store = store(&db).await;
    let row: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM _sqlx_migrations")
        .fetch_one(store.pool())
        .await
        .unwrap();
    // Each migration once: as many rows as migration files.
    let files = std::fs::read_dir(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/migrations/postgres"),
    )
    .unwrap()
    .filter(|entry| {
        entry
            .as_ref()
            .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
    })
    .count();
    assert_eq!(row.0, i64::try_from(files).unwrap());
}
