//! The executor proxy (`workflowExecutorUrl`, platform-api.md §1.10) against a small real HTTP
//! server started here: requests under `/forest/_internal/executor/` are forwarded with their
//! method, query, body and headers (not the hop-by-hop ones), answers come back with theirs; a
//! path that climbs out is refused; without a session 401; without the setting 404.

use axum::http::StatusCode;
use axum::response::IntoResponse as _;
use canopy_e2e::Backend;
use serde_json::{Value as Json, json};

use crate::admin::{on_store_backends, serve_with, token_for};
use crate::workflow_triggers::{PERMISSIONS, send};

/// An executor that answers every request with what it received.
async fn echo_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(|request: axum::extract::Request| async move {
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let headers: serde_json::Map<String, Json> = parts
            .headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").into()))
            .collect();
        let answer = json!({
            "method": parts.method.as_str(),
            "path": parts.uri.path(),
            "query": parts.uri.query(),
            "headers": headers,
            "body": String::from_utf8_lossy(&body),
        });
        (
            StatusCode::CREATED,
            [("x-executor", "yes"), ("content-type", "application/json")],
            answer.to_string(),
        )
            .into_response()
    });
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{address}/base"), server)
}

async fn requests_are_forwarded_to_the_executor_and_back(backend: Backend) {
    let (url, server) = echo_server().await;
    let env = serve_with(backend, Some(PERMISSIONS), |config| {
        config.workflow_executor_url = Some(url.clone());
    })
    .await
    .unwrap();
    let app = &env.router;
    let ann = token_for(&env.store, "ann@acme.io").await;
    // No session: the agent's 401.
    let got = send(app, "GET", "/forest/_internal/executor/runs/12", None, None).await;
    assert_eq!(got.0, StatusCode::UNAUTHORIZED, "{}", got.2);
    // Forwarded with its query, body and headers; the answer's status and headers come back.
    let request = axum::http::Request::builder()
        .method("POST")
        .uri("/forest/_internal/executor/runs/12/trigger?x=1")
        .header("authorization", format!("Bearer {ann}"))
        .header("content-type", "application/json")
        .header("x-custom", "kept")
        .header("connection", "x-private")
        .header("x-private", "dropped")
        .body(axum::body::Body::from(r#"{"pendingData":{"a":1}}"#))
        .unwrap();
    let response = tower::ServiceExt::oneshot(app.clone(), request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(response.headers()["x-executor"], "yes");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let echoed: Json = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(echoed["method"], "POST");
    assert_eq!(echoed["path"], "/base/runs/12/trigger");
    assert_eq!(echoed["query"], "x=1");
    assert_eq!(echoed["body"], r#"{"pendingData":{"a":1}}"#);
    let headers = &echoed["headers"];
    assert_eq!(headers["authorization"], format!("Bearer {ann}").as_str());
    assert_eq!(headers["x-custom"], "kept");
    assert!(headers.get("x-private").is_none(), "{headers}");
    assert!(
        headers["host"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{headers}"
    );
    // Paths that climb out are refused before anything is sent.
    for path in [
        "/forest/_internal/executor/../secret",
        "/forest/_internal/executor/%2e%2e/secret",
        "/forest/_internal/executor/runs/%2E%2E/%2E%2E/x",
        "/forest/_internal/executor/runs%5c..%5cx",
        "/forest/_internal/executor//evil.example/x",
        "/forest/_internal/executor/a%00b",
    ] {
        let got = send(app, "GET", path, Some(&ann), None).await;
        assert_eq!(got.0, StatusCode::BAD_REQUEST, "{path}: {}", got.2);
    }
    server.abort();
}

async fn without_an_executor_the_routes_are_not_found(backend: Backend) {
    let env = serve_with(backend, Some(PERMISSIONS), |_| {})
        .await
        .unwrap();
    let ann = token_for(&env.store, "ann@acme.io").await;
    let got = send(
        &env.router,
        "GET",
        "/forest/_internal/executor/runs/1",
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(got.0, StatusCode::NOT_FOUND, "{}", got.2);
}

on_store_backends!(
    requests_are_forwarded_to_the_executor_and_back,
    without_an_executor_the_routes_are_not_found,
);
