//! Injection attempts through every input of the data operations: values, field names, sort
//! fields, projections, search, record fields and native query variables. Each is either bound
//! harmlessly or refused as a validation (or unprocessable) error, and the tables are unchanged.

use canopy::datasource::sql::Options;
use canopy::datasource::{
    Collection, ConditionTree, DataSource, Error, Filter, Operator, Projection, Record, Sort, Value,
};
use canopy_e2e::{Backend, TestDb, caller, collection, on_all_backends};

use crate::list::{ids, ids_result, int, leaf, shop};

const PAYLOADS: &[&str] = &[
    "'; DROP TABLE customers; --",
    "\"; DROP TABLE customers; --",
    "`; DROP TABLE customers; --",
    "x' OR '1'='1",
    "x\\'; DELETE FROM customers; --",
    "1) OR (1=1",
    "%' OR name LIKE '%",
    "*",
    "$1",
    "?",
];

/// Every customer row as text, to prove nothing changed.
async fn snapshot(customers: &dyn Collection) -> Vec<String> {
    let records = customers
        .list(
            &caller(),
            &Filter::default().with_sort(Sort::asc("id")),
            &Projection::new(["id", "name", "email", "country_id", "vip"]),
        )
        .await
        .expect("list customers");
    records.iter().map(|r| format!("{r:?}")).collect()
}

async fn values_are_bound(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let customers = collection(&ds, "customers");
    let c = customers.as_ref();
    let before = snapshot(c).await;
    for payload in PAYLOADS {
        for op in [
            Operator::Equal,
            Operator::NotEqual,
            Operator::Like,
            Operator::ILike,
            Operator::Contains,
            Operator::NotIContains,
            Operator::StartsWith,
            Operator::IEndsWith,
            Operator::NotContains,
        ] {
            let result = ids_result(c, leaf("name", op, *payload)).await;
            let matched = result.unwrap_or_else(|e| panic!("{op} {payload}: {e:?}"));
            if matches!(
                op,
                Operator::Equal | Operator::Contains | Operator::StartsWith
            ) {
                assert!(matched.is_empty(), "{op} {payload} matched {matched:?}");
            }
        }
        let listed = ids_result(
            c,
            leaf(
                "name",
                Operator::In,
                Value::Array(vec![Value::from(*payload)]),
            ),
        )
        .await;
        assert_eq!(listed.expect("in"), Vec::<i64>::new());
        // A payload as a regex is either a valid pattern (bound) or a validation error.
        match ids_result(c, leaf("name", Operator::Match, *payload)).await {
            Ok(_) | Err(Error::Validation(_)) => {}
            Err(other) => panic!("Match {payload}: {other:?}"),
        }
    }
    assert_eq!(snapshot(c).await, before);
}

/// A refusal of the client's input: a validation error, or the agent's unknown field or
/// relation error.
fn refused(error: &Error) -> bool {
    matches!(
        error,
        Error::Validation(_) | Error::MissingField(_) | Error::MissingRelation(_)
    )
}

async fn identifiers_are_never_taken_from_input(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let customers = collection(&ds, "customers");
    let c = customers.as_ref();
    let before = snapshot(c).await;
    for payload in PAYLOADS.iter().chain(&[
        "name; DROP TABLE customers",
        "name\" --",
        "country:name) --",
    ]) {
        let filtered = ids_result(c, leaf(payload, Operator::Equal, "Ann")).await;
        assert!(
            matches!(&filtered, Err(e) if refused(e)),
            "field {payload}: {filtered:?}"
        );
        let sorted = c
            .list(
                &caller(),
                &Filter::default().with_sort(Sort::asc(*payload)),
                &Projection::new(["id"]),
            )
            .await;
        assert!(
            matches!(&sorted, Err(e) if refused(e)),
            "sort {payload}: {sorted:?}"
        );
        let projected = c
            .list(&caller(), &Filter::default(), &Projection::new([*payload]))
            .await;
        assert!(
            matches!(&projected, Err(e) if refused(e)),
            "projection {payload}: {projected:?}"
        );
        let grouped = c
            .aggregate(
                &caller(),
                &Filter::default(),
                &canopy::datasource::Aggregation::count().group_by(*payload, None),
                None,
            )
            .await;
        assert!(grouped.is_err(), "group {payload}: {grouped:?}");
        let mut patch = Record::new();
        patch.insert(*payload, Value::from("x"));
        let updated = c.update(&caller(), &Filter::default(), &patch).await;
        assert!(
            matches!(updated, Err(Error::Validation(_))),
            "update {payload}: {updated:?}"
        );
        let created = c.create(&caller(), vec![patch]).await;
        assert!(
            matches!(created, Err(Error::Validation(_))),
            "create {payload}: {created:?}"
        );
    }
    assert_eq!(snapshot(c).await, before);
}

