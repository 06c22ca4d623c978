//! The set-up of the workflow engine tests: the shop fixture of `list` (user data on SQLite or
//! PostgreSQL) with a `Refund` action on orders and a `score` workflow step handler (closures),
//! a real Canopy store beside it (SQLite beside SQLite data, PostgreSQL beside PostgreSQL data)
//! holding users of four roles, the router over both, and the engine running over that state,
//! as `canopy serve` wires them.
//!
//! Roles and rights on `orders`: `Admin` everything; `Clerk` browse, read, edit, and `Refund`
//! with an approval; `Manager` browse, read, edit, and `Refund` (approves others' requests);
//! `Viewer` browse and read only. Clerks are in the team `Clerks`, whose scope on orders is
//! `status = new` (orders 2 and 5); the others in `Ops`, without scope.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::Router;
use axum::http::StatusCode;
use canopy::auth::{CachePolicy, PermissionLevel, Permissions, SessionClaims, SessionKey};
use canopy::config::RateLimitConfig;
use canopy::customizer::{Kind, WorkflowStepOutput, build_stack, closures};
use canopy::datasource::action::{ActionResult, ActionScope, FieldType, FormElement, FormField};
use canopy::http::ratelimit::RateLimits;
use canopy::http::{AppState, ApprovalSettings, WorkflowSteps, router};
use canopy::platform::documents::{EnvironmentPermissions, RenderingCollection};
use canopy::platform::{ActivityLog, Actor, NewUser, Store};
use canopy::workflows::engine::{Engine, EngineSettings, Run, StepRow, Wakeup};
use canopy::workflows::runs::{NewRun, Queued, RunState, TriggerKind};
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};

use crate::admin::call;
use crate::harness::{AUTH_SECRET, ENV_SECRET, on, state};
use crate::list::shop;

/// Where runs live for the fixture's project and environment.
pub(crate) const RUNS: &str = "/v1/project/acme/environment/production/workflow-runs";
/// Where approval requests live.
pub(crate) const APPROVALS: &str = "/v1/project/acme/environment/production/approval-requests";

/// A user of the fixture.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub id: i64,
    pub token: String,
}

pub(crate) struct Fixture {
    pub data: TestDb,
    state_db: TestDb,
    pub store: Store,
    pub app: Router,
    pub state: Arc<ArcSwap<AppState>>,
    pub wakeup: Wakeup,
    pub activity: ActivityLog,
    engines: Vec<Engine>,
    pub admin: User,
    pub clerk: User,
    pub manager: User,
    pub viewer: User,
    /// What each run of `Refund` saw: `<caller email> <ids> <reason>`.
    pub refunds: Arc<Mutex<Vec<String>>>,
    /// The calls of the `score` handler, and how many of them fail first (transient errors).
    pub score_calls: Arc<AtomicUsize>,
    pub score_failures: Arc<AtomicUsize>,
}

/// The engine's settings in the tests: short lease and poll, quick retries.
pub(crate) fn settings(backend: Backend, url: &str) -> EngineSettings {
    EngineSettings {
        workers: 2,
        step_timeout: Duration::from_secs(20),
        lease: Duration::from_secs(3),
        poll: Duration::from_millis(200),
        retry_base: Duration::from_millis(20),
        listen_url: (backend == Backend::Postgres).then(|| url.to_owned()),
    }
}

/// `Refund` (Bulk) with a `reason` field.
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
                ids.sort();
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

