//! Workflow definitions in the store: a workflow row (name, collection, active, the latest version
//! number, where it is defined) and one `workflow_versions` row per change of its definition.
//! A definition whose canonical JSON hashes the same as the latest version's makes no new
//! version. Every change writes its admin log entry (resource `workflow`) in the same
//! transaction.
//!
//! Workflows of the workflows folder (`source = file`) are the file's: a write from the API or
//! the CLI is refused with a conflict naming the file ([`Origin::Api`]).

use serde::Serialize;
use serde_json::{Value as Json, json};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row as _};

use super::{Definition, Error, Result};
use crate::platform::listing::{Args, DateRange};
use crate::platform::store::now_ms;
use crate::platform::{Actor, Store};

/// Where a workflow is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A file of the workflows folder: only the file changes it.
    File,
    /// The API or the CLI.
    Api,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Api => "api",
        }
    }
}

/// Who writes a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin<'a> {
    /// The workflows folder, from this file (as shown to people, `workflows/refund.toml`).
    File(&'a str),
    /// The API or the CLI: refused on a workflow a file defines.
    Api,
}

/// A workflow, without its definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    pub id: String,
    pub name: String,
    pub collection_name: String,
    pub description: Option<String>,
    /// Whether new runs start on it (runs under way go on either way).
    pub active: bool,
    /// The number of its latest version, the one new runs use.
    pub latest_version: i64,
    pub source: Source,
    /// The file that defines it, when `source` is `file`.
    pub source_file: Option<String>,
    pub created_by_user_id: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One version of a workflow's definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub id: String,
    pub workflow_id: String,
    /// 1, 2, … in the order they were saved.
    pub version: i64,
    pub definition: Definition,
    /// SHA-256 hex of the canonical definition.
    pub definition_hash: String,
    pub created_by_user_id: Option<i64>,
    pub created_at: i64,
}

/// The outcome of saving a definition.
#[derive(Debug, Clone)]
pub struct Saved {
    pub workflow: Workflow,
    /// The latest version after the save.
    pub version: Version,
    /// What changed: `Created` a workflow, a `NewVersion`, only `Active`, or `Unchanged`.
    pub change: Change,
}

/// What a save changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    NewVersion,
    /// Only the active flag (or the file that defines it) changed: no new version.
    Settings,
    Unchanged,
}

/// The filters of the workflow listing, AND-combined, newest first.
#[derive(Debug, Clone, Default)]
pub struct WorkflowFilter {
    /// Most workflows returned.
    pub limit: i64,
    pub collection: Option<String>,
    /// Only these collections (those the caller may browse); `None`: all.
    pub collections: Option<Vec<String>>,
    pub active: Option<bool>,
    pub created_at: DateRange,
}

const WORKFLOW_COLUMNS: &str = "id, name, collection_name, description, active, latest_version, \
     source, source_file, created_by_user_id, created_at, updated_at";

const VERSION_COLUMNS: &str =
    "id, workflow_id, version, definition, definition_hash, created_by_user_id, created_at";

fn workflow_from_row(row: &AnyRow) -> Result<Workflow> {
    Ok(Workflow {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        collection_name: row.try_get(2)?,
        description: row.try_get(3)?,
        active: row.try_get::<i64, _>(4)? != 0,
        latest_version: row.try_get(5)?,
        source: if row.try_get::<String, _>(6)? == "file" {
            Source::File
        } else {
            Source::Api
        },
        source_file: row.try_get(7)?,
        created_by_user_id: row.try_get(8)?,
        created_at: row.try_get(9)?,
        updated_at: row.try_get(10)?,
    })
}

fn version_from_row(row: &AnyRow) -> Result<Version> {
    let text: String = row.try_get(3)?;
    let definition = serde_json::from_str(&text).map_err(|e| {
        Error::Store(crate::platform::Error::Invalid(format!(
            "a stored workflow definition cannot be read: {e}"
        )))
    })?;
    Ok(Version {
        id: row.try_get(0)?,
        workflow_id: row.try_get(1)?,
        version: row.try_get(2)?,
        definition,
        definition_hash: row.try_get(4)?,
        created_by_user_id: row.try_get(5)?,
        created_at: row.try_get(6)?,
    })
}

fn actor_id(actor: &Actor) -> Option<i64> {
    match actor {
        Actor::Administrator { user_id, .. } => Some(*user_id),
        _ => None,
    }
}

