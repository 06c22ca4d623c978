//! Actions in the console (issue 22 Part 2 §3): the buttons of the table (bulk actions on the
//! selected rows, global ones with none) and of the record page (single ones), the action's
//! form, its execution and every kind of result, and the approval request an action that needs
//! an approval files instead.
//!
//! Everything goes through the operations of `ops::actions` the `/forest` action routes call:
//! the same trigger right decides whether a button shows and whether the form opens (a typed
//! URL without it is a 403 page), the same form hooks compute the form (`load`, then `change`
//! as the user types: the console's script posts the form to `…/form` and swaps the fields the
//! server renders; without the script a "Refresh form" button does the same), the same
//! execution checks the selection within the caller's scope. An action that needs an approval
//! of this user is filed through `ops::approvals`, as `POST /v1/…/approval-requests` files it.
//!
//! - `fields`: the form's inputs and the posted inputs back to form values.
//! - `inbox`: the approval requests a user may review, and their own.

pub(in crate::console) mod fields;
mod inbox;

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::{Value as Json, json};

use self::fields::{Block, Pairs};
use super::data::{Data, ListQuery};
use super::pages::{Layout, enc, html, page, record_href};
use super::session::Posted;
use super::session::{Session, first, form_pairs};
use super::{Error, Result};
use crate::agent::action::{content_disposition, slug};
use crate::agent::query_string::QueryString;
use crate::auth::permissions::ActionRight;
use crate::datasource::action::{
    ActionOutcome, ActionSchema, ActionScope, FormElement, FormPhase, FormValues,
};
use crate::datasource::{Caller, CollectionSchema};
use crate::ops::actions::{self as ops_actions, ExecuteRequest, Target};
use crate::state::SharedState;

/// The actions' routes, under the console's path.
pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/c/{collection}/actions/{action}", get(open).post(submit))
        .route("/c/{collection}/actions/{action}/form", post(refresh))
        .merge(inbox::routes())
}

// ----- buttons -----------------------------------------------------------------------------

/// A button of an action the user may trigger.
pub struct ActionButton {
    pub name: String,
    /// The form page (a link), or where the table's selection is posted.
    pub href: String,
    /// single, bulk or global.
    pub scope: &'static str,
}

/// The actions of `collection` the caller may trigger (the trigger right; one that needs an
/// approval shows too, and files a request), in schema order.
pub async fn buttons(
    state: &SharedState,
    caller: &Caller,
    collection: &CollectionSchema,
) -> Result<Vec<ActionButton>> {
    let mut out = Vec::new();
    let base = super::base_path(&state.mount_path);
    for (name, action) in &collection.actions {
        if state
            .permissions
            .can_on_action(caller, &collection.name, name, ActionRight::Trigger)
            .await?
        {
            out.push(ActionButton {
                name: name.clone(),
                href: action_href(&base, &collection.name, name),
                scope: action.scope.as_str(),
            });
        }
    }
    Ok(out)
}

fn action_href(base: &str, collection: &str, action: &str) -> String {
    format!(
        "{base}/c/{}/actions/{}",
        enc(collection),
        enc(&slug(action))
    )
}

// ----- the form page -------------------------------------------------------------------------

/// A selected record, as a link.
struct Selected {
    label: String,
    href: String,
}

#[derive(Template)]
#[template(path = "action_form.html")]
struct FormPage {
    layout: Layout,
    collection: String,
    action: String,
    description: String,
    /// What the action runs on, in words.
    target: String,
    selected: Vec<Selected>,
    ids: Vec<String>,
    /// The table's view, when the action runs on every matching record.
    hidden: Vec<(String, String)>,
    post_href: String,
    refresh_href: String,
    back_href: String,
    submit: String,
    error: Option<String>,
    error_html: String,
    blocks: Vec<Block>,
    /// Whether a field is required (the hint about the asterisk shows then).
    required_hint: bool,
}

/// The fields alone, which the script swaps in as the user types.
#[derive(Template)]
#[template(path = "action_fields.html")]
struct FieldsFragment {
    blocks: Vec<Block>,
}

/// The action a console path names, by its slug; unknown is a 404 page.
fn located<'s>(
    data: &'s Data<'_>,
    collection: &str,
    action_slug: &str,
) -> Result<(&'s CollectionSchema, String, &'s ActionSchema)> {
    let schema = super::pages::named(data, collection)?;
    schema
        .actions
        .iter()
        .find(|(name, _)| slug(name) == action_slug)
        .map(|(name, action)| (schema, name.clone(), action))
        .ok_or_else(|| {
            Error::NotFound(format!(
                "There is no action \"{action_slug}\" on {collection}."
            ))
        })
}

