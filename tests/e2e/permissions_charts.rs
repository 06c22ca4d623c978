//! Charts and SQL through HTTP (protocol §5.5), with a real store: users below editor may only
//! compute the charts of their rendering (matched by the `object-hash` of the chart), query
//! charts and live-query segments must be single SELECTs, and live-query segments are limited
//! to the rendering's `segments` / `liveQuerySegments` (a UNION of allowed ones counts). The
//! permission level is the users document's, never the token's (which claims admin here).

use axum::http::StatusCode;
use canopy::datasource::PermissionLevel;
use serde_json::{Value as Json, json};

use crate::harness::encode;
use crate::permissions::{call, forbidden, ids, on_stores, on_stores_and_data, world};

const TZ: &str = "timezone=UTC";

fn count_orders() -> Json {
    json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count"})
}

fn count_query() -> Json {
    json!({"type": "Value", "query": "SELECT COUNT(*) AS value FROM orders", "connectionName": "main"})
}

fn my_customers_query() -> Json {
    json!({"type": "Value", "connectionName": "main",
        "query": "SELECT COUNT(*) AS value FROM customers WHERE email = {{currentUser.email}}"})
}

fn chained_query() -> Json {
    json!({"type": "Value", "connectionName": "main",
        "query": "SELECT COUNT(*) AS value FROM orders; DELETE FROM orders"})
}