async fn search_is_harmless(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let customers = collection(&ds, "customers");
    let c = customers.as_ref();
    let before = snapshot(c).await;
    for payload in PAYLOADS {
        for extended in [false, true] {
            let filter = Filter {
                search: Some((*payload).to_owned()),
                search_extended: extended,
                ..Filter::default()
            };
            let result = c.list(&caller(), &filter, &Projection::new(["id"])).await;
            match result {
                Ok(records) => assert!(records.is_empty(), "search {payload} matched {records:?}"),
                Err(Error::Validation(_)) => {}
                Err(other) => panic!("search {payload}: {other:?}"),
            }
        }
    }
    assert_eq!(snapshot(c).await, before);
}

async fn stored_payloads_read_back_verbatim(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let countries = collection(&ds, "countries");
    for payload in PAYLOADS {
        let mut record = Record::new();
        record.insert("name", Value::from(*payload));
        let created = countries
            .create(&caller(), vec![record])
            .await
            .expect("create");
        assert_eq!(created[0].get("name"), Some(&Value::from(*payload)));
        let found = ids(countries.as_ref(), leaf("name", Operator::Equal, *payload)).await;
        assert_eq!(found.len(), 1, "{payload}");
    }
    let customers = collection(&ds, "customers");
    assert_eq!(
        ids(customers.as_ref(), ConditionTree::and(vec![])).await,
        [1, 2, 3, 4],
        "customers untouched"
    );
}

async fn native_query_variables_are_bound(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let customers = collection(&ds, "customers");
    let before = snapshot(customers.as_ref()).await;
    let connection = ds.native_query_connections().remove(0);
    for payload in PAYLOADS {
        let mut variables = Record::new();
        variables.insert("name", Value::from(*payload));
        let rows = ds
            .native_query(
                &caller(),
                &connection,
                "SELECT id FROM customers WHERE name = $name",
                &variables.into(),
            )
            .await
            .unwrap_or_else(|e| panic!("{payload}: {e:?}"));
        assert!(rows.is_empty(), "{payload} matched {rows:?}");
        let injected = format!("SELECT id FROM customers WHERE name = '{payload}'");
        match ds
            .native_query(&caller(), &connection, &injected, &Record::new().into())
            .await
        {
            Ok(_) | Err(Error::Unprocessable(_)) | Err(Error::Validation(_)) => {}
            Err(other) => panic!("{injected}: {other:?}"),
        }
    }
    for query in [
        "SELECT 1; DROP TABLE customers",
        "SELECT 1 /* */; DELETE FROM customers",
        "WITH x AS (SELECT 1) DELETE FROM customers",
        "SELECT * FROM customers; -- comment\nDELETE FROM customers",
    ] {
        let result = ds
            .native_query(&caller(), &connection, query, &Record::new().into())
            .await;
        assert!(
            matches!(result, Err(Error::Unprocessable(_))),
            "{query}: {result:?}"
        );
    }
    assert_eq!(snapshot(customers.as_ref()).await, before);
}

