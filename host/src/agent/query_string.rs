//! Request parameters of the data routes (protocol §2.1, §2.6): the query-string keys
//! (`timezone`, `fields[…]`, `page[…]`, `sort`, `filters`, `search`, `searchExtended`,
//! `segment`, `segmentQuery`/`connectionName`, CSV `header`/`filename`, dissociate `delete`),
//! the `Forest-Projection` header, and the selection body of bulk deletes, dissociations and
//! actions.
//!
//! Everything here is a pure function of already-received input, so routes stay thin and every
//! rule (defaults, precedence, exact error wording) is unit-tested in one place. Values are read
//! as the agent reads them: a repeated query key stringifies as its values joined with `,`, and a
//! key of the selection body's `all_records_subset_query` wins over the same query-string key.

use std::borrow::Cow;

use chrono_tz::Tz;
use serde_json::{Map, Value as Json};

use super::{Error, Result, js};
use crate::datasource::{
    Caller, CollectionSchema, ConditionTree, DataSourceSchema, FieldSchema, Filter, Operator, Page,
    Projection, Sort, Value, unpack_id,
};

/// `page[size]` when the request gives none.
const DEFAULT_PAGE_SIZE: &str = "15";
/// `page[number]` when the request gives none (1-based).
const DEFAULT_PAGE_NUMBER: &str = "1";

/// A decoded query string: `key=value` pairs in request order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryString {
    pairs: Vec<(String, String)>,
}

impl QueryString {
    /// Decodes a raw query string (with or without its leading `?`) as
    /// `application/x-www-form-urlencoded`: `+` is a space, `%XX` escapes are decoded and a
    /// malformed escape is kept literally, so no input is rejected here.
    pub fn parse(raw: &str) -> Self {
        let raw = raw.strip_prefix('?').unwrap_or(raw);
        Self {
            pairs: form_urlencoded::parse(raw.as_bytes())
                .into_owned()
                .collect(),
        }
    }

    /// From pairs already split and decoded by the HTTP layer.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            pairs: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The value of `key`. A repeated key reads as its values joined with `,`: the agent's query
    /// object holds an array for it, and every parser stringifies the value that way.
    pub fn get(&self, key: &str) -> Option<Cow<'_, str>> {
        let mut values = self
            .pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str());
        let first = values.next()?;
        match values.next() {
            None => Some(Cow::Borrowed(first)),
            Some(second) => {
                let mut joined = format!("{first},{second}");
                for v in values {
                    joined.push(',');
                    joined.push_str(v);
                }
                Some(Cow::Owned(joined))
            }
        }
    }
}

/// Where the filter-building keys are read: the selection body's `all_records_subset_query`
/// first (it wins, §2), then the query string.
#[derive(Debug, Clone, Copy)]
pub struct Params<'a> {
    query: &'a QueryString,
    subset_query: Option<&'a Map<String, Json>>,
}

/// A raw parameter: as JSON when it came from the body, as text from the query string.
enum Raw<'a> {
    Json(&'a Json),
    Text(Cow<'a, str>),
}

impl<'a> Params<'a> {
    /// Parameters of a plain GET: only the query string.
    pub fn new(query: &'a QueryString) -> Self {
        Self {
            query,
            subset_query: None,
        }
    }

    /// Parameters of a request with a selection body; `subset_query` overrides `query`.
    pub fn with_subset_query(
        query: &'a QueryString,
        subset_query: Option<&'a Map<String, Json>>,
    ) -> Self {
        Self {
            query,
            subset_query,
        }
    }

    pub fn query(&self) -> &'a QueryString {
        self.query
    }

    fn raw(&self, key: &str) -> Option<Raw<'a>> {
        // A JSON `null` in the body counts as absent, as the agent's `??` chain treats it.
        match self.subset_query.and_then(|s| s.get(key)) {
            Some(json) if !json.is_null() => Some(Raw::Json(json)),
            _ => self.query.get(key).map(Raw::Text),
        }
    }

    /// The parameter as the agent stringifies it.
    fn text(&self, key: &str) -> Option<Cow<'a, str>> {
        self.raw(key).map(|raw| match raw {
            Raw::Json(json) => Cow::Owned(js::string(json)),
            Raw::Text(text) => text,
        })
    }
}

/// `timezone`: required, an IANA name. Only read from the query string.
pub fn parse_timezone(query: &QueryString) -> Result<Tz> {
    let name = query
        .get("timezone")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Error::validation("Missing timezone"))?;
    // One wording for the whole crate: the datasource's parser already says `Invalid timezone: "X"`.
    Caller::parse_timezone(&name).map_err(|e| Error::Validation(e.to_string()))
}

