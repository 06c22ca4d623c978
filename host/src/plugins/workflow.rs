//! Workflow-step handlers (`wit/plugin@0.2.0`, interface `workflow`): each one a plugin declared
//! is a `customizer::Kind::WorkflowStep`, and the workflow engine calls it through
//! `WorkflowStepHandler` for the `plugin` steps of runs, under the plugin's limits
//! (`workflow_step_ms`, its memory limit, its guard), always in a fresh instance.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value as Json;

use super::bindings::{Scope, v2};
use super::convert;
use super::loader::CallKind;
use super::runtime::{Plugin, Request, Response};
use crate::customizer::{
    Context, Customization, Kind, WorkflowStepHandler, WorkflowStepInput, WorkflowStepOutput,
};
use crate::datasource::{Caller, Result};

/// One declared workflow-step handler of one application of a plugin.
pub struct StepHandler {
    plugin: Arc<Plugin>,
    id: u32,
}

/// The workflow steps `plugin` declared, as customizations named by the plugin (its file stem).
pub fn customizations(plugin: &Arc<Plugin>) -> Vec<Customization> {
    plugin
        .workflow_steps
        .iter()
        .map(|step| {
            Customization::datasource(
                plugin.info.name.clone(),
                Kind::WorkflowStep {
                    name: step.name.clone(),
                    handler: Arc::new(StepHandler {
                        plugin: Arc::clone(plugin),
                        id: step.handler,
                    }),
                },
            )
        })
        .collect()
}

#[async_trait]
impl WorkflowStepHandler for StepHandler {
    async fn run(
        &self,
        caller: &Caller,
        ctx: &Context,
        input: &WorkflowStepInput,
    ) -> Result<WorkflowStepOutput> {
        // The handler works on the run's collection, whatever context the engine holds.
        let ctx = Context {
            collection: Some(input.collection.clone()),
            datasource: Arc::clone(&ctx.datasource),
        };
        let request = Request::WorkflowStep(
            self.id,
            convert::call_context(caller, &ctx),
            v2::StepInput {
                record_id: input.record_id.clone(),
                context_json: input.context.to_string(),
                settings_json: input.settings.to_string(),
            },
        );
        let scope = Scope {
            caller: caller.clone(),
            ctx,
        };
        let response = self
            .plugin
            .call(CallKind::WorkflowStep, Some(scope), request)
            .await?;
        let Response::Step(output) = response else {
            return Err(self.plugin.malformed("an answer of the wrong kind"));
        };
        let values = match serde_json::from_str::<Json>(&output.values_json) {
            Ok(Json::Object(values)) => values,
            Ok(other) => {
                return Err(self.plugin.malformed(&format!(
                    "workflow step values must be a JSON object, not {other}"
                )));
            }
            Err(e) => {
                return Err(self
                    .plugin
                    .malformed(&format!("workflow step values are not JSON ({e})")));
            }
        };
        Ok(WorkflowStepOutput {
            option: output.option,
            values,
        })
    }
}
