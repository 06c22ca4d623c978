//! Property tests of the whole request path: random and malformed query strings (`filters`,
//! `fields[…]`, `sort`, `page[…]`, `search`, `timezone`, segments), ids (with `|` and escapes)
//! and JSON bodies (random `serde_json::Value` trees shaped like JSON:API documents, selections
//! and chart bodies, plus bytes that are not JSON) sent through `canopy::http::router` to the
//! library fixture of `snapshots`, on SQLite, PostgreSQL and MariaDB.
//!
//! Whatever the input, the router must answer (a panic would be caught as a 500), never with a
//! 500, and every 4xx must be the agent's envelope `{"errors":[{"name","detail","status"}]}` with
//! the response's status. The parsers' own unit-level properties live next to them in `host`
//! (`agent::query_string`, `agent::body`); these add the routes, the database and the error
//! mapping. `PROPTEST_CASES` overrides the number of cases.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use canopy_e2e::Backend;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value as Json, json};
use tower::ServiceExt as _;

use crate::harness::encode;
use crate::snapshots::{bearer, fixture};

/// Cases per property and database when `PROPTEST_CASES` is not set.
const CASES: u32 = 96;

/// Fields the generators name: columns, to-one paths, relations, and names that do not exist.
const FIELDS: &[&str] = &[
    "id",
    "title",
    "pages",
    "published",
    "added_at",
    "author_id",
    "author",
    "author:name",
    "author:active",
    "author:id",
    "cover:color",
    "cover",
    "tags",
    "nope",
    "",
    "author:nope",
    "title:x",
    "author.name",
];

/// Wire operator names (snake and Pascal case) and a few that do not exist.
const OPERATORS: &[&str] = &[
    "present",
    "blank",
    "missing",
    "equal",
    "not_equal",
    "less_than",
    "greater_than",
    "less_than_or_equal",
    "greater_than_or_equal",
    "match",
    "like",
    "i_like",
    "contains",
    "not_contains",
    "i_contains",
    "not_i_contains",
    "longer_than",
    "shorter_than",
    "starts_with",
    "ends_with",
    "i_starts_with",
    "i_ends_with",
    "in",
    "not_in",
    "includes_all",
    "includes_none",
    "before",
    "after",
    "after_x_hours_ago",
    "before_x_hours_ago",
    "future",
    "past",
    "previous_month_to_date",
    "previous_month",
    "previous_quarter",
    "previous_week_to_date",
    "previous_x_days_to_date",
    "previous_x_days",
    "previous_year",
    "today",
    "yesterday",
    "Equal",
    "IContains",
    "PreviousXDays",
    "resembles",
    "",
    "__proto__",
    "i_",
];

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES)
}

/// Scalars that stress casting: huge and fractional numbers, numeric, date and list strings.
fn scalar() -> BoxedStrategy<Json> {
    prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        (-1000i64..1000).prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        select(vec![
            0.5,
            -0.0,
            1e300,
            -1e300,
            2.5e9,
            f64::MIN_POSITIVE,
            1e18,
            -1e18,
            9.9e307
        ])
        .prop_map(|f: f64| json!(f)),
        select(vec![
            "",
            " ",
            "0",
            "1",
            "-1",
            "1.5",
            "1e400",
            "NaN",
            "Infinity",
            "9999999999999999999999",
            "true",
            "no",
            "2024-02-10",
            "2024-02-30",
            "2024-02-10T10:00:00Z",
            "24:00",
            "1,2,3",
            " 2 , x ,",
            "%",
            "_",
            "\\",
            "'; DROP TABLE books; --",
            "{{var}}",
            "00000000-0000-0000-0000-000000000000",
            "é",
            "\u{0}",
            "1|2",
            // Issue 10's hostile values: NULs, a regex PostgreSQL and MariaDB refuse, dates at
            // and beyond the databases' ranges.
            "a\u{0}b",
            "\u{0}%",
            "/**/OR/**/1=1",
            "(?<=a+)b",
            "+275760-09-13T00:00:00Z",
            "-271821-04-20",
            "0000-01-01",
            "9999-12-31T23:59:59.999Z",
            "1,\u{0},3",
        ])
        .prop_map(|s: &str| Json::String(s.to_owned())),
        "\\PC{0,12}".prop_map(Json::String),
    ]
    .boxed()
}

