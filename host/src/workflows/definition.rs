//! What a workflow is: a graph of steps on one collection, as written in a file of the workflows
//! folder (TOML or YAML) or sent to the API (JSON). The same serde types read all three; the
//! stored form of a version is this struct as JSON.
//!
//! ```toml
//! name = "refund"
//! collection = "orders"
//!
//! [[steps]]
//! key = "read"
//! type = "get-data"
//! fields = ["status", "total"]
//!
//! [[steps]]
//! key = "check"
//! type = "decision"
//! options = [
//!   { name = "refundable", when = { field = "status", operator = "Equal", value = "delivered" }, next = "refund" },
//!   { name = "not refundable", next = "done" },
//! ]
//!
//! [[steps]]
//! key = "refund"
//! type = "trigger-action"
//! action = "Refund"
//!
//! [[steps]]
//! key = "done"
//! type = "end"
//! ```
//!
//! Steps run in file order unless a step names its `next`; a decision's options and a go-to name
//! the step they lead to. The run ends after the last step, or at an `end` step.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// A workflow definition: one version of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Definition {
    /// Unique in the environment; a file's name defaults to its file stem (an empty name is
    /// filled in from it).
    #[serde(default)]
    pub name: String,
    /// The collection whose records the workflow runs on (exposed name).
    pub collection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether new runs may start (a workflow loaded inactive keeps its runs but starts none);
    /// `None` leaves it as it is (a new workflow starts active). Read from a file or a request,
    /// never stored in a version: it is the workflow's state (`workflows.active`), so turning a
    /// workflow on or off makes no new version.
    #[serde(default, skip_serializing)]
    pub active: Option<bool>,
    /// Triggers beyond manual and webhook (which are managed through the API and CLI).
    #[serde(default, skip_serializing_if = "Triggers::is_empty")]
    pub triggers: Triggers,
    pub steps: Vec<Step>,
}

/// Triggers a definition declares itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Triggers {
    /// Cron schedules (`0 3 * * *`, with seconds optional) and the records they start on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<Schedule>,
    /// Runs started by record writes (Create and Update hooks) that match a condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub record_changes: Vec<RecordChange>,
}

impl Triggers {
    pub fn is_empty(&self) -> bool {
        self.schedules.is_empty() && self.record_changes.is_empty()
    }
}

/// A scheduled trigger: at each tick, a run on every record matching `filter` (a condition tree
/// in the agent's JSON form), as `user` (an email: runs act with someone's rights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Schedule {
    pub cron: String,
    pub user: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Json>,
    /// The most records one tick starts runs on.
    #[serde(default = "default_schedule_limit")]
    pub limit: u32,
}

fn default_schedule_limit() -> u32 {
    100
}

/// A record-change trigger: after a create or update of the workflow's collection whose record
/// matches `when`, a run on it, as the user who wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RecordChange {
    pub on: Vec<ChangeKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Json>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Create,
    Update,
}

/// One step: its key (unique in the definition, named by transitions), how it completes, and
/// what it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// How the step completes; each kind has its default (`Kind::default_mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// The step after this one; the next in the list when absent. Ignored by kinds that choose
    /// (decision, go-to, end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    #[serde(flatten)]
    pub kind: Kind,
}

impl Step {
    /// The mode the step runs in.
    pub fn mode(&self) -> Mode {
        self.mode.unwrap_or_else(|| self.kind.default_mode())
    }

    /// Whether the step only reads and steers: `end` and `go-to`, and `get-data`,
    /// `load-related` and `decision` when automatic. Running one again after a crash changes
    /// nothing, so the engine writes its row together with the next ones.
    pub fn only_reads(&self) -> bool {
        match self.kind {
            Kind::End { .. } | Kind::GoTo { .. } => true,
            Kind::GetData { .. } | Kind::LoadRelated { .. } | Kind::Decision { .. } => {
                self.mode() == Mode::Automatic
            }
            _ => false,
        }
    }
}

/// How a step completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Runs and moves on by itself.
    Automatic,
    /// Prepared automatically, done once a person confirms (the run waits for input).
    Confirm,
    /// A person does it and completes it with values (the run waits for input).
    Manual,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Automatic => "automatic",
            Self::Confirm => "confirm",
            Self::Manual => "manual",
        }
    }
}

