//! `list` on real databases: projections with to-one joins (null relations included), the
//! foreign-key shortcut, filters and sorts through relations, pages, composite keys, and at least
//! one test per operator family. Also the shop fixture the other data-operation suites share.

use canopy::datasource::sql::{Options, SqlDataSource};
use canopy::datasource::{
    Collection, ConditionTree, Error, Filter, Operator, Page, Projection, Record, Sort, SortClause,
    Value,
};
use canopy_e2e::{Backend, TestDb, caller, collection, on_all_backends};
use chrono::{TimeZone, Utc};

/// Replaces the portable placeholders of a DDL script: `{pk}` (auto-increment integer key),
/// `{ts}` (timestamp column), `{bool}`.
pub(crate) fn portable(backend: Backend, sql: &str) -> String {
    let (pk, ts) = match backend {
        Backend::Sqlite => ("INTEGER PRIMARY KEY AUTOINCREMENT", "DATETIME"),
        Backend::Postgres => ("SERIAL PRIMARY KEY", "TIMESTAMPTZ"),
        Backend::MySql => ("INT AUTO_INCREMENT PRIMARY KEY", "DATETIME(3)"),
    };
    sql.replace("{pk}", pk)
        .replace("{ts}", ts)
        .replace("{bool}", "BOOLEAN")
}

/// A UTC timestamp literal for the backend (PostgreSQL needs the offset for `timestamptz`).
pub(crate) fn ts(backend: Backend, utc: &str) -> String {
    match backend {
        Backend::Postgres => format!("'{utc}+00'"),
        Backend::MySql | Backend::Sqlite => format!("'{utc}'"),
    }
}

/// The shop: countries ← customers ← orders ← order_lines (composite key).
///
/// | order | customer | amount | status | note | placed_at (UTC) | day |
/// |---|---|---|---|---|---|---|
/// | 1 | Ann (France) | 10.50 | paid | first order | 2024-03-01 10:00 | 2024-03-01 |
/// | 2 | Ann | 20.00 | new | 50% off | 2024-03-31 22:30 (Paris: 1 Apr 00:30) | 2024-04-01 |
/// | 3 | Bob (Japan) | 5.25 | paid | NULL | 2023-12-31 23:30 (Paris: 1 Jan 00:30) | 2023-12-31 |
/// | 4 | — | 100.00 | cancelled | '' | 2024-01-15 12:00 | 2024-01-15 |
/// | 5 | Carl (no country) | 7.00 | new | Rush_delivery | 2024-02-10 08:00 | 2024-02-10 |
pub(crate) async fn shop(backend: Backend) -> (TestDb, SqlDataSource) {
    let db = TestDb::new(backend).await;
    let ddl = portable(
        backend,
        "CREATE TABLE countries (id {pk}, name VARCHAR(255) NOT NULL);
         CREATE TABLE customers (id {pk}, name VARCHAR(255), email VARCHAR(255) UNIQUE, country_id INT,
            vip {bool} NOT NULL DEFAULT FALSE, FOREIGN KEY (country_id) REFERENCES countries(id));
         CREATE TABLE orders (id {pk}, customer_id INT, amount DECIMAL(10,2), status VARCHAR(20) NOT NULL DEFAULT 'new',
            note VARCHAR(255), placed_at {ts}, day DATE, FOREIGN KEY (customer_id) REFERENCES customers(id));
         CREATE TABLE order_lines (order_id INT NOT NULL, line_no INT NOT NULL, qty INT NOT NULL,
            PRIMARY KEY (order_id, line_no), FOREIGN KEY (order_id) REFERENCES orders(id));",
    );
    db.execute(&ddl).await;
    let t = |utc: &str| ts(backend, utc);
    let seed = format!(
        "INSERT INTO countries (name) VALUES ('France');
         INSERT INTO countries (name) VALUES ('Japan');
         INSERT INTO customers (name, email, country_id, vip) VALUES ('Ann', 'ann@x.io', 1, TRUE);
         INSERT INTO customers (name, email, country_id, vip) VALUES ('Bob', 'bob@x.io', 2, FALSE);
         INSERT INTO customers (name, email, country_id, vip) VALUES ('Carl', NULL, NULL, FALSE);
         INSERT INTO customers (name, email, country_id, vip) VALUES ('dora', 'dora@x.io', 1, FALSE);
         INSERT INTO orders (customer_id, amount, status, note, placed_at, day) VALUES (1, 10.50, 'paid', 'first order', {}, '2024-03-01');
         INSERT INTO orders (customer_id, amount, status, note, placed_at, day) VALUES (1, 20.00, 'new', '50% off', {}, '2024-04-01');
         INSERT INTO orders (customer_id, amount, status, note, placed_at, day) VALUES (2, 5.25, 'paid', NULL, {}, '2023-12-31');
         INSERT INTO orders (customer_id, amount, status, note, placed_at, day) VALUES (NULL, 100.00, 'cancelled', '', {}, '2024-01-15');
         INSERT INTO orders (customer_id, amount, status, note, placed_at, day) VALUES (3, 7.00, 'new', 'Rush_delivery', {}, '2024-02-10');
         INSERT INTO order_lines (order_id, line_no, qty) VALUES (1, 1, 2);
         INSERT INTO order_lines (order_id, line_no, qty) VALUES (1, 2, 1);
         INSERT INTO order_lines (order_id, line_no, qty) VALUES (2, 1, 5);",
        t("2024-03-01 10:00:00"),
        t("2024-03-31 22:30:00"),
        t("2023-12-31 23:30:00"),
        t("2024-01-15 12:00:00"),
        t("2024-02-10 08:00:00"),
    );
    db.execute(&seed).await;
    let options = Options {
        connection_name: Some("main".to_owned()),
        ..Options::default()
    };
    let ds = db.datasource(options).await;
    (db, ds)
}

