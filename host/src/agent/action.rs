//! Actions on the wire (§1.2, §2.7, §6.6, §8.9): slugs, ids and endpoints; the action objects of
//! the schema file; the field descriptors and layout of hook responses; the request bodies of
//! execute and hooks; and the response each result builder gives.

use indexmap::IndexMap;
use serde_json::{Map, Value as Json, json};

use super::schema_file::ActionSchemas;
use super::{Error, Result};
use crate::datasource::action::{
    ActionOutcome, ActionSchema, DropdownSearch, FieldType, FormElement, FormField, FormValues,
    Widget,
};
use crate::datasource::{CollectionSchema, DataSourceSchema};

/// The id of the placeholder field of dynamic forms; its value is never a form value.
const LOADING: &str = "Loading...";

/// The most characters of a submit button label.
const SUBMIT_LABEL_MAX: usize = 50;

/// The action's url-safe name: lower-cased, every run of characters outside `[a-z0-9-]` turned
/// into one `-` (`getActionSlug`).
pub fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

/// Where an action lives: `{c}/{index}/{slug}`, or `{c}/{slug}` with `useUnsafeActionEndpoint`.
/// The index is the action's position in the collection's declaration order.
pub fn route_path(collection: &str, index: usize, name: &str, unsafe_endpoint: bool) -> String {
    if unsafe_endpoint {
        format!("{collection}/{}", slug(name))
    } else {
        format!("{collection}/{index}/{}", slug(name))
    }
}

/// The action of `collection` at this route: by index and slug, or by slug alone with the unsafe
/// endpoint. `None` when no action is there (a 404).
pub fn find<'a>(
    collection: &'a CollectionSchema,
    index: Option<&str>,
    action_slug: &str,
) -> Option<(&'a String, &'a ActionSchema)> {
    match index {
        Some(index) => {
            let i: usize = index.parse().ok()?;
            collection
                .actions
                .get_index(i)
                .filter(|(name, _)| slug(name) == action_slug)
        }
        None => collection
            .actions
            .iter()
            .find(|(name, _)| slug(name) == action_slug),
    }
}

/// With `useUnsafeActionEndpoint`, two actions of a collection with the same slug would share a
/// route: the agent refuses to start, and so does Canopy.
pub fn check_unique_slugs(schema: &DataSourceSchema) -> Result<()> {
    for collection in schema.collections.values() {
        let mut seen: IndexMap<String, &str> = IndexMap::new();
        for name in collection.actions.keys() {
            if let Some(other) = seen.insert(slug(name), name) {
                return Err(Error::validation(format!(
                    "The actions '{other}' and '{name}' of the collection '{}' have the same \
                     slug '{}': rename one, or turn useUnsafeActionEndpoint off",
                    collection.name,
                    slug(name)
                )));
            }
        }
    }
    Ok(())
}

/// The schema file's actions, from the collections' declarations (§6.6).
#[derive(Debug, Clone, Copy)]
pub struct SchemaActions<'a> {
    pub schema: &'a DataSourceSchema,
    pub unsafe_endpoint: bool,
}

impl ActionSchemas for SchemaActions<'_> {
    fn actions(&self, collection: &CollectionSchema) -> Result<Vec<Json>> {
        collection
            .actions
            .iter()
            .enumerate()
            .map(|(index, (name, action))| {
                action_json(
                    self.schema,
                    &collection.name,
                    index,
                    name,
                    action,
                    self.unsafe_endpoint,
                )
            })
            .collect()
    }
}

