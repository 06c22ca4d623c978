//! Keeping the activity log bounded (`activityLogRetentionDays`, `activityLogMaxRows`): a task
//! of the serving process deletes, every [`PruneSchedule::interval`], the entries of its
//! environment older than the retention and, beyond the cap, the oldest ones.
//!
//! Deletions go in batches of [`PruneSchedule::batch`] entries, oldest first, each in its own
//! short transaction (the entries and their rows in `activity_records`), with a pause between
//! batches: SQLite has one writer at a time, and the activity writer and the requests' writes
//! wait only for one batch, never for the whole pruning. Several instances on one PostgreSQL
//! store may prune together: a batch another instance deleted first deletes nothing.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sqlx::Row as _;
use tokio::task::JoinHandle;

use super::table::{CHUNKS, fixed_chunks, unpack_records};
use crate::platform::store::{Dialect, now_ms};
use crate::platform::{Result, Store};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// What the log keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Entries older than this many days are deleted; `None` keeps them whatever their age.
    pub days: Option<u32>,
    /// At most this many entries are kept (the newest); `None` has no cap.
    pub max_rows: Option<u64>,
}

impl Retention {
    /// Whether there is anything to prune.
    pub fn is_bounded(&self) -> bool {
        self.days.is_some() || self.max_rows.is_some()
    }
}

/// How and when pruning runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneSchedule {
    /// Time between two prunings (the first runs at once).
    pub interval: Duration,
    /// Entries deleted per transaction.
    pub batch: usize,
    /// Pause between two batches, so other writers get the store.
    pub pause: Duration,
}

impl Default for PruneSchedule {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10 * 60),
            batch: 2_000,
            pause: Duration::from_millis(20),
        }
    }
}

/// What one pruning deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Entries older than the retention.
    pub expired: u64,
    /// Entries beyond the row cap.
    pub over_cap: u64,
}

impl Pruned {
    pub fn total(&self) -> u64 {
        self.expired + self.over_cap
    }
}

/// Starts the pruning task of `store`'s environment; `None` when `retention` keeps everything.
/// The task runs until aborted (the server aborts it at shutdown); a failed pruning is logged and
/// tried again at the next interval.
pub fn spawn_pruner(
    store: Store,
    retention: Retention,
    schedule: PruneSchedule,
) -> Option<JoinHandle<()>> {
    if !retention.is_bounded() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(schedule.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let started = Instant::now();
            match store.prune_activity(retention, schedule, now_ms()).await {
                Ok(pruned) if pruned.total() > 0 => tracing::info!(
                    deleted = pruned.total(),
                    expired = pruned.expired,
                    over_cap = pruned.over_cap,
                    retention_days = retention.days,
                    max_rows = retention.max_rows,
                    duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "activity log pruned: {} entries deleted",
                    pruned.total()
                ),
                Ok(_) => {}
                Err(error) => tracing::error!(%error, "pruning the activity log failed"),
            }
        }
    }))
}

impl Store {
    /// Deletes the environment's entries older than `retention.days` before `now_ms`, then the
    /// oldest beyond `retention.max_rows`, in batches (see the module).
    pub async fn prune_activity(
        &self,
        retention: Retention,
        schedule: PruneSchedule,
        now_ms: i64,
    ) -> Result<Pruned> {
        let mut pruned = Pruned::default();
        let Some(scope) = self.activity_scope().await? else {
            return Ok(pruned);
        };
        if let Some(days) = retention.days {
            let cutoff = now_ms.saturating_sub(i64::from(days).saturating_mul(DAY_MS));
            // Everything strictly before the cutoff's millisecond.
            pruned.expired = self
                .prune_through(scope, (cutoff.saturating_sub(1), i64::MAX), schedule)
                .await?;
        }
        if let Some(max_rows) = retention.max_rows
            && let Some(last) = self.first_over_cap(scope, max_rows).await?
        {
            pruned.over_cap = self.prune_through(scope, last, schedule).await?;
        }
        Ok(pruned)
    }

