//! Real plugins (tests/plugins, built by tests/build.rs) through the runtime and the customizer's
//! handler traits: a misbehaving handler fails its own call with a clear error while the others,
//! concurrent or later, keep succeeding; a plugin built against the frozen 0.1.0 WIT still loads
//! and works; a plugin built against a WIT version the host does not implement is refused by name.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use canopy::customizer::{Batch, Column, ComputeHandler, Context, Customization, Kind};
use canopy::datasource::{ColumnType, DataSource, Error, PrimitiveType, Value};
use canopy::plugins::{Compiler, PluginSet, Runtime, WIT_VERSION, WitVersion};
use canopy_e2e::{Backend, TestDb, caller};

use crate::harness::allow_all;

fn built(name: &str) -> PathBuf {
    Path::new(env!("CANOPY_TEST_PLUGINS")).join(format!("{name}.wasm"))
}

/// A plugin directory holding the given built plugins, each with an optional `.toml`.
pub(crate) fn plugin_dir(plugins: &[(&str, Option<&str>)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("canopy-plugins-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, toml) in plugins {
        std::fs::copy(
            built(&name.replace('-', "_")),
            dir.join(format!("{name}.wasm")),
        )
        .unwrap();
        if let Some(toml) = toml {
            std::fs::write(dir.join(format!("{name}.toml")), toml).unwrap();
        }
    }
    dir
}

async fn datasource() -> (TestDb, Arc<dyn DataSource>) {
    let db = TestDb::new(Backend::Sqlite).await;
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        .await;
    let ds = db.datasource(Default::default()).await;
    (db, Arc::new(ds))
}

fn field(customizations: &[Customization], wanted: &str) -> Arc<dyn ComputeHandler> {
    customizations
        .iter()
        .find_map(|c| match &c.kind {
            Kind::ComputedField { name, handler, .. } if name == wanted => Some(handler.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no computed field {wanted}"))
}

fn ids(n: usize) -> Batch {
    Batch {
        len: n,
        columns: vec![Column {
            path: "id".into(),
            column_type: ColumnType::Primitive(PrimitiveType::Number),
            values: (1..=n as i64).map(Value::Int).collect(),
        }],
    }
}

/// Two calls at once, whatever the cores: a looping call must leave room for a good one.
const LIMITS: &str = "[options]\ncollection = \"customers\"\n[limits]\ncompute_ms = 300\nmemory_mb = \
                      32\nconcurrency = 2\n";

async fn hostile() -> (TestDb, Context, Vec<Customization>, PluginSet) {
    hostile_with(LIMITS).await
}

/// The hostile plugin under these limits.
async fn hostile_with(limits: &str) -> (TestDb, Context, Vec<Customization>, PluginSet) {
    let (db, ds) = datasource().await;
    let runtime = Runtime::new(None).unwrap();
    let dir = plugin_dir(&[("hostile", Some(limits))]);
    let set = PluginSet::load(&runtime, &dir, ds.schema(), &allow_all())
        .await
        .unwrap();
    let customizations = set.customizations(ds.schema()).unwrap();
    let ctx = Context {
        collection: Some("customers".into()),
        datasource: ds,
    };
    (db, ctx, customizations, set)
}

fn plugin_message(e: &Error) -> String {
    match e {
        Error::Plugin(m) => m.clone(),
        other => panic!("expected a plugin error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_well_behaved_computed_field_gets_one_value_per_row_through_a_columnar_batch() {
    let (_db, ctx, c, _set) = hostile().await;
    let values = field(&c, "ok")
        .compute(&caller(), &ctx, &ids(3))
        .await
        .unwrap();
    assert_eq!(values, vec![Value::Int(2), Value::Int(4), Value::Int(6)]);
}

#[tokio::test]
async fn an_infinite_loop_is_interrupted_at_its_time_limit_while_concurrent_calls_succeed() {
    let (_db, ctx, c, set) = hostile().await;
    let (looping, ok) = (field(&c, "loops"), field(&c, "ok"));
    let started = Instant::now();
    let caller = caller();
    let one = ids(1);
    let stuck = looping.compute(&caller, &ctx, &one);
    let others = async {
        for _ in 0..20 {
            assert_eq!(ok.compute(&caller, &ctx, &ids(2)).await.unwrap().len(), 2);
        }
    };
    let (stuck, ()) = tokio::join!(stuck, others);
    let message = plugin_message(&stuck.unwrap_err());
    assert!(
        message.contains("hostile") && message.contains("time limit of 300 ms"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    // The host keeps serving the same plugin afterwards.
    assert_eq!(
        ok.compute(&caller, &ctx, &ids(1)).await.unwrap(),
        vec![Value::Int(2)]
    );
    assert!(
        set.plugins[0]
            .stats
            .traps
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
}

#[tokio::test]
async fn a_memory_bomb_hits_its_memory_limit_and_names_the_plugin() {
    let (_db, ctx, c, _set) = hostile().await;
    let e = field(&c, "bomb")
        .compute(&caller(), &ctx, &ids(1))
        .await
        .unwrap_err();
    let message = plugin_message(&e);
    assert!(
        message.contains("hostile") && message.contains("memory limit of 32 MiB"),
        "{message}"
    );
    assert_eq!(
        field(&c, "ok")
            .compute(&caller(), &ctx, &ids(1))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_panic_fails_its_call_with_the_panic_message() {
    let (_db, ctx, c, _set) = hostile().await;
    let e = field(&c, "panics")
        .compute(&caller(), &ctx, &ids(1))
        .await
        .unwrap_err();
    let message = plugin_message(&e);
    assert!(
        message.contains("hostile") && message.contains("panicked on purpose"),
        "{message}"
    );
    assert_eq!(
        field(&c, "ok")
            .compute(&caller(), &ctx, &ids(1))
            .await
            .unwrap()
            .len(),
        1
    );
}

/// Every byte the test's subscriber writes, for reading its JSON lines back.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for Captured {
    type Writer = Self;
    fn make_writer(&'w self) -> Self {
        self.clone()
    }
}

// The test runtime is single-threaded, so the thread's subscriber sees the plugin's call.
#[tokio::test]
async fn a_failing_plugin_call_is_logged_with_the_requests_correlation_id() {
    let (_db, ctx, c, _set) = hostile().await;
    let captured = Captured::default();
    let subscriber = canopy::logging::subscriber(
        "error",
        canopy::config::LogFormat::Json,
        captured.clone(),
        false,
    )
    .unwrap();
    let _default = tracing::subscriber::set_default(subscriber);
    let caller = caller();
    field(&c, "panics")
        .compute(&caller, &ctx, &ids(1))
        .await
        .unwrap_err();
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line: serde_json::Value = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|l: &serde_json::Value| l["message"].as_str().is_some_and(|m| m.contains("trapped")))
        .unwrap_or_else(|| panic!("no trap line in {text}"));
    assert_eq!(line["plugin"], "hostile", "{line}");
    assert_eq!(
        line["correlation_id"],
        caller.request_id.to_string(),
        "{line}"
    );
}

#[tokio::test]
async fn malformed_output_is_refused_and_a_guest_error_is_the_requests_own_error() {
    let (_db, ctx, c, _set) = hostile().await;
    let e = field(&c, "malformed")
        .compute(&caller(), &ctx, &ids(2))
        .await
        .unwrap_err();
    let message = plugin_message(&e);
    assert!(
        message.contains("malformed data") && message.contains("booleans"),
        "{message}"
    );
    let e = field(&c, "refuses")
        .compute(&caller(), &ctx, &ids(1))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Validation(ref m) if m == "refused by the plugin"),
        "{e:?}"
    );
}

fn count(c: &std::sync::atomic::AtomicU64) -> u64 {
    c.load(std::sync::atomic::Ordering::Relaxed)
}

#[tokio::test]
async fn sequential_computed_field_calls_reuse_one_warm_instance() {
    let (_db, ctx, c, set) = hostile().await;
    let (plugin, ok) = (&set.plugins[0], field(&c, "ok"));
    let (created, reused) = (
        count(&plugin.stats.instantiations),
        count(&plugin.stats.reused),
    );
    for i in 1..=5 {
        assert_eq!(ok.compute(&caller(), &ctx, &ids(i)).await.unwrap().len(), i);
    }
    assert_eq!(count(&plugin.stats.instantiations) - created, 1);
    assert_eq!(count(&plugin.stats.reused) - reused, 4);
    assert_eq!(plugin.warm_pairs(), 1);
}

#[tokio::test]
async fn a_trap_or_error_in_a_warm_instance_discards_it_and_the_next_call_succeeds() {
    // The time limit is wall-clock time: on a loaded machine (CI beside other builds) the
    // memory bomb, descheduled, once reached 300 ms before 32 MiB. A longer limit keeps each
    // handler failing for its own reason.
    let limits = LIMITS.replace("compute_ms = 300", "compute_ms = 3000");
    let (_db, ctx, c, set) = hostile_with(&limits).await;
    let plugin = &set.plugins[0];
    let ok = field(&c, "ok");
    let warm_up = async || {
        assert_eq!(
            ok.compute(&caller(), &ctx, &ids(2)).await.unwrap(),
            vec![Value::Int(2), Value::Int(4)]
        );
        assert_eq!(plugin.warm_pairs(), 1);
    };
    // Each failing handler runs on the warm pair left by the previous good call (the pool is
    // per plugin, not per handler), and must leave no pair behind; the deadline and the memory
    // limit are armed for a warm pair as for a fresh one.
    for (handler, expected) in [
        ("panics", "panicked on purpose"),
        ("loops", "time limit of 3000 ms"),
        ("bomb", "memory limit of 32 MiB"),
        ("refuses", "refused by the plugin"),
    ] {
        warm_up().await;
        let (created, reused) = (
            count(&plugin.stats.instantiations),
            count(&plugin.stats.reused),
        );
        let e = field(&c, handler)
            .compute(&caller(), &ctx, &ids(1))
            .await
            .unwrap_err();
        let message = match &e {
            Error::Validation(m) => m.clone(),
            other => plugin_message(other),
        };
        assert!(message.contains(expected), "{handler}: {message}");
        assert_eq!(count(&plugin.stats.reused) - reused, 1, "{handler}");
        assert_eq!(count(&plugin.stats.instantiations), created, "{handler}");
        assert_eq!(
            plugin.warm_pairs(),
            0,
            "{handler} left its pair in the pool"
        );
        // The next call gets a fresh instance and succeeds.
        assert_eq!(
            ok.compute(&caller(), &ctx, &ids(1)).await.unwrap(),
            vec![Value::Int(2)]
        );
        assert_eq!(
            count(&plugin.stats.instantiations),
            created + 1,
            "{handler}"
        );
        assert_eq!(plugin.warm_pairs(), 1);
        // Then reuses it.
        ok.compute(&caller(), &ctx, &ids(1)).await.unwrap();
        assert_eq!(
            count(&plugin.stats.instantiations),
            created + 1,
            "{handler}"
        );
    }
}

#[tokio::test]
async fn a_plugin_built_against_another_wit_version_is_refused_naming_both_versions() {
    let (_db, ds) = datasource().await;
    let runtime = Runtime::new(None).unwrap();
    let dir = plugin_dir(&[("other-wit", None)]);
    let Err(message) = PluginSet::load(&runtime, &dir, ds.schema(), &allow_all()).await else {
        panic!("the 0.9.0 plugin loaded")
    };
    assert!(
        message.contains("`other-wit`")
            && message.contains("canopy:plugin@0.9.0")
            && message.contains("canopy:plugin@0.1.0, canopy:plugin@0.2.0 and canopy:plugin@0.3.0"),
        "{message}"
    );
}

/// The `shout` field of a plugin built against a frozen version: computed from the batch (in
/// that version's shape: one string per cell) and the count read back through the version's
/// `collections.list`.
async fn a_frozen_version_still_loads_and_computes(plugin: &str, version: WitVersion) {
    let (db, ds) = datasource().await;
    for name in ["Ann", "Bob", "Carl"] {
        db.execute(&format!("INSERT INTO customers (name) VALUES ('{name}')"))
            .await;
    }
    let runtime = Runtime::new(None).unwrap();
    let dir = plugin_dir(&[(plugin, None)]);
    let set = PluginSet::load(&runtime, &dir, ds.schema(), &allow_all())
        .await
        .unwrap();
    assert_eq!(set.plugins[0].wit_version(), version);
    assert!(!set.plugins[0].packs_rows());
    let steps: Vec<&str> = set.plugins[0]
        .workflow_steps
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    let expected_steps: &[&str] = if version == WitVersion::V0_1 {
        &[]
    } else {
        &["stamp"]
    };
    assert_eq!(steps, expected_steps);
    let customizations = set.customizations(ds.schema()).unwrap();
    // The field, and each step as a customization of its own.
    assert_eq!(
        customizations.len(),
        1 + expected_steps.len(),
        "{customizations:?}"
    );
    let ctx = Context {
        collection: Some("customers".into()),
        datasource: ds,
    };
    let names = Batch {
        len: 2,
        columns: vec![Column {
            path: "name".into(),
            column_type: ColumnType::Primitive(PrimitiveType::String),
            values: vec![Value::String("Ann".into()), Value::Null],
        }],
    };
    let values = field(&customizations, "shout")
        .compute(&caller(), &ctx, &names)
        .await
        .unwrap();
    assert_eq!(values, vec![Value::String("ANN/3".into()), Value::Null]);
}

#[tokio::test]
async fn a_plugin_built_against_the_frozen_0_1_0_still_loads_and_calls_back_into_the_host() {
    a_frozen_version_still_loads_and_computes("legacy", WitVersion::V0_1).await;
}

#[tokio::test]
async fn a_plugin_built_against_the_frozen_0_2_0_still_loads_computes_and_declares_its_steps() {
    a_frozen_version_still_loads_and_computes("legacy2", WitVersion::V0_2).await;
}

#[tokio::test]
async fn sdk_plugins_target_the_newest_wit_version() {
    let (_db, ds) = datasource().await;
    let runtime = Runtime::new(None).unwrap();
    let dir = plugin_dir(&[("hostile", Some(LIMITS))]);
    let set = PluginSet::load(&runtime, &dir, ds.schema(), &allow_all())
        .await
        .unwrap();
    assert_eq!(set.plugins[0].wit_version(), WitVersion::V0_3);
    assert_eq!(set.plugins[0].wit_version().as_str(), WIT_VERSION);
    assert!(set.plugins[0].packs_rows());
}

/// The compiled components in a plugin cache folder, with their inodes (a compile writes a new
/// file by rename, so a changed inode means compiled again).
fn cached_components(cache: &Path) -> Vec<(PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let mut found = Vec::new();
    for engine in std::fs::read_dir(cache.join("components")).unwrap() {
        for file in std::fs::read_dir(engine.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            let inode = std::fs::metadata(&path).unwrap().ino();
            found.push((path, inode));
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn cached_plugins_load_from_the_compile_cache() {
    let (_db, ds) = datasource().await;
    let cache = std::env::temp_dir().join(format!("canopy-cache-{}", uuid::Uuid::new_v4()));
    let runtime = Runtime::new(Some(&cache)).unwrap();
    let dir = plugin_dir(&[("hostile", Some(LIMITS))]);
    PluginSet::load(&runtime, &dir, ds.schema(), &allow_all())
        .await
        .unwrap();
    // The first load compiled the file and wrote its code, named by the file's sha256.
    let written = cached_components(&cache);
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(written[0].0.extension().is_some_and(|e| e == "cwasm"));

    // Another process (a new runtime) maps that file: not compiled again, nothing new written,
    // and the plugin serves from it.
    let warm_runtime = Runtime::new(Some(&cache)).unwrap();
    let set = PluginSet::load(&warm_runtime, &dir, ds.schema(), &allow_all())
        .await
        .unwrap();
    assert_eq!(cached_components(&cache), written);
    let customizations = set.customizations(ds.schema()).unwrap();
    let ctx = Context {
        collection: Some("customers".into()),
        datasource: ds.clone(),
    };
    let values = field(&customizations, "ok")
        .compute(&caller(), &ctx, &ids(2))
        .await
        .unwrap();
    assert_eq!(values, vec![Value::Int(2), Value::Int(4)]);
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test]
async fn a_plugin_put_back_to_a_build_compiled_before_is_read_from_the_cache_not_compiled_again() {
    let (_db, ds) = datasource().await;
    let cache = std::env::temp_dir().join(format!("canopy-cache-{}", uuid::Uuid::new_v4()));
    let runtime = Runtime::new(Some(&cache)).unwrap();
    let dir = plugin_dir(&[("hostile", Some(LIMITS))]);
    let file = dir.join("hostile.wasm");
    let first_build = std::fs::read(&file).unwrap();
    let permissions = allow_all();
    let load = || PluginSet::load(&runtime, &dir, ds.schema(), &permissions);
    let set = load().await.unwrap();
    assert_eq!(set.plugins[0].compiler(), Compiler::Cranelift);
    runtime.compile_quickly_first();

    // A new build: Winch's code at once.
    change(&file);
    let set = load().await.unwrap();
    assert_eq!(set.plugins[0].compiler(), Compiler::Winch);
    // A load keeps in memory the Cranelift components of its own generation only: the first
    // build's is now on disk only.

    // Put back: Cranelift's code of the first build, read from the cache folder.
    std::fs::write(&file, &first_build).unwrap();
    let set = load().await.unwrap();
    assert_eq!(set.plugins[0].compiler(), Compiler::Cranelift);
    assert!(set.quick().is_empty(), "nothing left to optimize");
    let _ = std::fs::remove_dir_all(&cache);
}

/// Appends a custom section to a plugin file: other bytes, the same code.
pub(crate) fn change(path: &Path) {
    let (name, payload) = (b"canopy-test", uuid::Uuid::new_v4().to_string());
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(payload.as_bytes());
    // One LEB128 byte: the body is shorter than 128 bytes.
    let mut section = vec![0, body.len() as u8];
    section.extend(body);
    let mut bytes = std::fs::read(path).unwrap();
    bytes.extend(section);
    std::fs::write(path, bytes).unwrap();
}

#[tokio::test]
async fn once_serving_a_changed_plugin_runs_on_winch_until_cranelift_has_compiled_it() {
    let (_db, ds) = datasource().await;
    let runtime = Runtime::new(None).unwrap();
    let dir = plugin_dir(&[("hostile", Some(LIMITS))]);
    let file = dir.join("hostile.wasm");
    let permissions = allow_all();
    let load = || PluginSet::load(&runtime, &dir, ds.schema(), &permissions);
    // The first generation (the start) compiles with Cranelift, as every load did before.
    let set = load().await.unwrap();
    assert_eq!(set.plugins[0].compiler(), Compiler::Cranelift);
    assert!(set.quick().is_empty());

    // Serving: the same bytes again are Cranelift's component, kept in memory.
    runtime.compile_quickly_first();
    let set = load().await.unwrap();
    assert_eq!(set.plugins[0].compiler(), Compiler::Cranelift);

    // Changed bytes: Winch's code, which computes, and is still interrupted at its time limit.
    change(&file);
    let set = load().await.unwrap();
    assert_eq!(set.plugins[0].compiler(), Compiler::Winch);
    assert_eq!(set.quick(), [("hostile".to_owned(), file.clone())]);
    let customizations = set.customizations(ds.schema()).unwrap();
    let ctx = Context {
        collection: Some("customers".into()),
        datasource: ds.clone(),
    };
    let values = field(&customizations, "ok")
        .compute(&caller(), &ctx, &ids(3))
        .await
        .unwrap();
    assert_eq!(values, vec![Value::Int(2), Value::Int(4), Value::Int(6)]);
    let stuck = field(&customizations, "loops")
        .compute(&caller(), &ctx, &ids(1))
        .await
        .unwrap_err();
    let message = plugin_message(&stuck);
    assert!(message.contains("time limit of 300 ms"), "{message}");

    // Once Cranelift compiled the file, the next load takes its component.
    runtime.optimize("hostile", &file).await.unwrap();
    let set = load().await.unwrap();
    assert_eq!(set.plugins[0].compiler(), Compiler::Cranelift);
    assert!(set.quick().is_empty());
    let customizations = set.customizations(ds.schema()).unwrap();
    let values = field(&customizations, "ok")
        .compute(&caller(), &ctx, &ids(2))
        .await
        .unwrap();
    assert_eq!(values, vec![Value::Int(2), Value::Int(4)]);
}
