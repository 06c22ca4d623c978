//! The customizer's handler traits implemented by calling a plugin's exports, and the
//! declarations of a loaded plugin turned into the customizer's `Customization`s.

use std::sync::Arc;

use async_trait::async_trait;
use indexmap::IndexMap;
use serde_json::{Value as Json, json};

use super::bindings::{Kind as WitKind, Scope};
use super::convert;
use super::loader::CallKind;
use super::runtime::{ComputeRows, Plugin, Request, Response};
use crate::customizer::{
    ActionContext, ActionHandler, Batch, BinaryMode, ChartHandler, ComputeHandler, Context,
    Customization, FieldSelection, FilteringMode, HookData, HookHandler, HookOperation,
    HookPosition, Kind, OperatorHandler, OverrideHandler, OverrideOperation, RelationDefinition,
    SearchHandler, SearchMode, SegmentHandler, SegmentSource, SortingMode, WriteAction,
    WriteContext, WriteHandler,
};
use crate::datasource::action::{
    ActionOutcome, ActionResult, ActionScope, DropdownSearch, FieldType, FormElement, FormField,
    FormPhase, Widget,
};
use crate::datasource::chart::{ChartRequest, ChartResult};
use crate::datasource::{
    Caller, CollectionSchema, ColumnType, ConditionTree, DataSourceSchema, DateOperation, Error,
    Filter, Operator, PrimitiveType, Record, Result, SortClause, Value, parse_datetime,
};

/// One declared handler of one plugin.
pub struct Handler {
    plugin: Arc<Plugin>,
    id: u32,
    /// The declared column type (computed fields only).
    column_type: ColumnType,
}

impl Handler {
    fn scope(caller: &Caller, ctx: &Context) -> Option<Scope> {
        Some(Scope {
            caller: caller.clone(),
            ctx: ctx.clone(),
        })
    }

    async fn text(
        &self,
        kind: CallKind,
        caller: &Caller,
        ctx: &Context,
        r: Request,
    ) -> Result<Json> {
        match self.plugin.call(kind, Self::scope(caller, ctx), r).await? {
            Response::Text(t) => serde_json::from_str(&t)
                .map_err(|e| self.plugin.malformed(&format!("invalid JSON ({e})"))),
            Response::MaybeText(Some(t)) => serde_json::from_str(&t)
                .map_err(|e| self.plugin.malformed(&format!("invalid JSON ({e})"))),
            Response::MaybeText(None) => Ok(Json::Null),
            _ => Err(self.plugin.malformed("an answer of the wrong kind")),
        }
    }

    fn tree(&self, json: &Json, ctx: &Context) -> Result<Option<ConditionTree>> {
        if json.is_null() {
            return Ok(None);
        }
        let collection = ctx.collection()?;
        ConditionTree::parse(json, collection.schema(), ctx.datasource.schema())
            .map(Some)
            .map_err(|e| {
                self.plugin
                    .malformed(&format!("invalid condition tree ({e})"))
            })
    }
}

#[async_trait]
impl ComputeHandler for Handler {
    async fn compute(&self, caller: &Caller, ctx: &Context, batch: &Batch) -> Result<Vec<Value>> {
        let rows = if self.plugin.packs_rows() {
            ComputeRows::Packed(convert::compute_batch_packed(batch, ctx))
        } else {
            ComputeRows::Lists(convert::compute_batch(batch, ctx))
        };
        let cc = convert::call_context(caller, ctx);
        let response = self
            .plugin
            .call(
                CallKind::Compute,
                Self::scope(caller, ctx),
                Request::Compute(self.id, cc, rows),
            )
            .await?;
        let column = match response {
            Response::Column(column) => column,
            Response::Packed(packed) => {
                convert::unpack(packed, batch.len).map_err(|e| self.plugin.malformed(&e))?
            }
            _ => return Err(self.plugin.malformed("an answer of the wrong kind")),
        };
        let values =
            convert::values(column, &self.column_type).map_err(|e| self.plugin.malformed(&e))?;
        if values.len() != batch.len {
            return Err(self.plugin.malformed(&format!(
                "{} values for {} rows",
                values.len(),
                batch.len
            )));
        }
        if matches!(self.column_type, ColumnType::Array(_)) {
            return values
                .into_iter()
                .map(|v| typed_array(v, &self.column_type))
                .collect::<std::result::Result<_, _>>()
                .map_err(|m| self.plugin.malformed(&m));
        }
        Ok(values)
    }
}

/// An array-typed computed value: it crosses as JSON text (a `json` column), and the customizer
/// holds arrays as `Value::Array` of typed items (`[{"title": "String"}]`, the type of an
/// external relation, holds JSON objects).
fn typed_array(value: Value, ty: &ColumnType) -> std::result::Result<Value, String> {
    let json = match value {
        Value::Null => return Ok(Value::Null),
        Value::Json(j) => j,
        Value::Array(_) => return Ok(value),
        other => return Err(format!("{other:?} for a field of type {}", ty.to_json())),
    };
    fn item(j: &Json, ty: &ColumnType) -> std::result::Result<Value, String> {
        match ty {
            _ if j.is_null() => Ok(Value::Null),
            ColumnType::Array(inner) => match j {
                Json::Array(items) => Ok(Value::Array(
                    items
                        .iter()
                        .map(|i| item(i, inner))
                        .collect::<std::result::Result<_, _>>()?,
                )),
                other => Err(format!("{other} is not an array")),
            },
            ColumnType::Composite(_) => Ok(Value::Json(j.clone())),
            ColumnType::Primitive(PrimitiveType::Json) => Ok(Value::Json(j.clone())),
            ColumnType::Primitive(p) => Value::from_json_typed(j, *p)
                .ok_or_else(|| format!("{j} is not a valid {}", p.as_str())),
        }
    }
    item(&json, ty)
}