pub(crate) fn leaf(field: &str, op: Operator, value: impl Into<Value>) -> ConditionTree {
    ConditionTree::leaf(field, op, value)
}

pub(crate) fn list_of(items: Vec<Value>) -> Value {
    Value::Array(items)
}

/// Ids of the orders matching `tree`, sorted.
pub(crate) async fn ids(c: &dyn Collection, tree: ConditionTree) -> Vec<i64> {
    ids_result(c, tree)
        .await
        .unwrap_or_else(|e| panic!("list failed: {e:?}"))
}

pub(crate) async fn ids_result(c: &dyn Collection, tree: ConditionTree) -> Result<Vec<i64>, Error> {
    let filter = Filter::new(Some(tree)).with_sort(Sort::asc("id"));
    let records = c.list(&caller(), &filter, &Projection::new(["id"])).await?;
    Ok(records.iter().map(|r| int(r.get("id"))).collect())
}

pub(crate) fn int(value: Option<&Value>) -> i64 {
    match value {
        Some(Value::Int(i)) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

pub(crate) fn number(value: Option<&Value>) -> f64 {
    value
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("expected a number, got {value:?}"))
}

fn nested<'a>(record: &'a Record, path: &str) -> &'a Value {
    record
        .get_path(path)
        .unwrap_or_else(|| panic!("{path} missing in {record:?}"))
}

async fn joins_load_related_records_and_null_relations(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let projection = Projection::new(["id", "amount", "customer:name", "customer:country:name"]);
    let records = orders
        .list(
            &caller(),
            &Filter::default().with_sort(Sort::asc("id")),
            &projection,
        )
        .await
        .expect("list");
    assert_eq!(records.len(), 5);
    let first = &records[0];
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        ["id", "amount", "customer"]
    );
    assert_eq!(number(first.get("amount")), 10.5);
    assert_eq!(nested(first, "customer:name"), &Value::from("Ann"));
    assert_eq!(
        nested(first, "customer:country:name"),
        &Value::from("France")
    );
    // Order 4 has no customer: the relation is null, not a record of nulls.
    assert_eq!(records[3].get("customer"), Some(&Value::Null));
    // Carl has no country.
    assert_eq!(nested(&records[4], "customer:name"), &Value::from("Carl"));
    assert_eq!(nested(&records[4], "customer:country"), &Value::Null);
    let Value::Record(customer) = records[0].get("customer").expect("customer") else {
        panic!("record")
    };
    assert_eq!(
        customer.keys().collect::<Vec<_>>(),
        ["name", "country"],
        "only projected fields"
    );
}

