//! The decorator stack: the base datasource, then one layer per kind of customization, in the
//! Node agent's order (protocol §8.1). Each layer wraps every collection of the layer below and
//! overrides only what its customizations change; a layer without customizations is left out.
//!
//! Bottom to top (the numbers are the Node agent's positions), with why each sits where it does:
//! 1. `overrides` (1): lowest, so an `overrideCreate/Update/Delete` handler receives data that
//!    every layer above has already validated, hooked and rewritten, and replaces only the
//!    datasource's own write.
//! 2. `computed`, early (4): computed fields whose dependencies exist in the datasource. Below
//!    relations, so an added relation may use one as its key (with an operator below it).
//! 3. `operator`, early (5): emulated and replaced operators on the fields that exist so far
//!    (columns and early computed fields), so a relation keyed on a computed field can filter it
//!    with `In`.
//! 4. `relation` (7): relations added by customizations, emulated over keys, also across
//!    datasources. Above early computed fields and operators, because it queries its keys with
//!    `In`.
//! 5. `computed`, late (9), and `operator`, late (10): computed fields that depend on an added
//!    relation's path, and operators on them; they need the relation layer below them.
//! 6. `search` (12): above every computed field, so a field selection may name them (they
//!    contribute no condition unless they have operators, exactly as in the agent), and below
//!    segments so that a segment handler's own queries are not searched.
//! 7. `segment` (13): turns the segment name into a condition tree before anything below sees
//!    the filter (the SQL collection only knows its own, empty, list of segments).
//! 8. `sort` (14): sort emulation and replacement, above search and segments so an emulated sort
//!    fetches exactly the filtered records, and below charts and actions so their handlers'
//!    queries may sort on emulated fields.
//! 9. `chart` (15) and `action` (17): both only add entry points. Actions sit below hooks so the
//!    writes an action makes through its context do not run the public hooks (§8.6).
//!    Between them, `audit` (16, the agent's `internalHook`), only when the audit trail is on:
//!    below `action`, so the writes an action makes through its context are recorded, and below
//!    hooks and nested writes, so theirs are too; above everything that rewrites queries, so it
//!    reads the records before a change with the same filter the change uses.
//! 10. `schema` (18): `disableCount` and `disableFieldSorting` change only what is advertised.
//! 11. `write` (19): `replaceFieldWriting` and nested to-one writes, below hooks, so a Before
//!     hook sees (and may change) the record the client sent, before it is rewritten.
//! 12. `hook` (20): near the top, so hooks see the requests as the agent sends them (in the names
//!     below renames), and run around everything below (computed values are in an After List
//!     hook's records).
//! 13. `validation` (21): above hooks, so a record that breaks a rule is refused before any hook
//!     runs, as in the agent.
//! 14. `binary` (22): the wire form of binary columns (data URI or hex), for everything below.
//! 15. `publication` (23): `removeField` and `removeCollection` hide fields only from what is
//!     exposed: every layer below, and every customization, still uses them.
//! 16. `rename` (24): the top, so renames only change the exposed names; every customization
//!     addresses fields by their names below it.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use indexmap::IndexMap;

use super::audit::{self, AuditTrail};
use super::handlers::{ChartHandler, Context};
use super::{
    Customization, Kind, SortingMode, action, action_audit, binary, chart, computed, hook,
    import_field, operator, overrides, publication, relation, rename, schema, search, segment,
    sort, validation, write,
};
use crate::datasource::action::{ActionResult, FormElement, FormPhase, FormValues};
use crate::datasource::chart::{ChartRequest, ChartResult};
use crate::datasource::schema::{ColumnSchema, FieldSchema};
use crate::datasource::{
    AggregateResult, Aggregation, Caller, Collection, CollectionSchema, DataSource,
    DataSourceSchema, Error, Filter, Projection, Record, Result, Value,
};

/// How the stack treats what it cannot apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackOptions {
    /// `ignoreMissingSchemaElementErrors`: a customization that targets a missing collection or
    /// field is skipped with a warning instead of failing the build.
    pub ignore_missing_schema_element_errors: bool,
    /// `emulationRowLimit`: the most records an in-memory sort, filter or operator may load.
    pub emulation_row_limit: u64,
    /// `auditTrail`: where the audit layer records every change; `None` (the default) leaves the
    /// layer out of the stack entirely.
    pub audit: Option<AuditTrail>,
}

impl Default for StackOptions {
    fn default() -> Self {
        Self {
            ignore_missing_schema_element_errors: false,
            emulation_row_limit: 10_000,
            audit: None,
        }
    }
}