fn action_json(ctx: &ActionContext, hook: &str, phase: Option<&FormPhase>) -> Result<Json> {
    let keys: Vec<String> = match ctx.base.collection() {
        Ok(c) => c
            .schema()
            .primary_keys()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        Err(_) => Vec::new(),
    };
    let (search_field, search_value) = match phase {
        Some(FormPhase::Search {
            field,
            search_value,
        }) => (Some(field.clone()), search_value.clone()),
        _ => (None, None),
    };
    Ok(json!({
        "hook": hook,
        "action": ctx.action,
        "formValues": ctx.form_values,
        "filter": convert::filter_json(&ctx.filter),
        "primaryKeys": keys,
        "changedField": phase.and_then(FormPhase::changed_field).or(ctx.changed_field.as_deref()),
        "searchField": search_field,
        "searchValue": search_value,
    }))
}

#[async_trait]
impl ActionHandler for Handler {
    async fn form(
        &self,
        caller: &Caller,
        ctx: &ActionContext,
        phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        let hook = match phase {
            FormPhase::Load => "load",
            FormPhase::Change { .. } => "change",
            FormPhase::Search { .. } => "search",
            FormPhase::Execute => "execute",
        };
        let input = action_json(ctx, hook, Some(phase))?.to_string();
        let cc = convert::call_context(caller, &ctx.base);
        let json = self
            .text(
                CallKind::Action,
                caller,
                &ctx.base,
                Request::ActionForm(self.id, cc, input),
            )
            .await?;
        let elements = json
            .as_array()
            .ok_or_else(|| self.plugin.malformed("a form that is not an array"))?;
        elements
            .iter()
            .map(|e| form_element(e).map_err(|m| self.plugin.malformed(&m)))
            .collect()
    }

    async fn execute(&self, caller: &Caller, ctx: &ActionContext) -> Result<ActionResult> {
        let input = action_json(ctx, "execute", None)?.to_string();
        let cc = convert::call_context(caller, &ctx.base);
        let response = self
            .plugin
            .call(
                CallKind::Action,
                Self::scope(caller, &ctx.base),
                Request::ActionExecute(self.id, cc, input),
            )
            .await?;
        let Response::Outcome(outcome) = response else {
            return Err(self.plugin.malformed("an answer of the wrong kind"));
        };
        let json: Json = serde_json::from_str(&outcome.result).map_err(|e| {
            self.plugin
                .malformed(&format!("invalid action result ({e})"))
        })?;
        action_result(&json, outcome.file).map_err(|m| self.plugin.malformed(&m))
    }
}

fn text(j: &Json, key: &str) -> Option<String> {
    j.get(key).and_then(Json::as_str).map(str::to_owned)
}

