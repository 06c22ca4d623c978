//! The store: one sqlx `Any` pool over SQLite or PostgreSQL, migrated at open, scoped to one
//! project and environment. Every write of the permission model runs in one transaction with its
//! admin log entry (platform-api.md §1.3), and bumps the generation that tells this instance's
//! permission cache to refetch.
//!
//! Queries use `$n` placeholders, which both SQLite and PostgreSQL read; times are unix
//! milliseconds and documents JSON text, so the same SQL serves both dialects.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row as _};

use super::documents::{
    EnvironmentPermissions, IpWhitelist, Rendering, RenderingCollection, RenderingTeam, UserEntry,
};
use super::{Error, PermissionSource, Result};
use crate::datasource::PermissionLevel;

/// Which SQL dialect the store speaks; only migrations and URLs differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// Canopy's store for one project and environment.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    /// The workflow engine's progress, committed without waiting for the disk (see
    /// [`Store::progress_pool`]); connected on first use.
    progress: AnyPool,
    dialect: Dialect,
    project: String,
    environment: String,
    generation: Arc<AtomicU64>,
    /// Bumped when a sign-in (an OAuth refresh family) is revoked by another process: what an
    /// instance remembers of sign-ins read before the bump is read again (`Mcp::family_revoked`).
    grants: Arc<AtomicU64>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dialect", &self.dialect)
            .field("project", &self.project)
            .field("environment", &self.environment)
            .finish_non_exhaustive()
    }
}

/// Who makes a change, for the admin log's `initiator` and `user`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// An admin through the HTTP API or a signed-in session.
    Administrator {
        user_id: i64,
        email: String,
        name: String,
    },
    /// Canopy itself on an operator's command: the CLI, `permissions.toml`, `canopy init`.
    System,
    /// An identity provider's claims at sign-in (OIDC team and role mapping).
    IdentityProvider,
}

impl Actor {
    fn initiator(&self) -> &'static str {
        match self {
            Self::Administrator { .. } => "administrator",
            Self::System => "forestAdmin",
            Self::IdentityProvider => "identityProvider",
        }
    }
}

/// A role of the project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub id: i64,
    pub name: String,
}

/// A team of the project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub id: i64,
    pub name: String,
}

/// A user of the project, with their role and teams (first team first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: i64,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub permission_level: PermissionLevel,
    pub role: Option<Role>,
    pub teams: Vec<Team>,
    pub tags: BTreeMap<String, String>,
    pub disabled: bool,
    /// Whether the user can sign in with a password (the hash itself never leaves the store).
    pub has_password: bool,
}

impl User {
    pub fn full_name(&self) -> String {
        format!("{} {}", self.first_name, self.last_name)
            .trim()
            .to_owned()
    }
}

/// A user to create.
#[derive(Debug, Clone, Default)]
pub struct NewUser {
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub permission_level: PermissionLevel,
    pub role: Option<String>,
    pub teams: Vec<String>,
    pub tags: BTreeMap<String, String>,
    /// An argon2 PHC string (`platform::password::hash`), never a clear password.
    pub password_hash: Option<String>,
}

/// A change to a user; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct UserChange {
    pub email: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub permission_level: Option<PermissionLevel>,
    /// `Some(None)` removes the role.
    pub role: Option<Option<String>>,
    pub teams: Option<Vec<String>>,
    pub tags: Option<BTreeMap<String, String>>,
    pub disabled: Option<bool>,
    /// `Some(None)` removes the password (no built-in sign-in).
    pub password_hash: Option<Option<String>>,
}

/// One entry of the admin log (platform-api.md §1.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminLog {
    pub id: String,
    pub created_at: i64,
    pub r#type: String,
    pub resource: String,
    pub initiator: String,
    pub actor_user_id: Option<i64>,
    pub actor_email: Option<String>,
    pub actor_username: Option<String>,
    pub target_ref: Option<String>,
    pub previous_value: Option<Json>,
    pub new_value: Option<Json>,
}

/// The filters of the admin-log listing (platform-api.md §1.3), AND-combined.
#[derive(Debug, Clone, Default)]
pub struct AdminLogFilter {
    /// Most entries returned.
    pub limit: i64,
    /// The administrator's e-mail, as logged.
    pub user_email: Option<String>,
    /// The administrator's id.
    pub user_id: Option<i64>,
    /// `add`, `remove`, `update` or `initial`.
    pub r#type: Option<String>,
    /// `administrator`, `identityProvider` or `forestAdmin`.
    pub initiator: Option<String>,
    /// `user-project`, `role`, `team`, `environment` or `workflow`.
    pub resource: Option<String>,
    pub created_at: super::listing::DateRange,
}

/// The state of an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Rejected,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "approved" => Self::Approved,
            "rejected" => Self::Rejected,
            _ => Self::Pending,
        }
    }
}

/// An approval request: an action a user asked to run, waiting for an approver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub id: i64,
    pub collection_name: String,
    pub action_name: String,
    pub requester_id: i64,
    pub requester_email: String,
    pub status: ApprovalStatus,
    /// The action body's `data.attributes` as the requester sent it.
    pub attributes: Json,
    pub created_at: i64,
    pub decided_by_id: Option<i64>,
    pub decided_by_email: Option<String>,
    pub decided_at: Option<i64>,
    pub comment: Option<String>,
    /// What running the action answered, once approved (or why it failed).
    pub outcome: Option<Json>,
}

/// The PostgreSQL channel on which committed admin log entries announce a change (payload: the
/// project; migration 0020).
const CHANGES_CHANNEL: &str = "canopy_changes";

/// What [`follow_channel`] hands its handler.
#[derive(Debug)]
pub enum Heard {
    /// A notification's payload.
    Payload(String),
    /// The listening connection came back after a failure: what was announced meanwhile is lost.
    Reconnected,
}