impl StackOptions {
    /// A customization targets a missing collection or field: `Ok(())` (logged as a warning,
    /// and the caller skips the customization) when missing elements are ignored, else the
    /// error that stops the build. `message` names the plugin, the customization and the target.
    pub(super) fn missing(&self, message: String) -> Result<()> {
        if self.ignore_missing_schema_element_errors {
            tracing::warn!("{message} (skipped: ignoreMissingSchemaElementErrors is set)");
            Ok(())
        } else {
            Err(Error::validation(message))
        }
    }
}

/// A customization that targets one column of one collection, in the words its refusals use.
pub(super) struct ColumnTarget<'a> {
    pub(super) origin: &'a str,
    pub(super) collection: &'a str,
    pub(super) field: &'a str,
    /// The customization, in "… on 'collection.field' targets a field that does not exist".
    pub(super) declared: &'a str,
    /// What a relation cannot have, in "cannot … 'collection.field': it is a relation".
    pub(super) refused: &'a str,
}

impl ColumnTarget<'_> {
    /// The schema of the targeted collection in `schema`, whose `field` is a column. A relation
    /// is refused; a missing collection or field is reported through `options.missing`, and
    /// `Ok(None)` then tells the caller to skip the customization.
    pub(super) fn find<'s>(
        &self,
        schema: &'s mut DataSourceSchema,
        options: &StackOptions,
    ) -> Result<Option<&'s mut CollectionSchema>> {
        let Self {
            origin,
            collection,
            field,
            declared,
            refused,
        } = self;
        let Some(target) = schema.collections.get_mut(*collection) else {
            options.missing(format!(
                "{origin}: {declared} on '{collection}.{field}' targets a collection that does \
                 not exist"
            ))?;
            return Ok(None);
        };
        let column = target_column(
            target,
            field,
            options,
            format!(
                "{origin}: cannot {refused} '{collection}.{field}': it is a relation, not a \
                 column"
            ),
            format!(
                "{origin}: {declared} on '{collection}.{field}' targets a field that does \
                 not exist"
            ),
        )?;
        Ok(column.is_some().then_some(target))
    }
}

/// The column `field` of `schema` that a customization targets. A relation is refused with the
/// message `relation`; a missing field is reported through `options.missing` with the message
/// `missing`, and `Ok(None)` then tells the caller to skip the customization. Both messages name
/// the plugin, the target and what was attempted (built up front: this runs once, at startup).
pub(super) fn target_column<'s>(
    schema: &'s mut CollectionSchema,
    field: &str,
    options: &StackOptions,
    relation: String,
    missing: String,
) -> Result<Option<&'s mut ColumnSchema>> {
    match schema.fields.get_mut(field) {
        Some(FieldSchema::Column(column)) => Ok(Some(column)),
        Some(FieldSchema::Relation(_)) => Err(Error::validation(relation)),
        None => options.missing(missing).map(|()| None),
    }
}

/// The customized datasource: `base` under every layer that `customizations` need, with the
/// default options. See [`build_stack_with`].
pub fn build_stack(
    base: Arc<dyn DataSource>,
    customizations: Vec<Customization>,
) -> Result<Arc<dyn DataSource>> {
    build_stack_with(base, customizations, &StackOptions::default())
}

