//! Values as the console shows them (text in the user's timezone) and as form inputs, and form
//! text back to the JSON attribute a write body carries, with a message per field when it does
//! not read.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, TimeZone as _};
use chrono_tz::Tz;
use serde_json::Value as Json;

use crate::datasource::query::ValueKind;
use crate::datasource::schema::{ColumnSchema, ColumnType, PrimitiveType};
use crate::datasource::{CollectionSchema, DataSourceSchema, Operator, Record, Value};

/// A value as text, dates in `tz`.
pub fn display(value: &Value, tz: Tz) -> String {
    match value {
        Value::Null => String::new(),
        Value::Bool(true) => "Yes".to_owned(),
        Value::Bool(false) => "No".to_owned(),
        Value::Date(date) => date
            .with_timezone(&tz)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
        Value::Binary(bytes) => format!("({} bytes)", bytes.len()),
        Value::Point(x, y) => format!("({x}, {y})"),
        Value::Array(items) => items
            .iter()
            .map(|item| display(item, tz))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Record(_) => String::new(),
        other => other.to_id_string(),
    }
}

/// Column names a person recognises a record by, in order of preference.
const LABELS: [&str; 8] = [
    "name",
    "full_name",
    "fullName",
    "title",
    "label",
    "email",
    "reference",
    "code",
];

/// The column a record is named by in links: a name-like column, else the first key.
pub fn label_column(collection: &CollectionSchema) -> Option<&str> {
    LABELS
        .iter()
        .find(|name| collection.column(name).is_some())
        .copied()
        .or_else(|| collection.primary_keys().first().copied())
}

/// The text of a link to `record` of `collection`.
pub fn label(collection: &CollectionSchema, record: &Record, tz: Tz) -> String {
    let text = label_column(collection)
        .and_then(|column| record.get(column))
        .map(|value| display(value, tz))
        .unwrap_or_default();
    if text.is_empty() {
        crate::datasource::pack_id(collection, record).unwrap_or_default()
    } else {
        text
    }
}

/// How a column is edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputKind {
    Text,
    Number,
    /// Yes / No (and empty when nullable).
    Boolean,
    /// One of the enum's values.
    Select(Vec<String>),
    /// `datetime-local`, in the user's timezone.
    DateTime,
    Date,
    Time,
    /// A textarea of JSON (JSON columns, arrays, composites).
    Json,
    /// Not editable here (binary, points): shown, never sent.
    ReadOnly,
}

pub fn input_kind(column: &ColumnSchema) -> InputKind {
    match &column.column_type {
        ColumnType::Primitive(p) => match p {
            PrimitiveType::String | PrimitiveType::Uuid => InputKind::Text,
            PrimitiveType::Number => InputKind::Number,
            PrimitiveType::Boolean => InputKind::Boolean,
            PrimitiveType::Enum => InputKind::Select(column.enum_values.clone()),
            PrimitiveType::Date => InputKind::DateTime,
            PrimitiveType::Dateonly => InputKind::Date,
            PrimitiveType::Time => InputKind::Time,
            PrimitiveType::Json => InputKind::Json,
            PrimitiveType::Point | PrimitiveType::Binary => InputKind::ReadOnly,
        },
        ColumnType::Array(inner)
            if matches!(**inner, ColumnType::Primitive(PrimitiveType::Binary)) =>
        {
            InputKind::ReadOnly
        }
        ColumnType::Array(_) | ColumnType::Composite(_) => InputKind::Json,
    }
}

/// A value as its form input's text.
pub fn input_text(value: &Value, kind: &InputKind, tz: Tz) -> String {
    match (kind, value) {
        (_, Value::Null) => String::new(),
        (InputKind::Boolean, Value::Bool(b)) => b.to_string(),
        (InputKind::DateTime, Value::Date(date)) => date
            .with_timezone(&tz)
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string(),
        (InputKind::Time, Value::Time(time)) => time.format("%H:%M:%S").to_string(),
        (InputKind::Json, Value::Json(json)) => {
            serde_json::to_string_pretty(json).unwrap_or_default()
        }
        (InputKind::Json, other) => serde_json::to_string_pretty(other).unwrap_or_default(),
        (_, other) => display(other, tz),
    }
}

