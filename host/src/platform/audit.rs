//! The audit trail's storage: the `canopy_audit_trail` table in Canopy's store (migration
//! `0008_audit_trail`), or in the SQLite, PostgreSQL or MariaDB/MySQL database named by
//! `auditTrail.databaseUrl` (created there when missing). It records what `customizer::audit`
//! sees (implementing its `AuditRecorder`) and answers the record-history routes
//! (`http::audit`): one record's history, filtered and paged, its entries under correlation ids,
//! and its state at a past instant (`revert`).
//!
//! One SQL text serves every dialect: `$n` placeholders (rewritten to `?` for MySQL), times as
//! BIGINT unix milliseconds, values as JSON text. Rows are scoped to the project and environment
//! of this instance, so several environments can share one audit database.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value as Json};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row as _};
use uuid::Uuid;

use super::listing::Args;
use super::store::Dialect;
use super::{Error, Result, Store};
use crate::customizer::audit::{AuditRecorder, Confirmation, PendingEntry};

/// The table, the same in every database.
pub const TABLE: &str = "canopy_audit_trail";

/// The table's DDL where no migration runs it (a named MariaDB/MySQL database); the SQLite and
/// PostgreSQL texts are the store's migration files.
const MYSQL_DDL: &str = "CREATE TABLE IF NOT EXISTS canopy_audit_trail (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    entry_key VARCHAR(36) NOT NULL UNIQUE,
    project VARCHAR(191) NOT NULL,
    environment VARCHAR(191) NOT NULL,
    created_at BIGINT NOT NULL,
    operation VARCHAR(16) NOT NULL,
    collection VARCHAR(191) NOT NULL,
    record_id VARCHAR(1024) NULL,
    user_id BIGINT NOT NULL,
    user_first_name TEXT NOT NULL,
    user_last_name TEXT NOT NULL,
    user_email TEXT NOT NULL,
    action_name TEXT NULL,
    correlation_key VARCHAR(64) NOT NULL,
    previous_values LONGTEXT NOT NULL,
    new_values LONGTEXT NOT NULL,
    changed_fields TEXT NOT NULL,
    status VARCHAR(16) NOT NULL,
    INDEX canopy_audit_trail_record (project(64), environment(64), collection(64), record_id(191), created_at),
    INDEX canopy_audit_trail_correlation (project(64), environment(64), correlation_key)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci";

/// Every column, in the order `record` reads them.
const COLUMNS: &str = "id, created_at, operation, collection, record_id, user_id, user_first_name, \
     user_last_name, user_email, action_name, correlation_key, previous_values, new_values, status";

/// Rows per `INSERT` of pending entries: far below every dialect's bind limit (14 binds each).
const INSERT_CHUNK: usize = 200;

/// The SQL dialect of the audit database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Db {
    Sqlite,
    Postgres,
    MySql,
}

/// Where the audit trail is kept, for one project and environment.
#[derive(Clone)]
pub struct AuditStore {
    pool: AnyPool,
    sql: Db,
    project: String,
    environment: String,
}

impl std::fmt::Debug for AuditStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditStore")
            .field("sql", &self.sql)
            .field("project", &self.project)
            .field("environment", &self.environment)
            .finish_non_exhaustive()
    }
}

/// One audit entry as the routes serve it (the agent's `AuditRecord`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    pub id: i64,
    /// ISO 8601 with milliseconds, UTC (`2024-03-01T10:00:00.000Z`).
    pub timestamp: String,
    #[serde(skip)]
    pub timestamp_ms: i64,
    /// `create`, `update`, `delete`, or `action` (an action ran on the record: `action_name`
    /// names it, `new_values` holds its form's values, files by name).
    pub operation: String,
    pub collection: String,
    pub record_id: Option<String>,
    pub user_id: i64,
    pub user_first_name: Option<String>,
    pub user_last_name: Option<String>,
    pub user_email: Option<String>,
    pub action_name: Option<String>,
    pub correlation_key: String,
    pub previous_values: Map<String, Json>,
    pub new_values: Map<String, Json>,
    /// `pending` (the change was attempted, never confirmed) or `done`.
    pub status: String,
}

