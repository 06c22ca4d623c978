//! The activity log entry of one operation (platform-api.md §1.2): an operation starts a
//! [`Recorded`] once it knows the collection and the user, says what it touched, and calls
//! [`Recorded::done`] once the operation succeeded. Dropping it without `done` (an early `?`
//! return: a refused permission, a bad parameter, a database error) records the entry as failed,
//! so every attempted operation leaves exactly one entry whichever way it ends.
//!
//! Which routes record what (README.md "Activity logs", docs/compatibility.md): a list is
//! `index`, `search` with `search=`, `filter` with `filters=`; get one `read`; create, update
//! (also a to-one relation change), delete (one or many) `create`/`update`/`delete`; an action's
//! execution `action`; a CSV `export`; related lists `listRelatedData`; associate and dissociate
//! `update` of the parent; charts and native queries `dashboard`. Counts, forms and hooks are
//! parts of another operation's screen and record nothing of their own.

use crate::agent::query_string::{CompositeId, QueryString};
use crate::datasource::Caller;
use crate::platform::ActivityLog;
use crate::platform::activity::{Action, Entry};

use super::Ops;

/// One operation's entry, recorded when dropped.
pub(crate) struct Recorded {
    log: ActivityLog,
    /// `None` when activity logging is off: nothing is built.
    entry: Option<Entry>,
    completed: bool,
}

impl Recorded {
    /// Starts the entry of `action` by `caller` on `collection`, origin `ui`.
    pub(crate) fn start(ops: &Ops, action: Action, caller: &Caller, collection: &str) -> Self {
        Self::start_on(ops, action, caller, Some(collection))
    }

    /// [`Recorded::start`] of an operation that may concern no collection (a native query).
    pub(crate) fn start_on(
        ops: &Ops,
        action: Action,
        caller: &Caller,
        collection: Option<&str>,
    ) -> Self {
        let entry = ops.activity.is_enabled().then(|| {
            let mut entry = Entry::ui(action, caller, "");
            entry.collection = collection.map(str::to_owned);
            entry
        });
        Self {
            log: ops.activity.clone(),
            entry,
            completed: false,
        }
    }

    /// Adds packed record ids.
    pub(crate) fn records<I, S>(&mut self, ids: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let Some(entry) = &mut self.entry {
            entry.add_records(ids);
        }
    }

    /// Adds typed record ids, packed as the agent packs them (`1|2`).
    pub(crate) fn ids(&mut self, ids: &[CompositeId]) {
        if self.entry.is_some() {
            self.records(ids.iter().map(pack));
        }
    }

    pub(crate) fn label(&mut self, label: impl Into<String>) {
        if let Some(entry) = &mut self.entry {
            entry.label = Some(label.into());
        }
    }

    /// The operation succeeded: the entry is recorded as completed.
    pub(crate) fn done(mut self) {
        self.completed = true;
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        if let Some(entry) = self.entry.take() {
            self.log.record(if self.completed {
                entry
            } else {
                entry.failed()
            });
        }
    }
}

/// A composite id in its packed form.
pub(crate) fn pack(id: &CompositeId) -> String {
    let parts: Vec<String> = id.iter().map(|(_, value)| value.to_id_string()).collect();
    parts.join("|")
}

/// What a list request is: a search (`search=`), a filtered list (`filters=`), else an index.
pub(crate) fn list_action(query: &QueryString) -> Action {
    let given = |key: &str| query.get(key).is_some_and(|v| !v.trim().is_empty());
    if given("search") {
        Action::Search
    } else if given("filters") {
        Action::Filter
    } else {
        Action::Index
    }
}

/// Most entries a record's activity shows.
const RECORD_ACTIVITY: i64 = 50;

/// The newest entries of the activity log on one record (the console's Activity tab): for a
/// caller who may read the record, as its notes are. Entries hold who did what and when, never
/// record values.
pub async fn of_record(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    record_id: &str,
) -> super::Result<Vec<crate::platform::activity::ActivityRow>> {
    super::notes::readable(ops, caller, collection, record_id).await?;
    let Some(store) = &ops.store else {
        return Ok(Vec::new());
    };
    // What was recorded a moment ago (this page's own `read`, a note just filed) is written
    // before the log is read.
    ops.activity.flush().await;
    let filter = crate::platform::activity::ActivityFilter {
        limit: RECORD_ACTIVITY,
        collection_name: Some(collection.to_owned()),
        record_id: Some(record_id.to_owned()),
        ..Default::default()
    };
    store
        .activity_logs(&filter)
        .await
        .map_err(super::notes::from_store)
}

/// A request that could not be parsed is an attempted operation all the same: its activity
/// entry is recorded as failed, as the operation records a refused one. The transports call
/// this on their parse error path, then answer the parse error (unless this refuses first).
///
/// The agent checks the collection right before it reads the request, so a request both
/// malformed and refused is answered the refusal, and a user without the right cannot tell a
/// field name the collection has from one it lacks. Operations authorize once, after parsing;
/// so on the parse error path only (nothing is added to a well-formed request), the right of
/// the operation on `collection` is checked first. Relation and action requests (`label`)
/// answer the parse error: their rights involve other collections, which the operation checks.
pub async fn refused_parse(
    ops: &Ops,
    action: Action,
    caller: &Caller,
    collection: &str,
    record: Option<&str>,
    label: Option<String>,
) -> super::Result<()> {
    let mut entry = Recorded::start(ops, action, caller, collection);
    entry.records(record);
    let labelled = label.is_some();
    if let Some(label) = label {
        entry.label(label);
    }
    if !labelled {
        for right in rights_checked_first(action) {
            ops.permissions.can(caller, collection, *right).await?;
        }
    }
    Ok(())
}

/// The collection rights the agent checks before reading a request of this kind.
fn rights_checked_first(action: Action) -> &'static [crate::auth::CollectionRight] {
    use crate::auth::CollectionRight as R;
    match action {
        Action::Index | Action::Search | Action::Filter => &[R::Browse],
        Action::Export => &[R::Browse, R::Export],
        Action::Read => &[R::Read],
        Action::Create => &[R::Add],
        Action::Update => &[R::Edit],
        Action::Delete => &[R::Delete],
        _ => &[],
    }
}