fn action_result(j: &Json, file: Option<Vec<u8>>) -> std::result::Result<ActionResult, String> {
    let outcome = match j.get("type").and_then(Json::as_str) {
        Some("Success") => ActionOutcome::Success {
            message: text(j, "message").unwrap_or_default(),
            html: text(j, "html"),
            invalidated: strings(j.get("invalidated")).unwrap_or_default(),
        },
        Some("Error") => ActionOutcome::Error {
            message: text(j, "message").unwrap_or_else(|| "Error".to_owned()),
            html: text(j, "html"),
        },
        Some("Webhook") => ActionOutcome::Webhook {
            url: text(j, "url").ok_or("a webhook without url")?,
            method: text(j, "method").unwrap_or_else(|| "POST".to_owned()),
            headers: j
                .get("headers")
                .and_then(Json::as_object)
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            body: j.get("body").cloned().unwrap_or_else(|| json!({})),
        },
        Some("File") => ActionOutcome::File {
            name: text(j, "name").unwrap_or_else(|| "file".to_owned()),
            mime_type: text(j, "mimeType").unwrap_or_else(|| "application/octet-stream".to_owned()),
            bytes: file.unwrap_or_default(),
        },
        Some("Redirect") => ActionOutcome::Redirect {
            path: text(j, "path").ok_or("a redirect without path")?,
        },
        other => return Err(format!("unknown action result type {other:?}")),
    };
    let headers = j
        .get("responseHeaders")
        .and_then(Json::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Ok(ActionResult { outcome, headers })
}

fn f64_of(j: &Json, key: &str) -> Option<f64> {
    j.get(key).and_then(Json::as_f64)
}

/// A form element from the SDK's JSON: a layout element (`{"type": "Layout", "component", ..}`,
/// the toolkit's shape) or a field (`id`, `label`, `type`, `widget` and its parameters, …).
fn form_element(j: &Json) -> std::result::Result<FormElement, String> {
    if j.get("type").and_then(Json::as_str) == Some("Layout") {
        return layout_element(j);
    }
    form_field(j).map(FormElement::Field)
}

/// A layout element: `Separator`, `HtmlBlock` (`content`), `Row` (`fields`, fields only) or
/// `Page` (`elements`, `nextButtonLabel`, `previousButtonLabel`).
fn layout_element(j: &Json) -> std::result::Result<FormElement, String> {
    let children = |key: &str| {
        j.get(key)
            .and_then(Json::as_array)
            .ok_or_else(|| format!("a layout element without `{key}`"))
    };
    Ok(match j.get("component").and_then(Json::as_str) {
        Some("Separator") => FormElement::Separator,
        Some("HtmlBlock") => FormElement::HtmlBlock {
            content: text(j, "content").unwrap_or_default(),
        },
        Some("Row") => FormElement::Row {
            fields: children("fields")?
                .iter()
                .map(|f| match f.get("type").and_then(Json::as_str) {
                    Some("Layout") => Err("a row holding a layout element".to_owned()),
                    _ => form_field(f),
                })
                .collect::<std::result::Result<_, _>>()?,
        },
        Some("Page") => FormElement::Page {
            next_button_label: text(j, "nextButtonLabel"),
            previous_button_label: text(j, "previousButtonLabel"),
            elements: children("elements")?
                .iter()
                .map(form_element)
                .collect::<std::result::Result<_, _>>()?,
        },
        other => return Err(format!("unknown layout component {other:?}")),
    })
}

/// A form field from the SDK's JSON.
fn form_field(j: &Json) -> std::result::Result<FormField, String> {
    let label = text(j, "label").ok_or("a form field without label")?;
    let type_name = text(j, "type").unwrap_or_default();
    let field_type = FieldType::parse(&type_name)
        .ok_or_else(|| format!("unknown form field type {type_name:?}"))?;
    let mut f = FormField::new(label, field_type);
    if let Some(id) = text(j, "id") {
        f.id = id;
    }
    f.description = text(j, "description");
    f.is_required = j.get("isRequired").and_then(Json::as_bool).unwrap_or(false);
    f.is_read_only = j.get("isReadOnly").and_then(Json::as_bool).unwrap_or(false);
    f.value = j
        .get("value")
        .or_else(|| j.get("defaultValue"))
        .filter(|v| !v.is_null())
        .cloned();
    f.enum_values = strings(j.get("enumValues"));
    f.collection_name = text(j, "collectionName");
    f.watch_changes = j
        .get("watchChanges")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let options = || {
        j.get("options")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let placeholder = text(j, "placeholder");
    let flag = |k: &str| j.get(k).and_then(Json::as_bool).unwrap_or(false);
    f.widget = match text(j, "widget").as_deref() {
        None => None,
        Some("Dropdown") => Some(Widget::Dropdown {
            options: options(),
            search: match text(j, "search").as_deref() {
                Some("static") => DropdownSearch::Static,
                Some("dynamic") => DropdownSearch::Dynamic,
                _ => DropdownSearch::Disabled,
            },
            placeholder,
        }),
        Some("RadioGroup") => Some(Widget::RadioGroup { options: options() }),
        Some("CheckboxGroup") => Some(Widget::CheckboxGroup { options: options() }),
        Some("Checkbox") => Some(Widget::Checkbox),
        Some("TextInput") => Some(Widget::TextInput { placeholder }),
        Some("TextInputList") => Some(Widget::TextInputList {
            placeholder,
            enable_reorder: j.get("enableReorder").and_then(Json::as_bool),
            allow_empty_values: flag("allowEmptyValues"),
            allow_duplicates: flag("allowDuplicates"),
        }),
        Some("TextArea") => Some(Widget::TextArea {
            placeholder,
            rows: f64_of(j, "rows"),
        }),
        Some("RichText") => Some(Widget::RichText { placeholder }),
        Some("NumberInput") => Some(Widget::NumberInput {
            placeholder,
            min: f64_of(j, "min"),
            max: f64_of(j, "max"),
            step: f64_of(j, "step"),
        }),
        Some("NumberInputList") => Some(Widget::NumberInputList {
            placeholder,
            enable_reorder: j.get("enableReorder").and_then(Json::as_bool),
            allow_duplicates: flag("allowDuplicates"),
            min: f64_of(j, "min"),
            max: f64_of(j, "max"),
            step: f64_of(j, "step"),
        }),
        Some("CurrencyInput") => Some(Widget::CurrencyInput {
            placeholder,
            min: f64_of(j, "min"),
            max: f64_of(j, "max"),
            step: f64_of(j, "step"),
            currency: text(j, "currency"),
            base: text(j, "base"),
        }),
        Some("ColorPicker") => Some(Widget::ColorPicker {
            placeholder,
            enable_opacity: flag("enableOpacity"),
            quick_palette: strings(j.get("quickPalette")).unwrap_or_default(),
        }),
        Some("DatePicker") => Some(Widget::DatePicker {
            placeholder,
            format: text(j, "format"),
            min: text(j, "min"),
            max: text(j, "max"),
        }),
        Some("AddressAutocomplete") => Some(Widget::AddressAutocomplete { placeholder }),
        Some("UserDropdown") => Some(Widget::UserDropdown { placeholder }),
        Some("TimePicker") => Some(Widget::TimePicker),
        Some("FilePicker") => Some(Widget::FilePicker {
            extensions: strings(j.get("extensions")).unwrap_or_default(),
            max_size_mb: f64_of(j, "maxSizeMb"),
            max_count: f64_of(j, "maxCount"),
        }),
        Some("JsonEditor") => Some(Widget::JsonEditor),
        Some(other) => return Err(format!("unknown widget {other:?}")),
    };
    Ok(f)
}

fn hook_json(data: &HookData) -> Json {
    match data {
        HookData::List {
            filter,
            projection,
            records,
        } => json!({
            "filter": convert::filter_json(filter),
            "projection": projection.iter().collect::<Vec<_>>(),
            "records": records.as_deref().map(convert::records_json),
        }),
        HookData::Create { records, created } => json!({
            "data": convert::records_json(records),
            "records": created.as_deref().map(convert::records_json),
        }),
        HookData::Update { filter, patch } => json!({
            "filter": convert::filter_json(filter),
            "patch": serde_json::to_value(patch).unwrap_or(Json::Null),
        }),
        HookData::Delete { filter } => json!({ "filter": convert::filter_json(filter) }),
        HookData::Aggregate {
            filter,
            aggregation,
            limit,
            result,
        } => json!({
            "filter": convert::filter_json(filter),
            "aggregation": convert::aggregation_json(aggregation),
            "limit": limit,
            "aggregateResult": result.as_ref().map(|r| r.iter().map(|a| json!({
                "value": serde_json::to_value(&a.value).unwrap_or(Json::Null),
                "group": serde_json::to_value(&a.group).unwrap_or(Json::Null),
            })).collect::<Vec<_>>()),
        }),
    }
}

#[async_trait]
impl HookHandler for Handler {
    async fn run(
        &self,
        caller: &Caller,
        ctx: &Context,
        _position: HookPosition,
        data: &mut HookData,
    ) -> Result<()> {
        let input = hook_json(data).to_string();
        let cc = convert::call_context(caller, ctx);
        let change = self
            .text(
                CallKind::Hook,
                caller,
                ctx,
                Request::Hook(self.id, cc, input),
            )
            .await?;
        if change.is_null() {
            return Ok(());
        }
        let collection = ctx.collection()?;
        match data {
            HookData::Create { records, .. } => {
                let list = change
                    .as_array()
                    .ok_or_else(|| self.plugin.malformed("hook data that is not an array"))?;
                *records = list
                    .iter()
                    .map(|r| convert::record(r, collection.schema()))
                    .collect::<Result<_>>()?;
            }
            HookData::Update { patch, .. } => {
                *patch = convert::record(&change, collection.schema())?;
            }
            _ => {}
        }
        Ok(())
    }
}

#[async_trait]
impl SegmentHandler for Handler {
    async fn tree(&self, caller: &Caller, ctx: &Context) -> Result<Option<ConditionTree>> {
        let cc = convert::call_context(caller, ctx);
        let json = self
            .text(
                CallKind::Segment,
                caller,
                ctx,
                Request::Segment(self.id, cc),
            )
            .await?;
        self.tree(&json, ctx)
    }
}

#[async_trait]
impl SearchHandler for Handler {
    async fn search(
        &self,
        caller: &Caller,
        ctx: &Context,
        text: &str,
        extended: bool,
    ) -> Result<Option<ConditionTree>> {
        let cc = convert::call_context(caller, ctx);
        let request = Request::Search(self.id, cc, text.to_owned(), extended);
        let json = self.text(CallKind::Search, caller, ctx, request).await?;
        self.tree(&json, ctx)
    }
}

#[async_trait]
impl ChartHandler for Handler {
    async fn render(
        &self,
        caller: &Caller,
        ctx: &Context,
        request: &ChartRequest,
    ) -> Result<ChartResult> {
        let record_filter = match (&request.record_id, ctx.collection()) {
            (Some(id), Ok(collection)) => {
                let conditions: Vec<Json> = collection
                    .schema()
                    .primary_keys()
                    .into_iter()
                    .zip(id)
                    .map(|(k, v)| json!({"field": k, "operator": "Equal", "value": v}))
                    .collect();
                json!({"aggregator": "And", "conditions": conditions})
            }
            _ => Json::Null,
        };
        let input = json!({
            "recordId": request.record_id.as_ref().map(|id| record_id(ctx, id)),
            "recordFilter": record_filter,
            "parameters": request.parameters,
        });
        let cc = convert::call_context(caller, ctx);
        let json = self
            .text(
                CallKind::Chart,
                caller,
                ctx,
                Request::Chart(self.id, cc, input.to_string()),
            )
            .await?;
        chart_result(&json).map_err(|m| self.plugin.malformed(&m))
    }
}

#[async_trait]
impl WriteHandler for Handler {
    async fn write(
        &self,
        caller: &Caller,
        ctx: &WriteContext,
        value: &Value,
    ) -> Result<Option<Record>> {
        let input = json!({
            "value": value,
            "action": match ctx.action {
                WriteAction::Create => "create",
                WriteAction::Update => "update",
            },
            "record": &ctx.record,
            "filter": ctx.filter.as_ref().map(convert::filter_json),
        });
        let cc = convert::call_context(caller, &ctx.base);
        let request = Request::Write(self.id, cc, input.to_string());
        let json = self
            .text(CallKind::Write, caller, &ctx.base, request)
            .await?;
        if json.is_null() {
            return Ok(None);
        }
        let collection = ctx.base.collection()?;
        patch(
            &json,
            collection.schema(),
            ctx.base.datasource.schema(),
            true,
        )
        .map(Some)
        .map_err(|m| self.plugin.malformed(&format!("a write patch {m}")))
    }
}

#[async_trait]
impl OperatorHandler for Handler {
    async fn replace(
        &self,
        caller: &Caller,
        ctx: &Context,
        value: &Value,
    ) -> Result<ConditionTree> {
        let cc = convert::call_context(caller, ctx);
        let input = serde_json::to_string(value).map_err(|e| Error::Internal(e.to_string()))?;
        let request = Request::Operator(self.id, cc, input);
        let json = self.text(CallKind::Operator, caller, ctx, request).await?;
        self.tree(&json, ctx)?.ok_or_else(|| {
            self.plugin
                .malformed("an operator replacement that is not a condition tree")
        })
    }
}

impl Handler {
    async fn overridden(&self, caller: &Caller, ctx: &Context, input: Json) -> Result<Json> {
        let cc = convert::call_context(caller, ctx);
        let request = Request::Override(self.id, cc, input.to_string());
        self.text(CallKind::Override, caller, ctx, request).await
    }
}

#[async_trait]
impl OverrideHandler for Handler {
    async fn create(
        &self,
        caller: &Caller,
        ctx: &Context,
        records: Vec<Record>,
    ) -> Result<Vec<Record>> {
        let input = json!({"operation": "create", "data": convert::records_json(&records)});
        let json = self.overridden(caller, ctx, input).await?;
        let list = json.as_array().ok_or_else(|| {
            self.plugin
                .malformed("created records that are not an array")
        })?;
        let collection = ctx.collection()?;
        // As the agent does, keys that are not columns are stripped from the created records.
        list.iter()
            .map(|r| patch(r, collection.schema(), ctx.datasource.schema(), false))
            .collect::<std::result::Result<_, _>>()
            .map_err(|m| self.plugin.malformed(&format!("a created record {m}")))
    }

    async fn update(
        &self,
        caller: &Caller,
        ctx: &Context,
        filter: &Filter,
        patch: &Record,
    ) -> Result<()> {
        let input = json!({"operation": "update", "filter": convert::filter_json(filter),
            "patch": patch});
        self.overridden(caller, ctx, input).await.map(drop)
    }

    async fn delete(&self, caller: &Caller, ctx: &Context, filter: &Filter) -> Result<()> {
        let input = json!({"operation": "delete", "filter": convert::filter_json(filter)});
        self.overridden(caller, ctx, input).await.map(drop)
    }
}

/// A record or patch from a plugin's JSON object, typed by the collection's columns; an object
/// under a to-one relation is a nested record of the foreign collection (a nested write). Other
/// keys are refused when `strict`, else dropped.
fn patch(
    json: &Json,
    collection: &CollectionSchema,
    schema: &DataSourceSchema,
    strict: bool,
) -> std::result::Result<Record, String> {
    let object = json.as_object().ok_or("is not an object")?;
    let mut r = Record::new();
    for (k, v) in object {
        if let Some(column) = collection.column(k) {
            let value = match column.column_type.primitive() {
                Some(p) => Value::from_json_typed(v, p)
                    .ok_or_else(|| format!("has a wrong type for `{k}`: {v}"))?,
                None if v.is_null() => Value::Null,
                None => Value::Json(v.clone()),
            };
            r.insert(k.as_str(), value);
        } else if let (Some(relation), Json::Object(_)) = (collection.relation(k), v) {
            let foreign = schema
                .collection(relation.foreign_collection())
                .map_err(|e| e.to_string())?;
            let nested = patch(v, foreign, schema, strict)?;
            r.insert(k.as_str(), Value::Record(Box::new(nested)));
        } else if strict {
            return Err(format!("names an unknown field `{k}`"));
        }
    }
    Ok(r)
}

/// The packed id of a chart's record with its keys in their wire form, as the client sent it
/// (`agent::wire`: a MariaDB decimal key `12.3`, a binary key hex).
fn record_id(ctx: &Context, id: &[Value]) -> String {
    let collection = ctx.collection().ok();
    let keys: Vec<_> = collection
        .as_ref()
        .map(|c| {
            c.schema()
                .columns()
                .filter(|(_, column)| column.is_primary_key)
                .map(|(_, column)| column.wire)
                .collect()
        })
        .unwrap_or_default();
    id.iter()
        .enumerate()
        .map(|(i, v)| crate::agent::wire::id_string(v, keys.get(i).copied().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("|")
}

fn entries(j: &Json) -> IndexMap<String, f64> {
    j.get("entries")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| Some((text(e, "key")?, e.get("value")?.as_f64()?)))
        .collect()
}

fn date_value(s: &str) -> std::result::Result<Value, String> {
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(Value::Dateonly(d));
    }
    parse_datetime(s)
        .map(Value::Date)
        .ok_or_else(|| format!("invalid chart date {s:?}"))
}

fn chart_result(j: &Json) -> std::result::Result<ChartResult, String> {
    let range = || -> std::result::Result<DateOperation, String> {
        text(j, "range")
            .ok_or("a time chart without range")?
            .parse::<DateOperation>()
            .map_err(|e| e.to_string())
    };
    let num = |k: &str| f64_of(j, k).ok_or_else(|| format!("chart `{k}` is not a number"));
    Ok(match j.get("type").and_then(Json::as_str) {
        Some("Value") => ChartResult::Value {
            current: num("value")?,
            previous: f64_of(j, "previousValue"),
        },
        Some("Objective") => ChartResult::Objective {
            value: num("value")?,
            objective: num("objective")?,
        },
        Some("Percentage") => ChartResult::Percentage(num("value")?),
        Some("Distribution") => ChartResult::Distribution(entries(j)),
        Some("Leaderboard") => ChartResult::Leaderboard(entries(j)),
        Some("TimeBased") => ChartResult::TimeBased {
            range: range()?,
            points: j
                .get("points")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    Ok((
                        date_value(&text(p, "date").unwrap_or_default())?,
                        f64_of(p, "value"),
                    ))
                })
                .collect::<std::result::Result<_, String>>()?,
        },
        Some("MultipleTimeBased") => ChartResult::MultipleTimeBased {
            range: range()?,
            dates: j
                .get("dates")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .map(|d| date_value(d.as_str().unwrap_or_default()))
                .collect::<std::result::Result<_, String>>()?,
            lines: j
                .get("lines")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .map(|l| {
                    let values = l
                        .get("values")
                        .and_then(Json::as_array)
                        .map(|a| a.iter().map(Json::as_f64).collect())
                        .unwrap_or_default();
                    (text(l, "label").unwrap_or_default(), values)
                })
                .collect(),
        },
        Some("Smart") => ChartResult::Smart(j.get("data").cloned().unwrap_or(Json::Null)),
        other => return Err(format!("unknown chart result type {other:?}")),
    })
}

