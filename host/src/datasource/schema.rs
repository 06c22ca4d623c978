//! Collection schemas: column types and flags, relations and their keys.

use std::collections::BTreeSet;
use std::fmt;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::query::Operator;
use super::record::Value;

/// Primitive column types, named as the agent names them on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PrimitiveType {
    String,
    Number,
    Boolean,
    Date,
    Dateonly,
    Time,
    Enum,
    Json,
    Uuid,
    Point,
    /// Raw bytes. The spec's `File` is this type seen through the binary decorator.
    #[serde(alias = "File")]
    Binary,
}

impl PrimitiveType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "String",
            Self::Number => "Number",
            Self::Boolean => "Boolean",
            Self::Date => "Date",
            Self::Dateonly => "Dateonly",
            Self::Time => "Time",
            Self::Enum => "Enum",
            Self::Json => "Json",
            Self::Uuid => "Uuid",
            Self::Point => "Point",
            Self::Binary => "Binary",
        }
    }
}

impl fmt::Display for PrimitiveType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A column's type: a primitive, an array of a type (PostgreSQL arrays), or a composite object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnType {
    Primitive(PrimitiveType),
    Array(Box<ColumnType>),
    Composite(IndexMap<String, ColumnType>),
}

impl ColumnType {
    /// The primitive type, when this is not an array or a composite.
    pub fn primitive(&self) -> Option<PrimitiveType> {
        match self {
            Self::Primitive(p) => Some(*p),
            _ => None,
        }
    }

    /// The agent's JSON form: `"Number"`, `["Enum"]`, `{"a": "String"}`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Self::Primitive(p) => serde_json::Value::String(p.as_str().to_owned()),
            Self::Array(inner) => serde_json::Value::Array(vec![inner.to_json()]),
            Self::Composite(fields) => serde_json::Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

impl ColumnType {
    /// Whether a typed value fits this type. `Null` fits every type: NOT NULL is the database's
    /// (or a `Present` rule's) call.
    pub fn accepts(&self, value: &Value) -> bool {
        match (self, value) {
            (_, Value::Null) => true,
            (Self::Array(inner), Value::Array(items)) => items.iter().all(|i| inner.accepts(i)),
            (Self::Composite(_), Value::Json(_) | Value::Record(_)) => true,
            (Self::Primitive(p), v) => match p {
                PrimitiveType::String | PrimitiveType::Enum => matches!(v, Value::String(_)),
                PrimitiveType::Number => {
                    matches!(v, Value::Int(_) | Value::Float(_) | Value::Decimal(_))
                }
                PrimitiveType::Boolean => matches!(v, Value::Bool(_)),
                PrimitiveType::Date => matches!(v, Value::Date(_)),
                PrimitiveType::Dateonly => matches!(v, Value::Dateonly(_)),
                PrimitiveType::Time => matches!(v, Value::Time(_)),
                PrimitiveType::Uuid => matches!(v, Value::Uuid(_)),
                // Any JSON document, but not a related record.
                PrimitiveType::Json => !matches!(v, Value::Record(_)),
                PrimitiveType::Binary => matches!(v, Value::Binary(_)),
                PrimitiveType::Point => matches!(v, Value::Point(..)),
            },
            _ => false,
        }
    }
}

impl From<PrimitiveType> for ColumnType {
    fn from(p: PrimitiveType) -> Self {
        Self::Primitive(p)
    }
}

/// Write-time validation rules attached to a column (`addFieldValidation`, `Present` for NOT NULL).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationRule {
    pub operator: Operator,
    pub value: Option<Value>,
}

