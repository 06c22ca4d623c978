//! Scheduled triggers (`triggers.schedules` of a definition): at each tick of a cron
//! expression (UTC; five fields, or six with seconds first), a run on every record of the
//! workflow's collection that matches the schedule's `filter` (at most `limit` of them), as the
//! schedule's `user`, within that user's rights and scope.
//!
//! One task per process reads the active definitions every [`POLL`] and fires the ticks that
//! fell since its last look; several ticks missed together fire once, and ticks that fell while
//! no process ran are not made up. Instances sharing a store fire each tick once: the first to
//! insert the tick's row in `workflow_schedule_ticks` (keyed by workflow, schedule and tick)
//! starts the runs, the others find the row and skip it. A record whose run of the workflow is
//! still ongoing gets no second one (the store's uniqueness, as for the webhook).

use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::definition::Schedule;
use super::triggers::{Triggers, WorkflowRef, matching_ids, parse_tree};
use super::{NewRun, Queued, TriggerKind};
use crate::auth::Permissions;
use crate::datasource::{ConditionTree, DataSource};
use crate::platform::activity::{Action, Actor, Entry, Origin};
use crate::platform::store::now_ms;

/// How often the scheduler looks for due ticks: cron's finest unit.
pub const POLL: Duration = Duration::from_secs(1);

/// What a tick runs against: the served generation's datasource and permission checks, read
/// when the tick fires (a reload between two ticks is followed).
pub type Current = Arc<dyn Fn() -> (Arc<dyn DataSource>, Arc<Permissions>) + Send + Sync>;

/// A cron expression as the definition writes it: five fields (minute first) or six (second
/// first), optionally a seventh (year).
pub fn parse_cron(expression: &str) -> Result<cron::Schedule, String> {
    let fields = expression.split_whitespace().count();
    let full = match fields {
        5 => format!("0 {expression}"),
        6 | 7 => expression.to_owned(),
        _ => {
            return Err(format!(
                "`{expression}` must have 5 fields (minute hour day month weekday), or 6 with \
                 seconds first"
            ));
        }
    };
    cron::Schedule::from_str(&full).map_err(|e| format!("`{expression}`: {e}"))
}

/// The scheduler of one process.
pub struct Scheduler {
    triggers: Arc<Triggers>,
    current: Current,
    /// Names this instance in the tick rows it claims.
    instance: String,
}

