//! Activity logs (platform-api.md §1.2, §2.4, §4.2): one entry per operation a user ran (a list,
//! a read, a write, an action, a note, an approval, later workflow and MCP calls), with who, on
//! what collection and which record ids, never record values.
//!
//! Recording must not slow requests down, so [`ActivityLog::record`] never waits: it puts the
//! entry in a bounded buffer (a tokio channel) and returns. One background task per process
//! writes what the buffer holds in batches (up to [`BATCH`] entries, or what arrived within
//! [`BATCH_WINDOW`] of the first), each batch in one transaction, on a connection of its own that
//! commits without waiting for the disk (see `Writer` for what that risks), with INSERTs of a
//! few fixed sizes prepared once (see `CHUNKS`). A full buffer drops the entry,
//! counts it and logs a warning with the count (at most once a second, so that an overload does
//! not also flood the log). [`ActivityLog::flush`] waits until everything recorded before it is
//! written: the server calls it at shutdown, tests call it instead of sleeping.
//!
//! The logger belongs to the process, not to a plugin generation: `app::Platform` holds it and
//! every generation's `AppState` gets a clone, so a reload neither loses nor duplicates entries.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::{AnyConnection, Connection as _};
use tokio::sync::{mpsc, oneshot};

use super::listing::DateRange;
use super::store::{Dialect, now_ms};
use super::{Result, Store};
use crate::datasource::Caller;

mod prune;
mod table;

pub use prune::{PruneSchedule, Pruned, Retention, spawn_pruner};

/// Most entries written in one transaction.
pub const BATCH: usize = 500;
/// How long the writer waits for more entries after the first of a batch.
pub const BATCH_WINDOW: Duration = Duration::from_millis(200);
/// Entries the buffer holds before `record` starts dropping them: 32 batches behind a slow
/// store (over a second of a busy server's requests) before anything is lost, a few MiB at most.
pub const DEFAULT_CAPACITY: usize = 16_384;

/// Whether an operation reads or writes (`type` in the API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Read,
    Write,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// Declares the `action` enum of platform-api.md §1.2 (38 values) with its wire names and kinds.
macro_rules! actions {
    ($($variant:ident = $name:literal: $kind:ident),* $(,)?) => {
        /// What an entry records (`action` in the API), the platform's 38 values.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Action { $($variant),* }

        impl Action {
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The wire name (`listRelatedData`).
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name),* }
            }

            /// Whether the action reads or writes.
            pub fn kind(self) -> Kind {
                match self { $(Self::$variant => Kind::$kind),* }
            }

            /// Its number in the store (`activity_actions.id`, seeded by migration 0015): the
            /// position in [`Action::ALL`], from 1. Append new actions at the end.
            pub fn code(self) -> i64 {
                self as i64 + 1
            }

            /// The action of a stored number.
            pub fn from_code(code: i64) -> Option<Self> {
                Self::ALL.get(usize::try_from(code.checked_sub(1)?).ok()?).copied()
            }
        }
    };
}

actions! {
    Create = "create": Write,
    Read = "read": Read,
    Update = "update": Write,
    Delete = "delete": Write,
    Action = "action": Write,
    Search = "search": Read,
    Filter = "filter": Read,
    ListRelatedData = "listRelatedData": Read,
    DescribeCollection = "describeCollection": Read,
    Index = "index": Read,
    Select = "select": Read,
    Dashboard = "dashboard": Read,
    Workspace = "workspace": Read,
    Export = "export": Read,
    CreateNote = "createNote": Write,
    OpenNote = "openNote": Read,
    DeleteNote = "deleteNote": Write,
    CreateMessage = "createMessage": Write,
    CreateApproval = "createApproval": Write,
    ApproveApproval = "approveApproval": Write,
    RejectApproval = "rejectApproval": Write,
    IgnoreApprovalWarning = "ignoreApprovalWarning": Write,
    MarkApprovalAsFailed = "markApprovalAsFailed": Write,
    SendApprovalBackInReview = "sendApprovalBackInReview": Write,
    StartProcessingInboxTask = "startProcessingInboxTask": Write,
    CompleteInboxTask = "completeInboxTask": Write,
    CancelInboxTask = "cancelInboxTask": Write,
    CancelInboxTaskNotTreated = "cancelInboxTaskNotTreated": Write,
    AutoCancelInboxTask = "autoCancelInboxTask": Write,
    AssignUserToInboxTask = "assignUserToInboxTask": Write,
    UnassignUserFromInboxTask = "unassignUserFromInboxTask": Write,
    TriggerWorkflow = "triggerWorkflow": Write,
    AbortWorkflow = "abortWorkflow": Write,
    CompleteWorkflow = "completeWorkflow": Write,
    SelectWorkflowOption = "selectWorkflowOption": Write,
    CompleteWorkflowStep = "completeWorkflowStep": Write,
    ReviseWorkflowStep = "reviseWorkflowStep": Write,
    ResumeWorkflow = "resumeWorkflow": Write,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Action {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("unknown activity action {s:?}"))
    }
}

