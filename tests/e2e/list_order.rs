//! Lists without `sort` follow the primary key, as the agent's `SortFactory.byPrimaryKeys`: the
//! list, the related list and the CSV export, on a table whose rows are stored out of key order
//! and whose projection a covering secondary index serves, so that a query without `ORDER BY`
//! comes back in the index's order (SQLite and MariaDB read `items_box_code`, checked with
//! `EXPLAIN`) or the heap's (PostgreSQL's sequential scan, rows inserted shuffled).

use std::sync::Arc;

use axum::Router;
use canopy::auth::SessionKey;
use canopy::datasource::sql::Options;
use canopy::http::{AppState, router};
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::Value as Json;

use crate::harness::encode;
use crate::http::{get, send};
use crate::list::portable;

/// Rows in the table; enough that the planners read the covering index.
const ROWS: u64 = 400;

/// `boxes` ← `items`: ids inserted in a shuffled order, `code` (indexed with `box_id`) in a
/// third order, so that neither the heap nor the index follows the key.
async fn app(backend: Backend) -> (TestDb, Router) {
    let db = TestDb::new(backend).await;
    // `{pk}`: on SQLite the key is the rowid, which every index holds, so that the indexes
    // cover `id, code`.
    db.execute(&portable(
        backend,
        "CREATE TABLE boxes (id INT PRIMARY KEY, label VARCHAR(20));
         CREATE TABLE items (id {pk}, box_id INT NOT NULL, code VARCHAR(20) NOT NULL,
            note VARCHAR(200), FOREIGN KEY (box_id) REFERENCES boxes(id));
         CREATE INDEX items_code ON items (code);
         CREATE INDEX items_box_code ON items (box_id, code);
         INSERT INTO boxes (id, label) VALUES (1, 'one'), (2, 'two'), (3, 'three');",
    ))
    .await;
    let rows: Vec<String> = (0..ROWS)
        .map(|i| {
            // 7919 and 37 are prime to ROWS: two permutations of 0..ROWS.
            let id = (i * 7919) % ROWS + 1;
            let code = (i * 37) % ROWS;
            format!(
                "({id}, {}, 'k{code:04}', 'a longer note that the index does not hold')",
                id % 3 + 1
            )
        })
        .collect();
    db.execute(&format!(
        "INSERT INTO items (id, box_id, code, note) VALUES {};",
        rows.join(", ")
    ))
    .await;
    // Fresh statistics, so that each planner sees the index as it will in production.
    db.execute(match backend {
        Backend::Postgres => "ANALYZE items; ANALYZE boxes;",
        Backend::MySql => "ANALYZE TABLE items; ANALYZE TABLE boxes;",
        Backend::Sqlite => "ANALYZE;",
    })
    .await;
    let app = served(&db).await;
    (db, app)
}

/// The routes over the database's tables as they are now.
async fn served(db: &TestDb) -> Router {
    let datasource = db.datasource(Options::default()).await;
    let state = AppState::new(
        Arc::new(datasource),
        SessionKey::new("a-test-auth-secret"),
        &canopy::config::HttpConfig::default(),
    );
    router(Arc::new(state))
}

fn ids(body: &Json) -> Vec<u64> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {body}"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().parse().unwrap())
        .collect()
}

