//! Data crossing the boundary: columnar [`Rows`] and [`Column`]s, the [`Caller`], the handler
//! [`Context`], and [`CollectionRef`] for reading and writing through the host.

use std::cell::OnceCell;

use serde_json::Value;

use crate::bindings::canopy::plugin::{collections, logging, packed, types};
use crate::error::{Error, Result};
use crate::texts::Texts;

/// One column of values, one cell per row (`None` is null). Numbers are `f64`; dates, times,
/// uuids and enums are strings; anything else (objects, arrays, points) is JSON text.
///
/// # Exact values
///
/// Values that the agent serves as text cross as [`Column::Strings`], in that form, so that
/// nothing is rounded on the way:
///
/// - bigints on PostgreSQL and MariaDB/MySQL: `"9007199254740993"` (an `f64` would make it
///   `9007199254740992`);
/// - decimals on PostgreSQL and MySQL, with their scale: `"12.30"` (MariaDB's and SQLite's
///   decimals are numbers on the wire, and cross as `Numbers`);
/// - binary values: lowercase hex for primary and foreign keys (`"cafe"`), a data URI
///   (`"data:image/png;base64,…"`) for other columns.
///
/// Read such a column with [`Rows::strings`] (or [`Rows::texts`], which renders any column as
/// text), and give the text back as it is, in filters (`{"field": "id", "operator": "Equal",
/// "value": "12.30"}`) and writes (`{"price": "12.30"}`): the host reads numbers given as text
/// exactly and bytes in either binary form. A record id read this way is the id the routes
/// serve. Computed fields receive their dependencies the same way; a computed `Number` field
/// may answer with `Strings` (decimal text) to stay exact.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Number cells.
    Numbers(Vec<Option<f64>>),
    /// String, date, time, uuid and enum cells.
    Strings(Vec<Option<String>>),
    /// The same cells packed in one buffer: how a computed field's text dependencies arrive,
    /// and the cheapest way to answer text (see [`Texts`]). Read either form with
    /// [`Rows::text`].
    Texts(Texts),
    /// Boolean cells.
    Booleans(Vec<Option<bool>>),
    /// JSON text cells (objects, arrays, points, anything else).
    Json(Vec<Option<String>>),
}

impl Column {
    /// The number of cells.
    pub fn len(&self) -> usize {
        match self {
            Self::Numbers(v) => v.len(),
            Self::Strings(v) | Self::Json(v) => v.len(),
            Self::Texts(t) => t.len(),
            Self::Booleans(v) => v.len(),
        }
    }

    /// Whether the column has no cell.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A JSON column from values (`Value::Null` becomes a null cell).
    pub fn json(values: impl IntoIterator<Item = Value>) -> Self {
        Self::Json(
            values
                .into_iter()
                .map(|v| (!v.is_null()).then(|| v.to_string()))
                .collect(),
        )
    }

    /// The cell at `row` as text (`None` for a null or absent cell): strings as they are
    /// (exact bigints and decimals, hex or data URIs included), numbers as JavaScript prints
    /// them (`5`, not `5.0`), booleans as `true`/`false`, JSON as its text. This is how the
    /// agent writes record ids.
    pub fn text(&self, row: usize) -> Option<String> {
        match self {
            Self::Numbers(v) => v.get(row).copied().flatten().map(js_number),
            Self::Strings(v) | Self::Json(v) => v.get(row).cloned().flatten(),
            Self::Texts(t) => t.get(row).map(str::to_owned),
            Self::Booleans(v) => v.get(row).copied().flatten().map(|b| b.to_string()),
        }
    }

    /// The cell at `row` as a JSON value (`Null` when absent).
    pub fn value(&self, row: usize) -> Value {
        match self {
            Self::Numbers(v) => v
                .get(row)
                .copied()
                .flatten()
                .and_then(json_number)
                .map_or(Value::Null, Value::Number),
            Self::Strings(v) => v
                .get(row)
                .cloned()
                .flatten()
                .map_or(Value::Null, Value::String),
            Self::Texts(t) => t
                .get(row)
                .map_or(Value::Null, |s| Value::String(s.to_owned())),
            Self::Booleans(v) => v
                .get(row)
                .copied()
                .flatten()
                .map_or(Value::Null, Value::Bool),
            Self::Json(v) => v
                .get(row)
                .and_then(Option::as_deref)
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or(Value::Null),
        }
    }
}

