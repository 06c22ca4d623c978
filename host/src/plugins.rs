//! Plugins: WebAssembly components built against `wit/plugin@0.1.0` or `wit/plugin@0.2.0`,
//! loaded from a directory, run under limits (a fresh or warm instance per call, an epoch
//! deadline, a memory limit), and turned into the customizer's `Customization`s by implementing
//! its handler traits (workflow-step handlers included, from 0.2.0).
//!
//! - `loader`: the directory (`<name>.wasm` + optional `<name>.toml`), limits, the ABI check
//!   (which version a component targets).
//! - `runtime`: the engine, linker and one call (store, instance, deadline, trap mapping).
//! - `incremental`: compiled functions on disk, so a changed plugin recompiles only what changed.
//! - `tiers`: Cranelift and Winch; a hot swap serves a changed plugin on Winch's code at once and
//!   moves it to Cranelift's in the background.
//! - `guard`: per plugin, the concurrency limit and the circuit breaker its calls pass.
//! - `bindings`: the generated bindings of both versions and the imports plugins call back into.
//! - `convert`: typed values ↔ WIT shapes. `handlers`: the trait implementations.
//! - `workflow`: workflow-step handlers (`WorkflowStepHandler`).

mod artifacts;
mod bindings;
mod convert;
mod guard;
mod handlers;
mod incremental;
// `pub(crate)` for `crate::fuzzing`, which hands its parsers to the fuzz targets.
pub(crate) mod loader;
mod runtime;
mod tiers;
mod workflow;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures::{StreamExt as _, TryStreamExt as _};

pub use loader::{Limits, Reads, WIT_VERSION, WitVersion};
pub use runtime::{Compiled, Plugin, Runtime};
pub use tiers::Compiler;

use crate::auth::Permissions;
use crate::customizer::Customization;
use crate::datasource::DataSourceSchema;

/// How deep `use` may nest (a plugin using a plugin using a plugin …): past it, the load fails.
pub const MAX_USE_DEPTH: usize = 8;

/// Every plugin of a directory, loaded: all or nothing, so a reload never half-applies.
pub struct PluginSet {
    /// The applications the directory asks for (file-name order, then `[[use]]` order); each
    /// holds the applications of the plugins it `use`s.
    pub plugins: Vec<Arc<Plugin>>,
}

/// What one load shares: the compiled files, by name, and their settings.
struct Loading<'a> {
    runtime: &'a Runtime,
    schema_json: String,
    /// Where the scopes of plugin reads come from.
    permissions: &'a Arc<Permissions>,
    /// Each file's compiled component, settings and `unscoped_reads` (checked).
    compiled: BTreeMap<String, (Compiled, loader::Entry, BTreeSet<String>)>,
}

/// One plugin file compiled (or read from the compile cache), with the collections its settings
/// let it read past the caller's scopes.
async fn compile_entry(
    runtime: &Runtime,
    schema: &DataSourceSchema,
    entry: &loader::Entry,
) -> Result<(Compiled, BTreeSet<String>), String> {
    let unscoped = entry
        .settings
        .unscoped_reads(&entry.name, &entry.path, schema)?;
    let compiled = runtime
        .compile(&entry.name, &entry.path, &entry.settings.limits)
        .await?;
    Ok((compiled, unscoped))
}

impl PluginSet {
    /// An empty set (no plugin directory).
    pub fn empty() -> Self {
        Self {
            plugins: Vec::new(),
        }
    }

