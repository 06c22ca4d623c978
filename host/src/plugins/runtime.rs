//! The engine (pooling allocator, epoch interruption with a ticker thread, bounded stack, on-disk
//! compile cache), the linker, and one call: admitted by the plugin's [`Guard`] (concurrency
//! limit, circuit breaker), a store and instance (fresh from the plugin's `InstancePre`, or a
//! warm pair from the plugin's pool for pure calls), a wall-clock deadline checked at every epoch
//! tick plus a tokio timeout backstop, a memory limit, and the mapping of guest errors and traps
//! to the request's error.
//!
//! Calls run on the tokio workers, as async wasmtime calls: at every tick a running guest yields
//! to the executor (then goes to the back of the worker's queue), so a looping guest takes slices
//! of a worker, never the whole of it, and the other requests on that worker run in between.
//!
//! The warm pool (wasm-host.md §3) serves the calls that only compute an answer from their input
//! and read-only callbacks: computed fields, search, segments and charts. Actions, hooks and
//! `declare` always get a fresh instance. A pair serves one call at a time (it is taken out of the
//! pool for the call), is recycled after [`WARM_USES`] calls or once its memory passed
//! [`WARM_MEMORY`], and is dropped on any error, trap, timeout, cancellation or stderr output, so
//! a failed call never leaves anything behind. Pairs are shared by every caller of the process:
//! plugins are the deployer's own code and a process serves one tenant, and the SDK documents that
//! guest globals may or may not survive between calls. The pool belongs to the [`Plugin`], hence to
//! one generation of the plugin set: a hot swap drops it with the old generation.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::Instrument as _;
use wasmtime::component::Component;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};

use super::artifacts::Artifacts;
use super::bindings::{
    ActionOutcome, Batch, CallContext, Column, Customization, CustomizationPre, Declaration,
    GuestError, Scope, State, v2, v3,
};
use super::guard::Guard;
use super::loader::{
    CallKind, Limits, MAX_MEMORY_MB, PluginInfo, WitVersion, check_abi, detect_language,
};
use super::tiers::{self, Compiler, FileDigest, Optimized, Quick, Tier};
use crate::datasource::Error;

/// One epoch tick; time budgets are rounded up to it.
const TICK: Duration = Duration::from_millis(10);

/// Calls a warm pair serves before it is recycled (bounds what a slow leak in the guest can grow).
pub const WARM_USES: u32 = 1_000;
/// A warm pair whose linear memory grew past this is recycled rather than kept resident.
pub const WARM_MEMORY: usize = 16 << 20;
/// Idle warm pairs kept per plugin: each holds one of the engine's pooling slots (128 in all,
/// shared by every plugin and by the generation being swapped in).
const WARM_IDLE: usize = 4;
/// Pooling slots left warm (memory kept resident for their module's next instance) while no
/// instance uses them: enough for the warm pairs of a few busy plugins.
const MAX_UNUSED_WARM_SLOTS: u32 = 16;

/// The settings both compilers' engines share: epoch interruption (time limits) and a bounded
/// stack; with `CANOPY_PLUGIN_PROFILER=perfmap`, a `/tmp/perf-<pid>.map` naming the plugins'
/// compiled functions, so that `perf record -p <pid>` then `perf report` shows where a plugin's
/// calls spend their time (a developer's setting: the file grows with every compile).
pub(super) fn settings() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.max_wasm_stack(512 * 1024);
    if std::env::var_os("CANOPY_PLUGIN_PROFILER").is_some_and(|v| v == "perfmap") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

/// Starts the thread that advances `engine`'s epoch every [`TICK`]. It holds the engine weakly,
/// so it ends when the last handle drops.
pub(super) fn tick_epochs(engine: &Engine, name: &str) -> Result<(), String> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })
        .map(drop)
        .map_err(|e| format!("epoch thread: {e}"))
}

/// The engine and linker shared by every plugin (one per process; kept across reloads so the
/// pooling slots and the code cache are reused).
#[derive(Clone)]
pub struct Runtime {
    /// Cranelift's engine and linker: the code every plugin ends up on.
    optimizing: Tier,
    /// Winch's, for hot swaps (made on first use, once enabled).
    quick: Arc<Quick>,
    /// The Cranelift components of the last generation, by file digest.
    optimized: Arc<Optimized>,
    /// Cranelift's components on disk, mapped when read back (none without a cache folder).
    artifacts: Option<Arc<Artifacts>>,
}

