//! PostgreSQL cannot hold a NUL character (`\0`, `\u0000`) in `text`, `varchar`, enums or
//! `jsonb`, and refuses any statement that binds one (`invalid byte sequence for encoding "UTF8":
//! 0x00`). Users can still type one (`%00` in a search, a filter value). Since no stored value
//! holds a NUL, what a condition holding one means is known without asking the database:
//! `Equal 'a\0'` matches no row, `NotEqual 'a\0'` every row, a list loses the items that hold
//! one. [`rewrite`] turns such a leaf into that answer before SQL is written, so reads answer as
//! the Node agent's do (200), and [`check_write`] refuses a written value that holds one with a
//! validation error naming the field. SQLite and MySQL store NUL characters, so neither applies
//! there.

use crate::datasource::error::{Error, Result};
use crate::datasource::query::{Leaf, Operator};
use crate::datasource::record::Value;

/// Whether a value holds a NUL character: a string, or any string (or object key) inside JSON
/// or an array.
pub(crate) fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Json(json) => json_has_nul(json),
        Value::Array(items) => items.iter().any(has_nul),
        _ => false,
    }
}

fn json_has_nul(json: &serde_json::Value) -> bool {
    match json {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(items) => items.iter().any(json_has_nul),
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(key, value)| key.contains('\0') || json_has_nul(value)),
        _ => false,
    }
}

/// What a PostgreSQL leaf whose value holds a NUL becomes.
#[derive(Debug, PartialEq)]
pub(crate) enum Rewritten {
    /// Every row, or none, matches.
    Constant(bool),
    /// An equivalent leaf without the NUL.
    Leaf(Leaf),
}

/// The answer of a leaf whose value holds a NUL, `None` when it holds none.
pub(crate) fn rewrite(leaf: &Leaf) -> Option<Rewritten> {
    use Operator::*;
    if !has_nul(&leaf.value) {
        return None;
    }
    let without = |operator: Operator, value: Value| {
        Rewritten::Leaf(Leaf {
            field: leaf.field.clone(),
            operator,
            value,
        })
    };
    Some(match leaf.operator {
        // No stored value equals, contains, starts or ends with, or is LIKE a text holding a
        // NUL (in a LIKE pattern it is a literal character); nor does an array include it.
        Equal | Like | ILike | Contains | IContains | StartsWith | IStartsWith | EndsWith
        | IEndsWith | IncludesAll => Rewritten::Constant(false),
        // A regex may still match without its NUL (`a|\0`, `[^\0]`): PostgreSQL's own escape
        // for the character keeps its meaning.
        Match => match &leaf.value {
            Value::String(pattern) => without(Match, Value::String(pattern.replace('\0', "\\x00"))),
            _ => Rewritten::Constant(false),
        },
        // The negations match every row, NULL ones included, as they do for any value.
        NotEqual | NotContains | NotIContains => Rewritten::Constant(true),
        // A list keeps the items that can match.
        In | NotIn | IncludesNone => match &leaf.value {
            Value::Array(items) => without(
                leaf.operator,
                Value::Array(items.iter().filter(|v| !has_nul(v)).cloned().collect()),
            ),
            _ => Rewritten::Constant(leaf.operator != In),
        },
        // In code point order, `x < 'ab\0c'` holds for a text without NUL exactly when
        // `x <= 'ab'`, and `x > 'ab\0c'` exactly when `x > 'ab'`: the text before the first
        // NUL decides.
        LessThan | LessThanOrEqual | GreaterThan | GreaterThanOrEqual | Before | After => {
            let Value::String(text) = &leaf.value else {
                return Some(Rewritten::Constant(false));
            };
            let prefix = text.split('\0').next().unwrap_or_default().to_owned();
            let operator = match leaf.operator {
                LessThan | LessThanOrEqual | Before => LessThanOrEqual,
                _ => GreaterThan,
            };
            without(operator, Value::String(prefix))
        }
        // Operators without a value, or with a number, never hold a NUL.
        _ => return None,
    })
}

/// Refuses a value PostgreSQL cannot store.
pub(crate) fn check_write(field: &str, value: &Value) -> Result<()> {
    if has_nul(value) {
        return Err(Error::validation(format!(
            "The value of \"{field}\" holds a NUL character (\\u0000), which PostgreSQL cannot store"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(operator: Operator, value: Value) -> Leaf {
        Leaf {
            field: "name".into(),
            operator,
            value,
        }
    }

    fn s(text: &str) -> Value {
        Value::String(text.into())
    }

    #[test]
    fn values_without_nul_are_left_alone() {
        for op in [Operator::Equal, Operator::In, Operator::Contains] {
            assert_eq!(rewrite(&leaf(op, s("a b"))), None);
        }
        assert_eq!(rewrite(&leaf(Operator::Present, Value::Null)), None);
        assert_eq!(
            rewrite(&leaf(Operator::LongerThan, Value::Int(0))),
            None,
            "numbers hold no NUL"
        );
    }

    #[test]
    fn each_operator_gets_the_answer_of_a_value_no_row_holds() {
        use Operator::*;
        for op in [
            Equal,
            Like,
            ILike,
            Contains,
            IContains,
            StartsWith,
            IStartsWith,
            EndsWith,
            IEndsWith,
        ] {
            assert_eq!(
                rewrite(&leaf(op, s("a\0b"))),
                Some(Rewritten::Constant(false)),
                "{op}"
            );
        }
        for op in [NotEqual, NotContains, NotIContains] {
            assert_eq!(
                rewrite(&leaf(op, s("\0"))),
                Some(Rewritten::Constant(true)),
                "{op}"
            );
        }
        let list = Value::Array(vec![s("a"), s("b\0"), Value::Null]);
        for op in [In, NotIn, IncludesNone] {
            assert_eq!(
                rewrite(&leaf(op, list.clone())),
                Some(Rewritten::Leaf(leaf(
                    op,
                    Value::Array(vec![s("a"), Value::Null])
                ))),
                "{op}"
            );
        }
        assert_eq!(
            rewrite(&leaf(IncludesAll, list)),
            Some(Rewritten::Constant(false))
        );
        assert_eq!(
            rewrite(&leaf(Match, s("a|[^\0]"))),
            Some(Rewritten::Leaf(leaf(Match, s("a|[^\\x00]"))))
        );
        assert_eq!(
            rewrite(&leaf(LessThan, s("ab\0c"))),
            Some(Rewritten::Leaf(leaf(LessThanOrEqual, s("ab"))))
        );
        assert_eq!(
            rewrite(&leaf(GreaterThanOrEqual, s("\0"))),
            Some(Rewritten::Leaf(leaf(GreaterThan, s(""))))
        );
    }

    #[test]
    fn writes_holding_a_nul_anywhere_are_refused_by_field() {
        assert!(check_write("name", &s("ab")).is_ok());
        for value in [
            s("a\0b"),
            Value::Json(serde_json::json!({"k": ["x", "y\u{0}"]})),
            Value::Json(serde_json::json!({"k\u{0}": 1})),
            Value::Array(vec![s("ok"), s("\0")]),
        ] {
            let Err(Error::Validation(message)) = check_write("name", &value) else {
                panic!("{value:?} was accepted");
            };
            assert!(message.contains("\"name\""), "{message}");
        }
    }
}