/// How a column's values are written on the agent's wire (and read back from write bodies) when
/// that is not the value's own JSON form (§14.4, §8.12). Decided once per column when the schema
/// is built, so that serializing a value costs one match, not a look at the database kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// The value's own JSON form.
    #[default]
    Plain,
    /// Numbers as JSON strings (`"9007199254740993"`, `"12.30"` with its scale): the Node agent's
    /// drivers return bigint (PostgreSQL, MySQL, MariaDB) and decimal (PostgreSQL, MySQL) so.
    NumberString,
    /// Exact decimals as JSON numbers: MariaDB's driver returns DECIMAL as a JavaScript number.
    Number,
    /// Bytes as `data:<sniffed mime>;base64,…`, the binary decorator's form for ordinary columns.
    DataUri,
    /// Bytes as lowercase hex, the binary decorator's form for primary and foreign keys.
    Hex,
}

impl Wire {
    /// The default form for a column type: data URIs for binary columns (and arrays of them).
    pub fn for_type(column_type: &ColumnType) -> Self {
        match column_type {
            ColumnType::Primitive(PrimitiveType::Binary) => Self::DataUri,
            ColumnType::Array(inner) => Self::for_type(inner),
            _ => Self::Plain,
        }
    }
}

/// A column of a collection and everything the agent advertises about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSchema {
    pub column_type: ColumnType,
    /// Operators the collection answers natively for this column (after equivalence, the full set).
    pub filter_operators: BTreeSet<Operator>,
    pub is_primary_key: bool,
    pub is_read_only: bool,
    pub is_sortable: bool,
    pub is_groupable: bool,
    /// Database-side NULL allowance (drives `Present` validation and the schema file).
    pub allow_null: bool,
    /// A constant default shown in the schema and written on create when the value is absent.
    pub default_value: Option<Value>,
    pub enum_values: Vec<String>,
    pub validation: Vec<ValidationRule>,
    /// The wire form of the column's values.
    pub wire: Wire,
}

impl ColumnSchema {
    /// A writable, sortable, nullable column with no operators; callers fill in the rest.
    pub fn new(column_type: impl Into<ColumnType>) -> Self {
        let column_type = column_type.into();
        Self {
            wire: Wire::for_type(&column_type),
            column_type,
            filter_operators: BTreeSet::new(),
            is_primary_key: false,
            is_read_only: false,
            is_sortable: true,
            is_groupable: true,
            allow_null: true,
            default_value: None,
            enum_values: Vec::new(),
            validation: Vec::new(),
        }
    }

    /// A string value of an `Enum` column (or of an array of enums) must be one of its values.
    pub fn check_enum_value(&self, value: &Value) -> Result<()> {
        let element = match &self.column_type {
            ColumnType::Array(inner) => inner.as_ref(),
            other => other,
        };
        if let (Value::String(s), Some(PrimitiveType::Enum)) = (value, element.primitive())
            && !self.enum_values.iter().any(|v| v == s)
        {
            return Err(Error::validation(format!(
                "The given enum value(s) {s} is not listed in [{}]",
                self.enum_values.join(",")
            )));
        }
        Ok(())
    }

    /// Whether a `Present` rule makes the column required on create.
    pub fn is_required(&self) -> bool {
        self.validation
            .iter()
            .any(|r| r.operator == Operator::Present)
    }
}

/// A relation from one collection to another, with the keys that join them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelationSchema {
    /// This collection holds `foreign_key`, which points at `foreign_key_target` of the foreign one.
    ManyToOne {
        foreign_collection: String,
        foreign_key: String,
        foreign_key_target: String,
    },
    /// The foreign collection holds `origin_key`, pointing at our `origin_key_target`; many rows.
    OneToMany {
        foreign_collection: String,
        origin_key: String,
        origin_key_target: String,
    },
    /// As `OneToMany`, but `origin_key` is unique, so at most one row.
    OneToOne {
        foreign_collection: String,
        origin_key: String,
        origin_key_target: String,
    },
    /// Through a junction collection: `through.origin_key -> our origin_key_target` and
    /// `through.foreign_key -> foreign.foreign_key_target`.
    ManyToMany {
        foreign_collection: String,
        through_collection: String,
        origin_key: String,
        origin_key_target: String,
        foreign_key: String,
        foreign_key_target: String,
    },
}