/// Form text back to a write body's JSON attribute, or the message shown next to the field.
/// An empty input is `null` (the datasource says so when the column needs a value).
pub fn parse_input(
    text: &str,
    kind: &InputKind,
    column: &ColumnSchema,
    tz: Tz,
) -> Result<Json, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() && !matches!(kind, InputKind::Text) {
        return Ok(Json::Null);
    }
    match kind {
        InputKind::Text => {
            if text.is_empty() && column.allow_null {
                Ok(Json::Null)
            } else {
                Ok(Json::String(text.to_owned()))
            }
        }
        InputKind::Number => {
            // Integers as strings keep every digit (bigint columns); others as JSON numbers.
            let digits = trimmed.strip_prefix('-').unwrap_or(trimmed);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                return Ok(Json::String(trimmed.to_owned()));
            }
            match serde_json::from_str::<Json>(trimmed) {
                Ok(number @ Json::Number(_)) => Ok(number),
                _ => Err(format!(
                    "Enter a number (for example 42 or 12.5), not \"{trimmed}\"."
                )),
            }
        }
        InputKind::Boolean => match trimmed {
            "true" => Ok(Json::Bool(true)),
            "false" => Ok(Json::Bool(false)),
            _ => Err("Choose Yes or No.".to_owned()),
        },
        InputKind::Select(values) => {
            if values.iter().any(|v| v == trimmed) {
                Ok(Json::String(trimmed.to_owned()))
            } else {
                Err(format!("Choose one of: {}.", values.join(", ")))
            }
        }
        InputKind::DateTime => {
            let local = NaiveDateTime::parse_from_str(trimmed, "%Y-%m-%dT%H:%M:%S")
                .or_else(|_| NaiveDateTime::parse_from_str(trimmed, "%Y-%m-%dT%H:%M"))
                .map_err(|_| {
                    format!("Enter a date and time (YYYY-MM-DD HH:MM), not \"{trimmed}\".")
                })?;
            let date = tz
                .from_local_datetime(&local)
                .earliest()
                .ok_or_else(|| format!("{trimmed} does not exist in {tz} (a clock change)."))?;
            Ok(Json::String(crate::datasource::format_datetime(
                &date.with_timezone(&chrono::Utc),
            )))
        }
        InputKind::Date => NaiveDate::parse_from_str(trimmed, "%Y-%m-%d")
            .map(|d| Json::String(d.format("%Y-%m-%d").to_string()))
            .map_err(|_| format!("Enter a date (YYYY-MM-DD), not \"{trimmed}\".")),
        InputKind::Time => NaiveTime::parse_from_str(trimmed, "%H:%M:%S")
            .or_else(|_| NaiveTime::parse_from_str(trimmed, "%H:%M"))
            .map(|t| Json::String(t.format("%H:%M:%S").to_string()))
            .map_err(|_| format!("Enter a time (HH:MM), not \"{trimmed}\".")),
        InputKind::Json => {
            serde_json::from_str(trimmed).map_err(|e| format!("This is not valid JSON: {e}."))
        }
        InputKind::ReadOnly => Err("This field cannot be edited here.".to_owned()),
    }
}

/// The operators of a filter builder's list, with a label each.
pub fn operator_label(snake: &str) -> String {
    snake.replace('_', " ")
}

/// A field offered by a condition builder (the table's filters, the permission editor's
/// conditions and scopes), with the operators it supports.
pub struct FilterField {
    pub path: String,
    pub label: String,
    /// Snake-case operators, space-separated (read by the script to narrow the operator list).
    pub operators: String,
}

/// The fields of `collection` that take a condition: its columns with operators, and those of
/// its first-level to-one relations (`customer:email`).
pub fn filter_fields(schema: &DataSourceSchema, collection: &CollectionSchema) -> Vec<FilterField> {
    let mut out = Vec::new();
    let mut push = |path: String, label: String, column: &ColumnSchema| {
        if column.filter_operators.is_empty() {
            return;
        }
        let operators: Vec<String> = Operator::in_agent_order(&column.filter_operators)
            .into_iter()
            .map(Operator::snake_case)
            .collect();
        out.push(FilterField {
            path,
            label,
            operators: operators.join(" "),
        });
    };
    for (name, column) in collection.columns() {
        push(name.clone(), name.clone(), column);
    }
    for (name, relation) in collection.relations() {
        if !relation.is_to_one() {
            continue;
        }
        let Ok(foreign) = schema.collection(relation.foreign_collection()) else {
            continue;
        };
        for (column_name, column) in foreign.columns() {
            push(
                format!("{name}:{column_name}"),
                format!("{name} › {column_name}"),
                column,
            );
        }
    }
    out
}

/// Where a condition is written, which decides how its value reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ConditionUse {
    /// The table's filter builder: applied at once, values as typed.
    Filter,
    /// A stored condition (an action's condition, a team's scope): its values are typed for
    /// their column, may be `{{currentUser.*}}` variables (substituted at each request), and
    /// may not be left empty, since a stored condition is read long after it is written.
    Stored,
}

