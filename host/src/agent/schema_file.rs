//! The schema file `.forestadmin-schema.json` (agent protocol §6): the document the agent
//! writes at every start outside production, reads in production, and whose SHA-1 is sent to the
//! platform as `schemaFileHash`.
//!
//! The document is `{"collections": [...], "meta": {...}}`, built from a [`DataSourceSchema`]
//! the way the Node agent's `utils/forest-schema/generator*.ts` builds it: collections sorted by
//! name, fields sorted by name with the foreign keys of ManyToOne relations left out (unless they
//! are primary keys), field keys in alphabetical order, `enums` always an array for columns.
//!
//! Byte compatibility matters twice: the file is committed by users and diffed across agent
//! versions, and the hash decides whether the platform asks for a new upload. So this module
//! carries its own JSON writers that reproduce JavaScript's `JSON.stringify` (numbers, escapes,
//! UTF-16 lengths) and the `json-stringify-pretty-compact` layout (max line length 100) the agent
//! writes the file with, instead of serde_json's formatting.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::{Map, Value as Json};

use super::wire::{served_primitive, served_validation};
use super::{Result, js};
use crate::datasource::schema::ValidationRule;
use crate::datasource::{
    self, CollectionSchema, ColumnSchema, ColumnType, DataSourceSchema, FieldSchema, Operator,
    RelationSchema, Value,
};

/// The agent's default `schemaPath`.
pub const DEFAULT_SCHEMA_PATH: &str = ".forestadmin-schema.json";

/// The agent writes the file with `stringify(schema, { maxLength: 100 })`.
pub const MAX_LINE_LENGTH: usize = 100;

/// `meta.liana`. We keep the Node agent's name rather than a `canopy` one: the platform reads
/// `liana`/`liana_version` to decide which protocol the agent speaks (features, action endpoints,
/// schema handling), and Canopy speaks exactly the Node agent's. Canopy identifies itself in
/// `meta.stack` instead, which the platform treats as information only.
pub const LIANA: &str = "forest-nodejs-agent";

/// `meta.liana_version`: the `@forestadmin/agent` release whose protocol Canopy implements (the
/// revision of `agent-protocol.md`), not Canopy's own version.
pub const LIANA_VERSION: &str = "1.96.0";

/// `meta.stack.engine`: where the Node agent says `nodejs`.
pub const ENGINE: &str = "canopy";

/// `liana_features` entry of `experimental.webhookCustomActions`: the feature and its version.
pub const WEBHOOK_CUSTOM_ACTIONS: (&str, &str) = ("webhook-custom-actions", "1.0.0");

/// `liana_features` entry of `experimental.updateRecordCustomActions`.
pub const UPDATE_RECORD_ACTIONS: (&str, &str) = ("update-record-actions", "1.0.0");

/// The `meta` object of the document. Its keys are exactly the agent's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub liana: String,
    pub liana_version: String,
    /// Enabled experimental features and their versions; `None` is written `null` as the agent
    /// does when none is enabled.
    pub liana_features: Option<IndexMap<String, String>>,
    pub engine: String,
    pub engine_version: String,
}

