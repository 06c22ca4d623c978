//! Computed fields (`addField`, §8.2): read-only columns whose values a handler computes from
//! other fields of the record (its dependencies: columns, `relation:column` paths through to-one
//! relations, other computed fields, here or across a relation).
//!
//! A list asking for computed fields is rewritten to ask the layer below for their dependencies
//! instead; the records come back once; then each computed field is computed with **one** handler
//! call for the whole page, on the de-duplicated dependency rows, dependencies first (so a field
//! computed from a computed field sees its values). Rows under a null relation are skipped and
//! keep their null. An aggregation over a computed field lists the records and aggregates them in
//! memory, as the agent does.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use async_trait::async_trait;
use indexmap::IndexMap;
use serde_json::Value as Json;

use super::handlers::{Batch, Column, ComputeHandler, Context};
use super::stack::StackOptions;
use super::stack::{Decorator, Layer, by_collection, decorated};
use super::{Customization, Kind};
use crate::datasource::query::evaluate;
use crate::datasource::schema::FieldSchema;
use crate::datasource::{
    AggregateResult, Aggregation, Caller, Collection, CollectionSchema, ColumnSchema, ColumnType,
    DataSource, DataSourceSchema, Error, Filter, Projection, Record, Result, Sort, Value,
};

/// One declared computed field.
struct Field {
    origin: String,
    name: String,
    column_type: ColumnType,
    dependencies: Vec<String>,
    handler: Arc<dyn ComputeHandler>,
}

/// Every computed field of the layer: collection → field name → field.
type Registry = HashMap<String, IndexMap<String, Arc<Field>>>;

/// The computed-fields layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut schema = child.schema().clone();
    let mut registry: Registry = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        for customization in list {
            let Kind::ComputedField {
                name,
                column_type,
                dependencies,
                default_value,
                enum_values,
                handler,
            } = customization.kind
            else {
                continue;
            };
            let origin = customization.origin;
            let target = schema.collections.get_mut(&collection).ok_or_else(|| {
                Error::validation(format!("{origin}: collection '{collection}' not found"))
            })?;
            if target.fields.contains_key(&name) {
                return Err(Error::validation(format!(
                    "{origin}: the field '{collection}.{name}' already exists"
                )));
            }
            if dependencies.is_empty() {
                return Err(Error::validation(format!(
                    "{origin}: the computed field '{collection}.{name}' has no dependency"
                )));
            }
            let column = column_schema(&column_type, default_value.as_ref(), enum_values.as_ref());
            target
                .fields
                .insert(name.clone(), FieldSchema::Column(column));
            registry.entry(collection.clone()).or_default().insert(
                name.clone(),
                Arc::new(Field {
                    origin,
                    name,
                    column_type,
                    dependencies,
                    handler,
                }),
            );
        }
    }
    prune_missing(&mut schema, &mut registry, options)?;
    validate(&schema, &registry)?;
    let schema = Arc::new(schema);
    let registry = Arc::new(registry);
    let layer = Layer::new(Arc::clone(child), |collection| {
        let name = collection.schema().name.clone();
        let own = schema.collection(&name)?.clone();
        Ok(Some(decorated(Computed {
            child: collection,
            datasource: Arc::clone(child),
            schema: own,
            datasource_schema: Arc::clone(&schema),
            registry: Arc::clone(&registry),
        })))
    })?;
    Ok(Arc::new(layer))
}

/// The schema of a computed field: a read-only column, not sortable, without operators (the
/// agent's); filtering, sorting and writing come from the emulation, replacement and
/// write-replacement customizations of the layers above.
fn column_schema(
    column_type: &ColumnType,
    default_value: Option<&Json>,
    enum_values: Option<&Vec<String>>,
) -> ColumnSchema {
    let mut column = ColumnSchema::new(column_type.clone());
    column.is_read_only = true;
    column.is_sortable = false;
    column.enum_values = enum_values.cloned().unwrap_or_default();
    column.default_value = default_value.map(|json| match column_type.primitive() {
        Some(p) => Value::from_json_typed(json, p).unwrap_or_else(|| Value::Json(json.clone())),
        None => Value::Json(json.clone()),
    });
    column
}

