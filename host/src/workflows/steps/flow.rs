//! Steps that steer the run rather than touch data: `escalation` hands the run to a team or a
//! user (it waits until one of them resumes it), `sub-workflow` queues a run of another
//! workflow and waits for it to end. (`go-to` and `end` need no work: the engine follows them.)

use serde_json::{Value as Json, json};
use sqlx::Row as _;

use super::data::uncertain;
use super::{Outcome, StepCtx, StepError, StepResult, action::once};
use crate::workflows::engine::WaitingReason;
use crate::workflows::engine::store::StepWait;
use crate::workflows::runs::{NewRun, Queued, TriggerKind};

/// `escalation`: the run waits (reason `escalation`), assigned to the team or user named.
pub(super) async fn escalate(
    ctx: &StepCtx<'_>,
    team: Option<&str>,
    user: Option<&str>,
    message: Option<&str>,
) -> Outcome {
    let assignee_team = match team {
        Some(name) => match ctx.store.team_by_name(name).await {
            Ok(Some(team)) => Some(team.name),
            Ok(None) => {
                return Outcome::Failed(StepError::definition(format!("no team {name:?}")));
            }
            Err(error) => return Outcome::Failed(error.into()),
        },
        None => None,
    };
    let assignee_user_id = match user {
        Some(email) => match ctx.store.user_by_email(email).await {
            Ok(Some(user)) => Some(user.id),
            Ok(None) => {
                return Outcome::Failed(StepError::definition(format!("no user {email:?}")));
            }
            Err(error) => return Outcome::Failed(error.into()),
        },
        None => None,
    };
    Outcome::Wait(
        WaitingReason::Escalation,
        StepWait {
            prepared: Some(json!({
                "team": assignee_team,
                "userId": assignee_user_id,
                "message": message,
            })),
            assignee_team,
            assignee_user_id,
            ..StepWait::default()
        },
    )
}

/// `sub-workflow`: queues a run of the workflow named (its latest active version) on the run's
/// record, or on the record a `load-related` step kept, as the run's user; the run waits
/// (reason `sub_workflow`) until that run ends (`store::wake_parent`).
pub(super) async fn sub_workflow(
    ctx: &StepCtx<'_>,
    workflow: &str,
    record: Option<&str>,
) -> StepResult<Outcome> {
    let row = sqlx::query(
        "SELECT id, collection_name, active, latest_version FROM workflows \
         WHERE project = $1 AND environment = $2 AND name = $3",
    )
    .bind(ctx.store.project())
    .bind(ctx.store.environment())
    .bind(workflow)
    .fetch_optional(ctx.store.pool())
    .await
    .map_err(crate::platform::Error::from)?
    .ok_or_else(|| StepError::definition(format!("no workflow {workflow:?}")))?;
    let workflow_id: String = row.try_get(0).map_err(crate::platform::Error::from)?;
    let collection: String = row.try_get(1).map_err(crate::platform::Error::from)?;
    let active: i64 = row.try_get(2).map_err(crate::platform::Error::from)?;
    let latest: i64 = row.try_get(3).map_err(crate::platform::Error::from)?;
    if active == 0 {
        return Err(StepError::refused(format!(
            "the workflow {workflow:?} is not active"
        )));
    }
    let version_id: String =
        sqlx::query("SELECT id FROM workflow_versions WHERE workflow_id = $1 AND version = $2")
            .bind(&workflow_id)
            .bind(latest)
            .fetch_optional(ctx.store.pool())
            .await
            .map_err(crate::platform::Error::from)?
            .ok_or_else(|| {
                StepError::definition(format!("the workflow {workflow:?} has no version {latest}"))
            })?
            .try_get(0)
            .map_err(crate::platform::Error::from)?;
    let (record_collection, record_id) = match record {
        Some(key) => {
            let kept = ctx.run.context.get(key);
            let id = kept.and_then(|k| k.get("id")).and_then(Json::as_str);
            let of = kept
                .and_then(|k| k.get("collection"))
                .and_then(Json::as_str);
            match (of, id) {
                (Some(of), Some(id)) => (of.to_owned(), id.to_owned()),
                _ => {
                    return Err(StepError::refused(format!(
                        "the step {key:?} kept no related record for the sub-workflow"
                    )));
                }
            }
        }
        None => (ctx.run.collection_name.clone(), ctx.run.record_id.clone()),
    };
    if record_collection != collection {
        return Err(StepError::definition(format!(
            "the workflow {workflow:?} runs on {collection}, not on {record_collection}"
        )));
    }
    let child = NewRun {
        workflow_id,
        version_id,
        collection_name: collection,
        record_id,
        trigger_kind: TriggerKind::SubWorkflow,
        trigger_id: None,
        trigger_url_version: None,
        user_id: ctx.run.user_id,
        token_id: ctx.run.token_id.clone(),
        parent_run_id: Some(ctx.run.id.clone()),
    };
    let queued = once(ctx, async {
        ctx.store.queue_run(&child).await.map_err(StepError::from)
    })
    .await?;
    match queued {
        None => Ok(uncertain()),
        Some(Queued::Created(id)) => Ok(Outcome::Wait(
            WaitingReason::SubWorkflow,
            StepWait {
                prepared: Some(json!({"runId": id, "workflow": workflow})),
                done: true,
                ..StepWait::default()
            },
        )),
        Some(Queued::Ongoing(_)) => {
            // Nothing was created: the step did not happen.
            ctx.store
                .clear_executing(&ctx.run.id, ctx.row.index)
                .await?;
            Err(StepError::refused(format!(
                "a run of {workflow:?} is already ongoing on that record"
            )))
        }
    }
}
