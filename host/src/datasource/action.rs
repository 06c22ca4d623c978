//! Actions as the data layer sees them: their declaration (scope, static form), the resolved form
//! elements a collection answers `get_form` with, the form values, and the action results.
//!
//! These are the toolkit-level shapes (the Node toolkit's `ActionField`, `ActionResult`): every
//! dynamic property (`value`, `enumValues`, `options`, `if`) is already resolved. The agent layer
//! turns them into the wire format (§6.6, §8.9); plugins produce them.

use indexmap::IndexMap;
use serde_json::Value as Json;

/// The records an action targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionScope {
    /// One record (`getRecord`, `getRecordId` are available).
    Single,
    /// The selected records.
    Bulk,
    /// No record: ids in the request are ignored.
    Global,
}

impl ActionScope {
    /// The schema file's `type` (`single`, `bulk`, `global`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Bulk => "bulk",
            Self::Global => "global",
        }
    }
}

/// What the schema says about one action of a collection.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionSchema {
    pub scope: ActionScope,
    /// The action answers with a file (`download: true` in the schema file).
    pub generate_file: bool,
    pub description: Option<String>,
    pub submit_button_label: Option<String>,
    /// The form when it has no dynamic part (no handler anywhere): written into the schema file
    /// and answered by `hooks/load` without calling the plugin. `None` for a dynamic form, which
    /// the schema file shows as the `Loading...` placeholder.
    pub static_form: Option<Vec<FormElement>>,
}

/// The type of a form field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    Boolean,
    Collection,
    Date,
    Dateonly,
    Time,
    Enum,
    File,
    Json,
    Number,
    String,
    EnumList,
    FileList,
    NumberList,
    StringList,
}

impl FieldType {
    /// The toolkit's name (`StringList`, `Collection`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Boolean => "Boolean",
            Self::Collection => "Collection",
            Self::Date => "Date",
            Self::Dateonly => "Dateonly",
            Self::Time => "Time",
            Self::Enum => "Enum",
            Self::File => "File",
            Self::Json => "Json",
            Self::Number => "Number",
            Self::String => "String",
            Self::EnumList => "EnumList",
            Self::FileList => "FileList",
            Self::NumberList => "NumberList",
            Self::StringList => "StringList",
        }
    }

    /// Parses the toolkit's name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "Boolean" => Self::Boolean,
            "Collection" => Self::Collection,
            "Date" => Self::Date,
            "Dateonly" => Self::Dateonly,
            "Time" => Self::Time,
            "Enum" => Self::Enum,
            "File" => Self::File,
            "Json" => Self::Json,
            "Number" => Self::Number,
            "String" => Self::String,
            "EnumList" => Self::EnumList,
            "FileList" => Self::FileList,
            "NumberList" => Self::NumberList,
            "StringList" => Self::StringList,
            _ => return None,
        })
    }
}

/// The search mode of a dropdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DropdownSearch {
    /// Options are filtered by the frontend.
    Static,
    /// Options come from the `hooks/search` route (the options handler gets the typed text).
    Dynamic,
    #[default]
    Disabled,
}

/// A field's widget and its parameters, as the toolkit declares them (`ActionFieldWidget`).
/// Options are kept as given: `{value, label}` objects or bare values.
#[derive(Debug, Clone, PartialEq)]
pub enum Widget {
    Dropdown {
        options: Vec<Json>,
        search: DropdownSearch,
        placeholder: Option<String>,
    },
    RadioGroup {
        options: Vec<Json>,
    },
    CheckboxGroup {
        options: Vec<Json>,
    },
    Checkbox,
    TextInput {
        placeholder: Option<String>,
    },
    TextInputList {
        placeholder: Option<String>,
        enable_reorder: Option<bool>,
        allow_empty_values: bool,
        allow_duplicates: bool,
    },
    TextArea {
        placeholder: Option<String>,
        rows: Option<f64>,
    },
    RichText {
        placeholder: Option<String>,
    },
    NumberInput {
        placeholder: Option<String>,
        min: Option<f64>,
        max: Option<f64>,
        step: Option<f64>,
    },
    NumberInputList {
        placeholder: Option<String>,
        enable_reorder: Option<bool>,
        allow_duplicates: bool,
        min: Option<f64>,
        max: Option<f64>,
        step: Option<f64>,
    },
    CurrencyInput {
        placeholder: Option<String>,
        min: Option<f64>,
        max: Option<f64>,
        step: Option<f64>,
        currency: Option<String>,
        /// `Unit` or `Cent(s)`, as written by the author.
        base: Option<String>,
    },
    ColorPicker {
        placeholder: Option<String>,
        enable_opacity: bool,
        quick_palette: Vec<String>,
    },
    DatePicker {
        placeholder: Option<String>,
        format: Option<String>,
        /// ISO 8601 instants.
        min: Option<String>,
        max: Option<String>,
    },
    AddressAutocomplete {
        placeholder: Option<String>,
    },
    UserDropdown {
        placeholder: Option<String>,
    },
    TimePicker,
    FilePicker {
        extensions: Vec<String>,
        max_size_mb: Option<f64>,
        max_count: Option<f64>,
    },
    JsonEditor,
}

