//! The MCP server (the spec's `mountAiMcpServer`), a transport over the operations layer: its
//! settings and paths, the protocol handler (`server`: rmcp's stateless service, tools/list and
//! tools/call), the tools (`calls`, `actions`, `workflows`: each checks its arguments, then calls
//! `ops` or `workflows::operations` as the MCP user), the OAuth 2.1 authorization server's rules
//! (`oauth`, `grants`), access tokens (`token`), the tools' input schemas and their translation
//! into agent queries (`tools`, `filter`), and uploaded action files (`uploads`). HTTP mounting
//! lives in `http::mcp`: the routes, the bearer check, the OAuth endpoints; this module imports
//! nothing from `http` (`host/tests/layers.rs`).
//!
//! Canopy is its own authorization server: the MCP user signs in through Canopy's login, so they
//! are a Canopy user, and each tool call runs the same operations a person's UI runs, as that
//! user: permissions, scopes, approvals, hooks, plugins and activity logs (marked `mcp`) apply
//! unchanged.

mod actions;
mod calls;
pub mod cimd;
mod error;
pub mod filter;
pub mod grants;
pub mod oauth;
mod records;
pub mod server;
pub mod token;
pub mod tools;
pub mod uploads;
mod workflows;

pub use server::McpCaller;

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota};

use crate::config::McpConfig;
use crate::platform::Store;

/// Scopes an MCP token may carry; `mcp:read` is needed for any call, `mcp:action` for uploads.
pub const SCOPES: &[&str] = &["mcp:read", "mcp:write", "mcp:action", "mcp:admin"];
/// What a client gets when it asks for no scope: everything but `mcp:admin`, which nothing
/// needs today (the user's own permissions decide what they may do).
pub const DEFAULT_SCOPE: &str = "mcp:read mcp:write mcp:action";
/// The server's name in `serverInfo`.
pub const SERVER_NAME: &str = "canopy";

/// Authorization requests per client address per window (sign-in attempts are limited again,
/// per email, by the login service).
const AUTHORIZE_PER_WINDOW: u32 = 100;
/// Token requests per client address per window: a refresh a minute for a dozen clients.
const TOKEN_PER_WINDOW: u32 = 50;
/// The window of both (the Node server's: 15 minutes).
const WINDOW: Duration = Duration::from_secs(15 * 60);

/// The MCP server of this instance, shared by every generation of the served stack.
pub struct Mcp {
    pub config: McpConfig,
    /// `publicUrl` (no trailing slash), when configured; else each request's own base.
    pub public_url: Option<String>,
    pub store: Store,
    pub keys: token::AccessKeys,
    pub uploads: Option<uploads::Uploads>,
    authorize_limit: DefaultKeyedRateLimiter<IpAddr>,
    token_limit: DefaultKeyedRateLimiter<IpAddr>,
    /// Whether a refresh family (one sign-in) is revoked, as last read, with when it was read
    /// and the store's grants generation then: an access token of a revoked sign-in is refused
    /// at once on the instance that revoked it, within milliseconds on the others of a
    /// PostgreSQL store (the revocation's notification bumps the generation), and within
    /// [`FAMILY_RECHECK`] whatever happens, without a store read per call.
    families: quick_cache::sync::Cache<String, FamilyStatus>,
    /// Client ID Metadata Documents fetched lately, by URL.
    documents: quick_cache::sync::Cache<String, cimd::Cached>,
}

/// A sign-in's revocation status as read: revoked, when, at which grants generation.
type FamilyStatus = (bool, std::time::Instant, u64);

/// How long a sign-in's revocation status is trusted before it is read again.
pub const FAMILY_RECHECK: Duration = Duration::from_secs(30);
/// Sign-ins whose status is remembered at once.
const FAMILIES: usize = 10_000;

impl std::fmt::Debug for Mcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mcp")
            .field("config", &self.config)
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

/// Paths of the MCP server's routes, for one `basePath`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `""` or `/ai`.
    pub base: String,
    /// `POST {base}/mcp`.
    pub mcp: String,
    pub authorize: String,
    pub token: String,
    pub register: String,
    /// `PUT {base}/mcp/uploads/{key}`.
    pub uploads: String,
    /// RFC 8414 metadata, at the host root: `/.well-known/oauth-authorization-server{base}`.
    pub authorization_server: String,
    /// RFC 9728 metadata: `/.well-known/oauth-protected-resource{base}/mcp`.
    pub protected_resource: String,
}

impl Paths {
    pub fn new(base_path: Option<&str>) -> Self {
        let base = base_path.unwrap_or("").to_owned();
        Self {
            mcp: format!("{base}/mcp"),
            authorize: format!("{base}/oauth/authorize"),
            token: format!("{base}/oauth/token"),
            register: format!("{base}/oauth/register"),
            uploads: format!("{base}/mcp/uploads"),
            authorization_server: format!("/.well-known/oauth-authorization-server{base}"),
            protected_resource: format!("/.well-known/oauth-protected-resource{base}/mcp"),
            base,
        }
    }
}

fn per_window(count: u32) -> Quota {
    let count = NonZeroU32::new(count).unwrap_or(NonZeroU32::MIN);
    Quota::with_period(WINDOW / count.get())
        .unwrap_or_else(|| Quota::per_minute(count))
        .allow_burst(count)
}

