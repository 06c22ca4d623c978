//! The hostile inputs of issue 10, through the real router on SQLite, PostgreSQL and MariaDB:
//! deep nesting, NUL characters, regexes the database refuses, huge relative dates, lists of
//! 70,000 items, native queries that sleep, lock or change the session, and huge pages. Each
//! answers a 2xx or a 4xx in the agent's envelope, never a 5xx, and the process keeps serving.
//! The random counterparts are in `http_props`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use canopy::auth::SessionKey;
use canopy::config::HttpConfig;
use canopy::datasource::sql::{Options, Pool, SqlDataSource};
use canopy::datasource::{DataSource, Error, Value};
use canopy::http::{AppState, router};
use canopy_e2e::{Backend, TestDb, caller, on_all_backends};
use indexmap::IndexMap;
use serde_json::{Value as Json, json};
use tower::ServiceExt as _;

use crate::harness::{encode, filters};
use crate::snapshots::{bearer, library};

const SECRET: &str = "a-test-auth-secret";

/// The library of `snapshots` behind a router that reads bodies up to 50 MiB (70,000 ids).
async fn app(backend: Backend) -> (TestDb, Router) {
    let (db, datasource) = library(backend).await;
    let http = HttpConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..HttpConfig::default()
    };
    let state = AppState::new(Arc::new(datasource), SessionKey::new(SECRET), &http);
    (db, router(Arc::new(state)))
}

/// Status and body; a 5xx, or a 4xx outside the agent's envelope, fails the test.
async fn call(app: &Router, method: &str, uri: &str, body: Option<&Json>) -> (u16, Json) {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, bearer());
    let request = match body {
        Some(body) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .unwrap();
    raw(app, request).await
}

async fn raw(app: &Router, request: Request<Body>) -> (u16, Json) {
    let what = format!("{} {:.200}", request.method(), request.uri());
    let (status, body) = unchecked(app, request).await;
    assert!(status < 500, "{what} answered {status}: {body}");
    if status >= 400 {
        let error = &body["errors"][0];
        assert!(
            error["name"].is_string() && error["detail"].is_string(),
            "{what}: not an envelope: {body}"
        );
        assert_eq!(error["status"], status, "{what}: {body}");
    }
    (status, body)
}

/// `GET` that must answer 200.
async fn ok(app: &Router, uri: &str) -> Json {
    let (status, body) = call(app, "GET", uri, None).await;
    assert_eq!(status, 200, "{uri}: {body}");
    body
}

