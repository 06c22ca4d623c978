//! `plugin`: a plugin's workflow-step handler (`AppState::workflow_steps`, by plugin and
//! handler name) decides or computes. It gets the record's id, the run's context and the step's
//! settings, and answers an option (a step key the run goes to) and values kept in the context.
//! Its callbacks into the datasource run as the run's user.

use serde_json::Value as Json;

use super::{Outcome, StepCtx, StepError, StepResult, collection, data::record_id};
use crate::customizer::{Context, WorkflowStepInput};

/// `plugin`.
pub(super) async fn run(
    ctx: &StepCtx<'_>,
    plugin: &str,
    handler: &str,
    settings: &Json,
) -> StepResult<Outcome> {
    let schema = collection(ctx)?;
    record_id(ctx, schema)?;
    let Some(found) = ctx
        .state
        .workflow_steps
        .get(&(plugin.to_owned(), handler.to_owned()))
    else {
        // A reload may bring it back: a person can resume the run then.
        return Err(StepError::refused(format!(
            "no workflow step handler {handler:?} in the plugin {plugin:?} is loaded"
        )));
    };
    let input = WorkflowStepInput {
        collection: schema.name.clone(),
        record_id: ctx.run.record_id.clone(),
        context: ctx.run.context.clone(),
        settings: settings.clone(),
    };
    let context = Context {
        collection: Some(schema.name.clone()),
        datasource: ctx.state.datasource.clone(),
    };
    let output = found.run(ctx.caller, &context, &input).await?;
    if let Some(option) = &output.option
        && ctx.loaded.definition.steps.iter().all(|s| &s.key != option)
    {
        return Err(StepError::refused(format!(
            "the handler {plugin}/{handler} chose {option:?}, which is no step of the workflow"
        )));
    }
    Ok(Outcome::Done {
        output: Json::Object(output.values),
        option: output.option,
        skipped: false,
    })
}
