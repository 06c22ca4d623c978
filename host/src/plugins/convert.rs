//! Conversions between the host's typed values and the WIT shapes: columnar batches, the
//! caller, JSON filters, records and aggregations; and the host side of `collections`.

use serde_json::{Map, Value as Json, json};

use super::bindings::v3::{PackedBatch, PackedColumn, PackedNamedColumn, Texts};
use super::bindings::{Batch, CallContext, Column, NamedColumn, Scope, WitCaller};
use super::loader::Reads;
use crate::agent::wire;
use crate::customizer::{Batch as ComputeBatch, Context};
use crate::datasource::schema::Wire;
use crate::datasource::{
    Aggregation, AggregationOperation, Caller, CollectionSchema, ColumnSchema, ColumnType,
    ConditionTree, DataSourceSchema, DateOperation, Error, Filter, Page, PrimitiveType, Projection,
    Record, Result, Sort, SortClause, Value,
};

pub fn caller(c: &Caller) -> WitCaller {
    WitCaller {
        id: c.id,
        email: c.email.clone(),
        first_name: c.first_name.clone(),
        last_name: c.last_name.clone(),
        team: c.team.clone(),
        role: c.role.clone(),
        tags: c.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        timezone: c.timezone.name().to_owned(),
    }
}

pub fn call_context(c: &Caller, ctx: &Context) -> CallContext {
    CallContext {
        caller: caller(c),
        collection: ctx.collection.clone(),
    }
}

/// The column at a field or `relation:field` path of `collection`.
pub fn column_at<'s>(
    schema: &'s DataSourceSchema,
    collection: &str,
    path: &str,
) -> Option<&'s ColumnSchema> {
    let (head, rest) = match path.split_once(':') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let c = schema.collection(collection).ok()?;
    match rest {
        None => c.column(head),
        Some(rest) => column_at(schema, c.relation(head)?.foreign_collection(), rest),
    }
}

