//! The chart, capabilities and live-query-segment routes through `canopy::http::router`, on the
//! shop fixture of `list`: `POST /stats/{c}`, `POST /_internal/native_query`,
//! `POST /_internal/capabilities`, and `segmentQuery` on list, count and CSV.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{encode, ids, post};
use crate::http::{app, envelope, get, send};

/// The stats document around `value`, with a fresh uuid as its id.
fn assert_stats(body: &Json, value: &Json) {
    assert_eq!(body["data"]["type"], "stats", "{body}");
    assert_eq!(&body["data"]["attributes"]["value"], value, "{body}");
    let id = body["data"]["id"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok());
}

async fn collection_charts(backend: Backend) {
    let (_db, app) = app(backend).await;
    let (status, _, body) = send(
        &app,
        post(
            "/forest/stats/orders?timezone=UTC",
            &json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count",
                "filter": {"field": "status", "operator": "equal", "value": "{{status}}"},
                "contextVariables": {"status": "paid"}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_stats(&body, &json!({ "countCurrent": 2 }));

    let (status, _, body) = send(
        &app,
        post(
            "/forest/stats/orders?timezone=UTC",
            &json!({"type": "Pie", "sourceCollectionName": "orders", "aggregator": "Count",
                "groupByFieldName": "status"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let pie = body["data"]["attributes"]["value"].as_array().unwrap();
    assert!(
        pie.contains(&json!({ "key": "paid", "value": 2 })),
        "{body}"
    );

    let (status, _, body) = send(
        &app,
        post(
            "/forest/stats/orders?timezone=UTC",
            &json!({"type": "Smart"}),
        ),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::BAD_REQUEST,
            envelope("ValidationError", "Invalid Chart type \"Smart\"", 400)
        )
    );
    let unknown = send(
        &app,
        post(
            "/forest/stats/nowhere?timezone=UTC",
            &json!({"type": "Value"}),
        ),
    )
    .await;
    assert_eq!(unknown.0, StatusCode::NOT_FOUND);
    let anonymous = Request::post("/forest/stats/orders?timezone=UTC")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, anonymous).await.0, StatusCode::UNAUTHORIZED);
}

async fn query_charts(backend: Backend) {
    let (_db, app) = app(backend).await;
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_internal/native_query?timezone=UTC",
            &json!({"type": "Value", "connectionName": "main",
                "query": "SELECT COUNT(*) AS value FROM orders WHERE status = {{status}}",
                "contextVariables": {"status": "paid"}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_stats(&body, &json!({ "countCurrent": 2 }));

    let (status, _, body) = send(
        &app,
        post(
            "/forest/_internal/native_query?timezone=UTC",
            &json!({"type": "Value", "query": "SELECT 1 AS value FROM orders"}),
        ),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            envelope(
                "UnprocessableError",
                "Missing native query connection attribute",
                422
            )
        )
    );
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_internal/native_query?timezone=UTC",
            &json!({"type": "Value", "connectionName": "main",
                "query": "DELETE FROM orders"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        send(&app, get("/forest/orders/count?timezone=UTC")).await.2,
        json!({ "count": 5 })
    );
}

async fn capabilities(backend: Backend) {
    let (_db, app) = app(backend).await;
    // No timezone: the agent builds no caller on this route.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_internal/capabilities",
            &json!({"collectionNames": ["orders", "nowhere"]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["nativeQueryConnections"], json!([{ "name": "main" }]));
    assert_eq!(
        body["agentCapabilities"],
        json!({
            "canUseProjectionOnGetOne": true,
            "canUseProjectionViaHeader": true,
            "canUseProjectionViaHeaderOnList": true,
            "canUseMultipleFieldsProjectionOnRelation": true,
            "canUseAuditTrail": false,
        })
    );
    let collections = body["collections"].as_array().unwrap();
    assert_eq!(collections.len(), 1);
    let orders = &collections[0];
    assert_eq!(orders["name"], "orders");
    let fields = orders["fields"].as_array().unwrap();
    let field = |name: &str| fields.iter().find(|f| f["name"] == name).unwrap();
    let status_field = field("status");
    assert_eq!(status_field["type"], "String");
    assert_eq!(status_field["isGroupable"], true);
    let operators = status_field["operators"].as_array().unwrap();
    for op in ["equal", "in", "i_contains", "present"] {
        assert!(operators.contains(&json!(op)), "{op} in {operators:?}");
    }
    let placed_at = field("placed_at")["operators"].as_array().unwrap();
    assert!(
        placed_at.contains(&json!("previous_x_days")),
        "{placed_at:?}"
    );
    assert_eq!(
        field("customer"),
        &json!({ "name": "customer", "type": "ManyToOne", "isGroupable": true })
    );
    // To-many relations are not listed.
    assert!(fields.iter().all(|f| f["type"] != "OneToMany"));
    assert_eq!(orders["aggregationCapabilities"]["supportGroups"], true);
    assert_eq!(
        orders["aggregationCapabilities"]["supportedDateOperations"],
        json!(["Day", "Week", "Month", "Quarter", "Year"])
    );
    let anonymous = Request::post("/forest/_internal/capabilities")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, anonymous).await.0, StatusCode::UNAUTHORIZED);
}

async fn live_query_segments(backend: Backend) {
    let (_db, app) = app(backend).await;
    let paid = encode("SELECT id FROM orders WHERE status = 'paid'");
    let (status, _, body) = send(
        &app,
        get(&format!(
            "/forest/orders?timezone=UTC&sort=id&segmentQuery={paid}&connectionName=main"
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids(&body), ["1", "3"]);
    let count = send(
        &app,
        get(&format!(
            "/forest/orders/count?timezone=UTC&segmentQuery={paid}&connectionName=main"
        )),
    )
    .await;
    assert_eq!(count.2, json!({ "count": 2 }));
    // ANDed with the other filters, and the caller's variables are bound.
    let mine = encode("SELECT id FROM orders WHERE customer_id = {{currentUser.id}}");
    let csv = send(
        &app,
        get(&format!(
            "/forest/orders.csv?timezone=UTC&fields[orders]=id,status&header=id,status\
             &segmentQuery={mine}&connectionName=main&filters={}",
            encode(r#"{"field":"status","operator":"equal","value":"new"}"#)
        )),
    )
    .await;
    assert_eq!(csv.0, StatusCode::OK, "{}", csv.2);
    assert_eq!(csv.2, json!("id,status\n2,new\n"));
    let none = encode("SELECT id FROM orders WHERE status = 'none'");
    let empty = send(
        &app,
        get(&format!(
            "/forest/orders/count?timezone=UTC&segmentQuery={none}&connectionName=main"
        )),
    )
    .await;
    assert_eq!(empty.2, json!({ "count": 0 }));

    for query in [
        "SELECT nope FROM nowhere",
        "SELECT status FROM orders",
        "DELETE FROM orders",
    ] {
        let (status, _, body) = send(
            &app,
            get(&format!(
                "/forest/orders?timezone=UTC&segmentQuery={}&connectionName=main",
                encode(query)
            )),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {body}");
        // The agent's wrapper of segment failures, without the cause's details.
        assert_eq!(body["errors"][0]["name"], "BusinessError");
        assert_eq!(body["errors"][0]["data"], json!({}));
        assert!(
            body["errors"][0]["detail"]
                .as_str()
                .unwrap()
                .starts_with("An error occurred during the execution of the segment query - "),
            "{body}"
        );
    }
    let missing = send(
        &app,
        get(&format!("/forest/orders?timezone=UTC&segmentQuery={paid}")),
    )
    .await;
    assert_eq!(
        missing.2,
        envelope(
            "UnprocessableError",
            "Missing native query connection attribute",
            422
        )
    );
}

on_all_backends!(
    collection_charts,
    query_charts,
    capabilities,
    live_query_segments
);
