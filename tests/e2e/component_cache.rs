//! The cache of the plugin components the tests build with another language's toolchain
//! (`python_build`, `ts_build`): a build takes seconds and its output is not byte-reproducible,
//! so a component is kept under `target/<cache>/` by the sha256 of what it is built from, and an
//! unchanged tree reuses it (the host's compile cache, keyed by the component's bytes, then hits
//! too). One build at a time: in this process a mutex, across processes (nextest) a lock file.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use sha2::{Digest as _, Sha256};

/// The workspace's root: the toolchains run there and source paths are hashed relative to it.
pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
}

/// `target/<cache>/<stem>-<key>.wasm`, built by `build` (given the path to write) unless it is
/// there already; `tool` names the toolchain in the log line a build leaves.
pub(crate) fn cached(
    cache: &str,
    stem: &str,
    key: &str,
    tool: &str,
    build: impl FnOnce(&Path),
) -> PathBuf {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cache = root().join("target").join(cache);
    std::fs::create_dir_all(&cache).unwrap();
    let out = cache.join(format!("{stem}-{}.wasm", &key[..16]));
    if out.is_file() {
        return out;
    }
    let lock = std::fs::File::create(cache.join(".lock")).unwrap();
    lock.lock().unwrap();
    if out.is_file() {
        return out;
    }
    let staging = cache.join(format!("{stem}-{}.wasm.tmp", std::process::id()));
    let started = Instant::now();
    build(&staging);
    std::fs::rename(&staging, &out).unwrap();
    // Read by the CI log and the report on the tests' cost.
    eprintln!(
        "built {} with {tool} in {:.1} s ({} bytes)",
        out.display(),
        started.elapsed().as_secs_f64(),
        std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0)
    );
    out
}

/// The sha256 (hex) of `header` (the tool's version, the module's name) and of each file, with
/// its path from the root, in path order.
pub(crate) fn key(header: &str, files: Vec<PathBuf>) -> String {
    key_under(header, root(), files)
}

/// [`key`] with paths taken from `base` (a plugin scaffolded in a fresh temporary folder keys
/// the same on every run).
pub(crate) fn key_under(header: &str, base: &Path, mut files: Vec<PathBuf>) -> String {
    files.sort();
    files.dedup();
    let mut hash = Sha256::new();
    hash.update(header);
    for file in files {
        let relative = file.strip_prefix(base).unwrap_or(&file);
        hash.update(relative.to_string_lossy().as_bytes());
        hash.update([0u8]);
        let mut bytes = Vec::new();
        std::fs::File::open(&file)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .unwrap();
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The files at `path` (a file, or a folder walked) that a build reads: not those in a folder
/// named in `skipped_folders` nor with a name ending in one of `skipped_endings` (what builds
/// leave there: components, caches, installed packages), which would change the key without
/// changing the component.
pub(crate) fn sources(
    path: &Path,
    skipped_folders: &[&str],
    skipped_endings: &[&str],
    out: &mut Vec<PathBuf>,
) {
    if path.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    for entry in std::fs::read_dir(path).unwrap().map(Result::unwrap) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            if !skipped_folders.contains(&name.as_str()) {
                sources(&path, skipped_folders, skipped_endings, out);
            }
        } else if !skipped_endings.iter().any(|ending| name.ends_with(ending)) {
            out.push(path);
        }
    }
}
