//! No-code actions added from the console (`no_code_actions`, migration 0019): each one a
//! `[[noCodeActions]]` entry in JSON, in this store's project and environment. Adding and
//! removing one writes an admin log entry (resource `noCodeAction`) in which webhook header
//! values are masked: they are credentials, and the admin log is readable by every admin.

use serde_json::{Value as Json, json};
use sqlx::Row as _;

use super::store::now_ms;
use super::{Actor, Error, Result, Store};

/// The admin log's resource of a no-code action.
pub const ADMIN_LOG_RESOURCE: &str = "noCodeAction";

/// A no-code action stored by an admin.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredNoCodeAction {
    pub id: i64,
    /// The action, as a `[[noCodeActions]]` entry in JSON.
    pub definition: Json,
}

/// `definition` with each header value replaced by `"***"`, for logs and pages.
pub fn masked(definition: &Json) -> Json {
    let mut shown = definition.clone();
    if let Some(headers) = shown.get_mut("headers").and_then(Json::as_object_mut) {
        for value in headers.values_mut() {
            *value = json!("***");
        }
    }
    shown
}

impl Store {
    /// The no-code actions added in this environment, oldest first.
    pub async fn no_code_actions(&self) -> Result<Vec<StoredNoCodeAction>> {
        let rows = sqlx::query(
            "SELECT id, definition FROM no_code_actions \
             WHERE project = $1 AND environment = $2 ORDER BY id",
        )
        .bind(self.project())
        .bind(self.environment())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let text: String = row.try_get(1)?;
                Ok(StoredNoCodeAction {
                    id: row.try_get(0)?,
                    definition: serde_json::from_str(&text)
                        .map_err(|e| Error::Invalid(format!("no-code action: {e}")))?,
                })
            })
            .collect()
    }

    /// Adds a no-code action; answers its id.
    pub async fn add_no_code_action(&self, actor: &Actor, definition: &Json) -> Result<i64> {
        let mut tx = self.pool().begin().await?;
        let id: i64 = sqlx::query(
            "INSERT INTO no_code_actions (project, environment, definition, created_by, \
             created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(self.project())
        .bind(self.environment())
        .bind(definition.to_string())
        .bind(match actor {
            Actor::Administrator { user_id, .. } => Some(*user_id),
            _ => None,
        })
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        self.admin_log_on(
            &mut *tx,
            actor,
            "add",
            ADMIN_LOG_RESOURCE,
            &id.to_string(),
            None,
            Some(masked(definition)),
        )
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Removes no-code action `id` of this environment.
    pub async fn remove_no_code_action(&self, actor: &Actor, id: i64) -> Result<()> {
        let before = self
            .no_code_actions()
            .await?
            .into_iter()
            .find(|a| a.id == id)
            .ok_or_else(|| Error::NotFound(format!("no-code action {id}")))?;
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM no_code_actions WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        self.admin_log_on(
            &mut *tx,
            actor,
            "remove",
            ADMIN_LOG_RESOURCE,
            &id.to_string(),
            Some(masked(&before.definition)),
            None,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
