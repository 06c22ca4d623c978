//! The no-code actions (`[[noCodeActions]]`, the spec's `experimental` `webhookCustomActions`
//! and `updateRecordCustomActions`): action handlers written by Canopy itself from a few lines of
//! config, served through the same action layer as the plugins' actions. So a no-code action is
//! declared in the schema file, refused without the trigger permission, held for approval and
//! written to the activity log exactly as any other action: those checks live in `ops`, above
//! every action handler.
//!
//! - [`webhook`]: sends the selection's keys and the form's values to a URL.
//! - [`update`]: writes fixed values on the selection.
//!
//! As in the agent, a failure is the action's own `Error` result (a 400 with the message shown to
//! the person who clicked), never a 500: the endpoint or the configuration is at fault, not the
//! request.

mod update;
mod webhook;

use std::sync::Arc;

use crate::config::{ExperimentalConfig, NoCodeAction, NoCodeKind, NoCodeScope};
use crate::customizer::{ActionHandler, Customization, Kind};
use crate::datasource::DataSourceSchema;
use crate::datasource::action::{ActionScope, FieldType, FormElement, FormField};

/// Where a definition comes from, in startup errors and logs.
const ORIGIN: &str = "noCodeActions";

/// The customizations that serve the config file's actions (`configured`: a definition that does
/// not fit the schema, such as no such collection, a field that cannot be written or a value of
/// the wrong type, stops the load with a message that names it) and the console's (`stored`: such
/// a definition is logged and left out, so that a schema change never keeps the server from
/// starting; the console shows the problem beside it).
pub fn customizations(
    configured: &[NoCodeAction],
    stored: &[(i64, NoCodeAction)],
    schema: &DataSourceSchema,
) -> Result<Vec<Customization>, String> {
    if configured.is_empty() && stored.is_empty() {
        return Ok(Vec::new());
    }
    let client = webhook::client()?;
    let mut customizations = configured
        .iter()
        .map(|action| customization(action, schema, &client))
        .collect::<Result<Vec<_>, _>>()?;
    for (id, action) in stored {
        let taken = configured
            .iter()
            .any(|c| c.collection == action.collection && c.name == action.name);
        let built = if taken {
            Err(format!(
                "the config file defines '{}' on '{}' too",
                action.name, action.collection
            ))
        } else {
            customization(action, schema, &client)
        };
        match built {
            Ok(customization) => customizations.push(customization),
            Err(problem) => {
                tracing::error!(id, %problem, "a no-code action added from the console is not served");
            }
        }
    }
    Ok(customizations)
}

/// Why `action` cannot be served over `schema`, if it cannot.
pub fn problem(action: &NoCodeAction, schema: &DataSourceSchema) -> Option<String> {
    if let Some(collection) = schema.collections.get(&action.collection)
        && collection.actions.contains_key(&action.name)
    {
        return Some(format!(
            "'{}' already has an action named '{}'",
            action.collection, action.name
        ));
    }
    let client = match webhook::client() {
        Ok(client) => client,
        Err(problem) => return Some(problem),
    };
    customization(action, schema, &client).err()
}

/// The console's definitions that this configuration serves: parsed, and of a switched-on type
/// (the others are logged).
pub async fn stored(
    store: &crate::platform::Store,
    experimental: &ExperimentalConfig,
) -> Vec<(i64, NoCodeAction)> {
    let rows = match store.no_code_actions().await {
        Ok(rows) => rows,
        Err(error) => {
            tracing::error!(%error, "the no-code actions added from the console cannot be read");
            return Vec::new();
        }
    };
    rows.into_iter()
        .filter_map(|row| match crate::config::parse_no_code_action(&row.definition) {
            Ok(action) => match experimental.switch_for(&action) {
                (true, _) => Some((row.id, action)),
                (false, switch) => {
                    tracing::warn!(
                        id = row.id,
                        action = %action.name,
                        "a no-code action added from the console is not served: turn on \
                         experimental.{switch}"
                    );
                    None
                }
            },
            Err(problem) => {
                tracing::error!(id = row.id, %problem, "a stored no-code action cannot be read");
                None
            }
        })
        .collect()
}