/// One column of cells, typed by the field's column type and wire form.
///
/// Values cross in the agent's wire form ([`Wire`]), so that what a plugin reads is what the
/// routes serve and what it writes back is read the same way: where that form is a string
/// (bigints on PostgreSQL and MariaDB, PostgreSQL/MySQL decimals with their scale, binary keys as
/// hex, other binary columns as data URIs) the column is `strings`, never an `f64` that would
/// round `9007199254740993` or drop the scale of `12.30`. Other numbers, booleans and
/// string-like types cross as such; everything else (arrays, objects, points) as JSON text in
/// the wire form of its elements.
pub fn column<'a, C: ColumnForm>(
    values: impl ExactSizeIterator<Item = &'a Value>,
    ty: Option<&ColumnType>,
    wire: Wire,
) -> C {
    let text = |v: &Value, cells: &mut C::Cells| match v {
        Value::Null => cells.push(None),
        Value::String(s) => cells.push(Some(s)),
        other => cells.push_owned(Some(other.to_id_string())),
    };
    // A scalar whose wire form is text: that text, exactly as the routes write it.
    let wire_text = |v: &Value, cells: &mut C::Cells| match v {
        Value::Null => cells.push(None),
        other => cells.push_owned(Some(match wire::to_json(other, wire) {
            Ok(Json::String(s)) => s,
            Ok(json) => json.to_string(),
            Err(_) => other.to_id_string(),
        })),
    };
    let primitive = ty.and_then(ColumnType::primitive);
    match (primitive, wire) {
        (Some(_), Wire::NumberString | Wire::Hex | Wire::DataUri) => {
            C::strings(cells(values, wire_text))
        }
        (Some(PrimitiveType::Number), _) => C::numbers(values.map(Value::as_f64).collect()),
        (Some(PrimitiveType::Boolean), _) => C::booleans(
            values
                .map(|v| match v {
                    Value::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect(),
        ),
        (
            Some(
                PrimitiveType::String
                | PrimitiveType::Enum
                | PrimitiveType::Uuid
                | PrimitiveType::Date
                | PrimitiveType::Dateonly
                | PrimitiveType::Time,
            ),
            _,
        ) => C::strings(cells(values, text)),
        _ => C::json(cells(values, |v, cells: &mut C::Cells| {
            cells.push_owned(
                (!v.is_null())
                    .then(|| serde_json::to_string(&wire::WireValue(v, wire)).unwrap_or_default()),
            )
        })),
    }
}

/// The text cells `cell` writes for each value.
fn cells<'a, S: Cells>(
    values: impl ExactSizeIterator<Item = &'a Value>,
    cell: impl Fn(&Value, &mut S),
) -> S {
    let mut cells = S::with_rows(values.len());
    for v in values {
        cell(v, &mut cells);
    }
    cells
}

/// The two shapes of a WIT column: one string per text cell (`types.column`, what 0.1.0 and
/// 0.2.0 plugins take, and every `collections.list` answer), or text cells packed in one buffer
/// (`packed.column`, a 0.3.0 plugin's computed-field rows).
pub trait ColumnForm {
    type Cells: Cells;
    fn numbers(cells: Vec<Option<f64>>) -> Self;
    fn strings(cells: Self::Cells) -> Self;
    fn booleans(cells: Vec<Option<bool>>) -> Self;
    fn json(cells: Self::Cells) -> Self;
}

/// Text cells being written, in either shape.
pub trait Cells {
    fn with_rows(rows: usize) -> Self;
    fn push(&mut self, cell: Option<&str>);
    /// A cell the caller has just made: moved where the shape keeps strings.
    fn push_owned(&mut self, cell: Option<String>) {
        self.push(cell.as_deref());
    }
}

impl Cells for Vec<Option<String>> {
    fn with_rows(rows: usize) -> Self {
        Vec::with_capacity(rows)
    }

    fn push(&mut self, cell: Option<&str>) {
        Vec::push(self, cell.map(str::to_owned));
    }

    fn push_owned(&mut self, cell: Option<String>) {
        Vec::push(self, cell);
    }
}

impl Cells for Texts {
    fn with_rows(rows: usize) -> Self {
        Texts {
            text: String::new(),
            ends: Vec::with_capacity(rows),
            nulls: Vec::new(),
        }
    }

    fn push(&mut self, cell: Option<&str>) {
        let row = u32::try_from(self.ends.len()).unwrap_or(u32::MAX);
        match cell {
            Some(s) => self.text.push_str(s),
            None => self.nulls.push(row),
        }
        // A guest's memory is at most 4 GiB: what fits in it fits in a u32.
        self.ends
            .push(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
    }
}

/// The two shapes' constructors, case for case.
macro_rules! column_form {
    ($column:ty, $cells:ty) => {
        impl ColumnForm for $column {
            type Cells = $cells;
            fn numbers(cells: Vec<Option<f64>>) -> Self {
                Self::Numbers(cells)
            }
            fn strings(cells: Self::Cells) -> Self {
                Self::Strings(cells)
            }
            fn booleans(cells: Vec<Option<bool>>) -> Self {
                Self::Booleans(cells)
            }
            fn json(cells: Self::Cells) -> Self {
                Self::Json(cells)
            }
        }
    };
}

column_form!(Column, Vec<Option<String>>);
column_form!(PackedColumn, Texts);

/// A computed field's dependencies, each column in the wire form of the field it reads (found
/// from its path in the context's schema; computed fields have their type's form).
fn compute_columns<'b, C: ColumnForm>(
    batch: &'b ComputeBatch,
    ctx: &'b Context,
) -> impl Iterator<Item = (String, C)> + 'b {
    let schema = ctx.datasource.schema();
    batch.columns.iter().map(move |c| {
        let wire = ctx
            .collection
            .as_deref()
            .and_then(|name| column_at(schema, name, &c.path))
            .map_or_else(|| Wire::for_type(&c.column_type), |col| col.wire);
        (
            c.path.clone(),
            column(c.values.iter(), Some(&c.column_type), wire),
        )
    })
}

/// A computed field's dependencies as a WIT batch of 0.1.0 and 0.2.0.
pub fn compute_batch(batch: &ComputeBatch, ctx: &Context) -> Batch {
    Batch {
        len: batch.len as u32,
        columns: compute_columns(batch, ctx)
            .map(|(name, data)| NamedColumn { name, data })
            .collect(),
    }
}

