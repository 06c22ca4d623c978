//! The flattener plugin (the Node agent's `@forestadmin/plugin-flattener`, protocol §10):
//!
//! - `flattenColumn` and `flattenJsonColumn` add one computed field per leaf of a composite or
//!   JSON column (`address@@@city`), writable through Before Create/Update hooks that rebuild the
//!   nested object (merged into each record's current value on update);
//! - `flattenRelation` imports every column of a to-one relation chain (`customer@@@email`).
//!
//! Configured in `flattener.toml` (see the crate's README): `[options]` keyed by collection then
//! function. Applied to one collection (a `[[use]]` entry with `collection`, or another plugin's
//! `use_plugin` on a collection), the options are that collection's functions directly.
//!
//! The logic lives in [`plan`] (options and schema to steps) and [`nested`] (values); this file
//! only declares the steps through `canopy-sdk`.

pub mod nested;
pub mod plan;

use canopy_sdk::prelude::*;

use crate::plan::{FieldType, Step};

struct Flattener;

impl Plugin for Flattener {
    fn customize(ds: &mut DataSource) -> Result<()> {
        let options = match ds.scope() {
            Some(collection) => {
                let mut scoped = serde_json::Map::new();
                scoped.insert(collection.to_owned(), ds.options().clone());
                Value::Object(scoped)
            }
            None => ds.options().clone(),
        };
        let steps = plan::plan(ds.schema(), &options)
            .map_err(|e| Error::validation(format!("flattener: {e}")))?;
        for step in steps {
            declare(ds, step);
        }
        Ok(())
    }
}

canopy_sdk::export_plugin!(Flattener);

fn declare(ds: &mut DataSource, step: Step) {
    match step {
        Step::Field {
            collection,
            name,
            column,
            parts,
            field_type,
        } => {
            let column_type = match &field_type {
                FieldType::Primitive(p) => ColumnType::Primitive(p),
                FieldType::Enum(_) => ColumnType::ENUM,
                FieldType::Composite(ty) => ColumnType::Composite(ty.clone()),
            };
            let enum_values = match &field_type {
                FieldType::Enum(values) => Some(values.clone()),
                _ => None,
            };
            let dependency = column.clone();
            let mut field = ComputedField::new(column_type, [column], move |rows, _| {
                let cells = rows.column(&dependency)?;
                let values = (0..rows.len()).map(|i| nested::leaf(&cells.value(i), &parts));
                Ok(typed_column(values, &field_type))
            });
            if let Some(values) = enum_values {
                field = field.enum_values(values);
            }
            ds.collection(&collection).add_field(&name, field);
        }
        Step::CreateHook { collection, paths } => {
            ds.collection(&collection)
                .add_hook(Position::Before, Operation::Create, move |ctx| {
                    for record in ctx.data_mut().into_iter().flatten() {
                        if let Some(record) = record.as_object_mut() {
                            nested::unflatten_in_place(&paths, record);
                        }
                    }
                    Ok(())
                });
        }
        Step::UpdateHook {
            collection,
            column,
            paths,
            primary_keys,
        } => {
            ds.collection(&collection)
                .add_hook(Position::Before, Operation::Update, move |ctx| {
                    update_hook(ctx, &column, &paths, &primary_keys)
                });
        }
        Step::Writable { collection, name } => {
            // Never called: the Before hooks (above the write layer) have already moved the
            // flattened keys into the column. Declaring it marks the field writable.
            ds.collection(&collection)
                .replace_field_writing(&name, |_, _| Ok(None));
        }
        Step::Import {
            collection,
            name,
            path,
            readonly,
        } => {
            ds.collection(&collection)
                .import_field(&name, &path, readonly);
        }
        Step::Remove { collection, name } => {
            ds.collection(&collection).remove_field(&name);
        }
    }
}

/// The values of a leaf as the column the host expects for the field's type: numbers, booleans
/// and strings typed (a value of another JSON kind is converted when it can be, null otherwise),
/// anything else as JSON.
fn typed_column(values: impl Iterator<Item = Value>, field_type: &FieldType) -> Column {
    match field_type {
        FieldType::Primitive("Number") => Column::Numbers(
            values
                .map(|v| match v {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => s.trim().parse().ok(),
                    _ => None,
                })
                .collect(),
        ),
        FieldType::Primitive("Boolean") => Column::Booleans(values.map(|v| v.as_bool()).collect()),
        FieldType::Primitive(
            "String" | "Date" | "Dateonly" | "Time" | "Timeonly" | "Enum" | "Uuid",
        )
        | FieldType::Enum(_) => Column::Strings(
            values
                .map(|v| match v {
                    Value::Null => None,
                    Value::String(s) => Some(s),
                    other => Some(other.to_string()),
                })
                .collect(),
        ),
        _ => Column::json(values),
    }
}

/// Before Update: moves the flattened keys into the column; then, as each record keeps the keys
/// of its current value that the patch does not name, re-reads the matched records, merges the
/// nested patch into each one's value and groups records needing the same value. One group: its
/// value is the patch's. Several: one update per group here, and the column leaves the patch.
fn update_hook(
    ctx: &mut HookContext,
    column: &str,
    paths: &[String],
    primary_keys: &[String],
) -> Result<()> {
    let filter = ctx.get("filter").clone();
    let nested_patch = {
        let Some(patch) = ctx.patch_mut() else {
            return Ok(());
        };
        nested::unflatten_in_place(paths, patch);
        match patch.get(column) {
            // A null or absent column: nothing to merge (setting the column itself is a plain
            // write of it).
            None | Some(Value::Null) => return Ok(()),
            Some(v) => v.clone(),
        }
    };
    if primary_keys.is_empty() {
        return Err(Error::unprocessable(format!(
            "cannot update '{column}' through its flattened fields: the collection has no \
             primary key"
        )));
    }
    let this = ctx.context().this()?;
    let mut projection: Vec<&str> = primary_keys.iter().map(String::as_str).collect();
    projection.push(column);
    let rows = this.list(&filter, &projection)?;
    let records = (0..rows.len())
        .map(|i| {
            let keys = primary_keys.iter().map(|k| rows.value(i, k)).collect();
            (keys, nested::object_cell(rows.value(i, column)))
        })
        .collect();
    let mut groups = nested::group_by_merged(records, &nested_patch);
    let Some(patch) = ctx.patch_mut() else {
        return Ok(());
    };
    if groups.len() == 1
        && let Some(group) = groups.pop()
    {
        patch.insert(column.to_owned(), group.value);
        return Ok(());
    }
    patch.remove(column);
    for group in groups {
        let tree = nested::match_records(primary_keys, &group.keys);
        let mut group_patch = serde_json::Map::new();
        group_patch.insert(column.to_owned(), group.value);
        this.update(&tree, &Value::Object(group_patch))?;
    }
    Ok(())
}
