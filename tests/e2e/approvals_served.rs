//! Approvals as `canopy serve` wires them: the demo shop and its plugin served with Canopy's own
//! store (bootstrapped: the first admin, id 1, has every right, self-approval included). The
//! approval requests API answers under the served project and environment, and the action
//! route accepts a `signed_approval_request` signed with the configured env secret only.

use std::path::Path;

use axum::http::StatusCode;
use canopy::http::ApprovalSettings;
use serde_json::{Value as Json, json};

use crate::harness::{ENV_SECRET, plugin_config, post, served};
use crate::http::{get, send};

/// The signed body of `Mark as VIP` on one customer, requested by user 1.
fn signed_mark_as_vip(signer: &ApprovalSettings, id: &str) -> Json {
    let payload = json!({"data": {"type": "custom-action-requests", "attributes": {
        "collection_name": "customers", "ids": [id], "values": {}, "requester_id": 1}}});
    json!({"data": {"attributes": {"collection_name": "customers", "ids": [],
        "signed_approval_request": signer.sign(&payload).unwrap()}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canopy_serve_wires_the_store_and_the_env_secret() {
    let dir = std::env::temp_dir().join(format!("canopy-approvals-{}", uuid::Uuid::new_v4()));
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(
        Path::new(env!("CANOPY_TEST_PLUGINS")).join("shop_plugin.wasm"),
        plugins.join("shop.wasm"),
    )
    .unwrap();
    let url = canopy::app::seed_demo(&dir.join("shop.sqlite"))
        .await
        .unwrap();
    let config = plugin_config(&url, &plugins, &dir.join(".forestadmin-schema.json"));
    let (_served, app) = served(config).await.unwrap();

    let (status, _, body) = send(
        &app,
        get("/v1/project/canopy/environment/production/approval-requests"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"data": []}));

    // Signed with the configured env secret: the admin self-approves and the action runs.
    let route = "/forest/_actions/customers/1/mark-as-vip?timezone=UTC";
    let right = ApprovalSettings::new(ENV_SECRET, 500);
    let (status, _, body) = send(&app, post(route, &signed_mark_as_vip(&right, "3"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "1 customers are now VIP");
    // Signed with another secret: refused.
    let wrong = ApprovalSettings::new(&"a".repeat(64), 500);
    let (status, _, body) = send(&app, post(route, &signed_mark_as_vip(&wrong, "4"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}