/// Where the operation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The `/forest` routes, called by the admin UI with a user's session token.
    Ui,
    /// The public API `/v1`.
    Api,
    /// A workflow run started by its webhook.
    Webhook,
    /// The MCP server.
    Mcp,
    /// The workflow executor acting for a run's user.
    Executor,
}

tokio::task_local! {
    /// Who dispatched the request being served, when it is not its HTTP client: the MCP server
    /// runs each tool call under it (the operations it calls, or a `/v1` route in process), whose
    /// entries then log `mcp`. A
    /// task-local rather than a header, so that no client can claim another origin.
    static DISPATCHED_BY: Origin;
}

/// Runs `future` (an in-process request) with its activity entries marked as coming from
/// `origin`.
pub async fn dispatched_by<F: std::future::Future>(origin: Origin, future: F) -> F::Output {
    DISPATCHED_BY.scope(origin, future).await
}

/// The origin of the request being served: the dispatcher's, else `direct` (what the route's
/// own clients are).
pub fn origin_or(direct: Origin) -> Origin {
    DISPATCHED_BY.try_with(|origin| *origin).unwrap_or(direct)
}

impl Origin {
    /// Its number in the store (migration 0015).
    pub fn code(self) -> i64 {
        match self {
            Self::Ui => 0,
            Self::Api => 1,
            Self::Webhook => 2,
            Self::Mcp => 3,
            Self::Executor => 4,
        }
    }

    /// The origin of a stored number.
    pub fn from_code(code: i64) -> Option<Self> {
        [
            Self::Ui,
            Self::Api,
            Self::Webhook,
            Self::Mcp,
            Self::Executor,
        ]
        .into_iter()
        .find(|origin| origin.code() == code)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ui => "ui",
            Self::Api => "api",
            Self::Webhook => "webhook",
            Self::Mcp => "mcp",
            Self::Executor => "executor",
        }
    }
}

/// Whether the operation did what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Completed,
    /// Refused (permissions, validation) or broken after it was attempted: kept for the audit,
    /// not served by the public API, whose entries mean "this was done".
    Failed,
}

impl Status {
    /// Its number in the store (migration 0015): completed entries are 0.
    pub fn code(self) -> i64 {
        match self {
            Self::Completed => 0,
            Self::Failed => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }
}

/// The user an entry names, as they were when the operation ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub id: i64,
    pub email: String,
    pub username: String,
    /// The team the user acted in (the session's team).
    pub team: String,
}

impl Actor {
    /// The user of a data call (a session token's claims).
    pub fn of(caller: &Caller) -> Self {
        let username = format!("{} {}", caller.first_name, caller.last_name)
            .trim()
            .to_owned();
        Self {
            id: caller.id,
            email: caller.email.clone(),
            username,
            team: caller.team.clone(),
        }
    }
}

impl Actor {
    /// A user of the store (the public API's caller: `Admin::user`), in their first team.
    pub fn of_user(user: &super::User) -> Self {
        Self {
            id: user.id,
            email: user.email.clone(),
            username: user.full_name(),
            team: user
                .teams
                .first()
                .map(|team| team.name.clone())
                .unwrap_or_default(),
        }
    }
}

/// One activity log entry, as recorded. Build it with [`Entry::new`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub created_at: i64,
    /// The environment it happened in; `None` is the logger's store's own.
    pub environment: Option<String>,
    pub action: Action,
    pub label: Option<String>,
    pub status: Status,
    pub user: Actor,
    pub collection: Option<String>,
    /// Packed record ids (`"1|2"` for a composite key), without duplicates.
    pub record_ids: Vec<String>,
    pub origin: Origin,
    /// The application token that made the call, when one did.
    pub token_id: Option<String>,
    /// The request's correlation id, to find the request log line of the same call.
    pub request_id: Option<String>,
}