/// Random JSON trees whose keys are mostly the ones the parsers look for.
fn tree() -> BoxedStrategy<Json> {
    scalar()
        .prop_recursive(4, 40, 5, |inner| {
            let key = prop_oneof![
                select(vec![
                    "data",
                    "attributes",
                    "relationships",
                    "id",
                    "type",
                    "ids",
                    "all_records",
                    "all_records_ids_excluded",
                    "all_records_subset_query",
                    "filters",
                    "field",
                    "operator",
                    "value",
                    "aggregator",
                    "conditions",
                    "title",
                    "pages",
                    "published",
                    "added_at",
                    "author",
                    "cover",
                    "tags",
                    "sort",
                    "page[size]",
                    "search",
                    "segmentQuery",
                    "connectionName",
                ])
                .prop_map(str::to_owned),
                "[a-z_]{0,6}",
            ];
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Json::Array),
                vec((key, inner), 0..5).prop_map(|kv| Json::Object(kv.into_iter().collect())),
            ]
        })
        .boxed()
}

/// Condition trees: mostly well-formed, over real and unknown fields and operators, with
/// random values, nested up to three levels, sometimes with a key missing or of the wrong type.
fn condition_tree() -> BoxedStrategy<Json> {
    let value = prop_oneof![3 => scalar(), 1 => vec(scalar(), 0..4).prop_map(Json::Array)];
    let leaf = (select(FIELDS), select(OPERATORS), value, 0u8..12).prop_map(
        |(field, operator, value, shape)| match shape {
            0 => json!({"field": field, "operator": operator}),
            1 => json!({"field": field, "value": value}),
            2 => json!({"field": 1, "operator": operator, "value": value}),
            3 => json!({"field": field, "operator": [operator], "value": value}),
            _ => json!({"field": field, "operator": operator, "value": value}),
        },
    );
    leaf.prop_recursive(3, 16, 4, |inner| {
        (
            select(vec!["and", "or", "And", "OR", "xor", ""]),
            vec(inner, 0..4),
            0u8..8,
        )
            .prop_map(|(aggregator, conditions, shape)| match shape {
                0 => json!({"aggregator": aggregator}),
                1 => json!({"aggregator": aggregator, "conditions": {"0": conditions}}),
                _ => json!({"aggregator": aggregator, "conditions": conditions}),
            })
    })
    .boxed()
}

/// One `key=value` pair of a query string, already encoded (or deliberately malformed).
fn query_pair() -> BoxedStrategy<String> {
    let text = prop_oneof!["\\PC{0,16}", "[-+ 0-9.eE]{0,8}", "[a-z_.,:|-]{0,20}",];
    let list = vec(select(FIELDS), 0..4).prop_map(|fields| fields.join(","));
    prop_oneof![
        2 => condition_tree().prop_map(|t| format!("filters={}", encode(&t.to_string()))),
        1 => tree().prop_map(|t| format!("filters={}", encode(&t.to_string()))),
        1 => text.clone().prop_map(|t| format!("filters={}", encode(&t))),
        2 => (select(vec!["books", "author", "cover", "authors", "tags"]), list.clone())
            .prop_map(|(c, l)| format!("fields%5B{c}%5D={}", encode(&l))),
        1 => (vec((select(vec!["", "-", "--", "+"]), select(FIELDS)), 0..3))
            .prop_map(|s| format!("sort={}", encode(&s.iter().map(|(d, f)| format!("{d}{f}"))
                .collect::<Vec<_>>().join(",")))),
        2 => (select(vec!["page[number]", "page%5Bsize%5D", "page[size]"]),
              prop_oneof![text.clone(), any::<i64>().prop_map(|n| n.to_string()),
                  Just("1e3".to_owned()), Just("0x10".to_owned())])
            .prop_map(|(k, v)| format!("{k}={}", encode(&v))),
        1 => text.clone().prop_map(|t| format!("search={}", encode(&t))),
        1 => select(vec!["searchExtended=1", "searchExtended=false", "segment=x",
            "segmentQuery=SELECT%20id%20FROM%20books", "connectionName=main",
            "connectionName=nope", "segmentQuery=SELECT%201", "timezone=Mars",
            "timezone=", "timezone=Europe/Paris", "timezone=UTC", "delete=1",
            "header=a,b&filename=x"]).prop_map(str::to_owned),
        1 => "(%[0-9A-Fa-f]{0,2}|[&=+?\\[\\]]|[a-z]){0,12}",
    ]
    .boxed()
}

/// A query string: usually a valid timezone first (so the parsers after it are reached), then
/// random pairs.
fn query_string() -> BoxedStrategy<String> {
    (any::<bool>(), vec(query_pair(), 0..6))
        .prop_map(|(timezone, pairs)| {
            let mut all = Vec::new();
            if timezone {
                all.push("timezone=UTC".to_owned());
            }
            all.extend(pairs);
            all.join("&")
        })
        .boxed()
}

