//! Condition trees: leaves and `And`/`Or` branches, their plain JSON form, and validation of a
//! tree against a collection's schema (field paths, operators allowed per type, value types).

use serde_json::{Map, Value as Json};

use super::operator::{Operator, ValueKind};
use crate::datasource::error::{Error, Result};
use crate::datasource::record::Value;
use crate::datasource::schema::{
    CollectionSchema, ColumnSchema, ColumnType, DataSourceSchema, PrimitiveType,
};

/// How a branch combines its conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregator {
    And,
    Or,
}

/// A leaf: `field operator value`. `field` may be a `:` path through to-one relations.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    pub field: String,
    pub operator: Operator,
    /// `Null` for operators without a value; `Array` for list operators.
    pub value: Value,
}

/// A condition tree.
#[derive(Debug, Clone, PartialEq)]
pub enum ConditionTree {
    Leaf(Leaf),
    Branch {
        aggregator: Aggregator,
        conditions: Vec<ConditionTree>,
    },
}

impl ConditionTree {
    pub fn leaf(field: impl Into<String>, operator: Operator, value: impl Into<Value>) -> Self {
        Self::Leaf(Leaf {
            field: field.into(),
            operator,
            value: value.into(),
        })
    }

    pub fn and(conditions: Vec<ConditionTree>) -> Self {
        Self::Branch {
            aggregator: Aggregator::And,
            conditions,
        }
    }

    pub fn or(conditions: Vec<ConditionTree>) -> Self {
        Self::Branch {
            aggregator: Aggregator::Or,
            conditions,
        }
    }

    /// AND of several optional trees, flattening nested ANDs and dropping absent ones.
    pub fn intersect(trees: impl IntoIterator<Item = Option<ConditionTree>>) -> Option<Self> {
        Self::combine(Aggregator::And, trees)
    }

    /// OR of several optional trees, flattening nested ORs and dropping absent ones.
    pub fn union(trees: impl IntoIterator<Item = Option<ConditionTree>>) -> Option<Self> {
        Self::combine(Aggregator::Or, trees)
    }

    fn combine(
        aggregator: Aggregator,
        trees: impl IntoIterator<Item = Option<ConditionTree>>,
    ) -> Option<Self> {
        let mut conditions = Vec::new();
        for tree in trees.into_iter().flatten() {
            match tree {
                Self::Branch {
                    aggregator: a,
                    conditions: inner,
                } if a == aggregator => conditions.extend(inner),
                other => conditions.push(other),
            }
        }
        match conditions.len() {
            0 => None,
            1 => conditions.pop(),
            _ => Some(Self::Branch {
                aggregator,
                conditions,
            }),
        }
    }

    /// Every leaf of the tree, depth first.
    pub fn leaves(&self) -> Vec<&Leaf> {
        let mut out = Vec::new();
        self.visit(&mut |leaf| out.push(leaf));
        out
    }

    fn visit<'a>(&'a self, f: &mut impl FnMut(&'a Leaf)) {
        match self {
            Self::Leaf(leaf) => f(leaf),
            Self::Branch { conditions, .. } => conditions.iter().for_each(|c| c.visit(f)),
        }
    }

    /// Rebuilds the tree with each leaf replaced by a subtree; branches are kept.
    pub fn replace_leaves(
        &self,
        f: &mut impl FnMut(&Leaf) -> Result<ConditionTree>,
    ) -> Result<Self> {
        Ok(match self {
            Self::Leaf(leaf) => f(leaf)?,
            Self::Branch {
                aggregator,
                conditions,
            } => Self::Branch {
                aggregator: *aggregator,
                conditions: conditions
                    .iter()
                    .map(|c| c.replace_leaves(f))
                    .collect::<Result<_>>()?,
            },
        })
    }

    /// The plain JSON form: `{field, operator, value}` or `{aggregator, conditions}`, PascalCase.
    pub fn to_json(&self) -> Json {
        match self {
            Self::Leaf(leaf) => {
                let mut map = Map::new();
                map.insert("field".into(), Json::String(leaf.field.clone()));
                map.insert(
                    "operator".into(),
                    Json::String(leaf.operator.as_str().into()),
                );
                map.insert(
                    "value".into(),
                    serde_json::to_value(&leaf.value).unwrap_or(Json::Null),
                );
                Json::Object(map)
            }
            Self::Branch {
                aggregator,
                conditions,
            } => {
                let mut map = Map::new();
                let name = match aggregator {
                    Aggregator::And => "And",
                    Aggregator::Or => "Or",
                };
                map.insert("aggregator".into(), Json::String(name.into()));
                map.insert(
                    "conditions".into(),
                    Json::Array(conditions.iter().map(Self::to_json).collect()),
                );
                Json::Object(map)
            }
        }
    }