/// `schema` with the computed fields of `customizations` added as the layer adds them, for
/// planning the stack (which layer a field or an import belongs to). Fields the layer would
/// refuse are left out; the layer reports them.
pub(super) fn with_fields(
    schema: &DataSourceSchema,
    customizations: &[Customization],
) -> DataSourceSchema {
    let mut out = schema.clone();
    for customization in customizations {
        add_field(&mut out, customization);
    }
    out
}

/// Adds one computed field to a planning schema; false when it cannot be added there.
fn add_field(schema: &mut DataSourceSchema, customization: &Customization) -> bool {
    let (
        Some(collection),
        Kind::ComputedField {
            name,
            column_type,
            default_value,
            enum_values,
            ..
        },
    ) = (&customization.collection, &customization.kind)
    else {
        return false;
    };
    match schema.collections.get_mut(collection) {
        Some(target) if !target.fields.contains_key(name) => {
            let column = column_schema(column_type, default_value.as_ref(), enum_values.as_ref());
            target
                .fields
                .insert(name.clone(), FieldSchema::Column(column));
            true
        }
        _ => false,
    }
}

/// Splits computed fields into the early layer (every dependency exists in `below`, the schema
/// under the relation layer, maybe as another early computed field) and the late one (some
/// dependency crosses a relation added by a customization, or reads a late field): the Node
/// agent's positions 4 and 9. Declaration order is kept in each part.
pub(super) fn split(
    below: &DataSourceSchema,
    customizations: Vec<Customization>,
) -> (Vec<Customization>, Vec<Customization>) {
    let mut schema = below.clone();
    let mut early = vec![false; customizations.len()];
    // Until no field moves: a field may depend on one declared after it.
    loop {
        let mut moved = false;
        for (i, customization) in customizations.iter().enumerate() {
            if early[i] {
                continue;
            }
            let resolves = match (&customization.collection, &customization.kind) {
                (Some(collection), Kind::ComputedField { dependencies, .. }) => {
                    schema.collections.get(collection).is_some_and(|own| {
                        dependencies
                            .iter()
                            .all(|dep| schema.resolve_column(own, dep).is_ok())
                    })
                }
                // Not a field the planner understands: the early layer reports it.
                _ => true,
            };
            if resolves {
                add_field(&mut schema, customization);
                early[i] = true;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    let (early, late): (Vec<_>, Vec<_>) = customizations
        .into_iter()
        .zip(early)
        .partition(|(_, early)| *early);
    (
        early.into_iter().map(|(c, _)| c).collect(),
        late.into_iter().map(|(c, _)| c).collect(),
    )
}

/// Why a dependency path does not exist: the first collection or field on the way that is
/// missing. `None` when every segment exists (it may still be the wrong kind of field, which
/// `validate` reports).
fn missing_segment(schema: &DataSourceSchema, collection: &str, path: &str) -> Option<String> {
    let mut current = collection;
    for segment in path.split(':') {
        let Some(holder) = schema.collections.get(current) else {
            return Some(format!("the collection '{current}' does not exist"));
        };
        match holder.fields.get(segment) {
            None => return Some(format!("the field '{current}.{segment}' does not exist")),
            Some(FieldSchema::Relation(relation)) => current = relation.foreign_collection(),
            Some(FieldSchema::Column(_)) => return None,
        }
    }
    None
}

/// Computed fields depending on a missing field are refused, or skipped with a warning when
/// missing elements are ignored (and so are the fields depending on a skipped one).
fn prune_missing(
    schema: &mut DataSourceSchema,
    registry: &mut Registry,
    options: &StackOptions,
) -> Result<()> {
    loop {
        let found = registry.iter().find_map(|(collection, fields)| {
            fields.values().find_map(|field| {
                field.dependencies.iter().find_map(|dep| {
                    missing_segment(schema, collection, dep).map(|detail| {
                        (
                            collection.clone(),
                            field.name.clone(),
                            format!(
                                "{}: the computed field '{collection}.{}' depends on '{dep}': {detail}",
                                field.origin, field.name
                            ),
                        )
                    })
                })
            })
        });
        let Some((collection, name, message)) = found else {
            return Ok(());
        };
        options.missing(message)?;
        if let Some(fields) = registry.get_mut(&collection) {
            fields.shift_remove(&name);
        }
        if let Some(target) = schema.collections.get_mut(&collection) {
            target.fields.shift_remove(&name);
        }
    }
}

/// Every dependency resolves to a column (maybe computed) through to-one relations, and no
/// computed field depends on itself, directly or not.
fn validate(schema: &DataSourceSchema, registry: &Registry) -> Result<()> {
    // (collection, field) → the computed fields it depends on.
    let mut edges: HashMap<(String, String), Vec<(String, String)>> = HashMap::new();
    for (collection, fields) in registry {
        let own = schema.collection(collection)?;
        for field in fields.values() {
            let mut targets = Vec::new();
            for dep in &field.dependencies {
                let (holder, _) = schema.resolve_column(own, dep).map_err(|e| {
                    Error::validation(format!(
                        "{}: the computed field '{collection}.{}' depends on '{dep}': {e}",
                        field.origin, field.name
                    ))
                })?;
                let column = dep.rsplit(':').next().unwrap_or(dep);
                if registry
                    .get(&holder.name)
                    .is_some_and(|f| f.contains_key(column))
                {
                    targets.push((holder.name.clone(), column.to_owned()));
                }
            }
            edges.insert((collection.clone(), field.name.clone()), targets);
        }
    }
    // Depth-first search; a node met again while on the path closes a cycle.
    fn visit(
        node: &(String, String),
        edges: &HashMap<(String, String), Vec<(String, String)>>,
        path: &mut Vec<(String, String)>,
        done: &mut HashSet<(String, String)>,
    ) -> Result<()> {
        if done.contains(node) {
            return Ok(());
        }
        if path.contains(node) {
            return Err(Error::validation(format!(
                "the computed field '{}.{}' depends on itself",
                node.0, node.1
            )));
        }
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, path, done)?;
        }
        path.pop();
        done.insert(node.clone());
        Ok(())
    }
    let mut done = HashSet::new();
    for node in edges.keys() {
        visit(node, &edges, &mut Vec::new(), &mut done)?;
    }
    Ok(())
}

/// A collection of the computed layer (every collection is one: a projection may reach another
/// collection's computed fields through a relation).
struct Computed {
    child: Arc<dyn Collection>,
    /// The layer below, for the handlers' callbacks.
    datasource: Arc<dyn DataSource>,
    schema: CollectionSchema,
    datasource_schema: Arc<DataSourceSchema>,
    registry: Arc<Registry>,
}

/// One computation of a list: a computed field of `collection`, reached from the listed records
/// through the relations of `prefix`.
struct Step {
    prefix: Vec<String>,
    collection: String,
    field: Arc<Field>,
}

/// What a list asks the layer below for, and what it computes afterwards (dependencies first).
#[derive(Default)]
struct Plan {
    child: Projection,
    steps: Vec<Step>,
    seen: HashSet<String>,
}

impl Computed {
    fn plan(&self, projection: &Projection) -> Result<Plan> {
        let mut plan = Plan::default();
        for path in projection.iter() {
            self.expand(&self.schema.name, &mut Vec::new(), path, &mut plan)?;
        }
        Ok(plan)
    }

    /// Adds `path` (relative to `collection`, reached through `prefix`) to the plan: a computed
    /// field becomes its dependencies plus a step; anything else is asked for as is.
    fn expand(
        &self,
        collection: &str,
        prefix: &mut Vec<String>,
        path: &str,
        plan: &mut Plan,
    ) -> Result<()> {
        let full = |p: &[String], tail: &str| {
            let mut s = p.join(":");
            if !s.is_empty() {
                s.push(':');
            }
            s.push_str(tail);
            s
        };
        match path.split_once(':') {
            None => match self.registry.get(collection).and_then(|f| f.get(path)) {
                Some(field) => {
                    if plan.seen.insert(full(prefix, path)) {
                        for dep in &field.dependencies {
                            self.expand(collection, prefix, dep, plan)?;
                        }
                        plan.steps.push(Step {
                            prefix: prefix.clone(),
                            collection: collection.to_owned(),
                            field: Arc::clone(field),
                        });
                    }
                }
                None => plan.child.push(full(prefix, path)),
            },
            Some((head, rest)) => {
                let relation = self
                    .datasource_schema
                    .collection(collection)
                    .ok()
                    .and_then(|c| c.relation(head));
                match relation {
                    Some(relation) => {
                        prefix.push(head.to_owned());
                        let result = self.expand(relation.foreign_collection(), prefix, rest, plan);
                        prefix.pop();
                        result?;
                    }
                    // Not a relation: the layer below reports the bad path.
                    None => plan.child.push(full(prefix, path)),
                }
            }
        }
        Ok(())
    }

    /// Runs one step on every record: one handler call on the de-duplicated rows.
    async fn compute(&self, caller: &Caller, step: &Step, records: &mut [Record]) -> Result<()> {
        let field = &step.field;
        let holder = self.datasource_schema.collection(&step.collection)?;
        let mut columns: Vec<Column> = field
            .dependencies
            .iter()
            .map(|dep| {
                let (_, column) = self.datasource_schema.resolve_column(holder, dep)?;
                Ok(Column {
                    path: dep.clone(),
                    column_type: column.column_type.clone(),
                    values: Vec::new(),
                })
            })
            .collect::<Result<_>>()?;
        // Rows by the hash of their dependency values (the first row of each hash; rows whose
        // hash collides with a different row's go to `overflow`), compared value by value.
        // foldhash, not SipHash: a collision costs a comparison here, never a wrong row, and
        // SipHash took 6% of a computed field's cost on a page of 100.
        let mut rows: HashMap<u64, usize, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(records.len(), Default::default());
        let mut overflow: Vec<(u64, usize)> = Vec::new();
        let mut len = 0;
        let mut row_of: Vec<Option<usize>> = Vec::with_capacity(records.len());
        let mut values: Vec<&Value> = Vec::with_capacity(field.dependencies.len());
        // The positions of the plain dependencies, found once per field list (the rows of one
        // result set share theirs) rather than by name in every row; paths through relations
        // are read as paths.
        let mut positions: Option<(&Record, Vec<Option<usize>>)> = None;
        for record in records.iter() {
            let Some(sub) = descend(record, &step.prefix) else {
                row_of.push(None);
                continue;
            };
            if !matches!(positions, Some((first, _)) if first.shares_names(sub)) {
                positions = None;
            }
            let (_, at) = positions.get_or_insert_with(|| {
                let at = field.dependencies.iter().map(|dep| {
                    if dep.contains(':') {
                        None
                    } else {
                        sub.position(dep)
                    }
                });
                (sub, at.collect())
            });
            values.clear();
            values.extend(field.dependencies.iter().zip(at.iter()).map(|(dep, at)| {
                match at {
                    Some(i) => sub.value_at(*i),
                    None => sub.get_path(dep),
                }
                .unwrap_or(&Value::Null)
            }));
            let mut hasher = rows.hasher().build_hasher();
            for value in &values {
                hash_value(value, &mut hasher);
            }
            let hash = hasher.finish();
            let same = |row: usize| {
                columns
                    .iter()
                    .zip(&values)
                    .all(|(column, value)| column.values[row] == **value)
            };
            let found = match rows.get(&hash) {
                Some(&row) if same(row) => Some(row),
                Some(_) => overflow
                    .iter()
                    .find(|(h, row)| *h == hash && same(*row))
                    .map(|(_, row)| *row),
                None => None,
            };
            let row = match found {
                Some(row) => row,
                None => {
                    for (column, value) in columns.iter_mut().zip(&values) {
                        column.values.push((*value).clone());
                    }
                    match rows.entry(hash) {
                        Entry::Occupied(_) => overflow.push((hash, len)),
                        Entry::Vacant(slot) => {
                            slot.insert(len);
                        }
                    }
                    len += 1;
                    len - 1
                }
            };
            row_of.push(Some(row));
        }
        if len == 0 {
            return Ok(());
        }
        let batch = Batch { len, columns };
        let ctx = Context {
            collection: Some(step.collection.clone()),
            datasource: Arc::clone(&self.datasource),
        };
        let values = field.handler.compute(caller, &ctx, &batch).await?;
        if values.len() != len {
            return Err(Error::Internal(format!(
                "{}: the computed field '{}.{}' returned {} values for {len} rows",
                field.origin,
                step.collection,
                field.name,
                values.len()
            )));
        }
        if let Some(bad) = values.iter().find(|v| !field.column_type.accepts(v)) {
            return Err(Error::Internal(format!(
                "{}: the computed field '{}.{}' returned {bad:?}, which is not a {}",
                field.origin,
                step.collection,
                field.name,
                field.column_type.to_json()
            )));
        }
        // The last record of a row takes its value; the others get a copy.
        let mut uses = vec![0usize; len];
        for row in row_of.iter().flatten() {
            uses[*row] += 1;
        }
        let mut values = values;
        let mut take = |row: usize| {
            uses[row] -= 1;
            if uses[row] == 0 {
                std::mem::replace(&mut values[row], Value::Null)
            } else {
                values[row].clone()
            }
        };
        if step.prefix.is_empty() {
            // Every record gets the field: one pass that keeps the records' names shared.
            let rows: Vec<usize> = row_of.iter().map(|r| r.unwrap_or(0)).collect();
            Record::set_column(records.iter_mut(), &field.name, |i| take(rows[i]));
        } else {
            for (record, row) in records.iter_mut().zip(row_of) {
                if let Some(row) = row
                    && let Some(sub) = descend_mut(record, &step.prefix)
                {
                    sub.insert(field.name.as_str(), take(row));
                }
            }
        }
        Ok(())
    }

    /// Lists with the computed fields of `projection` filled in.
    async fn list_computed(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
        plan: Plan,
    ) -> Result<Vec<Record>> {
        let mut records = self.child.list(caller, filter, &plan.child).await?;
        for step in &plan.steps {
            self.compute(caller, step, &mut records).await?;
        }
        // Dependencies nobody asked for are dropped, unless there were none.
        if plan
            .child
            .iter()
            .all(|p| projection.0.iter().any(|q| q == p))
        {
            return Ok(records);
        }
        let shape = Shape::of(projection);
        Ok(records.iter().map(|r| shape.apply(r)).collect())
    }
}

/// Feeds a value to a hasher: equal values (as `==` sees them) hash equally.
pub(super) fn hash_value(value: &Value, hasher: &mut impl Hasher) {
    std::mem::discriminant(value).hash(hasher);
    match value {
        Value::Null => {}
        Value::Bool(b) => b.hash(hasher),
        Value::Int(i) => i.hash(hasher),
        Value::Float(f) => f.to_bits().hash(hasher),
        Value::Decimal(d) => d.hash(hasher),
        Value::String(s) => s.hash(hasher),
        Value::Date(d) => d.hash(hasher),
        Value::Dateonly(d) => d.hash(hasher),
        Value::Time(t) => t.hash(hasher),
        Value::Uuid(u) => u.hash(hasher),
        Value::Json(j) => j.to_string().hash(hasher),
        Value::Binary(b) => b.hash(hasher),
        Value::Point(x, y) => {
            x.to_bits().hash(hasher);
            y.to_bits().hash(hasher);
        }
        Value::Array(items) => items.iter().for_each(|v| hash_value(v, hasher)),
        Value::Record(r) => r.iter().for_each(|(k, v)| {
            k.hash(hasher);
            hash_value(v, hasher);
        }),
    }
}

/// The record under the relations of `prefix`; `None` when one of them is null.
fn descend<'a>(record: &'a Record, prefix: &[String]) -> Option<&'a Record> {
    let mut current = record;
    for relation in prefix {
        match current.get(relation) {
            Some(Value::Record(r)) => current = r,
            _ => return None,
        }
    }
    Some(current)
}

