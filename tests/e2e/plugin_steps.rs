//! Workflow-step handlers of real plugins (tests/plugins/steps, built against
//! `canopy:plugin@0.2.0` with the SDK) as the workflow engine reaches them: a served generation
//! (`Served::start` with a plugin directory) fills `AppState::workflow_steps` by (plugin file
//! name, handler name), and a step is one `WorkflowStepHandler::run` with the run's user, its
//! collection and record. No engine is needed: these tests call the handlers themselves.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use canopy::app::Served;
use canopy::config::{Config, ServeArgs};
use canopy::customizer::{Context, WorkflowStepHandler, WorkflowStepInput, WorkflowStepOutput};
use canopy::datasource::{Caller, DataSource, Error};
use canopy::http::AppState;
use canopy::http::reload::Reload as _;
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::{Value as Json, json};

use crate::admin::TempDir;
use crate::harness::{AUTH_SECRET, ENV_SECRET};
use crate::plugins::plugin_dir;

/// A served generation over the shop fixture (data on `backend`, Canopy's store on SQLite) with
/// the given plugins, and what keeps it alive.
struct Env {
    served: Arc<Served>,
    plugins: PathBuf,
    _dir: TempDir,
    _data: TestDb,
    _state: TestDb,
}

impl Env {
    fn state(&self) -> Arc<AppState> {
        self.served.state().load_full()
    }

    fn step(&self, plugin: &str, handler: &str) -> Arc<dyn WorkflowStepHandler> {
        let state = self.state();
        state
            .workflow_steps
            .get(&(plugin.to_owned(), handler.to_owned()))
            .cloned()
            .unwrap_or_else(|| panic!("no workflow step {plugin}/{handler}"))
    }

    /// Runs `plugin`/`handler` on record `record_id` of `collection`, as the engine would.
    async fn run(
        &self,
        (plugin, handler): (&str, &str),
        collection: &str,
        record_id: &str,
        context: Json,
        settings: Json,
    ) -> Result<WorkflowStepOutput, Error> {
        let state = self.state();
        let ctx = Context {
            collection: Some(collection.to_owned()),
            datasource: Arc::clone(&state.datasource),
        };
        let input = WorkflowStepInput {
            collection: collection.to_owned(),
            record_id: record_id.to_owned(),
            context,
            settings,
        };
        self.step(plugin, handler)
            .run(&run_user(&self.served).await, &ctx, &input)
            .await
    }
}

/// The run's user, as the engine builds it from `workflow_runs.user_id`: a user of the store
/// (the first admin), in their team's rendering. A plugin's reads run under the caller's scopes,
/// so the caller must be a user the permission documents know, as every run's user is.
async fn run_user(served: &Served) -> Caller {
    let store = &served.platform().store;
    let user = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .expect("the first admin");
    let mut caller = canopy_e2e::caller();
    caller.id = user.id;
    caller.email = user.email.clone();
    if let Some(team) = user.teams.first() {
        caller.rendering_id = store.rendering_id(team.id).await.unwrap();
    }
    caller
}

async fn serve(backend: Backend, plugins: &[(&str, Option<&str>)]) -> Result<Env, String> {
    let (data, datasource) = crate::list::shop(backend).await;
    let state = TestDb::new(Backend::Sqlite).await;
    let dir = TempDir::new();
    let plugins = plugin_dir(plugins);
    let args = ServeArgs {
        database_url: Some(data.url.clone()),
        auth_secret: Some(AUTH_SECRET.to_owned()),
        env_secret: Some(ENV_SECRET.to_owned()),
        schema_path: Some(dir.0.join(".forestadmin-schema.json")),
        state_url: Some(state.url.clone()),
        project: Some("acme".to_owned()),
        ..ServeArgs::default()
    };
    let mut config = Config::load(args).unwrap().0;
    config.plugin_dir = Some(plugins.clone());
    let base: Arc<dyn DataSource> = Arc::new(datasource);
    let served = Served::start(config, base)
        .await
        .map_err(|e| format!("{e:#}"))?;
    Ok(Env {
        served: Arc::new(served),
        plugins,
        _dir: dir,
        _data: data,
        _state: state,
    })
}

