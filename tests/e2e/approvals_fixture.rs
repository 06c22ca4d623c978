//! The set-up of the action permission and approval tests: the shop fixture of `list` (user
//! data on SQLite, PostgreSQL or MariaDB) with a `Refund` action on orders, a real Canopy store
//! (SQLite for SQLite data, PostgreSQL otherwise) holding users of four roles, and the router
//! with the permission service over that store, as `canopy serve` builds it.
//!
//! Roles: `Clerk` (may trigger; approval required), `Manager` (may approve), `Boss` (may
//! approve and self-approve), `Viewer` (nothing). Clerks are in the team `Clerks`, whose scope
//! on orders is `status = new` (orders 2 and 5); the others in `Ops`, without scope.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use canopy::auth::tokens::TokenVerifier;
use canopy::auth::{CachePolicy, PermissionLevel, Permissions, SessionClaims, SessionKey};
use canopy::customizer::{Kind, build_stack, closures};
use canopy::datasource::action::{ActionResult, ActionScope, FieldType, FormElement, FormField};
use canopy::http::{ApprovalSettings, router};
use canopy::platform::documents::{EnvironmentPermissions, RenderingCollection};
use canopy::platform::{Actor, NewToken, NewUser, Scope, Store};
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};

use crate::harness::{AUTH_SECRET, ENV_SECRET, on, state};
use crate::list::shop;

/// The path of the `Refund` action (first action of orders).
pub(crate) const REFUND: &str = "/forest/_actions/orders/0/refund?timezone=UTC";
/// Where approval requests live for the fixture's project and environment.
pub(crate) const APPROVALS: &str = "/v1/project/acme/environment/production/approval-requests";

/// A user of the fixture: id and session token.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub id: i64,
    pub token: String,
}

/// The role ids of the fixture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Roles {
    pub clerk: i64,
    pub manager: i64,
    pub boss: i64,
}

pub(crate) struct Fixture {
    _data: TestDb,
    _state: TestDb,
    pub store: Store,
    pub app: Router,
    pub roles: Roles,
    pub clerk: User,
    pub manager: User,
    pub boss: User,
    pub viewer: User,
    /// What each run of `Refund` saw: `<caller email> <sorted ids> <reason>`.
    pub runs: Arc<Mutex<Vec<String>>>,
}

/// The store of the tests whose user data is on `data`: SQLite beside SQLite data, PostgreSQL
/// otherwise (so both stores run, and MariaDB data meets a PostgreSQL store).
pub(crate) fn store_backend(data: Backend) -> Backend {
    match data {
        Backend::Sqlite => Backend::Sqlite,
        Backend::Postgres | Backend::MySql => Backend::Postgres,
    }
}

/// `Refund` (Bulk) with a `reason` field: records who ran it on which ids with which reason.
fn refund(runs: &Arc<Mutex<Vec<String>>>) -> Kind {
    let runs = Arc::clone(runs);
    let handler = closures::action(
        |_, _| {
            Ok(vec![FormElement::Field(FormField::new(
                "reason",
                FieldType::String,
            ))])
        },
        move |caller, ctx| {
            let runs = Arc::clone(&runs);
            async move {
                let mut ids = ctx.get_record_ids(&caller).await?;
                ids.sort_by_key(|id| id.parse::<i64>().unwrap_or(0));
                let reason = ctx
                    .form_values
                    .get("reason")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_owned();
                runs.lock()
                    .unwrap()
                    .push(format!("{} {} {reason}", caller.email, ids.join(",")));
                Ok(ActionResult::success(format!("Refunded {}", ids.len())))
            }
        },
    );
    Kind::Action {
        name: "Refund".to_owned(),
        scope: ActionScope::Bulk,
        generate_file: false,
        description: None,
        submit_button_label: None,
        static_form: None,
        handler,
    }
}

/// Every collection right to everyone, and `Refund`'s rights as given.
pub(crate) fn environment(refund: &Json) -> EnvironmentPermissions {
    let all = json!({"browseEnabled": true, "readEnabled": true, "editEnabled": true,
        "addEnabled": true, "deleteEnabled": true, "exportEnabled": true});
    serde_json::from_value(json!({"collections": {
        "orders": {"collection": all, "actions": {"Refund": refund}},
        "customers": {"collection": all, "actions": {}},
    }}))
    .unwrap()
}

/// `Refund`'s default rights: clerks, managers and bosses trigger; clerks need an approval;
/// managers and bosses approve; bosses self-approve.
pub(crate) fn refund_rights(roles: Roles) -> Json {
    json!({
        "triggerEnabled": {"roles": [roles.clerk, roles.manager, roles.boss]},
        "triggerConditions": [],
        "approvalRequired": {"roles": [roles.clerk]},
        "approvalRequiredConditions": [],
        "userApprovalEnabled": {"roles": [roles.manager, roles.boss]},
        "userApprovalConditions": [],
        "selfApprovalEnabled": {"roles": [roles.boss]},
    })
}

/// Replaces `Refund`'s rights (takes effect on the next request).
pub(crate) async fn set_refund_rights(store: &Store, rights: &Json) {
    store
        .set_environment_document(&Actor::System, &environment(rights))
        .await
        .unwrap();
}

