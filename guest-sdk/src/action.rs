//! Actions: [`Action`] (scope, form, execute), [`FormElement`] with static or dynamic properties,
//! the [`ActionContext`] handlers receive and the [`ActionResult`] they return.

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::data::{Caller, CollectionRef, Context, Rows};
use crate::error::{Error, Result};

/// Which records an action targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Exactly one record.
    Single,
    /// One or more records.
    Bulk,
    /// The whole collection (no selection).
    Global,
}

impl Scope {
    fn as_str(self) -> &'static str {
        match self {
            Self::Single => "Single",
            Self::Bulk => "Bulk",
            Self::Global => "Global",
        }
    }
}

/// The type of a form element (the spec's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    missing_docs,
    reason = "each variant is the spec's type of the same name"
)]
pub enum FieldType {
    String,
    Number,
    Boolean,
    Date,
    Dateonly,
    Time,
    Enum,
    EnumList,
    File,
    FileList,
    Json,
    Collection,
    NumberList,
    StringList,
}

impl FieldType {
    fn as_str(self) -> &'static str {
        match self {
            Self::String => "String",
            Self::Number => "Number",
            Self::Boolean => "Boolean",
            Self::Date => "Date",
            Self::Dateonly => "Dateonly",
            Self::Time => "Time",
            Self::Enum => "Enum",
            Self::EnumList => "EnumList",
            Self::File => "File",
            Self::FileList => "FileList",
            Self::Json => "Json",
            Self::Collection => "Collection",
            Self::NumberList => "NumberList",
            Self::StringList => "StringList",
        }
    }
}

type DynFn<T> = Box<dyn Fn(&ActionContext) -> Result<T>>;
type OptionsFn = Box<dyn Fn(&ActionContext, Option<&str>) -> Result<Vec<(String, Value)>>>;

enum Prop<T> {
    Static(T),
    Dynamic(DynFn<T>),
}

enum Options {
    Static(Vec<(String, Value)>),
    Dynamic(OptionsFn),
}

/// A layout element: what a [`FormElement`] is when it is not a field.
enum Layout {
    Separator,
    HtmlBlock(Prop<String>),
    Row(Vec<FormElement>),
    Page {
        elements: Vec<FormElement>,
        next_button_label: Option<String>,
        previous_button_label: Option<String>,
    },
}

/// One element of an action form: a field ([`FormElement::new`]) or a layout element
/// ([`separator`](FormElement::separator), [`html_block`](FormElement::html_block),
/// [`row`](FormElement::row), [`page`](FormElement::page)). Every property is static except the
/// ones set with a closure (`value`, `enum_values_with`, `options_with`, `html_block_with`,
/// `visible_if`), which the SDK evaluates on the form's load, change and search hooks.
///
/// Field properties set on a layout element are ignored; `visible_if` applies to both (a row or
/// a page whose fields are all hidden is hidden too).
pub struct FormElement {
    id: String,
    label: String,
    field_type: FieldType,
    is_required: bool,
    is_read_only: bool,
    description: Option<String>,
    default_value: Option<Value>,
    value: Option<DynFn<Value>>,
    enum_values: Option<Prop<Vec<String>>>,
    collection_name: Option<String>,
    widget: Option<String>,
    options: Option<Options>,
    placeholder: Option<String>,
    search: Option<String>,
    visible_if: Option<DynFn<bool>>,
    extra: Map<String, Value>,
    layout: Option<Layout>,
}

impl FormElement {
    /// A field with this label (also its id) and type.
    pub fn new(label: impl Into<String>, field_type: FieldType) -> Self {
        let label = label.into();
        Self {
            id: label.clone(),
            label,
            field_type,
            is_required: false,
            is_read_only: false,
            description: None,
            default_value: None,
            value: None,
            enum_values: None,
            collection_name: None,
            widget: None,
            options: None,
            placeholder: None,
            search: None,
            visible_if: None,
            extra: Map::new(),
            layout: None,
        }
    }

    fn layout(layout: Layout) -> Self {
        Self {
            layout: Some(layout),
            ..Self::new("", FieldType::String)
        }
    }

    /// A horizontal line between elements.
    pub fn separator() -> Self {
        Self::layout(Layout::Separator)
    }

    /// A block of HTML shown in the form.
    pub fn html_block(content: impl Into<String>) -> Self {
        Self::layout(Layout::HtmlBlock(Prop::Static(content.into())))
    }