/// Follows the PostgreSQL `channel` at `url` in a task of its own (`what` names it in the log):
/// `handle` gets each notification, and [`Heard::Reconnected`] after a lost connection came
/// back; a failed connection is retried every 2 s. Ends as soon as `stop` completes, or when
/// `handle` answers `false`.
pub fn follow_channel<S, H, F>(
    url: String,
    channel: &'static str,
    what: &'static str,
    stop: S,
    mut handle: H,
) -> tokio::task::JoinHandle<()>
where
    S: std::future::Future<Output = ()> + Send + 'static,
    H: FnMut(Heard) -> F + Send + 'static,
    F: std::future::Future<Output = bool> + Send,
{
    let follow = async move {
        let mut first = true;
        loop {
            let connected = async {
                let mut listener = sqlx::postgres::PgListener::connect(&url).await?;
                listener.listen(channel).await?;
                Ok::<_, sqlx::Error>(listener)
            };
            let mut listener = match connected.await {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::warn!(%error, "listening for {what} failed; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            };
            if !std::mem::take(&mut first) && !handle(Heard::Reconnected).await {
                return;
            }
            loop {
                match listener.recv().await {
                    Ok(notification) => {
                        let payload = notification.payload().to_owned();
                        if !handle(Heard::Payload(payload)).await {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the {what} listener stopped; reconnecting");
                        break;
                    }
                }
            }
        }
    };
    tokio::spawn(async move {
        tokio::select! {
            () = follow => {}
            () = stop => {}
        }
    })
}

/// Completes once `owner` has no strong reference left (checked every 30 s): the `stop` of a
/// [`follow_channel`] whose handler serves an object that may be dropped.
pub async fn dropped<T: Send + Sync>(owner: std::sync::Weak<T>) {
    while owner.strong_count() > 0 {
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
}

/// Milliseconds since the epoch, the store's one clock.
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The SQLite file of the store under a data folder.
pub fn default_sqlite_url(data_dir: &Path) -> String {
    format!(
        "sqlite://{}?mode=rwc",
        data_dir.join("canopy.sqlite").display()
    )
}

const USER_COLUMNS: &str = "u.id, u.email, u.first_name, u.last_name, u.permission_level, \
     u.role_id, r.name AS role_name, u.tags, u.disabled, u.password_hash IS NOT NULL AS has_password";

/// A user with their teams in one query: one row per team (a single row with NULL team columns
/// for a user in no team). Reading the teams apart was a second round trip on every call that
/// acts as a token's user (the workflow webhook's hot path).
const USER_WITH_TEAMS: &str = "SELECT u.id, u.email, u.first_name, u.last_name, \
     u.permission_level, u.role_id, r.name AS role_name, u.tags, u.disabled, \
     u.password_hash IS NOT NULL AS has_password, t.id AS team_id, t.name AS team_name \
     FROM users u LEFT JOIN roles r ON r.id = u.role_id \
     LEFT JOIN team_members m ON m.user_id = u.id LEFT JOIN teams t ON t.id = m.team_id";

/// The teams' order of `user_teams`.
const TEAM_ORDER: &str = "ORDER BY m.position, t.id";

/// The user of [`USER_WITH_TEAMS`]'s rows, if any.
fn user_with_teams(rows: &[AnyRow]) -> Result<Option<User>> {
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let mut teams = Vec::new();
    for row in rows {
        if let Some(id) = row.try_get::<Option<i64>, _>("team_id")? {
            teams.push(Team {
                id,
                name: row.try_get("team_name")?,
            });
        }
    }
    user_fields(first, teams).map(Some)
}

/// A user from a row of [`USER_COLUMNS`], with their teams.
fn user_fields(row: &AnyRow, teams: Vec<Team>) -> Result<User> {
    let level: String = row.try_get("permission_level")?;
    let tags: String = row.try_get("tags")?;
    let role = match row.try_get::<Option<i64>, _>("role_id")? {
        Some(role_id) => Some(Role {
            id: role_id,
            name: row.try_get("role_name")?,
        }),
        None => None,
    };
    Ok(User {
        id: row.try_get("id")?,
        email: row.try_get("email")?,
        first_name: row.try_get("first_name")?,
        last_name: row.try_get("last_name")?,
        permission_level: parse_level(&level)?,
        role,
        teams,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        disabled: row.try_get::<i64, _>("disabled")? != 0,
        has_password: bool_column(row, "has_password")?,
    })
}

/// What each new connection of a store pool runs first. On SQLite: wait for the one writer
/// rather than fail with SQLITE_BUSY, and enforce foreign keys. The store's own pool also turns
/// WAL on (kept in the file); the engine's progress pool ([`Store::progress_pool`]) commits
/// without waiting for the disk, on both databases.
fn session(dialect: Dialect, durable: bool) -> &'static [&'static str] {
    match (dialect, durable) {
        (Dialect::Sqlite, true) => &[
            "PRAGMA busy_timeout = 5000",
            "PRAGMA foreign_keys = ON",
            "PRAGMA journal_mode = WAL",
        ],
        (Dialect::Sqlite, false) => &[
            "PRAGMA busy_timeout = 5000",
            "PRAGMA foreign_keys = ON",
            "PRAGMA synchronous = NORMAL",
        ],
        (Dialect::Postgres, true) => &[],
        (Dialect::Postgres, false) => &["SET synchronous_commit = off"],
    }
}

/// A store pool of at most `max_connections`, each connection set up with `settings`.
fn pool_options(max_connections: u32, settings: &'static [&'static str]) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(move |conn, _| {
            Box::pin(async move {
                for setting in settings {
                    sqlx::query(setting).execute(&mut *conn).await?;
                }
                Ok(())
            })
        })
}

impl Store {
    /// Connects to `url` (`sqlite:` or `postgres:`), runs the migrations of its dialect (sqlx
    /// takes an advisory lock on PostgreSQL, so instances starting together migrate once) and
    /// scopes the store to one project and environment.
    pub async fn open(url: &str, project: &str, environment: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let dialect = if url.starts_with("sqlite:") {
            Dialect::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Dialect::Postgres
        } else {
            return Err(Error::Invalid(format!(
                "the state URL must start with sqlite: or postgres:, not {:?}",
                crate::datasource::sql::redact_url(url)
            )));
        };
        if dialect == Dialect::Sqlite
            && let Some(parent) = sqlite_path(url).and_then(|p| Path::new(p).parent())
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| Error::Open {
                url: crate::datasource::sql::redact_url(url),
                source: sqlx::Error::Io(e),
            })?;
        }
        let max_connections = if dialect == Dialect::Sqlite { 4 } else { 8 };
        let options = pool_options(max_connections, session(dialect, true));
        let pool = options.connect(url).await.map_err(|source| Error::Open {
            url: crate::datasource::sql::redact_url(url),
            source,
        })?;
        match dialect {
            Dialect::Sqlite => sqlx::migrate!("migrations/sqlite").run(&pool).await?,
            Dialect::Postgres => sqlx::migrate!("migrations/postgres").run(&pool).await?,
        }
        // Few connections: the engine's workers take one at a time. On SQLite, one: the file
        // has one writer, and writers of one process queue in the pool, in order, rather than
        // in SQLite's busy handler, which sleeps up to 100 ms between tries; each connection
        // also drops its page cache whenever another one wrote.
        let progress_connections = if dialect == Dialect::Sqlite { 1 } else { 4 };
        let progress = pool_options(progress_connections, session(dialect, false))
            .connect_lazy(url)
            .map_err(|source| Error::Open {
                url: crate::datasource::sql::redact_url(url),
                source,
            })?;
        Ok(Self {
            pool,
            progress,
            dialect,
            project: project.to_owned(),
            environment: environment.to_owned(),
            generation: Arc::new(AtomicU64::new(1)),
            grants: Arc::new(AtomicU64::new(1)),
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    pub fn project(&self) -> &str {
        &self.project
    }

    pub fn environment(&self) -> &str {
        &self.environment
    }

    /// The pool, for the modules that own tables of their own in this store (tokens, logs).
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The pool of the workflow engine's progress: claims, leases, step rows of steps that
    /// only read, waits and ends. Its commits do not wait for the disk (SQLite `synchronous =
    /// NORMAL` in WAL mode, PostgreSQL `synchronous_commit = off`): a crash of Canopy loses
    /// none of them, since the database has them; a crash of the machine may roll back the
    /// last fraction of a second, after which those runs redo their read steps. What must
    /// outlive a power loss (an accepted webhook's run, the write-ahead marker before a
    /// step's write, whatever a person does) commits on [`Store::pool`], and each such commit
    /// also makes every earlier progress commit durable (one log, flushed in order). Issue 23:
    /// one flush per step held the engine to the disk's flush rate (about 500–2,000 a second
    /// here).
    pub(crate) fn progress_pool(&self) -> &AnyPool {
        &self.progress
    }

    /// The same database seen from another environment of the project (tests, `--environment`).
    #[must_use]
    pub fn for_environment(&self, environment: &str) -> Self {
        Self {
            environment: environment.to_owned(),
            ..self.clone()
        }
    }

    /// Marks the permission documents as changed (see `PermissionSource::generation`).
    pub(super) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// How many times sign-ins were announced revoked by another process (on a PostgreSQL
    /// store, through [`Store::listen_changes`]); a sign-in's status read at an older value may
    /// be stale.
    pub fn grants_generation(&self) -> u64 {
        self.grants.load(Ordering::Acquire)
    }

    pub async fn close(&self) {
        self.progress.close().await;
        self.pool.close().await;
    }

    /// Bumps the generation when another process (the CLI, another instance on the same
    /// PostgreSQL store) changed the permission model: every change writes an admin log entry,
    /// so the log's size and newest id, read every `every`, tell. Ends with the last clone of
    /// this store.
    pub fn watch_changes(&self, every: Duration) {
        let pool = self.pool.clone();
        let project = self.project.clone();
        let generation = Arc::downgrade(&self.generation);
        tokio::spawn(async move {
            let marker = || async {
                let row =
                    sqlx::query("SELECT COUNT(*), MAX(id) FROM admin_logs WHERE project = $1")
                        .bind(&project)
                        .fetch_one(&pool)
                        .await
                        .ok()?;
                Some((
                    row.try_get::<i64, _>(0).ok()?,
                    row.try_get::<Option<String>, _>(1).ok()?,
                ))
            };
            let mut seen = marker().await;
            loop {
                tokio::time::sleep(every).await;
                let Some(generation) = generation.upgrade() else {
                    break;
                };
                if pool.is_closed() {
                    break;
                }
                let now = marker().await;
                if now.is_some() && now != seen {
                    generation.fetch_add(1, Ordering::Release);
                    seen = now;
                }
            }
        });
    }

    /// On a PostgreSQL store (`url`), bumps the generation as soon as any process on the store
    /// commits a change to this project's permission model: the `canopy_changes` channel that
    /// the admin log's trigger announces on (migration 0020). The poll of [`Store::watch_changes`]
    /// stays as the backstop for a notification lost while the listening connection was down;
    /// each reconnection bumps the generation once for the same reason. The same channel
    /// carries `grants:<project>` when a sign-in is revoked (a reused refresh token; migration
    /// 0022), which bumps [`Store::grants_generation`] instead. Ends with the last clone of this
    /// store.
    pub fn listen_changes(&self, url: &str) {
        if self.dialect != Dialect::Postgres {
            return;
        }
        let project = self.project.clone();
        let grants_payload = format!("grants:{project}");
        let generation = Arc::downgrade(&self.generation);
        let grants = Arc::downgrade(&self.grants);
        follow_channel(
            url.to_owned(),
            CHANGES_CHANNEL,
            "permission changes",
            dropped(generation.clone()),
            move |heard| {
                // Whatever was announced while the connection was down counts as a change.
                let (permissions, revocations) = match &heard {
                    Heard::Payload(payload) => (*payload == project, *payload == grants_payload),
                    Heard::Reconnected => (true, true),
                };
                let generation = generation.upgrade();
                let grants = grants.upgrade();
                async move {
                    let (Some(generation), Some(grants)) = (generation, grants) else {
                        return false;
                    };
                    if permissions {
                        generation.fetch_add(1, Ordering::Release);
                    }
                    if revocations {
                        grants.fetch_add(1, Ordering::Release);
                    }
                    true
                }
            },
        );
    }

    // ----- users --------------------------------------------------------------------------

    /// Every user of the project, disabled ones included, by id.
    pub async fn users(&self) -> Result<Vec<User>> {
        let rows = sqlx::query(&format!(
            "SELECT {USER_COLUMNS} FROM users u LEFT JOIN roles r ON r.id = u.role_id \
             WHERE u.project = $1 ORDER BY u.id"
        ))
        .bind(&self.project)
        .fetch_all(&self.pool)
        .await?;
        let mut users = Vec::with_capacity(rows.len());
        for row in rows {
            users.push(self.user_from_row(&row).await?);
        }
        Ok(users)
    }

    pub async fn user(&self, id: i64) -> Result<Option<User>> {
        let rows = sqlx::query(&format!(
            "{USER_WITH_TEAMS} WHERE u.project = $1 AND u.id = $2 {TEAM_ORDER}"
        ))
        .bind(&self.project)
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        user_with_teams(&rows)
    }

    /// The user with this email, compared without case (emails are case-insensitive in practice).
    pub async fn user_by_email(&self, email: &str) -> Result<Option<User>> {
        let rows = sqlx::query(&format!(
            "{USER_WITH_TEAMS} WHERE u.project = $1 AND LOWER(u.email) = LOWER($2) {TEAM_ORDER}"
        ))
        .bind(&self.project)
        .bind(email)
        .fetch_all(&self.pool)
        .await?;
        user_with_teams(&rows)
    }

    /// The stored password hash of an enabled user, for sign-in.
    pub async fn password_hash(&self, user_id: i64) -> Result<Option<String>> {
        let row = sqlx::query(
            "SELECT password_hash FROM users WHERE project = $1 AND id = $2 AND disabled = 0",
        )
        .bind(&self.project)
        .bind(user_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.and_then(|r| r.try_get::<Option<String>, _>(0).ok().flatten()))
    }

    async fn user_from_row(&self, row: &AnyRow) -> Result<User> {
        let id: i64 = row.try_get("id")?;
        user_fields(row, self.user_teams(id).await?)
    }

    async fn user_teams(&self, user_id: i64) -> Result<Vec<Team>> {
        let rows = sqlx::query(
            "SELECT t.id, t.name FROM team_members m JOIN teams t ON t.id = m.team_id \
             WHERE m.user_id = $1 ORDER BY m.position, t.id",
        )
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Team {
                    id: r.try_get(0)?,
                    name: r.try_get(1)?,
                })
            })
            .collect()
    }

    /// Creates a user; the role and teams must exist.
    pub async fn create_user(&self, actor: &Actor, new: NewUser) -> Result<User> {
        let email = normalize_email(&new.email)?;
        let role_id = match &new.role {
            Some(name) => Some(self.require_role(name).await?.id),
            None => None,
        };
        let team_ids = self.require_teams(&new.teams).await?;
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let id: i64 = sqlx::query(
            "INSERT INTO users (project, email, first_name, last_name, permission_level, role_id, \
             tags, password_hash, disabled, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $9) RETURNING id",
        )
        .bind(&self.project)
        .bind(&email)
        .bind(&new.first_name)
        .bind(&new.last_name)
        .bind(new.permission_level.as_str())
        .bind(role_id)
        .bind(serde_json::to_string(&new.tags).unwrap_or_else(|_| "{}".to_owned()))
        .bind(&new.password_hash)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| Error::from_insert(e, || format!("a user with email {email} already exists")))?
        .try_get(0)?;
        for (position, team_id) in team_ids.iter().enumerate() {
            sqlx::query(
                "INSERT INTO team_members (team_id, user_id, position) VALUES ($1, $2, $3)",
            )
            .bind(team_id)
            .bind(id)
            .bind(position as i64)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        let user = self
            .user(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("user {id}")))?;
        self.admin_log(
            actor,
            "add",
            "user-project",
            &id.to_string(),
            None,
            Some(user_value(&user)),
        )
        .await?;
        self.changed();
        Ok(user)
    }

    /// Changes a user; what the change leaves `None` stays as it is.
    pub async fn update_user(&self, actor: &Actor, id: i64, change: UserChange) -> Result<User> {
        let before = self
            .user(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("user {id}")))?;
        let role_id = match &change.role {
            Some(Some(name)) => Some(Some(self.require_role(name).await?.id)),
            Some(None) => Some(None),
            None => None,
        };
        let team_ids = match &change.teams {
            Some(teams) => Some(self.require_teams(teams).await?),
            None => None,
        };
        let email = match &change.email {
            Some(email) => normalize_email(email)?,
            None => before.email.clone(),
        };
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE users SET email = $1, first_name = $2, last_name = $3, permission_level = $4, \
             role_id = $5, tags = $6, disabled = $7, updated_at = $8 WHERE project = $9 AND id = $10",
        )
        .bind(&email)
        .bind(change.first_name.as_ref().unwrap_or(&before.first_name))
        .bind(change.last_name.as_ref().unwrap_or(&before.last_name))
        .bind(change.permission_level.unwrap_or(before.permission_level).as_str())
        .bind(role_id.unwrap_or(before.role.as_ref().map(|r| r.id)))
        .bind(
            serde_json::to_string(change.tags.as_ref().unwrap_or(&before.tags))
                .unwrap_or_else(|_| "{}".to_owned()),
        )
        .bind(i64::from(change.disabled.unwrap_or(before.disabled)))
        .bind(now_ms())
        .bind(&self.project)
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(|e| Error::from_insert(e, || format!("a user with email {email} already exists")))?;
        if let Some(hash) = &change.password_hash {
            sqlx::query("UPDATE users SET password_hash = $1 WHERE project = $2 AND id = $3")
                .bind(hash)
                .bind(&self.project)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(team_ids) = team_ids {
            sqlx::query("DELETE FROM team_members WHERE user_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            for (position, team_id) in team_ids.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO team_members (team_id, user_id, position) VALUES ($1, $2, $3)",
                )
                .bind(team_id)
                .bind(id)
                .bind(position as i64)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        let after = self
            .user(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("user {id}")))?;
        self.admin_log(
            actor,
            "update",
            "user-project",
            &id.to_string(),
            Some(user_value(&before)),
            Some(user_value(&after)),
        )
        .await?;
        self.changed();
        Ok(after)
    }

    /// Removes a user; their sessions stop working on the next request (the permission check
    /// no longer finds them).
    pub async fn remove_user(&self, actor: &Actor, id: i64) -> Result<()> {
        let before = self
            .user(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("user {id}")))?;
        sqlx::query("DELETE FROM users WHERE project = $1 AND id = $2")
            .bind(&self.project)
            .bind(id)
            .execute(&self.pool)
            .await?;
        self.admin_log(
            actor,
            "remove",
            "user-project",
            &id.to_string(),
            Some(user_value(&before)),
            None,
        )
        .await?;
        self.changed();
        Ok(())
    }

    // ----- roles and teams ------------------------------------------------------------------

    pub async fn roles(&self) -> Result<Vec<Role>> {
        self.named("roles").await.map(|rows| {
            rows.into_iter()
                .map(|(id, name)| Role { id, name })
                .collect()
        })
    }

    pub async fn teams(&self) -> Result<Vec<Team>> {
        self.named("teams").await.map(|rows| {
            rows.into_iter()
                .map(|(id, name)| Team { id, name })
                .collect()
        })
    }

    async fn named(&self, table: &'static str) -> Result<Vec<(i64, String)>> {
        let rows = sqlx::query(&format!(
            "SELECT id, name FROM {table} WHERE project = $1 ORDER BY id"
        ))
        .bind(&self.project)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    pub async fn role_by_name(&self, name: &str) -> Result<Option<Role>> {
        Ok(self
            .roles()
            .await?
            .into_iter()
            .find(|role| role.name == name))
    }

    pub async fn team_by_name(&self, name: &str) -> Result<Option<Team>> {
        Ok(self
            .teams()
            .await?
            .into_iter()
            .find(|team| team.name == name))
    }

    async fn require_role(&self, name: &str) -> Result<Role> {
        self.role_by_name(name).await?.ok_or_else(|| {
            Error::NotFound(format!("role {name:?} (create it first: canopy roles add)"))
        })
    }

    async fn require_teams(&self, names: &[String]) -> Result<Vec<i64>> {
        let teams = self.teams().await?;
        names
            .iter()
            .map(|name| {
                teams
                    .iter()
                    .find(|team| &team.name == name)
                    .map(|team| team.id)
                    .ok_or_else(|| {
                        Error::NotFound(format!(
                            "team {name:?} (create it first: canopy teams add)"
                        ))
                    })
            })
            .collect()
    }

    pub async fn create_role(&self, actor: &Actor, name: &str) -> Result<Role> {
        let id = self.insert_named("roles", "role", name).await?;
        self.admin_log(
            actor,
            "add",
            "role",
            &id.to_string(),
            None,
            Some(json!({"name": name})),
        )
        .await?;
        self.changed();
        Ok(Role {
            id,
            name: name.to_owned(),
        })
    }

    /// Adds a team, with its rendering in this environment (whose id, the `renderingId` of its
    /// users' session tokens, is known from now on: `canopy teams list`, the admin API).
    pub async fn create_team(&self, actor: &Actor, name: &str) -> Result<Team> {
        let trimmed = name.trim();
        if trimmed.is_empty() {
            return Err(Error::Invalid("a team needs a name".to_owned()));
        }
        let mut tx = self.pool.begin().await?;
        let id: i64 = sqlx::query(
            "INSERT INTO teams (project, name, created_at) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(&self.project)
        .bind(trimmed)
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| Error::from_insert(e, || format!("a team named {trimmed:?} already exists")))?
        .try_get(0)?;
        add_rendering(&mut tx, &self.project, &self.environment, id).await?;
        tx.commit().await?;
        self.admin_log(
            actor,
            "add",
            "team",
            &id.to_string(),
            None,
            Some(json!({"name": name})),
        )
        .await?;
        self.changed();
        Ok(Team {
            id,
            name: name.to_owned(),
        })
    }

    async fn insert_named(&self, table: &'static str, what: &str, name: &str) -> Result<i64> {
        let name = name.trim();
        if name.is_empty() {
            return Err(Error::Invalid(format!("a {what} needs a name")));
        }
        Ok(sqlx::query(&format!(
            "INSERT INTO {table} (project, name, created_at) VALUES ($1, $2, $3) RETURNING id"
        ))
        .bind(&self.project)
        .bind(name)
        .bind(now_ms())
        .fetch_one(&self.pool)
        .await
        .map_err(|e| Error::from_insert(e, || format!("a {what} named {name:?} already exists")))?
        .try_get(0)?)
    }

    pub async fn rename_role(&self, actor: &Actor, name: &str, new_name: &str) -> Result<Role> {
        let role = self.require_role(name).await?;
        self.rename("roles", "role", role.id, name, new_name)
            .await?;
        self.admin_log(
            actor,
            "update",
            "role",
            &role.id.to_string(),
            Some(json!({"name": name})),
            Some(json!({"name": new_name})),
        )
        .await?;
        self.changed();
        Ok(Role {
            id: role.id,
            name: new_name.to_owned(),
        })
    }

    pub async fn rename_team(&self, actor: &Actor, name: &str, new_name: &str) -> Result<Team> {
        let team = self
            .team_by_name(name)
            .await?
            .ok_or_else(|| Error::NotFound(format!("team {name:?}")))?;
        self.rename("teams", "team", team.id, name, new_name)
            .await?;
        self.admin_log(
            actor,
            "update",
            "team",
            &team.id.to_string(),
            Some(json!({"name": name})),
            Some(json!({"name": new_name})),
        )
        .await?;
        self.changed();
        Ok(Team {
            id: team.id,
            name: new_name.to_owned(),
        })
    }

    async fn rename(
        &self,
        table: &'static str,
        what: &str,
        id: i64,
        _name: &str,
        new_name: &str,
    ) -> Result<()> {
        let new_name = new_name.trim();
        if new_name.is_empty() {
            return Err(Error::Invalid(format!("a {what} needs a name")));
        }
        sqlx::query(&format!(
            "UPDATE {table} SET name = $1 WHERE project = $2 AND id = $3"
        ))
        .bind(new_name)
        .bind(&self.project)
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            Error::from_insert(e, || format!("a {what} named {new_name:?} already exists"))
        })?;
        Ok(())
    }

    /// Removes a role. Refused while users hold it, so that nobody silently loses their rights.
    pub async fn remove_role(&self, actor: &Actor, name: &str) -> Result<()> {
        let role = self.require_role(name).await?;
        let holders: i64 = sqlx::query("SELECT COUNT(*) FROM users WHERE role_id = $1")
            .bind(role.id)
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        if holders > 0 {
            return Err(Error::Conflict(format!(
                "role {name:?} is held by {holders} user(s); give them another role first"
            )));
        }
        sqlx::query("DELETE FROM roles WHERE id = $1")
            .bind(role.id)
            .execute(&self.pool)
            .await?;
        self.admin_log(
            actor,
            "remove",
            "role",
            &role.id.to_string(),
            Some(json!({"name": name})),
            None,
        )
        .await?;
        self.changed();
        Ok(())
    }

    /// Removes a team, its memberships and its renderings.
    pub async fn remove_team(&self, actor: &Actor, name: &str) -> Result<()> {
        let team = self
            .team_by_name(name)
            .await?
            .ok_or_else(|| Error::NotFound(format!("team {name:?}")))?;
        sqlx::query("DELETE FROM teams WHERE id = $1")
            .bind(team.id)
            .execute(&self.pool)
            .await?;
        self.admin_log(
            actor,
            "remove",
            "team",
            &team.id.to_string(),
            Some(json!({"name": name})),
            None,
        )
        .await?;
        self.changed();
        Ok(())
    }

    // ----- permission documents ---------------------------------------------------------------

    /// The environment's permissions; an environment never configured has no rights at all.
    pub async fn environment_document(&self) -> Result<EnvironmentPermissions> {
        let row = sqlx::query(
            "SELECT document FROM environment_permissions WHERE project = $1 AND environment = $2",
        )
        .bind(&self.project)
        .bind(&self.environment)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => parse_document(&row.try_get::<String, _>(0)?, "environment permissions"),
            None => Ok(EnvironmentPermissions::default()),
        }
    }

    /// Whether this environment's permissions were ever set.
    pub async fn has_environment_document(&self) -> Result<bool> {
        Ok(sqlx::query(
            "SELECT 1 FROM environment_permissions WHERE project = $1 AND environment = $2",
        )
        .bind(&self.project)
        .bind(&self.environment)
        .fetch_optional(&self.pool)
        .await?
        .is_some())
    }

    /// Replaces the environment's permissions.
    pub async fn set_environment_document(
        &self,
        actor: &Actor,
        document: &EnvironmentPermissions,
    ) -> Result<()> {
        let before = self.environment_document().await?;
        let text = serde_json::to_string(document)
            .map_err(|e| Error::Invalid(format!("environment permissions: {e}")))?;
        self.upsert_environment_row("environment_permissions", &text)
            .await?;
        self.admin_log(
            actor,
            "update",
            "environment",
            &self.environment,
            Some(json!({"name": self.environment, "permissions": before})),
            Some(json!({"name": self.environment, "permissions": document})),
        )
        .await?;
        self.changed();
        Ok(())
    }

    async fn upsert_environment_row(&self, table: &'static str, document: &str) -> Result<()> {
        sqlx::query(&format!(
            "INSERT INTO {table} (project, environment, document, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (project, environment) DO UPDATE SET document = excluded.document, \
             updated_at = excluded.updated_at"
        ))
        .bind(&self.project)
        .bind(&self.environment)
        .bind(document)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The rendering id of a team in this environment. Teams get theirs when they are created
    /// (and migration 0016 gave the older ones theirs); a team created while this store served
    /// another environment gets its rendering here, on first use.
    pub async fn rendering_id(&self, team_id: i64) -> Result<i64> {
        let find = || {
            sqlx::query(
                "SELECT id FROM renderings WHERE project = $1 AND environment = $2 \
                 AND team_id = $3",
            )
            .bind(&self.project)
            .bind(&self.environment)
            .bind(team_id)
        };
        if let Some(row) = find().fetch_optional(&self.pool).await? {
            return Ok(row.try_get(0)?);
        }
        let mut conn = self.pool.acquire().await?;
        add_rendering(&mut conn, &self.project, &self.environment, team_id).await?;
        Ok(find().fetch_one(&mut *conn).await?.try_get(0)?)
    }

    /// Each team's rendering id in this environment (team id → rendering id).
    pub async fn rendering_ids_by_team(&self) -> Result<BTreeMap<i64, i64>> {
        let rows = sqlx::query(
            "SELECT team_id, id FROM renderings WHERE project = $1 AND environment = $2",
        )
        .bind(&self.project)
        .bind(&self.environment)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok::<_, Error>((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?)))
            .collect()
    }

    /// A rendering of this environment by id, with its team.
    pub async fn rendering_document(&self, rendering_id: i64) -> Result<Option<Rendering>> {
        let row = sqlx::query(
            "SELECT t.id, t.name, r.document FROM renderings r JOIN teams t ON t.id = r.team_id \
             WHERE r.project = $1 AND r.environment = $2 AND r.id = $3",
        )
        .bind(&self.project)
        .bind(&self.environment)
        .bind(rendering_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let body: RenderingBody = parse_document(&row.try_get::<String, _>(2)?, "rendering")?;
        Ok(Some(Rendering {
            team: RenderingTeam {
                id: row.try_get(0)?,
                name: row.try_get(1)?,
            },
            collections: body.collections,
            stats: body.stats,
        }))
    }

    /// Replaces what a team sees in this environment: scopes, SQL segments, allowed charts.
    pub async fn set_rendering(
        &self,
        actor: &Actor,
        team: &str,
        collections: BTreeMap<String, RenderingCollection>,
        stats: Vec<Json>,
    ) -> Result<i64> {
        let team = self
            .team_by_name(team)
            .await?
            .ok_or_else(|| Error::NotFound(format!("team {team:?}")))?;
        let id = self.rendering_id(team.id).await?;
        let before = self.rendering_document(id).await?;
        let body = RenderingBody { collections, stats };
        let text =
            serde_json::to_string(&body).map_err(|e| Error::Invalid(format!("rendering: {e}")))?;
        sqlx::query("UPDATE renderings SET document = $1, updated_at = $2 WHERE id = $3")
            .bind(&text)
            .bind(now_ms())
            .bind(id)
            .execute(&self.pool)
            .await?;
        self.admin_log(
            actor,
            "update",
            "team",
            &team.id.to_string(),
            before.map(|r| json!({"name": team.name, "rendering": rendering_value(&r)})),
            Some(json!({"name": team.name, "rendering": body})),
        )
        .await?;
        self.changed();
        Ok(id)
    }

    pub async fn ip_whitelist_document(&self) -> Result<IpWhitelist> {
        let row = sqlx::query(
            "SELECT document FROM ip_whitelists WHERE project = $1 AND environment = $2",
        )
        .bind(&self.project)
        .bind(&self.environment)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => parse_document(&row.try_get::<String, _>(0)?, "IP whitelist"),
            None => Ok(IpWhitelist::default()),
        }
    }

    pub async fn set_ip_whitelist(&self, actor: &Actor, whitelist: &IpWhitelist) -> Result<()> {
        let before = self.ip_whitelist_document().await?;
        let text = serde_json::to_string(whitelist)
            .map_err(|e| Error::Invalid(format!("IP whitelist: {e}")))?;
        self.upsert_environment_row("ip_whitelists", &text).await?;
        self.admin_log(
            actor,
            "update",
            "environment",
            &self.environment,
            Some(json!({"name": self.environment, "ipWhitelist": before})),
            Some(json!({"name": self.environment, "ipWhitelist": whitelist})),
        )
        .await?;
        self.changed();
        Ok(())
    }

    // ----- approvals ------------------------------------------------------------------------

    pub async fn create_approval(
        &self,
        requester_id: i64,
        requester_email: &str,
        collection: &str,
        action: &str,
        attributes: &Json,
    ) -> Result<Approval> {
        let id: i64 = sqlx::query(
            "INSERT INTO approval_requests (project, environment, collection_name, action_name, \
             requester_id, requester_email, status, attributes, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8) RETURNING id",
        )
        .bind(&self.project)
        .bind(&self.environment)
        .bind(collection)
        .bind(action)
        .bind(requester_id)
        .bind(requester_email)
        .bind(attributes.to_string())
        .bind(now_ms())
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        self.approval(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("approval request {id}")))
    }

    pub async fn approval(&self, id: i64) -> Result<Option<Approval>> {
        let row = sqlx::query(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approval_requests \
             WHERE project = $1 AND environment = $2 AND id = $3"
        ))
        .bind(&self.project)
        .bind(&self.environment)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(approval_from_row).transpose()
    }

    /// Approval requests of this environment, newest first, optionally of one status.
    pub async fn approvals(&self, status: Option<ApprovalStatus>) -> Result<Vec<Approval>> {
        let rows = sqlx::query(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approval_requests \
             WHERE project = $1 AND environment = $2 AND ($3 = '' OR status = $3) ORDER BY id DESC"
        ))
        .bind(&self.project)
        .bind(&self.environment)
        .bind(status.map_or("", ApprovalStatus::as_str))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(approval_from_row).collect()
    }

    /// Records the decision on a pending request; `Conflict` if it was already decided (two
    /// approvers at once: the first wins, atomically).
    pub async fn decide_approval(
        &self,
        id: i64,
        status: ApprovalStatus,
        decider_id: i64,
        decider_email: &str,
        comment: Option<&str>,
    ) -> Result<Approval> {
        let done = sqlx::query(
            "UPDATE approval_requests SET status = $1, decided_by_id = $2, decided_by_email = $3, \
             decided_at = $4, comment = $5 \
             WHERE project = $6 AND environment = $7 AND id = $8 AND status = 'pending'",
        )
        .bind(status.as_str())
        .bind(decider_id)
        .bind(decider_email)
        .bind(now_ms())
        .bind(comment)
        .bind(&self.project)
        .bind(&self.environment)
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return match self.approval(id).await? {
                Some(approval) => Err(Error::Conflict(format!(
                    "approval request {id} is already {}",
                    approval.status.as_str()
                ))),
                None => Err(Error::NotFound(format!("approval request {id}"))),
            };
        }
        self.approval(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("approval request {id}")))
    }

    /// Records what running an approved action answered.
    pub async fn set_approval_outcome(&self, id: i64, outcome: &Json) -> Result<()> {
        sqlx::query("UPDATE approval_requests SET outcome = $1 WHERE id = $2")
            .bind(outcome.to_string())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // ----- admin logs ---------------------------------------------------------------------

    /// Writes one admin log entry (platform-api.md §1.3).
    pub async fn admin_log(
        &self,
        actor: &Actor,
        kind: &str,
        resource: &str,
        target: &str,
        previous: Option<Json>,
        new: Option<Json>,
    ) -> Result<()> {
        self.admin_log_on(&self.pool, actor, kind, resource, target, previous, new)
            .await
    }

    /// [`Store::admin_log`] on a connection of the caller's (a transaction that must hold the
    /// entry with the change it records, as `platform::declarative` does).
    #[allow(clippy::too_many_arguments, reason = "the fields of one log entry")]
    pub(crate) async fn admin_log_on<'c>(
        &self,
        executor: impl sqlx::Executor<'c, Database = sqlx::Any>,
        actor: &Actor,
        kind: &str,
        resource: &str,
        target: &str,
        previous: Option<Json>,
        new: Option<Json>,
    ) -> Result<()> {
        let (user_id, email, name) = match actor {
            Actor::Administrator {
                user_id,
                email,
                name,
            } => (Some(*user_id), Some(email.as_str()), Some(name.as_str())),
            _ => (None, None, None),
        };
        sqlx::query(
            "INSERT INTO admin_logs (id, project, created_at, type, resource, initiator, \
             actor_user_id, actor_email, actor_username, target_ref, previous_value, new_value) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(uuid::Uuid::now_v7().to_string())
        .bind(&self.project)
        .bind(now_ms())
        .bind(kind)
        .bind(resource)
        .bind(actor.initiator())
        .bind(user_id)
        .bind(email)
        .bind(name)
        .bind(target)
        .bind(previous.map(|v| v.to_string()))
        .bind(new.map(|v| v.to_string()))
        .execute(executor)
        .await?;
        Ok(())
    }

    /// The project's admin log, newest first, at most `limit` entries.
    pub async fn admin_logs(&self, limit: i64) -> Result<Vec<AdminLog>> {
        self.admin_logs_matching(&AdminLogFilter {
            limit,
            ..AdminLogFilter::default()
        })
        .await
    }

    /// The project's admin log entries matching every filter of `filter` (platform-api.md
    /// §1.3), newest first (then by id, descending), at most `filter.limit`.
    pub async fn admin_logs_matching(&self, filter: &AdminLogFilter) -> Result<Vec<AdminLog>> {
        let mut args = super::listing::Args::default();
        let mut conditions = vec![format!("project = {}", args.text(&self.project))];
        if let Some(email) = &filter.user_email {
            conditions.push(format!("actor_email = {}", args.text(email)));
        }
        if let Some(id) = filter.user_id {
            conditions.push(format!("actor_user_id = {}", args.int(id)));
        }
        for (column, value) in [
            ("type", &filter.r#type),
            ("initiator", &filter.initiator),
            ("resource", &filter.resource),
        ] {
            if let Some(value) = value {
                conditions.push(format!("{column} = {}", args.text(value)));
            }
        }
        conditions.extend(filter.created_at.conditions("created_at", &mut args));
        let sql = format!(
            "SELECT id, created_at, type, resource, initiator, actor_user_id, actor_email, \
             actor_username, target_ref, previous_value, new_value FROM admin_logs \
             WHERE {} ORDER BY created_at DESC, id DESC LIMIT {}",
            conditions.join(" AND "),
            args.int(filter.limit)
        );
        let rows = args.bind(sqlx::query(&sql)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                let json_col = |i: usize| -> Result<Option<Json>> {
                    Ok(r.try_get::<Option<String>, _>(i)?
                        .and_then(|s| serde_json::from_str(&s).ok()))
                };
                Ok(AdminLog {
                    id: r.try_get(0)?,
                    created_at: r.try_get(1)?,
                    r#type: r.try_get(2)?,
                    resource: r.try_get(3)?,
                    initiator: r.try_get(4)?,
                    actor_user_id: r.try_get(5)?,
                    actor_email: r.try_get(6)?,
                    actor_username: r.try_get(7)?,
                    target_ref: r.try_get(8)?,
                    previous_value: json_col(9)?,
                    new_value: json_col(10)?,
                })
            })
            .collect()
    }
}

