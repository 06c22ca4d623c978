//! Tool calls go through the same `/forest` and `/v1` routes as a person's requests, in
//! process: a request is built with the MCP user's verified claims (so the route authenticates
//! them without a token) and the MCP client's address (for the IP whitelist), and sent to the
//! served generation's router. Permissions, scopes, approvals, hooks, plugins, the audit trail
//! and activity logs (marked `mcp`) apply exactly as they do to the UI.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode, header};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::Value as Json;
use tower::ServiceExt as _;

use super::super::caller::VerifiedClaims;
use crate::auth::SessionClaims;
use crate::platform::activity::{Origin, dispatched_by};

/// What a path segment must escape (RFC 3986 `pchar` minus what routers treat specially).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'|')
    .add(b'\\')
    .add(b'^')
    .add(b'[')
    .add(b']');

/// A path segment, escaped.
pub(super) fn segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// The largest answer read back (a page of records is far smaller).
const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// An answer of a route: its status and JSON body (`Null` when empty or not JSON).
#[derive(Debug)]
pub(super) struct Answer {
    pub status: StatusCode,
    pub body: Json,
}

impl Answer {
    pub fn ok(&self) -> bool {
        self.status.is_success()
    }

    /// The agent's error as a sentence a model can act on: `"<detail> (HTTP <status>)"`.
    pub fn error_text(&self) -> String {
        let detail = self
            .body
            .pointer("/errors/0/detail")
            .or_else(|| self.body.get("message"))
            .or_else(|| self.body.get("error_description"))
            .and_then(Json::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| {
                self.status
                    .canonical_reason()
                    .unwrap_or("request failed")
                    .to_owned()
            });
        format!("{detail} (HTTP {})", self.status.as_u16())
    }

    /// The agent's error name (`ValidationError`, `CustomActionRequiresApprovalError`, …).
    pub fn error_name(&self) -> Option<&str> {
        self.body.pointer("/errors/0/name").and_then(Json::as_str)
    }
}

/// Sends one request as `claims` to `router`.
pub(super) async fn send(
    router: &Router,
    claims: &SessionClaims,
    peer: Option<SocketAddr>,
    method: Method,
    path_and_query: &str,
    body: Option<&Json>,
) -> Answer {
    let mut builder = Request::builder().method(method).uri(path_and_query);
    if body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let Ok(mut request) = builder.body(Body::from(bytes)) else {
        return Answer {
            status: StatusCode::BAD_REQUEST,
            body: serde_json::json!({"message": format!("{path_and_query:?} is not a usable path")}),
        };
    };
    request
        .extensions_mut()
        .insert(VerifiedClaims(claims.clone()));
    if let Some(peer) = peer {
        request.extensions_mut().insert(ConnectInfo(peer));
    }
    let response = match dispatched_by(Origin::Mcp, router.clone().oneshot(request)).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let status = response.status();
    let body = match axum::body::to_bytes(response.into_body(), MAX_ANSWER).await {
        Ok(bytes) if !bytes.is_empty() => serde_json::from_slice(&bytes).unwrap_or(Json::Null),
        _ => Json::Null,
    };
    Answer { status, body }
}

/// Records of a JSON:API document, flattened: each resource's attributes, its `id` when the
/// attributes do not hold one, and its to-one relations' included records nested by name.
pub(super) fn records(document: &Json) -> Vec<Json> {
    let included = document
        .get("included")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    match document.get("data") {
        Some(Json::Array(items)) => items.iter().map(|r| record(r, included)).collect(),
        Some(item @ Json::Object(_)) => vec![record(item, included)],
        _ => Vec::new(),
    }
}

fn record(resource: &Json, included: &[Json]) -> Json {
    let mut out = resource
        .get("attributes")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(id) = resource.get("id")
        && !out.contains_key("id")
    {
        out.insert("id".to_owned(), id.clone());
    }
    if let Some(relationships) = resource.get("relationships").and_then(Json::as_object) {
        for (name, relation) in relationships {
            let Some(data) = relation.get("data") else {
                continue;
            };
            let value = match data {
                Json::Object(link) => included
                    .iter()
                    .find(|i| i.get("type") == link.get("type") && i.get("id") == link.get("id"))
                    .map_or_else(
                        || serde_json::json!({"id": link.get("id")}),
                        |i| record(&serde_json::json!({"id": i.get("id"), "attributes": i.get("attributes")}), &[]),
                    ),
                Json::Null => Json::Null,
                // To-many links carry no data worth showing (listRelated reads them).
                _ => continue,
            };
            out.insert(name.clone(), value);
        }
    }
    Json::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_api_documents_flatten_with_their_included_to_one_records() {
        let document = json!({
            "data": [{"type": "orders", "id": "1", "attributes": {"total": 5},
                      "relationships": {"customer": {"data": {"type": "customers", "id": "9"}},
                                        "items": {"links": {"related": {"href": "/x"}}}}}],
            "included": [{"type": "customers", "id": "9", "attributes": {"name": "Ada"}}]
        });
        assert_eq!(
            records(&document),
            vec![json!({"total": 5, "id": "1", "customer": {"name": "Ada", "id": "9"}})]
        );
        assert_eq!(segment("1|2 x/y"), "1%7C2%20x%2Fy");
    }
}
