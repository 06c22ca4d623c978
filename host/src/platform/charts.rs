//! Dashboard charts added from the console (`dashboard_charts`, migration 0017): each one a
//! `[[dashboard.chart]]` entry in JSON, on a collection's dashboard or the home one, in this
//! store's project and environment. Adding and removing one writes an admin log entry (resource
//! `chart`).

use serde_json::{Value as Json, json};
use sqlx::Row as _;

use super::store::now_ms;
use super::{Actor, Error, Result, Store};

/// The admin log's resource of a chart.
pub const ADMIN_LOG_RESOURCE: &str = "chart";

/// A chart stored by an admin.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredChart {
    pub id: i64,
    /// The collection whose dashboard shows it; `None`: the home dashboard.
    pub dashboard: Option<String>,
    /// The chart, as a `[[dashboard.chart]]` entry in JSON.
    pub definition: Json,
}

impl Store {
    /// The charts added in this environment, oldest first.
    pub async fn dashboard_charts(&self) -> Result<Vec<StoredChart>> {
        let rows = sqlx::query(
            "SELECT id, dashboard, definition FROM dashboard_charts \
             WHERE project = $1 AND environment = $2 ORDER BY id",
        )
        .bind(self.project())
        .bind(self.environment())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let text: String = row.try_get(2)?;
                Ok(StoredChart {
                    id: row.try_get(0)?,
                    dashboard: row.try_get(1)?,
                    definition: serde_json::from_str(&text)
                        .map_err(|e| Error::Invalid(format!("dashboard chart: {e}")))?,
                })
            })
            .collect()
    }

    /// Adds a chart to a dashboard; answers its id.
    pub async fn add_dashboard_chart(
        &self,
        actor: &Actor,
        dashboard: Option<&str>,
        definition: &Json,
    ) -> Result<i64> {
        let mut tx = self.pool().begin().await?;
        let id: i64 = sqlx::query(
            "INSERT INTO dashboard_charts (project, environment, dashboard, definition, \
             created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(self.project())
        .bind(self.environment())
        .bind(dashboard)
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
            Some(json!({"dashboard": dashboard, "chart": definition})),
        )
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Removes chart `id` of this environment.
    pub async fn remove_dashboard_chart(&self, actor: &Actor, id: i64) -> Result<()> {
        let before = self
            .dashboard_charts()
            .await?
            .into_iter()
            .find(|c| c.id == id)
            .ok_or_else(|| Error::NotFound(format!("chart {id}")))?;
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM dashboard_charts WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        self.admin_log_on(
            &mut *tx,
            actor,
            "remove",
            ADMIN_LOG_RESOURCE,
            &id.to_string(),
            Some(json!({"dashboard": before.dashboard, "chart": before.definition})),
            None,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
