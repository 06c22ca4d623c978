//! Property tests of every date computation a request reaches, through `canopy::http::router` on
//! the library fixture of `snapshots`, on SQLite, PostgreSQL and MariaDB: each chart kind (Value
//! with its previous period, Objective, Pie, Line over each time range, Leaderboard) and each
//! filter path (list, count, CSV, related list) with every time operator, extreme counts (`1e18`,
//! i64's and f64's bounds, negative, fractional), far and impossible dates, and timezones with odd
//! offsets and DST gaps at midnight. Whatever the input, the answer is a 200 or a 4xx in the
//! agent's envelope (`http_props::answer`), never a 500 or a panic.

use canopy_e2e::Backend;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value as Json, json};

use crate::harness::encode;
use crate::http_props::{answer, request, run};
use crate::snapshots::fixture;

const TIME_OPERATORS: &[&str] = &[
    "before",
    "after",
    "after_x_hours_ago",
    "before_x_hours_ago",
    "future",
    "past",
    "previous_month_to_date",
    "previous_month",
    "previous_quarter_to_date",
    "previous_quarter",
    "previous_week_to_date",
    "previous_week",
    "previous_year_to_date",
    "previous_year",
    "previous_x_days_to_date",
    "previous_x_days",
    "today",
    "yesterday",
];

const ZONES: &[&str] = &[
    "UTC",
    "Pacific/Kiritimati",
    "Pacific/Apia",
    "Etc/GMT%2B12",
    "Asia/Kathmandu",
    "America/Sao_Paulo",
    "Australia/Lord_Howe",
    "Europe/Paris",
];

