//! The workflows API under `/v1/project/{project}/environment/{environment}/` (issue 13 §5),
//! one module per part, each with its documented `routes()`: `definitions` (workflows and their
//! versions), `runs` (the runs listing, one run with its steps, and run control), `triggers` (the
//! manual start, the webhook's settings) and `webhook` (the signed webhook itself).

pub mod definitions;
pub mod runs;
pub mod triggers;
pub mod webhook;

use utoipa_axum::router::OpenApiRouter;

use super::SharedState;

/// The workflows API's routes, each documented (`http::openapi` mounts them).
pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .merge(definitions::routes())
        .merge(runs::routes())
        .merge(triggers::routes())
        .merge(webhook::routes())
}

/// The workflow layer's errors in the `/v1` shape: a bad definition or body is a 400 with its
/// message, a file-owned workflow or a name taken a 409.
impl From<crate::workflows::Error> for super::platform::Error {
    fn from(error: crate::workflows::Error) -> Self {
        use crate::workflows::Error as E;
        match error {
            E::Invalid(message) => Self::InvalidParameter(message),
            E::NotFound(what) => Self::NotFound(format!("{what} not found")),
            E::Conflict(message) => Self::Conflict(message),
            E::Forbidden(why) => Self::insufficient(why),
            E::Store(error) => error.into(),
        }
    }
}