fn column_type(j: &Json) -> std::result::Result<ColumnType, String> {
    match j {
        Json::String(_) => serde_json::from_value::<PrimitiveType>(j.clone())
            .map(ColumnType::Primitive)
            .map_err(|_| format!("unknown column type {j}")),
        Json::Array(a) if a.len() == 1 => Ok(ColumnType::Array(Box::new(column_type(&a[0])?))),
        Json::Object(o) => Ok(ColumnType::Composite(
            o.iter()
                .map(|(k, v)| Ok((k.clone(), column_type(v)?)))
                .collect::<std::result::Result<_, String>>()?,
        )),
        _ => Err(format!("invalid column type {j}")),
    }
}

fn strings(j: Option<&Json>) -> Option<Vec<String>> {
    j.and_then(Json::as_array).map(|a| {
        a.iter()
            .filter_map(Json::as_str)
            .map(str::to_owned)
            .collect()
    })
}

/// The plugin's declarations as customizations, with those of the plugins it `use`s in place of
/// each `use` (depth-first, in declaration order); an invalid one fails the whole plugin (and so
/// the load or reload), with a message naming it.
pub fn customizations(
    plugin: &Arc<Plugin>,
    schema: &DataSourceSchema,
) -> std::result::Result<Vec<Customization>, String> {
    let origin = plugin.info.name.clone();
    let label = plugin.info.label();
    let mut uses = plugin.uses.iter();
    let mut out = Vec::new();
    for d in &plugin.declarations {
        let fail = |m: String| format!("{label}: {:?} `{}`: {m}", d.kind, d.name);
        if matches!(d.kind, WitKind::Use) {
            let used = uses
                .next()
                .ok_or_else(|| fail("was not applied".to_owned()))?;
            out.extend(customizations(used, schema)?);
            continue;
        }
        let def: Json = serde_json::from_str(&d.definition).map_err(|e| fail(e.to_string()))?;
        let kind = kind(plugin, d, &def, schema).map_err(fail)?;
        out.push(match &d.collection {
            Some(c) => Customization::collection(origin.clone(), c.clone(), kind),
            None => Customization::datasource(origin.clone(), kind),
        });
    }
    out.extend(super::workflow::customizations(plugin));
    Ok(out)
}

