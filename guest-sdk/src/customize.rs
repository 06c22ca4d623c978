//! The customizer a plugin writes against: [`DataSource`] and [`CollectionCustomizer`] declare
//! customizations and workflow steps, and [`Exports`] dispatches the host's handler calls to them.
//!
//! The handler table is built once per instance, on its first call, by running
//! [`Plugin::customize`], and kept in the instance for the calls that follow: the host reuses
//! warm instances for pure calls (computed fields, search, segments, charts), which then never
//! re-run `customize`, and gives others a fresh instance. Handler ids are positions in declaration
//! order, hence `customize` must be deterministic (same schema and options, same declarations).

use std::cell::{OnceCell, RefCell};
use std::marker::PhantomData;

use serde_json::{Map, Value, json};

use crate::action::{Action, ActionContext};
use crate::bindings::canopy::plugin::{environment, packed, types};
use crate::bindings::exports::canopy::plugin::customizer::Guest;
use crate::bindings::exports::canopy::plugin::workflow;
use crate::chart::{ChartContext, ChartResult};
use crate::data::{Column, Context, Rows};
use crate::error::{Error, Result};
use crate::hook::{HookContext, Operation, Position};
use crate::relation::{
    ExternalRelation, ManyToManyOptions, ManyToOneOptions, OneToManyOptions, OneToOneOptions,
};
use crate::workflow::{StepContext, StepOutput};
use crate::write::{BinaryMode, WriteContext};

/// A plugin: one type whose `customize` declares everything, exported with
/// [`crate::export_plugin!`].
pub trait Plugin {
    /// Declares the plugin's customizations on the datasource.
    fn customize(datasource: &mut DataSource) -> Result<()>;
}

/// The column type of a computed field.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnType {
    /// A primitive type: `String`, `Number`, `Boolean`, `Date`, `Dateonly`, `Time`, `Enum`,
    /// `Json`, `Uuid`, `Point`, `File`.
    Primitive(&'static str),
    /// A composite type in the agent's JSON form (`["String"]`, `{"street": "String"}`).
    Composite(Value),
}

impl ColumnType {
    /// `String`.
    pub const STRING: Self = Self::Primitive("String");
    /// `Number`.
    pub const NUMBER: Self = Self::Primitive("Number");
    /// `Boolean`.
    pub const BOOLEAN: Self = Self::Primitive("Boolean");
    /// `Date`.
    pub const DATE: Self = Self::Primitive("Date");
    /// `Dateonly`.
    pub const DATEONLY: Self = Self::Primitive("Dateonly");
    /// `Enum` (set the values with [`ComputedField::enum_values`]).
    pub const ENUM: Self = Self::Primitive("Enum");
    /// `Json`.
    pub const JSON: Self = Self::Primitive("Json");

    fn to_json(&self) -> Value {
        match self {
            Self::Primitive(p) => json!(p),
            Self::Composite(v) => v.clone(),
        }
    }
}

type ComputeFn = Box<dyn Fn(&Rows, &Context) -> Result<Column>>;

/// A computed field (`add_field`): its type, its dependencies (columns or relation paths such as
/// `customer:firstName`, possibly other computed fields) and the batch function.
pub struct ComputedField {
    column_type: ColumnType,
    dependencies: Vec<String>,
    default_value: Option<Value>,
    enum_values: Option<Vec<String>>,
    compute: ComputeFn,
}

impl ComputedField {
    /// A field computed by `f` from its dependencies. `f` receives the de-duplicated dependency
    /// rows of one request and returns one value per row, in order.
    pub fn new<S: Into<String>>(
        column_type: ColumnType,
        dependencies: impl IntoIterator<Item = S>,
        f: impl Fn(&Rows, &Context) -> Result<Column> + 'static,
    ) -> Self {
        Self {
            column_type,
            dependencies: dependencies.into_iter().map(Into::into).collect(),
            default_value: None,
            enum_values: None,
            compute: Box::new(f),
        }
    }

    /// The field's default value in the schema.
    pub fn default_value(mut self, value: Value) -> Self {
        self.default_value = Some(value);
        self
    }

    /// The values of an `Enum` field.
    pub fn enum_values<S: Into<String>>(mut self, values: impl IntoIterator<Item = S>) -> Self {
        self.enum_values = Some(values.into_iter().map(Into::into).collect());
        self
    }
}

type SegmentFn = Box<dyn Fn(&Context) -> Result<Value>>;

/// A segment: a static condition tree, or one computed from the context.
pub enum Segment {
    /// A condition tree in the agent's JSON shape.
    Static(Value),
    /// A function of the context returning a condition tree.
    Dynamic(SegmentFn),
}

