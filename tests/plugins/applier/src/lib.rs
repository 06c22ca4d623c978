//! Plugins on plugins. Options:
//! - `field`, `value`: when applied to a collection (`ds.scope()`), adds the String field
//!   `field` whose value is `value` on every record, so each application's options and scope are
//!   visible on the wire;
//! - `uses`: `[{"plugin", "collection"?, "options"?}]`, each applied with `use_plugin` (to the
//!   collection, or to the datasource); without `options` the entry passes this application's
//!   own options on (which lets a test build a cycle);
//! - `emulateFiltering`: `[{"collection", "field"}]`, each made filterable by emulation
//!   (`emulate_field_filtering`), whichever plugin adds the field.

use canopy_sdk::prelude::*;

struct Applier;

impl Plugin for Applier {
    fn customize(ds: &mut DataSource) -> Result<()> {
        let options = ds.options().clone();
        if let (Some(scope), Some(field)) = (
            ds.scope().map(str::to_owned),
            options.get("field").and_then(Value::as_str),
        ) {
            let value = options
                .get("value")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            ds.collection(&scope).add_field(
                field,
                ComputedField::new(ColumnType::STRING, ["id"], move |rows, _ctx| {
                    Ok(vec![Some(value.clone()); rows.len()].into())
                }),
            );
        }
        for entry in options
            .get("emulateFiltering")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(collection), Some(field)) = (
                entry.get("collection").and_then(Value::as_str),
                entry.get("field").and_then(Value::as_str),
            ) else {
                return Err(Error::validation(
                    "an `emulateFiltering` entry needs `collection` and `field`",
                ));
            };
            ds.collection(collection).emulate_field_filtering(field);
        }
        for entry in options
            .get("uses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let plugin = entry
                .get("plugin")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::validation("a `uses` entry without `plugin`"))?;
            let used_options = entry.get("options").cloned().unwrap_or(options.clone());
            match entry.get("collection").and_then(Value::as_str) {
                Some(c) => {
                    ds.collection(c).use_plugin(plugin, used_options);
                }
                None => {
                    ds.use_plugin(plugin, used_options);
                }
            }
        }
        Ok(())
    }
}

canopy_sdk::export_plugin!(Applier);
