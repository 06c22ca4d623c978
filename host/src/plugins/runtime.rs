//! The engine (pooling allocator, epoch interruption with a ticker thread, bounded stack, on-disk
//! compile cache), the linker, and one call: a fresh store and instance from the plugin's
//! `InstancePre`, a time budget in epoch ticks plus a tokio timeout backstop, a memory limit, and
//! the mapping of guest errors and traps to the request's error.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{
    Cache, CacheConfig, Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store,
    Trap, UpdateDeadline,
};

use super::bindings::{
    ActionOutcome, Batch, CallContext, Column, Customization, CustomizationPre, Declaration,
    GuestError, Scope, State,
};
use super::loader::{CallKind, MAX_MEMORY_MB, PluginInfo, check_abi};
use crate::datasource::Error;

/// One epoch tick; time budgets are rounded up to it.
const TICK: Duration = Duration::from_millis(10);

/// The engine and linker shared by every plugin (one per process; kept across reloads so the
/// pooling slots and the code cache are reused).
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<State>>,
}

impl Runtime {
    /// Builds the engine; `cache_dir` holds compiled components keyed by the wasm bytes' hash
    /// and the engine's settings and version (wasmtime's cache, written by atomic rename).
    pub fn new(cache_dir: Option<&Path>) -> Result<Self, String> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.max_wasm_stack(512 * 1024);
        let mut pool = PoolingAllocationConfig::default();
        // Modest totals: each memory slot reserves virtual address space (wasm-host.md §5.14).
        pool.total_component_instances(128)
            .total_core_instances(1024)
            .total_memories(128)
            .total_tables(512)
            .total_stacks(128)
            .max_memory_size(usize::try_from(MAX_MEMORY_MB << 20).unwrap_or(usize::MAX))
            .max_component_instance_size(1 << 20)
            .max_core_instances_per_component(32)
            .max_memories_per_component(4)
            .max_tables_per_component(16)
            // A freed slot's first MiBs are zeroed in place instead of returned to the kernel:
            // the next call then starts without page faults (wasm-host.md §2: +15% throughput).
            .linear_memory_keep_resident(4 << 20)
            .table_keep_resident(64 << 10);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        if let Some(dir) = cache_dir {
            let mut cache = CacheConfig::new();
            cache.with_directory(dir);
            let cache =
                Cache::new(cache).map_err(|e| format!("plugin cache {}: {e}", dir.display()))?;
            config.cache(Some(cache));
        }
        let engine = Engine::new(&config).map_err(|e| format!("wasm engine: {e}"))?;
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("canopy-epoch".into())
            .spawn(move || {
                // Holds the engine weakly: the thread ends when the last engine handle drops.
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(TICK);
                }
            })
            .map_err(|e| format!("epoch thread: {e}"))?;
        let mut linker = Linker::<State>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| e.to_string())?;
        Customization::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| e.to_string())?;
        Ok(Self {
            engine,
            linker: Arc::new(linker),
        })
    }

    /// Compiles (or loads from the cache), checks the ABI, pre-instantiates and asks the plugin
    /// for its declarations.
    pub async fn load(&self, info: PluginInfo) -> Result<Arc<Plugin>, String> {
        let name = info.name.clone();
        let bytes = std::fs::read(&info.path)
            .map_err(|e| format!("plugin `{name}`: cannot read {}: {e}", info.path.display()))?;
        let engine = self.engine.clone();
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|e| format!("plugin `{name}`: {e}"))?
            .map_err(|e| format!("plugin `{name}` is not a valid component: {e:#}"))?;
        check_abi(&name, &component, &self.engine)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .and_then(CustomizationPre::new)
            .map_err(|e| format!("plugin `{name}` cannot be linked: {e:#}"))?;
        let mut plugin = Plugin {
            info: Arc::new(info),
            engine: self.engine.clone(),
            pre,
            declarations: Vec::new(),
            stats: Stats::default(),
        };
        let declared = plugin
            .call(CallKind::Declare, None, Request::Declare)
            .await
            .map_err(|e| format!("plugin `{name}` failed to declare its customizations: {e}"))?;
        if let Response::Declared(d) = declared {
            plugin.declarations = d;
        }
        Ok(Arc::new(plugin))
    }
}

