//! Whole responses (status, headers, body) of the wire details that issue 10 found different
//! from the Node agent, checked against insta snapshots on SQLite, PostgreSQL and MariaDB, over
//! the library fixture of `snapshots` (see there for the data and the redactions).
//!
//! One function per item of the issue; every other JSON snapshot also pins item 1 (the
//! `content-type` of JSON answers).

use axum::body::Body;
use axum::http::Request;
use canopy_e2e::{Backend, on_all_backends};

use crate::snapshots::{fixture, get};

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

on_all_backends!(
    csv_headers,
    trailing_slash,
);
