//! The tools: each checks its arguments (a mistake is a tool error a model can read and fix),
//! then calls the `/forest` or `/v1` route a person's UI would, as the MCP user (`dispatch`).

use std::net::SocketAddr;

use axum::Router;
use axum::http::Method;
use serde_json::{Map, Value as Json, json};

use super::McpCaller;
use super::dispatch::{Answer, records, segment, send};
use crate::agent::action::route_path;
use crate::datasource::action::ActionScope;
use crate::datasource::{CollectionSchema, FieldSchema, RelationSchema};
use crate::http::SharedState;
use crate::mcp::filter;
use crate::mcp::uploads::HANDLE_PREFIX;
use crate::platform::activity::{Action, Actor, Entry, Origin};

/// A tool's outcome: its JSON answer, or the message of a tool error.
pub(super) type Outcome = Result<Json, String>;

/// One call's context.
pub(super) struct Call<'a> {
    pub state: &'a SharedState,
    pub data: &'a Router,
    pub caller: &'a McpCaller,
    pub peer: Option<SocketAddr>,
    pub args: Map<String, Json>,
}

impl Call<'_> {
    async fn send(&self, method: Method, path: &str, body: Option<&Json>) -> Answer {
        send(
            self.data,
            &self.caller.claims.user,
            self.peer,
            method,
            path,
            body,
        )
        .await
    }

    fn forest(&self) -> &str {
        &self.state.mount_path
    }

    /// An argument that may be given as JSON text (some clients stringify objects).
    fn arg(&self, key: &str) -> Option<Json> {
        match self.args.get(key) {
            None | Some(Json::Null) => None,
            Some(Json::String(text)) if key_takes_json(key) => {
                Some(serde_json::from_str(text).unwrap_or(Json::String(text.clone())))
            }
            Some(value) => Some(value.clone()),
        }
    }

    fn text(&self, key: &str) -> Result<Option<String>, String> {
        match self.arg(key) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("{key} must be a string")),
        }
    }

    fn required_text(&self, key: &str) -> Result<String, String> {
        self.text(key)?
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| format!("{key} is required"))
    }

    /// An id: a string or a number, as text.
    fn id(&self, key: &str) -> Result<String, String> {
        id_text(self.arg(key).as_ref())
            .ok_or_else(|| format!("{key} is required (a string or a number)"))
    }

    fn object(&self, key: &str) -> Result<Option<Map<String, Json>>, String> {
        match self.arg(key) {
            None => Ok(None),
            Some(Json::Object(o)) => Ok(Some(o)),
            Some(_) => Err(format!("{key} must be an object")),
        }
    }

    fn bool(&self, key: &str) -> Result<bool, String> {
        match self.arg(key) {
            None => Ok(false),
            Some(Json::Bool(b)) => Ok(b),
            Some(_) => Err(format!("{key} must be true or false")),
        }
    }

    /// The served collection named by `collectionName`.
    fn collection(&self) -> Result<&CollectionSchema, String> {
        let name = self.required_text("collectionName")?;
        let schema = self.state.datasource.schema();
        schema.collections.get(&name).ok_or_else(|| {
            let names: Vec<&str> = schema.collections.keys().map(String::as_str).collect();
            format!(
                "Unknown collection {name:?}; the collections are: {}",
                names.join(", ")
            )
        })
    }
}

fn key_takes_json(key: &str) -> bool {
    matches!(
        key,
        "filters"
            | "attributes"
            | "values"
            | "sort"
            | "pagination"
            | "recordIds"
            | "targetRecordIds"
            | "fields"
    )
}

