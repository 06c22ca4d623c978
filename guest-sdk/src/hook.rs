//! Hooks: positions, operation types and the [`HookContext`] a hook handler receives.

use serde_json::{Map, Value};

use crate::data::{Caller, Context};

/// Before or after the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "the spec's positions")]
pub enum Position {
    Before,
    After,
}

/// The operation a hook wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "the spec's hook types")]
pub enum Operation {
    List,
    Create,
    Update,
    Delete,
    Aggregate,
}

impl Position {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Before => "Before",
            Self::After => "After",
        }
    }
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::List => "List",
            Self::Create => "Create",
            Self::Update => "Update",
            Self::Delete => "Delete",
            Self::Aggregate => "Aggregate",
        }
    }
}

/// What a hook receives: the operation's context as the agent's JSON. A Before Create hook may
/// change `data` and a Before Update hook `patch`; return an [`crate::Error`] to stop the
/// operation with that message.
pub struct HookContext {
    context: Context,
    position: Position,
    operation: Operation,
    payload: Map<String, Value>,
}

impl HookContext {
    pub(crate) fn new(
        context: Context,
        position: Position,
        operation: Operation,
        payload: Map<String, Value>,
    ) -> Self {
        Self {
            context,
            position,
            operation,
            payload,
        }
    }

    /// The request's caller.
    pub fn caller(&self) -> &Caller {
        &self.context.caller
    }

    /// The handler context (data access through the host).
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Before or After.
    pub fn position(&self) -> Position {
        self.position
    }

    /// The wrapped operation.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// A context property (`filter`, `projection`, `records`, `data`, `patch`, `aggregation`,
    /// `limit`, `aggregateResult`); `Null` when the operation has none.
    pub fn get(&self, key: &str) -> &Value {
        self.payload.get(key).unwrap_or(&Value::Null)
    }

    /// The records to create (Before/After Create).
    pub fn data_mut(&mut self) -> Option<&mut Vec<Value>> {
        self.payload.get_mut("data").and_then(Value::as_array_mut)
    }

    /// The patch of an update (Before/After Update).
    pub fn patch_mut(&mut self) -> Option<&mut Map<String, Value>> {
        self.payload.get_mut("patch").and_then(Value::as_object_mut)
    }

    /// What a Before Create/Update hook hands back: the (possibly changed) data or patch.
    pub(crate) fn into_change(mut self) -> Option<Value> {
        match (self.position, self.operation) {
            (Position::Before, Operation::Create) => self.payload.remove("data"),
            (Position::Before, Operation::Update) => self.payload.remove("patch"),
            _ => None,
        }
    }
}