/// A computed field's dependencies as a packed batch of 0.3.0.
pub fn compute_batch_packed(batch: &ComputeBatch, ctx: &Context) -> PackedBatch {
    PackedBatch {
        len: batch.len as u32,
        columns: compute_columns(batch, ctx)
            .map(|(name, data)| PackedNamedColumn { name, data })
            .collect(),
    }
}

/// A 0.3.0 plugin's computed values as a column of 0.1.0's shape, for [`values`]; `Err` names
/// what is malformed (offsets out of order or past the text, a character split, nulls out of
/// order or range, or not `rows` cells).
pub fn unpack(column: PackedColumn, rows: usize) -> std::result::Result<Column, String> {
    Ok(match column {
        PackedColumn::Numbers(v) => Column::Numbers(v),
        PackedColumn::Booleans(v) => Column::Booleans(v),
        PackedColumn::Strings(t) => Column::Strings(unpack_texts(&t, rows)?),
        PackedColumn::Json(t) => Column::Json(unpack_texts(&t, rows)?),
    })
}

fn unpack_texts(t: &Texts, rows: usize) -> std::result::Result<Vec<Option<String>>, String> {
    if t.ends.len() != rows {
        return Err(format!("{} text cells for {rows} rows", t.ends.len()));
    }
    if !t.nulls.is_sorted_by(|a, b| a < b) || t.nulls.last().is_some_and(|&n| n as usize >= rows) {
        return Err("null rows out of order or out of range".to_owned());
    }
    let mut nulls = t.nulls.iter().peekable();
    let mut start = 0;
    let mut cells = Vec::with_capacity(rows);
    for (row, &end) in t.ends.iter().enumerate() {
        let end = end as usize;
        let cell = t.text.get(start..end).ok_or_else(|| {
            format!(
                "text cell {row} ends at {end}, which is before its start ({start}), past the \
                 text ({} bytes) or inside a character",
                t.text.len()
            )
        })?;
        let null = nulls.next_if(|&&n| n as usize == row).is_some();
        cells.push((!null).then(|| cell.to_owned()));
        start = end;
    }
    Ok(cells)
}

/// A number a plugin wrote as text, kept exact: an integer (`"9007199254740993"`) or a decimal
/// with its scale (`"12.30"`), as read from a `strings` column. `None` when it is not a number.
fn exact_number(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Some(Value::Int(i));
    }
    // Plain decimal digits only: no exponent, `inf` or `NaN`.
    let plain = !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.'));
    if plain {
        return t.parse::<bigdecimal::BigDecimal>().ok().map(Value::Decimal);
    }
    Value::from_json_typed(&Json::String(t.to_owned()), PrimitiveType::Number)
}

/// Typed values from a guest column, for a field of type `ty`; `Err` names what is wrong.
pub fn values(column: Column, ty: &ColumnType) -> std::result::Result<Vec<Value>, String> {
    let cast = |j: Json| -> std::result::Result<Value, String> {
        match ty.primitive() {
            Some(p) if p != PrimitiveType::Json => Value::from_json_typed(&j, p)
                .ok_or_else(|| format!("{j} is not a valid {}", p.as_str())),
            _ if j.is_null() => Ok(Value::Null),
            _ => Ok(Value::Json(j)),
        }
    };
    let kind_of = |c: &Column| match c {
        Column::Numbers(_) => "numbers",
        Column::Strings(_) => "strings",
        Column::Booleans(_) => "booleans",
        Column::Json(_) => "json",
    };
    let wrong = |c: &Column| {
        format!(
            "a column of {} for a field of type {}",
            kind_of(c),
            ty.to_json()
        )
    };
    match (ty.primitive(), column) {
        (Some(PrimitiveType::Number), Column::Numbers(v)) => Ok(v
            .into_iter()
            .map(|n| match n {
                None => Value::Null,
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::Int(f as i64),
                Some(f) => Value::Float(f),
            })
            .collect()),
        // Numbers as text, as a plugin reads bigints and decimals: kept exact.
        (Some(PrimitiveType::Number), Column::Strings(v)) => v
            .into_iter()
            .map(|s| match s {
                None => Ok(Value::Null),
                Some(s) => exact_number(&s).ok_or_else(|| format!("\"{s}\" is not a number")),
            })
            .collect(),
        (Some(PrimitiveType::Boolean), Column::Booleans(v)) => Ok(v
            .into_iter()
            .map(|b| b.map_or(Value::Null, Value::Bool))
            .collect()),
        (
            Some(PrimitiveType::Number | PrimitiveType::Boolean),
            c @ (Column::Strings(_) | Column::Booleans(_) | Column::Numbers(_)),
        ) => Err(wrong(&c)),
        (_, Column::Strings(v)) => v
            .into_iter()
            .map(|s| cast(s.map_or(Json::Null, Json::String)))
            .collect(),
        (_, Column::Json(v)) => v
            .into_iter()
            .map(|s| match s {
                None => Ok(Value::Null),
                Some(s) => {
                    cast(serde_json::from_str(&s).map_err(|e| format!("invalid JSON cell: {e}"))?)
                }
            })
            .collect(),
        (_, c) => Err(wrong(&c)),
    }
}

