//! Whole responses (status, headers, body) of the wire details that issue 10 found different
//! from the Node agent, checked against insta snapshots on SQLite, PostgreSQL and MariaDB, over
//! the library fixture of `snapshots` (see there for the data and the redactions).
//!
//! One function per item of the issue; every other JSON snapshot also pins item 1 (the
//! `content-type` of JSON answers).

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

on_all_backends!(
    csv_headers,
);