/// One declaration (not `use`) as the customizer's `Kind`.
fn kind(
    plugin: &Arc<Plugin>,
    d: &super::bindings::Declaration,
    def: &Json,
    schema: &DataSourceSchema,
) -> std::result::Result<Kind, String> {
    let handler = |column_type: ColumnType| {
        Arc::new(Handler {
            plugin: plugin.clone(),
            id: d.handler,
            column_type,
        })
    };
    let any = || handler(ColumnType::Primitive(PrimitiveType::Json));
    let required = |key: &str| text(def, key).ok_or_else(|| format!("`{key}` is missing"));
    let field = || {
        if d.name.is_empty() {
            Err("no field named".to_owned())
        } else {
            Ok(d.name.clone())
        }
    };
    let operator = || -> std::result::Result<Operator, String> {
        required("operator")?
            .parse::<Operator>()
            .map_err(|e| format!("unknown operator: {e}"))
    };
    if d.collection.is_none() && !matches!(d.kind, WitKind::Chart) {
        return Err("no collection named".to_owned());
    }
    Ok(match d.kind {
        WitKind::Field => {
            let ty = column_type(def.get("columnType").unwrap_or(&Json::Null))?;
            Kind::ComputedField {
                name: d.name.clone(),
                column_type: ty.clone(),
                dependencies: strings(def.get("dependencies")).unwrap_or_default(),
                default_value: def.get("defaultValue").filter(|v| !v.is_null()).cloned(),
                enum_values: strings(def.get("enumValues")),
                handler: handler(ty),
            }
        }
        WitKind::Action => {
            let scope = match def.get("scope").and_then(Json::as_str) {
                Some("Single") => ActionScope::Single,
                Some("Bulk") => ActionScope::Bulk,
                Some("Global") => ActionScope::Global,
                other => return Err(format!("unknown scope {other:?}")),
            };
            let dynamic = def
                .get("dynamicForm")
                .and_then(Json::as_bool)
                .unwrap_or(true);
            let static_form = if dynamic {
                None
            } else {
                Some(
                    def.get("form")
                        .and_then(Json::as_array)
                        .into_iter()
                        .flatten()
                        .map(form_element)
                        .collect::<std::result::Result<_, _>>()?,
                )
            };
            Kind::Action {
                name: d.name.clone(),
                scope,
                generate_file: def
                    .get("generateFile")
                    .and_then(Json::as_bool)
                    .unwrap_or(false),
                description: text(def, "description"),
                submit_button_label: text(def, "submitButtonLabel"),
                static_form,
                handler: any(),
            }
        }
        WitKind::Hook => Kind::Hook {
            position: match def.get("position").and_then(Json::as_str) {
                Some("Before") => HookPosition::Before,
                Some("After") => HookPosition::After,
                other => return Err(format!("unknown position {other:?}")),
            },
            operation: match def.get("type").and_then(Json::as_str) {
                Some("List") => HookOperation::List,
                Some("Create") => HookOperation::Create,
                Some("Update") => HookOperation::Update,
                Some("Delete") => HookOperation::Delete,
                Some("Aggregate") => HookOperation::Aggregate,
                other => return Err(format!("unknown hook type {other:?}")),
            },
            handler: any(),
        },
        WitKind::Segment => {
            let source = match def.get("tree") {
                Some(tree) => {
                    let collection = d.collection.as_deref().unwrap_or_default();
                    let c = schema.collection(collection).map_err(|e| e.to_string())?;
                    SegmentSource::Static(
                        ConditionTree::parse(tree, c, schema).map_err(|e| e.to_string())?,
                    )
                }
                None => SegmentSource::Dynamic(any()),
            };
            Kind::Segment {
                name: d.name.clone(),
                source,
            }
        }
        WitKind::Search if def.get("handler").is_some() => Kind::Search(SearchMode::Handler(any())),
        WitKind::Search => Kind::Search(SearchMode::Fields(FieldSelection {
            only: strings(def.get("onlyFields")),
            include: strings(def.get("includeFields")).unwrap_or_default(),
            exclude: strings(def.get("excludeFields")).unwrap_or_default(),
        })),
        WitKind::DisableSearch => Kind::Search(SearchMode::Disabled),
        WitKind::Chart => Kind::Chart {
            name: d.name.clone(),
            handler: any(),
        },
        WitKind::Relation => Kind::Relation {
            name: field()?,
            definition: relation(def)?,
        },
        WitKind::ImportField => Kind::ImportField {
            name: field()?,
            path: required("path")?,
            readonly: def.get("readonly").and_then(Json::as_bool),
        },
        WitKind::RenameField => Kind::RenameField {
            from: field()?,
            to: required("newName")?,
        },
        WitKind::RemoveField => Kind::RemoveField { name: field()? },
        WitKind::RemoveCollection => Kind::RemoveCollection,
        WitKind::FieldValidation => Kind::Validation {
            field: field()?,
            operator: operator()?,
            value: def.get("value").filter(|v| !v.is_null()).cloned(),
        },
        WitKind::FieldNullable => Kind::Nullable { field: field()? },
        WitKind::FieldWriting => Kind::Writing {
            field: field()?,
            handler: any(),
        },
        WitKind::BinaryMode => Kind::BinaryMode {
            field: field()?,
            mode: match def.get("mode").and_then(Json::as_str) {
                Some("datauri") => BinaryMode::DataUri,
                Some("hex") => BinaryMode::Hex,
                other => return Err(format!("unknown binary mode {other:?}")),
            },
        },
        WitKind::Sorting => Kind::Sorting {
            field: field()?,
            mode: match def.get("mode").and_then(Json::as_str) {
                Some("emulate") => SortingMode::Emulate,
                Some("disable") => SortingMode::Disable,
                Some("replace") => SortingMode::Replace(sort_clauses(def.get("equivalentSort"))?),
                other => return Err(format!("unknown sorting mode {other:?}")),
            },
        },
        WitKind::Filtering => Kind::Filtering {
            field: field()?,
            mode: match def.get("mode").and_then(Json::as_str) {
                Some("emulateAll") => FilteringMode::EmulateAll,
                Some("emulate") => FilteringMode::Emulate(operator()?),
                Some("replace") => FilteringMode::Replace(operator()?, any()),
                other => return Err(format!("unknown filtering mode {other:?}")),
            },
        },
        WitKind::Override => Kind::Override {
            operation: match def
                .get("operation")
                .and_then(Json::as_str)
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("create") => OverrideOperation::Create,
                Some("update") => OverrideOperation::Update,
                Some("delete") => OverrideOperation::Delete,
                other => return Err(format!("unknown override operation {other:?}")),
            },
            handler: any(),
        },
        WitKind::DisableCount => Kind::DisableCount,
        WitKind::Use => return Err("`use` is applied by the loader".to_owned()),
    })
}