/// "Select all N matching records" on the table: every record of its view (search, segment,
/// filters) but the rows of the page left unchecked. The action's own form posts it again.
struct AllMatching {
    /// The table's view as the wire's `all_records_subset_query`.
    subset: serde_json::Map<String, Json>,
    /// `all_records_ids_excluded`.
    excluded: Vec<String>,
    /// The view, as a list query (to count the records).
    view: ListQuery,
    /// The fields the action's form posts again.
    hidden: Vec<(String, String)>,
}

impl AllMatching {
    /// The selection of a post with `all=1`: from the table (`page_id` without `id` is a row
    /// left out) or from the action's form (`excluded`).
    fn from_pairs(pairs: &Pairs) -> Option<Self> {
        if first(pairs, "all") != Some("1") {
            return None;
        }
        let values = |key: &str| -> Vec<String> {
            pairs
                .iter()
                .filter(|(k, v)| k == key && !v.is_empty())
                .map(|(_, v)| v.clone())
                .collect()
        };
        let checked = values("id");
        let mut excluded = values("excluded");
        excluded.extend(
            values("page_id")
                .into_iter()
                .filter(|id| !checked.contains(id)),
        );
        let text = |key: &str| first(pairs, key).filter(|v| !v.is_empty());
        let mut subset = serde_json::Map::new();
        let mut hidden = vec![("all".to_owned(), "1".to_owned())];
        for (key, wire) in [
            ("q", "search"),
            ("segment", "segment"),
            ("filters", "filters"),
        ] {
            if let Some(value) = text(key) {
                subset.insert(wire.to_owned(), Json::String(value.to_owned()));
                hidden.push((key.to_owned(), value.to_owned()));
            }
        }
        let extended = text("ext") == Some("1");
        if extended {
            subset.insert("searchExtended".to_owned(), Json::String("1".to_owned()));
            hidden.push(("ext".to_owned(), "1".to_owned()));
        }
        hidden.extend(
            excluded
                .iter()
                .map(|id| ("excluded".to_owned(), id.clone())),
        );
        let view = ListQuery {
            search: text("q").map(str::to_owned),
            search_extended: extended,
            segment: text("segment").map(str::to_owned),
            // A tree that does not read is refused by the action's own parsing, with its message.
            filters: text("filters").and_then(|f| serde_json::from_str(f).ok()),
            ..ListQuery::default()
        };
        Some(Self {
            subset,
            excluded,
            view,
            hidden,
        })
    }
}

/// The wire's action body for this selection and these values: the same body the agent's
/// routes and the approval routes read.
fn action_body(
    collection: &str,
    action: &str,
    (ids, all): (&[String], Option<&AllMatching>),
    values: &FormValues,
) -> Json {
    let mut attributes = json!({
        "collection_name": collection,
        "ids": ids,
        "all_records": false,
        "all_records_ids_excluded": [],
        "values": values,
    });
    if let Some(all) = all {
        attributes["all_records"] = Json::Bool(true);
        attributes["all_records_ids_excluded"] = json!(all.excluded);
        attributes["all_records_subset_query"] = Json::Object(all.subset.clone());
    }
    json!({
        "action": action,
        "data": {"type": "custom-action-requests", "attributes": attributes},
    })
}

/// What a request names: the collection, the action, and the ids it runs on, checked against
/// its scope (one record for a single action, at least one for a bulk action, none for a global
/// one).
struct Request<'s> {
    schema: &'s CollectionSchema,
    name: String,
    action: &'s ActionSchema,
    ids: Vec<String>,
    /// Every matching record of the table, for a bulk action (then `ids` is empty).
    all: Option<AllMatching>,
}