/// A filter from the guest: `null`, a condition tree, or
/// `{"conditionTree", "search", "searchExtended", "segment"}`.
pub fn filter(
    text: &str,
    collection: &CollectionSchema,
    schema: &DataSourceSchema,
) -> Result<Filter> {
    let json: Json = serde_json::from_str(text)
        .map_err(|e| Error::Validation(format!("Invalid filter JSON: {e}")))?;
    if json.is_null() {
        return Ok(Filter::default());
    }
    let Some(object) = json.as_object() else {
        return Err(Error::validation("Invalid filter: expected an object"));
    };
    if object.contains_key("field") || object.contains_key("aggregator") {
        return Ok(Filter::new(Some(ConditionTree::parse(
            &json, collection, schema,
        )?)));
    }
    let tree = match object.get("conditionTree") {
        None | Some(Json::Null) => None,
        Some(t) => Some(ConditionTree::parse(t, collection, schema)?),
    };
    Ok(Filter {
        search: object
            .get("search")
            .and_then(Json::as_str)
            .map(str::to_owned),
        search_extended: object
            .get("searchExtended")
            .and_then(Json::as_bool)
            .unwrap_or(false),
        segment: object
            .get("segment")
            .and_then(Json::as_str)
            .map(str::to_owned),
        ..Filter::new(tree)
    })
}

/// The JSON form of a filter the guest receives (the full form, so search and segment survive).
pub fn filter_json(f: &Filter) -> Json {
    json!({
        "conditionTree": f.condition_tree.as_ref().map(ConditionTree::to_json),
        "search": f.search,
        "searchExtended": f.search_extended,
        "segment": f.segment,
    })
}

pub fn aggregation_json(a: &Aggregation) -> Json {
    json!({
        "operation": format!("{:?}", a.operation),
        "field": a.field,
        "groups": a.groups.iter().map(|g| json!({
            "field": g.field,
            "operation": g.operation.map(|o| format!("{o:?}")),
        })).collect::<Vec<_>>(),
    })
}

fn aggregation(text: &str) -> Result<Aggregation> {
    let json: Json = serde_json::from_str(text)
        .map_err(|e| Error::Validation(format!("Invalid aggregation JSON: {e}")))?;
    let operation: AggregationOperation = json
        .get("operation")
        .and_then(Json::as_str)
        .unwrap_or("Count")
        .parse()?;
    let mut a = Aggregation::new(operation, json.get("field").and_then(Json::as_str));
    for g in json
        .get("groups")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let field = g
            .get("field")
            .and_then(Json::as_str)
            .ok_or_else(|| Error::validation("Invalid aggregation: a group has no field"))?;
        let op = match g.get("operation").and_then(Json::as_str) {
            Some(o) => Some(o.parse::<DateOperation>()?),
            None => None,
        };
        a = a.group_by(field, op);
    }
    Ok(a)
}

