//! Relations added by a plugin: the option builders of the four `add_*_relation` methods, and
//! [`ExternalRelation`] (related data listed by the plugin itself).

use serde_json::{Map, Value, json};

use crate::data::Context;
use crate::error::Result;

/// The keys of a many-to-one relation (`add_many_to_one_relation`): the foreign key column of
/// the customized collection, and the column of the foreign collection it points to (default:
/// the foreign collection's primary key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManyToOneOptions {
    foreign_key: String,
    foreign_key_target: Option<String>,
}

impl ManyToOneOptions {
    /// The relation through `foreign_key`, a column of the customized collection.
    pub fn new(foreign_key: impl Into<String>) -> Self {
        Self {
            foreign_key: foreign_key.into(),
            foreign_key_target: None,
        }
    }

    /// The column of the foreign collection the key points to (default: its primary key).
    pub fn foreign_key_target(mut self, column: impl Into<String>) -> Self {
        self.foreign_key_target = Some(column.into());
        self
    }

    pub(crate) fn definition(self, foreign_collection: &str) -> Value {
        json!({
            "type": "ManyToOne",
            "foreignCollection": foreign_collection,
            "foreignKey": self.foreign_key,
            "foreignKeyTarget": self.foreign_key_target,
        })
    }
}

/// The keys of a one-to-many or one-to-one relation (`add_one_to_many_relation`,
/// `add_one_to_one_relation`): the column of the foreign collection that points back, and the
/// column of the customized collection it points to (default: its primary key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneToManyOptions {
    origin_key: String,
    origin_key_target: Option<String>,
}

/// The keys of a one-to-one relation: the same as a one-to-many's.
pub type OneToOneOptions = OneToManyOptions;

impl OneToManyOptions {
    /// The relation through `origin_key`, a column of the foreign collection.
    pub fn new(origin_key: impl Into<String>) -> Self {
        Self {
            origin_key: origin_key.into(),
            origin_key_target: None,
        }
    }

    /// The column of the customized collection the origin key points to (default: its primary
    /// key).
    pub fn origin_key_target(mut self, column: impl Into<String>) -> Self {
        self.origin_key_target = Some(column.into());
        self
    }

    pub(crate) fn definition(self, kind: &str, foreign_collection: &str) -> Value {
        json!({
            "type": kind,
            "foreignCollection": foreign_collection,
            "originKey": self.origin_key,
            "originKeyTarget": self.origin_key_target,
        })
    }
}

/// The keys of a many-to-many relation (`add_many_to_many_relation`): in the through collection,
/// `origin_key` points to the customized collection and `foreign_key` to the foreign one; the
/// targets default to the primary keys of those collections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManyToManyOptions {
    origin_key: String,
    foreign_key: String,
    origin_key_target: Option<String>,
    foreign_key_target: Option<String>,
}

impl ManyToManyOptions {
    /// The relation through the two key columns of the through collection.
    pub fn new(origin_key: impl Into<String>, foreign_key: impl Into<String>) -> Self {
        Self {
            origin_key: origin_key.into(),
            foreign_key: foreign_key.into(),
            origin_key_target: None,
            foreign_key_target: None,
        }
    }

    /// The column of the customized collection `origin_key` points to (default: its primary
    /// key).
    pub fn origin_key_target(mut self, column: impl Into<String>) -> Self {
        self.origin_key_target = Some(column.into());
        self
    }

    /// The column of the foreign collection `foreign_key` points to (default: its primary key).
    pub fn foreign_key_target(mut self, column: impl Into<String>) -> Self {
        self.foreign_key_target = Some(column.into());
        self
    }

    pub(crate) fn definition(self, foreign_collection: &str, through_collection: &str) -> Value {
        json!({
            "type": "ManyToMany",
            "foreignCollection": foreign_collection,
            "throughCollection": through_collection,
            "originKey": self.origin_key,
            "foreignKey": self.foreign_key,
            "originKeyTarget": self.origin_key_target,
            "foreignKeyTarget": self.foreign_key_target,
        })
    }
}

pub(crate) type ListRecordsFn = Box<dyn Fn(&Value, &Context) -> Result<Vec<Value>>>;

/// Related data the plugin lists itself (`add_external_relation`), shown in a record's related
/// data: a JSON field holding a list of objects of `schema`. As in the agent, it is a computed
/// field of type `[schema]`: `list_records` receives each record (its `dependencies`) and
/// returns its related objects.
pub struct ExternalRelation {
    pub(crate) schema: Map<String, Value>,
    pub(crate) dependencies: Option<Vec<String>>,
    pub(crate) list_records: ListRecordsFn,
}

impl ExternalRelation {
    /// `schema` maps each field of the listed objects to its type (`{"title": "String",
    /// "year": "Number"}`); `list_records(record, ctx)` lists the objects related to one record.
    /// A `schema` that is not a JSON object is treated as empty.
    pub fn new(
        schema: Value,
        list_records: impl Fn(&Value, &Context) -> Result<Vec<Value>> + 'static,
    ) -> Self {
        Self {
            schema: match schema {
                Value::Object(o) => o,
                _ => Map::new(),
            },
            dependencies: None,
            list_records: Box::new(list_records),
        }
    }

    /// The fields of the record `list_records` needs (default: the collection's primary keys).
    pub fn dependencies<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.dependencies = Some(fields.into_iter().map(Into::into).collect());
        self
    }
}
