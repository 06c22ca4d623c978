//! The served generation and its hot swap: loads the plugin set, builds the customized stack
//! over the base datasource and the router over that, and rebuilds all three beside the served
//! ones on a reload (SIGHUP, `canopy reload` through the admin route, or `--watch`), swapping
//! them in only when every plugin loaded and the stack was built.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use arc_swap::ArcSwap;
use async_trait::async_trait;
use axum::Router;

use super::platform::Platform;
use super::{customize, prepare_schema};
use crate::auth::SessionKey;
use crate::config::Config;
use crate::datasource::DataSource;
use crate::http::reload::{Generation, Reload, ReloadReport};
use crate::http::{self, AppState};
use crate::plugins::{PluginSet, Runtime};

/// The served stack and what rebuilds it.
pub struct Served {
    config: Config,
    base: Arc<dyn DataSource>,
    /// `None` without a plugin directory: reloads then only rebuild the stack.
    runtime: Option<Runtime>,
    current: Generation,
    /// The state of the served generation, for work that runs outside a request (the workflow
    /// engine): it loads the current one at each step, as a request does at its arrival.
    state: Arc<ArcSwap<AppState>>,
    /// The plugins of the served generation, for their stats at swap and shutdown.
    plugins: Mutex<Arc<PluginSet>>,
    /// One reload at a time: two concurrent ones would race to swap.
    reloading: tokio::sync::Mutex<()>,
    /// Canopy's store and the permission checks, the same for every generation.
    platform: Platform,
    /// This server, for the background work a reload leaves (moving plugins compiled quickly
    /// to Cranelift's code); set by the methods that take it as an `Arc`.
    me: std::sync::OnceLock<std::sync::Weak<Served>>,
    /// The background move of the last reload's quick plugins to Cranelift's code, if any.
    optimizing: Mutex<Option<tokio::task::JoinHandle<Optimized>>>,
    /// This process among the instances sharing a PostgreSQL store: its own reload
    /// announcements come back to it, and are ignored.
    instance: uuid::Uuid,
}

/// The PostgreSQL channel on which an instance announces a reload asked of it (`canopy reload`,
/// the console's button, SIGHUP), so that every instance of the environment reloads too.
const RELOAD_CHANNEL: &str = "canopy_reload";

/// How the background move of quickly compiled plugins to Cranelift's code ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Optimized {
    /// The generation running Cranelift's code serves.
    Swapped,
    /// Plugin or workflow files changed since the reload: the next reload loads them.
    FilesChanged,
    /// The Cranelift compile or the swap failed (logged); the quick code keeps serving.
    Failed(String),
    /// The server was dropped first.
    Stopped,
}

impl Served {
    /// Loads the plugins of `config.plugin_dir` (a failure names the plugin and stops the start)
    /// and builds the first generation over `base`.
    pub async fn start(config: Config, base: Arc<dyn DataSource>) -> anyhow::Result<Self> {
        let runtime = match &config.plugin_dir {
            Some(_) => Some(runtime()?),
            None => None,
        };
        let platform = Platform::open(&config).await?;
        let built = build(&config, &base, runtime.as_ref(), &platform).await?;
        platform.bootstrap(&config, built.stack.schema()).await?;
        load_workflows(&config, &platform, &built).await?;
        let served = Self {
            config,
            base,
            runtime,
            current: Arc::new(ArcSwap::from_pointee(built.router)),
            state: Arc::new(ArcSwap::new(built.state)),
            plugins: Mutex::new(Arc::new(built.plugins)),
            reloading: tokio::sync::Mutex::new(()),
            platform,
            me: std::sync::OnceLock::new(),
            optimizing: Mutex::new(None),
            instance: uuid::Uuid::new_v4(),
        };
        // The first generation compiled with Cranelift; from now on a changed plugin serves on
        // Winch's code first (plugins::tiers).
        if let Some(runtime) = &served.runtime {
            runtime.compile_quickly_first();
        }
        Ok(served)
    }

    /// The state of the served generation, followed across reloads.
    pub fn state(&self) -> Arc<ArcSwap<AppState>> {
        Arc::clone(&self.state)
    }

