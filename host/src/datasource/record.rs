//! Records, typed values and packed ids.

use std::cmp::Ordering;
use std::fmt;

use bigdecimal::BigDecimal;
use chrono::{DateTime, NaiveDate, NaiveTime, SecondsFormat, Utc};
use indexmap::IndexMap;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use uuid::Uuid;

use super::error::{Error, Result};
use super::schema::{CollectionSchema, PrimitiveType};

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

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0;
    for byte in s.bytes().filter(|b| *b != b'=' && !b.is_ascii_whitespace()) {
        let index = ALPHABET.iter().position(|c| *c == byte)? as u32;
        buffer = (buffer << 6) | index;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Formats a date the way the agent emits it: UTC, milliseconds, `Z`.
pub fn format_datetime(d: &DateTime<Utc>) -> String {
    d.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Decimal(d) => s.serialize_str(&d.to_string()),
            Value::String(v) => s.serialize_str(v),
            Value::Date(d) => s.serialize_str(&format_datetime(d)),
            Value::Dateonly(d) => s.serialize_str(&d.format("%Y-%m-%d").to_string()),
            Value::Time(t) => s.serialize_str(&t.format("%H:%M:%S%.f").to_string()),
            Value::Uuid(u) => s.serialize_str(&u.to_string()),
            Value::Json(j) => j.serialize(s),
            Value::Binary(b) => {
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                s.serialize_str(&hex)
            }
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record(pub IndexMap<String, Value>);

impl Record {
    pub fn new() -> Self {
        Self(IndexMap::new())
    }

    pub fn with_capacity(n: usize) -> Self {
        Self(IndexMap::with_capacity(n))
    }

    pub fn get(&self, field: &str) -> Option<&Value> {
        self.0.get(field)
    }

    pub fn insert(&mut self, field: impl Into<String>, value: Value) {
        self.0.insert(field.into(), value);
    }

    /// Reads a `:` path through nested relation records; `None` when a segment is absent,
    /// `Some(Null)` when a relation on the way is null.
    pub fn get_path(&self, path: &str) -> Option<&Value> {
        let mut current = self;
        let mut segments = path.split(':').peekable();
        while let Some(segment) = segments.next() {
            let value = current.0.get(segment)?;
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
                let entry = self
                    .0
                    .entry(head.to_owned())
                    .or_insert_with(|| Value::Record(Box::default()));
                if !matches!(entry, Value::Record(_)) {
                    *entry = Value::Record(Box::default());
                }
                if let Value::Record(r) = entry {
                    r.set_path(rest, value);
                }
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl FromIterator<(String, Value)> for Record {
    fn from_iter<T: IntoIterator<Item = (String, Value)>>(iter: T) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// Packs a record's primary key as the agent does: values in schema order joined with `|`.
pub fn pack_id(schema: &CollectionSchema, record: &Record) -> Result<String> {
    let pks = schema.primary_keys();
    if pks.is_empty() {
        return Err(Error::NoPrimaryKey);
    }
    let parts: Vec<String> = pks
        .iter()
        .map(|pk| record.get(pk).map(Value::to_id_string).unwrap_or_default())
        .collect();
    Ok(parts.join("|"))
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
                    Error::validation(format!(
                        "Failed to parse {ty} from '{raw}' for primary key '{pk}'"
                    ))
                })?;
            Ok(((*pk).to_owned(), value))
        })
        .collect()
}