impl Segment {
    /// A segment computed on each request.
    pub fn dynamic(f: impl Fn(&Context) -> Result<Value> + 'static) -> Self {
        Self::Dynamic(Box::new(f))
    }
}

impl From<Value> for Segment {
    fn from(tree: Value) -> Self {
        Self::Static(tree)
    }
}

type SearchFn = Box<dyn Fn(&str, bool, &Context) -> Result<Option<Value>>>;

/// A search replacement: a field selection (spec rules 1–4) or a handler (rules 5–6).
pub enum Search {
    /// `onlyFields`, `includeFields`, `excludeFields` (relation paths with `:`).
    Fields {
        /// Replaces the default set.
        only: Option<Vec<String>>,
        /// Added to the set.
        include: Vec<String>,
        /// Removed from the set.
        exclude: Vec<String>,
    },
    /// `(search text, extended) -> condition tree` (`None`: no condition).
    Handler(SearchFn),
}

impl Search {
    /// An empty field selection, refined with [`Self::only`], [`Self::include`], [`Self::exclude`].
    pub fn fields() -> Self {
        Self::Fields {
            only: None,
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }

    /// Searches only these fields.
    pub fn only<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        if let Self::Fields { only, .. } = &mut self {
            *only = Some(fields.into_iter().map(Into::into).collect());
        }
        self
    }

    /// Adds these fields to the searched set.
    pub fn include<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        if let Self::Fields { include, .. } = &mut self {
            include.extend(fields.into_iter().map(Into::into));
        }
        self
    }

    /// Removes these fields from the searched set.
    pub fn exclude<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        if let Self::Fields { exclude, .. } = &mut self {
            exclude.extend(fields.into_iter().map(Into::into));
        }
        self
    }

    /// A search computed by `f(text, extended, context)`.
    pub fn handler(f: impl Fn(&str, bool, &Context) -> Result<Option<Value>> + 'static) -> Self {
        Self::Handler(Box::new(f))
    }
}

type HookFn = Box<dyn Fn(&mut HookContext) -> Result<()>>;
type ChartFn = Box<dyn Fn(&ChartContext) -> Result<ChartResult>>;
type WriteFn = Box<dyn Fn(&Value, &WriteContext) -> Result<Option<Value>>>;
type OperatorFn = Box<dyn Fn(&Value, &Context) -> Result<Value>>;
type CreateFn = Box<dyn Fn(&[Value], &Context) -> Result<Vec<Value>>>;
type UpdateFn = Box<dyn Fn(&Value, &Value, &Context) -> Result<()>>;
type DeleteFn = Box<dyn Fn(&Value, &Context) -> Result<()>>;
type StepFn = Box<dyn Fn(&StepContext) -> Result<StepOutput>>;

enum Handler {
    None,
    Field(ComputeFn),
    Action(Action),
    Hook(Position, Operation, HookFn),
    Segment(SegmentFn),
    Search(SearchFn),
    Chart(ChartFn),
    Write(WriteFn),
    Operator(OperatorFn),
    OverrideCreate(CreateFn),
    OverrideUpdate(UpdateFn),
    OverrideDelete(DeleteFn),
    WorkflowStep(StepFn),
}

struct Declaration {
    collection: Option<String>,
    kind: types::Kind,
    name: String,
    definition: Value,
    /// Its position in the handler table.
    handler: u32,
}

/// What an instance builds from `customize`: every handler (customizations and workflow steps,
/// ids are positions) and the workflow steps' names with their ids.
struct Table {
    handlers: Vec<Handler>,
    steps: Vec<(String, u32)>,
}

/// The datasource being customized: the schema and options, collection customizers, and
/// datasource charts.
pub struct DataSource {
    schema: OnceCell<Value>,
    options: OnceCell<Value>,
    scope: OnceCell<Option<String>>,
    declarations: Vec<Declaration>,
    handlers: Vec<Handler>,
    steps: Vec<(String, u32)>,
}

impl DataSource {
    fn new(schema: Option<Value>, options: Option<Value>) -> Self {
        let cell = |v: Option<Value>| {
            let c = OnceCell::new();
            if let Some(v) = v {
                let _ = c.set(v);
            }
            c
        };
        Self {
            schema: cell(schema),
            options: cell(options),
            scope: OnceCell::new(),
            declarations: Vec::new(),
            handlers: Vec::new(),
            steps: Vec::new(),
        }
    }

    fn into_table(self) -> Table {
        Table {
            handlers: self.handlers,
            steps: self.steps,
        }
    }

