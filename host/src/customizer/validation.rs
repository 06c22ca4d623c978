//! `addFieldValidation` and `setFieldNullable` (protocol §8.12, stack position 21): the rules are
//! added to the column's schema and writes are checked against them before they reach the
//! layers below (hooks included): every rule for every record created, only the fields of an
//! update's patch, and a null value only against `Present`. A rule is matched in memory as a
//! one-leaf condition tree, as the agent does, so that any operator allowed for the column type
//! works whether the database answers it or not.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use indexmap::IndexMap;
use serde_json::{Value as Json, json};

use super::stack::StackOptions;
use super::stack::{Decorator, Layer, by_collection, decorated, target_column};
use super::{Customization, Kind};
use crate::datasource::query::evaluate::Matcher;
use crate::datasource::schema::{FieldSchema, ValidationRule};
use crate::datasource::{
    Caller, Collection, CollectionSchema, ConditionTree, DataSource, DataSourceSchema, Error,
    Filter, Leaf, Operator, Record, Result, Value,
};

/// One declared rule, ready to check.
struct Rule {
    /// The leaf matched against a written record (a `Match` pattern in the regex crate's syntax).
    leaf: ConditionTree,
    /// `'<Op>(<value>)'` or `'<Op>'`, as the agent words the failure.
    display: String,
    operator: Operator,
}

/// The rules of one collection, by field, in declaration order.
type Rules = IndexMap<String, Vec<Rule>>;

/// The validation layer over `child`.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut declared: HashMap<String, (CollectionSchema, Rules)> = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        let mut schema = child.schema().collection(&collection)?.clone();
        let mut rules = Rules::new();
        for customization in list {
            let origin = &customization.origin;
            match &customization.kind {
                Kind::Validation {
                    field,
                    operator,
                    value,
                } => {
                    let column = target_column(
                        &mut schema,
                        field,
                        options,
                        format!(
                            "{origin}: cannot add validators on the relation \
                             '{collection}.{field}', use the foreign key instead"
                        ),
                        format!(
                            "{origin}: cannot add a validator on '{collection}.{field}', \
                             which does not exist"
                        ),
                    )?;
                    let Some(column) = column else {
                        continue;
                    };
                    if column.is_read_only {
                        return Err(Error::validation(format!(
                            "{origin}: cannot add validators on the read-only field \
                             '{collection}.{field}'"
                        )));
                    }
                    let (rule, schema_rule) =
                        rule(&schema, child.schema(), field, *operator, value.as_ref()).map_err(
                            |e| {
                                Error::validation(format!(
                                    "{origin}: invalid validator on '{collection}.{field}': {e}"
                                ))
                            },
                        )?;
                    if let Some(FieldSchema::Column(column)) = schema.fields.get_mut(field) {
                        column.validation.push(schema_rule);
                    }
                    rules.entry(field.clone()).or_default().push(rule);
                }
                Kind::Nullable { field } => {
                    let column = target_column(
                        &mut schema,
                        field,
                        options,
                        format!(
                            "{origin}: cannot make the relation '{collection}.{field}' \
                             nullable"
                        ),
                        format!(
                            "{origin}: cannot make '{collection}.{field}' nullable, it does \
                             not exist"
                        ),
                    )?;
                    if let Some(column) = column {
                        // The schema only: a `Present` rule added here is still checked, as in
                        // the agent (its checks read the declared rules, not the schema).
                        column.allow_null = true;
                        column
                            .validation
                            .retain(|r| r.operator != Operator::Present);
                    }
                }
                _ => {}
            }
        }
        declared.insert(collection, (schema, rules));
    }
    let layer = Layer::new(Arc::clone(child), |collection| {
        let Some((schema, rules)) = declared.remove(&collection.schema().name) else {
            return Ok(None);
        };
        Ok(Some(decorated(Validated {
            child: collection,
            datasource: Arc::clone(child),
            schema,
            rules,
        })))
    })?;
    Ok(Arc::new(layer))
}

/// A rule for `field`: the value typed for the column as a filter value would be (which also
/// refuses an operator the column type does not allow), and the rule the schema advertises.
fn rule(
    collection: &CollectionSchema,
    datasource: &DataSourceSchema,
    field: &str,
    operator: Operator,
    value: Option<&Json>,
) -> Result<(Rule, ValidationRule)> {
    // The column alone, answering the operator: the rule is matched in memory.
    let mut probe = CollectionSchema::new(collection.name.clone());
    if let Some(FieldSchema::Column(column)) = collection.fields.get(field) {
        let mut column = column.clone();
        column.filter_operators.insert(operator);
        probe
            .fields
            .insert(field.to_owned(), FieldSchema::Column(column));
    }
    let raw = value.cloned().unwrap_or(Json::Null);
    let tree = ConditionTree::parse(
        &json!({"field": field, "operator": operator.as_str(), "value": raw}),
        &probe,
        datasource,
    )?;
    let ConditionTree::Leaf(Leaf { value: typed, .. }) = &tree else {
        return Err(Error::Internal("a one-leaf tree parsed as a branch".into()));
    };
    let schema_rule = ValidationRule {
        operator,
        value: value.map(|_| typed.clone()),
    };
    let leaf = match (operator, typed) {
        (Operator::Match, Value::String(pattern)) => {
            ConditionTree::leaf(field, operator, Value::String(regex_source(pattern)))
        }
        _ => tree,
    };
    // Compiled once here so that a bad pattern is refused when the stack is built.
    Matcher::new(&leaf, &probe, datasource, chrono_tz::UTC, Utc::now())?;
    let display = match value {
        Some(value) => format!("{}({})", operator.as_str(), js_string(value)),
        None => operator.as_str().to_owned(),
    };
    Ok((
        Rule {
            leaf,
            display,
            operator,
        },
        schema_rule,
    ))
}