impl Entry {
    /// An entry of `action` by `user` from `origin`, now, completed.
    pub fn new(action: Action, user: Actor, origin: Origin) -> Self {
        Self {
            id: uuid::Uuid::now_v7().to_string(),
            created_at: now_ms(),
            environment: None,
            action,
            label: None,
            status: Status::Completed,
            user,
            collection: None,
            record_ids: Vec::new(),
            origin,
            token_id: None,
            request_id: None,
        }
    }

    /// An entry of a `/forest` route: the session's user, origin `ui`, its correlation id.
    pub fn ui(action: Action, caller: &Caller, collection: &str) -> Self {
        Self::new(action, Actor::of(caller), origin_or(Origin::Ui))
            .with_collection(collection)
            .with_request_id(caller.request_id.to_string())
    }

    #[must_use]
    pub fn with_collection(mut self, collection: impl Into<String>) -> Self {
        self.collection = Some(collection.into());
        self
    }

    #[must_use]
    pub fn with_records<I, S>(mut self, ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.add_records(ids);
        self
    }

    /// Adds record ids, keeping the first occurrence of each.
    pub fn add_records<I, S>(&mut self, ids: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for id in ids {
            let id = id.into();
            if !self.record_ids.contains(&id) {
                self.record_ids.push(id);
            }
        }
    }

    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    #[must_use]
    pub fn with_environment(mut self, environment: impl Into<String>) -> Self {
        self.environment = Some(environment.into());
        self
    }

    #[must_use]
    pub fn with_token(mut self, token_id: impl Into<String>) -> Self {
        self.token_id = Some(token_id.into());
        self
    }

    #[must_use]
    pub fn with_request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self
    }

    #[must_use]
    pub fn failed(mut self) -> Self {
        self.status = Status::Failed;
        self
    }
}

enum Message {
    Entry(Box<Entry>),
    /// Answered once every entry sent before it is written.
    Flush(oneshot::Sender<()>),
}

/// The process's activity logger. Cheap to clone; a disabled one (`activityLogs = false`, or a
/// router without a store) records nothing.
#[derive(Clone, Default)]
pub struct ActivityLog {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    sender: mpsc::Sender<Message>,
    /// Entries dropped because the buffer was full, since the start.
    dropped: AtomicU64,
    /// Dropped entries not yet reported in a warning.
    unreported: AtomicU64,
    /// When the last warning about dropped entries was logged (unix ms).
    last_warning: AtomicI64,
}

impl fmt::Debug for ActivityLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivityLog")
            .field("enabled", &self.is_enabled())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl ActivityLog {
    /// A logger that records nothing.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// A logger writing into `store`, with the default buffer; starts its writer task (call it
    /// inside a tokio runtime).
    pub fn start(store: Store) -> Self {
        Self::with_capacity(store, DEFAULT_CAPACITY)
    }

    /// [`ActivityLog::start`] with a buffer of `capacity` entries (at least 1).
    pub fn with_capacity(store: Store, capacity: usize) -> Self {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        tokio::spawn(write_batches(store, receiver));
        Self {
            inner: Some(Arc::new(Inner {
                sender,
                dropped: AtomicU64::new(0),
                unreported: AtomicU64::new(0),
                last_warning: AtomicI64::new(0),
            })),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Entries dropped since the start because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |inner| inner.dropped.load(Ordering::Relaxed))
    }

    /// Queues `entry` without waiting. A full buffer drops it, counts it, and logs a warning
    /// with the count (at most once a second).
    pub fn record(&self, entry: Entry) {
        let Some(inner) = &self.inner else { return };
        match inner.sender.try_send(Message::Entry(Box::new(entry))) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                crate::metrics::metrics().activity_dropped();
                inner.unreported.fetch_add(1, Ordering::Relaxed);
                let now = now_ms();
                let last = inner.last_warning.load(Ordering::Relaxed);
                if now - last >= 1000
                    && inner
                        .last_warning
                        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    inner.warn_dropped();
                }
            }
            // The writer ended: only after the runtime shut down.
            Err(mpsc::error::TrySendError::Closed(_)) => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                crate::metrics::metrics().activity_dropped();
                tracing::warn!("activity log entry dropped: the writer has stopped");
            }
        }
    }

    /// Waits until every entry recorded before this call is written (or failed to be, which is
    /// logged). The server calls it at shutdown; tests call it before reading the log.
    pub async fn flush(&self) {
        let Some(inner) = &self.inner else { return };
        let (ack, done) = oneshot::channel();
        if inner.sender.send(Message::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
        if inner.unreported.load(Ordering::Relaxed) > 0 {
            inner.warn_dropped();
        }
    }
}

