//! The plugin directory: each `<name>.wasm` with an optional `<name>.toml` beside it (options
//! and limits), loaded in file-name order so declarations and their conflicts are deterministic.
//! Also the ABI check that runs before linking.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::auth::Permissions;
use crate::datasource::DataSourceSchema;

/// The WIT package this host implements; plugins built against another 0.x minor are refused.
pub const WIT_PACKAGE: &str = "canopy:plugin";
/// The newest version of [`WIT_PACKAGE`] (`wit/plugin@0.3.0`), the one canopy-sdk builds against.
pub const WIT_VERSION: &str = "0.3.0";

/// A version of the contract this host loads: which bindings a component is linked with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WitVersion {
    /// `wit/plugin@0.1.0`: collection customizations (frozen; still loaded).
    V0_1,
    /// `wit/plugin@0.2.0`: 0.1.0 plus workflow-step handlers (frozen; still loaded).
    V0_2,
    /// `wit/plugin@0.3.0`: 0.2.0 with packed columns for computed fields.
    V0_3,
}

impl WitVersion {
    /// Every version this host loads, oldest first.
    pub const ALL: [Self; 3] = [Self::V0_1, Self::V0_2, Self::V0_3];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_1 => "0.1.0",
            Self::V0_2 => "0.2.0",
            Self::V0_3 => "0.3.0",
        }
    }

    /// The supported version an interface's `@x.y.z` matches (semver for 0.x: the minor is the
    /// breaking boundary, patches are compatible both ways).
    fn matching(version: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|v| compatible(version, v.as_str()))
    }
}

/// One application of a plugin: its identity and what it may read through `environment`. A
/// plugin applied several times (`[[use]]` entries, or `use` from other plugins) has one info per
/// application, each with its own options and scope.
#[derive(Debug)]
pub struct PluginInfo {
    /// The file stem (`shop` for `shop.wasm`).
    pub name: String,
    pub path: PathBuf,
    pub limits: Limits,
    pub schema_json: String,
    pub options_json: String,
    /// The collection this application is scoped to (`environment.scope`); `None`: the whole
    /// datasource.
    pub scope: Option<String>,
    /// The plugins that applied this one, outermost first (empty for an application from the
    /// plugin directory itself); for logs and errors.
    pub used_by: Vec<String>,
    /// The language the plugin was written in (`rust`, `python`…): its `.toml`'s `language`,
    /// else what the component says of itself ([`detect_language`]), else `unknown`.
    pub language: String,
    /// How this plugin's reads through `collections` are scoped: the caller's scopes, except on
    /// the collections its `.toml` names in `unscoped_reads`.
    pub reads: Reads,
}

/// Whose scopes a plugin's reads run under. Every `list` and `aggregate` a plugin makes through
/// the host on behalf of a request is restricted to the caller's scope on the collection it
/// reads (so charts, actions, hooks, segments, search handlers and workflow steps all see what
/// the caller may see), except on the collections the plugin's settings name in
/// `unscoped_reads`: that grant is exactly those collections, nothing else.
#[derive(Debug, Clone)]
pub struct Reads {
    /// Where scopes come from (`Permissions::allow_all` when nothing is enforced).
    pub permissions: Arc<Permissions>,
    /// Collections this plugin reads without the caller's scope (`unscoped_reads`).
    pub unscoped: BTreeSet<String>,
}

impl Reads {
    /// Scoped everywhere, with the scopes of `permissions`.
    pub fn scoped(permissions: Arc<Permissions>) -> Self {
        Self {
            permissions,
            unscoped: BTreeSet::new(),
        }
    }
}

impl PluginInfo {
    /// How errors name this application: `plugin `flattener` (used by `shop` on `orders`)`.
    pub fn label(&self) -> String {
        let mut label = format!("plugin `{}`", self.name);
        match (self.used_by.last(), &self.scope) {
            (Some(by), Some(c)) => label.push_str(&format!(" (used by `{by}` on `{c}`)")),
            (Some(by), None) => label.push_str(&format!(" (used by `{by}`)")),
            (None, Some(c)) => label.push_str(&format!(" (on `{c}`)")),
            (None, None) => {}
        }
        label
    }
}

/// The kinds of calls, each with its own default time budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    Declare,
    Compute,
    Action,
    Hook,
    Segment,
    Search,
    Chart,
    /// A field's write replacement.
    Write,
    /// An operator replacement.
    Operator,
    /// A create, update or delete override.
    Override,
    /// A workflow run's `plugin` step.
    WorkflowStep,
}