/// Whether `value` is a `{{…}}` variable (substituted at each request: not typed here).
pub fn is_variable(value: &str) -> bool {
    let value = value.trim();
    value.starts_with("{{") && value.ends_with("}}")
}

/// One row of a condition builder (the table's filters, the permission editor's conditions and
/// scopes) as a leaf of the condition tree, its value shaped as its operator wants it; or the
/// message to show beside the builder.
pub fn condition_leaf(
    schema: &DataSourceSchema,
    collection: &CollectionSchema,
    field: &str,
    operator: &str,
    value: &str,
    usage: ConditionUse,
) -> Result<Json, String> {
    let stored = usage == ConditionUse::Stored;
    let (_, column) = schema
        .resolve_column(collection, field)
        .map_err(|_| format!("There is no field \"{field}\"."))?;
    let parsed: Operator = operator
        .parse()
        .map_err(|_| format!("Choose an operator for \"{field}\"."))?;
    if !column.filter_operators.contains(&parsed) {
        return Err(format!(
            "\"{field}\" cannot be filtered with \"{}\".",
            operator_label(operator)
        ));
    }
    let mut leaf = serde_json::json!({"field": field, "operator": parsed.snake_case()});
    // The filter compares what was typed; a stored condition drops stray spaces.
    let value = if stored { value.trim() } else { value };
    let text = |v: &str| {
        if stored {
            typed(column, v)
        } else {
            Json::String(v.to_owned())
        }
    };
    match parsed.value_kind() {
        ValueKind::None => {}
        ValueKind::List => {
            let items: Vec<Json> = value
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(text)
                .collect();
            if stored && items.is_empty() {
                return Err(format!("\"{field}\" needs at least one value."));
            }
            leaf["value"] = Json::Array(items);
        }
        ValueKind::Number if stored && is_variable(value) => {
            leaf["value"] = Json::String(value.to_owned());
        }
        ValueKind::Number => {
            // An integer stays one, so that the address and the builder show what was typed.
            let value = value.trim();
            leaf["value"] = match value.parse::<i64>() {
                Ok(integer) => Json::from(integer),
                Err(_) => value.parse::<f64>().map(Json::from).map_err(|_| {
                    format!(
                        "\"{}\" on \"{field}\" needs a number.",
                        operator_label(operator)
                    )
                })?,
            };
        }
        _ => {
            if stored && value.is_empty() {
                return Err(format!("\"{field}\" needs a value to compare with."));
            }
            leaf["value"] = text(value);
        }
    }
    Ok(leaf)
}