/// The customized datasource: `base` under every layer that `customizations` need. An invalid
/// customization (missing collection or field, duplicate name, dependency cycle) is refused
/// with a message naming the plugin that declared it; the stack is then not built.
pub fn build_stack_with(
    base: Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut groups = Groups::default();
    for customization in customizations {
        if let Some(collection) = &customization.collection
            && base.schema().collection(collection).is_err()
        {
            options.missing(format!(
                "{}: {:?} targets the collection '{collection}', which does not exist",
                customization.origin, customization.kind
            ))?;
            continue;
        }
        let group = match &customization.kind {
            Kind::Override { .. } => &mut groups.overrides,
            Kind::ComputedField { .. } => &mut groups.computed,
            Kind::ImportField { .. } => &mut groups.import,
            Kind::Filtering { .. } => &mut groups.filtering,
            Kind::Relation { .. } => &mut groups.relation,
            Kind::Search(_) => &mut groups.search,
            Kind::Segment { .. } => &mut groups.segment,
            Kind::Sorting {
                mode: SortingMode::Disable,
                ..
            }
            | Kind::DisableCount => &mut groups.schema,
            Kind::Sorting { .. } => &mut groups.sorting,
            Kind::Chart { .. } => &mut groups.chart,
            Kind::Action { .. } => &mut groups.action,
            Kind::Writing { .. } => &mut groups.write,
            Kind::Hook { .. } => &mut groups.hook,
            Kind::Validation { .. } | Kind::Nullable { .. } => &mut groups.validation,
            Kind::BinaryMode { .. } => &mut groups.binary,
            Kind::RemoveField { .. } | Kind::RemoveCollection => &mut groups.publication,
            Kind::RenameField { .. } => &mut groups.rename,
            // Not a layer: the workflow engine calls it (`customizer::workflow_steps`).
            Kind::WorkflowStep { .. } => continue,
        };
        group.push(customization);
    }
    // The computed/relation section plans its layers against the base schema.
    let planning = Arc::clone(&base);
    let mut stack = base;
    // Layers without customizations are left out: a request then crosses only the layers it needs.
    let apply = |stack: &mut Arc<dyn DataSource>,
                 group: Vec<Customization>,
                 layer: LayerFn|
     -> Result<()> {
        if !group.is_empty() {
            *stack = layer(stack, group, options)?;
        }
        Ok(())
    };
    apply(&mut stack, groups.overrides, overrides::layer)?;
    // BEGIN computed/relation section (relations, early and late computed fields, importField).
    // Planned on the base schema (overrides change no field). An import may cross an added
    // relation or read a computed field, so it is expanded against the schema with both; it
    // becomes a computed field, replaced operators, a replaced sort and a write handler.
    // Computed fields whose dependencies all exist below the relation layer (maybe as other
    // such fields) sit under it (Node position 4), so relations may use them as keys and their
    // operators (position 5) let a relation filter on them; the others, which read an added
    // relation, sit above it (9), with the operators on them (10).
    // (The planning schemas are only built when there is something to plan.)
    let base_schema = planning.schema();
    let imported = if groups.import.is_empty() {
        import_field::Imported::default()
    } else {
        import_field::expand(
            &relation::with_relations(
                &computed::with_fields(base_schema, &groups.computed),
                &groups.relation,
            ),
            groups.import,
            options,
        )?
    };
    let mut computed = groups.computed;
    computed.extend(imported.computed);
    let (early_computed, late_computed) = if computed.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        computed::split(base_schema, computed)
    };
    let mut filtering = groups.filtering;
    filtering.extend(imported.filtering);
    let (early_filtering, late_filtering): (Vec<_>, Vec<_>) = if filtering.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let below_relations = computed::with_fields(base_schema, &early_computed);
        filtering
            .into_iter()
            .partition(|c| match (&c.collection, &c.kind) {
                (Some(collection), Kind::Filtering { field, .. }) => below_relations
                    .collections
                    .get(collection)
                    .is_some_and(|s| s.fields.contains_key(field)),
                _ => true,
            })
    };
    let mut sorting = groups.sorting;
    sorting.extend(imported.sorting);
    let mut writing = groups.write;
    writing.extend(imported.writing);
    apply(&mut stack, early_computed, computed::layer)?;
    apply(&mut stack, early_filtering, operator::layer)?;
    apply(&mut stack, groups.relation, relation::layer)?;
    apply(&mut stack, late_computed, computed::layer)?;
    apply(&mut stack, late_filtering, operator::layer)?;
    // END computed/relation section.
    apply(&mut stack, groups.search, search::layer)?;
    apply(&mut stack, groups.segment, segment::layer)?;
    apply(&mut stack, sorting, sort::layer)?;
    apply(&mut stack, groups.chart, chart::layer)?;
    if let Some(trail) = &options.audit {
        stack = audit::layer(&stack, trail)?;
    }
    apply(&mut stack, groups.action, action::layer)?;
    apply(&mut stack, groups.schema, schema::layer)?;
    apply(&mut stack, writing, write::layer)?;
    apply(&mut stack, groups.hook, hook::layer)?;
    apply(&mut stack, groups.validation, validation::layer)?;
    apply(&mut stack, groups.binary, binary::layer)?;
    apply(&mut stack, groups.publication, publication::layer)?;
    apply(&mut stack, groups.rename, rename::layer)?;
    // Outermost: the action rows need every action, by its served name.
    if let Some(trail) = &options.audit {
        stack = action_audit::layer(&stack, trail)?;
    }
    Ok(stack)
}

/// What every layer module exports: the layer of `customizations` over `child`.
type LayerFn =
    fn(&Arc<dyn DataSource>, Vec<Customization>, &StackOptions) -> Result<Arc<dyn DataSource>>;

