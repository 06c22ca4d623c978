//! Notes on records (public-api.md "Note", platform-api.md §1.4 and §4.1): a note on one record
//! of a collection, with a thread of messages whose HTML is sanitised before it is stored.
//!
//! Names: a note keeps the ids of its author and team and also their names as they were when it
//! was written. It is shown with the current names while the user or team exists (a renamed team
//! or a corrected email shows everywhere at once, and the `userEmail`/`teamName` filters, which
//! resolve names to ids first, agree with what is shown), and with the written names after the
//! user or team is removed, so a note never loses its author.
//!
//! Order: `created_at` strictly increases with `id` within an environment (the `notes_clock` row
//! hands out max(now, previous + 1 ms) inside the note's transaction), so the API's order (id
//! descending) is also creation order, a `createdAt.lt` page bound never skips a note made in the
//! same millisecond, and the `createdAt` filters are turned into id bounds that every list index
//! (each ends in `id`) serves.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::listing::{Args, DateRange};
use super::store::{Dialect, Store, now_ms};
use super::{Error, Result, User};

/// The longest title, record id and collection name accepted, in characters.
const MAX_NAME: usize = 255;
/// Up to how many notes a date range is read through its own index (then sorted by id); a
/// wider one is checked while walking the ids newest first instead. Counting the range costs up
/// to this many index entries (on PostgreSQL, each a heap visit where the visibility map is not
/// set), and reading a narrow range costs one row per note in it, so this bounds both; walking
/// a wide range stops after `limit` matches.
const NARROW: i64 = 2_000;
/// The largest message accepted, in bytes of HTML before sanitising.
pub const MAX_CONTENT: usize = 64 * 1024;

/// A note with its thread, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub id: i64,
    pub environment: String,
    /// The team's current name, or its name when the note was written if it was removed since.
    pub team_name: String,
    /// `None` on notes whose collection is unknown (the platform's notes of deleted collections).
    pub collection_name: Option<String>,
    pub record_id: String,
    pub title: String,
    pub author: NoteUser,
    pub created_at: i64,
    pub updated_at: i64,
    pub archived_at: Option<i64>,
    /// Oldest first.
    pub messages: Vec<NoteMessage>,
}

/// The author of a note or message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteUser {
    pub id: i64,
    pub email: String,
    pub username: String,
}

/// One message of a note's thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteMessage {
    pub author: NoteUser,
    /// Sanitised HTML.
    pub content_html: String,
    pub content_text: String,
    pub created_at: i64,
}

/// A note to create; its first message is `content`.
#[derive(Debug, Clone, Default)]
pub struct NewNote {
    pub collection_name: String,
    pub record_id: String,
    pub title: String,
    /// HTML as the client sent it; sanitised here.
    pub content: String,
    /// The author's first team when `None`.
    pub team_name: Option<String>,
}

/// A change to a note; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct NoteChange {
    pub title: Option<String>,
    /// `true` archives (keeping the first archive date), `false` unarchives.
    pub archived: Option<bool>,
}

/// The filters of the notes listing, combined with AND.
#[derive(Debug, Clone, Default)]
pub struct NoteFilter {
    pub user_id: Option<i64>,
    /// Resolved to a user id; an unknown email matches nothing.
    pub user_email: Option<String>,
    /// Resolved to a team id; an unknown team matches nothing.
    pub team_name: Option<String>,
    pub collection_name: Option<String>,
    pub record_id: Option<String>,
    pub created_at: DateRange,
    pub updated_at: DateRange,
    pub archived_at: DateRange,
}

/// What a write leaves for the activity log: which note of which record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteRef {
    pub id: i64,
    pub collection_name: Option<String>,
    pub record_id: String,
}

impl Note {
    pub fn reference(&self) -> NoteRef {
        NoteRef {
            id: self.id,
            collection_name: self.collection_name.clone(),
            record_id: self.record_id.clone(),
        }
    }
}

const NOTE_COLUMNS: &str = "n.id, n.environment, n.team_name, t.name AS current_team, \
     n.collection_name, n.record_id, n.title, n.created_by, n.created_by_email, \
     n.created_by_username, u.email AS current_email, u.first_name, u.last_name, \
     n.created_at, n.updated_at, n.archived_at";

const NOTE_FROM: &str = "notes n LEFT JOIN users u ON u.id = n.created_by \
     LEFT JOIN teams t ON t.id = n.team_id";

