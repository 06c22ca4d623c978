//! The checks of a workflow definition, made whole before anything is stored: every problem is
//! reported at once, each naming the step and the field (`step "check": options[1].next: no
//! step "dne"`), and the caller adds the file it came from.
//!
//! - Structure: at least one step, unique well-formed keys, every `next`, `target` and option
//!   `next` names a step, a decision has options and at most one default, each step's mode is
//!   one its kind allows, and `{{context.<step>.<field>}}` / `{{answer.<step>}}` name a step
//!   that runs before on every path (a dominator of the graph).
//! - Against the served schema (or the schema file, for the CLI): the collection, field paths,
//!   writable columns for `update-data`, relations, actions, condition trees (the agent's JSON
//!   form, parsed as the permission scopes are).
//! - Against the store and the served generation: sub-workflows, schedule users, escalation
//!   teams and users, plugins. What is not known (`None` in [`Known`]) is not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value as Json;

use super::definition::{Definition, Kind, Mode, Template, templates};
use super::schedule::parse_cron;
use crate::datasource::query::Operator;
use crate::platform::declarative::{FieldView, SchemaView, check_tree};

/// What a definition is checked against besides itself; each `None` part is left unchecked
/// (the CLI knows no plugins; without a schema file it checks the structure only).
#[derive(Debug, Default)]
pub struct Known<'a> {
    /// The collections, fields and actions served.
    pub schema: Option<&'a SchemaView>,
    /// The environment's workflows, name → collection: what `sub-workflow` steps may name.
    pub workflows: BTreeMap<String, String>,
    /// The users' e-mails, lowercase (schedules run as one, escalations hand over to one).
    pub users: Option<BTreeSet<String>>,
    /// The teams' names (escalations).
    pub teams: Option<BTreeSet<String>>,
    /// The plugins of the served generation (plugin steps).
    pub plugins: Option<BTreeSet<String>>,
}

/// One problem of a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key of the step at fault, when one is.
    pub step: Option<String>,
    /// The field's path inside the step (or the definition): `options[1].next`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(step) = &self.step {
            write!(f, "step {step:?}: ")?;
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem of a definition, one per line, each after `source: ` when the definition came
/// from a file.
pub fn describe(source: Option<&str>, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|problem| match source {
            Some(source) => format!("{source}: {problem}"),
            None => problem.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks `definition` whole; `Err` holds every problem found, in the definition's order.
pub fn check(definition: &Definition, known: &Known<'_>) -> Result<(), Vec<Problem>> {
    let mut checker = Checker::new(definition, known);
    checker.run();
    if checker.problems.is_empty() {
        Ok(())
    } else {
        Err(checker.problems)
    }
}

/// The modes a kind of step may run in (its default first).
pub fn allowed_modes(kind: &Kind) -> &'static [Mode] {
    match kind {
        Kind::Guidance { .. } => &[Mode::Manual],
        // Manual: a person gives the values (the console shows the columns it sets).
        Kind::UpdateData { .. } => &[Mode::Confirm, Mode::Automatic, Mode::Manual],
        Kind::TriggerAction { .. } => &[Mode::Confirm, Mode::Automatic, Mode::Manual],
        Kind::LoadRelated { .. } => &[Mode::Automatic, Mode::Confirm, Mode::Manual],
        Kind::Decision { .. } => &[Mode::Automatic, Mode::Manual],
        Kind::Plugin { .. } | Kind::SubWorkflow { .. } => &[Mode::Automatic, Mode::Confirm],
        Kind::GetData { .. } | Kind::GoTo { .. } | Kind::End { .. } | Kind::Escalation { .. } => {
            &[Mode::Automatic]
        }
    }
}

/// Whether a step key is usable in templates (`context.<key>.<field>`) and URLs.
fn well_formed_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 100
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

struct Checker<'a> {
    definition: &'a Definition,
    known: &'a Known<'a>,
    /// The schema, once the collection is known to be in it (no cascade of field errors
    /// after a wrong collection).
    schema: Option<&'a SchemaView>,
    keys: BTreeMap<&'a str, usize>,
    /// For each step, the steps that run before it on every path from the first.
    dominators: Vec<BTreeSet<usize>>,
    problems: Vec<Problem>,
    /// The step being checked.
    current: Option<usize>,
}

