//! Canopy's store and the permission service built from the configuration: one per process,
//! shared by every generation of the served stack.

use std::sync::Arc;

use anyhow::Context as _;

use crate::agent::schema_file::SchemaFile;
use crate::auth::login::Login;
use crate::auth::tokens::TokenVerifier;
use crate::auth::{CachePolicy, Permissions};
use crate::config::Config;
use crate::customizer::{AuditRecorder, AuditTrail};
use crate::datasource::DataSourceSchema;
use crate::http::executor::ExecutorProxy;
use crate::http::liana::LianaServer;
use crate::http::ratelimit::RateLimits;
use crate::platform::audit::AuditStore;
use crate::platform::remote::{Probe, RemoteSource};
use crate::platform::{ActivityLog, PermissionSource, Store, bootstrap};
use crate::workflows::triggers::Triggers;

/// The store and the permission checks fed from it (or from a remote permission server).
#[derive(Clone, Debug)]
pub struct Platform {
    pub store: Store,
    pub permissions: Arc<Permissions>,
    /// This instance as the permission server of other agents (`/liana/…`): only when its
    /// permissions come from its own store, since it would otherwise serve documents it does
    /// not apply.
    pub liana: Option<Arc<LianaServer>>,
    /// The permission server read instead of the store (`--server-url`), if any.
    pub remote: Option<Arc<RemoteSource>>,
    /// Sign-in over the store: its rate limits and OpenID provider outlive plugin reloads.
    pub login: Arc<Login>,
    /// The activity logger (`activityLogs`): one buffer and writer for every generation, so a
    /// reload neither loses nor duplicates entries; flushed at shutdown.
    pub activity: ActivityLog,
    /// Where the audit trail is kept (`auditTrail`): Canopy's store or its own database.
    pub audit: Option<Arc<AuditStore>>,
    /// The public API's application tokens (their cache outlives plugin reloads).
    pub tokens: Arc<TokenVerifier>,
    /// The public API's rate limits: a reload must not hand every client a fresh quota.
    pub rate_limits: Arc<RateLimits>,
    /// Wakes the workflow engine (here, and on PostgreSQL other instances) when runs are queued.
    pub workflow_wakeup: crate::workflows::engine::Wakeup,
    /// What starts workflow runs: webhook keys and quotas, the run queue.
    pub triggers: Arc<Triggers>,
    /// The proxy to `workflowExecutorUrl`, when set.
    pub executor: Option<Arc<ExecutorProxy>>,
    /// The MCP server (`--mcp`): its token keys, rate limits and uploads outlive reloads.
    pub mcp: Option<Arc<crate::mcp::Mcp>>,
    /// What rebuilds the generation, for the console's reload button: set when the server runs.
    pub reloader: crate::state::Reloader,
    /// Serving or draining: `/readyz` of every generation reads it, SIGTERM sets it.
    pub lifecycle: Arc<crate::health::Lifecycle>,
}

