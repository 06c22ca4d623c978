//! Request bodies of the write routes (protocol §2.3 create, §2.4 update, §2.5 relation bodies)
//! turned into typed write plans.
//!
//! Pure functions of the received JSON and the schema: routes call them before touching any
//! collection, so every shape rule and every 400 wording is unit-tested here. Attribute values are
//! type-checked the way the agent's `RecordValidator` does (§14.4 "Writes"): a JSON number or an
//! integer string for `Number`, an ISO date-time for `Date`, `YYYY-MM-DD` for `Dateonly`, a JSON
//! boolean for `Boolean`, a listed value for `Enum`, anything for `Json`, a data URI or hex for
//! `Binary`; `null` fits every column (NOT NULL is the database's call).
//!
//! Selection bodies (bulk delete, dissociate) are read by
//! [`super::query_string::parse_selection`], not here.

use serde_json::{Map, Value as Json};

use super::query_string::CompositeId;
use super::{Error, Result};
use crate::datasource::{
    self, CollectionSchema, ColumnSchema, ColumnType, DataSourceSchema, FieldSchema, PrimitiveType,
    Record, RelationSchema, Value, unpack_id,
};

/// What `POST /{c}` asks for: the record to create and the to-one links to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatePlan {
    /// Typed attributes, with primary keys from `data.id` filling the absent ones.
    pub record: Record,
    /// To-one relationships of the body, in body order. For a `ManyToOne` the route re-reads the
    /// target's `foreignKeyTarget` to set the foreign key (or sets it null); a `OneToOne` is
    /// linked after the record is created. To-many relationships are ignored, as by the agent.
    pub to_one: Vec<ToOneLink>,
}

/// One to-one relationship of a create body.
#[derive(Debug, Clone, PartialEq)]
pub struct ToOneLink {
    pub relation: String,
    /// The target's primary key, typed for the foreign collection; `None` for `{"data": null}`.
    pub target_id: Option<CompositeId>,
}

/// What `PUT /{c}/:id/relationships/:field/:index` asks for (update of one array element).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldUpdate {
    /// Position in the array column; the route answers `Field 'x' is too short` when it is past
    /// the end, since only it knows the current length.
    pub index: usize,
    /// The element's new content, as sent (`data.attributes`).
    pub sub_record: Map<String, Json>,
}