/// One action object of the schema file, keys in the agent's order.
pub fn action_json(
    schema: &DataSourceSchema,
    collection: &str,
    index: usize,
    name: &str,
    action: &ActionSchema,
    unsafe_endpoint: bool,
) -> Result<Json> {
    if let Some(label) = &action.submit_button_label
        && label.chars().count() > SUBMIT_LABEL_MAX
    {
        return Err(Error::validation(
            "Submit button label must have less than 50 characters",
        ));
    }
    let (fields, layout) = match &action.static_form {
        Some(form) => {
            let (mut fields, layout) = form_parts(schema, form)?;
            // The schema shows a static form's values as defaults.
            for field in &mut fields {
                if let Json::Object(map) = field {
                    let value = map.shift_remove("value");
                    map.insert("defaultValue".into(), value.unwrap_or(Json::Null));
                }
            }
            (fields, layout)
        }
        None => (vec![loading_field()], Vec::new()),
    };
    let path = route_path(collection, index, name, unsafe_endpoint);
    let mut out = Map::new();
    out.insert("id".into(), json!(path.replace('/', "-")));
    out.insert("name".into(), json!(name));
    out.insert("type".into(), json!(action.scope.as_str()));
    out.insert("baseUrl".into(), Json::Null);
    out.insert("endpoint".into(), json!(format!("/forest/_actions/{path}")));
    out.insert("httpMethod".into(), json!("POST"));
    out.insert("redirect".into(), Json::Null);
    out.insert("download".into(), json!(action.generate_file));
    out.insert("fields".into(), Json::Array(fields));
    if !layout.is_empty() {
        out.insert("layout".into(), Json::Array(layout));
    }
    if let Some(description) = &action.description {
        out.insert("description".into(), json!(description));
    }
    if let Some(label) = &action.submit_button_label {
        out.insert("submitButtonLabel".into(), json!(label));
    }
    out.insert(
        "hooks".into(),
        json!({"load": action.static_form.is_none(), "change": ["changeHook"]}),
    );
    Ok(Json::Object(out))
}

/// The placeholder field of a dynamic form: the frontend calls `hooks/load` only when an action
/// has fields.
fn loading_field() -> Json {
    json!({
        "field": LOADING, "label": LOADING, "type": "String", "isReadOnly": true,
        "defaultValue": "Form is loading", "description": "", "enums": null, "hook": null,
        "isRequired": false, "reference": null, "widgetEdit": null,
    })
}

/// A hook response: `{fields, layout}` (layout empty unless the form has layout elements).
pub fn form_json(schema: &DataSourceSchema, form: &[FormElement]) -> Result<Json> {
    let (fields, layout) = form_parts(schema, form)?;
    Ok(json!({"fields": fields, "layout": layout}))
}

/// The field descriptors and the layout of a form.
fn form_parts(schema: &DataSourceSchema, form: &[FormElement]) -> Result<(Vec<Json>, Vec<Json>)> {
    let mut fields = Vec::new();
    let mut layout = Vec::new();
    let mut has_layout = false;
    for element in form {
        has_layout |= element.is_layout();
        layout.push(layout_json(schema, element, &mut fields)?);
    }
    if !has_layout {
        layout.clear();
    }
    Ok((fields, layout))
}

/// One layout element; the fields it holds are appended to `fields` and referenced by id.
fn layout_json(
    schema: &DataSourceSchema,
    element: &FormElement,
    fields: &mut Vec<Json>,
) -> Result<Json> {
    Ok(match element {
        FormElement::Field(field) => {
            fields.push(field_json(schema, field)?);
            json!({"component": "input", "fieldId": field.id})
        }
        FormElement::Separator => json!({"component": "separator"}),
        FormElement::HtmlBlock { content } => json!({"component": "htmlBlock", "content": content}),
        FormElement::Row { fields: row } => {
            let inputs = row
                .iter()
                .map(|f| layout_json(schema, &FormElement::Field(f.clone()), fields))
                .collect::<Result<Vec<_>>>()?;
            json!({"component": "row", "fields": inputs})
        }
        FormElement::Page {
            next_button_label,
            previous_button_label,
            elements,
        } => {
            let mut page = Map::new();
            page.insert("component".into(), json!("page"));
            if let Some(label) = next_button_label {
                page.insert("nextButtonLabel".into(), json!(label));
            }
            if let Some(label) = previous_button_label {
                page.insert("previousButtonLabel".into(), json!(label));
            }
            let elements = elements
                .iter()
                .map(|e| layout_json(schema, e, fields))
                .collect::<Result<Vec<_>>>()?;
            page.insert("elements".into(), Json::Array(elements));
            Json::Object(page)
        }
    })
}

