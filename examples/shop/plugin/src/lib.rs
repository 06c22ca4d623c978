//! The shop demo's plugin: one customization of every kind on the demo data (`seed.sql`), each
//! explained in `examples/shop/README.md`.
//!
//! - computed fields: `customers.full_name`, and `orders.customer_name` through the `customer`
//!   relation (which reads `full_name`, a computed field of another collection);
//! - actions: `Offer a coupon` (Single, with a form), `Mark as VIP` (Bulk), `Export orders`
//!   (Global, a generated file), `Refund` (Single, on a paid, shipped or delivered order; the
//!   refund workflow of `examples/shop/workflows` runs it), `Attach a document` (Single, a file
//!   field), `Ship the order` (Single, a form of two pages), `Notify the warehouse` (Single, a
//!   webhook result the browser calls);
//! - a hook: Before Create on customers refuses an email without `@` and lower-cases it;
//! - segments: `VIP customers` (static) and `Above average` orders (dynamic, from an aggregate);
//! - search: customers by email and names only; orders by a handler (a number is an id, a word a
//!   status);
//! - charts: `lifetime_value` on a customer, `items_ordered` on an order (an error on a cancelled
//!   one), `orders_by_status` on the dashboard;
//! - relations: `customers.purchases` (one-to-many), `products.labels` (many-to-many through
//!   `product_tags`); `orders.customer_email` imported read-only from the customer;
//! - `products.price_band`, filtered and sorted through `price`; a price validation; products'
//!   delete overridden (the stock is emptied); `customer_name` sorted in memory; no count on
//!   `order_items`.

use canopy_sdk::prelude::*;

struct Shop;

/// A product at this price or above is in the `premium` band.
const PREMIUM: f64 = 20.0;

/// The statuses of `orders.status`: the seed's, and `refunded`, which the `Refund` action sets.
const STATUSES: [&str; 6] = [
    "pending",
    "paid",
    "shipped",
    "delivered",
    "cancelled",
    "refunded",
];

/// The statuses of an order that was paid for, so can be refunded.
const REFUNDABLE: [&str; 3] = ["paid", "shipped", "delivered"];

