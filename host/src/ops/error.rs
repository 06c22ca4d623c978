//! The one error enum of the operations layer. Each surface maps it once: `http` to its
//! `ApiError` (and so to the agent's envelope), the workflow engine to a step failure, MCP to a
//! tool error.

use crate::{agent, auth, datasource};

/// Every way an operation can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request that the wire protocol refuses (bad parameter, business rule, missing record).
    #[error(transparent)]
    Agent(#[from] agent::Error),
    /// The datasource refused or failed.
    #[error(transparent)]
    Datasource(#[from] datasource::Error),
    /// Authentication or a permission check refused.
    #[error(transparent)]
    Auth(#[from] auth::Error),
    /// No such collection, relation or action is served (on `/forest`, a path without a route).
    #[error("Not Found")]
    NotFound,
    /// An approval request refused by its own rules (`ops::approvals`); the refusal says how
    /// each surface answers it.
    #[error("{message}")]
    Approval {
        refusal: super::approvals::Refusal,
        message: String,
    },
    /// Canopy's store refused or failed (a user, team or token that does not exist, a
    /// conflicting email, a declaratively managed part); its message names the thing.
    #[error(transparent)]
    Platform(#[from] crate::platform::Error),
    /// A field of the request is not acceptable; the surface shows the message next to it.
    #[error("{field}: {message}")]
    Field { field: String, message: String },
    /// The operation needs Canopy's store, and this server has none (a bare stack).
    #[error("Canopy's store is not available on this server")]
    Unavailable,
}

impl Error {
    /// A refusal of the field `field` with `message`.
    pub fn field(field: &str, message: impl std::fmt::Display) -> Self {
        Self::Field {
            field: field.to_owned(),
            message: message.to_string(),
        }
    }
}

/// Result alias of the operations.
pub type Result<T> = std::result::Result<T, Error>;
