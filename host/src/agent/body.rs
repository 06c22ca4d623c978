//! Request bodies of the write routes (protocol §2.3 create, §2.4 update, §2.5 relation bodies)
//! turned into typed write plans.
//!
//! Pure functions of the received JSON and the schema: routes call them before touching any
//! collection, so every shape rule and every 400 wording is unit-tested here. Attribute values are
//! type-checked the way the agent's `RecordValidator` does (§14.4 "Writes"): a JSON number or an
//! integer string for `Number`, an ISO date-time for `Date`, `YYYY-MM-DD` for `Dateonly`, a JSON
//! boolean for `Boolean`, a listed value for `Enum`, anything for `Json`, for `Binary` the form the
//! column is served in (a data URI, or hex for keys, §8.12); `null` fits every column (NOT NULL
//! is the database's call).
//!
//! Selection bodies (bulk delete, dissociate) are read by
//! [`super::query_string::parse_selection`], not here.

use serde_json::{Map, Value as Json};

use super::query_string::CompositeId;
use super::{Error, Result};
use crate::datasource::schema::Wire;
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
    let (mut record, attribute_links) = create_attributes(data, schema, collection)?;
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
    let mut to_one = parse_relationships(data, schema, collection)?;
    // A relation given in both places takes its `relationships` link, as the agent's
    // deserializer writes relationships over attributes.
    for link in attribute_links.into_iter().rev() {
        if !to_one.iter().any(|l| l.relation == link.relation) {
            to_one.insert(0, link);
        }
    }
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
    let record = cast_attributes(&attributes, collection, Write::Update)?;
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

/// Which write an attribute map is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Create,
    Update,
}