    /// Canopy's store and permission checks.
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// The service to serve: the admin reload route, and every other request handed to the
    /// generation current at its arrival.
    pub fn router(self: &Arc<Self>) -> Router {
        let _ = self.me.set(Arc::downgrade(self));
        let reload: Arc<dyn Reload> = Arc::clone(self) as Arc<dyn Reload>;
        // Set once: a second router over the same server finds it set already.
        let _ = self.platform.reloader.set(Arc::downgrade(&reload));
        http::reload::router(
            Arc::clone(&self.current),
            &self.config.http.prefix,
            self.config.auth.env_secret.expose(),
            Arc::clone(self) as Arc<dyn Reload>,
        )
    }

    /// The plugins of the served generation.
    pub fn plugins(&self) -> Arc<PluginSet> {
        Arc::clone(&self.plugins.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Logs each plugin's calls, errors and time (at shutdown).
    pub fn log_stats(&self) {
        self.plugins().log_stats();
    }

    /// Reloads when SIGHUP arrives, until the process ends.
    pub fn reload_on_sighup(self: &Arc<Self>) {
        let _ = self.me.set(Arc::downgrade(self));
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::hangup()) {
                Ok(mut hangup) => {
                    let served = Arc::clone(self);
                    tokio::spawn(async move {
                        while hangup.recv().await.is_some() {
                            tracing::info!("SIGHUP: reloading the plugins");
                            // The outcome is logged by `reload`.
                            let _ = served.reload().await;
                        }
                    });
                }
                Err(error) => tracing::error!(%error, "cannot listen for SIGHUP"),
            }
        }
    }

    /// `--watch`: polls the plugin directory and the workflows folder, and reloads once a change
    /// has settled.
    pub fn reload_on_change(self: &Arc<Self>) {
        let _ = self.me.set(Arc::downgrade(self));
        let watched: Vec<(PathBuf, &'static [&'static str])> = [
            (self.config.plugin_dir.clone(), PLUGIN_FILES),
            (self.config.workflows_dir.clone(), WORKFLOW_FILES),
        ]
        .into_iter()
        .filter_map(|(dir, extensions)| Some((dir?, extensions)))
        .collect();
        if watched.is_empty() {
            tracing::warn!(
                "--watch without a plugin directory or workflows folder: nothing to watch"
            );
            return;
        }
        let served = Arc::clone(self);
        for (dir, _) in &watched {
            tracing::info!(dir = %dir.display(), "watching for changes");
        }
        let look = move || -> Vec<_> {
            watched
                .iter()
                .flat_map(|(dir, extensions)| fingerprint(dir, extensions))
                .collect()
        };
        tokio::spawn(async move {
            let mut seen = look();
            loop {
                tokio::time::sleep(POLL).await;
                let mut now = look();
                if now == seen {
                    continue;
                }
                // Debounce: a copy or a build writes in several steps; wait until two readings
                // in a row agree before loading.
                loop {
                    tokio::time::sleep(SETTLE).await;
                    let again = look();
                    if again == now {
                        break;
                    }
                    now = again;
                }
                seen = now;
                tracing::info!("watched files changed: reloading");
                let _ = served.reload().await;
            }
        });
    }
}

/// How often `--watch` looks at the directory, and how long a change must stay unchanged.
const POLL: Duration = Duration::from_millis(500);
const SETTLE: Duration = Duration::from_millis(250);

#[async_trait]
impl Reload for Served {
    /// Reloads here, then asks the other instances on the same PostgreSQL store to reload too.
    async fn reload(&self) -> Result<ReloadReport, String> {
        let report = self.reload_here().await;
        if report.is_ok() {
            self.announce_reload().await;
        }
        report
    }
}

impl Served {
    /// The environment's reload announcements: `project/environment/instance`.
    fn reload_scope(&self) -> String {
        format!(
            "{}/{}",
            self.platform.store.project(),
            self.platform.store.environment()
        )
    }

    /// On a PostgreSQL store, `NOTIFY`s the other instances of the environment (a failure is
    /// logged: this instance did reload).
    async fn announce_reload(&self) {
        if self.platform.store.dialect() != crate::platform::store::Dialect::Postgres {
            return;
        }
        let payload = format!("{}/{}", self.reload_scope(), self.instance);
        let sent = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(RELOAD_CHANNEL)
            .bind(&payload)
            .execute(self.platform.store.pool())
            .await;
        if let Err(error) = sent {
            tracing::warn!(%error, "the other instances could not be told to reload");
        }
    }

