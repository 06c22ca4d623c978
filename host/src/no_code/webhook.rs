//! Webhook actions: the selection's primary keys and the form's values, sent as JSON to the
//! configured URL. The body is the agent's (`action`, then `record` for a Single action or
//! `records` otherwise), plus Canopy's `collection`, packed `ids`, form `values` and the `user`
//! who clicked, so the endpoint knows what to act on and for whom.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use crate::config::{NoCodeAction, NoCodeKind, WebhookMethod, shown_url};
use crate::customizer::{ActionContext, ActionHandler};
use crate::datasource::action::{ActionOutcome, ActionResult, ActionScope, FormElement, FormPhase};
use crate::datasource::{Caller, Error, Result, pack_id};

/// The client every webhook action of a generation shares (one connection pool). Redirects are
/// not followed: a POST answered by a redirect would be replayed as a GET by the usual rules,
/// which is not what the person asked for, so a 3xx is reported like any non-2xx answer.
pub(super) fn client() -> std::result::Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("canopy/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("noCodeActions: cannot build the HTTP client: {e}"))
}

pub(super) struct Webhook {
    name: String,
    url: reqwest::Url,
    method: WebhookMethod,
    headers: Vec<(String, String)>,
    timeout: Duration,
    client: reqwest::Client,
}

impl Webhook {
    pub(super) fn new(action: &NoCodeAction, client: reqwest::Client) -> Self {
        let NoCodeKind::Webhook {
            url,
            method,
            headers,
            timeout,
            ..
        } = &action.kind
        else {
            unreachable!("a webhook handler is built from a webhook definition")
        };
        Self {
            name: action.name.clone(),
            url: url.clone(),
            method: *method,
            headers: headers.clone(),
            timeout: *timeout,
            client,
        }
    }

    /// What the endpoint receives.
    async fn body(&self, caller: &Caller, ctx: &ActionContext) -> Result<Json> {
        let collection = ctx.base.collection()?;
        let schema = collection.schema();
        // A Global action is about no record in particular: the agent lists every key of the
        // collection there, which sends a whole table's keys on each click; Canopy sends none.
        let records = if ctx.scope == ActionScope::Global {
            Vec::new()
        } else {
            ctx.get_records(caller, &schema.primary_keys()).await?
        };
        let ids = records
            .iter()
            .map(|record| pack_id(schema, record))
            .collect::<Result<Vec<_>>>()?;
        let records = records
            .iter()
            .map(serde_json::to_value)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Internal(format!("a record as JSON: {e}")))?;
        let mut body = json!({
            "action": {"name": self.name, "scope": scope_name(ctx.scope)},
            "collection": schema.name,
            "ids": ids,
            "values": ctx.form_values,
            "user": {"id": caller.id, "email": caller.email},
        });
        if ctx.scope == ActionScope::Single {
            body["record"] = records.into_iter().next().unwrap_or(Json::Null);
        } else {
            body["records"] = Json::Array(records);
        }
        Ok(body)
    }

    /// The agent's messages: the endpoint's status when it answered, the cause when it did not.
    fn failure(&self, error: &reqwest::Error) -> String {
        let shown = shown_url(&self.url);
        let cause = if error.is_timeout() {
            format!(
                "the webhook endpoint did not answer within {} s",
                self.timeout.as_secs()
            )
        } else if error.is_connect() {
            format!("cannot connect to the webhook endpoint {shown}")
        } else {
            // Without the URL, whose query string may hold a credential.
            let mut text = error.to_string();
            if let Some(url) = error.url() {
                text = text.replace(url.as_str(), &shown);
            }
            text
        };
        format!("Could not execute the action: {cause}.")
    }
}

fn scope_name(scope: ActionScope) -> &'static str {
    match scope {
        ActionScope::Single => "single",
        ActionScope::Bulk => "bulk",
        ActionScope::Global => "global",
    }
}

fn error(message: String) -> ActionResult {
    ActionResult::from(ActionOutcome::Error {
        message,
        html: None,
    })
}

#[async_trait]
impl ActionHandler for Webhook {
    async fn form(
        &self,
        _caller: &Caller,
        _ctx: &ActionContext,
        _phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        // The form is static (declared from the definition): the action layer never asks.
        Ok(Vec::new())
    }

    async fn execute(&self, caller: &Caller, ctx: &ActionContext) -> Result<ActionResult> {
        let body = self.body(caller, ctx).await?;
        let method = match self.method {
            WebhookMethod::Post => reqwest::Method::POST,
            WebhookMethod::Put => reqwest::Method::PUT,
            WebhookMethod::Patch => reqwest::Method::PATCH,
        };
        let mut request = self
            .client
            .request(method, self.url.clone())
            .timeout(self.timeout)
            .header("x-canopy-request-id", caller.request_id.to_string())
            .json(&body);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let started = std::time::Instant::now();
        match request.send().await {
            Ok(response) if response.status().is_success() => {
                tracing::info!(
                    action = %self.name,
                    url = %shown_url(&self.url),
                    status = response.status().as_u16(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "no-code webhook action sent"
                );
                Ok(ActionResult::success("Success"))
            }
            Ok(response) => {
                let status = response.status();
                tracing::warn!(
                    action = %self.name,
                    url = %shown_url(&self.url),
                    status = status.as_u16(),
                    "the endpoint of a no-code webhook action refused it"
                );
                Ok(error(format!(
                    "Error received from the webhook endpoint: {} {}.",
                    status.as_u16(),
                    status.canonical_reason().unwrap_or("")
                )))
            }
            Err(cause) => {
                let message = self.failure(&cause);
                tracing::warn!(action = %self.name, "{message}");
                Ok(error(message))
            }
        }
    }
}