impl Store {
    /// Notes of this environment matching `filter`, newest (highest id) first, at most `limit`,
    /// each with its thread.
    pub async fn notes(&self, filter: &NoteFilter, limit: i64) -> Result<Vec<Note>> {
        let mut args = Args::default();
        let project = args.text(self.project());
        let environment = args.text(self.environment());
        let mut conditions = vec![
            format!("n.project = {project}"),
            format!("n.environment = {environment}"),
            "n.deleted_at IS NULL".to_owned(),
        ];
        if let Some(id) = filter.user_id {
            conditions.push(format!("n.created_by = {}", args.int(id)));
        }
        if let Some(email) = &filter.user_email {
            match self.user_by_email(email).await? {
                Some(user) => conditions.push(format!("n.created_by = {}", args.int(user.id))),
                None => return Ok(Vec::new()),
            }
        }
        if let Some(name) = &filter.team_name {
            match self.team_by_name(name).await? {
                Some(team) => conditions.push(format!("n.team_id = {}", args.int(team.id))),
                None => return Ok(Vec::new()),
            }
        }
        if let Some(collection) = &filter.collection_name {
            conditions.push(format!("n.collection_name = {}", args.text(collection)));
        }
        if let Some(record) = &filter.record_id {
            conditions.push(format!("n.record_id = {}", args.text(record)));
        }
        conditions.extend(created_bounds(
            &filter.created_at,
            &project,
            &environment,
            &mut args,
        ));
        // `+` keeps the planner on the id bounds above rather than sorting a created_at range.
        conditions.extend(filter.created_at.conditions("+n.created_at", &mut args));
        // The update and archive date ranges: counted first on their own index. When one holds
        // few notes, the list reads it (and sorts those few); otherwise it walks the ids newest
        // first, from the id bound that an upper date implies, checking each note.
        let mut narrowest: Option<(i64, &str)> = None;
        let mut ranges = Vec::new();
        for (column, index, range) in [
            ("updated_at", "notes_updated", &filter.updated_at),
            ("archived_at", "notes_archived", &filter.archived_at),
        ] {
            if range.is_empty() {
                continue;
            }
            let count = self.range_count(column, range).await?;
            if count <= NARROW && narrowest.is_none_or(|(least, _)| count < least) {
                narrowest = Some((count, index));
            }
            ranges.push((column, range));
        }
        if !filter.archived_at.is_empty() {
            conditions.push("n.archived_at IS NOT NULL".to_owned());
        }
        for (column, range) in ranges {
            if narrowest.is_some() {
                conditions.extend(range.conditions(&format!("n.{column}"), &mut args));
                continue;
            }
            // A note is updated and archived at or after its creation, so an upper bound on
            // those dates is one on the creation date, hence on the id.
            for bound in [
                DateRange {
                    lt: range.lt,
                    lte: range.lte,
                    ..DateRange::default()
                },
                DateRange {
                    lte: range.eq,
                    ..DateRange::default()
                },
            ] {
                conditions.extend(created_bounds(&bound, &project, &environment, &mut args));
            }
            // `+` keeps the planner off the column's index: a wide range read through it would
            // sort most of the table to return 100 rows.
            conditions.extend(range.conditions(&format!("+n.{column}"), &mut args));
        }
        // SQLite plans without statistics (nobody runs ANALYZE on the store) and would rather
        // walk the ids than sort a range it cannot size: it is told. A wide archive range walks
        // the archived notes only (5% of the notes in the benchmark, so 20 times fewer rows
        // checked), unless a filter with an index of its own narrows the walk already.
        // PostgreSQL has statistics and picks the same indexes by itself.
        let keyed = filter.user_id.is_some()
            || filter.user_email.is_some()
            || filter.team_name.is_some()
            || filter.collection_name.is_some()
            || filter.record_id.is_some();
        let forced = match narrowest {
            Some((_, index)) => Some(index),
            None if !filter.archived_at.is_empty() && !keyed => Some("notes_archived_ids"),
            None => None,
        };
        let from = match forced {
            Some(index) if self.dialect() == Dialect::Sqlite => {
                NOTE_FROM.replacen("notes n", &format!("notes n INDEXED BY {index}"), 1)
            }
            _ => NOTE_FROM.to_owned(),
        };
        let sql = format!(
            "SELECT {NOTE_COLUMNS} FROM {from} WHERE {} ORDER BY n.id DESC LIMIT {}",
            conditions.join(" AND "),
            args.int(limit.max(0)),
        );
        // A narrow range is planned with its values (an unnamed statement on PostgreSQL): the
        // generic plan of a prepared statement cannot size `updated_at > $1` and walks the whole
        // id index for a range of a few notes (340 ms over a million notes instead of 1 ms).
        // Walks have one good plan whatever the values, so they keep their prepared statement.
        let persistent = narrowest.is_none() || self.dialect() == Dialect::Sqlite;
        let rows = args
            .bind(sqlx::query(&sql).persistent(persistent))
            .fetch_all(self.pool())
            .await?;
        let mut notes = rows.iter().map(note_from_row).collect::<Result<Vec<_>>>()?;
        self.attach_messages(&mut notes).await?;
        Ok(notes)
    }