impl RelationSchema {
    pub fn foreign_collection(&self) -> &str {
        match self {
            Self::ManyToOne {
                foreign_collection, ..
            }
            | Self::OneToMany {
                foreign_collection, ..
            }
            | Self::OneToOne {
                foreign_collection, ..
            }
            | Self::ManyToMany {
                foreign_collection, ..
            } => foreign_collection,
        }
    }

    /// To-one relations can be projected, filtered and sorted through with `:` paths.
    pub fn is_to_one(&self) -> bool {
        matches!(self, Self::ManyToOne { .. } | Self::OneToOne { .. })
    }

    /// The agent's name for the relation kind.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::ManyToOne { .. } => "ManyToOne",
            Self::OneToMany { .. } => "OneToMany",
            Self::OneToOne { .. } => "OneToOne",
            Self::ManyToMany { .. } => "ManyToMany",
        }
    }
}

/// A field is either a column or a relation.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldSchema {
    Column(ColumnSchema),
    Relation(RelationSchema),
}

impl FieldSchema {
    pub fn as_column(&self) -> Option<&ColumnSchema> {
        match self {
            Self::Column(c) => Some(c),
            Self::Relation(_) => None,
        }
    }

    pub fn as_relation(&self) -> Option<&RelationSchema> {
        match self {
            Self::Relation(r) => Some(r),
            Self::Column(_) => None,
        }
    }
}

/// A collection's fields by name. Hashed with foldhash rather than SipHash: serving a row looks
/// up each of its fields here, and the names are the schema's own (a client's names are only
/// looked up, never inserted, so no one can grow a chain of collisions).
pub type Fields = IndexMap<String, FieldSchema, foldhash::fast::RandomState>;

/// The schema of one collection.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionSchema {
    pub name: String,
    /// Fields in a stable order: columns in table order, then relations.
    pub fields: Fields,
    /// Whether `filter.search` is answered by the collection itself.
    pub searchable: bool,
    /// Whether counting is allowed (`disableCount` turns it off).
    pub countable: bool,
    pub segments: Vec<String>,
    /// Actions by name, in declaration order (the order gives their route index).
    pub actions: IndexMap<String, super::action::ActionSchema>,
    /// Names of the collection's API charts (`addChart`).
    pub charts: Vec<String>,
    /// Whether writes are refused (views, tables without a primary key).
    pub is_read_only: bool,
    pub aggregation: AggregationCapabilities,
}

/// What the collection can group aggregations by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregationCapabilities {
    pub support_groups: bool,
    pub supported_date_operations: BTreeSet<super::query::DateOperation>,
}

impl CollectionSchema {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            fields: Fields::default(),
            searchable: true,
            countable: true,
            segments: Vec::new(),
            actions: IndexMap::new(),
            charts: Vec::new(),
            is_read_only: false,
            aggregation: AggregationCapabilities {
                support_groups: true,
                supported_date_operations: super::query::DateOperation::ALL.into_iter().collect(),
            },
        }
    }

    pub fn column(&self, name: &str) -> Option<&ColumnSchema> {
        self.fields.get(name).and_then(FieldSchema::as_column)
    }

    pub fn relation(&self, name: &str) -> Option<&RelationSchema> {
        self.fields.get(name).and_then(FieldSchema::as_relation)
    }

    pub fn columns(&self) -> impl Iterator<Item = (&String, &ColumnSchema)> {
        self.fields
            .iter()
            .filter_map(|(n, f)| f.as_column().map(|c| (n, c)))
    }

    /// The agent's error for a field this collection does not have: every field is listed.
    pub fn missing_field(&self, field: &str) -> Error {
        Error::missing_field(&self.name, field, self.fields.keys().map(String::as_str))
    }

    /// The agent's error for a relation this collection does not have: every relation is listed.
    pub fn missing_relation(&self, relation: &str) -> Error {
        Error::missing_relation(
            &self.name,
            relation,
            self.relations().map(|(name, _)| name.as_str()),
        )
    }

    pub fn relations(&self) -> impl Iterator<Item = (&String, &RelationSchema)> {
        self.fields
            .iter()
            .filter_map(|(n, f)| f.as_relation().map(|r| (n, r)))
    }

    /// Primary key column names in field order (a packed id follows this order).
    pub fn primary_keys(&self) -> Vec<&str> {
        self.columns()
            .filter(|(_, c)| c.is_primary_key)
            .map(|(n, _)| n.as_str())
            .collect()
    }
}