fn id_text(value: Option<&Json>) -> Option<String> {
    match value? {
        Json::String(s) if !s.is_empty() => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn ids(value: Option<Json>, key: &str) -> Result<Vec<String>, String> {
    match value {
        Some(Json::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|i| id_text(Some(i)).ok_or_else(|| format!("{key} must hold strings or numbers")))
            .collect(),
        _ => Err(format!("{key} must be a non-empty array of ids")),
    }
}

/// Runs the tool `name`; `None` when there is no such tool.
pub(super) async fn run(call: &Call<'_>, name: &str) -> Option<Outcome> {
    Some(match name {
        "describeCollection" => describe(call).await,
        "list" => list(call).await,
        "listRelated" => list_related(call).await,
        "create" => create(call).await,
        "update" => update(call).await,
        "delete" => delete(call).await,
        "associate" => associate(call).await,
        "dissociate" => dissociate(call).await,
        "getActionForm" => action_form(call).await.map(|form| form.answer()),
        "executeAction" => execute_action(call).await,
        "requestActionFileUpload" => request_upload(call),
        "listWorkflows" => list_workflows(call).await,
        "triggerWorkflow" => trigger_workflow(call).await,
        "getWorkflowRun" => get_workflow_run(call).await,
        _ => return None,
    })
}

// ----- describe --------------------------------------------------------------------------------

fn relation_kind(relation: &RelationSchema) -> &'static str {
    match relation {
        RelationSchema::ManyToOne { .. } => "many-to-one",
        RelationSchema::OneToMany { .. } => "one-to-many",
        RelationSchema::OneToOne { .. } => "one-to-one",
        RelationSchema::ManyToMany { .. } => "many-to-many",
    }
}

async fn describe(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let user = call.caller.claims.user.clone();
    // Read from the served schema (no route): the entry is this tool's own.
    call.state.activity.record(
        Entry::new(
            Action::DescribeCollection,
            Actor::of(&user.into_caller(chrono_tz::UTC, uuid::Uuid::new_v4())),
            Origin::Mcp,
        )
        .with_collection(schema.name.clone()),
    );
    let mut fields = Vec::new();
    let mut relations = Vec::new();
    for (name, field) in &schema.fields {
        match field {
            FieldSchema::Column(column) => {
                let operators: Vec<&str> =
                    column.filter_operators.iter().map(|o| o.as_str()).collect();
                let mut out = json!({
                    "name": name,
                    "type": column_type(&column.column_type),
                    "operators": operators,
                    "isPrimaryKey": column.is_primary_key,
                    "isReadOnly": column.is_read_only,
                    "isRequired": column.is_required(),
                    "isSortable": column.is_sortable,
                });
                if !column.enum_values.is_empty() {
                    out["enumValues"] = json!(column.enum_values);
                }
                fields.push(out);
            }
            FieldSchema::Relation(relation) => relations.push(json!({
                "name": name,
                "type": relation_kind(relation),
                "targetCollection": relation.foreign_collection(),
            })),
        }
    }
    let actions: Vec<Json> = schema
        .actions
        .iter()
        .map(|(name, action)| {
            json!({
                "name": name,
                "type": match action.scope {
                    ActionScope::Single => "single",
                    ActionScope::Bulk => "bulk",
                    ActionScope::Global => "global",
                },
                "description": action.description,
                "hasForm": action.static_form.as_ref().is_none_or(|f| !f.is_empty()),
                "download": action.generate_file,
            })
        })
        .collect();
    Ok(json!({
        "collection": schema.name,
        "fields": fields,
        "relations": relations,
        "actions": actions,
        "_meta": {"capabilitiesAvailable": true},
    }))
}

fn column_type(column: &crate::datasource::ColumnType) -> Json {
    match column {
        crate::datasource::ColumnType::Primitive(p) => json!(p.as_str()),
        crate::datasource::ColumnType::Array(inner) => json!([column_type(inner)]),
        crate::datasource::ColumnType::Composite(fields) => Json::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), column_type(v)))
                .collect(),
        ),
    }
}

// ----- lists -----------------------------------------------------------------------------------