/// The environment's rights by role.
fn environment(admin: i64, clerk: i64, manager: i64, viewer: i64) -> EnvironmentPermissions {
    let roles = |ids: &[i64]| json!({"roles": ids});
    let orders = json!({
        "browseEnabled": roles(&[admin, clerk, manager, viewer]),
        "readEnabled": roles(&[admin, clerk, manager, viewer]),
        "editEnabled": roles(&[admin, clerk, manager]),
        "addEnabled": roles(&[admin, manager]),
        "deleteEnabled": roles(&[admin, manager]),
        "exportEnabled": roles(&[admin, manager]),
    });
    let all = json!({"browseEnabled": true, "readEnabled": true, "editEnabled": true,
        "addEnabled": true, "deleteEnabled": true, "exportEnabled": true});
    let refund = json!({
        "triggerEnabled": roles(&[admin, clerk, manager]),
        "triggerConditions": [],
        "approvalRequired": roles(&[clerk]),
        "approvalRequiredConditions": [],
        "userApprovalEnabled": roles(&[admin, manager]),
        "userApprovalConditions": [],
        "selfApprovalEnabled": roles(&[admin]),
    });
    serde_json::from_value(json!({"collections": {
        "orders": {"collection": orders, "actions": {"Refund": refund}},
        "customers": {"collection": all, "actions": {}},
        "countries": {"collection": all, "actions": {}},
        "order_lines": {"collection": all, "actions": {}},
    }}))
    .unwrap()
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
    let claims = SessionClaims::for_user(
        &created,
        &created.teams[0],
        store.rendering_id(team_id).await.unwrap(),
    );
    let token = SessionKey::new(AUTH_SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap();
    User {
        id: created.id,
        token,
    }
}

/// The fixture with user data and store on `backend`, the engine started.
pub(crate) async fn fixture(backend: Backend) -> Fixture {
    fixture_with(backend, true).await
}

/// The fixture; the engine started or not.
pub(crate) async fn fixture_with(backend: Backend, start: bool) -> Fixture {
    let (data, datasource) = shop(backend).await;
    let state_db = TestDb::new(backend).await;
    let store = Store::open(&state_db.url, "acme", "production")
        .await
        .unwrap();
    let mut ids = Vec::new();
    for role in ["Admin", "Clerk", "Manager", "Viewer"] {
        ids.push(store.create_role(&Actor::System, role).await.unwrap().id);
    }
    for team in ["Ops", "Clerks"] {
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
    let admin = user(
        &store,
        "admin@acme.io",
        "Admin",
        "Ops",
        PermissionLevel::Admin,
    )
    .await;
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
    let viewer = user(
        &store,
        "viewer@acme.io",
        "Viewer",
        "Ops",
        PermissionLevel::User,
    )
    .await;
    store
        .set_environment_document(&Actor::System, &environment(ids[0], ids[1], ids[2], ids[3]))
        .await
        .unwrap();

    let refunds = Arc::new(Mutex::new(Vec::new()));
    let stack = build_stack(Arc::new(datasource), vec![on("orders", refund(&refunds))]).unwrap();
    let score_calls = Arc::new(AtomicUsize::new(0));
    let score_failures = Arc::new(AtomicUsize::new(0));
    let (calls, failures) = (Arc::clone(&score_calls), Arc::clone(&score_failures));
    let score = closures::workflow_step(move |caller, input| {
        calls.fetch_add(1, Ordering::SeqCst);
        if failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(canopy::datasource::Error::Database(
                sqlx::Error::PoolTimedOut,
            ));
        }
        let mut values = serde_json::Map::new();
        values.insert("score".to_owned(), json!(42));
        values.insert("by".to_owned(), json!(caller.email));
        values.insert("record".to_owned(), json!(input.record_id));
        values.insert("settings".to_owned(), input.settings.clone());
        let option = input
            .settings
            .get("go")
            .and_then(Json::as_str)
            .map(str::to_owned);
        Ok(WorkflowStepOutput { option, values })
    });
    let mut steps = WorkflowSteps::new();
    steps.insert(("test-plugin".to_owned(), "score".to_owned()), score);

    let wakeup = Wakeup::new();
    wakeup.announce(&store);
    let activity = ActivityLog::start(store.clone());
    let mut app_state = state(stack);
    app_state.permissions = Arc::new(Permissions::new(
        Arc::new(store.clone()),
        CachePolicy::new(true, Duration::from_secs(900)),
    ));
    app_state.store = Some(store.clone());
    app_state.approvals = ApprovalSettings::new(ENV_SECRET, 500);
    app_state.activity = activity.clone();
    app_state.workflow_steps = Arc::new(steps);
    app_state.workflow_wakeup = wakeup.clone();
    let many = NonZeroU32::new(100_000).unwrap();
    app_state.rate_limits = Arc::new(RateLimits::new(&RateLimitConfig {
        per_minute: many,
        burst: many,
        per_minute_per_ip: many,
    }));
    let app_state = Arc::new(app_state);
    let app = router(Arc::clone(&app_state));
    let state = Arc::new(ArcSwap::new(app_state));
    let mut fixture = Fixture {
        data,
        state_db,
        store,
        app,
        state,
        wakeup,
        activity,
        engines: Vec::new(),
        admin,
        clerk,
        manager,
        viewer,
        refunds,
        score_calls,
        score_failures,
    };
    if start {
        fixture.start(backend);
    }
    fixture
}

impl Fixture {
    /// Starts an engine over the fixture's state (a second call starts a second one, as a
    /// second instance sharing the store would run).
    pub(crate) fn start(&mut self, backend: Backend) {
        self.start_with(settings(backend, &self.state_db.url));
    }

    pub(crate) fn start_with(&mut self, settings: EngineSettings) {
        self.engines.push(Engine::start(
            self.store.clone(),
            Arc::clone(&self.state),
            self.wakeup.clone(),
            settings,
        ));
    }

    /// The store's URL (a second engine's listener).
    pub(crate) fn state_url(&self) -> &str {
        &self.state_db.url
    }

    /// Stops every engine gracefully.
    pub(crate) async fn stop(&mut self) {
        for engine in self.engines.drain(..) {
            engine.stop().await;
        }
    }

    /// Creates a workflow from its definition (version 1, active); its id and version id.
    pub(crate) async fn workflow(&self, definition: Json) -> (String, String) {
        insert_workflow(&self.store, &definition).await
    }

    /// Queues a run of `workflow` on an order as `user`, and wakes the engine.
    pub(crate) async fn queue(
        &self,
        workflow: &(String, String),
        record: &str,
        user: &User,
    ) -> String {
        self.queue_as(workflow, "orders", record, user.id, TriggerKind::Manual)
            .await
    }

    pub(crate) async fn queue_as(
        &self,
        workflow: &(String, String),
        collection: &str,
        record: &str,
        user_id: i64,
        trigger: TriggerKind,
    ) -> String {
        let queued = self
            .store
            .queue_run(&NewRun::new(
                &workflow.0,
                &workflow.1,
                collection,
                record,
                trigger,
                user_id,
            ))
            .await
            .unwrap();
        let Queued::Created(id) = queued else {
            panic!("a run is already ongoing: {queued:?}")
        };
        self.wakeup.notify();
        id
    }

    /// The run once it is neither queued nor running (it waits or ended).
    pub(crate) async fn settled(&self, id: &str) -> Run {
        settled(&self.store, id).await
    }

    pub(crate) async fn steps(&self, id: &str) -> Vec<StepRow> {
        self.store.workflow_run_steps(id).await.unwrap()
    }

    /// One `/v1` call as `user`.
    pub(crate) async fn call(
        &self,
        method: &str,
        uri: &str,
        user: &User,
        body: Option<&Json>,
    ) -> (StatusCode, Json) {
        call(&self.app, method, uri, Some(&user.token), body).await
    }

    /// A column of an order, as text (`None` for NULL).
    pub(crate) async fn order(&self, id: i64, column: &str) -> Option<String> {
        column_of(&self.data.url, "orders", id, column).await
    }

    /// The activity entries written so far: (action, origin, user email, status, label).
    pub(crate) async fn activity(&self) -> Vec<(String, String, String, String, String)> {
        self.activity.flush().await;
        sqlx::query_as(
            "SELECT action, origin, user_email, status, COALESCE(label, '') FROM activity_logs \
             ORDER BY created_at, id",
        )
        .fetch_all(self.store.pool())
        .await
        .unwrap()
    }
}

/// Inserts a workflow and its first version (what `wfdef`'s store functions do), active.
pub(crate) async fn insert_workflow(store: &Store, definition: &Json) -> (String, String) {
    let id = uuid::Uuid::new_v4().to_string();
    let version = uuid::Uuid::new_v4().to_string();
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "INSERT INTO workflows (id, project, environment, name, collection_name, active, \
         latest_version, source, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 1, 1, 'api', $6, $6)",
    )
    .bind(&id)
    .bind(store.project())
    .bind(store.environment())
    .bind(definition["name"].as_str().unwrap())
    .bind(definition["collection"].as_str().unwrap())
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, \
         created_at) VALUES ($1, $2, 1, $3, $4, $5)",
    )
    .bind(&version)
    .bind(&id)
    .bind(definition.to_string())
    .bind(format!("{:x}", definition.to_string().len()))
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();
    (id, version)
}

/// The run once it is neither queued nor running; panics after a minute.
pub(crate) async fn settled(store: &Store, id: &str) -> Run {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = store.workflow_run(id).await.unwrap().unwrap();
        if !matches!(run.state, RunState::Queued | RunState::Running) {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "run {id} still {} after a minute",
            run.state.as_str()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A column of a row of the user data, as text.
pub(crate) async fn column_of(url: &str, table: &str, id: i64, column: &str) -> Option<String> {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let sql = format!("SELECT CAST({column} AS TEXT) FROM {table} WHERE id = $1");
    let value: Option<String> = sqlx::query_scalar(&sql)
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    value
}