/// A stored condition's value typed for `column`: a number for a number column, a boolean for a
/// boolean one, text otherwise (and for a variable).
fn typed(column: &ColumnSchema, value: &str) -> Json {
    if is_variable(value) {
        return Json::String(value.to_owned());
    }
    match column.column_type.primitive() {
        Some(PrimitiveType::Number) => value
            .parse::<i64>()
            .map(Json::from)
            .or_else(|_| value.parse::<f64>().map(Json::from))
            .unwrap_or_else(|_| Json::String(value.to_owned())),
        Some(PrimitiveType::Boolean) => match value {
            "true" => Json::Bool(true),
            "false" => Json::Bool(false),
            _ => Json::String(value.to_owned()),
        },
        _ => Json::String(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::schema::ColumnSchema;

    fn column(ty: PrimitiveType) -> ColumnSchema {
        ColumnSchema::new(ty)
    }

    /// `orders` with a number `total` (equal, in, greater than) and a string `status` (equal,
    /// longer than: an operator whose value is a number whatever the column).
    fn orders() -> DataSourceSchema {
        use crate::datasource::schema::FieldSchema;
        let mut total = column(PrimitiveType::Number);
        total.filter_operators = [Operator::Equal, Operator::In, Operator::GreaterThan].into();
        let mut status = column(PrimitiveType::String);
        status.filter_operators = [Operator::Equal, Operator::LongerThan].into();
        let mut orders = CollectionSchema::new("orders");
        orders.fields.extend([
            ("total".to_owned(), FieldSchema::Column(total)),
            ("status".to_owned(), FieldSchema::Column(status)),
        ]);
        DataSourceSchema {
            collections: [("orders".to_owned(), orders)].into_iter().collect(),
            charts: Vec::new(),
        }
    }

    #[test]
    fn a_condition_row_reads_as_a_leaf_for_the_filter_and_for_a_stored_condition() {
        use ConditionUse::{Filter, Stored};
        use serde_json::json;
        let schema = orders();
        let orders = schema.collection("orders").unwrap();
        let leaf = |field, operator, value, usage| {
            condition_leaf(&schema, orders, field, operator, value, usage)
        };
        let value = |field, operator, text, usage| {
            leaf(field, operator, text, usage).unwrap()["value"].clone()
        };
        // The filter sends what was typed (the datasource reads it for the column); a stored
        // condition is typed for its column once, trimmed.
        assert_eq!(
            leaf("total", "greater_than", " 12 ", Filter),
            Ok(json!({"field": "total", "operator": "greater_than", "value": " 12 "}))
        );
        assert_eq!(value("total", "greater_than", " 12 ", Stored), json!(12));
        assert_eq!(value("total", "in", "1, 2.5", Stored), json!([1, 2.5]));
        assert_eq!(value("total", "in", "1, 2.5", Filter), json!(["1", "2.5"]));
        // An operator whose value is a number reads one in both; a variable only when stored.
        assert_eq!(value("status", "longer_than", " 3 ", Filter), json!(3));
        assert_eq!(
            value("status", "longer_than", "{{currentUser.id}}", Stored),
            json!("{{currentUser.id}}")
        );
        assert_eq!(
            leaf("status", "longer_than", "{{currentUser.id}}", Filter),
            Err("\"longer than\" on \"status\" needs a number.".to_owned())
        );
        assert_eq!(
            value("total", "greater_than", "{{currentUser.id}}", Stored),
            json!("{{currentUser.id}}")
        );
        // What does not read says why.
        assert_eq!(
            leaf("nope", "equal", "1", Filter),
            Err("There is no field \"nope\".".to_owned())
        );
        assert_eq!(
            leaf("status", "greater_than", "a", Filter),
            Err("\"status\" cannot be filtered with \"greater than\".".to_owned())
        );
        assert_eq!(
            leaf("status", "equal", " ", Stored),
            Err("\"status\" needs a value to compare with.".to_owned())
        );
        assert_eq!(
            leaf("total", "in", " , ", Stored),
            Err("\"total\" needs at least one value.".to_owned())
        );
    }

    #[test]
    fn numbers_keep_integers_as_strings_and_refuse_words() {
        let number = column(PrimitiveType::Number);
        let parse = |text| parse_input(text, &InputKind::Number, &number, Tz::UTC);
        assert_eq!(
            parse("9007199254740993"),
            Ok(Json::String("9007199254740993".into()))
        );
        assert_eq!(parse("12.5"), Ok(serde_json::json!(12.5)));
        assert_eq!(parse(""), Ok(Json::Null));
        assert!(parse("abc").unwrap_err().starts_with("Enter a number"));
    }

    #[test]
    fn date_times_are_read_in_the_users_timezone_and_shown_back_in_it() {
        let date = column(PrimitiveType::Date);
        let paris: Tz = "Europe/Paris".parse().unwrap_or(Tz::UTC);
        let parsed = parse_input("2024-07-01T10:30", &InputKind::DateTime, &date, paris);
        assert_eq!(parsed, Ok(Json::String("2024-07-01T08:30:00.000Z".into())));
        let value = Value::Date(
            crate::datasource::parse_datetime("2024-07-01T08:30:00Z").unwrap_or_default(),
        );
        assert_eq!(
            input_text(&value, &InputKind::DateTime, paris),
            "2024-07-01T10:30:00"
        );
        assert_eq!(display(&value, paris), "2024-07-01 10:30:00");
        // A local time skipped by a clock change is refused, not shifted.
        let gap = parse_input("2024-03-31T02:30", &InputKind::DateTime, &date, paris);
        assert!(gap.unwrap_err().contains("does not exist"));
    }

    #[test]
    fn enums_booleans_and_json_are_checked() {
        let mut status = column(PrimitiveType::Enum);
        status.enum_values = vec!["paid".into(), "shipped".into()];
        let kind = input_kind(&status);
        assert_eq!(
            parse_input("paid", &kind, &status, Tz::UTC),
            Ok(Json::String("paid".into()))
        );
        assert!(parse_input("lost", &kind, &status, Tz::UTC).is_err());
        let flag = column(PrimitiveType::Boolean);
        assert_eq!(
            parse_input("true", &InputKind::Boolean, &flag, Tz::UTC),
            Ok(Json::Bool(true))
        );
        assert!(parse_input("maybe", &InputKind::Boolean, &flag, Tz::UTC).is_err());
        let json = column(PrimitiveType::Json);
        assert_eq!(
            parse_input("{\"a\": 1}", &InputKind::Json, &json, Tz::UTC),
            Ok(serde_json::json!({"a": 1}))
        );
        assert!(
            parse_input("{a", &InputKind::Json, &json, Tz::UTC)
                .unwrap_err()
                .contains("not valid JSON")
        );
    }
}