impl CallKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Declare => "declare",
            Self::Compute => "compute",
            Self::Action => "action",
            Self::Hook => "hook",
            Self::Segment => "segment",
            Self::Search => "search",
            Self::Chart => "chart",
            Self::Write => "write",
            Self::Operator => "operator",
            Self::Override => "override",
            Self::WorkflowStep => "workflow-step",
        }
    }
}

/// Per-call limits. Defaults follow wasm-host.md §3 (computed fields under a second, actions
/// longer since they may write, hooks and search short since they sit on every request).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Linear memory of one call, in MiB (capped by the engine's pool slot).
    pub memory_mb: u64,
    pub declare_ms: u64,
    pub compute_ms: u64,
    pub action_ms: u64,
    pub hook_ms: u64,
    pub segment_ms: u64,
    pub search_ms: u64,
    pub chart_ms: u64,
    pub write_ms: u64,
    pub operator_ms: u64,
    pub override_ms: u64,
    pub workflow_step_ms: u64,
    /// Calls of the plugin (all its applications) that may run at once; default: half the
    /// cores, at least 1, so that a plugin whose calls loop leaves a core to the other routes.
    pub concurrency: u32,
    /// How long a call beyond `concurrency` waits for another to end before it is refused.
    pub queue_ms: u64,
    /// Timeouts or crashes in a row that open the plugin's circuit breaker (0: never).
    pub breaker_failures: u32,
    /// Failures in a row count when they fall within this time of the first of them.
    pub breaker_window_ms: u64,
    /// How long an open breaker refuses calls before it lets one trial call through.
    pub breaker_cooldown_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mb: 64,
            declare_ms: 5_000,
            compute_ms: 1_000,
            action_ms: 10_000,
            hook_ms: 500,
            segment_ms: 500,
            search_ms: 500,
            chart_ms: 5_000,
            // A write replacement and an operator replacement sit on one request, as a hook or
            // a search does; an override does the write itself, as an action may.
            write_ms: 500,
            operator_ms: 500,
            override_ms: 10_000,
            // A workflow step runs outside any request and may write, as an action does.
            workflow_step_ms: 10_000,
            concurrency: default_concurrency(),
            queue_ms: 500,
            breaker_failures: 5,
            breaker_window_ms: 60_000,
            breaker_cooldown_ms: 30_000,
        }
    }
}

/// Half the cores, at least 1: on 2 cores a looping plugin then burns one of them, not both.
fn default_concurrency() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1) as u32)
}

/// The largest memory a call may be given; the pooling allocator's slot size.
pub const MAX_MEMORY_MB: u64 = 256;

impl Limits {
    pub fn time(&self, kind: CallKind) -> Duration {
        Duration::from_millis(match kind {
            CallKind::Declare => self.declare_ms,
            CallKind::Compute => self.compute_ms,
            CallKind::Action => self.action_ms,
            CallKind::Hook => self.hook_ms,
            CallKind::Segment => self.segment_ms,
            CallKind::Search => self.search_ms,
            CallKind::Chart => self.chart_ms,
            CallKind::Write => self.write_ms,
            CallKind::Operator => self.operator_ms,
            CallKind::Override => self.override_ms,
            CallKind::WorkflowStep => self.workflow_step_ms,
        })
    }

    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mb.min(MAX_MEMORY_MB) << 20).unwrap_or(usize::MAX)
    }
}

/// `<name>.toml` beside a plugin.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginToml {
    /// Handed to the plugin as a JSON object (`environment.options`, `declare`) when it has no
    /// `[[use]]` entries.
    pub options: toml::Table,
    pub limits: Limits,
    /// `[[use]]` entries: the plugin is applied once per entry (to `collection`, or to the
    /// datasource, with that entry's options) instead of once with `[options]`. `use = []`: never
    /// applied by itself, only when another plugin uses it.
    #[serde(rename = "use")]
    pub uses: Option<Vec<UseEntry>>,
    /// Collections the plugin reads without the caller's scope (`unscoped_reads = ["orders"]`):
    /// by default every read a plugin makes for a request is restricted to the caller's scope
    /// on the collection read. Shown at load, and in `canopy plugin list`.
    pub unscoped_reads: Vec<String>,
    /// The language the plugin was written in, shown in the console and the reload answer;
    /// when unset, read from the component ([`detect_language`]).
    pub language: Option<String>,
}

