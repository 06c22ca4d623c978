//! The one error type of handlers: each variant becomes an HTTP status in the agent's envelope.

use std::fmt;

use crate::bindings::canopy::plugin::types::Error as WitError;

/// A handler's expected failure. The host turns it into that request's error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// 400 `ValidationError` (the Node agent's `throwValidationError`).
    Validation(String),
    /// 403 `ForbiddenError` (`throwForbiddenError`).
    Forbidden(String),
    /// 404 `NotFoundError`.
    NotFound(String),
    /// 422 `UnprocessableError` (`throwError`).
    Unprocessable(String),
    /// 500: a bug or an unexpected state, logged by the host with the plugin's name.
    Internal(String),
}

/// The result type of every handler.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A 400 validation error with this message.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::Validation(message.into())
    }

    /// A 403 forbidden error with this message.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::Forbidden(message.into())
    }

    /// A 422 unprocessable error with this message.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::Unprocessable(message.into())
    }

    /// A 500 internal error with this message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal(message.into())
    }

    /// The message, whatever the variant.
    pub fn message(&self) -> &str {
        match self {
            Self::Validation(m)
            | Self::Forbidden(m)
            | Self::NotFound(m)
            | Self::Unprocessable(m)
            | Self::Internal(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Self::Internal(format!("invalid JSON: {e}"))
    }
}

impl From<Error> for WitError {
    fn from(e: Error) -> Self {
        match e {
            Error::Validation(m) => Self::Validation(m),
            Error::Forbidden(m) => Self::Forbidden(m),
            Error::NotFound(m) => Self::NotFound(m),
            Error::Unprocessable(m) => Self::Unprocessable(m),
            Error::Internal(m) => Self::Internal(m),
        }
    }
}

impl From<WitError> for Error {
    fn from(e: WitError) -> Self {
        match e {
            WitError::Validation(m) => Self::Validation(m),
            WitError::Forbidden(m) => Self::Forbidden(m),
            WitError::NotFound(m) => Self::NotFound(m),
            WitError::Unprocessable(m) => Self::Unprocessable(m),
            WitError::Internal(m) => Self::Internal(m),
        }
    }
}