async fn key_only_relations_come_from_the_foreign_key(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let records = orders
        .list(
            &caller(),
            &Filter::default().with_sort(Sort::asc("id")),
            &Projection::new(["id", "customer:id"]),
        )
        .await
        .expect("list");
    assert_eq!(int(nested(&records[0], "customer:id").into()), 1);
    assert_eq!(records[3].get("customer"), Some(&Value::Null));
}

async fn filters_and_sorts_through_relations_with_pages(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let filter = Filter::new(Some(leaf(
        "customer:country:name",
        Operator::Equal,
        "France",
    )))
    .with_sort(Sort(vec![
        SortClause {
            field: "customer:name".into(),
            ascending: true,
        },
        SortClause {
            field: "amount".into(),
            ascending: false,
        },
    ]))
    .with_page(Page::new(1, 1));
    let records = orders
        .list(&caller(), &filter, &Projection::new(["id"]))
        .await
        .expect("list");
    // France: orders 1 and 2 (Ann); sorted by amount desc → 2, 1; page skips one.
    assert_eq!(
        records.iter().map(|r| int(r.get("id"))).collect::<Vec<_>>(),
        [1]
    );
    // Sorting by a relation puts null relations first ascending (NULL is the smallest value).
    let filter = Filter::default().with_sort(Sort(vec![
        SortClause {
            field: "customer:name".into(),
            ascending: true,
        },
        SortClause {
            field: "id".into(),
            ascending: true,
        },
    ]));
    let records = orders
        .list(&caller(), &filter, &Projection::new(["id"]))
        .await
        .expect("list");
    assert_eq!(
        records.iter().map(|r| int(r.get("id"))).collect::<Vec<_>>(),
        [4, 1, 2, 3, 5]
    );
    let filter = Filter::default().with_sort(Sort::desc("note"));
    let records = orders
        .list(&caller(), &filter, &Projection::new(["id"]))
        .await
        .expect("list");
    assert_eq!(int(records[4].get("id")), 3, "NULL last when descending");
}

async fn composite_primary_keys(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let lines = collection(&ds, "order_lines");
    let tree = ConditionTree::and(vec![
        leaf("order_id", Operator::Equal, 1),
        leaf("line_no", Operator::Equal, 2),
    ]);
    let records = lines
        .list(
            &caller(),
            &Filter::new(Some(tree)),
            &Projection::new(["order_id", "line_no", "qty", "order:status"]),
        )
        .await
        .expect("list");
    assert_eq!(records.len(), 1);
    assert_eq!(int(records[0].get("qty")), 1);
    assert_eq!(nested(&records[0], "order:status"), &Value::from("paid"));
}

async fn presence_operators(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    assert_eq!(
        ids(o, leaf("note", Operator::Missing, Value::Null)).await,
        [3]
    );
    assert_eq!(
        ids(o, leaf("note", Operator::Blank, Value::Null)).await,
        [3, 4]
    );
    assert_eq!(
        ids(o, leaf("note", Operator::Present, Value::Null)).await,
        [1, 2, 5]
    );
    assert_eq!(
        ids(o, leaf("customer_id", Operator::Present, Value::Null)).await,
        [1, 2, 3, 5]
    );
    assert_eq!(
        ids(o, leaf("customer_id", Operator::Blank, Value::Null)).await,
        [4]
    );
}

