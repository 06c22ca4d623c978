//! Response bodies of the data routes, in the Node agent's wire format (protocol §3):
//! JSON:API documents for records, count bodies, CSV exports and the CSV download header.
//!
//! Everything here is pure: routes fetch records, then hand them over with the schema. The CSV
//! writer works one batch at a time so that an export can be streamed page by page.

use std::fmt::Write as _;

use indexmap::IndexMap;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value as Json, json};

mod write;

use super::wire::{self, WireValue};
use super::{Error, Result, js};
use crate::datasource::schema::Wire;
use crate::datasource::{
    self, CollectionSchema, DataSourceSchema, FieldSchema, Record, RelationSchema, Value,
};

/// What JavaScript's `encodeURIComponent` leaves alone: letters, digits and `-_.!~*'()`.
/// The to-many `links.related.href` escapes packed ids with it, as the agent does.
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// RFC 5987 `attr-char` as the `content-disposition` package encodes `filename*`:
/// `encodeURIComponent`, plus `'()*` escaped.
const ATTR_CHAR: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~');

/// The JSON:API document of a list of records (`GET /forest/{c}`, related lists).
///
/// `search` is the request's search text: when it is not blank, `meta.decorators` lists, for
/// each record with a matching attribute, which attributes matched.
pub fn serialize_list<'a>(
    schema: &'a DataSourceSchema,
    collection: &str,
    records: &'a [Record],
    search: Option<&str>,
) -> Result<Document<'a>> {
    let collection = schema.collection(collection)?;
    let mut included = Included::default();
    let data = records
        .iter()
        .map(|record| Resource::new(schema, collection, record, &mut included))
        .collect::<Result<Vec<_>>>()?;
    let decorators = match search.filter(|s| !s.trim().is_empty()) {
        Some(search) => Some(search_decorators(&data, search)?).filter(|d| !d.is_empty()),
        None => None,
    };
    Ok(Document {
        data: Data::Many(data),
        included: included.resources,
        decorators,
    })
}

/// Records as plain JSON objects, without the JSON:API envelope (the MCP tools' answers): each
/// field in its wire form, a loaded to-one relation as the related record nested under its name.
pub struct PlainRecords<'a> {
    pub schema: &'a DataSourceSchema,
    pub collection: &'a CollectionSchema,
    pub records: &'a [Record],
}

impl Serialize for PlainRecords<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.records.iter().map(|record| PlainRecord {
            schema: self.schema,
            collection: Some(self.collection),
            record,
        }))
    }
}

struct PlainRecord<'a> {
    schema: &'a DataSourceSchema,
    /// `None` for a related record of a collection the schema does not name (plain values).
    collection: Option<&'a CollectionSchema>,
    record: &'a Record,
}

impl Serialize for PlainRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (name, value) in self.record.iter() {
            let field = self.collection.and_then(|c| c.fields.get(name));
            match (field, value) {
                (Some(FieldSchema::Relation(relation)), Value::Record(related)) => {
                    map.serialize_entry(
                        name,
                        &PlainRecord {
                            schema: self.schema,
                            collection: self.schema.collections.get(relation.foreign_collection()),
                            record: related,
                        },
                    )?;
                }
                (Some(FieldSchema::Column(column)), _) => {
                    map.serialize_entry(name, &WireValue(value, column.wire))?;
                }
                _ => map.serialize_entry(name, &WireValue(value, Wire::Plain))?,
            }
        }
        map.end()
    }
}

/// The JSON:API document of one record (get, create, update).
pub fn serialize_one<'a>(
    schema: &'a DataSourceSchema,
    collection: &str,
    record: &'a Record,
) -> Result<Document<'a>> {
    let collection = schema.collection(collection)?;
    let mut included = Included::default();
    let data = Resource::new(schema, collection, record, &mut included)?;
    Ok(Document {
        data: Data::One(data),
        included: included.resources,
        decorators: None,
    })
}

/// The JSON:API document of no record: `{"data": null}`, what the agent answers an update of a
/// record that its filter no longer finds.
pub fn serialize_none<'a>() -> Document<'a> {
    Document {
        data: Data::None,
        included: IndexMap::default(),
        decorators: None,
    }
}

/// The body of a count route: `{"count": n}`.
pub fn count_body(count: u64) -> Json {
    json!({ "count": count })
}

/// The body of a count route on a collection that cannot be counted (`countable: false`).
pub fn count_deactivated_body() -> Json {
    json!({ "meta": { "count": "deactivated" } })
}

/// The count body a collection answers: deactivated when its schema says it is not countable.
pub fn count_body_for(collection: &CollectionSchema, count: u64) -> Json {
    if collection.countable {
        count_body(count)
    } else {
        count_deactivated_body()
    }
}

/// A JSON:API document ready to be written: `data`, `included` when some to-one relation was
/// loaded, `jsonapi`, and `meta.decorators` on searches.
///
/// Everything that can fail (ids, relation lookups) is resolved when the document is built;
/// writing it borrows the records and goes straight to the output buffer. Building a
/// `serde_json::Value` tree first cost more than the database query on a list of 100 rows.
pub struct Document<'a> {
    data: Data<'a>,
    included: IndexMap<(&'a str, String), Resource<'a>, foldhash::fast::RandomState>,
    decorators: Option<Map<String, Json>>,
}