fn customization(
    action: &NoCodeAction,
    schema: &DataSourceSchema,
    client: &reqwest::Client,
) -> Result<Customization, String> {
    let collection = schema.collections.get(&action.collection).ok_or_else(|| {
        format!(
            "{ORIGIN}: the action '{}' is on '{}', which is not a served collection",
            action.name, action.collection
        )
    })?;
    let (handler, static_form): (Arc<dyn ActionHandler>, _) = match &action.kind {
        NoCodeKind::Webhook { form, .. } => (
            Arc::new(webhook::Webhook::new(action, client.clone())),
            form.iter()
                .map(|field| FormElement::Field(form_field(field)))
                .collect(),
        ),
        NoCodeKind::UpdateRecord { fields } => {
            let patch = update::patch(fields, collection).map_err(|problem| {
                format!(
                    "{ORIGIN}: the action '{}' of '{}' cannot be served: {problem}",
                    action.name, action.collection
                )
            })?;
            (
                Arc::new(update::UpdateRecord::new(action, patch)),
                Vec::new(),
            )
        }
    };
    Ok(Customization::collection(
        ORIGIN,
        action.collection.clone(),
        Kind::Action {
            name: action.name.clone(),
            scope: scope(action.scope),
            generate_file: false,
            description: action.description.clone(),
            submit_button_label: None,
            // Never computed: the form is the definition's (empty without one).
            static_form: Some(static_form),
            handler,
        },
    ))
}

fn scope(scope: NoCodeScope) -> ActionScope {
    match scope {
        NoCodeScope::Single => ActionScope::Single,
        NoCodeScope::Bulk => ActionScope::Bulk,
        NoCodeScope::Global => ActionScope::Global,
    }
}

fn form_field(field: &crate::config::NoCodeFormField) -> FormField {
    // The type was checked when the config was read.
    let field_type = FieldType::parse(&field.field_type).unwrap_or(FieldType::String);
    let mut form_field = FormField::new(field.label.clone(), field_type);
    form_field.is_required = field.is_required;
    form_field.description = field.description.clone();
    form_field.enum_values = field.enum_values.clone();
    form_field
}

/// The agent's message for an action that its configuration keeps from running.
fn misconfigured(name: &str) -> String {
    format!(
        "The no-code action <strong>{name}</strong> cannot be triggered due to a \
         misconfiguration. Please contact your administrator."
    )
}

/// The platform API's document of `actions` (`GET /liana/model-customizations`), which agents
/// that take Canopy as their platform read when their `experimental` options are on. Webhook
/// actions carry `url` and `integration` as the agent reads them; the method, headers, timeout
/// and form are Canopy's own keys, which the Node agent ignores. Header values are left out:
/// they are credentials of this server's configuration, not of the agents'.
pub fn model_customizations(actions: &[NoCodeAction]) -> serde_json::Value {
    use serde_json::json;
    actions
        .iter()
        .map(|action| {
            let configuration = match &action.kind {
                NoCodeKind::Webhook {
                    url,
                    method,
                    timeout,
                    ..
                } => json!({
                    "url": url.as_str(),
                    "integration": "canopy",
                    "method": method.as_str(),
                    "timeoutInSeconds": timeout.as_secs(),
                }),
                NoCodeKind::UpdateRecord { fields } => json!({
                    "fields": fields
                        .iter()
                        .map(|(name, value)| json!({"fieldName": name, "value": value}))
                        .collect::<Vec<_>>(),
                }),
            };
            json!({
                "name": action.name,
                "type": "action",
                "modelName": action.collection,
                "configuration": {
                    "type": action.type_name(),
                    "scope": action.scope.as_api(),
                    "configuration": configuration,
                },
            })
        })
        .collect()
}
