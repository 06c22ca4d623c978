//! Actions on `products` whose forms use every layout element: a static form (HTML block,
//! separator, a row of two fields) that the schema file carries, and a dynamic multi-page form
//! (button labels, an HTML block computed from a form value, a row). The Single action reads
//! the record through `get_field` and answers with it.

use canopy_sdk::prelude::*;

struct Forms;

impl Plugin for Forms {
    fn customize(ds: &mut DataSource) -> Result<()> {
        ds.customize_collection("products", |c| {
            c.add_action(
                "Restock",
                Action::new(Scope::Bulk, |ctx| {
                    let count = ctx.form_value("Count").cloned().unwrap_or(Value::Null);
                    Ok(ActionResult::success(format!("Restocked by {count}")))
                })
                .form(vec![
                    FormElement::html_block("<p>Restock the selected products</p>"),
                    FormElement::separator(),
                    FormElement::row(vec![
                        FormElement::new("Count", FieldType::Number)
                            .required()
                            .default_value(json!(5)),
                        FormElement::new("Supplier", FieldType::String),
                    ]),
                ]),
            )
            .add_action(
                "Rename",
                Action::new(Scope::Single, |ctx| {
                    let name = ctx.get_field("name")?;
                    let to = ctx.form_value("New name").cloned().unwrap_or(Value::Null);
                    Ok(ActionResult::success(format!("{name} renamed to {to}")))
                })
                .form(vec![
                    FormElement::page(vec![
                        FormElement::new("New name", FieldType::String).required(),
                        FormElement::html_block_with(|ctx| {
                            let name = ctx.form_value("New name").and_then(Value::as_str);
                            Ok(format!("<p>New name: {}</p>", name.unwrap_or("none")))
                        }),
                    ])
                    .next_button_label("Continue"),
                    FormElement::page(vec![FormElement::row(vec![
                        FormElement::new("Reason", FieldType::String),
                        FormElement::new("Notify", FieldType::Boolean),
                    ])])
                    .previous_button_label("Back")
                    .next_button_label("Done"),
                ]),
            );
        });
        Ok(())
    }
}

canopy_sdk::export_plugin!(Forms);
