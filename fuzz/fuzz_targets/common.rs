//! What the fuzz targets share (each includes this file as `mod common`; a library crate would
//! be built, with libFuzzer's C++, by `cargo test --workspace --doc`): the schema they parse against, the check that every refusal is
//! the client's fault, and the text layout of their inputs.
//!
//! Inputs are text, not `arbitrary` bytes, so that the seed corpus is written by hand from the
//! tests' own inputs and read as such, and libFuzzer's dictionaries (`fuzz/*.dict`) splice
//! whole keys and operators into them: a target reads its first lines as the request's small
//! parts (a collection name, a query string) and the rest as its body.

use std::sync::LazyLock;

use canopy::agent;
use canopy::datasource::{CollectionSchema, DataSourceSchema};
use canopy::http::error::ApiError;

static SCHEMA: LazyLock<DataSourceSchema> = LazyLock::new(canopy::fuzzing::schema);

/// The schema of `canopy::fuzzing::schema`, built once per process.
pub fn schema() -> &'static DataSourceSchema {
    &SCHEMA
}

/// The collection a target's input names, or `books` (the richest) when it names none: an
/// unknown name is the router's 404, before any parser runs.
pub fn collection(name: &str) -> &'static CollectionSchema {
    let schema = schema();
    schema
        .collections
        .get(name.trim())
        .or_else(|| schema.collections.get("books"))
        .unwrap_or_else(|| unreachable!("the fuzzing schema has books"))
}

/// Panics (a finding) unless `result` is a success or a refusal the route answers with a 4xx:
/// malformed input is the client's fault, never a 500.
pub fn expect_client_error<T>(result: Result<T, agent::Error>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(error) => {
            let shown = format!("{error:?}");
            let (status, _, _) = ApiError::Agent(error).public_parts();
            assert!(status.is_client_error(), "{status} for bad input: {shown}");
            None
        }
    }
}

/// An input as text (invalid UTF-8 replaced, as a lenient HTTP layer would) split into `n` lines
/// and the rest: `split(b"a\nb\nrest\nmore", 2)` is `(["a", "b"], "rest\nmore")`. Missing lines
/// are empty.
pub fn split(data: &[u8], n: usize) -> (Vec<String>, String) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(n + 1, '\n');
    let lines = (0..n)
        .map(|_| parts.next().unwrap_or("").trim_end_matches('\r').to_owned())
        .collect();
    (lines, parts.next().unwrap_or("").to_owned())
}
