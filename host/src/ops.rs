//! The operations layer: what a caller can do with the served data (list, count, get, create,
//! update, delete, export, relations, actions and their forms), knowing nothing of HTTP.
//!
//! Every surface is a thin adapter over it: `http` (`/forest`, `/v1`) parses a request into one
//! of the typed requests below and renders the typed answer on the wire; the workflow engine
//! and MCP call the same functions. Each operation takes the [`Caller`] first and a request
//! already parsed, authorizes it in one place (the collection right, the browse right with its
//! live-query segment, relation reads, then the caller's scope), starts its activity entry
//! itself, and returns a typed result or one [`Error`].
//!
//! Dependency rules (checked by `host/tests/layers.rs`): `ops` never names axum nor `http`;
//! `workflows` and `mcp` never name `http`.
//!
//! [`Caller`]: crate::datasource::Caller

pub mod actions;
pub(crate) mod activity;
pub mod approvals;
pub mod audit;
pub mod charts;
pub mod dashboard;
mod error;
pub mod export;
pub mod logs;
pub mod no_code;
pub mod notes;
pub mod permission;
pub mod records;
pub mod relations;
pub mod rights;
#[cfg(test)]
mod tests;
pub mod tokens;
pub mod users;

use std::collections::BTreeSet;
use std::sync::Arc;

pub use error::{Error, Public, Result, UNEXPECTED};

use crate::auth::Permissions;
use crate::customizer::WorkflowSteps;
use crate::datasource::{CollectionSchema, DataSource, DataSourceSchema};
use crate::platform::{ActivityLog, Store};

/// What operations work with: one generation of the served stack and the services every
/// surface shares. A plugin reload builds a new one (with its new stack), so an operation's
/// `datasource` never changes under it.
#[derive(Clone)]
pub struct Ops {
    /// The customized stack over the composite of every configured datasource.
    pub datasource: Arc<dyn DataSource>,
    /// The permission checks (§5), shared by every generation.
    pub permissions: Arc<Permissions>,
    /// The activity logger, shared by every generation; disabled over a bare stack.
    pub activity: ActivityLog,
    /// Canopy's own store; `None` over a bare stack (route tests).
    pub store: Option<Store>,
    /// The audit trail's store (`auditTrail`); `None` when the trail is off.
    pub audit: Option<Arc<crate::platform::audit::AuditStore>>,
    /// `maxPageSize`: the largest page of a list.
    pub max_page_size: u64,
    /// `limitExportSize`: most records per CSV export.
    pub limit_export_size: Option<u64>,
    /// The workflow step handlers this generation's plugins declare, by (plugin, handler name).
    pub workflow_steps: Arc<WorkflowSteps>,
    /// The names of this generation's plugins, which workflow plugin steps may name.
    pub plugin_names: Arc<BTreeSet<String>>,
    /// `[[dashboard.chart]]`: the charts of the console's dashboards (`dashboard`).
    pub dashboard: Arc<Vec<crate::config::ChartDefinition>>,
    /// `experimental`: the config file's no-code actions and the switches of each type
    /// (`no_code`).
    pub no_code: Arc<crate::config::ExperimentalConfig>,
}

impl Ops {
    /// Operations over `datasource`, with every permission allowed and no store (a bare stack);
    /// the composition root sets the shared services.
    pub fn new(datasource: Arc<dyn DataSource>, max_page_size: u64) -> Self {
        Self {
            datasource,
            permissions: Arc::new(Permissions::allow_all()),
            activity: ActivityLog::disabled(),
            store: None,
            audit: None,
            max_page_size,
            limit_export_size: None,
            workflow_steps: Arc::default(),
            plugin_names: Arc::default(),
            dashboard: Arc::default(),
            no_code: Arc::default(),
        }
    }

    /// The served schema.
    pub fn schema(&self) -> &DataSourceSchema {
        self.datasource.schema()
    }

    /// A served collection's schema; an unknown name is [`Error::NotFound`].
    pub fn collection(&self, name: &str) -> Result<&CollectionSchema> {
        served(self.schema(), name)
    }

    /// Refuses a page larger than `maxPageSize`: a client asking for a billion records at once
    /// would make the server read and serialize a whole table in one answer.
    pub fn check_page_size(
        &self,
        request: &crate::agent::query_string::RequestFilter,
    ) -> std::result::Result<(), crate::agent::Error> {
        match &request.filter.page {
            Some(page) if page.limit > self.max_page_size => {
                Err(crate::agent::Error::validation(format!(
                    "Invalid pagination: page[size] {} is above the maximum of {} (maxPageSize)",
                    page.limit, self.max_page_size
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The schema of a served collection; an unknown name is [`Error::NotFound`] (on `/forest`, a
/// path without a route: the agent registers routes per collection).
pub fn served<'a>(schema: &'a DataSourceSchema, name: &str) -> Result<&'a CollectionSchema> {
    schema.collections.get(name).ok_or(Error::NotFound)
}

/// Where operations find the generation currently served: the workflow engine loads it at each
/// step, so a plugin reload reaches runs already under way. `http` implements it for its
/// swapped state; a test may give a fixed one.
pub trait Generations: Send + Sync + 'static {
    /// The operations of the generation served now.
    fn current(&self) -> Arc<Ops>;
}

impl Generations for Arc<Ops> {
    fn current(&self) -> Arc<Ops> {
        Arc::clone(self)
    }
}
