//! What starts runs (issue 13 §4): the manual trigger (a signed-in user), the webhook trigger
//! with its signed, versioned URL (`webhook`), and the process-wide [`Triggers`] service that
//! the routes share: the URL key ring, the per-webhook rate limits, the run queue that batches
//! concurrent inserts (`queue`) and who a run acts as.
//!
//! A workflow has one webhook trigger, created disabled the first time it is asked for. Enabling
//! or disabling flips `enabled` only (the URL survives); regenerating bumps `url_version` and
//! records the superseded version in `workflow_trigger_url_versions`, in one transaction with its
//! admin log entry, so the old URL is refused on every instance at once (the store decides, no
//! cache in between). Schedules and record-change triggers live beside (`schedule`,
//! `record_change`).

mod coalesce;
pub mod queue;
pub mod record_change;

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::clock::Clock as _;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use serde_json::json;
use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::webhook::{Hook, KeyRing};
use super::{Error, NewRun, Queued, Result};
use crate::auth::{Permissions, SessionClaims};
use crate::config::TriggerConfig;
use crate::datasource::{Caller, ConditionTree, DataSource, Filter, Page, Projection, pack_id};
use crate::platform::store::now_ms;
use crate::platform::{ActivityLog, Actor, Store, User};

/// The admin log's `resource` of trigger changes.
pub const ADMIN_LOG_RESOURCE: &str = "workflow";
/// Limiters kept at most (least recently used ones go first; a forgotten one starts full).
const LIMITERS: usize = 10_000;
/// Rendering ids remembered (they never change for a team of an environment).
const RENDERINGS: usize = 10_000;
/// The highest per-trigger rate limit: a minute of the benchmark's pace and then some.
pub const MAX_RATE_LIMIT_PER_MINUTE: u32 = 10_000_000;

/// A workflow of this environment, as triggers need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRef {
    pub id: String,
    pub name: String,
    pub collection: String,
    pub active: bool,
    pub latest_version: i64,
    /// The id of `latest_version`'s row, when it exists.
    pub version_id: Option<String>,
}

impl WorkflowRef {
    /// The version new runs start on: the latest, while the workflow is active.
    pub fn startable_version(&self) -> Option<&str> {
        self.version_id.as_deref().filter(|_| self.active)
    }

    fn from_row(row: &AnyRow, at: usize) -> Result<Self> {
        Ok(Self {
            id: row.try_get(at)?,
            name: row.try_get(at + 1)?,
            collection: row.try_get(at + 2)?,
            active: row.try_get::<i64, _>(at + 3)? != 0,
            latest_version: row.try_get(at + 4)?,
            version_id: row.try_get(at + 5)?,
        })
    }
}

const WORKFLOW_COLUMNS: &str =
    "w.id, w.name, w.collection_name, w.active, w.latest_version, v.id AS version_id";

/// A workflow's webhook trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookTrigger {
    pub id: String,
    pub workflow_id: String,
    pub enabled: bool,
    pub url_version: i64,
    pub signing_kid: Option<String>,
    /// Its own rate limit; `None` follows `workflowWebhookRateLimitPerMinute`.
    pub rate_limit_per_minute: Option<u32>,
    pub created_at: i64,
    pub updated_at: i64,
}

const TRIGGER_COLUMNS: &str = "id, workflow_id, enabled, url_version, signing_kid, \
     rate_limit_per_minute, created_at, updated_at";

impl WebhookTrigger {
    fn from_row(row: &AnyRow) -> Result<Self> {
        Ok(Self {
            id: row.try_get(0)?,
            workflow_id: row.try_get(1)?,
            enabled: row.try_get::<i64, _>(2)? != 0,
            url_version: row.try_get(3)?,
            signing_kid: row.try_get(4)?,
            rate_limit_per_minute: rate_limit(row.try_get(5)?),
            created_at: row.try_get(6)?,
            updated_at: row.try_get(7)?,
        })
    }

    /// The admin log's view of it (never the URL: it is a credential).
    fn log_value(&self) -> serde_json::Value {
        json!({
            "trigger": "webhook",
            "enabled": self.enabled,
            "urlVersion": self.url_version,
            "rateLimitPerMinute": self.rate_limit_per_minute,
        })
    }
}

