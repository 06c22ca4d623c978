//! The compile cache of whole plugin components: one file per component, the engine's
//! serialized code as it is, named by the SHA-256 of the plugin file, and mapped from disk when
//! read back.
//!
//! wasmtime's own cache (`Config::cache`) keeps components zstd-compressed: reading one back
//! decompresses it into anonymous memory, so each cached Python or TypeScript plugin cost about
//! 50 MB resident and 80–90 ms of a start (10 plugins: 865 MB and 911 ms for Python). Here the
//! file is mapped instead (`Component::deserialize_file`): nothing is copied, pages are read
//! when first touched, they are the page cache's (shared by every instance on the machine, and
//! reclaimable), and wasmtime takes each linear memory's initial image straight from the file.
//! The price is disk: a Python component's file is about 4 times its compressed size, so the
//! folder is kept under [`MAX_BYTES`], least recently used first.
//!
//! Entries are written once, by atomic rename, under a folder named by the engine's
//! compatibility hash (wasmtime's version and the settings that shape code), so an upgrade or
//! another setting never reads a stale file; one that fails to map is compiled again.

use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use wasmtime::Engine;
use wasmtime::component::Component;

use super::tiers::FileDigest;

/// The most the components folder of one engine keeps on disk; past it, the files used least
/// recently go first (at the end of a load, never one the new generation uses).
pub const MAX_BYTES: u64 = 2 << 30;

/// Compiled components of one engine under `<cache dir>/components/<engine hash>`.
#[derive(Debug)]
pub struct Artifacts {
    dir: PathBuf,
}

impl Artifacts {
    /// The folder of `engine`'s components under `cache_dir`, created if missing.
    pub fn new(cache_dir: &Path, engine: &Engine) -> std::io::Result<Self> {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dir = cache_dir
            .join("components")
            .join(format!("{:016x}", hasher.finish()));
        std::fs::create_dir_all(&dir)?;
        // The compressed components of earlier versions (wasmtime's cache): never read again.
        let _ = std::fs::remove_dir_all(cache_dir.join("modules"));
        Ok(Self { dir })
    }

    fn path(&self, digest: &FileDigest) -> PathBuf {
        self.dir.join(format!("{}.cwasm", hex::encode(digest)))
    }

    /// Whether a compiled component of the file whose digest is `digest` is on disk.
    pub fn has(&self, digest: &FileDigest) -> bool {
        self.path(digest).is_file()
    }

