//! The state of one served generation, shared by every surface: the operations layer (`ops`,
//! which `AppState` dereferences to) and the settings and services the transports read. It lives
//! outside `http` so that the console and MCP, which are transports beside `http`, use it without
//! importing `http`. The composition root (`app`) builds it; a plugin reload builds a new one.
//! It sits at the composition level with `app`, so it names each transport's own services (the
//! executor proxy, liana server and rate limits of `http`, the MCP server), which only that
//! transport's routes read.

use std::sync::Arc;

use crate::auth::SessionKey;
use crate::auth::login::Login;
use crate::auth::tokens::TokenVerifier;
use crate::config::{ErrorMessageTemplate, HttpConfig};
use crate::datasource::DataSource;
use crate::http::{executor, liana, ratelimit};
use crate::ops::Ops;
use crate::ops::approvals::ApprovalSettings;

/// What every request handler shares: the operations over the served datasource (`ops`, which
/// `AppState` dereferences to) and the settings routes read. One state is one generation of the
/// served stack: a plugin reload builds a new state (and router) and swaps it in whole
/// (`reload`), so a handler's `state.datasource` never changes under it.
pub struct AppState {
    /// The operations layer of this generation: the served datasource, permissions, activity,
    /// store and limits. Shared with the workflow engine (`ops::Generations`).
    pub ops: Arc<Ops>,
    /// Verifies the end users' session tokens.
    pub session: SessionKey,
    /// `/{prefix}/forest`: where every route lives.
    pub mount_path: String,
    /// `bodyParserOptions.jsonLimit` in bytes.
    pub json_limit: usize,
    /// `customizeErrorMessage`: the detail of unexpected errors.
    pub customize_error_message: Option<ErrorMessageTemplate>,
    /// `useUnsafeActionEndpoint`: action routes without the `{index}` segment.
    pub use_unsafe_action_endpoint: bool,
    /// `corsAllowedOrigins`: origins whose browser requests may carry credentials.
    pub cors_allowed_origins: Vec<String>,
    /// The env secret of `signed_approval_request` and `maxRecordsForApproval`.
    pub approvals: ApprovalSettings,
    /// The permission server of other agents (`/liana/…`), when this instance serves its store.
    pub liana: Option<Arc<liana::LianaServer>>,
    /// Sign-in (`/authentication…`), shared by every generation; `None` over a bare stack.
    pub login: Option<Arc<Login>>,
    /// Verifies the public API's application tokens (with its cache), shared by every
    /// generation; `None` over a bare stack (no store, no tokens).
    pub tokens: Option<Arc<TokenVerifier>>,
    /// The public API's rate limits, shared by every generation (a reload keeps the quotas).
    pub rate_limits: Arc<ratelimit::RateLimits>,
    /// Wakes the workflow engine when runs are queued (shared by every generation; a no-op
    /// without an engine).
    pub workflow_wakeup: crate::workflows::engine::Wakeup,
    /// What starts workflow runs (the webhook's keys and quotas, the run queue), shared by every
    /// generation; `None` over a bare stack.
    pub workflow_triggers: Option<Arc<crate::workflows::triggers::Triggers>>,
    /// `workflowExecutorUrl`: the proxy of `/forest/_internal/executor/*`; `None` serves 404.
    pub workflow_executor: Option<Arc<executor::ExecutorProxy>>,
    /// The MCP server and its OAuth authorization server, shared by every generation; `None`
    /// when it is not mounted.
    pub mcp: Option<Arc<crate::mcp::Mcp>>,
    /// This generation's plugin applications (those applied by `use` included), for their
    /// calls, errors and time on the console's plugins page.
    pub plugins: Arc<Vec<Arc<crate::plugins::Plugin>>>,
    /// What rebuilds the generation (the console's reload button); unset over a bare stack.
    pub reloader: Reloader,
    /// Serving or draining (`/readyz`), the same for every generation of the process.
    pub lifecycle: Arc<crate::health::Lifecycle>,
    /// The bearer token `/metrics` requires (`metricsToken`), if any.
    pub metrics_token: Option<crate::config::Secret>,
}

