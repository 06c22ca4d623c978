//! The customizer: the declarations customizations produce ([`Customization`]), the handler
//! traits they implement ([`handlers`]), and the ordered decorator stack that turns a datasource
//! plus a list of customizations into the customized datasource the agent serves (`stack`).
//!
//! Nothing here names wasmtime: `plugins` implements the handler traits over components, and the
//! tests implement them with closures ([`closures`]).

mod action;
mod action_audit;
pub mod audit;
mod binary;
mod chart;
pub mod closures;
mod computed;
pub mod handlers;
mod hook;
mod import_field;
mod operator;
mod overrides;
mod publication;
mod relation;
mod rename;
mod schema;
mod search;
mod segment;
mod sort;
mod stack;
#[cfg(test)]
mod test_support;
mod validation;
mod write;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value as Json;

use crate::datasource::action::{ActionScope, FormElement};
use crate::datasource::{ColumnType, ConditionTree, Operator, SortClause};
pub use audit::{AuditRecorder, AuditTrail};
pub use handlers::{
    ActionContext, ActionHandler, Batch, ChartHandler, Column, ComputeHandler, Context, HookData,
    HookHandler, HookOperation, HookPosition, OperatorHandler, OverrideHandler, SearchHandler,
    SegmentHandler, WorkflowStepHandler, WorkflowStepInput, WorkflowStepOutput, WriteAction,
    WriteContext, WriteHandler,
};
pub use stack::{StackOptions, build_stack, build_stack_with};

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
    /// `addManyToOneRelation`, `addOneToManyRelation`, `addOneToOneRelation`,
    /// `addManyToManyRelation`: a relation emulated over the collections' own keys (§8.4), also
    /// between collections of different datasources.
    Relation {
        name: String,
        definition: RelationDefinition,
    },
    /// `importField(name, {path, readonly?})`: the column at a to-one `:` path, as a field of
    /// this collection (§8.2); writable unless the source is read-only or `readonly` is set.
    ImportField {
        name: String,
        path: String,
        /// `None`: follow the source; `Some(false)` on a read-only source is refused.
        readonly: Option<bool>,
    },
    /// `renameField(old, new)`: the field is exposed as `to` (§8.3); customizations keep using
    /// `from`.
    RenameField { from: String, to: String },
    /// `removeField(name)`: hidden from the exposed schema, still usable by customizations.
    RemoveField { name: String },
    /// `removeCollection()`: hidden from the exposed schema with every relation to it, still
    /// usable by customizations.
    RemoveCollection,
    /// `addFieldValidation(field, operator, value?)` (§8.12).
    Validation {
        field: String,
        operator: Operator,
        value: Option<Json>,
    },
    /// `setFieldNullable(field)`: drops `Present` and allows null.
    Nullable { field: String },
    /// `replaceFieldWriting(field, (value, ctx) => patch)` (§8.11); marks the field writable.
    Writing {
        field: String,
        handler: Arc<dyn WriteHandler>,
    },
    /// `replaceFieldBinaryMode(field, 'datauri' | 'hex')`.
    BinaryMode { field: String, mode: BinaryMode },
    /// `emulateFieldSorting`, `replaceFieldSorting`, `disableFieldSorting` (§8.8).
    Sorting { field: String, mode: SortingMode },
    /// `emulateFieldFiltering`, `emulateFieldOperator`, `replaceFieldOperator` (§8.8).
    Filtering { field: String, mode: FilteringMode },
    /// `overrideCreate`, `overrideUpdate`, `overrideDelete`: the handler replaces the operation.
    Override {
        operation: OverrideOperation,
        handler: Arc<dyn OverrideHandler>,
    },
    /// `disableCount()`: `countable: false`, the count route answers `deactivated`.
    DisableCount,
    /// A workflow-step handler (`plugin` steps of workflow definitions name it by the plugin, the
    /// customization's `origin`, and `name`). Declared on no collection; the stack ignores it, and
    /// [`workflow_steps`] collects it for the workflow engine.
    WorkflowStep {
        name: String,
        handler: Arc<dyn WorkflowStepHandler>,
    },
}

