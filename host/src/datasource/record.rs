//! Records, typed values and packed ids.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use bigdecimal::BigDecimal;
use chrono::{DateTime, NaiveDate, NaiveTime, SecondsFormat, Utc};
use indexmap::IndexMap;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use uuid::Uuid;

use super::error::{Error, Result};
use super::schema::{CollectionSchema, ColumnSchema, PrimitiveType};

/// One value of a record or of a condition. Typed, so that comparisons, bindings and the
/// in-memory evaluator agree on every database.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// Exact decimals (SQL NUMERIC/DECIMAL); scale is kept (`12.30`).
    Decimal(BigDecimal),
    String(String),
    /// A point in time, always UTC.
    Date(DateTime<Utc>),
    Dateonly(NaiveDate),
    Time(NaiveTime),
    Uuid(Uuid),
    Json(serde_json::Value),
    Binary(Vec<u8>),
    Point(f64, f64),
    Array(Vec<Value>),
    /// A to-one related record loaded through a projection path.
    Record(Box<Record>),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// Numeric view used for comparisons and aggregations.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Int(i) => Some(*i as f64),
            Self::Float(f) => Some(*f),
            Self::Decimal(d) => d.to_string().parse().ok(),
            _ => None,
        }
    }

    /// The agent's string form of a value, used in packed ids and search highlighting.
    pub fn to_id_string(&self) -> String {
        match self {
            Self::Null => "null".to_owned(),
            Self::String(s) => s.clone(),
            Self::Json(j) => j.to_string(),
            other => match serde_json::to_value(other) {
                Ok(serde_json::Value::String(s)) => s,
                Ok(v) => v.to_string(),
                Err(_) => String::new(),
            },
        }
    }

    /// Total order used by in-memory sorting: nulls first, then by value within a type.
    pub fn compare(&self, other: &Self) -> Ordering {
        use Value::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (Bool(a), Bool(b)) => a.cmp(b),
            (Int(a), Int(b)) => a.cmp(b),
            (Decimal(a), Decimal(b)) => a.cmp(b),
            (String(a), String(b)) => a.cmp(b),
            (Date(a), Date(b)) => a.cmp(b),
            (Dateonly(a), Dateonly(b)) => a.cmp(b),
            (Time(a), Time(b)) => a.cmp(b),
            (Uuid(a), Uuid(b)) => a.cmp(b),
            (Binary(a), Binary(b)) => a.cmp(b),
            (a, b) => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
                _ => a.to_id_string().cmp(&b.to_id_string()),
            },
        }
    }

    /// Converts a plain JSON value into a value of the given primitive type, as the agent casts
    /// condition-tree and record values. `None` when the JSON cannot be that type.
    pub fn from_json_typed(json: &serde_json::Value, ty: PrimitiveType) -> Option<Value> {
        use serde_json::Value as J;
        if json.is_null() {
            return Some(Value::Null);
        }
        Some(match ty {
            PrimitiveType::String | PrimitiveType::Enum => match json {
                J::String(s) => Value::String(s.clone()),
                J::Number(n) => Value::String(n.to_string()),
                J::Bool(b) => Value::String(b.to_string()),
                _ => return None,
            },
            PrimitiveType::Number => match json {
                J::Number(n) => match n.as_i64() {
                    Some(i) => Value::Int(i),
                    None => Value::Float(n.as_f64()?),
                },
                J::String(s) => parse_number(s)?,
                _ => return None,
            },
            PrimitiveType::Boolean => match json {
                J::Bool(b) => Value::Bool(*b),
                _ => return None,
            },
            PrimitiveType::Date => Value::Date(parse_datetime(json.as_str()?)?),
            PrimitiveType::Dateonly => {
                let s = json.as_str()?;
                // A full timestamp is accepted and cut to its date, as the agent does.
                let date = NaiveDate::parse_from_str(s, "%Y-%m-%d")
                    .ok()
                    .or_else(|| parse_datetime(s).map(|d| d.date_naive()))?;
                Value::Dateonly(date)
            }
            PrimitiveType::Time => Value::Time(parse_time(json.as_str()?)?),
            PrimitiveType::Uuid => Value::Uuid(Uuid::parse_str(json.as_str()?).ok()?),
            PrimitiveType::Json => Value::Json(json.clone()),
            PrimitiveType::Binary => match json {
                J::String(s) => Value::Binary(decode_binary(s)?),
                _ => return None,
            },
            PrimitiveType::Point => match json {
                J::Array(items) if items.len() == 2 => {
                    Value::Point(items[0].as_f64()?, items[1].as_f64()?)
                }
                J::Object(o) => Value::Point(o.get("x")?.as_f64()?, o.get("y")?.as_f64()?),
                _ => return None,
            },
        })
    }
}