    /// On a PostgreSQL store, reloads whenever another instance of the environment announces
    /// that it reloaded (without announcing again). Runs until the server is dropped.
    pub fn reload_on_announcement(self: &Arc<Self>) {
        let _ = self.me.set(Arc::downgrade(self));
        if self.platform.store.dialect() != crate::platform::store::Dialect::Postgres {
            return;
        }
        let scope = format!("{}/", self.reload_scope());
        let mine = format!("{scope}{}", self.instance);
        let served = Arc::downgrade(self);
        crate::platform::store::follow_channel(
            self.config.platform.state_url.clone(),
            RELOAD_CHANNEL,
            "reloads",
            crate::platform::store::dropped(served.clone()),
            move |heard| {
                // A reload missed while the connection was down is not replayed: the next one
                // brings the instance up to date.
                let announced = match heard {
                    crate::platform::store::Heard::Payload(payload) => {
                        payload.starts_with(&scope) && payload != mine
                    }
                    crate::platform::store::Heard::Reconnected => false,
                };
                let served = served.upgrade();
                async move {
                    let Some(served) = served else {
                        return false;
                    };
                    if announced {
                        tracing::info!("another instance reloaded: reloading");
                        // The outcome is logged by `reload_here`.
                        let _ = served.reload_here().await;
                    }
                    true
                }
            },
        );
    }

    /// Rebuilds the plugin set and the stack in this process only.
    async fn reload_here(&self) -> Result<ReloadReport, String> {
        let _one_at_a_time = self.reloading.lock().await;
        // Read before the files are: a file changed during the load shows as a change later.
        let files = self.watched_files();
        let report = self.reload_locked().await;
        crate::metrics::metrics().reloaded(report.is_ok());
        let report = report?;
        if !report.quick.is_empty() {
            self.optimize_in_background(self.plugins().quick(), files);
        }
        Ok(report)
    }
}

impl Served {
    /// The plugin and workflow files as `--watch` sees them (name, size, modification time).
    fn watched_files(&self) -> Vec<WatchedFile> {
        [
            (&self.config.plugin_dir, PLUGIN_FILES),
            (&self.config.workflows_dir, WORKFLOW_FILES),
        ]
        .into_iter()
        .filter_map(|(dir, extensions)| Some(fingerprint(dir.as_ref()?, extensions)))
        .flatten()
        .collect()
    }

    /// Compiles the `quick` plugin files with Cranelift off the request path, then swaps in a
    /// generation running that code: a reload that compiles nothing, since every file's
    /// component is then in memory. Skipped when the files changed since the generation serving
    /// Winch's code was read (`files`): a reload would then load what an operator has not asked
    /// to load yet, and the next reload compiles the new files anyway.
    fn optimize_in_background(&self, quick: Vec<(String, PathBuf)>, files: Vec<WatchedFile>) {
        let (Some(me), Some(runtime)) = (self.me.get().cloned(), self.runtime.clone()) else {
            return;
        };
        let names = quick
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        tracing::info!(
            plugins = %names,
            "changed plugins serve on quickly compiled (Winch) code; compiling Cranelift's in \
             the background"
        );
        let task = tokio::spawn(async move {
            let started = Instant::now();
            for (name, path) in &quick {
                if let Err(error) = runtime.optimize(name, path).await {
                    tracing::warn!(
                        plugin = %name,
                        "the plugin keeps its quickly compiled code until the next reload: {error}"
                    );
                    return Optimized::Failed(error);
                }
            }
            let Some(served) = me.upgrade() else {
                return Optimized::Stopped;
            };
            let _one_at_a_time = served.reloading.lock().await;
            if served.watched_files() != files {
                tracing::info!(
                    plugins = %names,
                    "plugin or workflow files changed since the last reload: their Cranelift \
                     code is swapped in by the next reload"
                );
                return Optimized::FilesChanged;
            }
            let compiled_ms = started.elapsed().as_millis() as u64;
            match served.reload_locked().await {
                Ok(report) => {
                    tracing::info!(
                        plugins = %names,
                        compile_ms = compiled_ms,
                        swap_ms = report.millis,
                        "plugins now serve on Cranelift's code"
                    );
                    Optimized::Swapped
                }
                Err(error) => {
                    tracing::warn!(
                        plugins = %names,
                        "the plugins keep their quickly compiled code: {error}"
                    );
                    Optimized::Failed(error)
                }
            }
        });
        *self.optimizing.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    }

