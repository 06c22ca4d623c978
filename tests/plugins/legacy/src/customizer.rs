// The customizer of the frozen-version fixtures, the same for 0.1.0 (`legacy`) and 0.2.0
// (`legacy2`, which includes this file): one computed field on `customers`, `shout`, the `name` in
// capitals, a slash and the number of customers, counted through the host's `collections.list`
// (so the version's imports are exercised too). Included, not a module: the generated bindings
// it names are each crate's own.

use canopy::plugin::collections;
use canopy::plugin::types::{
    ActionOutcome, Batch, CallContext, Column, Customization, Error, Kind,
};

struct Legacy;

fn no() -> Error {
    Error::Internal("not a handler of this plugin".to_owned())
}

impl exports::canopy::plugin::customizer::Guest for Legacy {
    fn declare(_: String, _: String) -> Result<Vec<Customization>, Error> {
        Ok(vec![Customization {
            collection: Some("customers".to_owned()),
            kind: Kind::Field,
            name: "shout".to_owned(),
            definition: r#"{"columnType": "String", "dependencies": ["name"]}"#.to_owned(),
            handler: 0,
        }])
    }

    fn compute(handler: u32, _: CallContext, rows: Batch) -> Result<Column, Error> {
        if handler != 0 {
            return Err(no());
        }
        let everyone = collections::list("customers", "null", &["id".to_owned()], "null", None)?;
        let names = rows
            .columns
            .into_iter()
            .find(|c| c.name == "name")
            .ok_or_else(|| Error::Internal("no `name` column".to_owned()))?;
        let Column::Strings(names) = names.data else {
            return Err(Error::Internal("`name` is not a string column".to_owned()));
        };
        Ok(Column::Strings(
            names
                .into_iter()
                .map(|n| n.map(|n| format!("{}/{}", n.to_uppercase(), everyone.len)))
                .collect(),
        ))
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
    fn write(_: u32, _: CallContext, _: String) -> Result<Option<String>, Error> {
        Err(no())
    }
    fn replace_operator(_: u32, _: CallContext, _: String) -> Result<String, Error> {
        Err(no())
    }
    fn override_operation(_: u32, _: CallContext, _: String) -> Result<Option<String>, Error> {
        Err(no())
    }
}