    /// Parses the plain JSON form against a collection: operators in snake_case or PascalCase,
    /// aggregators in any case, single-condition branches collapsed, values cast to the column
    /// type as the agent's parser does, then the whole tree validated.
    pub fn parse(
        json: &Json,
        collection: &CollectionSchema,
        schema: &DataSourceSchema,
    ) -> Result<Self> {
        let tree = Self::parse_node(json, collection, schema)?;
        tree.validate(collection, schema)?;
        Ok(tree)
    }

    fn parse_node(
        json: &Json,
        collection: &CollectionSchema,
        schema: &DataSourceSchema,
    ) -> Result<Self> {
        let object = json
            .as_object()
            .ok_or_else(|| Error::validation("Invalid condition tree: expected an object"))?;
        if let Some(aggregator) = object.get("aggregator") {
            let aggregator = match aggregator.as_str().map(str::to_ascii_lowercase).as_deref() {
                Some("and") => Aggregator::And,
                Some("or") => Aggregator::Or,
                _ => {
                    return Err(Error::validation(format!(
                        "Invalid condition tree: unknown aggregator {aggregator}"
                    )));
                }
            };
            let conditions = object
                .get("conditions")
                .and_then(Json::as_array)
                .ok_or_else(|| {
                    Error::validation("Invalid condition tree: 'conditions' must be an array")
                })?;
            let mut parsed = conditions
                .iter()
                .map(|c| Self::parse_node(c, collection, schema))
                .collect::<Result<Vec<_>>>()?;
            return Ok(if parsed.len() == 1 {
                parsed.remove(0)
            } else {
                Self::Branch {
                    aggregator,
                    conditions: parsed,
                }
            });
        }
        let field = object.get("field").and_then(Json::as_str).ok_or_else(|| {
            Error::validation("Invalid condition tree: a leaf needs a 'field' string")
        })?;
        // The field first, then the operator, in the agent's order.
        let (_, column) = schema.resolve_column(collection, field)?;
        let operator = object
            .get("operator")
            .and_then(Json::as_str)
            .ok_or_else(|| {
                Error::validation("Invalid condition tree: a leaf needs an 'operator' string")
            })?;
        // An operator that does not exist is, for the agent, one the column does not support.
        let operator: Operator = operator
            .parse()
            .map_err(|_| not_supported(&js_pascal_case(operator), field, column))?;
        let raw = object.get("value").unwrap_or(&Json::Null);
        let value = cast_value(field, operator, &column.column_type, raw)?;
        Ok(Self::leaf(field, operator, value))
    }

    /// Checks every leaf: the field path exists, the operator is allowed for the column type and
    /// advertised by the column, and the value has the type the operator expects.
    pub fn validate(&self, collection: &CollectionSchema, schema: &DataSourceSchema) -> Result<()> {
        for leaf in self.leaves() {
            let (_, column) = schema.resolve_column(collection, &leaf.field)?;
            validate_leaf(leaf, column)?;
        }
        Ok(())
    }
}

/// Validates one leaf against the column it targets.
pub fn validate_leaf(leaf: &Leaf, column: &ColumnSchema) -> Result<()> {
    let op = leaf.operator;
    // The agent's checks, in its order and wording (operators in PascalCase, lists in its order).
    if !column.filter_operators.contains(&op) {
        return Err(not_supported(op.as_str(), &leaf.field, column));
    }
    if !op.allowed_for(&column.column_type) {
        let allowed: Vec<Operator> = Operator::ALL
            .iter()
            .copied()
            .filter(|o| o.allowed_for(&column.column_type))
            .collect();
        return Err(Error::validation(format!(
            "The given operator '{op}' is not allowed with the columnType schema: '{}'.\n\
             The allowed types are: [{}]",
            column_type_name(&column.column_type),
            operator_list(&allowed)
        )));
    }
    let wrong = || {
        Error::validation(format!(
            "Wrong type for \"{}\": {}. Expects {}",
            leaf.field,
            leaf.value,
            expected_description(op, &column.column_type)
        ))
    };
    match op.value_kind() {
        ValueKind::None => {}
        ValueKind::Number => {
            if !matches!(
                leaf.value,
                Value::Int(_) | Value::Float(_) | Value::Decimal(_)
            ) {
                return Err(wrong());
            }
        }
        ValueKind::Pattern => {
            if !matches!(leaf.value, Value::String(_)) {
                return Err(wrong());
            }
        }
        ValueKind::List => {
            let Value::Array(items) = &leaf.value else {
                return Err(wrong());
            };
            let element = element_type(&column.column_type);
            for item in items {
                if !item.is_null() && !element.accepts(item) {
                    return Err(wrong());
                }
                column.check_enum_value(item)?;
            }
        }
        ValueKind::Single => {
            if !leaf.value.is_null() && !column.column_type.accepts(&leaf.value) {
                return Err(wrong());
            }
            column.check_enum_value(&leaf.value)?;
        }
    }
    Ok(())
}