    /// Waits for the background move of the last reload's quick plugins to Cranelift's code;
    /// `None` when none was started (no plugin was compiled quickly), or it was awaited already.
    pub async fn optimized(&self) -> Option<Optimized> {
        let task = self
            .optimizing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(
            task.await
                .unwrap_or_else(|e| Optimized::Failed(e.to_string())),
        )
    }

    /// Builds a generation from the files as they are and swaps it in (the caller holds
    /// `reloading`).
    async fn reload_locked(&self) -> Result<ReloadReport, String> {
        let started = Instant::now();
        let built = match build(
            &self.config,
            &self.base,
            self.runtime.as_ref(),
            &self.platform,
        )
        .await
        {
            // The workflows folder is checked against the new stack and saved before the swap:
            // a bad file fails the reload as a bad plugin does.
            Ok(built) => load_workflows(&self.config, &self.platform, &built)
                .await
                .map(|()| built),
            Err(error) => Err(error),
        };
        match built {
            Ok(Built {
                router,
                state,
                plugins,
                customizations,
                ..
            }) => {
                let previous = self.state.load_full();
                let untriggerable = self
                    .untriggerable_new_actions(
                        previous.datasource.schema(),
                        state.datasource.schema(),
                    )
                    .await;
                self.current.store(Arc::new(router));
                self.state.store(state);
                let count = plugins.plugins.len();
                let old = std::mem::replace(
                    &mut *self.plugins.lock().unwrap_or_else(|p| p.into_inner()),
                    Arc::new(plugins),
                );
                // The old plugins' totals, before their last requests drop them.
                old.log_stats();
                let millis = started.elapsed().as_millis() as u64;
                tracing::info!(
                    plugins = count,
                    customizations,
                    duration_ms = millis,
                    "plugins reloaded: new requests use the new stack"
                );
                Ok(ReloadReport {
                    plugins: count,
                    customizations,
                    millis,
                    untriggerable,
                    quick: self
                        .plugins()
                        .quick()
                        .into_iter()
                        .map(|(name, _)| name)
                        .collect(),
                    languages: self.plugins().languages(),
                })
            }
            Err(error) => {
                let message = format!("{error:#}");
                tracing::error!(
                    duration_ms = started.elapsed().as_millis() as u64,
                    "reload failed, still serving the previous plugins and workflows: {message}"
                );
                Err(message)
            }
        }
    }
}

impl Served {
    /// The actions `new` serves and `old` did not that no role may trigger, each logged as a
    /// warning: a plugin's new action is otherwise a silent 403 for everyone, its author
    /// included (a store whose rights are the `"*"` wildcard has none). Rights kept by another
    /// permission server (`--server-url`) are not looked at.
    async fn untriggerable_new_actions(
        &self,
        old: &crate::datasource::DataSourceSchema,
        new: &crate::datasource::DataSourceSchema,
    ) -> Vec<String> {
        if self.platform.remote.is_some() {
            return Vec::new();
        }
        let added: Vec<(&str, &str)> = new
            .collections
            .iter()
            .flat_map(|(collection, schema)| {
                schema
                    .actions
                    .keys()
                    .map(move |a| (collection.as_str(), a.as_str()))
            })
            .filter(|(collection, action)| {
                !old.collections
                    .get(*collection)
                    .is_some_and(|c| c.actions.contains_key(*action))
            })
            .collect();
        if added.is_empty() {
            return Vec::new();
        }
        let document = match self.platform.store.environment_document().await {
            Ok(document) => document,
            Err(error) => {
                tracing::warn!(%error, "cannot read the permissions to check the new actions");
                return Vec::new();
            }
        };
        document
            .untriggerable(added)
            .into_iter()
            .map(|(collection, action)| {
                tracing::warn!(
                    collection = %collection,
                    action = %action,
                    "the reload added the action {action:?} of {collection:?}, which no role may \
                     trigger: grant it (`canopy permissions grant --role ROLE {collection} \
                     trigger --action '{action}'`, or '*' for every action)"
                );
                format!("{collection}.{action}")
            })
            .collect()
    }
}