/// A field descriptor (`buildFieldSchema`), keys in the agent's order.
pub fn field_json(schema: &DataSourceSchema, field: &FormField) -> Result<Json> {
    let mut out = Map::new();
    out.insert("field".into(), json!(field.id));
    out.insert("label".into(), json!(field.label));
    if let Some(description) = &field.description {
        out.insert("description".into(), json!(description));
    }
    // The agent copies the declared flags and JSON drops the undeclared ones; a plugin only
    // declares them to turn them on, so `false` reads as "not declared" and is left out.
    if field.is_required {
        out.insert("isRequired".into(), json!(true));
    }
    if field.is_read_only {
        out.insert("isReadOnly".into(), json!(true));
    }
    if let Some(value) = wire_value(field) {
        out.insert("value".into(), value);
    }
    if field.watch_changes {
        out.insert("hook".into(), json!("changeHook"));
    }
    match field.field_type {
        FieldType::Collection => {
            let name = field.collection_name.as_deref().ok_or_else(|| {
                Error::validation(format!(
                    "The Collection field '{}' names no collection",
                    field.id
                ))
            })?;
            let collection = schema.collection(name)?;
            let pk = *collection
                .primary_keys()
                .first()
                .ok_or(crate::datasource::Error::NoPrimaryKey)?;
            let column = collection
                .column(pk)
                .ok_or(crate::datasource::Error::NoPrimaryKey)?;
            // Served as the key's column is: a binary key is a `String` (hex) on the wire.
            out.insert(
                "type".into(),
                super::wire::served_type(&column.column_type).to_json(),
            );
            out.insert("reference".into(), json!(format!("{name}.{pk}")));
        }
        other => {
            let name = other.as_str();
            let ty = match name.strip_suffix("List") {
                Some(inner) => json!([inner]),
                None => json!(name),
            };
            out.insert("type".into(), ty);
        }
    }
    if matches!(field.field_type, FieldType::Enum | FieldType::EnumList) {
        out.insert(
            "enums".into(),
            json!(field.enum_values.clone().unwrap_or_default()),
        );
    }
    if let Some(widget) = widget_json(field) {
        out.insert("widgetEdit".into(), widget);
    }
    Ok(Json::Object(out))
}

/// The value as the frontend reads it; enum values outside the field's enum are dropped, as the
/// agent's `valueToForest` does.
fn wire_value(field: &FormField) -> Option<Json> {
    let value = field.value.as_ref()?;
    let allowed = |v: &Json| {
        field
            .enum_values
            .as_ref()
            .is_some_and(|values| v.as_str().is_some_and(|s| values.iter().any(|e| e == s)))
    };
    Some(match field.field_type {
        FieldType::Enum if !value.is_null() && !allowed(value) => Json::Null,
        FieldType::EnumList => match value {
            Json::Array(items) => {
                Json::Array(items.iter().filter(|v| allowed(v)).cloned().collect())
            }
            other => other.clone(),
        },
        _ => value.clone(),
    })
}