/// Reads a create body: `{"data": {"type", "id"?, "attributes": {…}, "relationships": {…}}}`.
pub fn parse_create(
    body: &Json,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<CreatePlan> {
    let data = data_object(body)?;
    let mut record = parse_attributes(data, collection)?;
    if let Some(id) = packed_id(data)? {
        // `data.id` only fills keys that the attributes leave out, as the agent merges them.
        for (pk, value) in unpack(collection, id)? {
            if record.get(&pk).is_none() {
                record.insert(pk, value);
            }
        }
    }
    if record.is_empty() {
        return Err(Error::validation("The record data is empty"));
    }
    let to_one = parse_relationships(data, schema, collection)?;
    Ok(CreatePlan { record, to_one })
}

/// Reads an update body (same shape as create) into the patch. `relationships` is ignored, as the
/// agent deletes it (relations change through the relation routes). A primary-key attribute that
/// merely repeats `data.id` is dropped, so the unchanged key of a read-only PK is not a write.
pub fn parse_update(body: &Json, collection: &CollectionSchema) -> Result<Record> {
    let data = data_object(body)?;
    let mut attributes = attributes_object(data)?.clone();
    if let Some(id) = packed_id(data)? {
        for (pk, value) in unpack(collection, id)? {
            let column = collection.column(&pk);
            let same = match (attributes.get(&pk), column) {
                (Some(raw), Some(column)) => cast_attribute(&pk, column, raw)
                    .map(|v| v == value)
                    .unwrap_or(false),
                _ => false,
            };
            if same {
                attributes.remove(&pk);
            }
        }
    }
    let record = cast_attributes(&attributes, collection)?;
    if record.is_empty() {
        return Err(Error::validation("The record data is empty"));
    }
    Ok(record)
}

/// Reads an associate body `{"data": [{"id", "type"}, …]}`: the first element's id, typed for the
/// foreign collection. Later elements are ignored, as by the agent.
pub fn parse_associate(body: &Json, foreign: &CollectionSchema) -> Result<CompositeId> {
    let items = match body_object(body)?.get("data") {
        Some(Json::Array(items)) => items,
        other => {
            return Err(Error::Validation(format!(
                "Expected data to be an array, received: {}",
                type_name(other)
            )));
        }
    };
    let first = items
        .first()
        .ok_or_else(|| Error::validation("Expected data to contain at least one record"))?;
    let item = first.as_object().ok_or_else(|| {
        Error::Validation(format!(
            "Expected data[0] to be an object, received: {}",
            type_name(Some(first))
        ))
    })?;
    unpack(foreign, required_id(item)?)
}

/// Reads an update to-one body: `{"data": {"type", "id"}}` → the target's id, `{"data": null}`
/// → `None` (unlink).
pub fn parse_update_to_one(body: &Json, foreign: &CollectionSchema) -> Result<Option<CompositeId>> {
    match body_object(body)?.get("data") {
        Some(Json::Null) => Ok(None),
        Some(Json::Object(item)) => unpack(foreign, required_id(item)?).map(Some),
        other => Err(Error::Validation(format!(
            "Expected data to be an object or null, received: {}",
            type_name(other)
        ))),
    }
}

/// Reads an update-field body `{"data": {"attributes": {…}}}` for the array column `field`, with
/// the index taken from the path segment (decimal digits only).
pub fn parse_update_field(
    body: &Json,
    collection: &CollectionSchema,
    field: &str,
    index: &str,
) -> Result<FieldUpdate> {
    match collection.fields.get(field) {
        Some(FieldSchema::Column(column)) if matches!(column.column_type, ColumnType::Array(_)) => {
        }
        Some(_) => {
            return Err(Error::Validation(format!(
                "Field '{field}' of '{}' is not an array",
                collection.name
            )));
        }
        None => return Err(Error::Validation(format!("Unknown field \"{field}\""))),
    }
    let index = parse_index(index)?;
    let data = data_object(body)?;
    let sub_record = attributes_object(data)?.clone();
    Ok(FieldUpdate { index, sub_record })
}

/// An array index from a URL segment: digits only, so `-1`, `+1`, `1.0` or ` 1` are refused
/// rather than silently reinterpreted.
fn parse_index(segment: &str) -> Result<usize> {
    if segment.is_empty() || !segment.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Validation(format!(
            "Expected a non-negative integer index, received: '{segment}'"
        )));
    }
    segment
        .parse()
        .map_err(|_| Error::Validation(format!("Index out of range: '{segment}'")))
}

fn body_object(body: &Json) -> Result<&Map<String, Json>> {
    body.as_object().ok_or_else(|| {
        Error::Validation(format!(
            "Expected the body to be an object, received: {}",
            type_name(Some(body))
        ))
    })
}

fn data_object(body: &Json) -> Result<&Map<String, Json>> {
    match body_object(body)?.get("data") {
        Some(Json::Object(data)) => Ok(data),
        other => Err(Error::Validation(format!(
            "Expected data to be an object, received: {}",
            type_name(other)
        ))),
    }
}

/// `data.attributes`; absent or null reads as no attribute (a create may carry only `data.id`).
fn attributes_object(data: &Map<String, Json>) -> Result<&Map<String, Json>> {
    static EMPTY: std::sync::LazyLock<Map<String, Json>> = std::sync::LazyLock::new(Map::new);
    match data.get("attributes") {
        None | Some(Json::Null) => Ok(&EMPTY),
        Some(Json::Object(attributes)) => Ok(attributes),
        other => Err(Error::Validation(format!(
            "Expected data.attributes to be an object, received: {}",
            type_name(other)
        ))),
    }
}

/// `data.id` when set. Null and `""` count as absent, as the agent only reads a truthy id.
fn packed_id(data: &Map<String, Json>) -> Result<Option<&str>> {
    match data.get("id") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) if s.is_empty() => Ok(None),
        Some(Json::String(s)) => Ok(Some(s)),
        other => Err(Error::Validation(format!(
            "Expected data.id to be a string, received: {}",
            type_name(other)
        ))),
    }
}

