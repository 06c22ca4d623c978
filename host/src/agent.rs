//! The Forest agent's wire protocol: query-string parsing, JSON:API serialization and the
//! schema file. Routes (the next step) call these; nothing here touches sqlx or HTTP types.

pub mod action;
pub mod api_chart;
pub mod body;
pub mod chart;
pub(crate) mod js;
pub mod query_string;
pub mod schema_file;
pub mod serialize;
pub(crate) mod wire;

use crate::datasource;

/// Errors of the agent protocol layer. `http` maps each to a status and the agent's error name.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Malformed request input (query string, body, id). (agent: `ValidationError`, 400)
    #[error("{0}")]
    Validation(String),
    /// A request the agent refuses for what it asks, not how (agent: `UnprocessableError`, 422).
    #[error("{0}")]
    Unprocessable(String),
    /// The named record does not exist. (agent: `NotFoundError`, 404)
    #[error("{0}")]
    NotFound(String),
    /// A failure the agent wraps in a plain `BusinessError` carrying the cause as `data`: a
    /// live-query segment that fails. The cause stays in the logs; `data` is `{}`, what the agent
    /// shows of a plain `Error`. (agent: `BusinessError`, 422)
    #[error("{0}")]
    Business(String),
    #[error(transparent)]
    Datasource(#[from] datasource::Error),
}

impl Error {
    pub fn validation(message: impl Into<String>) -> Self {
        Self::Validation(message.into())
    }
}

/// Result alias of the agent layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;