    /// How many live notes have `column` in `range`, counted on the column's index up to
    /// `NARROW + 1` (the cost of the count is bounded too). The `ORDER BY` on the column keeps
    /// PostgreSQL on its index: without it, a sequential scan that stops at the limit looks as
    /// cheap, and reads the whole table when the range is small (100 ms over a million notes).
    async fn range_count(&self, column: &str, range: &DateRange) -> Result<i64> {
        let mut args = Args::default();
        let project = args.text(self.project());
        let environment = args.text(self.environment());
        let mut conditions = vec![
            format!("n.project = {project}"),
            format!("n.environment = {environment}"),
            "n.deleted_at IS NULL".to_owned(),
            format!("n.{column} IS NOT NULL"),
        ];
        conditions.extend(range.conditions(&format!("n.{column}"), &mut args));
        let sql = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM notes n WHERE {} ORDER BY n.{column} \
             LIMIT {}) probe",
            conditions.join(" AND "),
            NARROW + 1
        );
        Ok(args
            .bind(sqlx::query(&sql))
            .fetch_one(self.pool())
            .await?
            .try_get(0)?)
    }

    /// One note of this environment, unless deleted.
    pub async fn note(&self, id: i64) -> Result<Option<Note>> {
        let row = sqlx::query(&format!(
            "SELECT {NOTE_COLUMNS} FROM {NOTE_FROM} \
             WHERE n.project = $1 AND n.environment = $2 AND n.id = $3 AND n.deleted_at IS NULL"
        ))
        .bind(self.project())
        .bind(self.environment())
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut notes = vec![note_from_row(&row)?];
        self.attach_messages(&mut notes).await?;
        Ok(notes.pop())
    }

    /// Creates a note on a record with `content` as its first message, in `new.team_name` or the
    /// author's first team.
    pub async fn create_note(&self, author: &User, new: NewNote) -> Result<Note> {
        let title = checked_name("title", &new.title)?;
        let record_id = checked_name("recordId", &new.record_id)?;
        let collection = checked_name("collectionName", &new.collection_name)?;
        let (html, text) = sanitize(&new.content)?;
        let team = match &new.team_name {
            Some(name) => self
                .team_by_name(name)
                .await?
                .ok_or_else(|| Error::Invalid(format!("teamName: no team is named {name:?}")))?,
            None => author.teams.first().cloned().ok_or_else(|| {
                Error::Invalid(
                    "teamName: the author belongs to no team, so the note needs one".to_owned(),
                )
            })?,
        };
        let username = author.full_name();
        let mut tx = self.pool().begin().await?;
        // Taken first: on PostgreSQL the clock row stays locked until commit, so concurrent
        // writers of one environment get their ids and times in the same order.
        let created_at: i64 = sqlx::query(
            "INSERT INTO notes_clock (project, environment, last_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (project, environment) DO UPDATE SET last_ms = CASE \
             WHEN excluded.last_ms > notes_clock.last_ms THEN excluded.last_ms \
             ELSE notes_clock.last_ms + 1 END \
             RETURNING last_ms",
        )
        .bind(self.project())
        .bind(self.environment())
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        let id: i64 = sqlx::query(
            "INSERT INTO notes (project, environment, team_id, team_name, collection_name, \
             record_id, title, created_by, created_by_email, created_by_username, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING id",
        )
        .bind(self.project())
        .bind(self.environment())
        .bind(team.id)
        .bind(&team.name)
        .bind(collection)
        .bind(record_id)
        .bind(title)
        .bind(author.id)
        .bind(&author.email)
        .bind(&username)
        .bind(created_at)
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        insert_message(&mut tx, id, author, &html, &text, created_at).await?;
        tx.commit().await?;
        self.require_note(id).await
    }

    /// Adds a message to a note's thread and moves the note's `updated_at` (strictly: a message
    /// in the same millisecond as the last change still moves it by one).
    pub async fn add_note_message(&self, author: &User, id: i64, content: &str) -> Result<Note> {
        let (html, text) = sanitize(content)?;
        let mut tx = self.pool().begin().await?;
        let at = bump(&mut tx, self, id).await?;
        insert_message(&mut tx, id, author, &html, &text, at).await?;
        tx.commit().await?;
        self.require_note(id).await
    }

    /// Renames, archives or unarchives a note, moving its `updated_at`. Archiving an archived
    /// note keeps its first archive date.
    pub async fn update_note(&self, actor: &User, id: i64, change: NoteChange) -> Result<Note> {
        let mut args = Args::default();
        let project = args.text(self.project());
        let environment = args.text(self.environment());
        let note = args.int(id);
        let mut sets = Vec::new();
        if let Some(title) = &change.title {
            let title = checked_name("title", title)?;
            sets.push(format!("title = {}", args.text(title)));
        }
        match change.archived {
            Some(true) => sets.push(format!(
                // The archive date is the (just moved) update date: never before the creation
                // date, which the archivedAt filters rely on (see `notes`).
                "archived_at = COALESCE(archived_at, updated_at), \
                 archived_by = COALESCE(archived_by, {})",
                args.int(actor.id)
            )),
            Some(false) => sets.push("archived_at = NULL, archived_by = NULL".to_owned()),
            None => {}
        }
        if sets.is_empty() {
            return self.require_note(id).await;
        }
        let mut tx = self.pool().begin().await?;
        bump(&mut tx, self, id).await?;
        let sql = format!(
            "UPDATE notes SET {} WHERE project = {project} AND environment = {environment} \
             AND id = {note}",
            sets.join(", ")
        );
        args.bind(sqlx::query(&sql)).execute(&mut *tx).await?;
        tx.commit().await?;
        self.require_note(id).await
    }

    /// Soft-deletes a note: it is gone from the API (404) but kept in the store.
    pub async fn delete_note(&self, id: i64) -> Result<NoteRef> {
        let row = sqlx::query(
            "UPDATE notes SET deleted_at = $4 \
             WHERE project = $1 AND environment = $2 AND id = $3 AND deleted_at IS NULL \
             RETURNING collection_name, record_id",
        )
        .bind(self.project())
        .bind(self.environment())
        .bind(id)
        .bind(now_ms())
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| Error::NotFound(format!("note {id}")))?;
        Ok(NoteRef {
            id,
            collection_name: row.try_get(0)?,
            record_id: row.try_get(1)?,
        })
    }

    async fn require_note(&self, id: i64) -> Result<Note> {
        self.note(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("note {id}")))
    }

    /// Loads the threads of `notes` in one query, oldest message first.
    async fn attach_messages(&self, notes: &mut [Note]) -> Result<()> {
        if notes.is_empty() {
            return Ok(());
        }
        let mut args = Args::default();
        let ids: Vec<String> = notes.iter().map(|n| args.int(n.id)).collect();
        let sql = format!(
            "SELECT m.note_id, m.author_id, m.author_email, m.author_username, \
             u.email AS current_email, u.first_name, u.last_name, m.content_html, m.content_text, \
             m.created_at FROM note_messages m LEFT JOIN users u ON u.id = m.author_id \
             WHERE m.note_id IN ({}) ORDER BY m.note_id, m.created_at, m.id",
            ids.join(", ")
        );
        let rows = args.bind(sqlx::query(&sql)).fetch_all(self.pool()).await?;
        let mut threads: HashMap<i64, Vec<NoteMessage>> = HashMap::new();
        for row in &rows {
            let note_id: i64 = row.try_get("note_id")?;
            threads.entry(note_id).or_default().push(NoteMessage {
                author: user_from_row(row, "author_id", "author_email", "author_username")?,
                content_html: row.try_get("content_html")?,
                content_text: row.try_get("content_text")?,
                created_at: row.try_get("created_at")?,
            });
        }
        for note in notes {
            note.messages = threads.remove(&note.id).unwrap_or_default();
        }
        Ok(())
    }
}

