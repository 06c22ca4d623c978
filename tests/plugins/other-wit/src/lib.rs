//! The same contract under a version this host does not implement (`canopy:plugin@0.9.0`): it
//! must be refused at load with a message naming the versions, not with a raw link error.
#![allow(unsafe_code, reason = "wit-bindgen glue")]

wit_bindgen::generate!({ world: "customization", path: "wit" });

use canopy::plugin::types::{ActionOutcome, Batch, CallContext, Column, Customization, Error};

struct Other;

fn no() -> Error {
    Error::Internal("not implemented".to_owned())
}

impl exports::canopy::plugin::customizer::Guest for Other {
    fn declare(_: String, _: String) -> Result<Vec<Customization>, Error> {
        Ok(Vec::new())
    }
    fn compute(_: u32, _: CallContext, _: Batch) -> Result<Column, Error> {
        Err(no())
    }
    fn action_form(_: u32, _: CallContext, _: String) -> Result<String, Error> {
        Err(no())
    }
    fn action_execute(_: u32, _: CallContext, _: String) -> Result<ActionOutcome, Error> {
        Err(no())
    }
    fn hook(_: u32, _: CallContext, _: String) -> Result<Option<String>, Error> {
        Err(no())
    }
    fn segment(_: u32, _: CallContext) -> Result<String, Error> {
        Err(no())
    }
    fn search(_: u32, _: CallContext, _: String, _: bool) -> Result<Option<String>, Error> {
        Err(no())
    }
    fn chart(_: u32, _: CallContext, _: String) -> Result<String, Error> {
        Err(no())
    }
}

export!(Other);
