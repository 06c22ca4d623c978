//! The tools' definitions (mcp.md §3.6): names, titles, descriptions, annotations and input
//! schemas. `collectionName` is an enum of the served collections, so a model picks a real one.

use serde_json::{Value as Json, json};

use super::filter;

/// One tool as `tools/list` gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: String,
    pub input_schema: Json,
    pub read_only: bool,
    pub destructive: bool,
}

fn collection(collections: &[String]) -> Json {
    json!({"type": "string", "enum": collections, "description": "The collection's name, as describeCollection lists it"})
}

fn id() -> Json {
    json!({"type": ["string", "number"]})
}

fn object(properties: &Json, required: &[&str]) -> Json {
    json!({"type": "object", "properties": properties, "required": required})
}

fn list_properties(collections: &[String]) -> serde_json::Map<String, Json> {
    let Json::Object(properties) = json!({
        "collectionName": collection(collections),
        "search": {"type": "string", "description": "Full-text search over the collection's searchable fields"},
        "filters": filter::schema(),
        "sort": {
            "type": "object",
            "properties": {
                "field": {"type": "string", "description": "A sortable field, or \"relation:field\""},
                "ascending": {"type": "boolean", "default": true}
            },
            "required": ["field"]
        },
        "shouldSearchInRelation": {"type": "boolean", "default": false, "description": "Also search the to-one relations' fields"},
        "fields": {"type": "array", "items": {"type": "string"}, "description": "Fields to return; a to-one relation's field as \"relation@@@field\". Default: every field"},
        "pagination": {
            "type": "object",
            "properties": {
                "size": {"type": "number", "default": 15},
                "number": {"type": "number", "default": 1}
            }
        },
        "enableCount": {"type": "boolean", "default": false, "description": "Also return totalCount"}
    }) else {
        return serde_json::Map::new();
    };
    properties
}