impl<'s> Request<'s> {
    fn new(data: &'s Data<'_>, collection: &str, action_slug: &str, pairs: &Pairs) -> Result<Self> {
        let (schema, name, action) = located(data, collection, action_slug)?;
        let all = match action.scope {
            ActionScope::Bulk => AllMatching::from_pairs(pairs),
            _ => None,
        };
        let ids: Vec<String> = match action.scope {
            ActionScope::Global => Vec::new(),
            _ if all.is_some() => Vec::new(),
            _ => pairs
                .iter()
                .filter(|(k, v)| k == "id" && !v.is_empty())
                .map(|(_, v)| v.clone())
                .collect(),
        };
        let wrong = match action.scope {
            ActionScope::Single if ids.len() != 1 => Some(format!(
                "\"{name}\" runs on one record: select exactly one in the table, or open it from a record's page."
            )),
            ActionScope::Bulk if ids.is_empty() && all.is_none() => Some(format!(
                "\"{name}\" runs on the selected records: select at least one in the table first."
            )),
            _ => None,
        };
        if let Some(message) = wrong {
            return Err(crate::agent::Error::Validation(message).into());
        }
        Ok(Self {
            schema,
            name,
            action,
            ids,
            all,
        })
    }

    /// The selection as `action_body` takes it.
    fn selection(&self) -> (&[String], Option<&AllMatching>) {
        (&self.ids, self.all.as_ref())
    }

    fn target(&self, state: &SharedState, values: &FormValues) -> Result<Target> {
        let body = action_body(&self.schema.name, &self.name, self.selection(), values);
        Target::parse(
            state,
            &QueryString::default(),
            self.schema,
            self.action.scope,
            &body,
        )
        .map_err(Error::Ops)
    }

    /// The form for these values in this phase, as the hooks compute it.
    async fn form(
        &self,
        state: &SharedState,
        caller: &Caller,
        values: &FormValues,
        phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        let target = self.target(state, values)?;
        ops_actions::form(
            state,
            caller,
            self.schema,
            &self.name,
            target,
            values,
            phase,
        )
        .await
        .map_err(Error::Ops)
    }

    /// The posted values, read by the types of every field the form may have (hidden ones
    /// included), with a message per field that does not read.
    async fn values(
        &self,
        state: &SharedState,
        caller: &Caller,
        pairs: &Pairs,
    ) -> Result<(FormValues, Vec<(String, String)>)> {
        let every = self
            .form(state, caller, &FormValues::new(), &FormPhase::Execute)
            .await?;
        Ok(fields::values(&every, pairs, caller.timezone))
    }
}

/// The form of `action` (its name or slug) on the record `id` of `collection`, for these values
/// in this phase, as the hooks compute it: what a workflow's manual `trigger-action` step asks
/// the person who completes it.
pub(in crate::console) async fn record_form(
    state: &SharedState,
    caller: &Caller,
    (collection, id): (&str, &str),
    action: &str,
    values: &FormValues,
    phase: &FormPhase,
) -> Result<Vec<FormElement>> {
    let data = Data::new(state, caller);
    let schema = super::pages::named(&data, collection)?;
    let (name, found) = schema
        .actions
        .iter()
        .find(|(name, _)| *name == action || slug(name) == action)
        .ok_or_else(|| {
            Error::NotFound(format!("There is no action \"{action}\" on {collection}."))
        })?;
    let body = action_body(collection, name, (&[id.to_owned()], None), values);
    let target = Target::parse(state, &QueryString::default(), schema, found.scope, &body)?;
    Ok(ops_actions::form(state, caller, schema, name, target, values, phase).await?)
}