async fn equality_and_list_operators(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    assert_eq!(
        ids(o, leaf("status", Operator::Equal, "paid")).await,
        [1, 3]
    );
    assert_eq!(
        ids(o, leaf("customer_id", Operator::Equal, Value::Null)).await,
        [4]
    );
    // NotEqual includes NULL rows.
    assert_eq!(
        ids(o, leaf("customer_id", Operator::NotEqual, 1)).await,
        [3, 4, 5]
    );
    assert_eq!(
        ids(
            o,
            leaf(
                "customer_id",
                Operator::In,
                list_of(vec![2.into(), 3.into()])
            )
        )
        .await,
        [3, 5]
    );
    assert_eq!(
        ids(
            o,
            leaf(
                "customer_id",
                Operator::In,
                list_of(vec![2.into(), Value::Null])
            )
        )
        .await,
        [3, 4]
    );
    assert_eq!(
        ids(
            o,
            leaf("customer_id", Operator::NotIn, list_of(vec![1.into()]))
        )
        .await,
        [3, 4, 5]
    );
    assert_eq!(
        ids(
            o,
            leaf(
                "customer_id",
                Operator::NotIn,
                list_of(vec![1.into(), Value::Null])
            )
        )
        .await,
        [3, 5]
    );
    assert_eq!(
        ids(o, leaf("customer_id", Operator::In, list_of(vec![]))).await,
        Vec::<i64>::new()
    );
    let customers = collection(&ds, "customers");
    assert_eq!(
        ids(customers.as_ref(), leaf("vip", Operator::Equal, true)).await,
        [1]
    );
}

async fn comparison_operators(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    assert_eq!(
        ids(o, leaf("amount", Operator::GreaterThan, 10.5)).await,
        [2, 4]
    );
    assert_eq!(
        ids(o, leaf("amount", Operator::GreaterThanOrEqual, 10.5)).await,
        [1, 2, 4]
    );
    assert_eq!(ids(o, leaf("amount", Operator::LessThan, 7)).await, [3]);
    assert_eq!(
        ids(o, leaf("amount", Operator::LessThanOrEqual, 7)).await,
        [3, 5]
    );
    let march = Value::Date(
        Utc.with_ymd_and_hms(2024, 3, 1, 10, 0, 0)
            .single()
            .expect("valid"),
    );
    assert_eq!(
        ids(
            o,
            leaf("placed_at", Operator::GreaterThanOrEqual, march.clone())
        )
        .await,
        [1, 2]
    );
    assert_eq!(
        ids(o, leaf("placed_at", Operator::Equal, march.clone())).await,
        [1]
    );
    assert_eq!(
        ids(o, leaf("placed_at", Operator::Before, march)).await,
        [3, 4, 5]
    );
    let day = Value::Dateonly(chrono::NaiveDate::from_ymd_opt(2024, 2, 10).expect("valid"));
    assert_eq!(ids(o, leaf("day", Operator::After, day)).await, [1, 2]);
}

async fn pattern_operators(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let customers = collection(&ds, "customers");
    let c = customers.as_ref();
    // Case-sensitive on every database.
    assert_eq!(
        ids(c, leaf("name", Operator::Like, "D%")).await,
        Vec::<i64>::new()
    );
    assert_eq!(ids(c, leaf("name", Operator::Like, "d_ra")).await, [4]);
    assert_eq!(ids(c, leaf("name", Operator::ILike, "D%")).await, [4]);
    assert_eq!(ids(c, leaf("name", Operator::Contains, "o")).await, [2, 4]);
    assert_eq!(
        ids(c, leaf("name", Operator::IContains, "A")).await,
        [1, 3, 4]
    );
    assert_eq!(ids(c, leaf("name", Operator::StartsWith, "C")).await, [3]);
    assert_eq!(ids(c, leaf("name", Operator::IStartsWith, "c")).await, [3]);
    assert_eq!(ids(c, leaf("name", Operator::EndsWith, "nn")).await, [1]);
    assert_eq!(ids(c, leaf("name", Operator::IEndsWith, "NN")).await, [1]);
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    // The user's % and _ match literally.
    assert_eq!(ids(o, leaf("note", Operator::Contains, "50%")).await, [2]);
    assert_eq!(ids(o, leaf("note", Operator::Contains, "h_d")).await, [5]);
    assert_eq!(ids(o, leaf("note", Operator::Contains, "%")).await, [2]);
    // Negations include NULL rows.
    assert_eq!(
        ids(o, leaf("note", Operator::NotContains, "order")).await,
        [2, 3, 4, 5]
    );
    assert_eq!(
        ids(o, leaf("note", Operator::NotIContains, "RUSH")).await,
        [1, 2, 3, 4]
    );
}