/// Parses a number as the agent accepts it: integers (also beyond 2^53, kept exact as a decimal)
/// and decimals.
pub fn parse_number(s: &str) -> Option<Value> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    if let Ok(i) = t.parse::<i64>() {
        return Some(Value::Int(i));
    }
    if t.bytes()
        .all(|b| b.is_ascii_digit() || b == b'-' || b == b'+')
    {
        return t.parse::<BigDecimal>().ok().map(Value::Decimal);
    }
    t.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .map(Value::Float)
}

/// Parses an ISO-8601 date-time. A missing offset means UTC, as the databases store it.
pub fn parse_datetime(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(d) = DateTime::parse_from_rfc3339(s) {
        return Some(d.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(d) = chrono::NaiveDateTime::parse_from_str(s, fmt) {
            return Some(d.and_utc());
        }
    }
    for fmt in ["%Y-%m-%d %H:%M:%S%.f%#z", "%Y-%m-%dT%H:%M:%S%.f%#z"] {
        if let Ok(d) = DateTime::parse_from_str(s, fmt) {
            return Some(d.with_timezone(&Utc));
        }
    }
    None
}

/// Parses a time of day, `HH:MM[:SS[.fff]]`.
pub fn parse_time(s: &str) -> Option<NaiveTime> {
    ["%H:%M:%S%.f", "%H:%M"]
        .iter()
        .find_map(|fmt| NaiveTime::parse_from_str(s, fmt).ok())
}

/// Decodes a binary value from a data URI (`data:…;base64,…`) or a hex string.
pub fn decode_binary(s: &str) -> Option<Vec<u8>> {
    if let Some(rest) = s.strip_prefix("data:") {
        let (_, payload) = rest.split_once(";base64,")?;
        return base64_decode(payload);
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Standard base64, read leniently as Node's `Buffer.from(s, 'base64')` does: padding and
/// whitespace anywhere are skipped and a dangling last symbol (less than a byte) is dropped;
/// other characters are refused.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::alphabet::STANDARD;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::RequireNone)
            .with_decode_allow_trailing_bits(true),
    );
    let skipped = |b: u8| b == b'=' || b.is_ascii_whitespace();
    let symbols: std::borrow::Cow<'_, [u8]> = if s.bytes().any(skipped) {
        s.bytes()
            .filter(|b| !skipped(*b))
            .collect::<Vec<_>>()
            .into()
    } else {
        s.as_bytes().into()
    };
    // A last symbol alone carries less than a byte: dropped, as long as it is a symbol.
    let whole = match symbols.split_last() {
        Some((last, rest)) if symbols.len() % 4 == 1 => {
            if !(last.is_ascii_alphanumeric() || *last == b'+' || *last == b'/') {
                return None;
            }
            rest
        }
        _ => &symbols[..],
    };
    LENIENT.decode(whole).ok()
}

/// Formats a date the way the agent emits it: UTC, milliseconds, `Z`.
///
/// Years 0 to 9999 (every date a database of this century holds) are written digit by digit
/// into a fixed buffer; chrono's formatter, which takes the others, went through `fmt` for each
/// part and cost a list of 15 orders 2% of its instructions.
pub fn format_datetime(d: &DateTime<Utc>) -> String {
    let mut out = String::with_capacity(24);
    push_datetime(&mut out, d);
    out
}

