//! Charts on real databases: every built-in chart type through `ChartRequest::parse` and
//! `evaluate`, Value charts with the previous period, Line charts bucketed in Europe/Paris,
//! leaderboards through OneToMany and ManyToMany relations, and query charts (native SQL) with
//! their column-name checks.

use canopy::agent::Error as AgentError;
use canopy::agent::chart::{ChartRequest, evaluate, evaluate_native};
use canopy::datasource::query::equivalence::start_of_day;
use canopy::datasource::sql::{Options, SqlDataSource};
use canopy::datasource::{Caller, ConditionTree, DataSource, Operator, RelationSchema};
use canopy_e2e::{Backend, TestDb, caller, caller_in, on_all_backends};
use chrono::{Duration, Utc};
use serde_json::{Value as Json, json};

use crate::list::{portable, shop, ts};

async fn chart(
    ds: &SqlDataSource,
    caller: &Caller,
    collection: &str,
    body: Json,
) -> Result<Json, AgentError> {
    chart_scoped(ds, caller, collection, body, None).await
}

async fn chart_scoped(
    ds: &SqlDataSource,
    caller: &Caller,
    collection: &str,
    body: Json,
    scope: Option<ConditionTree>,
) -> Result<Json, AgentError> {
    let request = ChartRequest::parse(&body, ds.schema(), collection, caller)?;
    evaluate(ds, caller, collection, &request, scope).await
}

