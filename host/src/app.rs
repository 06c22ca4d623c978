//! Composition root: builds the services from settings and runs the commands of the binary.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::{Value as Json, json};
use tokio::net::TcpListener;

use crate::agent::action::SchemaActions;
use crate::agent::schema_file::{Meta, SchemaFile};
use crate::config::Config;
use crate::customizer::{AuditTrail, Customization, StackOptions, build_stack_with};
use crate::datasource::sql::{Options, Pool, SqlDataSource};
use crate::datasource::{
    CompositeDataSource, DataSource, DataSourceSchema, FieldSchema, RelationSchema,
};
use crate::http::server::ServerLimits;

pub mod admin;
mod platform;
mod reload;
pub mod test_server;

pub use platform::Platform;

pub use reload::{Optimized, Served, request_reload, shop_plugin, shop_plugin_in};

/// Options of `canopy serve` that are not agent settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServeOptions {
    /// `--watch`: reload the plugins when the plugin directory changes (development).
    pub watch: bool,
}

/// `canopy serve`: connects every datasource, writes (or, in production, reads) the schema file,
/// and serves the `/forest` routes on `listener` until `shutdown` resolves; requests in flight
/// then finish before this returns.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve(config, listener, shutdown, ServeOptions::default()).await
}

/// [`run`] with the serve options: [`prepare`], then [`Ready::serve`].
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> anyhow::Result<()> {
    prepare(config)
        .await?
        .serve(listener, shutdown, options)
        .await
}

/// The first half of `canopy serve`: connects every datasource, loads the plugin directory (a
/// plugin that fails to load stops the start, named in the error), builds the customized stack
/// and writes the schema file. The binary listens and says it serves only once this succeeded,
/// so that no connection waits on a start that may still fail.
pub async fn prepare(config: Config) -> anyhow::Result<Ready> {
    let limits = ServerLimits::new(&config.http);
    let engine = crate::workflows::engine::EngineSettings::new(
        &config.workflow_engine,
        &config.platform.state_url,
    );
    let retention = config.platform.activity_retention;
    let stopping = Stopping {
        drain_delay: config.http.drain_delay,
        grace: config.http.shutdown_grace,
    };
    let base: Arc<dyn DataSource> = Arc::new(connect(&config).await?);
    let served = Arc::new(Served::start(config, base).await?);
    Ok(Ready {
        served,
        limits,
        engine,
        retention,
        stopping,
    })
}

/// How the instance stops on its shutdown signal (SIGTERM): `/readyz` fails for `drain_delay`
/// while connections are still accepted, then the listener closes and the requests in flight
/// have `grace` to finish.
#[derive(Debug, Clone, Copy)]
struct Stopping {
    drain_delay: std::time::Duration,
    grace: std::time::Duration,
}

/// A stack ready to serve: [`prepare`] succeeded.
pub struct Ready {
    served: Arc<Served>,
    /// The connection limits of `http::server`, read from the configuration.
    limits: ServerLimits,
    /// The workflow engine's settings (`workflowWorkers` 0: no engine in this process).
    engine: crate::workflows::engine::EngineSettings,
    /// What the activity log keeps (`activityLogRetentionDays`, `activityLogMaxRows`).
    retention: crate::platform::activity::Retention,
    /// The drain and grace periods of the shutdown.
    stopping: Stopping,
}

impl Ready {
    /// Canopy's own store, as the served stack opened it.
    pub fn store(&self) -> &crate::platform::Store {
        &self.served.platform().store
    }