impl Meta {
    /// Canopy's identification (see [`LIANA`] for why the liana keeps the agent's name).
    pub fn canopy(liana_features: Option<IndexMap<String, String>>) -> Self {
        Self {
            liana: LIANA.to_owned(),
            liana_version: LIANA_VERSION.to_owned(),
            liana_features,
            engine: ENGINE.to_owned(),
            engine_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }

    /// Canopy's meta with the enabled experimental no-code features in `liana_features`, in the
    /// agent's order (`CustomizationPluginService.buildFeatures`); `null` when none is enabled.
    pub fn with_experimental(
        webhook_custom_actions: bool,
        update_record_custom_actions: bool,
    ) -> Self {
        let features: IndexMap<String, String> = [
            (webhook_custom_actions, WEBHOOK_CUSTOM_ACTIONS),
            (update_record_custom_actions, UPDATE_RECORD_ACTIONS),
        ]
        .into_iter()
        .filter(|(enabled, _)| *enabled)
        .map(|(_, (feature, version))| (feature.to_owned(), version.to_owned()))
        .collect();
        Self::canopy((!features.is_empty()).then_some(features))
    }

    /// `{"liana", "liana_version", "liana_features", "stack": {"engine", "engine_version"}}`, in
    /// the agent's key order (the hash depends on it).
    pub fn to_json(&self) -> Json {
        let features = match &self.liana_features {
            None => Json::Null,
            Some(f) => Json::Object(
                f.iter()
                    .map(|(k, v)| (k.clone(), Json::String(v.clone())))
                    .collect(),
            ),
        };
        let mut stack = Map::new();
        stack.insert("engine".into(), self.engine.clone().into());
        stack.insert("engine_version".into(), self.engine_version.clone().into());
        let mut meta = Map::new();
        meta.insert("liana".into(), self.liana.clone().into());
        meta.insert("liana_version".into(), self.liana_version.clone().into());
        meta.insert("liana_features".into(), features);
        meta.insert("stack".into(), Json::Object(stack));
        Json::Object(meta)
    }
}

impl Default for Meta {
    fn default() -> Self {
        Self::canopy(None)
    }
}

/// Supplies the `actions` array of each collection (§6.6). Actions are declared by plugins, which
/// come with a later issue; until then [`NoActions`] is passed. An implementation builds the
/// complete action objects (ids and endpoints carry the action's index, which only it knows);
/// the generator only orders them by `name`, as the agent does.
pub trait ActionSchemas {
    fn actions(&self, collection: &CollectionSchema) -> Result<Vec<Json>>;
}

/// No collection has actions.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoActions;

impl ActionSchemas for NoActions {
    fn actions(&self, _collection: &CollectionSchema) -> Result<Vec<Json>> {
        Ok(Vec::new())
    }
}

/// Reading or writing the file failed. These are startup errors, reported to the operator rather
/// than to an HTTP client, so they are not variants of [`super::Error`].
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The agent's wording: a production start needs the file.
    #[error("Can't load {}. Providing a schema is mandatory in production.", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Can't load {}: not a valid schema file ({reason}).", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("Can't write the schema file {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The schema document: the collections as the agent emits them, and the meta.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaFile {
    pub collections: Vec<Json>,
    pub meta: Meta,
}

impl SchemaFile {
    /// Builds the document from the schema the agent serves (after customization).
    pub fn build(
        schema: &DataSourceSchema,
        actions: &dyn ActionSchemas,
        meta: Meta,
    ) -> Result<Self> {
        let mut sorted: Vec<&CollectionSchema> = schema.collections.values().collect();
        // The agent sorts with `localeCompare`, not by code unit.
        sorted.sort_by(|a, b| locale_compare(&a.name, &b.name));
        let collections = sorted
            .into_iter()
            .map(|c| collection_json(schema, c, actions))
            .collect::<Result<_>>()?;
        Ok(Self { collections, meta })
    }

    /// `{"collections", "meta"}`, the document written to disk and hashed.
    pub fn to_json(&self) -> Json {
        let mut doc = Map::new();
        doc.insert("collections".into(), Json::Array(self.collections.clone()));
        doc.insert("meta".into(), self.meta.to_json());
        Json::Object(doc)
    }

    /// `schemaFileHash`: hex SHA-1 of the compact JSON of the document.
    pub fn hash(&self) -> String {
        use sha1::Digest as _;
        let digest = sha1::Sha1::digest(stringify_compact(&self.to_json()).as_bytes());
        hex::encode(digest)
    }

    /// The file's text, laid out as the agent writes it (no trailing newline, like the agent).
    pub fn to_pretty_string(&self) -> String {
        stringify_pretty_compact(&self.to_json(), MAX_LINE_LENGTH)
    }

    /// Writes the file (development starts and `canopy schema`).
    pub fn write(&self, path: &Path) -> Result<(), FileError> {
        std::fs::write(path, self.to_pretty_string()).map_err(|source| FileError::Write {
            path: path.to_owned(),
            source,
        })
    }

