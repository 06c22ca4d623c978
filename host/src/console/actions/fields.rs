//! An action's form as inputs, and the posted inputs back to the form values the action reads.
//!
//! Every field type of the forms has an input: text, long text (`TextArea`, `RichText`, JSON),
//! number, yes/no, a choice (enum, dropdown and radio options), several choices (enum lists,
//! checkbox groups), lines (string and number lists), date, date and time, time, colour, a
//! record id (collection fields), and files. A file is read by the console's script into a data
//! URI (`data:<mime>;name=<name>;base64,…`, what the actions receive from the agent's routes) in
//! a hidden input, since the console posts URL-encoded forms only. Inputs are named
//! `v:<field id>`.

use chrono::{NaiveDate, NaiveDateTime, TimeZone as _};
use chrono_tz::Tz;
use serde_json::{Value as Json, json};

use crate::datasource::action::{FieldType, FormElement, FormField, FormValues, Widget};

/// One input of the form page.
pub struct Input {
    /// The field's id (the key of its value).
    pub id: String,
    /// The element id of the input (`a-<n>`).
    pub html_id: String,
    pub label: String,
    pub description: String,
    /// text, textarea, number, boolean, select, multi, lines, date, datetime, time, color, file,
    /// files, readonly.
    pub kind: &'static str,
    pub value: String,
    /// `(value, label)` of a choice.
    pub options: Vec<(String, String)>,
    /// The chosen values of a multiple choice.
    pub chosen: Vec<String>,
    pub required: bool,
    pub min: String,
    pub max: String,
    pub step: String,
    pub placeholder: String,
    /// The file types a file input accepts (`.pdf,.png`).
    pub accept: String,
    pub hint: String,
    pub error: Option<String>,
}

/// A piece of the form: fields (one, or a row of them), a separator, an HTML block (sanitized),
/// or the start or end of a page of a multi-page form (the blocks between them are the page's).
pub struct Block {
    /// field, row, separator, html, page (a page starts), page-end.
    pub kind: &'static str,
    pub inputs: Vec<Input>,
    pub html: String,
    pub heading: String,
    /// A page's number (1-based) and the form's number of pages.
    pub page: usize,
    pub pages: usize,
    /// A page's buttons (the agent's `nextButtonLabel`, `previousButtonLabel`, else ours).
    pub next: String,
    pub previous: String,
}

/// The posted text of each field (`v:<id>`), several for multiple choices.
pub type Pairs = Vec<(String, String)>;

/// Whether a field of `form` is required: the form then says what its asterisk means.
pub fn any_required(form: &[FormElement]) -> bool {
    form.iter()
        .flat_map(FormElement::fields)
        .any(|field| field.is_required)
}

/// What the user posted for field `id`.
fn posted<'a>(pairs: &'a [(String, String)], id: &str) -> Vec<&'a str> {
    let key = format!("v:{id}");
    pairs
        .iter()
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Whether the user posted anything for field `id` (a form that was submitted, not opened).
fn was_posted(pairs: &[(String, String)], id: &str) -> bool {
    let key = format!("v:{id}");
    pairs.iter().any(|(k, _)| *k == key)
}

/// The blocks of a form, each input showing what the user typed when they posted the form,
/// else the form's value (its default, or the value a hook computed).
pub fn blocks(
    form: &[FormElement],
    pairs: &[(String, String)],
    errors: &[(String, String)],
    tz: Tz,
) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut n = 0;
    let pages = form
        .iter()
        .filter(|e| matches!(e, FormElement::Page { .. }))
        .count();
    for element in form {
        push(element, pairs, errors, tz, &mut n, &mut blocks);
    }
    for block in &mut blocks {
        block.pages = pages;
    }
    blocks
}

