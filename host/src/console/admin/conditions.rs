//! The condition builder of the permission editor: a condition tree over one collection's fields
//! as rows of (field, operator, value), all or any of them matching, the way the table page's
//! filter builder writes them (the same markup, so the console's script narrows each row's
//! operators to its field's and hides the value an operator does not take). Used for the
//! conditions of action rights and for team scopes, whose values may be `{{currentUser.*}}`
//! variables (offered in a list).
//!
//! A stored tree the rows cannot show (nested branches) is shown as it is; saving the rows
//! replaces it.

use serde_json::{Value as Json, json};

use crate::console::view;
use crate::datasource::{CollectionSchema, DataSourceSchema, Operator};

/// A field the builder offers: the table's filter builder's own (`view::filter_fields`).
pub use crate::console::view::FilterField as Field;

pub struct Row {
    pub field: String,
    pub operator: String,
    pub value: String,
}

/// One builder of a form.
pub struct Builder {
    /// The prefix of its inputs' names and ids.
    pub prefix: &'static str,
    pub legend: &'static str,
    pub hint: &'static str,
    pub fields: Vec<Field>,
    pub operators: Vec<(String, String)>,
    /// The rows, an empty one last (to add a condition).
    pub rows: Vec<Row>,
    /// Any row may match (`or`), rather than all of them.
    pub any: bool,
    /// A stored tree the rows cannot show, as JSON.
    pub raw: Option<String>,
    /// Whether the values offer the `{{currentUser.*}}` variables.
    pub variables: bool,
    pub error: Option<String>,
}

fn value_text(value: Option<&Json>) -> String {
    match value {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(s)) => s.clone(),
        Some(Json::Array(items)) => items
            .iter()
            .map(|i| value_text(Some(i)))
            .collect::<Vec<_>>()
            .join(", "),
        Some(other) => other.to_string(),
    }
}

/// A leaf as a row, when it is one.
fn leaf(node: &Json) -> Option<Row> {
    let object = node.as_object()?;
    let field = object.get("field")?.as_str()?;
    let operator: Operator = object.get("operator")?.as_str()?.parse().ok()?;
    Some(Row {
        field: field.to_owned(),
        operator: operator.snake_case(),
        value: value_text(object.get("value")),
    })
}

/// The rows of `tree` and whether any of them may match; `None` for a tree they cannot show.
fn rows_of(tree: &Json) -> Option<(Vec<Row>, bool)> {
    if let Some(row) = leaf(tree) {
        return Some((vec![row], false));
    }
    let aggregator = tree.get("aggregator")?.as_str()?.to_ascii_lowercase();
    let rows = tree
        .get("conditions")?
        .as_array()?
        .iter()
        .map(leaf)
        .collect::<Option<Vec<_>>>()?;
    Some((rows, aggregator == "or"))
}

impl Builder {
    /// A builder showing `tree` (none: no condition).
    pub fn new(
        schema: &DataSourceSchema,
        collection: &CollectionSchema,
        prefix: &'static str,
        legend: &'static str,
        hint: &'static str,
        tree: Option<&Json>,
    ) -> Self {
        let (mut rows, any, raw) = match tree {
            None => (Vec::new(), false, None),
            Some(tree) => match rows_of(tree) {
                Some((rows, any)) => (rows, any, None),
                None => (Vec::new(), false, Some(tree.to_string())),
            },
        };
        rows.push(Row {
            field: String::new(),
            operator: String::new(),
            value: String::new(),
        });
        let mut operators: Vec<(String, String)> = Operator::ALL
            .iter()
            .map(|o| (o.snake_case(), view::operator_label(&o.snake_case())))
            .collect();
        operators.dedup();
        Self {
            prefix,
            legend,
            hint,
            fields: view::filter_fields(schema, collection),
            operators,
            rows,
            any,
            raw,
            variables: false,
            error: None,
        }
    }

    /// Offers the `{{currentUser.*}}` variables in the values.
    pub fn with_variables(mut self) -> Self {
        self.variables = true;
        self
    }

    /// The rows posted (empty field: no row), as typed.
    pub fn read(&mut self, pairs: &[(String, String)]) {
        let all = |key: String| -> Vec<String> {
            pairs
                .iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
                .collect()
        };
        let fields = all(format!("{}-f", self.prefix));
        let operators = all(format!("{}-o", self.prefix));
        let values = all(format!("{}-v", self.prefix));
        let mut rows: Vec<Row> = fields
            .into_iter()
            .enumerate()
            .filter(|(_, field)| !field.is_empty())
            .map(|(i, field)| Row {
                field,
                operator: operators.get(i).cloned().unwrap_or_default(),
                value: values.get(i).cloned().unwrap_or_default(),
            })
            .collect();
        self.any = pairs
            .iter()
            .any(|(k, v)| *k == format!("{}-any", self.prefix) && v == "or");
        // The rows replace a tree they could not show.
        self.raw = None;
        rows.push(Row {
            field: String::new(),
            operator: String::new(),
            value: String::new(),
        });
        self.rows = rows;
    }

    /// The condition tree of the rows (none: no row), or the refusal of the first row that does
    /// not read (also kept to show next to the builder).
    pub fn tree(
        &mut self,
        schema: &DataSourceSchema,
        collection: &CollectionSchema,
    ) -> Option<Option<Json>> {
        match tree_of(schema, collection, &self.rows) {
            Ok(conditions) => Some(match conditions.len() {
                0 => None,
                1 => conditions.into_iter().next(),
                _ => Some(json!({
                    "aggregator": if self.any { "or" } else { "and" },
                    "conditions": conditions,
                })),
            }),
            Err(message) => {
                self.error = Some(message);
                None
            }
        }
    }
}

fn tree_of(
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    rows: &[Row],
) -> Result<Vec<Json>, String> {
    rows.iter()
        .filter(|r| !r.field.is_empty())
        .map(|row| {
            view::condition_leaf(
                schema,
                collection,
                &row.field,
                &row.operator,
                &row.value,
                view::ConditionUse::Stored,
            )
        })
        .collect()
}

/// The `{{currentUser.*}}` variables a scope may use, `tags` the tag keys of the users.
pub fn variables(tags: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = [
        "id",
        "email",
        "firstName",
        "lastName",
        "fullName",
        "permissionLevel",
        "roleId",
        "team.id",
        "team.name",
    ]
    .iter()
    .map(|p| format!("{{{{currentUser.{p}}}}}"))
    .collect();
    let mut tags: Vec<String> = tags.into_iter().collect();
    tags.sort();
    tags.dedup();
    out.extend(
        tags.into_iter()
            .map(|t| format!("{{{{currentUser.tags.{t}}}}}")),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_tree_reads_as_rows_and_a_nested_one_does_not() {
        let tree = json!({"aggregator": "Or", "conditions": [
            {"field": "status", "operator": "In", "value": ["paid", "shipped"]},
            {"field": "id", "operator": "equal", "value": 3},
        ]});
        let (rows, any) = rows_of(&tree).unwrap();
        assert!(any);
        assert_eq!(rows[0].operator, "in");
        assert_eq!(rows[0].value, "paid, shipped");
        assert_eq!(rows[1].value, "3");
        let nested = json!({"aggregator": "and", "conditions": [tree]});
        assert!(rows_of(&nested).is_none());
    }

    #[test]
    fn the_variables_name_the_users_tags() {
        let all = variables(["region".to_owned()]);
        assert_eq!(all[0], "{{currentUser.id}}");
        assert_eq!(all.last().unwrap(), "{{currentUser.tags.region}}");
    }
}
