//! How the agent answers each error kind (protocol §7): its status, its public name, and
//! whether its message is safe to show (business errors) or must be hidden and logged
//! (unexpected errors). Every surface that reports these errors reads this one table: `http`
//! renders it as the agent's envelope, MCP as a tool error's sentence.

use crate::{auth, datasource};

/// An error kind as the agent answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Public {
    /// The HTTP status the agent answers with.
    pub status: u16,
    /// The agent's error name (`ValidationError`, `ForbiddenError`, …).
    pub name: &'static str,
    /// Whether the message may be shown; else it is logged and "Unexpected error" shown.
    pub expose: bool,
}

/// The detail of errors whose message must not reach clients (§7).
pub const UNEXPECTED: &str = "Unexpected error";

const fn public(status: u16, name: &'static str, expose: bool) -> Public {
    Public {
        status,
        name,
        expose,
    }
}

/// The agent protocol's own errors.
pub fn of_agent(error: &super::Error) -> Public {
    use super::Error as A;
    match error {
        A::Validation(_) => public(400, "ValidationError", true),
        A::Unprocessable(_) => public(422, "UnprocessableError", true),
        A::NotFound(_) => public(404, "NotFoundError", true),
        A::Business(_) => public(422, "BusinessError", true),
        A::Datasource(e) => of_datasource(e),
    }
}

/// The datasource's errors.
pub fn of_datasource(error: &datasource::Error) -> Public {
    use datasource::Error as D;
    match error {
        D::Validation(_) | D::Constraint(_) => public(400, "ValidationError", true),
        D::MissingCollection(_) => public(400, "MissingCollectionError", true),
        D::MissingField(_) => public(400, "MissingFieldError", true),
        D::MissingRelation(_) => public(400, "MissingRelationError", true),
        D::Unprocessable(_) => public(422, "UnprocessableError", true),
        D::NoPrimaryKey => public(422, "NoPrimaryKeyError", true),
        D::Forbidden(_) => public(403, "ForbiddenError", true),
        D::Plugin(_) => public(500, "InternalServerError", true),
        D::Database(_) | D::Internal(_) => public(500, "InternalServerError", false),
    }
}

/// Authentication's and the permission checks' errors.
pub fn of_auth(error: &auth::Error) -> Public {
    use auth::Error as E;
    match error {
        e if e.is_unauthorized() => public(401, "UnauthorizedError", true),
        E::Forbidden(_) | E::InvalidScope(_) => public(403, "ForbiddenError", true),
        E::Unprocessable(_) => public(422, "UnprocessableError", true),
        E::ActionTriggerForbidden => public(403, "CustomActionTriggerForbiddenError", true),
        E::ActionRequiresApproval { .. } => public(403, "CustomActionRequiresApprovalError", true),
        E::ApprovalNotAllowed { .. } => public(403, "ApprovalNotAllowedError", true),
        E::InvalidActionCondition(_) => public(422, "InvalidActionConditionError", true),
        E::PermissionsUnavailable(_) => public(503, "ServiceUnavailableError", false),
        _ => public(500, "InternalServerError", false),
    }
}