/// An author of entries (`meta.availableUsers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditUser {
    pub id: i64,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<String>,
}

/// The filters of one record's history; all combine with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    pub collection: String,
    pub record_id: String,
    /// Authors; empty means any.
    pub user_ids: Vec<i64>,
    /// Inclusive bounds in unix milliseconds.
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// Entries whose change touched at least one of these columns; empty means any.
    pub fields: Vec<String>,
    /// Case-insensitive substring of the author's names and email, the action name, and the
    /// serialized before and after values (keys and values at any depth).
    pub search: Option<String>,
}

/// The order of a history page, on the entry's time (ties by insertion order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    OldestFirst,
    NewestFirst,
}

impl AuditStore {
    /// The trail in Canopy's own store (its migrations created the table).
    pub fn in_store(store: &Store) -> Self {
        Self {
            pool: store.pool().clone(),
            sql: match store.dialect() {
                Dialect::Sqlite => Db::Sqlite,
                Dialect::Postgres => Db::Postgres,
            },
            project: store.project().to_owned(),
            environment: store.environment().to_owned(),
        }
    }

    /// The trail in the database at `url` (`sqlite:`, `postgres:`, `mysql:` or `mariadb:`),
    /// whose table is created when missing; an existing table of that name that is not the
    /// trail's is refused rather than written into.
    pub async fn open(url: &str, project: &str, environment: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let redacted = || crate::datasource::sql::redact_url(url);
        let (sql, url) = if url.starts_with("sqlite:") {
            (Db::Sqlite, url.to_owned())
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            (Db::Postgres, url.to_owned())
        } else if let Some(rest) = url.strip_prefix("mariadb:") {
            (Db::MySql, format!("mysql:{rest}"))
        } else if url.starts_with("mysql:") {
            (Db::MySql, url.to_owned())
        } else {
            return Err(Error::Invalid(format!(
                "auditTrail.databaseUrl must start with sqlite:, postgres:, mysql: or mariadb:, \
                 not {:?}",
                redacted()
            )));
        };
        let pool = AnyPoolOptions::new()
            .max_connections(if sql == Db::Sqlite { 4 } else { 8 })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if sql == Db::Sqlite {
                        // One writer at a time: wait for it rather than failing with SQLITE_BUSY.
                        sqlx::query("PRAGMA busy_timeout = 5000")
                            .execute(&mut *conn)
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(|source| Error::Open {
                url: redacted(),
                source,
            })?;
        let ddl = match sql {
            Db::Sqlite => include_str!("../../migrations/sqlite/0008_audit_trail.sql"),
            Db::Postgres => include_str!("../../migrations/postgres/0008_audit_trail.sql"),
            Db::MySql => MYSQL_DDL,
        };
        let mut statements = statements(ddl);
        if let Some(table) = statements.next() {
            sqlx::query(table).execute(&pool).await?;
        }
        // A table of that name made by someone else: refuse it rather than adopt it (before its
        // indexes, which would fail on its columns).
        sqlx::query(&format!(
            "SELECT {COLUMNS}, entry_key, project, environment, changed_fields FROM {TABLE} \
             WHERE 1 = 0"
        ))
        .fetch_optional(&pool)
        .await
        .map_err(|e| {
            Error::Invalid(format!(
                "{TABLE} in {} exists but is not Canopy's audit trail table ({e}): point \
                 auditTrail.databaseUrl at another database",
                redacted()
            ))
        })?;
        for statement in statements {
            sqlx::query(statement).execute(&pool).await?;
        }
        Ok(Self {
            pool,
            sql,
            project: project.to_owned(),
            environment: environment.to_owned(),
        })
    }

    /// `text` in the dialect's placeholders: MySQL reads `?` in bind order, and every query here
    /// uses each `$n` once, in order.
    fn text(&self, text: &str) -> String {
        if self.sql != Db::MySql {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
                while chars.peek().is_some_and(char::is_ascii_digit) {
                    chars.next();
                }
                out.push('?');
            } else {
                out.push(c);
            }
        }
        out
    }

