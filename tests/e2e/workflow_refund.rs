//! The shop's refund workflow as `canopy demo` serves it: the demo database, its users, the shop
//! plugin (with its `Refund` action), the workflows folder holding `examples/shop/workflows`, and
//! the demo's webhook and tokens, served over real HTTP with the engine running. A curl-like
//! POST to the printed webhook URL refunds a paid order through the plugin's action, and a call
//! on an order that was never paid ends the run `failed` with the workflow's message.

use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::mcp::AUTH_SECRET;

const RUNS: &str = "/v1/project/canopy/environment/production/workflow-runs";

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
    // The demo's setup (crate::mcp::Demo), served over HTTP with the engine running.
    let demo = crate::mcp::Demo::start(|_| {}).await;
    let (origin, store) = (demo.origin.clone(), demo.store.clone());
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

    demo.stop().await;
}