/// A relation definition from the SDK's JSON (`type` and the agent's option names).
fn relation(def: &Json) -> std::result::Result<RelationDefinition, String> {
    let required = |key: &str| text(def, key).ok_or_else(|| format!("`{key}` is missing"));
    let foreign_collection = required("foreignCollection")?;
    Ok(match def.get("type").and_then(Json::as_str) {
        Some("ManyToOne") => RelationDefinition::ManyToOne {
            foreign_collection,
            foreign_key: required("foreignKey")?,
            foreign_key_target: text(def, "foreignKeyTarget"),
        },
        Some("OneToMany") => RelationDefinition::OneToMany {
            foreign_collection,
            origin_key: required("originKey")?,
            origin_key_target: text(def, "originKeyTarget"),
        },
        Some("OneToOne") => RelationDefinition::OneToOne {
            foreign_collection,
            origin_key: required("originKey")?,
            origin_key_target: text(def, "originKeyTarget"),
        },
        Some("ManyToMany") => RelationDefinition::ManyToMany {
            foreign_collection,
            through_collection: required("throughCollection")?,
            origin_key: required("originKey")?,
            foreign_key: required("foreignKey")?,
            origin_key_target: text(def, "originKeyTarget"),
            foreign_key_target: text(def, "foreignKeyTarget"),
        },
        other => return Err(format!("unknown relation type {other:?}")),
    })
}