/// `widgetEdit`: none for Collection and Enum fields, whatever their widget.
fn widget_json(field: &FormField) -> Option<Json> {
    if matches!(
        field.field_type,
        FieldType::Collection | FieldType::Enum | FieldType::EnumList
    ) {
        return None;
    }
    let widget = field.widget.as_ref()?;
    let placeholder = |p: &Option<String>| match p.as_deref() {
        Some(s) if !s.is_empty() => json!(s),
        _ => Json::Null,
    };
    let number = |n: &Option<f64>| n.map_or(Json::Null, |n| json!(n));
    let (name, parameters) = match widget {
        Widget::Dropdown {
            options,
            search,
            placeholder: p,
        } => (
            "dropdown",
            json!({
                "searchType": if *search == DropdownSearch::Dynamic { json!("dynamic") } else { Json::Null },
                "isSearchable": *search != DropdownSearch::Disabled,
                "placeholder": placeholder(p),
                "static": {"options": options},
            }),
        ),
        Widget::RadioGroup { options } => ("radio button", json!({"static": {"options": options}})),
        Widget::CheckboxGroup { options } => {
            ("checkboxes", json!({"static": {"options": options}}))
        }
        Widget::Checkbox => ("boolean editor", json!({})),
        Widget::TextInput { placeholder: p } => {
            ("text editor", json!({"placeholder": placeholder(p)}))
        }
        Widget::DatePicker {
            placeholder: p,
            format,
            min,
            max,
        } => (
            "date editor",
            json!({"format": format, "placeholder": placeholder(p), "minDate": min, "maxDate": max}),
        ),
        Widget::TextInputList {
            placeholder: p,
            enable_reorder,
            allow_empty_values,
            allow_duplicates,
        } => (
            "input array",
            json!({
                "placeholder": placeholder(p),
                "allowDuplicate": allow_duplicates,
                "allowEmptyValue": allow_empty_values,
                "enableReorder": enable_reorder.unwrap_or(true),
            }),
        ),
        Widget::TextArea {
            placeholder: p,
            rows,
        } => (
            "text area editor",
            json!({
                "placeholder": placeholder(p),
                "rows": rows.filter(|r| *r > 0.0).map_or(Json::Null, |r| json!(r.round() as i64)),
            }),
        ),
        Widget::RichText { placeholder: p } => {
            ("rich text", json!({"placeholder": placeholder(p)}))
        }
        Widget::NumberInput {
            placeholder: p,
            min,
            max,
            step,
        } => (
            "number input",
            json!({"placeholder": placeholder(p), "min": number(min), "max": number(max), "step": number(step)}),
        ),
        Widget::ColorPicker {
            placeholder: p,
            enable_opacity,
            quick_palette,
        } => (
            "color editor",
            json!({
                "placeholder": placeholder(p),
                "enableOpacity": enable_opacity,
                "quickPalette": if quick_palette.is_empty() { Json::Null } else { json!(quick_palette) },
            }),
        ),
        Widget::NumberInputList {
            placeholder: p,
            enable_reorder,
            allow_duplicates,
            min,
            max,
            step,
        } => (
            "input array",
            json!({
                "placeholder": placeholder(p),
                "allowDuplicate": allow_duplicates,
                "enableReorder": enable_reorder.unwrap_or(true),
                "min": number(min), "max": number(max), "step": number(step),
            }),
        ),
        Widget::CurrencyInput {
            placeholder: p,
            min,
            max,
            step,
            currency,
            base,
        } => (
            "price editor",
            json!({
                "placeholder": placeholder(p),
                "min": number(min), "max": number(max), "step": number(step),
                "currency": currency.as_deref().filter(|c| c.chars().count() == 3).map(str::to_uppercase),
                "base": match base.as_deref().map(str::to_lowercase).as_deref() {
                    Some("cent" | "cents") => "Cents",
                    _ => "Unit",
                },
            }),
        ),
        Widget::UserDropdown { placeholder: p } => {
            ("assignee editor", json!({"placeholder": placeholder(p)}))
        }
        Widget::TimePicker => ("time editor", json!({})),
        Widget::JsonEditor => ("json code editor", json!({})),
        Widget::FilePicker {
            extensions,
            max_size_mb,
            max_count,
        } => (
            "file picker",
            json!({
                "prefix": null,
                "filesExtensions": if extensions.is_empty() { Json::Null } else { json!(extensions) },
                "filesSizeLimit": number(max_size_mb),
                "filesCountLimit": number(max_count),
            }),
        ),
        Widget::AddressAutocomplete { placeholder: p } => {
            ("address editor", json!({"placeholder": placeholder(p)}))
        }
    };
    Some(json!({"name": name, "parameters": parameters}))
}