fn descend_mut<'a>(record: &'a mut Record, prefix: &[String]) -> Option<&'a mut Record> {
    let mut current = record;
    for relation in prefix {
        match current.get_mut(relation) {
            Some(Value::Record(r)) => current = r,
            _ => return None,
        }
    }
    Some(current)
}

/// The shape of a projection (columns, then relations with their own shapes), to cut records
/// back to what was asked.
pub(super) struct Shape {
    columns: Vec<String>,
    relations: Vec<(String, Shape)>,
}

impl Shape {
    pub(super) fn of(projection: &Projection) -> Self {
        Self {
            columns: projection.columns_only().map(str::to_owned).collect(),
            relations: projection
                .relations()
                .into_iter()
                .map(|r| (r.to_owned(), Self::of(&projection.under(r))))
                .collect(),
        }
    }

    pub(super) fn apply(&self, record: &Record) -> Record {
        let mut out = Record::with_capacity(self.columns.len() + self.relations.len());
        for column in &self.columns {
            out.insert(
                column.as_str(),
                record.get(column).cloned().unwrap_or(Value::Null),
            );
        }
        for (relation, shape) in &self.relations {
            let value = match record.get(relation) {
                Some(Value::Record(r)) => Value::Record(Box::new(shape.apply(r))),
                _ => Value::Null,
            };
            out.insert(relation.as_str(), value);
        }
        out
    }
}

