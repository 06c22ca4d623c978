//! The workflow tools over `workflows::operations`, as the MCP user (the operations the `/v1`
//! routes and the console call): `listWorkflows` (the workflows they may read: all for an
//! admin, else those of the collections they may browse), `triggerWorkflow` (a manual start,
//! its `triggerWorkflow` activity entry marked `mcp`) and `getWorkflowRun` (a run they may see,
//! its values only when they may read its record). Answers are the `/v1` shapes
//! (`workflows::json`).

use serde_json::{Value as Json, json};

use super::calls::{Call, Outcome, direct};
use super::error;
use crate::platform::activity::Origin;
use crate::platform::{Store, User};
use crate::workflows::json::{run_json, workflow_json};
use crate::workflows::operations::{self, Acting};
use crate::workflows::versions::WorkflowFilter;
use crate::workflows::{Queued, triggers::Triggers};

/// Most workflows `listWorkflows` answers (the `/v1` listing's largest page).
const MAX_WORKFLOWS: i64 = 100;

/// The store and the MCP user as the store knows them now, once the private checks passed: a
/// disabled user, or one removed since they signed in, is refused as the `/v1` routes refuse
/// them.
async fn signed_in<'a>(call: &'a Call<'_>) -> Result<(&'a Store, User), String> {
    let store = call
        .state
        .store
        .as_ref()
        .ok_or("workflows need Canopy's store")?;
    direct(call).await.map_err(|e| error::text(&e))?;
    match store.user(call.caller.claims.user.id).await {
        Ok(Some(user)) if !user.disabled => Ok((store, user)),
        Ok(Some(_)) => Err(
            "Insufficient permissions for this operation: the user is disabled (HTTP 403)"
                .to_owned(),
        ),
        Ok(None) => Err("Invalid or missing API token (HTTP 401)".to_owned()),
        Err(e) => Err(error::text(&e.into())),
    }
}

/// The trigger service of the served environment.
fn triggers<'a>(call: &'a Call<'_>) -> Result<&'a Triggers, String> {
    call.state
        .workflow_triggers
        .as_deref()
        .ok_or_else(|| "Canopy's store is not available on this server (HTTP 503)".to_owned())
}

pub(super) async fn list_workflows(call: &Call<'_>) -> Outcome {
    let collection = call.text("collectionName")?;
    let (store, user) = signed_in(call).await?;
    let filter = WorkflowFilter {
        limit: MAX_WORKFLOWS,
        collection,
        ..WorkflowFilter::default()
    };
    let workflows = operations::readable_workflows(call.ops(), store, &user, filter)
        .await
        .map_err(|e| error::workflow_text(&e))?;
    let workflows: Vec<Json> = workflows
        .iter()
        .map(|w| Json::Object(workflow_json(w)))
        .collect();
    Ok(json!({ "workflows": workflows }))
}

pub(super) async fn trigger_workflow(call: &Call<'_>) -> Outcome {
    let workflow = call.required_text("workflowId")?;
    let record = call.id("recordId")?;
    if record.len() > 255 {
        return Err("recordId must be at most 255 characters".to_owned());
    }
    let (_, user) = signed_in(call).await?;
    let triggers = triggers(call)?;
    let found = triggers
        .store()
        .workflow_ref(&workflow)
        .await
        .map_err(|e| error::workflow_text(&e))?
        .ok_or_else(|| format!("workflow {workflow:?} not found (HTTP 404)"))?;
    let Some(version_id) = found.startable_version() else {
        return Err(format!(
            "the workflow {:?} has no active version (HTTP 404)",
            found.name
        ));
    };
    let request_id = uuid::Uuid::new_v4();
    let runner = triggers
        .runner(
            &call.ops().permissions,
            &user,
            &found.collection,
            request_id,
        )
        .await
        .map_err(|e| error::workflow_text(&e))?;
    let acting = Acting {
        user: &user,
        token_id: None,
        origin: Origin::Mcp,
    };
    let queued = operations::queue_manual(
        call.ops(),
        triggers,
        &acting,
        &runner,
        &found,
        version_id,
        &record,
        request_id,
    )
    .await
    .map_err(|e| error::workflow_text(&e))?;
    match queued {
        Queued::Created(run_id) => Ok(json!({ "runId": run_id })),
        Queued::Ongoing(_) => {
            Err("A run of this workflow is already ongoing on this record. (HTTP 409)".to_owned())
        }
    }
}

pub(super) async fn get_workflow_run(call: &Call<'_>) -> Outcome {
    let id = call.required_text("runId")?;
    let (store, user) = signed_in(call).await?;
    let (run, details) = operations::visible(call.ops(), store, &user, &id)
        .await
        .map_err(|e| error::workflow_text(&e))?;
    let steps = store
        .workflow_run_steps(&run.id)
        .await
        .map_err(|e| error::workflow_text(&e.into()))?;
    Ok(run_json(&run, details, Some((&steps, details))))
}