    /// Serves the customized stack on `listener` until `shutdown` resolves, and reloads it on
    /// SIGHUP, on the admin route (`canopy reload`) and, with `watch`, when the plugin directory
    /// changes.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
        options: ServeOptions,
    ) -> anyhow::Result<()> {
        let served = self.served;
        // Signals are the binary's business, but SIGHUP only means something to the served
        // stack.
        served.reload_on_sighup();
        // A reload asked of another instance on the same PostgreSQL store reloads this one too.
        served.reload_on_announcement();
        if options.watch {
            served.reload_on_change();
        }
        // Open event streams (`/liana/v4/subscribe-to-events`) end first, or the graceful
        // shutdown would wait for them.
        let platform = served.platform().clone();
        let engine = (self.engine.workers > 0).then(|| {
            crate::workflows::engine::Engine::start(
                platform.store.clone(),
                served.state(),
                platform.workflow_wakeup.clone(),
                self.engine.clone(),
            )
        });
        // The drain: `/readyz` fails first, so that a balancer stops routing here while the
        // listener still accepts; then the listener closes and the grace period starts.
        let stopping = self.stopping;
        let (closing, closed) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            shutdown.await;
            platform.lifecycle.drain();
            if !stopping.drain_delay.is_zero() {
                tracing::info!(
                    seconds = stopping.drain_delay.as_secs(),
                    "draining: still accepting while load balancers notice"
                );
                tokio::time::sleep(stopping.drain_delay).await;
            }
            tracing::info!(
                grace_seconds = stopping.grace.as_secs(),
                "listener closed: finishing requests in flight"
            );
            let _ = closing.send(());
            platform.close_event_streams();
        };
        // Cron schedules of workflows fire while this process serves.
        let scheduler = {
            let state = served.state();
            crate::workflows::schedule::Scheduler::new(
                Arc::clone(&served.platform().triggers),
                Arc::new(move || {
                    let state = state.load();
                    (
                        Arc::clone(&state.datasource),
                        Arc::clone(&state.permissions),
                    )
                }),
            )
            .spawn()
        };
        // The activity log is pruned off the request path, in batches, while this process
        // serves (each instance prunes its own environment).
        let pruner = crate::platform::activity::spawn_pruner(
            served.platform().store.clone(),
            self.retention,
            crate::platform::activity::PruneSchedule::default(),
        );
        let server = crate::http::server::serve(listener, served.router(), self.limits, shutdown);
        let grace_over = async {
            // Only once the listener closed; an error means the server is already done.
            if closed.await.is_ok() {
                tokio::time::sleep(stopping.grace).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = server => {}
            () = grace_over => tracing::warn!(
                grace_seconds = stopping.grace.as_secs(),
                "the shutdown grace period is over: requests still in flight are cut"
            ),
        }
        // Requests are done; the workers finish their current step and give their runs back.
        if let Some(engine) = engine {
            engine.stop().await;
        }
        scheduler.abort();
        if let Some(pruner) = pruner {
            pruner.abort();
        }
        // Every request has finished: the activity entries they recorded are written before
        // the process ends.
        served.platform().flush_activity().await;
        served.log_stats();
        Ok(())
    }
}

/// `canopy schema`: writes the schema file without serving (`generateSchemaOnly`), and the
/// typings when `typingsPath` is set, even in production, as the agent does.
pub async fn schema(config: &Config) -> anyhow::Result<()> {
    let datasource = customized(config).await?;
    build_schema_file(config, datasource.schema())?
        .write(&config.schema.path)
        .map_err(anyhow::Error::from)?;
    eprintln!("Schema written to {}", config.schema.path.display());
    if let Some(path) = &config.schema.typings_path {
        write_typings(path, datasource.schema(), config.schema.typings_max_depth)?;
        eprintln!("Typings written to {}", path.display());
    }
    Ok(())
}

/// `canopy typings`: the typings of the customized schema (after the plugins), `max_depth`
/// relations deep (default `typingsMaxDepth`), written to `out`, else to `typingsPath`, else
/// printed. Written even in production: asking for them is explicit. In `language`, else in the
/// one the file's extension says (`.py`: Python), else in Rust.
pub async fn typings(
    config: &Config,
    out: Option<&Path>,
    max_depth: Option<u32>,
    language: Option<crate::typings::Language>,
) -> anyhow::Result<()> {
    let datasource = customized(config).await?;
    let max_depth = max_depth.unwrap_or(config.schema.typings_max_depth);
    let path = out.or(config.schema.typings_path.as_deref());
    let language = language
        .or(path.map(crate::typings::Language::of_path))
        .unwrap_or_default();
    match path {
        Some(path) => {
            let written = crate::typings::update_in(language, path, datasource.schema(), max_depth)
                .with_context(|| format!("cannot write the typings file {}", path.display()))?;
            tracing::info!(path = %path.display(), max_depth, written, "typings");
            eprintln!("Typings written to {}", path.display());
        }
        None => {
            let typings = crate::typings::generate_in(language, datasource.schema(), max_depth);
            for warning in &typings.warnings {
                tracing::warn!("{warning}");
            }
            crate::out!("{}", typings.source);
        }
    }
    Ok(())
}

