//! Conversions between the host's typed values and the WIT shapes: columnar batches, the
//! caller, JSON filters, records and aggregations; and the host side of `collections`.

use serde_json::{Map, Value as Json, json};

use super::bindings::{Batch, CallContext, Column, NamedColumn, Scope, WitCaller};
use crate::customizer::Context;
use crate::datasource::{
    Aggregation, AggregationOperation, Caller, CollectionSchema, ColumnType, ConditionTree,
    DataSourceSchema, DateOperation, Error, Filter, Page, PrimitiveType, Projection, Record,
    Result, Sort, SortClause, Value,
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

/// The type of a field or `relation:field` path of `collection`.
pub fn type_at(schema: &DataSourceSchema, collection: &str, path: &str) -> Option<ColumnType> {
    let (head, rest) = match path.split_once(':') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let c = schema.collection(collection).ok()?;
    match rest {
        None => c.column(head).map(|col| col.column_type.clone()),
        Some(rest) => type_at(schema, c.relation(head)?.foreign_collection(), rest),
    }
}

/// One column of cells, typed by the field's column type (numbers, booleans and strings as
/// such; everything else as JSON text).
pub fn column<'a>(values: impl Iterator<Item = &'a Value>, ty: Option<&ColumnType>) -> Column {
    let text = |v: &Value| match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_id_string()),
    };
    match ty.and_then(ColumnType::primitive) {
        Some(PrimitiveType::Number) => Column::Numbers(values.map(Value::as_f64).collect()),
        Some(PrimitiveType::Boolean) => Column::Booleans(
            values
                .map(|v| match v {
                    Value::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect(),
        ),
        Some(
            PrimitiveType::String
            | PrimitiveType::Enum
            | PrimitiveType::Uuid
            | PrimitiveType::Date
            | PrimitiveType::Dateonly
            | PrimitiveType::Time,
        ) => Column::Strings(values.map(text).collect()),
        _ => Column::Json(
            values
                .map(|v| (!v.is_null()).then(|| serde_json::to_string(v).unwrap_or_default()))
                .collect(),
        ),
    }
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
        let value = match column.column_type.primitive() {
            Some(p) => Value::from_json_typed(v, p)
                .ok_or_else(|| Error::Validation(format!("Wrong type for \"{k}\": {v}")))?,
            None if v.is_null() => Value::Null,
            None => Value::Json(v.clone()),
        };
        r.insert(k.as_str(), value);
    }
    Ok(r)
}

pub fn records_json(records: &[Record]) -> Json {
    serde_json::to_value(records).unwrap_or(Json::Null)
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
            let ty = type_at(schema, collection, p);
            NamedColumn {
                name: p.clone(),
                data: column(
                    records
                        .iter()
                        .map(|r| r.get_path(p).unwrap_or(&Value::Null)),
                    ty.as_ref(),
                ),
            }
        })
        .collect();
    Batch {
        len: records.len() as u32,
        columns,
    }
}

pub async fn host_list(
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
    scope: &Scope,
    name: &str,
    filter_text: &str,
    aggregation_text: &str,
    limit: Option<u32>,
) -> Result<String> {
    let ds = &scope.ctx.datasource;
    let collection = ds.collection(name)?;
    let f = filter(filter_text, collection.schema(), ds.schema())?;
    let a = aggregation(aggregation_text)?;
    let rows = collection
        .aggregate(&scope.caller, &f, &a, limit.map(u64::from))
        .await?;
    let out: Vec<Json> = rows
        .iter()
        .map(|r| {
            json!({
                "value": serde_json::to_value(&r.value).unwrap_or(Json::Null),
                "group": r.group.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or(Json::Null))).collect::<Map<_, _>>(),
            })
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
    Ok(records_json(&created).to_string())
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
                .map(|(n, col)| json!({"name": n, "type": col.column_type.to_json(), "isPrimaryKey": col.is_primary_key}))
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
        );
        assert!(matches!(n, Column::Numbers(ref v) if v == &[Some(1.0), None]));
        let j = column(
            vals.iter(),
            Some(&ColumnType::Primitive(PrimitiveType::Json)),
        );
        assert!(matches!(j, Column::Json(ref v) if v == &[Some("1".to_owned()), None]));
    }
}
