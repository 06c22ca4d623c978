//! The `filters` argument of the MCP `list` and `listRelated` tools (`mcp::filter`): a model's
//! condition tree translated into the agent's `filters` parameter, which is then parsed and
//! validated against the collection as the agent route would (`agent::query_string`).
//!
//! Input: `<collection>\n<the tool's filters argument as JSON>`.

#![no_main]

#[allow(dead_code, reason = "each target uses some of the shared helpers")]
mod common;

use canopy::agent::query_string::{Params, QueryString, parse_condition_tree};
use canopy::mcp::filter::to_agent;
use common::{collection, expect_client_error, schema, split};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (lines, tree) = split(data, 1);
    let collection = collection(&lines[0]);
    let Ok(tree) = serde_json::from_str::<serde_json::Value>(&tree) else {
        return;
    };
    let Ok(filters) = to_agent(&tree) else {
        return;
    };
    // As the tool hands it to the route: the JSON text in the query string.
    let query = QueryString::from_pairs([("filters", filters.to_string())]);
    expect_client_error(parse_condition_tree(
        &Params::new(&query),
        schema(),
        collection,
    ));
});
