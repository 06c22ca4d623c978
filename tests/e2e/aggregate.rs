//! `aggregate` on real databases: every operation, groups by fields and relation paths, and every
//! date period computed in the caller's timezone (Europe/Paris rows near midnight land in the
//! local day, week, month, quarter and year).

use canopy::datasource::{
    AggregateResult, Aggregation, AggregationOperation, Collection, DateOperation, Error, Filter,
    Operator, Value,
};
use canopy_e2e::{Backend, caller, caller_in, collection, on_all_backends};

use crate::list::{leaf, number, shop};

/// Results as sorted `(group values joined by '|', value)` pairs, values as numbers.
fn pairs(results: &[AggregateResult]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = results
        .iter()
        .map(|r| {
            let key = r
                .group
                .values()
                .map(Value::to_id_string)
                .collect::<Vec<_>>()
                .join("|");
            (key, number(Some(&r.value)))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn expected(items: &[(&str, f64)]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn run(
    c: &dyn Collection,
    tz: &str,
    aggregation: Aggregation,
    limit: Option<u64>,
) -> Result<Vec<AggregateResult>, Error> {
    c.aggregate(&caller_in(tz), &Filter::default(), &aggregation, limit)
        .await
}

async fn operations_without_groups(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    let value = |results: Vec<AggregateResult>| {
        assert_eq!(results.len(), 1);
        assert!(results[0].group.is_empty());
        results[0].value.clone()
    };
    let count = value(
        run(o, "UTC", Aggregation::count(), None)
            .await
            .expect("count"),
    );
    assert_eq!(count, Value::Int(5));
    let count_notes = value(
        run(
            o,
            "UTC",
            Aggregation::new(AggregationOperation::Count, Some("note")),
            None,
        )
        .await
        .expect("count"),
    );
    assert_eq!(count_notes, Value::Int(4));
    let sum = value(
        run(
            o,
            "UTC",
            Aggregation::new(AggregationOperation::Sum, Some("amount")),
            None,
        )
        .await
        .expect("sum"),
    );
    assert_eq!(number(Some(&sum)), 142.75);
    let avg = value(
        run(
            o,
            "UTC",
            Aggregation::new(AggregationOperation::Avg, Some("amount")),
            None,
        )
        .await
        .expect("avg"),
    );
    assert!((number(Some(&avg)) - 28.55).abs() < 1e-9, "{avg:?}");
    let min = value(
        run(
            o,
            "UTC",
            Aggregation::new(AggregationOperation::Min, Some("amount")),
            None,
        )
        .await
        .expect("min"),
    );
    assert_eq!(number(Some(&min)), 5.25);
    let max = value(
        run(
            o,
            "UTC",
            Aggregation::new(AggregationOperation::Max, Some("status")),
            None,
        )
        .await
        .expect("max"),
    );
    assert_eq!(max, Value::from("paid"));
    let latest = value(
        run(
            o,
            "UTC",
            Aggregation::new(AggregationOperation::Max, Some("day")),
            None,
        )
        .await
        .expect("max day"),
    );
    assert_eq!(
        latest,
        Value::Dateonly(chrono::NaiveDate::from_ymd_opt(2024, 4, 1).expect("valid"))
    );
    let customers = collection(&ds, "customers");
    let bad = run(
        customers.as_ref(),
        "UTC",
        Aggregation::new(AggregationOperation::Max, Some("vip")),
        None,
    )
    .await;
    assert!(matches!(bad, Err(Error::Validation(_))), "{bad:?}");
    let bad = run(
        o,
        "UTC",
        Aggregation::new(AggregationOperation::Sum, Some("status")),
        None,
    )
    .await;
    assert!(matches!(bad, Err(Error::Validation(_))), "{bad:?}");
}

async fn groups_by_fields_and_relations_ordered_and_limited(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    let by_status = run(
        o,
        "UTC",
        Aggregation::count().group_by("status", None),
        None,
    )
    .await
    .expect("by status");
    assert_eq!(
        pairs(&by_status),
        expected(&[("cancelled", 1.0), ("new", 2.0), ("paid", 2.0)])
    );
    assert_eq!(
        number(Some(&by_status[2].value)),
        1.0,
        "ordered by value, descending"
    );
    let top = run(
        o,
        "UTC",
        Aggregation::new(AggregationOperation::Sum, Some("amount")).group_by("customer:name", None),
        Some(2),
    )
    .await
    .expect("leaderboard");
    assert_eq!(pairs(&top), expected(&[("null", 100.0), ("Ann", 30.5)]));
    assert_eq!(top[0].group.get("customer:name"), Some(&Value::Null));
    let by_country = run(
        o,
        "UTC",
        Aggregation::count()
            .group_by("customer:country:name", None)
            .group_by("status", None),
        None,
    )
    .await
    .expect("two groups");
    assert_eq!(
        pairs(&by_country),
        expected(&[
            ("France|new", 1.0),
            ("France|paid", 1.0),
            ("Japan|paid", 1.0),
            ("null|new", 1.0),
            ("null|cancelled", 1.0)
        ])
    );
    let filtered = o
        .aggregate(
            &caller(),
            &Filter::new(Some(leaf(
                "customer:country:name",
                Operator::Equal,
                "France",
            ))),
            &Aggregation::count(),
            None,
        )
        .await
        .expect("filtered");
    assert_eq!(filtered[0].value, Value::Int(2));
}

async fn date_periods_in_the_caller_timezone(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let o = orders.as_ref();
    let by = |period| Aggregation::count().group_by("placed_at", Some(period));
    let paris = "Europe/Paris";
    let day = run(o, paris, by(DateOperation::Day), None)
        .await
        .expect("day");
    assert_eq!(
        pairs(&day),
        expected(&[
            ("2024-01-01", 1.0),
            ("2024-01-15", 1.0),
            ("2024-02-10", 1.0),
            ("2024-03-01", 1.0),
            ("2024-04-01", 1.0)
        ])
    );
    let week = run(o, paris, by(DateOperation::Week), None)
        .await
        .expect("week");
    assert_eq!(
        pairs(&week),
        expected(&[
            ("2024-01-01", 1.0),
            ("2024-01-15", 1.0),
            ("2024-02-05", 1.0),
            ("2024-02-26", 1.0),
            ("2024-04-01", 1.0)
        ])
    );
    let month = run(o, paris, by(DateOperation::Month), None)
        .await
        .expect("month");
    assert_eq!(
        pairs(&month),
        expected(&[
            ("2024-01-01", 2.0),
            ("2024-02-01", 1.0),
            ("2024-03-01", 1.0),
            ("2024-04-01", 1.0)
        ])
    );
    assert_eq!(number(Some(&month[0].value)), 2.0);
    assert!(matches!(
        month[0].group.get("placed_at"),
        Some(Value::Dateonly(_))
    ));
    let quarter = run(
        o,
        paris,
        Aggregation::new(AggregationOperation::Sum, Some("amount"))
            .group_by("placed_at", Some(DateOperation::Quarter)),
        None,
    )
    .await
    .expect("quarter");
    assert_eq!(
        pairs(&quarter),
        expected(&[("2024-01-01", 122.75), ("2024-04-01", 20.0)])
    );
    let year = run(
        o,
        paris,
        Aggregation::new(AggregationOperation::Avg, Some("amount"))
            .group_by("placed_at", Some(DateOperation::Year)),
        None,
    )
    .await
    .expect("year");
    assert_eq!(year.len(), 1);
    assert!((number(Some(&year[0].value)) - 28.55).abs() < 1e-9);
    // The same rows in UTC fall in other periods.
    let utc_year = run(o, "UTC", by(DateOperation::Year), None)
        .await
        .expect("utc year");
    assert_eq!(
        pairs(&utc_year),
        expected(&[("2023-01-01", 1.0), ("2024-01-01", 4.0)])
    );
    let tokyo_month = run(o, "Asia/Tokyo", by(DateOperation::Month), Some(1))
        .await
        .expect("tokyo");
    assert_eq!(
        pairs(&tokyo_month),
        expected(&[("2024-01-01", 2.0)]),
        "limit applies after bucketing"
    );
    // Min/Max per period are merged too.
    let max_by_month = run(
        o,
        paris,
        Aggregation::new(AggregationOperation::Max, Some("amount"))
            .group_by("placed_at", Some(DateOperation::Month)),
        None,
    )
    .await
    .expect("max");
    assert_eq!(
        pairs(&max_by_month),
        expected(&[
            ("2024-01-01", 100.0),
            ("2024-02-01", 7.0),
            ("2024-03-01", 10.5),
            ("2024-04-01", 20.0)
        ])
    );
}

async fn dateonly_periods_need_no_timezone(backend: Backend) {
    let (_db, ds) = shop(backend).await;
    let orders = collection(&ds, "orders");
    let month = run(
        orders.as_ref(),
        "Pacific/Kiritimati",
        Aggregation::count().group_by("day", Some(DateOperation::Month)),
        None,
    )
    .await
    .expect("month");
    assert_eq!(
        pairs(&month),
        expected(&[
            ("2023-12-01", 1.0),
            ("2024-01-01", 1.0),
            ("2024-02-01", 1.0),
            ("2024-03-01", 1.0),
            ("2024-04-01", 1.0)
        ])
    );
    let week = run(
        orders.as_ref(),
        "UTC",
        Aggregation::count().group_by("day", Some(DateOperation::Week)),
        None,
    )
    .await
    .expect("week");
    assert!(
        pairs(&week).iter().any(|(k, _)| k == "2023-12-25"),
        "{week:?}"
    );
}

on_all_backends!(
    operations_without_groups,
    groups_by_fields_and_relations_ordered_and_limited,
    date_periods_in_the_caller_timezone,
    dateonly_periods_need_no_timezone,
);