fn rate_limit(stored: Option<i64>) -> Option<u32> {
    stored
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v > 0)
}

/// What a webhook call needs of its trigger, read in one query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookTarget {
    pub workflow: WorkflowRef,
    pub enabled: bool,
    pub url_version: i64,
    pub rate_limit_per_minute: Option<u32>,
}

impl Store {
    /// The workflow of this environment with this id, else with this name.
    pub async fn workflow_ref(&self, id_or_name: &str) -> Result<Option<WorkflowRef>> {
        for column in ["id", "name"] {
            let row = sqlx::query(&format!(
                "SELECT {WORKFLOW_COLUMNS} FROM workflows w LEFT JOIN workflow_versions v \
                 ON v.workflow_id = w.id AND v.version = w.latest_version \
                 WHERE w.project = $1 AND w.environment = $2 AND w.{column} = $3"
            ))
            .bind(self.project())
            .bind(self.environment())
            .bind(id_or_name)
            .fetch_optional(self.pool())
            .await?;
            if let Some(row) = row {
                return WorkflowRef::from_row(&row, 0).map(Some);
            }
        }
        Ok(None)
    }

    /// The webhook trigger of `workflow`, created (disabled, URL version 1) on first use.
    pub async fn webhook_trigger(&self, workflow: &WorkflowRef) -> Result<WebhookTrigger> {
        if let Some(trigger) = self.find_webhook_trigger(&workflow.id).await? {
            return Ok(trigger);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO workflow_triggers (id, workflow_id, kind, enabled, url_version, \
             signing_kid, rate_limit_per_minute, created_at, updated_at, updated_by_user_id) \
             VALUES ($1, $2, 'webhook', 0, 1, NULL, NULL, $3, $3, NULL) \
             ON CONFLICT (workflow_id, kind) DO NOTHING",
        )
        .bind(&id)
        .bind(&workflow.id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 1 {
            sqlx::query(
                "INSERT INTO workflow_trigger_url_versions (trigger_id, url_version, \
                 signing_kid, created_at, created_by_user_id) VALUES ($1, 1, NULL, $2, NULL)",
            )
            .bind(&id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        // Another caller may have won the insert: read whichever row exists.
        self.find_webhook_trigger(&workflow.id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("the webhook trigger of {}", workflow.name)))
    }

    async fn find_webhook_trigger(&self, workflow_id: &str) -> Result<Option<WebhookTrigger>> {
        sqlx::query(&format!(
            "SELECT {TRIGGER_COLUMNS} FROM workflow_triggers \
             WHERE workflow_id = $1 AND kind = 'webhook'"
        ))
        .bind(workflow_id)
        .fetch_optional(self.pool())
        .await?
        .as_ref()
        .map(WebhookTrigger::from_row)
        .transpose()
    }

    /// Enables or disables the webhook (the URL is unchanged either way).
    pub async fn set_webhook_enabled(
        &self,
        actor: &Actor,
        workflow: &WorkflowRef,
        enabled: bool,
    ) -> Result<WebhookTrigger> {
        let before = self.webhook_trigger(workflow).await?;
        self.change_trigger(
            actor,
            workflow,
            &before,
            "UPDATE workflow_triggers SET enabled = $1, updated_at = $2, updated_by_user_id = $3 \
             WHERE id = $4",
            i64::from(enabled),
        )
        .await
    }

    /// Sets the webhook's own rate limit (`None`: the server's default).
    pub async fn set_webhook_rate_limit(
        &self,
        actor: &Actor,
        workflow: &WorkflowRef,
        per_minute: Option<u32>,
    ) -> Result<WebhookTrigger> {
        if let Some(limit) = per_minute
            && !(1..=MAX_RATE_LIMIT_PER_MINUTE).contains(&limit)
        {
            return Err(Error::Invalid(format!(
                "rateLimitPerMinute must be between 1 and {MAX_RATE_LIMIT_PER_MINUTE}"
            )));
        }
        let before = self.webhook_trigger(workflow).await?;
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "UPDATE workflow_triggers SET rate_limit_per_minute = $1, updated_at = $2, \
             updated_by_user_id = $3 WHERE id = $4",
        )
        .bind(per_minute.map(i64::from))
        .bind(now_ms())
        .bind(actor_id(actor))
        .bind(&before.id)
        .execute(&mut *tx)
        .await?;
        self.finish_change(tx, actor, workflow, &before).await
    }

    async fn change_trigger(
        &self,
        actor: &Actor,
        workflow: &WorkflowRef,
        before: &WebhookTrigger,
        update: &str,
        value: i64,
    ) -> Result<WebhookTrigger> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(update)
            .bind(value)
            .bind(now_ms())
            .bind(actor_id(actor))
            .bind(&before.id)
            .execute(&mut *tx)
            .await?;
        self.finish_change(tx, actor, workflow, before).await
    }

