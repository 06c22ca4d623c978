//! Approval requests (issue 11 §3) as operations: filing an action that requires an approval,
//! listing the requests a caller may see, and deciding one (approving runs the action as the
//! approver, naming the requester, with the recorded values and selection).
//!
//! The `/v1/…/approval-requests` routes (`http::approvals`) and the console's inbox are thin
//! adapters over these: each takes the [`Caller`] first and the action body in the agent's wire
//! shape (`{"action", "data": {"attributes": {…}}}`), so both file exactly the same request.
//! Who may see a request: its requester, admins, and the roles that may approve its action.

use jsonwebtoken::{AlgorithmFamily, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Map, Value as Json, json};

use super::actions::{self, Selection, Target};
use super::activity::Recorded;
use super::{Error, Ops, Result};
use crate::agent::action::{ResultBody, parse_values, result_body, slug};
use crate::agent::query_string::QueryString;
use crate::auth::{self, permissions::ActionRight};
use crate::datasource::action::{ActionResult, ActionScope};
use crate::datasource::{Caller, CollectionSchema, PermissionLevel, Projection, pack_id};
use crate::platform::activity::Action;
use crate::platform::{Approval, ApprovalStatus, Store};

/// The platform's cap on select-all approvals (`maxRecordsForApproval` default and maximum).
pub const MAX_RECORDS_FOR_APPROVAL: u64 = 500;

/// What approvals need from the configuration: the environment secret that signs
/// `signed_approval_request`, and `maxRecordsForApproval`.
#[derive(Clone)]
pub struct ApprovalSettings {
    /// `None`: signed approval requests are refused (route tests over a bare stack).
    secret: Option<std::sync::Arc<(EncodingKey, DecodingKey)>>,
    pub max_records_for_approval: u64,
}

impl std::fmt::Debug for ApprovalSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalSettings")
            .field("signed_requests", &self.secret.is_some())
            .field("max_records_for_approval", &self.max_records_for_approval)
            .finish()
    }
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            secret: None,
            max_records_for_approval: MAX_RECORDS_FOR_APPROVAL,
        }
    }
}

impl ApprovalSettings {
    /// Settings with the environment secret (its text is the HMAC key, as the agent's
    /// `jsonwebtoken.verify(token, envSecret)` uses it).
    pub fn new(env_secret: &str, max_records_for_approval: u64) -> Self {
        Self {
            secret: Some(std::sync::Arc::new((
                EncodingKey::from_secret(env_secret.as_bytes()),
                DecodingKey::from_secret(env_secret.as_bytes()),
            ))),
            max_records_for_approval: max_records_for_approval.min(MAX_RECORDS_FOR_APPROVAL),
        }
    }

    /// The payload of a `signed_approval_request`, if its signature (HS256/384/512) is right
    /// and it has not expired (`exp` and `nbf` are checked when present, as `jsonwebtoken`
    /// does in Node).
    pub fn verify(&self, token: &str) -> Option<Json> {
        let secret = self.secret.as_ref()?;
        let mut validation = Validation::new_for_family(AlgorithmFamily::Hmac);
        validation.required_spec_claims.clear();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = false;
        validation.leeway = 0;
        match jsonwebtoken::decode::<Json>(token, &secret.1, &validation) {
            Ok(data) if data.claims.is_object() => Some(data.claims),
            Ok(_) => None,
            Err(error) => {
                tracing::debug!(%error, "signed approval request refused");
                None
            }
        }
    }

    /// Signs an approval payload as the Forest server does (HS256 with the environment
    /// secret); for tools and tests.
    pub fn sign(&self, payload: &Json) -> Option<String> {
        let secret = self.secret.as_ref()?;
        jsonwebtoken::encode(&Header::default(), payload, &secret.0).ok()
    }
}

/// A failed run of an approved action, as its outcome is kept: the status, name and detail the
/// agent's routes would answer (the table of [`super::Public`]); an unexpected failure's detail
/// is logged, not kept.
pub fn error_outcome(error: &Error) -> Json {
    let public = error.public();
    let message = error.to_string();
    let detail = if public.expose && !message.is_empty() {
        message
    } else {
        tracing::error!(%error, "unexpected error");
        "Unexpected error".to_owned()
    };
    let mut outcome = json!({"name": public.name, "detail": detail});
    if let Some(data) = error.data() {
        outcome["data"] = data;
    }
    json!({"status": public.status, "error": outcome})
}

/// Longest comment kept with a decision.
pub const MAX_COMMENT_CHARS: usize = 10_000;

