//! `[[noCodeActions]]`: the no-code actions of the spec's `experimental` options, defined in the
//! config file instead of the platform's UI. A `webhook` action posts the selected records' keys
//! (and its form's values) to a URL; an `update-record` action sets fixed field values on them.
//!
//! ```toml
//! [experimental]
//! webhookCustomActions = true
//!
//! [[noCodeActions]]
//! collection = "orders"
//! name = "Notify the warehouse"
//! type = "webhook"
//! scope = "bulk"
//! url = "https://hooks.example.com/warehouse"
//! headers = { Authorization = "Bearer s3cr3t" }
//! ```
//!
//! Each type is served only when its `experimental` switch is on, as in the agent; a definition
//! whose switch is off is left out with a warning. Collections and fields are checked against
//! the served schema when the plugins load (the schema is not known when the file is read).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value as Json;

/// How many records an action runs on, as the agent's `ActionScope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCodeScope {
    Single,
    Bulk,
    Global,
}

impl NoCodeScope {
    /// The platform API's spelling (`single`), which the webhook body carries too.
    pub fn as_api(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Bulk => "bulk",
            Self::Global => "global",
        }
    }

    fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "single" => Some(Self::Single),
            "bulk" => Some(Self::Bulk),
            "global" => Some(Self::Global),
            _ => None,
        }
    }
}

/// The HTTP methods a webhook action may use: those that carry a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookMethod {
    Post,
    Put,
    Patch,
}

impl WebhookMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
        }
    }
}

/// One field of a no-code action's form: what the person fills in before the webhook is posted.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoCodeFormField {
    pub label: String,
    /// A form field type of the agent (`String`, `Number`, `Boolean`, `Date`, `Enum`, …).
    #[serde(rename = "type", default = "default_field_type")]
    pub field_type: String,
    #[serde(default)]
    pub is_required: bool,
    pub description: Option<String>,
    pub enum_values: Option<Vec<String>>,
}

fn default_field_type() -> String {
    "String".to_owned()
}

/// What a no-code action does.
#[derive(Clone, PartialEq)]
pub enum NoCodeKind {
    /// Sends the selection to `url`. Header values may be secrets: never shown by `Debug`.
    Webhook {
        url: reqwest::Url,
        method: WebhookMethod,
        headers: Vec<(String, String)>,
        timeout: Duration,
        form: Vec<NoCodeFormField>,
    },
    /// Writes `fields` (field name to JSON value, typed against the collection when loaded).
    UpdateRecord { fields: IndexMap<String, Json> },
}

impl fmt::Debug for NoCodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Webhook {
                url,
                method,
                headers,
                timeout,
                form,
            } => f
                .debug_struct("Webhook")
                // The query string and the header values may hold credentials.
                .field("url", &shown_url(url))
                .field("method", method)
                .field(
                    "headers",
                    &headers.iter().map(|(name, _)| name).collect::<Vec<_>>(),
                )
                .field("timeout", timeout)
                .field("form", form)
                .finish(),
            Self::UpdateRecord { fields } => f
                .debug_struct("UpdateRecord")
                .field("fields", fields)
                .finish(),
        }
    }
}

/// A URL as logs and errors may show it: scheme, host, port and path, without credentials or
/// query string.
pub fn shown_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// One `[[noCodeActions]]` entry, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct NoCodeAction {
    pub collection: String,
    pub name: String,
    pub scope: NoCodeScope,
    pub description: Option<String>,
    pub kind: NoCodeKind,
}

impl NoCodeAction {
    /// The type as the platform API and the `experimental` switches name it.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            NoCodeKind::Webhook { .. } => WEBHOOK,
            NoCodeKind::UpdateRecord { .. } => UPDATE_RECORD,
        }
    }
}

const WEBHOOK: &str = "webhook";
const UPDATE_RECORD: &str = "update-record";
/// The agent's timeout for calls it makes (superagent has none; the platform client uses 10 s).
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// A webhook that takes longer than this is better run as a workflow.
const MAX_WEBHOOK_TIMEOUT_SECONDS: u64 = 120;

/// One `[[noCodeActions]]` entry, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileNoCodeAction {
    pub collection: Option<String>,
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub scope: Option<String>,
    pub description: Option<String>,
    pub url: Option<String>,
    pub method: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub timeout_in_seconds: Option<u64>,
    #[serde(default)]
    pub form: Vec<NoCodeFormField>,
    pub fields: Option<IndexMap<String, Json>>,
}

