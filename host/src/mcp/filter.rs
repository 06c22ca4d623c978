//! The `filters` argument of `list` and `listRelated` (mcp.md §3.7): a condition tree of depth 3
//! written out without `$ref` (some clients cannot follow one), and its translation into the
//! agent's `filters` query parameter (operators in snake case, aggregators in lower case).

use serde_json::{Map, Value as Json, json};

/// The operators a model may name, in the Node server's order.
pub const OPERATORS: &[&str] = &[
    "Equal",
    "NotEqual",
    "LessThan",
    "GreaterThan",
    "LessThanOrEqual",
    "GreaterThanOrEqual",
    "Match",
    "NotContains",
    "NotIContains",
    "LongerThan",
    "ShorterThan",
    "IncludesAll",
    "IncludesNone",
    "Today",
    "Yesterday",
    "PreviousMonth",
    "PreviousQuarter",
    "PreviousWeek",
    "PreviousYear",
    "PreviousMonthToDate",
    "PreviousQuarterToDate",
    "PreviousWeekToDate",
    "PreviousXDaysToDate",
    "PreviousXDays",
    "PreviousYearToDate",
    "Present",
    "Blank",
    "Missing",
    "In",
    "NotIn",
    "StartsWith",
    "EndsWith",
    "Contains",
    "IStartsWith",
    "IEndsWith",
    "IContains",
    "Like",
    "ILike",
    "Before",
    "After",
    "AfterXHoursAgo",
    "BeforeXHoursAgo",
    "Future",
    "Past",
];

/// How deep branches nest in the schema.
const DEPTH: usize = 3;

fn leaf_schema() -> Json {
    json!({
        "type": "object",
        "properties": {
            "field": {
                "type": "string",
                "description": "A field of the collection, or of a to-one relation as \"relation:field\" (one level deep)"
            },
            "operator": {"type": "string", "enum": OPERATORS},
            "value": {"description": "The value to compare with; omitted for operators such as Present or Today"}
        },
        "required": ["field", "operator"]
    })
}

fn branch_schema(children: &Json) -> Json {
    json!({
        "type": "object",
        "properties": {
            "aggregator": {"type": "string", "enum": ["And", "Or"]},
            "conditions": {"type": "array", "items": children}
        },
        "required": ["aggregator", "conditions"]
    })
}

/// The JSON Schema of `filters`: a leaf, or a branch of nodes, three branches deep at most.
pub fn schema() -> Json {
    let mut node = leaf_schema();
    for _ in 0..DEPTH {
        node = json!({"anyOf": [leaf_schema(), branch_schema(&node)]});
    }
    let mut schema = node;
    if let Some(object) = schema.as_object_mut() {
        object.insert(
            "description".to_owned(),
            json!("A condition tree: {field, operator, value} or {aggregator: \"And\"|\"Or\", conditions: [...]}. Fields of a to-one relation are written \"relation:field\"."),
        );
    }
    schema
}

/// `IContains` → `i_contains`, `PreviousXDays` → `previous_x_days`.
pub fn snake_case(operator: &str) -> String {
    let mut out = String::with_capacity(operator.len() + 4);
    for (i, c) in operator.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Translates a model's condition tree into the agent's filter JSON; the message says what is
/// wrong and where, so a model can fix its call.
pub fn to_agent(tree: &Json) -> Result<Json, String> {
    to_agent_at(tree, "filters", 0)
}

fn to_agent_at(node: &Json, at: &str, depth: usize) -> Result<Json, String> {
    let Some(object) = node.as_object() else {
        return Err(format!("{at} must be an object"));
    };
    if let Some(aggregator) = object.get("aggregator") {
        if depth >= DEPTH {
            return Err(format!("{at} nests branches deeper than {DEPTH} levels"));
        }
        let aggregator = match aggregator.as_str() {
            Some(a) if a.eq_ignore_ascii_case("and") => "and",
            Some(a) if a.eq_ignore_ascii_case("or") => "or",
            _ => return Err(format!("{at}.aggregator must be \"And\" or \"Or\"")),
        };
        let Some(Json::Array(conditions)) = object.get("conditions") else {
            return Err(format!("{at}.conditions must be an array of conditions"));
        };
        let conditions = conditions
            .iter()
            .enumerate()
            .map(|(i, c)| to_agent_at(c, &format!("{at}.conditions[{i}]"), depth + 1))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(json!({"aggregator": aggregator, "conditions": conditions}));
    }
    let Some(field) = object.get("field").and_then(Json::as_str) else {
        return Err(format!(
            "{at} needs a \"field\" (or an \"aggregator\" and \"conditions\")"
        ));
    };
    let Some(operator) = object.get("operator").and_then(Json::as_str) else {
        return Err(format!("{at}.operator is required"));
    };
    let Some(known) = OPERATORS
        .iter()
        .find(|o| o.eq_ignore_ascii_case(operator) || snake_case(o) == operator)
    else {
        return Err(format!(
            "{at}.operator {operator:?} is not an operator; use one of {}",
            OPERATORS.join(", ")
        ));
    };
    let mut leaf = Map::new();
    leaf.insert("field".to_owned(), json!(field));
    leaf.insert("operator".to_owned(), json!(snake_case(known)));
    if let Some(value) = object.get("value") {
        leaf.insert("value".to_owned(), value.clone());
    }
    Ok(Json::Object(leaf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_become_the_agents_snake_case() {
        assert_eq!(snake_case("IContains"), "i_contains");
        assert_eq!(snake_case("PreviousXDaysToDate"), "previous_x_days_to_date");
        assert_eq!(snake_case("Equal"), "equal");
        assert_eq!(OPERATORS.len(), 44);
    }

    #[test]
    fn trees_translate_and_mistakes_are_located() {
        let tree = json!({"aggregator": "And", "conditions": [
            {"field": "status", "operator": "Equal", "value": "paid"},
            {"field": "customer:name", "operator": "IContains", "value": "ada"}
        ]});
        assert_eq!(
            to_agent(&tree).unwrap(),
            json!({"aggregator": "and", "conditions": [
                {"field": "status", "operator": "equal", "value": "paid"},
                {"field": "customer:name", "operator": "i_contains", "value": "ada"}
            ]})
        );
        let bad = json!({"aggregator": "And", "conditions": [{"field": "x", "operator": "Sorta"}]});
        assert!(
            to_agent(&bad)
                .unwrap_err()
                .starts_with("filters.conditions[0].operator \"Sorta\"")
        );
        assert!(to_agent(&json!([])).is_err());
        let deep = json!({"aggregator": "Or", "conditions": [{"aggregator": "Or", "conditions": [
            {"aggregator": "Or", "conditions": [{"aggregator": "Or", "conditions": []}]}]}]});
        assert!(to_agent(&deep).unwrap_err().contains("deeper"));
    }

    #[test]
    fn the_schema_has_no_ref_and_three_levels() {
        let text = schema().to_string();
        assert!(!text.contains("$ref"));
        assert_eq!(
            text.matches(r#""required":["aggregator","conditions"]"#)
                .count(),
            3
        );
    }
}