/// A number as JavaScript's `String(n)` writes it for the values ids hold: integral values
/// without a fraction (below 2^53), others as Rust prints them (shortest round-trip digits).
fn js_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// A number cell as JSON: integral values (below 2^53) as JSON integers, so that an id given
/// back in a filter or a write is the integer it was (`42`, not `42.0`; databases compare a
/// large float with an integer column inexactly), others as floats.
fn json_number(n: f64) -> Option<serde_json::Number> {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        Some((n as i64).into())
    } else {
        serde_json::Number::from_f64(n)
    }
}

impl From<Vec<Option<f64>>> for Column {
    fn from(v: Vec<Option<f64>>) -> Self {
        Self::Numbers(v)
    }
}

impl From<Vec<f64>> for Column {
    fn from(v: Vec<f64>) -> Self {
        Self::Numbers(v.into_iter().map(Some).collect())
    }
}

impl From<Vec<Option<String>>> for Column {
    fn from(v: Vec<Option<String>>) -> Self {
        Self::Strings(v)
    }
}

impl From<Vec<String>> for Column {
    fn from(v: Vec<String>) -> Self {
        Self::Strings(v.into_iter().map(Some).collect())
    }
}

impl From<Vec<Option<bool>>> for Column {
    fn from(v: Vec<Option<bool>>) -> Self {
        Self::Booleans(v)
    }
}

impl From<Vec<bool>> for Column {
    fn from(v: Vec<bool>) -> Self {
        Self::Booleans(v.into_iter().map(Some).collect())
    }
}

impl From<types::Column> for Column {
    fn from(c: types::Column) -> Self {
        match c {
            types::Column::Numbers(v) => Self::Numbers(v),
            types::Column::Strings(v) => Self::Strings(v),
            types::Column::Booleans(v) => Self::Booleans(v),
            types::Column::Json(v) => Self::Json(v),
        }
    }
}

impl From<Texts> for Column {
    fn from(t: Texts) -> Self {
        Self::Texts(t)
    }
}

/// A packed column as the SDK holds it: string cells stay packed; JSON cells are unpacked, as
/// they are parsed one by one anyway.
impl From<packed::Column> for Column {
    fn from(c: packed::Column) -> Self {
        match c {
            packed::Column::Numbers(v) => Self::Numbers(v),
            packed::Column::Strings(t) => Self::Texts(t.into()),
            packed::Column::Booleans(v) => Self::Booleans(v),
            packed::Column::Json(t) => Self::Json(Texts::from(t).to_strings()),
        }
    }
}

/// A computed field's answer: text cells cross packed whichever form the handler built.
impl From<Column> for packed::Column {
    fn from(c: Column) -> Self {
        let pack = |v: Vec<Option<String>>| packed::Texts::from(v.into_iter().collect::<Texts>());
        match c {
            Column::Numbers(v) => Self::Numbers(v),
            Column::Strings(v) => Self::Strings(pack(v)),
            Column::Texts(t) => Self::Strings(t.into()),
            Column::Booleans(v) => Self::Booleans(v),
            Column::Json(v) => Self::Json(pack(v)),
        }
    }
}

/// The cells of a text column, packed or not: what [`Rows::text`] reads.
#[derive(Debug, Clone, Copy)]
pub enum TextCells<'a> {
    /// A packed column (a computed field's dependencies).
    Packed(&'a Texts),
    /// A column of owned strings (rows read through [`CollectionRef::list`]).
    Owned(&'a [Option<String>]),
}

impl<'a> TextCells<'a> {
    /// The number of cells.
    pub fn len(&self) -> usize {
        match self {
            Self::Packed(t) => t.len(),
            Self::Owned(v) => v.len(),
        }
    }

    /// Whether there is no cell.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cell at `row`: `None` when it is null or absent.
    pub fn get(&self, row: usize) -> Option<&'a str> {
        match *self {
            Self::Packed(t) => t.get(row),
            Self::Owned(v) => v.get(row).and_then(Option::as_deref),
        }
    }

    /// The cells in order, `None` for nulls.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<&'a str>> + 'a {
        let cells = *self;
        (0..cells.len()).map(move |row| cells.get(row))
    }
}

/// Rows in columnar form: what a computed field receives (its dependencies, de-duplicated) and
/// what [`CollectionRef::list`] returns. Columns are named by field or relation path
/// (`customer:firstName`).
#[derive(Debug, Clone, Default)]
pub struct Rows {
    len: usize,
    columns: Vec<(String, Column)>,
    /// Packed columns unpacked on demand, for [`Rows::strings`] (index-aligned with `columns`).
    unpacked: Vec<OnceCell<Vec<Option<String>>>>,
}

