//! The checks a plugin in another language than Rust passes, shared by `plugins_python` and
//! `plugins_ts`: its shop plugin served as `canopy serve --plugins` serves it, with the Rust
//! example's checks (`plugins_http`): computed fields (through a relation, with multi-byte text),
//! an action's dynamic form, the Before Create hook refusing bad input, charts; its language as
//! the console and the reload answer show it. And its SDK's hostile plugin: an uncaught exception
//! (and whatever else the language throws), an infinite loop and a memory bomb each fail only
//! their own request.

use axum::http::StatusCode;
use std::path::Path;

use canopy_e2e::Backend;
use serde_json::{Value as Json, json};

use crate::harness::{attribute, post};
use crate::http::{get, send};
use crate::plugins_http::Shop;

fn selection(collection: &str, ids: &[&str], values: &Json) -> Json {
    json!({"data": {"attributes": {"collection_name": collection, "ids": ids, "values": values}}})
}

/// The shop plugin at `component`, written in `language`, serves what the Rust one does.
pub(crate) async fn the_shop_plugin_serves_what_the_rust_one_does(
    backend: Backend,
    component: &Path,
    language: &str,
) {
    let shop = Shop::seeded(backend).await;
    shop.install_file(component, "shop");
    // Multi-byte characters and an empty cell: the packed offsets are bytes.
    shop.execute("UPDATE customers SET first_name = 'Zoë', last_name = '' WHERE id = 2")
        .await;
    let (served, app) = shop.serve().await.unwrap();
    assert_eq!(served.plugins().languages()["shop"], language);

    // Computed fields, one through a relation.
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,full_name&sort=id&page[size]=3"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        attribute(&body, "full_name"),
        ["Boris Customer1", "Zoë ", "Dave Customer3"]
    );
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&fields[orders]=id,customer_name&sort=id&page[size]=2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        attribute(&body, "customer_name"),
        ["Cleo Customer32", "Dave Customer63"]
    );

    // An action with a dynamic form: a value read from the record, a field shown by a rule.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/0/offer-a-coupon/hooks/load?timezone=UTC",
            &selection("customers", &["1"], &json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let labels: Vec<&Json> = body["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["field"])
        .collect();
    assert_eq!(
        labels,
        [&json!("Amount"), &json!("Kind"), &json!("Message")]
    );
    assert_eq!(body["fields"][2]["value"], "Hello Boris, here is a gift.");
    let change = json!({"data": {"attributes": {"collection_name": "customers", "ids": ["1"],
        "changed_field": "Amount",
        "fields": [{"field": "Amount", "value": 80}, {"field": "Kind", "value": "Fixed"},
                   {"field": "Message", "value": "Hi"}]}}});
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/0/offer-a-coupon/hooks/change?timezone=UTC",
            &change,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["field"] == "Reason"),
        "{body}"
    );
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/0/offer-a-coupon?timezone=UTC",
            &selection("customers", &["1"], &json!({"Amount": 20, "Kind": "Fixed"})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["success"],
        "Coupon of 20 (Fixed) sent to Boris Customer1"
    );

    // The Before Create hook: refuses an email without `@`, lower-cases a good one.
    let create = |email: &str| {
        post(
            "/forest/customers?timezone=UTC",
            &json!({"data": {"type": "customers", "attributes": {"first_name": "Zoe",
                "last_name": "Hook", "email": email, "created_at": "2024-01-02T03:04:05.000Z"}}}),
        )
    };
    let (status, _, body) = send(&app, create("not-an-email")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["errors"][0]["detail"],
        "`not-an-email` is not an email address"
    );
    let (status, _, body) = send(&app, create("Zoe.HOOK@Example.COM")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["email"], "zoe.hook@example.com");

    // Charts: one on a record (an aggregate the plugin asks the host for), one on the dashboard.
    let (status, _, body) = send(
        &app,
        get("/forest/_charts/customers/lifetime_value?timezone=UTC&record_id=1"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let expected = shop
        .scalar("SELECT SUM(total) FROM orders WHERE customer_id = 1")
        .await;
    let got = body["countCurrent"]
        .as_f64()
        .unwrap_or_else(|| panic!("{body}"));
    assert!((got - expected).abs() < 1e-6, "{got} vs {expected}");
    let (status, _, body) = send(&app, get("/forest/_charts/orders_by_status?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let total: f64 = body
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|e| e["value"].as_f64().unwrap())
        .sum();
    assert_eq!(total, 5000.0);
}

/// Each call of the hostile plugin at `component` (written in `language`) that throws (`thrown`:
/// the chart's name and what its error says), loops or allocates without end fails only its
/// own request; what it prints goes to the log.
pub(crate) async fn each_hostile_call_fails_only_its_own_request(
    backend: Backend,
    component: &Path,
    language: &str,
    thrown: &[(&str, &str)],
) {
    let shop = Shop::seeded(backend).await;
    shop.install_file(component, "hostile");
    std::fs::write(
        shop.plugins.join("hostile.toml"),
        // Time enough for the bomb to reach its memory limit on a loaded machine (at 500 ms it
        // sometimes hit the time limit first), short enough for the loop's test.
        "[limits]\nchart_ms = 2000\nmemory_mb = 64\n",
    )
    .unwrap();
    let (served, app) = shop.serve().await.unwrap();
    assert_eq!(served.plugins().languages()["hostile"], language);
    let chart = |name: &str| {
        get(&format!(
            "/forest/_charts/customers/{name}?timezone=UTC&record_id=1"
        ))
    };
    let limits = [
        ("loop", "exceeded its time limit of 2000 ms"),
        ("bomb", "exceeded its memory limit of 64 MiB"),
    ];
    for &(name, expected) in thrown.iter().chain(&limits) {
        let (status, _, body) = send(&app, chart(name)).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{name}: {body}");
        assert!(body.to_string().contains(expected), "{name}: {body}");
        assert!(body.to_string().contains("hostile"), "{name}: {body}");
        // The plugin still answers the next request.
        let (status, _, body) = send(&app, chart("fine")).await;
        assert_eq!(status, StatusCode::OK, "after {name}: {body}");
        assert_eq!(
            body["countCurrent"].as_f64(),
            Some(42.0),
            "after {name}: {body}"
        );
    }
    // Output to the language's prints and errors goes to the log; the values are still answered.
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&fields[customers]=id,noisy&sort=id&page[size]=2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let noisy: Vec<Option<f64>> = attribute(&body, "noisy").iter().map(Json::as_f64).collect();
    assert_eq!(noisy, [Some(2.0), Some(4.0)], "{body}");
}
