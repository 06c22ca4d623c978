//! The query string of the data routes (`agent::query_string`): timezone, projections (with the
//! `Forest-Projection` header), page, sort, search, segments, live-query segments, CSV options
//! and `filters`, whose condition tree is parsed, cast and validated against the collection.
//!
//! Input: `<collection>\n<raw query string>\n<Forest-Projection header>`; the header line may be
//! absent. Every parser runs on every input, as a list request reads them all.

#![no_main]

#[allow(dead_code, reason = "each target uses some of the shared helpers")]
mod common;

use canopy::agent::query_string::{
    Params, QueryString, parse_csv_params, parse_delete_flag, parse_filter,
    parse_live_query_segment, parse_page, parse_paginated_filter, parse_projection,
    parse_requested_projection, parse_search, parse_search_extended, parse_segment, parse_sort,
    parse_timezone,
};
use common::{collection, expect_client_error, schema, split};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (lines, header) = split(data, 2);
    let collection = collection(&lines[0]);
    let schema = schema();
    let query = QueryString::parse(&lines[1]);
    let header = (!header.is_empty()).then_some(header.as_str());
    let params = Params::new(&query);

    expect_client_error(parse_timezone(&query));
    expect_client_error(parse_requested_projection(
        &query, header, schema, collection,
    ));
    if let Some(projection) =
        expect_client_error(parse_projection(&query, header, schema, collection))
    {
        // The keys added for ids are resolvable paths too, or the list would fail in SQL.
        for path in projection.iter() {
            assert!(
                schema.resolve_column(collection, path).is_ok(),
                "unresolvable path {path:?} in an accepted projection"
            );
        }
    }
    expect_client_error(parse_page(&params));
    expect_client_error(parse_sort(&params, schema, collection));
    expect_client_error(parse_search(&params, collection));
    expect_client_error(parse_segment(&params, collection));
    expect_client_error(parse_live_query_segment(&params));
    expect_client_error(parse_filter(&params, schema, collection));
    expect_client_error(parse_paginated_filter(&params, schema, collection));
    let _ = (
        parse_search_extended(&params),
        parse_csv_params(&query),
        parse_delete_flag(&query),
    );
});