/// Appends [`format_datetime`]'s text to `out` (a CSV row's buffer: no string per cell).
pub fn push_datetime(out: &mut String, d: &DateTime<Utc>) {
    use chrono::{Datelike as _, Timelike as _};
    let Some(year) = u32::try_from(d.year()).ok().filter(|year| *year <= 9999) else {
        out.push_str(&d.to_rfc3339_opts(SecondsFormat::Millis, true));
        return;
    };
    // A leap second (nanoseconds past 1e9) is shown as chrono shows it: at second 60.
    let (second, millis) = match d.nanosecond() / 1_000_000 {
        ms @ 0..1000 => (d.second(), ms),
        ms => (d.second() + 1, ms - 1000),
    };
    let mut text = *b"0000-00-00T00:00:00.000Z";
    let mut digits = |at: usize, width: usize, mut n: u32| {
        for i in (at..at + width).rev() {
            text[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    digits(0, 4, year);
    digits(5, 2, d.month());
    digits(8, 2, d.day());
    digits(11, 2, d.hour());
    digits(14, 2, d.minute());
    digits(17, 2, second);
    digits(20, 3, millis);
    // Only ASCII digits and separators were written.
    match std::str::from_utf8(&text) {
        Ok(text) => out.push_str(text),
        Err(_) => out.push_str(&d.to_rfc3339_opts(SecondsFormat::Millis, true)),
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Decimal(d) => s.collect_str(d),
            Value::String(v) => s.serialize_str(v),
            Value::Date(d) => s.serialize_str(&format_datetime(d)),
            // `NaiveDate`'s Display is `%Y-%m-%d`, written without parsing a format string.
            Value::Dateonly(d) => s.collect_str(d),
            Value::Time(t) => s.serialize_str(&t.format("%H:%M:%S%.f").to_string()),
            Value::Uuid(u) => s.collect_str(u),
            Value::Json(j) => j.serialize(s),
            Value::Binary(b) => s.serialize_str(&hex::encode(b)),
            Value::Point(x, y) => {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element(x)?;
                seq.serialize_element(y)?;
                seq.end()
            }
            Value::Array(items) => items.serialize(s),
            Value::Record(r) => r.serialize(s),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_id_string())
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// A record: field name to value, in projection order. To-one relations nest as `Value::Record`.
///
/// The names live apart from the values, behind an `Arc` that the records of one result set
/// share: building a decoded record costs one vector of values and a reference count, not a
/// map with its own copy of every name. Adding a field to a record whose names are shared
/// copies the names first (copy on write). Equality ignores field order, as a map's does.
#[derive(Clone, Default)]
pub struct Record {
    names: Arc<Names>,
    /// One value per name, in the same order.
    values: Vec<Value>,
}

/// Field names in order, with a hash index once there are enough of them for a scan to cost
/// more than hashing.
#[derive(Clone, Default)]
struct Names {
    list: Vec<Arc<str>>,
    index: Option<HashMap<Arc<str>, usize>>,
}

/// Up to this many fields, a name is found by comparing it with each of them. Decoded records
/// share their names, so the index of a wide result set is built once, not per row.
const SCANNED: usize = 8;

impl Names {
    fn with_capacity(n: usize) -> Self {
        Self {
            list: Vec::with_capacity(n),
            index: None,
        }
    }

    fn position(&self, name: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(name).copied(),
            None => self.list.iter().position(|n| **n == *name),
        }
    }

    /// Appends a name known to be absent; returns its position.
    fn push(&mut self, name: Arc<str>) -> usize {
        let position = self.list.len();
        match &mut self.index {
            Some(index) => {
                index.insert(name.clone(), position);
            }
            None if position >= SCANNED => {
                let mut index = HashMap::with_capacity(self.list.capacity().max(position + 1));
                for (i, n) in self.list.iter().enumerate() {
                    index.insert(n.clone(), i);
                }
                index.insert(name.clone(), position);
                self.index = Some(index);
            }
            None => {}
        }
        self.list.push(name);
        position
    }

    /// The position of `name`, appended when absent.
    fn position_or_push(&mut self, name: Arc<str>) -> (usize, bool) {
        match self.position(&name) {
            Some(i) => (i, false),
            None => (self.push(name), true),
        }
    }
}

/// The field names of records built by position, shared by all of them (the rows of a result
/// set). Repeated names keep their first position and the last value, as inserting would.
#[derive(Clone, Default)]
pub(crate) struct RecordShape {
    names: Arc<Names>,
    /// For each name given, its field's position, when some name was repeated.
    positions: Option<Vec<usize>>,
}

impl RecordShape {
    pub(crate) fn new<K: Into<Arc<str>>>(names: impl IntoIterator<Item = K>) -> Self {
        let names = names.into_iter();
        let mut unique = Names::with_capacity(names.size_hint().0);
        let mut positions = Vec::with_capacity(names.size_hint().0);
        let mut repeated = false;
        for name in names {
            let (position, added) = unique.position_or_push(name.into());
            repeated |= !added;
            positions.push(position);
        }
        Self {
            names: Arc::new(unique),
            positions: repeated.then_some(positions),
        }
    }

    /// A record of these names with the given values (one per name given, in order; missing
    /// values are null, extra ones ignored).
    pub(crate) fn record(&self, values: impl IntoIterator<Item = Value>) -> Record {
        let n = self.names.list.len();
        let values = match &self.positions {
            None => {
                // Collected in place when given a vector.
                let mut out: Vec<Value> = values.into_iter().take(n).collect();
                out.resize_with(n, || Value::Null);
                out
            }
            Some(positions) => {
                let mut out = Vec::with_capacity(n);
                out.resize_with(n, || Value::Null);
                for (position, value) in positions.iter().zip(values) {
                    out[*position] = value;
                }
                out
            }
        };
        Record {
            names: self.names.clone(),
            values,
        }
    }
}

impl Record {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Self {
            names: Arc::new(Names::with_capacity(n)),
            values: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn get(&self, field: &str) -> Option<&Value> {
        self.names.position(field).map(|i| &self.values[i])
    }

    pub fn get_mut(&mut self, field: &str) -> Option<&mut Value> {
        self.names.position(field).map(|i| &mut self.values[i])
    }

    /// Sets a field: in place when present, else appended.
    pub fn insert(&mut self, field: impl Into<Arc<str>>, value: Value) {
        *self.slot(field.into()) = value;
    }

    /// The value of `field`, appended as null when absent.
    fn slot(&mut self, field: Arc<str>) -> &mut Value {
        let i = match self.names.position(&field) {
            Some(i) => i,
            None => {
                let i = Arc::make_mut(&mut self.names).push(field);
                self.values.push(Value::Null);
                i
            }
        };
        &mut self.values[i]
    }

    /// Sets `field` on every record, to `value(i)` for the i-th. Records that shared their names
    /// still share them afterwards: the names are copied once per distinct list, not once per
    /// record as inserting into each would (a computed column over a page of records).
    pub fn set_column<'a>(
        records: impl IntoIterator<Item = &'a mut Record>,
        field: &str,
        mut value: impl FnMut(usize) -> Value,
    ) {
        let field: Arc<str> = Arc::from(field);
        // The last names extended (held, so that no other list can take their address), and
        // what they became.
        let mut extended: Option<(Arc<Names>, Arc<Names>)> = None;
        for (i, record) in records.into_iter().enumerate() {
            let v = value(i);
            if let Some(position) = record.names.position(&field) {
                record.values[position] = v;
                continue;
            }
            match &extended {
                Some((from, to)) if Arc::ptr_eq(from, &record.names) => {
                    record.names = Arc::clone(to);
                }
                _ => {
                    let mut names = (*record.names).clone();
                    names.push(Arc::clone(&field));
                    let names = Arc::new(names);
                    let old = std::mem::replace(&mut record.names, Arc::clone(&names));
                    extended = Some((old, names));
                }
            }
            record.values.push(v);
        }
    }

    /// Takes `field` out of every record that has it. As with [`Record::set_column`], records
    /// that shared their names still share them afterwards: a page of rows pays for one new
    /// name list, not one per row.
    pub fn remove_column<'a>(records: impl IntoIterator<Item = &'a mut Record>, field: &str) {
        let mut shrunk: Option<(Arc<Names>, Arc<Names>)> = None;
        for record in records {
            let Some(position) = record.names.position(field) else {
                continue;
            };
            record.values.remove(position);
            match &shrunk {
                Some((from, to)) if Arc::ptr_eq(from, &record.names) => {
                    record.names = Arc::clone(to);
                }
                _ => {
                    let mut names = Names::with_capacity(record.names.list.len() - 1);
                    for (i, name) in record.names.list.iter().enumerate() {
                        if i != position {
                            names.push(Arc::clone(name));
                        }
                    }
                    let names = Arc::new(names);
                    let old = std::mem::replace(&mut record.names, Arc::clone(&names));
                    shrunk = Some((old, names));
                }
            }
        }
    }

    /// Takes the `:` path out of every record: the last segment's field out of the records
    /// nested along the way (records whose relation on the way is null have nothing to take).
    pub fn remove_path<'a>(records: impl IntoIterator<Item = &'a mut Record>, path: &str) {
        let mut records: Vec<&mut Record> = records.into_iter().collect();
        let mut rest = path;
        while let Some((head, tail)) = rest.split_once(':') {
            records = records
                .into_iter()
                .filter_map(|record| match record.get_mut(head) {
                    Some(Value::Record(inner)) => Some(&mut **inner),
                    _ => None,
                })
                .collect();
            rest = tail;
        }
        Self::remove_column(records, rest);
    }

    /// The position of `field` among this record's fields, for [`Record::value_at`] on the
    /// records that share this one's names ([`Record::shares_names`]).
    pub fn position(&self, field: &str) -> Option<usize> {
        self.names.position(field)
    }

    /// Whether `other` has the very same field list (the rows of one result set do): a position
    /// found in one then holds in the other.
    pub fn shares_names(&self, other: &Record) -> bool {
        Arc::ptr_eq(&self.names, &other.names)
    }

    /// The value at a position found by [`Record::position`].
    pub fn value_at(&self, position: usize) -> Option<&Value> {
        self.values.get(position)
    }

    /// Reads a `:` path through nested relation records; `None` when a segment is absent,
    /// `Some(Null)` when a relation on the way is null.
    pub fn get_path(&self, path: &str) -> Option<&Value> {
        let mut current = self;
        let mut segments = path.split(':').peekable();
        while let Some(segment) = segments.next() {
            let value = current.get(segment)?;
            if segments.peek().is_none() {
                return Some(value);
            }
            match value {
                Value::Record(r) => current = r,
                Value::Null => return Some(&Value::Null),
                _ => return None,
            }
        }
        None
    }

    /// Writes a `:` path, creating nested records on the way.
    pub fn set_path(&mut self, path: &str, value: Value) {
        match path.split_once(':') {
            None => self.insert(path, value),
            Some((head, rest)) => {
                let entry = match self.names.position(head) {
                    Some(i) => &mut self.values[i],
                    None => self.slot(head.into()),
                };
                if !matches!(entry, Value::Record(_)) {
                    *entry = Value::Record(Box::default());
                }
                if let Value::Record(r) = entry {
                    r.set_path(rest, value);
                }
            }
        }
    }

    /// Field names and values, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.names.list.iter().map(|n| &**n).zip(&self.values)
    }

    /// Field names, in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.names.list.iter().map(|n| &**n)
    }

    /// Values, in field order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &Value> {
        self.values.iter()
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        if Arc::ptr_eq(&self.names, &other.names) {
            return self.values == other.values;
        }
        self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Fields<'r>(&'r Record);
        impl fmt::Debug for Fields<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map().entries(self.0.iter()).finish()
            }
        }
        f.debug_tuple("Record").field(&Fields(self)).finish()
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<K: Into<Arc<str>>> FromIterator<(K, Value)> for Record {
    fn from_iter<T: IntoIterator<Item = (K, Value)>>(iter: T) -> Self {
        let iter = iter.into_iter();
        let mut record = Self::with_capacity(iter.size_hint().0);
        for (k, v) in iter {
            record.insert(k, v);
        }
        record
    }
}