fn element_type(ty: &ColumnType) -> &ColumnType {
    match ty {
        ColumnType::Array(inner) => inner,
        other => other,
    }
}

/// The agent's error for an operator the column does not list (or that does not exist).
fn not_supported(operator: &str, field: &str, column: &ColumnSchema) -> Error {
    let allowed = if column.filter_operators.is_empty() {
        "the column is not filterable".to_owned()
    } else {
        format!(
            "The allowed types are: [{}]",
            operator_list(&column.filter_operators)
        )
    };
    Error::validation(format!(
        "The given operator '{operator}' is not supported by the column: '{field}'.\n{allowed}"
    ))
}

/// Operators as the agent prints a set of them: PascalCase, in its order, comma-separated.
fn operator_list<'a>(operators: impl IntoIterator<Item = &'a Operator>) -> String {
    Operator::in_agent_order(operators)
        .iter()
        .map(|op| op.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// The agent's `toPascalCase`: the first character upper-cased, and each `_` followed by a
/// lower-case letter replaced by that letter upper-cased (`not_in` → `NotIn`).
fn js_pascal_case(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    if let Some(first) = chars.next() {
        out.extend(first.to_uppercase());
    }
    while let Some(c) = chars.next() {
        match chars.peek() {
            Some(next) if c == '_' && next.is_ascii_lowercase() => {
                out.push(next.to_ascii_uppercase());
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

fn column_type_name(ty: &ColumnType) -> String {
    match ty {
        ColumnType::Primitive(p) => p.to_string(),
        other => other.to_json().to_string(),
    }
}

fn expected_description(op: Operator, ty: &ColumnType) -> String {
    match op.value_kind() {
        ValueKind::Number => "Number".into(),
        ValueKind::Pattern => "String".into(),
        ValueKind::List => format!("ArrayOf{}", column_type_name(element_type(ty))),
        _ => column_type_name(ty),
    }
}

/// Casts a JSON value for a leaf, as `ConditionTreeParser.castToType` does, then types it.
fn cast_value(field: &str, operator: Operator, ty: &ColumnType, raw: &Json) -> Result<Value> {
    let wrong = || {
        Error::validation(format!(
            "Wrong type for \"{field}\": {raw}. Expects {}",
            expected_description(operator, ty)
        ))
    };
    match operator.value_kind() {
        ValueKind::None => Ok(Value::Null),
        ValueKind::Number => match raw {
            Json::Number(_) | Json::String(_) => Value::from_json_typed(raw, PrimitiveType::Number)
                .filter(|v| !v.is_null())
                .ok_or_else(wrong),
            _ => Err(wrong()),
        },
        ValueKind::Pattern => match raw {
            Json::String(s) => Ok(Value::String(s.clone())),
            Json::Number(n) => Ok(Value::String(n.to_string())),
            _ => Err(wrong()),
        },
        ValueKind::List => {
            let element = element_type(ty);
            let items: Vec<Json> = match raw {
                // The agent splits a comma list given as a string.
                Json::String(s) => s
                    .split(',')
                    .map(|p| Json::String(p.trim().to_owned()))
                    .collect(),
                Json::Array(items) => items.clone(),
                Json::Null => return Err(wrong()),
                single => vec![single.clone()],
            };
            let mut out = Vec::with_capacity(items.len());
            for item in &items {
                match cast_single(item, element) {
                    Some(v) => out.push(v),
                    // Numbers that do not parse are dropped, as `Number(x)` → NaN is filtered.
                    None if element.primitive() == Some(PrimitiveType::Number) => {}
                    None => return Err(wrong()),
                }
            }
            Ok(Value::Array(out))
        }
        ValueKind::Single => cast_single(raw, ty).ok_or_else(wrong),
    }
}

fn cast_single(raw: &Json, ty: &ColumnType) -> Option<Value> {
    match ty {
        ColumnType::Primitive(PrimitiveType::Boolean) => match raw {
            Json::String(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" => Some(Value::Bool(true)),
                "false" | "no" | "0" => Some(Value::Bool(false)),
                _ => None,
            },
            Json::Number(n) => Some(Value::Bool(n.as_f64() != Some(0.0))),
            other => Value::from_json_typed(other, PrimitiveType::Boolean),
        },
        ColumnType::Primitive(p) => Value::from_json_typed(raw, *p),
        ColumnType::Array(inner) => match raw {
            Json::Array(items) => items
                .iter()
                .map(|i| cast_single(i, inner))
                .collect::<Option<Vec<_>>>()
                .map(Value::Array),
            Json::Null => Some(Value::Null),
            _ => None,
        },
        ColumnType::Composite(_) => Some(Value::Json(raw.clone())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::datasource::schema::{FieldSchema, RelationSchema};
    use crate::datasource::sql::operators::supported;

    fn column(ty: &ColumnType) -> FieldSchema {
        let mut c = ColumnSchema::new(ty.clone());
        c.filter_operators = supported(ty);
        FieldSchema::Column(c)
    }

    fn schema() -> DataSourceSchema {
        let p = |t| ColumnType::Primitive(t);
        let mut books = CollectionSchema::new("books");
        books
            .fields
            .insert("id".into(), column(&p(PrimitiveType::Number)));
        books
            .fields
            .insert("title".into(), column(&p(PrimitiveType::String)));
        books
            .fields
            .insert("available".into(), column(&p(PrimitiveType::Boolean)));
        books
            .fields
            .insert("published".into(), column(&p(PrimitiveType::Dateonly)));
        let mut status = ColumnSchema::new(p(PrimitiveType::Enum));
        status.filter_operators = supported(&status.column_type);
        status.enum_values = vec!["draft".into(), "live".into()];
        books
            .fields
            .insert("status".into(), FieldSchema::Column(status));
        books.fields.insert(
            "author".into(),
            FieldSchema::Relation(RelationSchema::ManyToOne {
                foreign_collection: "people".into(),
                foreign_key: "author_id".into(),
                foreign_key_target: "id".into(),
            }),
        );
        let mut people = CollectionSchema::new("people");
        people
            .fields
            .insert("id".into(), column(&p(PrimitiveType::Number)));
        people
            .fields
            .insert("name".into(), column(&p(PrimitiveType::String)));
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("books".into(), books);
        schema.collections.insert("people".into(), people);
        schema
    }

    fn parse(json: &Json) -> Result<ConditionTree> {
        let schema = schema();
        ConditionTree::parse(json, schema.collection("books").unwrap(), &schema)
    }

    #[test]
    fn operators_parse_in_snake_and_pascal_case_and_aggregators_in_any_case() {
        let tree = parse(&json!({"aggregator": "OR", "conditions": [
            {"field": "title", "operator": "i_contains", "value": "dune"},
            {"field": "title", "operator": "StartsWith", "value": "Em"},
        ]}))
        .unwrap();
        let ConditionTree::Branch {
            aggregator,
            conditions,
        } = tree
        else {
            panic!("branch")
        };
        assert_eq!(aggregator, Aggregator::Or);
        assert_eq!(
            conditions[0],
            ConditionTree::leaf("title", Operator::IContains, "dune")
        );
        assert_eq!(
            conditions[1],
            ConditionTree::leaf("title", Operator::StartsWith, "Em")
        );
    }

    #[test]
    fn a_branch_with_one_condition_collapses_to_it() {
        let tree = parse(&json!({"aggregator": "and", "conditions": [
            {"field": "id", "operator": "equal", "value": 3},
        ]}))
        .unwrap();
        assert_eq!(
            tree,
            ConditionTree::leaf("id", Operator::Equal, Value::Int(3))
        );
    }

    #[test]
    fn values_are_cast_to_the_column_type() {
        let leaf = |j: Json| match parse(&j).unwrap() {
            ConditionTree::Leaf(l) => l.value,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            leaf(json!({"field": "id", "operator": "equal", "value": "42"})),
            Value::Int(42)
        );
        assert_eq!(
            leaf(json!({"field": "available", "operator": "equal", "value": "yes"})),
            Value::Bool(true)
        );
        // A comma list is split and trimmed; numbers that do not parse are dropped.
        assert_eq!(
            leaf(json!({"field": "id", "operator": "in", "value": "1, 2,x"})),
            Value::Array(vec![Value::Int(1), Value::Int(2)])
        );
        assert_eq!(
            leaf(json!({"field": "published", "operator": "previous_x_days", "value": "7"})),
            Value::Int(7)
        );
        assert_eq!(
            leaf(json!({"field": "author:name", "operator": "equal", "value": "Ann"})),
            Value::from("Ann")
        );
    }

    #[test]
    fn bad_trees_are_validation_errors() {
        let cases = [
            json!({"field": "nope", "operator": "equal", "value": 1}),
            json!({"field": "title", "operator": "no_such_operator", "value": 1}),
            json!({"field": "id", "operator": "contains", "value": "1"}),
            json!({"field": "id", "operator": "equal", "value": "abc"}),
            json!({"field": "available", "operator": "greater_than", "value": true}),
            json!({"field": "published", "operator": "equal", "value": "not a date"}),
            json!({"field": "status", "operator": "equal", "value": "archived"}),
            json!({"field": "author", "operator": "present"}),
            json!({"aggregator": "xor", "conditions": []}),
            json!(["not", "an", "object"]),
        ];
        for case in cases {
            match parse(&case) {
                Err(Error::Validation(_) | Error::MissingField(_) | Error::MissingRelation(_)) => {}
                other => panic!("{case} should be a validation error, got {other:?}"),
            }
        }
    }

    #[test]
    fn errors_are_worded_as_the_agents() {
        let message = |case: Json| parse(&case).expect_err("a bad tree").to_string();
        assert_eq!(
            message(json!({"field": "nope", "operator": "equal", "value": 1})),
            "The 'books.nope' field was not found. Available fields are: \
             [id,title,available,published,status,author]. Please check if the field name is \
             correct."
        );
        assert_eq!(
            message(json!({"field": "writer:name", "operator": "equal", "value": 1})),
            "The 'books.writer' relation was not found. Available relations are: [author]. \
             Please check if the relation name is correct."
        );
        // An unknown operator is named as the agent's parser PascalCases it; the column's
        // operators are listed in the agent's order.
        assert_eq!(
            message(json!({"field": "id", "operator": "no_such_op", "value": 1})),
            "The given operator 'NoSuchOp' is not supported by the column: 'id'.\n\
             The allowed types are: [Equal,NotEqual,LessThan,GreaterThan,LessThanOrEqual,\
             GreaterThanOrEqual,Present,Blank,Missing,In,NotIn]"
        );
        let contains = message(json!({"field": "id", "operator": "contains", "value": "1"}));
        assert!(
            contains.starts_with("The given operator 'Contains' is not supported by the column"),
            "{contains}"
        );
        assert_eq!(
            js_pascal_case("previous_x_days_to_date"),
            "PreviousXDaysToDate"
        );
        assert_eq!(js_pascal_case("equal"), "Equal");
        assert_eq!(js_pascal_case("not_In"), "Not_In");
        assert_eq!(js_pascal_case(""), "");
    }

    #[test]
    fn intersect_and_union_flatten_and_drop_absent_trees() {
        let a = ConditionTree::leaf("id", Operator::Equal, Value::Int(1));
        let b = ConditionTree::leaf("id", Operator::Equal, Value::Int(2));
        assert_eq!(
            ConditionTree::intersect([None, Some(a.clone())]),
            Some(a.clone())
        );
        assert_eq!(ConditionTree::union([None, None]), None);
        let and = ConditionTree::intersect([
            Some(ConditionTree::and(vec![a.clone(), b.clone()])),
            Some(a.clone()),
        ]);
        assert_eq!(
            and,
            Some(ConditionTree::and(vec![a.clone(), b.clone(), a.clone()]))
        );
        let or = ConditionTree::union([Some(a.clone()), Some(b.clone())]).unwrap();
        assert_eq!(or.to_json()["aggregator"], "Or");
        assert_eq!(or.leaves().len(), 2);
    }
}
