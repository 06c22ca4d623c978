//! The tools: each checks its arguments (a mistake is a tool error a model can read and fix),
//! then acts as the MCP user through the operations layer, after the private checks every
//! surface runs (`auth::private`: the IP whitelist, an enabled user). The data tools (`list`,
//! `listRelated`, `create`, `update`, `delete`, `associate`, `dissociate`) call `ops::records`
//! and `ops::relations` with the requests parsed as the `/forest` routes parse them; a record
//! answer is the JSON:API document a route would write, flattened. The action tools are in
//! `actions`, the workflow tools in `workflows`. Nothing here knows HTTP: `http` mounts the
//! server (`server`) and authenticates the user.

use std::net::SocketAddr;

use serde_json::{Map, Value as Json, json};

use super::actions::{action_form, execute_action, request_upload};
use super::error;
use super::records::records;
use super::server::McpCaller;
use super::workflows::{get_workflow_run, list_workflows, trigger_workflow};
use crate::agent::query_string::{Params, QueryString, parse_filter, parse_selection};
use crate::datasource::action::ActionScope;
use crate::datasource::{Caller, CollectionSchema, FieldSchema, RelationSchema};
use crate::mcp::filter;
use crate::ops::permission::LiveSegmentQuery;
use crate::ops::records::{FilterRequest, SelectionRequest};
use crate::ops::{self, Ops};
use crate::platform::activity::{Action, Actor, Entry, Origin};
use crate::state::SharedState;

/// A tool's outcome: its JSON answer, or the message of a tool error.
pub(super) type Outcome = Result<Json, String>;
/// A tool's answer as the JSON text it is sent as.
pub(super) type Text = Result<String, String>;

/// One call's context.
pub(super) struct Call<'a> {
    pub state: &'a SharedState,
    pub caller: &'a McpCaller,
    /// The MCP client's address (the IP whitelist's).
    pub peer: Option<SocketAddr>,
    pub args: Map<String, Json>,
}

/// The MCP user as a caller of the operations, with the query string a route would have read.
pub(super) struct Context {
    pub caller: Caller,
    pub query: QueryString,
}

