//! Canopy's own product data, in its own database (never the user's): users, teams, roles, the
//! environment's permissions, each team's rendering, IP whitelist rules, approval requests,
//! activity logs and admin logs. SQLite by default, PostgreSQL for several instances (`--state-url`).
//!
//! The permission model is kept in the documents of the Forest server's permission API
//! (`documents`), so that `auth::permissions` checks the same shapes whether they come from this
//! store or from a remote Forest-compatible server (`PermissionSource`).

pub mod activity;
pub mod audit;
pub mod bootstrap;
pub mod charts;
pub mod declarative;
pub mod documents;
pub mod listing;
pub mod login;
pub mod no_code;
pub mod notes;
pub mod oauth;
pub mod password;
pub mod rate_limits;
pub mod remote;
pub mod scope;
pub mod server;
pub mod store;
pub mod tokens;

use async_trait::async_trait;

pub use activity::ActivityLog;
pub use documents::{EnvironmentPermissions, IpWhitelist, Rendering, UserEntry};
pub use oauth::{CodeGrant, NewOAuthClient, OAuthClient, RefreshGrant, RefreshUse};
pub use scope::Scope;
pub use store::{
    Actor, AdminLog, Approval, ApprovalStatus, NewUser, Role, Store, Team, User, UserChange,
};
pub use tokens::{NewToken, Token, TokenSecret};

/// Everything the store can fail with. `Display` is the message shown to an admin (CLI or API).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A named thing does not exist (`user 7`, `team "Ops"`).
    #[error("{0} not found")]
    NotFound(String),
    /// The change conflicts with what exists (a second user with the same email).
    #[error("{0}")]
    Conflict(String),
    /// The input is not acceptable (an unknown permission level, a bad document).
    #[error("{0}")]
    Invalid(String),
    /// The store could not be opened or migrated.
    #[error("could not open Canopy's store at {url}: {source}")]
    Open {
        url: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("could not migrate Canopy's store: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A remote permission server answered badly or not at all.
    #[error("permission server: {0}")]
    Remote(String),
    #[error("Canopy's store: {0}")]
    Database(#[from] sqlx::Error),
    /// A read shared by concurrent calls failed (its error as text: it cannot be cloned).
    #[error("Canopy's store: {0}")]
    Shared(String),
}

impl Error {
    /// A unique-constraint violation, as the conflict it means.
    fn from_insert(error: sqlx::Error, what: impl FnOnce() -> String) -> Self {
        match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::Conflict(what()),
            _ => Self::Database(error),
        }
    }
}

/// Result alias of the platform layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the permission documents come from: this instance's store, or a Forest-compatible
/// server (`--server-url`). `auth::permissions` caches what these return.
#[async_trait]
pub trait PermissionSource: Send + Sync {
    /// `GET /liana/v4/permissions/environment`.
    async fn environment_permissions(&self) -> Result<EnvironmentPermissions>;
    /// `GET /liana/v4/permissions/users`: enabled users only.
    async fn users(&self) -> Result<Vec<UserEntry>>;
    /// `GET /liana/v4/permissions/renderings/{id}`; `NotFound` for an unknown id.
    async fn rendering(&self, rendering_id: i64) -> Result<Rendering>;
    /// `GET /liana/v1/ip-whitelist-rules`.
    async fn ip_whitelist(&self) -> Result<IpWhitelist>;
    /// A number that changes whenever a document this source serves changes in this process;
    /// a cache holding documents of an older generation refetches them. Remote sources cannot
    /// know and keep 0, so their caches rely on their time to live.
    fn generation(&self) -> u64 {
        0
    }
}
