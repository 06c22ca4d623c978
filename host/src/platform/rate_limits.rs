//! The public API's rate limits as rows of the store (PostgreSQL only), so that the instances
//! sharing it share one quota per key: GCRA (the algorithm of `governor`, which limits a single
//! instance) with its one number per key, the theoretical arrival time, updated by one atomic
//! upsert per request. `http::ratelimit` turns the outcome into its decision and headers.

use sqlx::Row as _;

use super::store::now_ms;
use super::{Result, Store};

/// What spending one request of a key's quota found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent {
    /// The request fits the quota (and was counted).
    pub allowed: bool,
    /// The key's theoretical arrival time after this request (unix ms): when the quota is whole
    /// again, if no other request comes. Unchanged when refused.
    pub tat: i64,
    /// The time the check was made at (unix ms).
    pub now: i64,
}

impl Store {
    /// Spends one request of `key`'s quota under `policy`: requests come back one per
    /// `interval_ms`, and `tolerance_ms` (the burst's `(burst - 1) × interval`) may be spent
    /// ahead. One statement: concurrent requests on any instance serialize on the key's row.
    pub async fn spend_rate_limit(
        &self,
        policy: &str,
        key: &str,
        interval_ms: i64,
        tolerance_ms: i64,
    ) -> Result<Spent> {
        let now = now_ms();
        let spent: Option<i64> = sqlx::query(
            "INSERT INTO api_rate_limits AS r (project, policy, key, tat) \
             VALUES ($1, $2, $3, $4 + $5) \
             ON CONFLICT (project, policy, key) DO UPDATE SET tat = GREATEST(r.tat, $4) + $5 \
             WHERE GREATEST(r.tat, $4) + $5 - $4 <= $6 + $5 \
             RETURNING tat",
        )
        .bind(self.project())
        .bind(policy)
        .bind(key)
        .bind(now)
        .bind(interval_ms)
        .bind(tolerance_ms)
        .fetch_optional(self.pool())
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
        if let Some(tat) = spent {
            return Ok(Spent {
                allowed: true,
                tat,
                now,
            });
        }
        // Refused: the time already owed tells when the next request fits.
        let tat: i64 = sqlx::query(
            "SELECT tat FROM api_rate_limits WHERE project = $1 AND policy = $2 AND key = $3",
        )
        .bind(self.project())
        .bind(policy)
        .bind(key)
        .fetch_one(self.pool())
        .await?
        .try_get(0)?;
        Ok(Spent {
            allowed: false,
            tat,
            now,
        })
    }

    /// Deletes the keys whose quota is whole again (their row says nothing an absent row does
    /// not); how many.
    pub async fn prune_rate_limits(&self) -> Result<u64> {
        let done = sqlx::query("DELETE FROM api_rate_limits WHERE project = $1 AND tat < $2")
            .bind(self.project())
            .bind(now_ms())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}