fn push(
    element: &FormElement,
    pairs: &[(String, String)],
    errors: &[(String, String)],
    tz: Tz,
    n: &mut usize,
    blocks: &mut Vec<Block>,
) {
    let block = |kind, inputs, html: String, heading: String| Block {
        kind,
        inputs,
        html,
        heading,
        page: 0,
        pages: 0,
        next: String::new(),
        previous: String::new(),
    };
    match element {
        FormElement::Field(field) => {
            *n += 1;
            let input = input(field, pairs, errors, tz, *n);
            blocks.push(block("field", vec![input], String::new(), String::new()));
        }
        FormElement::Row { fields } => {
            let inputs = fields
                .iter()
                .map(|field| {
                    *n += 1;
                    input(field, pairs, errors, tz, *n)
                })
                .collect();
            blocks.push(block("row", inputs, String::new(), String::new()));
        }
        FormElement::Separator => {
            blocks.push(block("separator", Vec::new(), String::new(), String::new()));
        }
        FormElement::HtmlBlock { content } => blocks.push(block(
            "html",
            Vec::new(),
            ammonia::clean(content),
            String::new(),
        )),
        FormElement::Page {
            elements,
            next_button_label,
            previous_button_label,
        } => {
            // Every page is in the document (the form posts every value, and works without the
            // script, which shows one page at a time with its Next and Back buttons).
            let page = blocks.iter().filter(|b| b.kind == "page").count() + 1;
            let mut start = block("page", Vec::new(), String::new(), format!("Step {page}"));
            start.page = page;
            start.next = next_button_label
                .clone()
                .filter(|l| !l.trim().is_empty())
                .unwrap_or_else(|| "Next".to_owned());
            start.previous = previous_button_label
                .clone()
                .filter(|l| !l.trim().is_empty())
                .unwrap_or_else(|| "Back".to_owned());
            let (next, previous) = (start.next.clone(), start.previous.clone());
            blocks.push(start);
            for element in elements {
                push(element, pairs, errors, tz, n, blocks);
            }
            let mut end = block("page-end", Vec::new(), String::new(), String::new());
            end.page = page;
            end.next = next;
            end.previous = previous;
            blocks.push(end);
        }
    }
}

/// An option of a widget: `{value, label}` or a bare value.
fn option(value: &Json) -> (String, String) {
    let text = |v: &Json| match v {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        other => other.to_string(),
    };
    match value.get("value") {
        Some(v) => {
            let label = value.get("label").map_or_else(|| text(v), text);
            (text(v), label)
        }
        None => (text(value), text(value)),
    }
}