impl Call<'_> {
    /// The operations of the served generation.
    pub(super) fn ops(&self) -> &Ops {
        self.state
    }

    /// An argument that may be given as JSON text (some clients stringify objects).
    pub(super) fn arg(&self, key: &str) -> Option<Json> {
        match self.args.get(key) {
            None | Some(Json::Null) => None,
            Some(Json::String(text)) if key_takes_json(key) => {
                Some(serde_json::from_str(text).unwrap_or(Json::String(text.clone())))
            }
            Some(value) => Some(value.clone()),
        }
    }

    pub(super) fn text(&self, key: &str) -> Result<Option<String>, String> {
        match self.arg(key) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("{key} must be a string")),
        }
    }

    pub(super) fn required_text(&self, key: &str) -> Result<String, String> {
        self.text(key)?
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| format!("{key} is required"))
    }

    /// An id: a string or a number, as text.
    pub(super) fn id(&self, key: &str) -> Result<String, String> {
        id_text(self.arg(key).as_ref())
            .ok_or_else(|| format!("{key} is required (a string or a number)"))
    }

    pub(super) fn object(&self, key: &str) -> Result<Option<Map<String, Json>>, String> {
        match self.arg(key) {
            None => Ok(None),
            Some(Json::Object(o)) => Ok(Some(o)),
            Some(_) => Err(format!("{key} must be an object")),
        }
    }

    pub(super) fn bool(&self, key: &str) -> Result<bool, String> {
        match self.arg(key) {
            None => Ok(false),
            Some(Json::Bool(b)) => Ok(b),
            Some(_) => Err(format!("{key} must be true or false")),
        }
    }

    /// The served collection named by `collectionName`.
    pub(super) fn collection(&self) -> Result<&CollectionSchema, String> {
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

pub(super) fn ids(value: Option<Json>, key: &str) -> Result<Vec<String>, String> {
    match value {
        Some(Json::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|i| id_text(Some(i)).ok_or_else(|| format!("{key} must hold strings or numbers")))
            .collect(),
        _ => Err(format!("{key} must be a non-empty array of ids")),
    }
}

/// Runs the tool `name`; `None` when there is no such tool.
pub(super) async fn run(call: &Call<'_>, name: &str) -> Option<Text> {
    let json = |outcome: Outcome| outcome.map(|value| value.to_string());
    Some(match name {
        "describeCollection" => json(describe(call).await),
        "list" => list(call).await,
        "listRelated" => json(list_related(call).await),
        "create" => json(create(call).await),
        "update" => json(update(call).await),
        "delete" => json(delete(call).await),
        "associate" => json(associate(call).await),
        "dissociate" => json(dissociate(call).await),
        "getActionForm" => json(action_form(call).await.map(|form| form.answer())),
        "executeAction" => json(execute_action(call).await),
        "requestActionFileUpload" => json(request_upload(call).await),
        "listWorkflows" => json(list_workflows(call).await),
        "triggerWorkflow" => json(trigger_workflow(call).await),
        "getWorkflowRun" => json(get_workflow_run(call).await),
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
fn list_error(error: &ops::Error, schema: &CollectionSchema) -> String {
    let text = error::text(error);
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

/// `list` calls the operations directly (`ops::records::list` and `count`: rights, scope,
/// segment, relation reads, activity) and writes the records as plain JSON in one pass; through
/// the router they would be written as JSON:API, read back and written again.
async fn list(call: &Call<'_>) -> Text {
    let schema = call.collection()?;
    let query = list_query(call, schema, false)?;
    let ops = call.ops();
    let listed = async {
        let mut context = direct(call).await?;
        context.query = QueryString::parse(&query);
        let request = ops::records::ListRequest::parse(ops, &schema.name, &context.query, None);
        let kind = ops::records::list_kind(&context.query);
        let request = parsed(call, kind, &context, &schema.name, None, None, request).await?;
        let listed = ops::records::list(ops, &context.caller, request).await?;
        Ok::<_, ops::Error>((context.caller, listed))
    }
    .await;
    let (caller, listed) = match listed {
        Ok(listed) => listed,
        Err(error) => return Err(list_error(&error, schema)),
    };
    let records = crate::agent::serialize::PlainRecords {
        schema: ops.schema(),
        collection: schema,
        records: &listed.records,
    };
    let records = serde_json::to_string(&records).map_err(|e| e.to_string())?;
    if !call.bool("enableCount")? {
        return Ok(format!(r#"{{"records":{records}}}"#));
    }
    let count_query = QueryString::parse(&list_query(call, schema, true)?);
    let counted = match parse_filter(&Params::new(&count_query), ops.schema(), schema) {
        Ok(filter) => {
            let request = FilterRequest {
                collection: schema.name.clone(),
                filter,
                segment_query: None,
            };
            ops::records::count(ops, &caller, request).await
        }
        Err(error) => Err(error.into()),
    };
    let total = match counted {
        Ok(ops::records::Counted::Count(count)) => json!(count),
        // The deactivated body has no top-level `count`.
        Ok(ops::records::Counted::Deactivated) => Json::Null,
        Err(error) => return Err(list_error(&error, schema)),
    };
    Ok(format!(r#"{{"records":{records},"totalCount":{total}}}"#))
}

/// The MCP user as a caller of the operations, once the private checks passed (the IP
/// whitelist and an enabled user), as the router runs them before a route.
pub(super) async fn direct(call: &Call<'_>) -> ops::Result<Context> {
    let claims = call.caller.claims.user.clone();
    call.ops()
        .permissions
        .private_checks(claims.id, None, call.peer.map(|p| p.ip()))
        .await?;
    Ok(Context {
        caller: claims.into_caller(chrono_tz::UTC, uuid::Uuid::new_v4()),
        query: QueryString::parse("timezone=UTC"),
    })
}

/// A request that could not be parsed leaves its failed activity entry, and answers the
/// refusal of the collection right when there is one (`ops::activity::unparsed`), as the route
/// does.
pub(super) async fn parsed<T>(
    call: &Call<'_>,
    action: Action,
    context: &Context,
    collection: &str,
    record: Option<&str>,
    label: Option<String>,
    request: Result<T, impl Into<ops::Error>>,
) -> ops::Result<T> {
    let error = match request {
        Ok(request) => return Ok(request),
        Err(error) => error.into(),
    };
    ops::activity::unparsed(
        call.ops(),
        action,
        &context.caller,
        collection,
        record,
        label,
    )
    .await?;
    Err(error)
}

/// The filter of a count's query string; a collection whose count is deactivated
/// (`disableCount`) answers so whatever its filters: they are not read.
fn filter_request(
    ops: &Ops,
    context: &Context,
    collection: &CollectionSchema,
) -> ops::Result<FilterRequest> {
    let filter = if collection.countable {
        parse_filter(&Params::new(&context.query), ops.schema(), collection)?
    } else {
        crate::agent::query_string::RequestFilter::default()
    };
    Ok(FilterRequest {
        collection: collection.name.clone(),
        filter,
        segment_query: LiveSegmentQuery::of(&context.query),
    })
}

/// The selection of a bulk body on `collection`, as the bulk routes read it.
fn selection_request(
    ops: &Ops,
    context: &Context,
    collection: &CollectionSchema,
    body: &Json,
) -> ops::Result<SelectionRequest> {
    let selection = parse_selection(body, collection)?;
    let filter = selection.filter(&context.query, ops.schema(), collection)?;
    Ok(SelectionRequest {
        collection: collection.name.clone(),
        all_records: selection.all_records,
        ids: selection.ids,
        filter,
    })
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

/// The records of a JSON:API document as the tools answer them (`records::records`): the
/// document a route would have written, flattened, so that a tool answers what it answered when
/// it called the route.
fn flattened(document: &crate::agent::serialize::Document<'_>) -> ops::Result<Vec<Json>> {
    let bytes = document.to_bytes()?;
    let document: Json = serde_json::from_slice(&bytes)
        .map_err(|e| crate::datasource::Error::Internal(format!("a document was not JSON: {e}")))?;
    Ok(records(&document))
}

/// `listRelated` lists through `ops::relations::list_related` (and `count_related`).
async fn list_related(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let (name, relation) = relation(call, schema)?;
    let parent = parent(call, schema, name)?;
    let target = call
        .state
        .datasource
        .schema()
        .collections
        .get(relation.foreign_collection())
        .ok_or("the relation's collection is not served")?;
    let query = list_query(call, target, false)?;
    let listed = async {
        let mut context = direct(call).await?;
        context.query = QueryString::parse(&query);
        let ops = call.ops();
        let request = ops::records::ListRequest::parse(ops, &target.name, &context.query, None);
        let request = parsed(
            call,
            Action::ListRelatedData,
            &context,
            &parent.collection,
            Some(parent.packed_id.as_str()),
            Some(parent.relation.clone()),
            request,
        )
        .await?;
        let listed = ops::relations::list_related(ops, &context.caller, &parent, request).await?;
        let document = crate::agent::serialize::serialize_list(
            ops.schema(),
            &target.name,
            &listed.records,
            listed.search.as_deref(),
        )?;
        Ok::<_, ops::Error>((context, flattened(&document)?))
    }
    .await;
    let (mut context, records) = match listed {
        Ok(listed) => listed,
        Err(error) => return Err(list_error(&error, target)),
    };
    let mut out = json!({"records": records});
    if call.bool("enableCount")? {
        context.query = QueryString::parse(&list_query(call, target, true)?);
        let counted = async {
            let request = filter_request(call.ops(), &context, target)?;
            ops::relations::count_related(call.ops(), &context.caller, &parent, request).await
        }
        .await;
        out["totalCount"] = match counted {
            Ok(ops::records::Counted::Count(count)) => json!(count),
            // The deactivated body has no top-level `count`.
            Ok(ops::records::Counted::Deactivated) => Json::Null,
            Err(error) => return Err(list_error(&error, target)),
        };
    }
    Ok(out)
}

// ----- writes ----------------------------------------------------------------------------------

/// `create` creates through `ops::records::create`, the body parsed as the route parses it.
async fn create(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let attributes = call
        .object("attributes")?
        .ok_or("attributes is required (an object of field values)")?;
    let body = json!({"data": {"type": schema.name, "attributes": attributes}});
    let created = async {
        let context = direct(call).await?;
        let ops = call.ops();
        let plan = crate::agent::body::parse_create(&body, ops.schema(), schema);
        let plan = parsed(
            call,
            Action::Create,
            &context,
            &schema.name,
            None,
            None,
            plan,
        )
        .await?;
        let created = ops::records::create(ops, &context.caller, &schema.name, plan).await?;
        let document =
            crate::agent::serialize::serialize_one(ops.schema(), &schema.name, &created)?;
        flattened(&document)
    }
    .await;
    match created {
        Ok(records) => Ok(json!({"record": records.into_iter().next()})),
        Err(error) => Err(error::text(&error)),
    }
}

/// `update` patches through `ops::records::update`, the body parsed as the route parses it.
async fn update(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let id = call.id("recordId")?;
    let attributes = call
        .object("attributes")?
        .ok_or("attributes is required (an object of field values)")?;
    let body = json!({"data": {"type": schema.name, "id": id, "attributes": attributes}});
    let updated = async {
        let context = direct(call).await?;
        let ops = call.ops();
        let patch = crate::agent::body::parse_update(&body, schema);
        let patch = parsed(
            call,
            Action::Update,
            &context,
            &schema.name,
            Some(id.as_str()),
            None,
            patch,
        )
        .await?;
        let updated = ops::records::update(ops, &context.caller, &schema.name, &id, patch).await?;
        let document = match &updated {
            Some(record) => {
                crate::agent::serialize::serialize_one(ops.schema(), &schema.name, record)?
            }
            None => crate::agent::serialize::serialize_none(),
        };
        flattened(&document)
    }
    .await;
    match updated {
        Ok(records) => Ok(json!({"record": records.into_iter().next()})),
        Err(error) => Err(error::text(&error)),
    }
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

/// `delete` deletes the selection through `ops::records::delete_selection`, parsed as the
/// bulk-delete route parses its body.
async fn delete(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let ids = ids(call.arg("recordIds"), "recordIds")?;
    let deleted = async {
        let context = direct(call).await?;
        let body = selection(&schema.name, &ids);
        let request = selection_request(call.ops(), &context, schema, &body);
        let request = parsed(
            call,
            Action::Delete,
            &context,
            &schema.name,
            None,
            None,
            request,
        )
        .await?;
        ops::records::delete_selection(call.state, &context.caller, request).await?;
        Ok::<_, ops::Error>(())
    }
    .await;
    if let Err(error) = deleted {
        return Err(error::text(&error));
    }
    Ok(json!({"deletedCount": ids.len()}))
}

/// The relation of one parent record the tool names.
fn parent(
    call: &Call<'_>,
    schema: &CollectionSchema,
    name: String,
) -> Result<ops::relations::Parent, String> {
    Ok(ops::relations::Parent {
        collection: schema.name.clone(),
        packed_id: call.id("parentRecordId")?,
        relation: name,
    })
}

/// `associate` links through `ops::relations::associate`.
async fn associate(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let (name, relation) = relation(call, schema)?;
    let parent = parent(call, schema, name)?;
    let target = call.id("targetRecordId")?;
    let linked = async {
        let context = direct(call).await?;
        let ops = call.ops();
        let foreign = ops.collection(relation.foreign_collection())?;
        let body = json!({"data": [{"id": target, "type": foreign.name}]});
        let id = crate::agent::body::parse_associate(&body, foreign);
        let id = parsed(
            call,
            Action::Update,
            &context,
            &parent.collection,
            Some(parent.packed_id.as_str()),
            Some(format!("associated to {}", parent.relation)),
            id,
        )
        .await?;
        ops::relations::associate(ops, &context.caller, &parent, id).await?;
        Ok::<_, ops::Error>(())
    }
    .await;
    if let Err(error) = linked {
        return Err(error::text(&error));
    }
    Ok(json!({"success": true, "message": format!(
        "{target} is now linked to {} through {}",
        parent.packed_id, parent.relation
    )}))
}

/// `dissociate` unlinks through `ops::relations::dissociate`.
async fn dissociate(call: &Call<'_>) -> Outcome {
    let schema = call.collection()?;
    let (name, relation) = relation(call, schema)?;
    let parent = parent(call, schema, name)?;
    let targets = ids(call.arg("targetRecordIds"), "targetRecordIds")?;
    let unlinked = async {
        let context = direct(call).await?;
        let ops = call.ops();
        let foreign = ops.collection(relation.foreign_collection())?;
        let body = selection(&foreign.name, &targets);
        let request = selection_request(call.ops(), &context, foreign, &body);
        let request = parsed(
            call,
            Action::Update,
            &context,
            &parent.collection,
            Some(parent.packed_id.as_str()),
            Some(format!("dissociated from {}", parent.relation)),
            request,
        )
        .await?;
        let request = ops::relations::DissociateRequest {
            delete: false,
            selection: request,
        };
        ops::relations::dissociate(ops, &context.caller, &parent, request).await?;
        Ok::<_, ops::Error>(())
    }
    .await;
    if let Err(error) = unlinked {
        return Err(error::text(&error));
    }
    Ok(json!({"success": true, "message": format!(
        "{} record(s) unlinked from {} through {}",
        targets.len(),
        parent.packed_id,
        parent.relation
    )}))
}