/// The customized datasource `canopy serve` would serve (plugins loaded), without serving it.
async fn customized(config: &Config) -> anyhow::Result<Arc<dyn DataSource>> {
    let base: Arc<dyn DataSource> = Arc::new(connect(config).await?);
    let customizations = match &config.plugin_dir {
        Some(dir) => {
            let runtime = crate::plugins::Runtime::new(None).map_err(anyhow::Error::msg)?;
            // Nothing is served: no request, hence no caller scope, reaches these plugins.
            crate::plugins::PluginSet::load(
                &runtime,
                dir,
                base.schema(),
                &Arc::new(crate::auth::Permissions::allow_all()),
            )
            .await
            .and_then(|set| set.customizations(base.schema()))
            .map_err(anyhow::Error::msg)
            .context("loading the plugins")?
        }
        None => Vec::new(),
    };
    let mut customizations = customizations;
    customizations.extend(
        crate::no_code::customizations(&config.experimental.actions, &[], base.schema())
            .map_err(anyhow::Error::msg)?,
    );
    // The audit layer changes no schema: the schema file and typings are built without it.
    customize(config, base, customizations, None)
}

/// Writes the typings file of `schema` unless it already holds them (so a watcher on the plugin
/// crate does not rebuild for nothing), and logs which.
fn write_typings(path: &Path, schema: &DataSourceSchema, max_depth: u32) -> anyhow::Result<()> {
    let written = crate::typings::update(path, schema, max_depth)
        .with_context(|| format!("cannot write the typings file {}", path.display()))?;
    if written {
        tracing::info!(path = %path.display(), max_depth, "typings written");
    } else {
        tracing::info!(path = %path.display(), "typings unchanged");
    }
    Ok(())
}

/// Every configured datasource, introspected and served as one.
pub async fn connect(config: &Config) -> anyhow::Result<CompositeDataSource> {
    let mut sources: Vec<Arc<dyn DataSource>> = Vec::with_capacity(config.datasources.len());
    for entry in &config.datasources {
        let options = Options {
            // An empty `include` in the config means "all", as the agent's option does.
            include: (!entry.include.is_empty()).then(|| entry.include.clone()),
            exclude: entry.exclude.clone(),
            rename: entry
                .rename
                .iter()
                .map(|(from, to)| (from.clone(), to.clone()))
                .collect(),
            connection_name: entry.native_query_connection.clone(),
            native_query_timeout: Some(config.native_query_timeout),
        };
        let datasource = SqlDataSource::connect(&entry.url, options)
            .await
            .with_context(|| {
                format!(
                    "cannot serve {}",
                    crate::datasource::sql::redact_url(&entry.url)
                )
            })?;
        sources.push(Arc::new(datasource));
    }
    CompositeDataSource::new(sources).context("combining the datasources")
}

/// The customized datasource the agent serves: `base` under the decorator stack of
/// `customizations`, with the audit layer when `audit` is given. An invalid customization stops
/// the start (or a reload) with its plugin's name; so do two actions with one slug under
/// `useUnsafeActionEndpoint`.
pub fn customize(
    config: &Config,
    base: Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    audit: Option<AuditTrail>,
) -> anyhow::Result<Arc<dyn DataSource>> {
    let options = StackOptions {
        ignore_missing_schema_element_errors: config.schema.ignore_missing_schema_element_errors,
        emulation_row_limit: config.schema.emulation_row_limit,
        audit,
    };
    let stack =
        build_stack_with(base, customizations, &options).context("applying the customizations")?;
    if config.actions.use_unsafe_action_endpoint {
        crate::agent::action::check_unique_slugs(stack.schema())?;
    }
    Ok(stack)
}

/// The schema file as the agent would generate it for this schema.
fn build_schema_file(config: &Config, schema: &DataSourceSchema) -> anyhow::Result<SchemaFile> {
    let actions = SchemaActions {
        schema,
        unsafe_endpoint: config.actions.use_unsafe_action_endpoint,
    };
    SchemaFile::build(schema, &actions, schema_meta(config)).context("building the schema file")
}

/// The schema file's `meta`: `liana_features` lists the enabled `experimental` features.
fn schema_meta(config: &Config) -> Meta {
    let experimental = &config.experimental;
    Meta::with_experimental(
        experimental.webhook_custom_actions,
        experimental.update_record_custom_actions,
    )
}