/// Validates each entry; the first problem comes back with the entry's index. Two entries with
/// the same collection and name are refused here, as the action layer would refuse them later
/// with a less precise message.
pub fn resolve(entries: Vec<FileNoCodeAction>) -> Result<Vec<NoCodeAction>, (usize, String)> {
    let mut actions: Vec<NoCodeAction> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let action = resolve_one(entry).map_err(|problem| (index, problem))?;
        if actions
            .iter()
            .any(|a| a.collection == action.collection && a.name == action.name)
        {
            return Err((
                index,
                format!(
                    "the action '{}' of '{}' is defined twice",
                    action.name, action.collection
                ),
            ));
        }
        actions.push(action);
    }
    Ok(actions)
}

/// One definition in JSON (as the console stores it: a `[[noCodeActions]]` entry's keys).
pub fn parse_definition(definition: &Json) -> Result<NoCodeAction, String> {
    let entry: FileNoCodeAction =
        serde_json::from_value(definition.clone()).map_err(|e| e.to_string())?;
    resolve_one(entry)
}

fn required(value: Option<String>, key: &str) -> Result<String, String> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(format!("needs `{key}`")),
    }
}

fn resolve_one(entry: FileNoCodeAction) -> Result<NoCodeAction, String> {
    let collection = required(entry.collection, "collection")?;
    let name = required(entry.name, "name")?;
    let kind_name = required(entry.kind, "type")
        .map_err(|_| format!("needs `type`: \"{WEBHOOK}\" or \"{UPDATE_RECORD}\""))?;
    let scope = match entry.scope.as_deref() {
        None => NoCodeScope::Single,
        Some(text) => NoCodeScope::parse(text).ok_or_else(|| {
            format!("`scope` is \"{text}\": expected \"single\", \"bulk\" or \"global\"")
        })?,
    };
    let webhook_keys = entry.url.is_some()
        || entry.method.is_some()
        || entry.headers.is_some()
        || entry.timeout_in_seconds.is_some()
        || !entry.form.is_empty();
    let kind = match kind_name.as_str() {
        WEBHOOK => {
            if entry.fields.is_some() {
                return Err(
                    "`fields` belongs to update-record actions; a webhook action \
                            posts its form's values"
                        .to_owned(),
                );
            }
            webhook(
                entry.url,
                entry.method.as_deref(),
                entry.headers,
                entry.timeout_in_seconds,
                entry.form,
            )?
        }
        UPDATE_RECORD => {
            if webhook_keys {
                return Err(
                    "`url`, `method`, `headers`, `timeoutInSeconds` and `form` belong \
                            to webhook actions"
                        .to_owned(),
                );
            }
            match entry.fields {
                Some(fields) if !fields.is_empty() => NoCodeKind::UpdateRecord { fields },
                _ => return Err("needs `fields`: the values it sets, by field name".to_owned()),
            }
        }
        other => {
            return Err(format!(
                "`type` is \"{other}\": expected \"{WEBHOOK}\" or \"{UPDATE_RECORD}\""
            ));
        }
    };
    Ok(NoCodeAction {
        collection,
        name,
        scope,
        description: entry.description,
        kind,
    })
}

