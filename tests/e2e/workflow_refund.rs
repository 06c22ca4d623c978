//! The shop's refund workflow as `canopy demo` serves it: the demo database, its users, the shop
//! plugin (with its `Refund` action), the workflows folder holding `examples/shop/workflows`, and
//! the demo's webhook and tokens, served over real HTTP with the engine running. A curl-like
//! POST to the printed webhook URL refunds a paid order through the plugin's action, and a call
//! on an order that was never paid ends the run `failed` with the workflow's message.

use std::path::Path;
use std::time::{Duration, Instant};

use canopy::config::{Config, ServeArgs};
use serde_json::Value as Json;

const AUTH_SECRET: &str = "refund-demo-test-auth-secret";
const ENV_SECRET: &str = "5555555555555555555555555555555555555555555555555555555555555555";
const RUNS: &str = "/v1/project/canopy/environment/production/workflow-runs";

/// Serves the demo's setup from `dir` on a loopback port; returns the origin, the store and the
/// task serving it.
async fn serve_demo(
    dir: &Path,
) -> (
    String,
    canopy::platform::Store,
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(
        Path::new(env!("CANOPY_TEST_PLUGINS")).join("shop_plugin.wasm"),
        plugins.join("shop.wasm"),
    )
    .unwrap();
    let database_url = canopy::app::seed_demo(&dir.join("shop.sqlite"))
        .await
        .unwrap();
    let (data_dir, permissions_file) =
        canopy::app::admin::demo_permissions_file(&dir.join("demo-store")).unwrap();
    let workflows_dir = canopy::app::admin::demo_workflows_dir(&dir.join("workflows")).unwrap();
    let args = ServeArgs {
        database_url: Some(database_url),
        data_dir: Some(data_dir),
        permissions_file: Some(permissions_file),
        auth_secret: Some(AUTH_SECRET.to_owned()),
        env_secret: Some(ENV_SECRET.to_owned()),
        listen: Some("127.0.0.1:0".to_owned()),
        schema_path: Some(dir.join(".forestadmin-schema.json")),
        plugin_dir: Some(plugins),
        workflows_dir: Some(workflows_dir),
        ..ServeArgs::default()
    };
    let (config, _warnings) = Config::load(args).unwrap();
    let ready = canopy::app::prepare(config).await.unwrap();
    let store = ready.store().clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        ready
            .serve(
                listener,
                async {
                    let _ = stopped.await;
                },
                canopy::app::ServeOptions::default(),
            )
            .await
            .unwrap();
    });
    (origin, store, task, stop)
}

/// The run once it is neither queued nor running; panics after a minute.
async fn settled(client: &reqwest::Client, origin: &str, session: &str, location: &str) -> Json {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run: Json = client
            .get(format!("{origin}{location}"))
            .bearer_auth(session)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let state = run["state"].as_str().unwrap_or_default().to_owned();
        if !["queued", "running"].contains(&state.as_str()) {
            return run;
        }
        assert!(Instant::now() < deadline, "the run is still {state}: {run}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An order's status, read through `/forest` as the demo admin.
async fn status(client: &reqwest::Client, origin: &str, session: &str, id: i64) -> String {
    let body: Json = client
        .get(format!("{origin}/forest/orders/{id}?timezone=UTC"))
        .bearer_auth(session)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["data"]["attributes"]["status"]
        .as_str()
        .unwrap_or_else(|| panic!("order {id}: {body}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refund_workflow_runs_from_a_curl_on_the_demo() {
    let dir = std::env::temp_dir().join(format!("canopy-refund-{}", uuid::Uuid::new_v4()));
    let (origin, store, task, stop) = serve_demo(&dir).await;
    let (url, webhook_token) = canopy::app::admin::demo_webhook(&store, AUTH_SECRET, &origin)
        .await
        .unwrap();
    let session = canopy::app::admin::demo_session_token(&store, AUTH_SECRET)
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let trigger = |record: i64| {
        client
            .post(&url)
            .bearer_auth(&webhook_token)
            .header("content-type", "application/json")
            .body(format!(r#"{{"record_id": {record}}}"#))
            .send()
    };

    // Order 1 is paid (the seed): the demo's curl refunds it.
    assert_eq!(status(&client, &origin, &session, 1).await, "paid");
    let response = trigger(1).await.unwrap();
    assert_eq!(response.status().as_u16(), 202);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let body: Json = response.json().await.unwrap();
    assert_eq!(
        location,
        format!("{RUNS}/{}", body["runId"].as_str().unwrap())
    );
    let run = settled(&client, &origin, &session, &location).await;
    assert_eq!(run["state"], "succeeded", "{run}");
    assert_eq!(run["trigger"], "webhook");
    let steps: Vec<&str> = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| step["key"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(steps, ["read", "check", "refund", "done"], "{run}");
    let refund = &run["steps"][2];
    assert_eq!(refund["status"], "succeeded", "{run}");
    assert!(
        refund["output"].to_string().contains("Order #1 refunded"),
        "{run}"
    );
    assert_eq!(status(&client, &origin, &session, 1).await, "refunded");

    // Order 5 was never paid: the decision ends the run `failed` with the workflow's message,
    // and the order is unchanged.
    assert_eq!(status(&client, &origin, &session, 5).await, "pending");
    let response = trigger(5).await.unwrap();
    assert_eq!(response.status().as_u16(), 202);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let run = settled(&client, &origin, &session, &location).await;
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(
        run["errorMessage"], "Only a paid, shipped or delivered order can be refunded",
        "{run}"
    );
    assert_eq!(status(&client, &origin, &session, 5).await, "pending");

    // The webhook's token may trigger and nothing else: it cannot read the runs.
    let refused = client
        .get(format!("{origin}{RUNS}"))
        .bearer_auth(&webhook_token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403);

    let _ = stop.send(());
    task.await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
