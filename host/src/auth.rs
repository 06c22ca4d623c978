//! End-user authentication and authorization: turns a request's credentials into a `Caller`
//! (`session`: the agent's HMAC-signed JWT) and decides what it may do (`permissions`, protocol §5).
//! Nothing here knows about HTTP types; `http` maps `Error` to a status and the agent's error name.

pub mod login;
pub mod permissions;
pub mod session;
pub mod tokens;

pub use permissions::{CachePolicy, CollectionRight, CurrentUser, Permissions};

pub use session::{PermissionLevel, SessionClaims, SessionKey, mint, parse_ttl, resolve_token};

/// Everything authentication can fail with.
///
/// The first four are the agent's 401 failures (protocol §4.3, rendered by the §7 error handler
/// as `UnauthorizedError`): their `Display` is the exact public `detail`, so `http` can use it as
/// is. The last two only come from the `canopy token` command and never reach a route.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither a `forest_session_token` cookie nor an `Authorization` header was sent.
    #[error("Authentication Error")]
    MissingToken,
    /// The token is not a JWT, its signature or algorithm is wrong, or its claims do not have the
    /// §4.2 shape. The source is for logs only: the agent never tells clients why.
    #[error("Authentication Error")]
    InvalidToken(#[source] jsonwebtoken::errors::Error),
    /// The token's `exp` has passed.
    #[error("Authentication Error")]
    ExpiredToken,
    /// The `Authorization` header is not exactly `Bearer <token>` (koa-jwt's wording).
    #[error("Bad Authorization header format. Format is \"Authorization: Bearer <token>\"")]
    BadAuthorizationHeader,
    /// A token lifetime such as `--expires 1h` could not be read.
    #[error("invalid token lifetime {input:?}: {reason}")]
    InvalidTtl { input: String, reason: &'static str },
    /// Signing a token failed; not expected with an HMAC key, kept rather than panicking.
    #[error("could not sign the session token: {0}")]
    Mint(#[source] jsonwebtoken::errors::Error),
    /// A permission check refused (§5.3): 403 `ForbiddenError`, the message as `detail`.
    #[error("{0}")]
    Forbidden(String),
    /// The permission documents could not be read, so no check can be made: refused (fail
    /// closed). The detail is logged, never shown.
    #[error("permissions unavailable: {0}")]
    PermissionsUnavailable(String),
    /// The caller's scope on a collection cannot be applied (a field the collection does not
    /// have, a `{{currentUser.…}}` the user has no value for): the request is refused (403
    /// `ForbiddenError` with this detail) rather than served unscoped.
    #[error("{0}")]
    InvalidScope(String),
    /// An allowed query chart whose SQL is not a single SELECT: 422 `UnprocessableError` with
    /// the agent's message (§5.5).
    #[error("{0}")]
    Unprocessable(String),
    /// A live-query segment whose SQL is not a single SELECT (the agent's message). The agent
    /// leaves it unmapped (500 `Unexpected error`); the routes answer it as the other failures
    /// of a segment query, 422 `BusinessError` (docs/compatibility.md).
    #[error("{0}")]
    InvalidSegmentQuery(String),
    /// §5.4: the role may not trigger the action, or not on every selected record.
    #[error("You don't have permission to trigger this action.")]
    ActionTriggerForbidden,
    /// §5.4: the action must be approved first; `data.roleIdsAllowedToApprove` says by whom.
    #[error("This action requires to be approved.")]
    ActionRequiresApproval {
        role_ids_allowed_to_approve: Vec<i64>,
    },
    /// §5.4: the caller may not approve (or self-approve) this request.
    #[error("You don't have permission to approve this action.")]
    ApprovalNotAllowed {
        role_ids_allowed_to_approve: Vec<i64>,
    },
    /// §5.4: an action condition could not be evaluated (bad tree, failed count). The cause is
    /// logged, never shown.
    #[error(
        "The conditions to trigger this action cannot be verified. Please contact an administrator."
    )]
    InvalidActionCondition(String),
}

impl Error {
    /// The agent's plain refusal: 403 `{"name":"ForbiddenError","detail":"Forbidden"}`.
    pub fn forbidden() -> Self {
        Self::Forbidden("Forbidden".to_owned())
    }

    /// The `data` of the agent's error envelope (`roleIdsAllowedToApprove` of §5.4), if any.
    pub fn data(&self) -> Option<serde_json::Value> {
        match self {
            Self::ActionRequiresApproval {
                role_ids_allowed_to_approve,
            }
            | Self::ApprovalNotAllowed {
                role_ids_allowed_to_approve,
            } => Some(serde_json::json!({
                "roleIdsAllowedToApprove": role_ids_allowed_to_approve
            })),
            _ => None,
        }
    }

    /// Whether this is one of the §4.3 failures answered with a 401.
    pub fn is_unauthorized(&self) -> bool {
        matches!(
            self,
            Self::MissingToken
                | Self::InvalidToken(_)
                | Self::ExpiredToken
                | Self::BadAuthorizationHeader
        )
    }
}

/// Result alias of the auth layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_details_are_the_agents() {
        assert_eq!(Error::MissingToken.to_string(), "Authentication Error");
        assert_eq!(Error::ExpiredToken.to_string(), "Authentication Error");
        assert_eq!(
            Error::BadAuthorizationHeader.to_string(),
            r#"Bad Authorization header format. Format is "Authorization: Bearer <token>""#
        );
        assert!(Error::BadAuthorizationHeader.is_unauthorized());
        let ttl = Error::InvalidTtl {
            input: "x".to_owned(),
            reason: "r",
        };
        assert!(!ttl.is_unauthorized());
    }
}