#[async_trait]
impl PermissionSource for Store {
    async fn environment_permissions(&self) -> Result<EnvironmentPermissions> {
        self.environment_document().await
    }

    async fn users(&self) -> Result<Vec<UserEntry>> {
        Ok(Store::users(self)
            .await?
            .into_iter()
            .filter(|user| !user.disabled)
            .map(|user| UserEntry {
                id: user.id,
                full_name: user.full_name(),
                first_name: user.first_name,
                last_name: user.last_name,
                email: user.email,
                permission_level: user.permission_level,
                tags: user.tags,
                role_id: user.role.map(|role| role.id),
            })
            .collect())
    }

    async fn rendering(&self, rendering_id: i64) -> Result<Rendering> {
        self.rendering_document(rendering_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("rendering {rendering_id}")))
    }

    async fn ip_whitelist(&self) -> Result<IpWhitelist> {
        self.ip_whitelist_document().await
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// Gives `team_id` its (empty) rendering in `environment`, if it has none: the one way a
/// rendering is created (a team created by the CLI, the admin API or `permissions.toml`, and the
/// fallback of [`Store::rendering_id`]), so that its id follows its team's creation.
pub(super) async fn add_rendering(
    conn: &mut sqlx::AnyConnection,
    project: &str,
    environment: &str,
    team_id: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO renderings (project, environment, team_id, document, updated_at) \
         VALUES ($1, $2, $3, '{}', $4) ON CONFLICT (project, environment, team_id) DO NOTHING",
    )
    .bind(project)
    .bind(environment)
    .bind(team_id)
    .bind(now_ms())
    .execute(conn)
    .await?;
    Ok(())
}