    /// The conditions of `query` (after the project, environment, collection and record), with
    /// their arguments pushed onto `args`.
    fn conditions(&self, query: &HistoryQuery, args: &mut Args) -> String {
        let mut conditions = vec![
            format!("project = {}", args.text(&self.project)),
            format!("environment = {}", args.text(&self.environment)),
            format!("collection = {}", args.text(&query.collection)),
            format!("record_id = {}", args.text(&query.record_id)),
        ];
        if !query.user_ids.is_empty() {
            let ids: Vec<String> = query.user_ids.iter().map(|id| args.int(*id)).collect();
            conditions.push(format!("user_id IN ({})", ids.join(", ")));
        }
        if let Some(start) = query.start {
            conditions.push(format!("created_at >= {}", args.int(start)));
        }
        if let Some(end) = query.end {
            conditions.push(format!("created_at <= {}", args.int(end)));
        }
        if !query.fields.is_empty() {
            let any: Vec<String> = query
                .fields
                .iter()
                .map(|field| {
                    format!(
                        "changed_fields LIKE {} ESCAPE '!'",
                        args.text(format!("%,{},%", like_escape(field)))
                    )
                })
                .collect();
            conditions.push(format!("({})", any.join(" OR ")));
        }
        if let Some(search) = &query.search {
            let columns = [
                "user_first_name",
                "user_last_name",
                "user_email",
                "action_name",
                "previous_values",
                "new_values",
            ];
            let any: Vec<String> = columns
                .iter()
                .map(|column| {
                    format!(
                        "LOWER({column}) LIKE {} ESCAPE '!'",
                        args.text(format!("%{}%", like_escape(&search.to_lowercase())))
                    )
                })
                .collect();
            conditions.push(format!("({})", any.join(" OR ")));
        }
        conditions.join(" AND ")
    }

    /// One page of a record's history; `limit` `None` reads it all.
    pub async fn history(
        &self,
        query: &HistoryQuery,
        order: Order,
        skip: u64,
        limit: Option<u64>,
    ) -> Result<Vec<AuditRecord>> {
        let mut args = Args::default();
        let conditions = self.conditions(query, &mut args);
        let direction = match order {
            Order::OldestFirst => "ASC",
            Order::NewestFirst => "DESC",
        };
        let mut text = format!(
            "SELECT {COLUMNS} FROM {TABLE} WHERE {conditions} \
             ORDER BY created_at {direction}, id {direction}"
        );
        if let Some(limit) = limit {
            let limit = args.int(i64::try_from(limit).unwrap_or(i64::MAX));
            let skip = args.int(i64::try_from(skip).unwrap_or(i64::MAX));
            text.push_str(&format!(" LIMIT {limit} OFFSET {skip}"));
        }
        let text = self.text(&text);
        let rows = args.bind(sqlx::query(&text)).fetch_all(&self.pool).await?;
        rows.iter().map(record).collect()
    }

    /// How many entries `query` matches, whatever the page.
    pub async fn count(&self, query: &HistoryQuery) -> Result<i64> {
        let mut args = Args::default();
        let conditions = self.conditions(query, &mut args);
        let text = self.text(&format!("SELECT COUNT(*) FROM {TABLE} WHERE {conditions}"));
        let row = args.bind(sqlx::query(&text)).fetch_one(&self.pool).await?;
        Ok(row.try_get(0)?)
    }

    /// The distinct authors of the entries `query` matches, by id.
    pub async fn authors(&self, query: &HistoryQuery) -> Result<Vec<AuditUser>> {
        let mut args = Args::default();
        let conditions = self.conditions(query, &mut args);
        let text = self.text(&format!(
            "SELECT DISTINCT user_id, user_first_name, user_last_name, user_email FROM {TABLE} \
             WHERE {conditions} ORDER BY user_id"
        ));
        let rows = args.bind(sqlx::query(&text)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                Ok(AuditUser {
                    id: row.try_get(0)?,
                    first_name: text_at(row, 1)?,
                    last_name: text_at(row, 2)?,
                    email: text_at(row, 3)?,
                })
            })
            .collect()
    }

    /// The entries of one record recorded under any of `keys`, oldest first.
    pub async fn by_correlation(
        &self,
        collection: &str,
        record_id: &str,
        keys: &[String],
    ) -> Result<Vec<AuditRecord>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = Args::default();
        let project = args.text(&self.project);
        let environment = args.text(&self.environment);
        let collection = args.text(collection);
        let record_id = args.text(record_id);
        let keys: Vec<String> = keys.iter().map(|k| args.text(k)).collect();
        let text = self.text(&format!(
            "SELECT {COLUMNS} FROM {TABLE} WHERE project = {project} AND environment = \
             {environment} AND collection = {collection} AND record_id = {record_id} AND \
             correlation_key IN ({}) ORDER BY created_at ASC, id ASC",
            keys.join(", ")
        ));
        let rows = args.bind(sqlx::query(&text)).fetch_all(&self.pool).await?;
        rows.iter().map(record).collect()
    }
}