/// The record as an ordered map (the variables of a native query).
impl From<Record> for IndexMap<String, Value> {
    fn from(record: Record) -> Self {
        let Record { names, values } = record;
        names
            .list
            .iter()
            .map(|n| n.to_string())
            .zip(values)
            .collect()
    }
}

/// Packs a record's primary key as the agent does: values in schema order joined with `|`.
pub fn pack_id(schema: &CollectionSchema, record: &Record) -> Result<String> {
    pack_id_with(schema, record, |value, _, id| {
        // The first value's string becomes the id itself: one allocation for a single key.
        if id.is_empty() {
            *id = value.to_id_string();
        } else {
            id.push_str(&value.to_id_string());
        }
    })
}

/// [`pack_id`] with each key value appended by `write`, given its column: the agent layer writes
/// the values as the Node agent's drivers return them (`agent::wire`).
pub fn pack_id_with(
    schema: &CollectionSchema,
    record: &Record,
    mut write: impl FnMut(&Value, &ColumnSchema, &mut String),
) -> Result<String> {
    // Written in place: this runs for every record of every response (and its to-one records).
    let mut pks = schema.columns().filter(|(_, column)| column.is_primary_key);
    let (first, column) = pks.next().ok_or(Error::NoPrimaryKey)?;
    let mut id = String::new();
    if let Some(value) = record.get(first) {
        write(value, column, &mut id);
    }
    for (pk, column) in pks {
        id.push('|');
        if let Some(value) = record.get(pk) {
            write(value, column, &mut id);
        }
    }
    Ok(id)
}