    /// Reads the file at a production start. The file's own `meta` is replaced by `meta`, as the
    /// agent sends its collections with freshly computed meta. Top-level keys other than
    /// `collections` and `meta` are dropped (the agent would carry them along; it never writes
    /// any).
    pub fn read(path: &Path, meta: Meta) -> Result<Self, FileError> {
        let text = std::fs::read_to_string(path).map_err(|source| FileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let invalid = |reason: String| FileError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let doc: Json = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let collections = match doc.get("collections") {
            Some(Json::Array(c)) => c.clone(),
            Some(_) => return Err(invalid("`collections` is not an array".to_owned())),
            None => return Err(invalid("no `collections` array".to_owned())),
        };
        if let Some(bad) = collections
            .iter()
            .position(|c| !c.get("name").is_some_and(Json::is_string))
        {
            return Err(invalid(format!("collection #{bad} has no name")));
        }
        Ok(Self { collections, meta })
    }
}

// ---------------------------------------------------------------------------------------------
// Collections and fields
// ---------------------------------------------------------------------------------------------

fn collection_json(
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    actions: &dyn ActionSchemas,
) -> Result<Json> {
    let mut actions = actions.actions(collection)?;
    actions.sort_by(|a, b| {
        let name = |j: &Json| j.get("name").and_then(Json::as_str).map(str::to_owned);
        utf16_compare(&name(a).unwrap_or_default(), &name(b).unwrap_or_default())
    });

    let mut names: Vec<&String> = collection
        .fields
        .iter()
        .filter(|(name, field)| {
            let primary = field.as_column().is_some_and(|c| c.is_primary_key);
            primary || !is_foreign_key(collection, name)
        })
        .map(|(name, _)| name)
        .collect();
    names.sort_by(|a, b| utf16_compare(a, b));
    let fields = names
        .into_iter()
        .map(|name| field_json(schema, collection, name))
        .collect::<Result<Vec<_>>>()?;

    // The agent: read-only iff every column is. A collection the datasource refuses to write
    // (no primary key at all, which the agent never has since it guesses one) is read-only too,
    // so that the UI does not offer writes that would be refused.
    let read_only = collection.is_read_only || collection.columns().all(|(_, c)| c.is_read_only);

    let mut segments: Vec<&String> = collection.segments.iter().collect();
    segments.sort_by(|a, b| utf16_compare(a, b));
    let segments = segments
        .into_iter()
        .map(|s| {
            object([
                ("id", Json::String(format!("{}.{s}", collection.name))),
                ("name", Json::String(s.clone())),
            ])
        })
        .collect();

    Ok(object([
        ("actions", Json::Array(actions)),
        ("fields", Json::Array(fields)),
        ("icon", Json::Null),
        ("integration", Json::Null),
        ("isReadOnly", read_only.into()),
        ("isSearchable", collection.searchable.into()),
        ("isVirtual", false.into()),
        ("name", collection.name.clone().into()),
        ("onlyForRelationships", false.into()),
        ("paginationType", "page".into()),
        ("segments", Json::Array(segments)),
    ]))
}

/// A column that some ManyToOne relation of the collection uses as its foreign key.
fn is_foreign_key(collection: &CollectionSchema, name: &str) -> bool {
    collection.fields.get(name).and_then(FieldSchema::as_column).is_some()
        && collection.relations().any(|(_, r)| {
            matches!(r, RelationSchema::ManyToOne { foreign_key, .. } if foreign_key == name)
        })
}

fn field_json(
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    name: &str,
) -> Result<Json> {
    match collection.fields.get(name) {
        Some(FieldSchema::Column(column)) => Ok(column_json(collection, name, column)),
        Some(FieldSchema::Relation(relation)) => relation_json(schema, collection, name, relation),
        None => Err(internal(format!(
            "field '{}.{name}' vanished",
            collection.name
        ))),
    }
}

/// Keys in alphabetical order, as the agent sorts them.
fn column_json(collection: &CollectionSchema, name: &str, column: &ColumnSchema) -> Json {
    let mut enums = column.enum_values.clone();
    enums.sort_by(|a, b| utf16_compare(a, b));
    object([
        ("defaultValue", default_json(column)),
        (
            "enums",
            Json::Array(enums.into_iter().map(Json::String).collect()),
        ),
        ("field", name.into()),
        ("integration", Json::Null),
        ("inverseOf", Json::Null),
        ("isFilterable", (!column.filter_operators.is_empty()).into()),
        ("isPrimaryKey", column.is_primary_key.into()),
        // A foreign key is edited through its relation, never twice in the same form.
        (
            "isReadOnly",
            (column.is_read_only || is_foreign_key(collection, name)).into(),
        ),
        ("isRequired", column.is_required().into()),
        ("isSortable", column.is_sortable.into()),
        ("isVirtual", false.into()),
        ("reference", Json::Null),
        ("type", type_json(&column.column_type)),
        ("validations", validations_json(&served_validation(column))),
    ])
}

fn relation_json(
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    name: &str,
    relation: &RelationSchema,
) -> Result<Json> {
    let foreign = schema.collection(relation.foreign_collection())?;
    let inverse = inverse_relation(collection, relation, foreign)
        .map_or(Json::Null, |n| Json::String(n.to_owned()));
    let reference = |target: &str| Json::String(format!("{}.{target}", foreign.name));

    // (type, defaultValue, isFilterable, isReadOnly, isRequired, isSortable, reference, validations)
    let (ty, default, filterable, read_only, required, sortable, reference, validations) =
        match relation {
            RelationSchema::ManyToOne {
                foreign_key,
                foreign_key_target,
                ..
            } => {
                let key = column_of(collection, foreign_key)?;
                (
                    type_json(&key.column_type),
                    default_json(key),
                    has_filterable_column(foreign),
                    key.is_read_only,
                    key.is_required(),
                    key.is_sortable,
                    reference(foreign_key_target),
                    validations_json(&served_validation(key)),
                )
            }
            RelationSchema::OneToOne {
                origin_key,
                origin_key_target,
                ..
            } => {
                let key = column_of(foreign, origin_key)?;
                let target = column_of(collection, origin_key_target)?;
                (
                    type_json(&key.column_type),
                    Json::Null,
                    has_filterable_column(foreign),
                    key.is_read_only,
                    false,
                    target.is_sortable,
                    reference(origin_key_target),
                    Json::Array(Vec::new()),
                )
            }
            RelationSchema::OneToMany {
                origin_key,
                origin_key_target,
                ..
            } => {
                let key = column_of(foreign, origin_key)?;
                let target = column_of(collection, origin_key_target)?;
                (
                    Json::Array(vec![type_json(&target.column_type)]),
                    Json::Null,
                    false,
                    key.is_read_only,
                    false,
                    true,
                    reference(origin_key_target),
                    Json::Array(Vec::new()),
                )
            }
            RelationSchema::ManyToMany {
                through_collection,
                origin_key,
                foreign_key,
                foreign_key_target,
                ..
            } => {
                let through = schema.collection(through_collection)?;
                let read_only = column_of(through, origin_key)?.is_read_only
                    || column_of(through, foreign_key)?.is_read_only;
                let target = column_of(foreign, foreign_key_target)?;
                (
                    Json::Array(vec![type_json(&target.column_type)]),
                    Json::Null,
                    false,
                    read_only,
                    false,
                    true,
                    reference(foreign_key_target),
                    Json::Array(Vec::new()),
                )
            }
        };

    let relationship = match relation {
        RelationSchema::ManyToOne { .. } => "BelongsTo",
        RelationSchema::OneToOne { .. } => "HasOne",
        RelationSchema::OneToMany { .. } => "HasMany",
        RelationSchema::ManyToMany { .. } => "BelongsToMany",
    };

    Ok(object([
        ("defaultValue", default),
        // Relations carry `null` here where columns carry an array.
        ("enums", Json::Null),
        ("field", name.into()),
        ("integration", Json::Null),
        ("inverseOf", inverse),
        ("isFilterable", filterable.into()),
        // Always false, even for a ManyToOne whose key is the primary key: the frontend breaks
        // on reference fields marked as keys.
        ("isPrimaryKey", false.into()),
        ("isReadOnly", read_only.into()),
        ("isRequired", required.into()),
        ("isSortable", sortable.into()),
        ("isVirtual", false.into()),
        ("reference", reference),
        ("relationship", relationship.into()),
        ("type", ty),
        ("validations", validations),
    ]))
}

fn column_of<'a>(collection: &'a CollectionSchema, name: &str) -> Result<&'a ColumnSchema> {
    collection.column(name).ok_or_else(|| {
        internal(format!(
            "relation key '{}.{name}' is not a column",
            collection.name
        ))
    })
}

