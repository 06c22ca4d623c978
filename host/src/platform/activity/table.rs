//! The activity log in the store (migration 0015): writing batches of entries and the listing.
//!
//! An entry is one row of `activity_entries`, compact (under 200 bytes with its indexes, see
//! `benches/activity.rs`): names are interned in lookup tables (`activity_scopes`,
//! `activity_actors`, `activity_names`) through an [`Interner`] that caches their ids, the action,
//! status and origin are small integers, the entry and request ids 16-byte blobs. Entries are
//! numbered in write order (`seq`), and the listing's order is `(created_at, seq)`, newest first:
//! ties of one millisecond come out in write order, which is id order for the entries of one
//! process (a batch is written sorted by `(created_at, id)`, and ids are UUIDv7).
//!
//! Each filter of the listing is served by an index, or walks the newest-first index checking
//! each entry when that stops quickly (docs/architecture.md "Activity logs" has the table).

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use quick_cache::unsync::Cache;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Connection as _, Row as _};

use super::{Action, ActivityFilter, ActivityRow, Entry, Status};
use crate::platform::listing::Args;
use crate::platform::store::Dialect;
use crate::platform::{Error, Result, Store};

const ENTRY_COLUMNS: &str = "scope, created_at, id, action, status, actor, user_id, \
     collection, record_ids, label, origin, token, request_id";
const ENTRY_WIDTH: usize = 13;
const RECORD_COLUMNS: &str = "scope, record_id, created_at, seq";
const RECORD_WIDTH: usize = 4;
/// Rows per INSERT statement: a few fixed sizes, largest first, so that a batch of any length is
/// written with statements whose text never changes. Each is prepared once per connection and
/// then comes from sqlx's statement cache: before, every batch of a new length was parsed again,
/// and on SQLite a statement of 500 rows with `$n` placeholders took seconds to prepare (SQLite
/// looks each named placeholder up in a list, so parsing grows with the square of their count).
pub(super) const CHUNKS: [usize; 3] = [64, 8, 1];

/// The INSERT texts of one dialect, one per size of [`CHUNKS`].
struct InsertSql {
    entries: [String; CHUNKS.len()],
    records: [String; CHUNKS.len()],
}

impl InsertSql {
    fn of(dialect: Dialect) -> &'static Self {
        static SQLITE: OnceLock<InsertSql> = OnceLock::new();
        static POSTGRES: OnceLock<InsertSql> = OnceLock::new();
        let make = || Self {
            entries: CHUNKS.map(|rows| {
                format!(
                    "INSERT INTO activity_entries ({ENTRY_COLUMNS}) VALUES {} RETURNING seq, id",
                    placeholders(dialect, rows, ENTRY_WIDTH)
                )
            }),
            records: CHUNKS.map(|rows| {
                format!(
                    "INSERT INTO activity_records ({RECORD_COLUMNS}) VALUES {} \
                     ON CONFLICT DO NOTHING",
                    placeholders(dialect, rows, RECORD_WIDTH)
                )
            }),
        };
        match dialect {
            Dialect::Sqlite => SQLITE.get_or_init(make),
            Dialect::Postgres => POSTGRES.get_or_init(make),
        }
    }
}

/// `items` cut into runs of the [`CHUNKS`] sizes, largest first: `(index of the size, run)`.
/// A `Vec` rather than an iterator: it is held across the inserts' awaits, where an iterator's
/// closure would make the writer's future lose `Send`.
pub(super) fn fixed_chunks<T>(mut items: &[T]) -> Vec<(usize, &[T])> {
    let mut chunks = Vec::new();
    for (size, rows) in CHUNKS.iter().enumerate() {
        while items.len() >= *rows {
            let (chunk, rest) = items.split_at(*rows);
            chunks.push((size, chunk));
            items = rest;
        }
    }
    chunks
}

