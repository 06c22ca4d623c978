//! Nested values: `@@@` names, reading a leaf of a JSON object, rebuilding nested objects from
//! flattened keys, deep merge, and the grouping of records by the value an update gives them.
//! Pure functions over `serde_json` values, tested on the host target.

use canopy_sdk::{Value, json};
use serde_json::Map;

/// The separator of generated names (`address@@@city`): what the agent's clients split on.
pub const SEP: &str = "@@@";

/// An `include`/`exclude` entry (`sub:subsub` or `sub.subsub`) as a generated name.
pub fn include_to_path(column: &str, include: &str) -> String {
    format!("{column}{SEP}{}", include.replace([':', '.'], SEP))
}

/// The leaf under `parts` of a column's value, `Null` when any step is missing or not an object.
/// A string cell holding a JSON object (a database that stores JSON as text) is read as that
/// object.
pub fn leaf(cell: &Value, parts: &[String]) -> Value {
    let parsed;
    let mut current = cell;
    if cell.is_string() {
        parsed = object_cell(cell.clone());
        current = &parsed;
    }
    for part in parts {
        match current.get(part.as_str()) {
            Some(v) => current = v,
            None => return Value::Null,
        }
    }
    current.clone()
}

/// A column cell as an object when it holds one: a string cell holding a JSON object (a database
/// that stores JSON as text) is parsed; anything else is returned as it is.
pub fn object_cell(cell: Value) -> Value {
    match &cell {
        Value::String(text) if text.trim_start().starts_with('{') => {
            serde_json::from_str::<Value>(text).unwrap_or(cell)
        }
        _ => cell,
    }
}

/// Moves every key of `paths` present in `record` (`address@@@city`) into its nested object
/// (`address: {city}`), creating the objects on the way. A present `null` is moved too (it clears
/// that leaf); an absent key is left alone. Returns whether any key was moved.
pub fn unflatten_in_place(paths: &[String], record: &mut Map<String, Value>) -> bool {
    let mut moved = false;
    'paths: for path in paths {
        let Some(value) = record.remove(path) else {
            continue;
        };
        moved = true;
        let parts: Vec<&str> = path.split(SEP).collect();
        let Some((last, parents)) = parts.split_last() else {
            continue;
        };
        let mut current = &mut *record;
        for part in parents {
            let slot = current
                .entry((*part).to_owned())
                .or_insert_with(|| json!({}));
            // A null (or scalar) column gets an object: writing `address@@@city` on a record whose
            // address is null creates the address.
            if !slot.is_object() {
                *slot = json!({});
            }
            let Some(next) = slot.as_object_mut() else {
                continue 'paths;
            };
            current = next;
        }
        current.insert((*last).to_owned(), value);
    }
    moved
}

/// `base` updated with `patch`, recursively: objects of the patch are merged key by key into the
/// base's objects, any other patch value replaces the base's.
pub fn deep_merge(base: &Value, patch: &Value) -> Value {
    let Value::Object(patch) = patch else {
        return patch.clone();
    };
    let mut merged = match base {
        Value::Object(b) => b.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch {
        let next = match (merged.get(key), value) {
            (Some(old), Value::Object(_)) => deep_merge(old, value),
            (None, Value::Object(_)) => deep_merge(&Value::Null, value),
            _ => value.clone(),
        };
        merged.insert(key.clone(), next);
    }
    Value::Object(merged)
}

/// A text equal for equal JSON values whatever their key order: the grouping key of merged values.
pub fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// Numbers cross the plugin boundary as `f64`: an integral one goes back as an integer so that a
/// filter on an integer key binds an integer.
pub fn integral(value: Value) -> Value {
    match value.as_f64() {
        Some(f) if value.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
        _ => value,
    }
}

/// Records that get the same value of the column after the update, and that value.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The column's merged value for these records.
    pub value: Value,
    /// The primary key values of each record, in the order of the keys.
    pub keys: Vec<Vec<Value>>,
}