#[async_trait]
impl AuditRecorder for AuditStore {
    async fn insert_pending(&self, entries: &[PendingEntry]) -> crate::datasource::Result<()> {
        self.insert(entries).await.map_err(|e| storage_error(&e))
    }

    async fn confirm(
        &self,
        key: Uuid,
        confirmation: &Confirmation,
    ) -> crate::datasource::Result<()> {
        self.mark_done(key, confirmation)
            .await
            .map_err(|e| storage_error(&e))
    }
}

/// A failure of the audit database, as the stack reports it (never with the values).
fn storage_error(error: &Error) -> crate::datasource::Error {
    crate::datasource::Error::Internal(format!("audit trail: {error}"))
}

impl AuditStore {
    /// Writes pending entries in one transaction: all or none.
    async fn insert(&self, entries: &[PendingEntry]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for chunk in entries.chunks(INSERT_CHUNK) {
            let mut args = Args::default();
            let rows: Vec<String> = chunk
                .iter()
                .map(|e| {
                    let values = [
                        args.text(e.key.to_string()),
                        args.text(&self.project),
                        args.text(&self.environment),
                        args.int(e.timestamp),
                        args.text(e.operation.as_str()),
                        args.text(&e.collection),
                    ];
                    // A create has no id yet: NULL, not a bound empty string.
                    let record_id = match &e.record_id {
                        Some(id) => args.text(id),
                        None => "NULL".to_owned(),
                    };
                    let author = [
                        args.int(e.user_id),
                        args.text(&e.user_first_name),
                        args.text(&e.user_last_name),
                        args.text(&e.user_email),
                    ];
                    // Bound in the columns' order: MySQL's `?` placeholders are positional.
                    let action_name = match &e.action_name {
                        Some(name) => args.text(name),
                        None => "NULL".to_owned(),
                    };
                    let rest = [
                        args.text(&e.correlation_key),
                        args.text(Json::Object(e.previous_values.clone()).to_string()),
                        args.text(changed_fields(&e.previous_values, &Map::new())),
                    ];
                    format!(
                        "({}, {record_id}, {}, {action_name}, {}, '{{}}', {}, 'pending')",
                        values.join(", "),
                        author.join(", "),
                        rest[..2].join(", "),
                        rest[2],
                    )
                })
                .collect();
            let text = self.text(&format!(
                "INSERT INTO {TABLE} (entry_key, project, environment, created_at, operation, \
                 collection, record_id, user_id, user_first_name, user_last_name, user_email, \
                 action_name, correlation_key, previous_values, new_values, changed_fields, \
                 status) VALUES {}",
                rows.join(", ")
            ));
            args.bind(sqlx::query(&text)).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn mark_done(&self, key: Uuid, c: &Confirmation) -> Result<()> {
        let text = self.text(&format!(
            "UPDATE {TABLE} SET status = 'done', record_id = $1, previous_values = $2, \
             new_values = $3, changed_fields = $4 WHERE entry_key = $5"
        ));
        let done = sqlx::query(&text)
            .bind(c.record_id.clone())
            .bind(Json::Object(c.previous_values.clone()).to_string())
            .bind(Json::Object(c.new_values.clone()).to_string())
            .bind(changed_fields(&c.previous_values, &c.new_values))
            .bind(key.to_string())
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(Error::NotFound(format!("audit entry {key}")));
        }
        Ok(())
    }
}

/// The columns a change touched, as `,a,b,` (what the `fields` filter matches with LIKE).
fn changed_fields(previous: &Map<String, Json>, new: &Map<String, Json>) -> String {
    let mut out = String::from(",");
    for key in previous
        .keys()
        .chain(new.keys().filter(|k| !previous.contains_key(*k)))
    {
        out.push_str(key);
        out.push(',');
    }
    out
}

/// `text` for a LIKE pattern with `!` as the escape character (the same in every dialect,
/// where a backslash is not).
fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '!') {
            out.push('!');
        }
        out.push(c);
    }
    out
}

