//! `GET /forest`: the public healthcheck (no authentication).

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::SharedState;

pub fn router() -> Router<SharedState> {
    Router::new().route("/", get(healthcheck))
}

async fn healthcheck() -> Json<Value> {
    Json(json!({ "error": null, "message": "Agent is running" }))
}