/// The customizations of each layer, in declaration order.
#[derive(Default)]
struct Groups {
    overrides: Vec<Customization>,
    computed: Vec<Customization>,
    import: Vec<Customization>,
    filtering: Vec<Customization>,
    relation: Vec<Customization>,
    search: Vec<Customization>,
    segment: Vec<Customization>,
    sorting: Vec<Customization>,
    chart: Vec<Customization>,
    action: Vec<Customization>,
    schema: Vec<Customization>,
    write: Vec<Customization>,
    hook: Vec<Customization>,
    validation: Vec<Customization>,
    binary: Vec<Customization>,
    publication: Vec<Customization>,
    rename: Vec<Customization>,
}

/// Customizations grouped by collection name, in declaration order.
pub(super) fn by_collection(
    customizations: Vec<Customization>,
) -> IndexMap<String, Vec<Customization>> {
    let mut out: IndexMap<String, Vec<Customization>> = IndexMap::new();
    for c in customizations {
        if let Some(name) = c.collection.clone() {
            out.entry(name).or_default().push(c);
        }
    }
    out
}

/// A layer that changes only what collections advertise: `edit(collection, schema,
/// customization)` applies each customization, in declaration order, to a copy of its
/// collection's schema; every operation is forwarded to the layer below.
pub(super) fn schema_layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    mut edit: impl FnMut(&str, &mut CollectionSchema, &Customization) -> Result<()>,
) -> Result<Arc<dyn DataSource>> {
    let mut schemas: HashMap<String, CollectionSchema> = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        let mut schema = child.schema().collection(&collection)?.clone();
        for customization in &list {
            edit(&collection, &mut schema, customization)?;
        }
        schemas.insert(collection, schema);
    }
    let layer = Layer::new(Arc::clone(child), |collection| {
        Ok(schemas.remove(&collection.schema().name).map(|schema| {
            decorated(SchemaOnly {
                child: collection,
                schema,
            })
        }))
    })?;
    Ok(Arc::new(layer))
}

/// A collection served with another schema, every operation forwarded.
struct SchemaOnly {
    child: Arc<dyn Collection>,
    schema: CollectionSchema,
}

impl Decorator for SchemaOnly {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }
}

/// One layer of the stack: the decorated collections over the layer below. Collections without
/// customizations are the child's own.
pub(super) struct Layer {
    child: Arc<dyn DataSource>,
    schema: DataSourceSchema,
    collections: HashMap<String, Arc<dyn Collection>>,
    /// Datasource-level charts of this layer.
    charts: IndexMap<String, Arc<dyn ChartHandler>>,
}

impl Layer {
    /// A layer whose collections are `decorate(child collection)`; `decorate` answers `None` to
    /// keep the child's collection as it is.
    pub(super) fn new(
        child: Arc<dyn DataSource>,
        mut decorate: impl FnMut(Arc<dyn Collection>) -> Result<Option<Arc<dyn Collection>>>,
    ) -> Result<Self> {
        let mut schema = child.schema().clone();
        let mut collections = HashMap::new();
        for name in child.schema().collections.keys() {
            let original = child.collection(name)?;
            let collection = decorate(Arc::clone(&original))?.unwrap_or(original);
            schema
                .collections
                .insert(name.clone(), collection.schema().clone());
            collections.insert(name.clone(), collection);
        }
        Ok(Self {
            child,
            schema,
            collections,
            charts: IndexMap::new(),
        })
    }

    /// Hides a collection from this layer's schema and lookups (`removeCollection`): the layers
    /// below, and so the customizations, still serve it.
    pub(super) fn remove_collection(&mut self, name: &str) {
        self.schema.collections.shift_remove(name);
        self.collections.remove(name);
    }

    /// Adds a datasource-level chart; a name already used below or in this layer is refused.
    pub(super) fn add_chart(
        &mut self,
        origin: &str,
        name: String,
        handler: Arc<dyn ChartHandler>,
    ) -> Result<()> {
        if self.schema.charts.contains(&name) {
            return Err(Error::validation(format!(
                "{origin}: the chart '{name}' is defined twice"
            )));
        }
        self.schema.charts.push(name.clone());
        self.charts.insert(name, handler);
        Ok(())
    }
}

#[async_trait]
impl DataSource for Layer {
    fn schema(&self) -> &DataSourceSchema {
        &self.schema
    }

    fn collection(&self, name: &str) -> Result<Arc<dyn Collection>> {
        self.collections
            .get(name)
            .cloned()
            .ok_or_else(|| Error::MissingCollection(name.to_owned()))
    }

    fn native_query_connections(&self) -> Vec<String> {
        self.child.native_query_connections()
    }