/// The query string of a list: page, filters, search, sort, fields.
fn list_query(call: &Call<'_>, schema: &CollectionSchema, count: bool) -> Result<String, String> {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("timezone", "UTC");
    if !count {
        let pagination = call.object("pagination")?.unwrap_or_default();
        let number = |key: &str, default: u64| match pagination.get(key) {
            None | Some(Json::Null) => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|n| *n >= 1.0 && n.fract() == 0.0)
                .map(|n| n as u64)
                .ok_or_else(|| format!("pagination.{key} must be a whole number of at least 1")),
        };
        query.append_pair("page[size]", &number("size", 15)?.to_string());
        query.append_pair("page[number]", &number("number", 1)?.to_string());
        if let Some(sort) = call.object("sort")? {
            let field = sort
                .get("field")
                .and_then(Json::as_str)
                .ok_or("sort.field is required")?;
            let ascending = sort
                .get("ascending")
                .and_then(Json::as_bool)
                .unwrap_or(true);
            query.append_pair(
                "sort",
                &if ascending {
                    field.to_owned()
                } else {
                    format!("-{field}")
                },
            );
        }
        if let Some(fields) = call.arg("fields") {
            let Json::Array(fields) = fields else {
                return Err("fields must be an array of field names".to_owned());
            };
            let mut own: Vec<String> = Vec::new();
            let mut nested: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            for field in &fields {
                let field = field.as_str().ok_or("fields must hold strings")?;
                match field.split_once("@@@") {
                    Some((relation, sub)) => {
                        if !own.iter().any(|f| f == relation) {
                            own.push(relation.to_owned());
                        }
                        nested
                            .entry(relation.to_owned())
                            .or_default()
                            .push(sub.to_owned());
                    }
                    None => own.push(field.to_owned()),
                }
            }
            query.append_pair(&format!("fields[{}]", schema.name), &own.join(","));
            for (relation, subs) in nested {
                query.append_pair(&format!("fields[{relation}]"), &subs.join(","));
            }
        }
    }
    if let Some(search) = call.text("search")?.filter(|s| !s.is_empty()) {
        query.append_pair("search", &search);
        if call.bool("shouldSearchInRelation")? {
            query.append_pair("searchExtended", "true");
        }
    }
    if let Some(tree) = call.arg("filters") {
        let converted = filter::to_agent(&tree)?;
        query.append_pair("filters", &converted.to_string());
    }
    Ok(query.finish())
}

/// A list's failure, with the hint a model needs for the common mistakes.
fn list_error(answer: &Answer, schema: &CollectionSchema) -> String {
    let text = answer.error_text();
    if text.to_lowercase().contains("sort") {
        let sortable: Vec<&str> = schema
            .fields
            .iter()
            .filter(|(_, f)| f.as_column().is_some_and(|c| c.is_sortable))
            .map(|(n, _)| n.as_str())
            .collect();
        return format!(
            "{text}. The sortable fields of {} are: {}",
            schema.name,
            sortable.join(", ")
        );
    }
    text
}

async fn list_at(call: &Call<'_>, schema: &CollectionSchema, path: &str) -> Outcome {
    let query = list_query(call, schema, false)?;
    let answer = call
        .send(Method::GET, &format!("{path}?{query}"), None)
        .await;
    if !answer.ok() {
        return Err(list_error(&answer, schema));
    }
    let mut out = json!({"records": records(&answer.body)});
    if call.bool("enableCount")? {
        let query = list_query(call, schema, true)?;
        let count = call
            .send(Method::GET, &format!("{path}/count?{query}"), None)
            .await;
        if !count.ok() {
            return Err(list_error(&count, schema));
        }
        out["totalCount"] = count.body.get("count").cloned().unwrap_or(Json::Null);
    }
    Ok(out)
}

async fn list(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let path = format!("{}/{}", call.forest(), segment(&schema.name));
    list_at(call, schema, &path).await
}

fn to_many_relations(schema: &CollectionSchema) -> Vec<&str> {
    schema
        .fields
        .iter()
        .filter(|(_, f)| f.as_relation().is_some_and(|r| !r.is_to_one()))
        .map(|(n, _)| n.as_str())
        .collect()
}

/// The to-many relation named by `relationName`.
fn relation<'a>(
    call: &Call<'_>,
    schema: &'a CollectionSchema,
) -> Result<(String, &'a RelationSchema), String> {
    let name = call.required_text("relationName")?;
    match schema.fields.get(&name).and_then(FieldSchema::as_relation) {
        Some(relation) if !relation.is_to_one() => Ok((name, relation)),
        _ => Err(format!(
            "{name:?} is not a one-to-many or many-to-many relation of {}; its relations of that kind are: {}",
            schema.name,
            to_many_relations(schema).join(", ")
        )),
    }
}

