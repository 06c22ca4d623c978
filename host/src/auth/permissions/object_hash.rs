//! The `object-hash` npm package (3.0.0, `puleos/object-hash`), as the agent calls it to hash
//! charts (`hash-chart.ts`): SHA-1 in hex over the package's serialization of a JSON value, with
//! `respectType: false` (no prototype keys), object keys sorted (`unorderedObjects`, the
//! default), arrays in order, and an `excludeKeys` predicate applied to the keys of every object
//! at any depth. The serialization, per value:
//!
//! - `null` → `Null`; booleans → `bool:true`; numbers → `number:` + JavaScript's
//!   `Number#toString`; strings → `string:<UTF-16 length>:<text>`;
//! - arrays → `array:<n>:` then each item;
//! - objects → `object:<n>:` (n = keys kept) then, per key, the key as a string, `:`, the value,
//!   `,`.

use serde_json::Value as Json;
use sha1::{Digest, Sha1};

/// `objectHash(value, {respectType: false, excludeKeys})` in hex.
pub fn object_hash(value: &Json, exclude: &dyn Fn(&str) -> bool) -> String {
    let mut hasher = Sha1::new();
    write(&mut hasher, value, exclude);
    hex::encode(hasher.finalize())
}

fn write(out: &mut Sha1, value: &Json, exclude: &dyn Fn(&str) -> bool) {
    match value {
        Json::Null => out.update(b"Null"),
        Json::Bool(b) => {
            out.update(b"bool:");
            out.update(if *b { &b"true"[..] } else { &b"false"[..] });
        }
        // JSON.parse reads every number as a double.
        Json::Number(n) => {
            out.update(b"number:");
            out.update(crate::agent::js::number(n.as_f64().unwrap_or(f64::NAN)).as_bytes());
        }
        Json::String(s) => string(out, s),
        Json::Array(items) => {
            out.update(format!("array:{}:", items.len()).as_bytes());
            for item in items {
                write(out, item, exclude);
            }
        }
        Json::Object(object) => {
            // `Object.keys(o).sort()`: JavaScript compares strings by UTF-16 code units.
            let mut keys: Vec<&String> = object.keys().filter(|k| !exclude(k)).collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.update(format!("object:{}:", keys.len()).as_bytes());
            for key in keys {
                string(out, key);
                out.update(b":");
                write(out, &object[key.as_str()], exclude);
                out.update(b",");
            }
        }
    }
}

/// `string:<length>:<text>`, the length in UTF-16 code units as JavaScript counts it.
fn string(out: &mut Sha1, s: &str) {
    out.update(format!("string:{}:", s.encode_utf16().count()).as_bytes());
    out.update(s.as_bytes());
}

/// The keys of a chart the agent hashes (`hash-chart.ts`); the others (`contextVariables`, …)
/// never change which chart it is.
const CHART_KEYS: [&str; 17] = [
    "type",
    "apiRoute",
    "smartRoute",
    "query",
    "connectionName",
    "labelFieldName",
    "filter",
    "sourceCollectionName",
    "aggregator",
    "aggregateFieldName",
    "groupByFieldName",
    "relationshipFieldName",
    "limit",
    "timeRange",
    "objective",
    "numeratorChartId",
    "denominatorChartId",
];