    /// The datasource schema: `{"collections": [{"name", "fields": [{"name", "type", ...}]}]}`.
    /// Fetched from the host on first use.
    pub fn schema(&self) -> &Value {
        self.schema
            .get_or_init(|| serde_json::from_str(&environment::schema()).unwrap_or(Value::Null))
    }

    /// The plugin's options (the `[options]` table of its `.toml`), `{}` when none.
    pub fn options(&self) -> &Value {
        self.options.get_or_init(|| {
            serde_json::from_str(&environment::options()).unwrap_or_else(|_| json!({}))
        })
    }

    /// The collection this application of the plugin is scoped to: `Some` when it was applied
    /// to one collection (by another plugin's [`CollectionCustomizer::use_plugin`] or a
    /// `[[use]] collection = ".."` entry of its `.toml`), `None` when applied to the whole
    /// datasource. A plugin meant for one collection customizes `ds.collection(scope)`.
    pub fn scope(&self) -> Option<&str> {
        self.scope.get_or_init(environment::scope).as_deref()
    }

    /// The names of the datasource's collections.
    pub fn collection_names(&self) -> Vec<String> {
        self.schema()
            .get("collections")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A customizer for one collection.
    pub fn collection(&mut self, name: &str) -> CollectionCustomizer<'_> {
        CollectionCustomizer {
            datasource: self,
            name: name.to_owned(),
        }
    }

    /// Runs `f` on the customizer of one collection (the spec's `customizeCollection`).
    pub fn customize_collection(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut CollectionCustomizer<'_>),
    ) -> &mut Self {
        f(&mut self.collection(name));
        self
    }

    /// A datasource (dashboard) chart.
    pub fn add_chart(
        &mut self,
        name: &str,
        f: impl Fn(&ChartContext) -> Result<ChartResult> + 'static,
    ) -> &mut Self {
        self.declare(
            None,
            types::Kind::Chart,
            name,
            json!({}),
            Handler::Chart(Box::new(f)),
        );
        self
    }

    /// Hides a collection from the exposed schema (the agent's `removeCollection`), with every
    /// relation pointing to it; customizations and handlers still use it.
    pub fn remove_collection(&mut self, name: &str) -> &mut Self {
        self.declare(
            Some(name),
            types::Kind::RemoveCollection,
            "",
            json!({}),
            Handler::None,
        );
        self
    }

    /// Applies another plugin of the plugin directory (by its name, the file stem) to the whole
    /// datasource with `options` (the agent's `agent.use(plugin, options)`): the host runs its
    /// `customize` with these options, right after this plugin's, in declaration order.
    pub fn use_plugin(&mut self, name: &str, options: Value) -> &mut Self {
        self.declare(
            None,
            types::Kind::Use,
            name,
            use_definition(options),
            Handler::None,
        );
        self
    }

    /// Adds a workflow-step handler: a workflow definition's `plugin` step names it by this
    /// plugin's name (its file stem in the plugin directory) and `name`, and the engine calls
    /// `f` with the run's record, context and the step's settings, as the run's user. `f` decides
    /// ([`StepOutput::choose`] an option, the key of the next step) or computes
    /// ([`StepOutput::value`]s kept in the run's context under the step's key), or both.
    ///
    /// ```ignore
    /// ds.add_workflow_step("check-refund", |step| {
    ///     let order = step.get_record(&["status", "total"])?;
    ///     let limit = step.setting("limit").and_then(Value::as_f64).unwrap_or(100.0);
    ///     let total = order["total"].as_f64().unwrap_or(0.0);
    ///     let next = if total <= limit { "refund" } else { "escalate" };
    ///     Ok(StepOutput::choose(next).value("total", json!(total)))
    /// });
    /// ```
    ///
    /// Names are unique within a plugin: the host refuses a plugin declaring one twice (also
    /// when the plugin is applied several times, each application declaring it). The handler
    /// runs under `[limits] workflow_step_ms` (default 10 s) in a fresh instance.
    pub fn add_workflow_step(
        &mut self,
        name: &str,
        f: impl Fn(&StepContext) -> Result<StepOutput> + 'static,
    ) -> &mut Self {
        let id = self.handlers.len() as u32;
        self.handlers.push(Handler::WorkflowStep(Box::new(f)));
        self.steps.push((name.to_owned(), id));
        self
    }

    fn declare(
        &mut self,
        collection: Option<&str>,
        kind: types::Kind,
        name: &str,
        definition: Value,
        handler: Handler,
    ) {
        self.declarations.push(Declaration {
            collection: collection.map(str::to_owned),
            kind,
            name: name.to_owned(),
            definition,
            handler: self.handlers.len() as u32,
        });
        self.handlers.push(handler);
    }
}