    /// Loads every plugin of `dir` in file-name order: each is compiled once, then applied once
    /// per `[[use]]` entry of its `.toml` (or once to the datasource with `[options]`), and every
    /// `use` it declares applies that plugin in turn, depth-first. The first failure fails the
    /// whole set with a message naming the plugin.
    ///
    /// The reads plugins make for a request run under the caller's scopes from `permissions`
    /// (`Permissions::allow_all()`: none), except on the collections a plugin's `.toml` names in
    /// `unscoped_reads`, each logged here as a warning.
    pub async fn load(
        runtime: &Runtime,
        dir: &Path,
        schema: &DataSourceSchema,
        permissions: &Arc<Permissions>,
    ) -> Result<Self, String> {
        let started = Instant::now();
        let mut loading = Loading {
            runtime,
            schema_json: convert::schema_json(schema).to_string(),
            permissions,
            compiled: BTreeMap::new(),
        };
        let entries = loader::scan(dir)?;
        // Compiled, or read from the compile cache, a few at once: each is a blocking task of
        // its own, so a start with many cached plugins takes about their sum divided by the
        // cores rather than their sum (Python and TypeScript components take a few hundred
        // milliseconds each to read back). At most one per core: a cold compile is itself
        // parallel and large. In file-name order, so the first failure is still the first file's.
        let parallel = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        // The futures are made before the stream (a closure in it would make the load's future
        // not `Send` for every lifetime: rustc's higher-ranked inference).
        let compiling: Vec<_> = entries
            .iter()
            .map(|entry| compile_entry(runtime, schema, entry))
            .collect();
        let compiled: Vec<_> = futures::stream::iter(compiling)
            .buffered(parallel)
            .try_collect()
            .await?;
        let mut names = Vec::new();
        for (entry, (compiled, unscoped)) in entries.into_iter().zip(compiled) {
            if !unscoped.is_empty() {
                // An admin should see every grant beyond the caller's scopes.
                tracing::warn!(
                    plugin = %entry.name,
                    collections = %unscoped.iter().cloned().collect::<Vec<_>>().join(", "),
                    settings = %entry.path.with_extension("toml").display(),
                    "plugin reads these collections without the caller's scopes (unscoped_reads)"
                );
            }
            names.push(entry.name.clone());
            loading
                .compiled
                .insert(entry.name.clone(), (compiled, entry, unscoped));
        }
        let mut plugins = Vec::new();
        for name in &names {
            let applications = loading
                .compiled
                .get(name)
                .map(|(_, entry, _)| entry.settings.applications())
                .unwrap_or_default();
            for app in applications {
                let options = serde_json::to_value(&app.options)
                    .map_err(|e| format!("plugin `{name}`: options: {e}"))?;
                plugins.push(loading.apply(name, options, app.collection, &[]).await?);
            }
        }
        runtime.keep_only(loading.compiled.values().map(|(compiled, _, _)| compiled));
        let set = Self { plugins };
        let quick: Vec<String> = set.quick().into_iter().map(|(name, _)| name).collect();
        tracing::info!(
            count = set.plugins.len(),
            millis = started.elapsed().as_millis() as u64,
            dir = %dir.display(),
            quick = %quick.join(", "),
            "plugins loaded"
        );
        Ok(set)
    }

    /// The plugin files (name, path) whose code is Winch's: a hot swap compiled them quickly, and
    /// their Cranelift code is still to compile (`Runtime::optimize`).
    pub fn quick(&self) -> Vec<(String, std::path::PathBuf)> {
        let mut files: Vec<_> = self
            .applications()
            .iter()
            .filter(|p| p.compiler() == Compiler::Winch)
            .map(|p| (p.info.name.clone(), p.info.path.clone()))
            .collect();
        files.sort();
        files.dedup();
        files
    }

    /// Each plugin file of the set (applications of the same file share it) with its language.
    pub fn languages(&self) -> std::collections::BTreeMap<String, String> {
        self.applications()
            .iter()
            .map(|p| (p.info.name.clone(), p.info.language.clone()))
            .collect()
    }

    /// The customizations every plugin declared, in load order.
    pub fn customizations(&self, schema: &DataSourceSchema) -> Result<Vec<Customization>, String> {
        let mut out = Vec::new();
        for p in &self.plugins {
            out.extend(handlers::customizations(p, schema)?);
        }
        Ok(out)
    }

    /// Every application, those applied by `use` included, depth-first.
    pub fn applications(&self) -> Vec<Arc<Plugin>> {
        fn walk(p: &Arc<Plugin>, out: &mut Vec<Arc<Plugin>>) {
            out.push(p.clone());
            for used in &p.uses {
                walk(used, out);
            }
        }
        let mut out = Vec::new();
        for p in &self.plugins {
            walk(p, &mut out);
        }
        out
    }

