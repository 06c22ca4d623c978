//! The one-time authorization codes of sign-in (table `login_codes`, migration 0002): a code is
//! issued once a user proved who they are (password or OpenID provider) and exchanged once for a
//! session token. Only the SHA-256 hash of a code is stored, with its user, the client's `state`
//! and a short expiry.

use std::time::Duration;

use sqlx::Row as _;

use super::{Result, Store};

/// What a successful exchange yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeemedCode {
    pub user_id: i64,
}

/// Milliseconds since the epoch, the store's clock.
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Store {
    /// Records a code (by its hash) for `user_id`, valid for `ttl`, and forgets the codes that
    /// expired: the table only ever holds the codes of the last minute or so.
    pub async fn create_login_code(
        &self,
        code_hash: &str,
        user_id: i64,
        state: &str,
        ttl: Duration,
    ) -> Result<()> {
        let now = now_ms();
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        sqlx::query("DELETE FROM login_codes WHERE expires_at < $1")
            .bind(now)
            .execute(self.pool())
            .await?;
        sqlx::query(
            "INSERT INTO login_codes (code_hash, project, environment, user_id, state, created_at, \
             expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(code_hash)
        .bind(self.project())
        .bind(self.environment())
        .bind(user_id)
        .bind(state)
        .bind(now)
        .bind(now.saturating_add(ttl_ms))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Spends the code of this hash: `Some` only for the first exchange of an unexpired code of
    /// this environment issued with this `state`. Marking it used and reading it is one
    /// statement, so two exchanges racing with the same code cannot both win. A code presented
    /// with another state is spent all the same: whoever holds it is not the client it was for.
    pub async fn redeem_login_code(
        &self,
        code_hash: &str,
        state: &str,
    ) -> Result<Option<RedeemedCode>> {
        let now = now_ms();
        let row = sqlx::query(
            "UPDATE login_codes SET used_at = $1 WHERE code_hash = $2 AND project = $3 \
             AND environment = $4 AND used_at IS NULL AND expires_at > $1 \
             RETURNING user_id, state",
        )
        .bind(now)
        .bind(code_hash)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let issued_for: String = row.try_get(1)?;
        if issued_for != state {
            return Ok(None);
        }
        Ok(Some(RedeemedCode {
            user_id: row.try_get(0)?,
        }))
    }
}
