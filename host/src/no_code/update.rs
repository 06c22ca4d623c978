//! Update-record actions: one `update` of the selection with the configured values. The values
//! are typed against the collection when the plugins load, with the checks of the agent's
//! update route (unknown, read-only and relation fields, wrong types, enum values), so a
//! definition that cannot work stops the load instead of failing on each click.

use async_trait::async_trait;
use indexmap::IndexMap;
use serde_json::{Value as Json, json};

use crate::config::NoCodeAction;
use crate::customizer::{ActionContext, ActionHandler};
use crate::datasource::action::{ActionOutcome, ActionResult, FormElement, FormPhase};
use crate::datasource::{Caller, CollectionSchema, Record, Result};
use crate::ops::Public;

/// `fields` as the patch the action writes on `collection`.
pub(super) fn patch(
    fields: &IndexMap<String, Json>,
    collection: &CollectionSchema,
) -> std::result::Result<Record, String> {
    let body = json!({"data": {"attributes": fields}});
    crate::agent::body::parse_update(&body, collection).map_err(|e| e.to_string())
}

pub(super) struct UpdateRecord {
    name: String,
    patch: Record,
}

impl UpdateRecord {
    pub(super) fn new(action: &NoCodeAction, patch: Record) -> Self {
        Self {
            name: action.name.clone(),
            patch,
        }
    }
}

#[async_trait]
impl ActionHandler for UpdateRecord {
    async fn form(
        &self,
        _caller: &Caller,
        _ctx: &ActionContext,
        _phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        // No form: the action layer answers the declared (empty) one.
        Ok(Vec::new())
    }

    async fn execute(&self, caller: &Caller, ctx: &ActionContext) -> Result<ActionResult> {
        let written = async {
            let collection = ctx.base.collection()?;
            collection.update(caller, &ctx.filter, &self.patch).await
        }
        .await;
        match written {
            Ok(()) => Ok(ActionResult::success("Success")),
            Err(error) => {
                // As the agent: an error the person can act on (a constraint, a hook's refusal)
                // is named after the generic message; any other is only logged.
                let public = Public::of_datasource(&error);
                let mut message = super::misconfigured(&self.name);
                if public.expose && public.status < 500 {
                    message.push_str(&format!("<br/>({}: {error})", public.name));
                }
                tracing::warn!(action = %self.name, %error, "a no-code update-record action failed");
                Ok(ActionResult::from(ActionOutcome::Error {
                    message,
                    html: None,
                }))
            }
        }
    }
}
