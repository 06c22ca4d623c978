//! `SqlCollection`: the `Collection` operations over one table.

use std::sync::Arc;

use async_trait::async_trait;

use super::Shared;
use crate::datasource::{
    AggregateResult, Aggregation, Caller, Collection, CollectionSchema, Error, Filter, Projection,
    Record, Result,
};

/// One served table or view.
pub struct SqlCollection {
    shared: Arc<Shared>,
    name: String,
}

impl SqlCollection {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        Self { shared, name }
    }
}

#[async_trait]
impl Collection for SqlCollection {
    fn schema(&self) -> &CollectionSchema {
        &self.shared.schema.collections[&self.name]
    }

    async fn list(&self, _caller: &Caller, _filter: &Filter, _projection: &Projection) -> Result<Vec<Record>> {
        Err(Error::Internal("not implemented yet".into()))
    }

    async fn aggregate(
        &self,
        _caller: &Caller,
        _filter: &Filter,
        _aggregation: &Aggregation,
        _limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        Err(Error::Internal("not implemented yet".into()))
    }

    async fn create(&self, _caller: &Caller, _records: Vec<Record>) -> Result<Vec<Record>> {
        Err(Error::Internal("not implemented yet".into()))
    }

    async fn update(&self, _caller: &Caller, _filter: &Filter, _patch: &Record) -> Result<()> {
        Err(Error::Internal("not implemented yet".into()))
    }

    async fn delete(&self, _caller: &Caller, _filter: &Filter) -> Result<()> {
        Err(Error::Internal("not implemented yet".into()))
    }
}
