//! Reads through the host from two entry points, on the shop demo's data, so that a test sees
//! whose scopes a plugin's reads run under:
//!
//! - a datasource chart `visible_counts`: a distribution of how many `orders` and `customers`
//!   the plugin counts through `collections.aggregate`;
//! - a Before Create hook on `tags`: the label of each created tag gets ` orders=<n>` appended,
//!   `n` being the orders of customers 1 to 10 the hook lists through `collections.list`.

use canopy_sdk::prelude::*;

struct Scoped;

fn count(ctx: &Context, collection: &str) -> Result<f64> {
    let rows = ctx
        .collection(collection)
        .aggregate(&Value::Null, &json!({"operation": "Count"}), None)?;
    Ok(rows[0]["value"].as_f64().unwrap_or(0.0))
}

impl Plugin for Scoped {
    fn customize(ds: &mut DataSource) -> Result<()> {
        ds.add_chart("visible_counts", |ctx| {
            let orders = count(ctx.context(), "orders")?;
            let customers = count(ctx.context(), "customers")?;
            Ok(ChartResult::distribution([
                ("orders", orders),
                ("customers", customers),
            ]))
        });
        ds.customize_collection("tags", |c| {
            c.add_hook(Position::Before, Operation::Create, |ctx| {
                let orders = ctx
                    .context()
                    .collection("orders")
                    .list(
                        &json!({"field": "customer_id", "operator": "LessThan", "value": 11}),
                        &["id"],
                    )?
                    .len();
                for record in ctx.data_mut().into_iter().flatten() {
                    let label = record["label"].as_str().unwrap_or("").to_owned();
                    record["label"] = json!(format!("{label} orders={orders}"));
                }
                Ok(())
            });
        });
        Ok(())
    }
}

canopy_sdk::export_plugin!(Scoped);
