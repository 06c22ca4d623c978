//! Composition root: builds the services from settings and runs the commands of the binary.

use std::path::Path;

use anyhow::Context as _;
use serde_json::{Value as Json, json};

use crate::datasource::sql::{Options, Pool, SqlDataSource};
use crate::datasource::{
    Aggregation, Caller, ConditionTree, DataSource, DataSourceSchema, DateOperation, FieldSchema,
    Filter, Operator, Page, Projection, RelationSchema, Sort,
};

/// The demo database's seed, kept beside the example's README.
const SHOP_SEED: &str = include_str!("../../examples/shop/seed.sql");

/// `canopy inspect`: prints the served schema as JSON.
pub async fn inspect(database_url: &str) -> anyhow::Result<()> {
    let datasource = SqlDataSource::connect(database_url, Options::default())
        .await
        .with_context(|| {
            format!(
                "cannot serve {}",
                crate::datasource::sql::redact_url(database_url)
            )
        })?;
    println!(
        "{}",
        serde_json::to_string_pretty(&describe(datasource.schema()))?
    );
    Ok(())
}

/// `canopy demo`: seeds the shop database and shows a list with a join and a grouped count.
pub async fn demo(path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if path.exists() {
        std::fs::remove_file(path).with_context(|| format!("cannot replace {}", path.display()))?;
    }
    let url = format!("sqlite://{}?mode=rwc", path.display());
    eprintln!("Seeding {} …", path.display());
    let pool = Pool::connect(&url, 4).await?;
    if let Pool::Sqlite(sqlite) = &pool {
        sqlx::raw_sql(SHOP_SEED)
            .execute(sqlite)
            .await
            .context("seeding the demo database")?;
    }
    let datasource = SqlDataSource::from_pool(pool, Options::default()).await?;
    let schema = datasource.schema();
    println!("Collections served from {url}:");
    for (name, collection) in &schema.collections {
        let relations: Vec<String> = collection
            .relations()
            .map(|(n, r)| format!("{n} ({} → {})", r.kind_name(), r.foreign_collection()))
            .collect();
        println!(
            "  {name}: {} fields; relations: {}",
            collection.fields.len(),
            relations.join(", ")
        );
    }

    let caller = Caller::system(chrono_tz::Europe::Paris);
    let orders = datasource.collection("orders")?;
    let filter = Filter::new(Some(ConditionTree::leaf(
        "status",
        Operator::Equal,
        "shipped",
    )))
    .with_sort(Sort::desc("total"))
    .with_page(Page::new(0, 5));
    let projection = Projection::new(["id", "total", "ordered_at", "customer:email"]);
    let records = orders.list(&caller, &filter, &projection).await?;
    println!("\nThe 5 largest shipped orders, with their customer (one LEFT JOIN):");
    println!("{}", serde_json::to_string_pretty(&records)?);

    let by_month = Aggregation::count().group_by("ordered_at", Some(DateOperation::Month));
    let groups = orders
        .aggregate(&caller, &Filter::default(), &by_month, Some(3))
        .await?;
    println!("\nThe 3 busiest months (Europe/Paris):");
    for group in groups {
        let month = group
            .group
            .get("ordered_at")
            .map(ToString::to_string)
            .unwrap_or_default();
        println!("  {month}: {} orders", group.value);
    }
    println!("\nInspect any database with: cargo run -p canopy -- inspect --database-url {url}");
    Ok(())
}

/// A JSON summary of a schema: collections, columns with type and flags, relations with keys.
pub fn describe(schema: &DataSourceSchema) -> Json {
    let collections: Vec<Json> = schema
        .collections
        .values()
        .map(|c| {
            let fields: Vec<Json> = c
                .fields
                .iter()
                .map(|(name, field)| match field {
                    FieldSchema::Column(col) => json!({
                        "field": name,
                        "type": col.column_type.to_json(),
                        "isPrimaryKey": col.is_primary_key,
                        "isReadOnly": col.is_read_only,
                        "isRequired": col.is_required(),
                        "defaultValue": col.default_value,
                        "enums": col.enum_values,
                        "operators": col.filter_operators.iter().map(|o| o.snake_case()).collect::<Vec<_>>(),
                    }),
                    FieldSchema::Relation(rel) => {
                        let mut out = json!({
                            "field": name,
                            "type": rel.kind_name(),
                            "foreignCollection": rel.foreign_collection(),
                        });
                        if let RelationSchema::ManyToMany { through_collection, .. } = rel {
                            out["throughCollection"] = json!(through_collection);
                        }
                        out
                    }
                })
                .collect();
            json!({ "name": c.name, "isReadOnly": c.is_read_only, "fields": fields })
        })
        .collect();
    json!({ "collections": collections })
}
