//! The handler traits that customizations implement, and the contexts they receive.
//!
//! `plugins` implements these traits over WebAssembly components; tests implement them with
//! closures (see [`closures`](super::closures)). Every method takes the request's `&Caller`
//! first, is object-safe, and returns the datasource layer's `Result`: a handler's error is the
//! request's error (`Error::Validation` → 400, `Forbidden` → 403, `Unprocessable` → 422,
//! `Internal` → 500).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value as Json;

use super::action::NO_RECORD;
use crate::datasource::action::{ActionResult, ActionScope, FormElement, FormPhase, FormValues};
use crate::datasource::chart::{ChartRequest, ChartResult};
use crate::datasource::{
    AggregateResult, Aggregation, Caller, ColumnType, ConditionTree, DataSource, Error, Filter,
    Projection, Record, Result, Value,
};

/// Where a handler runs: its collection (none for datasource charts) and the datasource it may
/// call back into.
///
/// `datasource` is the stack **below** the layer that calls the handler, as in the Node agent
/// (`ctx.collection` is the decorator's child): a Before List hook that lists its own collection
/// does not call itself again, and writes made from an action do not run the public hooks
/// (§8.6). Callbacks run with the request's caller, so they see what it may see.
#[derive(Clone)]
pub struct Context {
    pub collection: Option<String>,
    pub datasource: Arc<dyn DataSource>,
}

impl Context {
    /// The collection of this context, from its datasource.
    pub fn collection(&self) -> Result<Arc<dyn crate::datasource::Collection>> {
        let name = self.collection.as_deref().ok_or_else(|| {
            Error::Internal("a datasource-level context has no collection".into())
        })?;
        self.datasource.collection(name)
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("collection", &self.collection)
            .finish_non_exhaustive()
    }
}

// ------------------------------------------------------------------------------------------------
// Computed fields

/// One dependency of a computed field, for every row of a batch: the typed values of one path.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The dependency path as declared (`price`, `customer:firstName`).
    pub path: String,
    pub column_type: ColumnType,
    /// One value per row; `Null` where a relation on the way is null.
    pub values: Vec<Value>,
}

/// The rows a computed field is computed for, as columns (one typed list per dependency),
/// de-duplicated: two records with the same dependency values are one row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Batch {
    /// Number of rows; every column has this many values.
    pub len: usize,
    pub columns: Vec<Column>,
}

impl Batch {
    /// The values of one dependency.
    pub fn column(&self, path: &str) -> Option<&[Value]> {
        self.columns
            .iter()
            .find(|c| c.path == path)
            .map(|c| c.values.as_slice())
    }

    /// Row `i` as a record keyed by dependency path (a convenience for closures and tests).
    pub fn row(&self, i: usize) -> Record {
        self.columns
            .iter()
            .map(|c| {
                (
                    c.path.as_str(),
                    c.values.get(i).cloned().unwrap_or(Value::Null),
                )
            })
            .collect()
    }
}

/// `getValues` of a computed field (`addField`).
#[async_trait]
pub trait ComputeHandler: Send + Sync {
    /// One value per row of `batch`, in order. Called once per field per request.
    async fn compute(&self, caller: &Caller, ctx: &Context, batch: &Batch) -> Result<Vec<Value>>;
}

// ------------------------------------------------------------------------------------------------
// Actions

/// What an action handler knows about its call: the action, the selected records and the form.
#[derive(Debug, Clone)]
pub struct ActionContext {
    pub base: Context,
    pub action: String,
    pub scope: ActionScope,
    /// The selection (ids, or all records minus exclusions, ∧ the subset query, ∧ the scope).
    /// Matches everything for `Global` actions.
    pub filter: Filter,
    /// The form values so far, by field id (wire form: packed ids, data URIs).
    pub form_values: FormValues,
    /// The field whose change triggered a `hooks/change` (`hasFieldChanged`).
    pub changed_field: Option<String>,
}

impl ActionContext {
    /// `hasFieldChanged(id)`.
    pub fn has_field_changed(&self, id: &str) -> bool {
        self.changed_field.as_deref() == Some(id)
    }

    /// `getRecords(fields)`: the selected records, one `list` call.
    pub async fn get_records(&self, caller: &Caller, fields: &[&str]) -> Result<Vec<Record>> {
        let collection = self.base.collection()?;
        let filter = Filter {
            sort: Default::default(),
            page: None,
            ..self.filter.clone()
        };
        collection
            .list(caller, &filter, &Projection::new(fields.iter().copied()))
            .await
    }

