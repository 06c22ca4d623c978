//! Hot swap at the HTTP edge: the served routes are a generation (one `AppState` with its
//! customized stack, and its router) behind an atomic pointer, and the admin route that asks for
//! a new generation.
//!
//! Each request loads the generation current when it arrives and runs to its end on it, so a
//! swap never changes the stack under a request in flight; the old generation (and its plugins)
//! is dropped when its last request finishes. Swapping the whole router rather than a field of
//! `AppState` keeps every handler unchanged and makes settings that shape the routes (the unsafe
//! action endpoint) follow the generation too.
//!
//! `POST /{prefix}/_canopy/reload` with `Authorization: Bearer <envSecret>` rebuilds the plugin
//! set and the stack beside the current ones and swaps them in only if everything loaded.

use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use serde_json::json;
use tower::ServiceExt as _;

// What a generation knows of its rebuilder lives beside the state (`crate::state`), which the
// console's reload button uses too.
pub use crate::state::{Reload, ReloadReport, Reloader, reload_with};

/// The router generation served now; cloned (an `Arc`) by every request at its start.
pub type Generation = Arc<ArcSwap<Router>>;

/// The path of the admin reload route under a prefix (`""` or `/admin`).
pub fn admin_path(prefix: &str) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        "/_canopy/reload".to_owned()
    } else {
        format!("/{prefix}/_canopy/reload")
    }
}

/// What the admin route needs: the secret its callers present and who rebuilds.
struct Admin {
    env_secret: String,
    reloader: Arc<dyn Reload>,
}

/// The served service: the admin reload route, and everything else handed to the generation
/// current at the request's arrival.
pub fn router(
    current: Generation,
    prefix: &str,
    env_secret: &str,
    reloader: Arc<dyn Reload>,
) -> Router {
    let admin = Arc::new(Admin {
        env_secret: env_secret.to_owned(),
        reloader,
    });
    let forward = tower::service_fn(move |request: Request| {
        // One atomic load: the request keeps this generation alive until it completes.
        let generation = current.load_full();
        async move {
            let router: Router = (*generation).clone();
            router.oneshot(request).await
        }
    });
    Router::new()
        .route(&admin_path(prefix), post(reload))
        .with_state(admin)
        .fallback_service(forward)
}

async fn reload(State(admin): State<Arc<Admin>>, request: Request) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !constant_time_eq(presented.as_bytes(), admin.env_secret.as_bytes()) {
        tracing::warn!("reload refused: missing or wrong env secret");
        return super::json_with(
            StatusCode::UNAUTHORIZED,
            &json!({"error": "the reload route needs `Authorization: Bearer <envSecret>`"}),
        );
    }
    match admin.reloader.reload().await {
        Ok(report) => super::json(&json!({
            "reloaded": true,
            "plugins": report.plugins,
            "customizations": report.customizations,
            "durationMs": report.millis,
            "untriggerableActions": report.untriggerable,
            "quickPlugins": report.quick,
            "languages": report.languages,
        })),
        // The old generation is still served: the request was understood, the new set refused.
        Err(message) => super::json_with(
            StatusCode::UNPROCESSABLE_ENTITY,
            &json!({"reloaded": false, "error": message}),
        ),
    }
}

/// Compares without an early exit (`subtle`), so response times do not tell how much of a guess
/// matched. Different lengths are unequal.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_path_sits_under_the_prefix_outside_forest() {
        assert_eq!(admin_path(""), "/_canopy/reload");
        assert_eq!(admin_path("/admin/"), "/admin/_canopy/reload");
    }

    #[test]
    fn secrets_compare_by_content_and_length() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