/// The statements of a DDL text, comments and blank parts left out.
fn statements(ddl: &str) -> impl Iterator<Item = &str> {
    ddl.split(';').filter(|part| {
        part.lines()
            .any(|line| !line.trim().is_empty() && !line.trim_start().starts_with("--"))
    })
}

/// A text column: MySQL's TEXT types reach sqlx's `Any` driver as bytes, the others as text.
fn text_at(row: &AnyRow, index: usize) -> Result<Option<String>> {
    match row.try_get::<Option<String>, _>(index) {
        Ok(text) => Ok(text),
        Err(sqlx::Error::ColumnDecode { .. }) => row
            .try_get::<Option<Vec<u8>>, _>(index)?
            .map(|bytes| {
                String::from_utf8(bytes)
                    .map_err(|_| Error::Invalid(format!("column {index} is not UTF-8 text")))
            })
            .transpose(),
        Err(error) => Err(error.into()),
    }
}

fn record(row: &AnyRow) -> Result<AuditRecord> {
    let object = |index: usize| -> Result<Map<String, Json>> {
        let text = text_at(row, index)?.unwrap_or_default();
        match serde_json::from_str(&text) {
            Ok(Json::Object(map)) => Ok(map),
            _ => Err(Error::Invalid(format!(
                "a stored audit entry has unreadable values in column {index}"
            ))),
        }
    };
    let timestamp_ms: i64 = row.try_get(1)?;
    Ok(AuditRecord {
        id: row.try_get(0)?,
        timestamp: iso(timestamp_ms),
        timestamp_ms,
        operation: row.try_get(2)?,
        collection: row.try_get(3)?,
        record_id: row.try_get(4)?,
        user_id: row.try_get(5)?,
        user_first_name: text_at(row, 6)?,
        user_last_name: text_at(row, 7)?,
        user_email: text_at(row, 8)?,
        action_name: text_at(row, 9)?,
        correlation_key: row.try_get(10)?,
        previous_values: object(11)?,
        new_values: object(12)?,
        status: row.try_get(13)?,
    })
}

