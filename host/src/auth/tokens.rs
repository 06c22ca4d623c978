//! Verifying the application tokens presented to the public API (`Authorization: Bearer cnp_…`):
//! shape and checksum first (a malformed or mistyped token never reaches the store), then the
//! SHA-256 looked up in a cache of verified tokens, then in the store (one UNIQUE index lookup).
//!
//! The cache keeps a token's record, never its user: the routes read the user at each call, so a
//! disabled or demoted user is refused at once. A cached record is trusted for [`CACHE_TTL`]:
//! revoking through this instance drops it at once ([`TokenVerifier::forget`]); a revocation by
//! another instance or the command line takes effect here within that time.
//!
//! `last_used_at` is written at most once a minute per token (platform-api.md §2.2), on the
//! request that finds the recorded use older than that.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;

use crate::platform::tokens::{secret_hash, well_formed};
use crate::platform::{self, PermissionSource as _, Scope, Store, Token};

/// How long a verified token is trusted without reading the store again: the delay for a
/// revocation made elsewhere (another instance, `canopy tokens revoke`) to reach this one.
pub const CACHE_TTL: Duration = Duration::from_secs(5);
/// How often a token's `last_used_at` is written at most.
const TOUCH_EVERY_MS: i64 = 60_000;
/// Tokens remembered at most (least recently used ones go first).
const CACHE_CAPACITY: usize = 10_000;

/// Why a presented token is refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not one of ours, a wrong checksum, unknown, or revoked: the client is told nothing more.
    #[error("Invalid or missing API token")]
    Invalid,
    /// Its expiry has passed.
    #[error("API token has expired")]
    Expired,
    /// The store could not be read.
    #[error("Canopy's store: {0}")]
    Store(#[from] platform::Error),
}

/// A token that passed: its record, as cached.
#[derive(Debug)]
pub struct VerifiedToken {
    token: Token,
    /// When the record was read from the store.
    read_at: Instant,
    /// The store's generation then: a change to the permission model since (a revocation on
    /// another instance announces itself at once on PostgreSQL) makes the record stale.
    generation: u64,
    /// The last use recorded in the store (unix ms), to coalesce the writes.
    touched_at: AtomicI64,
}

impl VerifiedToken {
    pub fn id(&self) -> &str {
        &self.token.id
    }

    pub fn user_id(&self) -> i64 {
        self.token.user_id
    }

    pub fn scopes(&self) -> &[Scope] {
        &self.token.scopes
    }

    pub fn token(&self) -> &Token {
        &self.token
    }
}

/// The verifier of one store's tokens, shared by every generation of the served stack.
pub struct TokenVerifier {
    store: Store,
    cache: Cache<[u8; 32], Arc<VerifiedToken>>,
    ttl: Duration,
}

impl std::fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenVerifier")
            .field("cached", &self.cache.len())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl TokenVerifier {
    pub fn new(store: Store) -> Self {
        Self::with_ttl(store, CACHE_TTL)
    }

    /// A verifier trusting a cached token for `ttl` (tests and benchmarks use other values).
    pub fn with_ttl(store: Store, ttl: Duration) -> Self {
        Self {
            store,
            cache: Cache::new(CACHE_CAPACITY),
            ttl,
        }
    }

    /// The token `presented` stands for, if it is a live token of this project.
    pub async fn verify(&self, presented: &str) -> Result<Arc<VerifiedToken>, TokenError> {
        if !well_formed(presented) {
            return Err(TokenError::Invalid);
        }
        let hash = secret_hash(presented);
        let now = chrono::Utc::now().timestamp_millis();
        let generation = self.store.generation();
        let verified = match self.cache.get(&hash) {
            Some(cached)
                if cached.read_at.elapsed() < self.ttl && cached.generation == generation =>
            {
                cached
            }
            _ => {
                let Some(token) = self.store.token_by_secret_hash(&hash).await? else {
                    // Not cached: an unknown token is what a guesser sends, and guessers are
                    // limited per address (http::ratelimit), not remembered here.
                    self.cache.remove(&hash);
                    return Err(TokenError::Invalid);
                };
                let verified = Arc::new(VerifiedToken {
                    touched_at: AtomicI64::new(token.last_used_at.unwrap_or(0)),
                    token,
                    read_at: Instant::now(),
                    generation,
                });
                self.cache.insert(hash, Arc::clone(&verified));
                verified
            }
        };
        if verified.token.revoked_at.is_some() {
            return Err(TokenError::Invalid);
        }
        if verified.token.expired(now) {
            return Err(TokenError::Expired);
        }
        self.touch(&verified, now).await;
        Ok(verified)
    }

    /// Records this use if the last recorded one is a minute old; one request wins the race.
    async fn touch(&self, verified: &VerifiedToken, now: i64) {
        let last = verified.touched_at.load(Ordering::Relaxed);
        if now.saturating_sub(last) < TOUCH_EVERY_MS
            || verified
                .touched_at
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        if let Err(error) = self.store.touch_token(verified.id(), now).await {
            // The use is not recorded; the token still works.
            tracing::warn!(token = verified.id(), %error, "recording a token's last use failed");
        }
    }

    /// Drops a token from the cache (it was just revoked): its next use reads the store.
    pub fn forget(&self, token_id: &str) {
        self.cache.retain(|_, cached| cached.token.id != token_id);
    }
}
