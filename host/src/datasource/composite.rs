//! Several datasources served as one: the union of their collections, each answered by the
//! datasource that owns it, and native queries routed by connection name.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use indexmap::IndexMap;

use super::error::{Error, Result};
use super::{Caller, Collection, DataSource, DataSourceSchema, Record, Value};

/// The datasources of one agent, as `addDataSource` stacks them.
pub struct CompositeDataSource {
    sources: Vec<Arc<dyn DataSource>>,
    schema: DataSourceSchema,
    /// Collection name → index in `sources`.
    owners: HashMap<String, usize>,
    /// Native query connection name → index in `sources`.
    connections: IndexMap<String, usize>,
}

impl CompositeDataSource {
    /// Merges the datasources. Two collections (or two native query connections) with the same
    /// name are refused with a message naming it: use the `rename` option of one of them.
    pub fn new(sources: Vec<Arc<dyn DataSource>>) -> Result<Self> {
        let mut schema = DataSourceSchema::default();
        let mut owners = HashMap::new();
        let mut connections = IndexMap::new();
        for (index, source) in sources.iter().enumerate() {
            for (name, collection) in &source.schema().collections {
                if owners.insert(name.clone(), index).is_some() {
                    return Err(Error::validation(format!(
                        "Collection '{name}' is served by two datasources; rename it in one of them"
                    )));
                }
                schema.collections.insert(name.clone(), collection.clone());
            }
            for connection in source.native_query_connections() {
                if connections.insert(connection.clone(), index).is_some() {
                    return Err(Error::validation(format!(
                        "Native query connection '{connection}' is declared by two datasources"
                    )));
                }
            }
        }
        schema.collections.sort_keys();
        Ok(Self {
            sources,
            schema,
            owners,
            connections,
        })
    }
}

#[async_trait]
impl DataSource for CompositeDataSource {
    fn schema(&self) -> &DataSourceSchema {
        &self.schema
    }

    fn collection(&self, name: &str) -> Result<Arc<dyn Collection>> {
        let owner = self
            .owners
            .get(name)
            .ok_or_else(|| Error::MissingCollection(name.to_owned()))?;
        self.sources[*owner].collection(name)
    }

    fn native_query_connections(&self) -> Vec<String> {
        self.connections.keys().cloned().collect()
    }

    async fn native_query(
        &self,
        caller: &Caller,
        connection: &str,
        query: &str,
        variables: &IndexMap<String, Value>,
    ) -> Result<Vec<Record>> {
        let owner = self.connections.get(connection).ok_or_else(|| {
            Error::Unprocessable(format!("Native query connection '{connection}' is unknown"))
        })?;
        self.sources[*owner]
            .native_query(caller, connection, query, variables)
            .await
    }

    /// Every source's pools; a name already taken (two unnamed datasources on one driver) gets
    /// the source's position, so that each pool has its own metrics.
    fn pools(&self) -> Vec<crate::datasource::NamedPool> {
        let mut out: Vec<crate::datasource::NamedPool> = Vec::new();
        for (index, source) in self.sources.iter().enumerate() {
            for mut pool in source.pools() {
                if out.iter().any(|p| p.name == pool.name) {
                    pool.name = format!("{}#{index}", pool.name);
                }
                out.push(pool);
            }
        }
        out
    }
}
