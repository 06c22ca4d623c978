//! What the store keeps and answers when Canopy is the Forest server of other agents
//! (`http::liana`): the schema each environment's agents upload, the ids of its renderings (for
//! `refresh-renderings` events), and a marker of the last change to the permission model that
//! other processes writing to the same store also move. The uploaded schema also names the
//! collections and actions of those agents, which permission rules may name and the `"*"`
//! wildcard covers.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value as Json};
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

impl Apimap {
    /// The collections of the uploaded schema and the names of their actions.
    pub fn names(&self) -> BTreeMap<String, BTreeSet<String>> {
        apimap_names(&self.document)
    }
}

/// The collections and action names of an uploaded schema (see [`apimap_collections`]).
pub fn apimap_names(document: &Json) -> BTreeMap<String, BTreeSet<String>> {
    apimap_collections(document)
        .iter()
        .filter_map(|collection| {
            let name = collection.get("name")?.as_str()?.to_owned();
            let actions = collection
                .get("actions")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .filter_map(|a| a.get("name")?.as_str().map(str::to_owned))
                .collect();
            Some((name, actions))
        })
        .collect()
}

/// An uploaded schema (the JSON:API document of `SchemaService.serialize`: each collection a
/// `collections` resource whose `actions` and `segments` are relationships to `included`
/// resources) back in the schema file's shape: one object per collection, its attributes with
/// `actions` and `segments` as lists of their attributes. A document of another shape gives
/// nothing.
pub fn apimap_collections(document: &Json) -> Vec<Json> {
    let included: BTreeMap<(&str, &str), &Map<String, Json>> = document
        .get("included")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|resource| {
            let kind = resource.get("type")?.as_str()?;
            let id = resource.get("id")?.as_str()?;
            Some(((kind, id), resource.get("attributes")?.as_object()?))
        })
        .collect();
    document
        .get("data")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter(|resource| resource.get("type").and_then(Json::as_str) == Some("collections"))
        .filter_map(|resource| {
            let mut collection = resource.get("attributes")?.as_object()?.clone();
            if !collection.contains_key("name") {
                collection.insert("name".to_owned(), resource.get("id")?.clone());
            }
            for key in ["actions", "segments"] {
                let linked: Vec<Json> = resource
                    .pointer(&format!("/relationships/{key}/data"))
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|link| {
                        let id = link.get("id")?.as_str()?;
                        let attributes = included.get(&(key, id))?;
                        let mut item = (*attributes).clone();
                        item.insert("id".to_owned(), Json::String(id.to_owned()));
                        Some(Json::Object(item))
                    })
                    .collect();
                collection.insert(key.to_owned(), Json::Array(linked));
            }
            Some(Json::Object(collection))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_uploaded_schema_names_its_collections_and_actions() {
        let document = json!({
            "data": [
                {"type": "collections", "id": "books",
                 "attributes": {"name": "books", "fields": [{"field": "id", "type": "Number"}]},
                 "relationships": {
                     "actions": {"data": [{"type": "actions", "id": "books-0-mark"}]},
                     "segments": {"data": [{"type": "segments", "id": "books.Recent"}]}}},
                {"type": "collections", "id": "authors", "attributes": {"fields": []},
                 "relationships": {"actions": {"data": []}}},
                {"type": "other", "id": "x", "attributes": {"name": "x"}},
            ],
            "included": [
                {"type": "actions", "id": "books-0-mark", "attributes": {"name": "Mark read"}},
                {"type": "segments", "id": "books.Recent", "attributes": {"name": "Recent"}},
            ],
        });
        let names = apimap_names(&document);
        assert_eq!(
            names,
            BTreeMap::from([
                ("authors".to_owned(), BTreeSet::new()),
                ("books".to_owned(), BTreeSet::from(["Mark read".to_owned()])),
            ])
        );
        let collections = apimap_collections(&document);
        assert_eq!(collections[0]["fields"][0]["field"], "id");
        assert_eq!(collections[0]["segments"][0]["name"], "Recent");
        assert!(apimap_collections(&json!({"data": 3})).is_empty());
    }
}
