//! The operations called as a non-HTTP surface calls them: typed requests in, typed records out,
//! over a real SQLite datasource, with no router in sight.

use std::sync::Arc;

use super::records::{self, Counted, FilterRequest, GetRequest, ListRequest, SelectionRequest};
use super::relations::{self, Parent};
use super::{Error, Ops};
use crate::agent::query_string::QueryString;
use crate::datasource::sql::{Options, Pool, SqlDataSource};
use crate::datasource::{Caller, Projection, Record, Value};

const SHOP: &str = "
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, customer_id INTEGER REFERENCES customers(id));
INSERT INTO customers VALUES (1, 'Ada'), (2, 'Alan');
INSERT INTO orders VALUES (1, 10, 1), (2, 20, 2), (3, 30, 1);
";

async fn ops() -> Ops {
    let pool = Pool::connect("sqlite::memory:", 1).await.unwrap();
    if let Pool::Sqlite(sqlite) = &pool {
        sqlx::raw_sql(SHOP).execute(sqlite).await.unwrap();
    }
    let datasource = SqlDataSource::from_pool(pool, Options::default())
        .await
        .unwrap();
    Ops::new(Arc::new(datasource), 100)
}

fn caller() -> Caller {
    Caller::system(chrono_tz::UTC)
}

fn ids(records: &[Record]) -> Vec<Value> {
    records
        .iter()
        .map(|r| r.get("id").cloned().unwrap_or(Value::Null))
        .collect()
}

#[tokio::test]
async fn list_count_get_update_and_delete_run_without_http() {
    let ops = ops().await;
    let caller = caller();
    let query = QueryString::parse("sort=-id&page[size]=2&page[number]=1");
    let request = ListRequest::parse(&ops, "orders", &query, None).unwrap();
    let listed = records::list(&ops, &caller, request).await.unwrap();
    assert_eq!(ids(&listed.records), [Value::Int(3), Value::Int(2)]);

    let query =
        QueryString::parse(r#"filters={"field":"amount","operator":"greater_than","value":15}"#);
    let filter = crate::agent::query_string::parse_filter(
        &crate::agent::query_string::Params::new(&query),
        ops.schema(),
        ops.collection("orders").unwrap(),
    )
    .unwrap();
    let request = FilterRequest {
        collection: "orders".to_owned(),
        filter,
        segment_query: None,
    };
    assert_eq!(
        records::count(&ops, &caller, request).await.unwrap(),
        Counted::Count(2)
    );

    let mut patch = Record::new();
    patch.insert("amount", Value::Int(99));
    let updated = records::update(&ops, &caller, "orders", "1", patch)
        .await
        .unwrap()
        .expect("the updated record, read again");
    assert_eq!(updated.get("amount"), Some(&Value::Int(99)));

    let request = GetRequest {
        collection: "orders".to_owned(),
        packed_id: "1".to_owned(),
        projection: Projection::new(["id", "amount"]),
        explicit_projection: true,
    };
    let record = records::get(&ops, &caller, request).await.unwrap();
    assert_eq!(record.get("amount"), Some(&Value::Int(99)));

    records::delete_one(&ops, &caller, "orders", "2")
        .await
        .unwrap();
    let request = GetRequest {
        collection: "orders".to_owned(),
        packed_id: "2".to_owned(),
        projection: Projection::new(["id"]),
        explicit_projection: false,
    };
    assert!(matches!(
        records::get(&ops, &caller, request).await,
        Err(Error::Agent(crate::agent::Error::NotFound(_)))
    ));
}

#[tokio::test]
async fn related_records_are_listed_and_a_selection_is_deleted() {
    let ops = ops().await;
    let caller = caller();
    let relation = ops
        .collection("customers")
        .unwrap()
        .relations()
        .find(|(_, r)| !r.is_to_one())
        .map(|(name, _)| name.to_owned())
        .expect("the customers' orders");
    let parent = Parent {
        collection: "customers".to_owned(),
        packed_id: "1".to_owned(),
        relation,
    };
    let request = ListRequest::parse(&ops, "orders", &QueryString::parse("sort=id"), None).unwrap();
    let listed = relations::list_related(&ops, &caller, &parent, request)
        .await
        .unwrap();
    assert_eq!(ids(&listed.records), [Value::Int(1), Value::Int(3)]);

    let orders = ops.collection("orders").unwrap();
    let selection = crate::agent::query_string::Selection {
        all_records: false,
        ids: vec![vec![("id".to_owned(), Value::Int(3))]],
        subset_query: None,
    };
    let filter = selection
        .filter(&QueryString::parse(""), ops.schema(), orders)
        .unwrap();
    let request = SelectionRequest {
        collection: "orders".to_owned(),
        all_records: false,
        ids: selection.ids,
        filter,
    };
    records::delete_selection(&ops, &caller, request)
        .await
        .unwrap();
    let request = ListRequest::parse(&ops, "orders", &QueryString::parse("sort=id"), None).unwrap();
    let listed = records::list(&ops, &caller, request).await.unwrap();
    assert_eq!(ids(&listed.records), [Value::Int(1), Value::Int(2)]);
}

#[tokio::test]
async fn an_unknown_collection_is_not_found() {
    let ops = ops().await;
    assert!(matches!(
        ListRequest::parse(&ops, "nope", &QueryString::parse(""), None),
        Err(Error::NotFound)
    ));
    assert!(matches!(
        records::delete_one(&ops, &caller(), "nope", "1").await,
        Err(Error::NotFound)
    ));
}