impl Scheduler {
    pub fn new(triggers: Arc<Triggers>, current: Current) -> Self {
        Self {
            triggers,
            current,
            instance: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// Runs until the task is dropped (aborted at shutdown): every [`POLL`], the ticks due.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut since = Utc::now();
            loop {
                tokio::time::sleep(POLL).await;
                let now = Utc::now();
                if let Err(error) = self.fire_due(since, now).await {
                    tracing::warn!(%error, "workflow schedules: the definitions could not be read");
                }
                since = now;
            }
        })
    }

    /// Fires every schedule with a tick in `(since, now]` (several fire once, at the latest);
    /// returns how many runs were queued.
    pub async fn fire_due(
        &self,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> crate::workflows::Result<usize> {
        let mut queued = 0;
        for (workflow, definition) in self.triggers.store().declared_triggers().await? {
            for (index, schedule) in definition.triggers.schedules.iter().enumerate() {
                let cron = match parse_cron(&schedule.cron) {
                    Ok(cron) => cron,
                    Err(error) => {
                        tracing::warn!(workflow = %workflow.id, %error, "a schedule is skipped");
                        continue;
                    }
                };
                let Some(tick) = cron.after(&since).take_while(|t| *t <= now).last() else {
                    continue;
                };
                if self.claim(&workflow, index, tick).await? {
                    let runs = self.fire(&workflow, &definition.collection, schedule).await;
                    self.record(&workflow, index, tick, runs).await;
                    queued += runs;
                }
            }
        }
        Ok(queued)
    }

    /// Whether this instance fires `tick` (no other instance did).
    async fn claim(
        &self,
        workflow: &WorkflowRef,
        index: usize,
        tick: DateTime<Utc>,
    ) -> crate::workflows::Result<bool> {
        let inserted = sqlx::query(
            "INSERT INTO workflow_schedule_ticks (workflow_id, schedule_index, tick_at, \
             claimed_by, runs, created_at) VALUES ($1, $2, $3, $4, NULL, $5) \
             ON CONFLICT (workflow_id, schedule_index, tick_at) DO NOTHING",
        )
        .bind(&workflow.id)
        .bind(i64::try_from(index).unwrap_or(i64::MAX))
        .bind(tick.timestamp_millis())
        .bind(&self.instance)
        .bind(now_ms())
        .execute(self.triggers.store().pool())
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    async fn record(&self, workflow: &WorkflowRef, index: usize, tick: DateTime<Utc>, runs: usize) {
        let done = sqlx::query(
            "UPDATE workflow_schedule_ticks SET runs = $1 \
             WHERE workflow_id = $2 AND schedule_index = $3 AND tick_at = $4",
        )
        .bind(i64::try_from(runs).unwrap_or(i64::MAX))
        .bind(&workflow.id)
        .bind(i64::try_from(index).unwrap_or(i64::MAX))
        .bind(tick.timestamp_millis())
        .execute(self.triggers.store().pool())
        .await;
        if let Err(error) = done {
            tracing::warn!(workflow = %workflow.id, %error, "a schedule's tick was not recorded");
        }
    }

    /// Queues the tick's runs; a refusal (unknown or disabled user, no right, a bad filter) is
    /// logged and starts none.
    async fn fire(&self, workflow: &WorkflowRef, collection: &str, schedule: &Schedule) -> usize {
        match self.try_fire(workflow, collection, schedule).await {
            Ok(runs) => runs,
            Err(error) => {
                tracing::warn!(
                    workflow = %workflow.id,
                    cron = %schedule.cron,
                    "a schedule's tick started no run: {error}"
                );
                0
            }
        }
    }

    async fn try_fire(
        &self,
        workflow: &WorkflowRef,
        collection: &str,
        schedule: &Schedule,
    ) -> Result<usize, String> {
        let Some(version_id) = workflow.startable_version() else {
            return Ok(0);
        };
        let store = self.triggers.store();
        let user = store
            .user_by_email(&schedule.user)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no user {:?}", schedule.user))?;
        let (datasource, permissions) = (self.current)();
        let caller = self
            .triggers
            .runner(&permissions, &user, collection, uuid::Uuid::new_v4())
            .await
            .map_err(|e| e.to_string())?;
        let filter = parse_tree(datasource.as_ref(), collection, schedule.filter.as_ref())
            .map_err(|e| format!("filter: {e}"))?;
        let scope = permissions
            .scope_of(&caller, datasource.schema(), collection)
            .await
            .map_err(|e| e.to_string())?;
        let ids = matching_ids(
            datasource.as_ref(),
            &caller,
            collection,
            ConditionTree::intersect([filter, scope]),
            u64::from(schedule.limit),
        )
        .await
        .map_err(|e| e.to_string())?;
        let outcomes = futures::future::join_all(ids.iter().map(|record_id| {
            self.triggers.queue(NewRun::new(
                &workflow.id,
                version_id,
                collection,
                record_id,
                TriggerKind::Schedule,
                user.id,
            ))
        }))
        .await;
        let started: Vec<String> = ids
            .into_iter()
            .zip(outcomes)
            .filter_map(|(id, outcome)| matches!(outcome, Ok(Queued::Created(_))).then_some(id))
            .collect();
        let count = started.len();
        if count > 0 {
            self.triggers.activity().record(
                Entry::new(
                    Action::TriggerWorkflow,
                    Actor::of(&caller),
                    Origin::Executor,
                )
                .with_collection(collection)
                .with_records(started)
                .with_label(format!("{} (schedule)", workflow.name)),
            );
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_and_six_field_expressions_are_read_and_bad_ones_named() {
        let every_night = parse_cron("0 3 * * *").unwrap();
        let start = DateTime::parse_from_rfc3339("2026-01-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let next = every_night.after(&start).next().unwrap();
        assert_eq!(next.to_rfc3339(), "2026-01-02T03:00:00+00:00");
        let every_ten_seconds = parse_cron("*/10 * * * * *").unwrap();
        assert_eq!(
            every_ten_seconds.after(&start).next().unwrap().to_rfc3339(),
            "2026-01-01T12:00:10+00:00"
        );
        assert!(parse_cron("* *").unwrap_err().contains("5 fields"));
        assert!(parse_cron("0 99 * * *").is_err());
    }
}
