//! Two compilers for a plugin file: Cranelift, whose code every plugin ends up on, and Winch,
//! which compiles about four times faster into slower code (the shop plugin: 56–71 ms against
//! 216–246 ms idle, 188–290 ms against 724–876 ms under load; a Python plugin: 1.2 s against
//! 5.1 s).
//!
//! A hot swap waits for the compile of each changed plugin while requests keep running. So once a
//! generation serves ([`super::Runtime::compile_quickly_first`]), a plugin file that Cranelift has
//! not compiled yet is compiled by Winch and served at once, and the reload's caller asks
//! [`super::Runtime::optimize`] for the Cranelift code in the background, then reloads again.
//! That second reload finds every file's Cranelift component in memory here and compiles nothing.
//! The start, the typings and the tests compile with Cranelift only, as before.
//!
//! Components are keyed by the SHA-256 of the file's bytes, so a file changed again in between
//! is simply compiled again. Only the components of the last generation loaded are kept
//! ([`Optimized::keep_only`]): the served generation holds them anyway.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest as _, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy};

use super::bindings::{Customization, State, v2, v3};

/// The SHA-256 of a plugin file's bytes.
pub type FileDigest = [u8; 32];

/// The digest of `bytes`.
pub fn digest(bytes: &[u8]) -> FileDigest {
    Sha256::digest(bytes).into()
}

/// Which compiler made a plugin's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    /// Optimizing: the code every plugin serves on in the end.
    Cranelift,
    /// Baseline: fast to compile, slower to run; served until the Cranelift code is ready.
    Winch,
}

/// The engine and linker of one compiler.
#[derive(Clone)]
pub struct Tier {
    pub engine: Engine,
    pub linker: Arc<Linker<State>>,
}

impl Tier {
    /// A linker of every contract version (and WASI) over `engine`.
    pub fn new(engine: Engine) -> Result<Self, String> {
        let mut linker = Linker::<State>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| e.to_string())?;
        // Every version's imports, under their own names: one linker links any of them.
        Customization::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| e.to_string())?;
        v2::Customization::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| e.to_string())?;
        v3::Customization::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| e.to_string())?;
        Ok(Self {
            engine,
            linker: Arc::new(linker),
        })
    }
}

/// The Winch tier, made on first use (a process that never reloads never builds it), and
/// whether it may be used yet.
#[derive(Default)]
pub struct Quick {
    enabled: AtomicBool,
    tier: OnceLock<Result<Tier, String>>,
}

impl Quick {
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// The Winch tier when quick compiles are enabled and it could be built: the engine's
    /// settings (stack, epochs), but no cache, and instances made on demand: its code serves for
    /// seconds, and a second pool would reserve the address space of a second set of slots.
    pub fn tier(&self) -> Option<&Tier> {
        if !self.enabled.load(Ordering::Relaxed) {
            return None;
        }
        let built = self.tier.get_or_init(|| {
            let mut config = super::runtime::settings();
            config.strategy(wasmtime::Strategy::Winch);
            config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
            let engine = Engine::new(&config).map_err(|e| format!("{e:#}"))?;
            super::runtime::tick_epochs(&engine, "canopy-epoch-quick")?;
            Tier::new(engine)
        });
        match built {
            Ok(tier) => Some(tier),
            Err(error) => {
                // Logged at every reload that would have used it: the reload still works, only
                // slower.
                tracing::warn!(
                    %error,
                    "the quick (Winch) compiler is unavailable: changed plugins compile with \
                     Cranelift before they serve"
                );
                None
            }
        }
    }
}

/// The Cranelift components this process compiled, by file digest.
#[derive(Default)]
pub struct Optimized {
    components: Mutex<HashMap<FileDigest, Component>>,
}

impl Optimized {
    pub fn get(&self, digest: &FileDigest) -> Option<Component> {
        self.lock().get(digest).cloned()
    }

    pub fn insert(&self, digest: FileDigest, component: Component) {
        self.lock().insert(digest, component);
    }

    /// Forgets every component but those of `digests` (the generation just loaded).
    pub fn keep_only(&self, digests: &[FileDigest]) {
        self.lock().retain(|digest, _| digests.contains(digest));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<FileDigest, Component>> {
        self.components.lock().unwrap_or_else(|p| p.into_inner())
    }
}