/// Workflow step handlers by (plugin, handler name).
pub use crate::customizer::WorkflowSteps;

/// Handlers read the operations' services (`state.datasource`, `state.permissions`…) through
/// the state, as they did before those moved to `ops`.
impl std::ops::Deref for AppState {
    type Target = Ops;

    fn deref(&self) -> &Ops {
        &self.ops
    }
}

/// Setting a service while the state is built (`state.permissions = …`): the operations are
/// not shared yet then, so nothing is cloned.
impl std::ops::DerefMut for AppState {
    fn deref_mut(&mut self) -> &mut Ops {
        Arc::make_mut(&mut self.ops)
    }
}

/// The workflow engine loads the served generation's operations at each step.
impl crate::ops::Generations for arc_swap::ArcSwap<AppState> {
    fn current(&self) -> Arc<Ops> {
        Arc::clone(&self.load().ops)
    }
}

impl AppState {
    /// The state of a server with these HTTP settings.
    pub fn new(datasource: Arc<dyn DataSource>, session: SessionKey, http: &HttpConfig) -> Self {
        let mut ops = Ops::new(datasource, http.max_page_size);
        ops.limit_export_size = http.limit_export_size;
        Self {
            ops: Arc::new(ops),
            session,
            mount_path: http.mount_path(),
            // A limit beyond the address space cannot be reached anyway.
            json_limit: usize::try_from(http.json_limit).unwrap_or(usize::MAX),
            customize_error_message: http.customize_error_message.clone(),
            use_unsafe_action_endpoint: false,
            cors_allowed_origins: http.cors_allowed_origins.clone(),
            approvals: ApprovalSettings::default(),
            liana: None,
            login: None,
            tokens: None,
            rate_limits: Arc::new(ratelimit::RateLimits::default()),
            workflow_wakeup: crate::workflows::engine::Wakeup::default(),
            workflow_triggers: None,
            workflow_executor: None,
            mcp: None,
            plugins: Arc::default(),
            reloader: Arc::default(),
            lifecycle: Arc::default(),
            metrics_token: http.metrics_token.clone(),
        }
    }

    /// Whether a browser request from `origin` may carry credentials (`corsAllowedOrigins`).
    pub fn cors_allows_credentials(&self, origin: &axum::http::HeaderValue) -> bool {
        let origin = origin.as_bytes();
        self.cors_allowed_origins
            .iter()
            .any(|allowed| allowed == "*" || allowed.as_bytes().eq_ignore_ascii_case(origin))
    }
}

/// Shared handle to the state, as handlers receive it.
pub type SharedState = Arc<AppState>;

/// Builds and installs a new generation; implemented by the composition root (`app`).
#[async_trait::async_trait]
pub trait Reload: Send + Sync {
    /// Loads every plugin and builds the stack beside the served one, then swaps it in. On error
    /// the served generation is untouched and the message says why.
    async fn reload(&self) -> Result<ReloadReport, String>;
}

/// What a successful reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// Plugins in the new generation.
    pub plugins: usize,
    /// Customizations they declared.
    pub customizations: usize,
    /// Time from the request to the swap.
    pub millis: u64,
    /// The actions this reload added that no role may trigger (`collection.action`): until
    /// someone grants them, everyone gets 403 on them.
    pub untriggerable: Vec<String>,
    /// The changed plugins this generation serves on quickly compiled (Winch) code, until their
    /// Cranelift code, compiled in the background, is swapped in (`plugins::tiers`).
    pub quick: Vec<String>,
    /// Each plugin file of the new generation with its language (`rust`, `python`…).
    pub languages: std::collections::BTreeMap<String, String>,
}

/// Where a generation finds what rebuilds it (the console's reload button): shared by every
/// generation, set once the server runs (the rebuilder is made after the first generation).
pub type Reloader = Arc<std::sync::OnceLock<std::sync::Weak<dyn Reload>>>;

/// Rebuilds through `reloader`, if the server set one.
pub async fn reload_with(reloader: &Reloader) -> Option<Result<ReloadReport, String>> {
    let reload = reloader.get()?.upgrade()?;
    Some(reload.reload().await)
}