/// Declares customizations on one collection; every method chains.
pub struct CollectionCustomizer<'a> {
    datasource: &'a mut DataSource,
    name: String,
}

impl CollectionCustomizer<'_> {
    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn declare(&mut self, kind: types::Kind, name: &str, definition: Value, handler: Handler) {
        let collection = self.name.clone();
        self.datasource
            .declare(Some(&collection), kind, name, definition, handler);
    }

    /// Adds a computed field.
    pub fn add_field(&mut self, name: &str, field: ComputedField) -> &mut Self {
        let definition = json!({
            "columnType": field.column_type.to_json(),
            "dependencies": field.dependencies,
            "defaultValue": field.default_value,
            "enumValues": field.enum_values,
        });
        self.declare(
            types::Kind::Field,
            name,
            definition,
            Handler::Field(field.compute),
        );
        self
    }

    /// Adds an action. A definition that cannot be described is logged and skipped.
    pub fn add_action(&mut self, name: &str, action: Action) -> &mut Self {
        match action.definition() {
            Ok(definition) => {
                self.declare(
                    types::Kind::Action,
                    name,
                    definition,
                    Handler::Action(action),
                );
            }
            Err(e) => crate::log(
                crate::Level::Error,
                &format!("action `{name}` skipped: {e}"),
            ),
        }
        self
    }

    /// Adds a hook; hooks of one position and operation run in declaration order.
    pub fn add_hook(
        &mut self,
        position: Position,
        operation: Operation,
        f: impl Fn(&mut HookContext) -> Result<()> + 'static,
    ) -> &mut Self {
        let definition = json!({"position": position.as_str(), "type": operation.as_str()});
        let name = format!("{} {}", position.as_str(), operation.as_str());
        self.declare(
            types::Kind::Hook,
            &name,
            definition,
            Handler::Hook(position, operation, Box::new(f)),
        );
        self
    }

    /// Adds a segment (a condition tree, or [`Segment::dynamic`]).
    pub fn add_segment(&mut self, name: &str, segment: impl Into<Segment>) -> &mut Self {
        match segment.into() {
            Segment::Static(tree) => {
                self.declare(
                    types::Kind::Segment,
                    name,
                    json!({"tree": tree}),
                    Handler::None,
                );
            }
            Segment::Dynamic(f) => {
                self.declare(types::Kind::Segment, name, json!({}), Handler::Segment(f));
            }
        }
        self
    }

    /// Replaces the collection's search.
    pub fn replace_search(&mut self, search: Search) -> &mut Self {
        match search {
            Search::Fields {
                only,
                include,
                exclude,
            } => {
                let definition =
                    json!({"onlyFields": only, "includeFields": include, "excludeFields": exclude});
                self.declare(types::Kind::Search, "", definition, Handler::None);
            }
            Search::Handler(f) => {
                self.declare(
                    types::Kind::Search,
                    "",
                    json!({"handler": true}),
                    Handler::Search(f),
                );
            }
        }
        self
    }

    /// Turns search off on the collection (searching answers 400).
    pub fn disable_search(&mut self) -> &mut Self {
        self.declare(types::Kind::DisableSearch, "", json!({}), Handler::None);
        self
    }

    /// Adds a record chart on the collection.
    pub fn add_chart(
        &mut self,
        name: &str,
        f: impl Fn(&ChartContext) -> Result<ChartResult> + 'static,
    ) -> &mut Self {
        self.declare(
            types::Kind::Chart,
            name,
            json!({}),
            Handler::Chart(Box::new(f)),
        );
        self
    }

    fn relation(&mut self, name: &str, definition: Value) -> &mut Self {
        self.declare(types::Kind::Relation, name, definition, Handler::None);
        self
    }

    /// Adds a many-to-one relation `name` to `foreign_collection` through a column of this
    /// collection: `ManyToOneOptions::new("customerId")`, with `.foreign_key_target(..)` when the
    /// key does not point to the foreign primary key.
    pub fn add_many_to_one_relation(
        &mut self,
        name: &str,
        foreign_collection: &str,
        options: ManyToOneOptions,
    ) -> &mut Self {
        self.relation(name, options.definition(foreign_collection))
    }

    /// Adds a one-to-many relation `name` to `foreign_collection`, whose column
    /// `OneToManyOptions::new("customerId")` points to this collection (`.origin_key_target(..)`
    /// when it does not point to the primary key).
    pub fn add_one_to_many_relation(
        &mut self,
        name: &str,
        foreign_collection: &str,
        options: OneToManyOptions,
    ) -> &mut Self {
        self.relation(name, options.definition("OneToMany", foreign_collection))
    }

    /// Adds a one-to-one relation `name` to `foreign_collection`, whose column
    /// `OneToOneOptions::new("customerId")` points to this collection.
    pub fn add_one_to_one_relation(
        &mut self,
        name: &str,
        foreign_collection: &str,
        options: OneToOneOptions,
    ) -> &mut Self {
        self.relation(name, options.definition("OneToOne", foreign_collection))
    }

    /// Adds a many-to-many relation `name` to `foreign_collection` through
    /// `through_collection`, whose columns `ManyToManyOptions::new(origin_key, foreign_key)` point
    /// to this collection and to the foreign one.
    pub fn add_many_to_many_relation(
        &mut self,
        name: &str,
        foreign_collection: &str,
        through_collection: &str,
        options: ManyToManyOptions,
    ) -> &mut Self {
        self.relation(
            name,
            options.definition(foreign_collection, through_collection),
        )
    }

    /// Adds related data listed by the plugin (the agent's `addExternalRelation`): a computed
    /// field `name` of type `[schema]` (a JSON list of objects) whose value for each record is
    /// what `relation`'s `list_records` returns. Its dependencies default to the collection's
    /// primary keys, read from the schema.
    pub fn add_external_relation(&mut self, name: &str, relation: ExternalRelation) -> &mut Self {
        let ExternalRelation {
            schema,
            dependencies,
            list_records,
        } = relation;
        let dependencies = dependencies.unwrap_or_else(|| self.primary_keys());
        let field = ComputedField::new(
            ColumnType::Composite(json!([Value::Object(schema)])),
            dependencies,
            move |rows: &Rows, ctx: &Context| {
                let lists = rows
                    .records()
                    .iter()
                    .map(|record| list_records(record, ctx).map(Value::Array))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Column::json(lists))
            },
        );
        self.add_field(name, field)
    }

    /// The primary keys of this collection, from the schema (empty when it is not there).
    fn primary_keys(&self) -> Vec<String> {
        self.datasource
            .schema()
            .get("collections")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("name").and_then(Value::as_str) == Some(self.name.as_str()))
            .flat_map(|c| {
                c.get("fields")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .filter(|f| f.get("isPrimaryKey").and_then(Value::as_bool) == Some(true))
            .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    }

    /// Adds field `name`, the column at the `:` path `path` through to-one relations
    /// (`"customer:address:city"`). `readonly`: `true` to refuse writes, `None` to follow the
    /// source field (`false` on a read-only source is refused at load).
    pub fn import_field(
        &mut self,
        name: &str,
        path: &str,
        readonly: impl Into<Option<bool>>,
    ) -> &mut Self {
        let definition = json!({"path": path, "readonly": readonly.into()});
        self.declare(types::Kind::ImportField, name, definition, Handler::None);
        self
    }

    /// Exposes field `from` as `to`; customizations keep using `from`.
    pub fn rename_field(&mut self, from: &str, to: &str) -> &mut Self {
        self.declare(
            types::Kind::RenameField,
            from,
            json!({ "newName": to }),
            Handler::None,
        );
        self
    }

    /// Hides field `name` from the exposed schema; customizations and handlers still use it.
    pub fn remove_field(&mut self, name: &str) -> &mut Self {
        self.declare(types::Kind::RemoveField, name, json!({}), Handler::None);
        self
    }

    /// Adds a validation rule on a writable column, checked on create and update: `operator`
    /// is `Present`, `LongerThan`, `ShorterThan`, `Contains`, `Like`, `Match`, `GreaterThan`,
    /// `LessThan`, `Before` or `After`; `value` its argument (`None` for `Present`).
    pub fn add_field_validation(
        &mut self,
        field: &str,
        operator: &str,
        value: impl Into<Option<Value>>,
    ) -> &mut Self {
        let definition = json!({"operator": operator, "value": value.into()});
        self.declare(
            types::Kind::FieldValidation,
            field,
            definition,
            Handler::None,
        );
        self
    }

    /// Marks a field optional (drops its `Present` rule); the database may still refuse null.
    pub fn set_field_nullable(&mut self, field: &str) -> &mut Self {
        self.declare(types::Kind::FieldNullable, field, json!({}), Handler::None);
        self
    }

    /// Replaces how `field` is written: `f(value, ctx)` returns the patch (a JSON object) that
    /// replaces `{field: value}` in the created record or the update's patch, or `None` to write
    /// nothing for it. The patch may name other fields (rewritten in turn) and to-one relations
    /// as nested objects. Also makes `field` writable (e.g. a computed field).
    pub fn replace_field_writing(
        &mut self,
        field: &str,
        f: impl Fn(&Value, &WriteContext) -> Result<Option<Value>> + 'static,
    ) -> &mut Self {
        self.declare(
            types::Kind::FieldWriting,
            field,
            json!({}),
            Handler::Write(Box::new(f)),
        );
        self
    }

    /// How a binary column crosses the wire: [`BinaryMode::DataUri`] or [`BinaryMode::Hex`].
    pub fn replace_field_binary_mode(&mut self, field: &str, mode: BinaryMode) -> &mut Self {
        self.declare(
            types::Kind::BinaryMode,
            field,
            json!({ "mode": mode.as_str() }),
            Handler::None,
        );
        self
    }

    fn sorting(&mut self, field: &str, definition: Value) -> &mut Self {
        self.declare(types::Kind::Sorting, field, definition, Handler::None);
        self
    }

    /// Sorts on `field` in memory (every matching record is fetched, up to the host's emulation
    /// row limit): for fields the datasource cannot sort, such as computed fields.
    pub fn emulate_field_sorting(&mut self, field: &str) -> &mut Self {
        self.sorting(field, json!({"mode": "emulate"}))
    }

    /// Sorting on `field` sorts by `equivalent` (`[("lastName", true), ("firstName", true)]`)
    /// instead, every clause inverted when sorting descending.
    pub fn replace_field_sorting<S: Into<String>>(
        &mut self,
        field: &str,
        equivalent: impl IntoIterator<Item = (S, bool)>,
    ) -> &mut Self {
        let clauses: Vec<Value> = equivalent
            .into_iter()
            .map(|(f, ascending)| json!({"field": f.into(), "ascending": ascending}))
            .collect();
        self.sorting(field, json!({"mode": "replace", "equivalentSort": clauses}))
    }

    /// Marks `field` not sortable.
    pub fn disable_field_sorting(&mut self, field: &str) -> &mut Self {
        self.sorting(field, json!({"mode": "disable"}))
    }

    /// Answers in memory every operator of `field`'s type that the datasource does not.
    pub fn emulate_field_filtering(&mut self, field: &str) -> &mut Self {
        self.declare(
            types::Kind::Filtering,
            field,
            json!({"mode": "emulateAll"}),
            Handler::None,
        );
        self
    }

    /// Answers one operator (`"Contains"`) of `field` in memory.
    pub fn emulate_field_operator(&mut self, field: &str, operator: &str) -> &mut Self {
        self.declare(
            types::Kind::Filtering,
            field,
            json!({"mode": "emulate", "operator": operator}),
            Handler::None,
        );
        self
    }

    /// Rewrites the leaf `field operator value` into the condition tree `f(value, ctx)` returns
    /// (in this collection's field names; it may use other replaced or emulated operators).
    pub fn replace_field_operator(
        &mut self,
        field: &str,
        operator: &str,
        f: impl Fn(&Value, &Context) -> Result<Value> + 'static,
    ) -> &mut Self {
        self.declare(
            types::Kind::Filtering,
            field,
            json!({"mode": "replace", "operator": operator}),
            Handler::Operator(Box::new(f)),
        );
        self
    }

    /// Replaces record creation: `f(data, ctx)` receives the records to create (already
    /// validated and rewritten) and returns the created records, each with its primary key.
    pub fn override_create(
        &mut self,
        f: impl Fn(&[Value], &Context) -> Result<Vec<Value>> + 'static,
    ) -> &mut Self {
        self.declare(
            types::Kind::Override,
            "create",
            json!({"operation": "create"}),
            Handler::OverrideCreate(Box::new(f)),
        );
        self
    }

    /// Replaces updates: `f(filter, patch, ctx)` updates the records matching `filter`.
    pub fn override_update(
        &mut self,
        f: impl Fn(&Value, &Value, &Context) -> Result<()> + 'static,
    ) -> &mut Self {
        self.declare(
            types::Kind::Override,
            "update",
            json!({"operation": "update"}),
            Handler::OverrideUpdate(Box::new(f)),
        );
        self
    }

    /// Replaces deletes: `f(filter, ctx)` deletes the records matching `filter`.
    pub fn override_delete(
        &mut self,
        f: impl Fn(&Value, &Context) -> Result<()> + 'static,
    ) -> &mut Self {
        self.declare(
            types::Kind::Override,
            "delete",
            json!({"operation": "delete"}),
            Handler::OverrideDelete(Box::new(f)),
        );
        self
    }

    /// Removes the count from list pagination (`countable: false`; the count route answers
    /// `deactivated`).
    pub fn disable_count(&mut self) -> &mut Self {
        self.declare(types::Kind::DisableCount, "", json!({}), Handler::None);
        self
    }

    /// Applies another plugin of the plugin directory (by name) to this collection with
    /// `options` (the agent's `collection.use(plugin, options)`): in that application,
    /// [`DataSource::scope`] is this collection.
    pub fn use_plugin(&mut self, name: &str, options: Value) -> &mut Self {
        self.declare(
            types::Kind::Use,
            name,
            use_definition(options),
            Handler::None,
        );
        self
    }
}

