//! Workflow steps: a handler declared with [`crate::DataSource::add_workflow_step`] runs for the
//! `plugin` steps of workflow runs that name it, gets a [`StepContext`] (the run's record, its
//! context so far, the step's settings) and answers a [`StepOutput`] (an option and values).

use serde_json::{Map, Value, json};

use crate::bindings::exports::canopy::plugin::workflow as wit;
use crate::data::{Caller, CollectionRef, Context};
use crate::error::{Error, Result};

/// What a workflow step handler receives: the run's user and collection, the run's record, the
/// run's context and the step's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct StepContext {
    context: Context,
    record_id: String,
    run_context: Value,
    settings: Value,
}

impl StepContext {
    pub(crate) fn new(context: Context, input: &wit::StepInput) -> Result<Self> {
        let parse = |text: &str| -> Result<Value> { Ok(serde_json::from_str(text)?) };
        Ok(Self {
            context,
            record_id: input.record_id.clone(),
            run_context: parse(&input.context_json)?,
            settings: parse(&input.settings_json)?,
        })
    }

    /// The run's user: data calls run with that user's permissions.
    pub fn caller(&self) -> &Caller {
        &self.context.caller
    }

    /// The handler context (caller and the workflow's collection, data access).
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The workflow's collection.
    pub fn collection(&self) -> Result<CollectionRef> {
        self.context.this()
    }

    /// The run's record, by its packed id: the id the agent's routes serve (`"42"`; the values of
    /// a composite key joined with `|`).
    pub fn record_id(&self) -> &str {
        &self.record_id
    }

    /// The run's context so far: a JSON object holding each earlier step's values under its key.
    pub fn run_context(&self) -> &Value {
        &self.run_context
    }

    /// The step's `settings` from the workflow definition (`Null` when it has none).
    pub fn settings(&self) -> &Value {
        &self.settings
    }

    /// One setting (`None` when absent).
    pub fn setting(&self, key: &str) -> Option<&Value> {
        self.settings.get(key)
    }

    /// A condition tree matching the run's record: each primary key of the collection (from the
    /// schema, in order) equal to its part of the packed id.
    pub fn record_filter(&self) -> Result<Value> {
        let collection = self.collection()?;
        let schema = crate::bindings::canopy::plugin::environment::schema();
        let schema: Value = serde_json::from_str(&schema)?;
        let keys: Vec<String> = schema
            .get("collections")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(collection.name()))
            .and_then(|c| c.get("fields").and_then(Value::as_array))
            .into_iter()
            .flatten()
            .filter(|f| f.get("isPrimaryKey").and_then(Value::as_bool) == Some(true))
            .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let parts: Vec<&str> = self.record_id.split('|').collect();
        if keys.is_empty() || keys.len() != parts.len() {
            return Err(Error::validation(format!(
                "the record id `{}` does not fit the primary key of `{}`",
                self.record_id,
                collection.name()
            )));
        }
        // Ids cross as the text the routes serve; the host reads numbers given as text exactly.
        let conditions: Vec<Value> = keys
            .iter()
            .zip(parts)
            .map(|(key, part)| json!({"field": key, "operator": "Equal", "value": part}))
            .collect();
        Ok(match conditions.len() {
            1 => conditions.into_iter().next().unwrap_or(Value::Null),
            _ => json!({"aggregator": "And", "conditions": conditions}),
        })
    }

    /// The run's record with these fields (relation paths allowed), as a JSON object; a
    /// `NotFound` error when the record does not exist or the run's user cannot see it.
    pub fn get_record(&self, fields: &[&str]) -> Result<Value> {
        let rows = self.collection()?.list(&self.record_filter()?, fields)?;
        if rows.is_empty() {
            return Err(Error::NotFound(format!(
                "record `{}` of `{}` not found",
                self.record_id,
                self.context.collection.as_deref().unwrap_or_default()
            )));
        }
        Ok(rows.record(0))
    }
}

/// A workflow step's answer: the option it chose (the key of the step the run goes to next; none
/// follows the step's `next`) and values kept in the run's context under the step's key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepOutput {
    option: Option<String>,
    values: Map<String, Value>,
}

impl StepOutput {
    /// No option and no values: the run goes on to the step's `next`.
    pub fn next() -> Self {
        Self::default()
    }

    /// Chooses `option`: the run goes to the step with that key.
    pub fn choose(option: impl Into<String>) -> Self {
        Self {
            option: Some(option.into()),
            values: Map::new(),
        }
    }

    /// Adds one value to keep in the run's context.
    pub fn value(mut self, key: impl Into<String>, value: Value) -> Self {
        self.values.insert(key.into(), value);
        self
    }

    /// The option chosen, if any.
    pub fn option(&self) -> Option<&str> {
        self.option.as_deref()
    }

    /// The values kept in the run's context.
    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    pub(crate) fn into_wit(self) -> wit::StepOutput {
        wit::StepOutput {
            option: self.option,
            values_json: Value::Object(self.values).to_string(),
        }
    }
}