/// What a hook request carries (§2.7).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookRequest {
    /// The current values, from `fields[].value` keyed by `fields[].field`.
    pub values: FormValues,
    pub changed_field: Option<String>,
    pub search_field: Option<String>,
    /// The `searchValue` of the searched field.
    pub search_value: Option<String>,
}

/// Reads `data.attributes.{fields, changed_field, search_field}`.
pub fn parse_hook(body: &Json) -> HookRequest {
    let attributes = body.pointer("/data/attributes");
    let text = |key: &str| {
        attributes
            .and_then(|a| a.get(key))
            .and_then(Json::as_str)
            .map(str::to_owned)
    };
    let mut request = HookRequest {
        changed_field: text("changed_field"),
        search_field: text("search_field"),
        ..HookRequest::default()
    };
    let fields = attributes
        .and_then(|a| a.get("fields"))
        .and_then(Json::as_array);
    for field in fields.into_iter().flatten() {
        let Some(id) = field.get("field").and_then(Json::as_str) else {
            continue;
        };
        if id == LOADING {
            continue;
        }
        if request.search_field.as_deref() == Some(id) {
            request.search_value = field
                .get("searchValue")
                .and_then(Json::as_str)
                .map(str::to_owned);
        }
        request.values.insert(
            id.to_owned(),
            field.get("value").cloned().unwrap_or(Json::Null),
        );
    }
    request
}

/// The submitted values of an execute request (`data.attributes.values`). The body's
/// `requester_id` is checked before (`http::action`): a signed approval request carries one.
pub fn parse_values(body: &Json) -> Result<FormValues> {
    let attributes = body.pointer("/data/attributes");
    let values = attributes
        .and_then(|a| a.get("values"))
        .and_then(Json::as_object);
    Ok(values
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != LOADING)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

/// File values must be data URIs (`data:<mime>[;…];base64,<b64>`): anything else is a 400.
pub fn check_files(form: &[FormElement], values: &FormValues) -> Result<()> {
    let is_data_uri = |v: &Json| {
        v.as_str().is_some_and(|s| {
            s.strip_prefix("data:")
                .and_then(|rest| rest.split_once(','))
                .is_some_and(|(meta, _)| meta.ends_with(";base64"))
        })
    };
    for field in form.iter().flat_map(FormElement::fields) {
        let Some(value) = values.get(&field.id).filter(|v| !v.is_null()) else {
            continue;
        };
        let ok = match field.field_type {
            FieldType::File => is_data_uri(value),
            FieldType::FileList => value
                .as_array()
                .is_some_and(|items| items.iter().all(is_data_uri)),
            _ => true,
        };
        if !ok {
            return Err(Error::validation(format!(
                "Invalid data URI in the field '{}'",
                field.id
            )));
        }
    }
    Ok(())
}

/// How an action result is answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultBody {
    /// A JSON body with this status (200, or 400 for `error`).
    Json { status: u16, body: Json },
    /// An attachment.
    File {
        name: String,
        mime_type: String,
        bytes: Vec<u8>,
    },
}

/// The response of each result builder (§8.9).
pub fn result_body(outcome: ActionOutcome) -> ResultBody {
    let ok = |body: Json| ResultBody::Json { status: 200, body };
    match outcome {
        ActionOutcome::Success {
            message,
            html,
            invalidated,
        } => {
            let mut body = Map::new();
            body.insert("success".into(), json!(message));
            if let Some(html) = html {
                body.insert("html".into(), json!(html));
            }
            body.insert("refresh".into(), json!({"relationships": invalidated}));
            ok(Json::Object(body))
        }
        ActionOutcome::Error { message, html } => {
            let mut body = Map::new();
            body.insert("error".into(), json!(message));
            if let Some(html) = html {
                body.insert("html".into(), json!(html));
            }
            ResultBody::Json {
                status: 400,
                body: Json::Object(body),
            }
        }
        ActionOutcome::Webhook {
            url,
            method,
            headers,
            body,
        } => {
            ok(json!({"webhook": {"url": url, "method": method, "headers": headers, "body": body}}))
        }
        ActionOutcome::Redirect { path } => ok(json!({"redirectTo": path})),
        ActionOutcome::File {
            name,
            mime_type,
            bytes,
        } => ResultBody::File {
            name,
            mime_type,
            bytes,
        },
    }
}