/// What the `renderings.document` column holds (the team comes from the `teams` table).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct RenderingBody {
    #[serde(default)]
    pub(super) collections: BTreeMap<String, RenderingCollection>,
    #[serde(default)]
    pub(super) stats: Vec<Json>,
}

fn rendering_value(rendering: &Rendering) -> Json {
    json!({"collections": rendering.collections, "stats": rendering.stats})
}

const APPROVAL_COLUMNS: &str = "id, collection_name, action_name, requester_id, requester_email, \
     status, attributes, created_at, decided_by_id, decided_by_email, decided_at, comment, outcome";

fn approval_from_row(r: &AnyRow) -> Result<Approval> {
    let status: String = r.try_get(5)?;
    let attributes: String = r.try_get(6)?;
    Ok(Approval {
        id: r.try_get(0)?,
        collection_name: r.try_get(1)?,
        action_name: r.try_get(2)?,
        requester_id: r.try_get(3)?,
        requester_email: r.try_get(4)?,
        status: ApprovalStatus::parse(&status),
        attributes: serde_json::from_str(&attributes).unwrap_or(Json::Null),
        created_at: r.try_get(7)?,
        decided_by_id: r.try_get(8)?,
        decided_by_email: r.try_get(9)?,
        decided_at: r.try_get(10)?,
        comment: r.try_get(11)?,
        outcome: r
            .try_get::<Option<String>, _>(12)?
            .and_then(|s| serde_json::from_str(&s).ok()),
    })
}

