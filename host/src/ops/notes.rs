//! Notes on records (platform-api.md §1.4): the thread of a record, filing a note, adding a
//! message, archiving, deleting, each with its activity entry.
//!
//! Two kinds of callers reach them. The public API (`/v1`, admins only, with its token scopes
//! checked by `http`) calls the writes as a store user ([`Writer`]): the note and the entry are
//! the same whatever the surface. The console calls the [`Caller`] operations below, which
//! authorize first: a user sees and writes the notes of a record they may read (the
//! collection's `read` right, the record within their scope); archiving is for the note's author
//! and admins, as a thread is its author's.

use crate::datasource::{Caller, PermissionLevel, Projection};
use crate::platform::activity::{Action, Actor, Entry, Origin, origin_or};
use crate::platform::notes::{NewNote, Note, NoteChange, NoteFilter, NoteRef};
use crate::platform::{Store, User};

use super::{Error, Ops, Result, records};

/// Most notes a record's thread shows (newest first).
const THREAD_LIMIT: i64 = 100;

/// Who writes a note, as the activity log records it: a user of the store, through a surface.
pub struct Writer<'a> {
    pub user: &'a User,
    pub origin: Origin,
    /// The application token that made the call, if one did.
    pub token_id: Option<&'a str>,
    /// The environment named by the call (the `/v1` path), if any.
    pub environment: Option<&'a str>,
}

impl Writer<'_> {
    /// The activity entry of a note operation.
    fn log(&self, ops: &Ops, action: Action, note: &NoteRef) {
        let mut entry = Entry::new(action, Actor::of_user(self.user), self.origin)
            .with_label(format!("note {}", note.id))
            .with_records([note.record_id.clone()]);
        if let Some(environment) = self.environment {
            entry = entry.with_environment(environment);
        }
        if let Some(collection) = &note.collection_name {
            entry = entry.with_collection(collection.clone());
        }
        if let Some(token) = self.token_id {
            entry = entry.with_token(token);
        }
        ops.activity.record(entry);
    }
}

/// Files a note (its first message is `new.content`); entry `createNote`.
pub async fn file(
    ops: &Ops,
    writer: &Writer<'_>,
    store: &Store,
    new: NewNote,
) -> crate::platform::Result<Note> {
    let note = store.create_note(writer.user, new).await?;
    writer.log(ops, Action::CreateNote, &note.reference());
    Ok(note)
}

/// Adds a message to note `id`'s thread; entry `createMessage`.
pub async fn reply(
    ops: &Ops,
    writer: &Writer<'_>,
    store: &Store,
    id: i64,
    content: &str,
) -> crate::platform::Result<Note> {
    let note = store.add_note_message(writer.user, id, content).await?;
    writer.log(ops, Action::CreateMessage, &note.reference());
    Ok(note)
}

/// Renames, archives or unarchives note `id` (the platform logs no entry for it).
pub async fn change(
    writer: &Writer<'_>,
    store: &Store,
    id: i64,
    change: NoteChange,
) -> crate::platform::Result<Note> {
    store.update_note(writer.user, id, change).await
}

/// Deletes note `id` (soft); entry `deleteNote`.
pub async fn delete(
    ops: &Ops,
    writer: &Writer<'_>,
    store: &Store,
    id: i64,
) -> crate::platform::Result<NoteRef> {
    let deleted = store.delete_note(id).await?;
    writer.log(ops, Action::DeleteNote, &deleted);
    Ok(deleted)
}

// ----- the console's operations, as a caller -------------------------------------------------

/// The notes of one record, newest first, archived ones included (the page tells them apart):
/// for a caller who may read the record.
pub async fn of_record(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    record_id: &str,
) -> Result<Vec<Note>> {
    readable(ops, caller, collection, record_id).await?;
    let filter = NoteFilter {
        collection_name: Some(collection.to_owned()),
        record_id: Some(record_id.to_owned()),
        ..NoteFilter::default()
    };
    store(ops)?
        .notes(&filter, THREAD_LIMIT)
        .await
        .map_err(from_store)
}