/// The engine, with compiled components cached under the user's cache directory; without a
/// usable cache directory plugins are compiled at every start (slower, still correct).
fn runtime() -> anyhow::Result<Runtime> {
    let dir = cache_dir();
    if let Some(dir) = &dir {
        match Runtime::new(Some(dir)) {
            Ok(runtime) => return Ok(runtime),
            Err(error) => tracing::warn!("plugin compile cache disabled: {error}"),
        }
    }
    Runtime::new(None).map_err(anyhow::Error::msg)
}

/// `$CANOPY_PLUGIN_CACHE_DIR`, else `$XDG_CACHE_HOME/canopy/plugins`, else
/// `~/.cache/canopy/plugins`.
fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CANOPY_PLUGIN_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let dir = base.join("canopy").join("plugins");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// One generation, as `build` makes it.
struct Built {
    router: Router,
    state: Arc<AppState>,
    plugins: PluginSet,
    /// How many customizations the plugins declared.
    customizations: usize,
    stack: Arc<dyn DataSource>,
}

/// One generation: the plugin set, the stack over `base` with its customizations, the schema
/// file, and the router over the stack with its state.
async fn build(
    config: &Config,
    base: &Arc<dyn DataSource>,
    runtime: Option<&Runtime>,
    platform: &Platform,
) -> anyhow::Result<Built> {
    let plugins = match (runtime, &config.plugin_dir) {
        (Some(runtime), Some(dir)) => {
            PluginSet::load(runtime, dir, base.schema(), &platform.permissions)
                .await
                .map_err(anyhow::Error::msg)
                .context("loading the plugins")?
        }
        _ => PluginSet::empty(),
    };
    let customizations = plugins
        .customizations(base.schema())
        .map_err(anyhow::Error::msg)
        .context("reading the plugins' customizations")?;
    let count = customizations.len();
    // Before the stack takes the customizations: a duplicate step fails this generation's load.
    let workflow_steps = crate::customizer::workflow_steps(&customizations)
        .map_err(anyhow::Error::msg)
        .context("reading the plugins' workflow steps")?;
    let mut customizations = customizations;
    customizations.extend(
        crate::no_code::customizations(
            &config.experimental.actions,
            &crate::no_code::stored(&platform.store, &config.experimental).await,
            base.schema(),
        )
        .map_err(anyhow::Error::msg)?,
    );
    customizations.extend(record_change_hooks(base, platform).await);
    let stack = customize(
        config,
        Arc::clone(base),
        customizations,
        platform.audit_trail(config),
    )?;
    // Parsed scopes are typed against a schema: forget them once the new one exists.
    platform.permissions.forget_parsed_scopes();
    prepare_schema(config, stack.schema())?;
    let mut state = AppState::new(
        Arc::clone(&stack),
        SessionKey::new(config.auth.auth_secret.expose()),
        &config.http,
    );
    state.use_unsafe_action_endpoint = config.actions.use_unsafe_action_endpoint;
    state.approvals = http::ApprovalSettings::new(
        config.auth.env_secret.expose(),
        config.actions.max_records_for_approval.into(),
    );
    state.permissions = Arc::clone(&platform.permissions);
    state.store = Some(platform.store.clone());
    state.liana = platform.liana.clone();
    state.login = Some(Arc::clone(&platform.login));
    state.activity = platform.activity.clone();
    state.audit = platform.audit.clone();
    state.tokens = Some(Arc::clone(&platform.tokens));
    state.rate_limits = Arc::clone(&platform.rate_limits);
    state.plugin_names = Arc::new(
        plugins
            .plugins
            .iter()
            .map(|p| p.info.name.clone())
            .chain(
                state
                    .workflow_steps
                    .keys()
                    .map(|(plugin, _)| plugin.clone()),
            )
            .collect(),
    );
    state.workflow_wakeup = platform.workflow_wakeup.clone();
    state.workflow_triggers = Some(Arc::clone(&platform.triggers));
    state.workflow_executor = platform.executor.clone();
    state.mcp = platform.mcp.clone();
    state.workflow_steps = Arc::new(workflow_steps);
    state.dashboard = Arc::new(config.dashboard.clone());
    state.no_code = Arc::new(config.experimental.clone());
    state.plugins = Arc::new(plugins.applications());
    state.reloader = Arc::clone(&platform.reloader);
    state.lifecycle = Arc::clone(&platform.lifecycle);
    let state = Arc::new(state);
    Ok(Built {
        // The browser console is served beside the data routes, composed here so that the two
        // transports never import each other.
        router: http::router_with(Arc::clone(&state), crate::console::router(&state)),
        state,
        plugins,
        customizations: count,
        stack,
    })
}