/// Moves a live note's `updated_at` to max(now, previous + 1) and returns it; `NotFound` when the
/// note does not exist or is deleted.
async fn bump(tx: &mut sqlx::Transaction<'_, sqlx::Any>, store: &Store, id: i64) -> Result<i64> {
    let row = sqlx::query(
        "UPDATE notes SET updated_at = CASE WHEN $4 > updated_at THEN $4 ELSE updated_at + 1 END \
         WHERE project = $1 AND environment = $2 AND id = $3 AND deleted_at IS NULL \
         RETURNING updated_at",
    )
    .bind(store.project())
    .bind(store.environment())
    .bind(id)
    .bind(now_ms())
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| Error::NotFound(format!("note {id}")))?;
    Ok(row.try_get(0)?)
}

async fn insert_message(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    note_id: i64,
    author: &User,
    html: &str,
    text: &str,
    at: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO note_messages (note_id, author_id, author_email, author_username, \
         content_html, content_text, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(note_id)
    .bind(author.id)
    .bind(&author.email)
    .bind(author.full_name())
    .bind(html)
    .bind(text)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The `createdAt` bounds as bounds on `id`: because `created_at` strictly increases with `id`
/// in an environment, "created before T" is "id below the first note created at or after T".
/// Each bound is one uncorrelated subquery on `notes_created`, evaluated once, and the list then
/// walks whichever id-ordered index its other filters pick. (The plain `created_at` conditions
/// are kept beside these, so the answer stays exact even on rows that broke the order.)
fn created_bounds(range: &DateRange, project: &str, env: &str, args: &mut Args) -> Vec<String> {
    let first_from = |args: &mut Args, op: &str, ms: i64| {
        format!(
            "(SELECT c.id FROM notes c WHERE c.project = {project} AND c.environment = {env} \
             AND c.created_at {op} {} ORDER BY c.created_at LIMIT 1)",
            args.int(ms)
        )
    };
    let last_until = |args: &mut Args, op: &str, ms: i64| {
        format!(
            "(SELECT c.id FROM notes c WHERE c.project = {project} AND c.environment = {env} \
             AND c.created_at {op} {} ORDER BY c.created_at DESC LIMIT 1)",
            args.int(ms)
        )
    };
    let mut out = Vec::new();
    if let Some(ms) = range.eq {
        out.push(format!("n.id = {}", first_from(args, "=", ms)));
    }
    if let Some(ms) = range.lt {
        out.push(format!(
            "n.id < COALESCE({}, {})",
            first_from(args, ">=", ms),
            i64::MAX
        ));
    }
    if let Some(ms) = range.lte {
        out.push(format!(
            "n.id < COALESCE({}, {})",
            first_from(args, ">", ms),
            i64::MAX
        ));
    }
    if let Some(ms) = range.gt {
        out.push(format!(
            "n.id > COALESCE({}, 0)",
            last_until(args, "<=", ms)
        ));
    }
    if let Some(ms) = range.gte {
        out.push(format!("n.id > COALESCE({}, 0)", last_until(args, "<", ms)));
    }
    out
}

fn note_from_row(row: &AnyRow) -> Result<Note> {
    let team_name: String = row.try_get("team_name")?;
    let current_team: Option<String> = row.try_get("current_team")?;
    Ok(Note {
        id: row.try_get("id")?,
        environment: row.try_get("environment")?,
        team_name: current_team.unwrap_or(team_name),
        collection_name: row.try_get("collection_name")?,
        record_id: row.try_get("record_id")?,
        title: row.try_get("title")?,
        author: user_from_row(row, "created_by", "created_by_email", "created_by_username")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        archived_at: row.try_get("archived_at")?,
        messages: Vec::new(),
    })
}

/// The author of a row: the user's current email and name when they still exist, the written
/// ones otherwise.
fn user_from_row(row: &AnyRow, id: &str, email: &str, username: &str) -> Result<NoteUser> {
    let current_email: Option<String> = row.try_get("current_email")?;
    Ok(match current_email {
        Some(current_email) => {
            let first: String = row
                .try_get::<Option<String>, _>("first_name")?
                .unwrap_or_default();
            let last: String = row
                .try_get::<Option<String>, _>("last_name")?
                .unwrap_or_default();
            NoteUser {
                id: row.try_get(id)?,
                email: current_email,
                username: format!("{first} {last}").trim().to_owned(),
            }
        }
        None => NoteUser {
            id: row.try_get(id)?,
            email: row.try_get(email)?,
            username: row.try_get(username)?,
        },
    })
}

/// A required short string: trimmed, not empty, at most `MAX_NAME` characters.
fn checked_name<'a>(field: &str, value: &'a str) -> Result<&'a str> {
    let value = value.trim();
    if value.is_empty() {
        return Err(Error::Invalid(format!("{field}: must not be empty")));
    }
    if value.chars().count() > MAX_NAME {
        return Err(Error::Invalid(format!(
            "{field}: must be at most {MAX_NAME} characters"
        )));
    }
    Ok(value)
}

