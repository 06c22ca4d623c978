//! JSON:API bodies of the write routes (`agent::body`: create, update, associate, update-to-one,
//! update-field) and the selection body of bulk deletes, dissociations and actions
//! (`agent::query_string::parse_selection`, then the filter it builds with the query string).
//!
//! Input: `<collection>\n<query string>\n<field>/<index>\n<JSON body>`; the body is parsed by
//! serde_json as the route's extractor does, and every parser runs on it.

#![no_main]

#[allow(dead_code, reason = "each target uses some of the shared helpers")]
mod common;

use canopy::agent::body::{
    parse_associate, parse_create, parse_update, parse_update_field, parse_update_to_one,
};
use canopy::agent::query_string::{QueryString, parse_page, parse_selection};
use common::{collection, expect_client_error, schema, split};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (lines, body) = split(data, 3);
    let collection = collection(&lines[0]);
    let schema = schema();
    let query = QueryString::parse(&lines[1]);
    let (field, index) = lines[2].split_once('/').unwrap_or((&lines[2], ""));
    let Ok(body) = serde_json::from_str::<serde_json::Value>(&body) else {
        return;
    };

    if let Some(plan) = expect_client_error(parse_create(&body, schema, collection)) {
        assert!(!plan.record.is_empty(), "an empty record was accepted");
    }
    if let Some(patch) = expect_client_error(parse_update(&body, collection)) {
        assert!(!patch.is_empty(), "an empty patch was accepted");
    }
    expect_client_error(parse_associate(&body, collection));
    expect_client_error(parse_update_to_one(&body, collection));
    expect_client_error(parse_update_field(&body, collection, field, index));
    if let Some(selection) = expect_client_error(parse_selection(&body, collection)) {
        expect_client_error(selection.ensure_not_empty());
        expect_client_error(selection.condition_tree(collection));
        expect_client_error(selection.filter(&query, schema, collection));
        expect_client_error(parse_page(&selection.params(&query)));
    }
});