/// `rows` groups of `width` placeholders: `($1, $2, …), (…), …` on PostgreSQL, `(?, ?, …), …` on
/// SQLite, where an anonymous `?` is numbered by its position at no cost (SQLite treats `$1` as a
/// name, looked up in a list).
pub(super) fn placeholders(dialect: Dialect, rows: usize, width: usize) -> String {
    (0..rows)
        .map(|row| {
            let cells: Vec<String> = (1..=width)
                .map(|col| match dialect {
                    Dialect::Sqlite => "?".to_owned(),
                    Dialect::Postgres => format!("${}", row * width + col),
                })
                .collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// An entry id as stored: the 16 bytes of a UUID, else (ids are UUIDs unless a caller built
/// one by hand) the text's bytes.
pub(super) fn id_bytes(id: &str) -> Vec<u8> {
    uuid::Uuid::parse_str(id).map_or_else(|_| id.as_bytes().to_vec(), |u| u.as_bytes().to_vec())
}

/// The id served for stored bytes (the inverse of [`id_bytes`]).
pub(super) fn id_text(bytes: &[u8]) -> String {
    match uuid::Uuid::from_slice(bytes) {
        Ok(id) => id.to_string(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// Record ids as stored: one id as itself (most entries name one record), several, or one that
/// starts with `[`, as a JSON array; none as NULL.
pub(super) fn pack_records(ids: &[String]) -> Option<String> {
    match ids {
        [] => None,
        [one] if !one.starts_with('[') => Some(one.clone()),
        many => serde_json::to_string(many).ok(),
    }
}

/// The record ids of a stored value (the inverse of [`pack_records`]).
pub(super) fn unpack_records(stored: Option<String>) -> Vec<String> {
    match stored {
        None => Vec::new(),
        Some(text) if text.starts_with('[') => serde_json::from_str(&text).unwrap_or_default(),
        Some(one) => vec![one],
    }
}

/// The ids of interned names, cached: a name once interned keeps its id (lookup rows are never
/// deleted), so a name in the cache costs no statement. Each cache is bounded, least recently
/// used first out: labels are free text, and one that names a note or carries an error message
/// is new each time. Unbounded, the cache grew with every such entry for the life of the
/// process (issue 25's soak: +18% RSS in 10 minutes of webhooks, when each run's last entry
/// named the run). A name pushed out is looked up again when it comes back.
pub(super) struct Interner {
    scopes: Cache<(String, String), i64>,
    actors: Cache<(i64, String, String, String), i64>,
    names: Cache<String, i64>,
}

/// Most names an [`Interner`] keeps: every collection, token and fixed label of a busy
/// environment, a few hundred KB at most.
pub(super) const INTERNED_NAMES: usize = 4096;
/// Most actors (user, email, name, team) it keeps.
const INTERNED_ACTORS: usize = 1024;
/// Most project and environment pairs it keeps.
const INTERNED_SCOPES: usize = 64;

impl Default for Interner {
    fn default() -> Self {
        Self {
            scopes: Cache::new(INTERNED_SCOPES),
            actors: Cache::new(INTERNED_ACTORS),
            names: Cache::new(INTERNED_NAMES),
        }
    }
}

impl Interner {
    /// How many names are cached now.
    #[cfg(test)]
    pub(super) fn names_cached(&self) -> usize {
        self.names.len()
    }
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interner")
            .field("scopes", &self.scopes.len())
            .field("actors", &self.actors.len())
            .field("names", &self.names.len())
            .finish()
    }
}

impl Interner {
    async fn scope(
        &mut self,
        connection: &mut AnyConnection,
        project: &str,
        environment: &str,
    ) -> Result<i64> {
        let key = (project.to_owned(), environment.to_owned());
        if let Some(id) = self.scopes.get(&key) {
            return Ok(*id);
        }
        sqlx::query(
            "INSERT INTO activity_scopes (project, environment) VALUES ($1, $2) \
             ON CONFLICT DO NOTHING",
        )
        .bind(project)
        .bind(environment)
        .execute(&mut *connection)
        .await?;
        let id: i64 = sqlx::query_scalar(
            "SELECT CAST(id AS BIGINT) FROM activity_scopes WHERE project = $1 AND environment = $2",
        )
        .bind(project)
        .bind(environment)
        .fetch_one(&mut *connection)
        .await?;
        self.scopes.insert(key, id);
        Ok(id)
    }

    async fn actor(&mut self, connection: &mut AnyConnection, entry: &Entry) -> Result<i64> {
        let user = &entry.user;
        let key = (
            user.id,
            user.email.clone(),
            user.username.clone(),
            user.team.clone(),
        );
        if let Some(id) = self.actors.get(&key) {
            return Ok(*id);
        }
        sqlx::query(
            "INSERT INTO activity_actors (user_id, email, username, team_name) \
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(user.id)
        .bind(user.email.as_str())
        .bind(user.username.as_str())
        .bind(user.team.as_str())
        .execute(&mut *connection)
        .await?;
        let id: i64 = sqlx::query_scalar(
            "SELECT CAST(id AS BIGINT) FROM activity_actors \
             WHERE user_id = $1 AND email = $2 AND username = $3 AND team_name = $4",
        )
        .bind(user.id)
        .bind(user.email.as_str())
        .bind(user.username.as_str())
        .bind(user.team.as_str())
        .fetch_one(&mut *connection)
        .await?;
        self.actors.insert(key, id);
        Ok(id)
    }

    async fn name(
        &mut self,
        connection: &mut AnyConnection,
        name: Option<&str>,
    ) -> Result<Option<i64>> {
        let Some(name) = name else { return Ok(None) };
        if let Some(id) = self.names.get(name) {
            return Ok(Some(*id));
        }
        sqlx::query("INSERT INTO activity_names (name) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(name)
            .execute(&mut *connection)
            .await?;
        let id: i64 =
            sqlx::query_scalar("SELECT CAST(id AS BIGINT) FROM activity_names WHERE name = $1")
                .bind(name)
                .fetch_one(&mut *connection)
                .await?;
        self.names.insert(name.to_owned(), id);
        Ok(Some(id))
    }
}

/// An entry with its interned ids, ready to insert.
struct Prepared<'a> {
    entry: &'a Entry,
    scope: i64,
    actor: i64,
    collection: Option<i64>,
    label: Option<i64>,
    token: Option<i64>,
    id: Vec<u8>,
    request_id: Option<Vec<u8>>,
    record_ids: Option<String>,
}

impl Store {
    /// Writes `entries` in one transaction (the logger's batches; tests may call it directly).
    pub async fn insert_activity(&self, entries: &[Entry]) -> Result<()> {
        let mut connection = self.pool().acquire().await?;
        self.insert_activity_on(&mut connection, &mut Interner::default(), entries)
            .await
    }

    /// [`Store::insert_activity`] on a connection of the caller's (the logger's own), with its
    /// cache of interned names.
    pub(super) async fn insert_activity_on(
        &self,
        connection: &mut AnyConnection,
        interner: &mut Interner,
        entries: &[Entry],
    ) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        // Names are interned before the transaction, each in its own statement: the lookup
        // rows are shared by every writer, and a lock on them must not last a batch.
        let mut rows = Vec::with_capacity(entries.len());
        for entry in entries {
            let environment = entry.environment.as_deref().unwrap_or(self.environment());
            rows.push(Prepared {
                entry,
                scope: interner
                    .scope(connection, self.project(), environment)
                    .await?,
                actor: interner.actor(connection, entry).await?,
                collection: interner
                    .name(connection, entry.collection.as_deref())
                    .await?,
                label: interner.name(connection, entry.label.as_deref()).await?,
                token: interner.name(connection, entry.token_id.as_deref()).await?,
                id: id_bytes(&entry.id),
                request_id: entry
                    .request_id
                    .as_deref()
                    .and_then(|id| uuid::Uuid::parse_str(id).ok())
                    .map(|id| id.as_bytes().to_vec()),
                record_ids: pack_records(&entry.record_ids),
            });
        }
        // Written in the listing's order, so that `seq` breaks ties of a millisecond by id.
        rows.sort_by(|a, b| {
            (a.entry.created_at, &a.entry.id).cmp(&(b.entry.created_at, &b.entry.id))
        });
        let sql = InsertSql::of(self.dialect());
        let mut seqs: HashMap<Vec<u8>, i64> = HashMap::with_capacity(rows.len());
        let mut tx = connection.begin().await?;
        for (size, chunk) in fixed_chunks(&rows) {
            let mut query = sqlx::query(&sql.entries[size]);
            for row in chunk {
                let e = row.entry;
                query = query
                    .bind(row.scope)
                    .bind(e.created_at)
                    .bind(row.id.as_slice())
                    .bind(e.action.code())
                    .bind(e.status.code())
                    .bind(row.actor)
                    .bind(e.user.id)
                    .bind(row.collection)
                    .bind(row.record_ids.as_deref())
                    .bind(row.label)
                    .bind(e.origin.code())
                    .bind(row.token)
                    .bind(row.request_id.as_deref());
            }
            for written in query.fetch_all(&mut *tx).await? {
                let seq: i64 = written.try_get(0)?;
                let id: Vec<u8> = written.try_get(1)?;
                seqs.insert(id, seq);
            }
        }
        let records: Vec<(&Prepared, i64, &String)> = rows
            .iter()
            .filter_map(|row| seqs.get(&row.id).map(|seq| (row, *seq)))
            .flat_map(|(row, seq)| {
                // Unique per entry: the key of the side table.
                let unique: BTreeSet<&String> = row.entry.record_ids.iter().collect();
                unique.into_iter().map(move |id| (row, seq, id))
            })
            .collect();
        for (size, chunk) in fixed_chunks(&records) {
            let mut query = sqlx::query(&sql.records[size]);
            for (row, seq, record_id) in chunk {
                query = query
                    .bind(row.scope)
                    .bind(record_id.as_str())
                    .bind(row.entry.created_at)
                    .bind(*seq);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The id of this store's project and environment in `activity_scopes`, if it has entries.
    pub(super) async fn activity_scope(&self) -> Result<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT CAST(id AS BIGINT) FROM activity_scopes \
             WHERE project = $1 AND environment = $2",
        )
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?)
    }

    /// The environment's completed activity entries matching `filter`, newest first (then in
    /// write order, descending), at most `filter.limit`. An unknown `starting_after` id is
    /// `Invalid`.
    pub async fn activity_logs(&self, filter: &ActivityFilter) -> Result<Vec<ActivityRow>> {
        let Some((sql, args)) = self.activity_query(filter).await? else {
            return Ok(Vec::new());
        };
        let rows = args.bind(sqlx::query(&sql)).fetch_all(self.pool()).await?;
        rows.iter()
            .map(|row| activity_row(row, self.environment()))
            .collect()
    }

    /// How the database runs the listing of `filter`: SQLite's `EXPLAIN QUERY PLAN` or
    /// PostgreSQL's `EXPLAIN`, one line per step (the benchmark prints them, a test checks that
    /// no filter scans the table). Empty when the answer needs no query.
    pub async fn explain_activity_logs(&self, filter: &ActivityFilter) -> Result<Vec<String>> {
        let Some((sql, args)) = self.activity_query(filter).await? else {
            return Ok(Vec::new());
        };
        let (explain, column) = match self.dialect() {
            Dialect::Sqlite => ("EXPLAIN QUERY PLAN", 3),
            Dialect::Postgres => ("EXPLAIN", 0),
        };
        let sql = format!("{explain} {sql}");
        let rows = args.bind(sqlx::query(&sql)).fetch_all(self.pool()).await?;
        rows.iter()
            .map(|row| row.try_get::<String, _>(column).map_err(Error::from))
            .collect()
    }

    /// The listing's SQL and arguments, or `None` when nothing can match (an unknown user,
    /// collection or environment).
    async fn activity_query(&self, filter: &ActivityFilter) -> Result<Option<(String, Args)>> {
        let scope = self.activity_scope().await?;
        // The cursor first: an unknown one is an error even where nothing else would match.
        let after = match &filter.starting_after {
            None => None,
            Some(after) => {
                let found: Option<(i64, i64)> = match scope {
                    None => None,
                    Some(scope) => sqlx::query_as(
                        "SELECT created_at, seq FROM activity_entries \
                         WHERE id = $1 AND scope = $2",
                    )
                    .bind(id_bytes(after))
                    .bind(scope)
                    .fetch_optional(self.pool())
                    .await?
                    .map(|row: (i64, i64)| row),
                };
                Some(found.ok_or_else(|| {
                    Error::Invalid(format!(
                        "startingAfter: no activity log entry has the id {after:?}"
                    ))
                })?)
            }
        };
        let Some(scope) = scope else {
            return Ok(None);
        };
        let mut args = Args::default();
        // With `recordId`, the walk is on the side table (`r`), newest first within the record;
        // otherwise on the entries (`e`). Dates and the cursor bound the walked index.
        let walked = if filter.record_id.is_some() { "r" } else { "e" };
        let mut conditions = vec![
            format!("{walked}.scope = {}", args.int(scope)),
            format!("e.status = {}", Status::Completed.code()),
        ];
        if filter.user_email.is_some() || filter.user_id.is_some() || filter.team_name.is_some() {
            // The actors (a user with the email, name and team they acted with) that match.
            let actors = self.activity_actors(filter).await?;
            let mut users: Vec<i64> = actors.iter().map(|(_, user)| *user).collect();
            users.sort_unstable();
            users.dedup();
            match users.as_slice() {
                [] => return Ok(None),
                // One user: the user index, newest first; the actors pick among their entries
                // (another team, an old email) unless `userId` alone was given.
                [user] => conditions.push(format!("e.user_id = {}", args.int(*user))),
                // Several users (a team): the newest-first walk, checking each entry's actor.
                _ => {}
            }
            let only_the_user = filter.user_email.is_none() && filter.team_name.is_none();
            if !only_the_user {
                let list: Vec<String> = actors.iter().map(|(id, _)| args.int(*id)).collect();
                conditions.push(format!("e.actor IN ({})", list.join(", ")));
            }
        }
        if let Some(collection) = &filter.collection_name {
            let id: Option<i64> =
                sqlx::query_scalar("SELECT CAST(id AS BIGINT) FROM activity_names WHERE name = $1")
                    .bind(collection.as_str())
                    .fetch_optional(self.pool())
                    .await?;
            let Some(id) = id else { return Ok(None) };
            conditions.push(format!("e.collection = {}", args.int(id)));
        }
        if let Some(action) = filter.action {
            conditions.push(format!("e.action = {}", args.int(action.code())));
        }
        if let Some(kind) = filter.kind {
            // Trusted integers, from the enum. Checked on each entry of the newest-first walk
            // (both types are common): the unary `+` keeps the planner off the action index,
            // whose ranges it would read whole and sort.
            let codes: Vec<String> = Action::ALL
                .iter()
                .filter(|a| a.kind() == kind)
                .map(|a| a.code().to_string())
                .collect();
            conditions.push(format!("+e.action IN ({})", codes.join(", ")));
        }
        let created_at = format!("{walked}.created_at");
        conditions.extend(filter.created_at.conditions(&created_at, &mut args));
        if let Some((at, seq)) = after {
            // A row value: both databases seek the index to it (PostgreSQL would read an `OR`
            // of the two cases as a filter, walking every newer entry first).
            let (at, seq) = (args.int(at), args.int(seq));
            conditions.push(format!(
                "({walked}.created_at, {walked}.seq) < ({at}, {seq})"
            ));
        }
        let from = match &filter.record_id {
            Some(record) => {
                conditions.push(format!("r.record_id = {}", args.text(record.as_str())));
                conditions.push(
                    "e.seq = r.seq AND e.scope = r.scope AND e.created_at = r.created_at"
                        .to_owned(),
                );
                // `CROSS JOIN`: SQLite then walks the record's rows first, in the listing's
                // order, rather than another filter's index probing each record row.
                "activity_records r CROSS JOIN activity_entries e"
            }
            None => "activity_entries e",
        };
        let sql = format!(
            "SELECT k.id, k.created_at, k.action, l.name, p.user_id, p.email, p.username, \
             p.team_name, c.name, k.record_ids, k.origin \
             FROM (SELECT e.id, e.created_at, e.seq, e.action, e.label, e.actor, e.collection, \
                   e.record_ids, e.origin FROM {from} WHERE {} \
                   ORDER BY {walked}.created_at DESC, {walked}.seq DESC LIMIT {}) k \
             JOIN activity_actors p ON p.id = k.actor \
             LEFT JOIN activity_names c ON c.id = k.collection \
             LEFT JOIN activity_names l ON l.id = k.label \
             ORDER BY k.created_at DESC, k.seq DESC",
            conditions.join(" AND "),
            args.int(filter.limit)
        );
        Ok(Some((sql, args)))
    }

    /// The actors (a user as they acted: id, email, name, team) the user filters name, with
    /// their user ids.
    async fn activity_actors(&self, filter: &ActivityFilter) -> Result<Vec<(i64, i64)>> {
        let mut args = Args::default();
        let mut conditions = Vec::new();
        if let Some(email) = &filter.user_email {
            conditions.push(format!("email = {}", args.text(email.as_str())));
        }
        if let Some(id) = filter.user_id {
            conditions.push(format!("user_id = {}", args.int(id)));
        }
        if let Some(team) = &filter.team_name {
            conditions.push(format!("team_name = {}", args.text(team.as_str())));
        }
        let sql = format!(
            "SELECT CAST(id AS BIGINT), user_id FROM activity_actors WHERE {} ORDER BY id",
            conditions.join(" AND ")
        );
        let rows = args.bind(sqlx::query(&sql)).fetch_all(self.pool()).await?;
        rows.iter()
            .map(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?)))
            .collect()
    }
}

fn activity_row(r: &AnyRow, environment: &str) -> Result<ActivityRow> {
    let id: Vec<u8> = r.try_get(0)?;
    let code: i64 = r.try_get(2)?;
    let action = Action::from_code(code)
        .ok_or_else(|| Error::Invalid(format!("unknown stored activity action {code}")))?;
    let origin: i64 = r.try_get(10)?;
    Ok(ActivityRow {
        id: id_text(&id),
        created_at: r.try_get(1)?,
        environment: environment.to_owned(),
        kind: action.kind().as_str().to_owned(),
        action: action.as_str().to_owned(),
        label: r.try_get(3)?,
        user_id: r.try_get(4)?,
        user_email: r.try_get(5)?,
        username: r.try_get(6)?,
        team_name: r.try_get(7)?,
        collection_name: r.try_get(8)?,
        record_ids: unpack_records(r.try_get(9)?),
        origin: super::Origin::from_code(origin)
            .map(|o| o.as_str().to_owned())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_record_ids_round_trip_through_their_stored_forms() {
        let id = uuid::Uuid::now_v7().to_string();
        assert_eq!(id_bytes(&id).len(), 16);
        assert_eq!(id_text(&id_bytes(&id)), id);
        assert_eq!(id_text(&id_bytes("not-a-uuid")), "not-a-uuid");
        for ids in [
            vec![],
            vec!["1".to_owned()],
            vec!["1|2".to_owned()],
            vec!["[1]".to_owned()],
            vec!["1".to_owned(), "2".to_owned()],
            vec![String::new()],
        ] {
            assert_eq!(unpack_records(pack_records(&ids)), ids, "{ids:?}");
        }
        assert_eq!(pack_records(&["7".to_owned()]).as_deref(), Some("7"));
    }
}