/// The agent marks a to-one relation filterable when the foreign collection has any filterable
/// column.
fn has_filterable_column(collection: &CollectionSchema) -> bool {
    collection
        .columns()
        .any(|(_, c)| !c.filter_operators.is_empty())
}

/// The first relation of the foreign collection (in field order) that walks the same keys back
/// to this collection, as the toolkit's `getInverseRelation` finds it. Key targets are not
/// compared, like there.
fn inverse_relation<'a>(
    collection: &CollectionSchema,
    relation: &RelationSchema,
    foreign: &'a CollectionSchema,
) -> Option<&'a str> {
    foreign
        .relations()
        .find(|(_, candidate)| {
            candidate.foreign_collection() == collection.name && is_inverse(relation, candidate)
        })
        .map(|(name, _)| name.as_str())
}

fn is_inverse(relation: &RelationSchema, candidate: &RelationSchema) -> bool {
    use RelationSchema::*;
    match (relation, candidate) {
        (
            ManyToMany {
                through_collection: t1,
                origin_key: o1,
                foreign_key: f1,
                ..
            },
            ManyToMany {
                through_collection: t2,
                origin_key: o2,
                foreign_key: f2,
                ..
            },
        ) => t1 == t2 && o2 == f1 && f2 == o1,
        (
            OneToMany { origin_key, .. } | OneToOne { origin_key, .. },
            ManyToOne { foreign_key, .. },
        )
        | (
            ManyToOne { foreign_key, .. },
            OneToMany { origin_key, .. } | OneToOne { origin_key, .. },
        ) => origin_key == foreign_key,
        _ => false,
    }
}