/// `[{key, value}]` as sorted `(key, value)` pairs; numbers compared as f64.
fn pairs(value: &Json) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = value
        .as_array()
        .expect("an array")
        .iter()
        .map(|item| {
            let key = match &item["key"] {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            (key, num(&item["value"]))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn num(value: &Json) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("expected a JSON number, got {value}"))
}

fn owned(items: &[(&str, f64)]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn value_objective_and_pie(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let c = caller();
    let value = chart(
        &ds,
        &c,
        "orders",
        json!({"type": "Value", "aggregator": "Count", "sourceCollectionName": "orders",
            "filter": {"field": "status", "operator": "equal", "value": "{{s}}"},
            "contextVariables": {"s": "paid"}}),
    )
    .await
    .expect("value");
    assert_eq!(value, json!({"countCurrent": 2}), "no interval operator");
    let sum = chart(
        &ds,
        &c,
        "orders",
        json!({"type": "Value", "aggregator": "Sum", "aggregateFieldName": "amount"}),
    )
    .await
    .expect("sum");
    assert!((num(&sum["countCurrent"]) - 142.75).abs() < 1e-9, "{sum}");
    let empty = chart(
        &ds,
        &c,
        "orders",
        json!({"type": "Value", "aggregator": "Sum", "aggregateFieldName": "amount",
            "filter": {"field": "status", "operator": "equal", "value": "none"}}),
    )
    .await
    .expect("empty sum");
    assert_eq!(num(&empty["countCurrent"]), 0.0);
    // The scope restricts every chart.
    let scoped = chart_scoped(
        &ds,
        &c,
        "orders",
        json!({"type": "Value", "aggregator": "Count"}),
        Some(ConditionTree::leaf("status", Operator::Equal, "new")),
    )
    .await
    .expect("scoped");
    assert_eq!(scoped, json!({"countCurrent": 2}));
    let objective = chart(
        &ds,
        &c,
        "orders",
        json!({"type": "Objective", "aggregator": "Sum", "aggregateFieldName": "amount",
            "objective": "{{goal}}", "contextVariables": {"goal": 200},
            "filter": {"field": "status", "operator": "in", "value": ["paid", "new"]}}),
    )
    .await
    .expect("objective");
    assert!(
        (num(&objective["value"]) - 42.75).abs() < 1e-9,
        "{objective}"
    );
    // `{value}` alone, as the agent answers: the objective is the frontend's.
    assert_eq!(
        objective.as_object().map(|o| o.len()),
        Some(1),
        "{objective}"
    );
    let pie = chart(
        &ds,
        &c,
        "orders",
        json!({"type": "Pie", "aggregator": "Count", "groupByFieldName": "status"}),
    )
    .await
    .expect("pie");
    assert_eq!(
        pairs(&pie),
        owned(&[("cancelled", 1.0), ("new", 2.0), ("paid", 2.0)])
    );
    let pie_by_country = chart(
        &ds,
        &c,
        "orders",
        json!({"type": "Pie", "aggregator": "Sum", "aggregateFieldName": "amount",
            "groupByFieldName": "customer:country:name",
            "filter": {"field": "customer:country:name", "operator": "present"}}),
    )
    .await
    .expect("pie through relations");
    assert_eq!(
        pairs(&pie_by_country),
        owned(&[("France", 30.5), ("Japan", 5.25)])
    );
    for kind in ["Percentage", "Smart"] {
        let err = chart(
            &ds,
            &c,
            "orders",
            json!({"type": kind, "aggregator": "Count"}),
        )
        .await
        .expect_err(kind);
        assert!(matches!(err, AgentError::Validation(_)), "{err:?}");
    }
}

/// `events`: 2 rows today, 3 yesterday and 1 the day before, in Europe/Paris, a minute after
/// local midnight (so that UTC days would count them differently).
async fn events(backend: Backend) -> (TestDb, SqlDataSource) {
    let db = TestDb::new(backend).await;
    db.execute(&portable(
        backend,
        "CREATE TABLE events (id {pk}, kind VARCHAR(20) NOT NULL, at {ts});",
    ))
    .await;
    let paris = chrono_tz::Europe::Paris;
    let today = Utc::now().with_timezone(&paris).date_naive();
    let mut seed = String::new();
    for (days_ago, count) in [(0, 2), (1, 3), (2, 1)] {
        let at = start_of_day(today - Duration::days(days_ago), paris) + Duration::minutes(1);
        let literal = ts(backend, &at.format("%Y-%m-%d %H:%M:%S").to_string());
        for _ in 0..count {
            seed.push_str(&format!(
                "INSERT INTO events (kind, at) VALUES ('click', {literal});\n"
            ));
        }
    }
    db.execute(&seed).await;
    let ds = db.datasource(Options::default()).await;
    (db, ds)
}

async fn value_with_previous_period(backend: Backend) {
    let (_db, ds) = events(backend).await;
    let paris = caller_in("Europe/Paris");
    let value = |operator: &str, value: Json| {
        json!({"type": "Value", "aggregator": "Count",
            "filter": {"field": "at", "operator": operator, "value": value}})
    };
    let today = chart(&ds, &paris, "events", value("today", Json::Null))
        .await
        .expect("today");
    assert_eq!(today, json!({"countCurrent": 2, "countPrevious": 3}));
    let yesterday = chart(&ds, &paris, "events", value("yesterday", Json::Null))
        .await
        .expect("yesterday");
    assert_eq!(yesterday, json!({"countCurrent": 3, "countPrevious": 1}));
    // The last 1 day is yesterday; the one before it, the day before.
    let last_day = chart(&ds, &paris, "events", value("previous_x_days", json!(1)))
        .await
        .expect("previous x days");
    assert_eq!(last_day, json!({"countCurrent": 3, "countPrevious": 1}));
    // An OR root still compares; an AND root does not (as the agent).
    let or = chart(
        &ds,
        &paris,
        "events",
        json!({"type": "Value", "aggregator": "Count", "filter": {"aggregator": "or",
            "conditions": [{"field": "at", "operator": "today"},
                           {"field": "kind", "operator": "equal", "value": "none"}]}}),
    )
    .await
    .expect("or");
    assert_eq!(or, json!({"countCurrent": 2, "countPrevious": 3}));
    let and = chart(
        &ds,
        &paris,
        "events",
        json!({"type": "Value", "aggregator": "Count", "filter": {"aggregator": "and",
            "conditions": [{"field": "at", "operator": "today"},
                           {"field": "kind", "operator": "equal", "value": "click"}]}}),
    )
    .await
    .expect("and");
    assert_eq!(and, json!({"countCurrent": 2}));
    // A scope AND-ed to the filter makes an AND root too.
    let scoped = chart_scoped(
        &ds,
        &paris,
        "events",
        value("today", Json::Null),
        Some(ConditionTree::leaf("kind", Operator::Equal, "click")),
    )
    .await
    .expect("scoped");
    assert_eq!(scoped, json!({"countCurrent": 2}));
}

fn labels_and_values(line: &Json) -> Vec<(String, f64)> {
    line.as_array()
        .expect("an array")
        .iter()
        .map(|p| {
            (
                p["label"].as_str().expect("label").to_owned(),
                num(&p["values"]["value"]),
            )
        })
        .collect()
}

async fn line_in_paris_fills_every_period(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let paris = caller_in("Europe/Paris");
    let line = |range: &str, aggregator: &str| {
        json!({"type": "Line", "aggregator": aggregator, "aggregateFieldName":
            if aggregator == "Sum" { json!("amount") } else { Json::Null },
            "groupByFieldName": "placed_at", "timeRange": range})
    };
    // 2023-12-31 23:30 UTC is January in Paris; 2024-03-31 22:30 UTC is April.
    let month = chart(&ds, &paris, "orders", line("Month", "Count"))
        .await
        .expect("month");
    let owned_labels = |items: &[(&str, f64)]| -> Vec<(String, f64)> {
        items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    };
    assert_eq!(
        labels_and_values(&month),
        owned_labels(&[
            ("Jan 24", 2.0),
            ("Feb 24", 1.0),
            ("Mar 24", 1.0),
            ("Apr 24", 1.0)
        ])
    );
    let utc_month = chart(&ds, &caller(), "orders", line("Month", "Count"))
        .await
        .expect("utc month");
    assert_eq!(labels_and_values(&utc_month)[0], ("Dec 23".to_owned(), 1.0));
    let quarter = chart(&ds, &paris, "orders", line("Quarter", "Sum"))
        .await
        .expect("quarter");
    assert_eq!(
        labels_and_values(&quarter),
        owned_labels(&[("Q1-2024", 122.75), ("Q2-2024", 20.0)])
    );
    let year = chart(&ds, &paris, "orders", line("Year", "Count"))
        .await
        .expect("year");
    assert_eq!(labels_and_values(&year), owned_labels(&[("2024", 5.0)]));
    // Days: 1 Jan to 1 Apr 2024 (Paris) = 92 days, missing days are 0.
    let day = chart(&ds, &paris, "orders", line("Day", "Count"))
        .await
        .expect("day");
    let days = labels_and_values(&day);
    assert_eq!(days.len(), 92);
    assert_eq!(days[0], ("01/01/2024".to_owned(), 1.0));
    assert_eq!(days[1], ("02/01/2024".to_owned(), 0.0));
    assert_eq!(days[91], ("01/04/2024".to_owned(), 1.0));
    assert_eq!(days.iter().map(|d| d.1).sum::<f64>(), 5.0);
    // Weeks: Monday 1 Jan 2024 (W1) to Monday 1 Apr 2024 (W14).
    let week = chart(&ds, &paris, "orders", line("Week", "Count"))
        .await
        .expect("week");
    let weeks = labels_and_values(&week);
    assert_eq!(weeks.len(), 14);
    assert_eq!(weeks[0], ("W1-2024".to_owned(), 1.0));
    assert_eq!(weeks[13], ("W14-2024".to_owned(), 1.0));
    // No rows, no points.
    let none = chart(
        &ds,
        &paris,
        "orders",
        json!({"type": "Line", "aggregator": "Count", "groupByFieldName": "placed_at",
            "timeRange": "Day", "filter": {"field": "status", "operator": "equal", "value": "x"}}),
    )
    .await
    .expect("empty line");
    assert_eq!(none, json!([]));
}

async fn leaderboard_through_one_to_many(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let c = caller();
    let board = |aggregator: &str, field: Json, limit: Json, filter: Json| {
        json!({"type": "Leaderboard", "aggregator": aggregator, "aggregateFieldName": field,
            "relationshipFieldName": "orders", "labelFieldName": "name", "limit": limit,
            "filter": filter})
    };
    // Orders without a customer make a `null` group, as in the agent.
    let sum = chart(
        &ds,
        &c,
        "customers",
        board("Sum", json!("amount"), json!(3), Json::Null),
    )
    .await
    .expect("sum");
    let ranked: Vec<(Json, f64)> = sum
        .as_array()
        .expect("array")
        .iter()
        .map(|i| (i["key"].clone(), num(&i["value"])))
        .collect();
    assert_eq!(
        ranked,
        [
            (Json::Null, 100.0),
            (json!("Ann"), 30.5),
            (json!("Carl"), 7.0)
        ]
    );
    // The customers' filter applies through the inverse relation.
    let count = chart(
        &ds,
        &c,
        "customers",
        board(
            "Count",
            Json::Null,
            json!("{{n}}"),
            json!({"field": "vip", "operator": "equal", "value": false}),
        )
        .as_object()
        .map(|o| {
            let mut o = o.clone();
            o.insert("contextVariables".into(), json!({"n": 10}));
            Json::Object(o)
        })
        .expect("object"),
    )
    .await
    .expect("count");
    assert_eq!(pairs(&count), owned(&[("Bob", 1.0), ("Carl", 1.0)]));
    // A ManyToOne relation cannot make a leaderboard.
    let err = chart(
        &ds,
        &c,
        "orders",
        json!({"type": "Leaderboard", "aggregator": "Count", "relationshipFieldName": "customer",
            "labelFieldName": "status", "limit": 3}),
    )
    .await
    .expect_err("many to one");
    assert_eq!(
        err.to_string(),
        "Failed to generate leaderboard chart: parameters do not match pre-requisites"
    );
    assert!(matches!(err, AgentError::Validation(_)));
}

async fn leaderboard_through_many_to_many(backend: Backend) {
    let db = TestDb::new(backend).await;
    db.execute(&portable(
        backend,
        "CREATE TABLE students (id {pk}, name VARCHAR(50) NOT NULL);
         CREATE TABLE courses (id {pk}, title VARCHAR(50) NOT NULL, credits INT NOT NULL);
         CREATE TABLE enrollments (student_id INT NOT NULL REFERENCES students(id),
            course_id INT NOT NULL REFERENCES courses(id), PRIMARY KEY (student_id, course_id));
         INSERT INTO students (name) VALUES ('Ann');
         INSERT INTO students (name) VALUES ('Bob');
         INSERT INTO students (name) VALUES ('Cy');
         INSERT INTO courses (title, credits) VALUES ('Math', 5);
         INSERT INTO courses (title, credits) VALUES ('Art', 2);
         INSERT INTO enrollments VALUES (1, 1);
         INSERT INTO enrollments VALUES (1, 2);
         INSERT INTO enrollments VALUES (2, 1);
         INSERT INTO enrollments VALUES (3, 2);",
    ))
    .await;
    let ds = db.datasource(Options::default()).await;
    let relation = ds
        .schema()
        .collection("students")
        .expect("students")
        .relations()
        .find(|(_, r)| matches!(r, RelationSchema::ManyToMany { .. }))
        .map(|(name, _)| name.clone())
        .expect("a ManyToMany relation from students to courses");
    let c = caller();
    let count = chart(
        &ds,
        &c,
        "students",
        json!({"type": "Leaderboard", "aggregator": "Count", "relationshipFieldName": relation,
            "labelFieldName": "name", "limit": 1}),
    )
    .await
    .expect("count");
    assert_eq!(count, json!([{"key": "Ann", "value": 2}]));
    let credits = chart(
        &ds,
        &c,
        "students",
        json!({"type": "Leaderboard", "aggregator": "Sum", "aggregateFieldName": "credits",
            "relationshipFieldName": relation, "labelFieldName": "name", "limit": 3}),
    )
    .await
    .expect("sum of the related records' field");
    let keys: Vec<&str> = credits
        .as_array()
        .expect("array")
        .iter()
        .map(|i| i["key"].as_str().expect("key"))
        .collect();
    assert_eq!(keys, ["Ann", "Bob", "Cy"], "sorted by value, descending");
    assert_eq!(
        pairs(&credits),
        owned(&[("Ann", 7.0), ("Bob", 5.0), ("Cy", 2.0)])
    );
}

async fn native_query_charts(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let c = caller();
    // `key` is reserved in MySQL.
    let key = if backend == Backend::MySql {
        "`key`"
    } else {
        "key"
    };
    let native = |chart_type: &str, query: &str| {
        let query = query.replace("AS key", &format!("AS {key}"));
        json!({"type": chart_type, "query": query, "connectionName": "main",
            "contextVariables": {"status": "paid"}})
    };
    let value = evaluate_native(
        &ds,
        &c,
        &native(
            "Value",
            "SELECT COUNT(*) AS value, 7 AS previous FROM orders WHERE status = {{status}}",
        ),
    )
    .await
    .expect("value");
    assert_eq!(num(&value["countCurrent"]), 2.0);
    assert_eq!(num(&value["countPrevious"]), 7.0);
    let objective = evaluate_native(
        &ds,
        &c,
        &native(
            "Objective",
            "SELECT COUNT(*) AS value, 10 AS objective FROM orders",
        ),
    )
    .await
    .expect("objective");
    assert_eq!(num(&objective["value"]), 5.0);
    assert_eq!(num(&objective["objective"]), 10.0);
    let pie = evaluate_native(
        &ds,
        &c,
        &native(
            "Pie",
            "SELECT status AS key, COUNT(*) AS value FROM orders GROUP BY status",
        ),
    )
    .await
    .expect("pie");
    assert_eq!(
        pairs(&pie),
        owned(&[("cancelled", 1.0), ("new", 2.0), ("paid", 2.0)])
    );
    let line = evaluate_native(
        &ds,
        &c,
        &native(
            "Line",
            "SELECT status AS key, COUNT(*) AS value FROM orders WHERE status = {{status}} GROUP BY status",
        ),
    )
    .await
    .expect("line");
    assert_eq!(line, json!([{"label": "paid", "values": {"value": 2}}]));
    let bad = evaluate_native(
        &ds,
        &c,
        &native("Value", "SELECT COUNT(*) AS total, 1 AS other FROM orders"),
    )
    .await
    .expect_err("bad columns");
    assert!(matches!(bad, AgentError::Unprocessable(_)), "{bad:?}");
    assert_eq!(
        bad.to_string(),
        "The result columns must be named value instead of 'total', 'other'."
    );
    let bad_pie = evaluate_native(
        &ds,
        &c,
        &native(
            "Leaderboard",
            "SELECT status, COUNT(*) AS value FROM orders GROUP BY status",
        ),
    )
    .await
    .expect_err("bad pie columns");
    assert!(
        bad_pie
            .to_string()
            .starts_with("The result columns must be named key, value instead of '"),
        "{bad_pie}"
    );
    let bad_objective = evaluate_native(
        &ds,
        &c,
        &native("Objective", "SELECT COUNT(*) AS value FROM orders"),
    )
    .await
    .expect_err("bad objective columns");
    assert_eq!(
        bad_objective.to_string(),
        "The result columns must be named value, objective instead of 'value'."
    );
    let unknown = evaluate_native(
        &ds,
        &c,
        &json!({"type": "Value", "query": "SELECT 1 AS value", "connectionName": "other"}),
    )
    .await
    .expect_err("unknown connection");
    assert_eq!(
        unknown.to_string(),
        "Native query connection 'other' is unknown"
    );
    let write = evaluate_native(&ds, &c, &native("Value", "DELETE FROM orders"))
        .await
        .expect_err("not a select");
    assert!(matches!(write, AgentError::Unprocessable(_)), "{write:?}");
    assert!(
        write
            .to_string()
            .starts_with("Error during chart native query execution: "),
        "{write}"
    );
}

on_all_backends!(
    value_objective_and_pie,
    value_with_previous_period,
    line_in_paris_fills_every_period,
    leaderboard_through_one_to_many,
    leaderboard_through_many_to_many,
    native_query_charts,
);