/// Groups records (`(primary key values, current column value)`) by the value `patch` gives them
/// once deep-merged into their current value; groups keep the order of their first record.
pub fn group_by_merged(records: Vec<(Vec<Value>, Value)>, patch: &Value) -> Vec<Group> {
    let mut groups: Vec<(String, Group)> = Vec::new();
    for (keys, current) in records {
        let value = deep_merge(&current, patch);
        let key = canonical(&value);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.keys.push(keys),
            None => groups.push((
                key,
                Group {
                    value,
                    keys: vec![keys],
                },
            )),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// A condition tree matching exactly these records by primary key (`In` on a single key, an `Or`
/// of `And`s of `Equal` on a composite one).
pub fn match_records(primary_keys: &[String], records: &[Vec<Value>]) -> Value {
    if let [pk] = primary_keys {
        let values: Vec<Value> = records
            .iter()
            .filter_map(|r| r.first().cloned())
            .map(integral)
            .collect();
        return json!({"field": pk, "operator": "In", "value": values});
    }
    let conditions: Vec<Value> = records
        .iter()
        .map(|r| {
            let equals: Vec<Value> = primary_keys
                .iter()
                .zip(r)
                .map(|(pk, v)| json!({"field": pk, "operator": "Equal", "value": integral(v.clone())}))
                .collect();
            json!({"aggregator": "And", "conditions": equals})
        })
        .collect();
    json!({"aggregator": "Or", "conditions": conditions})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn include_entries_become_names_with_either_separator() {
        assert_eq!(include_to_path("address", "city"), "address@@@city");
        assert_eq!(include_to_path("address", "geo:lat"), "address@@@geo@@@lat");
        assert_eq!(include_to_path("address", "geo.lat"), "address@@@geo@@@lat");
    }

    #[test]
    fn a_leaf_is_read_through_objects_and_is_null_when_missing() {
        let cell = json!({"city": "Paris", "geo": {"lat": 48.8}});
        assert_eq!(leaf(&cell, &paths(&["city"])), json!("Paris"));
        assert_eq!(leaf(&cell, &paths(&["geo", "lat"])), json!(48.8));
        assert_eq!(leaf(&cell, &paths(&["geo"])), json!({"lat": 48.8}));
        assert_eq!(leaf(&cell, &paths(&["zip"])), Value::Null);
        assert_eq!(leaf(&cell, &paths(&["city", "x"])), Value::Null);
        assert_eq!(leaf(&Value::Null, &paths(&["city"])), Value::Null);
        // JSON stored as text is read as the object it holds.
        assert_eq!(
            leaf(&json!("{\"city\": \"Lyon\"}"), &paths(&["city"])),
            json!("Lyon")
        );
    }

    #[test]
    fn flattened_keys_are_rebuilt_into_nested_objects_and_removed() {
        let mut record = json!({
            "id": 1,
            "address@@@city": "Paris",
            "address@@@geo@@@lat": 1.5,
            "address@@@zip": null,
        });
        let known = paths(&[
            "address@@@city",
            "address@@@geo@@@lat",
            "address@@@zip",
            "address@@@street",
        ]);
        let map = record.as_object_mut().unwrap();
        assert!(unflatten_in_place(&known, map));
        assert_eq!(
            record,
            json!({"id": 1, "address": {"city": "Paris", "geo": {"lat": 1.5}, "zip": null}})
        );
        let mut untouched = json!({"id": 2});
        assert!(!unflatten_in_place(
            &known,
            untouched.as_object_mut().unwrap()
        ));
        assert_eq!(untouched, json!({"id": 2}));
    }

    #[test]
    fn flattened_keys_go_into_an_object_given_beside_them_and_replace_a_null_one() {
        let known = paths(&["address@@@city"]);
        let mut both = json!({"address": {"zip": "1"}, "address@@@city": "Paris"});
        unflatten_in_place(&known, both.as_object_mut().unwrap());
        assert_eq!(both, json!({"address": {"zip": "1", "city": "Paris"}}));
        let mut null = json!({"address": null, "address@@@city": "Paris"});
        unflatten_in_place(&known, null.as_object_mut().unwrap());
        assert_eq!(null, json!({"address": {"city": "Paris"}}));
    }

    #[test]
    fn deep_merge_keeps_untouched_keys_and_replaces_leaves() {
        let base = json!({"street": "1 Main", "city": "Paris", "geo": {"lat": 1, "lng": 2}});
        let patch = json!({"city": "Lyon", "geo": {"lat": 3}});
        assert_eq!(
            deep_merge(&base, &patch),
            json!({"street": "1 Main", "city": "Lyon", "geo": {"lat": 3, "lng": 2}})
        );
        assert_eq!(
            deep_merge(&Value::Null, &patch),
            json!({"city": "Lyon", "geo": {"lat": 3}})
        );
        assert_eq!(deep_merge(&base, &json!("x")), json!("x"));
        // A scalar where the patch has an object becomes that object.
        assert_eq!(
            deep_merge(&json!({"geo": 5}), &json!({"geo": {"lat": 1}})),
            json!({"geo": {"lat": 1}})
        );
    }

    #[test]
    fn records_are_grouped_by_their_merged_value_whatever_the_key_order() {
        let patch = json!({"city": "Lyon"});
        let records = vec![
            (vec![json!(1.0)], json!({"street": "a", "city": "Paris"})),
            (vec![json!(2.0)], json!({"street": "b", "city": "Paris"})),
            (vec![json!(3.0)], json!({"city": "Berlin", "street": "a"})),
            (vec![json!(4.0)], Value::Null),
        ];
        let groups = group_by_merged(records, &patch);
        assert_eq!(groups.len(), 3, "{groups:?}");
        assert_eq!(groups[0].value, json!({"street": "a", "city": "Lyon"}));
        assert_eq!(groups[0].keys, vec![vec![json!(1.0)], vec![json!(3.0)]]);
        assert_eq!(groups[1].keys, vec![vec![json!(2.0)]]);
        assert_eq!(groups[2].value, json!({"city": "Lyon"}));
        assert!(group_by_merged(Vec::new(), &patch).is_empty());
    }

    #[test]
    fn records_are_matched_by_in_on_one_key_and_an_or_of_ands_on_several() {
        let one = match_records(&paths(&["id"]), &[vec![json!(1.0)], vec![json!(2.5)]]);
        assert_eq!(
            one,
            json!({"field": "id", "operator": "In", "value": [1, 2.5]})
        );
        assert_eq!(one["value"][0].to_string(), "1");
        let two = match_records(
            &paths(&["order_id", "product_id"]),
            &[vec![json!(1.0), json!("x")]],
        );
        assert_eq!(
            two,
            json!({"aggregator": "Or", "conditions": [{"aggregator": "And", "conditions": [
                {"field": "order_id", "operator": "Equal", "value": 1},
                {"field": "product_id", "operator": "Equal", "value": "x"},
            ]}]})
        );
    }
}