/// Why an approval operation refused a request, beside the agent's own refusals: each surface
/// answers it in its own shape (the `/v1` routes with their `code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The body is not what filing or deciding needs (`invalid_request`).
    Invalid,
    /// No such request, collection or action, or not one the caller may see.
    NotFound,
    /// The action needs no approval of this caller on this selection: run it directly.
    NotRequired,
    /// A select-all targets more than `maxRecordsForApproval` records.
    TooManyRecords,
    /// The request is already decided.
    Conflict,
}

fn refused(refusal: Refusal, message: impl Into<String>) -> Error {
    Error::Approval {
        refusal,
        message: message.into(),
    }
}

/// Canopy's store, which keeps the requests.
fn store(ops: &Ops) -> Result<&Store> {
    ops.store
        .as_ref()
        .ok_or_else(|| refused(Refusal::NotFound, "approval requests need Canopy's store"))
}

/// A request just filed, with the roles that may approve it.
#[derive(Debug, Clone)]
pub struct Filed {
    pub approval: Approval,
    pub role_ids_allowed_to_approve: Vec<i64>,
}

/// Files `body` (`{"action": "<name or slug>", "data": {"attributes": {…action body…}}}`) for
/// approval. Only an action that requires an approval of this caller on this selection can be
/// filed; a select-all is resolved to the ids it targets now, at most `max_records` of them, so
/// that the approver approves the records the requester saw.
pub async fn file(
    ops: &Ops,
    caller: &Caller,
    query: &QueryString,
    body: &Json,
    max_records: u64,
) -> Result<Filed> {
    let store = store(ops)?;
    let action_name = body
        .get("action")
        .and_then(Json::as_str)
        .ok_or_else(|| refused(Refusal::Invalid, "`action` (the action's name) is required"))?;
    let attributes = body
        .pointer("/data/attributes")
        .and_then(Json::as_object)
        .ok_or_else(|| {
            refused(
                Refusal::Invalid,
                "`data.attributes` (the action body) is required",
            )
        })?;
    for forbidden in ["requester_id", "signed_approval_request"] {
        if attributes.contains_key(forbidden) {
            return Err(refused(
                Refusal::Invalid,
                format!("`{forbidden}` cannot be filed: the requester is the signed-in user"),
            ));
        }
    }
    let collection_name = attributes
        .get("collection_name")
        .and_then(Json::as_str)
        .ok_or_else(|| {
            refused(
                Refusal::Invalid,
                "`data.attributes.collection_name` is required",
            )
        })?;
    let (schema, name, scope) = named_action(ops, collection_name, action_name)?;
    let mut activity = Recorded::start(ops, Action::CreateApproval, caller, &schema.name);
    activity.label(name.as_str());
    let target = Target::parse(ops, query, schema, scope, body)?;
    let selection = actions::selection(ops, caller, schema, target).await?;
    let roles = match actions::check(ops, caller, schema, &name, &selection, None).await {
        Err(Error::Auth(auth::Error::ActionRequiresApproval {
            role_ids_allowed_to_approve,
        })) => role_ids_allowed_to_approve,
        Ok(()) => {
            return Err(refused(
                Refusal::NotRequired,
                "This action does not require an approval here: run it directly.",
            ));
        }
        Err(error) => return Err(error),
    };
    let attributes = frozen(
        ops,
        caller,
        schema,
        scope,
        attributes,
        &selection,
        max_records,
    )
    .await?;
    activity.records(selected_ids(&attributes));
    let approval = store
        .create_approval(
            caller.id,
            &caller.email,
            &schema.name,
            &name,
            &Json::Object(attributes),
        )
        .await?;
    tracing::info!(
        approval = approval.id,
        requester = caller.id,
        collection = schema.name,
        action = name,
        "approval request filed"
    );
    activity.done();
    Ok(Filed {
        approval,
        role_ids_allowed_to_approve: roles,
    })
}

/// A select-all selection resolved to the ids it targets now (at most `max`); other selections
/// are kept as sent.
async fn frozen(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    scope: ActionScope,
    attributes: &Map<String, Json>,
    selection: &Selection,
    max: u64,
) -> Result<Map<String, Json>> {
    let mut attributes = attributes.clone();
    let all_records = attributes.get("all_records").is_some_and(|v| v == true);
    if scope == ActionScope::Global || !all_records {
        return Ok(attributes);
    }
    let projection = Projection::new(schema.primary_keys().into_iter().map(str::to_owned));
    let filter = selection
        .for_caller
        .clone()
        .with_page(crate::datasource::Page {
            skip: 0,
            limit: max + 1,
        });
    let records = ops
        .datasource
        .collection(&schema.name)?
        .list(caller, &filter, &projection)
        .await?;
    if records.len() as u64 > max {
        return Err(refused(
            Refusal::TooManyRecords,
            format!(
                "A select-all approval may target at most {max} records (maxRecordsForApproval): \
                 narrow the selection"
            ),
        ));
    }
    let ids = records
        .iter()
        .map(|record| pack_id(schema, record))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    attributes.insert("all_records".to_owned(), Json::Bool(false));
    attributes.insert("ids".to_owned(), json!(ids));
    attributes.insert("all_records_ids_excluded".to_owned(), json!([]));
    Ok(attributes)
}

