//! The customizer: the declarations customizations produce ([`Customization`]), the handler
//! traits they implement ([`handlers`]), and the ordered decorator stack that turns a datasource
//! plus a list of customizations into the customized datasource the agent serves (`stack`).
//!
//! Nothing here names wasmtime: `plugins` implements the handler traits over components, and the
//! tests implement them with closures ([`closures`]).

mod action;
mod chart;
pub mod closures;
mod computed;
pub mod handlers;
mod hook;
mod search;
mod segment;
mod stack;

use std::fmt;
use std::sync::Arc;

use serde_json::Value as Json;

use crate::datasource::action::{ActionScope, FormElement};
use crate::datasource::{ColumnType, ConditionTree};
pub use handlers::{
    ActionContext, ActionHandler, Batch, ChartHandler, Column, ComputeHandler, Context, HookData,
    HookHandler, HookOperation, HookPosition, SearchHandler, SegmentHandler,
};
pub use stack::build_stack;

/// One customization declared by a plugin (or a test).
#[derive(Clone)]
pub struct Customization {
    /// Who declared it (the plugin's name), for startup errors and logs.
    pub origin: String,
    /// The customized collection; `None` for datasource-level customizations (charts).
    pub collection: Option<String>,
    pub kind: Kind,
}

impl Customization {
    /// A customization of `collection`.
    pub fn collection(
        origin: impl Into<String>,
        collection: impl Into<String>,
        kind: Kind,
    ) -> Self {
        Self {
            origin: origin.into(),
            collection: Some(collection.into()),
            kind,
        }
    }

    /// A datasource-level customization (a dashboard chart).
    pub fn datasource(origin: impl Into<String>, kind: Kind) -> Self {
        Self {
            origin: origin.into(),
            collection: None,
            kind,
        }
    }
}

impl fmt::Debug for Customization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Customization")
            .field("origin", &self.origin)
            .field("collection", &self.collection)
            .field("kind", &self.kind)
            .finish()
    }
}

/// What a customization adds, with its static definition and its handler.
#[derive(Clone)]
pub enum Kind {
    /// `addField(name, {columnType, dependencies, getValues, defaultValue?, enumValues?})`.
    ComputedField {
        name: String,
        column_type: ColumnType,
        /// Columns or `relation:column` paths through to-one relations; may name other computed
        /// fields (of this collection or, through a relation, of another).
        dependencies: Vec<String>,
        default_value: Option<Json>,
        enum_values: Option<Vec<String>>,
        handler: Arc<dyn ComputeHandler>,
    },
    /// `addAction(name, {scope, form?, execute, generateFile?, description?, submitButtonLabel?})`.
    Action {
        name: String,
        scope: ActionScope,
        generate_file: bool,
        description: Option<String>,
        submit_button_label: Option<String>,
        /// The form when it has no dynamic part; `None` when the handler computes it.
        static_form: Option<Vec<FormElement>>,
        handler: Arc<dyn ActionHandler>,
    },
    /// `addHook(position, type, handler)`.
    Hook {
        position: HookPosition,
        operation: HookOperation,
        handler: Arc<dyn HookHandler>,
    },
    /// `addSegment(name, tree | ctx => tree)`.
    Segment { name: String, source: SegmentSource },
    /// `replaceSearch(…)` or `disableSearch()`.
    Search(SearchMode),
    /// `addChart(name, handler)`, on a collection or on the datasource.
    Chart {
        name: String,
        handler: Arc<dyn ChartHandler>,
    },
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ComputedField {
                name, dependencies, ..
            } => write!(f, "ComputedField({name}, deps {dependencies:?})"),
            Self::Action { name, scope, .. } => write!(f, "Action({name}, {scope:?})"),
            Self::Hook {
                position,
                operation,
                ..
            } => write!(f, "Hook({position:?} {operation:?})"),
            Self::Segment { name, .. } => write!(f, "Segment({name})"),
            Self::Search(mode) => write!(f, "Search({mode:?})"),
            Self::Chart { name, .. } => write!(f, "Chart({name})"),
        }
    }
}

/// Where a segment's condition tree comes from.
#[derive(Clone)]
pub enum SegmentSource {
    /// A fixed tree, in the field names of the collection.
    Static(ConditionTree),
    /// Computed per request from the context.
    Dynamic(Arc<dyn SegmentHandler>),
}

/// How a collection is searched.
#[derive(Clone)]
pub enum SearchMode {
    /// `disableSearch()`: the collection is not searchable (the agent answers 400 to `search`).
    Disabled,
    /// `replaceSearch` with a field selection (spec search rules 1–4).
    Fields(FieldSelection),
    /// `replaceSearch(handler)` (rules 5–6).
    Handler(Arc<dyn SearchHandler>),
}

impl fmt::Debug for SearchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disabled => f.write_str("Disabled"),
            Self::Fields(s) => write!(f, "Fields({s:?})"),
            Self::Handler(_) => f.write_str("Handler"),
        }
    }
}

/// The fields a search looks at: `onlyFields` replaces the default set, `includeFields` adds to
/// it, `excludeFields` removes from it; paths cross relations with `:` at any depth.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelection {
    pub only: Option<Vec<String>>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

#[cfg(test)]
mod tests;