/// Files a note on a record the caller may read, in their first team.
pub async fn create(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    record_id: &str,
    title: &str,
    content: &str,
) -> Result<Note> {
    readable(ops, caller, collection, record_id).await?;
    let store = store(ops)?;
    let user = user(store, caller).await?;
    let new = NewNote {
        collection_name: collection.to_owned(),
        record_id: record_id.to_owned(),
        title: title.to_owned(),
        content: content.to_owned(),
        team_name: None,
    };
    file(ops, &ui(&user), store, new).await.map_err(from_store)
}

/// Adds a message to a note of a record the caller may read.
pub async fn add_message(ops: &Ops, caller: &Caller, id: i64, content: &str) -> Result<Note> {
    let store = store(ops)?;
    let note = note_of_readable(ops, caller, store, id).await?;
    let user = user(store, caller).await?;
    reply(ops, &ui(&user), store, note.id, content)
        .await
        .map_err(from_store)
}

/// Archives (or unarchives) a note: its author or an admin, on a record they may read.
pub async fn archive(ops: &Ops, caller: &Caller, id: i64, archived: bool) -> Result<Note> {
    let store = store(ops)?;
    let note = note_of_readable(ops, caller, store, id).await?;
    if !may_archive(caller, &note) {
        return Err(crate::auth::Error::forbidden().into());
    }
    let user = user(store, caller).await?;
    let update = NoteChange {
        title: None,
        archived: Some(archived),
    };
    change(&ui(&user), store, note.id, update)
        .await
        .map_err(from_store)
}

/// Whether `caller` may archive `note`: its author, or an admin.
pub fn may_archive(caller: &Caller, note: &Note) -> bool {
    note.author.id == caller.id || caller.permission_level == PermissionLevel::Admin
}

/// The note `id` when it is on a record the caller may read; otherwise not found (a note on a
/// record out of reach is not shown to exist).
async fn note_of_readable(ops: &Ops, caller: &Caller, store: &Store, id: i64) -> Result<Note> {
    let missing = || crate::agent::Error::NotFound(format!("note {id} not found"));
    let note = store
        .note(id)
        .await
        .map_err(from_store)?
        .ok_or_else(missing)?;
    let Some(collection) = note.collection_name.as_deref() else {
        return Err(missing().into());
    };
    match readable(ops, caller, collection, &note.record_id).await {
        Ok(()) => Ok(note),
        Err(Error::Agent(crate::agent::Error::NotFound(_)) | Error::NotFound) => {
            Err(missing().into())
        }
        Err(other) => Err(other),
    }
}

/// Refuses unless the caller may read the record: the collection's `read` right (403) and the
/// record within their scope (404).
pub async fn readable(ops: &Ops, caller: &Caller, collection: &str, record_id: &str) -> Result<()> {
    let schema = ops.collection(collection)?;
    ops.permissions
        .can(caller, collection, crate::auth::CollectionRight::Read)
        .await?;
    let filter = records::one_in_scope(ops, caller, schema, record_id).await?;
    let keys = Projection::new(schema.primary_keys());
    let found = ops
        .datasource
        .collection(collection)?
        .list(caller, &filter, &keys)
        .await?;
    if found.is_empty() {
        return Err(crate::agent::Error::NotFound(format!(
            "There is no record {record_id} in {collection} that you may see."
        ))
        .into());
    }
    Ok(())
}

fn store(ops: &Ops) -> Result<&Store> {
    ops.store.as_ref().ok_or(Error::NotFound)
}

/// The caller as the store knows them (notes keep their author's id and names).
async fn user(store: &Store, caller: &Caller) -> Result<User> {
    store
        .user(caller.id)
        .await
        .map_err(from_store)?
        .ok_or_else(|| crate::auth::Error::forbidden().into())
}

fn ui(user: &User) -> Writer<'_> {
    Writer {
        user,
        origin: origin_or(Origin::Ui),
        token_id: None,
        environment: None,
    }
}

/// A store failure as an operation's error: what the user can fix is a 400 with its message,
/// a missing note a 404, the rest a 500 whose detail is logged.
pub(crate) fn from_store(error: crate::platform::Error) -> Error {
    use crate::platform::Error as E;
    match error {
        E::NotFound(what) => crate::agent::Error::NotFound(format!("{what} not found")).into(),
        E::Invalid(message) | E::Conflict(message) => {
            crate::agent::Error::Validation(message).into()
        }
        other => crate::datasource::Error::Internal(other.to_string()).into(),
    }
}