/// The projection of list, get and list-related: the requested one
/// ([`parse_requested_projection`]) with primary keys added to the root and to every loaded
/// relation, since ids are packed from them.
pub fn parse_projection(
    query: &QueryString,
    header: Option<&str>,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<Projection> {
    let projection = parse_requested_projection(query, header, schema, collection)?;
    Ok(with_primary_keys(&projection, schema, collection))
}

/// The fields a client asked for: the `Forest-Projection` header when it is non-blank, else
/// `fields[…]` (see [`parse_fields_projection`]). A CSV export writes exactly these columns, as
/// the agent does; the keys added for ids are fetched but not written.
pub fn parse_requested_projection(
    query: &QueryString,
    header: Option<&str>,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<Projection> {
    Ok(match header.map(str::trim).filter(|h| !h.is_empty()) {
        Some(header) => {
            let projection = Projection::new(header.split(',').map(str::trim));
            check_paths(&projection, schema, collection)
                .map_err(|e| Error::Validation(format!("Invalid Forest-Projection header: {e}")))?;
            projection
        }
        None => parse_fields_projection(query, schema, collection)?,
    })
}

/// `fields[{c}]`: absent or empty → every column plus every column of each to-one relation;
/// otherwise a comma list of root fields where a relation `r` expands to `r:x` for each `x` of
/// `fields[r]` (keyed by the relation name). Primary keys are not added here.
pub fn parse_fields_projection(
    query: &QueryString,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<Projection> {
    let invalid = |e: String| Error::Validation(format!("Invalid projection: {e}"));
    let key = format!("fields[{}]", collection.name);
    let fields = match query.get(&key) {
        Some(fields) if !fields.is_empty() => fields,
        _ => return Ok(Projection::with_to_one_relations(collection, schema)),
    };
    let mut projection = Projection::default();
    for field in fields.split(',') {
        match collection.fields.get(field) {
            Some(FieldSchema::Relation(_)) => {
                let sub_fields = query.get(&format!("fields[{field}]")).ok_or_else(|| {
                    invalid(format!(
                        "the relation '{field}' needs its fields in 'fields[{field}]'"
                    ))
                })?;
                for sub in sub_fields.split(',') {
                    projection.push(format!("{field}:{sub}"));
                }
            }
            // Unknown names are kept so that validation reports them with the usual wording.
            _ => projection.push(field.to_owned()),
        }
    }
    check_paths(&projection, schema, collection).map_err(invalid)?;
    Ok(projection)
}

/// Every path must reach a column through to-one relations; a bare relation is not a path.
/// Returns the bare reason so that each caller can put its own prefix.
fn check_paths(
    projection: &Projection,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> std::result::Result<(), String> {
    for path in projection.iter() {
        if let Some(FieldSchema::Relation(_)) = collection.fields.get(path) {
            return Err(format!("'{path}' is a relation"));
        }
        schema
            .resolve_column(collection, path)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The projection plus the primary keys of the collection and of every loaded relation
/// (recursively), appended after the requested paths so that requested order is kept (CSV).
pub fn with_primary_keys(
    projection: &Projection,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Projection {
    let mut out = projection.clone();
    for pk in collection.primary_keys() {
        out.push(pk.to_owned());
    }
    for relation in projection.relations() {
        let Some(foreign) = collection
            .relation(relation)
            .and_then(|r| schema.collection(r.foreign_collection()).ok())
        else {
            // Validated projections only name existing relations; nothing to add otherwise.
            continue;
        };
        let nested = with_primary_keys(&projection.under(relation), schema, foreign);
        for path in nested.iter() {
            out.push(format!("{relation}:{path}"));
        }
    }
    out
}

/// `page[number]` and `page[size]` (defaults 1 and 15), read as the agent's `parseInt` reads
/// them (leading integer part, so `2.5` is 2 and `3abc` is 3). Non-positive or unparsable →
/// `Invalid pagination [limit: <size>, skip: <number>]`.
pub fn parse_page(params: &Params<'_>) -> Result<Page> {
    let size_text = params.text("page[size]");
    let number_text = params.text("page[number]");
    let size = js_parse_int(size_text.as_deref().unwrap_or(DEFAULT_PAGE_SIZE));
    let number = js_parse_int(number_text.as_deref().unwrap_or(DEFAULT_PAGE_NUMBER));
    match (size, number) {
        (Some(size), Some(number)) if size > 0.0 && number > 0.0 => {
            // In floating point, then saturated: absurd page numbers must not overflow.
            let skip = (number - 1.0) * size;
            Ok(Page::new(f64_to_u64(skip), f64_to_u64(size)))
        }
        _ => Err(Error::Validation(format!(
            "Invalid pagination [limit: {}, skip: {}]",
            js_number_string(size),
            js_number_string(number)
        ))),
    }
}

/// `sort`: comma list, `-` for descending, first `.` → `:`; each field must be a sortable
/// column. Any failure → `Invalid sort: <the sort parameter as given>`. Without one, the
/// primary keys ascending, as the agent's `parseSort` does, so that pages are stable; a given
/// sort is kept as is (the agent appends no key to it).
pub fn parse_sort(
    params: &Params<'_>,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<Sort> {
    let Some(text) = params.text("sort").filter(|s| !s.is_empty()) else {
        return Ok(Sort::by_primary_keys(collection));
    };
    let sort = Sort::parse(&text);
    sort.validate(collection, schema)
        .map_err(|_| Error::Validation(format!("Invalid sort: {text}")))?;
    Ok(sort)
}

/// `filters`: a condition tree as JSON (a URL-encoded string in the query, a string or an object
/// in the body), parsed, cast and validated against the collection. Absent or empty → none.
/// Any failure → `Invalid filters (<reason>)`.
pub fn parse_condition_tree(
    params: &Params<'_>,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<Option<ConditionTree>> {
    let invalid = |reason: String| Error::Validation(format!("Invalid filters ({reason})"));
    let parsed: Json;
    let json = match params.raw("filters") {
        None => return Ok(None),
        Some(Raw::Json(json @ (Json::Object(_) | Json::Array(_)))) => json,
        // Falsy scalars (`""`, `0`, `false`) mean no filter, as in the agent.
        Some(Raw::Json(json)) if !js::truthy(json) => return Ok(None),
        Some(raw) => {
            let text = match raw {
                Raw::Json(json) => Cow::Owned(js::string(json)),
                Raw::Text(text) => text,
            };
            if text.is_empty() {
                return Ok(None);
            }
            parsed = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
            &parsed
        }
    };
    ConditionTree::parse(json, collection, schema)
        .map(Some)
        .map_err(|e| invalid(e.to_string()))
}

/// `search`: a blank value is no search. A search on a collection that is not searchable →
/// `Collection is not searchable`.
pub fn parse_search(params: &Params<'_>, collection: &CollectionSchema) -> Result<Option<String>> {
    let Some(search) = params.text("search").filter(|s| !s.trim().is_empty()) else {
        return Ok(None);
    };
    if !collection.searchable {
        return Err(Error::validation("Collection is not searchable"));
    }
    Ok(Some(search.into_owned()))
}

/// `searchExtended`: true unless absent, `""`, `"0"` or `"false"`.
pub fn parse_search_extended(params: &Params<'_>) -> bool {
    params
        .text("searchExtended")
        .is_some_and(|v| !matches!(v.as_ref(), "" | "0" | "false"))
}

/// `segment`: empty is none; otherwise one of the collection's segments, else
/// `Invalid segment: "X"`.
pub fn parse_segment(params: &Params<'_>, collection: &CollectionSchema) -> Result<Option<String>> {
    let Some(segment) = params.text("segment").filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if !collection.segments.iter().any(|s| *s == *segment) {
        return Err(Error::Validation(format!("Invalid segment: \"{segment}\"")));
    }
    Ok(Some(segment.into_owned()))
}

/// A "live query" segment: SQL whose rows' primary keys restrict the list, run on a named
/// native-query connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveQuerySegment {
    pub query: String,
    pub connection_name: String,
}

/// `segmentQuery` + `connectionName`: none without a query; a query without a connection →
/// 422 `Missing native query connection attribute`.
pub fn parse_live_query_segment(params: &Params<'_>) -> Result<Option<LiveQuerySegment>> {
    let Some(query) = params.text("segmentQuery").filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let connection_name = params
        .text("connectionName")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::Unprocessable("Missing native query connection attribute".into()))?;
    Ok(Some(LiveQuerySegment {
        query: query.into_owned(),
        connection_name: connection_name.into_owned(),
    }))
}

/// The filter a route runs, plus the live-query segment that the route resolves itself (it needs
/// the datasource to run the query). The caller's scope is added by the permission layer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestFilter {
    pub filter: Filter,
    pub live_query_segment: Option<LiveQuerySegment>,
}

/// `filters` ∧ search ∧ segment (count, CSV, bulk operations): no sort, no page. Errors come in
/// the agent's order: search, segment, live-query segment, filters.
pub fn parse_filter(
    params: &Params<'_>,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<RequestFilter> {
    let search = parse_search(params, collection)?;
    let search_extended = parse_search_extended(params);
    let segment = parse_segment(params, collection)?;
    let live_query_segment = parse_live_query_segment(params)?;
    let condition_tree = parse_condition_tree(params, schema, collection)?;
    Ok(RequestFilter {
        filter: Filter {
            condition_tree,
            search,
            search_extended,
            segment,
            ..Filter::default()
        },
        live_query_segment,
    })
}

/// [`parse_filter`] plus `sort` and the page (lists).
pub fn parse_paginated_filter(
    params: &Params<'_>,
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
) -> Result<RequestFilter> {
    let mut request = parse_filter(params, schema, collection)?;
    request.filter.sort = parse_sort(params, schema, collection)?;
    request.filter.page = Some(parse_page(params)?);
    Ok(request)
}

/// CSV export options: `header` is the verbatim header row, `filename` names the attachment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsvParams {
    pub header: Option<String>,
    pub filename: Option<String>,
}

pub fn parse_csv_params(query: &QueryString) -> CsvParams {
    CsvParams {
        header: query.get("header").map(Cow::into_owned),
        filename: query.get("filename").map(Cow::into_owned),
    }
}

/// Dissociate's `delete`: any non-empty value (even `false`) asks to delete the records.
pub fn parse_delete_flag(query: &QueryString) -> bool {
    query.get("delete").is_some_and(|v| !v.is_empty())
}

/// One unpacked id: each primary key with its typed value, in schema order.
pub type CompositeId = Vec<(String, Value)>;

/// The records a bulk request targets (§2.6).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// `all_records`: every record except `ids` (then taken from `all_records_ids_excluded`).
    pub all_records: bool,
    pub ids: Vec<CompositeId>,
    /// `all_records_subset_query`: filter keys that override the query string.
    pub subset_query: Option<Map<String, Json>>,
}

/// Reads a selection body: `data.attributes.{ids, all_records, all_records_ids_excluded,
/// all_records_subset_query}`, or `data` as an array of `{id}`. Ids are unpacked and typed
/// for the collection; not an array → `Expected array, received: <type>`, an id that is not a
/// string → `Expected string, received: <type>`.
pub fn parse_selection(body: &Json, collection: &CollectionSchema) -> Result<Selection> {
    let data = body.get("data");
    let attributes = data.and_then(|d| d.get("attributes"));
    let attribute = |key: &str| attributes.and_then(|a| a.get(key));
    let all_records = attribute("all_records").is_some_and(js::truthy);
    let ids: Vec<CompositeId> = if all_records {
        unpack_ids(collection, attribute("all_records_ids_excluded"))?
    } else {
        match (attribute("ids").filter(|ids| js::truthy(ids)), data) {
            (Some(ids), _) => unpack_ids(collection, Some(ids))?,
            // The alternative shape: `data` is the list of `{type, id}` resource identifiers.
            (None, Some(Json::Array(items))) if !items.is_empty() => items
                .iter()
                .map(|item| unpack_one(collection, item.get("id")))
                .collect::<Result<_>>()?,
            _ => unpack_ids(collection, None)?,
        }
    };
    Ok(Selection {
        all_records,
        ids,
        subset_query: attribute("all_records_subset_query")
            .and_then(Json::as_object)
            .cloned(),
    })
}

fn unpack_ids(collection: &CollectionSchema, ids: Option<&Json>) -> Result<Vec<CompositeId>> {
    match ids {
        Some(Json::Array(items)) => items
            .iter()
            .map(|item| unpack_one(collection, Some(item)))
            .collect(),
        other => Err(Error::Validation(format!(
            "Expected array, received: {}",
            js_typeof(other)
        ))),
    }
}

fn unpack_one(collection: &CollectionSchema, id: Option<&Json>) -> Result<CompositeId> {
    match id {
        Some(Json::String(packed)) => Ok(unpack_id(collection, packed)?),
        other => Err(Error::Validation(format!(
            "Expected string, received: {}",
            js_typeof(other)
        ))),
    }
}

impl Selection {
    /// The parameters of this request: the subset query over the query string.
    pub fn params<'a>(&'a self, query: &'a QueryString) -> Params<'a> {
        Params::with_subset_query(query, self.subset_query.as_ref())
    }

    /// Dissociation refuses an explicit selection of nothing.
    pub fn ensure_not_empty(&self) -> Result<()> {
        if !self.all_records && self.ids.is_empty() {
            return Err(Error::validation("Expected no empty id list"));
        }
        Ok(())
    }

    /// The ids as a condition: the listed records, or all but them with `all_records`.
    pub fn condition_tree(&self, collection: &CollectionSchema) -> Result<ConditionTree> {
        if self.all_records {
            exclude_ids(collection, &self.ids)
        } else {
            match_ids(collection, &self.ids)
        }
    }

    /// The selection's filter: ids ∧ `filters` ∧ search ∧ segment, the filter keys read from the
    /// subset query first, then from the query string.
    pub fn filter(
        &self,
        query: &QueryString,
        schema: &DataSourceSchema,
        collection: &CollectionSchema,
    ) -> Result<RequestFilter> {
        let ids = self.condition_tree(collection)?;
        let mut request = parse_filter(&self.params(query), schema, collection)?;
        request.filter = request.filter.and(Some(ids));
        Ok(request)
    }
}

/// Records whose primary keys equal one of `ids`: `Equal` / `In` on a single key, an `And` of
/// `Equal` per key for composite keys, `Or` over several ids. No id → an empty `Or` (matches
/// nothing).
pub fn match_ids(collection: &CollectionSchema, ids: &[CompositeId]) -> Result<ConditionTree> {
    let pks = collection.primary_keys();
    if pks.is_empty() {
        return Err(crate::datasource::Error::NoPrimaryKey.into());
    }
    Ok(match (pks.as_slice(), ids) {
        (_, []) => ConditionTree::or(Vec::new()),
        ([pk], [id]) => ConditionTree::leaf(*pk, Operator::Equal, single_value(id)),
        ([pk], _) => ConditionTree::leaf(
            *pk,
            Operator::In,
            Value::Array(ids.iter().map(single_value).collect()),
        ),
        (_, [id]) => composite(id, Operator::Equal, ConditionTree::and),
        _ => ConditionTree::or(
            ids.iter()
                .map(|id| composite(id, Operator::Equal, ConditionTree::and))
                .collect(),
        ),
    })
}

/// The complement of [`match_ids`], built directly (De Morgan) since trees have no `Not`:
/// `NotEqual` / `NotIn`, or an `And` over ids of an `Or` of `NotEqual` per key. No id → an empty
/// `And` (matches everything). Primary keys are never null, so `NotEqual` is an exact complement.
pub fn exclude_ids(collection: &CollectionSchema, ids: &[CompositeId]) -> Result<ConditionTree> {
    let pks = collection.primary_keys();
    if pks.is_empty() {
        return Err(crate::datasource::Error::NoPrimaryKey.into());
    }
    Ok(match (pks.as_slice(), ids) {
        (_, []) => ConditionTree::and(Vec::new()),
        ([pk], [id]) => ConditionTree::leaf(*pk, Operator::NotEqual, single_value(id)),
        ([pk], _) => ConditionTree::leaf(
            *pk,
            Operator::NotIn,
            Value::Array(ids.iter().map(single_value).collect()),
        ),
        (_, [id]) => composite(id, Operator::NotEqual, ConditionTree::or),
        _ => ConditionTree::and(
            ids.iter()
                .map(|id| composite(id, Operator::NotEqual, ConditionTree::or))
                .collect(),
        ),
    })
}

fn single_value(id: &CompositeId) -> Value {
    id.first().map(|(_, v)| v.clone()).unwrap_or(Value::Null)
}

fn composite(
    id: &CompositeId,
    operator: Operator,
    branch: fn(Vec<ConditionTree>) -> ConditionTree,
) -> ConditionTree {
    branch(
        id.iter()
            .map(|(pk, v)| ConditionTree::leaf(pk.as_str(), operator, v.clone()))
            .collect(),
    )
}

/// JavaScript's `typeof`, for the id errors (`null` is `"object"`, absent is `"undefined"`).
fn js_typeof(json: Option<&Json>) -> &'static str {
    match json {
        None => "undefined",
        Some(Json::Bool(_)) => "boolean",
        Some(Json::Number(_)) => "number",
        Some(Json::String(_)) => "string",
        Some(Json::Null | Json::Array(_) | Json::Object(_)) => "object",
    }
}

/// JavaScript's `parseInt(s, 10)`: leading whitespace, an optional sign, then the longest run of
/// decimal digits; `None` stands for `NaN`.
fn js_parse_int(s: &str) -> Option<f64> {
    let s = s.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    // Digits only, so parsing cannot fail; huge runs round (or overflow to infinity) as in JS.
    let value: f64 = rest[..digits].parse().ok()?;
    Some(if negative { -value } else { value })
}

/// JavaScript's `String(n)` for the numbers this module prints (`NaN` for `None`).
fn js_number_string(n: Option<f64>) -> String {
    n.map_or_else(|| "NaN".to_owned(), js::number)
}

/// A non-negative float to `u64`, saturating (`as` already saturates and maps NaN to 0).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "saturation is the intent: page bounds beyond u64 mean 'everything'"
)]
fn f64_to_u64(f: f64) -> u64 {
    f as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::{ColumnSchema, ColumnType, PrimitiveType, RelationSchema};

    fn column(ty: PrimitiveType, pk: bool) -> FieldSchema {
        let column_type = ColumnType::Primitive(ty);
        let mut c = ColumnSchema::new(column_type.clone());
        c.filter_operators = Operator::ALL
            .iter()
            .copied()
            .filter(|o| o.allowed_for(&column_type))
            .collect();
        c.is_primary_key = pk;
        FieldSchema::Column(c)
    }

    fn many_to_one(foreign: &str, key: &str, target: &str) -> FieldSchema {
        FieldSchema::Relation(RelationSchema::ManyToOne {
            foreign_collection: foreign.into(),
            foreign_key: key.into(),
            foreign_key_target: target.into(),
        })
    }

    fn collection(name: &str, fields: Vec<(&str, FieldSchema)>) -> CollectionSchema {
        let mut c = CollectionSchema::new(name);
        for (n, f) in fields {
            c.fields.insert(n.to_owned(), f);
        }
        c
    }

    /// books (Number pk) → author (persons, Uuid pk) → company (companies); books have reviews
    /// (to-many); order_items has a composite pk and is not searchable; logs has no pk.
    fn schema() -> DataSourceSchema {
        use PrimitiveType::*;
        let mut books = collection(
            "books",
            vec![
                ("id", column(Number, true)),
                ("title", column(String, false)),
                ("published", column(Date, false)),
                ("author_id", column(Uuid, false)),
                ("author", many_to_one("persons", "author_id", "id")),
                (
                    "reviews",
                    FieldSchema::Relation(RelationSchema::OneToMany {
                        foreign_collection: "reviews".into(),
                        origin_key: "book_id".into(),
                        origin_key_target: "id".into(),
                    }),
                ),
            ],
        );
        books.segments = vec!["Recent".into(), "Best sellers".into()];
        if let Some(FieldSchema::Column(c)) = books.fields.get_mut("published") {
            c.is_sortable = false;
        }
        let persons = collection(
            "persons",
            vec![
                ("id", column(Uuid, true)),
                ("name", column(String, false)),
                ("company_id", column(Number, false)),
                ("company", many_to_one("companies", "company_id", "id")),
            ],
        );
        let companies = collection(
            "companies",
            vec![
                ("id", column(Number, true)),
                ("name", column(String, false)),
            ],
        );
        let reviews = collection(
            "reviews",
            vec![
                ("id", column(Number, true)),
                ("book_id", column(Number, false)),
            ],
        );
        let mut order_items = collection(
            "order_items",
            vec![
                ("order_id", column(Number, true)),
                ("sku", column(String, true)),
                ("quantity", column(Number, false)),
            ],
        );
        order_items.searchable = false;
        let logs = collection("logs", vec![("message", column(String, false))]);
        let mut schema = DataSourceSchema::default();
        for c in [books, persons, companies, reviews, order_items, logs] {
            schema.collections.insert(c.name.clone(), c);
        }
        schema
    }

    fn coll<'a>(schema: &'a DataSourceSchema, name: &str) -> &'a CollectionSchema {
        schema.collections.get(name).expect("test collection")
    }

    fn qs(raw: &str) -> QueryString {
        QueryString::parse(raw)
    }

    fn message<T: std::fmt::Debug>(result: Result<T>) -> String {
        result.expect_err("an error").to_string()
    }

    fn is_validation<T>(result: &Result<T>) -> bool {
        matches!(result, Err(Error::Validation(_)))
    }

    fn paths(p: &Projection) -> Vec<&str> {
        p.iter().collect()
    }

    const UUID: &str = "9b6a1f3c-6a43-4d2c-9d3e-0f8f1e2b3c4d";

    // --- QueryString ---------------------------------------------------------------------

    #[test]
    fn query_strings_decode_and_join_repeated_keys() {
        let q = qs("?a=1&b=x+y%20z&fields%5Bbooks%5D=id&a=2&c=%ZZ&d");
        assert_eq!(q.get("a").as_deref(), Some("1,2"));
        assert_eq!(q.get("b").as_deref(), Some("x y z"));
        assert_eq!(q.get("fields[books]").as_deref(), Some("id"));
        assert_eq!(q.get("c").as_deref(), Some("%ZZ"));
        assert_eq!(q.get("d").as_deref(), Some(""));
        assert_eq!(q.get("e"), None);
        let pairs = QueryString::from_pairs([("timezone", "UTC")]);
        assert_eq!(pairs.get("timezone").as_deref(), Some("UTC"));
    }

    // --- timezone ------------------------------------------------------------------------

    #[test]
    fn timezone_is_required_and_checked() {
        assert_eq!(
            parse_timezone(&qs("timezone=Europe%2FParis")).ok(),
            Some(chrono_tz::Europe::Paris)
        );
        assert_eq!(message(parse_timezone(&qs(""))), "Missing timezone");
        assert_eq!(
            message(parse_timezone(&qs("timezone="))),
            "Missing timezone"
        );
        assert_eq!(
            message(parse_timezone(&qs("timezone=Mars/Olympus"))),
            r#"Invalid timezone: "Mars/Olympus""#
        );
        assert!(is_validation(&parse_timezone(&qs("timezone=Nope"))));
        // A repeated key reads as `a,b`, which is no timezone.
        assert_eq!(
            message(parse_timezone(&qs("timezone=UTC&timezone=UTC"))),
            r#"Invalid timezone: "UTC,UTC""#
        );
    }

    // --- projection ----------------------------------------------------------------------

    #[test]
    fn default_projection_is_all_columns_and_to_one_columns() {
        let s = schema();
        let books = coll(&s, "books");
        for raw in ["", "fields%5Bbooks%5D="] {
            let p = parse_projection(&qs(raw), None, &s, books).expect("projection");
            assert_eq!(
                paths(&p),
                [
                    "id",
                    "title",
                    "published",
                    "author_id",
                    "author:id",
                    "author:name",
                    "author:company_id"
                ]
            );
        }
    }

    #[test]
    fn fields_expand_relations_and_add_primary_keys() {
        let s = schema();
        let books = coll(&s, "books");
        let q = QueryString::from_pairs([
            ("fields[books]", "title,author"),
            ("fields[author]", "name"),
        ]);
        let p = parse_projection(&q, None, &s, books).expect("projection");
        assert_eq!(paths(&p), ["title", "author:name", "id", "author:id"]);
        // Several fields of a relation.
        let q = QueryString::from_pairs([
            ("fields[books]", "author,id"),
            ("fields[author]", "name,company_id"),
        ]);
        let p = parse_projection(&q, None, &s, books).expect("projection");
        assert_eq!(
            paths(&p),
            ["author:name", "author:company_id", "id", "author:id"]
        );
        // Without primary keys.
        let q = QueryString::from_pairs([("fields[books]", "title")]);
        let p = parse_fields_projection(&q, &s, books).expect("projection");
        assert_eq!(paths(&p), ["title"]);
    }

    #[test]
    fn projection_errors() {
        let s = schema();
        let books = coll(&s, "books");
        let err = |pairs: Vec<(&str, &str)>| {
            message(parse_projection(
                &QueryString::from_pairs(pairs),
                None,
                &s,
                books,
            ))
        };
        assert_eq!(
            err(vec![("fields[books]", "nope")]),
            "Invalid projection: The 'books.nope' field was not found. Available fields are: \
             [id,title,published,author_id,author,reviews]. Please check if the field name is correct.",
        );
        assert_eq!(
            err(vec![("fields[books]", "author")]),
            "Invalid projection: the relation 'author' needs its fields in 'fields[author]'"
        );
        assert_eq!(
            err(vec![("fields[books]", "author"), ("fields[author]", "zip")]),
            "Invalid projection: The 'persons.zip' field was not found. Available fields are: \
             [id,name,company_id,company]. Please check if the field name is correct.",
        );
        assert!(
            err(vec![
                ("fields[books]", "reviews"),
                ("fields[reviews]", "id")
            ])
            .starts_with("Invalid projection: Unexpected field type: 'books.reviews'")
        );
        // The agent does not trim the list.
        assert!(err(vec![("fields[books]", "id, title")]).starts_with("Invalid projection:"));
        assert!(is_validation(&parse_projection(
            &QueryString::from_pairs([("fields[books]", ",")]),
            None,
            &s,
            books
        )));
    }

    #[test]
    fn forest_projection_header_overrides_fields() {
        let s = schema();
        let books = coll(&s, "books");
        let q = QueryString::from_pairs([("fields[books]", "nope")]);
        let p = parse_projection(&q, Some(" title , author:company:name "), &s, books)
            .expect("projection");
        assert_eq!(
            paths(&p),
            [
                "title",
                "author:company:name",
                "id",
                "author:id",
                "author:company:id"
            ]
        );
        // A blank header is no header: fields[books] applies (and fails here).
        assert!(
            message(parse_projection(&q, Some("  "), &s, books)).starts_with("Invalid projection:")
        );
        assert_eq!(
            message(parse_projection(&qs(""), Some("author"), &s, books)),
            "Invalid Forest-Projection header: 'author' is a relation"
        );
        assert_eq!(
            message(parse_projection(&qs(""), Some("id,ghost"), &s, books)),
            "Invalid Forest-Projection header: The 'books.ghost' field was not found. Available \
             fields are: [id,title,published,author_id,author,reviews]. Please check if the field \
             name is correct.",
        );
    }

    // --- pagination ----------------------------------------------------------------------

    fn page(raw: &str) -> Result<Page> {
        parse_page(&Params::new(&qs(raw)))
    }

    #[test]
    fn pagination_defaults_and_offsets() {
        assert_eq!(page("").ok(), Some(Page::new(0, 15)));
        assert_eq!(
            page("page%5Bnumber%5D=3&page%5Bsize%5D=20").ok(),
            Some(Page::new(40, 20))
        );
        assert_eq!(page("page[size]=100").ok(), Some(Page::new(0, 100)));
        // parseInt keeps the leading integer.
        assert_eq!(
            page("page[number]=2.9&page[size]=+10abc").ok(),
            Some(Page::new(10, 10))
        );
        assert_eq!(page("page[number]=%20%202").ok(), Some(Page::new(15, 15)));
        // Absurd values saturate instead of overflowing.
        assert_eq!(
            page("page[number]=99999999999999999999999&page[size]=99999999999999999999999")
                .ok()
                .map(|p| p.limit),
            Some(u64::MAX)
        );
    }

    #[test]
    fn pagination_errors() {
        assert_eq!(
            message(page("page[size]=0")),
            "Invalid pagination [limit: 0, skip: 1]"
        );
        assert_eq!(
            message(page("page[number]=-2")),
            "Invalid pagination [limit: 15, skip: -2]"
        );
        assert_eq!(
            message(page("page[number]=abc&page[size]=x")),
            "Invalid pagination [limit: NaN, skip: NaN]"
        );
        assert_eq!(
            message(page("page[number]=-0")),
            "Invalid pagination [limit: 15, skip: 0]"
        );
        assert_eq!(
            message(page("page[number]=&page[size]=5")),
            "Invalid pagination [limit: 5, skip: NaN]"
        );
        assert_eq!(
            message(page("page[number]=0&page[size]=1000000000000000000000")),
            "Invalid pagination [limit: 1e+21, skip: 0]"
        );
        assert!(is_validation(&page("page[size]=-1")));
    }

    // --- sort ----------------------------------------------------------------------------

    #[test]
    fn sort_parses_and_validates() {
        let s = schema();
        let books = coll(&s, "books");
        let sort = |raw: &str| parse_sort(&Params::new(&qs(raw)), &s, books);
        // No sort: the primary keys ascending, as the agent's `SortFactory.byPrimaryKeys`.
        assert_eq!(sort("").ok(), Some(Sort::by_primary_keys(books)));
        assert_eq!(sort("sort=").ok(), Some(Sort::by_primary_keys(books)));
        assert!(!Sort::by_primary_keys(books).is_empty());
        let parsed = sort("sort=-title,author.name").expect("sort");
        let clauses: Vec<(&str, bool)> = parsed
            .0
            .iter()
            .map(|c| (c.field.as_str(), c.ascending))
            .collect();
        assert_eq!(clauses, [("title", false), ("author:name", true)]);
        // Only the first `.` becomes `:`, as in the agent.
        assert_eq!(
            message(sort("sort=author.company.name")),
            "Invalid sort: author.company.name"
        );
        assert_eq!(message(sort("sort=-nope")), "Invalid sort: -nope");
        // Not sortable; the message repeats the parameter as given.
        assert_eq!(
            message(sort("sort=title,-published")),
            "Invalid sort: title,-published"
        );
        assert_eq!(message(sort("sort=reviews")), "Invalid sort: reviews");
        assert!(is_validation(&sort("sort=author")));
    }

    // --- filters -------------------------------------------------------------------------

    fn filters(raw: &str) -> Result<Option<ConditionTree>> {
        let s = schema();
        parse_condition_tree(&Params::new(&qs(raw)), &s, coll(&s, "books"))
    }

    fn encoded(key: &str, value: &str) -> String {
        form_urlencoded::Serializer::new(String::new())
            .append_pair(key, value)
            .finish()
    }

    #[test]
    fn filters_parse_condition_trees() {
        assert_eq!(filters("").ok(), Some(None));
        assert_eq!(filters("filters=").ok(), Some(None));
        let tree = filters(&encoded(
            "filters",
            r#"{"aggregator":"and","conditions":[{"field":"title","operator":"i_contains","value":"dune"},{"field":"id","operator":"in","value":"1, 2"}]}"#,
        ))
        .expect("tree");
        assert_eq!(
            tree,
            Some(ConditionTree::and(vec![
                ConditionTree::leaf("title", Operator::IContains, "dune"),
                ConditionTree::leaf(
                    "id",
                    Operator::In,
                    Value::Array(vec![Value::Int(1), Value::Int(2)])
                ),
            ]))
        );
        let tree = filters(&encoded(
            "filters",
            r#"{"field":"author:name","operator":"equal","value":"Ann"}"#,
        ))
        .expect("tree");
        assert_eq!(
            tree,
            Some(ConditionTree::leaf("author:name", Operator::Equal, "Ann"))
        );
    }

    #[test]
    fn filter_errors_are_wrapped() {
        let m = message(filters("filters=%7Bnot%20json"));
        assert!(
            m.starts_with("Invalid filters (") && m.ends_with(')'),
            "{m}"
        );
        assert_eq!(
            message(filters(&encoded(
                "filters",
                r#"{"field":"ghost","operator":"equal","value":1}"#
            ))),
            "Invalid filters (The 'books.ghost' field was not found. Available fields are: \
             [id,title,published,author_id,author,reviews]. Please check if the field name is \
             correct.)",
        );
        assert!(
            message(filters(&encoded(
                "filters",
                r#"{"field":"title","operator":"teleports","value":1}"#
            )))
            .starts_with("Invalid filters (")
        );
        assert!(is_validation(&filters("filters=null")));
        assert!(is_validation(&filters("filters=42")));
        assert!(is_validation(&filters(&encoded(
            "filters",
            r#"{"field":"id","operator":"equal","value":"abc"}"#
        ))));
    }

    // --- search, segment, live query segment ----------------------------------------------

    #[test]
    fn search_and_extended_search() {
        let s = schema();
        let books = coll(&s, "books");
        let items = coll(&s, "order_items");
        let search = |raw: &str, c| parse_search(&Params::new(&qs(raw)), c);
        assert_eq!(search("", books).ok(), Some(None));
        assert_eq!(search("search=+%20", books).ok(), Some(None));
        assert_eq!(
            search("search=dune+2", books).ok(),
            Some(Some("dune 2".to_owned()))
        );
        assert_eq!(
            message(search("search=x", items)),
            "Collection is not searchable"
        );
        assert!(is_validation(&search("search=x", items)));
        // A blank search is ignored before the searchable check.
        assert_eq!(search("search=%20", items).ok(), Some(None));

        let extended = |raw: &str| parse_search_extended(&Params::new(&qs(raw)));
        assert!(!extended(""));
        for falsy in [
            "searchExtended=",
            "searchExtended=0",
            "searchExtended=false",
        ] {
            assert!(!extended(falsy), "{falsy}");
        }
        for truthy in [
            "searchExtended=1",
            "searchExtended=true",
            "searchExtended=no",
        ] {
            assert!(extended(truthy), "{truthy}");
        }
    }

    #[test]
    fn segments_must_exist() {
        let s = schema();
        let books = coll(&s, "books");
        let segment = |raw: &str| parse_segment(&Params::new(&qs(raw)), books);
        assert_eq!(segment("").ok(), Some(None));
        assert_eq!(segment("segment=").ok(), Some(None));
        assert_eq!(
            segment("segment=Best+sellers").ok(),
            Some(Some("Best sellers".to_owned()))
        );
        assert_eq!(
            message(segment("segment=recent")),
            r#"Invalid segment: "recent""#
        );
        assert!(is_validation(&segment("segment=x")));
    }

    #[test]
    fn live_query_segments_need_a_connection() {
        let live = |raw: &str| parse_live_query_segment(&Params::new(&qs(raw)));
        assert_eq!(live("").ok(), Some(None));
        assert_eq!(live("connectionName=main").ok(), Some(None));
        assert_eq!(
            live("segmentQuery=select+id+from+books&connectionName=main").ok(),
            Some(Some(LiveQuerySegment {
                query: "select id from books".into(),
                connection_name: "main".into()
            }))
        );
        let missing = live("segmentQuery=select+1");
        assert!(matches!(missing, Err(Error::Unprocessable(_))));
        assert_eq!(
            message(missing),
            "Missing native query connection attribute"
        );
        assert!(matches!(
            live("segmentQuery=select+1&connectionName="),
            Err(Error::Unprocessable(_))
        ));
    }

    // --- filter builder ------------------------------------------------------------------

    #[test]
    fn filter_combines_every_key() {
        let s = schema();
        let books = coll(&s, "books");
        let raw = format!(
            "{}&search=dune&searchExtended=1&segment=Recent&sort=-id&page[number]=2&page[size]=10&segmentQuery=q&connectionName=c",
            encoded(
                "filters",
                r#"{"field":"id","operator":"greater_than","value":"3"}"#
            )
        );
        let q = qs(&raw);
        let request = parse_paginated_filter(&Params::new(&q), &s, books).expect("filter");
        assert_eq!(
            request.filter,
            Filter {
                condition_tree: Some(ConditionTree::leaf("id", Operator::GreaterThan, 3_i64)),
                search: Some("dune".into()),
                search_extended: true,
                segment: Some("Recent".into()),
                sort: Sort::desc("id"),
                page: Some(Page::new(10, 10)),
            }
        );
        assert_eq!(
            request.live_query_segment.map(|l| l.connection_name),
            Some("c".to_owned())
        );
        let unpaged = parse_filter(&Params::new(&q), &s, books).expect("filter");
        assert_eq!(unpaged.filter.page, None);
        assert!(unpaged.filter.sort.is_empty());
        assert_eq!(
            parse_filter(&Params::new(&qs("")), &s, books)
                .expect("filter")
                .filter,
            Filter::default()
        );
    }

    #[test]
    fn filter_errors_come_in_the_agents_order() {
        let s = schema();
        let books = coll(&s, "books");
        let err = |raw: &str| message(parse_paginated_filter(&Params::new(&qs(raw)), &s, books));
        assert_eq!(
            err("segment=x&filters=%7B&sort=nope&page[size]=0"),
            r#"Invalid segment: "x""#
        );
        assert!(err("filters=%7B&sort=nope&page[size]=0").starts_with("Invalid filters ("));
        assert_eq!(err("sort=nope&page[size]=0"), "Invalid sort: nope");
        assert_eq!(
            err("page[size]=0"),
            "Invalid pagination [limit: 0, skip: 1]"
        );
    }

    // --- CSV and dissociate flags ---------------------------------------------------------

    #[test]
    fn csv_params_and_delete_flag() {
        assert_eq!(parse_csv_params(&qs("")), CsvParams::default());
        assert_eq!(
            parse_csv_params(&qs("header=Id,Title&filename=My+books")),
            CsvParams {
                header: Some("Id,Title".into()),
                filename: Some("My books".into())
            }
        );
        assert!(!parse_delete_flag(&qs("")));
        assert!(!parse_delete_flag(&qs("delete=")));
        assert!(parse_delete_flag(&qs("delete=true")));
        // Any non-empty value, as the agent's truthiness check.
        assert!(parse_delete_flag(&qs("delete=false")));
    }

    // --- selection body ------------------------------------------------------------------

    fn selection(body: &serde_json::Value, name: &str) -> Result<Selection> {
        let s = schema();
        parse_selection(body, coll(&s, name))
    }

    #[test]
    fn selections_unpack_ids() {
        let sel = selection(
            &serde_json::json!({"data": {"attributes": {"ids": ["1", "2"], "all_records": false}}}),
            "books",
        )
        .expect("selection");
        assert!(!sel.all_records);
        assert_eq!(
            sel.ids,
            [
                vec![("id".to_owned(), Value::Int(1))],
                vec![("id".to_owned(), Value::Int(2))]
            ]
        );
        // Array of resource identifiers.
        let sel = selection(
            &serde_json::json!({"data": [{"type": "books", "id": "7"}]}),
            "books",
        )
        .expect("selection");
        assert_eq!(sel.ids, [vec![("id".to_owned(), Value::Int(7))]]);
        // all_records takes the excluded ids and keeps the subset query.
        let sel = selection(
            &serde_json::json!({"data": {"attributes": {
                "ids": ["1"], "all_records": true, "all_records_ids_excluded": ["3|a"],
                "all_records_subset_query": {"search": "x"}}}}),
            "order_items",
        )
        .expect("selection");
        assert!(sel.all_records);
        assert_eq!(
            sel.ids,
            [vec![
                ("order_id".to_owned(), Value::Int(3)),
                ("sku".to_owned(), Value::String("a".into()))
            ]]
        );
        assert!(sel.subset_query.is_some());
    }

    #[test]
    fn selection_errors() {
        let err = |body: serde_json::Value, name: &str| message(selection(&body, name));
        assert_eq!(
            err(serde_json::json!({}), "books"),
            "Expected array, received: undefined"
        );
        assert_eq!(
            err(
                serde_json::json!({"data": {"attributes": {"ids": "1"}}}),
                "books"
            ),
            "Expected array, received: string"
        );
        assert_eq!(
            err(
                serde_json::json!({"data": {"attributes": {"all_records": true, "all_records_ids_excluded": null}}}),
                "books"
            ),
            "Expected array, received: object"
        );
        assert_eq!(
            err(
                serde_json::json!({"data": {"attributes": {"ids": [1]}}}),
                "books"
            ),
            "Expected string, received: number"
        );
        assert_eq!(
            err(serde_json::json!({"data": [{"type": "books"}]}), "books"),
            "Expected string, received: undefined"
        );
        assert_eq!(
            err(
                serde_json::json!({"data": {"attributes": {"ids": ["1"]}}}),
                "order_items"
            ),
            "Expected 2 values, found 1"
        );
        assert!(
            err(
                serde_json::json!({"data": {"attributes": {"ids": ["x"]}}}),
                "books"
            ) == "The given value has a wrong type for \"id\": NaN.\n Expects \"Number\""
        );
        assert!(
            err(
                serde_json::json!({"data": {"attributes": {"ids": ["nope"]}}}),
                "persons"
            ) == "The given value has a wrong type for \"id\": nope.\n Expects \"Uuid\""
        );
        assert_eq!(
            err(
                serde_json::json!({"data": {"attributes": {"ids": ["x"]}}}),
                "logs"
            ),
            "This collection has no primary key"
        );
        let empty = selection(
            &serde_json::json!({"data": {"attributes": {"ids": []}}}),
            "books",
        )
        .expect("selection");
        assert_eq!(
            message(empty.ensure_not_empty()),
            "Expected no empty id list"
        );
    }

    #[test]
    fn ids_become_conditions() {
        let s = schema();
        let books = coll(&s, "books");
        let items = coll(&s, "order_items");
        let id = |n: i64| vec![("id".to_owned(), Value::Int(n))];
        let item = |n: i64, sku: &str| {
            vec![
                ("order_id".to_owned(), Value::Int(n)),
                ("sku".to_owned(), Value::String(sku.into())),
            ]
        };
        assert_eq!(match_ids(books, &[]).ok(), Some(ConditionTree::or(vec![])));
        assert_eq!(
            exclude_ids(books, &[]).ok(),
            Some(ConditionTree::and(vec![]))
        );
        assert_eq!(
            match_ids(books, &[id(1)]).ok(),
            Some(ConditionTree::leaf("id", Operator::Equal, 1_i64))
        );
        assert_eq!(
            exclude_ids(books, &[id(1), id(2)]).ok(),
            Some(ConditionTree::leaf(
                "id",
                Operator::NotIn,
                Value::Array(vec![Value::Int(1), Value::Int(2)])
            ))
        );
        assert_eq!(
            match_ids(books, &[id(1), id(2)]).ok(),
            Some(ConditionTree::leaf(
                "id",
                Operator::In,
                Value::Array(vec![Value::Int(1), Value::Int(2)])
            ))
        );
        let both = ConditionTree::and(vec![
            ConditionTree::leaf("order_id", Operator::Equal, 1_i64),
            ConditionTree::leaf("sku", Operator::Equal, "a"),
        ]);
        assert_eq!(match_ids(items, &[item(1, "a")]).ok(), Some(both.clone()));
        assert_eq!(
            match_ids(items, &[item(1, "a"), item(2, "b")]).ok(),
            Some(ConditionTree::or(vec![
                both,
                ConditionTree::and(vec![
                    ConditionTree::leaf("order_id", Operator::Equal, 2_i64),
                    ConditionTree::leaf("sku", Operator::Equal, "b"),
                ])
            ]))
        );
        assert_eq!(
            exclude_ids(items, &[item(1, "a"), item(2, "b")]).ok(),
            Some(ConditionTree::and(vec![
                ConditionTree::or(vec![
                    ConditionTree::leaf("order_id", Operator::NotEqual, 1_i64),
                    ConditionTree::leaf("sku", Operator::NotEqual, "a"),
                ]),
                ConditionTree::or(vec![
                    ConditionTree::leaf("order_id", Operator::NotEqual, 2_i64),
                    ConditionTree::leaf("sku", Operator::NotEqual, "b"),
                ])
            ]))
        );
        assert!(matches!(
            match_ids(coll(&s, "logs"), &[]),
            Err(Error::Datasource(crate::datasource::Error::NoPrimaryKey))
        ));
    }

    #[test]
    fn selection_filters_combine_ids_and_the_subset_query() {
        let s = schema();
        let books = coll(&s, "books");
        let body = serde_json::json!({"data": {"attributes": {
            "all_records": true, "all_records_ids_excluded": ["4"],
            "all_records_subset_query": {
                "filters": {"field": "title", "operator": "equal", "value": "Dune"},
                "search": "x", "searchExtended": 0, "segment": "Recent",
                "page[size]": 0, "sort": null}}}});
        let sel = parse_selection(&body, books).expect("selection");
        // The query string's keys lose against the subset query's.
        let q = qs("segment=nope&searchExtended=1&sort=title&filters=%7B");
        let request = sel.filter(&q, &s, books).expect("filter");
        assert_eq!(
            request.filter,
            Filter {
                condition_tree: Some(ConditionTree::and(vec![
                    ConditionTree::leaf("title", Operator::Equal, "Dune"),
                    ConditionTree::leaf("id", Operator::NotEqual, 4_i64),
                ])),
                search: Some("x".into()),
                search_extended: false,
                segment: Some("Recent".into()),
                ..Filter::default()
            }
        );
        // Body values are stringified as the agent does: `0` is a page size of 0, `null` is absent.
        let params = sel.params(&q);
        assert_eq!(
            message(parse_page(&params)),
            "Invalid pagination [limit: 0, skip: 1]"
        );
        assert_eq!(
            parse_sort(&params, &s, books).ok(),
            Some(Sort::asc("title"))
        );
        // Filters given as a JSON string in the body.
        let body = serde_json::json!({"data": {"attributes": {"ids": ["1", "2"],
            "all_records_subset_query": {"filters": "{\"field\":\"id\",\"operator\":\"equal\",\"value\":1}"}}}});
        let sel = parse_selection(&body, books).expect("selection");
        let request = sel.filter(&qs(""), &s, books).expect("filter");
        assert_eq!(
            request.filter.condition_tree,
            Some(ConditionTree::and(vec![
                ConditionTree::leaf("id", Operator::Equal, 1_i64),
                ConditionTree::leaf(
                    "id",
                    Operator::In,
                    Value::Array(vec![Value::Int(1), Value::Int(2)])
                ),
            ]))
        );
        // Selecting everything with nothing excluded and no filter is no condition at all.
        let body = serde_json::json!({"data": {"attributes": {"all_records": true, "all_records_ids_excluded": []}}});
        let sel = parse_selection(&body, books).expect("selection");
        assert_eq!(
            sel.filter(&qs(""), &s, books).expect("filter").filter,
            Filter::default()
        );
    }

    #[test]
    fn js_helpers() {
        assert_eq!(js_parse_int(" \t-12px"), Some(-12.0));
        assert_eq!(js_parse_int("0x10"), Some(0.0));
        assert_eq!(js_parse_int("x"), None);
        assert_eq!(js_parse_int("-"), None);
        assert_eq!(js_number_string(Some(-0.0)), "0");
        assert_eq!(js_number_string(Some(1e21)), "1e+21");
        assert_eq!(js_number_string(Some(f64::INFINITY)), "Infinity");
        assert_eq!(js_number_string(Some(12.0)), "12");
        assert_eq!(
            js::string(&serde_json::json!([1, null, "a", true])),
            "1,,a,true"
        );
        assert_eq!(js::string(&serde_json::json!({"a": 1})), "[object Object]");
        assert_eq!(js::string(&serde_json::json!(2.5)), "2.5");
        assert_eq!(js_typeof(Some(&serde_json::json!(true))), "boolean");
    }

    // --- never panic ---------------------------------------------------------------------

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Errors must be the client's fault (4xx), never an internal or database failure.
        fn is_client_error(e: &Error) -> bool {
            match e {
                Error::Validation(_)
                | Error::Unprocessable(_)
                | Error::NotFound(_)
                | Error::Business(_) => true,
                Error::Datasource(d) => matches!(
                    d,
                    crate::datasource::Error::Validation(_)
                        | crate::datasource::Error::NoPrimaryKey
                        | crate::datasource::Error::MissingCollection(_)
                        | crate::datasource::Error::MissingField(_)
                        | crate::datasource::Error::MissingRelation(_)
                ),
            }
        }

        fn check<T>(result: &Result<T>) -> std::result::Result<(), TestCaseError> {
            if let Err(e) = result {
                prop_assert!(is_client_error(e), "unexpected error kind: {e:?}");
            }
            Ok(())
        }

        fn json() -> impl Strategy<Value = Json> {
            let leaf = prop_oneof![
                Just(Json::Null),
                any::<bool>().prop_map(Json::Bool),
                any::<i64>().prop_map(Json::from),
                any::<f64>().prop_map(Json::from),
                "[a-z_:|0-9 -]{0,12}".prop_map(Json::String),
                prop_oneof![
                    Just("id"),
                    Just("title"),
                    Just("author:name"),
                    Just("author:company:name"),
                    Just("published"),
                    Just("equal"),
                    Just("in"),
                    Just("i_contains"),
                    Just("and"),
                    Just("Or"),
                    Just("blank"),
                    Just("previous_x_days"),
                    Just("1|a"),
                    Just(UUID),
                    Just("2024-01-02"),
                    Just("reviews")
                ]
                .prop_map(|s| Json::String(s.to_owned())),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
                    prop::collection::vec(
                        (
                            prop_oneof![
                                Just("field"),
                                Just("operator"),
                                Just("value"),
                                Just("aggregator"),
                                Just("conditions"),
                                Just("data"),
                                Just("attributes"),
                                Just("ids"),
                                Just("all_records"),
                                Just("all_records_ids_excluded"),
                                Just("all_records_subset_query"),
                                Just("filters"),
                                Just("search"),
                                Just("page[size]"),
                                Just("sort"),
                                Just("id"),
                                Just("segment"),
                                Just("segmentQuery")
                            ],
                            inner
                        ),
                        0..5
                    )
                    .prop_map(|entries| Json::Object(
                        entries
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect()
                    )),
                ]
            })
        }

        fn raw_query() -> impl Strategy<Value = String> {
            let key = prop_oneof![
                Just("timezone".to_owned()),
                Just("fields[books]".to_owned()),
                Just("fields%5Bauthor%5D".to_owned()),
                Just("fields[author]".to_owned()),
                Just("page[number]".to_owned()),
                Just("page%5Bsize%5D".to_owned()),
                Just("sort".to_owned()),
                Just("filters".to_owned()),
                Just("search".to_owned()),
                Just("searchExtended".to_owned()),
                Just("segment".to_owned()),
                Just("segmentQuery".to_owned()),
                Just("connectionName".to_owned()),
                Just("delete".to_owned()),
                Just("header".to_owned()),
                "\\PC{0,6}",
            ];
            let value = prop_oneof![
                "\\PC{0,16}",
                "[-+ 0-9.eE]{0,8}",
                "[a-z_.,:-]{0,20}",
                "(%[0-9A-Fa-f]{0,2}|[&=+?])*",
                json().prop_map(|j| j.to_string()),
            ];
            prop::collection::vec((key, value), 0..8).prop_map(|pairs| {
                pairs
                    .into_iter()
                    .map(|(k, v)| {
                        let v = v.replace('&', "%26");
                        format!("{k}={v}")
                    })
                    .collect::<Vec<_>>()
                    .join("&")
            })
        }

        fn collection_name() -> impl Strategy<Value = &'static str> {
            prop_oneof![
                Just("books"),
                Just("persons"),
                Just("order_items"),
                Just("logs"),
                Just("reviews")
            ]
        }

        proptest! {
            #[test]
            fn query_strings_never_panic(
                raw in raw_query(),
                header in proptest::option::of("[a-z_:, ]{0,20}"),
                name in collection_name(),
            ) {
                let s = schema();
                let c = coll(&s, name);
                let q = QueryString::parse(&raw);
                let params = Params::new(&q);
                check(&parse_timezone(&q))?;
                check(&parse_projection(&q, header.as_deref(), &s, c))?;
                check(&parse_paginated_filter(&params, &s, c))?;
                check(&parse_page(&params))?;
                check(&parse_sort(&params, &s, c))?;
                let _ = (parse_csv_params(&q), parse_delete_flag(&q), parse_search_extended(&params));
            }

            #[test]
            fn filter_json_never_panics(tree in json(), name in collection_name()) {
                let s = schema();
                let c = coll(&s, name);
                let q = QueryString::from_pairs([("filters", tree.to_string())]);
                check(&parse_condition_tree(&Params::new(&q), &s, c))?;
                let subset = serde_json::Map::from_iter([("filters".to_owned(), tree)]);
                check(&parse_condition_tree(&Params::with_subset_query(&q, Some(&subset)), &s, c))?;
            }

            #[test]
            fn selections_never_panic(body in json(), name in collection_name(), raw in raw_query()) {
                let s = schema();
                let c = coll(&s, name);
                let q = QueryString::parse(&raw);
                match parse_selection(&body, c) {
                    Ok(sel) => {
                        check(&sel.filter(&q, &s, c))?;
                        check(&parse_page(&sel.params(&q)))?;
                        check(&sel.ensure_not_empty())?;
                    }
                    Err(e) => prop_assert!(is_client_error(&e), "{e:?}"),
                }
            }

            #[test]
            fn ids_never_panic(
                ids in prop::collection::vec("(\\PC|\\|){0,40}", 0..4),
                all in any::<bool>(),
                name in collection_name(),
            ) {
                let s = schema();
                let c = coll(&s, name);
                let body = serde_json::json!({"data": {"attributes": {
                    "ids": ids, "all_records": all, "all_records_ids_excluded": ids}}});
                match parse_selection(&body, c) {
                    Ok(sel) => {
                        prop_assert_eq!(sel.ids.len(), ids.len());
                        check(&sel.condition_tree(c))?;
                    }
                    Err(e) => prop_assert!(is_client_error(&e), "{e:?}"),
                }
            }
        }
    }
}