    fn pools(&self) -> Vec<crate::datasource::NamedPool> {
        self.child.pools()
    }

    async fn native_query(
        &self,
        caller: &Caller,
        connection: &str,
        query: &str,
        variables: &IndexMap<String, Value>,
    ) -> Result<Vec<Record>> {
        self.child
            .native_query(caller, connection, query, variables)
            .await
    }

    async fn render_chart(
        &self,
        caller: &Caller,
        name: &str,
        request: &ChartRequest,
    ) -> Result<ChartResult> {
        match self.charts.get(name) {
            Some(handler) => {
                let ctx = Context {
                    collection: None,
                    datasource: Arc::clone(&self.child),
                };
                handler.render(caller, &ctx, request).await
            }
            None => self.child.render_chart(caller, name, request).await,
        }
    }
}

/// A collection decorator: the child it wraps, its schema, and the operations it changes. Every
/// method it does not override is forwarded to the child, the defaulted ones (actions, forms,
/// charts) included, so that a layer never hides what the layers below it serve.
#[async_trait]
pub(super) trait Decorator: Send + Sync + 'static {
    fn child(&self) -> &Arc<dyn Collection>;

    fn schema(&self) -> &CollectionSchema {
        self.child().schema()
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        self.child().list(caller, filter, projection).await
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        self.child()
            .aggregate(caller, filter, aggregation, limit)
            .await
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        self.child().create(caller, records).await
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        self.child().update(caller, filter, patch).await
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        self.child().delete(caller, filter).await
    }

    async fn execute(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
    ) -> Result<ActionResult> {
        self.child().execute(caller, name, filter, values).await
    }

    async fn get_form(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
        phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        self.child()
            .get_form(caller, name, filter, values, phase)
            .await
    }

    async fn render_chart(
        &self,
        caller: &Caller,
        name: &str,
        request: &ChartRequest,
    ) -> Result<ChartResult> {
        self.child().render_chart(caller, name, request).await
    }
}

/// A decorator that only rewrites the filter of the operations that take one (search, segments):
/// list, aggregate, update and delete see the refined filter; everything else is forwarded.
#[async_trait]
pub(super) trait FilterRefiner: Send + Sync + 'static {
    fn child(&self) -> &Arc<dyn Collection>;

    fn schema(&self) -> &CollectionSchema;

    /// The filter the child receives instead of `filter`.
    async fn refine(&self, caller: &Caller, filter: &Filter) -> Result<Filter>;
}

/// A filter refiner served as a collection.
pub(super) fn refining(refiner: impl FilterRefiner) -> Arc<dyn Collection> {
    decorated(Refining(refiner))
}

struct Refining<R>(R);

#[async_trait]
impl<R: FilterRefiner> Decorator for Refining<R> {
    fn child(&self) -> &Arc<dyn Collection> {
        self.0.child()
    }

    fn schema(&self) -> &CollectionSchema {
        self.0.schema()
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        let filter = self.0.refine(caller, filter).await?;
        self.child().list(caller, &filter, projection).await
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        let filter = self.0.refine(caller, filter).await?;
        self.child()
            .aggregate(caller, &filter, aggregation, limit)
            .await
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        let filter = self.0.refine(caller, filter).await?;
        self.child().update(caller, &filter, patch).await
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        let filter = self.0.refine(caller, filter).await?;
        self.child().delete(caller, &filter).await
    }
}

/// A decorator served as a collection.
pub(super) fn decorated(decorator: impl Decorator) -> Arc<dyn Collection> {
    Arc::new(Decorated(decorator))
}

struct Decorated<D>(D);

#[async_trait]
impl<D: Decorator> Collection for Decorated<D> {
    fn schema(&self) -> &CollectionSchema {
        self.0.schema()
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        self.0.list(caller, filter, projection).await
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        self.0.aggregate(caller, filter, aggregation, limit).await
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        self.0.create(caller, records).await
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        self.0.update(caller, filter, patch).await
    }

    async fn delete(&self, caller: &Caller, filter: &Filter) -> Result<()> {
        self.0.delete(caller, filter).await
    }

    async fn execute(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
    ) -> Result<ActionResult> {
        self.0.execute(caller, name, filter, values).await
    }

    async fn get_form(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
        phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        self.0.get_form(caller, name, filter, values, phase).await
    }

    async fn render_chart(
        &self,
        caller: &Caller,
        name: &str,
        request: &ChartRequest,
    ) -> Result<ChartResult> {
        self.0.render_chart(caller, name, request).await
    }
}
