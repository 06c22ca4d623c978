//! Workflows, runs and steps as JSON: the shapes the `/v1` API answers (platform-api.md), which
//! the MCP workflow tools and `canopy workflows runs` answer too. Times are written as
//! JavaScript's `toISOString` writes them.

use serde_json::{Map, Value as Json, json};

use super::engine::{Run, StepRow, WaitingReason};
use super::versions::Workflow;
use crate::platform::audit::iso;

/// A workflow's fields, as the API shows them.
pub fn workflow_json(workflow: &Workflow) -> Map<String, Json> {
    let mut out = Map::new();
    out.insert("object".into(), "workflow".into());
    out.insert("id".into(), workflow.id.clone().into());
    out.insert("name".into(), workflow.name.clone().into());
    out.insert(
        "collectionName".into(),
        workflow.collection_name.clone().into(),
    );
    out.insert("description".into(), workflow.description.clone().into());
    out.insert("active".into(), workflow.active.into());
    out.insert("source".into(), workflow.source.as_str().into());
    out.insert("sourceFile".into(), workflow.source_file.clone().into());
    out.insert("latestVersion".into(), workflow.latest_version.into());
    out.insert("createdByUserId".into(), workflow.created_by_user_id.into());
    out.insert("createdAt".into(), iso(workflow.created_at).into());
    out.insert("updatedAt".into(), iso(workflow.updated_at).into());
    out
}

/// A step as the API shows it; its input and output only with `details`.
pub fn step_json(step: &StepRow, details: bool) -> Json {
    let mut out = json!({
        "index": step.index,
        "key": step.key,
        "type": step.kind,
        "mode": step.mode,
        "status": step.status.as_str(),
        "revised": step.revised,
        "originalStepIndex": step.original_step_index,
        "attempt": step.attempt,
        "phase": step.phase,
        "selectedOption": step.selected_option,
        "approvalRequestId": step.approval_id,
        "errorMessage": step.error_message,
        "actorUserId": step.actor_user_id,
        "startedAt": step.started_at.map(iso),
        "finishedAt": step.finished_at.map(iso),
    });
    if details {
        out["input"] = step.input.clone();
        out["output"] = step.output.clone();
    }
    out
}

/// A run as the API shows it; `context` and `steps` only for one run.
pub fn run_json(run: &Run, context: bool, steps: Option<(&[StepRow], bool)>) -> Json {
    let mut out = json!({
        "id": run.id,
        "workflowId": run.workflow_id,
        "versionId": run.version_id,
        "collectionName": run.collection_name,
        "recordId": run.record_id,
        "state": run.state.as_str(),
        "waitingReason": run.waiting_reason.map(WaitingReason::as_str),
        "trigger": run.trigger_kind.as_str(),
        "userId": run.user_id,
        "startedByUserId": run.started_by_user_id,
        "assigneeUserId": run.assignee_user_id,
        "assigneeTeam": run.assignee_team,
        "parentRunId": run.parent_run_id,
        "currentStepIndex": run.current_step_index,
        "errorCode": run.error_code,
        "errorMessage": run.error_message,
        "createdAt": iso(run.created_at),
        "startedAt": run.started_at.map(iso),
        "updatedAt": iso(run.updated_at),
        "finishedAt": run.finished_at.map(iso),
    });
    if context {
        out["context"] = run.context.clone();
    }
    if let Some((steps, details)) = steps {
        out["steps"] = Json::Array(steps.iter().map(|s| step_json(s, details)).collect());
    }
    out
}
