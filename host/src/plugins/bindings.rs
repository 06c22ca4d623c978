//! The host side of the contract: the generated bindings of `wit/plugin@0.1.0` (at the root of
//! this module), of `wit/plugin@0.2.0` ([`v2`]) and of `wit/plugin@0.3.0` ([`v3`]), and the
//! imports plugins call (`collections`, `logging`, `environment`) implemented over the calling
//! request's context.
//!
//! 0.2.0 is 0.1.0 plus the exported `workflow` interface; 0.3.0 is 0.2.0 with packed columns in
//! `compute`. Their `types` are mapped onto 0.1.0's Rust types (bindgen's `with`; wasmtime checks
//! component types structurally), so records, batches and errors are one set of types whatever
//! the version, and newer versions' imports delegate to 0.1.0's implementations. Only the link
//! names differ: every version's imports are in one linker.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::convert;
use super::loader::PluginInfo;
use crate::customizer::Context;
use crate::datasource::{Caller, Error as DsError};

wasmtime::component::bindgen!({
    world: "customization",
    path: "../wit/plugin@0.1.0",
    imports: { default: async | trappable },
    exports: { default: async },
});

/// The bindings of `wit/plugin@0.2.0`.
pub mod v2 {
    wasmtime::component::bindgen!({
        world: "customization",
        path: "../wit/plugin@0.2.0",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "canopy:plugin/types@0.2.0": crate::plugins::bindings::canopy::plugin::types },
    });

    pub use self::exports::canopy::plugin::workflow::{StepDeclaration, StepInput, StepOutput};
}

/// The bindings of `wit/plugin@0.3.0`: 0.2.0 with packed columns for `compute`.
pub mod v3 {
    wasmtime::component::bindgen!({
        world: "customization",
        path: "../wit/plugin@0.3.0",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "canopy:plugin/types@0.3.0": crate::plugins::bindings::canopy::plugin::types },
    });

    pub use self::canopy::plugin::packed::{
        Batch as PackedBatch, Column as PackedColumn, NamedColumn as PackedNamedColumn, Texts,
    };
    pub use self::exports::canopy::plugin::workflow::StepInput;
}

// `self::`: the WIT package is named `canopy` like this crate, and rustdoc (doctests) passes the
// crate as `--extern canopy`, which makes a bare `canopy::` ambiguous.
pub use self::canopy::plugin::types::{
    ActionOutcome, Batch, CallContext, Caller as WitCaller, Column, Customization as Declaration,
    Error as GuestError, Kind, NamedColumn,
};

/// The request a handler runs for: whose permissions apply to its callbacks, and where they go.
pub struct Scope {
    pub caller: Caller,
    pub ctx: Context,
}

/// What one store holds: an empty WASI context with stderr captured, the memory limits, the
/// plugin's identity and the request's scope.
pub struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limits: StoreLimits,
    pub stderr: MemoryOutputPipe,
    pub plugin: Arc<PluginInfo>,
    pub scope: Option<Scope>,
    /// The largest linear memory this store has grown to, in bytes (a warm pair past the pool's
    /// threshold is recycled).
    pub memory_bytes: usize,
}

impl State {
    pub fn new(plugin: Arc<PluginInfo>, scope: Option<Scope>, memory_bytes: usize) -> Self {
        // Panics and prints land here, attached to the error of a failed call.
        let stderr = MemoryOutputPipe::new(16 * 1024);
        let wasi = wasmtime_wasi::WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limits: wasmtime::StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .instances(16)
                .tables(16)
                .memories(4)
                .trap_on_grow_failure(true)
                .build(),
            stderr,
            plugin,
            scope,
            memory_bytes: 0,
        }
    }

    pub fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        self
    }

    fn scope(&self) -> Result<&Scope, GuestError> {
        self.scope.as_ref().ok_or_else(|| {
            GuestError::Internal("collections are not available while declaring".to_owned())
        })
    }
}