fn default_json(column: &ColumnSchema) -> Json {
    column
        .default_value
        .as_ref()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or(Json::Null)
}

/// `"Number"`, `["String"]`, or `{"fields": [{"field", "type"}]}` for composite types. Every type
/// is written as served, so `Binary` is `String` (keys of relations included).
fn type_json(column_type: &ColumnType) -> Json {
    match column_type {
        ColumnType::Primitive(p) => Json::String(served_primitive(*p).as_str().to_owned()),
        ColumnType::Array(inner) => Json::Array(vec![type_json(inner)]),
        ColumnType::Composite(fields) => object([(
            "fields",
            Json::Array(
                fields
                    .iter()
                    .map(|(name, ty)| {
                        object([("field", name.as_str().into()), ("type", type_json(ty))])
                    })
                    .collect(),
            ),
        )]),
    }
}

// ---------------------------------------------------------------------------------------------
// Validations (§6.4, the agent's `validation.ts`)
// ---------------------------------------------------------------------------------------------

/// The frontend rules of a column. Rules the frontend cannot check are dropped: time-relative
/// operators (they would be frozen at generation time) and every operator without a frontend
/// form. The agent rewrites some of the latter through the operator equivalence table first;
/// the SQL datasource only ever produces `Present`, so that rewriting is left to the customizer
/// issue, where validation rules other than `Present` appear.
fn validations_json(rules: &[ValidationRule]) -> Json {
    // Merge duplicates per operator, keeping first-seen order: the frontend crashes on two rules
    // of the same type.
    let mut merged: Vec<(Operator, Option<Value>)> = Vec::new();
    for rule in rules.iter().filter(|r| frontend_type(r.operator).is_some()) {
        match merged.iter_mut().find(|(op, _)| *op == rule.operator) {
            None => merged.push((rule.operator, rule.value.clone())),
            Some((op, value)) => merge_rule(*op, value, rule.value.as_ref()),
        }
    }
    Json::Array(
        merged
            .into_iter()
            .filter_map(|(op, value)| validation_json(op, value.as_ref()))
            .collect(),
    )
}

/// The frontend's name of an operator, for those it checks itself.
fn frontend_type(operator: Operator) -> Option<&'static str> {
    Some(match operator {
        Operator::Present => "is present",
        Operator::After => "is after",
        Operator::Before => "is before",
        Operator::Contains => "contains",
        Operator::GreaterThan => "is greater than",
        Operator::GreaterThanOrEqual => "is greater than or equal to",
        Operator::LessThan => "is less than",
        Operator::LessThanOrEqual => "is less than or equal to",
        Operator::LongerThan => "is longer than",
        Operator::ShorterThan => "is shorter than",
        Operator::Match => "is like",
        _ => return None,
    })
}