impl<'a> Checker<'a> {
    fn new(definition: &'a Definition, known: &'a Known<'a>) -> Self {
        let mut keys = BTreeMap::new();
        for (index, step) in definition.steps.iter().enumerate() {
            keys.entry(step.key.as_str()).or_insert(index);
        }
        Self {
            definition,
            known,
            schema: None,
            keys,
            dominators: dominators(definition),
            problems: Vec::new(),
            current: None,
        }
    }

    fn problem(&mut self, field: impl Into<String>, message: impl Into<String>) {
        let step = self
            .current
            .and_then(|i| self.definition.steps.get(i))
            .map(|s| s.key.clone())
            .filter(|k| well_formed_key(k));
        let mut field = field.into();
        if step.is_none()
            && let Some(index) = self.current
        {
            // A step without a usable key is named by its place.
            field = if field.is_empty() {
                format!("steps[{index}]")
            } else {
                format!("steps[{index}].{field}")
            };
        }
        // One problem per line: the agent's multi-line messages are joined.
        let message: String = message.into();
        self.problems.push(Problem {
            step,
            field,
            message: message
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" "),
        });
    }

    fn run(&mut self) {
        let definition = self.definition;
        if definition.name.trim().is_empty() {
            self.problem("name", "is required");
        } else if definition.name.chars().any(char::is_control) || definition.name.len() > 200 {
            self.problem(
                "name",
                "must be at most 200 characters, without control characters",
            );
        }
        self.check_collection();
        if definition.steps.is_empty() {
            self.problem("steps", "a workflow needs at least one step");
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (index, step) in definition.steps.iter().enumerate() {
            self.current = Some(index);
            if !well_formed_key(&step.key) {
                self.problem(
                    "key",
                    format!(
                        "{:?} is not a step key: use 1 to 100 letters, digits, `_` or `-`",
                        step.key
                    ),
                );
            } else if let Some(first) = seen.insert(step.key.as_str(), index) {
                seen.insert(step.key.as_str(), first);
                self.problem("key", format!("steps[{first}] has the same key"));
            }
            self.check_step(index);
        }
        self.current = None;
        self.check_triggers();
    }

    fn check_collection(&mut self) {
        let collection = &self.definition.collection;
        if collection.trim().is_empty() {
            self.problem("collection", "is required");
            return;
        }
        let Some(schema) = self.known.schema else {
            return;
        };
        if schema.has_collection(collection) {
            self.schema = Some(schema);
        } else {
            self.problem(
                "collection",
                format!("no collection {collection:?} in {}", schema.source),
            );
        }
    }

    fn check_step(&mut self, index: usize) {
        let definition = self.definition;
        let step = &definition.steps[index];
        let kind = &step.kind;
        let allowed = allowed_modes(kind);
        if let Some(mode) = step.mode
            && !allowed.contains(&mode)
        {
            let names: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
            self.problem(
                "mode",
                format!(
                    "a {} step cannot run {:?}: it runs {}",
                    kind.name(),
                    mode.as_str(),
                    names.join(" or ")
                ),
            );
        }
        if let Some(next) = &step.next {
            if matches!(
                kind,
                Kind::Decision { .. } | Kind::GoTo { .. } | Kind::End { .. }
            ) {
                self.problem(
                    "next",
                    format!(
                        "a {} step chooses where the run goes itself: remove `next`",
                        kind.name()
                    ),
                );
            } else {
                self.step_reference("next", next);
            }
        }
        match kind {
            Kind::Guidance { prompt, .. } => {
                if prompt.trim().is_empty() {
                    self.problem("prompt", "is required: what the person should do");
                }
                self.templates_in("prompt", &Json::String(prompt.clone()));
            }
            Kind::GetData { fields } => {
                if fields.is_empty() {
                    self.problem("fields", "name at least one field to read");
                }
                let collection = self.definition.collection.clone();
                for (i, field) in fields.iter().enumerate() {
                    self.field_path(&format!("fields[{i}]"), &collection, field);
                }
            }
            Kind::UpdateData { values } => {
                if values.is_empty() {
                    self.problem("values", "set at least one field");
                }
                for (field, value) in values {
                    self.writable(&format!("values.{field}"), field);
                    self.templates_in(&format!("values.{field}"), value);
                }
            }
            Kind::LoadRelated {
                relation,
                filter,
                fields,
            } => self.check_load_related(relation, filter.as_ref(), fields),
            Kind::TriggerAction { action, values } => {
                if action.trim().is_empty() {
                    self.problem("action", "is required");
                } else if let Some(schema) = self.schema {
                    let collection = &self.definition.collection;
                    if !schema.has_action(collection, action) {
                        let actions: Vec<&str> = schema
                            .actions(collection)
                            .map(Iterator::collect)
                            .unwrap_or_default();
                        self.problem(
                            "action",
                            format!(
                                "no action {action:?} on {collection:?} ({})",
                                if actions.is_empty() {
                                    "it has none".to_owned()
                                } else {
                                    format!("it has {}", actions.join(", "))
                                }
                            ),
                        );
                    }
                }
                for (field, value) in values {
                    self.templates_in(&format!("values.{field}"), value);
                }
            }
            Kind::Decision { options } => self.check_decision(step.mode(), options),
            Kind::Plugin {
                plugin, handler, ..
            } => {
                if plugin.trim().is_empty() {
                    self.problem("plugin", "is required");
                } else if let Some(plugins) = &self.known.plugins
                    && !plugins.contains(plugin)
                {
                    let loaded: Vec<&str> = plugins.iter().map(String::as_str).collect();
                    self.problem(
                        "plugin",
                        format!(
                            "no plugin {plugin:?} is loaded ({})",
                            if loaded.is_empty() {
                                "none is".to_owned()
                            } else {
                                format!("loaded: {}", loaded.join(", "))
                            }
                        ),
                    );
                }
                if handler.trim().is_empty() {
                    self.problem("handler", "is required");
                }
            }
            Kind::GoTo { target } => self.step_reference("target", target),
            Kind::End { message, .. } => {
                if let Some(message) = message {
                    self.templates_in("message", &Json::String(message.clone()));
                }
            }
            Kind::Escalation {
                team,
                user,
                message,
            } => {
                if team.is_none() && user.is_none() {
                    self.problem("", "an escalation names a `team`, a `user`, or both");
                }
                if let (Some(team), Some(teams)) = (team, &self.known.teams)
                    && !teams.contains(team)
                {
                    self.problem("team", format!("no team {team:?}"));
                }
                if let Some(user) = user {
                    self.user("user", user);
                }
                if let Some(message) = message {
                    self.templates_in("message", &Json::String(message.clone()));
                }
            }
            Kind::SubWorkflow { workflow, record } => {
                self.check_sub_workflow(workflow, record.as_deref());
            }
        }
    }

    fn check_decision(&mut self, mode: Mode, options: &[super::definition::DecisionOption]) {
        if options.is_empty() {
            self.problem("options", "a decision needs at least one option");
        }
        let mut names = BTreeSet::new();
        let mut default = None;
        for (i, option) in options.iter().enumerate() {
            if option.name.trim().is_empty() {
                self.problem(format!("options[{i}].name"), "is required");
            } else if !names.insert(option.name.as_str()) {
                self.problem(
                    format!("options[{i}].name"),
                    format!("another option is named {:?}", option.name),
                );
            }
            self.step_reference(&format!("options[{i}].next"), &option.next);
            match &option.when {
                Some(when) => {
                    let collection = self.definition.collection.clone();
                    self.condition(&format!("options[{i}].when"), &collection, when);
                }
                // A person choosing needs no conditions: every option is theirs to pick.
                None if mode == Mode::Manual => {}
                None => match default {
                    Some(first) => self.problem(
                        format!("options[{i}].when"),
                        format!(
                            "options[{first}] is already the default (the option without \
                             `when`): a decision has at most one"
                        ),
                    ),
                    None => default = Some(i),
                },
            }
        }
    }

    fn check_load_related(&mut self, relation: &str, filter: Option<&Json>, fields: &[String]) {
        if relation.trim().is_empty() {
            self.problem("relation", "is required");
            return;
        }
        let Some(schema) = self.schema else {
            return;
        };
        let collection = &self.definition.collection;
        let target = match schema.field(collection, relation) {
            Some(FieldView::ToOne(target) | FieldView::ToMany(target)) => target.clone(),
            Some(FieldView::Column { .. }) => {
                self.problem(
                    "relation",
                    format!("{collection}.{relation} is a column, not a relation"),
                );
                return;
            }
            None => {
                self.problem(
                    "relation",
                    format!("{collection:?} has no relation {relation:?}"),
                );
                return;
            }
        };
        if let Some(filter) = filter {
            self.condition("filter", &target, filter);
        }
        for (i, field) in fields.iter().enumerate() {
            self.field_path(&format!("fields[{i}]"), &target, field);
        }
    }

    fn check_sub_workflow(&mut self, workflow: &str, record: Option<&str>) {
        if workflow.trim().is_empty() {
            self.problem("workflow", "is required");
            return;
        }
        if workflow == self.definition.name {
            self.problem("workflow", "a workflow cannot start itself");
            return;
        }
        let mut expected = self.definition.collection.clone();
        if let Some(key) = record {
            let definition = self.definition;
            match self.keys.get(key).copied() {
                Some(index) => match &definition.steps[index].kind {
                    Kind::LoadRelated { relation, .. } => {
                        self.runs_before("record", key, index);
                        if let Some(schema) = self.schema
                            && let Some(FieldView::ToOne(target) | FieldView::ToMany(target)) =
                                schema.field(&self.definition.collection, relation)
                        {
                            expected = target.clone();
                        }
                    }
                    other => self.problem(
                        "record",
                        format!(
                            "step {key:?} is a {} step: name a load-related step",
                            other.name()
                        ),
                    ),
                },
                None => self.problem("record", format!("no step {key:?}")),
            }
        }
        match self.known.workflows.get(workflow) {
            None => self.problem("workflow", format!("no workflow {workflow:?}")),
            Some(collection) if *collection != expected => self.problem(
                "workflow",
                format!("workflow {workflow:?} runs on {collection:?}, not on {expected:?}"),
            ),
            Some(_) => {}
        }
    }

    fn check_triggers(&mut self) {
        let triggers = &self.definition.triggers;
        let collection = self.definition.collection.clone();
        for (i, schedule) in triggers.schedules.iter().enumerate() {
            let at = format!("triggers.schedules[{i}]");
            if let Err(error) = parse_cron(&schedule.cron) {
                self.problem(
                    format!("{at}.cron"),
                    format!("{:?} is not a cron schedule: {error}", schedule.cron),
                );
            }
            self.user(&format!("{at}.user"), &schedule.user);
            if let Some(filter) = &schedule.filter {
                self.condition(&format!("{at}.filter"), &collection, filter);
            }
            if !(1..=10_000).contains(&schedule.limit) {
                self.problem(format!("{at}.limit"), "must be from 1 to 10000");
            }
        }
        for (i, change) in triggers.record_changes.iter().enumerate() {
            let at = format!("triggers.recordChanges[{i}]");
            if change.on.is_empty() {
                self.problem(
                    format!("{at}.on"),
                    "name at least one of \"create\", \"update\"",
                );
            }
            if let Some(when) = &change.when {
                self.condition(&format!("{at}.when"), &collection, when);
            }
        }
    }

    /// `key` names a step other than the current one.
    fn step_reference(&mut self, field: &str, key: &str) {
        match self.keys.get(key) {
            None => self.problem(field, format!("no step {key:?}")),
            Some(&index) if Some(index) == self.current => {
                self.problem(field, "a step cannot lead to itself");
            }
            Some(_) => {}
        }
    }

    /// `user` is the e-mail of a user of the project.
    fn user(&mut self, field: &str, user: &str) {
        if user.trim().is_empty() {
            self.problem(field, "is required: the e-mail of a user");
        } else if let Some(users) = &self.known.users
            && !users.contains(&user.trim().to_lowercase())
        {
            self.problem(field, format!("no user {user:?}"));
        }
    }

    /// `path` leads from `collection` to a column.
    fn field_path(&mut self, field: &str, collection: &str, path: &str) {
        if let Some(schema) = self.schema
            && let Err(error) = schema.check_path(collection, path)
        {
            self.problem(field, error);
        }
    }

    /// `name` is a writable column of the workflow's collection.
    fn writable(&mut self, field: &str, name: &str) {
        let Some(schema) = self.schema else {
            return;
        };
        let collection = &self.definition.collection;
        match schema.field(collection, name) {
            Some(FieldView::Column { read_only: false }) => {}
            Some(FieldView::Column { read_only: true }) => {
                self.problem(field, format!("{collection}.{name} is read-only"));
            }
            Some(FieldView::ToOne(_) | FieldView::ToMany(_)) => self.problem(
                field,
                format!("{collection}.{name} is a relation: set its foreign key column instead"),
            ),
            None => self.problem(field, format!("{collection:?} has no field {name:?}")),
        }
    }

    /// Every `{{…}}` of the strings in `value`.
    fn templates_in(&mut self, field: &str, value: &Json) {
        match value {
            Json::String(text) => {
                for template in templates(text) {
                    match template {
                        Ok(template) => self.template(field, template),
                        Err(bad) => self.problem(
                            field,
                            format!(
                                "{bad} is not a template: use {{{{context.<step>.<field>}}}} \
                                 or {{{{answer.<step>}}}}"
                            ),
                        ),
                    }
                }
            }
            Json::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.templates_in(&format!("{field}[{i}]"), item);
                }
            }
            Json::Object(map) => {
                for (key, item) in map {
                    self.templates_in(&format!("{field}.{key}"), item);
                }
            }
            _ => {}
        }
    }

    fn template(&mut self, field: &str, template: Template<'_>) {
        match template {
            Template::Context { step, field: read } => {
                let Some(index) = self.keys.get(step).copied() else {
                    self.problem(
                        field,
                        format!("{{{{context.{step}.{read}}}}}: no step {step:?}"),
                    );
                    return;
                };
                self.runs_before(field, step, index);
                let definition = self.definition;
                let kept: Option<Vec<&str>> = match &definition.steps[index].kind {
                    Kind::GetData { fields } => Some(fields.iter().map(String::as_str).collect()),
                    Kind::LoadRelated { fields, .. } => Some(
                        std::iter::once("id")
                            .chain(fields.iter().map(String::as_str))
                            .collect(),
                    ),
                    // Plugins and people decide what they keep.
                    _ => None,
                };
                if let Some(kept) = kept
                    && !kept.contains(&read)
                {
                    self.problem(
                        field,
                        format!(
                            "{{{{context.{step}.{read}}}}}: step {step:?} keeps {}, not {read:?}",
                            kept.join(", ")
                        ),
                    );
                }
            }
            Template::Answer { step } => {
                let Some(index) = self.keys.get(step).copied() else {
                    self.problem(field, format!("{{{{answer.{step}}}}}: no step {step:?}"));
                    return;
                };
                if !matches!(
                    self.definition.steps[index].kind,
                    Kind::Guidance { answer: true, .. }
                ) {
                    self.problem(
                        field,
                        format!(
                            "{{{{answer.{step}}}}}: step {step:?} is not a guidance step with \
                             `answer = true`"
                        ),
                    );
                }
                self.runs_before(field, step, index);
            }
        }
    }

    /// The step at `index` (named `key`) runs before the current one on every path.
    fn runs_before(&mut self, field: &str, key: &str, index: usize) {
        let Some(current) = self.current else {
            return;
        };
        if index == current {
            self.problem(field, format!("step {key:?} is this step"));
        } else if !self.dominators[current].contains(&index) {
            self.problem(
                field,
                format!("step {key:?} does not run before this step on every path"),
            );
        }
    }

    /// A condition tree in the agent's JSON form on `collection`; leaves on
    /// `context.<step>.<field>` read the run's context instead of the record.
    fn condition(&mut self, field: &str, collection: &str, node: &Json) {
        let Some(object) = node.as_object() else {
            self.problem(field, "a condition must be an object");
            return;
        };
        if let Some(aggregator) = object.get("aggregator") {
            let known = aggregator
                .as_str()
                .is_some_and(|a| a.eq_ignore_ascii_case("and") || a.eq_ignore_ascii_case("or"));
            if !known {
                self.problem(
                    format!("{field}.aggregator"),
                    format!("{aggregator} is not \"And\" or \"Or\""),
                );
            }
            match object.get("conditions").and_then(Json::as_array) {
                Some(conditions) if !conditions.is_empty() => {
                    for (i, condition) in conditions.iter().enumerate() {
                        self.condition(&format!("{field}.conditions[{i}]"), collection, condition);
                    }
                }
                _ => self.problem(
                    format!("{field}.conditions"),
                    "a branch needs a non-empty `conditions` array",
                ),
            }
            return;
        }
        let Some(leaf_field) = object.get("field").and_then(Json::as_str) else {
            self.problem(field, "a condition needs a `field` (or an `aggregator`)");
            return;
        };
        if let Some(value) = object.get("value") {
            self.templates_in(&format!("{field}.value"), value);
        }
        if let Some(path) = leaf_field.strip_prefix("context.") {
            match path.split_once('.') {
                Some((step, read)) if !step.is_empty() && !read.is_empty() => {
                    self.template(
                        &format!("{field}.field"),
                        Template::Context { step, field: read },
                    );
                }
                _ => self.problem(
                    format!("{field}.field"),
                    format!("{leaf_field:?}: a context field is `context.<step>.<field>`"),
                ),
            }
            match object.get("operator").and_then(Json::as_str) {
                Some(operator) if operator.parse::<Operator>().is_ok() => {}
                Some(operator) => self.problem(
                    format!("{field}.operator"),
                    format!("unknown operator {operator:?}"),
                ),
                None => self.problem(format!("{field}.operator"), "is required"),
            }
            return;
        }
        match self.known.schema {
            Some(schema) if self.schema.is_some() => {
                if let Err(error) = check_tree(node, collection, schema) {
                    self.problem(field, error);
                }
            }
            Some(_) => {}
            None => match object.get("operator").and_then(Json::as_str) {
                Some(operator) if operator.parse::<Operator>().is_ok() => {}
                Some(operator) => self.problem(
                    format!("{field}.operator"),
                    format!("unknown operator {operator:?}"),
                ),
                None => self.problem(format!("{field}.operator"), "is required"),
            },
        }
    }
}