    /// Writes the admin log entry of a trigger change in its transaction, commits, and returns
    /// the trigger as changed.
    async fn finish_change(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Any>,
        actor: &Actor,
        workflow: &WorkflowRef,
        before: &WebhookTrigger,
    ) -> Result<WebhookTrigger> {
        let after = sqlx::query(&format!(
            "SELECT {TRIGGER_COLUMNS} FROM workflow_triggers WHERE id = $1"
        ))
        .bind(&before.id)
        .fetch_one(&mut *tx)
        .await?;
        let after = WebhookTrigger::from_row(&after)?;
        self.admin_log_on(
            &mut *tx,
            actor,
            "update",
            ADMIN_LOG_RESOURCE,
            &workflow.id,
            Some(before.log_value()),
            Some(after.log_value()),
        )
        .await?;
        tx.commit().await?;
        Ok(after)
    }

    /// Gives the webhook a new URL: `url_version + 1`, signed with `kid`; the old version is
    /// marked superseded. One transaction with the admin log entry.
    pub async fn regenerate_webhook(
        &self,
        actor: &Actor,
        workflow: &WorkflowRef,
        kid: &str,
    ) -> Result<WebhookTrigger> {
        let before = self.webhook_trigger(workflow).await?;
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        let version: i64 = sqlx::query(
            "UPDATE workflow_triggers SET url_version = url_version + 1, signing_kid = $1, \
             updated_at = $2, updated_by_user_id = $3 WHERE id = $4 RETURNING url_version",
        )
        .bind(kid)
        .bind(now)
        .bind(actor_id(actor))
        .bind(&before.id)
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        sqlx::query(
            "UPDATE workflow_trigger_url_versions SET superseded_at = $1, \
             superseded_by_user_id = $2 WHERE trigger_id = $3 AND superseded_at IS NULL",
        )
        .bind(now)
        .bind(actor_id(actor))
        .bind(&before.id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO workflow_trigger_url_versions (trigger_id, url_version, signing_kid, \
             created_at, created_by_user_id) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&before.id)
        .bind(version)
        .bind(kid)
        .bind(now)
        .bind(actor_id(actor))
        .execute(&mut *tx)
        .await?;
        self.finish_change(tx, actor, workflow, &before).await
    }

    /// The active workflows of this environment whose latest definition declares triggers of
    /// its own (schedules, record changes), with that definition. A definition that does not
    /// read is skipped with a warning (its workflow then starts no such run).
    pub async fn declared_triggers(&self) -> Result<Vec<(WorkflowRef, super::Definition)>> {
        let rows = sqlx::query(&format!(
            "SELECT {WORKFLOW_COLUMNS}, v.definition FROM workflows w JOIN workflow_versions v \
             ON v.workflow_id = w.id AND v.version = w.latest_version \
             WHERE w.project = $1 AND w.environment = $2 AND w.active = 1 \
             AND (v.definition LIKE '%\"schedules\"%' OR v.definition LIKE '%\"recordChanges\"%')"
        ))
        .bind(self.project())
        .bind(self.environment())
        .fetch_all(self.pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let workflow = WorkflowRef::from_row(&row, 0)?;
            let text: String = row.try_get(6)?;
            match serde_json::from_str::<super::Definition>(&text) {
                Ok(definition) if !definition.triggers.is_empty() => {
                    out.push((workflow, definition))
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    workflow = %workflow.id,
                    %error,
                    "a stored workflow definition does not read: its triggers are skipped"
                ),
            }
        }
        Ok(out)
    }