/// Lower bounds keep the largest, upper bounds the smallest, patterns are conjoined; other
/// duplicates keep the first rule.
fn merge_rule(operator: Operator, kept: &mut Option<Value>, new: Option<&Value>) {
    let (Some(current), Some(new)) = (kept.as_ref(), new) else {
        return;
    };
    let replace = match operator {
        Operator::GreaterThan
        | Operator::GreaterThanOrEqual
        | Operator::After
        | Operator::LongerThan => current.compare(new) == Ordering::Less,
        Operator::LessThan
        | Operator::LessThanOrEqual
        | Operator::Before
        | Operator::ShorterThan => current.compare(new) == Ordering::Greater,
        Operator::Match => {
            let both = format!(
                "^(?={})(?={}).*$",
                current.to_id_string(),
                new.to_id_string()
            );
            *kept = Some(Value::String(both));
            return;
        }
        _ => false,
    };
    if replace {
        *kept = Some(new.clone());
    }
}

fn validation_json(operator: Operator, value: Option<&Value>) -> Option<Json> {
    let ty = frontend_type(operator)?;
    if operator == Operator::Present {
        return Some(object([
            ("type", ty.into()),
            ("message", "Field is required".into()),
        ]));
    }
    let shown = value
        .map(js_display)
        .unwrap_or_else(|| "undefined".to_owned());
    let message = match operator {
        Operator::After => format!("Value must be after {shown}"),
        Operator::Before => format!("Value must be before {shown}"),
        Operator::Contains => format!("Value must contain '{shown}'"),
        Operator::GreaterThan => format!("Value must be greater than {shown}"),
        Operator::GreaterThanOrEqual => format!("Value must be greater or equal to {shown}"),
        Operator::LessThan => format!("Value must be lower than {shown}"),
        Operator::LessThanOrEqual => format!("Value must be lower or equal to {shown}"),
        Operator::LongerThan => format!("Value must be longer than {shown} characters"),
        Operator::ShorterThan => format!("Value must be shorter than {shown} characters"),
        Operator::Match => format!("Value must match {shown}"),
        _ => return None,
    };
    // `Match` sends the pattern as a string (the agent: `regexp.toString()`).
    let value = match (operator, value) {
        (Operator::Match, Some(v)) => Json::String(js_display(v)),
        (_, Some(v)) => serde_json::to_value(v).unwrap_or(Json::Null),
        (_, None) => Json::Null,
    };
    Some(object([
        ("type", ty.into()),
        ("value", value),
        ("message", message.into()),
    ]))
}

