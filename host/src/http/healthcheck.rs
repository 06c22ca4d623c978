//! `GET /forest`: the public healthcheck (no authentication).

use axum::Router;
use axum::response::Response;
use axum::routing::get;
use serde_json::json;

use super::SharedState;

pub fn router() -> Router<SharedState> {
    Router::new().route("/", get(healthcheck))
}

async fn healthcheck() -> Response {
    super::json(&json!({ "error": null, "message": "Agent is running" }))
}