/// A record from a guest JSON object, typed by the collection's columns.
pub fn record(json: &Json, collection: &CollectionSchema) -> Result<Record> {
    let object = json
        .as_object()
        .ok_or_else(|| Error::validation("Invalid record: expected an object"))?;
    let mut r = Record::new();
    for (k, v) in object {
        let column = collection
            .column(k)
            .ok_or_else(|| Error::Validation(format!("Unknown field \"{k}\"")))?;
        let value = match (column.column_type.primitive(), v) {
            // A bigint or decimal as its text (how the plugin read it): kept exact, where the
            // loose filter cast would make `12.30` a float.
            (Some(PrimitiveType::Number), Json::String(text)) => exact_number(text)
                .ok_or_else(|| Error::Validation(format!("Wrong type for \"{k}\": {v}")))?,
            // Bytes as the plugin read them: hex for keys, a data URI otherwise (both accepted,
            // as hooks see bytes as hex).
            (Some(p), _) => Value::from_json_typed(v, p)
                .ok_or_else(|| Error::Validation(format!("Wrong type for \"{k}\": {v}")))?,
            (None, _) if v.is_null() => Value::Null,
            (None, _) => Value::Json(v.clone()),
        };
        r.insert(k.as_str(), value);
    }
    Ok(r)
}

pub fn records_json(records: &[Record]) -> Json {
    serde_json::to_value(records).unwrap_or(Json::Null)
}

/// Records with each column's value in its wire form, as `list` gives them: what a plugin reads
/// back from `create` is the form it reads and writes elsewhere.
fn records_wire_json(records: &[Record], collection: &CollectionSchema) -> Json {
    records
        .iter()
        .map(|r| {
            r.iter()
                .map(|(k, v)| {
                    let wire = collection.column(k).map_or(Wire::Plain, |c| c.wire);
                    (k.to_owned(), wire::to_json(v, wire).unwrap_or(Json::Null))
                })
                .collect::<Map<_, _>>()
        })
        .collect::<Vec<_>>()
        .into()
}

/// Records as a batch with one column per projected path.
pub fn batch(
    records: &[Record],
    paths: &[String],
    schema: &DataSourceSchema,
    collection: &str,
) -> Batch {
    let columns = paths
        .iter()
        .map(|p| {
            let at = column_at(schema, collection, p);
            NamedColumn {
                name: p.clone(),
                data: column(
                    records
                        .iter()
                        .map(|r| r.get_path(p).unwrap_or(&Value::Null)),
                    at.map(|c| &c.column_type),
                    at.map_or(Wire::Plain, |c| c.wire),
                ),
            }
        })
        .collect();
    Batch {
        len: records.len() as u32,
        columns,
    }
}

/// A plugin's read `filter` on `collection`, restricted to the caller's scope there unless the
/// plugin declared `unscoped_reads` for it. The one place every read of every plugin entry point
/// (charts, actions, hooks, segments, search, workflow steps, …) passes: all of them read through
/// `collections.list` and `collections.aggregate`.
///
/// The scope is parsed against the schema the plugin reads (the stack below its layer), not the
/// served one: the customizations sit below renames, so a scope that names a field exposed only
/// above that layer (a renamed field) cannot be applied and the read is refused (403), never
/// served unscoped.
async fn scoped_read(
    reads: &Reads,
    scope: &Scope,
    collection: &CollectionSchema,
    filter: Filter,
) -> Result<Filter> {
    if reads.unscoped.contains(&collection.name) {
        return Ok(filter);
    }
    let tree = reads
        .permissions
        .scope(&scope.caller, collection, scope.ctx.datasource.schema())
        .await
        .map_err(|e| match e {
            crate::auth::Error::Forbidden(m) | crate::auth::Error::InvalidScope(m) => {
                Error::Forbidden(m)
            }
            other => Error::Internal(other.to_string()),
        })?;
    Ok(filter.and(tree))
}