/// Equal when the cells are, whichever columns were unpacked.
impl PartialEq for Rows {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.columns == other.columns
    }
}

impl Rows {
    /// Rows from named columns; every column must have `len` cells.
    pub fn new(len: usize, columns: Vec<(String, Column)>) -> Result<Self> {
        if let Some((name, c)) = columns.iter().find(|(_, c)| c.len() != len) {
            return Err(Error::internal(format!(
                "column `{name}` has {} cells for {len} rows",
                c.len()
            )));
        }
        Ok(Self::unchecked(len, columns))
    }

    fn unchecked(len: usize, columns: Vec<(String, Column)>) -> Self {
        let unpacked = columns.iter().map(|_| OnceCell::new()).collect();
        Self {
            len,
            columns,
            unpacked,
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The names of the columns, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(n, _)| n.as_str())
    }

    /// The column with this name.
    pub fn column(&self, name: &str) -> Result<&Column> {
        self.position(name).map(|i| &self.columns[i].1)
    }

    fn position(&self, name: &str) -> Result<usize> {
        self.columns
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| Error::internal(format!("no column `{name}` in the rows")))
    }

    /// A string-like column (strings, dates, uuids, enums), packed or not, read without copying
    /// a cell: `rows.text("first_name")?.get(row)` is an `Option<&str>`. JSON columns are
    /// accepted too. The cheapest way to read a computed field's text dependencies.
    pub fn text(&self, name: &str) -> Result<TextCells<'_>> {
        match self.column(name)? {
            Column::Strings(v) | Column::Json(v) => Ok(TextCells::Owned(v)),
            Column::Texts(t) => Ok(TextCells::Packed(t)),
            _ => Err(Error::internal(format!(
                "column `{name}` does not hold strings"
            ))),
        }
    }

    /// A string-like column (strings, dates, uuids, enums) as owned strings. JSON columns are
    /// accepted too. A packed column is unpacked on the first call (one `String` per cell):
    /// [`Rows::text`] reads the same cells without that copy.
    pub fn strings(&self, name: &str) -> Result<&[Option<String>]> {
        let i = self.position(name)?;
        match &self.columns[i].1 {
            Column::Strings(v) | Column::Json(v) => Ok(v),
            Column::Texts(t) => Ok(self.unpacked[i].get_or_init(|| t.to_strings())),
            _ => Err(Error::internal(format!(
                "column `{name}` does not hold strings"
            ))),
        }
    }

    /// Any column as text, one cell per row (see [`Column::text`]): the exact text of bigints,
    /// decimals and bytes, numbers without a needless `.0`. Record ids read through `list` this
    /// way are the ids the routes serve.
    pub fn texts(&self, name: &str) -> Result<Vec<Option<String>>> {
        let column = self.column(name)?;
        Ok((0..self.len).map(|row| column.text(row)).collect())
    }

    /// A number column. Exact numbers (bigints, PostgreSQL decimals) are a `Strings` column: see
    /// [`Column`].
    pub fn numbers(&self, name: &str) -> Result<&[Option<f64>]> {
        match self.column(name)? {
            Column::Numbers(v) => Ok(v),
            _ => Err(Error::internal(format!(
                "column `{name}` does not hold numbers"
            ))),
        }
    }

    /// A boolean column.
    pub fn booleans(&self, name: &str) -> Result<&[Option<bool>]> {
        match self.column(name)? {
            Column::Booleans(v) => Ok(v),
            _ => Err(Error::internal(format!(
                "column `{name}` does not hold booleans"
            ))),
        }
    }

    /// One cell as a JSON value (`Null` for a null cell or an unknown column).
    pub fn value(&self, row: usize, name: &str) -> Value {
        self.column(name).map_or(Value::Null, |c| c.value(row))
    }

    /// Row `row` as a JSON object of every column.
    pub fn record(&self, row: usize) -> Value {
        Value::Object(
            self.columns
                .iter()
                .map(|(n, c)| (n.clone(), c.value(row)))
                .collect(),
        )
    }

    /// Every row as a JSON object.
    pub fn records(&self) -> Vec<Value> {
        (0..self.len).map(|i| self.record(i)).collect()
    }
}

impl From<types::Batch> for Rows {
    fn from(b: types::Batch) -> Self {
        Self::unchecked(
            b.len as usize,
            b.columns
                .into_iter()
                .map(|c| (c.name, c.data.into()))
                .collect(),
        )
    }
}

impl From<packed::Batch> for Rows {
    fn from(b: packed::Batch) -> Self {
        Self::unchecked(
            b.len as usize,
            b.columns
                .into_iter()
                .map(|c| (c.name, c.data.into()))
                .collect(),
        )
    }
}