/// The `id` of a resource identifier, which relation bodies cannot do without.
fn required_id(item: &Map<String, Json>) -> Result<&str> {
    match item.get("id") {
        Some(Json::String(s)) => Ok(s),
        other => Err(Error::Validation(format!(
            "Expected id to be a string, received: {}",
            type_name(other)
        ))),
    }
}

/// Unpacks a packed id, reporting a bad id as this layer's validation error (not a datasource one)
/// so routes answer 400 for every malformed body the same way.
fn unpack(collection: &CollectionSchema, packed: &str) -> Result<CompositeId> {
    unpack_id(collection, packed).map_err(from_datasource)
}

fn from_datasource(error: datasource::Error) -> Error {
    match error {
        datasource::Error::Validation(message) => Error::Validation(message),
        other => Error::Datasource(other),
    }
}

fn parse_attributes(data: &Map<String, Json>, collection: &CollectionSchema) -> Result<Record> {
    cast_attributes(attributes_object(data)?, collection)
}

/// Casts every attribute to its column's typed value; relations, unknown and read-only fields
/// are refused, since the HTTP routes write only columns.
fn cast_attributes(
    attributes: &Map<String, Json>,
    collection: &CollectionSchema,
) -> Result<Record> {
    let mut record = Record::with_capacity(attributes.len());
    for (name, raw) in attributes {
        let column = match collection.fields.get(name) {
            Some(FieldSchema::Column(column)) => column,
            Some(FieldSchema::Relation(relation)) => {
                return Err(Error::Validation(format!(
                    "Unexpected field type: '{}.{name}' (found '{}' expected 'Column')",
                    collection.name,
                    relation.kind_name()
                )));
            }
            None => return Err(Error::Validation(format!("Unknown field \"{name}\""))),
        };
        if column.is_read_only {
            return Err(Error::Validation(format!(
                "Read only field \"{name}\" cannot be written"
            )));
        }
        record.insert(name.as_str(), cast_attribute(name, column, raw)?);
    }
    Ok(record)
}

/// One attribute value, checked as the agent's `TypeGetter` does and then typed.
fn cast_attribute(name: &str, column: &ColumnSchema, raw: &Json) -> Result<Value> {
    let value = cast_json(&column.column_type, raw).ok_or_else(|| wrong_type(name, column, raw))?;
    check_enums(column, &value)?;
    Ok(value)
}

fn check_enums(column: &ColumnSchema, value: &Value) -> Result<()> {
    match value {
        Value::Array(items) => items
            .iter()
            .try_for_each(|item| column.check_enum_value(item).map_err(from_datasource)),
        other => column.check_enum_value(other).map_err(from_datasource),
    }
}

fn cast_json(ty: &ColumnType, raw: &Json) -> Option<Value> {
    if raw.is_null() {
        return Some(Value::Null);
    }
    match ty {
        ColumnType::Primitive(p) => cast_primitive(*p, raw),
        ColumnType::Array(inner) => match raw {
            Json::Array(items) => items
                .iter()
                .map(|item| cast_json(inner, item))
                .collect::<Option<Vec<_>>>()
                .map(Value::Array),
            _ => None,
        },
        ColumnType::Composite(_) => match raw {
            Json::Object(_) => Some(Value::Json(raw.clone())),
            _ => None,
        },
    }
}

/// Stricter than [`Value::from_json_typed`] (which casts filter values loosely): a write takes
/// only what the agent's type check accepts.
fn cast_primitive(ty: PrimitiveType, raw: &Json) -> Option<Value> {
    let accepted = match (ty, raw) {
        (PrimitiveType::Json, _) => true,
        (PrimitiveType::Number, Json::Number(_)) => true,
        // Integer strings only (BigInt-parsable): "7.125" is refused by the agent.
        (PrimitiveType::Number, Json::String(s)) => is_integer_string(s),
        (PrimitiveType::Boolean, Json::Bool(_)) => true,
        (PrimitiveType::Dateonly, Json::String(s)) => is_iso_date(s),
        (PrimitiveType::Point, Json::Array(_) | Json::Object(_)) => true,
        (
            PrimitiveType::String
            | PrimitiveType::Enum
            | PrimitiveType::Date
            | PrimitiveType::Time
            | PrimitiveType::Uuid
            | PrimitiveType::Binary,
            Json::String(_),
        ) => true,
        _ => false,
    };
    if !accepted {
        return None;
    }
    Value::from_json_typed(raw, ty)
}