/// The admin log's `user-project` shape of a user (platform-api.md §1.3).
pub(super) fn user_value(user: &User) -> Json {
    json!({
        "user": {"object": "user", "email": user.email, "id": user.id, "username": user.full_name()},
        "permissionLevel": user.permission_level.as_str(),
        "tags": user.tags.iter().map(|(key, value)| json!({"key": key, "value": value})).collect::<Vec<_>>(),
        "role": user.role.as_ref().map(|role| json!({"object": "role", "name": role.name})),
        "teams": user.teams.iter().map(|team| json!({"object": "team", "name": team.name})).collect::<Vec<_>>(),
        "disabled": user.disabled,
    })
}

/// Reads a permission level by its wire name.
pub fn parse_level(level: &str) -> Result<PermissionLevel> {
    match level {
        "admin" => Ok(PermissionLevel::Admin),
        "developer" => Ok(PermissionLevel::Developer),
        "editor" => Ok(PermissionLevel::Editor),
        "user" => Ok(PermissionLevel::User),
        other => Err(Error::Invalid(format!(
            "unknown permission level {other:?}: expected admin, developer, editor or user"
        ))),
    }
}

pub(super) fn normalize_email(email: &str) -> Result<String> {
    let email = email.trim();
    let valid = email
        .split_once('@')
        .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty())
        && !email.chars().any(char::is_whitespace);
    if valid {
        Ok(email.to_owned())
    } else {
        Err(Error::Invalid(format!("{email:?} is not an email address")))
    }
}