pub async fn host_list(
    reads: &Reads,
    scope: &Scope,
    name: &str,
    filter_text: &str,
    projection: Vec<String>,
    sort_text: &str,
    page: Option<(u32, u32)>,
) -> Result<Batch> {
    let ds = &scope.ctx.datasource;
    let collection = ds.collection(name)?;
    let mut f = filter(filter_text, collection.schema(), ds.schema())?;
    let sort: Json = serde_json::from_str(sort_text)
        .map_err(|e| Error::Validation(format!("Invalid sort JSON: {e}")))?;
    f.sort = Sort(
        sort.as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                Some(SortClause {
                    field: c.get("field")?.as_str()?.to_owned(),
                    ascending: c.get("ascending").and_then(Json::as_bool).unwrap_or(true),
                })
            })
            .collect(),
    );
    f.page = page.map(|(skip, limit)| Page::new(u64::from(skip), u64::from(limit)));
    // A plugin paging without a sort gets the list route's default (primary keys), so that its
    // pages neither repeat nor skip records whatever plan the database picks.
    if f.page.is_some() && f.sort.is_empty() {
        f.sort = Sort::by_primary_keys(collection.schema());
    }
    let f = scoped_read(reads, scope, collection.schema(), f).await?;
    let records = collection
        .list(
            &scope.caller,
            &f,
            &Projection::new(projection.iter().cloned()),
        )
        .await?;
    Ok(batch(&records, &projection, ds.schema(), name))
}

pub async fn host_aggregate(
    reads: &Reads,
    scope: &Scope,
    name: &str,
    filter_text: &str,
    aggregation_text: &str,
    limit: Option<u32>,
) -> Result<String> {
    let ds = &scope.ctx.datasource;
    let collection = ds.collection(name)?;
    let f = filter(filter_text, collection.schema(), ds.schema())?;
    let f = scoped_read(reads, scope, collection.schema(), f).await?;
    let a = aggregation(aggregation_text)?;
    let rows = collection
        .aggregate(&scope.caller, &f, &a, limit.map(u64::from))
        .await?;
    // The value is a number (a sum of decimals too, as the agent's charts give it); group keys
    // are values of their column, in its wire form (a bigint as text, bytes as hex or data URI).
    let schema = ds.schema();
    let out: Vec<Json> = rows
        .iter()
        .map(|r| {
            let value = match &r.value {
                Value::Decimal(_) => r
                    .value
                    .as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Json::Null, Json::Number),
                other => serde_json::to_value(other).unwrap_or(Json::Null),
            };
            let group = r
                .group
                .iter()
                .map(|(k, v)| {
                    let wire = column_at(schema, name, k).map_or(Wire::Plain, |c| c.wire);
                    (k.clone(), wire::to_json(v, wire).unwrap_or(Json::Null))
                })
                .collect::<Map<_, _>>();
            json!({ "value": value, "group": group })
        })
        .collect();
    Ok(Json::from(out).to_string())
}

pub async fn host_create(scope: &Scope, name: &str, records_text: &str) -> Result<String> {
    let collection = scope.ctx.datasource.collection(name)?;
    let json: Json = serde_json::from_str(records_text)
        .map_err(|e| Error::Validation(format!("Invalid records JSON: {e}")))?;
    let records = json
        .as_array()
        .ok_or_else(|| Error::validation("Invalid records: expected an array"))?
        .iter()
        .map(|r| record(r, collection.schema()))
        .collect::<Result<Vec<_>>>()?;
    let created = collection.create(&scope.caller, records).await?;
    Ok(records_wire_json(&created, collection.schema()).to_string())
}

pub async fn host_update(
    scope: &Scope,
    name: &str,
    filter_text: &str,
    patch_text: &str,
) -> Result<()> {
    let ds = &scope.ctx.datasource;
    let collection = ds.collection(name)?;
    let f = filter(filter_text, collection.schema(), ds.schema())?;
    let patch: Json = serde_json::from_str(patch_text)
        .map_err(|e| Error::Validation(format!("Invalid patch JSON: {e}")))?;
    let patch = record(&patch, collection.schema())?;
    collection.update(&scope.caller, &f, &patch).await
}

pub async fn host_delete(scope: &Scope, name: &str, filter_text: &str) -> Result<()> {
    let ds = &scope.ctx.datasource;
    let collection = ds.collection(name)?;
    let f = filter(filter_text, collection.schema(), ds.schema())?;
    collection.delete(&scope.caller, &f).await
}