    /// The webhook trigger `trigger_id` of this environment with its workflow, in one read.
    pub async fn hook_target(&self, trigger_id: &str) -> Result<Option<HookTarget>> {
        let row = sqlx::query(&format!(
            "SELECT {WORKFLOW_COLUMNS}, t.enabled, t.url_version, t.rate_limit_per_minute \
             FROM workflow_triggers t JOIN workflows w ON w.id = t.workflow_id \
             LEFT JOIN workflow_versions v ON v.workflow_id = w.id AND v.version = w.latest_version \
             WHERE t.id = $1 AND t.kind = 'webhook' AND w.project = $2 AND w.environment = $3"
        ))
        .bind(trigger_id)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(HookTarget {
            workflow: WorkflowRef::from_row(&row, 0)?,
            enabled: row.try_get::<i64, _>(6)? != 0,
            url_version: row.try_get(7)?,
            rate_limit_per_minute: rate_limit(row.try_get(8)?),
        }))
    }
}

fn actor_id(actor: &Actor) -> Option<i64> {
    match actor {
        Actor::Administrator { user_id, .. } => Some(*user_id),
        _ => None,
    }
}

/// One webhook's limiter, with the pace it was made for.
struct HookLimiter {
    per_minute: u32,
    limiter: DefaultDirectRateLimiter,
}

impl HookLimiter {
    fn new(per_minute: NonZeroU32) -> Self {
        Self {
            per_minute: per_minute.get(),
            limiter: RateLimiter::direct(Quota::per_minute(per_minute)),
        }
    }

    /// Spends one call; `Err(seconds)` to wait when none is left.
    fn check(&self) -> Result<(), u64> {
        self.limiter.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(self.limiter.clock().now());
            (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
        })
    }
}

/// The process-wide trigger service: one per store, shared by every generation of the served
/// stack (a reload keeps the webhooks' quotas and the queue).
pub struct Triggers {
    store: Store,
    keys: KeyRing,
    default_per_minute: NonZeroU32,
    limiters: quick_cache::sync::Cache<String, Arc<HookLimiter>>,
    queue: queue::RunQueue,
    renderings: quick_cache::sync::Cache<i64, i64>,
    /// `publicUrl`: the origin webhook URLs are given with, when set.
    public_url: Option<String>,
    /// The process's activity logger: runs started outside a request (schedules, record
    /// changes) are logged here.
    activity: ActivityLog,
    /// Webhook calls in flight share their reads of the same trigger and the same user.
    targets: coalesce::Coalesce<String, Option<HookTarget>>,
    users: coalesce::Coalesce<i64, Option<User>>,
}

impl std::fmt::Debug for Triggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Triggers")
            .field("keys", &self.keys)
            .field("default_per_minute", &self.default_per_minute)
            .finish_non_exhaustive()
    }
}

impl Triggers {
    /// The service over `store`; starts the run queue's writer (call it inside a tokio runtime).
    pub fn new(
        store: Store,
        config: &TriggerConfig,
        auth_secret: &str,
        public_url: Option<String>,
        activity: ActivityLog,
    ) -> Self {
        Self {
            public_url,
            activity,
            keys: KeyRing::new(&config.webhook_keys, auth_secret),
            default_per_minute: config.webhook_per_minute,
            limiters: quick_cache::sync::Cache::new(LIMITERS),
            queue: queue::RunQueue::start(store.clone()),
            renderings: quick_cache::sync::Cache::new(RENDERINGS),
            targets: coalesce::Coalesce::new(),
            users: coalesce::Coalesce::new(),
            store,
        }
    }

    /// [`Store::hook_target`], shared by the calls of the same webhook in flight together.
    pub async fn hook_target(&self, trigger_id: &str) -> Result<Option<HookTarget>> {
        let store = self.store.clone();
        let id = trigger_id.to_owned();
        self.targets
            .get(trigger_id.to_owned(), async move {
                store.hook_target(&id).await.map_err(|e| e.to_string())
            })
            .await
            .map_err(|e| Error::Store(crate::platform::Error::Shared(e.to_string())))
    }