async fn user(store: &Store, email: &str, role: &str, team: &str, level: PermissionLevel) -> User {
    let created = store
        .create_user(
            &Actor::System,
            NewUser {
                email: email.to_owned(),
                first_name: role.to_owned(),
                last_name: "Test".to_owned(),
                permission_level: level,
                role: Some(role.to_owned()),
                teams: vec![team.to_owned()],
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let team_id = created.teams[0].id;
    let claims = SessionClaims {
        id: created.id,
        email: email.to_owned(),
        first_name: role.to_owned(),
        last_name: "Test".to_owned(),
        team: team.to_owned(),
        team_id: Some(team_id),
        role: role.to_owned(),
        role_id: created.role.as_ref().map(|r| r.id),
        permission_level: level,
        rendering_id: store.rendering_id(team_id).await.unwrap(),
        tags: Default::default(),
        iat: 0,
        exp: 0,
    };
    let token = SessionKey::new(AUTH_SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap();
    User {
        id: created.id,
        token,
    }
}

/// The fixture over user data on `backend`, with `maxRecordsForApproval` = `max_records`.
pub(crate) async fn fixture(backend: Backend, max_records: u64) -> Fixture {
    let (data, datasource) = shop(backend).await;
    let state_db = TestDb::new(store_backend(backend)).await;
    let store = Store::open(&state_db.url, "acme", "production")
        .await
        .unwrap();
    let role = |name: &'static str| {
        let store = store.clone();
        async move { store.create_role(&Actor::System, name).await.unwrap().id }
    };
    let roles = Roles {
        clerk: role("Clerk").await,
        manager: role("Manager").await,
        boss: role("Boss").await,
    };
    // Viewers have no right on `Refund`.
    role("Viewer").await;
    for team in ["Clerks", "Ops"] {
        store.create_team(&Actor::System, team).await.unwrap();
    }
    let scope = RenderingCollection {
        scope: Some(json!({"field": "status", "operator": "equal", "value": "new"})),
        ..RenderingCollection::default()
    };
    store
        .set_rendering(
            &Actor::System,
            "Clerks",
            [("orders".to_owned(), scope)].into(),
            Vec::new(),
        )
        .await
        .unwrap();
    let clerk = user(
        &store,
        "clerk@acme.io",
        "Clerk",
        "Clerks",
        PermissionLevel::User,
    )
    .await;
    let manager = user(
        &store,
        "manager@acme.io",
        "Manager",
        "Ops",
        PermissionLevel::User,
    )
    .await;
    let boss = user(
        &store,
        "boss@acme.io",
        "Boss",
        "Ops",
        PermissionLevel::Editor,
    )
    .await;
    let viewer = user(
        &store,
        "viewer@acme.io",
        "Viewer",
        "Ops",
        PermissionLevel::User,
    )
    .await;
    set_refund_rights(&store, &refund_rights(roles)).await;

    let runs = Arc::new(Mutex::new(Vec::new()));
    let stack = build_stack(Arc::new(datasource), vec![on("orders", refund(&runs))]).unwrap();
    let mut state = state(stack);
    state.permissions = Arc::new(Permissions::new(
        Arc::new(store.clone()),
        CachePolicy::new(true, Duration::from_secs(900)),
    ));
    state.store = Some(store.clone());
    state.tokens = Some(Arc::new(TokenVerifier::new(store.clone())));
    state.approvals = ApprovalSettings::new(ENV_SECRET, max_records);
    Fixture {
        _data: data,
        _state: state_db,
        store,
        app: router(Arc::new(state)),
        roles,
        clerk,
        manager,
        boss,
        viewer,
        runs,
    }
}

/// A request with a JSON body and `user`'s session token.
pub(crate) fn request(method: &str, uri: &str, user: &User, body: &Json) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", user.token))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The body of `Refund` on these order ids with this reason.
pub(crate) fn refund_body(ids: &[&str], reason: &str) -> Json {
    json!({"data": {"type": "custom-action-requests", "attributes": {
        "collection_name": "orders",
        "ids": ids,
        "all_records": false,
        "all_records_ids_excluded": [],
        "values": {"reason": reason},
        "smart_action_id": "orders-Refund",
    }}})
}

/// The agent's error envelope with `data`.
pub(crate) fn envelope_with_data(name: &str, detail: &str, status: u16, data: &Json) -> Json {
    json!({"errors": [{"name": name, "detail": detail, "status": status, "data": data}]})
}

impl Fixture {
    /// `user` presenting one of their application tokens with these scopes (made in the store,
    /// as `canopy tokens create` does).
    pub(crate) async fn with_token(&self, user: &User, scopes: &[Scope]) -> User {
        let (_, secret) = self
            .store
            .create_token(
                &Actor::System,
                user.id,
                NewToken {
                    name: format!("{scopes:?}"),
                    scopes: scopes.to_vec(),
                    expires_at: None,
                },
            )
            .await
            .unwrap();
        User {
            id: user.id,
            token: secret.expose().to_owned(),
        }
    }

    /// The runs of `Refund` so far.
    pub(crate) fn runs(&self) -> Vec<String> {
        self.runs.lock().unwrap().clone()
    }
}