impl Mcp {
    pub fn new(
        config: McpConfig,
        public_url: Option<String>,
        auth_secret: &str,
        store: Store,
    ) -> Self {
        let uploads = config
            .uploads
            .clone()
            .map(|settings| uploads::Uploads::new(settings, auth_secret, &store));
        Self {
            public_url: public_url.map(|u| u.trim_end_matches('/').to_owned()),
            keys: token::AccessKeys::new(auth_secret),
            uploads,
            store,
            authorize_limit: DefaultKeyedRateLimiter::keyed(per_window(AUTHORIZE_PER_WINDOW)),
            token_limit: DefaultKeyedRateLimiter::keyed(per_window(TOKEN_PER_WINDOW)),
            families: quick_cache::sync::Cache::new(FAMILIES),
            documents: quick_cache::sync::Cache::new(FAMILIES),
            config,
        }
    }

    pub fn paths(&self) -> Paths {
        Paths::new(self.config.base_path.as_deref())
    }

    /// The base URL (scheme, host, port) of this server: `publicUrl`, else the request's.
    pub fn base_url<'a>(&'a self, request_base: &'a str) -> &'a str {
        self.public_url.as_deref().unwrap_or(request_base)
    }

    /// The issuer (RFC 8414): the base URL with the `basePath`, no trailing slash.
    pub fn issuer(&self, request_base: &str) -> String {
        format!("{}{}", self.base_url(request_base), self.paths().base)
    }

    /// The canonical MCP URL, the audience of its tokens (RFC 8707).
    pub fn resource(&self, request_base: &str) -> String {
        format!("{}{}", self.base_url(request_base), self.paths().mcp)
    }

    /// Whether the tool is offered.
    pub fn tool_enabled(&self, name: &str) -> bool {
        self.config.enabled_tools.contains(&name)
            && (name != "requestActionFileUpload" || self.uploads.is_some())
    }

    /// Whether the sign-in `family` was revoked (a reused refresh token), read from the store
    /// at most every [`FAMILY_RECHECK`]. A store failure reads as revoked: refuse rather than
    /// let a possibly stolen token through.
    pub async fn family_revoked(&self, family: &str) -> bool {
        let generation = self.store.grants_generation();
        if let Some((revoked, read, seen)) = self.families.get(family)
            && (revoked || (read.elapsed() < FAMILY_RECHECK && seen == generation))
        {
            return revoked;
        }
        let revoked = match self.store.oauth_grant_revoked(family).await {
            Ok(revoked) => revoked,
            Err(error) => {
                tracing::error!(%error, "MCP: could not read a sign-in's status");
                return true;
            }
        };
        self.families.insert(
            family.to_owned(),
            (revoked, std::time::Instant::now(), generation),
        );
        revoked
    }

    /// The client described by the metadata document at `url`: from memory for
    /// [`cimd::CACHE_TTL`], else fetched (with SSRF care) and remembered in the store, where its
    /// codes and sign-ins refer to it.
    pub async fn document_client(
        &self,
        url: &str,
    ) -> Result<crate::platform::oauth::OAuthClient, oauth::OAuthError> {
        if let Some((client, fetched)) = self.documents.get(url)
            && fetched.elapsed() < cimd::CACHE_TTL
        {
            return Ok(client);
        }
        let client = cimd::fetch(url).await?;
        self.store
            .remember_oauth_client(&client)
            .await
            .map_err(|error| {
                tracing::error!(%error, "MCP: could not remember a client metadata document");
                oauth::OAuthError::new(500, "server_error", "try again in a moment")
            })?;
        tracing::info!(client = url, "MCP: client metadata document fetched");
        self.documents
            .insert(url.to_owned(), (client.clone(), std::time::Instant::now()));
        Ok(client)
    }

    /// Marks a sign-in revoked here at once (its store row is already).
    pub fn forget_family(&self, family: &str) {
        let generation = self.store.grants_generation();
        self.families.insert(
            family.to_owned(),
            (true, std::time::Instant::now(), generation),
        );
    }

    /// Spends one authorization request of `ip`; `Err(seconds)` to wait.
    pub fn check_authorize_rate(&self, ip: IpAddr) -> Result<(), u64> {
        spend(&self.authorize_limit, ip)
    }

    /// Spends one token request of `ip`; `Err(seconds)` to wait.
    pub fn check_token_rate(&self, ip: IpAddr) -> Result<(), u64> {
        spend(&self.token_limit, ip)
    }
}

fn spend(limiter: &DefaultKeyedRateLimiter<IpAddr>, ip: IpAddr) -> Result<(), u64> {
    use governor::clock::{Clock as _, DefaultClock};
    limiter.check_key(&ip).map_err(|not_until| {
        not_until
            .wait_time_from(DefaultClock::default().now())
            .as_secs()
            .max(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_and_without_a_base_path_are_the_specs() {
        let root = Paths::new(None);
        assert_eq!(root.mcp, "/mcp");
        assert_eq!(root.authorize, "/oauth/authorize");
        assert_eq!(root.token, "/oauth/token");
        assert_eq!(
            root.authorization_server,
            "/.well-known/oauth-authorization-server"
        );
        assert_eq!(
            root.protected_resource,
            "/.well-known/oauth-protected-resource/mcp"
        );
        let ai = Paths::new(Some("/ai"));
        assert_eq!(ai.mcp, "/ai/mcp");
        assert_eq!(ai.authorize, "/ai/oauth/authorize");
        assert_eq!(ai.token, "/ai/oauth/token");
        assert_eq!(
            ai.authorization_server,
            "/.well-known/oauth-authorization-server/ai"
        );
        assert_eq!(
            ai.protected_resource,
            "/.well-known/oauth-protected-resource/ai/mcp"
        );
        assert_eq!(Paths::new(Some("/mcp")).mcp, "/mcp/mcp");
    }
}