/// `[{"field", "ascending"}]`, at least one clause (`ascending` defaults to true).
fn sort_clauses(j: Option<&Json>) -> std::result::Result<Vec<SortClause>, String> {
    let clauses: Vec<SortClause> = j
        .and_then(Json::as_array)
        .ok_or("`equivalentSort` is not an array")?
        .iter()
        .map(|c| {
            Ok(SortClause {
                field: text(c, "field").ok_or("a sort clause without field")?,
                ascending: c.get("ascending").and_then(Json::as_bool).unwrap_or(true),
            })
        })
        .collect::<std::result::Result<_, String>>()?;
    if clauses.is_empty() {
        return Err("`equivalentSort` is empty".to_owned());
    }
    Ok(clauses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relations_and_sorts_are_read_from_the_sdk_shape_and_bad_ones_refused() {
        assert_eq!(
            relation(&json!({"type": "ManyToMany", "foreignCollection": "tags",
                "throughCollection": "product_tags", "originKey": "product_id",
                "foreignKey": "tag_id", "foreignKeyTarget": "id"}))
            .unwrap(),
            RelationDefinition::ManyToMany {
                foreign_collection: "tags".into(),
                through_collection: "product_tags".into(),
                origin_key: "product_id".into(),
                foreign_key: "tag_id".into(),
                origin_key_target: None,
                foreign_key_target: Some("id".into()),
            }
        );
        let e = relation(&json!({"type": "ManyToOne", "foreignCollection": "c"})).unwrap_err();
        assert!(e.contains("foreignKey"), "{e}");
        assert!(relation(&json!({"type": "Sideways", "foreignCollection": "c"})).is_err());
        let clauses = sort_clauses(Some(&json!([{"field": "a", "ascending": false},
            {"field": "b"}])))
        .unwrap();
        assert_eq!(
            clauses,
            [
                SortClause {
                    field: "a".into(),
                    ascending: false
                },
                SortClause {
                    field: "b".into(),
                    ascending: true
                }
            ]
        );
        assert!(sort_clauses(Some(&json!([]))).is_err());
        assert!(sort_clauses(None).is_err());
    }

    #[test]
    fn an_array_computed_value_becomes_typed_items() {
        let ty = column_type(&json!([{"title": "String"}])).unwrap();
        let v = typed_array(Value::Json(json!([{"title": "a"}])), &ty).unwrap();
        assert_eq!(v, Value::Array(vec![Value::Json(json!({"title": "a"}))]));
        let numbers = column_type(&json!(["Number"])).unwrap();
        assert_eq!(
            typed_array(Value::Json(json!([1, null])), &numbers).unwrap(),
            Value::Array(vec![Value::Int(1), Value::Null])
        );
        assert!(typed_array(Value::Json(json!({"a": 1})), &numbers).is_err());
        assert!(typed_array(Value::Json(json!(["x"])), &numbers).is_err());
    }

    #[test]
    fn a_dropdown_with_dynamic_search_and_a_value_is_read_from_the_sdk_shape() {
        let e = form_element(&json!({"id": "p", "label": "Product", "type": "Number",
            "widget": "Dropdown", "search": "dynamic", "options": [{"label": "a", "value": 1}],
            "value": 1, "watchChanges": true, "isRequired": true}))
        .unwrap();
        let FormElement::Field(f) = e else { panic!() };
        assert_eq!(f.id, "p");
        assert!(f.is_required && f.watch_changes);
        assert_eq!(f.value, Some(json!(1)));
        assert!(matches!(
            f.widget,
            Some(Widget::Dropdown {
                search: DropdownSearch::Dynamic,
                ..
            })
        ));
        assert!(form_element(&json!({"label": "x", "type": "Nope"})).is_err());
    }

    #[test]
    fn layout_elements_are_read_from_the_toolkit_shape() {
        let field = json!({"id": "a", "label": "A", "type": "String"});
        let page = form_element(&json!({"type": "Layout", "component": "Page",
        "nextButtonLabel": "Next", "elements": [
            {"type": "Layout", "component": "HtmlBlock", "content": "<p>x</p>"},
            {"type": "Layout", "component": "Separator"},
            {"type": "Layout", "component": "Row", "fields": [field.clone()]},
        ]}))
        .unwrap();
        let FormElement::Page {
            next_button_label,
            previous_button_label,
            elements,
        } = &page
        else {
            panic!("{page:?}")
        };
        assert_eq!(next_button_label.as_deref(), Some("Next"));
        assert_eq!(previous_button_label, &None);
        assert_eq!(
            elements[0],
            FormElement::HtmlBlock {
                content: "<p>x</p>".into()
            }
        );
        assert_eq!(elements[1], FormElement::Separator);
        assert!(matches!(&elements[2], FormElement::Row { fields } if fields[0].id == "a"));
        assert_eq!(page.fields().len(), 1);
        let nested = json!({"type": "Layout", "component": "Row", "fields": [
            {"type": "Layout", "component": "Separator"}]});
        assert!(form_element(&nested).is_err());
        assert!(form_element(&json!({"type": "Layout", "component": "Tabs"})).is_err());
    }

    #[test]
    fn action_results_and_charts_are_read_from_the_sdk_shape() {
        let r = action_result(
            &json!({"type": "File", "name": "a.csv", "mimeType": "text/csv",
            "responseHeaders": {"X-A": "1"}}),
            Some(b"x".to_vec()),
        )
        .unwrap();
        assert_eq!(r.headers, vec![("X-A".to_owned(), "1".to_owned())]);
        assert!(matches!(r.outcome, ActionOutcome::File { ref bytes, .. } if bytes == b"x"));
        let c = chart_result(&json!({"type": "TimeBased", "range": "Month",
            "points": [{"date": "2024-01-05", "value": 2.0}]}))
        .unwrap();
        assert!(matches!(
            c,
            ChartResult::TimeBased {
                range: DateOperation::Month,
                ..
            }
        ));
        assert!(chart_result(&json!({"type": "Pie"})).is_err());
    }
}