/// Counts and dates at and beyond every range involved.
fn extreme() -> BoxedStrategy<Json> {
    prop_oneof![
        any::<i64>().prop_map(Json::from),
        select(vec![i64::MIN, i64::MAX, 0, -1, 1, 100_000_000]).prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        select(vec![
            1e18,
            -1e18,
            9.9e307,
            -9.9e307,
            f64::MAX,
            f64::MIN,
            0.5,
            -0.5,
            1e-300
        ])
        .prop_map(|f: f64| json!(f)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        select(vec![
            "1e18",
            "-1e18",
            "9223372036854775808",
            "+262143-12-31",
            "-262144-01-01",
            "+275760-09-13T00:00:00Z",
            "-271821-04-20T00:00:00Z",
            "9999-12-31",
            "9999-12-31T23:59:59.999Z",
            "0001-01-01",
            "0000-01-01",
            "2024-02-30",
            "2024-03-31T02:30:00",
            "2024-10-27T02:30:00+02:00",
            "yesterday",
            "",
        ])
        .prop_map(|s: &str| Json::String(s.to_owned())),
        Just(Json::Null),
    ]
    .boxed()
}

/// One time leaf, sometimes under an `or` (which keeps a Value chart's previous period).
fn time_filter() -> BoxedStrategy<Json> {
    (
        select(vec!["published", "added_at", "author:name", "pages"]),
        select(TIME_OPERATORS),
        extreme(),
        0u8..3,
    )
        .prop_map(|(field, operator, value, shape)| {
            let leaf = json!({"field": field, "operator": operator, "value": value});
            match shape {
                0 => leaf,
                1 => json!({"aggregator": "or", "conditions": [leaf]}),
                _ => json!({"aggregator": "and", "conditions": [leaf, leaf]}),
            }
        })
        .boxed()
}

/// A chart body of each kind over books, filtered by a time leaf.
fn chart() -> BoxedStrategy<Json> {
    (
        select(vec!["Value", "Objective", "Pie", "Line", "Leaderboard"]),
        select(vec!["Count", "Sum", "Avg", "Max", "Min"]),
        select(vec!["published", "added_at"]),
        select(vec!["Day", "Week", "Month", "Quarter", "Year"]),
        time_filter(),
        extreme(),
    )
        .prop_map(|(kind, aggregator, date, range, filter, number)| {
            let mut body = json!({"type": kind, "sourceCollectionName": "books",
                "aggregator": aggregator, "filter": filter});
            if aggregator != "Count" {
                body["aggregateFieldName"] = json!("pages");
            }
            match kind {
                "Objective" => body["objective"] = number,
                "Pie" => body["groupByFieldName"] = json!(date),
                "Line" => {
                    body["groupByFieldName"] = json!(date);
                    body["timeRange"] = json!(range);
                }
                "Leaderboard" => {
                    body["relationshipFieldName"] = json!("tags");
                    body["labelFieldName"] = json!("title");
                    body["limit"] = json!(5);
                }
                _ => {}
            }
            body
        })
        .boxed()
}

/// Every chart kind with extreme time filters, in odd timezones.
fn charts(backend: Backend) {
    run(
        backend,
        (chart(), select(ZONES)),
        |rt, app, (body, zone)| {
            let uri = format!("/forest/stats/books?timezone={zone}");
            rt.block_on(answer(
                app,
                request("POST", &uri, Some(body.to_string().into_bytes())),
            ))?;
            Ok(())
        },
    );
}

/// Every filter path with extreme time filters, in odd timezones.
fn filters(backend: Backend) {
    run(
        backend,
        (time_filter(), select(ZONES), 0usize..4),
        |rt, app, (filter, zone, route)| {
            let path = [
                "/forest/books",
                "/forest/books/count",
                "/forest/books.csv",
                "/forest/authors/1/relationships/books",
            ][route];
            let uri = format!(
                "{path}?timezone={zone}&filters={}",
                encode(&filter.to_string())
            );
            rt.block_on(answer(app, request("GET", &uri, None)))?;
            Ok(())
        },
    );
}

/// The issue's cases: a Value chart over `previous_x_days` 1e18 answers (it was a 500,
/// `NaiveDate - TimeDelta overflowed`), and an Objective chart whose objective is an object is
/// refused (it was a 200).
fn issue_cases(backend: Backend) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fixture = fixture(backend).await;
        for (field, days) in [
            ("published", json!(1e18)),
            ("added_at", json!(1e18)),
            ("added_at", json!(-1e18)),
            ("published", json!(i64::MIN)),
        ] {
            for operator in ["previous_x_days", "previous_x_days_to_date"] {
                let body = json!({"type": "Value", "sourceCollectionName": "books",
                    "aggregator": "Count",
                    "filter": {"field": field, "operator": operator, "value": days}});
                let (status, reply) = answer(
                    &fixture.app,
                    request(
                        "POST",
                        "/forest/stats/books?timezone=Pacific/Kiritimati",
                        Some(body.to_string().into_bytes()),
                    ),
                )
                .await
                .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(status, 200, "{body}: {reply}");
                let value = &reply["data"]["attributes"]["value"];
                assert!(value["countCurrent"].is_number(), "{reply}");
                assert!(value["countPrevious"].is_number(), "{reply}");
            }
        }
        for objective in [json!({"a": 1}), json!([1]), json!(true), json!("a lot")] {
            let body = json!({"type": "Objective", "sourceCollectionName": "books",
                "aggregator": "Count", "objective": objective});
            let (status, reply) = answer(
                &fixture.app,
                request(
                    "POST",
                    "/forest/stats/books?timezone=UTC",
                    Some(body.to_string().into_bytes()),
                ),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(status, 400, "{body}: {reply}");
            assert_eq!(reply["errors"][0]["name"], "ValidationError", "{reply}");
        }
        let body = json!({"type": "Objective", "sourceCollectionName": "books",
            "aggregator": "Count", "objective": 10});
        let (status, reply) = answer(
            &fixture.app,
            request(
                "POST",
                "/forest/stats/books?timezone=UTC",
                Some(body.to_string().into_bytes()),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status, 200, "{reply}");
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

on_all_backends_sync!(charts, filters, issue_cases);
