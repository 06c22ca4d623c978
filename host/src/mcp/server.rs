//! The MCP protocol over rmcp's Streamable HTTP service, stateless (no sessions: any instance
//! answers any request, and a restart loses nothing), JSON answers, `Host` and `Origin` checked
//! against the public URL (mcp.md §4.1). `tools/list` and `tools/call` are written by hand: the
//! collection enum comes from the served schema, which a plugin reload changes.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value as Json;

use super::calls::{Call, run};
use super::token::AccessClaims;
use super::{Mcp, SERVER_NAME, tools};
use crate::platform::activity::{Origin, dispatched_by};
use crate::state::SharedState;

/// The signed-in MCP user of a `POST /mcp`, put in the request by the bearer check of the
/// routes (`http::mcp`) for the tools.
#[derive(Debug, Clone)]
pub struct McpCaller {
    pub claims: Arc<AccessClaims>,
    /// `scheme://host` of the request (upload URLs are built on it).
    pub base: String,
}

/// What the server tells a model about itself.
const INSTRUCTIONS: &str = "Canopy serves an application's database as collections. Call \
describeCollection before anything else on a collection. Every call acts as the signed-in user, \
with their permissions, and is logged.";

/// The handler of one request (cheap: an `Arc`).
#[derive(Clone)]
pub struct Handler {
    state: SharedState,
}

/// The rmcp service that `http` mounts at `POST /mcp`, behind its bearer check (which puts the
/// [`McpCaller`] in the request).
pub fn service(
    state: &SharedState,
    mcp: &Mcp,
) -> StreamableHttpService<Handler, NeverSessionManager> {
    let handler = Handler {
        state: Arc::clone(state),
    };
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(state.json_limit);
    // DNS rebinding: only the public URL's host (else this machine's names) may be asked for,
    // and a browser page of another origin may not call.
    match mcp
        .public_url
        .as_deref()
        .and_then(|u| reqwest::Url::parse(u).ok())
    {
        Some(url) => {
            let host = url.host_str().unwrap_or("localhost").to_owned();
            let mut hosts = vec![host.clone()];
            if let Some(port) = url.port() {
                hosts.push(format!("{host}:{port}"));
            }
            config = config
                .with_allowed_hosts(hosts)
                .with_allowed_origins([url.origin().ascii_serialization()]);
        }
        None => {
            config = config.with_allowed_origins([
                "http://localhost:*",
                "http://127.0.0.1:*",
                "http://[::1]:*",
            ]);
        }
    }
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

fn tool(definition: tools::ToolDef) -> Tool {
    let schema = match definition.input_schema {
        Json::Object(object) => object,
        _ => serde_json::Map::new(),
    };
    Tool::new(definition.name, definition.description, Arc::new(schema))
        .with_title(definition.title)
        .with_annotations(
            ToolAnnotations::with_title(definition.title)
                .read_only(definition.read_only)
                .destructive(definition.destructive)
                .open_world(false),
        )
}

impl Handler {
    fn mcp(&self) -> Option<&Mcp> {
        self.state.mcp.as_deref()
    }

    fn collections(&self) -> Vec<String> {
        self.state
            .datasource
            .schema()
            .collections
            .keys()
            .cloned()
            .collect()
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")).with_title("Canopy"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Some(mcp) = self.mcp() else {
            return Ok(ListToolsResult::default());
        };
        let tools = tools::definitions(&self.collections(), mcp.uploads.is_some())
            .into_iter()
            .filter(|t| mcp.tool_enabled(t.name))
            .map(tool)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let Some(caller) = parts.and_then(|p| p.extensions.get::<McpCaller>()) else {
            return Err(ErrorData::internal_error(
                "the request was not authenticated",
                None,
            ));
        };
        let peer = parts
            .and_then(|p| p.extensions.get::<ConnectInfo<SocketAddr>>())
            .map(|ConnectInfo(address)| *address);
        let name = request.name.as_ref();
        let enabled = self.mcp().is_some_and(|m| m.tool_enabled(name));
        let call = Call {
            state: &self.state,
            caller,
            peer,
            args: request.arguments.unwrap_or_default(),
        };
        // Whatever operation the tool calls, its activity entries say `mcp`.
        let outcome = if enabled {
            dispatched_by(Origin::Mcp, run(&call, name)).await
        } else {
            None
        };
        let result = match outcome {
            // Text only, as the Node server answers: no output schema is declared, and the same
            // JSON twice (text and `structuredContent`) doubled what each call writes.
            Some(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Some(Err(message)) => {
                tracing::info!(tool = name, user = caller.claims.user.id, %message, "MCP tool call failed");
                CallToolResult::error(vec![ContentBlock::text(message)])
            }
            None => CallToolResult::error(vec![ContentBlock::text(format!(
                "MCP error -32602: Tool {name} not found"
            ))]),
        };
        Ok(result.into())
    }
}