#[async_trait]
impl Decorator for Computed {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn list(
        &self,
        caller: &Caller,
        filter: &Filter,
        projection: &Projection,
    ) -> Result<Vec<Record>> {
        let plan = self.plan(projection)?;
        if plan.steps.is_empty() {
            return self.child.list(caller, filter, projection).await;
        }
        self.list_computed(caller, filter, projection, plan).await
    }

    async fn aggregate(
        &self,
        caller: &Caller,
        filter: &Filter,
        aggregation: &Aggregation,
        limit: Option<u64>,
    ) -> Result<Vec<AggregateResult>> {
        let fields = Projection::new(
            aggregation
                .field
                .iter()
                .cloned()
                .chain(aggregation.groups.iter().map(|g| g.field.clone())),
        );
        let plan = self.plan(&fields)?;
        if plan.steps.is_empty() {
            return self
                .child
                .aggregate(caller, filter, aggregation, limit)
                .await;
        }
        // The layer below cannot aggregate what it does not have: every matching record is
        // listed and aggregated here, as the agent's computed decorator does.
        let all = Filter {
            sort: Sort::default(),
            page: None,
            ..filter.clone()
        };
        let records = self.list_computed(caller, &all, &fields, plan).await?;
        Ok(evaluate::aggregate(
            &records,
            aggregation,
            caller.timezone,
            limit,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::customizer::test_support::{computed, sqlite};
    use crate::datasource::{PrimitiveType, RelationSchema};

    fn field(collection: &str, name: &str, deps: &[&str]) -> Customization {
        computed(
            collection,
            name,
            deps,
            super::super::closures::compute(|b| Ok(vec![Value::Null; b.len])),
        )
    }

    fn names(customizations: &[Customization]) -> Vec<String> {
        customizations
            .iter()
            .filter_map(|c| match &c.kind {
                Kind::ComputedField { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    fn schema() -> DataSourceSchema {
        let mut schema = DataSourceSchema::default();
        let mut books = CollectionSchema::new("books");
        books.fields.insert(
            "title".into(),
            FieldSchema::Column(ColumnSchema::new(PrimitiveType::String)),
        );
        books.fields.insert(
            "author_id".into(),
            FieldSchema::Column(ColumnSchema::new(PrimitiveType::Number)),
        );
        let mut authors = CollectionSchema::new("authors");
        authors.fields.insert(
            "name".into(),
            FieldSchema::Column(ColumnSchema::new(PrimitiveType::String)),
        );
        schema.collections.insert("books".into(), books);
        schema.collections.insert("authors".into(), authors);
        schema
    }

    #[test]
    fn fields_reading_only_existing_fields_are_early_the_others_late() {
        let below = schema();
        let customizations = vec![
            // Depends on a field declared after it, which is early: early too.
            field("books", "shout", &["loud"]),
            field("books", "loud", &["title"]),
            // Reads a relation that only the relation layer adds: late, and so is its reader.
            field("books", "byline", &["title", "author:name"]),
            field("books", "credit", &["byline"]),
            // Reads an early field of another collection.
            field("authors", "upper", &["name"]),
        ];
        let (early, late) = split(&below, customizations);
        assert_eq!(names(&early), ["shout", "loud", "upper"]);
        assert_eq!(names(&late), ["byline", "credit"]);

        // With the relation below (a native one), everything is early.
        let mut with_relation = below;
        if let Some(books) = with_relation.collections.get_mut("books") {
            books.fields.insert(
                "author".into(),
                FieldSchema::Relation(RelationSchema::ManyToOne {
                    foreign_collection: "authors".into(),
                    foreign_key: "author_id".into(),
                    foreign_key_target: "id".into(),
                }),
            );
        }
        let (early, late) = split(
            &with_relation,
            vec![field("books", "byline", &["title", "author:name"])],
        );
        assert_eq!(names(&early), ["byline"]);
        assert!(late.is_empty());
    }

    #[tokio::test]
    async fn each_record_gets_the_value_of_its_own_row_and_equal_rows_are_computed_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let base = sqlite(
            "CREATE TABLE people (id INTEGER PRIMARY KEY, first TEXT, last TEXT);
             INSERT INTO people VALUES (1, 'Ada', 'L'), (2, 'Alan', 'T'), (3, 'Ada', 'L'),
               (4, NULL, 'T'), (5, 'Ada', 'T');",
        )
        .await;
        let rows = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&rows);
        let full = computed(
            "people",
            "full",
            &["first", "last"],
            super::super::closures::compute(move |batch| {
                seen.fetch_add(batch.len, Ordering::SeqCst);
                let (first, last) = (batch.column("first"), batch.column("last"));
                let text = |v: &Value| v.as_str().unwrap_or("?").to_owned();
                Ok(first
                    .into_iter()
                    .flatten()
                    .zip(last.into_iter().flatten())
                    .map(|(f, l)| Value::String(format!("{} {}", text(f), text(l))))
                    .collect())
            }),
        );
        let ds = layer(&base, vec![full], &StackOptions::default()).unwrap();
        let filter = Filter::default().with_sort(Sort::asc("id"));
        let records = ds
            .collection("people")
            .unwrap()
            .list(
                &crate::customizer::test_support::caller(),
                &filter,
                &Projection::new(["id", "full"]),
            )
            .await
            .unwrap();
        let full: Vec<_> = records
            .iter()
            .map(|r| r.get("full").and_then(Value::as_str).unwrap_or_default())
            .collect();
        assert_eq!(full, ["Ada L", "Alan T", "Ada L", "? T", "Ada T"]);
        // Rows 1 and 3 read the same values: one row of the batch serves both.
        assert_eq!(rows.load(Ordering::SeqCst), 4);
        // Asked for with the field, the dependencies keep their values in every record: the
        // first of two equal ones (whose values went into the batch) as the second.
        let records = ds
            .collection("people")
            .unwrap()
            .list(
                &crate::customizer::test_support::caller(),
                &filter,
                &Projection::new(["id", "first", "last", "full"]),
            )
            .await
            .unwrap();
        let cells: Vec<(Value, Value, Value)> = records
            .iter()
            .map(|r| {
                let get = |f: &str| r.get(f).cloned().unwrap_or(Value::Null);
                (get("first"), get("last"), get("full"))
            })
            .collect();
        let s = |v: &str| Value::String(v.to_owned());
        assert_eq!(
            cells,
            [
                (s("Ada"), s("L"), s("Ada L")),
                (s("Alan"), s("T"), s("Alan T")),
                (s("Ada"), s("L"), s("Ada L")),
                (Value::Null, s("T"), s("? T")),
                (s("Ada"), s("T"), s("Ada T")),
            ]
        );
    }

    #[tokio::test]
    async fn a_dependency_named_twice_reaches_the_handler_twice() {
        let base = sqlite(
            "CREATE TABLE people (id INTEGER PRIMARY KEY, first TEXT);
             INSERT INTO people VALUES (1, 'Ada'), (2, 'Alan');",
        )
        .await;
        let twice = computed(
            "people",
            "twice",
            &["first", "first"],
            super::super::closures::compute(|batch| {
                Ok((0..batch.len)
                    .map(|i| {
                        let cells: Vec<&str> = batch
                            .columns
                            .iter()
                            .map(|c| c.values[i].as_str().unwrap_or("?"))
                            .collect();
                        Value::String(cells.join("+"))
                    })
                    .collect())
            }),
        );
        let ds = layer(&base, vec![twice], &StackOptions::default()).unwrap();
        let records = ds
            .collection("people")
            .unwrap()
            .list(
                &crate::customizer::test_support::caller(),
                &Filter::default().with_sort(Sort::asc("id")),
                &Projection::new(["first", "twice"]),
            )
            .await
            .unwrap();
        let cells: Vec<_> = records
            .iter()
            .map(|r| (r.get("first").cloned(), r.get("twice").cloned()))
            .collect();
        let s = |v: &str| Some(Value::String(v.to_owned()));
        assert_eq!(
            cells,
            [(s("Ada"), s("Ada+Ada")), (s("Alan"), s("Alan+Alan"))]
        );
    }

    #[tokio::test]
    async fn a_missing_dependency_fails_or_skips_the_field_and_its_readers() {
        let base = sqlite("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT);").await;
        let customizations = || {
            vec![
                field("books", "a", &["nope"]),
                field("books", "b", &["a"]),
                field("books", "c", &["title"]),
            ]
        };
        let Err(error) = layer(&base, customizations(), &StackOptions::default()) else {
            panic!("a missing dependency is refused")
        };
        let message = error.to_string();
        assert!(
            message.contains("test: the computed field 'books.a' depends on 'nope'")
                && message.contains("'books.nope' does not exist"),
            "{message}"
        );
        let lenient = StackOptions {
            ignore_missing_schema_element_errors: true,
            ..StackOptions::default()
        };
        let ds = layer(&base, customizations(), &lenient).unwrap();
        let books = ds.schema().collection("books").unwrap();
        assert!(books.column("a").is_none() && books.column("b").is_none());
        assert!(books.column("c").is_some());
    }
}