/// Native queries are judged by their parse, not their words: columns named after keywords,
/// CTEs, unions, window functions and literals holding SQL all run, while writes hidden in a
/// query are refused and leave the table unchanged.
async fn native_queries_are_parsed_not_scanned_for_words(backend: Backend) {
    let db = TestDb::new(backend).await;
    let q = |name: &str| match backend {
        Backend::MySql => format!("`{name}`"),
        Backend::Postgres | Backend::Sqlite => format!("\"{name}\""),
    };
    db.execute(&format!(
        "CREATE TABLE notes (id INT PRIMARY KEY, comment VARCHAR(50), {set} VARCHAR(50), \
         {load} INT, {lock} INT, {do} INT, into_x INT);
         INSERT INTO notes VALUES (1, 'DELETE FROM notes; --', 'a', 10, 1, 5, 7);
         INSERT INTO notes VALUES (2, 'plain', 'b', 20, 0, 6, 8);",
        set = q("set"),
        load = q("load"),
        lock = q("lock"),
        do = q("do"),
    ))
    .await;
    let connection = "main".to_owned();
    let ds = db
        .datasource(Options {
            connection_name: Some(connection.clone()),
            ..Options::default()
        })
        .await;
    let run = |query: String, variables: &[(&str, Value)]| {
        let ds = &ds;
        let connection = &connection;
        // Collected here so the map type is the one `native_query` names.
        let variables = variables
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect();
        async move {
            ds.native_query(&caller(), connection, &query, &variables)
                .await
        }
    };
    // Each database reserves different words; every one of these is what that database takes
    // unquoted.
    let keywords = match backend {
        Backend::Postgres => "comment, set, load, lock, n.do, into_x",
        Backend::MySql => "comment, do, n.set, n.load, n.lock, into_x",
        Backend::Sqlite => "comment, load, lock, do, into_x, n.\"set\"",
    };
    let rows = run(
        format!("SELECT {keywords} FROM notes AS n WHERE comment = $comment"),
        &[("comment", Value::from("DELETE FROM notes; --"))],
    )
    .await
    .expect("keyword-named columns");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].get("set"), Some(&Value::from("a")));
    assert_eq!(int(rows[0].get("load")), 10);
    assert_eq!(int(rows[0].get("do")), 5);
    assert_eq!(int(rows[0].get("into_x")), 7);
    for query in [
        "WITH big AS (SELECT id, into_x FROM notes WHERE into_x > 7) \
         SELECT id AS value FROM big",
        "SELECT id AS value FROM notes WHERE id IN (SELECT MAX(id) FROM notes)",
        "SELECT id AS value FROM notes WHERE id = 2 UNION SELECT 2 AS value",
        "SELECT value FROM (SELECT id AS value, ROW_NUMBER() OVER (ORDER BY id DESC) AS rn \
         FROM notes) AS ranked WHERE rn = 1",
        "SELECT id AS value FROM notes WHERE comment <> 'DROP TABLE notes; --' AND id = 2;",
    ] {
        let rows = run(query.to_owned(), &[])
            .await
            .unwrap_or_else(|e| panic!("{query}: {e:?}"));
        assert_eq!(rows.len(), 1, "{query}: {rows:?}");
        assert_eq!(int(rows[0].get("value")), 2, "{query}");
    }
    let mut refused = vec![
        "SELECT * FROM notes FOR UPDATE",
        "SELECT 1; DELETE FROM notes",
        "DELETE FROM notes WHERE id IN (SELECT id FROM notes)",
        "SELECT * INTO copy FROM notes",
    ];
    match backend {
        Backend::Postgres => refused.extend([
            "WITH d AS (DELETE FROM notes RETURNING id) SELECT id FROM d",
            "WITH d AS (UPDATE notes SET comment = 'x' RETURNING id) SELECT id FROM d",
            "SELECT * FROM notes FOR NO KEY UPDATE",
        ]),
        Backend::MySql => refused.extend([
            "SELECT 1 /*!, (SELECT SLEEP(0)) */",
            "SELECT id INTO @x FROM notes LIMIT 1",
            "SELECT * FROM notes LOCK IN SHARE MODE",
        ]),
        Backend::Sqlite => refused.extend(["SELECT [it's]; DELETE FROM notes; --'"]),
    }
    for query in refused {
        let result = run(query.to_owned(), &[]).await;
        assert!(
            matches!(result, Err(Error::Unprocessable(_))),
            "{query}: {result:?}"
        );
    }
    let rows = run("SELECT COUNT(*) AS value FROM notes".to_owned(), &[])
        .await
        .expect("count");
    assert_eq!(int(rows[0].get("value")), 2, "notes untouched");
}

on_all_backends!(
    values_are_bound,
    identifiers_are_never_taken_from_input,
    search_is_harmless,
    stored_payloads_read_back_verbatim,
    native_query_variables_are_bound,
    native_queries_are_parsed_not_scanned_for_words,
);
