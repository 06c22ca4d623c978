//! What a collection is (schema, records, condition trees, filters, projections, aggregations,
//! the `Caller`) and the traits every datasource and decorator implements. `sql` is the SQL
//! implementation over sqlx and the only code that writes SQL for user data.

pub mod action;
mod caller;
pub mod chart;
mod composite;
mod error;
pub mod query;
mod record;
pub mod schema;
pub mod sql;

use std::sync::Arc;

use async_trait::async_trait;

pub use action::{ActionResult, ActionSchema, FormElement, FormPhase, FormValues};
pub use caller::{Caller, PermissionLevel};
pub use chart::{ChartRequest, ChartResult};
pub use composite::CompositeDataSource;
pub use error::{ConstraintViolation, Error, Result};
pub use query::{
    AggregateResult, Aggregation, AggregationOperation, Aggregator, ConditionTree, DateOperation,
    Filter, Group, Leaf, Operator, Page, Projection, Sort, SortClause,
};
pub use record::{
    Record, Value, decode_binary, format_datetime, pack_id, pack_id_with, parse_datetime,
    push_datetime, unpack_id,
};
// Records that share their names (the rows of a result set), for tests outside this module.
#[cfg(test)]
pub(crate) use record::RecordShape;
pub use schema::{
    CollectionSchema, ColumnSchema, ColumnType, DataSourceSchema, FieldSchema, PrimitiveType,
    RelationSchema,
};

/// One collection: its schema and the five data operations. Decorators wrap a `dyn Collection`
/// and override only what they change.
#[async_trait]
pub trait Collection: Send + Sync {
    fn schema(&self) -> &CollectionSchema;

    /// Records matching the filter (sorted and paged as it says), shaped by the projection:
    /// root columns as values, to-one relations as nested records (or `Null`).
    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>>;

    /// Aggregates matching rows; `limit` bounds the number of groups (leaderboards).
    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>>;

    /// Inserts records and returns them as stored (with generated keys and defaults).
    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>>;

    /// Applies the patch to every record matching the filter.
    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()>;

    /// Deletes every record matching the filter.
    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()>;

    /// Runs the action `name` (one of `schema().actions`) on the records of `filter` with the
    /// submitted form values. Collections without actions refuse every name.
    async fn execute(
        &self,
        _caller: &Caller,
        name: &str,
        _filter: &Filter,
        _values: &FormValues,
    ) -> Result<ActionResult> {
        Err(Error::validation(format!("Action '{name}' is not defined")))
    }

    /// The form of the action `name`, resolved for these values and this phase.
    async fn get_form(
        &self,
        _caller: &Caller,
        name: &str,
        _filter: &Filter,
        _values: &FormValues,
        _phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        Err(Error::validation(format!("Action '{name}' is not defined")))
    }

    /// Renders the collection chart `name` (one of `schema().charts`) for a record.
    async fn render_chart(
        &self,
        _caller: &Caller,
        name: &str,
        _request: &ChartRequest,
    ) -> Result<ChartResult> {
        Err(Error::validation(format!("Chart '{name}' is not defined")))
    }
}

/// A set of collections served together, plus native queries on its connection.
#[async_trait]
pub trait DataSource: Send + Sync {
    /// The schema of every collection, used to resolve relation paths.
    fn schema(&self) -> &DataSourceSchema;

    fn collection(&self, name: &str) -> Result<Arc<dyn Collection>>;

    /// Names of the connections that accept native queries (`nativeQueryConnections`).
    fn native_query_connections(&self) -> Vec<String>;

    /// Runs a single read-only `SELECT` with named variables bound as parameters (`$name` in the
    /// query). Anything else is refused with `Error::Unprocessable`.
    async fn native_query(
        &self,
        caller: &Caller,
        connection: &str,
        query: &str,
        variables: &indexmap::IndexMap<String, Value>,
    ) -> Result<Vec<Record>>;

    /// Renders the datasource chart `name` (one of `schema().charts`).
    async fn render_chart(
        &self,
        _caller: &Caller,
        name: &str,
        _request: &ChartRequest,
    ) -> Result<ChartResult> {
        Err(Error::validation(format!("Chart '{name}' is not defined")))
    }

    /// The connection pools this datasource reads through, named: `/readyz` pings each, and
    /// `/metrics` shows their use. None for a datasource without a database of its own.
    fn pools(&self) -> Vec<NamedPool> {
        Vec::new()
    }
}

/// A database connection pool under a datasource, by the name operators know it by (the
/// datasource's `connectionName`, else its driver).
#[derive(Debug, Clone)]
pub struct NamedPool {
    pub name: String,
    pub pool: sql::Pool,
}