/// The datasource schema as plugins read it: collections with their fields' names and types.
pub fn schema_json(schema: &DataSourceSchema) -> Json {
    let collections: Vec<Json> = schema
        .collections
        .iter()
        .map(|(name, c)| {
            let fields: Vec<Json> = c
                .columns()
                .map(|(n, col)| json!({"name": n, "type": col.column_type.to_json(), "isPrimaryKey": col.is_primary_key, "isReadOnly": col.is_read_only}))
                .chain(c.relations().map(|(n, r)| json!({"name": n, "relation": r.kind_name(), "foreignCollection": r.foreign_collection()})))
                .collect();
            json!({"name": name, "fields": fields})
        })
        .collect();
    json!({ "collections": collections })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::FieldSchema;

    #[test]
    fn numbers_come_back_as_ints_when_integral_and_wrong_kinds_are_refused() {
        let ty = ColumnType::Primitive(PrimitiveType::Number);
        let v = values(Column::Numbers(vec![Some(2.0), Some(2.5), None]), &ty).unwrap();
        assert_eq!(v, vec![Value::Int(2), Value::Float(2.5), Value::Null]);
        let err = values(Column::Booleans(vec![Some(true)]), &ty).unwrap_err();
        assert!(err.contains("booleans"), "{err}");
        let s = ColumnType::Primitive(PrimitiveType::String);
        assert_eq!(
            values(Column::Strings(vec![Some("a".into())]), &s).unwrap(),
            vec![Value::String("a".into())]
        );
    }

    #[test]
    fn a_column_is_typed_by_its_field() {
        let vals = [Value::Int(1), Value::Null];
        let n = column(
            vals.iter(),
            Some(&ColumnType::Primitive(PrimitiveType::Number)),
            Wire::Plain,
        );
        assert!(matches!(n, Column::Numbers(ref v) if v == &[Some(1.0), None]));
        let j = column(
            vals.iter(),
            Some(&ColumnType::Primitive(PrimitiveType::Json)),
            Wire::Plain,
        );
        assert!(matches!(j, Column::Json(ref v) if v == &[Some("1".to_owned()), None]));
    }

    fn strings(c: Column) -> Vec<Option<String>> {
        match c {
            Column::Strings(v) => v,
            other => panic!("expected strings, got {other:?}"),
        }
    }

    #[test]
    fn values_whose_wire_form_is_text_cross_as_that_text() {
        let number = ColumnType::Primitive(PrimitiveType::Number);
        let big = [Value::Int(9_007_199_254_740_993), Value::Null];
        assert_eq!(
            strings(column(big.iter(), Some(&number), Wire::NumberString)),
            [Some("9007199254740993".to_owned()), None]
        );
        let decimals = [
            Value::Decimal("12.30".parse().unwrap()),
            Value::Decimal("0.00".parse().unwrap()),
        ];
        assert_eq!(
            strings(column(decimals.iter(), Some(&number), Wire::NumberString)),
            [Some("12.30".to_owned()), Some("0.00".to_owned())]
        );
        // MariaDB decimals are numbers on the wire: they stay numbers.
        let n = column(decimals.iter(), Some(&number), Wire::Number);
        assert!(matches!(n, Column::Numbers(ref v) if v == &[Some(12.3), Some(0.0)]));
        let binary = ColumnType::Primitive(PrimitiveType::Binary);
        let bytes = [Value::Binary(vec![0xCA, 0xFE])];
        assert_eq!(
            strings(column(bytes.iter(), Some(&binary), Wire::Hex)),
            [Some("cafe".to_owned())]
        );
        assert_eq!(
            strings(column(bytes.iter(), Some(&binary), Wire::DataUri)),
            [Some("data:application/octet-stream;base64,yv4=".to_owned())]
        );
        // Arrays keep the wire form of their elements, in a JSON column.
        let array = ColumnType::Array(Box::new(number));
        let ids = [Value::Array(vec![Value::Int(9_007_199_254_740_993)])];
        let j = column(ids.iter(), Some(&array), Wire::NumberString);
        assert!(
            matches!(j, Column::Json(ref v) if v == &[Some(r#"["9007199254740993"]"#.to_owned())]),
            "{j:?}"
        );
    }

    fn packed(t: &Texts) -> (&str, &[u32], &[u32]) {
        (&t.text, &t.ends, &t.nulls)
    }

    #[test]
    fn text_cells_pack_into_one_buffer_and_unpack_to_the_same_values() {
        let ty = ColumnType::Primitive(PrimitiveType::String);
        let vals = [
            Value::String("Ann".into()),
            Value::Null,
            Value::String(String::new()),
            Value::String("Bé".into()),
        ];
        let out = column::<PackedColumn>(vals.iter(), Some(&ty), Wire::Plain);
        let PackedColumn::Strings(ref t) = out else {
            panic!("expected packed strings, got {out:?}");
        };
        assert_eq!(packed(t), ("AnnBé", &[3, 3, 3, 6][..], &[1][..]));
        let back = unpack(out, vals.len()).unwrap();
        assert_eq!(values(back, &ty).unwrap(), vals);
        // Exact numbers cross as packed text too; numbers and booleans as lists.
        let number = ColumnType::Primitive(PrimitiveType::Number);
        let big = [Value::Int(9_007_199_254_740_993), Value::Int(5)];
        let out = column::<PackedColumn>(big.iter(), Some(&number), Wire::NumberString);
        let PackedColumn::Strings(ref t) = out else {
            panic!("expected packed strings, got {out:?}");
        };
        assert_eq!(packed(t), ("90071992547409935", &[16, 17][..], &[][..]));
        let plain = column::<PackedColumn>(big.iter(), Some(&number), Wire::Plain);
        assert!(matches!(plain, PackedColumn::Numbers(ref v) if v.len() == 2));
    }

    #[test]
    fn a_malformed_packed_answer_is_refused_naming_what_is_wrong() {
        let texts = |text: &str, ends: &[u32], nulls: &[u32]| {
            PackedColumn::Strings(Texts {
                text: text.to_owned(),
                ends: ends.to_vec(),
                nulls: nulls.to_vec(),
            })
        };
        for (column, rows, expected) in [
            (texts("ab", &[1, 2], &[]), 3, "2 text cells for 3 rows"),
            (
                texts("ab", &[2, 1], &[]),
                2,
                "cell 1 ends at 1, which is before its start (2)",
            ),
            (texts("ab", &[1, 3], &[]), 2, "cell 1 ends at 3"),
            (texts("é", &[1], &[]), 1, "inside a character"),
            (texts("ab", &[1, 2], &[1, 0]), 2, "null rows out of order"),
            (texts("ab", &[1, 2], &[1, 1]), 2, "null rows out of order"),
            (texts("ab", &[1, 2], &[2]), 2, "out of range"),
        ] {
            let e = unpack(column, rows).unwrap_err();
            assert!(e.contains(expected), "{e} (expected {expected})");
        }
    }

    #[test]
    fn numbers_written_as_text_are_read_back_exactly() {
        let ty = ColumnType::Primitive(PrimitiveType::Number);
        let column = Column::Strings(vec![
            Some("9007199254740993".into()),
            Some("12.30".into()),
            None,
        ]);
        let v = values(column, &ty).unwrap();
        assert_eq!(v[0], Value::Int(9_007_199_254_740_993));
        assert!(
            matches!(&v[1], Value::Decimal(d) if d.to_string() == "12.30"),
            "{v:?}"
        );
        assert_eq!(v[2], Value::Null);
        let err = values(Column::Strings(vec![Some("twelve".into())]), &ty).unwrap_err();
        assert!(err.contains("twelve"), "{err}");

        let mut schema = CollectionSchema::new("prices");
        let mut price = ColumnSchema::new(PrimitiveType::Number);
        price.wire = Wire::NumberString;
        schema
            .fields
            .insert("price".into(), FieldSchema::Column(price));
        let mut key = ColumnSchema::new(PrimitiveType::Binary);
        key.wire = Wire::Hex;
        schema.fields.insert("key".into(), FieldSchema::Column(key));
        let r = record(&json!({"price": "12.30", "key": "cafe"}), &schema).unwrap();
        assert!(
            matches!(r.get("price"), Some(Value::Decimal(d)) if d.to_string() == "12.30"),
            "{r:?}"
        );
        assert_eq!(r.get("key"), Some(&Value::Binary(vec![0xCA, 0xFE])));
        assert!(record(&json!({"price": "abc"}), &schema).is_err());
    }
}