/// The allowlist of message HTML: text formatting, lists, quotes, code and links. Everything
/// else is dropped; the content of `script`, `style` and other non-text elements goes with
/// their tags. Links keep only `href` with http, https or mailto (relative URLs are dropped:
/// a note is read in other origins than the one that wrote it) and get
/// `rel="noopener noreferrer"`.
static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::empty();
    builder
        .tags(HashSet::from([
            "p",
            "br",
            "strong",
            "b",
            "em",
            "i",
            "u",
            "s",
            "ul",
            "ol",
            "li",
            "a",
            "code",
            "pre",
            "blockquote",
        ]))
        .clean_content_tags(HashSet::from([
            "script", "style", "svg", "math", "iframe", "object", "embed", "noscript", "template",
            "textarea", "title", "select",
        ]))
        .generic_attributes(HashSet::new())
        .tag_attributes(HashMap::from([("a", HashSet::from(["href"]))]))
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer"))
        .strip_comments(true);
    builder
});

/// Sanitised HTML and its plain text; a message with no text left is refused.
pub fn sanitize(html: &str) -> Result<(String, String)> {
    if html.len() > MAX_CONTENT {
        return Err(Error::Invalid(format!(
            "content: must be at most {MAX_CONTENT} bytes"
        )));
    }
    let clean = SANITIZER.clean(html).to_string();
    let text = plain_text(&clean);
    if text.trim().is_empty() {
        return Err(Error::Invalid(
            "content: no text is left once unsafe HTML is removed".to_owned(),
        ));
    }
    Ok((clean, text))
}