impl Document<'_> {
    /// The document as JSON bytes. The buffer is sized from the number of resources up front:
    /// growing it from a small start copied a list of 100 rows about six times.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let resources = match &self.data {
            Data::None => 0,
            Data::One(_) => 1,
            Data::Many(resources) => resources.len(),
        } + self.included.len();
        let mut out = Vec::with_capacity(128 + 384 * resources);
        self.write(&mut out)?;
        Ok(out)
    }
}

enum Data<'a> {
    None,
    One(Resource<'a>),
    Many(Vec<Resource<'a>>),
}

/// Related records met while building a document, by `(type, id)`, in first-seen order.
#[derive(Default)]
struct Included<'a> {
    resources: IndexMap<(&'a str, String), Resource<'a>, foldhash::fast::RandomState>,
}

/// One resource object: `{type, id, attributes, relationships}`.
///
/// An included resource can be reached through several rows or relations, each time with the
/// fields its own projection loaded: it then holds every such record, and writes each attribute
/// and relationship from the first record that has it, so that two projections of the same
/// record merge instead of one hiding the other.
struct Resource<'a> {
    collection: &'a CollectionSchema,
    id: String,
    records: Vec<&'a Record>,
    relationships: Vec<(&'a str, Linkage<'a>)>,
}

/// What a relationship says of its relation.
enum Linkage<'a> {
    /// To-many: `{"links":{"related":{"href": …}}}`, the href made of the resource's collection
    /// and id and the relation's name as it is written.
    Related,
    /// To-one without a related record: `{"data": null}`.
    Null,
    /// To-one: `{"data":{"type","id"}}`.
    To(&'a str, String),
}

impl<'a> Resource<'a> {
    /// Resolves the id and relationships of `record`. To-one records it refers to are added to
    /// `included`, recursively.
    fn new(
        schema: &'a DataSourceSchema,
        collection: &'a CollectionSchema,
        record: &'a Record,
        included: &mut Included<'a>,
    ) -> Result<Self> {
        // The id as the Node agent packs it, from the keys' wire forms (MariaDB `12.3`).
        let id = wire::pack_id(collection, record)?;
        let mut relationships = Vec::new();
        // Relationships follow the schema's field order, as the agent registers them.
        for (name, relation) in collection.relations() {
            let foreign = relation.foreign_collection();
            let linkage = match relation {
                RelationSchema::OneToMany { .. } | RelationSchema::ManyToMany { .. } => {
                    Linkage::Related
                }
                // To-one: only when the relation was loaded (it is in the projection), as the
                // agent's serializer reads the relation's own key and nothing else; a foreign
                // key column in the record stays an attribute.
                RelationSchema::ManyToOne { .. } | RelationSchema::OneToOne { .. } => {
                    match to_one_linkage(schema, foreign, record.get(name), included)? {
                        Some(linkage) => linkage,
                        None => continue,
                    }
                }
            };
            relationships.push((name.as_str(), linkage));
        }
        Ok(Self {
            collection,
            id,
            records: vec![record],
            relationships,
        })
    }

    /// The attributes with their wire forms, in the first record's (projection) order, then
    /// those only later records have. Relation fields are not attributes; foreign key columns
    /// are attributes like any other column, as in the agent.
    fn attributes(&self) -> impl Iterator<Item = (&'a str, &'a Value, Wire)> + '_ {
        let collection = self.collection;
        self.records
            .iter()
            .enumerate()
            .flat_map(move |(index, record)| {
                record.iter().filter_map(move |(name, value)| {
                    let wire = match collection.fields.get(name) {
                        Some(FieldSchema::Relation(_)) => return None,
                        Some(FieldSchema::Column(column)) => column.wire,
                        None => Wire::Plain,
                    };
                    let earlier = &self.records[..index];
                    (!earlier.iter().any(|r| r.get(name).is_some())).then_some((name, value, wire))
                })
            })
    }
}

/// The linkage of a to-one relation from its value in the record; `None` when it is absent.
/// A loaded record goes to `included`.
fn to_one_linkage<'a>(
    schema: &'a DataSourceSchema,
    foreign: &'a str,
    value: Option<&'a Value>,
    included: &mut Included<'a>,
) -> Result<Option<Linkage<'a>>> {
    let linkage = match value {
        None => return Ok(None),
        Some(Value::Null) => Linkage::Null,
        Some(Value::Record(related)) => {
            let foreign_schema = schema.collection(foreign)?;
            let resource = Resource::new(schema, foreign_schema, related, included)?;
            let id = resource.id.clone();
            include(included, resource);
            Linkage::To(foreign, id)
        }
        // A bare key instead of a record: the agent's serializer takes it as the id.
        Some(other) => Linkage::To(foreign, other.to_id_string()),
    };
    Ok(Some(linkage))
}