thread_local! {
    /// The handler table of this instance, built on its first call and kept for the next ones (a
    /// component instance is single-threaded, so this is one table per instance).
    static HANDLERS: RefCell<Option<Table>> = const { RefCell::new(None) };
}

/// The component's exports for plugin `P`; [`crate::export_plugin!`] names it. Not for direct use.
#[doc(hidden)]
pub struct Exports<P>(PhantomData<P>);

impl<P: Plugin> Exports<P> {
    /// Runs `f` with handler `id`, building the table first if this instance has none.
    fn with_handler<T>(id: u32, f: impl FnOnce(&Handler) -> Result<T>) -> Result<T> {
        Self::with_table(|table| {
            let handler = table
                .handlers
                .get(id as usize)
                .ok_or_else(|| Error::internal(format!("no handler {id}")))?;
            f(handler)
        })
    }

    /// Runs `f` with this instance's table, building it first if there is none.
    fn with_table<T>(f: impl FnOnce(&Table) -> Result<T>) -> Result<T> {
        HANDLERS.with(|cell| {
            if cell.borrow().is_none() {
                let mut ds = DataSource::new(None, None);
                P::customize(&mut ds)?;
                *cell.borrow_mut() = Some(ds.into_table());
            }
            let table = cell.borrow();
            let table = table
                .as_ref()
                .ok_or_else(|| Error::internal("no handler table"))?;
            f(table)
        })
    }
}