fn plugin_message(e: &Error) -> String {
    match e {
        Error::Plugin(m) => m.clone(),
        other => panic!("expected a plugin error, got {other:?}"),
    }
}

/// `review` reads the order through the host's `collections` interface (ids and decimals in
/// each backend's wire form) and decides on it with the step's settings.
async fn a_plugin_step_reads_the_run_record_through_the_host_and_decides(backend: Backend) {
    let env = serve(backend, &[("steps", None)]).await.unwrap();
    let review = ("steps", "review");
    // Order 1: paid, 10.50, under the default limit of 15.
    let out = env
        .run(review, "orders", "1", json!({}), Json::Null)
        .await
        .unwrap();
    assert_eq!(out.option.as_deref(), Some("refund"));
    assert_eq!(
        Json::Object(out.values),
        json!({"amount": 10.5, "status": "paid"})
    );
    // Order 2: 20.00 but not paid.
    let out = env
        .run(review, "orders", "2", json!({}), Json::Null)
        .await
        .unwrap();
    assert_eq!(out.option.as_deref(), Some("escalate"));
    assert_eq!(out.values["status"], json!("new"));
    // Order 3: paid, 5.25: refunded under the default limit, escalated over `limit = 5`.
    let out = env
        .run(review, "orders", "3", json!({}), Json::Null)
        .await
        .unwrap();
    assert_eq!(out.option.as_deref(), Some("refund"));
    let out = env
        .run(review, "orders", "3", json!({}), json!({"limit": 5}))
        .await
        .unwrap();
    assert_eq!(out.option.as_deref(), Some("escalate"));
    assert_eq!(out.values["amount"], json!(5.25));
}

/// `echo` answers what crossed: the packed composite id, the run's context and settings, the
/// run's user and collection, and the record read back by that id.
async fn a_plugin_step_receives_its_input_and_reads_a_composite_record(backend: Backend) {
    let env = serve(backend, &[("steps", None)]).await.unwrap();
    let context = json!({"read": {"status": "paid"}, "check": {"ok": true}});
    let settings = json!({"fields": ["qty", "line_no"], "note": "é ✓"});
    let out = env
        .run(
            ("steps", "echo"),
            "order_lines",
            "1|2",
            context.clone(),
            settings.clone(),
        )
        .await
        .unwrap();
    assert_eq!(out.option, None);
    assert_eq!(
        Json::Object(out.values),
        json!({
            "recordId": "1|2",
            "context": context,
            "settings": settings,
            "caller": "admin@canopy.local",
            "collection": "order_lines",
            "record": {"qty": 1, "line_no": 2},
        })
    );
}

on_all_backends!(
    a_plugin_step_reads_the_run_record_through_the_host_and_decides,
    a_plugin_step_receives_its_input_and_reads_a_composite_record,
);