/// The form page of a request: the fields for these values, any error at the top.
#[allow(clippy::too_many_arguments, reason = "one page, assembled once")]
async fn form_page(
    session: &Session,
    data: &Data<'_>,
    request: &Request<'_>,
    form: &[FormElement],
    pairs: &Pairs,
    errors: &[(String, String)],
    error: Option<String>,
    error_html: Option<String>,
    status: StatusCode,
) -> Result<Response> {
    let base = &session.base;
    let collection = &request.schema.name;
    let mut selected = Vec::new();
    for id in &request.ids {
        let label = match data.get(collection, id).await {
            Ok(Some(record)) => {
                super::view::label(request.schema, &record, session.caller.timezone)
            }
            _ => id.clone(),
        };
        selected.push(Selected {
            label,
            href: record_href(base, collection, id),
        });
    }
    let target = match (request.action.scope, &request.all) {
        (_, Some(all)) => all_target(data, collection, all).await,
        (ActionScope::Global, _) => format!("Runs on {collection} as a whole."),
        (ActionScope::Single, _) => format!("Runs on this record of {collection}:"),
        (ActionScope::Bulk, _) => format!(
            "Runs on {} selected record{} of {collection}:",
            request.ids.len(),
            if request.ids.len() == 1 { "" } else { "s" }
        ),
    };
    let back_href = match (request.action.scope, request.ids.as_slice()) {
        (ActionScope::Single, [id]) => record_href(base, collection, id),
        _ => format!("{base}/c/{}", enc(collection)),
    };
    let here = action_href(base, collection, &request.name);
    let title = format!("{} · {collection}", request.name);
    let layout = Layout::new(session, data, collection, title).await?;
    let error = error
        .or_else(|| (!errors.is_empty()).then(|| "Correct the fields marked below.".to_owned()));
    page(
        status,
        &FormPage {
            layout,
            collection: collection.clone(),
            action: request.name.clone(),
            description: request.action.description.clone().unwrap_or_default(),
            target,
            selected,
            ids: request.ids.clone(),
            hidden: request
                .all
                .as_ref()
                .map(|all| all.hidden.clone())
                .unwrap_or_default(),
            refresh_href: format!("{here}/form"),
            post_href: here,
            back_href,
            submit: request
                .action
                .submit_button_label
                .clone()
                .unwrap_or_else(|| request.name.clone()),
            error,
            error_html: error_html.map(|h| ammonia::clean(&h)).unwrap_or_default(),
            blocks: fields::blocks(form, pairs, errors, session.caller.timezone),
            required_hint: fields::any_required(form),
        },
    )
}

/// What an action on every matching record runs on, in words: how many, and how many left out.
async fn all_target(data: &Data<'_>, collection: &str, all: &AllMatching) -> String {
    let left_out = match all.excluded.len() {
        0 => String::new(),
        1 => " (1 left out)".to_owned(),
        n => format!(" ({n} left out)"),
    };
    match data.count(collection, &all.view).await {
        Ok(Some(count)) => {
            let n = count.saturating_sub(all.excluded.len() as u64);
            let records = if n == 1 {
                "1 record".to_owned()
            } else {
                format!("{n} records")
            };
            format!(
                "Runs on {records} of {collection}: every one matching the table's view{left_out}."
            )
        }
        _ => format!("Runs on every record of {collection} matching the table's view{left_out}."),
    }
}