/// Loads the workflows folder (`workflowsDir`) against the generation `built`: every file
/// checked against its schema, plugins and the store, then saved in one transaction (see
/// `workflows::files`). Nothing is saved when a file is bad, and the error names it.
async fn load_workflows(config: &Config, platform: &Platform, built: &Built) -> anyhow::Result<()> {
    let Some(dir) = &config.workflows_dir else {
        return Ok(());
    };
    let schema = crate::platform::declarative::SchemaView::served(built.stack.schema());
    let loaded = crate::workflows::files::load(
        &platform.store,
        dir,
        &schema,
        Some(built.state.plugin_names.as_ref().clone()),
    )
    .await
    .with_context(|| format!("loading the workflows folder {}", dir.display()))?;
    for change in &loaded.changes {
        tracing::info!(dir = %dir.display(), "{change}");
    }
    tracing::info!(
        dir = %dir.display(),
        files = loaded.files,
        changes = loaded.changes.len(),
        "workflows folder loaded"
    );
    Ok(())
}

/// The After hooks of the active workflows' record-change triggers, on the collections the
/// served datasource has (a workflow naming another collection starts nothing, and does not stop
/// the start). A store that cannot be read is logged: the stack is served without them.
async fn record_change_hooks(
    base: &Arc<dyn DataSource>,
    platform: &Platform,
) -> Vec<crate::customizer::Customization> {
    match crate::workflows::triggers::record_change::customizations(&platform.triggers).await {
        Ok(hooks) => hooks
            .into_iter()
            .filter(|hook| {
                hook.collection
                    .as_ref()
                    .is_some_and(|c| base.schema().collections.contains_key(c))
            })
            .collect(),
        Err(error) => {
            tracing::error!(%error, "the record-change triggers of workflows are not installed");
            Vec::new()
        }
    }
}

/// The files `--watch` follows in each folder, by extension.
const PLUGIN_FILES: &[&str] = &["wasm", "toml"];
const WORKFLOW_FILES: &[&str] = &["toml", "yaml", "yml"];

/// What `--watch` compares: the files of `dir` with one of `extensions` (each plugin file and its
/// settings, each workflow definition), by size and modification time.
/// A file as `--watch` compares it: path, size and modification time.
type WatchedFile = (PathBuf, u64, Option<SystemTime>);

fn fingerprint(dir: &Path, extensions: &[&str]) -> Vec<WatchedFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.path()
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| extensions.contains(&x))
        })
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((e.path(), meta.len(), meta.modified().ok()))
        })
        .collect();
    out.sort();
    out
}

/// `canopy reload`: asks the server listening on `address` to reload its plugins, through the
/// admin route with the env secret. Returns the server's answer (a JSON body).
pub async fn request_reload(
    address: &str,
    prefix: &str,
    env_secret: &str,
) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let path = http::reload::admin_path(prefix);
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("cannot reach Canopy on {address}"))?;
    // A bare HTTP/1.1 request: the route is local administration, no client library is needed.
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {env_secret}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(0);
    if status == 200 {
        Ok(body.trim().to_owned())
    } else {
        anyhow::bail!("{}", refusal(status, body.trim()))
    }
}