/// What the host asks a plugin.
pub enum Request {
    Declare,
    Compute(u32, CallContext, Batch),
    ActionForm(u32, CallContext, String),
    ActionExecute(u32, CallContext, String),
    Hook(u32, CallContext, String),
    Segment(u32, CallContext),
    Search(u32, CallContext, String, bool),
    Chart(u32, CallContext, String),
}

impl Request {
    fn handler(&self) -> Option<u32> {
        match self {
            Self::Declare => None,
            Self::Compute(h, ..)
            | Self::ActionForm(h, ..)
            | Self::ActionExecute(h, ..)
            | Self::Hook(h, ..)
            | Self::Segment(h, ..)
            | Self::Search(h, ..)
            | Self::Chart(h, ..) => Some(*h),
        }
    }
}

/// What a plugin answered.
pub enum Response {
    Declared(Vec<Declaration>),
    Column(Column),
    Text(String),
    MaybeText(Option<String>),
    Outcome(ActionOutcome),
}

/// Calls, errors, traps and time spent, per plugin.
#[derive(Debug, Default)]
pub struct Stats {
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    pub traps: AtomicU64,
    pub micros: AtomicU64,
}

/// A loaded plugin: its pre-instantiated component and its declarations.
pub struct Plugin {
    pub info: Arc<PluginInfo>,
    engine: Engine,
    pre: CustomizationPre<State>,
    pub declarations: Vec<Declaration>,
    pub stats: Stats,
}

impl Plugin {
    /// Runs one request in a fresh store. A guest error is the request's error; a trap (time,
    /// memory, panic) is a 500 naming the plugin; the store is dropped either way, so nothing
    /// of a failed call survives it.
    pub async fn call(
        &self,
        kind: CallKind,
        scope: Option<Scope>,
        request: Request,
    ) -> Result<Response, Error> {
        let started = Instant::now();
        let limits = &self.info.limits;
        let budget = limits.time(kind);
        let handler = request.handler();
        let mut store = Store::new(
            &self.engine,
            State::new(self.info.clone(), scope, limits.memory_bytes()),
        );
        store.limiter(State::limiter);
        // Yield to tokio every tick (so a busy guest never blocks a worker) and interrupt once
        // the budget is spent. The first deadline must be 1: a far one would never yield.
        let ticks = budget.as_millis().div_ceil(TICK.as_millis()) as u64 + 1;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            state.ticks += 1;
            Ok(if state.ticks > ticks {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        let run = async {
            let instance = self.pre.instantiate_async(&mut store).await?;
            invoke(&mut store, &instance, request).await
        };
        // The backstop: epochs already bound the guest, this bounds host imports too.
        let outcome = tokio::time::timeout(budget + TICK * 5, run).await;
        let elapsed = started.elapsed();
        let stats = &self.stats;
        let calls = stats.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let micros = stats
            .micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed)
            + elapsed.as_micros() as u64;
        let name = &self.info.name;
        let what = match handler {
            Some(h) => format!("{} handler {h}", kind.as_str()),
            None => kind.as_str().to_owned(),
        };
        let result = match outcome {
            Ok(Ok(Ok(response))) => Ok(response),
            Ok(Ok(Err(guest))) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                Err(self.guest_error(guest))
            }
            Ok(Err(trap)) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                stats.traps.fetch_add(1, Ordering::Relaxed);
                let stderr = String::from_utf8_lossy(&store.data().stderr.contents()).into_owned();
                let message = describe_trap(&trap, budget, limits.memory_mb, &stderr);
                tracing::error!(plugin = %name, call = %what, "plugin trapped: {message}; {trap:#}");
                Err(Error::Plugin(format!(
                    "Plugin `{name}` failed in {what}: {message}"
                )))
            }
            Err(_) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                stats.traps.fetch_add(1, Ordering::Relaxed);
                let message = format!("exceeded its time limit of {} ms", budget.as_millis());
                tracing::error!(plugin = %name, call = %what, "plugin timed out");
                Err(Error::Plugin(format!(
                    "Plugin `{name}` failed in {what}: {message}"
                )))
            }
        };
        tracing::debug!(
            plugin = %name,
            call = %what,
            micros = elapsed.as_micros() as u64,
            ok = result.is_ok(),
            calls,
            errors = stats.errors.load(Ordering::Relaxed),
            total_ms = micros / 1000,
            "plugin call"
        );
        result
    }

    fn guest_error(&self, e: GuestError) -> Error {
        match e {
            GuestError::Validation(m) => Error::Validation(m),
            GuestError::Forbidden(m) => Error::Forbidden(m),
            // The datasource layer has no 404; a missing record is a refused operation.
            GuestError::NotFound(m) | GuestError::Unprocessable(m) => Error::Unprocessable(m),
            GuestError::Internal(m) => {
                tracing::error!(plugin = %self.info.name, "plugin error: {m}");
                Error::Plugin(format!("Plugin `{}` failed: {m}", self.info.name))
            }
        }
    }

    /// A 500 naming the plugin, for output the host cannot use (wrong lengths or types).
    pub fn malformed(&self, what: &str) -> Error {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(plugin = %self.info.name, "plugin returned malformed data: {what}");
        Error::Plugin(format!(
            "Plugin `{}` returned malformed data: {what}",
            self.info.name
        ))
    }
}