/// Every tool, for these collections; `uploads` says whether files are uploaded out of band.
pub fn definitions(collections: &[String], uploads: bool) -> Vec<ToolDef> {
    let action_values = if uploads {
        "Values of the form's fields by name. For a File field, never inline base64: call \
         requestActionFileUpload, PUT the bytes, and pass the returned fileHandle as the value."
    } else {
        "Values of the form's fields by name."
    };
    let mut related = list_properties(collections);
    related.insert(
        "relationName".to_owned(),
        json!({"type": "string", "description": "A one-to-many or many-to-many relation of the collection"}),
    );
    related.insert(
        "parentRecordId".to_owned(),
        json!({"type": ["string", "number"], "description": "ID of the parent record that owns the relation"}),
    );
    let action_form = |reasoning: bool| {
        let mut properties = json!({
            "collectionName": collection(collections),
            "actionName": {"type": "string", "description": "The action's name, as describeCollection lists it"},
            "recordIds": {"type": ["array", "null"], "items": id(), "description": "The records to run the action on. Use null for global actions"},
            "values": {"type": "object", "description": action_values}
        });
        if reasoning {
            properties["reasoning"] = json!({"type": "string", "description": "Why the action is run; shown to approvers when it needs approval"});
        }
        object(&properties, &["collectionName", "actionName", "recordIds"])
    };
    vec![
        ToolDef {
            name: "describeCollection",
            title: "Describe a collection",
            description:
                "Discover a collection's fields (types, the filter operators each supports, \
                whether it is sortable or read-only), its relations and its actions. Always call \
                it first. Actions of type single/bulk take record ids, global ones none; call \
                getActionForm before executeAction when hasForm is true; download actions cannot \
                be executed here."
                    .to_owned(),
            input_schema: object(
                &json!({"collectionName": collection(collections)}),
                &["collectionName"],
            ),
            read_only: true,
            destructive: false,
        },
        ToolDef {
            name: "list",
            title: "List records from a collection",
            description: "Retrieve a list of records from the specified collection.".to_owned(),
            input_schema: json!({"type": "object", "properties": list_properties(collections), "required": ["collectionName"]}),
            read_only: true,
            destructive: false,
        },
        ToolDef {
            name: "listRelated",
            title: "List records from a relation",
            description: "Retrieve a list of records from a one-to-many or many-to-many relation."
                .to_owned(),
            input_schema: json!({"type": "object", "properties": related, "required": ["collectionName", "relationName", "parentRecordId"]}),
            read_only: true,
            destructive: false,
        },
        ToolDef {
            name: "create",
            title: "Create a record",
            description: "Create a new record in the specified collection.".to_owned(),
            input_schema: object(
                &json!({"collectionName": collection(collections), "attributes": {"type": "object", "description": "Field values by field name"}}),
                &["collectionName", "attributes"],
            ),
            read_only: false,
            destructive: false,
        },
        ToolDef {
            name: "update",
            title: "Update a record",
            description: "Update an existing record in the specified collection.".to_owned(),
            input_schema: object(
                &json!({"collectionName": collection(collections), "recordId": id(), "attributes": {"type": "object", "description": "The field values to change, by field name"}}),
                &["collectionName", "recordId", "attributes"],
            ),
            read_only: false,
            destructive: true,
        },
        ToolDef {
            name: "delete",
            title: "Delete records",
            description: "Delete one or more records from the specified collection.".to_owned(),
            input_schema: object(
                &json!({"collectionName": collection(collections), "recordIds": {"type": "array", "items": id(), "minItems": 1}}),
                &["collectionName", "recordIds"],
            ),
            read_only: false,
            destructive: true,
        },
        ToolDef {
            name: "associate",
            title: "Associate records in a relation",
            description: "Link a record to a parent record through a one-to-many or many-to-many \
                relation (the join row is created; no record is changed otherwise)."
                .to_owned(),
            input_schema: object(
                &json!({
                    "collectionName": collection(collections),
                    "relationName": {"type": "string"},
                    "parentRecordId": {"type": ["string", "number"], "description": "ID of the parent record that owns the relation"},
                    "targetRecordId": {"type": ["string", "number"], "description": "ID of the record to associate"}
                }),
                &[
                    "collectionName",
                    "relationName",
                    "parentRecordId",
                    "targetRecordId",
                ],
            ),
            read_only: false,
            destructive: false,
        },
        ToolDef {
            name: "dissociate",
            title: "Dissociate records from a relation",
            description: "Unlink records from a parent record's one-to-many or many-to-many \
                relation (the targets are not deleted)."
                .to_owned(),
            input_schema: object(
                &json!({
                    "collectionName": collection(collections),
                    "relationName": {"type": "string"},
                    "parentRecordId": {"type": ["string", "number"], "description": "ID of the parent record that owns the relation"},
                    "targetRecordIds": {"type": "array", "items": id(), "minItems": 1}
                }),
                &[
                    "collectionName",
                    "relationName",
                    "parentRecordId",
                    "targetRecordIds",
                ],
            ),
            read_only: false,
            destructive: true,
        },
        ToolDef {
            name: "getActionForm",
            title: "Retrieve action form",
            description: "Call before executeAction. 1. Call it with the records. 2. Read \
                canExecute and requiredFields. 3. Call it again with values until canExecute is \
                true (submit each field's value, not its label). 4. Execute with the same values."
                .to_owned(),
            input_schema: action_form(false),
            read_only: true,
            destructive: false,
        },
        ToolDef {
            name: "executeAction",
            title: "Execute an action",
            description: "Run an action on records (or none for a global action) with the values \
                getActionForm accepted. An action that needs approval files an approval request \
                instead and says so."
                .to_owned(),
            input_schema: action_form(true),
            read_only: false,
            destructive: true,
        },
        ToolDef {
            name: "requestActionFileUpload",
            title: "Request an upload destination for an action file field",
            description: "For File and FileList fields of an action: 1. compute the file's sha256 \
                and call this; 2. PUT the raw bytes to uploadUrl with the returned method and \
                headers; 3. pass fileHandle as the field's value to executeAction. The URL works \
                once; the handle expires."
                .to_owned(),
            input_schema: object(
                &json!({
                    "filename": {"type": "string", "minLength": 1},
                    "mimeType": {"type": "string"},
                    "sha256": {"type": "string", "description": "The file's SHA-256, hex or base64"}
                }),
                &["filename", "mimeType"],
            ),
            read_only: false,
            destructive: false,
        },
        ToolDef {
            name: "listWorkflows",
            title: "List workflows",
            description: "List the workflows this user may run, optionally of one collection."
                .to_owned(),
            input_schema: object(&json!({"collectionName": {"type": "string"}}), &[]),
            read_only: true,
            destructive: false,
        },
        ToolDef {
            name: "triggerWorkflow",
            title: "Trigger a workflow",
            description: "Start a run of a workflow on one record (a composite id joined with \
                \"|\"). One run at a time per workflow and record."
                .to_owned(),
            input_schema: object(
                &json!({
                    "workflowId": {"type": "string"},
                    "recordId": {"type": ["string", "number"], "maxLength": 255}
                }),
                &["workflowId", "recordId"],
            ),
            read_only: false,
            destructive: true,
        },
        ToolDef {
            name: "getWorkflowRun",
            title: "Get a workflow run",
            description: "A workflow run's state and steps.".to_owned(),
            input_schema: object(&json!({"runId": {"type": "string"}}), &["runId"]),
            read_only: true,
            destructive: false,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_configured_tool_has_a_definition_in_order() {
        let names: Vec<&str> = definitions(&["books".to_owned()], true)
            .iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, crate::config::MCP_TOOLS);
        let list = &definitions(&["books".to_owned()], true)[1];
        assert_eq!(
            list.input_schema["properties"]["collectionName"]["enum"],
            json!(["books"])
        );
    }
}