/// `GET /console/c/{collection}/actions/{action}?id=…`: the action's form as it opens (its load
/// hook), for the records named (one for a single action, from its record's page).
async fn open(
    State(state): State<SharedState>,
    session: Session,
    Path((collection, action)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let pairs = form_pairs(query.as_deref().unwrap_or("").as_bytes());
    let data = Data::new(&state, &session.caller);
    let request = Request::new(&data, &collection, &action, &pairs)?;
    let form = request
        .form(
            &state,
            &session.caller,
            &FormValues::new(),
            &FormPhase::Load,
        )
        .await?;
    form_page(
        &session,
        &data,
        &request,
        &form,
        &Vec::new(),
        &[],
        None,
        None,
        StatusCode::OK,
    )
    .await
}

/// `POST /console/c/{collection}/actions/{action}`: from the table (the selected rows, which
/// opens the form), the "Refresh form" button (the change hook on the values typed), or the
/// form's submit button (`run`), which executes the action.
async fn submit(
    State(state): State<SharedState>,
    session: Session,
    Path((collection, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let pairs = session.form(&headers, &body)?;
    let data = Data::new(&state, &session.caller);
    let caller = &session.caller;
    let request = Request::new(&data, &collection, &action, &pairs)?;
    let opened = !pairs.iter().any(|(k, _)| k.starts_with("v:"));
    if first(&pairs, "run").is_none() && opened {
        let form = request
            .form(&state, caller, &FormValues::new(), &FormPhase::Load)
            .await?;
        return form_page(
            &session,
            &data,
            &request,
            &form,
            &Vec::new(),
            &[],
            None,
            None,
            StatusCode::OK,
        )
        .await;
    }
    let (values, mut errors) = request.values(&state, caller, &pairs).await?;
    let changed = FormPhase::Change {
        changed_field: first(&pairs, "changed").unwrap_or("").to_owned(),
    };
    let shown = request.form(&state, caller, &values, &changed).await?;
    if first(&pairs, "run").is_none() {
        return form_page(
            &session,
            &data,
            &request,
            &shown,
            &pairs,
            &errors,
            None,
            None,
            StatusCode::OK,
        )
        .await;
    }
    let missing: Vec<_> = fields::missing(&shown, &values)
        .into_iter()
        .filter(|(id, _)| !errors.iter().any(|(e, _)| e == id))
        .collect();
    errors.extend(missing);
    if !errors.is_empty() {
        return form_page(
            &session,
            &data,
            &request,
            &shown,
            &pairs,
            &errors,
            None,
            None,
            StatusCode::BAD_REQUEST,
        )
        .await;
    }
    let execute = ExecuteRequest {
        collection: request.schema.name.clone(),
        action: request.name.clone(),
        target: request.target(&state, &values)?,
        ids: request.ids.clone(),
        requester: None,
        values: values.clone(),
    };
    // An error the action answers, or a refusal of this request, keeps the form as typed.
    let (message, html, status) = match ops_actions::execute(&state, caller, execute).await {
        Ok(result) => match result.outcome {
            ActionOutcome::Error { message, html } => (message, html, StatusCode::BAD_REQUEST),
            outcome => return result_page(&session, &data, &request, outcome).await,
        },
        Err(crate::ops::Error::Auth(crate::auth::Error::ActionRequiresApproval { .. })) => {
            let body = action_body(
                &request.schema.name,
                &request.name,
                request.selection(),
                &values,
            );
            let filed = crate::ops::approvals::file(
                &state,
                caller,
                &QueryString::default(),
                &body,
                state.approvals.max_records_for_approval,
            )
            .await
            .map_err(Error::Ops)?;
            let target = format!("{}/inbox/{}?done=filed", session.base, filed.approval.id);
            return Ok(Redirect::to(&target).into_response());
        }
        Err(error) => {
            let error = Error::Ops(error);
            let status = error.status();
            if !status.is_client_error() || status == StatusCode::FORBIDDEN {
                return Err(error);
            }
            (error.message(), None, status)
        }
    };
    form_page(
        &session,
        &data,
        &request,
        &shown,
        &pairs,
        &[],
        Some(message),
        html,
        status,
    )
    .await
}

/// `POST /console/c/{collection}/actions/{action}/form` (the console's script): the fields for
/// the values typed so far, computed by the change hook of the field that changed.
async fn refresh(
    State(state): State<SharedState>,
    Path((collection, action)): Path<(String, String)>,
    Posted(session, pairs): Posted,
) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let caller = &session.caller;
    let request = Request::new(&data, &collection, &action, &pairs)?;
    let (values, errors) = request.values(&state, caller, &pairs).await?;
    let changed = FormPhase::Change {
        changed_field: first(&pairs, "changed").unwrap_or("").to_owned(),
    };
    let shown = request.form(&state, caller, &values, &changed).await?;
    fields_fragment(fields::blocks(&shown, &pairs, &errors, caller.timezone))
}

/// The fields alone, which the console's script swaps into a form as the user types (an
/// action's form, a workflow step's).
pub(in crate::console) fn fields_fragment(blocks: Vec<Block>) -> Result<Response> {
    Ok(html(FieldsFragment { blocks }.render()?).into_response())
}

// ----- results -------------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "action_result.html")]
struct ResultPage {
    layout: Layout,
    collection: String,
    action: String,
    /// success, webhook, redirect.
    kind: &'static str,
    message: String,
    /// The action's HTML, sanitized.
    html: String,
    /// Pages to see what changed: the records the action ran on, their table, and the
    /// collections it says it changed.
    links: Vec<(String, String)>,
    webhook_method: String,
    webhook_url: String,
    /// The body shown (pretty JSON), and sent (the script's data attributes).
    webhook_body: String,
    webhook_body_json: String,
    webhook_headers_json: String,
    /// Why the console does not call it (an address the browser may not be let to reach).
    webhook_refused: String,
}

/// The origin the browser may call for a webhook result (`http` or `https`, a host the CSP can
/// name), else why not.
fn webhook_origin(url: &str) -> std::result::Result<String, String> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|_| format!("The action gave an address that is not a URL: {url:?}."))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err("The console only calls http and https services.".to_owned());
    }
    let origin = parsed.origin().ascii_serialization();
    // The origin goes into a Content-Security-Policy header: nothing that could end a directive.
    if origin
        .chars()
        .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '/' | '-')))
    {
        return Err("The console cannot allow calls to this address.".to_owned());
    }
    Ok(origin)
}