impl Inner {
    fn warn_dropped(&self) {
        let count = self.unreported.swap(0, Ordering::Relaxed);
        if count > 0 {
            tracing::warn!(
                dropped = count,
                dropped_total = self.dropped.load(Ordering::Relaxed),
                "activity log buffer full: {count} entries dropped"
            );
        }
    }
}

/// The writer task: batches of up to [`BATCH`] entries, each written within [`BATCH_WINDOW`]
/// of its first entry, or at once on a flush. Ends when every logger clone is gone.
async fn write_batches(store: Store, mut receiver: mpsc::Receiver<Message>) {
    let mut writer = Writer {
        store,
        connection: None,
        interner: table::Interner::default(),
    };
    let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
    // Everything waiting is taken in one go: one wake-up of this task per burst of requests,
    // not one per entry.
    let mut received: Vec<Message> = Vec::with_capacity(BATCH);
    let mut deadline = tokio::time::Instant::now();
    loop {
        let room = BATCH - batch.len();
        let count = if batch.is_empty() {
            receiver.recv_many(&mut received, room).await
        } else {
            match tokio::time::timeout_at(deadline, receiver.recv_many(&mut received, room)).await {
                Ok(count) => count,
                Err(_elapsed) => {
                    writer.write(&mut batch).await;
                    continue;
                }
            }
        };
        if count == 0 {
            // Every logger is gone and the buffer is empty.
            writer.write(&mut batch).await;
            writer.close().await;
            return;
        }
        for message in received.drain(..) {
            match message {
                Message::Entry(entry) => {
                    if batch.is_empty() {
                        deadline = tokio::time::Instant::now() + BATCH_WINDOW;
                    }
                    batch.push(*entry);
                    if batch.len() >= BATCH {
                        writer.write(&mut batch).await;
                    }
                }
                Message::Flush(ack) => {
                    writer.write(&mut batch).await;
                    let _ = ack.send(());
                }
            }
        }
    }
}

/// What writes the batches: the store, through a connection of its own.
///
/// The connection is taken out of the pool for good (so requests never wait for it behind a
/// batch, and its prepared statements stay warm) and is told to commit without waiting for the
/// disk: `synchronous = NORMAL` on SQLite (the store runs in WAL mode: a commit survives a crash
/// of the process, and only a power loss or an OS crash can take back the last ones; the file
/// is never corrupted) and `synchronous_commit = off` on PostgreSQL (a crash of the database
/// server may lose the last few hundred milliseconds of commits, never consistency). The log
/// already keeps up to [`BATCH_WINDOW`] of entries in memory, lost if the process dies, so this
/// adds no new kind of loss; the store's other writes (users, permissions, tokens, notes) keep
/// their full durability on the pool's connections.
struct Writer {
    store: Store,
    connection: Option<AnyConnection>,
    /// The ids of the names this writer interned (users, teams, collections…).
    interner: table::Interner,
}

impl Writer {
    /// Writes and empties `batch`; a failure is retried once on a new connection, then logged
    /// with the count lost.
    async fn write(&mut self, batch: &mut Vec<Entry>) {
        if batch.is_empty() {
            return;
        }
        // Awaited apart from the `if let`: a scrutinee's temporaries live through its block,
        // and the finished write's future held across the sleep below would make the writer's
        // future lose `Send`.
        let written = self.try_write(batch).await;
        if let Err(first) = written {
            tracing::debug!(error = %first, "writing activity log entries failed; retrying once");
            // The connection may be what broke: the retry takes a new one.
            self.connection = None;
            tokio::time::sleep(Duration::from_millis(100)).await;
            let retried = self.try_write(batch).await;
            if let Err(error) = retried {
                self.connection = None;
                tracing::error!(
                    lost = batch.len(),
                    %error,
                    "activity log entries could not be written"
                );
            }
        }
        batch.clear();
    }