/// Milliseconds as JavaScript's `toISOString` writes them.
pub fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The state of a record before the entries `newest_first` (the agent's `revertRecord`), from
/// its state now (`None`: it does not exist now). A create takes it back to not existing, a
/// delete to the values it had, an update to its previous values (leaf by leaf in JSON
/// columns); walking on past a delete finds an earlier life of the same id.
pub fn revert(
    current: Option<Map<String, Json>>,
    newest_first: &[AuditRecord],
) -> Option<Map<String, Json>> {
    let mut state = current;
    for entry in newest_first {
        match entry.operation.as_str() {
            "create" => state = None,
            "delete" => state = Some(entry.previous_values.clone()),
            "update" => {
                if let Some(values) = &mut state {
                    revert_one(values, &entry.previous_values, &entry.new_values);
                }
            }
            // Action rows hold a form and an answer, not values.
            _ => {}
        }
    }
    state
}

fn revert_one(
    state: &mut Map<String, Json>,
    previous: &Map<String, Json>,
    next: &Map<String, Json>,
) {
    let keys: Vec<&String> = previous
        .keys()
        .chain(next.keys().filter(|k| !previous.contains_key(*k)))
        .collect();
    for key in keys {
        match previous.get(key) {
            // Added by the change: reverting removes it.
            None => {
                state.shift_remove(key);
            }
            Some(before) => match state.get_mut(key) {
                Some(slot) => *slot = revert_value(Some(slot.take()), before, next.get(key)),
                None => {
                    let value = revert_value(None, before, next.get(key));
                    state.insert(key.clone(), value);
                }
            },
        }
    }
}

/// One value reverted: a nested diff (objects on both sides) is applied key by key to the
/// current value (an object, or an array of objects diffed by index); anything else is the
/// previous value itself.
fn revert_value(current: Option<Json>, previous: &Json, next: Option<&Json>) -> Json {
    let (Json::Object(previous), Some(Json::Object(next))) = (previous, next) else {
        return previous.clone();
    };
    match current {
        Some(Json::Array(mut items)) => {
            let mut removed: Vec<usize> = Vec::new();
            let keys = previous
                .keys()
                .chain(next.keys().filter(|k| !previous.contains_key(*k)));
            for key in keys {
                let Ok(index) = key.parse::<usize>() else {
                    continue;
                };
                match previous.get(key) {
                    None => removed.push(index),
                    Some(before) => {
                        let value = revert_value(items.get(index).cloned(), before, next.get(key));
                        if index < items.len() {
                            items[index] = value;
                        } else {
                            items.push(value);
                        }
                    }
                }
            }
            removed.sort_unstable_by(|a, b| b.cmp(a));
            for index in removed {
                if index < items.len() {
                    items.remove(index);
                }
            }
            Json::Array(items)
        }
        current => {
            let mut object = match current {
                Some(Json::Object(object)) => object,
                _ => Map::new(),
            };
            revert_one(&mut object, previous, next);
            Json::Object(object)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(operation: &str, previous: Json, new: Json) -> AuditRecord {
        let map = |v: Json| match v {
            Json::Object(m) => m,
            _ => Map::new(),
        };
        AuditRecord {
            id: 1,
            timestamp: iso(0),
            timestamp_ms: 0,
            operation: operation.to_owned(),
            collection: "orders".to_owned(),
            record_id: Some("1".to_owned()),
            user_id: 1,
            user_first_name: None,
            user_last_name: None,
            user_email: None,
            action_name: None,
            correlation_key: "c".to_owned(),
            previous_values: map(previous),
            new_values: map(new),
            status: "done".to_owned(),
        }
    }

    fn map(value: Json) -> Map<String, Json> {
        match value {
            Json::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn reverting_walks_updates_deletes_and_creates_newest_first() {
        let now = map(json!({"id": 1, "status": "paid", "meta": {"a": 2, "b": 1}}));
        let update = entry(
            "update",
            json!({"status": "new", "meta": {"a": 1}}),
            json!({"status": "paid", "meta": {"a": 2, "b": 1}}),
        );
        assert_eq!(
            revert(Some(now.clone()), std::slice::from_ref(&update)),
            Some(map(json!({"id": 1, "status": "new", "meta": {"a": 1}})))
        );
        let create = entry("create", json!({}), json!({"id": 1, "status": "new"}));
        assert_eq!(revert(Some(now), &[update, create]), None);
        let delete = entry("delete", json!({"id": 1, "status": "gone"}), json!({}));
        assert_eq!(
            revert(None, &[delete]),
            Some(map(json!({"id": 1, "status": "gone"})))
        );
    }

    #[test]
    fn arrays_of_objects_revert_by_index() {
        let now = map(json!({"lines": [{"q": 1}, {"q": 5}, {"q": 6}]}));
        let update = entry(
            "update",
            json!({"lines": {"1": {"q": 2}}}),
            json!({"lines": {"1": {"q": 5}, "2": {"q": 6}}}),
        );
        assert_eq!(
            revert(Some(now), &[update]),
            Some(map(json!({"lines": [{"q": 1}, {"q": 2}]})))
        );
    }

    #[test]
    fn like_patterns_and_placeholders_are_portable() {
        assert_eq!(like_escape("50%_off!"), "50!%!_off!!");
        assert_eq!(
            changed_fields(&map(json!({"a": 1})), &map(json!({"a": 2, "b": 3}))),
            ",a,b,"
        );
        let ddl = include_str!("../../migrations/sqlite/0008_audit_trail.sql");
        assert_eq!(statements(ddl).count(), 3);
        assert_eq!(statements(MYSQL_DDL).count(), 1);
    }
}