    /// `getCompositeRecordIds()`: the primary key values of every selected record.
    pub async fn get_composite_record_ids(&self, caller: &Caller) -> Result<Vec<Vec<Value>>> {
        let collection = self.base.collection()?;
        let keys: Vec<String> = collection
            .schema()
            .primary_keys()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let fields: Vec<&str> = keys.iter().map(String::as_str).collect();
        let records = self.get_records(caller, &fields).await?;
        Ok(records
            .iter()
            .map(|r| {
                keys.iter()
                    .map(|k| r.get(k).cloned().unwrap_or(Value::Null))
                    .collect()
            })
            .collect())
    }

    /// `getRecordIds()`: the packed ids (`1`, `1|2` for composite keys) of the selection, with
    /// the keys in their wire form, as the client sees them (a MariaDB decimal key `12.30` is
    /// `12.3`, a binary key hex).
    pub async fn get_record_ids(&self, caller: &Caller) -> Result<Vec<String>> {
        let collection = self.base.collection()?;
        let keys: Vec<String> = collection
            .schema()
            .primary_keys()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let fields: Vec<&str> = keys.iter().map(String::as_str).collect();
        let records = self.get_records(caller, &fields).await?;
        records
            .iter()
            .map(|r| crate::agent::wire::pack_id(collection.schema(), r))
            .collect()
    }

    /// `getRecord(fields)` (Single scope): the one selected record; an error when none matches.
    pub async fn get_record(&self, caller: &Caller, fields: &[&str]) -> Result<Record> {
        self.get_records(caller, fields)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::validation(NO_RECORD))
    }

    /// `getRecordId()` (Single scope).
    pub async fn get_record_id(&self, caller: &Caller) -> Result<String> {
        self.get_record_ids(caller)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::validation(NO_RECORD))
    }

    /// `getCompositeRecordId()` (Single scope): the key values of the one selected record.
    pub async fn get_composite_record_id(&self, caller: &Caller) -> Result<Vec<Value>> {
        self.get_composite_record_ids(caller)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::validation(NO_RECORD))
    }

    /// `getField(path)` (Single scope): one field (or `relation:field` path) of the one selected
    /// record; `Null` where a relation on the way is null.
    pub async fn get_field(&self, caller: &Caller, path: &str) -> Result<Value> {
        let record = self.get_record(caller, &[path]).await?;
        Ok(record.get_path(path).cloned().unwrap_or(Value::Null))
    }
}

/// An action (`addAction`): its form (when dynamic) and its `execute`.
#[async_trait]
pub trait ActionHandler: Send + Sync {
    /// The resolved form for this phase: `if` applied (except at `Execute`), dynamic `value`,
    /// `enumValues` and `options` evaluated, `watch_changes` set on the fields a dynamic
    /// property read. For `Search`, only the searched field. Not called when the action has a
    /// static form.
    async fn form(
        &self,
        caller: &Caller,
        ctx: &ActionContext,
        phase: &FormPhase,
    ) -> Result<Vec<FormElement>>;

    /// Runs the action. `ctx.form_values` holds the submitted values.
    async fn execute(&self, caller: &Caller, ctx: &ActionContext) -> Result<ActionResult>;
}

// ------------------------------------------------------------------------------------------------
// Hooks

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookPosition {
    Before,
    After,
}

/// Which operation a hook runs around.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookOperation {
    List,
    Create,
    Update,
    Delete,
    Aggregate,
}

/// The inputs (and, for After hooks, the outputs) of an operation, as a hook sees them.
///
/// Before hooks may change `Create::records` and `Update::patch` in place; the operation then
/// runs with the changed values. Filters, projections and aggregations are read-only (§8.6):
/// changes to them are ignored. After hooks receive the same objects plus the result.
#[derive(Debug, Clone, PartialEq)]
pub enum HookData {
    List {
        filter: Filter,
        projection: Projection,
        /// The listed records (After only).
        records: Option<Vec<Record>>,
    },
    Create {
        /// The records to create (Before: mutable).
        records: Vec<Record>,
        /// The created records (After only).
        created: Option<Vec<Record>>,
    },
    Update {
        filter: Filter,
        /// The patch (Before: mutable).
        patch: Record,
    },
    Delete {
        filter: Filter,
    },
    Aggregate {
        filter: Filter,
        aggregation: Aggregation,
        limit: Option<u64>,
        /// The result (After only).
        result: Option<Vec<AggregateResult>>,
    },
}

impl HookData {
    /// The operation this data belongs to.
    pub fn operation(&self) -> HookOperation {
        match self {
            Self::List { .. } => HookOperation::List,
            Self::Create { .. } => HookOperation::Create,
            Self::Update { .. } => HookOperation::Update,
            Self::Delete { .. } => HookOperation::Delete,
            Self::Aggregate { .. } => HookOperation::Aggregate,
        }
    }
}

/// A hook (`addHook(position, type, handler)`). An error from a Before hook stops the operation
/// with that error; an error from an After hook fails the request after the operation ran.
#[async_trait]
pub trait HookHandler: Send + Sync {
    async fn run(
        &self,
        caller: &Caller,
        ctx: &Context,
        position: HookPosition,
        data: &mut HookData,
    ) -> Result<()>;
}