    async fn try_write(&mut self, batch: &[Entry]) -> Result<()> {
        if self.connection.is_none() {
            self.connection = Some(writer_connection(&self.store).await?);
        }
        match &mut self.connection {
            Some(connection) => {
                self.store
                    .insert_activity_on(connection, &mut self.interner, batch)
                    .await
            }
            None => Ok(()),
        }
    }

    async fn close(&mut self) {
        if let Some(connection) = self.connection.take() {
            let _ = connection.close().await;
        }
    }
}

/// A connection of the store's own, out of its pool, that commits without waiting for the disk
/// (see [`Writer`]).
async fn writer_connection(store: &Store) -> Result<AnyConnection> {
    let mut connection = store.pool().acquire().await?.detach();
    let relaxed = match store.dialect() {
        Dialect::Sqlite => "PRAGMA synchronous = NORMAL",
        Dialect::Postgres => "SET synchronous_commit = off",
    };
    sqlx::query(relaxed).execute(&mut connection).await?;
    Ok(connection)
}

/// The filters of the activity-log listing (platform-api.md §1.2), AND-combined.
#[derive(Debug, Clone, Default)]
pub struct ActivityFilter {
    /// Most entries returned.
    pub limit: i64,
    pub user_email: Option<String>,
    pub user_id: Option<i64>,
    pub team_name: Option<String>,
    pub collection_name: Option<String>,
    pub record_id: Option<String>,
    pub action: Option<Action>,
    pub kind: Option<Kind>,
    pub created_at: DateRange,
    /// Entries strictly after this one in the listing's order (`startingAfter`, a keyset
    /// cursor on `(createdAt, id)`): no entry of the same millisecond is skipped.
    pub starting_after: Option<String>,
}

/// An entry as served by the listing (completed entries only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityRow {
    pub id: String,
    pub created_at: i64,
    pub environment: String,
    pub kind: String,
    pub action: String,
    pub label: Option<String>,
    pub user_id: i64,
    pub user_email: String,
    pub username: String,
    pub team_name: String,
    pub collection_name: Option<String>,
    pub record_ids: Vec<String>,
    pub origin: String,
}

#[cfg(test)]
mod tests {
    use super::table::{fixed_chunks, placeholders};
    use super::*;

    #[test]
    fn the_action_enum_has_the_platforms_38_values_each_with_a_kind() {
        assert_eq!(Action::ALL.len(), 38);
        assert_eq!(Action::NAMES.len(), 38);
        for action in Action::ALL {
            assert_eq!(action.as_str().parse::<Action>(), Ok(*action));
        }
        assert_eq!(Action::ListRelatedData.as_str(), "listRelatedData");
        assert_eq!(Action::Export.kind(), Kind::Read);
        assert_eq!(Action::Delete.kind(), Kind::Write);
        assert_eq!(Action::CreateMessage.kind(), Kind::Write);
        assert!("drop".parse::<Action>().is_err());
    }

    #[test]
    fn placeholders_are_numbered_row_by_row() {
        assert_eq!(
            placeholders(Dialect::Postgres, 2, 3),
            "($1, $2, $3), ($4, $5, $6)"
        );
        assert_eq!(placeholders(Dialect::Sqlite, 2, 2), "(?, ?), (?, ?)");
    }

    #[test]
    fn a_batch_is_cut_into_the_fixed_sizes_largest_first() {
        let items: Vec<usize> = (0..(64 * 2 + 8 * 3 + 5)).collect();
        let sizes: Vec<(usize, usize)> = fixed_chunks(&items)
            .into_iter()
            .map(|(size, chunk)| (size, chunk.len()))
            .collect();
        let mut expected = vec![(0, 64), (0, 64), (1, 8), (1, 8), (1, 8)];
        expected.extend([(2, 1); 5]);
        assert_eq!(sizes, expected);
        let flat: Vec<usize> = fixed_chunks(&items)
            .into_iter()
            .flat_map(|(_, chunk)| chunk.iter().copied())
            .collect();
        assert_eq!(flat, items);
        assert!(fixed_chunks::<usize>(&[]).is_empty());
    }

