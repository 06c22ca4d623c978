//! The audit trail's action rows: every execution of an action on records leaves one entry per
//! record it ran on (operation `action`, the action's name, its form's values), beside the
//! create, update and delete entries of what the action then wrote, which share its correlation
//! id. A record's history thus says "Ada ran Refund on this order" above "Ada updated status".
//!
//! The layer is the stack's outermost one, so that it sees every action: those a plugin or a
//! no-code definition declares sit above the audit layer of writes (position 16), which never
//! sees them run. Its names are the served ones, as the history routes ask for them. It records
//! as the write layer does: `pending` before the action runs (a broken audit store refuses the
//! action when the trail is critical), then `done` once it answered; an action that failed
//! leaves its entries pending, the trace of an attempt.
//!
//! Global actions target no record and leave no entry. A bulk action over more records than
//! [`MAX_SNAPSHOT_RECORDS`] records its first ones with a warning rather than refusing: what the
//! action writes is audited record by record below, critical or not, and this row only names
//! the action.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value as Json};

use super::audit::{
    AuditOperation, AuditTrail, Confirmation, MAX_SNAPSHOT_RECORDS, confirm, past_the_cap, pending,
    record,
};
use super::stack::{Decorator, Layer, decorated};
use crate::agent::wire;
use crate::datasource::action::{ActionResult, ActionScope, FormValues};
use crate::datasource::{Caller, Collection, DataSource, Filter, Projection, Result};

/// The layer over `child` (the whole stack): collections with a primary key and record actions.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    trail: &AuditTrail,
) -> Result<Arc<dyn DataSource>> {
    let layer = Layer::new(Arc::clone(child), |collection| {
        let schema = collection.schema();
        let acts_on_records = schema
            .actions
            .values()
            .any(|action| action.scope != ActionScope::Global);
        if schema.primary_keys().is_empty() || !acts_on_records {
            return Ok(None);
        }
        let keys = Projection(
            schema
                .primary_keys()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        );
        Ok(Some(decorated(ActionAudit {
            trail: trail.clone(),
            keys,
            child: collection,
        })))
    })?;
    Ok(Arc::new(layer))
}

struct ActionAudit {
    child: Arc<dyn Collection>,
    trail: AuditTrail,
    /// The primary keys: what the entries need of the records.
    keys: Projection,
}

impl ActionAudit {
    /// The packed ids of the records `filter` selects, the first [`MAX_SNAPSHOT_RECORDS`].
    async fn targets(&self, caller: &Caller, filter: &Filter) -> Result<Vec<String>> {
        let schema = self.schema();
        let mut records = self
            .child
            .list(caller, &past_the_cap(filter), &self.keys)
            .await?;
        if records.len() > MAX_SNAPSHOT_RECORDS {
            tracing::warn!(
                collection = %schema.name,
                "audit trail: an action runs on more than {MAX_SNAPSHOT_RECORDS} records, only \
                 the first {MAX_SNAPSHOT_RECORDS} get an action entry"
            );
            records.truncate(MAX_SNAPSHOT_RECORDS);
        }
        records.iter().map(|r| wire::pack_id(schema, r)).collect()
    }
}

#[async_trait]
impl Decorator for ActionAudit {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    async fn execute(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
    ) -> Result<ActionResult> {
        let schema = self.schema();
        let global = schema
            .actions
            .get(name)
            .is_none_or(|action| action.scope == ActionScope::Global);
        if global {
            return self.child.execute(caller, name, filter, values).await;
        }
        let form = form_values(values);
        let entries: Vec<_> = self
            .targets(caller, filter)
            .await?
            .into_iter()
            .map(|id| {
                let mut entry = pending(
                    caller,
                    &schema.name,
                    AuditOperation::Action,
                    Some(id),
                    Map::new(),
                );
                entry.action_name = Some(name.to_owned());
                entry
            })
            .collect();
        let recorded = record(&self.trail, &schema.name, &entries).await?;
        let result = self.child.execute(caller, name, filter, values).await?;
        if recorded {
            for entry in &entries {
                let confirmation = Confirmation {
                    record_id: entry.record_id.clone().unwrap_or_default(),
                    previous_values: Map::new(),
                    new_values: form.clone(),
                };
                confirm(&self.trail, &schema.name, entry.key, &confirmation).await;
            }
        }
        Ok(result)
    }
}

/// The form's values as an entry keeps them: a file (a data URI, which may weigh megabytes) by
/// its name and type only.
fn form_values(values: &FormValues) -> Map<String, Json> {
    values
        .iter()
        .map(|(field, value)| (field.clone(), without_file_bytes(value)))
        .collect()
}

fn without_file_bytes(value: &Json) -> Json {
    match value {
        Json::String(text) if text.starts_with("data:") => {
            let head = text.split_once(',').map_or(text.as_str(), |(head, _)| head);
            Json::String(format!("{head},…"))
        }
        Json::Array(items) => Json::Array(items.iter().map(without_file_bytes).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_entry_keeps_a_files_name_and_type_but_not_its_bytes() {
        let mut values = FormValues::new();
        values.insert("reason".into(), json!("damaged"));
        values.insert(
            "proof".into(),
            json!("data:image/png;name=box.png;base64,iVBORw0KGgo="),
        );
        values.insert(
            "pages".into(),
            json!(["data:application/pdf;name=a.pdf;base64,JVBERi0=", "plain"]),
        );
        assert_eq!(
            Json::Object(form_values(&values)),
            json!({
                "reason": "damaged",
                "proof": "data:image/png;name=box.png;base64,…",
                "pages": ["data:application/pdf;name=a.pdf;base64,…", "plain"],
            })
        );
    }
}