    /// A block of HTML computed from the context on every form hook (the spec's `content`
    /// function); reading form values in `f` makes the form watch them.
    pub fn html_block_with(f: impl Fn(&ActionContext) -> Result<String> + 'static) -> Self {
        Self::layout(Layout::HtmlBlock(Prop::Dynamic(Box::new(f))))
    }

    /// Fields shown side by side (the front end shows two per row). Only fields belong in a row.
    pub fn row(fields: Vec<FormElement>) -> Self {
        Self::layout(Layout::Row(fields))
    }

    /// One page of a multi-page form. A form made of pages holds nothing else at its top level.
    pub fn page(elements: Vec<FormElement>) -> Self {
        Self::layout(Layout::Page {
            elements,
            next_button_label: None,
            previous_button_label: None,
        })
    }

    /// The label of a page's "next" button.
    pub fn next_button_label(mut self, label: impl Into<String>) -> Self {
        if let Some(Layout::Page {
            next_button_label, ..
        }) = &mut self.layout
        {
            *next_button_label = Some(label.into());
        }
        self
    }

    /// The label of a page's "previous" button.
    pub fn previous_button_label(mut self, label: impl Into<String>) -> Self {
        if let Some(Layout::Page {
            previous_button_label,
            ..
        }) = &mut self.layout
        {
            *previous_button_label = Some(label.into());
        }
        self
    }

    fn is_page(&self) -> bool {
        matches!(self.layout, Some(Layout::Page { .. }))
    }

    /// The elements a row or a page holds.
    fn children(&self) -> &[FormElement] {
        match &self.layout {
            Some(
                Layout::Row(children)
                | Layout::Page {
                    elements: children, ..
                },
            ) => children,
            _ => &[],
        }
    }

    /// Sets the id (defaults to the label); form values are keyed by it.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Marks the field required.
    pub fn required(mut self) -> Self {
        self.is_required = true;
        self
    }

    /// Marks the field read-only.
    pub fn read_only(mut self) -> Self {
        self.is_read_only = true;
        self
    }

    /// Help text under the field.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// The value used while the form holds none.
    pub fn default_value(mut self, value: Value) -> Self {
        self.default_value = Some(value);
        self
    }

    /// A computed value, re-evaluated on every form hook (the spec's `value` function).
    pub fn value(mut self, f: impl Fn(&ActionContext) -> Result<Value> + 'static) -> Self {
        self.value = Some(Box::new(f));
        self
    }

    /// Static values of an `Enum`/`EnumList` field.
    pub fn enum_values<S: Into<String>>(mut self, values: impl IntoIterator<Item = S>) -> Self {
        self.enum_values = Some(Prop::Static(values.into_iter().map(Into::into).collect()));
        self
    }

    /// Enum values computed from the context (the spec's `enumValues` function).
    pub fn enum_values_with(
        mut self,
        f: impl Fn(&ActionContext) -> Result<Vec<String>> + 'static,
    ) -> Self {
        self.enum_values = Some(Prop::Dynamic(Box::new(f)));
        self
    }

    /// The target collection of a `Collection` field.
    pub fn collection_name(mut self, name: impl Into<String>) -> Self {
        self.collection_name = Some(name.into());
        self
    }

    /// The widget (`Dropdown`, `RadioGroup`, `Checkbox`, `TextArea`, ...).
    pub fn widget(mut self, widget: impl Into<String>) -> Self {
        self.widget = Some(widget.into());
        self
    }

    /// Static dropdown options as `(label, value)`.
    pub fn options<S: Into<String>>(
        mut self,
        options: impl IntoIterator<Item = (S, Value)>,
    ) -> Self {
        self.options = Some(Options::Static(
            options.into_iter().map(|(l, v)| (l.into(), v)).collect(),
        ));
        self
    }

    /// Options computed from the context and the user's search text (`search` becomes
    /// `dynamic`); the spec's `options(context, searchValue)` function.
    pub fn options_with(
        mut self,
        f: impl Fn(&ActionContext, Option<&str>) -> Result<Vec<(String, Value)>> + 'static,
    ) -> Self {
        self.options = Some(Options::Dynamic(Box::new(f)));
        self.search = Some("dynamic".to_owned());
        self
    }

    /// Placeholder text.
    pub fn placeholder(mut self, text: impl Into<String>) -> Self {
        self.placeholder = Some(text.into());
        self
    }

