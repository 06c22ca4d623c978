//! Actions (§1.2, §2.7, §5.4): the records an action targets, the permission decision on an
//! execution, the execution itself and the action's form.
//!
//! An execution is checked on its selection with the caller's scope (and without it for
//! `roleIdsAllowedToApprove`): trigger and approval required, or, when the request names a
//! requester (an approved request run by its approver), approve or self-approve. The form needs
//! `trigger` alone. As in the agent, actions check no collection right (browse, read…): the
//! action's own rights are the whole decision.
//!
//! `http` (the action routes and the approval requests), the workflow engine's trigger-action
//! step and MCP call these.

use serde_json::Value as Json;

use super::activity::Recorded;
use super::records::resolve;
use super::relations::{Parent, related_tree};
use super::{Ops, Result};
use crate::agent::action::check_files;
use crate::agent::query_string::{
    Params, QueryString, RequestFilter, parse_filter, parse_selection,
};
use crate::auth::permissions::ActionRequest;
use crate::datasource::action::{ActionResult, ActionScope, FormElement, FormPhase, FormValues};
use crate::datasource::{Caller, CollectionSchema, Error as DsError, Filter, unpack_id};
use crate::platform::activity::Action;

/// The records an action targets, as the agent's `getRecordSelection` builds them twice: with
/// the caller's scope (what the action runs on and what trigger/approve conditions count) and
/// without it (what `roleIdsAllowedToApprove` counts).
#[derive(Debug, Clone)]
pub struct Selection {
    pub for_caller: Filter,
    pub for_all: Filter,
}

/// What an action request targets, parsed: the selection's ids (all but the excluded ones with
/// `all_records`) ∧ the subset query's filters, search and segment, and the parent's relation
/// when launched from related data.
#[derive(Debug, Clone)]
pub struct Target {
    pub filter: RequestFilter,
    /// `parent_collection_name`, `parent_collection_id`, `parent_association_name`.
    pub parent: Option<Parent>,
}

