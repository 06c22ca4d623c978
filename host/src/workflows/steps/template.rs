//! Values read from the run's context: a string `{{context.<step>.<field>}}` (or
//! `{{answer.<step>}}`, a guidance step's answer) in a step's values. A string that is exactly
//! one template becomes the value it names, whatever its type; templates inside a longer string
//! are replaced by their text.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};

use super::{StepError, StepResult};

/// `values` with every template resolved against `context`.
pub fn resolve_map(
    values: &BTreeMap<String, Json>,
    context: &Json,
) -> StepResult<Map<String, Json>> {
    values
        .iter()
        .map(|(field, value)| Ok((field.clone(), resolve(value, context)?)))
        .collect()
}

/// `value` with every template resolved against `context` (objects and arrays included).
pub fn resolve(value: &Json, context: &Json) -> StepResult<Json> {
    Ok(match value {
        Json::String(text) => resolve_text(text, context)?,
        Json::Array(items) => Json::Array(
            items
                .iter()
                .map(|item| resolve(item, context))
                .collect::<StepResult<_>>()?,
        ),
        Json::Object(map) => Json::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), resolve(v, context)?)))
                .collect::<StepResult<_>>()?,
        ),
        other => other.clone(),
    })
}

fn resolve_text(text: &str, context: &Json) -> StepResult<Json> {
    let trimmed = text.trim();
    if let Some(inner) = whole_template(trimmed) {
        return lookup(inner, context);
    }
    if !text.contains("{{") {
        return Ok(Json::String(text.to_owned()));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(StepError::refused(format!(
                "the template {text:?} has an unclosed {{{{"
            )));
        };
        match lookup(after[..end].trim(), context)? {
            Json::String(s) => out.push_str(&s),
            Json::Null => {}
            other => out.push_str(&other.to_string()),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(Json::String(out))
}

/// The inside of a string that is one template and nothing else.
fn whole_template(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then(|| inner.trim())
}

/// The value a template path names: `context.<step>.<field>…` or `answer.<step>`.
fn lookup(path: &str, context: &Json) -> StepResult<Json> {
    let mut parts = path.split('.');
    let root = parts.next().unwrap_or_default();
    let found = match root {
        "context" => {
            let mut value = context;
            for part in parts {
                value = match value.get(part) {
                    Some(next) => next,
                    None => return Err(missing(path)),
                };
            }
            value.clone()
        }
        "answer" => {
            let step = parts.next().ok_or_else(|| missing(path))?;
            if parts.next().is_some() {
                return Err(missing(path));
            }
            context
                .get(step)
                .and_then(|output| output.get("answer"))
                .cloned()
                .ok_or_else(|| missing(path))?
        }
        _ => {
            return Err(StepError::refused(format!(
                "the template {{{{{path}}}}} must start with context. or answer."
            )));
        }
    };
    Ok(found)
}

fn missing(path: &str) -> StepError {
    StepError::refused(format!(
        "the template {{{{{path}}}}} names nothing in the run's context (a step not run yet?)"
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_whole_template_keeps_the_type_and_a_partial_one_becomes_text() {
        let context = json!({"read": {"total": 12.5, "status": "paid"}, "ask": {"answer": "ok"}});
        assert_eq!(
            resolve(&json!("{{context.read.total}}"), &context).unwrap(),
            json!(12.5)
        );
        assert_eq!(
            resolve(&json!(" {{ answer.ask }} "), &context).unwrap(),
            json!("ok")
        );
        assert_eq!(
            resolve(
                &json!("order {{context.read.status}} ({{context.read.total}})"),
                &context
            )
            .unwrap(),
            json!("order paid (12.5)")
        );
        assert_eq!(
            resolve(&json!({"a": ["{{context.read.status}}", 3]}), &context).unwrap(),
            json!({"a": ["paid", 3]})
        );
        assert_eq!(resolve(&json!("plain"), &context).unwrap(), json!("plain"));
    }

    #[test]
    fn a_template_naming_nothing_is_refused_with_its_path() {
        let context = json!({"read": {"total": 1}});
        let error = resolve(&json!("{{context.nope.total}}"), &context).unwrap_err();
        assert!(error.message.contains("context.nope.total"), "{error}");
        let error = resolve(&json!("{{record.id}}"), &context).unwrap_err();
        assert!(error.message.contains("must start with"), "{error}");
        let error = resolve(&json!("a {{context.read.total"), &context).unwrap_err();
        assert!(error.message.contains("unclosed"), "{error}");
    }
}
