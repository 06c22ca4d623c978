//! The workflows API under `/v1/project/{project}/environment/{environment}/` (issue 13 §5),
//! one module per part, each with its documented `routes()`: `runs` (the runs listing, one
//! run with its steps, and run control).

pub mod runs;

use utoipa_axum::router::OpenApiRouter;

use super::SharedState;

/// Every workflows route, documented (`http::openapi` mounts them with their document).
pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new().merge(runs::routes())
}