async fn list_related(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let (name, relation) = relation(call, schema)?;
    let parent = call.id("parentRecordId")?;
    let target = call
        .state
        .datasource
        .schema()
        .collections
        .get(relation.foreign_collection())
        .ok_or("the relation's collection is not served")?;
    let path = format!(
        "{}/{}/{}/relationships/{}",
        call.forest(),
        segment(&schema.name),
        segment(&parent),
        segment(&name)
    );
    list_at(call, target, &path).await
}

// ----- writes ----------------------------------------------------------------------------------

async fn create(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let attributes = call
        .object("attributes")?
        .ok_or("attributes is required (an object of field values)")?;
    let body = json!({"data": {"type": schema.name, "attributes": attributes}});
    let answer = call
        .send(
            Method::POST,
            &format!("{}/{}?timezone=UTC", call.forest(), segment(&schema.name)),
            Some(&body),
        )
        .await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    Ok(json!({"record": records(&answer.body).into_iter().next()}))
}

async fn update(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let id = call.id("recordId")?;
    let attributes = call
        .object("attributes")?
        .ok_or("attributes is required (an object of field values)")?;
    let body = json!({"data": {"type": schema.name, "id": id, "attributes": attributes}});
    let path = format!(
        "{}/{}/{}?timezone=UTC",
        call.forest(),
        segment(&schema.name),
        segment(&id)
    );
    let answer = call.send(Method::PUT, &path, Some(&body)).await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    Ok(json!({"record": records(&answer.body).into_iter().next()}))
}

/// An action-request selection of these ids (the body of bulk deletes and dissociations).
fn selection(collection: &str, ids: &[String]) -> Json {
    json!({"data": {"attributes": {
        "collection_name": collection,
        "ids": ids,
        "all_records": false,
        "all_records_ids_excluded": [],
        "all_records_subset_query": {},
    }, "type": "action-requests"}})
}

async fn delete(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let ids = ids(call.arg("recordIds"), "recordIds")?;
    let path = format!("{}/{}?timezone=UTC", call.forest(), segment(&schema.name));
    let answer = call
        .send(Method::DELETE, &path, Some(&selection(&schema.name, &ids)))
        .await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    Ok(json!({"deletedCount": ids.len()}))
}

async fn associate(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let (name, relation) = relation(call, schema)?;
    let parent = call.id("parentRecordId")?;
    let target = call.id("targetRecordId")?;
    let path = format!(
        "{}/{}/{}/relationships/{}?timezone=UTC",
        call.forest(),
        segment(&schema.name),
        segment(&parent),
        segment(&name)
    );
    let body = json!({"data": [{"id": target, "type": relation.foreign_collection()}]});
    let answer = call.send(Method::POST, &path, Some(&body)).await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    Ok(
        json!({"success": true, "message": format!("{target} is now linked to {parent} through {name}")}),
    )
}

async fn dissociate(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let (name, relation) = relation(call, schema)?;
    let parent = call.id("parentRecordId")?;
    let targets = ids(call.arg("targetRecordIds"), "targetRecordIds")?;
    let path = format!(
        "{}/{}/{}/relationships/{}?timezone=UTC",
        call.forest(),
        segment(&schema.name),
        segment(&parent),
        segment(&name)
    );
    let answer = call
        .send(
            Method::DELETE,
            &path,
            Some(&selection(relation.foreign_collection(), &targets)),
        )
        .await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    Ok(
        json!({"success": true, "message": format!("{} record(s) unlinked from {parent} through {name}", targets.len())}),
    )
}

// ----- actions ---------------------------------------------------------------------------------

/// An action's form, as the agent's hooks answered it, with the values a model gave.
struct Form {
    fields: Vec<Json>,
    skipped: Vec<String>,
}

impl Form {
    fn missing(&self) -> Vec<String> {
        self.fields
            .iter()
            .filter(|f| f.get("isRequired").and_then(Json::as_bool) == Some(true))
            .filter(|f| {
                matches!(f.get("value"), None | Some(Json::Null))
                    || f.get("value") == Some(&json!(""))
            })
            .filter_map(|f| f.get("field").and_then(Json::as_str).map(str::to_owned))
            .collect()
    }