/// A refused or failed reload as a person reads it: the route answers a JSON object whose
/// `error` holds the message; printed as JSON text, its line breaks and quotes would show as
/// escapes. Any other body is shown as it is.
fn refusal(status: u16, body: &str) -> String {
    let detail = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|json| json.get("error")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| body.to_owned());
    if status == 422 {
        format!("reload failed, the server keeps its current plugins ({status}): {detail}")
    } else {
        format!("reload refused ({status}): {detail}")
    }
}

/// The target folder the demo builds its plugins in: the one the end-to-end tests' build script
/// (`tests/build.rs`) builds the same plugins in, so that after a test build the demo's build
/// is a no-op, and the README test starts the demo without compiling a plugin again.
fn plugins_target(root: &Path) -> std::path::PathBuf {
    root.join("target").join("plugins")
}

/// The checkout this binary was built from (where the demo's plugin sources are): the parent
/// of the host crate's folder.
fn checkout_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The shop demo's plugin in `language`: [`shop_plugin`] for Rust; [`ts_shop_plugin`] for
/// TypeScript; for Python, built from
/// `examples/shop/plugin-python` with its `build.sh` (componentize-py from `COMPONENTIZE_PY`, the
/// `PATH`, or the `target/componentize-py` venv the tests use) into `plugin_dir` as `shop.wasm`,
/// with the flattener beside it as for Rust.
pub fn shop_plugin_in(language: crate::typings::Language, plugin_dir: &Path) -> Result<(), String> {
    match language {
        crate::typings::Language::Rust => return shop_plugin(plugin_dir),
        crate::typings::Language::Ts => return ts_shop_plugin(plugin_dir),
        crate::typings::Language::Python => {}
    }
    let root = checkout_root();
    let script = root.join("examples/shop/plugin-python/build.sh");
    if !script.is_file() {
        return Err(format!(
            "its sources are not beside this binary ({} is missing)",
            script.display()
        ));
    }
    let want = crate::scaffold::COMPONENTIZE_PY;
    let venv = root.join("target/componentize-py/bin/componentize-py");
    let tool = std::env::var_os("COMPONENTIZE_PY")
        .map(std::path::PathBuf::from)
        .or_else(|| on_path("componentize-py"))
        .or_else(|| venv.is_file().then_some(venv))
        .ok_or_else(|| {
            format!(
                "componentize-py is not installed: `pip install componentize-py=={want}` (a \
                 virtualenv is fine), or set COMPONENTIZE_PY to its path"
            )
        })?;
    std::fs::create_dir_all(plugin_dir)
        .map_err(|e| format!("cannot create {}: {e}", plugin_dir.display()))?;
    eprintln!(
        "Building the Python shop plugin with {} (about 10 s) …",
        tool.display()
    );
    let status = std::process::Command::new("bash")
        .arg(&script)
        .arg(plugin_dir.join("shop.wasm"))
        .env("COMPONENTIZE_PY", &tool)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !status.success() {
        return Err(format!("{} failed ({status})", script.display()));
    }
    if let Err(why) = flattener_plugin(&root, plugin_dir) {
        eprintln!("Serving without the flattener: {why}");
    }
    Ok(())
}

/// The TypeScript shop plugin, built from `examples/shop/plugin-ts` with its `build.sh` (the
/// toolchain of `sdk/ts/node_modules`, which `npm ci` installs there) into `plugin_dir` as
/// `shop.wasm`, with the flattener beside it as for Rust.
fn ts_shop_plugin(plugin_dir: &Path) -> Result<(), String> {
    let root = checkout_root();
    let script = root.join("examples/shop/plugin-ts/build.sh");
    if !script.is_file() {
        return Err(format!(
            "its sources are not beside this binary ({} is missing)",
            script.display()
        ));
    }
    let sdk = root.join("sdk/ts");
    if !sdk
        .join("node_modules/@bytecodealliance/componentize-js")
        .is_dir()
    {
        return Err(format!(
            "the TypeScript toolchain is not installed: `npm ci` in {} (Node.js 20 or later)",
            sdk.display()
        ));
    }
    std::fs::create_dir_all(plugin_dir)
        .map_err(|e| format!("cannot create {}: {e}", plugin_dir.display()))?;
    eprintln!("Building the TypeScript shop plugin (about 10 s) …");
    let status = std::process::Command::new("bash")
        .arg(&script)
        .arg(plugin_dir.join("shop.wasm"))
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !status.success() {
        return Err(format!("{} failed ({status})", script.display()));
    }
    if let Err(why) = flattener_plugin(&root, plugin_dir) {
        eprintln!("Serving without the flattener: {why}");
    }
    Ok(())
}