/// Charts by hash for a user, any chart for an editor; query charts' SQL checked once allowed.
async fn charts_follow_the_level_or_the_renderings_hashes(
    store: canopy_e2e::Backend,
    data: canopy_e2e::Backend,
) {
    let w = world(store, data).await;
    // As the Forest server sends them: other keys (ids, display settings) are not hashed.
    let mut listed = count_orders();
    listed["id"] = json!(42);
    listed["name"] = json!("Orders");
    w.rendering(
        json!({}),
        json!([listed, count_query(), my_customers_query(), chained_query()]),
    )
    .await;
    let sam = w.sam;
    let stats = format!("/forest/stats/orders?{TZ}");
    let native = format!("/forest/_internal/native_query?{TZ}");

    let (status, body) = call(&w.app, sam, "POST", &stats, Some(&count_orders())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["value"],
        json!({"countCurrent": 5})
    );
    // Null keys and context variables do not change the chart.
    let mut same = count_orders();
    same["aggregateFieldName"] = Json::Null;
    same["contextVariables"] = json!({"x": 1});
    let (status, _) = call(&w.app, sam, "POST", &stats, Some(&same)).await;
    assert_eq!(status, StatusCode::OK);
    let sum = json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Sum",
        "aggregateFieldName": "amount"});
    let (status, body) = call(&w.app, sam, "POST", &stats, Some(&sum)).await;
    assert_eq!((status, body), (StatusCode::FORBIDDEN, forbidden()));

    let (status, body) = call(&w.app, sam, "POST", &native, Some(&count_query())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["value"],
        json!({"countCurrent": 5})
    );
    // `{{currentUser.email}}` is the users document's email (ann@x.io: one customer), not
    // the token's.
    let (status, body) = call(&w.app, sam, "POST", &native, Some(&my_customers_query())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["value"],
        json!({"countCurrent": 1})
    );
    let other = json!({"type": "Value", "connectionName": "main",
        "query": "SELECT COUNT(*) AS value FROM customers"});
    let (status, body) = call(&w.app, sam, "POST", &native, Some(&other)).await;
    assert_eq!((status, body), (StatusCode::FORBIDDEN, forbidden()));
    // Allowed by hash, but not a single SELECT: 422 with the agent's message.
    let (status, body) = call(&w.app, sam, "POST", &native, Some(&chained_query())).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        json!({"errors": [{"name": "UnprocessableError", "detail": "You cannot chain SQL queries.", "status": 422}]})
    );

    // An editor computes any chart; the SQL rules still hold.
    let editor = w.level(sam, PermissionLevel::Editor).await;
    let (status, body) = call(&w.app, editor, "POST", &stats, Some(&sum)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = call(&w.app, editor, "POST", &native, Some(&other)).await;
    assert_eq!(status, StatusCode::OK);
    let delete = json!({"type": "Value", "connectionName": "main", "query": "DELETE FROM orders"});
    let (status, body) = call(&w.app, editor, "POST", &native, Some(&delete)).await;
    assert_eq!(
        (status, body["errors"][0]["detail"].clone()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!("Only SELECT queries are allowed.")
        )
    );

    // Taking the chart out of the rendering is seen on the next request.
    let user = w.level(editor, PermissionLevel::User).await;
    w.rendering(json!({}), json!([count_query()])).await;
    let (status, _) = call(&w.app, user, "POST", &stats, Some(&count_orders())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

fn segment(query: &str) -> String {
    format!(
        "/forest/orders?{TZ}&fields[orders]=id&segmentQuery={}&connectionName=main",
        encode(query)
    )
}

const PAID: &str = "SELECT id FROM orders WHERE status = 'paid'";
const BIG: &str = "SELECT id FROM orders WHERE amount > 15";
const UNION: &str = "/*MULTI-SEGMENTS-QUERIES-UNION*/ UNION ";

/// Live-query segments: a user runs only the rendering's, on their connection; an editor any
/// SELECT; a query that is not one SELECT is refused for everyone.
async fn live_query_segments_follow_the_rendering(
    store: canopy_e2e::Backend,
    data: canopy_e2e::Backend,
) {
    let w = world(store, data).await;
    w.rendering(
        json!({"orders": {
            "segments": [PAID, format!("{BIG};")],
            "liveQuerySegments": [
                {"connectionName": "main", "query": PAID},
                {"connectionName": "main", "query": format!("{BIG};")},
                {"connectionName": "other", "query": "SELECT id FROM orders"},
            ],
        }}),
        json!([]),
    )
    .await;
    let sam = w.sam;
    let (status, body) = call(&w.app, sam, "GET", &segment(PAID), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids(&body), [1, 3]);
    let count = format!(
        "/forest/orders/count?{TZ}&segmentQuery={}&connectionName=main",
        encode(PAID)
    );
    let (_, body) = call(&w.app, sam, "GET", &count, None).await;
    assert_eq!(body, json!({"count": 2}));
    // A UNION of allowed queries (the detail view's), each compared without its `;`.
    let union = format!("{PAID}{UNION}{BIG}");
    let (status, body) = call(&w.app, sam, "GET", &segment(&union), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids(&body), [1, 2, 3, 4]);
    for refused in [
        // not listed
        "SELECT id FROM orders".to_owned(),
        // listed with its `;` only: an exact match is needed outside a UNION
        BIG.to_owned(),
        // one part of the UNION is not allowed
        format!("{PAID}{UNION}SELECT id FROM orders"),
    ] {
        let (status, body) = call(&w.app, sam, "GET", &segment(&refused), None).await;
        assert_eq!(
            (status, body),
            (StatusCode::FORBIDDEN, forbidden()),
            "{refused}"
        );
    }
    // Allowed on another connection only.
    let other = format!(
        "/forest/orders?{TZ}&segmentQuery={}&connectionName=main",
        encode("SELECT id FROM orders")
    );
    let (status, _) = call(&w.app, sam, "GET", &other, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let editor = w.level(sam, PermissionLevel::Editor).await;
    let (status, body) = call(&w.app, editor, "GET", &segment(BIG), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids(&body), [2, 4]);
    // Not one SELECT: refused as the other segment failures (the agent answers 500).
    let (status, body) = call(&w.app, editor, "GET", &segment("DELETE FROM orders"), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        json!({"errors": [{"name": "BusinessError", "status": 422, "data": {},
            "detail": "An error occurred during the execution of the segment query - Only SELECT queries are allowed."}]})
    );
}

on_stores_and_data!(charts_follow_the_level_or_the_renderings_hashes);
on_stores!(live_query_segments_follow_the_rendering);