fn describe_trap(e: &wasmtime::Error, budget: Duration, memory_mb: u64, stderr: &str) -> String {
    let text = format!("{e:#}");
    if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        return format!("exceeded its time limit of {} ms", budget.as_millis());
    }
    if text.contains("forcing trap when growing memory")
        || text.contains("memory") && text.contains("grow")
    {
        return format!("exceeded its memory limit of {memory_mb} MiB");
    }
    // Rust guests print `thread '…' panicked at file:line:` and the message on the next line.
    let lines: Vec<&str> = stderr.lines().collect();
    let panic = lines
        .iter()
        .position(|l| l.contains("panicked"))
        .map(|i| {
            let at = lines[i].trim();
            let at = at.split_once("panicked at ").map_or(at, |(_, rest)| rest);
            let message = lines.get(i + 1).map_or("", |l| l.trim());
            format!("panicked at {at} {message}")
        })
        .unwrap_or_default();
    match e.downcast_ref::<Trap>() {
        Some(trap) if panic.is_empty() => format!("crashed ({trap})"),
        Some(trap) => format!("crashed ({trap}): {panic}"),
        None => format!("crashed: {}", text.lines().next().unwrap_or("")),
    }
}

async fn invoke(
    store: &mut Store<State>,
    instance: &Customization,
    request: Request,
) -> wasmtime::Result<Result<Response, GuestError>> {
    let g = instance.canopy_plugin_customizer();
    Ok(match request {
        Request::Declare => {
            let (schema, options) = {
                let p = &store.data().plugin;
                (p.schema_json.clone(), p.options_json.clone())
            };
            g.call_declare(&mut *store, &schema, &options)
                .await?
                .map(Response::Declared)
        }
        Request::Compute(h, ctx, batch) => g
            .call_compute(&mut *store, h, &ctx, &batch)
            .await?
            .map(Response::Column),
        Request::ActionForm(h, ctx, json) => g
            .call_action_form(&mut *store, h, &ctx, &json)
            .await?
            .map(Response::Text),
        Request::ActionExecute(h, ctx, json) => g
            .call_action_execute(&mut *store, h, &ctx, &json)
            .await?
            .map(Response::Outcome),
        Request::Hook(h, ctx, json) => g
            .call_hook(&mut *store, h, &ctx, &json)
            .await?
            .map(Response::MaybeText),
        Request::Segment(h, ctx) => g
            .call_segment(&mut *store, h, &ctx)
            .await?
            .map(Response::Text),
        Request::Search(h, ctx, text, extended) => g
            .call_search(&mut *store, h, &ctx, &text, extended)
            .await?
            .map(Response::MaybeText),
        Request::Chart(h, ctx, json) => g
            .call_chart(&mut *store, h, &ctx, &json)
            .await?
            .map(Response::Text),
    })
}
