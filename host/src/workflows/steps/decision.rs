//! `decision`: the first option whose `when` holds, else the option without `when` (the
//! default). `when` is a condition tree in the agent's JSON form: leaves on the record's fields
//! are answered by the datasource, on the run's record within the user's scope (so with the
//! database's own semantics, as any filter); leaves on `context.<step>.<field>` are answered on
//! the run's context here, and become constants in the tree sent to the datasource.

use serde_json::{Value as Json, json};

use super::data::{first, scoped_record};
use super::{Outcome, StepCtx, StepError, StepResult, collection};
use crate::auth::CollectionRight;
use crate::datasource::{CollectionSchema, ConditionTree, DataSourceSchema, Operator, Projection};
use crate::workflows::definition::DecisionOption;

/// A `when` with its context leaves answered.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Known(bool),
    Record(ConditionTree),
}

/// `decision` (automatic).
pub(super) async fn decide(ctx: &StepCtx<'_>, options: &[DecisionOption]) -> StepResult<Outcome> {
    let schema = collection(ctx)?;
    let served = ctx.state.datasource.schema();
    let mut read_checked = false;
    for option in options {
        let Some(when) = &option.when else { continue };
        let node = split(when, schema, served, &ctx.run.context)?;
        let holds = match node {
            Node::Known(known) => known,
            Node::Record(tree) => {
                if !read_checked {
                    // The decision reads the record: the user must be allowed to.
                    ctx.state
                        .permissions
                        .can(ctx.caller, &schema.name, CollectionRight::Read)
                        .await?;
                    exists(ctx, schema, None).await?;
                    read_checked = true;
                }
                exists(ctx, schema, Some(tree)).await?
            }
        };
        if holds {
            return Ok(chosen(option));
        }
    }
    match options.iter().find(|o| o.when.is_none()) {
        Some(default) => Ok(chosen(default)),
        None => Err(StepError::refused(
            "no option of the decision holds, and it has no default option",
        )),
    }
}

fn chosen(option: &DecisionOption) -> Outcome {
    Outcome::Done {
        output: json!({"option": option.name}),
        option: Some(option.name.clone()),
        skipped: false,
    }
}

/// Whether the run's record (within the scope) matches `tree`; without a tree, it must exist
/// (else the step fails the run: not found).
async fn exists(
    ctx: &StepCtx<'_>,
    schema: &CollectionSchema,
    tree: Option<ConditionTree>,
) -> StepResult<bool> {
    let filter = scoped_record(ctx, schema).await?;
    let keys = Projection::new(schema.primary_keys().into_iter().map(str::to_owned));
    let found = first(ctx, schema, filter.and(tree.clone()), &keys)
        .await?
        .is_some();
    if tree.is_none() && !found {
        return Err(StepError::not_found(format!(
            "record {} of {} not found (or outside the scope of the run's user)",
            ctx.run.record_id, schema.name
        )));
    }
    Ok(found)
}

/// Answers the context leaves of `when` and parses the others against the collection.
fn split(
    json: &Json,
    schema: &CollectionSchema,
    served: &DataSourceSchema,
    context: &Json,
) -> StepResult<Node> {
    let object = json
        .as_object()
        .ok_or_else(|| StepError::definition("a condition must be an object"))?;
    if let Some(aggregator) = object.get("aggregator") {
        let or = match aggregator.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("and") => false,
            Some("or") => true,
            _ => {
                return Err(StepError::definition(format!(
                    "unknown aggregator {aggregator}"
                )));
            }
        };
        let conditions = object
            .get("conditions")
            .and_then(Json::as_array)
            .ok_or_else(|| StepError::definition("`conditions` must be an array"))?;
        let mut trees = Vec::new();
        for condition in conditions {
            match split(condition, schema, served, context)? {
                // `true` decides an OR, `false` an AND; the other constant changes nothing.
                Node::Known(known) if known == or => return Ok(Node::Known(or)),
                Node::Known(_) => {}
                Node::Record(tree) => trees.push(tree),
            }
        }
        return Ok(if trees.is_empty() {
            Node::Known(!or)
        } else if or {
            Node::Record(ConditionTree::or(trees))
        } else {
            Node::Record(ConditionTree::and(trees))
        });
    }
    let field = object
        .get("field")
        .and_then(Json::as_str)
        .ok_or_else(|| StepError::definition("a condition needs a `field`"))?;
    if let Some(path) = field.strip_prefix("context.") {
        let operator = object
            .get("operator")
            .and_then(Json::as_str)
            .ok_or_else(|| StepError::definition("a condition needs an `operator`"))?;
        let operator: Operator = operator
            .parse()
            .map_err(|_| StepError::definition(format!("unknown operator {operator:?}")))?;
        let value = object.get("value").unwrap_or(&Json::Null);
        return Ok(Node::Known(test(lookup(context, path), operator, value)?));
    }
    ConditionTree::parse(json, schema, served)
        .map(Node::Record)
        .map_err(|e| StepError::definition(format!("the condition on {}: {e}", schema.name)))
}