/// A packed id as it may appear in a path: digits, `|`, escapes and junk.
fn packed_id() -> BoxedStrategy<String> {
    prop_oneof![
        "[0-9|]{0,8}",
        "(-?[0-9]{1,25}|\\|| |%7C|%2F|%25|%00|x|é|\\.){0,6}",
        any::<i64>().prop_map(|n| n.to_string()),
        "\\PC{0,10}".prop_map(|s| encode(&s)),
    ]
    .boxed()
}

/// koa's own plain-text answers, which come before the agent's error handler: no route, a body
/// that is not JSON, a body over the limit.
const KOA_ANSWERS: &[(u16, &str)] = &[
    (400, "Bad Request"),
    (404, "Not Found"),
    (413, "request entity too large"),
];

/// Sends the request; a 500 or a 4xx outside the envelope (or koa's own answers) fails the case.
pub(crate) async fn answer(
    app: &Router,
    request: Request<Body>,
) -> Result<(u16, Json), TestCaseError> {
    let what = format!("{} {}", request.method(), request.uri());
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body: Json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&bytes).into_owned()));
    prop_assert!(status < 500, "{what} answered {status}: {body}");
    let koa = KOA_ANSWERS
        .iter()
        .any(|(code, text)| *code == status && body == *text);
    if status >= 400 && !koa {
        let errors = body["errors"].as_array();
        prop_assert!(
            errors.is_some_and(|e| e.len() == 1),
            "{what}: not an envelope: {body}"
        );
        let error = &body["errors"][0];
        let keys: Vec<&str> = error
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        // `data` only on a business error that carries some.
        let expected: &[&str] = if error.get("data").is_some() {
            &["name", "detail", "status", "data"]
        } else {
            &["name", "detail", "status"]
        };
        prop_assert_eq!(keys, expected, "{}: {}", what, body);
        prop_assert!(
            error["name"].is_string() && error["detail"].is_string(),
            "{body}"
        );
        prop_assert_eq!(
            error["status"].as_u64(),
            Some(u64::from(status)),
            "{}",
            body
        );
    }
    Ok((status, body))
}

pub(crate) fn request(method: &str, uri: &str, body: Option<Vec<u8>>) -> Request<Body> {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, bearer());
    match body {
        Some(bytes) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(bytes)),
        None => builder.body(Body::empty()),
    }
    .unwrap()
}

/// Runs `property` on every generated value with a fresh library on `backend`.
pub(crate) fn run<S: Strategy>(
    backend: Backend,
    strategy: S,
    property: impl Fn(&tokio::runtime::Runtime, &Router, S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fixture = rt.block_on(fixture(backend));
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&strategy, |value| property(&rt, &fixture.app, value));
    drop(fixture);
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Random query strings on the read routes of a collection and of a relation.
fn query_strings(backend: Backend) {
    run(
        backend,
        (query_string(), 0usize..6),
        |rt, app, (query, route)| {
            let path = [
                "/forest/books",
                "/forest/books/count",
                "/forest/books.csv",
                "/forest/authors/1/relationships/books",
                "/forest/authors/1/relationships/books/count",
                "/forest/books/1",
            ][route];
            // A malformed URI is refused by the HTTP layer before the router; skip those.
            let Ok(uri) = format!("{path}?{query}").parse::<axum::http::Uri>() else {
                return Ok(());
            };
            rt.block_on(answer(app, request("GET", &uri.to_string(), None)))?;
            Ok(())
        },
    );
}

/// Random ids on get, delete, the relation routes and composite keys.
fn ids(backend: Backend) {
    run(backend, (packed_id(), 0usize..5), |rt, app, (id, route)| {
        let (method, path, body) = match route {
            0 => ("GET", format!("/forest/books/{id}"), None),
            1 => ("GET", format!("/forest/book_tags/{id}"), None),
            2 => (
                "GET",
                format!("/forest/authors/{id}/relationships/books/count"),
                None,
            ),
            3 => (
                "PUT",
                format!("/forest/books/{id}/relationships/author"),
                Some(json!({"data": {"type": "authors", "id": id}})),
            ),
            _ => (
                "DELETE",
                "/forest/book_tags".to_owned(),
                Some(json!({"data": {"attributes": {"ids": [id], "all_records": false}}})),
            ),
        };
        let Ok(uri) = format!("{path}?timezone=UTC").parse::<axum::http::Uri>() else {
            return Ok(());
        };
        let body = body.map(|b: Json| b.to_string().into_bytes());
        rt.block_on(answer(app, request(method, &uri.to_string(), body)))?;
        Ok(())
    });
}

/// A body: a random tree, possibly wrapped in the JSON:API envelope, or bytes that are not JSON.
fn body() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        4 => (tree(), 0u8..4).prop_map(|(inner, depth)| {
            let body = match depth {
                0 => inner,
                1 => json!({"data": inner}),
                2 => json!({"data": {"attributes": inner}}),
                _ => json!({"data": {"type": "books", "id": "1", "attributes": inner,
                    "relationships": inner}}),
            };
            body.to_string().into_bytes()
        }),
        1 => (condition_tree(), any::<bool>()).prop_map(|(filters, all)| json!({"data": {
            "attributes": {"ids": ["1", "2|2"], "all_records": all,
                "all_records_ids_excluded": ["3"],
                "all_records_subset_query": {"filters": filters, "page[size]": "x"}}}})
            .to_string().into_bytes()),
        1 => (select(vec!["Value", "Objective", "Pie", "Line", "Leaderboard", "Smart", ""]),
              select(vec!["Count", "Sum", "Avg", "", "count"]),
              select(FIELDS), select(vec!["Day", "Week", "Month", "Quarter", "Year", "Hour"]),
              scalar(), prop::option::of(condition_tree()), tree())
            .prop_map(|(kind, aggregator, field, range, limit, filter, vars)| json!({
                "type": kind, "sourceCollectionName": "books", "aggregator": aggregator,
                "aggregateFieldName": field, "groupByFieldName": field, "timeRange": range,
                "labelFieldName": field, "relationshipFieldName": field, "objective": limit,
                "limit": limit, "filter": filter, "contextVariables": vars,
                "query": "SELECT COUNT(*) AS value FROM books", "connectionName": "main",
                "collectionNames": vars,
            }).to_string().into_bytes()),
        1 => "\\PC{0,20}".prop_map(String::into_bytes),
        1 => vec(any::<u8>(), 0..20),
    ]
    .boxed()
}