fn is_integer_string(s: &str) -> bool {
    let t = s.trim();
    let digits = t.strip_prefix('-').unwrap_or(t);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `YYYY-MM-DD` exactly: a date-time is a `Date` for the agent, not a `Dateonly`.
fn is_iso_date(s: &str) -> bool {
    s.len() == 10 && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
}

/// The agent's wording: `The given value has a wrong type for "f": v.\n Expects "Number",null`.
fn wrong_type(name: &str, column: &ColumnSchema, raw: &Json) -> Error {
    let expected = match &column.column_type {
        ColumnType::Primitive(p) => format!("\"{p}\",null"),
        ColumnType::Array(_) | ColumnType::Composite(_) => column.column_type.to_json().to_string(),
    };
    Error::Validation(format!(
        "The given value has a wrong type for \"{name}\": {}.\n Expects {expected}",
        js_string(raw)
    ))
}

/// JavaScript's `String(v)`, which the agent's messages interpolate.
fn js_string(json: &Json) -> String {
    match json {
        Json::Null => "null".to_owned(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => match n.as_f64() {
            // JS prints integral doubles without a fractional part.
            Some(f) if f.fract() == 0.0 && f.abs() < 1e21 && n.is_f64() => format!("{f:.0}"),
            _ => n.to_string(),
        },
        Json::String(s) => s.clone(),
        Json::Array(items) => items
            .iter()
            .map(|i| {
                if i.is_null() {
                    String::new()
                } else {
                    js_string(i)
                }
            })
            .collect::<Vec<_>>()
            .join(","),
        Json::Object(_) => "[object Object]".to_owned(),
    }
}

/// `data.relationships`: to-one links with their typed target ids; to-many ones are skipped.
fn parse_relationships(
    data: &Map<String, Json>,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<Vec<ToOneLink>> {
    let relationships = match data.get("relationships") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Object(relationships)) => relationships,
        other => {
            return Err(Error::Validation(format!(
                "Expected data.relationships to be an object, received: {}",
                type_name(other)
            )));
        }
    };
    let mut links = Vec::new();
    for (name, link) in relationships {
        let relation = match collection.fields.get(name) {
            Some(FieldSchema::Relation(relation)) => relation,
            Some(FieldSchema::Column(_)) => {
                return Err(Error::Validation(format!(
                    "Unexpected field type: '{}.{name}' (found 'Column' expected 'ManyToOne' or 'OneToOne')",
                    collection.name
                )));
            }
            None => return Err(Error::Validation(format!("Unknown field \"{name}\""))),
        };
        if !matches!(
            relation,
            RelationSchema::ManyToOne { .. } | RelationSchema::OneToOne { .. }
        ) {
            continue;
        }
        let Some(Some(target)) = link.as_object().map(|l| l.get("data")) else {
            return Err(Error::Validation(format!(
                "Expected relationships.{name} to be an object with data"
            )));
        };
        let target_id = match target {
            Json::Null => None,
            Json::Object(item) => {
                let foreign = schema
                    .collection(relation.foreign_collection())
                    .map_err(from_datasource)?;
                Some(unpack(foreign, required_id(item)?)?)
            }
            other => {
                return Err(Error::Validation(format!(
                    "Expected relationships.{name}.data to be an object or null, received: {}",
                    type_name(Some(other))
                )));
            }
        };
        links.push(ToOneLink {
            relation: name.clone(),
            target_id,
        });
    }
    Ok(links)
}

/// A JSON type name for messages; `undefined` when the member is absent.
fn type_name(json: Option<&Json>) -> &'static str {
    match json {
        None => "undefined",
        Some(Json::Null) => "null",
        Some(Json::Bool(_)) => "boolean",
        Some(Json::Number(_)) => "number",
        Some(Json::String(_)) => "string",
        Some(Json::Array(_)) => "array",
        Some(Json::Object(_)) => "object",
    }
}