    /// The dropdown search mode: `static`, `dynamic` or `disabled`.
    pub fn search(mut self, mode: impl Into<String>) -> Self {
        self.search = Some(mode.into());
        self
    }

    /// Shows the field only when `f` returns true (the spec's `if`).
    pub fn visible_if(mut self, f: impl Fn(&ActionContext) -> Result<bool> + 'static) -> Self {
        self.visible_if = Some(Box::new(f));
        self
    }

    /// Any other property of the agent's form element (widget settings such as `min`, `max`,
    /// `step`, `rows`, `currency`), passed through as is.
    pub fn property(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    fn is_dynamic(&self) -> bool {
        self.value.is_some()
            || self.visible_if.is_some()
            || matches!(self.enum_values, Some(Prop::Dynamic(_)))
            || matches!(self.options, Some(Options::Dynamic(_)))
            || matches!(self.layout, Some(Layout::HtmlBlock(Prop::Dynamic(_))))
            || self.children().iter().any(FormElement::is_dynamic)
    }

    /// A layout element as JSON, in the toolkit's shape (`{"type": "Layout", "component", ..}`);
    /// `children` are the row's fields or the page's elements, already in JSON.
    fn layout_json(
        layout: &Layout,
        ctx: Option<&ActionContext>,
        children: Vec<Value>,
    ) -> Result<Value> {
        let mut o = Map::new();
        o.insert("type".into(), json!("Layout"));
        match layout {
            Layout::Separator => {
                o.insert("component".into(), json!("Separator"));
            }
            Layout::HtmlBlock(content) => {
                o.insert("component".into(), json!("HtmlBlock"));
                let content = match (content, ctx) {
                    (Prop::Static(c), _) => Some(c.clone()),
                    (Prop::Dynamic(f), Some(ctx)) => Some(f(ctx)?),
                    (Prop::Dynamic(_), None) => None,
                };
                if let Some(content) = content {
                    o.insert("content".into(), json!(content));
                }
            }
            Layout::Row(_) => {
                o.insert("component".into(), json!("Row"));
                o.insert("fields".into(), Value::Array(children));
            }
            Layout::Page {
                next_button_label,
                previous_button_label,
                ..
            } => {
                o.insert("component".into(), json!("Page"));
                if let Some(label) = next_button_label {
                    o.insert("nextButtonLabel".into(), json!(label));
                }
                if let Some(label) = previous_button_label {
                    o.insert("previousButtonLabel".into(), json!(label));
                }
                o.insert("elements".into(), Value::Array(children));
            }
        }
        Ok(Value::Object(o))
    }

    /// The element as JSON; `ctx` evaluates the dynamic properties (static shape when `None`).
    fn to_json(&self, ctx: Option<&ActionContext>, search_value: Option<&str>) -> Result<Value> {
        if let Some(layout) = &self.layout {
            let children = self
                .children()
                .iter()
                .map(|e| e.to_json(ctx, search_value))
                .collect::<Result<_>>()?;
            return Self::layout_json(layout, ctx, children);
        }
        let mut o = Map::new();
        o.insert("id".into(), json!(self.id));
        o.insert("label".into(), json!(self.label));
        o.insert("type".into(), json!(self.field_type.as_str()));
        o.insert("isRequired".into(), json!(self.is_required));
        o.insert("isReadOnly".into(), json!(self.is_read_only));
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                o.insert(k.to_owned(), v);
            }
        };
        put("description", self.description.as_ref().map(|d| json!(d)));
        put("defaultValue", self.default_value.clone());
        put(
            "collectionName",
            self.collection_name.as_ref().map(|d| json!(d)),
        );
        put("widget", self.widget.as_ref().map(|d| json!(d)));
        put("placeholder", self.placeholder.as_ref().map(|d| json!(d)));
        put("search", self.search.as_ref().map(|d| json!(d)));
        let enum_values = match (&self.enum_values, ctx) {
            (Some(Prop::Static(v)), _) => Some(json!(v)),
            (Some(Prop::Dynamic(f)), Some(ctx)) => Some(json!(f(ctx)?)),
            _ => None,
        };
        put("enumValues", enum_values);
        let options = match (&self.options, ctx) {
            (Some(Options::Static(v)), _) => Some(options_json(v)),
            (Some(Options::Dynamic(f)), Some(ctx)) => Some(options_json(&f(ctx, search_value)?)),
            _ => None,
        };
        put("options", options);
        if let Some(ctx) = ctx {
            let value = match &self.value {
                Some(f) => Some(f(ctx)?),
                None => ctx.form_values.get(&self.id).cloned(),
            };
            put("value", value.or_else(|| self.default_value.clone()));
        }
        for (k, v) in &self.extra {
            o.insert(k.clone(), v.clone());
        }
        Ok(Value::Object(o))
    }
}