/// `program` in a folder of `PATH`, if it is there.
fn on_path(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// The shop demo's plugin, built from `examples/shop/plugin` when cargo can (a no-op when it is
/// up to date) and copied into `plugin_dir` as `shop.wasm`. `Err` says why the demo runs without
/// it (no wasm32-wasip2 target, no sources beside the binary).
pub fn shop_plugin(plugin_dir: &Path) -> Result<(), String> {
    let root = checkout_root();
    let example = root.join("examples").join("shop").join("plugin");
    let built = plugins_target(&root).join("wasm32-wasip2/release/shop_plugin.wasm");
    if example.join("Cargo.toml").is_file() {
        eprintln!("Building the shop plugin ({}) …", example.display());
        if !build_plugin(&example, &plugins_target(&root)) && !built.is_file() {
            return Err(
                "the shop plugin could not be built (`rustup target add wasm32-wasip2`, then \
                 `cargo build --target wasm32-wasip2 --release` in examples/shop/plugin)"
                    .to_owned(),
            );
        }
    }
    if !built.is_file() {
        return Err(format!(
            "the shop plugin is not built ({})",
            built.display()
        ));
    }
    std::fs::create_dir_all(plugin_dir)
        .and_then(|()| std::fs::copy(&built, plugin_dir.join("shop.wasm")))
        .map_err(|e| {
            format!(
                "cannot copy the shop plugin into {}: {e}",
                plugin_dir.display()
            )
        })?;
    // The flattener (plugins/flattener) with its demo options: customers.address as fields.
    if let Err(why) = flattener_plugin(&root, plugin_dir) {
        eprintln!("Serving without the flattener: {why}");
    }
    Ok(())
}

/// `cargo build --release --target wasm32-wasip2` of the plugin crate in `dir`; whether it
/// succeeded. The settings of a surrounding build are for the host (flags, and the lint wrapper
/// that CI's test build runs under), not for the plugin.
fn build_plugin(dir: &Path, target_dir: &Path) -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    std::process::Command::new(cargo)
        .current_dir(dir)
        .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
        .env("CARGO_TARGET_DIR", target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .status()
        .is_ok_and(|s| s.success())
}

/// Builds `plugins/flattener` like the shop plugin and copies it into `plugin_dir` as
/// `flattener.wasm` with its `flattener.toml` (the demo's options).
fn flattener_plugin(root: &Path, plugin_dir: &Path) -> Result<(), String> {
    let crate_dir = root.join("plugins").join("flattener");
    let built = plugins_target(root).join("wasm32-wasip2/release/flattener.wasm");
    if crate_dir.join("Cargo.toml").is_file() {
        build_plugin(&crate_dir, &plugins_target(root));
    }
    if !built.is_file() {
        return Err(format!("it is not built ({})", built.display()));
    }
    std::fs::copy(&built, plugin_dir.join("flattener.wasm"))
        .and_then(|_| {
            std::fs::copy(
                crate_dir.join("flattener.toml"),
                plugin_dir.join("flattener.toml"),
            )
        })
        .map(|_| ())
        .map_err(|e| format!("cannot copy it into {}: {e}", plugin_dir.display()))
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn a_refused_reload_shows_the_servers_message_not_its_json() {
        let body = r#"{"reloaded":false,"error":"loading the plugins: plugin `x`:\n  line two"}"#;
        assert_eq!(
            refusal(422, body),
            "reload failed, the server keeps its current plugins (422): loading the plugins: \
             plugin `x`:\n  line two"
        );
        assert_eq!(
            refusal(401, r#"{"error":"needs a token"}"#),
            "reload refused (401): needs a token"
        );
        assert_eq!(
            refusal(502, "Bad Gateway"),
            "reload refused (502): Bad Gateway"
        );
    }
}