/// The admin log's view of a workflow (never its whole definition: the versions keep it).
fn log_value(workflow: &Workflow, hash: &str) -> Json {
    json!({
        "name": workflow.name,
        "collectionName": workflow.collection_name,
        "active": workflow.active,
        "version": workflow.latest_version,
        "definitionHash": hash,
        "source": workflow.source.as_str(),
        "sourceFile": workflow.source_file,
    })
}

/// A PostgreSQL advisory lock key: one workflows-folder sync at a time per database.
const SYNC_LOCK: i64 = 0x0063_616e_6f70_7902;

/// The refusal of an API write to a workflow a file defines.
pub fn file_owned(workflow: &Workflow) -> Error {
    Error::Conflict(format!(
        "workflow {:?} is defined by {}: change the file (the workflows folder wins over API \
         and CLI edits)",
        workflow.name,
        workflow
            .source_file
            .as_deref()
            .unwrap_or("a file of the workflows folder"),
    ))
}

impl Store {
    /// Creates a workflow from `definition` (already checked), with version 1; active unless the
    /// definition says `active = false`.
    pub async fn create_workflow(
        &self,
        actor: &Actor,
        definition: &Definition,
        origin: Origin<'_>,
    ) -> Result<Saved> {
        let mut tx = self.pool().begin().await?;
        let saved = self.create_on(&mut tx, actor, definition, origin).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// Saves `definition` (already checked) as the next version of workflow `id`, unless it is
    /// the latest one already; `definition.active`, when given, turns the workflow on or off.
    pub async fn save_workflow(
        &self,
        actor: &Actor,
        id: &str,
        definition: &Definition,
        origin: Origin<'_>,
    ) -> Result<Saved> {
        let mut tx = self.pool().begin().await?;
        let saved = self.save_on(&mut tx, actor, id, definition, origin).await?;
        if saved.change == Change::Unchanged {
            tx.rollback().await?;
        } else {
            tx.commit().await?;
        }
        Ok(saved)
    }

    /// Turns workflow `id` on or off (no new version).
    pub async fn set_workflow_active(
        &self,
        actor: &Actor,
        id: &str,
        active: bool,
        origin: Origin<'_>,
    ) -> Result<Workflow> {
        let mut tx = self.pool().begin().await?;
        let before = self.lock_workflow(&mut tx, id).await?;
        if origin == Origin::Api && before.source == Source::File {
            return Err(file_owned(&before));
        }
        if before.active == active {
            tx.rollback().await?;
            return Ok(before);
        }
        let now = now_ms();
        sqlx::query("UPDATE workflows SET active = $1, updated_at = $2 WHERE id = $3")
            .bind(i64::from(active))
            .bind(now)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let after = Workflow {
            active,
            updated_at: now,
            ..before.clone()
        };
        let hash = self.latest_hash(&mut tx, id).await?;
        self.admin_log_on(
            &mut *tx,
            actor,
            "update",
            "workflow",
            id,
            Some(log_value(&before, &hash)),
            Some(log_value(&after, &hash)),
        )
        .await?;
        tx.commit().await?;
        Ok(after)
    }

    /// The environment's workflows matching `filter`, newest first, at most `filter.limit`.
    pub async fn workflows(&self, filter: &WorkflowFilter) -> Result<Vec<Workflow>> {
        let mut args = Args::default();
        let mut conditions = vec![
            format!("project = {}", args.text(self.project())),
            format!("environment = {}", args.text(self.environment())),
        ];
        if let Some(collection) = &filter.collection {
            conditions.push(format!("collection_name = {}", args.text(collection)));
        }
        if let Some(collections) = &filter.collections {
            if collections.is_empty() {
                return Ok(Vec::new());
            }
            let placeholders: Vec<String> = collections.iter().map(|c| args.text(c)).collect();
            conditions.push(format!("collection_name IN ({})", placeholders.join(", ")));
        }
        if let Some(active) = filter.active {
            conditions.push(format!("active = {}", args.int(i64::from(active))));
        }
        conditions.extend(filter.created_at.conditions("created_at", &mut args));
        let sql = format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflows WHERE {} \
             ORDER BY created_at DESC, id DESC LIMIT {}",
            conditions.join(" AND "),
            args.int(filter.limit)
        );
        let rows = args.bind(sqlx::query(&sql)).fetch_all(self.pool()).await?;
        rows.iter().map(workflow_from_row).collect()
    }