/// One `[[use]]` entry of a `.toml`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UseEntry {
    /// The collection the application is scoped to; none: the whole datasource.
    pub collection: Option<String>,
    pub options: toml::Table,
}

impl PluginToml {
    /// The applications the directory asks for: each `[[use]]` entry, or else one on the
    /// datasource with `[options]`.
    pub fn applications(&self) -> Vec<UseEntry> {
        match &self.uses {
            Some(entries) => entries.clone(),
            None => vec![UseEntry {
                collection: None,
                options: self.options.clone(),
            }],
        }
    }

    /// `unscoped_reads`, checked against the served collections: an unknown name stops the
    /// load with a message naming the plugin, its settings file and the name.
    pub fn unscoped_reads(
        &self,
        plugin: &str,
        path: &Path,
        schema: &DataSourceSchema,
    ) -> Result<BTreeSet<String>, String> {
        let mut out = BTreeSet::new();
        for name in &self.unscoped_reads {
            if !schema.collections.contains_key(name) {
                return Err(format!(
                    "plugin `{plugin}` ({}): `unscoped_reads` names the collection `{name}`, \
                     which does not exist",
                    path.with_extension("toml").display()
                ));
            }
            out.insert(name.clone());
        }
        Ok(out)
    }
}

/// One `.wasm` file of the directory with its settings.
#[derive(Debug)]
pub struct Entry {
    pub name: String,
    pub path: PathBuf,
    pub settings: PluginToml,
}

/// The `.wasm` files of `dir` in name order, each with its parsed `.toml` (if any).
pub fn scan(dir: &Path) -> Result<Vec<Entry>, String> {
    let read = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read the plugin directory {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = read
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let toml_path = path.with_extension("toml");
            let settings = if toml_path.is_file() {
                let text = std::fs::read_to_string(&toml_path)
                    .map_err(|e| format!("{}: {e}", toml_path.display()))?;
                toml::from_str(&text).map_err(|e| format!("{}: {e}", toml_path.display()))?
            } else {
                PluginToml::default()
            };
            Ok(Entry {
                name,
                path,
                settings,
            })
        })
        .collect()
}

/// The language a component was written in, from what its toolchain left in it: the text of a
/// `canopy-language` custom section (the TypeScript SDK's build appends `typescript`: the
/// component's own `producers` says `JavaScript`, and its engine module, read first, `C11`);
/// else `python` when it embeds CPython (componentize-py links `libpython3.x.so` as a core
/// module, named in the `component-name` section); else `javascript` when ComponentizeJS
/// processed it; else the first `language` of a `producers` section (rustc writes `Rust`), in
/// lower case. componentize-py writes no `language` of its own (only its WASI adapter's,
/// `Rust`), hence the module-name check first. `None` when none says; a plugin's `.toml` can
/// always state it (`language = "…"`).
pub fn detect_language(bytes: &[u8]) -> Option<String> {
    use wasmparser::{ComponentName, KnownCustom, Parser, Payload};
    let mut declared = None;
    let mut componentize_js = false;
    let mut python = false;
    for payload in Parser::new(0).parse_all(bytes) {
        // A malformed section is the compiler's to report; the language is only a label, so
        // reading stops at the first error (`map_while`), never loops on one.
        let Ok(Payload::CustomSection(section)) = payload else {
            continue;
        };
        match section.as_known() {
            KnownCustom::ComponentName(names) => {
                for name in names.into_iter().map_while(Result::ok) {
                    let ComponentName::CoreModules(modules) = name else {
                        continue;
                    };
                    python |= modules
                        .into_iter()
                        .map_while(Result::ok)
                        .any(|module| module.name.starts_with("libpython"));
                }
            }
            KnownCustom::Producers(fields) => {
                for field in fields.into_iter().map_while(Result::ok) {
                    let mut values = field.values.into_iter().map_while(Result::ok);
                    match field.name {
                        "language" if declared.is_none() => {
                            declared = values.next().map(|v| v.name.to_ascii_lowercase());
                        }
                        "processed-by" => {
                            componentize_js |= values.any(|v| v.name == "ComponentizeJS");
                        }
                        _ => {}
                    }
                }
            }
            KnownCustom::Unknown if section.name() == "canopy-language" => {
                if let Ok(language) = std::str::from_utf8(section.data()) {
                    return Some(language.trim().to_ascii_lowercase());
                }
            }
            _ => {}
        }
    }
    if python {
        Some("python".to_owned())
    } else if componentize_js {
        Some("javascript".to_owned())
    } else {
        declared
    }
}

