//! What the tests that drive the real `canopy` binary share: a scratch directory and a server
//! process that never outlives its test. (`host/tests/support/` is a module, not a test target.)

use std::path::PathBuf;
use std::process::Child;

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `canopy-<purpose>-<uuid>`: the purpose tells a leftover directory's test.
    pub fn new(purpose: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("canopy-{purpose}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `canopy serve`, killed when the test ends however it ends, unless it already
/// stopped (a test of a clean shutdown waits for it itself).
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