    fn answer(&self) -> Json {
        let fields: Vec<Json> = self
            .fields
            .iter()
            .map(|f| {
                let mut out = json!({
                    "name": f.get("field"),
                    "type": f.get("type"),
                    "value": f.get("value").cloned().unwrap_or(Json::Null),
                    "isRequired": f.get("isRequired").and_then(Json::as_bool).unwrap_or(false),
                });
                if let Some(description) = f.get("description") {
                    out["description"] = description.clone();
                }
                if let Some(enums) = f.get("enums").filter(|e| !e.is_null()) {
                    out["enumValues"] = enums.clone();
                }
                if let Some(options) = f
                    .pointer("/widgetEdit/parameters/static/options")
                    .filter(|o| o.is_array())
                {
                    out["allowedValues"] = options.clone();
                }
                out
            })
            .collect();
        let missing = self.missing();
        json!({
            "fields": fields,
            "canExecute": missing.is_empty(),
            "requiredFields": missing,
            "skippedFields": self.skipped,
        })
    }

    fn values(&self) -> Map<String, Json> {
        self.fields
            .iter()
            .filter_map(|f| {
                let name = f.get("field")?.as_str()?.to_owned();
                Some((name, f.get("value").cloned().unwrap_or(Json::Null)))
            })
            .collect()
    }
}

/// The action named by `actionName` and its route; ids by `recordIds`.
struct Target {
    collection: String,
    route: String,
    ids: Vec<String>,
    download: bool,
}

fn target(call: &Call<'_>) -> Result<Target, String> {
    let schema = call.collection()?;
    let name = call.required_text("actionName")?;
    let Some((index, action_name, action)) = schema
        .actions
        .iter()
        .enumerate()
        .find(|(_, (n, _))| **n == name)
        .or_else(|| {
            schema
                .actions
                .iter()
                .enumerate()
                .find(|(_, (n, _))| n.eq_ignore_ascii_case(&name))
        })
        .map(|(i, (n, a))| (i, n, a))
    else {
        let names: Vec<&str> = schema.actions.keys().map(String::as_str).collect();
        return Err(format!(
            "{name:?} is not an action of {}; its actions are: {}",
            schema.name,
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ));
    };
    let ids = match (action.scope, call.arg("recordIds")) {
        (ActionScope::Global, _) | (_, None) => Vec::new(),
        (_, value) => ids(value, "recordIds")?,
    };
    if action.scope != ActionScope::Global && ids.is_empty() {
        return Err(format!("{action_name:?} runs on records: give recordIds"));
    }
    if action.scope == ActionScope::Single && ids.len() > 1 {
        return Err(format!("{action_name:?} runs on one record at a time"));
    }
    Ok(Target {
        route: format!(
            "{}/_actions/{}",
            call.forest(),
            route_path(
                &segment(&schema.name),
                index,
                action_name,
                call.state.use_unsafe_action_endpoint
            )
        ),
        collection: schema.name.clone(),
        ids,
        download: action.generate_file,
    })
}

fn action_body(target: &Target, extra: Map<String, Json>) -> Json {
    let mut attributes = Map::new();
    attributes.insert("collection_name".to_owned(), json!(target.collection));
    attributes.insert("ids".to_owned(), json!(target.ids));
    attributes.insert("all_records".to_owned(), json!(false));
    attributes.insert("all_records_ids_excluded".to_owned(), json!([]));
    attributes.insert("all_records_subset_query".to_owned(), json!({}));
    attributes.extend(extra);
    json!({"data": {"attributes": attributes, "type": "custom-action-requests"}})
}

fn is_handle(value: &Json) -> bool {
    match value {
        Json::String(s) => s.starts_with(HANDLE_PREFIX),
        Json::Array(items) => !items.is_empty() && items.iter().all(is_handle),
        _ => false,
    }
}

