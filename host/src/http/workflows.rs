//! The workflows API under `/v1/project/{project}/environment/{environment}/workflows` (issue 13
//! §5): definitions and their versions (`definitions`); runs and triggers are mounted beside
//! them by their own modules. Every route answers in the `/v1` shape (`http::platform::Error`).

pub mod definitions;

use utoipa_axum::router::OpenApiRouter;

use super::SharedState;

/// The workflows API's routes, each documented (`http::openapi` mounts them).
pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new().merge(definitions::routes())
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