/// The requests in `status` (every state with `None`) the caller may see, newest first.
pub async fn list(
    ops: &Ops,
    caller: &Caller,
    status: Option<ApprovalStatus>,
) -> Result<Vec<Approval>> {
    let mut visible = Vec::new();
    for approval in store(ops)?.approvals(status).await? {
        if may_see(ops, caller, &approval).await? {
            visible.push(approval);
        }
    }
    Ok(visible)
}

/// One request the caller may see; otherwise (or when there is none) not found, without telling
/// whether it exists.
pub async fn visible(ops: &Ops, caller: &Caller, id: i64) -> Result<Approval> {
    match store(ops)?.approval(id).await? {
        Some(approval) if may_see(ops, caller, &approval).await? => Ok(approval),
        _ => Err(refused(
            Refusal::NotFound,
            format!("approval request {id} not found"),
        )),
    }
}

/// Whether the caller may decide this request now, without deciding: pending, and the agent's
/// approve rule holds on its recorded selection. The console shows the buttons only then.
pub async fn may_decide(
    ops: &Ops,
    caller: &Caller,
    query: &QueryString,
    approval: &Approval,
) -> Result<bool> {
    if approval.status != ApprovalStatus::Pending {
        return Ok(false);
    }
    let (schema, name, scope) =
        named_action(ops, &approval.collection_name, &approval.action_name)?;
    let body = action_body(approval);
    let target = Target::parse(ops, query, schema, scope, &body)?;
    let selection = actions::selection(ops, caller, schema, target).await?;
    match actions::check(
        ops,
        caller,
        schema,
        &name,
        &selection,
        Some(approval.requester_id),
    )
    .await
    {
        Ok(()) => Ok(true),
        Err(Error::Auth(_)) => Ok(false),
        Err(error) => Err(error),
    }
}

/// The most pending requests [`decidable`] looks at (the console's sidebar shows `99+` beyond).
pub const DECIDABLE_LOOKED_AT: usize = 100;