async fn length_and_regex_operators(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let customers = collection(&ds, "customers");
    let c = customers.as_ref();
    assert_eq!(ids(c, leaf("name", Operator::LongerThan, 3)).await, [3, 4]);
    assert_eq!(ids(c, leaf("name", Operator::ShorterThan, 4)).await, [1, 2]);
    assert_eq!(
        ids(c, leaf("name", Operator::Match, "^[A-C]")).await,
        [1, 2, 3]
    );
    assert_eq!(ids(c, leaf("name", Operator::Match, "^d")).await, [4]);
    assert_eq!(
        ids(c, leaf("name", Operator::Match, "^D")).await,
        Vec::<i64>::new(),
        "case-sensitive"
    );
    assert_eq!(ids(c, leaf("name", Operator::Match, "(?i)^D")).await, [4]);
    let bad = ids_result(c, leaf("name", Operator::Match, "(")).await;
    assert!(matches!(bad, Err(Error::Validation(_))), "{bad:?}");
}

async fn time_operators_are_lowered(backend: Backend) {
    let (db, ds) = shop(backend).await;
    let now = ts(backend, &Utc::now().format("%Y-%m-%d %H:%M:%S").to_string());
    db.execute(&format!(
        "INSERT INTO orders (customer_id, amount, status, placed_at, day) VALUES (1, 1, 'new', {now}, '2024-01-01')"
    ))
    .await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    assert_eq!(
        ids(o, leaf("placed_at", Operator::Today, Value::Null)).await,
        [6]
    );
    assert_eq!(
        ids(o, leaf("placed_at", Operator::Past, Value::Null)).await,
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(
        ids(o, leaf("placed_at", Operator::PreviousXDays, 3)).await,
        Vec::<i64>::new()
    );
}

async fn sqlite_timestamps_in_other_spellings_compare_by_instant(backend: Backend) {
    if backend != Backend::Sqlite {
        return;
    }
    let (db, ds) = shop(backend).await;
    db.execute(
        "UPDATE orders SET placed_at = '2024-03-01T10:00:00Z' WHERE id = 1;
         UPDATE orders SET placed_at = '2024-03-31 22:30:00.000 +00:00' WHERE id = 2;
         UPDATE orders SET placed_at = '2024-01-01T00:30:00+01:00' WHERE id = 3;",
    )
    .await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    let march = Value::Date(
        Utc.with_ymd_and_hms(2024, 3, 1, 10, 0, 0)
            .single()
            .expect("valid"),
    );
    assert_eq!(
        ids(o, leaf("placed_at", Operator::Equal, march.clone())).await,
        [1]
    );
    assert_eq!(
        ids(o, leaf("placed_at", Operator::GreaterThan, march)).await,
        [2]
    );
    let new_year = Value::Date(
        Utc.with_ymd_and_hms(2023, 12, 31, 23, 30, 0)
            .single()
            .expect("valid"),
    );
    assert_eq!(
        ids(o, leaf("placed_at", Operator::Equal, new_year)).await,
        [3]
    );
    let records = o
        .list(
            &caller(),
            &Filter::new(Some(leaf("id", Operator::Equal, 2))),
            &Projection::new(["placed_at"]),
        )
        .await
        .expect("list");
    assert_eq!(
        records[0].get("placed_at"),
        Some(&Value::Date(
            Utc.with_ymd_and_hms(2024, 3, 31, 22, 30, 0)
                .single()
                .expect("valid")
        ))
    );
}

async fn postgres_array_operators(backend: Backend) {
    if backend != Backend::Postgres {
        return;
    }
    let db = TestDb::new(backend).await;
    db.execute(
        "CREATE TYPE mood AS ENUM ('happy', 'sad');
         CREATE TABLE posts (id SERIAL PRIMARY KEY, tags TEXT[], scores INT[], moods mood[], mood mood);
         INSERT INTO posts (tags, scores, moods, mood) VALUES ('{a,b}', '{1,2}', '{happy}', 'happy');
         INSERT INTO posts (tags, scores, moods, mood) VALUES ('{b,c}', '{3}', '{sad,happy}', 'sad');
         INSERT INTO posts (tags, scores, moods, mood) VALUES (NULL, NULL, NULL, NULL);",
    )
    .await;
    let ds = db.datasource(Options::default()).await;
    let posts = collection(&ds, "posts");
    let p = posts.as_ref();
    let strings = |items: &[&str]| list_of(items.iter().map(|s| Value::from(*s)).collect());
    assert_eq!(
        ids(p, leaf("tags", Operator::IncludesAll, strings(&["b"]))).await,
        [1, 2]
    );
    assert_eq!(
        ids(p, leaf("tags", Operator::IncludesAll, strings(&["a", "b"]))).await,
        [1]
    );
    assert_eq!(
        ids(p, leaf("tags", Operator::IncludesNone, strings(&["a"]))).await,
        [2, 3]
    );
    assert_eq!(
        ids(
            p,
            leaf("scores", Operator::IncludesAll, list_of(vec![3.into()]))
        )
        .await,
        [2]
    );
    assert_eq!(
        ids(p, leaf("moods", Operator::IncludesAll, strings(&["sad"]))).await,
        [2]
    );
    assert_eq!(ids(p, leaf("mood", Operator::Equal, "sad")).await, [2]);
    assert_eq!(
        ids(p, leaf("mood", Operator::In, strings(&["sad", "happy"]))).await,
        [1, 2]
    );
    let records = p
        .list(
            &caller(),
            &Filter::default().with_sort(Sort::asc("id")),
            &Projection::new(["tags", "moods", "mood"]),
        )
        .await
        .expect("list");
    assert_eq!(records[0].get("tags"), Some(&strings(&["a", "b"])));
    assert_eq!(records[1].get("moods"), Some(&strings(&["sad", "happy"])));
    assert_eq!(records[1].get("mood"), Some(&Value::from("sad")));
    assert_eq!(records[2].get("tags"), Some(&Value::Null));
}

async fn invalid_input_is_a_validation_error(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let bad_projection = orders
        .list(&caller(), &Filter::default(), &Projection::new(["nope"]))
        .await;
    assert!(
        matches!(bad_projection, Err(Error::Validation(_))),
        "{bad_projection:?}"
    );
    let bad_sort = orders
        .list(
            &caller(),
            &Filter::default().with_sort(Sort::asc("customer:nope")),
            &Projection::new(["id"]),
        )
        .await;
    assert!(
        matches!(bad_sort, Err(Error::Validation(_))),
        "{bad_sort:?}"
    );
    let bad_type = ids_result(orders.as_ref(), leaf("amount", Operator::Equal, "ten")).await;
    assert!(
        matches!(bad_type, Err(Error::Validation(_))),
        "{bad_type:?}"
    );
    let bad_operator = ids_result(orders.as_ref(), leaf("amount", Operator::Contains, "1")).await;
    assert!(
        matches!(bad_operator, Err(Error::Validation(_))),
        "{bad_operator:?}"
    );
    let customers = collection(&ds, "customers");
    let to_many = ids_result(customers.as_ref(), leaf("orders:id", Operator::Equal, 1)).await;
    assert!(matches!(to_many, Err(Error::Validation(_))), "{to_many:?}");
    let segment = Filter {
        segment: Some("vip".into()),
        ..Filter::default()
    };
    let bad_segment = orders
        .list(&caller(), &segment, &Projection::new(["id"]))
        .await;
    assert!(
        matches!(bad_segment, Err(Error::Validation(ref m)) if m == "Invalid segment: \"vip\""),
        "{bad_segment:?}"
    );
}

on_all_backends!(
    joins_load_related_records_and_null_relations,
    key_only_relations_come_from_the_foreign_key,
    filters_and_sorts_through_relations_with_pages,
    composite_primary_keys,
    presence_operators,
    equality_and_list_operators,
    comparison_operators,
    pattern_operators,
    length_and_regex_operators,
    time_operators_are_lowered,
    sqlite_timestamps_in_other_spellings_compare_by_instant,
    postgres_array_operators,
    invalid_input_is_a_validation_error,
);