/// The element and every row below it (rows sit at the top level or in pages).
fn rows(element: &FormElement) -> Vec<&FormElement> {
    match &element.layout {
        Some(Layout::Row(_)) => vec![element],
        Some(Layout::Page { elements, .. }) => elements.iter().flat_map(rows).collect(),
        _ => Vec::new(),
    }
}

/// The field with this id (or label), inside rows and pages too.
fn find_field<'a>(elements: &'a [FormElement], wanted: &str) -> Option<&'a FormElement> {
    elements.iter().find_map(|e| match e.layout {
        None => (e.id == wanted || e.label == wanted).then_some(e),
        Some(_) => find_field(e.children(), wanted),
    })
}

/// Whether the element's `if` lets it show; at execute every field stays so its value is read.
fn visible(element: &FormElement, ctx: &ActionContext) -> Result<bool> {
    match &element.visible_if {
        Some(f) if ctx.hook.as_deref() != Some("execute") => f(ctx),
        _ => Ok(true),
    }
}

/// The elements shown for this context, evaluated: hidden ones dropped, and a row or a page
/// left without elements dropped too (the toolkit's `dropIfs`).
fn evaluate(elements: &[FormElement], ctx: &ActionContext) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for element in elements {
        if !visible(element, ctx)? {
            continue;
        }
        match &element.layout {
            None => out.push(element.to_json(Some(ctx), None)?),
            Some(
                layout @ (Layout::Row(children)
                | Layout::Page {
                    elements: children, ..
                }),
            ) => {
                let children = evaluate(children, ctx)?;
                if children.is_empty() && ctx.hook.as_deref() != Some("execute") {
                    continue;
                }
                out.push(FormElement::layout_json(layout, Some(ctx), children)?);
            }
            Some(layout) => out.push(FormElement::layout_json(layout, Some(ctx), Vec::new())?),
        }
    }
    Ok(out)
}

/// Sets `watchChanges` on every field of an evaluated element (inside rows and pages too).
fn mark_watched(v: &mut Value, reads: &BTreeSet<String>) {
    let Value::Object(o) = v else { return };
    if o.get("type").and_then(Value::as_str) == Some("Layout") {
        for key in ["fields", "elements"] {
            if let Some(Value::Array(children)) = o.get_mut(key) {
                children.iter_mut().for_each(|c| mark_watched(c, reads));
            }
        }
        return;
    }
    let watched = o
        .get("id")
        .and_then(Value::as_str)
        .is_some_and(|id| reads.contains(id));
    o.insert("watchChanges".into(), json!(watched));
}

fn options_json(options: &[(String, Value)]) -> Value {
    options
        .iter()
        .map(|(label, value)| json!({"label": label, "value": value}))
        .collect()
}

type ExecuteFn = Box<dyn Fn(&ActionContext) -> Result<ActionResult>>;

/// An action (`add_action`): scope, optional form, execute handler and presentation options.
pub struct Action {
    scope: Scope,
    form: Vec<FormElement>,
    execute: ExecuteFn,
    description: Option<String>,
    submit_button_label: Option<String>,
    generate_file: bool,
}

impl Action {
    /// An action of this scope whose execute handler is `f`.
    pub fn new(scope: Scope, f: impl Fn(&ActionContext) -> Result<ActionResult> + 'static) -> Self {
        Self {
            scope,
            form: Vec::new(),
            execute: Box::new(f),
            description: None,
            submit_button_label: None,
            generate_file: false,
        }
    }

    /// The form shown before execution.
    pub fn form(mut self, elements: Vec<FormElement>) -> Self {
        self.form = elements;
        self
    }

    /// The action's description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// The label of the submit button.
    pub fn submit_button_label(mut self, text: impl Into<String>) -> Self {
        self.submit_button_label = Some(text.into());
        self
    }

    /// Declares that the action answers with a file ([`ActionResult::file`]).
    pub fn generate_file(mut self) -> Self {
        self.generate_file = true;
        self
    }