/// A value as JavaScript's template strings print it (numbers without a trailing `.0`).
fn js_display(value: &Value) -> String {
    match value {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => js_number(*f),
        other => other.to_id_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Ordering as the agent sorts
// ---------------------------------------------------------------------------------------------

/// JavaScript's default `Array.prototype.sort` order: by UTF-16 code unit (not by code point,
/// which differs above U+FFFF).
fn utf16_compare(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// An approximation of `String.prototype.localeCompare` under Node's ICU root collation, which
/// the agent uses to order collections. Exact for ASCII names: first by primary weight (spaces,
/// then punctuation and symbols in CLDR order, then digits, then letters ignoring case), then
/// lowercase before uppercase. Other characters sort after ASCII letters by lowercase code
/// point, without ICU's accent folding; identical keys fall back to code units so the order is
/// total.
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    let primary = |s: &str| s.chars().map(primary_weight).collect::<Vec<_>>();
    primary(a)
        .cmp(&primary(b))
        .then_with(|| {
            let tertiary = |s: &str| s.chars().map(char::is_uppercase).collect::<Vec<_>>();
            tertiary(a).cmp(&tertiary(b))
        })
        .then_with(|| utf16_compare(a, b))
}

/// CLDR root order of the ASCII punctuation and symbols (all sort before digits).
const CLDR_PUNCTUATION: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";

fn primary_weight(c: char) -> (u8, u32) {
    if c.is_whitespace() || c.is_control() {
        (0, u32::from(c))
    } else if let Some(i) = CLDR_PUNCTUATION.find(c) {
        (1, i as u32)
    } else if c.is_ascii_digit() {
        (2, u32::from(c))
    } else if c.is_ascii_alphabetic() {
        (3, u32::from(c.to_ascii_lowercase()))
    } else {
        let lower = c.to_lowercase().next().unwrap_or(c);
        (4, u32::from(lower))
    }
}

// ---------------------------------------------------------------------------------------------
// JSON writers, as JavaScript writes
// ---------------------------------------------------------------------------------------------

/// `JSON.stringify(value)`: no spaces, JavaScript number formatting.
pub fn stringify_compact(value: &Json) -> String {
    let mut out = String::new();
    write_flat(value, false, &mut out);
    out
}

/// What `json-stringify-pretty-compact` (v3, indent 2) writes: a value stays on one line,
/// written `{"a": 1, "b": [1, 2]}`, when it fits in `max_length` columns together with its
/// indentation, key and trailing comma; otherwise its items go one per line, two spaces deeper.
/// Scalars and empty containers never break. Widths are UTF-16 units, as JavaScript counts.
pub fn stringify_pretty_compact(value: &Json, max_length: usize) -> String {
    pretty(value, "", 0, max_length)
}

fn pretty(value: &Json, indent: &str, reserved: usize, max_length: usize) -> String {
    let flat = stringify_compact(value);
    // Signed: the room can be negative when a deep key is already past the limit.
    let room = max_length as i64 - utf16_len(indent) as i64 - reserved as i64;
    if utf16_len(&flat) as i64 <= room {
        let mut spaced = String::new();
        write_flat(value, true, &mut spaced);
        if utf16_len(&spaced) as i64 <= room {
            return spaced;
        }
    }
    let next = format!("{indent}  ");
    let (items, open, close) = match value {
        Json::Array(items) if !items.is_empty() => {
            let last = items.len() - 1;
            let lines = items
                .iter()
                .enumerate()
                .map(|(i, item)| pretty(item, &next, usize::from(i != last), max_length))
                .collect::<Vec<_>>();
            (lines, '[', ']')
        }
        Json::Object(map) if !map.is_empty() => {
            let last = map.len() - 1;
            let lines = map
                .iter()
                .enumerate()
                .map(|(i, (key, item))| {
                    let mut key_part = String::new();
                    write_string(key, &mut key_part);
                    key_part.push_str(": ");
                    let reserved = utf16_len(&key_part) + usize::from(i != last);
                    key_part + &pretty(item, &next, reserved, max_length)
                })
                .collect::<Vec<_>>();
            (lines, '{', '}')
        }
        _ => return flat,
    };
    let separator = format!(",\n{next}");
    format!("{open}\n{next}{}\n{indent}{close}", items.join(&separator))
}

fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// One-line JSON; `spaced` adds the space after `:` and `,` that the pretty-compact layout uses.
fn write_flat(value: &Json, spaced: bool, out: &mut String) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(&number_string(n)),
        Json::String(s) => write_string(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(if spaced { ", " } else { "," });
                }
                write_flat(item, spaced, out);
            }
            out.push(']');
        }
        Json::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(if spaced { ", " } else { "," });
                }
                write_string(key, out);
                out.push_str(if spaced { ": " } else { ":" });
                write_flat(item, spaced, out);
            }
            out.push('}');
        }
    }
}

/// JSON.stringify's string escaping: `"`, `\`, the short escapes, other control characters as
/// lowercase `\u00xx`; everything else (including `/` and non-ASCII) as is.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A number as JSON.stringify writes it: JavaScript's digits, `null` when not finite.
fn js_number(f: f64) -> String {
    if f.is_finite() {
        js::number(f)
    } else {
        "null".to_owned()
    }
}

/// Integers print exactly while JavaScript holds them exactly (|n| ≤ 2^53); beyond, they go
/// through a double as in JavaScript.
fn number_string(n: &serde_json::Number) -> String {
    const EXACT: u64 = 1 << 53;
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT) {
        return i.to_string();
    }
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT) {
        return u.to_string();
    }
    n.as_f64().map_or_else(|| "null".to_owned(), js_number)
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// An object with keys in the given order.
fn object<const N: usize>(entries: [(&str, Json); N]) -> Json {
    Json::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

fn internal(message: String) -> super::Error {
    super::Error::Datasource(datasource::Error::Internal(message))
}

#[cfg(test)]
mod tests;
