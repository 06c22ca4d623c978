//! The contexts of write replacements, overrides and operator replacements, and the binary
//! modes.

use serde_json::{Map, Value};

use crate::data::Context;

/// Which write a [`replace_field_writing`](crate::CollectionCustomizer::replace_field_writing)
/// handler runs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAction {
    /// A record is created.
    Create,
    /// Records are updated.
    Update,
}

/// What a write replacement handler knows besides the written value.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteContext {
    /// The request's caller and collection; `collection` reads and writes other data.
    pub context: Context,
    /// Create or update.
    pub action: WriteAction,
    /// The whole record being created, or the whole patch of an update.
    pub record: Map<String, Value>,
    /// The filter of the updated records (a condition-tree-bearing filter object), `Null` on
    /// create.
    pub filter: Value,
}

impl WriteContext {
    pub(crate) fn from_json(context: Context, json: &Value) -> Self {
        Self {
            context,
            action: match json.get("action").and_then(Value::as_str) {
                Some("update") => WriteAction::Update,
                _ => WriteAction::Create,
            },
            record: json
                .get("record")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            filter: json.get("filter").cloned().unwrap_or(Value::Null),
        }
    }
}

/// How a binary column crosses the wire
/// ([`replace_field_binary_mode`](crate::CollectionCustomizer::replace_field_binary_mode)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryMode {
    /// `data:<mime>;base64,…` (file uploads; the default for columns that are not keys).
    DataUri,
    /// Lowercase hex (short binaries such as ids; the default for keys).
    Hex,
}

impl BinaryMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::DataUri => "datauri",
            Self::Hex => "hex",
        }
    }
}