    #[test]
    fn record_ids_are_kept_once_in_their_first_order() {
        let actor = Actor {
            id: 1,
            email: "a@b.c".into(),
            username: "A".into(),
            team: "Ops".into(),
        };
        let entry = Entry::new(Action::Delete, actor, Origin::Ui).with_records(["2", "1", "2"]);
        assert_eq!(entry.record_ids, ["2", "1"]);
        assert_eq!(entry.status, Status::Completed);
        assert_eq!(entry.clone().failed().status, Status::Failed);
    }

    /// A store in a fresh SQLite file, removed when dropped.
    struct TempStore {
        store: Store,
        path: std::path::PathBuf,
    }

    impl Drop for TempStore {
        fn drop(&mut self) {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", self.path.display()));
            }
        }
    }

    async fn temp_store() -> TempStore {
        let path =
            std::env::temp_dir().join(format!("canopy-activity-{}.sqlite", uuid::Uuid::new_v4()));
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let store = Store::open(&url, "acme", "production").await.unwrap();
        TempStore { store, path }
    }

    fn entry(n: usize) -> Entry {
        let actor = Actor {
            id: 7,
            email: "sam@acme.io".into(),
            username: "Sam Lee".into(),
            team: "Ops".into(),
        };
        Entry::new(Action::Read, actor, Origin::Ui)
            .with_collection("orders")
            .with_records([n.to_string()])
    }

    #[tokio::test]
    async fn a_full_buffer_drops_and_counts_instead_of_blocking() {
        let temp = temp_store().await;
        let store = temp.store.clone();
        // A buffer of 2, and a runtime with one thread: the writer cannot run while this test
        // records, so the third and later entries find the buffer full.
        let log = ActivityLog::with_capacity(store.clone(), 2);
        for n in 0..10 {
            log.record(entry(n));
        }
        assert_eq!(log.dropped(), 8);
        log.flush().await;
        let rows = store
            .activity_logs(&ActivityFilter {
                limit: 100,
                ..ActivityFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(rows.len(), 2, "the two buffered entries are written");
        let mut ids: Vec<&str> = rows.iter().map(|r| r.record_ids[0].as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["0", "1"]);
    }

    #[tokio::test]
    async fn flush_writes_everything_recorded_before_it_in_batches() {
        let temp = temp_store().await;
        let store = temp.store.clone();
        let log = ActivityLog::start(store.clone());
        for n in 0..(BATCH * 2 + 7) {
            log.record(entry(n));
        }
        log.flush().await;
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM activity_logs")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(count, i64::try_from(BATCH * 2 + 7).unwrap());
        assert_eq!(log.dropped(), 0);
        let disabled = ActivityLog::disabled();
        disabled.record(entry(0));
        disabled.flush().await;
        assert!(!disabled.is_enabled());
    }

    #[tokio::test]
    async fn the_writers_cache_of_names_is_bounded_and_a_forgotten_name_keeps_its_id() {
        let temp = temp_store().await;
        let store = temp.store.clone();
        let mut connection = store.pool().acquire().await.unwrap().detach();
        let mut interner = table::Interner::default();
        // More distinct labels than the cache holds, as notes or failure messages give.
        let labelled = |n: usize| entry(n).with_label(format!("label {n}"));
        let count = table::INTERNED_NAMES + 600;
        let entries: Vec<Entry> = (0..count).map(labelled).collect();
        for batch in entries.chunks(BATCH) {
            store
                .insert_activity_on(&mut connection, &mut interner, batch)
                .await
                .unwrap();
        }
        assert!(
            interner.names_cached() <= table::INTERNED_NAMES,
            "{} names cached",
            interner.names_cached()
        );
        // The first labels were pushed out of the cache: written again, they are looked up
        // and keep their row (no second one), and the entry reads back with its label.
        let again = labelled(0).with_records(["again"]);
        store
            .insert_activity_on(&mut connection, &mut interner, std::slice::from_ref(&again))
            .await
            .unwrap();
        let rows: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM activity_names WHERE name = 'label 0'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(rows, 1);
        let names: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM activity_names")
            .fetch_one(store.pool())
            .await
            .unwrap();
        // The labels and the collection's name.
        assert_eq!(names, i64::try_from(count + 1).unwrap());
        let listed = store
            .activity_logs(&ActivityFilter {
                limit: 1,
                ..ActivityFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(listed[0].record_ids, ["0", "again"]);
        assert_eq!(listed[0].label.as_deref(), Some("label 0"));
    }

    #[tokio::test]
    async fn the_stored_action_numbers_are_the_migrations() {
        let temp = temp_store().await;
        let stored: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT CAST(id AS BIGINT), name, type FROM activity_actions ORDER BY id",
        )
        .fetch_all(temp.store.pool())
        .await
        .unwrap();
        let expected: Vec<(i64, String, String)> = Action::ALL
            .iter()
            .map(|a| {
                (
                    a.code(),
                    a.as_str().to_owned(),
                    a.kind().as_str().to_owned(),
                )
            })
            .collect();
        assert_eq!(stored, expected);
        for action in Action::ALL {
            assert_eq!(Action::from_code(action.code()), Some(*action));
        }
        assert_eq!(Action::from_code(0), None);
        assert_eq!(Action::from_code(39), None);
        for origin in [
            Origin::Ui,
            Origin::Api,
            Origin::Webhook,
            Origin::Mcp,
            Origin::Executor,
        ] {
            assert_eq!(Origin::from_code(origin.code()), Some(origin));
        }
    }

    /// Every filter of the listing runs from an index, newest first, with no scan of the table
    /// and no sort but the outer one of the page's rows (SQLite's plan; the benchmark prints them at 1M entries, PostgreSQL's too).
    #[tokio::test]
    async fn every_filter_is_served_by_an_index_without_a_sort() {
        let temp = temp_store().await;
        let store = temp.store.clone();
        let mut other = entry(1);
        other.user = Actor {
            id: 8,
            email: "lee@acme.io".into(),
            username: "Lee".into(),
            team: "Ops".into(),
        };
        let entries: Vec<Entry> = (0..50)
            .map(|n| match n % 2 {
                0 => entry(n),
                _ => Entry {
                    action: Action::Update,
                    ..entry(n)
                },
            })
            .chain([other])
            .collect();
        store.insert_activity(&entries).await.unwrap();
        let cursor = entries[10].id.clone();
        let base = || ActivityFilter {
            limit: 101,
            ..ActivityFilter::default()
        };
        let filters = [
            ("none", base()),
            (
                "userEmail",
                ActivityFilter {
                    user_email: Some("sam@acme.io".into()),
                    ..base()
                },
            ),
            (
                "userId",
                ActivityFilter {
                    user_id: Some(7),
                    ..base()
                },
            ),
            (
                "teamName",
                ActivityFilter {
                    team_name: Some("Ops".into()),
                    ..base()
                },
            ),
            (
                "collectionName",
                ActivityFilter {
                    collection_name: Some("orders".into()),
                    ..base()
                },
            ),
            (
                "recordId",
                ActivityFilter {
                    record_id: Some("3".into()),
                    ..base()
                },
            ),
            (
                "action",
                ActivityFilter {
                    action: Some(Action::Read),
                    ..base()
                },
            ),
            (
                "type",
                ActivityFilter {
                    kind: Some(Kind::Write),
                    ..base()
                },
            ),
            (
                "createdAt",
                ActivityFilter {
                    created_at: DateRange {
                        gte: Some(0),
                        lt: Some(now_ms() + 1000),
                        ..DateRange::default()
                    },
                    ..base()
                },
            ),
            (
                "startingAfter",
                ActivityFilter {
                    starting_after: Some(cursor.clone()),
                    ..base()
                },
            ),
            (
                "recordId + collectionName + startingAfter",
                ActivityFilter {
                    record_id: Some("3".into()),
                    collection_name: Some("orders".into()),
                    starting_after: Some(entries[40].id.clone()),
                    ..base()
                },
            ),
            (
                "userId + type + createdAt",
                ActivityFilter {
                    user_id: Some(7),
                    kind: Some(Kind::Read),
                    created_at: DateRange {
                        gte: Some(0),
                        ..DateRange::default()
                    },
                    ..base()
                },
            ),
        ];
        for (name, filter) in filters {
            let plan = store
                .explain_activity_logs(&filter)
                .await
                .unwrap()
                .join("\n");
            assert!(!plan.is_empty(), "{name}");
            // The one sort allowed is the outer one, of the page's rows already picked.
            assert!(
                !plan.contains("SCAN e") && !plan.contains("SCAN r"),
                "{name}: {plan}"
            );
            assert!(plan.matches("TEMP B-TREE").count() <= 1, "{name}: {plan}");
            assert!(
                !store.activity_logs(&filter).await.unwrap().is_empty(),
                "{name}"
            );
        }
    }
}