fn webhook(
    url: Option<String>,
    method: Option<&str>,
    headers: Option<BTreeMap<String, String>>,
    timeout: Option<u64>,
    form: Vec<NoCodeFormField>,
) -> Result<NoCodeKind, String> {
    let text = required(url, "url")?;
    let url = reqwest::Url::parse(&text).map_err(|e| format!("`url` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "`url` must be an http:// or https:// address, not {}",
            shown_url(&url)
        ));
    }
    let method = match method.map(str::to_ascii_uppercase).as_deref() {
        None | Some("POST") => WebhookMethod::Post,
        Some("PUT") => WebhookMethod::Put,
        Some("PATCH") => WebhookMethod::Patch,
        Some(other) => {
            return Err(format!(
                "`method` is \"{other}\": expected POST (the default), PUT or PATCH"
            ));
        }
    };
    let mut checked = Vec::new();
    for (name, value) in headers.unwrap_or_default() {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!("`headers`: \"{name}\" is not a header name"));
        }
        // The value is not shown: it is often a credential.
        if reqwest::header::HeaderValue::from_str(&value).is_err() {
            return Err(format!(
                "`headers`: the value of \"{name}\" holds characters a header cannot carry"
            ));
        }
        checked.push((name, value));
    }
    let timeout = match timeout {
        None => DEFAULT_WEBHOOK_TIMEOUT,
        Some(0) => return Err("`timeoutInSeconds` must be at least 1".to_owned()),
        Some(s) if s > MAX_WEBHOOK_TIMEOUT_SECONDS => {
            return Err(format!(
                "`timeoutInSeconds` is {s}: at most {MAX_WEBHOOK_TIMEOUT_SECONDS} (a longer \
                 job is better started as a workflow)"
            ));
        }
        Some(s) => Duration::from_secs(s),
    };
    let mut labels = std::collections::BTreeSet::new();
    for field in &form {
        if field.label.trim().is_empty() {
            return Err("`form`: a field needs a `label`".to_owned());
        }
        if !labels.insert(field.label.as_str()) {
            return Err(format!(
                "`form`: the label \"{}\" is used twice",
                field.label
            ));
        }
        if crate::datasource::action::FieldType::parse(&field.field_type).is_none() {
            return Err(format!(
                "`form`: the field \"{}\" has the unknown type \"{}\"",
                field.label, field.field_type
            ));
        }
    }
    Ok(NoCodeKind::Webhook {
        url,
        method,
        headers: checked,
        timeout,
        form,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<NoCodeAction>, (usize, String)> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct File {
            no_code_actions: Vec<FileNoCodeAction>,
        }
        let file: File = toml::from_str(text).unwrap();
        resolve(file.no_code_actions)
    }

    #[test]
    fn a_webhook_and_an_update_record_action_read_with_their_defaults() {
        let actions = parse(
            r#"
            [[noCodeActions]]
            collection = "orders"
            name = "Notify"
            type = "webhook"
            url = "http://127.0.0.1:9/hook?key=secret"
            headers = { Authorization = "Bearer hidden" }
            form = [{ label = "Reason", isRequired = true }]

            [[noCodeActions]]
            collection = "orders"
            name = "Ship"
            type = "update-record"
            scope = "Bulk"
            fields = { status = "shipped", priority = 2 }
            "#,
        )
        .unwrap();
        assert_eq!(actions[0].scope, NoCodeScope::Single);
        assert_eq!(actions[0].type_name(), "webhook");
        let NoCodeKind::Webhook {
            method,
            timeout,
            form,
            ..
        } = &actions[0].kind
        else {
            panic!("a webhook")
        };
        assert_eq!(*method, WebhookMethod::Post);
        assert_eq!(*timeout, DEFAULT_WEBHOOK_TIMEOUT);
        assert_eq!(form[0].field_type, "String");
        assert!(form[0].is_required);
        let shown = format!("{actions:?}");
        assert!(
            !shown.contains("secret") && !shown.contains("hidden"),
            "{shown}"
        );
        assert_eq!(actions[1].scope, NoCodeScope::Bulk);
        let NoCodeKind::UpdateRecord { fields } = &actions[1].kind else {
            panic!("an update")
        };
        assert_eq!(fields["priority"], serde_json::json!(2));
    }

    #[test]
    fn each_mistake_is_named_with_its_entry() {
        let cases = [
            ("type = \"webhook\"\nname = \"A\"", "needs `collection`"),
            ("collection = \"o\"\nname = \"A\"", "needs `type`"),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"email\"",
                "expected \"webhook\"",
            ),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"webhook\"",
                "needs `url`",
            ),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"webhook\"\nurl = \"ftp://x/\"",
                "http:// or https://",
            ),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"webhook\"\nurl = \"http://x/\"\nmethod = \"GET\"",
                "expected POST",
            ),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"webhook\"\nurl = \"http://x/\"\ntimeoutInSeconds = 0",
                "at least 1",
            ),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"webhook\"\nurl = \"http://x/\"\nscope = \"all\"",
                "expected \"single\"",
            ),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"update-record\"",
                "needs `fields`",
            ),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"update-record\"\nfields = { a = 1 }\nurl = \"http://x/\"",
                "belong to webhook actions",
            ),
            (
                "collection = \"o\"\nname = \"A\"\ntype = \"webhook\"\nurl = \"http://x/\"\nform = [{ label = \"L\", type = \"Colour\" }]",
                "unknown type \"Colour\"",
            ),
        ];
        for (entry, expected) in cases {
            let text = format!(
                "[[noCodeActions]]\ncollection = \"ok\"\nname = \"ok\"\ntype = \"update-record\"\nfields = {{ a = 1 }}\n\n[[noCodeActions]]\n{entry}\n"
            );
            let (index, problem) = parse(&text).unwrap_err();
            assert_eq!(index, 1, "{entry}");
            assert!(problem.contains(expected), "{entry}: {problem}");
        }
    }

    #[test]
    fn the_same_action_twice_on_a_collection_is_refused() {
        let entry = "[[noCodeActions]]\ncollection = \"o\"\nname = \"A\"\ntype = \"update-record\"\nfields = { a = 1 }\n";
        let (index, problem) = parse(&format!("{entry}{entry}")).unwrap_err();
        assert_eq!(index, 1);
        assert!(problem.contains("defined twice"), "{problem}");
    }
}