/// `Content-Disposition` of a file result, as Koa's `attachment(name)` writes it: the name
/// quoted when it is plain ASCII, else an ASCII fallback plus the RFC 5987 `filename*`.
pub fn content_disposition(name: &str) -> String {
    let plain = |c: char| c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\';
    if name.chars().all(plain) {
        return format!("attachment; filename=\"{name}\"");
    }
    let fallback: String = name
        .chars()
        .map(|c| if plain(c) { c } else { '?' })
        .collect();
    let mut encoded = String::new();
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

/// The form's current values, by field id (the spec's `POST /actions/{action}/values`).
pub fn values_json(form: &[FormElement]) -> Json {
    Json::Object(
        form.iter()
            .flat_map(FormElement::fields)
            .map(|f| (f.id.clone(), wire_value(f).unwrap_or(Json::Null)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::action::ActionScope;

    #[test]
    fn slugs_follow_get_action_slug() {
        assert_eq!(slug("Mark as Live"), "mark-as-live");
        assert_eq!(slug("Send  e-mail!"), "send-e-mail-");
        assert_eq!(slug("Élan 2"), "-lan-2");
    }

    #[test]
    fn dynamic_forms_show_the_loading_placeholder_and_the_index_in_the_endpoint() {
        let action = ActionSchema {
            scope: ActionScope::Single,
            generate_file: true,
            description: Some("d".into()),
            submit_button_label: None,
            static_form: None,
        };
        let schema = DataSourceSchema::default();
        let json = action_json(&schema, "books", 2, "Mark as Live", &action, false).unwrap();
        assert_eq!(json["id"], "books-2-mark-as-live");
        assert_eq!(json["endpoint"], "/forest/_actions/books/2/mark-as-live");
        assert_eq!(json["type"], "single");
        assert_eq!(json["download"], true);
        assert_eq!(json["fields"][0]["field"], "Loading...");
        assert_eq!(
            json["hooks"],
            json!({"load": true, "change": ["changeHook"]})
        );
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "id",
                "name",
                "type",
                "baseUrl",
                "endpoint",
                "httpMethod",
                "redirect",
                "download",
                "fields",
                "description",
                "hooks"
            ]
        );
        let json = action_json(&schema, "books", 2, "Mark as Live", &action, true).unwrap();
        assert_eq!(json["id"], "books-mark-as-live");
    }

    #[test]
    fn static_forms_move_values_to_defaults_and_keep_layout_only_when_used() {
        let mut field = FormField::new("Amount", FieldType::NumberList);
        field.value = Some(json!([1]));
        field.widget = Some(Widget::NumberInputList {
            placeholder: None,
            enable_reorder: None,
            allow_duplicates: false,
            min: Some(0.0),
            max: None,
            step: None,
        });
        let action = ActionSchema {
            scope: ActionScope::Bulk,
            generate_file: false,
            description: None,
            submit_button_label: Some("Go".into()),
            static_form: Some(vec![FormElement::Field(field.clone())]),
        };
        let schema = DataSourceSchema::default();
        let json = action_json(&schema, "books", 0, "Pay", &action, false).unwrap();
        assert_eq!(
            json["fields"][0],
            json!({
                "field": "Amount", "label": "Amount",
                "type": ["Number"],
                "widgetEdit": {"name": "input array", "parameters": {
                    "placeholder": null, "allowDuplicate": false, "enableReorder": true,
                    "min": 0.0, "max": null, "step": null}},
                "defaultValue": [1],
            })
        );
        assert!(json.get("layout").is_none());
        assert_eq!(json["hooks"]["load"], false);
        let paged = form_json(
            &schema,
            &[
                FormElement::HtmlBlock {
                    content: "<b>hi</b>".into(),
                },
                FormElement::Row {
                    fields: vec![field],
                },
            ],
        )
        .unwrap();
        assert_eq!(
            paged["layout"],
            json!([
                {"component": "htmlBlock", "content": "<b>hi</b>"},
                {"component": "row", "fields": [{"component": "input", "fieldId": "Amount"}]},
            ])
        );
    }

    #[test]
    fn the_schema_file_sorts_actions_by_name_and_keeps_their_declaration_index() {
        use crate::agent::schema_file::{Meta, SchemaFile};
        use crate::datasource::schema::{ColumnSchema, FieldSchema, PrimitiveType};
        let mut books = CollectionSchema::new("books");
        let mut id = ColumnSchema::new(PrimitiveType::Number);
        id.is_primary_key = true;
        books.fields.insert("id".into(), FieldSchema::Column(id));
        books.segments = vec!["Recent".into()];
        for name in ["Zeta", "Alpha"] {
            books.actions.insert(
                name.into(),
                ActionSchema {
                    scope: ActionScope::Global,
                    generate_file: false,
                    description: None,
                    submit_button_label: None,
                    static_form: Some(Vec::new()),
                },
            );
        }
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("books".into(), books);
        let actions = SchemaActions {
            schema: &schema,
            unsafe_endpoint: false,
        };
        let file = SchemaFile::build(&schema, &actions, Meta::default()).unwrap();
        let collection = &file.collections[0];
        let ids: Vec<&Json> = collection["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| &a["id"])
            .collect();
        assert_eq!(ids, [&json!("books-1-alpha"), &json!("books-0-zeta")]);
        assert_eq!(collection["actions"][0]["fields"], json!([]));
        assert_eq!(
            collection["segments"],
            json!([{"id": "books.Recent", "name": "Recent"}])
        );
    }

    #[test]
    fn a_collection_field_on_a_binary_key_is_typed_string_as_the_key_is_served() {
        use crate::datasource::schema::{ColumnSchema, FieldSchema, PrimitiveType};
        let mut files = CollectionSchema::new("files");
        let mut key = ColumnSchema::new(PrimitiveType::Binary);
        key.is_primary_key = true;
        files.fields.insert("hash".into(), FieldSchema::Column(key));
        let mut schema = DataSourceSchema::default();
        schema.collections.insert("files".into(), files);
        let mut field = FormField::new("File", FieldType::Collection);
        field.collection_name = Some("files".into());
        let json = field_json(&schema, &field).unwrap();
        assert_eq!(json["type"], "String");
        assert_eq!(json["reference"], "files.hash");
    }

    #[test]
    fn results_map_to_the_agents_responses() {
        assert_eq!(
            result_body(ActionOutcome::Error {
                message: "no".into(),
                html: None
            }),
            ResultBody::Json {
                status: 400,
                body: json!({"error": "no"})
            }
        );
        assert_eq!(
            result_body(ActionOutcome::Success {
                message: "ok".into(),
                html: Some("<p>".into()),
                invalidated: vec!["books".into()]
            }),
            ResultBody::Json {
                status: 200,
                body: json!({"success": "ok", "html": "<p>", "refresh": {"relationships": ["books"]}})
            }
        );
    }

    #[test]
    fn hook_bodies_give_values_and_the_searched_text() {
        let body = json!({"data": {"attributes": {
        "changed_field": "a", "search_field": "b",
        "fields": [
            {"field": "Loading...", "value": "x"},
            {"field": "a", "value": 1},
            {"field": "b", "value": null, "searchValue": "fo"},
        ]}}});
        let request = parse_hook(&body);
        assert_eq!(request.values.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(request.changed_field.as_deref(), Some("a"));
        assert_eq!(request.search_value.as_deref(), Some("fo"));
    }
}