/// A relation added by a customization; `None` targets default to the first primary key of the
/// collection they belong to (§8.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelationDefinition {
    ManyToOne {
        foreign_collection: String,
        foreign_key: String,
        foreign_key_target: Option<String>,
    },
    OneToMany {
        foreign_collection: String,
        origin_key: String,
        origin_key_target: Option<String>,
    },
    OneToOne {
        foreign_collection: String,
        origin_key: String,
        origin_key_target: Option<String>,
    },
    ManyToMany {
        foreign_collection: String,
        through_collection: String,
        origin_key: String,
        foreign_key: String,
        origin_key_target: Option<String>,
        foreign_key_target: Option<String>,
    },
}

/// How a binary column crosses the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryMode {
    /// `data:<mime>;base64,…` (the default for columns that are not keys).
    DataUri,
    /// Lowercase hex (the default for primary and foreign keys).
    Hex,
}

/// How sorting on a field is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortingMode {
    /// Sorted in memory: every matching record is fetched (up to the emulation row limit).
    Emulate,
    /// Sorting on the field sorts by these clauses instead (inverted when descending).
    Replace(Vec<SortClause>),
    /// `isSortable: false` in the schema.
    Disable,
}

/// How filtering on a field is answered.
#[derive(Clone)]
pub enum FilteringMode {
    /// Every operator of the column type that is not native, answered in memory.
    EmulateAll,
    /// One operator, answered in memory.
    Emulate(Operator),
    /// One operator, rewritten into the tree the handler returns for the leaf's value.
    Replace(Operator, Arc<dyn OperatorHandler>),
}

impl fmt::Debug for FilteringMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmulateAll => f.write_str("EmulateAll"),
            Self::Emulate(op) => write!(f, "Emulate({op:?})"),
            Self::Replace(op, _) => write!(f, "Replace({op:?})"),
        }
    }
}

/// Which write an override replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideOperation {
    Create,
    Update,
    Delete,
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
            Self::Relation { name, definition } => write!(f, "Relation({name}, {definition:?})"),
            Self::ImportField { name, path, .. } => write!(f, "ImportField({name} <- {path})"),
            Self::RenameField { from, to } => write!(f, "RenameField({from} -> {to})"),
            Self::RemoveField { name } => write!(f, "RemoveField({name})"),
            Self::RemoveCollection => f.write_str("RemoveCollection"),
            Self::Validation {
                field, operator, ..
            } => write!(f, "Validation({field} {operator:?})"),
            Self::Nullable { field } => write!(f, "Nullable({field})"),
            Self::Writing { field, .. } => write!(f, "Writing({field})"),
            Self::BinaryMode { field, mode } => write!(f, "BinaryMode({field}, {mode:?})"),
            Self::Sorting { field, mode } => write!(f, "Sorting({field}, {mode:?})"),
            Self::Filtering { field, mode } => write!(f, "Filtering({field}, {mode:?})"),
            Self::Override { operation, .. } => write!(f, "Override({operation:?})"),
            Self::DisableCount => f.write_str("DisableCount"),
            Self::WorkflowStep { name, .. } => write!(f, "WorkflowStep({name})"),
        }
    }
}

/// Workflow-step handlers by (plugin, handler name).
pub type WorkflowSteps = BTreeMap<(String, String), Arc<dyn WorkflowStepHandler>>;

/// The workflow-step handlers among `customizations`, by (plugin, handler name): what
/// `AppState::workflow_steps` holds. The same pair declared twice (twice by one plugin, or by two
/// applications of the same plugin) is refused: a workflow must name exactly one handler.
pub fn workflow_steps(customizations: &[Customization]) -> Result<WorkflowSteps, String> {
    let mut steps = BTreeMap::new();
    for c in customizations {
        let Kind::WorkflowStep { name, handler } = &c.kind else {
            continue;
        };
        let key = (c.origin.clone(), name.clone());
        if steps.insert(key, Arc::clone(handler)).is_some() {
            return Err(format!(
                "plugin `{}` declares the workflow step `{name}` more than once (a plugin applied \
                 several times declares its steps in each application: declare them in one)",
                c.origin
            ));
        }
    }
    Ok(steps)
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
