//! Cranelift's incremental compilation cache on disk: one file per compiled function, named by
//! the function's key (a SHA-256 of its body and the compiler's settings, computed by Cranelift).
//!
//! wasmtime's own cache keys a whole component by the hash of its bytes, so a plugin rebuilt
//! with one function changed misses it and compiles every function again (the hot swap took
//! 0.6–1.7 s for the shop plugin). With this store, only the changed functions compile; the
//! others are read back. A key is content-addressed, so an entry never goes stale: it is
//! written once (by atomic rename, so a reader never sees half a file) and only read after.
//!
//! Every function is still translated and hashed to find its key, so a load whose functions all
//! hit costs about three quarters of a full compile (shop plugin: 156–185 ms against 216–246 ms,
//! idle). A hot swap therefore serves on Winch's code first (`tiers`); this cache speeds up the
//! Cranelift compile that follows it, and the start.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use wasmtime::CacheStore;

/// Compiled functions under `dir` (`<cache dir>/functions`).
#[derive(Debug)]
pub struct FunctionCache {
    dir: PathBuf,
}

impl FunctionCache {
    /// The store under `dir`, created if missing.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// The file of `key`, fanned out over 256 folders by its first byte, so that no folder
    /// holds every function of every plugin.
    fn path(&self, key: &[u8]) -> PathBuf {
        let name = hex::encode(key);
        let fan = name.get(..2).unwrap_or("00").to_owned();
        self.dir.join(fan).join(name)
    }
}

impl CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        std::fs::read(self.path(key)).ok().map(Cow::Owned)
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let path = self.path(key);
        let Some(folder) = path.parent() else {
            return false;
        };
        if std::fs::create_dir_all(folder).is_err() {
            return false;
        }
        // A name of this process and thread, so that two compilations of the same function
        // never write one temporary file.
        let temporary = path.with_extension(format!(
            "{}-{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        ));
        let written =
            std::fs::write(&temporary, value).is_ok() && std::fs::rename(&temporary, &path).is_ok();
        if !written {
            let _ = std::fs::remove_file(&temporary);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_function_reads_back_and_an_unknown_key_misses() {
        let dir = std::env::temp_dir().join(format!("canopy-functions-{}", std::process::id()));
        let cache = FunctionCache::new(&dir).unwrap();
        let key = [0xab_u8; 32];
        assert!(cache.get(&key).is_none());
        assert!(cache.insert(&key, b"compiled".to_vec()));
        assert_eq!(cache.get(&key).as_deref(), Some(&b"compiled"[..]));
        assert!(cache.get(&[0xac_u8; 32]).is_none());
        // One folder per first byte, and no temporary file left behind.
        let folder = dir.join("ab");
        let names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["ab".repeat(32)]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