    /// `(created_at, seq)` of the newest entry beyond the newest `max_rows`, if any.
    async fn first_over_cap(&self, scope: i64, max_rows: u64) -> Result<Option<(i64, i64)>> {
        let offset = i64::try_from(max_rows).unwrap_or(i64::MAX);
        if self.dialect() == Dialect::Sqlite {
            // `seq` is the rowid: its span bounds the count in two index lookups, which spares
            // the walk below while the log is under its cap.
            let span: Option<i64> =
                sqlx::query_scalar("SELECT MAX(seq) - MIN(seq) + 1 FROM activity_entries")
                    .fetch_one(self.pool())
                    .await?;
            if span.unwrap_or(0) <= offset {
                return Ok(None);
            }
        }
        Ok(sqlx::query_as(
            "SELECT created_at, seq FROM activity_entries WHERE scope = $1 \
             ORDER BY created_at DESC, seq DESC LIMIT 1 OFFSET $2",
        )
        .bind(scope)
        .bind(offset)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Deletes the entries of `scope` up to `(created_at, seq)` included, oldest first, in
    /// batches; returns how many.
    async fn prune_through(
        &self,
        scope: i64,
        (at, seq): (i64, i64),
        schedule: PruneSchedule,
    ) -> Result<u64> {
        let batch = i64::try_from(schedule.batch.max(1)).unwrap_or(i64::MAX);
        let mut deleted = 0;
        loop {
            // Read outside the transaction: a SQLite transaction that starts by reading cannot
            // become a writer once another connection wrote. Only pruning deletes entries.
            let rows = sqlx::query(
                "SELECT created_at, seq, record_ids FROM activity_entries \
                 WHERE scope = $1 AND (created_at, seq) <= ($2, $3) \
                 ORDER BY created_at, seq LIMIT $4",
            )
            .bind(scope)
            .bind(at)
            .bind(seq)
            .bind(batch)
            .fetch_all(self.pool())
            .await?;
            let Some(last) = rows.last() else { break };
            let last: (i64, i64) = (last.try_get(0)?, last.try_get(1)?);
            let mut records: Vec<(String, i64, i64)> = Vec::new();
            for row in &rows {
                let created_at: i64 = row.try_get(0)?;
                let seq: i64 = row.try_get(1)?;
                let mut ids = unpack_records(row.try_get(2)?);
                ids.sort_unstable();
                ids.dedup();
                records.extend(ids.into_iter().map(|id| (id, created_at, seq)));
            }
            let mut tx = self.pool().begin().await?;
            for (_, chunk) in fixed_chunks(&records) {
                let mut query = sqlx::query(records_delete(chunk.len())).bind(scope);
                // The ids twice: the `IN` list leads each to its index range (SQLite does not
                // seek on a row value alone), the row values pick the entries' rows in it.
                for (id, _, _) in chunk {
                    query = query.bind(id.as_str());
                }
                for (id, created_at, seq) in chunk {
                    query = query.bind(id.as_str()).bind(*created_at).bind(*seq);
                }
                query.execute(&mut *tx).await?;
            }
            let done = sqlx::query(
                "DELETE FROM activity_entries WHERE scope = $1 AND (created_at, seq) <= ($2, $3)",
            )
            .bind(scope)
            .bind(last.0)
            .bind(last.1)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            deleted += done.rows_affected();
            if rows.len() < schedule.batch.max(1) {
                break;
            }
            tokio::time::sleep(schedule.pause).await;
        }
        Ok(deleted)
    }
}

/// The DELETE of `rows` rows of `activity_records` (one of the [`CHUNKS`] sizes), built once
/// per size: `$1` the scope, then `rows` record ids, then `rows` triples.
fn records_delete(rows: usize) -> &'static str {
    static SQL: OnceLock<Vec<(usize, String)>> = OnceLock::new();
    SQL.get_or_init(|| {
        CHUNKS
            .iter()
            .map(|rows| (*rows, records_delete_sql(*rows)))
            .collect()
    })
    .iter()
    .find(|(size, _)| *size == rows)
    .map_or("", |(_, sql)| sql.as_str())
}

/// The text of [`records_delete`]: placeholders numbered in the order they appear, so that
/// SQLite (which numbers `$n` by first appearance) and PostgreSQL read them alike.
fn records_delete_sql(rows: usize) -> String {
    let ids: Vec<String> = (0..rows).map(|i| format!("${}", 2 + i)).collect();
    let triples: Vec<String> = (0..rows)
        .map(|i| {
            let first = 2 + rows + i * 3;
            format!("(${first}, ${}, ${})", first + 1, first + 2)
        })
        .collect();
    format!(
        "DELETE FROM activity_records WHERE scope = $1 AND record_id IN ({}) \
         AND (record_id, created_at, seq) IN (VALUES {})",
        ids.join(", "),
        triples.join(", ")
    )
}