/// The definition of a `use` declaration: `{"options": ..}`.
fn use_definition(options: Value) -> Value {
    let mut definition = Map::new();
    definition.insert("options".to_owned(), options);
    Value::Object(definition)
}

fn parse(text: &str) -> Result<Value> {
    Ok(serde_json::from_str(text)?)
}

fn wrong_kind(id: u32) -> Error {
    Error::internal(format!("handler {id} is not of the called kind"))
}

impl<P: Plugin> Guest for Exports<P> {
    fn declare(
        schema_json: String,
        options_json: String,
    ) -> Result<Vec<types::Customization>, types::Error> {
        let mut ds = DataSource::new(Some(parse(&schema_json)?), Some(parse(&options_json)?));
        P::customize(&mut ds)?;
        let out = std::mem::take(&mut ds.declarations)
            .into_iter()
            .map(|d| types::Customization {
                collection: d.collection,
                kind: d.kind,
                name: d.name,
                definition: d.definition.to_string(),
                handler: d.handler,
            })
            .collect();
        HANDLERS.with(|cell| *cell.borrow_mut() = Some(ds.into_table()));
        Ok(out)
    }

    fn compute(
        handler: u32,
        ctx: types::CallContext,
        rows: packed::Batch,
    ) -> Result<packed::Column, types::Error> {
        let ctx = Context::from(ctx);
        let rows = Rows::from(rows);
        let column = Self::with_handler(handler, |h| match h {
            Handler::Field(f) => f(&rows, &ctx),
            _ => Err(wrong_kind(handler)),
        })?;
        if column.len() != rows.len() {
            return Err(Error::internal(format!(
                "computed field returned {} values for {} rows",
                column.len(),
                rows.len()
            ))
            .into());
        }
        Ok(column.into())
    }