/// Unpacks an id into typed primary-key values; wrong arity or a value of the wrong type is a
/// validation error, as in the agent.
pub fn unpack_id(schema: &CollectionSchema, packed: &str) -> Result<Vec<(String, Value)>> {
    let pks = schema.primary_keys();
    if pks.is_empty() {
        return Err(Error::NoPrimaryKey);
    }
    let parts: Vec<&str> = packed.split('|').collect();
    if parts.len() != pks.len() {
        return Err(Error::validation(format!(
            "Expected {} values, found {}",
            pks.len(),
            parts.len()
        )));
    }
    pks.iter()
        .zip(parts)
        .map(|(pk, raw)| {
            let column = schema
                .column(pk)
                .ok_or_else(|| Error::Internal(format!("primary key '{pk}' is not a column")))?;
            let ty = column
                .column_type
                .primitive()
                .unwrap_or(PrimitiveType::String);
            let json = serde_json::Value::String(raw.to_owned());
            let value = Value::from_json_typed(&json, ty)
                .filter(|v| !v.is_null())
                .ok_or_else(|| {
                    // The agent's wording: it casts a Number key with `Number(…)` first, so
                    // what it shows of an unreadable one is `NaN`.
                    let shown = if ty == PrimitiveType::Number {
                        "NaN"
                    } else {
                        raw
                    };
                    Error::validation(format!(
                        "The given value has a wrong type for \"{pk}\": {shown}.\n Expects \"{ty}\""
                    ))
                })?;
            Ok(((*pk).to_owned(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_formatted_as_chrono_formats_them() {
        use chrono::TimeZone as _;
        let mut dates: Vec<DateTime<Utc>> = [
            (1970, 1, 1, 0, 0, 0, 0),
            (2025, 6, 8, 7, 20, 0, 5_000_000),
            (1999, 12, 31, 23, 59, 59, 999_999_999),
            (2024, 2, 29, 12, 34, 56, 123_456_789),
            (9, 3, 4, 5, 6, 7, 80_000_000),
            (9999, 12, 31, 23, 59, 59, 0),
        ]
        .into_iter()
        .map(|(y, mo, d, h, mi, s, ns)| {
            Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap() + chrono::Duration::nanoseconds(ns)
        })
        .collect();
        // A leap second, and years chrono writes its own way.
        let leap = NaiveDate::from_ymd_opt(2016, 12, 31)
            .unwrap()
            .and_hms_nano_opt(23, 59, 59, 1_250_000_000)
            .unwrap();
        dates.push(DateTime::from_naive_utc_and_offset(leap, Utc));
        dates.push(Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap());
        dates.push(Utc.with_ymd_and_hms(-1, 1, 1, 0, 0, 0).unwrap());
        for date in dates {
            assert_eq!(
                format_datetime(&date),
                date.to_rfc3339_opts(SecondsFormat::Millis, true),
                "{date:?}"
            );
        }
    }

    fn keys(record: &Record) -> Vec<&str> {
        record.keys().collect()
    }

    #[test]
    fn fields_keep_insertion_order_and_replace_in_place() {
        let mut record = Record::new();
        record.insert("b", Value::Int(1));
        record.insert(String::from("a"), Value::Int(2));
        record.insert(Arc::<str>::from("c"), Value::Int(3));
        record.insert("b", Value::Int(4));
        assert_eq!(keys(&record), ["b", "a", "c"]);
        assert_eq!(record.get("b"), Some(&Value::Int(4)));
        assert_eq!(record.get("z"), None);
        assert_eq!(record.len(), 3);
        assert_eq!(
            serde_json::to_string(&record).ok().as_deref(),
            Some(r#"{"b":4,"a":2,"c":3}"#)
        );
        assert_eq!(
            format!("{record:?}"),
            r#"Record({"b": Int(4), "a": Int(2), "c": Int(3)})"#
        );
        let collected: Record = [("x", Value::Null), ("y", Value::Bool(true))]
            .into_iter()
            .collect();
        assert_eq!(keys(&collected), ["x", "y"]);
        let map = IndexMap::<String, Value>::from(collected);
        assert_eq!(map.keys().collect::<Vec<_>>(), ["x", "y"]);
        assert!(Record::new().is_empty());
    }

    #[test]
    fn equality_ignores_order_as_a_map() {
        let ab: Record = [("a", Value::Int(1)), ("b", Value::Int(2))]
            .into_iter()
            .collect();
        let ba: Record = [("b", Value::Int(2)), ("a", Value::Int(1))]
            .into_iter()
            .collect();
        assert_eq!(ab, ba);
        let mut other = ab.clone();
        assert_eq!(ab, other);
        other.insert("a", Value::Int(5));
        assert_ne!(ab, other);
        other.insert("a", Value::Int(1));
        other.insert("c", Value::Null);
        assert_ne!(ab, other);
    }

    #[test]
    fn shared_names_are_copied_on_write() {
        let shape = RecordShape::new(["id", "name"]);
        let first = shape.record([Value::Int(1), Value::from("Ann")]);
        let mut second = shape.record([Value::Int(2)]);
        assert_eq!(
            second.get("name"),
            Some(&Value::Null),
            "missing values are null"
        );
        second.insert("name", Value::from("Bob"));
        second.insert("extra", Value::Bool(true));
        second.set_path("customer:name", Value::from("Carl"));
        assert_eq!(keys(&first), ["id", "name"]);
        assert_eq!(first.get("extra"), None);
        assert_eq!(keys(&second), ["id", "name", "extra", "customer"]);
        assert_eq!(second.get_path("customer:name"), Some(&Value::from("Carl")));
        assert_eq!(
            shape.record([Value::Int(1), Value::from("Ann"), Value::Null]),
            first,
            "extra values are ignored"
        );
    }

    #[test]
    fn repeated_shape_names_keep_the_first_position_and_the_last_value() {
        let shape = RecordShape::new(["id", "name", "id"]);
        let record = shape.record([Value::Int(1), Value::from("Ann"), Value::Int(2)]);
        let mut inserted = Record::new();
        inserted.insert("id", Value::Int(1));
        inserted.insert("name", Value::from("Ann"));
        inserted.insert("id", Value::Int(2));
        assert_eq!(keys(&record), ["id", "name"]);
        assert_eq!(record.get("id"), Some(&Value::Int(2)));
        assert_eq!(record, inserted);
    }

    #[test]
    fn wide_records_are_indexed() {
        let names: Vec<String> = (0..40).map(|i| format!("f{i}")).collect();
        let mut built = Record::new();
        for (i, name) in names.iter().enumerate() {
            built.insert(name.as_str(), Value::Int(i as i64));
        }
        let shaped =
            RecordShape::new(names.iter().map(String::as_str)).record((0..40).map(Value::Int));
        for record in [&built, &shaped] {
            assert_eq!(record.len(), 40);
            assert_eq!(keys(record), names);
            for (i, name) in names.iter().enumerate() {
                assert_eq!(record.get(name), Some(&Value::Int(i as i64)), "{name}");
            }
            assert_eq!(record.get("f40"), None);
        }
        assert_eq!(built, shaped);
        let mut grown = shaped.clone();
        grown.insert("f40", Value::Null);
        assert_eq!(grown.get("f40"), Some(&Value::Null));
        assert_eq!(shaped.get("f40"), None);
    }

    #[test]
    fn removed_columns_and_paths_leave_the_rest_and_keep_names_shared() {
        let shape = RecordShape::new(["id", "email", "customer"]);
        let customer = |name: &str| {
            let mut c = Record::new();
            c.insert("name", Value::from(name));
            c.insert("email", Value::from(format!("{name}@x.io")));
            Value::Record(Box::new(c))
        };
        let mut records = vec![
            shape.record([Value::Int(1), Value::from("a"), customer("ann")]),
            shape.record([Value::Int(2), Value::from("b"), Value::Null]),
            shape.record([Value::Int(3), Value::from("c"), customer("bob")]),
        ];
        Record::remove_path(records.iter_mut(), "customer:email");
        Record::remove_column(records.iter_mut(), "email");
        Record::remove_column(records.iter_mut(), "absent");
        for record in &records {
            assert_eq!(keys(record), ["id", "customer"]);
        }
        assert!(records[0].shares_names(&records[1]) && records[1].shares_names(&records[2]));
        assert_eq!(records[1].get("customer"), Some(&Value::Null));
        assert_eq!(records[2].get("id"), Some(&Value::Int(3)));
        assert_eq!(
            records[2].get_path("customer:name"),
            Some(&Value::from("bob"))
        );
        assert_eq!(records[2].get_path("customer:email"), None);
        // A wide record (indexed names) finds its fields after a removal.
        let names: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
        let mut wide =
            RecordShape::new(names.iter().map(String::as_str)).record((0..12).map(Value::Int));
        Record::remove_column([&mut wide], "f3");
        assert_eq!(wide.len(), 11);
        assert_eq!(wide.get("f3"), None);
        assert_eq!(wide.get("f11"), Some(&Value::Int(11)));
        assert_eq!(wide.get("f2"), Some(&Value::Int(2)));
    }

    #[test]
    fn paths_create_and_replace_nested_records() {
        let mut record = Record::new();
        record.set_path("customer:country:name", Value::from("France"));
        record.set_path("customer:name", Value::from("Ann"));
        assert_eq!(
            record.get_path("customer:country:name"),
            Some(&Value::from("France"))
        );
        assert_eq!(record.get_path("customer:name"), Some(&Value::from("Ann")));
        record.insert("store", Value::Null);
        assert_eq!(record.get_path("store:name"), Some(&Value::Null));
        record.set_path("store:name", Value::from("Main"));
        assert_eq!(record.get_path("store:name"), Some(&Value::from("Main")));
        assert_eq!(record.get_path("missing:name"), None);
        assert_eq!(keys(&record), ["customer", "store"]);
    }
}
