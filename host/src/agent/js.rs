//! JavaScript's conversions of JSON values, where the agent's wire output depends on them:
//! `String(v)` (error messages, search highlighting, CSV cells, body parameters),
//! `Number.prototype.toString` and truthiness. One place, so every module prints the same text.

use serde_json::Value as Json;

/// `Number.prototype.toString()` (ECMA-262 Number::toString): the shortest round-tripping
/// digits, plain notation for exponents in [-7, 21), `1e+21` style outside; `-0` prints `0`.
pub(crate) fn number(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if f == 0.0 {
        return "0".to_owned();
    }
    // Rust's `{:e}` yields the same shortest digits as JavaScript, as `d.ddde±x`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    let n = exponent + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        format!("{int}.{frac}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let sign = if e >= 0 { '+' } else { '-' };
        let (first, rest) = digits.split_at(1);
        if rest.is_empty() {
            format!("{first}e{sign}{}", e.abs())
        } else {
            format!("{first}.{rest}e{sign}{}", e.abs())
        }
    };
    if f < 0.0 { format!("-{body}") } else { body }
}

/// `String(v)` of a JSON value: arrays join their items with `,` (null items empty), objects are
/// `[object Object]`. Integers print exactly (the agent receives big ones as strings anyway).
pub(crate) fn string(value: &Json) -> String {
    string_with_objects(value, &|_| "[object Object]".to_owned())
}

/// `String(v)`, with objects (also inside arrays) printed by `object`; the CSV export writes
/// them as JSON.
pub(crate) fn string_with_objects(value: &Json, object: &dyn Fn(&Json) -> String) -> String {
    match value {
        Json::Null => "null".to_owned(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => number(f),
            _ => n.to_string(),
        },
        Json::String(s) => s.clone(),
        Json::Array(items) => items
            .iter()
            .map(|item| match item {
                Json::Null => String::new(),
                other => string_with_objects(other, object),
            })
            .collect::<Vec<_>>()
            .join(","),
        Json::Object(_) => object(value),
    }
}

/// JavaScript truthiness of a JSON value.
pub(crate) fn truthy(value: &Json) -> bool {
    match value {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Json::String(s) => !s.is_empty(),
        Json::Array(_) | Json::Object(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        assert_eq!(number(12.0), "12");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(-0.0), "0");
        assert_eq!(number(1e21), "1e+21");
        assert_eq!(number(1e-7), "1e-7");
        assert_eq!(number(0.000001), "0.000001");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn string_follows_javascript() {
        assert_eq!(
            string(&json!([1, null, "a", true, [2, 3]])),
            "1,,a,true,2,3"
        );
        assert_eq!(string(&json!({ "a": 1 })), "[object Object]");
        assert_eq!(string(&json!(2.0)), "2");
        assert_eq!(string(&json!(null)), "null");
        let as_json = |v: &Json| v.to_string();
        assert_eq!(
            string_with_objects(&json!([{ "a": 1 }]), &as_json),
            r#"{"a":1}"#
        );
    }

    #[test]
    fn truthiness_follows_javascript() {
        for falsy in [json!(null), json!(false), json!(0), json!("")] {
            assert!(!truthy(&falsy), "{falsy}");
        }
        for truthy_value in [json!(true), json!(1), json!("0"), json!([]), json!({})] {
            assert!(truthy(&truthy_value), "{truthy_value}");
        }
    }
}