    /// [`Store::user`], shared by the calls of the same user in flight together.
    pub async fn user(&self, user_id: i64) -> crate::platform::Result<Option<User>> {
        let store = self.store.clone();
        self.users
            .get(user_id, async move {
                store.user(user_id).await.map_err(|e| e.to_string())
            })
            .await
            .map_err(|e| crate::platform::Error::Shared(e.to_string()))
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The process's activity logger.
    pub fn activity(&self) -> &ActivityLog {
        &self.activity
    }

    /// `publicUrl`, without a trailing slash, when configured.
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref()
    }

    /// Wakes whoever waits for queued runs (the engine) after each committed batch.
    pub fn queued_signal(&self) -> Arc<tokio::sync::Notify> {
        self.queue.signal()
    }

    /// The kid regenerated URLs are signed with.
    pub fn signing_kid(&self) -> &str {
        self.keys.signing_kid()
    }

    /// The webhook path segment of `trigger` (below `{base}/v1/workflow-hooks/`).
    pub fn hook_segment(&self, trigger: &WebhookTrigger) -> String {
        self.keys.sign(
            self.store.project(),
            self.store.environment(),
            &trigger.id,
            trigger.url_version,
            trigger.signing_kid.as_deref(),
        )
    }

    /// The webhook URL of `trigger`: `{publicUrl or http://{host}}/{prefix}/v1/workflow-hooks/
    /// {hook}`, for a server mounted at `mount_path` and a request to `host` (its `Host`
    /// header; `localhost` without one). The `/v1` trigger routes and the console show it.
    pub fn webhook_url(
        &self,
        trigger: &WebhookTrigger,
        mount_path: &str,
        host: Option<&str>,
    ) -> String {
        let origin = self.public_url().map_or_else(
            || format!("http://{}", host.unwrap_or("localhost")),
            str::to_owned,
        );
        format!(
            "{origin}{}{}/{}",
            crate::config::api_base_path(mount_path),
            super::webhook::PATH,
            self.hook_segment(trigger)
        )
    }

    /// Reads and verifies a webhook path segment, before anything touches the store; `None`
    /// when it is malformed or was not signed by this server for this environment.
    pub fn verify(&self, segment: &str) -> Option<Hook> {
        let hook = Hook::parse(segment)?;
        self.keys
            .verify(self.store.project(), self.store.environment(), &hook)
            .then_some(hook)
    }

    /// Spends one call of the webhook's quota, before the store is read, when this process
    /// already knows the trigger's limit: `Some(Err(seconds))` to wait when it is spent, `None`
    /// on the first call since start (then read the trigger and call [`Self::first_rate`], so a
    /// burst on a fresh process is held to the trigger's own limit, not to the default).
    pub fn check_rate(&self, trigger_id: &str) -> Option<Result<(), u64>> {
        self.limiters.get(trigger_id).map(|limiter| limiter.check())
    }

    /// Spends one call of a quota this process did not know before reading the trigger: its own
    /// limit as just read (`None`: `workflowWebhookRateLimitPerMinute`). Concurrent first calls
    /// share one limiter.
    pub fn first_rate(&self, trigger_id: &str, own: Option<u32>) -> Result<(), u64> {
        let per_minute = self.per_minute(own);
        let limiter = match self.limiters.get(trigger_id) {
            Some(limiter) if limiter.per_minute == per_minute.get() => limiter,
            _ => {
                let fresh = Arc::new(HookLimiter::new(per_minute));
                match self.limiters.get_or_insert_with(trigger_id, || {
                    Ok::<_, std::convert::Infallible>(Arc::clone(&fresh))
                }) {
                    Ok(limiter) => limiter,
                    Err(never) => match never {},
                }
            }
        };
        limiter.check()
    }

    /// Follows the trigger's limit as just read from the store: a changed pace gets a new
    /// limiter with this call already spent, so the new limit counts from here.
    pub fn observe_limit(&self, trigger_id: &str, own: Option<u32>) {
        self.follow_limit(trigger_id, own, true);
    }