/// The text of sanitised HTML (well-formed, as ammonia serialises it): tags dropped, block ends
/// and `<br>` as line breaks, and the entities the serialiser writes decoded.
fn plain_text(clean: &str) -> String {
    let mut out = String::with_capacity(clean.len());
    let mut rest = clean;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('>')
            .map_or(rest.len(), |e| start + e + 1);
        let tag = &rest[start..end];
        let name: String = tag
            .trim_start_matches(['<', '/'])
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let closing = tag.starts_with("</");
        if name == "br" || (closing && matches!(name.as_str(), "p" | "li" | "blockquote" | "pre")) {
            out.push('\n');
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    let text = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    text.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_markup_stays_and_links_get_rel() {
        let (html, text) = sanitize(
            r#"<p>Hi <strong>Bo</strong> &amp; <a href="https://x.io/a?b=1&c=2">x</a></p>"#,
        )
        .unwrap();
        assert_eq!(
            html,
            r#"<p>Hi <strong>Bo</strong> &amp; <a href="https://x.io/a?b=1&amp;c=2" rel="noopener noreferrer">x</a></p>"#
        );
        assert_eq!(text, "Hi Bo & x");
    }

    #[test]
    fn text_keeps_line_breaks_and_decodes_entities() {
        let (_, text) =
            sanitize("<p>a &lt;b&gt;</p><ul><li>one</li><li>two</li></ul>x<br>y").unwrap();
        assert_eq!(text, "a <b>\none\ntwo\nx\ny");
    }

    #[test]
    fn empty_after_sanitising_is_refused() {
        for html in [
            "",
            "   ",
            "<script>alert(1)</script>",
            "<p> </p>",
            "<img src=x onerror=alert(1)>",
        ] {
            assert!(sanitize(html).is_err(), "{html}");
        }
    }
}
