//! Benchmark: the cost of checking an application token (`auth::tokens::TokenVerifier::verify`)
//! on a SQLite store (a temporary file): a cached token (format and checksum, SHA-256, cache
//! lookup, expiry; the target is ≤ 2 µs), an uncached one (the same plus one indexed
//! read of the store: a verifier whose cache entries are never fresh), and a malformed one
//! (refused before any hashing or lookup).
//!
//! Prints mean and median microseconds per check. Run: `cargo bench -p canopy --bench tokens`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly"
)]

use std::time::{Duration, Instant};

use canopy::auth::tokens::TokenVerifier;
use canopy::platform::{Actor, NewToken, NewUser, Scope, Store};

const CACHED: usize = 200_000;
const UNCACHED: usize = 2_000;

fn stats(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let median = samples[samples.len() / 2].as_secs_f64() * 1e6;
    let mean = samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len() as f64 * 1e6;
    (median, mean)
}

async fn measure(verifier: &TokenVerifier, token: &str, n: usize, ok: bool) -> (f64, f64) {
    // Timed in batches of 100: one check is too short for the clock's resolution.
    let mut samples = Vec::with_capacity(n / 100);
    for _ in 0..n / 100 {
        let start = Instant::now();
        for _ in 0..100 {
            let checked = verifier.verify(std::hint::black_box(token)).await;
            assert_eq!(checked.is_ok(), ok);
        }
        samples.push(start.elapsed() / 100);
    }
    stats(&mut samples)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = std::env::temp_dir().join(format!("canopy_bench_tokens_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.join("state.sqlite").display());
    let store = Store::open(&url, "bench", "production").await.unwrap();
    let user = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "bench@canopy.local".into(),
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    // Other tokens in the table, so the lookup is an index search rather than a lone row.
    for i in 0..1_000 {
        store
            .create_token(
                &Actor::System,
                user.id,
                NewToken {
                    name: format!("other {i}"),
                    scopes: vec![Scope::NotesRead],
                    expires_at: None,
                },
            )
            .await
            .unwrap();
    }
    let (_, secret) = store
        .create_token(
            &Actor::System,
            user.id,
            NewToken {
                name: "bench".into(),
                scopes: vec![Scope::All],
                expires_at: Some(chrono::Utc::now().timestamp_millis() + 86_400_000),
            },
        )
        .await
        .unwrap();
    let token = secret.expose();

    let cached = TokenVerifier::new(store.clone());
    cached.verify(token).await.unwrap();
    let (median, mean) = measure(&cached, token, CACHED, true).await;
    println!(
        "cached token:    median {median:.3} µs, mean {mean:.3} µs per check ({CACHED} checks; target ≤ 2 µs)"
    );

    let uncached = TokenVerifier::with_ttl(store.clone(), Duration::ZERO);
    let (median, mean) = measure(&uncached, token, UNCACHED, true).await;
    println!(
        "uncached token:  median {median:.3} µs, mean {mean:.3} µs per check ({UNCACHED} checks, one store read each)"
    );

    let (median, mean) = measure(&cached, "cnp_not-a-token", CACHED, false).await;
    println!(
        "malformed token: median {median:.3} µs, mean {mean:.3} µs per check ({CACHED} checks)"
    );

    store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
