//! The `/v1` workflow routes: the triggers (`triggers`: the manual start, the webhook's settings)
//! and the webhook itself (`webhook`). Each sub-module exposes `routes()`, merged here.

pub mod triggers;
pub mod webhook;

use utoipa_axum::router::OpenApiRouter;

use super::SharedState;

/// Every workflow route, documented.
pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .merge(webhook::routes())
        .merge(triggers::routes())
}
