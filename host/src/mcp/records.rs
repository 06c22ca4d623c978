//! What the tools write back: records of a JSON:API document flattened as the tools answer
//! them, and the escaping of a URL path segment (upload URLs).

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::Value as Json;

/// What a path segment must escape (RFC 3986 `pchar` minus what routers treat specially).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'|')
    .add(b'\\')
    .add(b'^')
    .add(b'[')
    .add(b']');

/// A path segment, escaped.
pub fn segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// Records of a JSON:API document, flattened: each resource's attributes, its `id` when the
/// attributes do not hold one, and its to-one relations' included records nested by name.
pub fn records(document: &Json) -> Vec<Json> {
    let included = document
        .get("included")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    match document.get("data") {
        Some(Json::Array(items)) => items.iter().map(|r| record(r, included)).collect(),
        Some(item @ Json::Object(_)) => vec![record(item, included)],
        _ => Vec::new(),
    }
}

fn record(resource: &Json, included: &[Json]) -> Json {
    let mut out = resource
        .get("attributes")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(id) = resource.get("id")
        && !out.contains_key("id")
    {
        out.insert("id".to_owned(), id.clone());
    }
    if let Some(relationships) = resource.get("relationships").and_then(Json::as_object) {
        for (name, relation) in relationships {
            let Some(data) = relation.get("data") else {
                continue;
            };
            let value = match data {
                Json::Object(link) => included
                    .iter()
                    .find(|i| i.get("type") == link.get("type") && i.get("id") == link.get("id"))
                    .map_or_else(
                        || serde_json::json!({"id": link.get("id")}),
                        |i| record(&serde_json::json!({"id": i.get("id"), "attributes": i.get("attributes")}), &[]),
                    ),
                Json::Null => Json::Null,
                // To-many links carry no data worth showing (listRelated reads them).
                _ => continue,
            };
            out.insert(name.clone(), value);
        }
    }
    Json::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_api_documents_flatten_with_their_included_to_one_records() {
        let document = json!({
            "data": [{"type": "orders", "id": "1", "attributes": {"total": 5},
                      "relationships": {"customer": {"data": {"type": "customers", "id": "9"}},
                                        "items": {"links": {"related": {"href": "/x"}}}}}],
            "included": [{"type": "customers", "id": "9", "attributes": {"name": "Ada"}}]
        });
        assert_eq!(
            records(&document),
            vec![json!({"total": 5, "id": "1", "customer": {"name": "Ada", "id": "9"}})]
        );
        assert_eq!(segment("1|2 x/y"), "1%7C2%20x%2Fy");
    }
}