    fn action_form(
        handler: u32,
        ctx: types::CallContext,
        action_json: String,
    ) -> Result<String, types::Error> {
        let ctx = ActionContext::from_json(ctx.into(), &parse(&action_json)?);
        let form = Self::with_handler(handler, |h| match h {
            Handler::Action(a) => a.evaluate_form(&ctx),
            _ => Err(wrong_kind(handler)),
        })?;
        Ok(form.to_string())
    }

    fn action_execute(
        handler: u32,
        ctx: types::CallContext,
        action_json: String,
    ) -> Result<types::ActionOutcome, types::Error> {
        let ctx = ActionContext::from_json(ctx.into(), &parse(&action_json)?);
        let result = Self::with_handler(handler, |h| match h {
            Handler::Action(a) => a.execute(&ctx),
            _ => Err(wrong_kind(handler)),
        })?;
        let (result, file) = result.into_parts();
        Ok(types::ActionOutcome {
            result: result.to_string(),
            file,
        })
    }

    fn hook(
        handler: u32,
        ctx: types::CallContext,
        hook_json: String,
    ) -> Result<Option<String>, types::Error> {
        let payload = match parse(&hook_json)? {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        let ctx = Context::from(ctx);
        let change = Self::with_handler(handler, |h| match h {
            Handler::Hook(position, operation, f) => {
                let mut hc = HookContext::new(ctx, *position, *operation, payload);
                f(&mut hc)?;
                Ok(hc.into_change())
            }
            _ => Err(wrong_kind(handler)),
        })?;
        Ok(change.map(|v| v.to_string()))
    }

    fn segment(handler: u32, ctx: types::CallContext) -> Result<String, types::Error> {
        let ctx = Context::from(ctx);
        let tree = Self::with_handler(handler, |h| match h {
            Handler::Segment(f) => f(&ctx),
            _ => Err(wrong_kind(handler)),
        })?;
        Ok(tree.to_string())
    }

    fn search(
        handler: u32,
        ctx: types::CallContext,
        search: String,
        extended: bool,
    ) -> Result<Option<String>, types::Error> {
        let ctx = Context::from(ctx);
        let tree = Self::with_handler(handler, |h| match h {
            Handler::Search(f) => f(&search, extended, &ctx),
            _ => Err(wrong_kind(handler)),
        })?;
        Ok(tree.map(|t| t.to_string()))
    }

    fn chart(
        handler: u32,
        ctx: types::CallContext,
        chart_json: String,
    ) -> Result<String, types::Error> {
        let ctx = ChartContext::from_json(ctx.into(), &parse(&chart_json)?);
        let result = Self::with_handler(handler, |h| match h {
            Handler::Chart(f) => f(&ctx),
            _ => Err(wrong_kind(handler)),
        })?;
        Ok(result.into_json().to_string())
    }

    fn write(
        handler: u32,
        ctx: types::CallContext,
        write_json: String,
    ) -> Result<Option<String>, types::Error> {
        let input = parse(&write_json)?;
        let value = input.get("value").cloned().unwrap_or(Value::Null);
        let ctx = WriteContext::from_json(Context::from(ctx), &input);
        let patch = Self::with_handler(handler, |h| match h {
            Handler::Write(f) => f(&value, &ctx),
            _ => Err(wrong_kind(handler)),
        })?;
        match patch {
            None | Some(Value::Null) => Ok(None),
            Some(p @ Value::Object(_)) => Ok(Some(p.to_string())),
            Some(other) => Err(Error::internal(format!(
                "a write replacement returned {other}, not an object"
            ))
            .into()),
        }
    }

    fn replace_operator(
        handler: u32,
        ctx: types::CallContext,
        value_json: String,
    ) -> Result<String, types::Error> {
        let value = parse(&value_json)?;
        let ctx = Context::from(ctx);
        let tree = Self::with_handler(handler, |h| match h {
            Handler::Operator(f) => f(&value, &ctx),
            _ => Err(wrong_kind(handler)),
        })?;
        Ok(tree.to_string())
    }

    fn override_operation(
        handler: u32,
        ctx: types::CallContext,
        override_json: String,
    ) -> Result<Option<String>, types::Error> {
        let input = parse(&override_json)?;
        let get = |k: &str| input.get(k).cloned().unwrap_or(Value::Null);
        let ctx = Context::from(ctx);
        let created = Self::with_handler(handler, |h| match h {
            Handler::OverrideCreate(f) => {
                let data = match get("data") {
                    Value::Array(a) => a,
                    _ => Vec::new(),
                };
                f(&data, &ctx).map(|records| Some(Value::Array(records)))
            }
            Handler::OverrideUpdate(f) => f(&get("filter"), &get("patch"), &ctx).map(|()| None),
            Handler::OverrideDelete(f) => f(&get("filter"), &ctx).map(|()| None),
            _ => Err(wrong_kind(handler)),
        })?;
        Ok(created.map(|v| v.to_string()))
    }
}

impl<P: Plugin> workflow::Guest for Exports<P> {
    fn declare_steps() -> Result<Vec<workflow::StepDeclaration>, types::Error> {
        Ok(Self::with_table(|table| {
            Ok(table
                .steps
                .iter()
                .map(|(name, id)| workflow::StepDeclaration {
                    name: name.clone(),
                    handler: *id,
                })
                .collect())
        })?)
    }

    fn workflow_step(
        handler: u32,
        ctx: types::CallContext,
        input: workflow::StepInput,
    ) -> Result<workflow::StepOutput, types::Error> {
        let step = StepContext::new(Context::from(ctx), &input)?;
        let output = Self::with_handler(handler, |h| match h {
            Handler::WorkflowStep(f) => f(&step),
            _ => Err(wrong_kind(handler)),
        })?;
        Ok(output.into_wit())
    }
}