impl Platform {
    /// Opens (and migrates) the store of `config.platform`, and the permission service over it.
    pub async fn open(config: &Config) -> anyhow::Result<Self> {
        let settings = &config.platform;
        let store = Store::open(
            &settings.state_url,
            &settings.project,
            &settings.environment,
        )
        .await
        .context("opening Canopy's store (--state-url)")?;
        // Changes made by `canopy users|permissions …` or another instance take effect here too.
        store.watch_changes(std::time::Duration::from_secs(2));
        // On PostgreSQL, other instances' changes arrive at once through `LISTEN`.
        store.listen_changes(&settings.state_url);
        // The store stays open in remote mode: it holds Canopy's own data (approvals, logs).
        let (source, liana, remote): (Arc<dyn PermissionSource>, _, _) = match &settings.server_url
        {
            Some(url) => {
                let remote = Arc::new(remote_source(config, url).await?);
                (Arc::clone(&remote) as _, None, Some(remote))
            }
            None => (
                Arc::new(store.clone()),
                Some(LianaServer::with_no_code_actions(
                    store.clone(),
                    config.auth.env_secret.expose(),
                    config.experimental.clone(),
                )),
                None,
            ),
        };
        let mut permissions = Permissions::new(
            source,
            CachePolicy::new(
                config.permissions.instant_cache_refresh,
                config.permissions.cache_duration,
            ),
        );
        permissions.skip_relation_read_permissions =
            config.permissions.skip_relation_read_permissions;
        permissions.strict_scopes = config.permissions.strict_scopes;
        let login = Login::new(
            &config.login,
            config.auth.auth_secret.expose(),
            &config.http.mount_path(),
            store.clone(),
        )
        .map_err(anyhow::Error::msg)?;
        let activity = if settings.activity_logs {
            ActivityLog::start(store.clone())
        } else {
            ActivityLog::disabled()
        };
        let audit = match &config.audit_trail {
            None => None,
            Some(trail) => Some(Arc::new(match &trail.database_url {
                None => AuditStore::in_store(&store),
                Some(url) => AuditStore::open(url, &settings.project, &settings.environment)
                    .await
                    .context("opening the audit trail's database (auditTrail.databaseUrl)")?,
            })),
        };
        let workflow_wakeup = crate::workflows::engine::Wakeup::new();
        workflow_wakeup.announce(&store);
        let triggers = Arc::new(Triggers::new(
            store.clone(),
            &config.triggers,
            config.auth.auth_secret.expose(),
            config.login.public_url.clone(),
            activity.clone(),
        ));
        let executor = match &config.workflow_executor_url {
            Some(url) => Some(Arc::new(
                ExecutorProxy::new(url).map_err(anyhow::Error::msg)?,
            )),
            None => None,
        };
        // Runs queued by triggers (batched, here or on another instance through NOTIFY) wake
        // the engine's workers.
        let queued = triggers.queued_signal();
        let wakeup = workflow_wakeup.clone();
        tokio::spawn(async move {
            loop {
                queued.notified().await;
                wakeup.notify();
            }
        });
        let mcp = config.mcp.clone().map(|settings| {
            let mcp = crate::mcp::Mcp::new(
                settings,
                config.login.public_url.clone(),
                config.auth.auth_secret.expose(),
                store.clone(),
            );
            match &mcp.uploads {
                Some(uploads) if uploads.in_memory() => tracing::warn!(
                    "MCP file uploads are kept in this process's memory: with several instances \
                     behind a balancer, use a PostgreSQL store (--state-url) or set \
                     --mcp-upload-dir to a directory they share"
                ),
                Some(uploads) => {
                    tracing::info!(kept_in = uploads.kept_in(), "MCP file uploads are shared");
                }
                None => {}
            }
            Arc::new(mcp)
        });
        Ok(Self {
            mcp,
            workflow_wakeup,
            executor,
            triggers,
            activity,
            tokens: Arc::new(TokenVerifier::new(store.clone())),
            rate_limits: Arc::new(RateLimits::new(&config.rate_limit).shared_in(&store)),
            store,
            permissions: Arc::new(permissions),
            liana,
            remote,
            login: Arc::new(login),
            audit,
            reloader: Arc::default(),
            lifecycle: Arc::default(),
        })
    }

    /// The audit layer's settings for the stack, when the trail is on.
    pub fn audit_trail(&self, config: &Config) -> Option<AuditTrail> {
        let store = self.audit.as_ref()?;
        Some(AuditTrail {
            recorder: Arc::clone(store) as Arc<dyn AuditRecorder>,
            critical: config.audit_trail.as_ref().is_none_or(|t| t.critical),
        })
    }

    /// The server has stopped: writes the activity entries still buffered.
    pub async fn flush_activity(&self) {
        self.activity.flush().await;
    }

    /// The server is stopping: ends the event streams this instance serves, which would
    /// otherwise hold the graceful shutdown open.
    pub fn close_event_streams(&self) {
        if let Some(liana) = &self.liana {
            liana.close_event_streams();
        }
    }

