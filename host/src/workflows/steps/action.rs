//! `trigger-action`: runs a collection action on the run's record as the run's user, through the
//! action operations (`ops::actions`: the selection within the user's scope, the §5.4
//! checks, the form then the execution). An action that needs an approval files an approval
//! request, as `POST …/approval-requests` would, and the run waits (reason `approval`) until
//! the request is decided (`control::approval_decided`).
//!
//! The action and the request are side effects: each runs under the write-ahead marker
//! ([`once`]), so a crash never makes them run twice.

use std::collections::BTreeMap;
use std::future::Future;

use serde_json::{Value as Json, json};

use super::data::{first, record_id, uncertain};
use super::{Given, Outcome, StepCtx, StepError, StepResult, collection, entry, template};
use crate::agent::action::{ResultBody, parse_values, result_body, slug};
use crate::agent::query_string::QueryString;
use crate::datasource::Projection;
use crate::datasource::action::ActionOutcome;
use crate::ops::actions::{self as route, Target};
use crate::platform::activity::{Action, Status};
use crate::workflows::engine::WaitingReason;
use crate::workflows::engine::store::StepWait;

/// Runs `effect`, a side effect of the step, under the write-ahead marker: `Some` when it ran
/// now; `None` when the marker was already set (it may have run: it is not run again). An
/// effect that fails with an error did not happen: the marker is cleared so it may be retried.
pub(super) async fn once<T>(
    ctx: &StepCtx<'_>,
    effect: impl Future<Output = StepResult<T>>,
) -> StepResult<Option<T>> {
    if !ctx.store.mark_executing(&ctx.run.id, ctx.row.index).await? {
        return Ok(None);
    }
    match effect.await {
        Ok(done) => Ok(Some(done)),
        Err(error) => {
            ctx.store
                .clear_executing(&ctx.run.id, ctx.row.index)
                .await?;
            Err(error)
        }
    }
}

/// `trigger-action`.
pub(super) async fn trigger(
    ctx: &StepCtx<'_>,
    action: &str,
    values: &BTreeMap<String, Json>,
    given: Option<&Given<'_>>,
) -> StepResult<Outcome> {
    let schema = collection(ctx)?;
    let (name, _) = schema
        .actions
        .iter()
        .find(|(name, _)| *name == action || slug(name) == action)
        .ok_or_else(|| {
            StepError::definition(format!("{} has no action {action:?}", schema.name))
        })?;
    let scope = schema.actions[name].scope;
    let name = name.clone();
    let mut values = template::resolve_map(values, &ctx.run.context)?;
    if let Some(given) = given {
        values.extend(given.values());
    }
    // A bad id fails the run here, before any action code sees it.
    record_id(ctx, schema)?;
    let attributes = json!({
        "collection_name": schema.name,
        "ids": [ctx.run.record_id],
        "all_records": false,
        "all_records_ids_excluded": [],
        "values": values,
    });
    let body = json!({"data": {"type": "custom-action-requests", "attributes": attributes}});
    let query = QueryString::parse("timezone=UTC");
    let target = Target::parse(ctx.state, &query, schema, scope, &body)?;
    let selection = route::selection(ctx.state, ctx.caller, schema, target).await?;
    let keys = Projection::new(schema.primary_keys().into_iter().map(str::to_owned));
    if first(ctx, schema, selection.for_caller.clone(), &keys)
        .await?
        .is_none()
    {
        return Err(StepError::not_found(format!(
            "record {} of {} not found (or outside the scope of the run's user)",
            ctx.run.record_id, schema.name
        )));
    }
    match route::check(ctx.state, ctx.caller, schema, &name, &selection, None).await {
        Ok(()) => {}
        Err(crate::ops::Error::Auth(crate::auth::Error::ActionRequiresApproval {
            role_ids_allowed_to_approve,
        })) => {
            return request_approval(ctx, &name, &attributes, role_ids_allowed_to_approve).await;
        }
        Err(error) => return Err(error.into()),
    }
    let form_values = parse_values(&body).map_err(crate::ops::Error::from)?;
    let ran = once(ctx, async {
        route::perform(
            ctx.state,
            ctx.caller,
            schema,
            &name,
            &selection.for_caller,
            &form_values,
        )
        .await
        .map_err(StepError::from)
    })
    .await?;
    let Some(result) = ran else {
        return Ok(uncertain());
    };
    if let ActionOutcome::Error { message, .. } = &result.outcome {
        // It ran and said no: done (never run again by itself), and a person decides.
        let message = format!("the action {name:?} answered an error: {message}");
        return Ok(Outcome::Wait(
            WaitingReason::StepFailed,
            StepWait {
                failed: Some(message),
                done: true,
                prepared: Some(json!({"outcome": outcome_json(result.outcome)})),
                ..StepWait::default()
            },
        ));
    }
    Ok(Outcome::done(json!({
        "action": name,
        "outcome": outcome_json(result.outcome),
    })))
}

/// Files the approval request the action needs, requested by the run's user, and waits.
async fn request_approval(
    ctx: &StepCtx<'_>,
    name: &str,
    attributes: &Json,
    roles: Vec<i64>,
) -> StepResult<Outcome> {
    let schema = collection(ctx)?;
    let filed = once(ctx, async {
        ctx.store
            .create_approval(
                ctx.caller.id,
                &ctx.caller.email,
                &schema.name,
                name,
                attributes,
            )
            .await
            .map_err(StepError::from)
    })
    .await?;
    let Some(approval) = filed else {
        return Ok(uncertain());
    };
    ctx.state.activity.record(entry(
        ctx.run,
        &ctx.loaded.workflow_name,
        ctx.caller,
        Action::CreateApproval,
        &format!(
            "step {}: {name} (approval request {})",
            ctx.step.key, approval.id
        ),
        Status::Completed,
    ));
    tracing::info!(
        run = ctx.run.id,
        approval = approval.id,
        action = name,
        "workflow run waits for an approval"
    );
    Ok(Outcome::Wait(
        WaitingReason::Approval,
        StepWait {
            approval_id: Some(approval.id),
            done: true,
            prepared: Some(json!({
                "action": name,
                "approvalRequestId": approval.id,
                "roleIdsAllowedToApprove": roles,
            })),
            ..StepWait::default()
        },
    ))
}

/// What running the action answered: its status and body, or a file's name, type and size.
pub(crate) fn outcome_json(outcome: ActionOutcome) -> Json {
    match result_body(outcome) {
        ResultBody::Json { status, body } => json!({"status": status, "body": body}),
        ResultBody::File {
            name,
            mime_type,
            bytes,
        } => json!({
            "status": 200,
            "file": {"name": name, "mimeType": mime_type, "size": bytes.len()},
        }),
    }
}