/// Which version of the contract a component targets, from the versions in the names of the
/// `canopy:plugin` interfaces it imports and exports. A component built against a version this
/// host does not implement (or mixing versions) is refused before linking, with a message naming
/// the versions: the linker's own error would only say a function is missing.
pub fn check_abi(name: &str, component: &Component, engine: &Engine) -> Result<WitVersion, String> {
    let ty = component.component_type();
    let names: Vec<String> = ty
        .imports(engine)
        .map(|(n, _)| n.to_owned())
        .chain(ty.exports(engine).map(|(n, _)| n.to_owned()))
        .collect();
    // "canopy:plugin@0.1.0, canopy:plugin@0.2.0 and canopy:plugin@0.3.0"
    let supported = || {
        let all: Vec<String> = WitVersion::ALL
            .iter()
            .map(|v| format!("{WIT_PACKAGE}@{}", v.as_str()))
            .collect();
        match all.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => all.concat(),
        }
    };
    let mut found: Option<(WitVersion, &str)> = None;
    for interface in names
        .iter()
        .filter(|n| n.starts_with(&format!("{WIT_PACKAGE}/")))
    {
        let version = interface.rsplit_once('@').map_or("", |(_, v)| v);
        let Some(matched) = WitVersion::matching(version) else {
            return Err(format!(
                "plugin `{name}` was built against {WIT_PACKAGE}@{version} (`{interface}`), but \
                 this host implements {}; rebuild the plugin against a compatible SDK",
                supported()
            ));
        };
        match found {
            Some((other, first)) if other != matched => {
                return Err(format!(
                    "plugin `{name}` mixes versions of {WIT_PACKAGE} (`{first}` and \
                     `{interface}`); rebuild it against one SDK"
                ));
            }
            Some(_) => {}
            None => found = Some((matched, interface)),
        }
    }
    found.map(|(v, _)| v).ok_or_else(|| {
        format!(
            "plugin `{name}` does not import or export any {WIT_PACKAGE} interface; build it \
             with canopy-sdk (which targets {WIT_PACKAGE}@{WIT_VERSION})"
        )
    })
}