impl Runtime {
    /// Builds the engine; `cache_dir` holds compiled components keyed by the wasm bytes' hash
    /// and the engine's settings and version (`artifacts`), and compiled functions keyed by
    /// their bodies (`incremental`).
    pub fn new(cache_dir: Option<&Path>) -> Result<Self, String> {
        let mut config = settings();
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
            .table_keep_resident(64 << 10)
            // Slots keep what they held for the next instance of the same module; past this
            // many unused ones, a new module takes the least recently used slot instead of a
            // fresh one. wasmtime's default (100) let every plugin loaded keep a slot of its
            // own resident: 50 plugins held 182 MB (bench/scale.sh).
            .max_unused_warm_slots(MAX_UNUSED_WARM_SLOTS);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        if let Some(dir) = cache_dir {
            // Per-function artifacts beside the components: a changed plugin compiles only
            // the functions that changed (a hot swap in a fraction of a full compile).
            match super::incremental::FunctionCache::new(&dir.join("functions")) {
                Ok(functions) => {
                    config
                        .enable_incremental_compilation(Arc::new(functions))
                        .map_err(|e| format!("plugin function cache: {e}"))?;
                }
                Err(error) => tracing::warn!(
                    %error,
                    "plugin function cache disabled: each changed plugin compiles in full"
                ),
            }
        }
        let engine = match Engine::new(&config) {
            Ok(engine) => engine,
            Err(pooled) => {
                // A process whose address space is capped (`ulimit -v`, some container
                // runtimes, valgrind) cannot reserve the pool's slots. Instances are then made
                // one by one: each call pays its page faults, but plugins serve, and each
                // store's limiter still caps memory.
                tracing::warn!(
                    error = %pooled,
                    "the plugin instance pool cannot reserve its address space: plugins are \
                     instantiated on demand, which makes each call slower"
                );
                config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
                Engine::new(&config).map_err(|e| format!("wasm engine: {e}"))?
            }
        };
        tick_epochs(&engine, "canopy-epoch")?;
        let artifacts = cache_dir
            .map(|dir| {
                Artifacts::new(dir, &engine)
                    .map(Arc::new)
                    .map_err(|e| format!("plugin cache {}: {e}", dir.display()))
            })
            .transpose()?;
        Ok(Self {
            optimizing: Tier::new(engine)?,
            quick: Arc::new(Quick::default()),
            optimized: Arc::new(Optimized::default()),
            artifacts,
        })
    }

    /// From now on, a plugin file that Cranelift has not compiled yet is compiled by Winch, to
    /// serve at once, and its caller asks [`Self::optimize`] for the Cranelift code afterwards
    /// (the `tiers` module). Called once the first generation serves.
    pub fn compile_quickly_first(&self) {
        self.quick.enable();
    }