    /// The component of `bytes` (whose digest is `digest`): mapped from its file, or compiled by
    /// `engine`, written, then mapped. Blocking: compiling takes seconds for large plugins.
    pub fn component(
        &self,
        engine: &Engine,
        digest: &FileDigest,
        bytes: &[u8],
    ) -> wasmtime::Result<Component> {
        if let Some(component) = self.mapped(engine, digest) {
            return Ok(component);
        }
        let path = self.path(digest);
        let code = engine.precompile_component(bytes)?;
        // Unique to this process and thread: two compilations never write one temporary file.
        let temporary = path.with_extension(format!(
            "{}-{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        ));
        let written =
            std::fs::write(&temporary, &code).is_ok() && std::fs::rename(&temporary, &path).is_ok();
        if written {
            if let Ok(component) = map(engine, &path) {
                return Ok(component);
            }
        } else {
            let _ = std::fs::remove_file(&temporary);
            tracing::warn!(file = %path.display(), "a compiled plugin cannot be cached");
        }
        // Not cached: served from memory, as `Component::new` would.
        deserialize(engine, &code)
    }

    /// The component of `digest` mapped from its file, if there is one that maps.
    fn mapped(&self, engine: &Engine, digest: &FileDigest) -> Option<Component> {
        let path = self.path(digest);
        if !path.is_file() {
            return None;
        }
        match map(engine, &path) {
            Ok(component) => {
                // Its time of last use, for the least-recently-used pruning.
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|file| file.set_modified(SystemTime::now()));
                Some(component)
            }
            Err(error) => {
                tracing::warn!(
                    %error,
                    file = %path.display(),
                    "a cached plugin component cannot be read back: compiling it again"
                );
                None
            }
        }
    }

    /// Removes the least recently used files past [`MAX_BYTES`], except those of `keep`.
    pub fn prune(&self, keep: &[FileDigest]) {
        let keep: Vec<PathBuf> = keep.iter().map(|digest| self.path(digest)).collect();
        prune_folder(&self.dir, MAX_BYTES, &keep);
    }
}

/// Deletes the least recently modified files of `dir` until the rest fit in `max_bytes`,
/// never one of `keep`.
fn prune_folder(dir: &Path, max_bytes: u64, keep: &[PathBuf]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let meta = entry.metadata().ok().filter(std::fs::Metadata::is_file)?;
            Some((meta.modified().ok()?, meta.len(), entry.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= max_bytes {
            break;
        }
        if keep.contains(&path) {
            continue;
        }
        // A component still mapped by this or another process keeps its pages: unlinking
        // only removes the name.
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
            tracing::debug!(file = %path.display(), "plugin compile cache: least recently used file removed");
        }
    }
}

/// Maps the component written at `path` by an engine of the same compatibility hash.
#[expect(
    unsafe_code,
    reason = "wasmtime maps compiled code from a file only through an unsafe call"
)]
fn map(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime requires the file to hold code it compiled, and to stay unmodified while
    // mapped. The file is this cache's own: written by `precompile_component` above, in a
    // folder of the operator's (the same trust as wasmtime's own cache, which deserializes
    // its files the same way), renamed into place whole and never written again (an entry is
    // replaced only by another rename, which leaves a mapped file's pages as they were).
    // wasmtime still checks its header, version and settings, and refuses a file it did not
    // write for this engine's configuration.
    unsafe { Component::deserialize_file(engine, path) }
}

/// The component of code `precompile_component` just returned.
#[expect(
    unsafe_code,
    reason = "wasmtime loads compiled code from bytes only through an unsafe call"
)]
fn deserialize(engine: &Engine, code: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `code` is what this engine's `precompile_component` returned, in memory only.
    unsafe { Component::deserialize(engine, code) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("canopy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_component_is_compiled_once_then_mapped_from_its_file() {
        let dir = folder("artifacts");
        let engine = Engine::default();
        let artifacts = Artifacts::new(&dir, &engine).unwrap();
        // The smallest component: its header (the magic, then component-model layer 1).
        let bytes = b"\0asm\x0d\0\x01\0".to_vec();
        let digest = super::super::tiers::digest(&bytes);
        artifacts.component(&engine, &digest, &bytes).unwrap();
        let file = artifacts.path(&digest);
        assert!(file.is_file(), "the compiled component is on disk");
        let written = std::fs::metadata(&file).unwrap().modified().unwrap();
        // Read back: the same file, not compiled again (a compile would rename a new one).
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
        artifacts.component(&engine, &digest, &bytes).unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&meta), inode);
        assert!(meta.modified().unwrap() >= written);
        // A damaged file is compiled again, not served.
        std::fs::write(&file, b"not code").unwrap();
        artifacts.component(&engine, &digest, &bytes).unwrap();
        assert!(std::fs::metadata(&file).unwrap().len() > 8);
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(&artifacts.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, [format!("{}.cwasm", hex::encode(digest))]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pruning_removes_the_least_recently_used_files_but_never_a_kept_one() {
        let dir = folder("artifacts-prune");
        let now = SystemTime::now();
        for (name, age) in [("old", 30), ("kept", 20), ("recent", 10), ("newest", 0)] {
            let path = dir.join(name);
            std::fs::write(&path, [0_u8; 100]).unwrap();
            let file = std::fs::File::options().append(true).open(&path).unwrap();
            file.set_modified(now - Duration::from_secs(age)).unwrap();
        }
        prune_folder(&dir, 200, &[dir.join("kept")]);
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        // 400 bytes, 200 allowed: the two oldest that may go, go ("kept" is older than
        // "recent", but the generation uses it).
        assert_eq!(left, ["kept", "newest"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
