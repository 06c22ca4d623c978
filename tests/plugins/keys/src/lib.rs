//! Keys read by a plugin, for every collection named in the options (`collections = [..]`, each
//! with an `id` key and a `copied` column of the same type):
//!
//! - a computed field `key_text`: the `id` of each row as text, from the batch the host sends;
//! - a Global action `Round trip`: lists the ids through `collections.list`, lists again with
//!   those cells (as they came) in an `In` filter, writes each into `copied` of its record, and
//!   answers with `{"kind": <column kind>, "ids": [<ids as text>], "matched": <rows found>}`.

use canopy_sdk::prelude::*;

struct Keys;

fn kind(column: &Column) -> &'static str {
    match column {
        Column::Numbers(_) => "numbers",
        Column::Strings(_) | Column::Texts(_) => "strings",
        Column::Booleans(_) => "booleans",
        Column::Json(_) => "json",
    }
}

fn round_trip(ctx: &ActionContext) -> Result<ActionResult> {
    let this = ctx.collection()?;
    let rows = this.list_page(
        &Value::Null,
        &["id"],
        &json!([{"field": "id", "ascending": true}]),
        None,
    )?;
    let column = rows.column("id")?;
    // The cells as they crossed: strings stay strings, numbers numbers.
    let cells: Vec<Value> = (0..rows.len()).map(|row| column.value(row)).collect();
    let matched = this
        .list(
            &json!({"field": "id", "operator": "In", "value": cells}),
            &["id"],
        )?
        .len();
    for cell in &cells {
        this.update(
            &json!({"field": "id", "operator": "Equal", "value": cell}),
            &json!({ "copied": cell }),
        )?;
    }
    let answer = json!({"kind": kind(column), "ids": rows.texts("id")?, "matched": matched});
    Ok(ActionResult::success(answer.to_string()))
}

impl Plugin for Keys {
    fn customize(ds: &mut DataSource) -> Result<()> {
        let names: Vec<String> = ds
            .options()
            .get("collections")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        for name in names {
            ds.customize_collection(&name, |c| {
                c.add_field(
                    "key_text",
                    ComputedField::new(ColumnType::STRING, ["id"], |rows, _| {
                        Ok(rows.texts("id")?.into())
                    }),
                )
                .add_action("Round trip", Action::new(Scope::Global, round_trip));
            });
        }
        Ok(())
    }
}

canopy_sdk::export_plugin!(Keys);