impl Target {
    /// The target of an action body on `collection`. Global actions ignore ids; a hook body
    /// without ids restricts nothing.
    pub fn parse(
        ops: &Ops,
        query: &QueryString,
        collection: &CollectionSchema,
        scope: ActionScope,
        body: &Json,
    ) -> Result<Self> {
        let schema = ops.schema();
        let attributes = body.pointer("/data/attributes");
        let has_ids = attributes.is_some_and(|a| {
            a.get("ids").is_some_and(|ids| !ids.is_null())
                || a.get("all_records").is_some_and(|v| v == true)
        }) || body.get("data").is_some_and(Json::is_array);
        let filter = if scope == ActionScope::Global || !has_ids {
            let subset = attributes
                .and_then(|a| a.get("all_records_subset_query"))
                .and_then(Json::as_object);
            parse_filter(
                &Params::with_subset_query(query, subset),
                schema,
                collection,
            )?
        } else {
            parse_selection(body, collection)?.filter(query, schema, collection)?
        };
        let text = |key: &str| {
            attributes
                .and_then(|a| a.get(key))
                .and_then(Json::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let parent = match (
            text("parent_collection_name"),
            text("parent_collection_id"),
            text("parent_association_name"),
        ) {
            (Some(collection), Some(packed_id), Some(relation)) => Some(Parent {
                collection,
                packed_id,
                relation,
            }),
            _ => None,
        };
        Ok(Self { filter, parent })
    }
}

/// The selection of a target: its filter with the live-query segment resolved, restricted to
/// the parent's relation, with and without the caller's scope.
pub async fn selection(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
    target: Target,
) -> Result<Selection> {
    let filter = resolve(ops, caller, collection, target.filter).await?;
    let for_all = match &target.parent {
        Some(parent) => restrict_to_parent(ops, caller, parent, filter).await?,
        None => filter,
    };
    let scope_tree = super::permission::scope(ops, caller, collection).await?;
    Ok(Selection {
        for_caller: for_all.clone().and(scope_tree),
        for_all,
    })
}

/// An action launched from a record's related data runs on the selection restricted to that
/// parent's relation.
async fn restrict_to_parent(
    ops: &Ops,
    caller: &Caller,
    parent: &Parent,
    filter: Filter,
) -> Result<Filter> {
    let parent_schema = ops.collection(&parent.collection)?;
    let parent_id = unpack_id(parent_schema, &parent.packed_id)?;
    let relation = parent_schema.relation(&parent.relation).ok_or_else(|| {
        DsError::validation(format!(
            "Relation '{}' not found on '{}'",
            parent.relation, parent_schema.name
        ))
    })?;
    let tree = related_tree(ops, caller, parent_schema, &parent_id, relation).await?;
    Ok(filter.and(Some(tree)))
}

/// The §5.4 decision on one execution: approve (or self-approve) when it carries its
/// requester, else trigger and approval required.
pub async fn check(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    name: &str,
    selection: &Selection,
    requester: Option<i64>,
) -> Result<()> {
    let collection = ops.datasource.collection(&schema.name)?;
    let request = ActionRequest {
        caller,
        collection: &*collection,
        collection_schema: schema,
        schema: ops.schema(),
        action: name,
        filter_for_caller: &selection.for_caller,
        filter_for_all: &selection.for_all,
    };
    match requester {
        Some(requester) => {
            ops.permissions
                .assert_can_approve_action(&request, requester)
                .await?;
        }
        None => ops.permissions.assert_can_trigger_action(&request).await?,
    }
    Ok(())
}

/// Runs an action already allowed on `filter` with these form values.
pub async fn perform(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    name: &str,
    filter: &Filter,
    values: &FormValues,
) -> Result<ActionResult> {
    let collection = ops.datasource.collection(&schema.name)?;
    // The form tells how to read the values (files must be data URIs), so it is computed first,
    // hidden fields included, as the agent does.
    let form = collection
        .get_form(caller, name, filter, values, &FormPhase::Execute)
        .await?;
    check_files(&form, values)?;
    Ok(collection.execute(caller, name, filter, values).await?)
}

/// One execution of an action.
#[derive(Debug, Clone)]
pub struct ExecuteRequest {
    pub collection: String,
    /// The action's name.
    pub action: String,
    pub target: Target,
    /// The packed ids the request selects (none for a select-all), for the activity entry.
    pub ids: Vec<String>,
    /// The requester of an approved request, run by its approver.
    pub requester: Option<i64>,
    pub values: FormValues,
}

/// Executes an action: the selection within the caller's scope, the §5.4 checks, then the
/// action; its activity entry names the action and the selected ids.
pub async fn execute(ops: &Ops, caller: &Caller, request: ExecuteRequest) -> Result<ActionResult> {
    let schema = ops.collection(&request.collection)?;
    let mut activity = Recorded::start(ops, Action::Action, caller, &schema.name);
    activity.label(request.action.as_str());
    activity.records(request.ids);
    let selection = selection(ops, caller, schema, request.target).await?;
    check(
        ops,
        caller,
        schema,
        &request.action,
        &selection,
        request.requester,
    )
    .await?;
    let result = perform(
        ops,
        caller,
        schema,
        &request.action,
        &selection.for_caller,
        &request.values,
    )
    .await?;
    activity.done();
    Ok(result)
}

/// The form of an action for the current values, in one phase (load, change, search): the
/// caller must be allowed to trigger the action.
pub async fn form(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
    action: &str,
    target: Target,
    values: &FormValues,
    phase: &FormPhase,
) -> Result<Vec<FormElement>> {
    ops.permissions
        .assert_can_request_action_parameters(caller, &collection.name, action)
        .await?;
    let filter = selection(ops, caller, collection, target).await?.for_caller;
    Ok(ops
        .datasource
        .collection(&collection.name)?
        .get_form(caller, action, &filter, values, phase)
        .await?)
}
