//! What can go wrong, each saying what to do about it.

use serde_json::Value as Json;

/// An error of the testing kit: the server did not start, or a call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `canopy` binary could not be run.
    #[error(
        "cannot run {binary}: {source} (set CANOPY_BIN to the canopy binary, or put canopy on \
         the PATH)"
    )]
    Spawn {
        /// The binary tried.
        binary: String,
        /// Why it could not run.
        source: std::io::Error,
    },
    /// `canopy test-server` ended before it was ready; its error output says why.
    #[error("canopy test-server stopped before it was ready ({status}):\n{stderr}")]
    NotReady {
        /// How it ended.
        status: String,
        /// What it wrote on stderr.
        stderr: String,
    },
    /// A route answered with a status other than 2xx: a refused permission (403), an unknown
    /// record (404), an action's error result or a hook's refusal (400)…
    #[error("{method} {path} answered {status}: {body}")]
    Status {
        /// The request's method.
        method: &'static str,
        /// The request's path and query.
        path: String,
        /// The HTTP status.
        status: u16,
        /// The answer's JSON (`{"errors": [{"detail", "name", "status"}]}` on the data routes,
        /// `{"error", "html"}` for an action's error result), or its text as a JSON string.
        body: Json,
    },
    /// The schema file has no such action on the collection.
    #[error("the collection {collection:?} has no action {action:?} (schema file {schema})")]
    NoAction {
        /// The collection asked for.
        collection: String,
        /// The action asked for.
        action: String,
        /// The schema file read.
        schema: String,
    },
    /// An answer or a file that is not what the server writes.
    #[error("{0}")]
    Unexpected(String),
    /// Talking to the server or reading a file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The failure.
        source: std::io::Error,
    },
}

impl Error {
    /// The HTTP status of a [`Error::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The JSON body of a [`Error::Status`].
    pub fn body(&self) -> Option<&Json> {
        match self {
            Self::Status { body, .. } => Some(body),
            _ => None,
        }
    }

    /// The message of a [`Error::Status`]: the data routes' first `errors[].detail`, or an
    /// action result's `error`.
    pub fn message(&self) -> Option<&str> {
        let body = self.body()?;
        body.pointer("/errors/0/detail")
            .or_else(|| body.get("error"))
            .and_then(Json::as_str)
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// The kit's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