/// Random bodies on every route that reads one.
fn bodies(backend: Backend) {
    run(backend, (body(), 0usize..10), |rt, app, (body, route)| {
        let (method, path) = [
            ("POST", "/forest/books"),
            ("PUT", "/forest/books/2"),
            ("DELETE", "/forest/book_tags"),
            ("POST", "/forest/authors/2/relationships/books"),
            ("DELETE", "/forest/books/3/relationships/tags"),
            ("PUT", "/forest/books/4/relationships/author"),
            ("PUT", "/forest/books/4/relationships/cover"),
            ("POST", "/forest/stats/books"),
            ("POST", "/forest/_internal/native_query"),
            ("POST", "/forest/_internal/capabilities"),
        ][route];
        rt.block_on(answer(
            app,
            request(method, &format!("{path}?timezone=UTC"), Some(body)),
        ))?;
        Ok(())
    });
}

/// Regression (found by `ids`): an integer id beyond i64 after ordinary ids on the same pooled
/// connections was a 500 on PostgreSQL (a `numeric` bind in a statement cached for `int8`).
fn ids_beyond_i64(backend: Backend) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fixture = fixture(backend).await;
        let big = "10000000000000000000";
        for (id, expected) in [
            ("1", 200),
            (big, 404),
            (big, 404),
            ("2", 200),
            (big, 404),
            ("-10000000000000000000", 404),
            (big, 404),
            ("3", 200),
            (big, 404),
        ] {
            let uri = format!("/forest/books/{id}?timezone=UTC");
            let (status, body) = answer(&fixture.app, request("GET", &uri, None))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(status, expected, "{uri}: {body}");
        }
        // The same with a float after an integer on an INT column (was silently misread).
        for (pages, expected) in [
            ("183", 1),
            ("183.5", 0),
            ("183", 1),
            ("183.5", 0),
            ("183", 1),
        ] {
            let tree = format!(r#"{{"field":"pages","operator":"equal","value":{pages}}}"#);
            let uri = format!("/forest/books/count?timezone=UTC&filters={}", encode(&tree));
            let (_, body) = answer(&fixture.app, request("GET", &uri, None))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(body, json!({ "count": expected }), "{uri}");
        }
    });
}

macro_rules! on_all_backends_sync {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn sqlite() { super::$name(canopy_e2e::Backend::Sqlite) }
                #[test]
                fn postgres() { super::$name(canopy_e2e::Backend::Postgres) }
                #[test]
                fn mysql() { super::$name(canopy_e2e::Backend::MySql) }
            }
        )*
    };
}

on_all_backends_sync!(query_strings, ids, bodies, ids_beyond_i64);