/// Semver for 0.x: the minor is the breaking boundary, patches are compatible both ways.
fn compatible(version: &str, supported: &str) -> bool {
    let major_minor = |v: &str| {
        let mut it = v.split('.');
        (it.next().map(str::to_owned), it.next().map(str::to_owned))
    };
    let (a, b) = (major_minor(version), major_minor(supported));
    a.0.is_some() && a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_zero_minor_is_compatible() {
        assert!(compatible("0.1.0", "0.1.0"));
        assert!(compatible("0.1.7", "0.1.0"));
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(!compatible("1.1.0", "0.1.0"));
        assert!(!compatible("", "0.1.0"));
    }

    #[test]
    fn each_supported_minor_selects_its_bindings() {
        assert_eq!(WitVersion::matching("0.1.0"), Some(WitVersion::V0_1));
        assert_eq!(WitVersion::matching("0.1.3"), Some(WitVersion::V0_1));
        assert_eq!(WitVersion::matching("0.2.0"), Some(WitVersion::V0_2));
        assert_eq!(WitVersion::matching("0.2.9"), Some(WitVersion::V0_2));
        assert_eq!(WitVersion::matching("0.3.0"), Some(WitVersion::V0_3));
        assert_eq!(WitVersion::matching("0.3.2"), Some(WitVersion::V0_3));
        assert_eq!(WitVersion::matching("0.4.0"), None);
        assert_eq!(WitVersion::matching("1.0.0"), None);
        assert_eq!(
            WitVersion::ALL.last().map(|v| v.as_str()),
            Some(WIT_VERSION)
        );
    }

    /// A component of custom sections only: `(name, payload)` each.
    fn component(sections: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = b"\0asm\x0d\0\x01\0".to_vec();
        for (name, payload) in sections {
            let mut body = vec![name.len() as u8];
            body.extend_from_slice(name.as_bytes());
            body.extend_from_slice(payload);
            out.push(0);
            out.push(body.len() as u8);
            out.extend(body);
        }
        out
    }

    /// A length-prefixed string (all the lengths here are under 128: one LEB128 byte).
    fn string(s: &str) -> Vec<u8> {
        let mut out = vec![s.len() as u8];
        out.extend_from_slice(s.as_bytes());
        out
    }

    /// A `producers` section with one field of one value.
    fn producers(field: &str, value: &str) -> Vec<u8> {
        [
            vec![1],
            string(field),
            vec![1],
            string(value),
            string("1.0"),
        ]
        .concat()
    }

    /// A `component-name` section naming core module 0.
    fn core_module_named(name: &str) -> Vec<u8> {
        let map = [vec![0x00, 0x11, 1, 0], string(name)].concat();
        [vec![1, map.len() as u8], map].concat()
    }

    #[test]
    fn the_language_is_read_from_what_the_toolchain_left_in_the_component() {
        let rust = component(&[("producers", producers("language", "Rust"))]);
        assert_eq!(detect_language(&rust).as_deref(), Some("rust"));
        // componentize-py: only its WASI adapter says `Rust`; the CPython module decides.
        let python = component(&[
            ("producers", producers("language", "Rust")),
            ("component-name", core_module_named("libpython3.14.so")),
        ]);
        assert_eq!(detect_language(&python).as_deref(), Some("python"));
        let silent = component(&[
            ("producers", producers("processed-by", "wit-component")),
            ("component-name", core_module_named("main")),
        ]);
        assert_eq!(detect_language(&silent), None);
        // ComponentizeJS: the engine module's `C11` comes first, the component's `JavaScript`
        // and `processed-by` after; the TypeScript SDK's own section says more.
        let javascript = component(&[
            ("producers", producers("language", "C11")),
            ("producers", producers("processed-by", "ComponentizeJS")),
        ]);
        assert_eq!(detect_language(&javascript).as_deref(), Some("javascript"));
        let typescript = component(&[
            ("producers", producers("language", "C11")),
            ("producers", producers("processed-by", "ComponentizeJS")),
            ("canopy-language", b"typescript".to_vec()),
        ]);
        assert_eq!(detect_language(&typescript).as_deref(), Some("typescript"));
        assert_eq!(detect_language(b"not wasm"), None);
        let stated: PluginToml = toml::from_str("language = \"go\"\n").unwrap();
        assert_eq!(stated.language.as_deref(), Some("go"));
    }

    #[test]
    fn a_plugin_toml_sets_options_and_overrides_only_the_limits_it_names() {
        let t: PluginToml =
            toml::from_str("[options]\nvip = 1000\n[limits]\ncompute_ms = 50\n").unwrap();
        assert_eq!(t.limits.compute_ms, 50);
        assert_eq!(t.limits.action_ms, Limits::default().action_ms);
        assert_eq!(t.options["vip"].as_integer(), Some(1000));
        assert!(toml::from_str::<PluginToml>("[limits]\nbogus = 1\n").is_err());
        let guarded: PluginToml = toml::from_str(
            "[limits]\nconcurrency = 3\nqueue_ms = 10\nbreaker_failures = 0\n\
             breaker_window_ms = 20\nbreaker_cooldown_ms = 30\n",
        )
        .unwrap();
        let l = &guarded.limits;
        assert_eq!((l.concurrency, l.queue_ms, l.breaker_failures), (3, 10, 0));
        assert_eq!((l.breaker_window_ms, l.breaker_cooldown_ms), (20, 30));
    }

    #[test]
    fn the_default_concurrency_leaves_cores_to_the_other_routes() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let limit = Limits::default().concurrency;
        assert!(limit >= 1);
        assert!(limit == 1 || limit < cores, "{limit} of {cores} cores");
    }

    #[test]
    fn use_entries_replace_the_single_datasource_application() {
        let plain: PluginToml = toml::from_str("[options]\na = 1\n").unwrap();
        let apps = plain.applications();
        assert_eq!(apps.len(), 1);
        assert_eq!(apps[0].collection, None);
        assert_eq!(apps[0].options["a"].as_integer(), Some(1));
        let two: PluginToml =
            toml::from_str("[[use]]\ncollection = \"orders\"\n[use.options]\nx = \"y\"\n[[use]]\n")
                .unwrap();
        let apps = two.applications();
        assert_eq!(apps.len(), 2);
        assert_eq!(apps[0].collection.as_deref(), Some("orders"));
        assert_eq!(apps[0].options["x"].as_str(), Some("y"));
        assert_eq!(apps[1].collection, None);
        let library: PluginToml = toml::from_str("use = []\n").unwrap();
        assert!(library.applications().is_empty());
        assert!(toml::from_str::<PluginToml>("[[use]]\ncolection = \"x\"\n").is_err());
    }
}