    /// Compiles `path` with Cranelift unless this process already did, so that the next load of
    /// the same bytes takes its component at once. A file that changed since its quick compile
    /// is compiled as it is now.
    pub async fn optimize(&self, name: &str, path: &Path) -> Result<(), String> {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("plugin `{name}`: cannot read {}: {e}", path.display()))?;
        let digest = tiers::digest(&bytes);
        if self.optimized.get(&digest).is_none() {
            let component = self.compile_optimized(name, digest, bytes).await?;
            self.optimized.insert(digest, component);
        }
        Ok(())
    }

    /// Keeps in memory the Cranelift components of `compiled` only (the generation just loaded).
    pub fn keep_only<'a>(&self, compiled: impl IntoIterator<Item = &'a Compiled>) {
        let digests: Vec<_> = compiled.into_iter().map(|c| c.digest).collect();
        self.optimized.keep_only(&digests);
        if let Some(artifacts) = &self.artifacts {
            // Off the load's path: it lists and may delete files.
            let artifacts = Arc::clone(artifacts);
            tokio::task::spawn_blocking(move || artifacts.prune(&digests));
        }
    }

    /// Cranelift's component of `bytes`: from the cache folder (mapped) or compiled and written
    /// there, or compiled in memory when there is no cache folder.
    async fn compile_optimized(
        &self,
        name: &str,
        digest: FileDigest,
        bytes: Vec<u8>,
    ) -> Result<Component, String> {
        let Some(artifacts) = &self.artifacts else {
            return self.compile_with(name, &self.optimizing, bytes).await;
        };
        let artifacts = Arc::clone(artifacts);
        let engine = self.optimizing.engine.clone();
        tokio::task::spawn_blocking(move || artifacts.component(&engine, &digest, &bytes))
            .await
            .map_err(|e| format!("plugin `{name}`: {e}"))?
            .map_err(|e| format!("plugin `{name}` is not a valid component: {e:#}"))
    }

    async fn compile_with(
        &self,
        name: &str,
        tier: &Tier,
        bytes: Vec<u8>,
    ) -> Result<Component, String> {
        let engine = tier.engine.clone();
        tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|e| format!("plugin `{name}`: {e}"))?
            .map_err(|e| format!("plugin `{name}` is not a valid component: {e:#}"))
    }

    /// Compiles (or loads from the cache), checks the ABI, pre-instantiates and asks the plugin
    /// for its declarations: [`Self::compile`] then [`Self::apply`].
    pub async fn load(&self, info: PluginInfo) -> Result<Arc<Plugin>, String> {
        let compiled = self.compile(&info.name, &info.path, &info.limits).await?;
        Ok(Arc::new(self.apply(&compiled, info).await?))
    }

    /// Compiles (or loads from the cache), checks the ABI and pre-instantiates one plugin file;
    /// every application of the plugin shares the result, and the guard built from `limits`.
    pub async fn compile(
        &self,
        name: &str,
        path: &Path,
        limits: &Limits,
    ) -> Result<Compiled, String> {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("plugin `{name}`: cannot read {}: {e}", path.display()))?;
        check_header(name, path, &bytes)?;
        let digest = tiers::digest(&bytes);
        let language = detect_language(&bytes);
        let started = Instant::now();
        let in_memory = self.optimized.get(&digest);
        let from = if in_memory.is_some() {
            "memory"
        } else {
            "compiler or cache folder"
        };
        // A file Cranelift compiled before (a plugin put back to an earlier build) is read from
        // the cache folder in milliseconds: no quick compile for it.
        let on_disk = || self.artifacts.as_ref().is_some_and(|a| a.has(&digest));
        let (tier, component, compiler) = match (in_memory, self.quick.tier()) {
            (Some(component), _) => (&self.optimizing, component, Compiler::Cranelift),
            (None, Some(quick)) if !on_disk() => {
                let component = self.compile_with(name, quick, bytes).await?;
                (quick, component, Compiler::Winch)
            }
            (None, _) => {
                let component = self.compile_optimized(name, digest, bytes).await?;
                self.optimized.insert(digest, component.clone());
                (&self.optimizing, component, Compiler::Cranelift)
            }
        };
        // What a start or a hot swap spends on each file (`canopy::plugins=debug`).
        tracing::debug!(
            plugin = name,
            ?compiler,
            from,
            millis = started.elapsed().as_millis() as u64,
            "plugin compiled"
        );
        let version = check_abi(name, &component, &tier.engine)?;
        let pre = tier
            .linker
            .instantiate_pre(&component)
            .and_then(|pre| match version {
                WitVersion::V0_1 => CustomizationPre::new(pre).map(Pre::V1),
                WitVersion::V0_2 => v2::CustomizationPre::new(pre).map(Pre::V2),
                WitVersion::V0_3 => v3::CustomizationPre::new(pre).map(Pre::V3),
            })
            .map_err(|e| format!("plugin `{name}` cannot be linked: {e:#}"))?;
        Ok(Compiled {
            pre,
            engine: tier.engine.clone(),
            compiler,
            digest,
            guard: Arc::new(Guard::new(name, limits)),
            language,
        })
    }

    /// One application of a compiled plugin: asks it for its declarations with this
    /// application's options and scope (`info`). The result has its own handler ids, warm pool
    /// and stats; its `uses` are filled by the caller.
    pub async fn apply(&self, compiled: &Compiled, info: PluginInfo) -> Result<Plugin, String> {
        let label = info.label();
        let mut plugin = Plugin {
            info: Arc::new(info),
            engine: compiled.engine.clone(),
            compiler: compiled.compiler,
            pre: compiled.pre.clone(),
            guard: Arc::clone(&compiled.guard),
            declarations: Vec::new(),
            workflow_steps: Vec::new(),
            uses: Vec::new(),
            stats: Stats::default(),
            warm: Mutex::new(Vec::new()),
        };
        let started = Instant::now();
        let declared = plugin
            .call(CallKind::Declare, None, Request::Declare)
            .await
            .map_err(|e| format!("{label} failed to declare its customizations: {e}"))?;
        tracing::debug!(
            plugin = %label,
            millis = started.elapsed().as_millis() as u64,
            "plugin declared its customizations"
        );
        if let Response::Declared(customizations, steps) = declared {
            plugin.declarations = customizations;
            plugin.workflow_steps = steps;
        }
        Ok(plugin)
    }
}

/// A plugin file compiled and pre-instantiated, shared by its applications, with the guard that
/// bounds their calls together.
#[derive(Clone)]
pub struct Compiled {
    pre: Pre,
    /// The engine of the compiler that made `pre` (stores must be of the same engine).
    engine: Engine,
    compiler: Compiler,
    digest: FileDigest,
    guard: Arc<Guard>,
    /// What the component says it was written in (`loader::detect_language`).
    language: Option<String>,
}