    pub(crate) fn definition(&self) -> Result<Value> {
        // The toolkit refuses a form that mixes pages with other top-level elements.
        let pages = self.form.iter().filter(|e| e.is_page()).count();
        if pages > 0 && pages < self.form.len() {
            return Err(Error::validation(
                "You cannot mix pages and other form elements in an action form",
            ));
        }
        let nested = |row: &FormElement| row.children().iter().any(|c| c.layout.is_some());
        if self.form.iter().flat_map(rows).any(nested) {
            return Err(Error::validation(
                "A row of an action form holds fields only",
            ));
        }
        let dynamic = self.form.iter().any(FormElement::is_dynamic);
        let form: Vec<Value> = self
            .form
            .iter()
            .map(|e| e.to_json(None, None))
            .collect::<Result<_>>()?;
        Ok(json!({
            "scope": self.scope.as_str(),
            "description": self.description,
            "submitButtonLabel": self.submit_button_label,
            "generateFile": self.generate_file,
            "form": form,
            "dynamicForm": dynamic,
        }))
    }

    /// The evaluated form: `if` applied, dynamic properties computed, values filled in.
    /// On the search hook only the searched field is rebuilt (and returned, out of its row or
    /// page, as the agent does).
    pub(crate) fn evaluate_form(&self, ctx: &ActionContext) -> Result<Value> {
        let mut out = match ctx.search_field.as_deref() {
            Some(field) => match find_field(&self.form, field) {
                Some(element) if visible(element, ctx)? => {
                    vec![element.to_json(Some(ctx), ctx.search_value.as_deref())?]
                }
                _ => Vec::new(),
            },
            None => evaluate(&self.form, ctx)?,
        };
        // A field read by any handler makes the front end send change hooks for it.
        let reads = ctx.reads.borrow();
        for v in &mut out {
            mark_watched(v, &reads);
        }
        Ok(Value::Array(out))
    }

    pub(crate) fn execute(&self, ctx: &ActionContext) -> Result<ActionResult> {
        (self.execute)(ctx)
    }
}

/// The toolkit's error when a Single action's selection matches no record.
const NO_RECORD: &str = "Query with filter did not match any records";

/// What action handlers (execute and the dynamic form properties) receive.
pub struct ActionContext {
    context: Context,
    form_values: Map<String, Value>,
    filter: Value,
    primary_keys: Vec<String>,
    changed_field: Option<String>,
    search_field: Option<String>,
    search_value: Option<String>,
    /// `load`, `change`, `search` or `execute`.
    hook: Option<String>,
    reads: RefCell<BTreeSet<String>>,
}

impl ActionContext {
    /// Builds the context from the host's action JSON (see the WIT `action-form`).
    pub(crate) fn from_json(context: Context, json: &Value) -> Self {
        let text = |k: &str| json.get(k).and_then(Value::as_str).map(str::to_owned);
        Self {
            context,
            form_values: json
                .get("formValues")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            filter: json.get("filter").cloned().unwrap_or(Value::Null),
            primary_keys: json
                .get("primaryKeys")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            changed_field: text("changedField"),
            search_field: text("searchField"),
            search_value: text("searchValue"),
            hook: text("hook"),
            reads: RefCell::new(BTreeSet::new()),
        }
    }

    /// The request's caller.
    pub fn caller(&self) -> &Caller {
        &self.context.caller
    }

    /// The handler context (caller and collection, data access).
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The action's collection.
    pub fn collection(&self) -> Result<CollectionRef> {
        self.context.this()
    }

    /// One form value by field id (`None` when unset). Reading it makes the form watch the field.
    pub fn form_value(&self, id: &str) -> Option<&Value> {
        self.reads.borrow_mut().insert(id.to_owned());
        self.form_values.get(id)
    }

    /// Every form value by field id (marks them all as watched).
    pub fn form_values(&self) -> &Map<String, Value> {
        self.reads
            .borrow_mut()
            .extend(self.form_values.keys().cloned());
        &self.form_values
    }

    /// The selection as a condition tree (`Null` for a global action).
    pub fn filter(&self) -> &Value {
        &self.filter
    }

    /// Whether the change hook was triggered by this field.
    pub fn has_field_changed(&self, id: &str) -> bool {
        self.reads.borrow_mut().insert(id.to_owned());
        self.changed_field.as_deref() == Some(id)
    }

    /// The selected records with these fields (one `list` call).
    pub fn get_records(&self, fields: &[&str]) -> Result<Rows> {
        self.collection()?.list(&self.filter, fields)
    }