    /// Applies the permissions file (`permissionsFile`, see `admin::startup`), then gives a
    /// fresh store its first admin and Admin rights (see `platform::bootstrap`), printing how to
    /// sign in when it created the admin.
    pub async fn bootstrap(
        &self,
        config: &Config,
        schema: &DataSourceSchema,
    ) -> anyhow::Result<()> {
        if let Some(remote) = &self.remote {
            // Users and rights live on the permission server: a local admin would be one
            // nobody's token names. The server gets the schema, as the agent's does.
            send_schema(config, schema, remote).await;
            return Ok(());
        }
        super::admin::startup(&self.store, config, schema)
            .await
            .context("applying the permissions file")?;
        let email = std::env::var("CANOPY_ADMIN_EMAIL")
            .unwrap_or_else(|_| bootstrap::DEFAULT_ADMIN_EMAIL.to_owned());
        let password = std::env::var("CANOPY_ADMIN_PASSWORD").ok();
        let done = bootstrap::bootstrap(&self.store, &email, password.as_deref())
            .await
            .context("creating the first admin")?;
        if let Some(admin) = &done.first_admin {
            // Printed once, to the operator's terminal (stderr: stdout says where it serves);
            // never logged.
            eprint!(
                "{}",
                super::admin::sign_in_instructions(
                    admin,
                    password.is_some(),
                    &format!("http://{}", config.http.listen)
                )
            );
        }
        if done.granted_admin {
            tracing::info!(
                role = bootstrap::ADMIN_ROLE,
                "environment permissions created: the Admin role has every right"
            );
        }
        Ok(())
    }
}

/// The permission server of `--server-url`, checked once: a refused env secret stops the start
/// (nothing could ever be allowed), an unreachable server is logged and checks fail closed
/// (503) until it answers. With `instantCacheRefresh`, its events refresh the cached documents.
async fn remote_source(config: &Config, url: &str) -> anyhow::Result<RemoteSource> {
    let remote = RemoteSource::new(url, config.auth.env_secret.expose())
        .context("reading permissions from --server-url")?;
    match remote.probe().await {
        Probe::Ready => {
            tracing::info!(
                server = remote.server(),
                "permissions come from the permission server"
            );
        }
        Probe::Refused(error) => {
            anyhow::bail!(
                "the permission server {} refused this instance's env secret: {error}",
                remote.server()
            )
        }
        Probe::Unavailable(error) => tracing::error!(
            server = remote.server(),
            "{error}; every permission check is refused until it answers"
        ),
    }
    if config.permissions.instant_cache_refresh {
        remote
            .subscribe_to_events()
            .context("following the permission server's events")?;
    }
    Ok(remote)
}

/// The schema upload of the agent's start (`skipSchemaUpdate` skips it): the file as written or,
/// in production, as read. A failure is logged, not fatal: the upload informs the server, the
/// permission checks do not depend on it.
async fn send_schema(config: &Config, schema: &DataSourceSchema, remote: &RemoteSource) {
    if config.schema.skip_schema_update {
        return;
    }
    let file = if config.is_production && !config.experimental.webhook_custom_actions {
        SchemaFile::read(&config.schema.path, super::schema_meta(config))
            .map_err(anyhow::Error::from)
    } else {
        super::build_schema_file(config, schema)
    };
    let file = match file {
        Ok(file) => file,
        Err(error) => {
            tracing::error!("the schema cannot be sent to the permission server: {error:#}");
            return;
        }
    };
    match remote.send_schema(&file).await {
        Ok(true) => tracing::info!(hash = file.hash(), "schema sent to the permission server"),
        Ok(false) => tracing::info!(
            hash = file.hash(),
            "schema unchanged on the permission server"
        ),
        Err(error) => tracing::error!("sending the schema to the permission server: {error}"),
    }
}