impl Compiled {
    /// The language the component says it was written in, if it says.
    pub fn language(&self) -> Option<&str> {
        self.language.as_deref()
    }

    /// Which compiler made this plugin's code.
    pub fn compiler(&self) -> Compiler {
        self.compiler
    }
}

/// A component pre-instantiated with the bindings of the contract version it targets.
#[derive(Clone)]
enum Pre {
    V1(CustomizationPre<State>),
    V2(v2::CustomizationPre<State>),
    V3(v3::CustomizationPre<State>),
}

impl Pre {
    async fn instantiate(&self, store: &mut Store<State>) -> wasmtime::Result<Instance> {
        Ok(match self {
            Self::V1(pre) => Instance::V1(pre.instantiate_async(store).await?),
            Self::V2(pre) => Instance::V2(pre.instantiate_async(store).await?),
            Self::V3(pre) => Instance::V3(pre.instantiate_async(store).await?),
        })
    }

    fn version(&self) -> WitVersion {
        match self {
            Self::V1(_) => WitVersion::V0_1,
            Self::V2(_) => WitVersion::V0_2,
            Self::V3(_) => WitVersion::V0_3,
        }
    }
}

/// An instance of a component, by the version of the contract it targets.
enum Instance {
    V1(Customization),
    V2(v2::Customization),
    V3(v3::Customization),
}

/// A computed field's rows in the form of the contract its plugin targets: one list per column
/// (0.1.0, 0.2.0), or text cells packed (0.3.0; [`Plugin::packs_rows`]).
pub enum ComputeRows {
    Lists(Batch),
    Packed(v3::PackedBatch),
}

/// What the host asks a plugin.
pub enum Request {
    Declare,
    Compute(u32, CallContext, ComputeRows),
    ActionForm(u32, CallContext, String),
    ActionExecute(u32, CallContext, String),
    Hook(u32, CallContext, String),
    Segment(u32, CallContext),
    Search(u32, CallContext, String, bool),
    Chart(u32, CallContext, String),
    Write(u32, CallContext, String),
    Operator(u32, CallContext, String),
    Override(u32, CallContext, String),
    WorkflowStep(u32, CallContext, v2::StepInput),
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
            | Self::Chart(h, ..)
            | Self::Write(h, ..)
            | Self::Operator(h, ..)
            | Self::Override(h, ..)
            | Self::WorkflowStep(h, ..) => Some(*h),
        }
    }
}

/// What a plugin answered.
pub enum Response {
    /// The customizations, then the workflow-step handlers (none before 0.2.0).
    Declared(Vec<Declaration>, Vec<v2::StepDeclaration>),
    Column(Column),
    /// A computed field's values from a 0.3.0 plugin, checked by the caller.
    Packed(v3::PackedColumn),
    Text(String),
    MaybeText(Option<String>),
    Outcome(ActionOutcome),
    Step(v2::StepOutput),
}

/// Calls, errors, traps and time spent, per plugin; instances created and warm pairs reused.
#[derive(Debug, Default)]
pub struct Stats {
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    pub traps: AtomicU64,
    pub micros: AtomicU64,
    /// Instances created (one per call without a warm pair).
    pub instantiations: AtomicU64,
    /// Calls served by a warm pair from the pool.
    pub reused: AtomicU64,
    /// Calls refused before they ran: the plugin was at its concurrency limit, or its circuit
    /// breaker was open.
    pub refused: AtomicU64,
}

/// A store and its instance kept between pure calls, with the calls it has served.
struct Warm {
    store: Store<State>,
    instance: Instance,
    uses: u32,
}

/// Whether a kind of call may run on a warm pair: those that compute an answer (their callbacks
/// read data with the caller's permissions); not actions, hooks, write replacements, overrides
/// and workflow steps, which write or sit on writes, nor `declare`.
fn poolable(kind: CallKind) -> bool {
    matches!(
        kind,
        CallKind::Compute
            | CallKind::Search
            | CallKind::Segment
            | CallKind::Chart
            | CallKind::Operator
    )
}

/// A loaded plugin: its pre-instantiated component, its declarations and its warm pairs.
pub struct Plugin {
    pub info: Arc<PluginInfo>,
    engine: Engine,
    /// Which compiler made the code it runs (Winch until a hot swap's Cranelift code is in).
    compiler: Compiler,
    pre: Pre,
    /// The concurrency limit and circuit breaker of the plugin file (shared by its applications).
    guard: Arc<Guard>,
    pub declarations: Vec<Declaration>,
    /// The workflow-step handlers it declared (0.2.0 and later), in declaration order.
    pub workflow_steps: Vec<v2::StepDeclaration>,
    /// The applications of other plugins this one declared with `use`, in declaration order
    /// (one per `use` declaration).
    pub uses: Vec<Arc<Plugin>>,
    pub stats: Stats,
    /// Idle warm pairs (at most [`WARM_IDLE`]); a call pops one and pushes it back only if the
    /// call succeeded cleanly.
    warm: Mutex<Vec<Warm>>,
}