/// Adds a related record to `included`, or merges it into the one already there (reached through
/// another relation or another row): relationships it lacked are appended.
fn include<'a>(included: &mut Included<'a>, resource: Resource<'a>) {
    match included
        .resources
        .entry((resource.collection.name.as_str(), resource.id.clone()))
    {
        indexmap::map::Entry::Vacant(slot) => {
            slot.insert(resource);
        }
        indexmap::map::Entry::Occupied(mut slot) => {
            let existing = slot.get_mut();
            existing.records.extend(resource.records);
            for (name, linkage) in resource.relationships {
                if !existing.relationships.iter().any(|(n, _)| *n == name) {
                    existing.relationships.push((name, linkage));
                }
            }
        }
    }
}

/// `meta.decorators`: for each resource with an attribute whose string form contains `search`
/// case-insensitively, its id and those attribute names, keyed by sequential index.
/// Falsy values (null, `false`, `0`, `""`) never match, as in the agent.
fn search_decorators(data: &[Resource<'_>], search: &str) -> Result<Map<String, Json>> {
    let needle = search.to_lowercase();
    let mut decorators = Map::new();
    for resource in data {
        let mut matches = Vec::new();
        for (name, value, wire) in resource.attributes() {
            let value = to_json(value, wire)?;
            if js::truthy(&value) && js::string(&value).to_lowercase().contains(&needle) {
                matches.push(Json::String(name.to_owned()));
            }
        }
        if !matches.is_empty() {
            decorators.insert(
                decorators.len().to_string(),
                json!({ "id": resource.id, "search": matches }),
            );
        }
    }
    Ok(decorators)
}

/// The wire JSON of a value of a column with this wire form (dates as UTC ISO with
/// milliseconds, bigints as strings where the agent's drivers give strings, ...).
fn to_json(value: &Value, wire: Wire) -> Result<Json> {
    wire::to_json(value, wire).map_err(|e| internal(format!("value serialization: {e}")))
}

fn internal(message: impl Into<String>) -> Error {
    Error::Datasource(datasource::Error::Internal(message.into()))
}

// ----------------------------------------------------------------------------------------------
// CSV export (§3.5)

/// The first CSV chunk: the `header` query parameter split on `,`, each name CSV-quoted when
/// needed, and a `\n`.
pub fn csv_header(header: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut writer = CsvOut::new(&mut out);
    let mut scratch = String::new();
    let cells: Vec<Cell<'_>> = header
        .split(',')
        .map(|name| Cell::text(name, &mut scratch))
        .collect();
    writer.row(&cells, &scratch)?;
    writer.finish()?;
    Ok(out)
}

/// The wire form of each path of an export's projection (`a:b` paths through to-one
/// relations), resolved once per export. Paths that name no column are written plainly.
pub fn csv_wires<S: AsRef<str>>(
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    projection: &[S],
) -> Vec<Wire> {
    projection
        .iter()
        .map(|path| {
            schema
                .resolve_column(collection, path.as_ref())
                .map_or(Wire::Plain, |(_, column)| column.wire)
        })
        .collect()
}

/// Appends one batch of records to `out`: one row per record, the values of `projection` in
/// order (`a:b` paths read through loaded to-one relations), each row ending with `\n`.
/// `wires` holds the wire form of each path ([`csv_wires`]).
///
/// Null or missing values are empty; objects are JSON; arrays join their items with `,`; other
/// values take their wire string form (ISO dates, decimals as the agent's driver gives them,
/// binary columns as data URIs or hex).
pub fn write_csv_batch<S: AsRef<str>>(
    out: &mut Vec<u8>,
    projection: &[S],
    wires: &[Wire],
    records: &[Record],
) -> Result<()> {
    let mut writer = CsvOut::new(out);
    // The rows of a page share their field names: each plain field's position is found once,
    // in the first record, instead of a name search per cell.
    let first = records.first();
    let positions: Vec<Option<usize>> = projection
        .iter()
        .map(|path| {
            let path = path.as_ref();
            first.filter(|_| !path.contains(':'))?.position(path)
        })
        .collect();
    // One row of cells and one text buffer, reused: a cell borrows its record's text, or is a
    // range of the buffer where its value was written (numbers, dates, decimals).
    let mut cells = Vec::with_capacity(projection.len());
    let mut scratch = String::new();
    for record in records {
        cells.clear();
        scratch.clear();
        let shared = first.is_some_and(|first| first.shares_names(record));
        for (i, path) in projection.iter().enumerate() {
            let wire = wires.get(i).copied().unwrap_or_default();
            let value = match positions[i] {
                Some(position) if shared => record.value_at(position),
                _ => record.get_path(path.as_ref()),
            };
            cells.push(csv_cell(value, wire, &mut scratch)?);
        }
        writer.row(&cells, &scratch)?;
    }
    writer.finish()
}

/// One CSV cell: text borrowed from a record, or a range of the row's buffer.
enum Cell<'r> {
    Text(&'r str),
    Written(std::ops::Range<usize>),
}

impl<'r> Cell<'r> {
    /// A record's text as a cell. The agent's CSV library drops NUL characters: a text that
    /// holds one is written to `scratch` without them.
    fn text(text: &'r str, scratch: &mut String) -> Self {
        if !text.contains('\0') {
            return Self::Text(text);
        }
        let start = scratch.len();
        scratch.extend(text.chars().filter(|c| *c != '\0'));
        Self::Written(start..scratch.len())
    }

    fn as_str<'a>(&'a self, scratch: &'a str) -> &'a str {
        match self {
            Self::Text(text) => text,
            Self::Written(range) => scratch.get(range.clone()).unwrap_or_default(),
        }
    }
}

/// The cell of one value; values that are not text are written to `scratch`.
fn csv_cell<'r>(value: Option<&'r Value>, wire: Wire, scratch: &mut String) -> Result<Cell<'r>> {
    let Some(value) = value else {
        return Ok(Cell::Text(""));
    };
    let start = scratch.len();
    if let Some(text) = wire::csv_text(value, wire) {
        scratch.push_str(&text);
        return Ok(Cell::Written(start..scratch.len()));
    }
    match value {
        Value::Null => return Ok(Cell::Text("")),
        Value::String(s) => return Ok(Cell::text(s, scratch)),
        Value::Bool(b) => return Ok(Cell::Text(if *b { "true" } else { "false" })),
        Value::Int(i) => scratch.push_str(itoa::Buffer::new().format(*i)),
        Value::Float(f) => scratch.push_str(&js::number(*f)),
        // What the JSON form's string is, without building it.
        Value::Date(d) => datasource::push_datetime(scratch, d),
        Value::Decimal(d) if wire == Wire::NumberString => {
            // Writing to a `String` cannot fail.
            let _ = write!(scratch, "{}", wire::Plain(d));
        }
        other => match to_json(other, wire)? {
            Json::Null => return Ok(Cell::Text("")),
            json => {
                let text = js::string_with_objects(&json, &Json::to_string);
                scratch.extend(text.chars().filter(|c| *c != '\0'));
            }
        },
    }
    Ok(Cell::Written(start..scratch.len()))
}