/// The attributes of a create body: column values, and the to-one relations named among them
/// (what `@forestadmin/agent-client` sends, as it has no `relationships`): `"customer": [2]`
/// (the target's primary key values, as the agent reads a composite id), a packed id
/// `"customer": "2"`, or `null` to leave it unset. To-many relations are ignored, as by the
/// agent.
fn create_attributes(
    data: &Map<String, Json>,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<(Record, Vec<ToOneLink>)> {
    let mut columns = Map::new();
    let mut links = Vec::new();
    for (name, raw) in attributes_object(data)? {
        match collection.fields.get(name) {
            Some(FieldSchema::Relation(
                relation @ (RelationSchema::ManyToOne { .. } | RelationSchema::OneToOne { .. }),
            )) => {
                let foreign = schema
                    .collection(relation.foreign_collection())
                    .map_err(from_datasource)?;
                links.push(ToOneLink {
                    relation: name.clone(),
                    target_id: attribute_target(name, foreign, raw)?,
                });
            }
            Some(FieldSchema::Relation(_)) => {}
            _ => {
                columns.insert(name.clone(), raw.clone());
            }
        }
    }
    Ok((cast_attributes(&columns, collection, Write::Create)?, links))
}

/// The target id of a to-one relation written as an attribute.
fn attribute_target(
    name: &str,
    foreign: &CollectionSchema,
    raw: &Json,
) -> Result<Option<CompositeId>> {
    let packed = match raw {
        Json::Null => return Ok(None),
        Json::String(packed) => packed.clone(),
        Json::Number(_) => super::js::string(raw),
        // The key values in primary key order, packed as the agent packs ids.
        Json::Array(parts) if parts.iter().all(|p| p.is_string() || p.is_number()) => parts
            .iter()
            .map(super::js::string)
            .collect::<Vec<_>>()
            .join("|"),
        other => {
            return Err(Error::Validation(format!(
                "Expected {name} to be the id of a '{}' record, received: {}",
                foreign.name,
                type_name(Some(other))
            )));
        }
    };
    unpack(foreign, &packed).map(Some)
}

/// Casts every attribute to its column's typed value; relations, unknown and read-only fields
/// are refused, since the HTTP routes write only columns. A create may still give an
/// auto-increment primary key (read-only) its value, as the agent lets the database take it.
fn cast_attributes(
    attributes: &Map<String, Json>,
    collection: &CollectionSchema,
    write: Write,
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
            None => return Err(Error::Datasource(collection.missing_field(name))),
        };
        let given_key = write == Write::Create && column.is_primary_key;
        if column.is_read_only && !given_key {
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
    let value = cast_json(&column.column_type, column.wire, raw)
        .ok_or_else(|| wrong_type(name, column, raw))?;
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

fn cast_json(ty: &ColumnType, wire: Wire, raw: &Json) -> Option<Value> {
    if raw.is_null() {
        return Some(Value::Null);
    }
    match ty {
        // Bytes come back in the form they are served in: a data URI, or hex for keys.
        ColumnType::Primitive(PrimitiveType::Binary) => match raw {
            Json::String(text) => super::wire::binary_from_wire(text, wire).map(Value::Binary),
            _ => None,
        },
        ColumnType::Primitive(p) => cast_primitive(*p, raw),
        ColumnType::Array(inner) => match raw {
            Json::Array(items) => items
                .iter()
                .map(|item| cast_json(inner, wire, item))
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
            | PrimitiveType::Uuid,
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
        super::js::string(raw)
    ))
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
            None => return Err(Error::Datasource(collection.missing_field(name))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn column(ty: PrimitiveType) -> FieldSchema {
        FieldSchema::Column(ColumnSchema::new(ty))
    }

    fn pk(ty: PrimitiveType, read_only: bool) -> FieldSchema {
        let mut c = ColumnSchema::new(ty);
        c.is_primary_key = true;
        c.is_read_only = read_only;
        FieldSchema::Column(c)
    }

    /// `books` (serial id, every scalar type, an author and a cover), `persons` (uuid PK),
    /// `covers` (composite PK), `reviews` (to-many target).
    fn schema() -> DataSourceSchema {
        let mut books = CollectionSchema::new("books");
        let mut mood = ColumnSchema::new(PrimitiveType::Enum);
        mood.enum_values = vec!["happy".into(), "sad".into()];
        let mut moods = ColumnSchema::new(ColumnType::Array(Box::new(PrimitiveType::Enum.into())));
        moods.enum_values = vec!["happy".into(), "sad".into()];
        let mut created = ColumnSchema::new(PrimitiveType::Date);
        created.is_read_only = true;
        books.fields.extend([
            ("id".to_owned(), pk(PrimitiveType::Number, true)),
            ("title".to_owned(), column(PrimitiveType::String)),
            ("price".to_owned(), column(PrimitiveType::Number)),
            ("published_at".to_owned(), column(PrimitiveType::Date)),
            ("release_day".to_owned(), column(PrimitiveType::Dateonly)),
            ("available".to_owned(), column(PrimitiveType::Boolean)),
            ("meta".to_owned(), column(PrimitiveType::Json)),
            ("cover_file".to_owned(), column(PrimitiveType::Binary)),
            ("starts".to_owned(), column(PrimitiveType::Time)),
            ("ref".to_owned(), column(PrimitiveType::Uuid)),
            ("mood".to_owned(), FieldSchema::Column(mood)),
            ("moods".to_owned(), FieldSchema::Column(moods)),
            ("created_at".to_owned(), FieldSchema::Column(created)),
            ("author_id".to_owned(), column(PrimitiveType::Uuid)),
            (
                "author".to_owned(),
                FieldSchema::Relation(RelationSchema::ManyToOne {
                    foreign_collection: "persons".into(),
                    foreign_key: "author_id".into(),
                    foreign_key_target: "id".into(),
                }),
            ),
            (
                "cover".to_owned(),
                FieldSchema::Relation(RelationSchema::OneToOne {
                    foreign_collection: "covers".into(),
                    origin_key: "book_id".into(),
                    origin_key_target: "id".into(),
                }),
            ),
            (
                "reviews".to_owned(),
                FieldSchema::Relation(RelationSchema::OneToMany {
                    foreign_collection: "reviews".into(),
                    origin_key: "book_id".into(),
                    origin_key_target: "id".into(),
                }),
            ),
        ]);
        let mut persons = CollectionSchema::new("persons");
        persons.fields.extend([
            ("id".to_owned(), pk(PrimitiveType::Uuid, false)),
            ("name".to_owned(), column(PrimitiveType::String)),
        ]);
        let mut covers = CollectionSchema::new("covers");
        covers.fields.extend([
            ("shelf".to_owned(), pk(PrimitiveType::String, false)),
            ("slot".to_owned(), pk(PrimitiveType::Number, false)),
            ("book_id".to_owned(), column(PrimitiveType::Number)),
            (
                "tags".to_owned(),
                FieldSchema::Column(ColumnSchema::new(ColumnType::Array(Box::new(
                    PrimitiveType::Json.into(),
                )))),
            ),
        ]);
        let mut reviews = CollectionSchema::new("reviews");
        reviews
            .fields
            .insert("id".to_owned(), pk(PrimitiveType::Number, false));
        let mut s = DataSourceSchema::default();
        for c in [books, persons, covers, reviews] {
            s.collections.insert(c.name.clone(), c);
        }
        s
    }

    fn coll<'a>(s: &'a DataSourceSchema, name: &str) -> &'a CollectionSchema {
        &s.collections[name]
    }

    const UUID: &str = "4f8e1a8e-6b1e-4c5e-9f0a-0a6f3c2b1d00";

    fn uuid() -> Value {
        Value::Uuid(uuid::Uuid::parse_str(UUID).expect("valid uuid"))
    }

    /// The message of a 400: a validation error, or the agent's missing field error.
    fn message(result: Result<impl std::fmt::Debug>) -> String {
        match result {
            Err(Error::Validation(m) | Error::Datasource(datasource::Error::MissingField(m))) => m,
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    /// The agent's message for a field `books` does not have.
    fn missing_books_field(name: &str) -> String {
        format!(
            "The 'books.{name}' field was not found. Available fields are: \
             [id,title,price,published_at,release_day,available,meta,cover_file,starts,ref,mood,\
             moods,created_at,author_id,author,cover,reviews]. Please check if the field name is \
             correct."
        )
    }

    #[test]
    fn create_casts_every_type_and_collects_to_one_links() {
        let s = schema();
        let body = json!({"data": {"type": "books", "attributes": {
            "title": "Dune", "price": "99999999999999999999", "published_at": "2024-03-01T10:34:56.789Z",
            "release_day": "2024-02-29", "available": false, "meta": {"a": [1]},
            "cover_file": "data:text/plain;base64,aGk=", "starts": "13:45:01", "ref": UUID,
            "mood": "sad", "moods": ["happy", "sad"], "author_id": null
        }, "relationships": {
            "author": {"data": {"type": "persons", "id": UUID}},
            "cover": {"data": {"type": "covers", "id": "A|3"}},
            "reviews": {"data": [{"type": "reviews", "id": "1"}]}
        }}});
        let plan = parse_create(&body, &s, coll(&s, "books")).expect("valid body");
        let r = &plan.record;
        assert_eq!(r.get("title"), Some(&Value::from("Dune")));
        assert!(matches!(r.get("price"), Some(Value::Decimal(_))));
        assert!(matches!(r.get("published_at"), Some(Value::Date(_))));
        assert!(matches!(r.get("release_day"), Some(Value::Dateonly(_))));
        assert_eq!(r.get("available"), Some(&Value::Bool(false)));
        assert_eq!(r.get("meta"), Some(&Value::Json(json!({"a": [1]}))));
        assert_eq!(r.get("cover_file"), Some(&Value::Binary(b"hi".to_vec())));
        assert!(matches!(r.get("starts"), Some(Value::Time(_))));
        assert_eq!(r.get("ref"), Some(&uuid()));
        assert_eq!(r.get("mood"), Some(&Value::from("sad")));
        assert_eq!(
            r.get("moods"),
            Some(&Value::Array(vec!["happy".into(), "sad".into()]))
        );
        assert_eq!(r.get("author_id"), Some(&Value::Null));
        assert!(r.get("id").is_none());
        assert_eq!(
            plan.to_one,
            vec![
                ToOneLink {
                    relation: "author".into(),
                    target_id: Some(vec![("id".into(), uuid())]),
                },
                ToOneLink {
                    relation: "cover".into(),
                    target_id: Some(vec![
                        ("shelf".into(), "A".into()),
                        ("slot".into(), Value::Int(3))
                    ]),
                },
            ]
        );
    }

    #[test]
    fn create_numbers_accept_json_numbers_and_integer_strings() {
        let s = schema();
        let price = |v: Json| {
            let body = json!({"data": {"attributes": {"price": v}}});
            parse_create(&body, &s, coll(&s, "books")).map(|p| p.record.get("price").cloned())
        };
        assert_eq!(price(json!(7)).ok().flatten(), Some(Value::Int(7)));
        assert_eq!(price(json!(2.5)).ok().flatten(), Some(Value::Float(2.5)));
        assert_eq!(price(json!("-5")).ok().flatten(), Some(Value::Int(-5)));
        assert_eq!(
            message(price(json!("7.125"))),
            "The given value has a wrong type for \"price\": 7.125.\n Expects \"Number\",null"
        );
        assert!(message(price(json!(true))).contains("\"price\": true."));
        assert!(message(price(json!(""))).contains("wrong type"));
    }

    #[test]
    fn create_rejects_values_of_the_wrong_type() {
        let s = schema();
        let books = coll(&s, "books");
        let attempt = |field: &str, v: Json| {
            let body = json!({"data": {"attributes": {field: v}}});
            parse_create(&body, &s, books)
        };
        for (field, v) in [
            ("published_at", json!("2024-03-01")),
            ("published_at", json!(1700000000)),
            ("release_day", json!("2024-03-01T10:00:00Z")),
            ("release_day", json!("2024-02-30")),
            ("available", json!("true")),
            ("available", json!(1)),
            ("title", json!(12)),
            ("ref", json!("not-a-uuid")),
            ("starts", json!("25:00")),
            ("cover_file", json!("xyz")),
            ("moods", json!("happy")),
            ("mood", json!(["happy"])),
        ] {
            let m = message(attempt(field, v.clone()));
            assert!(
                m.starts_with(&format!("The given value has a wrong type for \"{field}\"")),
                "{field} {v}: {m}"
            );
        }
        assert_eq!(
            message(attempt("available", json!({"a": 1}))),
            "The given value has a wrong type for \"available\": [object Object].\n Expects \"Boolean\",null"
        );
        assert_eq!(
            message(attempt("published_at", json!(1.0))),
            "The given value has a wrong type for \"published_at\": 1.\n Expects \"Date\",null"
        );
        assert_eq!(
            message(attempt("moods", json!(3))),
            "The given value has a wrong type for \"moods\": 3.\n Expects [\"Enum\"]"
        );
        // Json takes anything, and null fits every column.
        assert!(attempt("meta", json!("x")).is_ok());
        assert!(attempt("available", Json::Null).is_ok());
    }

    #[test]
    fn enum_values_must_be_listed() {
        let s = schema();
        let books = coll(&s, "books");
        let body = json!({"data": {"attributes": {"mood": "angry"}}});
        assert_eq!(
            message(parse_create(&body, &s, books)),
            "The given enum value(s) angry is not listed in [happy,sad]"
        );
        let body = json!({"data": {"attributes": {"moods": ["happy", "meh"]}}});
        assert_eq!(
            message(parse_create(&body, &s, books)),
            "The given enum value(s) meh is not listed in [happy,sad]"
        );
    }

    #[test]
    fn create_refuses_unknown_relation_and_read_only_attributes() {
        let s = schema();
        let books = coll(&s, "books");
        let attempt = |attributes: Json| {
            parse_create(&json!({"data": {"attributes": attributes}}), &s, books)
        };
        assert_eq!(
            message(attempt(json!({"nope": 1}))),
            missing_books_field("nope")
        );
        // A to-one relation in the attributes takes an id, not a record.
        assert_eq!(
            message(attempt(json!({"author": {"id": UUID}}))),
            "Expected author to be the id of a 'persons' record, received: object"
        );
        assert_eq!(
            message(attempt(json!({"created_at": "2024-03-01T10:34:56Z"}))),
            "Read only field \"created_at\" cannot be written"
        );
        // An auto-increment (read-only) key takes an explicit value on create, not on update.
        let plan = attempt(json!({"id": 3, "title": "x"})).expect("an explicit key");
        assert_eq!(plan.record.get("id"), Some(&Value::Int(3)));
        assert_eq!(
            message(parse_update(
                &json!({"data": {"attributes": {"id": 3}}}),
                books
            )),
            "Read only field \"id\" cannot be written"
        );
        assert_eq!(message(attempt(json!({}))), "The record data is empty");
    }

    #[test]
    fn create_takes_to_one_relations_from_attributes() {
        let s = schema();
        let books = coll(&s, "books");
        let link = |relation: &str, target_id: Option<CompositeId>| ToOneLink {
            relation: relation.to_owned(),
            target_id,
        };
        let cover = vec![
            ("shelf".to_owned(), Value::from("A")),
            ("slot".to_owned(), Value::Int(3)),
        ];
        // As `@forestadmin/agent-client` sends them: key values in an array, or null.
        let body = json!({"data": {"attributes": {"title": "Dune", "author": [UUID],
            "cover": ["A", 3], "reviews": [1, 2]}}});
        let plan = parse_create(&body, &s, books).expect("valid body");
        assert_eq!(plan.record.len(), 1, "only the column: {:?}", plan.record);
        assert_eq!(
            plan.to_one,
            [
                link("author", Some(vec![("id".to_owned(), uuid())])),
                link("cover", Some(cover.clone())),
            ]
        );
        // A packed id, and null.
        let body = json!({"data": {"attributes": {"title": "Dune", "cover": "A|3",
            "author": null}}});
        let plan = parse_create(&body, &s, books).expect("valid body");
        assert_eq!(
            plan.to_one,
            [link("cover", Some(cover)), link("author", None)]
        );
        // `relationships` wins over the attribute of the same relation.
        let body = json!({"data": {"attributes": {"title": "Dune", "author": null},
            "relationships": {"author": {"data": {"type": "persons", "id": UUID}}}}});
        let plan = parse_create(&body, &s, books).expect("valid body");
        assert_eq!(
            plan.to_one,
            [link("author", Some(vec![("id".to_owned(), uuid())]))]
        );
        let body = json!({"data": {"attributes": {"title": "Dune", "cover": ["A"]}}});
        assert_eq!(
            message(parse_create(&body, &s, books)),
            "Expected 2 values, found 1"
        );
    }

    #[test]
    fn create_fills_absent_primary_keys_from_data_id() {
        let s = schema();
        let covers = coll(&s, "covers");
        let body = json!({"data": {"id": "B|4", "attributes": {"slot": 9, "book_id": 1}}});
        let plan = parse_create(&body, &s, covers).expect("valid body");
        assert_eq!(plan.record.get("shelf"), Some(&Value::from("B")));
        // An attribute wins over the id's value.
        assert_eq!(plan.record.get("slot"), Some(&Value::Int(9)));
        assert_eq!(plan.record.len(), 3);
        // An id alone is enough to create.
        let body = json!({"data": {"id": "B|4"}});
        assert_eq!(
            parse_create(&body, &s, covers).expect("valid").record.len(),
            2
        );
        assert_eq!(
            message(parse_create(&json!({"data": {"id": "B"}}), &s, covers)),
            "Expected 2 values, found 1"
        );
        assert_eq!(
            message(parse_create(&json!({"data": {"id": "B|x"}}), &s, covers)),
            "The given value has a wrong type for \"slot\": NaN.\n Expects \"Number\""
        );
        assert_eq!(
            message(parse_create(&json!({"data": {"id": 4}}), &s, covers)),
            "Expected data.id to be a string, received: number"
        );
        let persons = coll(&s, "persons");
        let plan = parse_create(&json!({"data": {"id": UUID}}), &s, persons).expect("valid");
        assert_eq!(plan.record.get("id"), Some(&uuid()));
        assert!(
            message(parse_create(&json!({"data": {"id": "nope"}}), &s, persons)).contains("Uuid")
        );
    }

    #[test]
    fn create_relationships() {
        let s = schema();
        let books = coll(&s, "books");
        let attempt = |relationships: Json| {
            let body =
                json!({"data": {"attributes": {"title": "t"}, "relationships": relationships}});
            parse_create(&body, &s, books)
        };
        let plan = attempt(json!({"author": {"data": null}})).expect("valid");
        assert_eq!(
            plan.to_one,
            vec![ToOneLink {
                relation: "author".into(),
                target_id: None
            }]
        );
        assert!(attempt(Json::Null).expect("valid").to_one.is_empty());
        // To-many relationships are ignored whatever their content.
        assert!(
            attempt(json!({"reviews": 5}))
                .expect("valid")
                .to_one
                .is_empty()
        );
        assert_eq!(
            message(attempt(json!({"nope": {"data": null}}))),
            missing_books_field("nope")
        );
        assert_eq!(
            message(attempt(json!({"title": {"data": null}}))),
            "Unexpected field type: 'books.title' (found 'Column' expected 'ManyToOne' or 'OneToOne')"
        );
        assert_eq!(
            message(attempt(json!({"author": {}}))),
            "Expected relationships.author to be an object with data"
        );
        assert_eq!(
            message(attempt(json!({"author": {"data": [1]}}))),
            "Expected relationships.author.data to be an object or null, received: array"
        );
        assert_eq!(
            message(attempt(json!({"author": {"data": {"type": "persons"}}}))),
            "Expected id to be a string, received: undefined"
        );
        assert!(message(attempt(json!({"author": {"data": {"id": "x"}}}))).contains("Uuid"));
        assert_eq!(
            message(attempt(json!({"cover": {"data": {"id": "A|1|2"}}}))),
            "Expected 2 values, found 3"
        );
        assert_eq!(
            message(attempt(json!([]))),
            "Expected data.relationships to be an object, received: array"
        );
    }

    #[test]
    fn malformed_envelopes() {
        let s = schema();
        let books = coll(&s, "books");
        assert_eq!(
            message(parse_create(&json!([]), &s, books)),
            "Expected the body to be an object, received: array"
        );
        assert_eq!(
            message(parse_create(&json!({}), &s, books)),
            "Expected data to be an object, received: undefined"
        );
        assert_eq!(
            message(parse_update(&json!({"data": null}), books)),
            "Expected data to be an object, received: null"
        );
        assert_eq!(
            message(parse_update(&json!({"data": {"attributes": [1]}}), books)),
            "Expected data.attributes to be an object, received: array"
        );
        assert_eq!(
            message(parse_create(
                &json!({"data": {"attributes": "x"}}),
                &s,
                books
            )),
            "Expected data.attributes to be an object, received: string"
        );
    }

    #[test]
    fn update_drops_relationships_and_primary_keys_repeating_the_id() {
        let s = schema();
        let books = coll(&s, "books");
        let body = json!({"data": {"id": "7", "type": "books",
            "attributes": {"id": 7, "title": "New"},
            "relationships": {"author": {"data": {"id": "garbage"}}}}});
        let patch = parse_update(&body, books).expect("valid");
        assert_eq!(patch.keys().collect::<Vec<_>>(), vec!["title"]);
        // A changed read-only key is still refused.
        let body = json!({"data": {"id": "7", "attributes": {"id": 8}}});
        assert_eq!(
            message(parse_update(&body, books)),
            "Read only field \"id\" cannot be written"
        );
        // A writable key may change.
        let covers = coll(&s, "covers");
        let body = json!({"data": {"id": "A|1", "attributes": {"shelf": "A", "slot": 2}}});
        let patch = parse_update(&body, covers).expect("valid");
        assert_eq!(patch.keys().collect::<Vec<_>>(), vec!["slot"]);
        assert_eq!(
            message(parse_update(
                &json!({"data": {"id": "A|1", "attributes": {"shelf": "A"}}}),
                covers
            )),
            "The record data is empty"
        );
        assert_eq!(
            message(parse_update(
                &json!({"data": {"attributes": {"price": "1.5"}}}),
                books
            )),
            "The given value has a wrong type for \"price\": 1.5.\n Expects \"Number\",null"
        );
        assert_eq!(
            message(parse_update(
                &json!({"data": {"id": "x", "attributes": {"title": "a"}}}),
                books
            )),
            "The given value has a wrong type for \"id\": NaN.\n Expects \"Number\""
        );
    }

    #[test]
    fn associate_uses_the_first_identifier() {
        let s = schema();
        let covers = coll(&s, "covers");
        let body = json!({"data": [{"id": "A|1", "type": "covers"}, {"id": "bad"}]});
        assert_eq!(
            parse_associate(&body, covers).expect("valid"),
            vec![("shelf".into(), "A".into()), ("slot".into(), Value::Int(1))]
        );
        assert_eq!(
            message(parse_associate(&json!({"data": []}), covers)),
            "Expected data to contain at least one record"
        );
        assert_eq!(
            message(parse_associate(&json!({"data": {"id": "A|1"}}), covers)),
            "Expected data to be an array, received: object"
        );
        assert_eq!(
            message(parse_associate(&json!({"data": ["A|1"]}), covers)),
            "Expected data[0] to be an object, received: string"
        );
        assert_eq!(
            message(parse_associate(&json!({"data": [{"id": 1}]}), covers)),
            "Expected id to be a string, received: number"
        );
        assert_eq!(
            message(parse_associate(&json!({"data": [{"id": "A"}]}), covers)),
            "Expected 2 values, found 1"
        );
        assert_eq!(
            message(parse_associate(&json!(null), covers)),
            "Expected the body to be an object, received: null"
        );
    }

    #[test]
    fn update_to_one_links_or_unlinks() {
        let s = schema();
        let persons = coll(&s, "persons");
        let body = json!({"data": {"type": "persons", "id": UUID}});
        assert_eq!(
            parse_update_to_one(&body, persons).expect("valid"),
            Some(vec![("id".into(), uuid())])
        );
        assert_eq!(
            parse_update_to_one(&json!({"data": null}), persons).expect("valid"),
            None
        );
        assert_eq!(
            message(parse_update_to_one(&json!({}), persons)),
            "Expected data to be an object or null, received: undefined"
        );
        assert_eq!(
            message(parse_update_to_one(
                &json!({"data": {"type": "persons"}}),
                persons
            )),
            "Expected id to be a string, received: undefined"
        );
        assert!(
            message(parse_update_to_one(&json!({"data": {"id": "1"}}), persons)).contains("Uuid")
        );
    }

    #[test]
    fn update_field_reads_the_index_and_sub_record() {
        let s = schema();
        let covers = coll(&s, "covers");
        let body = json!({"data": {"attributes": {"label": "x"}}});
        let update = parse_update_field(&body, covers, "tags", "12").expect("valid");
        assert_eq!(update.index, 12);
        assert_eq!(Json::Object(update.sub_record), json!({"label": "x"}));
        for bad in ["", "-1", "+1", "1.0", " 1", "x", "99999999999999999999999"] {
            assert!(
                parse_update_field(&body, covers, "tags", bad).is_err(),
                "{bad:?}"
            );
        }
        assert_eq!(
            message(parse_update_field(&body, covers, "tags", "-1")),
            "Expected a non-negative integer index, received: '-1'"
        );
        assert_eq!(
            message(parse_update_field(&body, covers, "book_id", "0")),
            "Field 'book_id' of 'covers' is not an array"
        );
        assert_eq!(
            message(parse_update_field(&body, covers, "nope", "0")),
            "Unknown field \"nope\""
        );
        assert_eq!(
            message(parse_update_field(
                &json!({"data": {"attributes": 3}}),
                covers,
                "tags",
                "0"
            )),
            "Expected data.attributes to be an object, received: number"
        );
        assert_eq!(
            message(parse_update_field(&json!({"data": 3}), covers, "tags", "0")),
            "Expected data to be an object, received: number"
        );
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        fn json() -> impl Strategy<Value = Json> {
            let leaf = prop_oneof![
                Just(Json::Null),
                any::<bool>().prop_map(Json::Bool),
                any::<i64>().prop_map(Json::from),
                any::<f64>().prop_map(Json::from),
                prop_oneof![
                    Just("id".to_owned()),
                    Just("data".to_owned()),
                    Just("attributes".to_owned()),
                    Just(UUID.to_owned()),
                    Just("A|1".to_owned()),
                    Just("2024-02-29".to_owned()),
                    "\\PC{0,12}",
                ]
                .prop_map(Json::String),
            ];
            leaf.prop_recursive(4, 48, 6, |inner| {
                let key = prop_oneof![
                    Just("data".to_owned()),
                    Just("attributes".to_owned()),
                    Just("relationships".to_owned()),
                    Just("id".to_owned()),
                    Just("author".to_owned()),
                    Just("cover".to_owned()),
                    Just("reviews".to_owned()),
                    Just("price".to_owned()),
                    Just("mood".to_owned()),
                    Just("moods".to_owned()),
                    Just("published_at".to_owned()),
                    Just("shelf".to_owned()),
                    Just("slot".to_owned()),
                    "[a-z_]{0,6}",
                ];
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
                    prop::collection::vec((key, inner), 0..5)
                        .prop_map(|kv| Json::Object(kv.into_iter().collect())),
                ]
            })
        }

        fn wrap(inner: Json, depth: u8) -> Json {
            match depth {
                0 => inner,
                1 => json!({"data": inner}),
                _ => json!({"data": {"attributes": inner, "relationships": inner, "id": "A|1"}}),
            }
        }

        fn check<T>(result: &Result<T>) -> Result<(), TestCaseError> {
            match result {
                Ok(_)
                | Err(
                    Error::Validation(_) | Error::Datasource(datasource::Error::MissingField(_)),
                ) => Ok(()),
                Err(e) => Err(TestCaseError::fail(format!(
                    "not a validation error: {e:?}"
                ))),
            }
        }

        proptest! {
            #[test]
            fn bodies_never_panic(
                raw in json(),
                depth in 0u8..3,
                name in prop_oneof![Just("books"), Just("persons"), Just("covers")],
                index in "[0-9+-]{0,4}",
            ) {
                let s = schema();
                let c = coll(&s, name);
                let body = wrap(raw, depth);
                check(&parse_create(&body, &s, c))?;
                check(&parse_update(&body, c))?;
                check(&parse_associate(&body, c))?;
                check(&parse_update_to_one(&body, c))?;
                check(&parse_update_field(&body, coll(&s, "covers"), "tags", &index))?;
            }
        }
    }
}