/// The hash of a chart definition or request (§5.5). As in the agent, the exclusion looks at the
/// *chart's* own value of a key, at every depth: inside `filter`, a key is kept only when it is
/// one of the chart keys and the chart itself has a non-null value for it (so a condition
/// tree's `field`, `operator` and `value` never count, and its `aggregator` counts when the
/// chart has an aggregator). Faithful, so that hashes match the Forest server's.
pub fn chart_hash(chart: &Json) -> String {
    let exclude =
        |key: &str| chart.get(key).is_none_or(Json::is_null) || !CHART_KEYS.contains(&key);
    object_hash(chart, &exclude)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values produced by the real package: `npm install object-hash@3.0.0` in a scratch
    /// folder, then for each chart `hashObject(chart, {respectType: false, excludeKeys: key =>
    /// chart[key] === null || chart[key] === undefined || !knownChartKeys.includes(key)})`, the
    /// agent's `hash-chart.ts` verbatim, run with Node 20.
    #[test]
    fn chart_hashes_are_those_of_the_object_hash_package() {
        let cases = [
            (
                r#"{"type":"Value","sourceCollectionName":"orders","aggregator":"Count"}"#,
                "0031ce2ad24e4c391422e12f2eeb0b6f13ec46aa",
            ),
            // Null and unknown keys are left out: the same hash as the chart above.
            (
                r#"{"type":"Value","sourceCollectionName":"orders","aggregator":"Count","aggregateFieldName":null,"filter":null,"contextVariables":{"a":1}}"#,
                "0031ce2ad24e4c391422e12f2eeb0b6f13ec46aa",
            ),
            (
                r#"{"type":"Value","sourceCollectionName":"orders","aggregator":"Sum","aggregateFieldName":"amount","filter":{"field":"status","operator":"equal","value":"paid"}}"#,
                "ff402262f9830cacd21829c5e0c1a592365e1b81",
            ),
            (
                r#"{"type":"Pie","sourceCollectionName":"orders","aggregator":"Count","groupByFieldName":"status","filter":{"aggregator":"and","conditions":[{"field":"status","operator":"equal","value":"paid"},{"field":"amount","operator":"greater_than","value":3}]}}"#,
                "ad2a4fbf611af049f17b3179ecffd90ca34a69d0",
            ),
            (
                r#"{"type":"Leaderboard","sourceCollectionName":"customers","aggregator":"Count","labelFieldName":"name","relationshipFieldName":"orders","limit":10}"#,
                "5bb32e002c75a5019db9db9d5faffb8502e5c6d5",
            ),
            (
                r#"{"type":"Line","sourceCollectionName":"orders","aggregator":"Count","groupByFieldName":"placed_at","timeRange":"Week","filter":null}"#,
                "993cf0f4e98e1babe835cc3834240805efe5fa0e",
            ),
            (
                r#"{"type":"Objective","sourceCollectionName":"orders","aggregator":"Sum","aggregateFieldName":"amount","objective":1250.5}"#,
                "b6d76165770cf0695cf7fa6d8e2d21d5302a67db",
            ),
            (
                r#"{"type":"Value","sourceCollectionName":"commandes","aggregator":"Count","filter":{"field":"note","operator":"contains","value":"café 🌳"}}"#,
                "fcbace5e6b8c697c2959220806dd2c8a6fd9bc7b",
            ),
            (
                r#"{"type":"Value","query":"SELECT COUNT(*) AS value FROM orders","connectionName":"main","contextVariables":{"x":"y"}}"#,
                "a4d80c520f9ee0c7385ab65222b3503c1b8f039f",
            ),
            (
                r#"{"type":"Value","sourceCollectionName":"orders","aggregator":"Count","filter":"{\"field\":\"status\",\"operator\":\"equal\",\"value\":\"paid\"}"}"#,
                "985be0956410b8ffe8d80e98ad097e4f3228ab64",
            ),
            (
                r#"{"type":"Pie","sourceCollectionName":"orders","groupByFieldName":"status","filter":{"aggregator":"or","conditions":[]}}"#,
                "57897a0e1d1daaec63da30f5a8603bc93e2862b6",
            ),
            (
                r#"{"type":"Leaderboard","sourceCollectionName":"customers","aggregator":"Count","labelFieldName":"name","relationshipFieldName":"orders","limit":1e21,"objective":[1,true,null,"x",0.1]}"#,
                "0daee4f547f92e92eb83951c65abaa148794edc7",
            ),
            // Lengths in UTF-16 code units (the tree is 2 units).
            (
                r#"{"type":"Value","sourceCollectionName":"cafés🌳","aggregator":"Count"}"#,
                "5c8e0423eb66952ed60465fe0943036b3007e2d0",
            ),
            // Nested keys are judged by the chart's own values: `limit` is dropped inside the
            // filter because the chart has none, `type` and `aggregator` are kept.
            (
                r#"{"type":"Value","sourceCollectionName":"orders","aggregator":"Count","filter":{"type":"x","limit":2,"aggregator":"and","conditions":[{"type":"y"}]}}"#,
                "33f879afc13d0d1ddef206246509d99131b00842",
            ),
        ];
        for (chart, expected) in cases {
            let chart: Json = serde_json::from_str(chart).unwrap();
            assert_eq!(chart_hash(&chart), expected, "{chart}");
        }
    }
}