/// Outside production the schema file is written at every start; in production it is read, and
/// a missing or invalid file stops the start with a message naming its path. As in the agent,
/// `experimental.webhookCustomActions` makes production rebuild and write it too. Outside
/// production the typings file (`typingsPath`) is rewritten when it changed.
fn prepare_schema(config: &Config, schema: &DataSourceSchema) -> anyhow::Result<()> {
    let path = &config.schema.path;
    if config.is_production && !config.experimental.webhook_custom_actions {
        SchemaFile::read(path, schema_meta(config))?;
        tracing::info!(path = %path.display(), "schema file read");
    } else {
        build_schema_file(config, schema)?.write(path)?;
        tracing::info!(path = %path.display(), "schema file written");
    }
    // The typings follow the served schema (start and each reload) so that a plugin's build
    // breaks on a name that is gone; not in production, where nothing is compiled against them.
    if !config.is_production
        && let Some(path) = &config.schema.typings_path
    {
        write_typings(path, schema, config.schema.typings_max_depth)?;
    }
    Ok(())
}

/// The demo database's seed, kept beside the example's README.
const SHOP_SEED: &str = include_str!("../../examples/shop/seed.sql");

/// `canopy inspect`: prints the served schema as JSON.
pub async fn inspect(database_url: &str) -> anyhow::Result<()> {
    let datasource = SqlDataSource::connect(database_url, Options::default())
        .await
        .with_context(|| {
            format!(
                "cannot serve {}",
                crate::datasource::sql::redact_url(database_url)
            )
        })?;
    crate::outln!(
        "{}",
        serde_json::to_string_pretty(&describe(datasource.schema()))?
    );
    Ok(())
}

/// `canopy demo`, first half: (re)builds the shop database and returns its URL; `main` then
/// serves it.
pub async fn seed_demo(path: &Path) -> anyhow::Result<String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if path.exists() {
        std::fs::remove_file(path).with_context(|| format!("cannot replace {}", path.display()))?;
    }
    let url = format!("sqlite://{}?mode=rwc", path.display());
    eprintln!("Seeding {} …", path.display());
    let pool = Pool::connect(&url, 1).await?;
    if let Pool::Sqlite(sqlite) = &pool {
        sqlx::raw_sql(SHOP_SEED)
            .execute(sqlite)
            .await
            .context("seeding the demo database")?;
    }
    let datasource = SqlDataSource::from_pool(pool, Options::default()).await?;
    for (name, collection) in &datasource.schema().collections {
        let relations: Vec<String> = collection
            .relations()
            .map(|(n, r)| format!("{n} ({} → {})", r.kind_name(), r.foreign_collection()))
            .collect();
        eprintln!(
            "  {name}: {} fields; relations: {}",
            collection.fields.len(),
            relations.join(", ")
        );
    }
    datasource.pool().close().await;
    Ok(url)
}

/// An order of the demo database that the refund workflow can still act on (paid, shipped or
/// delivered, so not refunded yet), for the webhook curl the demo prints: the newest, so that
/// examples on the first orders do not take it.
pub async fn demo_refundable_order(database_url: &str) -> anyhow::Result<Option<i64>> {
    let pool = sqlx::SqlitePool::connect(database_url).await?;
    let id = sqlx::query_scalar::<_, i64>(
        "SELECT id FROM orders WHERE status IN ('paid', 'shipped', 'delivered') \
         ORDER BY id DESC LIMIT 1",
    )
    .fetch_optional(&pool)
    .await;
    pool.close().await;
    Ok(id?)
}

/// A JSON summary of a schema: collections, columns with type and flags, relations with keys.
pub fn describe(schema: &DataSourceSchema) -> Json {
    let collections: Vec<Json> = schema
        .collections
        .values()
        .map(|c| {
            let fields: Vec<Json> = c
                .fields
                .iter()
                .map(|(name, field)| match field {
                    FieldSchema::Column(col) => json!({
                        "field": name,
                        "type": col.column_type.to_json(),
                        "isPrimaryKey": col.is_primary_key,
                        "isReadOnly": col.is_read_only,
                        "isRequired": col.is_required(),
                        "defaultValue": col.default_value,
                        "enums": col.enum_values,
                        "operators": col.filter_operators.iter().map(|o| o.snake_case()).collect::<Vec<_>>(),
                    }),
                    FieldSchema::Relation(rel) => {
                        let mut out = json!({
                            "field": name,
                            "type": rel.kind_name(),
                            "foreignCollection": rel.foreign_collection(),
                        });
                        if let RelationSchema::ManyToMany { through_collection, .. } = rel {
                            out["throughCollection"] = json!(through_collection);
                        }
                        out
                    }
                })
                .collect();
            json!({ "name": c.name, "isReadOnly": c.is_read_only, "fields": fields })
        })
        .collect();
    json!({ "collections": collections })
}
