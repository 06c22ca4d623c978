//! MCP's one mapping of the layers' errors: a failed operation becomes the sentence a model
//! reads in a tool error, `"<detail> (HTTP <status>)"`, with the status and detail the same
//! request answers on `/forest` or `/v1` (the agent's table, `ops::Public`), so that a model
//! told "403" knows it was refused rather than mistaken. Unexpected errors (a database, the
//! store) are logged and read "Unexpected error": their message may hold SQL.

use serde_json::Value as Json;

use crate::ops::{self, Public, UNEXPECTED, approvals::Refusal};
use crate::{platform, workflows};

/// A detail and its status, as the sentence a model reads.
fn sentence(detail: &str, status: u16) -> String {
    format!("{detail} (HTTP {status})")
}

/// The sentence of an error whose kind says whether its message may be shown.
fn shown(error: &dyn std::fmt::Display, public: Public) -> String {
    let message = error.to_string();
    if public.expose && !message.is_empty() {
        return sentence(&message, public.status);
    }
    tracing::error!(error = %message, "MCP tool: unexpected error");
    sentence(UNEXPECTED, public.status)
}

fn unexpected(error: &dyn std::fmt::Display) -> String {
    tracing::error!(error = %error, "MCP tool: unexpected error");
    sentence(UNEXPECTED, 500)
}

/// A store error as the `/v1` routes answer it.
fn platform_text(error: &platform::Error) -> String {
    match error {
        platform::Error::NotFound(_) => sentence(&error.to_string(), 404),
        platform::Error::Conflict(message) => sentence(message, 409),
        platform::Error::Invalid(message) => sentence(message, 400),
        other => unexpected(other),
    }
}

/// An operation's error.
pub fn text(error: &ops::Error) -> String {
    use ops::Error as E;
    match error {
        E::Agent(e) => shown(e, Public::of_agent(e)),
        E::Datasource(e) => shown(e, Public::of_datasource(e)),
        E::Auth(e) => shown(e, Public::of_auth(e)),
        // No such collection, relation or action: the route's plain 404.
        E::NotFound => sentence("Not Found", 404),
        // Approval refusals, as the approval routes answer them.
        E::Approval { refusal, message } => sentence(
            message,
            match refusal {
                Refusal::Invalid => 400,
                Refusal::NotFound => 404,
                Refusal::NotRequired | Refusal::TooManyRecords => 422,
                Refusal::Conflict => 409,
            },
        ),
        E::Platform(e) => platform_text(e),
        E::Field { .. } => sentence(&error.to_string(), 400),
        E::Unavailable => sentence(&error.to_string(), 503),
    }
}

/// An action's own error answer (`resultBuilder.error`: a status and a JSON body): its
/// message when the body holds one, else the status's reason.
pub fn answer_text(status: u16, body: &Json) -> String {
    let detail = body
        .pointer("/errors/0/detail")
        .or_else(|| body.get("message"))
        .or_else(|| body.get("error_description"))
        // An action's `resultBuilder.error(message)`.
        .or_else(|| body.get("error"))
        .and_then(Json::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| {
            axum::http::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("request failed")
                .to_owned()
        });
    sentence(&detail, status)
}

/// A workflow operation's error, as the `/v1` workflow routes answer it.
pub fn workflow_text(error: &workflows::Error) -> String {
    use workflows::Error as E;
    match error {
        E::Invalid(message) => sentence(message, 400),
        E::NotFound(_) => sentence(&error.to_string(), 404),
        E::Conflict(message) => sentence(message, 409),
        E::Forbidden(why) => sentence(
            &format!("Insufficient permissions for this operation: {why}"),
            403,
        ),
        E::Store(e) => platform_text(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_the_routes_answer_them() {
        let refused = ops::Error::Auth(crate::auth::Error::Forbidden("no".into()));
        assert_eq!(text(&refused), "no (HTTP 403)");
        assert_eq!(text(&ops::Error::NotFound), "Not Found (HTTP 404)");
        let hidden = ops::Error::Datasource(crate::datasource::Error::Internal("SELECT".into()));
        assert_eq!(text(&hidden), "Unexpected error (HTTP 500)");
        let approval = ops::Error::Approval {
            refusal: Refusal::NotRequired,
            message: "run it".into(),
        };
        assert_eq!(text(&approval), "run it (HTTP 422)");
        assert_eq!(
            workflow_text(&workflows::Error::NotFound("workflow run 9".into())),
            "workflow run 9 not found (HTTP 404)"
        );
    }
}