/// A `Match` pattern given as a JavaScript regex literal (`/^a.*$/i`, as the agent's `RegExp`
/// prints) in the regex crate's syntax (`(?i)^a.*$`); other text is already a pattern.
fn regex_source(pattern: &str) -> String {
    if let Some(rest) = pattern.strip_prefix('/')
        && let Some((source, flags)) = rest.rsplit_once('/')
        && flags.chars().all(|c| "gimsuyd".contains(c))
    {
        let inline: String = flags.chars().filter(|c| "ims".contains(*c)).collect();
        return if inline.is_empty() {
            source.to_owned()
        } else {
            format!("(?{inline}){source}")
        };
    }
    pattern.to_owned()
}

/// JavaScript's `String(value)`, which the agent's failure message uses.
fn js_string(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        Json::Array(items) => items
            .iter()
            .map(|i| match i {
                Json::Null => String::new(),
                other => js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Json::Object(_) => "[object Object]".to_owned(),
        other => other.to_string(),
    }
}

struct Validated {
    child: Arc<dyn Collection>,
    datasource: Arc<dyn DataSource>,
    schema: CollectionSchema,
    rules: Rules,
}

impl Validated {
    /// Checks one written record: every field with rules when `all_fields` (create), else only
    /// those the record holds; a null value only against `Present`.
    fn check(&self, caller: &Caller, record: &Record, all_fields: bool) -> Result<()> {
        let now = Utc::now();
        for (field, rules) in &self.rules {
            let value = record.get(field);
            if !all_fields && value.is_none() {
                continue;
            }
            let null = value.is_some_and(Value::is_null);
            for rule in rules {
                if null && rule.operator != Operator::Present {
                    continue;
                }
                let matcher = Matcher::new(
                    &rule.leaf,
                    self.child.schema(),
                    self.datasource.schema(),
                    caller.timezone,
                    now,
                )?;
                if !matcher.matches(record) {
                    return Err(Error::validation(format!(
                        "'{field}' failed validation rule: '{}'",
                        rule.display
                    )));
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Decorator for Validated {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn create(&self, caller: &Caller, records: Vec<Record>) -> Result<Vec<Record>> {
        for record in &records {
            self.check(caller, record, true)?;
        }
        self.child.create(caller, records).await
    }

    async fn update(&self, caller: &Caller, filter: &Filter, patch: &Record) -> Result<()> {
        self.check(caller, patch, false)?;
        self.child.update(caller, filter, patch).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::{build_stack, build_stack_with};
    use super::*;
    use crate::customizer::test_support::{caller, computed, record, sqlite};
    use crate::datasource::{Projection, Sort};

    async fn base() -> Arc<dyn DataSource> {
        sqlite(
            "CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, \
                 email TEXT);
                 INSERT INTO people (name, age, email) VALUES ('Ada', 36, 'ada@x.io');",
        )
        .await
    }

    fn rule(field: &str, operator: Operator, value: Option<Json>) -> Customization {
        Customization::collection(
            "test",
            "people",
            Kind::Validation {
                field: field.into(),
                operator,
                value,
            },
        )
    }

    fn people(stack: &Arc<dyn DataSource>) -> Arc<dyn Collection> {
        stack.collection("people").unwrap()
    }

    #[tokio::test]
    async fn rules_are_in_the_schema_and_checked_on_create_with_the_agents_wording() {
        let stack = build_stack(
            base().await,
            vec![
                rule("name", Operator::LongerThan, Some(json!(2))),
                rule("age", Operator::GreaterThan, Some(json!(17))),
                rule("email", Operator::Match, Some(json!("/^[a-z]+@x\\.io$/i"))),
            ],
        )
        .unwrap();
        let schema = stack.schema().collection("people").unwrap();
        let name = schema.column("name").unwrap();
        assert_eq!(
            name.validation.last(),
            Some(&ValidationRule {
                operator: Operator::LongerThan,
                value: Some(Value::Int(2)),
            })
        );
        let people = people(&stack);
        let err = people
            .create(
                &caller(),
                vec![record(&[("name", "Al".into()), ("age", 40.into())])],
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "'name' failed validation rule: 'LongerThan(2)'"
        );
        assert!(matches!(err, Error::Validation(_)));
        // Every rule applies on create, an absent field too.
        let err = people
            .create(&caller(), vec![record(&[("name", "Alan".into())])])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "'age' failed validation rule: 'GreaterThan(17)'"
        );
        // A JavaScript regex literal, flags included; its message prints the literal.
        let err = people
            .create(
                &caller(),
                vec![record(&[
                    ("name", "Alan".into()),
                    ("age", 41.into()),
                    ("email", "alan@y.io".into()),
                ])],
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "'email' failed validation rule: 'Match(/^[a-z]+@x\\.io$/i)'"
        );
        let created = people
            .create(
                &caller(),
                vec![record(&[
                    ("name", "Alan".into()),
                    ("age", 41.into()),
                    ("email", "ALAN@x.io".into()),
                ])],
            )
            .await
            .unwrap();
        assert_eq!(created.len(), 1);
    }

    #[tokio::test]
    async fn updates_check_only_the_patched_fields_and_null_only_against_present() {
        let stack = build_stack(
            base().await,
            vec![
                rule("name", Operator::LongerThan, Some(json!(2))),
                rule("age", Operator::GreaterThan, Some(json!(17))),
                rule("age", Operator::Present, None),
                rule("email", Operator::Contains, Some(json!("@"))),
            ],
        )
        .unwrap();
        let people = people(&stack);
        let all = Filter::default();
        // Only `email` is checked: the invalid absent fields do not matter.
        people
            .update(&caller(), &all, &record(&[("email", "a@b".into())]))
            .await
            .unwrap();
        let err = people
            .update(&caller(), &all, &record(&[("age", 3.into())]))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "'age' failed validation rule: 'GreaterThan(17)'"
        );
        // Null: only Present is checked (email has none, so null passes).
        people
            .update(&caller(), &all, &record(&[("email", Value::Null)]))
            .await
            .unwrap();
        let err = people
            .update(&caller(), &all, &record(&[("age", Value::Null)]))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "'age' failed validation rule: 'Present'");
        let rows = people
            .list(
                &caller(),
                &Filter::default().with_sort(Sort::asc("id")),
                &Projection::new(["email", "age"]),
            )
            .await
            .unwrap();
        assert_eq!(rows[0].get("email"), Some(&Value::Null));
        assert_eq!(rows[0].get("age"), Some(&Value::Int(36)));
    }

    #[tokio::test]
    async fn nullable_drops_present_and_allows_null() {
        let base = base().await;
        let before = base
            .schema()
            .collection("people")
            .unwrap()
            .column("name")
            .unwrap()
            .clone();
        assert!(before.is_required() && !before.allow_null);
        let stack = build_stack(
            base,
            vec![Customization::collection(
                "test",
                "people",
                Kind::Nullable {
                    field: "name".into(),
                },
            )],
        )
        .unwrap();
        let name = stack
            .schema()
            .collection("people")
            .unwrap()
            .column("name")
            .unwrap()
            .clone();
        assert!(!name.is_required() && name.allow_null);
    }

    #[tokio::test]
    async fn bad_declarations_are_refused() {
        // An operator the column type does not allow.
        let err = build_stack(
            base().await,
            vec![rule("age", Operator::Contains, Some(json!("1")))],
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            err.contains("'people.age'") && err.contains("not allowed"),
            "{err}"
        );
        // A value of the wrong type.
        let err = build_stack(
            base().await,
            vec![rule("age", Operator::GreaterThan, Some(json!("old")))],
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("Wrong type"), "{err}");
        // A read-only column: a computed field.
        let computed = computed(
            "people",
            "label",
            &["name"],
            super::super::closures::compute(|batch| Ok(vec![Value::Null; batch.len])),
        );
        let err = build_stack(
            base().await,
            vec![computed, rule("label", Operator::Present, None)],
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("read-only field 'people.label'"), "{err}");
        // A missing field.
        let err = build_stack(base().await, vec![rule("nope", Operator::Present, None)])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("'people.nope'"), "{err}");
        let options = StackOptions {
            ignore_missing_schema_element_errors: true,
            ..StackOptions::default()
        };
        assert!(
            build_stack_with(
                base().await,
                vec![rule("nope", Operator::Present, None)],
                &options
            )
            .is_ok()
        );
    }

    #[test]
    fn javascript_strings_and_regex_literals() {
        assert_eq!(js_string(&json!([1, "a", null])), "1,a,");
        assert_eq!(js_string(&json!(2.5)), "2.5");
        assert_eq!(js_string(&json!({"a": 1})), "[object Object]");
        assert_eq!(regex_source("/^a$/gi"), "(?i)^a$");
        assert_eq!(regex_source("/^a/b$/"), "^a/b$");
        assert_eq!(regex_source("^a$"), "^a$");
    }
}