    /// The primary key values of the selected records (the first key of composite keys).
    pub fn get_record_ids(&self) -> Result<Vec<Value>> {
        Ok(self
            .get_composite_record_ids()?
            .into_iter()
            .filter_map(|mut id| (!id.is_empty()).then(|| id.swap_remove(0)))
            .collect())
    }

    /// Every primary key value of each selected record.
    pub fn get_composite_record_ids(&self) -> Result<Vec<Vec<Value>>> {
        let keys: Vec<&str> = self.primary_keys.iter().map(String::as_str).collect();
        let rows = self.get_records(&keys)?;
        Ok((0..rows.len())
            .map(|i| keys.iter().map(|k| rows.value(i, k)).collect())
            .collect())
    }

    /// The single selected record (Single scope), as a JSON object with these fields.
    pub fn get_record(&self, fields: &[&str]) -> Result<Value> {
        let rows = self.get_records(fields)?;
        if rows.is_empty() {
            return Err(Error::NotFound(NO_RECORD.to_owned()));
        }
        Ok(rows.record(0))
    }

    /// The single selected record's id (Single scope).
    pub fn get_record_id(&self) -> Result<Value> {
        self.get_record_ids()?
            .into_iter()
            .next()
            .ok_or_else(|| Error::NotFound(NO_RECORD.to_owned()))
    }

    /// The single selected record's composite id (Single scope).
    pub fn get_composite_record_id(&self) -> Result<Vec<Value>> {
        self.get_composite_record_ids()?
            .into_iter()
            .next()
            .ok_or_else(|| Error::NotFound(NO_RECORD.to_owned()))
    }

    /// One field (or relation path) of the single selected record.
    pub fn get_field(&self, path: &str) -> Result<Value> {
        Ok(self
            .get_record(&[path])?
            .get(path)
            .cloned()
            .unwrap_or(Value::Null))
    }
}

enum Outcome {
    Success {
        message: String,
        html: Option<String>,
        invalidated: Vec<String>,
    },
    Error {
        message: String,
        html: Option<String>,
    },
    Webhook {
        url: String,
        method: String,
        headers: Value,
        body: Value,
    },
    File {
        bytes: Vec<u8>,
        name: String,
        mime_type: String,
    },
    Redirect {
        path: String,
    },
}

/// What an action's execute returns (the spec's result builder).
pub struct ActionResult {
    outcome: Outcome,
    headers: Vec<(String, String)>,
}

impl ActionResult {
    fn of(outcome: Outcome) -> Self {
        Self {
            outcome,
            headers: Vec::new(),
        }
    }

    /// 200 `{"success": message}`.
    pub fn success(message: impl Into<String>) -> Self {
        Self::of(Outcome::Success {
            message: message.into(),
            html: None,
            invalidated: Vec::new(),
        })
    }

    /// 400 `{"error": message}`.
    pub fn error(message: impl Into<String>) -> Self {
        Self::of(Outcome::Error {
            message: message.into(),
            html: None,
        })
    }

    /// 200 `{"webhook": {url, method, headers, body}}`: the front end performs the call.
    pub fn webhook(
        url: impl Into<String>,
        method: impl Into<String>,
        headers: Value,
        body: Value,
    ) -> Self {
        Self::of(Outcome::Webhook {
            url: url.into(),
            method: method.into(),
            headers,
            body,
        })
    }

    /// A file download (the action must be declared with [`Action::generate_file`]).
    pub fn file(bytes: Vec<u8>, name: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::of(Outcome::File {
            bytes,
            name: name.into(),
            mime_type: mime_type.into(),
        })
    }

    /// 200 `{"redirectTo": path}`.
    pub fn redirect_to(path: impl Into<String>) -> Self {
        Self::of(Outcome::Redirect { path: path.into() })
    }

    /// Adds HTML to a success or error result.
    pub fn html(mut self, html: impl Into<String>) -> Self {
        match &mut self.outcome {
            Outcome::Success { html: h, .. } | Outcome::Error { html: h, .. } => {
                *h = Some(html.into());
            }
            _ => {}
        }
        self
    }