/// Every collection a datasource serves, by name. Paths like `author:country:name` resolve here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataSourceSchema {
    pub collections: IndexMap<String, CollectionSchema>,
    /// Names of the datasource-level (dashboard) API charts.
    pub charts: Vec<String>,
}

/// The most relations a field path may go through (`manager:manager:…:name`). A self-referencing
/// relation would otherwise let one URL of a few kilobytes ask for a thousand joins; no screen
/// of the Forest UI nests deeper than a few, and `typingsMaxDepth` defaults to 5.
pub const MAX_RELATION_DEPTH: usize = 10;

/// Refuses a field path through more than [`MAX_RELATION_DEPTH`] relations.
pub fn check_relation_depth(path: &str) -> Result<()> {
    let relations = path.bytes().filter(|b| *b == b':').count();
    if relations > MAX_RELATION_DEPTH {
        return Err(Error::validation(format!(
            "The field path goes through {relations} relations; at most {MAX_RELATION_DEPTH} \
             are allowed"
        )));
    }
    Ok(())
}

impl DataSourceSchema {
    pub fn collection(&self, name: &str) -> Result<&CollectionSchema> {
        self.collections
            .get(name)
            .ok_or_else(|| Error::MissingCollection(name.to_owned()))
    }

    /// Resolves a field path (`a:b:c`) from `collection` through to-one relations to a column.
    /// Returns the collection that holds the column, and the column.
    pub fn resolve_column<'a>(
        &'a self,
        collection: &'a CollectionSchema,
        path: &str,
    ) -> Result<(&'a CollectionSchema, &'a ColumnSchema)> {
        check_relation_depth(path)?;
        let mut current = collection;
        let mut segments = path.split(':').peekable();
        while let Some(segment) = segments.next() {
            // A segment followed by others names a relation, the last one a field.
            let field = current.fields.get(segment).ok_or_else(|| {
                if segments.peek().is_some() {
                    current.missing_relation(segment)
                } else {
                    current.missing_field(segment)
                }
            })?;
            match field {
                FieldSchema::Column(column) => {
                    if segments.peek().is_some() {
                        // A path may go on inside a column only for composite types; we treat
                        // `json:key` as unsupported, as the SQL datasource of the agent does.
                        return Err(Error::validation(format!(
                            "Unexpected field type: '{}.{}' (found 'Column' expected 'ManyToOne' or 'OneToOne')",
                            current.name, segment
                        )));
                    }
                    return Ok((current, column));
                }
                FieldSchema::Relation(relation) => {
                    if segments.peek().is_none() {
                        return Err(Error::validation(format!(
                            "Unexpected field type: '{}.{}' (found '{}' expected 'Column')",
                            current.name,
                            segment,
                            relation.kind_name()
                        )));
                    }
                    if !relation.is_to_one() {
                        return Err(Error::validation(format!(
                            "Unexpected field type: '{}.{}' (found '{}' expected 'ManyToOne' or 'OneToOne')",
                            current.name,
                            segment,
                            relation.kind_name()
                        )));
                    }
                    current = self.collection(relation.foreign_collection())?;
                }
            }
        }
        Err(Error::validation(format!("Invalid field path: '{path}'")))
    }
}
