//! Whole responses (status, headers, body) of the wire details that issue 10 found different
//! from the Node agent, checked against insta snapshots on SQLite, PostgreSQL and MariaDB, over
//! the library fixture of `snapshots` (see there for the data and the redactions).
//!
//! One function per item of the issue; every other JSON snapshot also pins item 1 (the
//! `content-type` of JSON answers).

use axum::body::Body;
use axum::http::Request;
use canopy_e2e::{Backend, on_all_backends};
use serde_json::json;

use crate::snapshots::{fixture, get, request};

/// 2. CSV exports are `text/csv; charset=utf-8` whatever the file name; an error before the
///    first byte is the usual envelope, without the download headers.
async fn csv_headers(backend: Backend) {
    let f = fixture(backend).await;
    // `@forestadmin/agent-client` sends no `filename`.
    f.snap(
        "csv_without_filename",
        get("/forest/books.csv?timezone=UTC&fields[books]=id,title&header=id,title"),
    )
    .await;
    f.snap(
        "csv_related_without_filename",
        get(
            "/forest/books/3/relationships/tags.csv?timezone=UTC&fields[tags]=id,label\
             &header=id,label",
        ),
    )
    .await;
    f.snap(
        "csv_error_before_streaming",
        get("/forest/books.csv?fields[books]=id&header=id&filename=books.csv"),
    )
    .await;
}

/// 3. One trailing slash is ignored: `GET /forest/` is the healthcheck, as every route.
async fn trailing_slash(backend: Backend) {
    let f = fixture(backend).await;
    let anonymous = Request::get("/forest/").body(Body::empty()).unwrap();
    f.snap("healthcheck_trailing_slash", anonymous).await;
    f.snap(
        "count_trailing_slash",
        get("/forest/books/count/?timezone=UTC"),
    )
    .await;
}

/// 4. To-one relationships only for the relations in the projection; included records only
///    carry the to-one relations loaded under them (and their to-many links).
async fn relationships_of_the_projection(backend: Backend) {
    let f = fixture(backend).await;
    // The keys of book_tags are its foreign keys: they are attributes, not relationships.
    f.snap(
        "list_projection_without_relations",
        get(
            "/forest/book_tags?timezone=UTC&fields[book_tags]=book_id&sort=book_id,tag_id\
             &page[size]=2",
        ),
    )
    .await;
    // The included cover has a `book_id`, but its `book` relation was not loaded.
    f.snap(
        "get_included_without_nested_to_one",
        get("/forest/books/1?timezone=UTC&fields[books]=id,cover&fields[cover]=id,book_id"),
    )
    .await;
}

/// 5. An objective chart answers `{value}` alone, with or without an objective.
async fn objective_chart(backend: Backend) {
    let f = fixture(backend).await;
    f.snap_stats(
        "stats_objective_without_objective",
        request(
            "POST",
            "/forest/stats/books?timezone=UTC",
            Some(
                &json!({"type": "Objective", "sourceCollectionName": "books",
                "aggregator": "Count"}),
            ),
        ),
    )
    .await;
}

on_all_backends!(
    csv_headers,
    trailing_slash,
    relationships_of_the_projection,
    objective_chart,
);
