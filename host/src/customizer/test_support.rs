//! What the customizer's unit tests share: an in-memory SQLite datasource seeded by each test
//! module, the system caller, and a small shop with a computed `customers.fullName` used by the
//! emulation and write layers' tests.

use std::sync::Arc;

use crate::customizer::{ComputeHandler, Customization, Kind, closures};
use crate::datasource::sql::{Options, Pool, SqlDataSource};
use crate::datasource::{
    Caller, ConditionTree, DataSource, Filter, PrimitiveType, Projection, Record, Sort, Value,
};

/// A SQLite datasource over a fresh in-memory database, after running `seed` (SQL statements).
pub(crate) async fn sqlite(seed: &str) -> Arc<dyn DataSource> {
    let pool = Pool::connect("sqlite::memory:", 1).await.unwrap();
    if let Pool::Sqlite(sqlite) = &pool {
        sqlx::raw_sql(seed).execute(sqlite).await.unwrap();
    }
    Arc::new(
        SqlDataSource::from_pool(pool, Options::default())
            .await
            .unwrap(),
    )
}

pub(crate) fn caller() -> Caller {
    Caller::system(chrono_tz::UTC)
}

pub(crate) fn string(s: &str) -> Value {
    Value::String(s.to_owned())
}

/// A record of `pairs`.
pub(crate) fn record(pairs: &[(&str, Value)]) -> Record {
    pairs.iter().map(|(k, v)| (*k, v.clone())).collect()
}

const SHOP: &str = "
CREATE TABLE customers (id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, customer_id INTEGER REFERENCES customers(id));
CREATE TABLE profiles (id INTEGER PRIMARY KEY, bio TEXT, customer_id INTEGER UNIQUE REFERENCES customers(id));
INSERT INTO customers VALUES (1, 'Ada', 'Lovelace'), (2, 'Alan', 'Turing'), (3, 'Grace', 'Hopper');
INSERT INTO orders VALUES (1, 10, 1), (2, 20, 2), (3, 30, 3), (4, 40, NULL), (5, 15, 1);
INSERT INTO profiles VALUES (1, 'math', 1);
";

/// The shop: customers, their orders and (one-to-one) profiles.
pub(crate) async fn base() -> Arc<dyn DataSource> {
    sqlite(SHOP).await
}

/// A string computed field `collection.name` over `deps`, declared by "test".
pub(crate) fn computed(
    collection: &str,
    name: &str,
    deps: &[&str],
    handler: Arc<dyn ComputeHandler>,
) -> Customization {
    Customization::collection(
        "test",
        collection,
        Kind::ComputedField {
            name: name.into(),
            column_type: PrimitiveType::String.into(),
            dependencies: deps.iter().map(|d| (*d).to_owned()).collect(),
            default_value: None,
            enum_values: None,
            handler,
        },
    )
}

/// `customers.fullName` = "first last".
pub(crate) fn full_name() -> Customization {
    computed(
        "customers",
        "fullName",
        &["first_name", "last_name"],
        closures::compute(|batch| {
            Ok((0..batch.len)
                .map(|i| {
                    let row = batch.row(i);
                    let part =
                        |k: &str| row.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    Value::String(format!("{} {}", part("first_name"), part("last_name")))
                })
                .collect())
        }),
    )
}

/// The `id`s of `collection` listed with `filter`, in order.
pub(crate) async fn ids(
    ds: &Arc<dyn DataSource>,
    collection: &str,
    filter: &Filter,
) -> crate::datasource::Result<Vec<i64>> {
    let records = ds
        .collection(collection)?
        .list(&caller(), filter, &Projection::new(["id"]))
        .await?;
    Ok(records
        .iter()
        .map(|r: &Record| match r.get("id") {
            Some(Value::Int(i)) => *i,
            other => panic!("no id: {other:?}"),
        })
        .collect())
}

/// A filter sorted by id.
pub(crate) fn by_id(tree: Option<ConditionTree>) -> Filter {
    Filter::new(tree).with_sort(Sort::asc("id"))
}
