//! A plugin built against the frozen `canopy:plugin@0.2.0` (`wit/plugin@0.2.0`) with its own
//! wit-bindgen generation, as plugins built before 0.3.0 were: the host must keep loading it,
//! computing its field with one string per text cell (0.3.0 packs them) and running its workflow
//! step through 0.2.0's link names. The customizer is `legacy`'s (the same `shout` field); the
//! one workflow step, `stamp`, answers `{"built": "0.2.0", "record": <the run's record id>}`.
#![allow(unsafe_code, reason = "wit-bindgen glue")]

wit_bindgen::generate!({ world: "customization", path: "../../../wit/plugin@0.2.0" });

include!("../../legacy/src/customizer.rs");

use exports::canopy::plugin::workflow::{StepDeclaration, StepInput, StepOutput};

impl exports::canopy::plugin::workflow::Guest for Legacy {
    fn declare_steps() -> Result<Vec<StepDeclaration>, Error> {
        Ok(vec![StepDeclaration {
            name: "stamp".to_owned(),
            handler: 0,
        }])
    }

    fn workflow_step(
        handler: u32,
        _: CallContext,
        input: StepInput,
    ) -> Result<StepOutput, Error> {
        if handler != 0 {
            return Err(no());
        }
        Ok(StepOutput {
            option: None,
            values_json: format!(
                r#"{{"built": "0.2.0", "record": "{}"}}"#,
                input.record_id.replace(['"', '\\'], "")
            ),
        })
    }
}

export!(Legacy);