fn parse_document<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::Invalid(format!("stored {what}: {e}")))
}

/// A boolean expression column: an integer on SQLite, a boolean on PostgreSQL.
fn bool_column(row: &AnyRow, name: &str) -> Result<bool> {
    if let Ok(value) = row.try_get::<bool, _>(name) {
        return Ok(value);
    }
    Ok(row.try_get::<i64, _>(name)? != 0)
}

/// The file path of a `sqlite:` URL, for creating its folder.
pub(crate) fn sqlite_path(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next()?;
    (!path.is_empty() && path != ":memory:").then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn synchronous(pool: &AnyPool) -> i64 {
        sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(pool)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn engine_progress_commits_without_waiting_for_the_disk_and_the_rest_with() {
        let dir = std::env::temp_dir().join(format!("canopy-store-{}", uuid::Uuid::new_v4()));
        let url = format!("sqlite:{}?mode=rwc", dir.join("canopy.sqlite").display());
        let store = Store::open(&url, "p", "e").await.unwrap();
        // SQLite: 2 = FULL (the WAL flushed at each commit), 1 = NORMAL (at checkpoints).
        assert_eq!(synchronous(store.pool()).await, 2);
        assert_eq!(synchronous(store.progress_pool()).await, 1);
        // One database: what the engine commits, the rest of the store reads at once.
        sqlx::query("CREATE TABLE seen (n INTEGER)")
            .execute(store.progress_pool())
            .await
            .unwrap();
        sqlx::query("INSERT INTO seen VALUES (7)")
            .execute(store.progress_pool())
            .await
            .unwrap();
        let n: i64 = sqlx::query_scalar("SELECT n FROM seen")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(n, 7);
        store.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }
}