/// The page (or file) of an executed action's result.
async fn result_page(
    session: &Session,
    data: &Data<'_>,
    request: &Request<'_>,
    outcome: ActionOutcome,
) -> Result<Response> {
    let base = &session.base;
    let collection = &request.schema.name;
    let mut links: Vec<(String, String)> = request
        .ids
        .iter()
        .map(|id| {
            (
                format!("{collection} {id}"),
                record_href(base, collection, id),
            )
        })
        .collect();
    links.push((
        format!("All {collection}"),
        format!("{base}/c/{}", enc(collection)),
    ));
    let mut result = ResultPage {
        layout: Layout::new(
            session,
            data,
            collection,
            format!("{} · done", request.name),
        )
        .await?,
        collection: collection.clone(),
        action: request.name.clone(),
        kind: "success",
        message: String::new(),
        html: String::new(),
        links,
        webhook_method: String::new(),
        webhook_url: String::new(),
        webhook_body: String::new(),
        webhook_body_json: String::new(),
        webhook_headers_json: String::new(),
        webhook_refused: String::new(),
    };
    let mut connect = None;
    match outcome {
        ActionOutcome::Success {
            message,
            html,
            invalidated,
        } => {
            result.message = message;
            result.html = html.map(|h| ammonia::clean(&h)).unwrap_or_default();
            // The relations the action says it changed: their collections' pages, read anew.
            for relation in invalidated {
                let target = request
                    .schema
                    .relation(&relation)
                    .map(|r| r.foreign_collection().to_owned())
                    .or_else(|| {
                        data.schema()
                            .collections
                            .contains_key(&relation)
                            .then(|| relation.clone())
                    });
                if let Some(target) = target {
                    let href = format!("{base}/c/{}", enc(&target));
                    if !result.links.iter().any(|(_, h)| *h == href) {
                        result.links.push((format!("Changed: {target}"), href));
                    }
                }
            }
        }
        ActionOutcome::File {
            name,
            mime_type,
            bytes,
        } => return Ok(download(&name, &mime_type, bytes)),
        ActionOutcome::Redirect { path } => {
            // A console path is followed; anything else is shown as a link to follow.
            if path.starts_with(&format!("{base}/")) && !path.starts_with("//") {
                return Ok(Redirect::to(&path).into_response());
            }
            result.kind = "redirect";
            result.message = path;
        }
        ActionOutcome::Webhook {
            url,
            method,
            headers,
            body,
        } => {
            // The browser makes the call, as Forest's UI does: this one page may connect to the
            // webhook's origin (and to no other).
            result.kind = "webhook";
            match webhook_origin(&url) {
                Ok(origin) => connect = Some(super::ConnectTo(origin)),
                Err(why) => result.webhook_refused = why,
            }
            result.webhook_method = if method.trim().is_empty() {
                "POST".to_owned()
            } else {
                method.to_ascii_uppercase()
            };
            result.webhook_url = url;
            if !body.is_null() {
                result.webhook_body = serde_json::to_string_pretty(&body).unwrap_or_default();
                result.webhook_body_json = serde_json::to_string(&body).unwrap_or_default();
            }
            result.webhook_headers_json =
                serde_json::to_string(&headers).unwrap_or_else(|_| "{}".to_owned());
        }
        ActionOutcome::Error { message, .. } => {
            // Handled by the caller (the form is kept); shown plainly if it gets here.
            result.message = message;
        }
    }
    let mut response = page(StatusCode::OK, &result)?;
    if let Some(connect) = connect {
        response.extensions_mut().insert(connect);
    }
    Ok(response)
}

/// A file an action generated, as an attachment the browser downloads.
fn download(name: &str, mime_type: &str, bytes: Vec<u8>) -> Response {
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(mime_type)
            .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream")),
    );
    if let Ok(value) = HeaderValue::from_str(&content_disposition(name)) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_is_called_only_at_an_http_origin_the_csp_can_name() {
        assert_eq!(
            webhook_origin("http://127.0.0.1:8900/orders?x=1").as_deref(),
            Ok("http://127.0.0.1:8900")
        );
        assert_eq!(
            webhook_origin("https://hooks.example.com/a").as_deref(),
            Ok("https://hooks.example.com")
        );
        for refused in [
            "ftp://127.0.0.1/orders",
            "javascript:alert(1)",
            "data:text/plain,hi",
            "not a url",
        ] {
            assert!(webhook_origin(refused).is_err(), "{refused}");
        }
    }
}
