//! The action tools: `getActionForm` (the form loaded, then each given value applied with its
//! change hook, as the UI does), `executeAction` (uploaded files resolved, an approval filed when
//! the action needs one) and `requestActionFileUpload`. The form, the execution and the
//! approval request call `ops::actions` and `ops::approvals` with the body the UI would send.

use serde_json::{Map, Value as Json, json};

use super::calls::{Call, Outcome, direct, ids};
use super::error;
use super::records::segment;
use crate::agent::action::{ResultBody, form_json, parse_hook, parse_values, result_body};
use crate::auth;
use crate::datasource::action::{ActionScope, FormPhase};
use crate::mcp::uploads::HANDLE_PREFIX;
use crate::ops::{self, actions, approvals};

/// An action's form, as the agent's hooks answered it, with the values a model gave.
pub(super) struct Form {
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

    pub(super) fn answer(&self) -> Json {
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

/// The action named by `actionName`; ids by `recordIds`.
struct Target {
    collection: String,
    /// The action's name.
    action: String,
    ids: Vec<String>,
    download: bool,
}

fn target(call: &Call<'_>) -> Result<Target, String> {
    let schema = call.collection()?;
    let name = call.required_text("actionName")?;
    let Some((action_name, action)) =
        schema
            .actions
            .iter()
            .find(|(n, _)| **n == name)
            .or_else(|| {
                schema
                    .actions
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&name))
            })
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
        collection: schema.name.clone(),
        action: action_name.clone(),
        ids,
        download: action.generate_file,
    })
}

/// The form of the action for the body's values, as the hook route computes it (`load`, or
/// `change` of the body's `changed_field`): `{fields, layout}`.
async fn hook(call: &Call<'_>, target: &Target, body: &Json, change: bool) -> Result<Json, String> {
    let form = async {
        let context = direct(call).await?;
        let ops = call.ops();
        let schema = ops.collection(&target.collection)?;
        let scope = schema
            .actions
            .get(&target.action)
            .map(|a| a.scope)
            .ok_or(ops::Error::NotFound)?;
        let request = parse_hook(body);
        let phase = if change {
            FormPhase::Change {
                changed_field: request.changed_field.clone().unwrap_or_default(),
            }
        } else {
            FormPhase::Load
        };
        let selected = actions::Target::parse(ops, &context.query, schema, scope, body)?;
        let form = actions::form(
            ops,
            &context.caller,
            schema,
            &target.action,
            selected,
            &request.values,
            &phase,
        )
        .await?;
        Ok::<_, ops::Error>(form_json(ops.schema(), &form)?)
    }
    .await;
    form.map_err(|error| error::text(&error))
}

/// Why an execution did not succeed.
enum Failed {
    /// The action needs an approver's decision first (the caller may file a request).
    NeedsApproval,
    /// Refused or failed: the sentence a model reads.
    Error(String),
}

/// Runs the action with the body's values, as the execute route does: `Ok` with the result's
/// body when it succeeded.
async fn execute(call: &Call<'_>, target: &Target, body: &Json) -> Result<Json, Failed> {
    let result = async {
        let context = direct(call).await?;
        let ops = call.ops();
        let schema = ops.collection(&target.collection)?;
        let scope = schema
            .actions
            .get(&target.action)
            .map(|a| a.scope)
            .ok_or(ops::Error::NotFound)?;
        let request = actions::ExecuteRequest {
            collection: schema.name.clone(),
            action: target.action.clone(),
            ids: target.ids.clone(),
            requester: None,
            target: actions::Target::parse(ops, &context.query, schema, scope, body)?,
            values: parse_values(body)?,
        };
        actions::execute(ops, &context.caller, request).await
    }
    .await;
    match result {
        Ok(result) => match result_body(result.outcome) {
            ResultBody::Json { status, body } if (200..300).contains(&status) => Ok(body),
            // An action that answered an error (`resultBuilder.error`).
            ResultBody::Json { status, body } => {
                Err(Failed::Error(error::answer_text(status, &body)))
            }
            // `target.download` refuses these before running.
            ResultBody::File { .. } => Ok(Json::Null),
        },
        Err(ops::Error::Auth(auth::Error::ActionRequiresApproval { .. })) => {
            Err(Failed::NeedsApproval)
        }
        Err(error) => Err(Failed::Error(error::text(&error))),
    }
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
pub(super) async fn action_form(call: &Call<'_>) -> Result<Form, String> {
    let target = target(call)?;
    let given = call.object("values")?.unwrap_or_default();
    let loaded = hook(call, &target, &action_body(&target, Map::new()), false).await?;
    let mut fields: Vec<Json> = loaded
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
            let changed = hook(call, &target, &action_body(&target, extra), true).await?;
            if let Some(new_fields) = changed.get("fields").and_then(Json::as_array) {
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

/// Replaces file handles by the uploaded files' data URIs: a field's value is one handle or a
/// list of them (`is_handle`); anything else is kept as it is.
async fn resolve_files(call: &Call<'_>, value: Json) -> Result<Json, String> {
    if !is_handle(&value) {
        return Ok(value);
    }
    let uploads = call
        .state
        .mcp
        .as_ref()
        .and_then(|m| m.uploads.as_ref())
        .ok_or("file uploads are turned off on this server")?;
    let resolve = |handle: String| async move {
        let handle = uploads
            .handle(&handle, call.caller.claims.user.id)
            .map_err(|e| e.to_string())?;
        uploads
            .data_uri(&handle)
            .await
            .map(Json::String)
            .map_err(|e| e.to_string())
    };
    match value {
        Json::String(handle) => resolve(handle).await,
        Json::Array(items) => {
            let mut files = Vec::with_capacity(items.len());
            for item in items {
                files.push(match item {
                    Json::String(handle) => resolve(handle).await?,
                    other => other,
                });
            }
            Ok(Json::Array(files))
        }
        other => Ok(other),
    }
}

pub(super) async fn execute_action(call: &Call<'_>) -> Outcome {
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
        values.insert(name, resolve_files(call, value).await?);
    }
    let mut extra = Map::new();
    extra.insert("values".to_owned(), Json::Object(values));
    let body = action_body(&target, extra);
    match execute(call, &target, &body).await {
        Ok(done) => return Ok(done),
        Err(Failed::Error(text)) => return Err(text),
        Err(Failed::NeedsApproval) => {}
    }
    // The UI files an approval request at this point; so does the tool, through the same
    // operation as the approval routes and the console (its `createApproval` entry included).
    let action_name = call.required_text("actionName")?;
    let mut filing = body.clone();
    filing["action"] = json!(action_name);
    let filed = async {
        let context = direct(call).await?;
        approvals::file(
            call.ops(),
            &context.caller,
            &context.query,
            &filing,
            call.state.approvals.max_records_for_approval,
        )
        .await
    }
    .await
    .map_err(|error| error::text(&error))?;
    let reasoning = call.text("reasoning")?.unwrap_or_default();
    Ok(json!({
        "approvalRequested": true,
        "approvalRequestId": filed.approval.id,
        "message": format!(
            "Approval requested: {action_name:?} needs an approver's decision before it runs{}",
            if reasoning.is_empty() { String::new() } else { format!(" (reason given: {reasoning})") }
        ),
    }))
}

pub(super) async fn request_upload(call: &Call<'_>) -> Outcome {
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
        .await
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