/// Loads the form, then applies the given values one by one, calling each field's change hook
/// as the UI would. File handles are set last and never sent to hooks (mcp.md §3.9).
async fn action_form(call: &Call<'_>) -> Result<Form, String> {
    let target = target(call)?;
    let given = call.object("values")?.unwrap_or_default();
    let answer = call
        .send(
            Method::POST,
            &format!("{}/hooks/load?timezone=UTC", target.route),
            Some(&action_body(&target, Map::new())),
        )
        .await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    let mut fields: Vec<Json> = answer
        .body
        .get("fields")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let mut skipped = Vec::new();
    let mut handles = Vec::new();
    for (name, value) in given {
        let Some(position) = fields
            .iter()
            .position(|f| f.get("field").and_then(Json::as_str) == Some(name.as_str()))
        else {
            skipped.push(name);
            continue;
        };
        if is_handle(&value) {
            handles.push((position, value));
            continue;
        }
        fields[position]["value"] = value;
        if fields[position].get("hook").is_some_and(|h| !h.is_null()) {
            let mut extra = Map::new();
            extra.insert("fields".to_owned(), json!(fields));
            extra.insert("changed_field".to_owned(), json!(name));
            let changed = call
                .send(
                    Method::POST,
                    &format!("{}/hooks/change?timezone=UTC", target.route),
                    Some(&action_body(&target, extra)),
                )
                .await;
            if !changed.ok() {
                return Err(changed.error_text());
            }
            if let Some(new_fields) = changed.body.get("fields").and_then(Json::as_array) {
                fields = new_fields.clone();
            }
        }
    }
    for (position, value) in handles {
        if let Some(field) = fields.get_mut(position) {
            field["value"] = value;
        }
    }
    Ok(Form { fields, skipped })
}

/// Replaces file handles by the uploaded files' data URIs.
fn resolve_files(call: &Call<'_>, value: Json) -> Result<Json, String> {
    let uploads = || {
        call.state
            .mcp
            .as_ref()
            .and_then(|m| m.uploads.as_ref())
            .ok_or("file uploads are turned off on this server")
    };
    match value {
        Json::String(s) if s.starts_with(HANDLE_PREFIX) => {
            let uploads = uploads()?;
            let handle = uploads
                .handle(&s, call.caller.claims.user.id)
                .map_err(|e| e.to_string())?;
            uploads
                .data_uri(&handle)
                .map(Json::String)
                .map_err(|e| e.to_string())
        }
        Json::Array(items) if is_handle(&Json::Array(items.clone())) => items
            .into_iter()
            .map(|i| resolve_files(call, i))
            .collect::<Result<Vec<_>, _>>()
            .map(Json::Array),
        other => Ok(other),
    }
}

async fn execute_action(call: &Call<'_>) -> Outcome {
    let form = action_form(call).await?;
    let target = target(call)?;
    if target.download {
        return Err("This action answers with a file to download, which an MCP client cannot receive: run it from the UI.".to_owned());
    }
    let missing = form.missing();
    if !missing.is_empty() {
        return Err(format!(
            "The form is not complete: give values for {} (call getActionForm to see the fields)",
            missing.join(", ")
        ));
    }
    let mut values = Map::new();
    for (name, value) in form.values() {
        values.insert(name, resolve_files(call, value)?);
    }
    let mut extra = Map::new();
    extra.insert("values".to_owned(), Json::Object(values));
    let body = action_body(&target, extra);
    let answer = call
        .send(
            Method::POST,
            &format!("{}?timezone=UTC", target.route),
            Some(&body),
        )
        .await;
    if answer.ok() {
        return Ok(answer.body);
    }
    if answer.error_name() != Some("CustomActionRequiresApprovalError") {
        return Err(answer.error_text());
    }
    // The UI files an approval request at this point; so does the tool.
    let store = call
        .state
        .store
        .as_ref()
        .ok_or("approvals need Canopy's store")?;
    let action_name = call.required_text("actionName")?;
    let mut filing = body.clone();
    filing["action"] = json!(action_name);
    let path = format!(
        "{}/project/{}/environment/{}/approval-requests",
        crate::http::platform::base_path(call.forest()),
        segment(store.project()),
        segment(store.environment())
    );
    let filed = call.send(Method::POST, &path, Some(&filing)).await;
    if !filed.ok() {
        return Err(filed.error_text());
    }
    let id = filed.body.get("id").cloned().unwrap_or(Json::Null);
    let reasoning = call.text("reasoning")?.unwrap_or_default();
    Ok(json!({
        "approvalRequested": true,
        "approvalRequestId": id,
        "message": format!(
            "Approval requested: {action_name:?} needs an approver's decision before it runs{}",
            if reasoning.is_empty() { String::new() } else { format!(" (reason given: {reasoning})") }
        ),
    }))
}

