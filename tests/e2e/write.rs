//! `create`, `update`, `delete` and native queries on real databases: generated keys and
//! constant defaults, writes filtered through relations, constraint violations mapped by kind,
//! read-only views, validation before any SQL, and native query refusals.

use canopy::datasource::sql::Options;
use canopy::datasource::{
    ConstraintViolation, DataSource, Error, Filter, Operator, Projection, Record, Sort, Value,
};
use canopy_e2e::{Backend, TestDb, caller, collection, on_all_backends};

use crate::list::{ids, int, leaf, number, portable, shop};

fn record(pairs: &[(&str, Value)]) -> Record {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

async fn create_returns_generated_keys_and_defaults(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let created = orders
        .create(
            &caller(),
            vec![
                record(&[
                    ("customer_id", Value::Int(2)),
                    ("amount", Value::Float(3.5)),
                ]),
                record(&[
                    ("amount", Value::Int(4)),
                    ("status", Value::from("paid")),
                    ("note", Value::from("n")),
                ]),
            ],
        )
        .await
        .expect("create");
    assert_eq!(created.len(), 2);
    assert_eq!(int(created[0].get("id")), 6);
    assert_eq!(int(created[1].get("id")), 7);
    assert_eq!(
        created[0].get("status"),
        Some(&Value::from("new")),
        "constant default written"
    );
    assert_eq!(created[0].get("note"), Some(&Value::Null));
    assert_eq!(number(created[0].get("amount")), 3.5);
    assert_eq!(created[1].get("status"), Some(&Value::from("paid")));
    let columns: Vec<&str> = created[0].keys().collect();
    assert_eq!(
        columns,
        [
            "id",
            "customer_id",
            "amount",
            "status",
            "note",
            "placed_at",
            "day"
        ]
    );
    let customers = collection(&ds, "customers");
    let created = customers
        .create(&caller(), vec![record(&[("name", Value::from("Eve"))])])
        .await
        .expect("create customer");
    assert_eq!(created[0].get("vip"), Some(&Value::Bool(false)));
    let stamp = chrono::DateTime::parse_from_rfc3339("2024-05-06T05:08:09.123Z")
        .expect("valid")
        .to_utc();
    let created = orders
        .create(
            &caller(),
            vec![record(&[("placed_at", Value::Date(stamp))])],
        )
        .await
        .expect("create with a date");
    assert_eq!(created[0].get("placed_at"), Some(&Value::Date(stamp)));
}

async fn create_in_a_table_with_a_natural_key(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let lines = collection(&ds, "order_lines");
    let created = lines
        .create(
            &caller(),
            vec![record(&[
                ("order_id", Value::Int(3)),
                ("line_no", Value::Int(1)),
                ("qty", Value::Int(9)),
            ])],
        )
        .await
        .expect("create");
    assert_eq!(int(created[0].get("qty")), 9);
    assert_eq!(int(created[0].get("order_id")), 3);
}

async fn update_and_delete_by_filters_through_relations(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    o.update(
        &caller(),
        &Filter::new(Some(leaf("customer:name", Operator::Equal, "Ann"))),
        &record(&[("status", Value::from("archived"))]),
    )
    .await
    .expect("update through a relation");
    assert_eq!(
        ids(o, leaf("status", Operator::Equal, "archived")).await,
        [1, 2]
    );
    o.update(
        &caller(),
        &Filter::new(Some(leaf("amount", Operator::GreaterThan, 50))),
        &record(&[("note", Value::Null), ("amount", Value::Float(99.5))]),
    )
    .await
    .expect("direct update");
    assert_eq!(
        ids(o, leaf("note", Operator::Missing, Value::Null)).await,
        [3, 4]
    );
    assert_eq!(ids(o, leaf("amount", Operator::Equal, 99.5)).await, [4]);
    o.delete(
        &caller(),
        &Filter::new(Some(leaf(
            "customer:country:name",
            Operator::Equal,
            "Japan",
        ))),
    )
    .await
    .expect("delete through relations");
    assert_eq!(
        ids(o, leaf("id", Operator::Present, Value::Null)).await,
        [1, 2, 4, 5]
    );
    let lines = collection(&ds, "order_lines");
    lines
        .delete(
            &caller(),
            &Filter::new(Some(canopy::datasource::ConditionTree::and(vec![
                leaf("order:status", Operator::Equal, "archived"),
                leaf("line_no", Operator::Equal, 2),
            ]))),
        )
        .await
        .expect("delete with a composite key through a relation");
    let remaining = lines
        .list(
            &caller(),
            &Filter::default().with_sort(Sort::asc("order_id")),
            &Projection::new(["order_id", "line_no"]),
        )
        .await
        .expect("list");
    assert_eq!(remaining.len(), 2);
    o.delete(
        &caller(),
        &Filter::new(Some(leaf("id", Operator::Equal, 5))),
    )
    .await
    .expect("delete by id");
    assert_eq!(
        ids(o, leaf("id", Operator::Present, Value::Null)).await,
        [1, 2, 4]
    );
}

async fn constraint_violations_are_typed(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let customers = collection(&ds, "customers");
    let duplicate = customers
        .create(
            &caller(),
            vec![record(&[("email", Value::from("ann@x.io"))])],
        )
        .await;
    assert!(
        matches!(
            duplicate,
            Err(Error::Constraint(ConstraintViolation::Unique))
        ),
        "{duplicate:?}"
    );
    let orders = collection(&ds, "orders");
    let dangling = orders
        .create(&caller(), vec![record(&[("customer_id", Value::Int(999))])])
        .await;
    assert!(
        matches!(
            dangling,
            Err(Error::Constraint(ConstraintViolation::ForeignKeyOnWrite))
        ),
        "{dangling:?}"
    );
    let dangling = orders
        .update(
            &caller(),
            &Filter::new(Some(leaf("id", Operator::Equal, 1))),
            &record(&[("customer_id", Value::Int(999))]),
        )
        .await;
    assert!(
        matches!(
            dangling,
            Err(Error::Constraint(ConstraintViolation::ForeignKeyOnWrite))
        ),
        "{dangling:?}"
    );
    let referenced = orders
        .delete(
            &caller(),
            &Filter::new(Some(leaf("id", Operator::Equal, 1))),
        )
        .await;
    assert!(
        matches!(
            referenced,
            Err(Error::Constraint(ConstraintViolation::ForeignKeyOnDelete))
        ),
        "{referenced:?}"
    );
    let countries = collection(&ds, "countries");
    let missing = countries
        .create(&caller(), vec![record(&[("name", Value::Null)])])
        .await;
    assert!(
        matches!(
            missing,
            Err(Error::Constraint(ConstraintViolation::NotNull))
        ),
        "{missing:?}"
    );
    // A failed batch writes nothing.
    let batch = countries
        .create(
            &caller(),
            vec![
                record(&[("name", Value::from("Peru"))]),
                record(&[("name", Value::Null)]),
            ],
        )
        .await;
    assert!(batch.is_err());
    assert_eq!(
        ids(countries.as_ref(), leaf("name", Operator::Equal, "Peru")).await,
        Vec::<i64>::new()
    );
}

async fn invalid_records_are_refused_before_sql(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    for bad in [
        record(&[("nope", Value::Int(1))]),
        record(&[("id", Value::Int(50))]),
        record(&[("amount", Value::from("ten"))]),
        record(&[("customer", Value::Int(1))]),
        record(&[("placed_at", Value::from("yesterday"))]),
    ] {
        // An auto-increment key takes an explicit value on insert (as the agent lets it), but
        // is never updated.
        if bad.get("id").is_none() {
            let created = orders.create(&caller(), vec![bad.clone()]).await;
            assert!(
                matches!(created, Err(Error::Validation(_))),
                "{bad:?}: {created:?}"
            );
        }
        let updated = orders.update(&caller(), &Filter::default(), &bad).await;
        assert!(
            matches!(updated, Err(Error::Validation(_))),
            "{bad:?}: {updated:?}"
        );
    }
    assert_eq!(
        ids(orders.as_ref(), leaf("id", Operator::Present, Value::Null)).await,
        [1, 2, 3, 4, 5]
    );
}

async fn views_are_read_only(backend: Backend) {
    let db = TestDb::new(backend).await;
    db.execute(&portable(
        backend,
        "CREATE TABLE people (id {pk}, name VARCHAR(50));
         INSERT INTO people (name) VALUES ('Ann');
         CREATE VIEW people_view AS SELECT id, name FROM people;",
    ))
    .await;
    let ds = db.datasource(Options::default()).await;
    let view = collection(&ds, "people_view");
    let rows = view
        .list(&caller(), &Filter::default(), &Projection::new(["name"]))
        .await
        .expect("list a view");
    assert_eq!(rows.len(), 1);
    let created = view
        .create(&caller(), vec![record(&[("name", Value::from("Bob"))])])
        .await;
    assert!(
        matches!(created, Err(Error::Unprocessable(_))),
        "{created:?}"
    );
    let deleted = view.delete(&caller(), &Filter::default()).await;
    assert!(
        matches!(deleted, Err(Error::Unprocessable(_))),
        "{deleted:?}"
    );
    let updated = view
        .update(
            &caller(),
            &Filter::default(),
            &record(&[("name", Value::from("x"))]),
        )
        .await;
    assert!(
        matches!(updated, Err(Error::Unprocessable(_))),
        "{updated:?}"
    );
}

async fn native_queries(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let connection = ds.native_query_connections().remove(0);
    // `Record` converts into the ordered map `native_query` takes.
    let variables = record(&[("status", Value::from("paid")), ("min", Value::Int(6))]).into();
    let rows = ds
        .native_query(
            &caller(),
            &connection,
            "SELECT status AS label, COUNT(*) AS value, SUM(amount) AS total FROM orders \
             WHERE status = $status AND amount > $min GROUP BY status;",
            &variables,
        )
        .await
        .expect("native query");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get("label"), Some(&Value::from("paid")));
    assert_eq!(int(rows[0].get("value")), 1);
    assert_eq!(number(rows[0].get("total")), 10.5);
    for refused in [
        "DELETE FROM orders",
        "SELECT 1; DELETE FROM orders",
        "UPDATE orders SET note = 'x'",
        "SELECT * FROM orders FOR UPDATE",
        "DROP TABLE orders",
    ] {
        let result = ds
            .native_query(&caller(), &connection, refused, &Record::new().into())
            .await;
        assert!(
            matches!(result, Err(Error::Unprocessable(_))),
            "{refused}: {result:?}"
        );
    }
    let unknown = ds
        .native_query(&caller(), "nope", "SELECT 1", &Record::new().into())
        .await;
    assert!(matches!(unknown, Err(Error::Unprocessable(_))));
    // The connection used by the read-only run still writes afterwards.
    let orders = collection(&ds, "orders");
    orders
        .update(
            &caller(),
            &Filter::new(Some(leaf("id", Operator::Equal, 1))),
            &record(&[("note", Value::from("ok"))]),
        )
        .await
        .expect("writes still work");
}

on_all_backends!(
    create_returns_generated_keys_and_defaults,
    create_in_a_table_with_a_natural_key,
    update_and_delete_by_filters_through_relations,
    constraint_violations_are_typed,
    invalid_records_are_refused_before_sql,
    views_are_read_only,
    native_queries,
);