/// The store's limits, recording how far memory grew.
impl ResourceLimiter for State {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        if allowed {
            self.memory_bytes = self.memory_bytes.max(desired);
        }
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A datasource error as the guest sees it; the guest usually propagates it unchanged, so the
/// request ends with the same status it would have had without the plugin.
pub fn guest_error(e: DsError) -> GuestError {
    match e {
        DsError::Validation(m) | DsError::MissingField(m) | DsError::MissingRelation(m) => {
            GuestError::Validation(m)
        }
        DsError::MissingCollection(_) | DsError::NoPrimaryKey => {
            GuestError::Validation(e.to_string())
        }
        DsError::Forbidden(m) => GuestError::Forbidden(m),
        DsError::Unprocessable(m) => GuestError::Unprocessable(m),
        other => GuestError::Internal(other.to_string()),
    }
}

impl self::canopy::plugin::types::Host for State {}

impl self::canopy::plugin::collections::Host for State {
    async fn list(
        &mut self,
        collection: String,
        filter_json: String,
        projection: Vec<String>,
        sort_json: String,
        page: Option<(u32, u32)>,
    ) -> wasmtime::Result<Result<Batch, GuestError>> {
        let scope = match self.scope() {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        Ok(convert::host_list(
            &self.plugin.reads,
            scope,
            &collection,
            &filter_json,
            projection,
            &sort_json,
            page,
        )
        .await
        .map_err(guest_error))
    }

    async fn aggregate(
        &mut self,
        collection: String,
        filter_json: String,
        aggregation_json: String,
        limit: Option<u32>,
    ) -> wasmtime::Result<Result<String, GuestError>> {
        let scope = match self.scope() {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        Ok(convert::host_aggregate(
            &self.plugin.reads,
            scope,
            &collection,
            &filter_json,
            &aggregation_json,
            limit,
        )
        .await
        .map_err(guest_error))
    }

    async fn create(
        &mut self,
        collection: String,
        records_json: String,
    ) -> wasmtime::Result<Result<String, GuestError>> {
        let scope = match self.scope() {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        Ok(convert::host_create(scope, &collection, &records_json)
            .await
            .map_err(guest_error))
    }

    async fn update(
        &mut self,
        collection: String,
        filter_json: String,
        patch_json: String,
    ) -> wasmtime::Result<Result<(), GuestError>> {
        let scope = match self.scope() {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        Ok(
            convert::host_update(scope, &collection, &filter_json, &patch_json)
                .await
                .map_err(guest_error),
        )
    }

    async fn delete(
        &mut self,
        collection: String,
        filter_json: String,
    ) -> wasmtime::Result<Result<(), GuestError>> {
        let scope = match self.scope() {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        Ok(convert::host_delete(scope, &collection, &filter_json)
            .await
            .map_err(guest_error))
    }
}

impl self::canopy::plugin::logging::Host for State {
    async fn log(
        &mut self,
        level: self::canopy::plugin::logging::Level,
        message: String,
    ) -> wasmtime::Result<()> {
        use self::canopy::plugin::logging::Level as L;
        let plugin = self.plugin.name.as_str();
        // A plugin's line carries the request it served (the correlation id of the request's
        // own log line and of its answer's header) and the user, so it can be found beside
        // them; declarations and workflow steps run outside a request and log without.
        let correlation_id = self
            .scope
            .as_ref()
            .map(|s| tracing::field::display(s.caller.request_id));
        let user = self.scope.as_ref().map(|s| s.caller.id);
        macro_rules! plugin_line {
            ($level:ident) => {
                tracing::$level!(plugin, correlation_id, user, "{message}")
            };
        }
        match level {
            L::Trace => plugin_line!(trace),
            L::Debug => plugin_line!(debug),
            L::Info => plugin_line!(info),
            L::Warn => plugin_line!(warn),
            L::Error => plugin_line!(error),
        }
        Ok(())
    }
}

impl self::canopy::plugin::environment::Host for State {
    async fn schema(&mut self) -> wasmtime::Result<String> {
        Ok(self.plugin.schema_json.clone())
    }

    async fn options(&mut self) -> wasmtime::Result<String> {
        Ok(self.plugin.options_json.clone())
    }

    async fn scope(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self.plugin.scope.clone())
    }
}

// Newer versions' imports: the same functions as 0.1.0's over the same types, under other link
// names, so each one delegates to 0.1.0's implementation.
macro_rules! same_imports_as_0_1 {
    ($v:ident) => {
        impl $v::canopy::plugin::collections::Host for State {
            async fn list(
                &mut self,
                collection: String,
                filter_json: String,
                projection: Vec<String>,
                sort_json: String,
                page: Option<(u32, u32)>,
            ) -> wasmtime::Result<Result<Batch, GuestError>> {
                self::canopy::plugin::collections::Host::list(
                    self,
                    collection,
                    filter_json,
                    projection,
                    sort_json,
                    page,
                )
                .await
            }

            async fn aggregate(
                &mut self,
                collection: String,
                filter_json: String,
                aggregation_json: String,
                limit: Option<u32>,
            ) -> wasmtime::Result<Result<String, GuestError>> {
                self::canopy::plugin::collections::Host::aggregate(
                    self,
                    collection,
                    filter_json,
                    aggregation_json,
                    limit,
                )
                .await
            }

            async fn create(
                &mut self,
                collection: String,
                records_json: String,
            ) -> wasmtime::Result<Result<String, GuestError>> {
                self::canopy::plugin::collections::Host::create(self, collection, records_json)
                    .await
            }

            async fn update(
                &mut self,
                collection: String,
                filter_json: String,
                patch_json: String,
            ) -> wasmtime::Result<Result<(), GuestError>> {
                self::canopy::plugin::collections::Host::update(
                    self,
                    collection,
                    filter_json,
                    patch_json,
                )
                .await
            }

            async fn delete(
                &mut self,
                collection: String,
                filter_json: String,
            ) -> wasmtime::Result<Result<(), GuestError>> {
                self::canopy::plugin::collections::Host::delete(self, collection, filter_json).await
            }
        }

        impl $v::canopy::plugin::logging::Host for State {
            async fn log(
                &mut self,
                level: $v::canopy::plugin::logging::Level,
                message: String,
            ) -> wasmtime::Result<()> {
                use self::canopy::plugin::logging::Level as L;
                use $v::canopy::plugin::logging::Level as Theirs;
                let level = match level {
                    Theirs::Trace => L::Trace,
                    Theirs::Debug => L::Debug,
                    Theirs::Info => L::Info,
                    Theirs::Warn => L::Warn,
                    Theirs::Error => L::Error,
                };
                self::canopy::plugin::logging::Host::log(self, level, message).await
            }
        }

        impl $v::canopy::plugin::environment::Host for State {
            async fn schema(&mut self) -> wasmtime::Result<String> {
                self::canopy::plugin::environment::Host::schema(self).await
            }

            async fn options(&mut self) -> wasmtime::Result<String> {
                self::canopy::plugin::environment::Host::options(self).await
            }

            async fn scope(&mut self) -> wasmtime::Result<Option<String>> {
                self::canopy::plugin::environment::Host::scope(self).await
            }
        }
    };
}

same_imports_as_0_1!(v2);
same_imports_as_0_1!(v3);

impl v3::canopy::plugin::packed::Host for State {}