async fn page(app: &Router, path: &str, number: u64) -> Vec<u64> {
    let (status, _, body) = send(
        app,
        get(&format!(
            "{path}?fields[items]=id,code&page[size]=100&page[number]={number}&timezone=UTC"
        )),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    ids(&body)
}

/// Two consecutive pages of the list are the keys 1–100 and 101–200: in order, nothing repeated
/// nor skipped.
async fn list_pages_follow_the_primary_key(backend: Backend) {
    let (_db, app) = app(backend).await;
    assert_eq!(
        page(&app, "/forest/items", 1).await,
        (1..=100).collect::<Vec<_>>()
    );
    assert_eq!(
        page(&app, "/forest/items", 2).await,
        (101..=200).collect::<Vec<_>>()
    );
    // A given sort is kept as is: by code, whatever the keys.
    let (_, _, body) = send(
        &app,
        get("/forest/items?fields[items]=id,code&sort=code&page[size]=3&timezone=UTC"),
    )
    .await;
    let codes: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["attributes"]["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["k0000", "k0001", "k0002"]);
}

/// The related list of box 1 (keys that are multiples of 3), read through the `(box_id, code)`
/// index, pages in key order.
async fn related_pages_follow_the_primary_key(backend: Backend) {
    let (_db, app) = app(backend).await;
    let expected: Vec<u64> = (1..=ROWS).filter(|id| id % 3 == 0).collect();
    let path = "/forest/boxes/1/relationships/items";
    let first = page(&app, path, 1).await;
    let second = page(&app, path, 2).await;
    assert_eq!(first, expected[..100]);
    assert_eq!(second, expected[100..]);
}

/// The CSV export, read in pages of its own, comes out in key order.
async fn csv_follows_the_primary_key(backend: Backend) {
    let (_db, app) = app(backend).await;
    let (status, _, body) = send(
        &app,
        get("/forest/items.csv?fields[items]=id,code&header=id,code&timezone=UTC"),
    )
    .await;
    assert_eq!(status, 200);
    let text = body.as_str().unwrap();
    let ids: Vec<u64> = text
        .lines()
        .skip(1)
        .map(|line| line.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, (1..=ROWS).collect::<Vec<_>>());
}

/// Shelves × slots of `stock`: more rows than one page of an export (1,000).
const SHELVES: u64 = 5;
const SLOTS: u64 = 500;

/// An export longer than its pages writes every row once, in the order asked: by the composite
/// key `(shelf, slot)` by default, and by the keys in another order or direction (each page
/// starts after the last row's keys), or by a sort that is not the keys (each page at an
/// offset), also with a filter beside the paging condition.
async fn csv_pages_write_every_row_once_in_order(backend: Backend) {
    let db = TestDb::new(backend).await;
    db.execute(
        "CREATE TABLE stock (shelf INT NOT NULL, slot INT NOT NULL, qty INT NOT NULL,
            PRIMARY KEY (shelf, slot));",
    )
    .await;
    let count = SHELVES * SLOTS;
    let rows: Vec<String> = (0..count)
        .map(|i| {
            // 1999 is prime to the row count: the rows go in out of key order.
            let n = (i * 1999) % count;
            let (shelf, slot) = (n / SLOTS + 1, n % SLOTS + 1);
            format!("({shelf}, {slot}, {})", (shelf * 7 + slot) % 10)
        })
        .collect();
    db.execute(&format!(
        "INSERT INTO stock (shelf, slot, qty) VALUES {};",
        rows.join(", ")
    ))
    .await;
    let app = served(&db).await;
    let export = |query: String| {
        let app = app.clone();
        async move {
            let uri = format!(
                "/forest/stock.csv?fields[stock]=shelf,slot,qty&header=shelf,slot,qty\
                 &timezone=UTC{query}"
            );
            let (status, _, body) = send(&app, get(&uri)).await;
            assert_eq!(status, 200, "{query}: {body}");
            body.as_str()
                .unwrap()
                .lines()
                .skip(1)
                .map(|line| {
                    let cells: Vec<u64> = line.split(',').map(|c| c.parse().unwrap()).collect();
                    (cells[0], cells[1], cells[2])
                })
                .collect::<Vec<_>>()
        }
    };
    let all: Vec<(u64, u64, u64)> = (1..=SHELVES)
        .flat_map(|shelf| (1..=SLOTS).map(move |slot| (shelf, slot, (shelf * 7 + slot) % 10)))
        .collect();
    assert_eq!(export(String::new()).await, all, "the key, ascending");

    let mut descending = all.clone();
    descending.reverse();
    assert_eq!(export("&sort=-shelf,-slot".into()).await, descending);

    let mut by_slot = all.clone();
    by_slot.sort_by_key(|&(shelf, slot, _)| (slot, std::cmp::Reverse(shelf)));
    assert_eq!(export("&sort=slot,-shelf".into()).await, by_slot);

    // Not the keys: sorted by quantity, ties in the database's order, so compared as sets and
    // checked in quantity order.
    let by_qty = export("&sort=qty".into()).await;
    assert!(by_qty.windows(2).all(|w| w[0].2 <= w[1].2), "sort=qty");
    let mut sorted = by_qty.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, all, "sort=qty: every row once");

    // A filter beside the paging condition.
    let filter = r#"{"aggregator":"And","conditions":[{"field":"qty","operator":"GreaterThan","value":6},{"field":"shelf","operator":"NotEqual","value":2}]}"#;
    let filtered = export(format!("&filters={}", encode(filter))).await;
    let expected: Vec<_> = all
        .iter()
        .copied()
        .filter(|&(shelf, _, qty)| qty > 6 && shelf != 2)
        .collect();
    assert_eq!(filtered, expected, "filtered");
}

on_all_backends!(
    list_pages_follow_the_primary_key,
    related_pages_follow_the_primary_key,
    csv_follows_the_primary_key,
    csv_pages_write_every_row_once_in_order
);