// ------------------------------------------------------------------------------------------------
// Workflow steps

/// What a workflow's `plugin` step hands its handler: the run's record (packed wire id) of
/// `collection`, the run's context so far (each earlier step's output under its key) and the
/// step's `settings` from the definition.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowStepInput {
    pub collection: String,
    pub record_id: String,
    pub context: Json,
    pub settings: Json,
}

/// A plugin step's answer: the option it chose (a step key the run goes to next; `None` follows
/// the step's `next`) and values kept in the run's context under the step's key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkflowStepOutput {
    pub option: Option<String>,
    pub values: serde_json::Map<String, Json>,
}

/// A workflow step handler declared by a plugin (`plugin` steps of workflow definitions name it
/// by plugin and handler name). Its callbacks run as the run's user.
#[async_trait]
pub trait WorkflowStepHandler: Send + Sync {
    async fn run(
        &self,
        caller: &Caller,
        ctx: &Context,
        input: &WorkflowStepInput,
    ) -> Result<WorkflowStepOutput>;
}

// ------------------------------------------------------------------------------------------------
// Segments, search, charts

/// A dynamic segment (`addSegment(name, ctx => tree)`).
#[async_trait]
pub trait SegmentHandler: Send + Sync {
    /// The segment's condition tree for this caller; `None` matches every record.
    async fn tree(&self, caller: &Caller, ctx: &Context) -> Result<Option<ConditionTree>>;
}

/// A search handler (`replaceSearch((text, extended, ctx) => tree)`).
#[async_trait]
pub trait SearchHandler: Send + Sync {
    /// The condition tree for the search text; `None` matches every record. `extended` is always
    /// false: extended search on a collection with a handler is refused before the call.
    async fn search(
        &self,
        caller: &Caller,
        ctx: &Context,
        text: &str,
        extended: bool,
    ) -> Result<Option<ConditionTree>>;
}

/// An API chart (`addChart`), of a collection (`request.record_id` set) or of the datasource.
#[async_trait]
pub trait ChartHandler: Send + Sync {
    async fn render(
        &self,
        caller: &Caller,
        ctx: &Context,
        request: &ChartRequest,
    ) -> Result<ChartResult>;
}

// ------------------------------------------------------------------------------------------------
// Writes, operators, overrides

/// Which write a `replaceFieldWriting` handler is called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAction {
    Create,
    Update,
}

/// What a write handler knows: the whole incoming record (create) or patch (update), and for
/// updates the filter of the records being changed.
#[derive(Debug, Clone)]
pub struct WriteContext {
    pub base: Context,
    pub action: WriteAction,
    pub record: Record,
    pub filter: Option<Filter>,
}

/// `replaceFieldWriting(field, (value, ctx) => patch | void)` (§8.11).
#[async_trait]
pub trait WriteHandler: Send + Sync {
    /// The patch that replaces `{field: value}` in the written record; `None` writes nothing for
    /// the field. A patch may name other fields (rewritten in turn) and to-one relations, as
    /// nested `Value::Record`s (nested writes).
    async fn write(
        &self,
        caller: &Caller,
        ctx: &WriteContext,
        value: &Value,
    ) -> Result<Option<Record>>;
}

/// `replaceFieldOperator(field, operator, (value, ctx) => tree)` (§8.8).
#[async_trait]
pub trait OperatorHandler: Send + Sync {
    /// The tree that replaces a leaf `field operator value`, in the field names of the
    /// collection (it may use other replaced or emulated operators).
    async fn replace(&self, caller: &Caller, ctx: &Context, value: &Value)
    -> Result<ConditionTree>;
}

/// `overrideCreate`, `overrideUpdate`, `overrideDelete` (§8.12). A customization declares one
/// operation; only that method is called, the others keep the defaults (an internal error).
#[async_trait]
pub trait OverrideHandler: Send + Sync {
    /// Creates `records` (already validated and rewritten); returns the created records, each
    /// with its primary key.
    async fn create(
        &self,
        _caller: &Caller,
        _ctx: &Context,
        _records: Vec<Record>,
    ) -> Result<Vec<Record>> {
        Err(Error::Internal(
            "this override does not replace create".into(),
        ))
    }

    async fn update(
        &self,
        _caller: &Caller,
        _ctx: &Context,
        _filter: &Filter,
        _patch: &Record,
    ) -> Result<()> {
        Err(Error::Internal(
            "this override does not replace update".into(),
        ))
    }

    async fn delete(&self, _caller: &Caller, _ctx: &Context, _filter: &Filter) -> Result<()> {
        Err(Error::Internal(
            "this override does not replace delete".into(),
        ))
    }
}
