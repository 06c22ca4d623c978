//! The runs API (`/v1/project/{p}/environment/{e}/workflow-runs`) on SQLite and PostgreSQL
//! stores: the listing's filters, order and `hasMore`; one run with its steps; what a user who
//! is not the run's sees (runs on collections they browse, values only of records they may
//! read); bad parameters and unknown paths in the API's error shape.

use axum::http::StatusCode;
use canopy::workflows::runs::{RunState, TriggerKind};
use canopy_e2e::Backend;
use serde_json::json;

use crate::admin::{error, on_store_backends};
use crate::workflow_fixture::{RUNS, fixture};

on_store_backends!(
    the_listing_filters_and_pages_runs_newest_first,
    one_run_shows_its_steps_and_hides_values_from_who_may_not_read_them,
    bad_parameters_and_unknown_runs_are_refused_in_the_api_shape,
);

async fn the_listing_filters_and_pages_runs_newest_first(backend: Backend) {
    let fx = fixture(backend).await;
    let read = fx
        .workflow(json!({"name": "read", "collection": "orders",
            "steps": [{"key": "read", "type": "get-data", "fields": ["status"]}]}))
        .await;
    let wait = fx
        .workflow(json!({"name": "wait", "collection": "orders",
            "steps": [{"key": "ask", "type": "guidance", "prompt": "?"}]}))
        .await;
    let mut ids = Vec::new();
    for order in ["1", "2", "3"] {
        let id = fx.queue(&read, order, &fx.manager).await;
        fx.settled(&id).await;
        ids.push(id);
    }
    let waiting = fx
        .queue_as(&wait, "orders", "2", fx.admin.id, TriggerKind::Webhook)
        .await;
    assert_eq!(fx.settled(&waiting).await.state, RunState::AwaitingInput);

    let (status, body) = fx.call("GET", RUNS, &fx.admin, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [&waiting, &ids[2], &ids[1], &ids[0]]);
    assert_eq!(body["hasMore"], false);
    assert_eq!(body["parameters"]["limit"], 10);
    // A listed run has no context nor steps.
    assert!(body["data"][0].get("context").is_none());
    assert!(body["data"][0].get("steps").is_none());

    let page = |query: &str| format!("{RUNS}?{query}");
    let (_, body) = fx.call("GET", &page("limit=2"), &fx.admin, None).await;
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    assert_eq!(body["hasMore"], true);
    let (_, body) = fx
        .call(
            "GET",
            &page(&format!("workflowId={}", read.0)),
            &fx.admin,
            None,
        )
        .await;
    assert_eq!(body["data"].as_array().unwrap().len(), 3);
    let (_, body) = fx
        .call(
            "GET",
            &page("collectionName=orders&recordId=2"),
            &fx.admin,
            None,
        )
        .await;
    let on_two: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(on_two, [&waiting, &ids[1]]);
    assert_eq!(body["parameters"]["recordId"], "2");
    let (_, body) = fx
        .call("GET", &page("state=awaiting_input"), &fx.admin, None)
        .await;
    assert_eq!(body["data"][0]["id"], waiting.as_str());
    assert_eq!(body["data"][0]["waitingReason"], "user_input");
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
    let (_, body) = fx
        .call("GET", &page("trigger=webhook"), &fx.admin, None)
        .await;
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
    let (_, body) = fx
        .call("GET", &page("createdAt.gt=2999-01-01"), &fx.admin, None)
        .await;
    assert_eq!(body["data"], json!([]));

    // The clerk browses orders: they see the runs on orders, not more.
    let (status, body) = fx.call("GET", RUNS, &fx.clerk, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 4);
}

async fn one_run_shows_its_steps_and_hides_values_from_who_may_not_read_them(backend: Backend) {
    let fx = fixture(backend).await;
    let read = fx
        .workflow(json!({"name": "read", "collection": "orders",
            "steps": [{"key": "read", "type": "get-data", "fields": ["status", "note"]},
                      {"key": "ask", "type": "guidance", "prompt": "?"}]}))
        .await;
    let id = fx.queue(&read, "1", &fx.manager).await;
    fx.settled(&id).await;
    let uri = format!("{RUNS}/{id}");
    let (status, body) = fx.call("GET", &uri, &fx.manager, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "awaiting_input");
    assert_eq!(body["context"]["read"]["note"], "first order");
    assert_eq!(body["steps"][0]["key"], "read");
    assert_eq!(body["steps"][0]["status"], "succeeded");
    assert_eq!(body["steps"][0]["output"]["status"], "paid");
    assert_eq!(body["steps"][1]["status"], "awaiting_input");
    assert_eq!(body["steps"][1]["output"]["prompt"], "?");
    assert_eq!(body["currentStepIndex"], 1);
    // The viewer may read orders (no scope): values shown.
    let (status, body) = fx.call("GET", &uri, &fx.viewer, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["context"]["read"]["status"], "paid");
    // The clerk's scope leaves order 1 out: the run is shown, its values are not.
    let (status, body) = fx.call("GET", &uri, &fx.clerk, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.get("context").is_none(), "{body}");
    assert!(body["steps"][0].get("output").is_none(), "{body}");
    assert_eq!(body["steps"][0]["key"], "read");
}

async fn bad_parameters_and_unknown_runs_are_refused_in_the_api_shape(backend: Backend) {
    let fx = fixture(backend).await;
    for (query, field) in [
        ("state=done", "state"),
        ("trigger=cron", "trigger"),
        ("limit=0", "limit"),
        ("recordId=1", "recordId"),
        ("createdAt.gte=soon", "createdAt.gte"),
    ] {
        let (status, body) = fx
            .call("GET", &format!("{RUNS}?{query}"), &fx.admin, None)
            .await;
        let message = error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
        assert!(message.starts_with(field), "{query}: {message}");
    }
    let (status, body) = fx
        .call("GET", &format!("{RUNS}/no-such-run"), &fx.admin, None)
        .await;
    error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = fx
        .call(
            "GET",
            "/v1/project/acme/environment/staging/workflow-runs",
            &fx.admin,
            None,
        )
        .await;
    error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = fx
        .call(
            "POST",
            &format!("{RUNS}/no-such-run/steps/x/complete"),
            &fx.admin,
            Some(&json!({})),
        )
        .await;
    error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    let (status, body) = fx
        .call(
            "POST",
            &format!("{RUNS}/no-such-run/steps/0/complete"),
            &fx.admin,
            Some(&json!({"colour": "red"})),
        )
        .await;
    error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    let (status, body) = fx
        .call(
            "POST",
            &format!("{RUNS}/no-such-run/abort"),
            &fx.admin,
            None,
        )
        .await;
    error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = crate::admin::call(&fx.app, "GET", RUNS, None, None).await;
    error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
}