    /// Every workflow of the environment, by name (the checks of sub-workflows, the CLI).
    pub async fn all_workflows(&self) -> Result<Vec<Workflow>> {
        let rows = sqlx::query(&format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflows WHERE project = $1 AND environment = $2 \
             ORDER BY name"
        ))
        .bind(self.project())
        .bind(self.environment())
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(workflow_from_row).collect()
    }

    /// The workflow with this id, in this environment.
    pub async fn workflow(&self, id: &str) -> Result<Option<Workflow>> {
        let row = sqlx::query(&format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflows \
             WHERE id = $1 AND project = $2 AND environment = $3"
        ))
        .bind(id)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(workflow_from_row).transpose()
    }

    /// The workflow with this name, in this environment.
    pub async fn workflow_by_name(&self, name: &str) -> Result<Option<Workflow>> {
        let row = sqlx::query(&format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflows \
             WHERE name = $1 AND project = $2 AND environment = $3"
        ))
        .bind(name)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(workflow_from_row).transpose()
    }

    /// The versions of workflow `id`, newest first, at most `limit`, created in `created_at`.
    pub async fn workflow_versions(
        &self,
        id: &str,
        limit: i64,
        created_at: &DateRange,
    ) -> Result<Vec<Version>> {
        let mut args = Args::default();
        let mut conditions = vec![format!("workflow_id = {}", args.text(id))];
        conditions.extend(created_at.conditions("created_at", &mut args));
        let sql = format!(
            "SELECT {VERSION_COLUMNS} FROM workflow_versions WHERE {} \
             ORDER BY version DESC LIMIT {}",
            conditions.join(" AND "),
            args.int(limit)
        );
        let rows = args.bind(sqlx::query(&sql)).fetch_all(self.pool()).await?;
        rows.iter().map(version_from_row).collect()
    }

    /// Version `version` of workflow `id`.
    pub async fn workflow_version(&self, id: &str, version: i64) -> Result<Option<Version>> {
        let row = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM workflow_versions WHERE workflow_id = $1 AND version = $2"
        ))
        .bind(id)
        .bind(version)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(version_from_row).transpose()
    }

    /// The latest version of workflow `id`.
    pub async fn latest_workflow_version(&self, id: &str) -> Result<Option<Version>> {
        let row = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM workflow_versions v WHERE v.workflow_id = $1 \
             AND v.version = (SELECT latest_version FROM workflows w WHERE w.id = v.workflow_id)"
        ))
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(version_from_row).transpose()
    }

    /// The version new runs of workflow `id` start on: its latest, while it is active.
    pub async fn active_workflow_version(&self, id: &str) -> Result<Option<Version>> {
        match self.workflow(id).await? {
            Some(workflow) if workflow.active => self.latest_workflow_version(id).await,
            _ => Ok(None),
        }
    }

    /// A version by its id (`workflow_runs.version_id`).
    pub async fn workflow_version_by_id(&self, version_id: &str) -> Result<Option<Version>> {
        let row = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM workflow_versions WHERE id = $1"
        ))
        .bind(version_id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(version_from_row).transpose()
    }

    /// The version run `run_id` executes: the one it started on, whatever came after.
    pub async fn run_version(&self, run_id: &str) -> Result<Option<Version>> {
        let row = sqlx::query(&format!(
            "SELECT {} FROM workflow_versions v JOIN workflow_runs r ON r.version_id = v.id \
             WHERE r.id = $1 AND r.project = $2 AND r.environment = $3",
            VERSION_COLUMNS
                .split(", ")
                .map(|c| format!("v.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .bind(run_id)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(version_from_row).transpose()
    }

    /// A transaction of a workflows-folder sync: one at a time (an advisory lock on PostgreSQL,
    /// the write lock on SQLite), so instances starting together make each version once.
    pub(super) async fn begin_sync(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        let mut tx = self.pool().begin().await?;
        match self.dialect() {
            crate::platform::store::Dialect::Postgres => {
                sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock($1)) AS l")
                    .bind(SYNC_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
            // A write first: SQLite then holds the write lock from the first read on.
            crate::platform::store::Dialect::Sqlite => {
                sqlx::query("UPDATE workflows SET id = id WHERE 1 = 0")
                    .execute(&mut *tx)
                    .await?;
            }
        }
        Ok(tx)
    }

    /// [`Store::create_workflow`] in a transaction of the caller's.
    pub(super) async fn create_on(
        &self,
        conn: &mut AnyConnection,
        actor: &Actor,
        definition: &Definition,
        origin: Origin<'_>,
    ) -> Result<Saved> {
        let now = now_ms();
        let (source, source_file) = match origin {
            Origin::File(file) => (Source::File, Some(file.to_owned())),
            Origin::Api => (Source::Api, None),
        };
        let workflow = Workflow {
            id: uuid::Uuid::now_v7().to_string(),
            name: definition.name.clone(),
            collection_name: definition.collection.clone(),
            description: definition.description.clone(),
            active: definition.active.unwrap_or(true),
            latest_version: 1,
            source,
            source_file,
            created_by_user_id: actor_id(actor),
            created_at: now,
            updated_at: now,
        };
        sqlx::query(
            "INSERT INTO workflows (id, project, environment, name, collection_name, description, \
             active, latest_version, source, source_file, created_by_user_id, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10, $11, $11)",
        )
        .bind(&workflow.id)
        .bind(self.project())
        .bind(self.environment())
        .bind(&workflow.name)
        .bind(&workflow.collection_name)
        .bind(&workflow.description)
        .bind(i64::from(workflow.active))
        .bind(workflow.source.as_str())
        .bind(&workflow.source_file)
        .bind(workflow.created_by_user_id)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(|e| unique(e, &workflow.name))?;
        let version = insert_version(conn, &workflow, definition, actor_id(actor), now).await?;
        self.admin_log_on(
            &mut *conn,
            actor,
            "add",
            "workflow",
            &workflow.id,
            None,
            Some(log_value(&workflow, &version.definition_hash)),
        )
        .await?;
        Ok(Saved {
            workflow,
            version,
            change: Change::Created,
        })
    }

    /// [`Store::save_workflow`] in a transaction of the caller's (left as it is when nothing
    /// changed: the caller rolls it back or goes on).
    pub(super) async fn save_on(
        &self,
        conn: &mut AnyConnection,
        actor: &Actor,
        id: &str,
        definition: &Definition,
        origin: Origin<'_>,
    ) -> Result<Saved> {
        let before = self.lock_workflow(conn, id).await?;
        if origin == Origin::Api && before.source == Source::File {
            return Err(file_owned(&before));
        }
        if definition.collection != before.collection_name {
            return Err(Error::Invalid(format!(
                "collection: workflow {:?} runs on {:?}; a workflow keeps its collection \
                 (create another workflow for {:?})",
                before.name, before.collection_name, definition.collection
            )));
        }
        let latest = latest_on(conn, id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("the latest version of workflow {id:?}")))?;
        let hash = definition.hash();
        let previous_hash = latest.definition_hash.clone();
        let (source, source_file) = match origin {
            Origin::File(file) => (Source::File, Some(file.to_owned())),
            Origin::Api => (before.source, before.source_file.clone()),
        };
        let active = definition.active.unwrap_or(before.active);
        let new_version = hash != latest.definition_hash;
        if !new_version
            && active == before.active
            && source == before.source
            && source_file == before.source_file
        {
            return Ok(Saved {
                workflow: before,
                version: latest,
                change: Change::Unchanged,
            });
        }
        let now = now_ms();
        let mut after = Workflow {
            name: definition.name.clone(),
            description: definition.description.clone(),
            active,
            source,
            source_file,
            updated_at: now,
            ..before.clone()
        };
        let version = if new_version {
            after.latest_version = before.latest_version + 1;
            insert_version(conn, &after, definition, actor_id(actor), now).await?
        } else {
            // Only the settings change: the name and description stay the latest version's.
            after.name = before.name.clone();
            after.description = before.description.clone();
            latest
        };
        sqlx::query(
            "UPDATE workflows SET name = $1, description = $2, active = $3, latest_version = $4, \
             source = $5, source_file = $6, updated_at = $7 WHERE id = $8",
        )
        .bind(&after.name)
        .bind(&after.description)
        .bind(i64::from(after.active))
        .bind(after.latest_version)
        .bind(after.source.as_str())
        .bind(&after.source_file)
        .bind(now)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(|e| unique(e, &after.name))?;
        self.admin_log_on(
            &mut *conn,
            actor,
            "update",
            "workflow",
            id,
            Some(log_value(&before, &previous_hash)),
            Some(log_value(&after, &version.definition_hash)),
        )
        .await?;
        Ok(Saved {
            workflow: after,
            version,
            change: if new_version {
                Change::NewVersion
            } else {
                Change::Settings
            },
        })
    }

    /// Hands a workflow whose file is gone back to the API, inactive: runs under way go on,
    /// none starts until someone activates it again.
    pub(super) async fn release_on(
        &self,
        conn: &mut AnyConnection,
        actor: &Actor,
        before: &Workflow,
    ) -> Result<Workflow> {
        let now = now_ms();
        sqlx::query(
            "UPDATE workflows SET active = 0, source = 'api', source_file = NULL, updated_at = $1 \
             WHERE id = $2",
        )
        .bind(now)
        .bind(&before.id)
        .execute(&mut *conn)
        .await?;
        let after = Workflow {
            active: false,
            source: Source::Api,
            source_file: None,
            updated_at: now,
            ..before.clone()
        };
        let hash = latest_on(conn, &before.id)
            .await?
            .map(|v| v.definition_hash)
            .unwrap_or_default();
        self.admin_log_on(
            &mut *conn,
            actor,
            "update",
            "workflow",
            &before.id,
            Some(log_value(before, &hash)),
            Some(log_value(&after, &hash)),
        )
        .await?;
        Ok(after)
    }

    /// Every workflow of the environment, read in a transaction of the caller's.
    pub(super) async fn workflows_on(&self, conn: &mut AnyConnection) -> Result<Vec<Workflow>> {
        let rows = sqlx::query(&format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflows WHERE project = $1 AND environment = $2 \
             ORDER BY name"
        ))
        .bind(self.project())
        .bind(self.environment())
        .fetch_all(&mut *conn)
        .await?;
        rows.iter().map(workflow_from_row).collect()
    }

    /// Reads workflow `id` and holds its row until the transaction ends (a no-op write: the
    /// row lock on PostgreSQL, the write lock on SQLite), so that two saves number their
    /// versions one after the other.
    async fn lock_workflow(&self, conn: &mut AnyConnection, id: &str) -> Result<Workflow> {
        let locked = sqlx::query(
            "UPDATE workflows SET updated_at = updated_at \
             WHERE id = $1 AND project = $2 AND environment = $3",
        )
        .bind(id)
        .bind(self.project())
        .bind(self.environment())
        .execute(&mut *conn)
        .await?;
        if locked.rows_affected() == 0 {
            return Err(Error::NotFound(format!("workflow {id:?}")));
        }
        let row = sqlx::query(&format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflows WHERE id = $1"
        ))
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
        workflow_from_row(&row)
    }

    async fn latest_hash(&self, conn: &mut AnyConnection, id: &str) -> Result<String> {
        Ok(latest_on(conn, id)
            .await?
            .map(|v| v.definition_hash)
            .unwrap_or_default())
    }
}

async fn latest_on(conn: &mut AnyConnection, id: &str) -> Result<Option<Version>> {
    let row = sqlx::query(&format!(
        "SELECT {VERSION_COLUMNS} FROM workflow_versions v WHERE v.workflow_id = $1 \
         AND v.version = (SELECT latest_version FROM workflows w WHERE w.id = v.workflow_id)"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(version_from_row).transpose()
}

async fn insert_version(
    conn: &mut AnyConnection,
    workflow: &Workflow,
    definition: &Definition,
    created_by_user_id: Option<i64>,
    now: i64,
) -> Result<Version> {
    let version = Version {
        id: uuid::Uuid::now_v7().to_string(),
        workflow_id: workflow.id.clone(),
        version: workflow.latest_version,
        definition: Definition {
            active: None,
            ..definition.clone()
        },
        definition_hash: definition.hash(),
        created_by_user_id,
        created_at: now,
    };
    sqlx::query(
        "INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, \
         created_by_user_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&version.id)
    .bind(&version.workflow_id)
    .bind(version.version)
    .bind(definition.canonical_json())
    .bind(&version.definition_hash)
    .bind(version.created_by_user_id)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => Error::Conflict(format!(
            "workflow {:?} was changed at the same time: try again",
            workflow.name
        )),
        _ => Error::from(e),
    })?;
    Ok(version)
}

/// A unique violation on the workflow's name, as the conflict it is.
fn unique(error: sqlx::Error, name: &str) -> Error {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => Error::Conflict(format!(
            "a workflow named {name:?} already exists in this environment"
        )),
        _ => Error::from(error),
    }
}