/// The count of books matching a condition tree, through a Value chart: its filter is in the
/// body, so it may be longer than a URL (16 KiB).
async fn chart_count(app: &Router, tree: &Json) -> u64 {
    let chart = json!({"type": "Value", "sourceCollectionName": "books", "aggregator": "Count",
        "filter": tree});
    let (status, body) = call(
        app,
        "POST",
        "/forest/stats/books?timezone=UTC",
        Some(&chart),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["data"]["attributes"]["value"]["countCurrent"]
        .as_u64()
        .unwrap_or_else(|| panic!("{body}"))
}

/// The count of books matching a condition tree.
async fn count(app: &Router, tree: &Json) -> u64 {
    let body = ok(
        app,
        &format!("/forest/books/count?timezone=UTC&filters={}", filters(tree)),
    )
    .await;
    body["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("{tree}: {body}"))
}

/// The detail of a 400 ValidationError.
fn validation(status: u16, body: &Json) -> String {
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["errors"][0]["name"], "ValidationError", "{body}");
    body["errors"][0]["detail"].as_str().unwrap().to_owned()
}

fn nested_json(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// 3,000 levels aborted the whole server through the search parser; every recursive parser a
/// request reaches has a bound that answers 400.
async fn deep_nesting_is_a_400_not_a_crash(backend: Backend) {
    let (_db, app) = app(backend).await;
    let search = format!("{}a{}", "(".repeat(3000), ")".repeat(3000));
    let (status, body) = call(
        &app,
        "GET",
        &format!("/forest/books?timezone=UTC&search={}", encode(&search)),
        None,
    )
    .await;
    assert!(
        validation(status, &body).contains("more than 32 levels deep"),
        "{body}"
    );

    // Written as text: a 3,000-deep `serde_json::Value` would overflow the test's own stack.
    let deep_tree = |depth: usize| {
        format!(
            "{}{{\"field\":\"id\",\"operator\":\"equal\",\"value\":1}}{}",
            "{\"aggregator\":\"and\",\"conditions\":[".repeat(depth),
            "]}".repeat(depth)
        )
    };
    // serde_json's own bound (128 levels), before a tree is built; 200 levels fit in a URL.
    let uri = format!(
        "/forest/books/count?timezone=UTC&filters={}",
        encode(&deep_tree(200))
    );
    let (status, body) = call(&app, "GET", &uri, None).await;
    assert!(
        validation(status, &body).contains("recursion limit"),
        "{body}"
    );
    // 3,000 levels in a chart's filter, a string inside the body.
    let chart = json!({"type": "Value", "sourceCollectionName": "books", "aggregator": "Count",
        "filter": deep_tree(3000)});
    let (status, body) = call(
        &app,
        "POST",
        "/forest/stats/books?timezone=UTC",
        Some(&chart),
    )
    .await;
    assert!(
        validation(status, &body).contains("recursion limit"),
        "{body}"
    );

    for (method, path) in [
        ("POST", "/forest/books"),
        ("POST", "/forest/stats/books"),
        ("DELETE", "/forest/covers"),
        ("POST", "/forest/_internal/capabilities"),
    ] {
        let request = Request::builder()
            .method(method)
            .uri(format!("{path}?timezone=UTC"))
            .header(header::AUTHORIZATION, bearer())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(nested_json(100_000)))
            .unwrap();
        // A body too deep for the parser is one it cannot read: koa's plain-text 400, as for
        // any body that is not JSON (see docs/compatibility.md).
        let (status, body) = unchecked(&app, request).await;
        assert_eq!(
            (status, body),
            (400, json!("Bad Request")),
            "{method} {path}"
        );
    }
    // Still serving.
    assert_eq!(
        ok(&app, "/forest/books/count?timezone=UTC").await["count"],
        5
    );
}

/// A request's status and body (JSON, else the text as a JSON string), whatever their shape.
async fn unchecked(app: &Router, request: Request<Body>) -> (u16, Json) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body: Json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

/// PostgreSQL refuses any statement binding a NUL: reads answer what a value no row holds
/// means (200, as Node), writes are a 400 naming the field. SQLite and MariaDB store NULs.
async fn nul_characters_answer_200_on_reads_and_400_on_postgres_writes(backend: Backend) {
    let (_db, app) = app(backend).await;
    let nul = "Mort\u{0}x";
    let body = ok(
        &app,
        &format!("/forest/books?timezone=UTC&search={}", encode(nul)),
    )
    .await;
    assert_eq!(body["data"], json!([]), "{body}");
    let leaf = |field: &str, operator: &str, value: Json| json!({"field": field, "operator": operator, "value": value});
    for operator in [
        "equal",
        "contains",
        "starts_with",
        "ends_with",
        "i_contains",
        "i_starts_with",
        "i_ends_with",
        "like",
        "i_like",
    ] {
        assert_eq!(
            count(&app, &leaf("title", operator, json!(nul))).await,
            0,
            "{operator}"
        );
    }
    for operator in ["not_equal", "not_contains", "not_i_contains"] {
        assert_eq!(
            count(&app, &leaf("title", operator, json!(nul))).await,
            5,
            "{operator}"
        );
    }
    assert_eq!(
        count(&app, &leaf("title", "in", json!(["Mort", nul]))).await,
        1
    );
    assert_eq!(
        count(&app, &leaf("title", "not_in", json!(["Mort", nul]))).await,
        4
    );
    // The NUL of a regex keeps its meaning: `a` or NUL matches the one title with an `a`.
    assert_eq!(
        count(&app, &leaf("title", "match", json!("a|\u{0}"))).await,
        1
    );
    // Through a relation path.
    assert_eq!(
        count(&app, &leaf("author:name", "equal", json!("Ursula\u{0}"))).await,
        0
    );
    assert_eq!(
        count(&app, &leaf("author:name", "not_equal", json!("\u{0}"))).await,
        5
    );
    // A chart filter.
    let (status, chart) = call(
        &app,
        "POST",
        "/forest/stats/books?timezone=UTC",
        Some(
            &json!({"type": "Value", "sourceCollectionName": "books", "aggregator": "Count",
            "filter": leaf("title", "contains", json!("\u{0}"))}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{chart}");
    assert_eq!(
        chart["data"]["attributes"]["value"]["countCurrent"], 0,
        "{chart}"
    );
    // A bulk delete's filter deletes nothing.
    let (status, body) = call(
        &app,
        "DELETE",
        "/forest/covers?timezone=UTC",
        Some(
            &json!({"data": {"attributes": {"ids": [], "all_records": true,
            "all_records_ids_excluded": [], "all_records_subset_query":
            {"filters": leaf("color", "equal", json!("blue\u{0}")).to_string()}}}}),
        ),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let covers = ok(&app, "/forest/covers/count?timezone=UTC").await;
    assert_eq!(covers["count"], 2);

    let create = json!({"data": {"type": "tags", "attributes": {"label": "a\u{0}b"}}});
    let (status, created) = call(&app, "POST", "/forest/tags?timezone=UTC", Some(&create)).await;
    let update = json!({"data": {"type": "tags", "id": "1", "attributes": {"label": "c\u{0}"}}});
    let (update_status, updated) =
        call(&app, "PUT", "/forest/tags/1?timezone=UTC", Some(&update)).await;
    if backend == Backend::Postgres {
        for (status, body) in [(status, &created), (update_status, &updated)] {
            let detail = validation(status, body);
            assert!(
                detail.contains("\"label\"") && detail.contains("NUL"),
                "{detail}"
            );
        }
    } else {
        assert_eq!(status, 200, "{created}");
        assert_eq!(created["data"]["attributes"]["label"], "a\u{0}b");
        assert_eq!(update_status, 200, "{updated}");
        assert_eq!(updated["data"]["attributes"]["label"], "c\u{0}");
    }
}

/// `/**/OR/**/1=1` is a regex for the `regex` crate (SQLite runs it) but not for PostgreSQL nor
/// MariaDB, which refuse it: a 400 naming their reason, not a 500.
async fn match_patterns_the_database_refuses_are_a_400(backend: Backend) {
    let (_db, app) = app(backend).await;
    let tree = json!({"field": "title", "operator": "match", "value": "/**/OR/**/1=1"});
    let uri = format!(
        "/forest/books/count?timezone=UTC&filters={}",
        filters(&tree)
    );
    let (status, body) = call(&app, "GET", &uri, None).await;
    match backend {
        Backend::Sqlite => assert_eq!(body, json!({"count": 0})),
        Backend::Postgres | Backend::MySql => {
            let detail = validation(status, &body);
            assert!(
                detail.starts_with("Invalid regular expression: "),
                "{detail}"
            );
        }
    }
    // A valid pattern still runs everywhere.
    let tree = json!({"field": "title", "operator": "match", "value": "^(Ea|Mo)"});
    assert_eq!(count(&app, &tree).await, 2);
}

/// Counts of days and hours beyond chrono's range panicked (a 500); they saturate at the years
/// 1 and 9999, as JavaScript dates stop at theirs.
async fn huge_relative_dates_saturate(backend: Backend) {
    let (_db, app) = app(backend).await;
    let huge: [Json; 3] = [
        serde_json::from_str("9223372036854775808").unwrap(),
        json!(1e18),
        json!(9.9e307),
    ];
    for value in &huge {
        for (field, operator, expected) in [
            // Every dated book is within the last 1e18 days…
            ("published", "previous_x_days", 4),
            ("published", "previous_x_days_to_date", 4),
            ("added_at", "previous_x_days", 4),
            ("added_at", "previous_x_days_to_date", 4),
            // … none was added before year 1, all after it.
            ("added_at", "before_x_hours_ago", 0),
            ("added_at", "after_x_hours_ago", 4),
        ] {
            let tree = json!({"field": field, "operator": operator, "value": value});
            assert_eq!(count(&app, &tree).await, expected, "{tree}");
        }
        let negated = json!(-value.as_f64().unwrap());
        let tree = json!({"field": "added_at", "operator": "after_x_hours_ago", "value": negated});
        assert_eq!(count(&app, &tree).await, 0, "{tree}");
    }
}

/// 70,000 values went over the drivers' bind limits (a 500). Lists are built in memory; the
/// values past the bind budget are written as literals.
async fn lists_of_70000_items(backend: Backend) {
    let (_db, app) = app(backend).await;
    let ids: Vec<String> = (1..=70_000).map(|i| i.to_string()).collect();
    let numbers: Vec<i64> = (1..=70_000).collect();
    let in_ids =
        |operator: &str, value: Json| json!({"field": "id", "operator": operator, "value": value});
    assert_eq!(chart_count(&app, &in_ids("in", json!(numbers))).await, 5);
    assert_eq!(
        chart_count(&app, &in_ids("not_in", json!(numbers))).await,
        0
    );
    assert_eq!(
        chart_count(&app, &in_ids("in", json!(ids.join(",")))).await,
        5
    );
    assert_eq!(
        chart_count(&app, &in_ids("not_in", json!(ids.join(",")))).await,
        0
    );
    let mut titles: Vec<String> = (0..70_000).map(|i| format!("title {i}'\\")).collect();
    titles.push("Mort".to_owned());
    let tree = json!({"field": "title", "operator": "in", "value": titles});
    assert_eq!(chart_count(&app, &tree).await, 1);
    // A bulk delete whose subset query holds 70,000 excluded ids in a filter deletes nothing.
    let (status, body) = call(
        &app,
        "DELETE",
        "/forest/covers?timezone=UTC",
        Some(
            &json!({"data": {"attributes": {"ids": [], "all_records": true,
            "all_records_ids_excluded": [], "all_records_subset_query":
            {"filters": in_ids("not_in", json!(numbers)).to_string()}}}}),
        ),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        ok(&app, "/forest/covers/count?timezone=UTC").await["count"],
        2
    );

    // Dissociate 70,000 ids: Ursula's two books lose their author.
    let selection = |ids: &[String], all: bool, excluded: &[String]| {
        json!({"data": {"attributes": {"ids": ids, "all_records": all,
            "all_records_ids_excluded": excluded}}})
    };
    let (status, body) = call(
        &app,
        "DELETE",
        "/forest/authors/1/relationships/books?timezone=UTC",
        Some(&selection(&ids, false, &[])),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let left = ok(
        &app,
        "/forest/authors/1/relationships/books/count?timezone=UTC",
    )
    .await;
    assert_eq!(left["count"], 0);
    assert_eq!(
        ok(&app, "/forest/books/count?timezone=UTC").await["count"],
        5
    );

    // All book_tags but 70,000 composite ids (two of them real): three rows go.
    let mut excluded: Vec<String> = (1..=35_000).map(|i| format!("{i}|{}", i + 7)).collect();
    excluded.extend((1..=35_000).map(|i| format!("{}|{i}", i + 9)));
    excluded.push("1|1".to_owned());
    excluded.push("4|2".to_owned());
    let (status, body) = call(
        &app,
        "DELETE",
        "/forest/book_tags?timezone=UTC",
        Some(&selection(&[], true, &excluded)),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let kept = ok(&app, "/forest/book_tags?timezone=UTC&sort=book_id").await;
    let kept: Vec<&Json> = kept["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(kept, [&json!("1|1"), &json!("4|2")]);

    // Delete 70,000 composite ids, one of them real.
    let mut composite: Vec<String> = (1..=69_999).map(|i| format!("{i}|{}", i + 7)).collect();
    composite.push("1|1".to_owned());
    let (status, body) = call(
        &app,
        "DELETE",
        "/forest/book_tags?timezone=UTC",
        Some(&selection(&composite, false, &[])),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let kept = ok(&app, "/forest/book_tags?timezone=UTC").await;
    assert_eq!(kept["data"].as_array().unwrap().len(), 1, "{kept}");

    // Delete 70,000 ids: both covers go.
    let (status, body) = call(
        &app,
        "DELETE",
        "/forest/covers?timezone=UTC",
        Some(&selection(&ids, false, &[])),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        ok(&app, "/forest/covers/count?timezone=UTC").await["count"],
        0
    );
}

/// `page[size]=1000000000` read a whole table into one answer; past `maxPageSize` it is a 400.
async fn pages_above_max_page_size_are_a_400(backend: Backend) {
    let (_db, app) = app(backend).await;
    for uri in [
        "/forest/books?timezone=UTC&page[size]=1000000000",
        "/forest/authors/1/relationships/books?timezone=UTC&page[size]=1001",
    ] {
        let (status, body) = call(&app, "GET", uri, None).await;
        assert_eq!(
            validation(status, &body),
            format!(
                "Invalid pagination: page[size] {} is above the maximum of 1000 (maxPageSize)",
                if uri.contains("1001") {
                    1001
                } else {
                    1_000_000_000
                }
            )
        );
    }
    let body = ok(&app, "/forest/books?timezone=UTC&page[size]=1000").await;
    assert_eq!(body["data"].as_array().unwrap().len(), 5);
}

/// A datasource over `db` whose native queries run on one pooled connection (so that a second
/// query reuses the first one's session) and time out after one second.
async fn one_connection(db: &TestDb) -> SqlDataSource {
    let pool = Pool::connect(&db.url, 1).await.unwrap();
    let options = Options {
        connection_name: Some("main".to_owned()),
        native_query_timeout: Some(Duration::from_secs(1)),
        ..Options::default()
    };
    SqlDataSource::from_pool(pool, options).await.unwrap()
}

async fn native(ds: &SqlDataSource, query: &str) -> Result<Vec<canopy::datasource::Record>, Error> {
    ds.native_query(&caller(), "main", query, &IndexMap::new())
        .await
}

/// Native queries: functions that sleep or lock are refused, a long query is cancelled at the
/// timeout, the session a query changed is reset before the connection is reused, and too
/// many variables is a clear 422.
async fn native_queries_are_bounded(backend: Backend) {
    let (db, _) = library(backend).await;
    let ds = one_connection(&db).await;
    for query in [
        "SELECT pg_sleep(5) AS value",
        "SELECT SLEEP(5) AS value",
        "SELECT pg_advisory_lock(4242) AS value",
        "SELECT GET_LOCK('x', 10) AS value",
    ] {
        let result = native(&ds, query).await;
        assert!(
            matches!(&result, Err(Error::Unprocessable(m)) if m.contains("is not allowed")),
            "{query}: {result:?}"
        );
    }

    let started = Instant::now();
    // 5^13 rows: minutes of work on every database (a recursive CTE stops at 1,000 rows on
    // MariaDB).
    let endless = format!(
        "SELECT COUNT(*) AS value FROM {}",
        (0..13)
            .map(|i| format!("books b{i}"))
            .collect::<Vec<_>>()
            .join(" CROSS JOIN ")
    );
    let result = native(&ds, &endless).await;
    assert!(
        matches!(&result, Err(Error::Unprocessable(m))
            if m == "The query was cancelled after 1 s (nativeQueryTimeoutInSeconds)"),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let value = native(&ds, "SELECT COUNT(*) AS value FROM books")
        .await
        .unwrap();
    assert_eq!(value[0].get("value").and_then(Value::as_f64), Some(5.0));

    // What the list cannot see: a function of the database's own that locks or sets.
    match backend {
        Backend::Postgres => {
            db.execute(
                "CREATE FUNCTION hold() RETURNS int LANGUAGE sql AS \
                 $$ SELECT pg_advisory_lock(4242); SELECT set_config('TimeZone', 'Asia/Tokyo', false); SELECT 1 $$",
            )
            .await;
            native(&ds, "SELECT hold() AS value").await.unwrap();
            let locks = native(
                &ds,
                "SELECT COUNT(*) AS value FROM pg_locks WHERE locktype = 'advisory'",
            )
            .await
            .unwrap();
            assert_eq!(locks[0].get("value").and_then(Value::as_f64), Some(0.0));
            let tz = native(&ds, "SELECT current_setting('TimeZone') AS value")
                .await
                .unwrap();
            assert_eq!(tz[0].get("value"), Some(&Value::from("UTC")));
        }
        Backend::MySql => {
            db.execute(
                "CREATE FUNCTION hold() RETURNS INT NOT DETERMINISTIC NO SQL \
                 RETURN GET_LOCK('canopy_hold', 0)",
            )
            .await;
            native(&ds, "SELECT hold() AS value").await.unwrap();
            let lock = native(&ds, "SELECT IS_USED_LOCK('canopy_hold') AS value")
                .await
                .unwrap();
            assert_eq!(lock[0].get("value"), Some(&Value::Null));
        }
        Backend::Sqlite => {}
    }

    let mut variables = IndexMap::new();
    variables.insert("id".to_owned(), Value::Int(1));
    let query = format!(
        "SELECT COUNT(*) AS value FROM books WHERE id IN ({})",
        vec!["$id"; 70_000].join(", ")
    );
    let result = ds.native_query(&caller(), "main", &query, &variables).await;
    let Err(Error::Unprocessable(message)) = result else {
        panic!("{result:?}");
    };
    assert!(
        message.starts_with("The query uses 70000 variables"),
        "{message}"
    );
}

on_all_backends!(
    deep_nesting_is_a_400_not_a_crash,
    nul_characters_answer_200_on_reads_and_400_on_postgres_writes,
    match_patterns_the_database_refuses_are_a_400,
    huge_relative_dates_saturate,
    lists_of_70000_items,
    pages_above_max_page_size_are_a_400,
    native_queries_are_bounded,
);
