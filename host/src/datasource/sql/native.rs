//! Native queries: one read-only SELECT with bound variables.

use indexmap::IndexMap;

use super::Shared;
use crate::datasource::{Error, Record, Result, Value};

pub(crate) async fn run(_shared: &Shared, _query: &str, _variables: &IndexMap<String, Value>) -> Result<Vec<Record>> {
    Err(Error::Internal("not implemented yet".into()))
}