fn number_text(n: Option<f64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

/// The text of a value in an input of `kind`.
fn value_text(value: &Json, kind: &str, tz: Tz) -> String {
    match (value, kind) {
        (Json::Null, _) => String::new(),
        (Json::String(s), "datetime") => chrono::DateTime::parse_from_rfc3339(s)
            .map(|d| d.with_timezone(&tz).format("%Y-%m-%dT%H:%M").to_string())
            .unwrap_or_else(|_| s.clone()),
        (Json::String(s), "date") => s.get(..10).unwrap_or(s).to_owned(),
        (Json::String(s), _) => s.clone(),
        (Json::Array(items), "lines") => items
            .iter()
            .map(|i| value_text(i, "text", tz))
            .collect::<Vec<_>>()
            .join("\n"),
        (Json::Array(_) | Json::Object(_), "textarea") => {
            serde_json::to_string_pretty(value).unwrap_or_default()
        }
        (other, _) => other.to_string(),
    }
}

fn input(
    field: &FormField,
    pairs: &[(String, String)],
    errors: &[(String, String)],
    tz: Tz,
    n: usize,
) -> Input {
    let mut input = Input {
        id: field.id.clone(),
        html_id: format!("a-{n}"),
        label: field.label.clone(),
        description: field.description.clone().unwrap_or_default(),
        kind: "text",
        value: String::new(),
        options: Vec::new(),
        chosen: Vec::new(),
        required: field.is_required,
        min: String::new(),
        max: String::new(),
        step: String::new(),
        placeholder: String::new(),
        accept: String::new(),
        hint: String::new(),
        error: errors
            .iter()
            .find(|(id, _)| *id == field.id)
            .map(|(_, e)| e.clone()),
    };
    let enum_options = || {
        field
            .enum_values
            .iter()
            .flatten()
            .map(|v| (v.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    input.kind = match field.field_type {
        FieldType::Boolean => "boolean",
        FieldType::Number => "number",
        FieldType::Date => "datetime",
        FieldType::Dateonly => "date",
        FieldType::Time => "time",
        FieldType::Enum => {
            input.options = enum_options();
            "select"
        }
        FieldType::EnumList => {
            input.options = enum_options();
            "multi"
        }
        FieldType::File => "file",
        FieldType::FileList => "files",
        FieldType::Json => "textarea",
        FieldType::StringList | FieldType::NumberList => "lines",
        FieldType::Collection => {
            input.hint = format!(
                "The id of a record of {}.",
                field.collection_name.as_deref().unwrap_or("the collection")
            );
            "text"
        }
        FieldType::String => "text",
    };
    match &field.widget {
        Some(Widget::TextArea { placeholder, .. } | Widget::RichText { placeholder }) => {
            input.kind = "textarea";
            input.placeholder = placeholder.clone().unwrap_or_default();
        }
        Some(Widget::Dropdown {
            options,
            placeholder,
            ..
        }) => {
            if !options.is_empty() {
                input.options = options.iter().map(option).collect();
                input.kind = if input.kind == "lines" || input.kind == "multi" {
                    "multi"
                } else {
                    "select"
                };
            }
            input.placeholder = placeholder.clone().unwrap_or_default();
        }
        Some(Widget::RadioGroup { options }) => {
            input.options = options.iter().map(option).collect();
            input.kind = "select";
        }
        Some(Widget::CheckboxGroup { options }) => {
            input.options = options.iter().map(option).collect();
            input.kind = "multi";
        }
        Some(
            Widget::NumberInput {
                placeholder,
                min,
                max,
                step,
            }
            | Widget::CurrencyInput {
                placeholder,
                min,
                max,
                step,
                ..
            },
        ) => {
            input.min = number_text(*min);
            input.max = number_text(*max);
            input.step = number_text(*step);
            input.placeholder = placeholder.clone().unwrap_or_default();
        }
        Some(Widget::ColorPicker { placeholder, .. }) => {
            input.kind = "color";
            input.placeholder = placeholder.clone().unwrap_or_default();
        }
        Some(
            Widget::TextInput { placeholder }
            | Widget::AddressAutocomplete { placeholder }
            | Widget::UserDropdown { placeholder }
            | Widget::DatePicker { placeholder, .. },
        ) => input.placeholder = placeholder.clone().unwrap_or_default(),
        Some(Widget::FilePicker {
            extensions,
            max_size_mb,
            ..
        }) => {
            input.accept = extensions
                .iter()
                .map(|e| format!(".{}", e.trim_start_matches('.')))
                .collect::<Vec<_>>()
                .join(",");
            if let Some(mb) = max_size_mb {
                input.hint = format!("At most {mb} MB.");
            }
        }
        _ => {}
    }
    if input.kind == "file" || input.kind == "files" {
        let more = "Choosing a file needs JavaScript: the browser reads it into the form.";
        input.hint = if input.hint.is_empty() {
            more.to_owned()
        } else {
            format!("{} {more}", input.hint)
        };
    }
    if field.is_read_only {
        input.kind = "readonly";
    }
    if was_posted(pairs, &field.id) {
        let values = posted(pairs, &field.id);
        input.chosen = values.iter().map(|v| (*v).to_owned()).collect();
        input.value = values.first().map(|v| (*v).to_owned()).unwrap_or_default();
    } else if let Some(value) = &field.value {
        input.value = value_text(value, input.kind, tz);
        input.chosen = match value {
            Json::Array(items) => items.iter().map(|i| value_text(i, "text", tz)).collect(),
            Json::Null => Vec::new(),
            other => vec![value_text(other, "text", tz)],
        };
    }
    input
}

/// Every field of a form, depth first.
pub fn all_fields(form: &[FormElement]) -> Vec<&FormField> {
    form.iter().flat_map(FormElement::fields).collect()
}

/// The form values of the posted inputs, read by the type of each field of `form`, and a
/// message per field that does not read. Fields not posted are left out (the action reads
/// them as absent).
pub fn values(
    form: &[FormElement],
    pairs: &[(String, String)],
    tz: Tz,
) -> (FormValues, Vec<(String, String)>) {
    let mut values = FormValues::new();
    let mut errors = Vec::new();
    for field in all_fields(form) {
        if field.is_read_only || !was_posted(pairs, &field.id) {
            continue;
        }
        let texts = posted(pairs, &field.id);
        match value(field, &texts, tz) {
            Ok(Some(value)) => {
                values.insert(field.id.clone(), value);
            }
            Ok(None) => {}
            Err(message) => errors.push((field.id.clone(), message)),
        }
    }
    (values, errors)
}

/// One field's value from its posted texts; `None` when it was left empty.
fn value(field: &FormField, texts: &[&str], tz: Tz) -> Result<Option<Json>, String> {
    let text = texts.first().copied().unwrap_or("").trim();
    let multi = matches!(
        field.field_type,
        FieldType::EnumList | FieldType::StringList | FieldType::NumberList | FieldType::FileList
    );
    if multi {
        // Several choices arrive as several values; lines as one text.
        let items: Vec<&str> =
            if texts.len() == 1 && !matches!(field.field_type, FieldType::FileList) {
                texts[0]
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect()
            } else {
                texts.iter().copied().filter(|t| !t.is_empty()).collect()
            };
        if items.is_empty() {
            return Ok(None);
        }
        return match field.field_type {
            FieldType::NumberList => items
                .iter()
                .map(|i| number(i))
                .collect::<Result<Vec<_>, _>>()
                .map(|n| Some(json!(n))),
            FieldType::FileList => {
                // The script writes the files as one JSON array of data URIs.
                let uris: Vec<Json> = items
                    .iter()
                    .flat_map(|i| match serde_json::from_str::<Json>(i) {
                        Ok(Json::Array(uris)) => uris,
                        _ => vec![json!(i)],
                    })
                    .collect();
                Ok(Some(Json::Array(uris)))
            }
            _ => Ok(Some(json!(items))),
        };
    }
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(match field.field_type {
        FieldType::Number => number(text)?,
        FieldType::Boolean => match text {
            "true" => json!(true),
            "false" => json!(false),
            _ => return Err("Choose yes or no.".to_owned()),
        },
        FieldType::Json => {
            serde_json::from_str(text).map_err(|e| format!("This is not valid JSON: {e}."))?
        }
        FieldType::Date => {
            let local = NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M")
                .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S"))
                .map_err(|_| "Enter a date and time.".to_owned())?;
            let instant = tz
                .from_local_datetime(&local)
                .earliest()
                .ok_or_else(|| "This time does not exist in your timezone.".to_owned())?;
            json!(instant.with_timezone(&chrono::Utc).to_rfc3339())
        }
        FieldType::Dateonly => {
            NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .map_err(|_| "Enter a date (year-month-day).".to_owned())?;
            json!(text)
        }
        FieldType::File => {
            if !text.starts_with("data:") {
                return Err("Choose a file again.".to_owned());
            }
            json!(text)
        }
        _ => json!(text),
    }))
}

fn number(text: &str) -> Result<Json, String> {
    let n: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number."))?;
    if !n.is_finite() {
        return Err(format!("{text:?} is not a number."));
    }
    Ok(json!(n))
}

/// A message for each required field of `shown` that has no value.
pub fn missing(shown: &[FormElement], values: &FormValues) -> Vec<(String, String)> {
    all_fields(shown)
        .into_iter()
        .filter(|f| f.is_required && !f.is_read_only)
        .filter(|f| {
            values.get(&f.id).is_none_or(|v| {
                v.is_null() || v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty)
            })
        })
        .map(|f| (f.id.clone(), format!("{} is required.", f.label)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Vec<FormElement> {
        let mut amount = FormField::new("Amount", FieldType::Number);
        amount.is_required = true;
        let mut kind = FormField::new("Kind", FieldType::Enum);
        kind.enum_values = Some(vec!["Fixed".into(), "Percent".into()]);
        vec![
            FormElement::Field(amount),
            FormElement::Field(kind),
            FormElement::Row {
                fields: vec![
                    FormField::new("When", FieldType::Date),
                    FormField::new("Tags", FieldType::StringList),
                ],
            },
            FormElement::Field(FormField::new("Ok", FieldType::Boolean)),
            FormElement::Field(FormField::new("Doc", FieldType::File)),
        ]
    }

    fn pairs(list: &[(&str, &str)]) -> Pairs {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn posted_inputs_read_by_field_type_in_the_users_timezone() {
        let posted = pairs(&[
            ("v:Amount", "75"),
            ("v:Kind", "Percent"),
            ("v:When", "2026-03-01T10:30"),
            ("v:Tags", "a\n\nb "),
            ("v:Ok", "true"),
            ("v:Doc", "data:text/plain;name=a.txt;base64,aGk="),
        ]);
        let (values, errors) = values(&form(), &posted, chrono_tz::Europe::Paris);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(values["Amount"], json!(75.0));
        assert_eq!(values["Kind"], json!("Percent"));
        assert_eq!(values["When"], json!("2026-03-01T09:30:00+00:00"));
        assert_eq!(values["Tags"], json!(["a", "b"]));
        assert_eq!(values["Ok"], json!(true));
        assert!(
            values["Doc"]
                .as_str()
                .unwrap()
                .starts_with("data:text/plain")
        );
    }

    #[test]
    fn unreadable_and_missing_required_values_get_a_message_each() {
        let posted = pairs(&[("v:Amount", "lots"), ("v:Doc", "C:\\fakepath\\a.txt")]);
        let (values, errors) = values(&form(), &posted, chrono_tz::UTC);
        assert!(values.is_empty());
        let ids: Vec<&str> = errors.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["Amount", "Doc"]);
        let missing = missing(&form(), &FormValues::new());
        assert_eq!(
            missing,
            [("Amount".to_owned(), "Amount is required.".to_owned())]
        );
    }

    #[test]
    fn a_form_of_pages_marks_each_page_with_its_buttons_and_keeps_every_field() {
        let mut tracking = FormField::new("Tracking", FieldType::String);
        tracking.is_required = true;
        let form = vec![
            FormElement::Page {
                next_button_label: Some("On to the customer".into()),
                previous_button_label: None,
                elements: vec![FormElement::Field(tracking)],
            },
            FormElement::Page {
                next_button_label: None,
                previous_button_label: Some("  ".into()),
                elements: vec![FormElement::Field(FormField::new(
                    "Note",
                    FieldType::String,
                ))],
            },
        ];
        let shown = blocks(&form, &Vec::new(), &[], chrono_tz::UTC);
        let kinds: Vec<&str> = shown.iter().map(|b| b.kind).collect();
        assert_eq!(
            kinds,
            ["page", "field", "page-end", "page", "field", "page-end"]
        );
        assert!(shown.iter().all(|b| b.pages == 2));
        assert_eq!((shown[0].page, shown[0].heading.as_str()), (1, "Step 1"));
        assert_eq!(shown[2].next, "On to the customer");
        // A blank label is the console's own.
        assert_eq!((shown[5].page, shown[5].previous.as_str()), (2, "Back"));
        // Every page's fields are read and checked, whatever page the person is on.
        let missing = missing(&form, &FormValues::new());
        assert_eq!(missing.len(), 1);
        let (values, _) = values(&form, &pairs(&[("v:Note", "hi")]), chrono_tz::UTC);
        assert_eq!(values["Note"], json!("hi"));
    }

    #[test]
    fn inputs_show_what_was_typed_else_the_forms_value_and_sanitize_html() {
        let mut form = form();
        if let FormElement::Field(amount) = &mut form[0] {
            amount.value = Some(json!(10));
        }
        form.push(FormElement::HtmlBlock {
            content: "<b>hi</b><script>alert(1)</script>".into(),
        });
        let shown = blocks(&form, &Vec::new(), &[], chrono_tz::UTC);
        assert_eq!(shown[0].inputs[0].value, "10");
        assert!(shown[0].inputs[0].required);
        assert_eq!(shown[1].inputs[0].kind, "select");
        assert_eq!(shown[2].kind, "row");
        assert_eq!(shown.last().unwrap().html, "<b>hi</b>");
        let typed = blocks(&form, &pairs(&[("v:Amount", "7")]), &[], chrono_tz::UTC);
        assert_eq!(typed[0].inputs[0].value, "7");
    }
}
