//! The one error enum of the operations layer. Each surface maps it once: `http` to its
//! `ApiError` (and so to the agent's envelope), the console to a page's status and message, the
//! workflow engine to a step failure, MCP to a tool error.
//!
//! [`Public`] is the agent's error table (protocol §7): each kind's HTTP status, public name and
//! whether its message may be shown. `http::error` answers with it, and an approved action that
//! failed keeps its outcome in the same terms whichever surface approved it.

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

impl Error {
    /// How the agent's routes answer this error (what `http::error` answers it with).
    pub fn public(&self) -> Public {
        use super::approvals::Refusal as R;
        match self {
            Self::Agent(e) => Public::of_agent(e),
            Self::Datasource(e) => Public::of_datasource(e),
            Self::Auth(e) => Public::of_auth(e),
            Self::NotFound
            | Self::Approval {
                refusal: R::NotFound,
                ..
            }
            | Self::Platform(crate::platform::Error::NotFound(_)) => Public::NOT_FOUND,
            Self::Approval {
                refusal: R::Invalid | R::Conflict,
                ..
            } => Public::BAD_REQUEST,
            Self::Approval {
                refusal: R::NotRequired | R::TooManyRecords,
                ..
            } => Public::new(422, "UnprocessableError", true),
            Self::Platform(
                crate::platform::Error::Invalid(_) | crate::platform::Error::Conflict(_),
            )
            | Self::Field { .. } => Public::new(400, "ValidationError", true),
            Self::Platform(_) | Self::Unavailable => Public::INTERNAL,
        }
    }

    /// The `data` of the agent's envelope, for the errors that carry one (§7).
    pub fn data(&self) -> Option<serde_json::Value> {
        match self {
            Self::Auth(e) => e.data(),
            _ => None,
        }
    }
}

/// The detail of errors whose message must not reach clients (§7): every surface shows this.
pub const UNEXPECTED: &str = "Unexpected error";

/// How an error kind is answered on the agent's wire: its status, its public name, and whether
/// its message is safe to show (business errors) or must be hidden and logged (unexpected ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Public {
    /// The HTTP status.
    pub status: u16,
    /// The agent's error name (`ValidationError`…).
    pub name: &'static str,
    /// Whether the message is shown.
    pub expose: bool,
}

impl Public {
    /// An entry of the table.
    pub const fn new(status: u16, name: &'static str, expose: bool) -> Self {
        Self {
            status,
            name,
            expose,
        }
    }

    /// No such route, collection or record.
    pub const NOT_FOUND: Self = Self::new(404, "NotFoundError", true);
    /// A request koa's body parser refused (http-errors, named after the status).
    pub const BAD_REQUEST: Self = Self::new(400, "BadRequestError", true);
    /// An unexpected failure: its message is logged, not shown.
    const INTERNAL: Self = Self::new(500, "InternalServerError", false);

    /// THE table of the wire protocol's errors.
    pub fn of_agent(error: &agent::Error) -> Self {
        match error {
            agent::Error::Validation(_) => Self::new(400, "ValidationError", true),
            agent::Error::Unprocessable(_) => Self::new(422, "UnprocessableError", true),
            agent::Error::NotFound(_) => Self::NOT_FOUND,
            agent::Error::Business(_) => Self::new(422, "BusinessError", true),
            agent::Error::Datasource(e) => Self::of_datasource(e),
        }
    }

    /// THE table of the datasource's errors.
    pub fn of_datasource(error: &datasource::Error) -> Self {
        use datasource::Error as D;
        match error {
            D::Validation(_) | D::Constraint(_) => Self::new(400, "ValidationError", true),
            D::MissingCollection(_) => Self::new(400, "MissingCollectionError", true),
            D::MissingField(_) => Self::new(400, "MissingFieldError", true),
            D::MissingRelation(_) => Self::new(400, "MissingRelationError", true),
            D::Unprocessable(_) => Self::new(422, "UnprocessableError", true),
            D::NoPrimaryKey => Self::new(422, "NoPrimaryKeyError", true),
            D::Forbidden(_) => Self::new(403, "ForbiddenError", true),
            D::Plugin(_) => Self::new(500, "InternalServerError", true),
            D::Database(_) | D::Internal(_) => Self::INTERNAL,
        }
    }

    /// THE table of authentication's and the permission checks' errors.
    pub fn of_auth(error: &auth::Error) -> Self {
        use auth::Error as A;
        match error {
            e if e.is_unauthorized() => Self::new(401, "UnauthorizedError", true),
            A::Forbidden(_) | A::InvalidScope(_) => Self::new(403, "ForbiddenError", true),
            A::Unprocessable(_) => Self::new(422, "UnprocessableError", true),
            A::ActionTriggerForbidden => Self::new(403, "CustomActionTriggerForbiddenError", true),
            A::ActionRequiresApproval { .. } => {
                Self::new(403, "CustomActionRequiresApprovalError", true)
            }
            A::ApprovalNotAllowed { .. } => Self::new(403, "ApprovalNotAllowedError", true),
            A::InvalidActionCondition(_) => Self::new(422, "InvalidActionConditionError", true),
            A::PermissionsUnavailable(_) => Self::new(503, "ServiceUnavailableError", false),
            _ => Self::INTERNAL,
        }
    }
}

/// Result alias of the operations.
pub type Result<T> = std::result::Result<T, Error>;