/// `<step>.<field>` in the context (the field may be a `relation:field` path).
fn lookup<'a>(context: &'a Json, path: &str) -> Option<&'a Json> {
    let (step, field) = path.split_once('.')?;
    context.get(step)?.get(field)
}

/// A number, or a string that reads as one (decimals are kept as strings).
fn number(value: &Json) -> Option<f64> {
    match value {
        Json::Number(n) => n.as_f64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn equal(a: &Json, b: &Json) -> bool {
    match (number(a), number(b)) {
        (Some(x), Some(y)) if !(a.is_string() && b.is_string()) => x == y,
        _ => a == b,
    }
}

fn text(value: &Json) -> Option<&str> {
    value.as_str()
}

/// One leaf on a context value, with the SQL datasource's semantics where they apply (nulls
/// match only `NotEqual`, `NotIn`, `NotContains`, `Blank` and `Missing`).
fn test(found: Option<&Json>, operator: Operator, value: &Json) -> StepResult<bool> {
    let actual = found.unwrap_or(&Json::Null);
    let list = || {
        value
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![value.clone()])
    };
    let compare = |ok: fn(f64, f64) -> bool| match (number(actual), number(value)) {
        (Some(x), Some(y)) => ok(x, y),
        _ => match (text(actual), text(value)) {
            (Some(x), Some(y)) => ok(x.cmp(y) as i32 as f64, 0.0),
            _ => false,
        },
    };
    Ok(match operator {
        Operator::Present => !actual.is_null() && actual != "",
        Operator::Blank => actual.is_null() || actual == "",
        Operator::Missing => actual.is_null(),
        Operator::Equal if value.is_null() => actual.is_null(),
        Operator::Equal => equal(actual, value),
        Operator::NotEqual => !equal(actual, value),
        Operator::In => list().iter().any(|v| equal(actual, v)),
        Operator::NotIn => !list().iter().any(|v| equal(actual, v)),
        Operator::GreaterThan | Operator::After => compare(|x, y| x > y),
        Operator::LessThan | Operator::Before => compare(|x, y| x < y),
        Operator::GreaterThanOrEqual => compare(|x, y| x >= y),
        Operator::LessThanOrEqual => compare(|x, y| x <= y),
        Operator::Contains => {
            matches!((text(actual), text(value)), (Some(a), Some(v)) if a.contains(v))
        }
        Operator::NotContains => {
            !matches!((text(actual), text(value)), (Some(a), Some(v)) if a.contains(v))
        }
        Operator::IContains => matches!((text(actual), text(value)),
            (Some(a), Some(v)) if a.to_lowercase().contains(&v.to_lowercase())),
        Operator::StartsWith => {
            matches!((text(actual), text(value)), (Some(a), Some(v)) if a.starts_with(v))
        }
        Operator::EndsWith => {
            matches!((text(actual), text(value)), (Some(a), Some(v)) if a.ends_with(v))
        }
        other => {
            return Err(StepError::definition(format!(
                "the operator {} is not available on context values",
                other.as_str()
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_leaves_compare_numbers_strings_and_nulls() {
        let context = json!({"read": {"total": "10.50", "status": "paid", "note": null}});
        let leaf =
            |path: &str, op: Operator, v: Json| test(lookup(&context, path), op, &v).unwrap();
        assert!(leaf("read.total", Operator::GreaterThan, json!(10)));
        assert!(!leaf("read.total", Operator::LessThan, json!(10)));
        assert!(leaf("read.total", Operator::Equal, json!(10.5)));
        assert!(leaf("read.status", Operator::In, json!(["new", "paid"])));
        assert!(leaf("read.status", Operator::NotEqual, json!("new")));
        assert!(leaf("read.note", Operator::Blank, Json::Null));
        assert!(leaf("read.note", Operator::NotEqual, json!("x")));
        assert!(!leaf("read.note", Operator::Contains, json!("x")));
        assert!(leaf("read.absent", Operator::Missing, Json::Null));
        assert!(leaf("read.status", Operator::IContains, json!("AI")));
        assert!(test(None, Operator::Match, &json!("x")).is_err());
    }
}