/// A number as a person writes it: numbers cross the boundary as `f64`, so an id is `1.0`;
/// exact ones (PostgreSQL's NUMERIC totals, bigints) as text, kept as they are (`"12.30"`).
fn number(v: &Value) -> String {
    if let Some(text) = v.as_str() {
        return text.to_owned();
    }
    match v.as_f64() {
        Some(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", n as i64),
        Some(n) => n.to_string(),
        None => String::new(),
    }
}

impl Plugin for Shop {
    fn customize(ds: &mut DataSource) -> Result<()> {
        // A coupon above this amount needs a reason (the form shows the field only then).
        let coupon_reason_above = ds
            .options()
            .get("couponReasonAbove")
            .and_then(Value::as_f64)
            .unwrap_or(50.0);

        ds.customize_collection("customers", |c| {
            c.add_field(
                "full_name",
                ComputedField::new(
                    ColumnType::STRING,
                    ["first_name", "last_name"],
                    |rows, _| {
                        // Read as slices of the packed batch and written into one buffer: no
                        // `String` per row on either side.
                        let (first, last) = (rows.text("first_name")?, rows.text("last_name")?);
                        let mut names = Texts::with_capacity(rows.len(), 16 * rows.len());
                        for (f, l) in first.iter().zip(last.iter()) {
                            names.push_with(|cell| {
                                cell.push_str(f.unwrap_or(""));
                                cell.push(' ');
                                cell.push_str(l.unwrap_or(""));
                            });
                        }
                        Ok(names.into())
                    },
                ),
            )
            .add_hook(Position::Before, Operation::Create, |ctx| {
                for record in ctx.data_mut().into_iter().flatten() {
                    let Some(email) = record.get("email").and_then(Value::as_str) else {
                        continue;
                    };
                    if !email.contains('@') {
                        return Err(Error::validation(format!(
                            "`{email}` is not an email address"
                        )));
                    }
                    let lower = email.to_lowercase();
                    record["email"] = json!(lower);
                }
                Ok(())
            })
            .add_segment(
                "VIP customers",
                json!({"field": "is_vip", "operator": "Equal", "value": true}),
            )
            .replace_search(Search::fields().only(["email", "first_name", "last_name"]))
            .add_action(
                "Offer a coupon",
                Action::new(Scope::Single, |ctx| {
                    let customer = ctx.get_record(&["full_name", "email"])?;
                    let amount = ctx
                        .form_value("Amount")
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0);
                    let kind = ctx
                        .form_value("Kind")
                        .and_then(Value::as_str)
                        .unwrap_or("Fixed");
                    let name = customer["full_name"].as_str().unwrap_or("the customer");
                    Ok(
                        ActionResult::success(format!(
                            "Coupon of {amount} ({kind}) sent to {name}"
                        ))
                        .html(format!(
                            "<p>Sent to <b>{}</b></p>",
                            customer["email"].as_str().unwrap_or("")
                        )),
                    )
                })
                .description("Sends the customer a coupon code")
                .submit_button_label("Send the coupon")
                .form(vec![
                    FormElement::new("Amount", FieldType::Number)
                        .required()
                        .default_value(json!(10))
                        .widget("NumberInput")
                        .property("min", json!(1))
                        .property("step", json!(1)),
                    FormElement::new("Kind", FieldType::Enum).enum_values(["Fixed", "Percent"]),
                    FormElement::new("Message", FieldType::String)
                        .widget("TextArea")
                        // A dynamic value: greets the selected customer by name.
                        .value(|ctx| {
                            let name = ctx.get_field("first_name")?;
                            Ok(json!(format!(
                                "Hello {}, here is a gift.",
                                name.as_str().unwrap_or("")
                            )))
                        }),
                    FormElement::new("Reason", FieldType::String).visible_if(move |ctx| {
                        Ok(ctx
                            .form_value("Amount")
                            .and_then(Value::as_f64)
                            .unwrap_or(0.0)
                            > coupon_reason_above)
                    }),
                ]),
            )
            .add_action(
                "Mark as VIP",
                Action::new(Scope::Bulk, |ctx| {
                    let ids = ctx.get_record_ids()?;
                    let filter = json!({"field": "id", "operator": "In", "value": ids});
                    ctx.collection()?
                        .update(&filter, &json!({"is_vip": true}))?;
                    Ok(
                        ActionResult::success(format!("{} customers are now VIP", ids.len()))
                            .invalidated(["orders"]),
                    )
                }),
            )
            .add_chart("lifetime_value", |ctx| {
                let id = ctx.record_id().cloned().unwrap_or(Value::Null);
                let id = id
                    .as_str()
                    .and_then(|s| s.parse::<f64>().ok())
                    .map_or(id, |n| json!(n));
                let filter = json!({"field": "customer_id", "operator": "Equal", "value": id});
                let rows = ctx.context().collection("orders").aggregate(
                    &filter,
                    &json!({"operation": "Sum", "field": "total"}),
                    None,
                )?;
                let total = rows[0]["value"].as_f64().unwrap_or(0.0);
                Ok(ChartResult::value(total, None))
            });
        });

        ds.customize_collection("orders", |c| {
            // Depends on a computed field of another collection, through a to-one relation.
            c.add_field(
                "customer_name",
                ComputedField::new(ColumnType::STRING, ["customer:full_name"], |rows, _| {
                    Ok(rows.text("customer:full_name")?.iter().collect::<Texts>().into())
                }),
            )
            .add_segment(
                "Above average",
                Segment::dynamic(|ctx| {
                    let rows = ctx.this()?.aggregate(
                        &Value::Null,
                        &json!({"operation": "Avg", "field": "total"}),
                        None,
                    )?;
                    let average = rows[0]["value"].as_f64().unwrap_or(0.0);
                    Ok(json!({"field": "total", "operator": "GreaterThan", "value": average}))
                }),
            )
            .replace_search(Search::handler(|text, _extended, _ctx| {
                let text = text.trim();
                if let Ok(id) = text.parse::<i64>() {
                    return Ok(Some(
                        json!({"field": "id", "operator": "Equal", "value": id}),
                    ));
                }
                let status = text.to_lowercase();
                Ok(Some(if STATUSES.contains(&status.as_str()) {
                    json!({"field": "status", "operator": "Equal", "value": status})
                } else {
                    // Matches nothing: an id is never negative.
                    json!({"field": "id", "operator": "Equal", "value": -1})
                }))
            }))
            .add_action(
                "Export orders",
                Action::new(Scope::Global, |ctx| {
                    let rows = ctx.collection()?.list_page(
                        &Value::Null,
                        &["id", "status", "total"],
                        &json!([{"field": "id", "ascending": true}]),
                        Some((0, 100)),
                    )?;
                    let mut csv = String::from("id,status,total\n");
                    for record in rows.records() {
                        csv.push_str(&format!(
                            "{},{},{}\n",
                            number(&record["id"]),
                            record["status"].as_str().unwrap_or(""),
                            number(&record["total"])
                        ));
                    }
                    Ok(ActionResult::file(
                        csv.into_bytes(),
                        "orders.csv",
                        "text/csv",
                    ))
                })
                .generate_file()
                .description("The first 100 orders as CSV"),
            )
            .add_action(
                "Refund",
                Action::new(Scope::Single, |ctx| {
                    let order = ctx.get_record(&["id", "status", "total"])?;
                    let status = order["status"].as_str().unwrap_or("");
                    let id = number(&order["id"]);
                    // An error result, not an `Err`: the person (or the workflow run) sees why.
                    if !REFUNDABLE.contains(&status) {
                        return Ok(ActionResult::error(format!(
                            "Order #{id} is {status}: only a paid, shipped or delivered order can be refunded"
                        )));
                    }
                    let filter = json!({"field": "id", "operator": "Equal", "value": order["id"]});
                    ctx.collection()?
                        .update(&filter, &json!({"status": "refunded"}))?;
                    let reason = ctx
                        .form_value("Reason")
                        .and_then(Value::as_str)
                        .filter(|r| !r.is_empty())
                        .unwrap_or("no reason given");
                    Ok(ActionResult::success(format!(
                        "Order #{id} refunded ({}): {reason}",
                        number(&order["total"])
                    )))
                })
                .description("Refunds the order and marks it refunded")
                .submit_button_label("Refund")
                .form(vec![FormElement::new("Reason", FieldType::String).widget("TextArea")]),
            )
            .add_action(
                "Attach a document",
                Action::new(Scope::Single, |ctx| {
                    let order = ctx.get_record(&["id"])?;
                    // A file arrives as a data URI: `data:<mime>;name=<name>;base64,<bytes>`.
                    let uri = ctx
                        .form_value("Document")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let (meta, data) = uri.split_once(',').unwrap_or(("", ""));
                    let name = meta
                        .split(';')
                        .find_map(|part| part.strip_prefix("name="))
                        .unwrap_or("a document");
                    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
                    let size = (data.len() / 4 * 3).saturating_sub(padding);
                    Ok(ActionResult::success(format!(
                        "Attached {name} ({size} bytes) to order #{}",
                        number(&order["id"])
                    )))
                })
                .description("Attaches a file (an invoice, a receipt) to the order")
                .form(vec![FormElement::new("Document", FieldType::File).required()]),
            )
            .add_action(
                "Ship the order",
                Action::new(Scope::Single, |ctx| {
                    let order = ctx.get_record(&["id"])?;
                    let carrier = ctx
                        .form_value("Carrier")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let tracking = ctx
                        .form_value("Tracking number")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let filter = json!({"field": "id", "operator": "Equal", "value": order["id"]});
                    ctx.collection()?
                        .update(&filter, &json!({"status": "shipped"}))?;
                    let told = match ctx.form_value("Notify the customer") {
                        Some(Value::Bool(false)) => "the customer is not told".to_owned(),
                        _ => format!(
                            "the customer is told: {}",
                            ctx.form_value("Message")
                                .and_then(Value::as_str)
                                .unwrap_or("(no message)")
                        ),
                    };
                    Ok(ActionResult::success(format!(
                        "Order #{} shipped by {carrier} ({tracking}); {told}",
                        number(&order["id"])
                    )))
                })
                .description("Marks the order shipped, in two steps: the parcel, then the customer")
                .submit_button_label("Ship it")
                // A form of two pages: the parcel, then what the customer is told (the message
                // shows only when the customer is notified: a change hook across pages).
                .form(vec![
                    FormElement::page(vec![
                        FormElement::new("Carrier", FieldType::Enum)
                            .enum_values(["Post", "Courier", "Pickup"])
                            .required(),
                        FormElement::new("Tracking number", FieldType::String).required(),
                    ])
                    .next_button_label("Next: the customer"),
                    FormElement::page(vec![
                        FormElement::new("Notify the customer", FieldType::Boolean)
                            .default_value(json!(true)),
                        FormElement::new("Message", FieldType::String)
                            .widget("TextArea")
                            .visible_if(|ctx| {
                                Ok(ctx.form_value("Notify the customer") != Some(&json!(false)))
                            }),
                    ])
                    .previous_button_label("Back: the parcel"),
                ]),
            )
            .add_action(
                "Notify the warehouse",
                Action::new(Scope::Single, |ctx| {
                    let order = ctx.get_record(&["id", "status"])?;
                    let url = ctx
                        .form_value("Warehouse URL")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    // The browser makes the call (as Forest's UI does): the warehouse's service
                    // must allow this console's origin (CORS).
                    Ok(ActionResult::webhook(
                        url,
                        "POST",
                        json!({"Content-Type": "application/json"}),
                        json!({"order": number(&order["id"]), "status": order["status"]}),
                    ))
                })
                .description("Tells the warehouse's service about the order (the browser calls it)")
                .form(vec![
                    FormElement::new("Warehouse URL", FieldType::String)
                        .required()
                        .default_value(json!("http://127.0.0.1:8900/orders")),
                ]),
            )
            // A record chart that can fail: a cancelled order's items went back to stock, and
            // the chart says so in place of a figure (the console shows the message).
            .add_chart("items_ordered", |ctx| {
                let id = ctx.record_id().cloned().unwrap_or(Value::Null);
                let id = id
                    .as_str()
                    .and_then(|s| s.parse::<f64>().ok())
                    .map_or(id, |n| json!(n));
                let order = ctx.context().collection("orders").list_page(
                    &json!({"field": "id", "operator": "Equal", "value": id}),
                    &["status"],
                    &json!([{"field": "id", "ascending": true}]),
                    Some((0, 1)),
                )?;
                let status = order
                    .records()
                    .first()
                    .and_then(|r| r["status"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                if status == "cancelled" {
                    return Err(Error::validation(
                        "This order is cancelled: its items went back to stock, so none is counted",
                    ));
                }
                let filter = json!({"field": "order_id", "operator": "Equal", "value": id});
                let rows = ctx.context().collection("order_items").aggregate(
                    &filter,
                    &json!({"operation": "Sum", "field": "quantity"}),
                    None,
                )?;
                Ok(ChartResult::value(rows[0]["value"].as_f64().unwrap_or(0.0), None))
            })
            // The customer's email as a read-only field of the order.
            .import_field("customer_email", "customer:email", true)
            // A computed field cannot be sorted by the database: sorted in memory.
            .emulate_field_sorting("customer_name");
        });

        // Every order of a customer, as a relation declared over the keys.
        ds.collection("customers").add_one_to_many_relation(
            "purchases",
            "orders",
            OneToManyOptions::new("customer_id"),
        );

        ds.customize_collection("products", |c| {
            c.add_field(
                "price_band",
                ComputedField::new(ColumnType::ENUM, ["price"], |rows, _| {
                    Ok(rows
                        .records()
                        .iter()
                        .map(|r| {
                            let price = number(&r["price"]).parse::<f64>().ok()?;
                            Some(if price < PREMIUM { "budget" } else { "premium" }.to_owned())
                        })
                        .collect::<Vec<_>>()
                        .into())
                })
                .enum_values(["budget", "premium"]),
            )
            // Filtering and sorting the band go to the price, which the database answers.
            .replace_field_operator("price_band", "Equal", |value, _| {
                let operator = if value == "premium" {
                    "GreaterThan"
                } else {
                    "LessThan"
                };
                let bound = if value == "premium" {
                    PREMIUM - 0.005
                } else {
                    PREMIUM
                };
                Ok(json!({"field": "price", "operator": operator, "value": bound}))
            })
            .replace_field_sorting("price_band", [("price", true)])
            .add_field_validation("price", "GreaterThan", json!(0))
            .add_many_to_many_relation(
                "labels",
                "tags",
                "product_tags",
                ManyToManyOptions::new("product_id", "tag_id"),
            )
            // Products are kept for the order history: deleting one empties its stock.
            .override_delete(|filter, ctx| {
                ctx.collection("products")
                    .update(filter, &json!({"stock": 0}))
            });
        });
        ds.collection("order_items").disable_count();

        ds.add_chart("orders_by_status", |ctx| {
            let rows = ctx.context().collection("orders").aggregate(
                &Value::Null,
                &json!({"operation": "Count", "groups": [{"field": "status"}]}),
                None,
            )?;
            let entries = rows.as_array().into_iter().flatten().map(|r| {
                (
                    r["group"]["status"].as_str().unwrap_or("").to_owned(),
                    r["value"].as_f64().unwrap_or(0.0),
                )
            });
            Ok(ChartResult::distribution(entries))
        });
        Ok(())
    }
}

canopy_sdk::export_plugin!(Shop);
