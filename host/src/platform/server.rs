//! What the store keeps and answers when Canopy is the Forest server of other agents
//! (`http::liana`): the schema each environment's agents upload, the ids of its renderings (for
//! `refresh-renderings` events), and a marker of the last change to the permission model that
//! other processes writing to the same store also move.

use serde_json::Value as Json;
use sqlx::Row as _;

use super::{Error, Result, Store};

/// The schema an agent uploaded (`POST /forest/apimaps`).
#[derive(Debug, Clone, PartialEq)]
pub struct Apimap {
    pub schema_file_hash: String,
    /// The JSON:API document as the agent sent it (`data`, `included`, `meta`).
    pub document: Json,
    pub updated_at: i64,
}

impl Store {
    /// The hash of this environment's last uploaded schema, if any.
    pub async fn schema_file_hash(&self) -> Result<Option<String>> {
        Ok(sqlx::query(
            "SELECT schema_file_hash FROM apimaps WHERE project = $1 AND environment = $2",
        )
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
    }

    /// This environment's last uploaded schema.
    pub async fn apimap(&self) -> Result<Option<Apimap>> {
        let row = sqlx::query(
            "SELECT schema_file_hash, document, updated_at FROM apimaps \
             WHERE project = $1 AND environment = $2",
        )
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let document: String = row.try_get(1)?;
        Ok(Some(Apimap {
            schema_file_hash: row.try_get(0)?,
            document: serde_json::from_str(&document)
                .map_err(|e| Error::Invalid(format!("stored apimap: {e}")))?,
            updated_at: row.try_get(2)?,
        }))
    }

    /// Replaces this environment's schema with an uploaded one.
    pub async fn set_apimap(&self, schema_file_hash: &str, document: &Json) -> Result<()> {
        sqlx::query(
            "INSERT INTO apimaps (project, environment, schema_file_hash, document, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project, environment) DO UPDATE SET \
             schema_file_hash = excluded.schema_file_hash, document = excluded.document, \
             updated_at = excluded.updated_at",
        )
        .bind(self.project())
        .bind(self.environment())
        .bind(schema_file_hash)
        .bind(document.to_string())
        .bind(chrono::Utc::now().timestamp_millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The ids of this environment's renderings (one per team that ever had one).
    pub async fn rendering_ids(&self) -> Result<Vec<i64>> {
        let rows = sqlx::query(
            "SELECT id FROM renderings WHERE project = $1 AND environment = $2 ORDER BY id",
        )
        .bind(self.project())
        .bind(self.environment())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| row.try_get(0).map_err(Error::from))
            .collect()
    }

    /// The id of the project's newest admin log entry. Every change to the permission model
    /// writes one, whichever process made it (the CLI on the same SQLite file, another instance
    /// on the same PostgreSQL), and ids are UUIDv7, ordered by time: when this moves, something
    /// changed. The in-process generation only sees this process's own writes.
    pub async fn change_marker(&self) -> Result<Option<String>> {
        // Newest first along the (project, created_at, id) index: one row read.
        Ok(sqlx::query(
            "SELECT id FROM admin_logs WHERE project = $1 ORDER BY created_at DESC, id DESC LIMIT 1",
        )
        .bind(self.project())
        .fetch_optional(self.pool())
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
    }
}