/// The user on whose behalf a handler runs (the spec's Caller).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Caller {
    /// The user id.
    pub id: i64,
    /// The user's email.
    pub email: String,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
    /// Team name.
    pub team: String,
    /// Role name.
    pub role: String,
    /// User tags (key, value).
    pub tags: Vec<(String, String)>,
    /// IANA timezone of the request (`Europe/Paris`).
    pub timezone: String,
}

impl From<types::Caller> for Caller {
    fn from(c: types::Caller) -> Self {
        Self {
            id: c.id,
            email: c.email,
            first_name: c.first_name,
            last_name: c.last_name,
            team: c.team,
            role: c.role,
            tags: c.tags,
            timezone: c.timezone,
        }
    }
}

/// What every handler receives: who calls, and on which collection.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Context {
    /// The request's caller.
    pub caller: Caller,
    /// The customized collection (`None` for datasource charts).
    pub collection: Option<String>,
}

impl Context {
    /// A handle on any collection, going through the host's customized stack with this caller.
    pub fn collection(&self, name: &str) -> CollectionRef {
        CollectionRef {
            name: name.to_owned(),
        }
    }

    /// A handle on the customized collection itself.
    pub fn this(&self) -> Result<CollectionRef> {
        self.collection
            .as_deref()
            .map(|n| self.collection(n))
            .ok_or_else(|| Error::internal("this handler has no collection"))
    }
}

impl From<types::CallContext> for Context {
    fn from(c: types::CallContext) -> Self {
        Self {
            caller: c.caller.into(),
            collection: c.collection,
        }
    }
}

/// A collection seen through the host's customized stack, with the caller of the request that
/// invoked the handler. Filters are condition trees in the agent's JSON shape
/// (`{"field": "id", "operator": "Equal", "value": 1}`, `{"aggregator": "And", "conditions": []}`),
/// or `Value::Null` for none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionRef {
    name: String,
}

impl CollectionRef {
    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Records matching `filter`, with the fields of `projection` (relation paths allowed).
    pub fn list(&self, filter: &Value, projection: &[&str]) -> Result<Rows> {
        self.list_page(filter, projection, &Value::Null, None)
    }

    /// Like [`Self::list`], sorted (`[{"field": "id", "ascending": true}]`) and paged
    /// (`(skip, limit)`).
    pub fn list_page(
        &self,
        filter: &Value,
        projection: &[&str],
        sort: &Value,
        page: Option<(u32, u32)>,
    ) -> Result<Rows> {
        let projection: Vec<String> = projection.iter().map(|s| (*s).to_owned()).collect();
        let batch = collections::list(
            &self.name,
            &filter.to_string(),
            &projection,
            &sort.to_string(),
            page,
        )?;
        Ok(batch.into())
    }

    /// An aggregation (`{"operation": "Sum", "field": "amount", "groups": []}`); returns the
    /// `[{"value": .., "group": {..}}]` array.
    pub fn aggregate(
        &self,
        filter: &Value,
        aggregation: &Value,
        limit: Option<u32>,
    ) -> Result<Value> {
        let out = collections::aggregate(
            &self.name,
            &filter.to_string(),
            &aggregation.to_string(),
            limit,
        )?;
        Ok(serde_json::from_str(&out)?)
    }

    /// Creates records (JSON objects); returns them as stored.
    pub fn create(&self, records: &[Value]) -> Result<Vec<Value>> {
        let out = collections::create(&self.name, &Value::from(records.to_vec()).to_string())?;
        Ok(serde_json::from_str(&out)?)
    }

    /// Applies `patch` (a JSON object) to every record matching `filter`.
    pub fn update(&self, filter: &Value, patch: &Value) -> Result<()> {
        Ok(collections::update(
            &self.name,
            &filter.to_string(),
            &patch.to_string(),
        )?)
    }

    /// Deletes every record matching `filter`.
    pub fn delete(&self, filter: &Value) -> Result<()> {
        Ok(collections::delete(&self.name, &filter.to_string())?)
    }
}

/// Log levels for [`log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Very verbose.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected but handled.
    Warn,
    /// A failure.
    Error,
}

/// Writes a line to the host's log, prefixed with the plugin's name.
pub fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => logging::Level::Trace,
        Level::Debug => logging::Level::Debug,
        Level::Info => logging::Level::Info,
        Level::Warn => logging::Level::Warn,
        Level::Error => logging::Level::Error,
    };
    logging::log(level, message);
}