/// For each step, the steps on every path from the first step to it (itself included): the
/// dominators of the step graph, by the iterative data-flow method (definitions are small).
/// A step no path reaches counts the steps above it in the file instead.
fn dominators(definition: &Definition) -> Vec<BTreeSet<usize>> {
    let count = definition.steps.len();
    let successors: Vec<Vec<usize>> = (0..count).map(|i| definition.successors(i)).collect();
    let mut reachable = vec![false; count];
    let mut stack = vec![0];
    while let Some(i) = stack.pop() {
        if i < count && !reachable[i] {
            reachable[i] = true;
            stack.extend(successors[i].iter().copied());
        }
    }
    let mut predecessors = vec![Vec::new(); count];
    for (from, targets) in successors.iter().enumerate() {
        if reachable[from] {
            for &to in targets {
                predecessors[to].push(from);
            }
        }
    }
    let all: BTreeSet<usize> = (0..count).filter(|&i| reachable[i]).collect();
    let mut dom: Vec<BTreeSet<usize>> = (0..count)
        .map(|i| {
            if i == 0 {
                BTreeSet::from([0])
            } else if reachable[i] {
                all.clone()
            } else {
                (0..=i).collect()
            }
        })
        .collect();
    let mut changed = true;
    while changed {
        changed = false;
        for i in 1..count {
            if !reachable[i] {
                continue;
            }
            let mut next: Option<BTreeSet<usize>> = None;
            for &p in &predecessors[i] {
                next = Some(match next {
                    None => dom[p].clone(),
                    Some(acc) => acc.intersection(&dom[p]).copied().collect(),
                });
            }
            let mut next = next.unwrap_or_default();
            next.insert(i);
            if next != dom[i] {
                dom[i] = next;
                changed = true;
            }
        }
    }
    dom
}

#[cfg(test)]
#[path = "validate/tests.rs"]
mod tests;