fn request_upload(call: &Call<'_>) -> Outcome {
    let mcp = call
        .state
        .mcp
        .as_ref()
        .ok_or("the MCP server is not mounted")?;
    let uploads = mcp
        .uploads
        .as_ref()
        .ok_or("file uploads are turned off on this server")?;
    if !call
        .caller
        .claims
        .scope
        .split(' ')
        .any(|s| s == "mcp:action")
    {
        return Err(
            "uploading action files needs the mcp:action scope: sign in again granting it"
                .to_owned(),
        );
    }
    let filename = call.required_text("filename")?;
    let mime = call.required_text("mimeType")?;
    let sha256 = call.text("sha256")?;
    let (key, handle) = uploads
        .reserve(
            call.caller.claims.user.id,
            &filename,
            &mime,
            sha256.as_deref(),
        )
        .map_err(|e| e.to_string())?;
    let url = format!(
        "{}{}/{}",
        mcp.base_url(&call.caller.base),
        mcp.paths().uploads,
        segment(&key)
    );
    Ok(json!({
        "uploadUrl": url,
        "method": "PUT",
        "headers": {"Content-Type": mime},
        "expiresInSeconds": uploads.settings.url_ttl.as_secs(),
        "maxBytes": uploads.settings.max_bytes,
        "fileHandle": handle,
        "prerequisite": "The client making the PUT must be able to reach this URL (sandboxed assistants may need it allowed).",
    }))
}

// ----- workflows -------------------------------------------------------------------------------

fn v1_environment(call: &Call<'_>) -> Result<String, String> {
    let store = call
        .state
        .store
        .as_ref()
        .ok_or("workflows need Canopy's store")?;
    Ok(format!(
        "{}/project/{}/environment/{}",
        crate::http::platform::base_path(call.forest()),
        segment(store.project()),
        segment(store.environment())
    ))
}

async fn list_workflows(call: &Call<'_>) -> Outcome {
    let base = v1_environment(call)?;
    let collection = call.text("collectionName")?;
    let answer = call
        .send(Method::GET, &format!("{base}/workflows"), None)
        .await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    let items = answer
        .body
        .get("data")
        .or_else(|| answer.body.get("workflows"))
        .and_then(Json::as_array)
        .cloned()
        .or_else(|| answer.body.as_array().cloned())
        .unwrap_or_default();
    let workflows: Vec<Json> = items
        .into_iter()
        .filter(|w| {
            collection.as_deref().is_none_or(|c| {
                w.get("collectionName")
                    .or_else(|| w.get("collection"))
                    .and_then(Json::as_str)
                    == Some(c)
            })
        })
        .collect();
    Ok(json!({"workflows": workflows}))
}

async fn trigger_workflow(call: &Call<'_>) -> Outcome {
    let base = v1_environment(call)?;
    let workflow = call.required_text("workflowId")?;
    let record = call.id("recordId")?;
    if record.len() > 255 {
        return Err("recordId must be at most 255 characters".to_owned());
    }
    let answer = call
        .send(
            Method::POST,
            &format!("{base}/workflows/{}/runs", segment(&workflow)),
            Some(&json!({"recordId": record})),
        )
        .await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    Ok(answer.body)
}

async fn get_workflow_run(call: &Call<'_>) -> Outcome {
    let base = v1_environment(call)?;
    let run = call.required_text("runId")?;
    let answer = call
        .send(
            Method::GET,
            &format!("{base}/workflow-runs/{}", segment(&run)),
            None,
        )
        .await;
    if !answer.ok() {
        return Err(answer.error_text());
    }
    Ok(answer.body)
}