impl Plugin {
    /// Whether the plugin's circuit breaker is open now.
    pub fn breaker_open(&self) -> bool {
        self.guard.is_open(tokio::time::Instant::now())
    }

    /// Runs one request, in a warm pair for pure calls when one is idle, else in a fresh store. A
    /// guest error is the request's error; a trap (time, memory, panic) is a 500 naming the
    /// plugin; the store is dropped after any failure, so nothing of a failed call survives it.
    /// Every call but `declare` (which runs once, at load) first passes the plugin's guard: a
    /// refusal is a 500 naming the plugin, and the outcome feeds its circuit breaker.
    pub async fn call(
        &self,
        kind: CallKind,
        scope: Option<Scope>,
        request: Request,
    ) -> Result<Response, Error> {
        let entry = if kind == CallKind::Declare {
            None
        } else {
            match self.guard.enter().await {
                Ok(entry) => Some(entry),
                Err(message) => {
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    crate::metrics::metrics().plugin_call(
                        &self.info.name,
                        kind.as_str(),
                        "refused",
                        Duration::ZERO,
                    );
                    return Err(Error::Plugin(message));
                }
            }
        };
        let started = Instant::now();
        // For the failure lines below: the request the call served, when it served one.
        let correlation_id = scope.as_ref().map(|s| s.caller.request_id);
        let limits = &self.info.limits;
        let budget = limits.time(kind);
        let handler = request.handler();
        let stats = &self.stats;
        let pooled = poolable(kind);
        let warm = if pooled {
            self.warm.lock().ok().and_then(|mut idle| idle.pop())
        } else {
            None
        };
        let (mut store, instance, uses) = match warm {
            Some(mut w) => {
                stats.reused.fetch_add(1, Ordering::Relaxed);
                w.store.data_mut().scope = scope;
                (w.store, Some(w.instance), w.uses)
            }
            None => {
                let mut store = Store::new(
                    &self.engine,
                    State::new(self.info.clone(), scope, limits.memory_bytes()),
                );
                store.limiter(State::limiter);
                (store, None, 0)
            }
        };
        // Yield to tokio every tick (so a busy guest never blocks a worker) and interrupt once
        // the budget is spent. The budget is wall-clock time: counting ticks instead would count
        // only the slices the guest ran, and a guest waiting its turn among others would run
        // past its limit. The first deadline must be 1: a far one would never yield. Armed again
        // for every call, a warm pair's included.
        let deadline = started + budget;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        let run = async {
            let instance = match instance {
                Some(i) => i,
                None => {
                    stats.instantiations.fetch_add(1, Ordering::Relaxed);
                    self.pre.instantiate(&mut store).await?
                }
            };
            let answer = invoke(&mut store, &instance, request).await?;
            Ok::<_, wasmtime::Error>((instance, answer))
        };
        // The backstop: epochs already bound the guest, this bounds host imports too. A call
        // nested in this one (a callback reading one of the plugin's own computed fields) runs on
        // this call's permit.
        // A span for the trace export only (`logging::spans`): none otherwise.
        let span = if crate::logging::spans() {
            tracing::info_span!(
                "plugin call",
                otel.name = %format_args!("plugin {} {}", self.info.name, kind.as_str()),
                plugin = %self.info.name,
                kind = kind.as_str(),
                handler,
            )
        } else {
            tracing::Span::none()
        };
        let outcome = tokio::time::timeout(budget + TICK * 5, self.guard.scoped(run))
            .instrument(span)
            .await;
        if let Some(entry) = entry {
            // Only a timeout or a trap counts against the plugin: a guest error is an answer.
            entry.finish(matches!(outcome, Ok(Err(_)) | Err(_)));
        }
        let elapsed = started.elapsed();
        let calls = stats.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let micros = stats
            .micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed)
            + elapsed.as_micros() as u64;
        let name = &self.info.name;
        crate::metrics::metrics().plugin_call(
            name,
            kind.as_str(),
            match &outcome {
                Ok(Ok((_, Ok(_)))) => "ok",
                Ok(Ok((_, Err(_)))) => "error",
                Ok(Err(_)) => "trap",
                Err(_) => "timeout",
            },
            elapsed,
        );
        let what = match handler {
            Some(h) => format!("{} handler {h}", kind.as_str()),
            None => kind.as_str().to_owned(),
        };
        let result = match outcome {
            Ok(Ok((instance, Ok(response)))) => {
                if pooled {
                    self.recycle(store, instance, uses + 1);
                }
                Ok(response)
            }
            Ok(Ok((_, Err(guest)))) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                Err(self.guest_error(guest, correlation_id))
            }
            Ok(Err(trap)) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                stats.traps.fetch_add(1, Ordering::Relaxed);
                let stderr = String::from_utf8_lossy(&store.data().stderr.contents()).into_owned();
                let message = describe_trap(&trap, budget, limits.memory_mb, &stderr);
                tracing::error!(
                    plugin = %name,
                    call = %what,
                    correlation_id = correlation_id.map(tracing::field::display),
                    "plugin trapped: {message}; {trap:#}"
                );
                Err(Error::Plugin(format!(
                    "Plugin `{name}` failed in {what}: {message}"
                )))
            }
            Err(_) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                stats.traps.fetch_add(1, Ordering::Relaxed);
                let message = format!("exceeded its time limit of {} ms", budget.as_millis());
                tracing::error!(
                    plugin = %name,
                    call = %what,
                    correlation_id = correlation_id.map(tracing::field::display),
                    "plugin timed out"
                );
                Err(Error::Plugin(format!(
                    "Plugin `{name}` failed in {what}: {message}"
                )))
            }
        };
        tracing::debug!(
            plugin = %name,
            call = %what,
            correlation_id = correlation_id.map(tracing::field::display),
            micros = elapsed.as_micros() as u64,
            ok = result.is_ok(),
            calls,
            errors = stats.errors.load(Ordering::Relaxed),
            total_ms = micros / 1000,
            "plugin call"
        );
        result
    }

    /// Puts a pair back in the pool after a successful call, unless it has served its uses, grew
    /// past [`WARM_MEMORY`], wrote to stderr (each call must start with an empty capture) or the
    /// pool is full; otherwise it is dropped here, freeing its slot.
    fn recycle(&self, mut store: Store<State>, instance: Instance, uses: u32) {
        let state = store.data_mut();
        // The request's scope holds the customized stack, which holds this plugin: keeping it
        // would leak the request's context and make a reference cycle.
        state.scope = None;
        if uses >= WARM_USES
            || state.memory_bytes > WARM_MEMORY
            || !state.stderr.contents().is_empty()
        {
            return;
        }
        if let Ok(mut idle) = self.warm.lock()
            && idle.len() < WARM_IDLE
        {
            idle.push(Warm {
                store,
                instance,
                uses,
            });
        }
    }

    /// Which compiler made the code this plugin runs.
    pub fn compiler(&self) -> Compiler {
        self.compiler
    }

    /// The version of the contract the plugin was built against.
    pub fn wit_version(&self) -> WitVersion {
        self.pre.version()
    }

    /// Whether the plugin takes a computed field's rows packed ([`ComputeRows::Packed`]).
    pub fn packs_rows(&self) -> bool {
        self.wit_version() == WitVersion::V0_3
    }

    /// Idle warm pairs (for tests and stats).
    pub fn warm_pairs(&self) -> usize {
        self.warm.lock().map_or(0, |idle| idle.len())
    }

    /// Drops the idle warm pairs, so the next calls start fresh instances (benchmarks compare
    /// both paths with it).
    pub fn clear_warm(&self) {
        let idle = self.warm.lock().map(|mut idle| std::mem::take(&mut *idle));
        drop(idle);
    }

    /// Creates a store and an instance and drops them, without calling the guest: the cost of
    /// a fresh instance alone, for the benchmark. Returns the time to create (store and
    /// instance) and the time to drop (the pooling slot is zeroed in place on release).
    pub async fn instantiate_only(&self) -> Result<(Duration, Duration), Error> {
        let started = Instant::now();
        let mut store = Store::new(
            &self.engine,
            State::new(self.info.clone(), None, self.info.limits.memory_bytes()),
        );
        store.limiter(State::limiter);
        store.set_epoch_deadline(u64::MAX / 2);
        self.pre
            .instantiate(&mut store)
            .await
            .map_err(|e| Error::Plugin(format!("Plugin `{}`: {e:#}", self.info.name)))?;
        let created = started.elapsed();
        let dropping = Instant::now();
        drop(store);
        Ok((created, dropping.elapsed()))
    }

    fn guest_error(&self, e: GuestError, correlation_id: Option<uuid::Uuid>) -> Error {
        match e {
            GuestError::Validation(m) => Error::Validation(m),
            GuestError::Forbidden(m) => Error::Forbidden(m),
            // The datasource layer has no 404; a missing record is a refused operation.
            GuestError::NotFound(m) | GuestError::Unprocessable(m) => Error::Unprocessable(m),
            GuestError::Internal(m) => {
                tracing::error!(
                    plugin = %self.info.name,
                    correlation_id = correlation_id.map(tracing::field::display),
                    "plugin error: {m}"
                );
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

/// Refuses a file that is not a component with a sentence, before the parser would: its own
/// errors print the expected and found header bytes as multi-line arrays.
fn check_header(name: &str, path: &Path, bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\0asm";
    // The version and layer after the magic: 1 and 0 for a core module.
    const CORE_MODULE: &[u8] = &[1, 0, 0, 0];
    let hint = "build it with `cargo build --target wasm32-wasip2` and copy the `.wasm` it writes";
    if !bytes.starts_with(MAGIC) {
        return Err(format!(
            "plugin `{name}`: {} is not a WebAssembly file (it does not start with `\\0asm`); \
             {hint}",
            path.display()
        ));
    }
    if bytes.get(4..8) == Some(CORE_MODULE) {
        return Err(format!(
            "plugin `{name}`: {} is a WebAssembly module, not a component; {hint}",
            path.display()
        ));
    }
    Ok(())
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

/// The customizer's calls on `$g` (a version's `customizer` guest). A workflow step never gets
/// here ([`invoke`] answers it first).
macro_rules! customizer {
    ($g:expr, $store:ident, $request:ident) => {{
        let g = $g;
        Ok::<_, wasmtime::Error>(match $request {
            Request::Declare => {
                let (schema, options) = {
                    let p = &$store.data().plugin;
                    (p.schema_json.clone(), p.options_json.clone())
                };
                g.call_declare(&mut *$store, &schema, &options)
                    .await?
                    .map(|d| Response::Declared(d, Vec::new()))
            }
            Request::ActionForm(h, ctx, json) => g
                .call_action_form(&mut *$store, h, &ctx, &json)
                .await?
                .map(Response::Text),
            Request::ActionExecute(h, ctx, json) => g
                .call_action_execute(&mut *$store, h, &ctx, &json)
                .await?
                .map(Response::Outcome),
            Request::Hook(h, ctx, json) => g
                .call_hook(&mut *$store, h, &ctx, &json)
                .await?
                .map(Response::MaybeText),
            Request::Segment(h, ctx) => g
                .call_segment(&mut *$store, h, &ctx)
                .await?
                .map(Response::Text),
            Request::Search(h, ctx, text, extended) => g
                .call_search(&mut *$store, h, &ctx, &text, extended)
                .await?
                .map(Response::MaybeText),
            Request::Chart(h, ctx, json) => g
                .call_chart(&mut *$store, h, &ctx, &json)
                .await?
                .map(Response::Text),
            Request::Write(h, ctx, json) => g
                .call_write(&mut *$store, h, &ctx, &json)
                .await?
                .map(Response::MaybeText),
            Request::Operator(h, ctx, json) => g
                .call_replace_operator(&mut *$store, h, &ctx, &json)
                .await?
                .map(Response::Text),
            Request::Override(h, ctx, json) => g
                .call_override_operation(&mut *$store, h, &ctx, &json)
                .await?
                .map(Response::MaybeText),
            Request::Compute(..) | Request::WorkflowStep(..) => Err(GuestError::Internal(
                "computed fields and workflow steps are answered by `invoke`".to_owned(),
            )),
        })
    }};
}

/// A customizer call on `$i`, an instance of 0.2.0 or later: `declare` also asks for the
/// workflow steps, each made 0.2.0's declaration by `$step`.
macro_rules! with_steps {
    ($i:ident, $store:ident, $request:ident, $step:expr) => {{
        let declare = matches!($request, Request::Declare);
        match customizer!($i.canopy_plugin_customizer(), $store, $request)? {
            Ok(Response::Declared(customizations, _)) if declare => Ok($i
                .canopy_plugin_workflow()
                .call_declare_steps(&mut *$store)
                .await?
                .map(|steps| {
                    Response::Declared(customizations, steps.into_iter().map($step).collect())
                })),
            other => Ok(other),
        }
    }};
}

/// One request on an instance: the customizer's calls are the same functions over the same
/// types in every version (one body, expanded per version's bindings), but for `compute`, whose
/// rows 0.3.0 packs; `declare` of 0.2.0 and later also asks for the workflow steps, which 0.1.0
/// does not have.
async fn invoke(
    store: &mut Store<State>,
    instance: &Instance,
    request: Request,
) -> wasmtime::Result<Result<Response, GuestError>> {
    match (instance, request) {
        (Instance::V1(i), Request::Compute(h, ctx, ComputeRows::Lists(rows))) => Ok(i
            .canopy_plugin_customizer()
            .call_compute(&mut *store, h, &ctx, &rows)
            .await?
            .map(Response::Column)),
        (Instance::V2(i), Request::Compute(h, ctx, ComputeRows::Lists(rows))) => Ok(i
            .canopy_plugin_customizer()
            .call_compute(&mut *store, h, &ctx, &rows)
            .await?
            .map(Response::Column)),
        (Instance::V3(i), Request::Compute(h, ctx, ComputeRows::Packed(rows))) => Ok(i
            .canopy_plugin_customizer()
            .call_compute(&mut *store, h, &ctx, &rows)
            .await?
            .map(Response::Packed)),
        (_, Request::Compute(..)) => Ok(Err(GuestError::Internal(
            "computed rows in the form of another contract version".to_owned(),
        ))),
        (Instance::V1(_), Request::WorkflowStep(..)) => Ok(Err(GuestError::Internal(format!(
            "built against canopy:plugin@{}, which has no workflow steps",
            WitVersion::V0_1.as_str()
        )))),
        (Instance::V2(i), Request::WorkflowStep(h, ctx, input)) => Ok(i
            .canopy_plugin_workflow()
            .call_workflow_step(&mut *store, h, &ctx, &input)
            .await?
            .map(Response::Step)),
        (Instance::V3(i), Request::WorkflowStep(h, ctx, input)) => {
            let input = v3::StepInput {
                record_id: input.record_id,
                context_json: input.context_json,
                settings_json: input.settings_json,
            };
            Ok(i.canopy_plugin_workflow()
                .call_workflow_step(&mut *store, h, &ctx, &input)
                .await?
                .map(|out| {
                    Response::Step(v2::StepOutput {
                        option: out.option,
                        values_json: out.values_json,
                    })
                }))
        }
        (Instance::V1(i), request) => customizer!(i.canopy_plugin_customizer(), store, request),
        (Instance::V2(i), request) => with_steps!(i, store, request, std::convert::identity),
        (Instance::V3(i), request) => with_steps!(i, store, request, |d| v2::StepDeclaration {
            name: d.name,
            handler: d.handler,
        }),
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::ResourceLimiter;

    use super::*;
    use crate::plugins::loader::Limits;

    #[test]
    fn a_file_that_is_not_a_component_is_refused_in_one_sentence() {
        let path = Path::new("plugins/broken.wasm");
        let e = check_header("broken", path, b"not a component").unwrap_err();
        assert_eq!(
            e,
            "plugin `broken`: plugins/broken.wasm is not a WebAssembly file (it does not start \
             with `\\0asm`); build it with `cargo build --target wasm32-wasip2` and copy the \
             `.wasm` it writes"
        );
        let e = check_header("core", path, b"\0asm\x01\0\0\0rest").unwrap_err();
        assert!(e.contains("a WebAssembly module, not a component"), "{e}");
        assert!(check_header("ok", path, b"\0asm\x0d\0\x01\0rest").is_ok());
    }

    #[test]
    fn only_pure_calls_run_on_warm_pairs() {
        assert!(poolable(CallKind::Compute));
        assert!(poolable(CallKind::Search));
        assert!(poolable(CallKind::Segment));
        assert!(poolable(CallKind::Chart));
        assert!(poolable(CallKind::Operator));
        assert!(!poolable(CallKind::Write));
        assert!(!poolable(CallKind::Override));
        assert!(!poolable(CallKind::Action));
        assert!(!poolable(CallKind::Hook));
        assert!(!poolable(CallKind::Declare));
        assert!(!poolable(CallKind::WorkflowStep));
    }

    #[test]
    fn the_store_records_how_far_memory_grew_and_still_enforces_the_limit() {
        let info = PluginInfo {
            name: "p".into(),
            path: "p.wasm".into(),
            limits: Limits::default(),
            schema_json: "{}".into(),
            options_json: "{}".into(),
            scope: None,
            used_by: Vec::new(),
            language: "rust".into(),
            reads: crate::plugins::loader::Reads::scoped(Arc::new(
                crate::auth::Permissions::allow_all(),
            )),
        };
        let mut state = State::new(Arc::new(info), None, 32 << 20);
        assert!(state.memory_growing(0, 1 << 20, None).unwrap());
        assert!(state.memory_growing(1 << 20, 20 << 20, None).unwrap());
        assert_eq!(state.memory_bytes, 20 << 20);
        assert!(state.memory_bytes > WARM_MEMORY);
        // Past the limit: refused (a trap, since trap_on_grow_failure), and not recorded.
        assert!(state.memory_growing(20 << 20, 40 << 20, None).is_err());
        assert_eq!(state.memory_bytes, 20 << 20);
    }
}