    /// Relations (or collections) the front end refreshes after a success.
    pub fn invalidated<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        if let Outcome::Success { invalidated, .. } = &mut self.outcome {
            invalidated.extend(names.into_iter().map(Into::into));
        }
        self
    }

    /// An extra response header (the spec's `setHeader`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The result as the host reads it, plus the file's bytes.
    pub(crate) fn into_parts(self) -> (Value, Option<Vec<u8>>) {
        let headers: Map<String, Value> = self
            .headers
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let (mut v, file) = match self.outcome {
            Outcome::Success {
                message,
                html,
                invalidated,
            } => (
                json!({"type": "Success", "message": message, "html": html, "invalidated": invalidated}),
                None,
            ),
            Outcome::Error { message, html } => (
                json!({"type": "Error", "message": message, "html": html}),
                None,
            ),
            Outcome::Webhook {
                url,
                method,
                headers,
                body,
            } => (
                json!({"type": "Webhook", "url": url, "method": method, "headers": headers, "body": body}),
                None,
            ),
            Outcome::File {
                bytes,
                name,
                mime_type,
            } => (
                json!({"type": "File", "name": name, "mimeType": mime_type}),
                Some(bytes),
            ),
            Outcome::Redirect { path } => (json!({"type": "Redirect", "path": path}), None),
        };
        if let Value::Object(o) = &mut v {
            o.insert("responseHeaders".into(), Value::Object(headers));
        }
        (v, file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(json: &Value) -> ActionContext {
        ActionContext::from_json(Context::default(), json)
    }

    #[test]
    fn a_form_with_a_closure_is_dynamic_and_its_static_shape_omits_computed_properties() {
        let a = Action::new(Scope::Single, |_| Ok(ActionResult::success("ok"))).form(vec![
            FormElement::new("Amount", FieldType::Number).required(),
            FormElement::new("Reason", FieldType::Enum).enum_values_with(|_| Ok(vec!["a".into()])),
        ]);
        let d = a.definition().unwrap();
        assert_eq!(d["dynamicForm"], json!(true));
        assert_eq!(d["form"][0]["isRequired"], json!(true));
        assert!(d["form"][1].get("enumValues").is_none());
    }

    #[test]
    fn evaluating_a_form_applies_if_computes_values_and_marks_read_fields_as_watched() {
        let a = Action::new(Scope::Single, |_| Ok(ActionResult::success("ok"))).form(vec![
            FormElement::new("Kind", FieldType::Enum).enum_values(["gift", "refund"]),
            FormElement::new("Note", FieldType::String)
                .visible_if(|c| Ok(c.form_value("Kind") == Some(&json!("gift")))),
            FormElement::new("Total", FieldType::Number)
                .value(|c| Ok(json!(if c.has_field_changed("Kind") { 1 } else { 0 }))),
        ]);
        let hidden = a
            .evaluate_form(&ctx(&json!({"formValues": {"Kind": "refund"}})))
            .unwrap();
        assert_eq!(hidden.as_array().unwrap().len(), 2);
        let shown = a
            .evaluate_form(&ctx(
                &json!({"formValues": {"Kind": "gift"}, "changedField": "Kind"}),
            ))
            .unwrap();
        assert_eq!(shown[1]["id"], json!("Note"));
        assert_eq!(shown[0]["value"], json!("gift"));
        assert_eq!(shown[0]["watchChanges"], json!(true));
        assert_eq!(shown[1]["watchChanges"], json!(false));
        assert_eq!(shown[2]["value"], json!(1));
    }

    #[test]
    fn the_search_hook_rebuilds_only_the_searched_field_with_the_search_text() {
        let a = Action::new(Scope::Global, |_| Ok(ActionResult::success("ok"))).form(vec![
            FormElement::new("A", FieldType::String),
            FormElement::new("B", FieldType::String)
                .widget("Dropdown")
                .options_with(|_, s| Ok(vec![(s.unwrap_or("").to_owned(), json!(1))])),
        ]);
        let f = a
            .evaluate_form(&ctx(&json!({"searchField": "B", "searchValue": "ab"})))
            .unwrap();
        assert_eq!(
            f,
            json!([{"id": "B", "label": "B", "type": "String", "isRequired": false,
            "isReadOnly": false, "widget": "Dropdown", "search": "dynamic",
            "options": [{"label": "ab", "value": 1}], "watchChanges": false}])
        );
    }

    #[test]
    fn layout_elements_keep_the_toolkit_shape_and_a_static_layout_stays_static() {
        let a = Action::new(Scope::Single, |_| Ok(ActionResult::success("ok"))).form(vec![
            FormElement::html_block("<b>Hi</b>"),
            FormElement::separator(),
            FormElement::row(vec![
                FormElement::new("First", FieldType::String),
                FormElement::new("Last", FieldType::String),
            ]),
        ]);
        let d = a.definition().unwrap();
        assert_eq!(d["dynamicForm"], json!(false));
        assert_eq!(
            d["form"],
            json!([
                {"type": "Layout", "component": "HtmlBlock", "content": "<b>Hi</b>"},
                {"type": "Layout", "component": "Separator"},
                {"type": "Layout", "component": "Row", "fields": [
                    {"id": "First", "label": "First", "type": "String", "isRequired": false,
                     "isReadOnly": false},
                    {"id": "Last", "label": "Last", "type": "String", "isRequired": false,
                     "isReadOnly": false},
                ]},
            ])
        );
    }

    #[test]
    fn pages_evaluate_dynamic_html_drop_emptied_rows_and_watch_fields_inside_them() {
        let a = Action::new(Scope::Global, |_| Ok(ActionResult::success("ok"))).form(vec![
            FormElement::page(vec![
                FormElement::new("Kind", FieldType::String),
                FormElement::html_block_with(|c| {
                    Ok(format!(
                        "<p>{}</p>",
                        c.form_value("Kind").unwrap_or(&json!(""))
                    ))
                }),
            ])
            .next_button_label("Go on"),
            FormElement::page(vec![FormElement::row(vec![
                FormElement::new("Note", FieldType::String).visible_if(|_| Ok(false)),
            ])])
            .previous_button_label("Back"),
            FormElement::page(vec![FormElement::new("Last", FieldType::Number)]),
        ]);
        assert_eq!(a.definition().unwrap()["dynamicForm"], json!(true));
        let f = a
            .evaluate_form(&ctx(
                &json!({"hook": "load", "formValues": {"Kind": "gift"}}),
            ))
            .unwrap();
        let pages = f.as_array().unwrap();
        assert_eq!(pages.len(), 2, "the page of hidden fields is dropped: {f}");
        assert_eq!(pages[0]["component"], json!("Page"));
        assert_eq!(pages[0]["nextButtonLabel"], json!("Go on"));
        assert_eq!(pages[0]["elements"][0]["watchChanges"], json!(true));
        assert_eq!(pages[0]["elements"][1]["content"], json!("<p>\"gift\"</p>"));
        assert_eq!(pages[1]["elements"][0]["id"], json!("Last"));
        // At execute hidden fields stay, inside their row.
        let f = a.evaluate_form(&ctx(&json!({"hook": "execute"}))).unwrap();
        assert_eq!(f[1]["elements"][0]["fields"][0]["id"], json!("Note"));
    }

    #[test]
    fn the_search_hook_finds_its_field_inside_a_row_and_pages_are_not_mixed() {
        let a = Action::new(Scope::Global, |_| Ok(ActionResult::success("ok"))).form(vec![
            FormElement::row(vec![
                FormElement::new("A", FieldType::String),
                FormElement::new("B", FieldType::String)
                    .widget("Dropdown")
                    .options_with(|_, s| Ok(vec![(s.unwrap_or("").to_owned(), json!(1))])),
            ]),
        ]);
        let f = a
            .evaluate_form(&ctx(&json!({"searchField": "B", "searchValue": "x"})))
            .unwrap();
        assert_eq!(f.as_array().unwrap().len(), 1);
        assert_eq!(f[0]["options"], json!([{"label": "x", "value": 1}]));
        let mixed = Action::new(Scope::Global, |_| Ok(ActionResult::success("ok")))
            .form(vec![FormElement::page(vec![]), FormElement::separator()]);
        assert!(mixed.definition().is_err());
        let nested = Action::new(Scope::Global, |_| Ok(ActionResult::success("ok")))
            .form(vec![FormElement::row(vec![FormElement::separator()])]);
        assert!(nested.definition().is_err());
    }

    #[test]
    fn results_carry_their_type_html_invalidated_headers_and_file_bytes() {
        let (v, file) = ActionResult::success("Done")
            .html("<b>ok</b>")
            .invalidated(["orders"])
            .header("X-A", "1")
            .into_parts();
        assert_eq!(v["type"], json!("Success"));
        assert_eq!(v["invalidated"], json!(["orders"]));
        assert_eq!(v["responseHeaders"], json!({"X-A": "1"}));
        assert!(file.is_none());
        let (v, file) = ActionResult::file(b"a,b".to_vec(), "x.csv", "text/csv").into_parts();
        assert_eq!(v["mimeType"], json!("text/csv"));
        assert_eq!(file.unwrap(), b"a,b");
    }
}