    /// The trigger's limit was just changed here: a new limiter at the new pace, full.
    pub fn limit_changed(&self, trigger_id: &str, own: Option<u32>) {
        self.follow_limit(trigger_id, own, false);
    }

    fn per_minute(&self, own: Option<u32>) -> NonZeroU32 {
        own.and_then(NonZeroU32::new)
            .unwrap_or(self.default_per_minute)
    }

    fn follow_limit(&self, trigger_id: &str, own: Option<u32>, during_call: bool) {
        let per_minute = self.per_minute(own);
        if self
            .limiters
            .get(trigger_id)
            .is_some_and(|l| l.per_minute == per_minute.get())
        {
            return;
        }
        let limiter = HookLimiter::new(per_minute);
        if during_call {
            // This call passed the old limiter: it counts against the new one too.
            let _ = limiter.check();
        }
        self.limiters
            .insert(trigger_id.to_owned(), Arc::new(limiter));
    }

    /// Queues a run (batched with concurrent ones into one transaction; answered once it is
    /// committed).
    pub async fn queue(&self, run: NewRun) -> Result<Queued> {
        Ok(self.queue.queue(run).await?)
    }

    /// The caller a run of `user` acts as: their first team in this environment, checked as a
    /// request would be (enabled, in a team, may browse `collection`).
    pub async fn runner(
        &self,
        permissions: &Permissions,
        user: &User,
        collection: &str,
        request_id: uuid::Uuid,
    ) -> Result<Caller> {
        if user.disabled {
            return Err(Error::Forbidden("the user is disabled".to_owned()));
        }
        let Some(team) = user.teams.first() else {
            return Err(Error::Forbidden(
                "the user is in no team of this environment".to_owned(),
            ));
        };
        let rendering_id = match self.renderings.get(&team.id) {
            Some(id) => id,
            None => {
                let id = self.store.rendering_id(team.id).await?;
                self.renderings.insert(team.id, id);
                id
            }
        };
        let caller = SessionClaims::for_user(user, team, rendering_id)
            .into_caller(chrono_tz::UTC, request_id);
        match permissions.can_browse(&caller, collection, None).await {
            Ok(()) => Ok(caller),
            Err(crate::auth::Error::Forbidden(_)) => Err(Error::Forbidden(format!(
                "the user may not browse the collection {collection:?}"
            ))),
            Err(other) => Err(Error::Store(crate::platform::Error::Remote(
                other.to_string(),
            ))),
        }
    }
}

/// The packed ids of at most `limit` records of `collection` matching `tree` (and the caller's
/// `scope`), as `caller` lists them from `datasource`: the records a schedule or a record
/// change starts runs on.
pub async fn matching_ids(
    datasource: &dyn DataSource,
    caller: &Caller,
    collection: &str,
    tree: Option<ConditionTree>,
    limit: u64,
) -> std::result::Result<Vec<String>, crate::datasource::Error> {
    let collection = datasource.collection(collection)?;
    let schema = collection.schema();
    let keys: Vec<String> = schema
        .primary_keys()
        .into_iter()
        .map(str::to_owned)
        .collect();
    if keys.is_empty() {
        return Err(crate::datasource::Error::NoPrimaryKey);
    }
    let filter = Filter::new(tree).with_page(Page::new(0, limit));
    let records = collection
        .list(caller, &filter, &Projection::new(keys))
        .await?;
    records
        .iter()
        .map(|record| pack_id(schema, record))
        .collect()
}

/// A condition tree written in a definition (the agent's JSON form), read against `collection`.
pub fn parse_tree(
    datasource: &dyn DataSource,
    collection: &str,
    json: Option<&serde_json::Value>,
) -> std::result::Result<Option<ConditionTree>, crate::datasource::Error> {
    let Some(json) = json else { return Ok(None) };
    let schema = datasource.schema();
    let collection = schema
        .collections
        .get(collection)
        .ok_or_else(|| crate::datasource::Error::MissingCollection(collection.to_owned()))?;
    ConditionTree::parse(json, collection, schema).map(Some)
}