    /// Logs each application's totals: calls, errors, traps and time spent.
    pub fn log_stats(&self) {
        for p in &self.applications() {
            let s = &p.stats;
            tracing::info!(
                plugin = %p.info.label(),
                calls = s.calls.load(Ordering::Relaxed),
                errors = s.errors.load(Ordering::Relaxed),
                traps = s.traps.load(Ordering::Relaxed),
                instantiations = s.instantiations.load(Ordering::Relaxed),
                reused = s.reused.load(Ordering::Relaxed),
                refused = s.refused.load(Ordering::Relaxed),
                total_ms = s.micros.load(Ordering::Relaxed) / 1000,
                "plugin stats"
            );
        }
    }
}

impl Loading<'_> {
    /// Applies plugin `name` with `options` to `scope`, then the plugins it `use`s, depth-first
    /// in declaration order. `chain` holds the plugins applying this one (outermost first): a
    /// plugin already in it is a cycle, refused, as is a chain deeper than [`MAX_USE_DEPTH`].
    fn apply<'s>(
        &'s self,
        name: &'s str,
        options: serde_json::Value,
        scope: Option<String>,
        chain: &'s [String],
    ) -> Pin<Box<dyn Future<Output = Result<Arc<Plugin>, String>> + Send + 's>> {
        Box::pin(async move {
            let path = || {
                chain
                    .iter()
                    .map(String::as_str)
                    .chain([name])
                    .collect::<Vec<_>>()
                    .join(" → ")
            };
            let Some((compiled, entry, unscoped)) = self.compiled.get(name) else {
                let by = chain.last().map(String::as_str).unwrap_or_default();
                return Err(format!(
                    "plugin `{by}` uses `{name}`, which is not in the plugin directory"
                ));
            };
            if chain.iter().any(|c| c == name) {
                return Err(format!("plugins use each other in a cycle: {}", path()));
            }
            if chain.len() >= MAX_USE_DEPTH {
                return Err(format!(
                    "plugins use each other more than {MAX_USE_DEPTH} levels deep: {}",
                    path()
                ));
            }
            let info = loader::PluginInfo {
                name: name.to_owned(),
                path: entry.path.clone(),
                limits: entry.settings.limits.clone(),
                schema_json: self.schema_json.clone(),
                options_json: options.to_string(),
                scope,
                used_by: chain.to_vec(),
                language: entry
                    .settings
                    .language
                    .clone()
                    .or_else(|| compiled.language().map(str::to_owned))
                    .unwrap_or_else(|| "unknown".to_owned()),
                reads: loader::Reads {
                    permissions: Arc::clone(self.permissions),
                    unscoped: unscoped.clone(),
                },
            };
            if let Some(by) = chain.last() {
                tracing::info!(plugin = %info.label(), by = %by, "plugin applied by another");
            }
            let mut plugin = self.runtime.apply(compiled, info).await?;
            let mut inner = chain.to_vec();
            inner.push(name.to_owned());
            for d in &plugin.declarations {
                if !matches!(d.kind, bindings::Kind::Use) {
                    continue;
                }
                let definition: serde_json::Value = serde_json::from_str(&d.definition)
                    .map_err(|e| format!("{}: use `{}`: {e}", plugin.info.label(), d.name))?;
                let options = match definition.get("options") {
                    None | Some(serde_json::Value::Null) => serde_json::json!({}),
                    Some(o @ serde_json::Value::Object(_)) => o.clone(),
                    Some(other) => {
                        return Err(format!(
                            "{}: use `{}`: options must be an object, not {other}",
                            plugin.info.label(),
                            d.name
                        ));
                    }
                };
                let used = self
                    .apply(&d.name, options, d.collection.clone(), &inner)
                    .await?;
                plugin.uses.push(used);
            }
            Ok(Arc::new(plugin))
        })
    }
}