/// How many pending requests the caller may decide now (the console's inbox badge): the
/// newest [`DECIDABLE_LOOKED_AT`] pending ones they may see, each by [`may_decide`]. A request
/// whose action is gone is not counted. No store: none.
pub async fn decidable(ops: &Ops, caller: &Caller) -> Result<usize> {
    if ops.store.is_none() {
        return Ok(0);
    }
    let mut count = 0;
    let pending = list(ops, caller, Some(ApprovalStatus::Pending)).await?;
    for approval in pending.iter().take(DECIDABLE_LOOKED_AT) {
        match may_decide(ops, caller, &QueryString::default(), approval).await {
            Ok(true) => count += 1,
            Ok(false) | Err(Error::Approval { .. } | Error::Agent(_) | Error::NotFound) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(count)
}

/// Admins see every request; others their own, and those of actions their role may approve.
async fn may_see(ops: &Ops, caller: &Caller, approval: &Approval) -> Result<bool> {
    let permissions = &ops.permissions;
    if approval.requester_id == caller.id {
        return Ok(true);
    }
    let admin = match permissions.user(caller).await? {
        Some(user) => user.permission_level == PermissionLevel::Admin,
        // Not enforced: everyone has every right.
        None => true,
    };
    if admin {
        return Ok(true);
    }
    Ok(permissions
        .can_on_action(
            caller,
            &approval.collection_name,
            &approval.action_name,
            ActionRight::Approve,
        )
        .await?)
}

/// An approver's decision on one request.
#[derive(Debug, Clone)]
pub struct Decision {
    pub id: i64,
    /// `Approved` or `Rejected`.
    pub status: ApprovalStatus,
    pub comment: Option<String>,
}

/// Approve or reject: the agent's approve rule on the recorded selection (as the approver sees
/// it), then the atomic decision, then (approving) the run, whose outcome is kept in the request
/// (a failed run as [`error_outcome`] writes it). Answers the request
/// as stored at the end. The caller resumes a workflow run waiting on it.
pub async fn decide(
    ops: &Ops,
    caller: &Caller,
    query: &QueryString,
    decision: Decision,
) -> Result<Approval> {
    let store = store(ops)?;
    let id = decision.id;
    if decision
        .comment
        .as_ref()
        .is_some_and(|c| c.chars().count() > MAX_COMMENT_CHARS)
    {
        return Err(refused(
            Refusal::Invalid,
            format!("`comment` is longer than {MAX_COMMENT_CHARS} characters"),
        ));
    }
    let approval = visible(ops, caller, id).await?;
    if approval.status != ApprovalStatus::Pending {
        return Err(refused(
            Refusal::Conflict,
            format!(
                "approval request {id} is already {}",
                approval.status.as_str()
            ),
        ));
    }
    let (schema, name, scope) =
        named_action(ops, &approval.collection_name, &approval.action_name)?;
    let logged = if decision.status == ApprovalStatus::Approved {
        Action::ApproveApproval
    } else {
        Action::RejectApproval
    };
    let mut activity = Recorded::start(ops, logged, caller, &schema.name);
    activity.label(format!("{name} (approval request {id})"));
    activity.records(selected_ids(
        approval.attributes.as_object().unwrap_or(&Map::new()),
    ));
    let action_body = action_body(&approval);
    let target = Target::parse(ops, query, schema, scope, &action_body)?;
    let selection = actions::selection(ops, caller, schema, target).await?;
    actions::check(
        ops,
        caller,
        schema,
        &name,
        &selection,
        Some(approval.requester_id),
    )
    .await?;
    let decided = store
        .decide_approval(
            id,
            decision.status,
            caller.id,
            &caller.email,
            decision.comment.as_deref(),
        )
        .await?;
    tracing::info!(
        approval = id,
        decision = decision.status.as_str(),
        approver = caller.id,
        requester = approval.requester_id,
        collection = schema.name,
        action = name,
        "approval request decided"
    );
    if decision.status != ApprovalStatus::Approved {
        activity.done();
        return Ok(decided);
    }
    // Claimed atomically above: no second approver can run it too.
    let run = match parse_values(&action_body) {
        Ok(values) => {
            actions::perform(ops, caller, schema, &name, &selection.for_caller, &values).await
        }
        Err(error) => Err(error.into()),
    };
    let outcome = match run {
        Ok(result) => outcome_json(result),
        Err(error) => error_outcome(&error),
    };
    // The decision is made whatever the action answered (its outcome is kept in the request).
    activity.done();
    store.set_approval_outcome(id, &outcome).await?;
    Ok(store.approval(id).await?.unwrap_or(decided))
}

/// The body the agent would receive from a signed approval: the recorded attributes and the
/// requester.
fn action_body(approval: &Approval) -> Json {
    let mut attributes = approval.attributes.as_object().cloned().unwrap_or_default();
    attributes.insert("requester_id".to_owned(), json!(approval.requester_id));
    json!({"data": {"type": "custom-action-requests", "attributes": attributes}})
}

/// The collection and action a request names (the action by name or slug).
pub fn named_action<'a>(
    ops: &'a Ops,
    collection: &str,
    action: &str,
) -> Result<(&'a CollectionSchema, String, ActionScope)> {
    let schema = super::served(ops.schema(), collection).map_err(|_| {
        refused(
            Refusal::NotFound,
            format!("collection {collection:?} not found"),
        )
    })?;
    schema
        .actions
        .iter()
        .find(|(name, _)| *name == action || slug(name) == action)
        .map(|(name, a)| (schema, name.clone(), a.scope))
        .ok_or_else(|| {
            refused(
                Refusal::NotFound,
                format!("action {action:?} of {collection:?} not found"),
            )
        })
}

/// The packed ids of an action body's attributes (`ids`); none for a select-all.
pub fn selected_ids(attributes: &Map<String, Json>) -> Vec<String> {
    if attributes.get("all_records").is_some_and(truthy) {
        return Vec::new();
    }
    attributes
        .get("ids")
        .and_then(Json::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// What running the approved action answered: the agent's status and body, or a file's name,
/// type and size (its bytes are not kept).
fn outcome_json(result: ActionResult) -> Json {
    match result_body(result.outcome) {
        ResultBody::Json { status, body } => json!({"status": status, "body": body}),
        ResultBody::File {
            name,
            mime_type,
            bytes,
        } => json!({
            "status": 200,
            "file": {"name": name, "mimeType": mime_type, "size": bytes.len()},
        }),
    }
}

/// JavaScript truthiness, as the agent tests an action body's attributes.
fn truthy(value: &Json) -> bool {
    match value {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(_) | Json::Object(_) => true,
    }
}