/// Limits small enough for the slow step to hit its deadline quickly, and the bomb its memory.
const LIMITS: &str = "[limits]\nworkflow_step_ms = 300\nmemory_mb = 32\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_panicking_slow_or_greedy_step_fails_cleanly_and_the_plugin_keeps_serving() {
    let env = serve(Backend::Sqlite, &[("steps", Some(LIMITS))])
        .await
        .unwrap();
    let run = |handler: &'static str, id: &'static str| {
        env.run(("steps", handler), "orders", id, json!({}), Json::Null)
    };
    // A guest error is the step's own error, unchanged.
    let e = run("refuses", "1").await.unwrap_err();
    assert!(
        matches!(e, Error::Validation(ref m) if m == "the step refuses this record"),
        "{e:?}"
    );
    // A panic is an error naming the plugin, the call and the panic.
    let message = plugin_message(&run("panics", "1").await.unwrap_err());
    assert!(
        message.contains("Plugin `steps`")
            && message.contains("workflow-step")
            && message.contains("panicked on purpose"),
        "{message}"
    );
    // A step that never ends is interrupted at its limit.
    let message = plugin_message(&run("loops", "1").await.unwrap_err());
    assert!(
        message.contains("Plugin `steps`") && message.contains("time limit of 300 ms"),
        "{message}"
    );
    // A step that allocates without end is stopped at the memory limit.
    let message = plugin_message(&run("bomb", "1").await.unwrap_err());
    assert!(
        message.contains("Plugin `steps`") && message.contains("memory limit of 32 MiB"),
        "{message}"
    );
    // A record that does not exist: the step's read fails, the run's step with it.
    let e = run("review", "999").await.unwrap_err();
    assert!(
        matches!(e, Error::Unprocessable(ref m) if m.contains("record `999` of `orders` not found")),
        "{e:?}"
    );
    // The host keeps serving the plugin.
    let out = run("review", "1").await.unwrap();
    assert_eq!(out.option.as_deref(), Some("refund"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_steps_are_keyed_by_the_plugin_file_name_and_the_handler_name() {
    // The same component under two names, beside a 0.2.0 plugin (whose step crosses 0.2.0's
    // types; `plugins.rs` checks that a 0.1.0 plugin declares none).
    let env = serve(Backend::Sqlite, &[("steps", None), ("legacy2", None)])
        .await
        .unwrap();
    std::fs::copy(
        env.plugins.join("steps.wasm"),
        env.plugins.join("scoring.wasm"),
    )
    .unwrap();
    env.served.reload().await.unwrap();
    let state = env.state();
    let keys: BTreeSet<(String, String)> = state.workflow_steps.keys().cloned().collect();
    let expected: BTreeSet<(String, String)> = ["scoring", "steps"]
        .into_iter()
        .flat_map(|p| {
            ["bomb", "echo", "loops", "panics", "refuses", "review"]
                .map(|h| (p.to_owned(), h.to_owned()))
        })
        .chain([("legacy2".to_owned(), "stamp".to_owned())])
        .collect();
    assert_eq!(keys, expected);
    let out = env
        .run(("scoring", "review"), "orders", "1", json!({}), Json::Null)
        .await
        .unwrap();
    assert_eq!(out.option.as_deref(), Some("refund"));
    let out = env
        .run(("legacy2", "stamp"), "orders", "1", json!({}), Json::Null)
        .await
        .unwrap();
    assert_eq!(out.option, None);
    assert_eq!(
        Json::Object(out.values),
        json!({"built": "0.2.0", "record": "1"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_declared_twice_by_two_applications_fails_the_load_naming_plugin_and_step() {
    let twice = "[[use]]\ncollection = \"orders\"\n[[use]]\ncollection = \"customers\"\n";
    let Err(message) = serve(Backend::Sqlite, &[("steps", Some(twice))]).await else {
        panic!("a plugin declaring its steps twice loaded")
    };
    assert!(
        message.contains("plugin `steps` declares the workflow step `")
            && message.contains("more than once"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_swaps_the_workflow_steps_and_a_step_in_hand_still_runs() {
    let env = serve(Backend::Sqlite, &[("steps", None)]).await.unwrap();
    let held = env.step("steps", "review");
    std::fs::remove_file(env.plugins.join("steps.wasm")).unwrap();
    env.served.reload().await.unwrap();
    assert!(env.state().workflow_steps.is_empty());
    // A run that took the handler before the swap finishes its step on the old generation.
    let state = env.state();
    let ctx = Context {
        collection: Some("orders".to_owned()),
        datasource: Arc::clone(&state.datasource),
    };
    let input = WorkflowStepInput {
        collection: "orders".to_owned(),
        record_id: "1".to_owned(),
        context: json!({}),
        settings: Json::Null,
    };
    let out = held
        .run(&run_user(&env.served).await, &ctx, &input)
        .await
        .unwrap();
    assert_eq!(out.option.as_deref(), Some("refund"));
}