/// Rows written with the `csv` crate (quoting only where needed, `\n` terminator).
struct CsvOut<'o> {
    builder: csv::WriterBuilder,
    /// Always `Some` between calls: taken only to write an empty line by hand.
    writer: Option<csv::Writer<&'o mut Vec<u8>>>,
}

impl<'o> CsvOut<'o> {
    fn new(out: &'o mut Vec<u8>) -> Self {
        let mut builder = csv::WriterBuilder::new();
        builder
            .terminator(csv::Terminator::Any(b'\n'))
            .quote_style(csv::QuoteStyle::Necessary)
            .flexible(true);
        let writer = Some(builder.from_writer(out));
        Self { builder, writer }
    }

    fn row(&mut self, row: &[Cell<'_>], scratch: &str) -> Result<()> {
        if let [cell] = row
            && cell.as_str(scratch).is_empty()
        {
            // The csv crate writes `""` for a lone empty field (so that the row is not lost);
            // the agent writes an empty line. Written by hand to keep the same bytes.
            if let Some(writer) = self.writer.take() {
                let out = writer.into_inner().map_err(csv_error)?;
                out.push(b'\n');
                self.writer = Some(self.builder.from_writer(out));
            }
            return Ok(());
        }
        match &mut self.writer {
            Some(writer) => writer
                .write_record(row.iter().map(|cell| cell.as_str(scratch).as_bytes()))
                .map_err(csv_error),
            None => Err(csv_error("the writer was lost")),
        }
    }

    fn finish(self) -> Result<()> {
        match self.writer {
            Some(mut writer) => writer.flush().map_err(csv_error),
            None => Err(csv_error("the writer was lost")),
        }
    }
}

fn csv_error(e: impl std::fmt::Display) -> Error {
    internal(format!("CSV writer: {e}"))
}

/// The `Content-Disposition` value of a CSV export. The agent hands Koa's `attachment()` the
/// string `attachment; filename=<filename>` as if it were a file name, so clients receive
/// `attachment; filename="attachment; filename=<filename>"`; we reproduce that quirk, with the
/// `content-disposition` package's rules: the base name after the last `/`, a quoted string with
/// `\` and `"` escaped, and when the name is not plain Latin-1 (or looks percent-encoded) an
/// ISO-8859-1 fallback (`?` for other characters) plus a UTF-8 `filename*`.
pub fn csv_content_disposition(filename: &str) -> String {
    let attachment = format!("attachment; filename={filename}");
    // Node's `path.basename`: the part after the last `/`, trailing slashes ignored.
    let name = attachment.trim_end_matches('/');
    let name = name.rsplit('/').next().unwrap_or(name);

    let is_quotable = !name.is_empty()
        && name
            .chars()
            .all(|c| matches!(c, '\u{20}'..='\u{7e}' | '\u{80}'..='\u{ff}'));
    let fallback: String = name
        .chars()
        .map(|c| {
            if matches!(c, '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{ff}') {
                c
            } else {
                '?'
            }
        })
        .collect();
    let has_fallback = fallback != name;
    let looks_encoded = has_percent_escape(name);

    let mut header = String::from("attachment");
    if is_quotable || has_fallback {
        let shown = if has_fallback { &fallback } else { name };
        header.push_str("; filename=\"");
        for c in shown.chars() {
            if c == '\\' || c == '"' {
                header.push('\\');
            }
            header.push(c);
        }
        header.push('"');
    }
    if has_fallback || !is_quotable || looks_encoded {
        header.push_str("; filename*=UTF-8''");
        header.extend(utf8_percent_encode(name, ATTR_CHAR));
    }
    header
}

/// Whether `s` contains `%` followed by two hex digits.
fn has_percent_escape(s: &str) -> bool {
    s.as_bytes()
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document as a JSON value, read back from the bytes the routes write.
    fn list_json(
        schema: &DataSourceSchema,
        collection: &str,
        records: &[Record],
        search: Option<&str>,
    ) -> Result<Json> {
        let document = serialize_list(schema, collection, records, search)?;
        Ok(serde_json::from_slice(&document.to_bytes()?).expect("a document is JSON"))
    }

    fn one_json(schema: &DataSourceSchema, collection: &str, record: &Record) -> Result<Json> {
        let document = serialize_one(schema, collection, record)?;
        Ok(serde_json::from_slice(&document.to_bytes()?).expect("a document is JSON"))
    }
    use crate::datasource::schema::{ColumnSchema, FieldSchema, PrimitiveType};

    fn column(pk: bool, ty: PrimitiveType) -> FieldSchema {
        let mut c = ColumnSchema::new(ty);
        c.is_primary_key = pk;
        FieldSchema::Column(c)
    }

    fn collection(name: &str, fields: Vec<(&str, FieldSchema)>) -> CollectionSchema {
        let mut c = CollectionSchema::new(name);
        for (n, f) in fields {
            c.fields.insert(n.to_owned(), f);
        }
        c
    }

    /// book (isbn) -> author (person); person (id) has many books and one editor (person).
    fn library() -> DataSourceSchema {
        let book = collection(
            "book",
            vec![
                ("isbn", column(true, PrimitiveType::String)),
                ("title", column(false, PrimitiveType::String)),
                ("authorId", column(false, PrimitiveType::String)),
                (
                    "author",
                    FieldSchema::Relation(RelationSchema::ManyToOne {
                        foreign_collection: "person".into(),
                        foreign_key: "authorId".into(),
                        foreign_key_target: "id".into(),
                    }),
                ),
            ],
        );
        let person = collection(
            "person",
            vec![
                ("id", column(true, PrimitiveType::String)),
                ("name", column(false, PrimitiveType::String)),
                (
                    "books",
                    FieldSchema::Relation(RelationSchema::OneToMany {
                        foreign_collection: "book".into(),
                        origin_key: "authorId".into(),
                        origin_key_target: "id".into(),
                    }),
                ),
            ],
        );
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("book".into(), book);
        schema.collections.insert("person".into(), person);
        schema
    }

    fn rec(fields: Vec<(&str, Value)>) -> Record {
        fields.into_iter().collect()
    }

    fn person(id: &str, name: &str) -> Value {
        Value::Record(Box::new(rec(vec![
            ("id", id.into()),
            ("name", name.into()),
        ])))
    }

    #[test]
    fn book_with_author_as_in_the_agent() {
        let book = rec(vec![
            ("isbn", "9780345317988".into()),
            ("title", "Foundation".into()),
            ("author", person("asim00", "Asimov")),
        ]);
        let doc = one_json(&library(), "book", &book).unwrap();
        assert_eq!(
            doc,
            json!({
                "data": {
                    "type": "book",
                    "id": "9780345317988",
                    "attributes": { "isbn": "9780345317988", "title": "Foundation" },
                    "relationships": { "author": { "data": { "type": "person", "id": "asim00" } } }
                },
                "included": [{
                    "type": "person",
                    "id": "asim00",
                    "attributes": { "id": "asim00", "name": "Asimov" },
                    "relationships": {
                        "books": { "links": { "related": {
                            "href": "/forest/person/asim00/relationships/books"
                        } } }
                    }
                }],
                "jsonapi": { "version": "1.0" }
            })
        );
        // Key order is part of the bytes clients see.
        let text = serde_json::to_string(&doc).unwrap();
        assert!(text.starts_with(r#"{"data":{"type":"book","id":"9780345317988","attributes""#));
        assert!(text.ends_with(r#""jsonapi":{"version":"1.0"}}"#));
    }

    #[test]
    fn composite_id_and_no_relationship_key_without_relations() {
        let person = collection(
            "person",
            vec![
                ("birthdate", column(true, PrimitiveType::Dateonly)),
                ("firstName", column(false, PrimitiveType::String)),
                ("lastName", column(true, PrimitiveType::String)),
            ],
        );
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("person".into(), person);
        let record = rec(vec![
            (
                "birthdate",
                Value::Dateonly(chrono::NaiveDate::from_ymd_opt(1920, 1, 2).unwrap()),
            ),
            ("firstName", "Isaac".into()),
            ("lastName", "Asimov".into()),
        ]);
        assert_eq!(
            one_json(&schema, "person", &record).unwrap(),
            json!({
                "data": {
                    "type": "person",
                    "id": "1920-01-02|Asimov",
                    "attributes": { "birthdate": "1920-01-02", "firstName": "Isaac", "lastName": "Asimov" }
                },
                "jsonapi": { "version": "1.0" }
            })
        );
    }

    #[test]
    fn null_relation_and_deduplicated_included() {
        let books = vec![
            rec(vec![
                ("isbn", "1".into()),
                ("author", person("asim00", "Asimov")),
            ]),
            rec(vec![("isbn", "2".into()), ("author", Value::Null)]),
            rec(vec![
                ("isbn", "3".into()),
                ("author", person("asim00", "Asimov")),
            ]),
        ];
        let doc = list_json(&library(), "book", &books, None).unwrap();
        let books_link = json!({ "links": { "related": {
            "href": "/forest/person/asim00/relationships/books"
        } } });
        assert_eq!(
            doc,
            json!({
                "data": [
                    { "type": "book", "id": "1", "attributes": { "isbn": "1" },
                      "relationships": { "author": { "data": { "type": "person", "id": "asim00" } } } },
                    { "type": "book", "id": "2", "attributes": { "isbn": "2" },
                      "relationships": { "author": { "data": null } } },
                    { "type": "book", "id": "3", "attributes": { "isbn": "3" },
                      "relationships": { "author": { "data": { "type": "person", "id": "asim00" } } } }
                ],
                "included": [{
                    "type": "person", "id": "asim00",
                    "attributes": { "id": "asim00", "name": "Asimov" },
                    "relationships": { "books": books_link }
                }],
                "jsonapi": { "version": "1.0" }
            })
        );
    }

    #[test]
    fn to_one_relationships_only_for_loaded_relations() {
        // Foreign keys without their relation in the projection: attributes only, as the
        // agent's serializer reads the relation's own key and nothing else.
        let books = vec![
            rec(vec![("isbn", "1".into()), ("title", "A".into())]),
            rec(vec![("isbn", "2".into()), ("authorId", "x|y".into())]),
            rec(vec![("isbn", "3".into()), ("authorId", Value::Null)]),
            rec(vec![("isbn", "4".into()), ("author", Value::Null)]),
        ];
        let doc = list_json(&library(), "book", &books, None).unwrap();
        assert_eq!(
            doc,
            json!({
                "data": [
                    { "type": "book", "id": "1", "attributes": { "isbn": "1", "title": "A" } },
                    { "type": "book", "id": "2", "attributes": { "isbn": "2", "authorId": "x|y" } },
                    { "type": "book", "id": "3", "attributes": { "isbn": "3", "authorId": null } },
                    { "type": "book", "id": "4", "attributes": { "isbn": "4" },
                      "relationships": { "author": { "data": null } } }
                ],
                "jsonapi": { "version": "1.0" }
            })
        );
        // An empty list: just the frame.
        assert_eq!(
            list_json(&library(), "book", &[], Some("x")).unwrap(),
            json!({ "data": [], "jsonapi": { "version": "1.0" } })
        );
    }

    #[test]
    fn to_many_links_escape_the_packed_id() {
        let mut schema = library();
        let tag = collection(
            "tag",
            vec![
                ("a", column(true, PrimitiveType::String)),
                ("b", column(true, PrimitiveType::Number)),
                (
                    "books",
                    FieldSchema::Relation(RelationSchema::ManyToMany {
                        foreign_collection: "book".into(),
                        through_collection: "book_tag".into(),
                        origin_key: "tagA".into(),
                        origin_key_target: "a".into(),
                        foreign_key: "isbn".into(),
                        foreign_key_target: "isbn".into(),
                    }),
                ),
            ],
        );
        schema.collections.insert("tag".into(), tag);
        let record = rec(vec![
            ("a", "sci fi/é?&#%'()*!~".into()),
            ("b", Value::Int(7)),
        ]);
        let doc = one_json(&schema, "tag", &record).unwrap();
        assert_eq!(
            doc,
            json!({
                "data": {
                    "type": "tag",
                    "id": "sci fi/é?&#%'()*!~|7",
                    "attributes": { "a": "sci fi/é?&#%'()*!~", "b": 7 },
                    "relationships": { "books": { "links": { "related": {
                        "href": "/forest/tag/sci%20fi%2F%C3%A9%3F%26%23%25'()*!~%7C7/relationships/books"
                    } } } }
                },
                "jsonapi": { "version": "1.0" }
            })
        );
    }

    #[test]
    fn nested_to_one_records_are_included_with_their_own_relations() {
        let mut schema = library();
        if let Some(person) = schema.collections.get_mut("person") {
            person
                .fields
                .insert("mentorId".into(), column(false, PrimitiveType::String));
            person.fields.insert(
                "mentor".into(),
                FieldSchema::Relation(RelationSchema::ManyToOne {
                    foreign_collection: "person".into(),
                    foreign_key: "mentorId".into(),
                    foreign_key_target: "id".into(),
                }),
            );
        }
        let author = rec(vec![
            ("id", "p1".into()),
            ("mentor", person("p0", "Campbell")),
        ]);
        let book = rec(vec![
            ("isbn", "1".into()),
            ("author", Value::Record(Box::new(author))),
        ]);
        let doc = one_json(&schema, "book", &book).unwrap();
        let link = |id: &str| json!({ "links": { "related": { "href": format!("/forest/person/{id}/relationships/books") } } });
        assert_eq!(
            doc["included"],
            // Deepest first: a related record is complete (its own relations serialized) before
            // it is added, as in the recursive json-api-serializer.
            json!([
                { "type": "person", "id": "p0", "attributes": { "id": "p0", "name": "Campbell" },
                  "relationships": { "books": link("p0") } },
                { "type": "person", "id": "p1", "attributes": { "id": "p1" },
                  "relationships": { "books": link("p1"), "mentor": { "data": { "type": "person", "id": "p0" } } } }
            ])
        );
    }

    #[test]
    fn nested_values_are_kept_as_json() {
        let mut schema = DataSourceSchema::default();
        schema.collections.insert(
            "c".into(),
            collection(
                "c",
                vec![
                    ("id", column(true, PrimitiveType::Number)),
                    ("data", column(false, PrimitiveType::Json)),
                    ("price", column(false, PrimitiveType::Number)),
                    ("at", column(false, PrimitiveType::Date)),
                ],
            ),
        );
        let at = chrono::DateTime::parse_from_rfc3339("2024-03-01T10:34:56.789123Z")
            .unwrap()
            .to_utc();
        let record = rec(vec![
            ("id", Value::Int(1)),
            ("data", Value::Json(json!({ "a": [1, { "b": null }] }))),
            ("price", Value::Decimal("12.30".parse().unwrap())),
            ("at", Value::Date(at)),
        ]);
        assert_eq!(
            one_json(&schema, "c", &record).unwrap()["data"]["attributes"],
            json!({
                "id": 1,
                "data": { "a": [1, { "b": null }] },
                "price": "12.30",
                "at": "2024-03-01T10:34:56.789Z"
            })
        );
    }

    #[test]
    fn search_decorators_index_matching_records_only() {
        let books = vec![
            rec(vec![("isbn", "111".into()), ("title", "Foundation".into())]),
            rec(vec![("isbn", "222".into()), ("title", "Dune".into())]),
            rec(vec![
                ("isbn", "found-333".into()),
                ("title", "Second FOUNDATION".into()),
            ]),
            rec(vec![("isbn", "444".into()), ("title", Value::Null)]),
        ];
        let doc = list_json(&library(), "book", &books, Some("fOUnd")).unwrap();
        assert_eq!(
            doc["meta"],
            json!({ "decorators": {
                "0": { "id": "111", "search": ["title"] },
                "1": { "id": "found-333", "search": ["isbn", "title"] }
            } })
        );
        // `meta` is the last key.
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["data", "jsonapi", "meta"]);

        // No hit, blank search, no search: no meta. Null never matches "null".
        for search in [Some("zzz"), Some("  "), None, Some("null")] {
            let doc = list_json(&library(), "book", &books, search).unwrap();
            assert!(doc.get("meta").is_none(), "{search:?}");
        }
    }

    #[test]
    fn search_uses_javascript_string_forms() {
        assert_eq!(js::string(&json!([1, null, "a", [2, 3]])), "1,,a,2,3");
        assert_eq!(js::string(&json!({ "a": 1 })), "[object Object]");
        assert_eq!(
            js::string_with_objects(&json!([{ "a": 1 }]), &Json::to_string),
            r#"{"a":1}"#
        );
        assert_eq!(js::string(&json!(2.0)), "2");
        assert_eq!(js::string(&json!(2.5)), "2.5");
        assert!(!js::truthy(&json!(0)) && !js::truthy(&json!("")) && !js::truthy(&json!(false)));
    }

    #[test]
    fn unknown_collection_and_missing_primary_key_are_errors() {
        assert!(list_json(&library(), "nope", &[], None).is_err());
        let mut schema = DataSourceSchema::default();
        schema.collections.insert(
            "v".into(),
            collection("v", vec![("x", column(false, PrimitiveType::String))]),
        );
        let err = one_json(&schema, "v", &rec(vec![("x", "1".into())])).unwrap_err();
        assert!(matches!(
            err,
            Error::Datasource(datasource::Error::NoPrimaryKey)
        ));
    }

    #[test]
    fn count_bodies() {
        assert_eq!(count_body(42), json!({ "count": 42 }));
        assert_eq!(
            count_deactivated_body(),
            json!({ "meta": { "count": "deactivated" } })
        );
        let mut c = CollectionSchema::new("c");
        assert_eq!(count_body_for(&c, 3), json!({ "count": 3 }));
        c.countable = false;
        assert_eq!(
            count_body_for(&c, 3),
            json!({ "meta": { "count": "deactivated" } })
        );
    }

    #[test]
    fn csv_header_is_split_and_quoted() {
        assert_eq!(csv_header("id,name").unwrap(), b"id,name\n");
        assert_eq!(
            csv_header(r#"Full "name",Author - Name"#).unwrap(),
            b"\"Full \"\"name\"\"\",Author - Name\n"
        );
        assert_eq!(csv_header("").unwrap(), b"\n");
    }

    #[test]
    fn csv_rows_read_the_records_of_one_shape_by_position_and_others_by_name() {
        let shape = crate::datasource::RecordShape::new(["id", "price", "sku"]);
        let decimal = |text: &str| Value::Decimal(text.parse().unwrap());
        let records = vec![
            shape.record(vec![Value::Int(1), decimal("-0.50"), "a\0b".into()]),
            shape.record(vec![Value::Int(2), decimal("1e3"), "c".into()]),
            // Built on its own: other names, in another order.
            rec(vec![
                ("sku", "d".into()),
                ("extra", Value::Int(9)),
                ("id", Value::Int(3)),
            ]),
        ];
        let mut out = Vec::new();
        let wires = [Wire::Plain, Wire::NumberString, Wire::Plain, Wire::Plain];
        write_csv_batch(
            &mut out,
            &["sku", "price", "id", "missing"],
            &wires,
            &records,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ab,-0.50,1,\nc,1000,2,\nd,,3,\n"
        );
    }

    #[test]
    fn csv_rows_follow_the_projection_with_nested_paths() {
        let books = vec![
            rec(vec![
                ("isbn", "1".into()),
                ("title", "Foundation, part \"one\"".into()),
                ("author", person("asim00", "Asimov")),
            ]),
            rec(vec![
                ("isbn", "2".into()),
                ("title", "multi\nline".into()),
                ("author", Value::Null),
            ]),
        ];
        let mut out = Vec::new();
        write_csv_batch(&mut out, &["title", "isbn", "author:name"], &[], &books).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"Foundation, part \"\"one\"\"\",1,Asimov\n\"multi\nline\",2,\n"
        );
    }

    #[test]
    fn csv_values_use_the_wire_forms() {
        let at = chrono::DateTime::parse_from_rfc3339("2024-03-01T10:34:56.789Z")
            .unwrap()
            .to_utc();
        let records = vec![
            rec(vec![
                ("data", Value::Json(json!({ "name": "ab", "price": 5 }))),
                ("tags", Value::Json(json!(["a", "b"]))),
                ("price", Value::Decimal("12.30".parse().unwrap())),
                ("n", Value::Float(2.0)),
                ("ok", Value::Bool(true)),
                ("at", Value::Date(at)),
                ("nul", "a\0b".into()),
            ]),
            rec(vec![("data", Value::Null)]),
        ];
        let mut out = Vec::new();
        let projection = ["data", "tags", "price", "n", "ok", "at", "nul"];
        write_csv_batch(&mut out, &projection, &[], &records).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            concat!(
                r#""{""name"":""ab"",""price"":5}","a,b",12.30,2,true,2024-03-01T10:34:56.789Z,ab"#,
                "\n",
                ",,,,,,\n"
            )
        );

        // One column of nulls: empty lines, as the agent writes them.
        let mut out = Vec::new();
        write_csv_batch(&mut out, &["data"], &[], &records[1..]).unwrap();
        assert_eq!(out, b"\n");

        // Batches concatenate: each ends with its own newline.
        let mut out = csv_header("data").unwrap();
        write_csv_batch(&mut out, &["data"], &[], &records[..1]).unwrap();
        write_csv_batch(&mut out, &["data"], &[], &records[..1]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "data\n\"{\"\"name\"\":\"\"ab\"\",\"\"price\"\":5}\"\n\"{\"\"name\"\":\"\"ab\"\",\"\"price\"\":5}\"\n"
        );
    }

    #[test]
    fn content_disposition_quirk() {
        assert_eq!(
            csv_content_disposition("books.csv"),
            r#"attachment; filename="attachment; filename=books.csv""#
        );
        assert_eq!(
            csv_content_disposition(r#"a"b\c"#),
            r#"attachment; filename="attachment; filename=a\"b\\c""#
        );
        assert_eq!(
            csv_content_disposition("dir/x.csv"),
            r#"attachment; filename="x.csv""#
        );
        assert_eq!(
            csv_content_disposition("café.csv"),
            r#"attachment; filename="attachment; filename=café.csv""#
        );
        assert_eq!(
            csv_content_disposition("日本.csv"),
            "attachment; filename=\"attachment; filename=??.csv\"; \
             filename*=UTF-8''attachment%3B%20filename%3D%E6%97%A5%E6%9C%AC.csv"
        );
        assert_eq!(
            csv_content_disposition("a%20b"),
            "attachment; filename=\"attachment; filename=a%20b\"; \
             filename*=UTF-8''attachment%3B%20filename%3Da%2520b"
        );
    }
}