/// What a step does, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Kind {
    /// Instructions for a person; with `answer`, they complete it with a free-text answer.
    Guidance {
        prompt: String,
        #[serde(default)]
        answer: bool,
    },
    /// Reads `fields` of the record (paths such as `customer:email` allowed) into the context,
    /// under the step's key.
    GetData { fields: Vec<String> },
    /// Sets fields of the record. A value is JSON, or a string `{{context.<step>.<field>}}` /
    /// `{{answer.<step>}}` read from the run's context.
    UpdateData { values: BTreeMap<String, Json> },
    /// Follows a to-one or to-many relation of the record and keeps the related record's id (the
    /// first matching `filter`, a condition tree) and `fields` in the context under the key.
    LoadRelated {
        relation: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filter: Option<Json>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        fields: Vec<String>,
    },
    /// Runs a collection action on the record, with form values fixed here (templates allowed
    /// as in `update-data`) or entered by the person (manual and confirm modes). An action that
    /// needs approval files an approval request and the run waits for its decision.
    TriggerAction {
        action: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        values: BTreeMap<String, Json>,
    },
    /// Chooses the next step: the first option whose `when` (a condition tree on the record,
    /// with `context.<step>.<field>` leaves on the context) holds, or a person's choice when
    /// the mode is manual. An option without `when` is the default.
    Decision { options: Vec<DecisionOption> },
    /// A plugin's workflow-step handler decides or computes: it gets the record id, the
    /// context and `settings`, and answers an option (a step key) and values for the context.
    Plugin {
        plugin: String,
        handler: String,
        #[serde(default, skip_serializing_if = "Json::is_null")]
        settings: Json,
    },
    /// Jumps to another step.
    GoTo { target: String },
    /// Ends the run: `succeeded` by default, or `failed` with the message.
    End {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<EndOutcome>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Hands the run to a team or a user: it waits (reason `escalation`) until one of them
    /// resumes it.
    Escalation {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        team: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Starts another workflow (by name) on the record, or on the related record a
    /// load-related step kept (`record = "<step key>"`), and waits for it to end.
    SubWorkflow {
        workflow: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        record: Option<String>,
    },
}

impl Kind {
    /// The `type` tag.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Guidance { .. } => "guidance",
            Self::GetData { .. } => "get-data",
            Self::UpdateData { .. } => "update-data",
            Self::LoadRelated { .. } => "load-related",
            Self::TriggerAction { .. } => "trigger-action",
            Self::Decision { .. } => "decision",
            Self::Plugin { .. } => "plugin",
            Self::GoTo { .. } => "go-to",
            Self::End { .. } => "end",
            Self::Escalation { .. } => "escalation",
            Self::SubWorkflow { .. } => "sub-workflow",
        }
    }

    /// The mode of a step that does not name one (FA's defaults: guidance is manual, writes
    /// wait for a confirmation, reads and control flow are automatic).
    pub fn default_mode(&self) -> Mode {
        match self {
            Self::Guidance { .. } => Mode::Manual,
            Self::UpdateData { .. } | Self::TriggerAction { .. } => Mode::Confirm,
            _ => Mode::Automatic,
        }
    }

    /// Whether the step writes: it runs under the write-ahead marker, never twice.
    pub fn mutates(&self) -> bool {
        matches!(
            self,
            Self::UpdateData { .. } | Self::TriggerAction { .. } | Self::SubWorkflow { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DecisionOption {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Json>,
    pub next: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndOutcome {
    Succeeded,
    Failed,
}

impl Definition {
    /// The stored form of a version: this definition as JSON with the keys of every object in
    /// sorted order, so that the same definition written in TOML, YAML or JSON, with its keys
    /// in any order, is the same text (and the same hash).
    pub fn canonical_json(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Json::Null);
        sorted(value).to_string()
    }

    /// SHA-256 hex of [`Definition::canonical_json`]: a file loaded again unchanged makes no
    /// new version.
    pub fn hash(&self) -> String {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(self.canonical_json().as_bytes());
        hex::encode(digest)
    }

    /// The step with this key.
    pub fn step(&self, key: &str) -> Option<(usize, &Step)> {
        self.steps.iter().enumerate().find(|(_, s)| s.key == key)
    }

    /// The steps a run may go to after the step at `index`, by index: the option targets of a
    /// decision, a go-to's target, nothing after an end, else `next` or the following step
    /// (none after the last). Keys that name no step are left out (the checks refuse them).
    pub fn successors(&self, index: usize) -> Vec<usize> {
        let Some(step) = self.steps.get(index) else {
            return Vec::new();
        };
        let by_key = |key: &str| self.step(key).map(|(i, _)| i);
        match &step.kind {
            Kind::Decision { options } => options.iter().filter_map(|o| by_key(&o.next)).collect(),
            Kind::GoTo { target } => by_key(target).into_iter().collect(),
            Kind::End { .. } => Vec::new(),
            _ => match &step.next {
                Some(next) => by_key(next).into_iter().collect(),
                None if index + 1 < self.steps.len() => vec![index + 1],
                None => Vec::new(),
            },
        }
    }
}

/// `value` with the keys of every object sorted (serde_json keeps insertion order here).
fn sorted(value: Json) -> Json {
    match value {
        Json::Object(map) => {
            let mut entries: Vec<(String, Json)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Json::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Json::Array(items) => Json::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// A `{{…}}` reference inside a string value: what a run reads from its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template<'a> {
    /// `{{context.<step>.<field>}}`: a field a step kept (`field` may be a `relation:field` path).
    Context { step: &'a str, field: &'a str },
    /// `{{answer.<step>}}`: the free-text answer of a guidance step.
    Answer { step: &'a str },
}

/// The `{{…}}` references of `text`, in order; one that is neither form, or not closed, is an
/// `Err` quoting it.
pub fn templates(text: &str) -> Vec<Result<Template<'_>, String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push(Err(format!(
                "{text:?} opens a {{{{ … }}}} it does not close"
            )));
            break;
        };
        let inner = after[..end].trim();
        out.push(parse_template(inner).ok_or_else(|| format!("{{{{{inner}}}}}")));
        rest = &after[end + 2..];
    }
    out
}

fn parse_template(inner: &str) -> Option<Template<'_>> {
    if let Some(path) = inner.strip_prefix("context.") {
        let (step, field) = path.split_once('.')?;
        return (!step.is_empty() && !field.is_empty())
            .then_some(Template::Context { step, field });
    }
    let step = inner.strip_prefix("answer.")?;
    (!step.is_empty() && !step.contains('.')).then_some(Template::Answer { step })
}