/// One resolved form field.
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    /// The key of its value in the form values; defaults to the label in the author's API.
    pub id: String,
    pub label: String,
    pub field_type: FieldType,
    pub description: Option<String>,
    pub is_required: bool,
    pub is_read_only: bool,
    /// The current value (wire form: Collection values are packed ids, files data URIs).
    /// In a static form this is the default value.
    pub value: Option<Json>,
    /// For `Enum` and `EnumList`.
    pub enum_values: Option<Vec<String>>,
    /// For `Collection`: the collection whose records are picked.
    pub collection_name: Option<String>,
    pub widget: Option<Widget>,
    /// A dynamic property read this field's value (or `hasFieldChanged`), so the frontend must
    /// call `hooks/change` when it changes (`hook: "changeHook"` on the wire).
    pub watch_changes: bool,
}

impl FormField {
    /// A plain field of this type, id = label, everything else off.
    pub fn new(label: impl Into<String>, field_type: FieldType) -> Self {
        let label = label.into();
        Self {
            id: label.clone(),
            label,
            field_type,
            description: None,
            is_required: false,
            is_read_only: false,
            value: None,
            enum_values: None,
            collection_name: None,
            widget: None,
            watch_changes: false,
        }
    }
}

/// An element of a form: a field or a layout element (already filtered by `if`).
#[expect(
    clippy::large_enum_variant,
    reason = "forms are short lists built once per request: boxing every field buys nothing"
)]
#[derive(Debug, Clone, PartialEq)]
pub enum FormElement {
    Field(FormField),
    Separator,
    HtmlBlock {
        content: String,
    },
    /// Fields side by side.
    Row {
        fields: Vec<FormField>,
    },
    /// A page of a multi-page form; pages are not mixed with other top-level elements.
    Page {
        next_button_label: Option<String>,
        previous_button_label: Option<String>,
        elements: Vec<FormElement>,
    },
}

impl FormElement {
    /// Every field of the element, depth first, in form order.
    pub fn fields(&self) -> Vec<&FormField> {
        match self {
            Self::Field(f) => vec![f],
            Self::Row { fields } => fields.iter().collect(),
            Self::Page { elements, .. } => elements.iter().flat_map(Self::fields).collect(),
            Self::Separator | Self::HtmlBlock { .. } => Vec::new(),
        }
    }

    /// Whether this is a layout element (anything but a plain field).
    pub fn is_layout(&self) -> bool {
        !matches!(self, Self::Field(_))
    }
}

/// Form values by field id, in the wire's JSON form: Collection values are packed ids (`"1|2"`),
/// File values data URIs (`data:<mime>;name=<name>;base64,<b64>`), lists arrays.
pub type FormValues = IndexMap<String, Json>;

/// Why a form is computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormPhase {
    /// The form is opened (`hooks/load`, and the form-values route).
    Load,
    /// A watched field changed (`hooks/change`).
    Change { changed_field: String },
    /// The user typed in a dynamic dropdown (`hooks/search`): only this field is wanted, its
    /// options computed for `search_value`.
    Search {
        field: String,
        search_value: Option<String>,
    },
    /// The form is recomputed to read the submitted values; fields hidden by `if` stay in.
    Execute,
}

impl FormPhase {
    /// The field whose change triggered this computation (`hasFieldChanged`).
    pub fn changed_field(&self) -> Option<&str> {
        match self {
            Self::Change { changed_field } => Some(changed_field),
            _ => None,
        }
    }
}

/// What an action answered, plus the headers set with `setHeader`.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionResult {
    pub outcome: ActionOutcome,
    /// Extra response headers, in the order they were set.
    pub headers: Vec<(String, String)>,
}

impl ActionResult {
    /// `success("Success")`: what an action that returns nothing answers.
    pub fn success(message: impl Into<String>) -> Self {
        Self::from(ActionOutcome::Success {
            message: message.into(),
            html: None,
            invalidated: Vec::new(),
        })
    }
}

impl From<ActionOutcome> for ActionResult {
    fn from(outcome: ActionOutcome) -> Self {
        Self {
            outcome,
            headers: Vec::new(),
        }
    }
}

/// The result builders of §8.9.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionOutcome {
    /// 200 `{"success", "html"?, "refresh": {"relationships": invalidated}}`.
    Success {
        message: String,
        html: Option<String>,
        /// Relation names the frontend must reload.
        invalidated: Vec<String>,
    },
    /// 400 `{"error", "html"?}`.
    Error {
        message: String,
        html: Option<String>,
    },
    /// 200 `{"webhook": {url, method, headers, body}}`: the frontend performs the call.
    Webhook {
        url: String,
        method: String,
        headers: IndexMap<String, String>,
        body: Json,
    },
    /// 200 with the bytes as an attachment.
    File {
        name: String,
        mime_type: String,
        bytes: Vec<u8>,
    },
    /// 200 `{"redirectTo": path}`.
    Redirect { path: String },
}
