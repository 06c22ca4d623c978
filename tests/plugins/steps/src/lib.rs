//! Workflow-step handlers for the workflow-step tests (`tests/e2e/plugin_steps.rs`), on any
//! collection (the run's):
//!
//! - `review`: reads the run's order (`amount`, `status`) through the host's `collections`
//!   interface and decides: `refund` when it is paid and its amount is at most the step's
//!   `limit` setting (default 15), else `escalate`; keeps the amount and status in the context.
//! - `echo`: answers its input (record id, run context, settings, caller, collection), plus the
//!   run's record with the fields named by the `fields` setting, and no option.
//! - `refuses`: a guest error; `panics`: a panic; `loops`: never ends; `bomb`: allocates until
//!   the memory limit stops it.

use canopy_sdk::prelude::*;

struct Steps;

/// A number the wire may give as a number or as exact text (`"12.30"`).
fn number(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn review(step: &StepContext) -> Result<StepOutput> {
    let order = step.get_record(&["amount", "status"])?;
    let amount = number(&order["amount"]).unwrap_or(0.0);
    let limit = step.setting("limit").and_then(number).unwrap_or(15.0);
    let paid = order["status"] == json!("paid");
    let option = if paid && amount <= limit {
        "refund"
    } else {
        "escalate"
    };
    Ok(StepOutput::choose(option)
        .value("amount", json!(amount))
        .value("status", order["status"].clone()))
}

fn echo(step: &StepContext) -> Result<StepOutput> {
    let fields: Vec<&str> = step
        .setting("fields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let record = if fields.is_empty() {
        Value::Null
    } else {
        step.get_record(&fields)?
    };
    Ok(StepOutput::next()
        .value("recordId", json!(step.record_id()))
        .value("context", step.run_context().clone())
        .value("settings", step.settings().clone())
        .value("caller", json!(step.caller().email))
        .value("collection", json!(step.context().collection))
        .value("record", record))
}

impl Plugin for Steps {
    fn customize(ds: &mut DataSource) -> Result<()> {
        ds.add_workflow_step("review", review)
            .add_workflow_step("echo", echo)
            .add_workflow_step("refuses", |_| {
                Err(Error::validation("the step refuses this record"))
            })
            .add_workflow_step("panics", |_| panic!("the step panicked on purpose"))
            .add_workflow_step("loops", |_| {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            })
            .add_workflow_step("bomb", |_| {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            });
        Ok(())
    }
}

canopy_sdk::export_plugin!(Steps);
