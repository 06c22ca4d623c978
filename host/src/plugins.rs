//! Plugins: WebAssembly components built against `wit/plugin@0.1.0`, loaded from a directory,
//! run under limits (a fresh or warm instance per call, an epoch deadline, a memory limit), and
//! turned into the customizer's `Customization`s by implementing its handler traits.
//!
//! - `loader`: the directory (`<name>.wasm` + optional `<name>.toml`), limits, the ABI check.
//! - `runtime`: the engine, linker and one call (store, instance, deadline, trap mapping).
//! - `bindings`: the generated bindings and the imports plugins call back into.
//! - `convert`: typed values ↔ WIT shapes. `handlers`: the trait implementations.

mod bindings;
mod convert;
mod handlers;
mod loader;
mod runtime;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub use loader::{Limits, WIT_VERSION};
pub use runtime::{Plugin, Runtime};

use crate::customizer::Customization;
use crate::datasource::DataSourceSchema;

/// Every plugin of a directory, loaded: all or nothing, so a reload never half-applies.
pub struct PluginSet {
    pub plugins: Vec<Arc<Plugin>>,
}

impl PluginSet {
    /// An empty set (no plugin directory).
    pub fn empty() -> Self {
        Self {
            plugins: Vec::new(),
        }
    }

    /// Loads every plugin of `dir` in file-name order; the first failure fails the whole set
    /// with a message naming the plugin.
    pub async fn load(
        runtime: &Runtime,
        dir: &Path,
        schema: &DataSourceSchema,
    ) -> Result<Self, String> {
        let started = Instant::now();
        let schema_json = convert::schema_json(schema).to_string();
        let mut plugins = Vec::new();
        for entry in loader::scan(dir)? {
            let options_json = serde_json::to_string(&entry.settings.options)
                .map_err(|e| format!("plugin `{}`: options: {e}", entry.name))?;
            let info = loader::PluginInfo {
                name: entry.name,
                path: entry.path,
                limits: entry.settings.limits,
                schema_json: schema_json.clone(),
                options_json,
                scope: None,
                used_by: Vec::new(),
            };
            plugins.push(runtime.load(info).await?);
        }
        tracing::info!(
            count = plugins.len(),
            millis = started.elapsed().as_millis() as u64,
            dir = %dir.display(),
            "plugins loaded"
        );
        Ok(Self { plugins })
    }

    /// The customizations every plugin declared, in load order.
    pub fn customizations(&self, schema: &DataSourceSchema) -> Result<Vec<Customization>, String> {
        let mut out = Vec::new();
        for p in &self.plugins {
            out.extend(handlers::customizations(p, schema)?);
        }
        Ok(out)
    }

    /// Logs each plugin's totals: calls, errors, traps and time spent.
    pub fn log_stats(&self) {
        for p in &self.plugins {
            let s = &p.stats;
            tracing::info!(
                plugin = %p.info.name,
                calls = s.calls.load(Ordering::Relaxed),
                errors = s.errors.load(Ordering::Relaxed),
                traps = s.traps.load(Ordering::Relaxed),
                instantiations = s.instantiations.load(Ordering::Relaxed),
                reused = s.reused.load(Ordering::Relaxed),
                total_ms = s.micros.load(Ordering::Relaxed) / 1000,
                "plugin stats"
            );
        }
    }
}
