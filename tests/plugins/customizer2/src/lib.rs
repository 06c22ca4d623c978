//! Every customizer method of issue 5 on the e2e shop fixture (`tests/e2e/list.rs` plus `tags`,
//! `customer_tags` and `files`, see `tests/e2e/plugins_customizer.rs`), grouped so that a test
//! loads only the group it checks: option `kinds`, a list of `relations`, `fields`,
//! `validation`, `writing`, `binary`, `sorting`, `filtering`, `overrides`, `count`, and `bad`
//! (a validation with an unknown operator, refused at load).

use canopy_sdk::prelude::*;

struct Customizer2;

/// `displayName` = `name` + `!` (a computed field the writing, sorting and filtering groups use).
fn display_name() -> ComputedField {
    ComputedField::new(ColumnType::STRING, ["name"], |rows, _ctx| {
        Ok(rows
            .strings("name")?
            .iter()
            .map(|n| n.as_ref().map(|n| format!("{n}!")))
            .collect::<Vec<_>>()
            .into())
    })
}

fn strip_bang(v: &Value) -> Value {
    v.as_str()
        .map_or(Value::Null, |s| json!(s.trim_end_matches('!')))
}

impl Plugin for Customizer2 {
    fn customize(ds: &mut DataSource) -> Result<()> {
        let kinds: Vec<String> = ds
            .options()
            .get("kinds")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        let has = |k: &str| kinds.iter().any(|x| x == k);

        if has("writing") || has("sorting") || has("filtering") {
            ds.collection("customers")
                .add_field("displayName", display_name());
        }
        if has("relations") {
            ds.collection("orders").add_many_to_one_relation(
                "buyer",
                "customers",
                ManyToOneOptions::new("customer_id"),
            );
            ds.collection("customers")
                .add_one_to_many_relation(
                    "myOrders",
                    "orders",
                    OneToManyOptions::new("customer_id"),
                )
                .add_many_to_many_relation(
                    "labels",
                    "tags",
                    "customer_tags",
                    ManyToManyOptions::new("customer_id", "tag_id"),
                )
                .add_external_relation(
                    "notes",
                    ExternalRelation::new(json!({"text": "String"}), |record, _ctx| {
                        Ok(vec![json!({"text": format!("note {}", record["id"])})])
                    }),
                );
            ds.collection("countries").add_one_to_one_relation(
                "resident",
                "customers",
                OneToOneOptions::new("country_id"),
            );
        }
        if has("fields") {
            ds.collection("orders")
                .import_field("buyerName", "customer:name", true)
                .remove_field("note");
            ds.collection("customers").rename_field("email", "mail");
            ds.remove_collection("order_lines");
        }
        if has("validation") {
            ds.collection("customers")
                .add_field_validation("name", "LongerThan", json!(1));
            ds.collection("orders").set_field_nullable("status");
        }
        if has("writing") {
            ds.collection("customers")
                .replace_field_writing("displayName", |value, ctx| {
                    // On update the patch is all the handler sees of the record; a create
                    // carries the whole record (its `vip` flag marks the name).
                    let name = strip_bang(value);
                    let name = name.as_str().unwrap_or_default();
                    let vip = ctx.action == WriteAction::Create
                        && ctx.record.get("vip") == Some(&json!(true));
                    let name = if vip {
                        format!("VIP {name}")
                    } else {
                        name.to_owned()
                    };
                    Ok(Some(json!({ "name": name })))
                });
        }
        if has("binary") {
            ds.collection("files")
                .replace_field_binary_mode("data", BinaryMode::Hex);
        }
        if has("sorting") {
            ds.collection("customers")
                .emulate_field_sorting("displayName");
            ds.collection("orders")
                .replace_field_sorting("status", [("amount", false)])
                .disable_field_sorting("note");
        }
        if has("filtering") {
            ds.collection("customers")
                .replace_field_operator("displayName", "Equal", |value, _ctx| {
                    Ok(json!({"field": "name", "operator": "Equal", "value": strip_bang(value)}))
                })
                .emulate_field_operator("displayName", "Contains");
            ds.collection("orders").emulate_field_filtering("status");
        }
        if has("overrides") {
            ds.collection("countries")
                .override_create(|data, ctx| {
                    let upper: Vec<Value> = data
                        .iter()
                        .map(|r| {
                            let mut r = r.clone();
                            if let Some(name) = r.get("name").and_then(Value::as_str) {
                                r["name"] = json!(name.to_uppercase());
                            }
                            r
                        })
                        .collect();
                    ctx.collection("countries").create(&upper)
                })
                .override_update(|filter, patch, ctx| {
                    let mut patch = patch.clone();
                    if let Some(name) = patch.get("name").and_then(Value::as_str) {
                        patch["name"] = json!(format!("{name} (edited)"));
                    }
                    ctx.collection("countries").update(filter, &patch)
                });
            ds.collection("orders").override_delete(|filter, ctx| {
                ctx.collection("orders")
                    .update(filter, &json!({"status": "cancelled"}))
            });
        }
        if has("count") {
            ds.collection("customers").disable_count();
        }
        if has("bad") {
            ds.collection("customers")
                .add_field_validation("name", "Bogus", None);
        }
        Ok(())
    }
}

canopy_sdk::export_plugin!(Customizer2);
