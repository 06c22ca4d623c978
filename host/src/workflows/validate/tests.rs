//! Each check of `validate`, with the message it gives, on a hand-built schema: orders (with a
//! read-only column, a to-one `customer`, a to-many `lines` and a `Refund` action), customers,
//! lines.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{Known, check, describe};
use crate::datasource::action::{ActionSchema, ActionScope};
use crate::datasource::query::Operator;
use crate::datasource::{
    CollectionSchema, ColumnSchema, DataSourceSchema, FieldSchema, PrimitiveType, RelationSchema,
};
use crate::platform::declarative::SchemaView;
use crate::workflows::Definition;
use crate::workflows::files::{Format, from_json, parse};

fn column(kind: PrimitiveType) -> FieldSchema {
    let mut column = ColumnSchema::new(kind);
    column.filter_operators = BTreeSet::from([
        Operator::Equal,
        Operator::NotEqual,
        Operator::GreaterThan,
        Operator::In,
        Operator::Present,
    ]);
    FieldSchema::Column(column)
}

fn schema() -> DataSourceSchema {
    let mut orders = CollectionSchema::new("orders");
    orders
        .fields
        .insert("id".into(), column(PrimitiveType::Number));
    orders
        .fields
        .insert("status".into(), column(PrimitiveType::String));
    orders
        .fields
        .insert("total".into(), column(PrimitiveType::Number));
    let mut created = ColumnSchema::new(PrimitiveType::Date);
    created.is_read_only = true;
    orders
        .fields
        .insert("createdAt".into(), FieldSchema::Column(created));
    orders
        .fields
        .insert("customerId".into(), column(PrimitiveType::Number));
    orders.fields.insert(
        "customer".into(),
        FieldSchema::Relation(RelationSchema::ManyToOne {
            foreign_collection: "customers".into(),
            foreign_key: "customerId".into(),
            foreign_key_target: "id".into(),
        }),
    );
    orders.fields.insert(
        "lines".into(),
        FieldSchema::Relation(RelationSchema::OneToMany {
            foreign_collection: "lines".into(),
            origin_key: "orderId".into(),
            origin_key_target: "id".into(),
        }),
    );
    orders.actions.insert(
        "Refund".into(),
        ActionSchema {
            scope: ActionScope::Single,
            generate_file: false,
            description: None,
            submit_button_label: None,
            static_form: None,
        },
    );
    let mut customers = CollectionSchema::new("customers");
    customers
        .fields
        .insert("id".into(), column(PrimitiveType::Number));
    customers
        .fields
        .insert("email".into(), column(PrimitiveType::String));
    let mut lines = CollectionSchema::new("lines");
    lines
        .fields
        .insert("id".into(), column(PrimitiveType::Number));
    lines
        .fields
        .insert("orderId".into(), column(PrimitiveType::Number));
    lines
        .fields
        .insert("qty".into(), column(PrimitiveType::Number));
    let mut schema = DataSourceSchema::default();
    for collection in [orders, customers, lines] {
        schema
            .collections
            .insert(collection.name.clone(), collection);
    }
    schema
}

fn known(view: &SchemaView) -> Known<'_> {
    Known {
        schema: Some(view),
        workflows: BTreeMap::from([
            ("notify".to_owned(), "customers".to_owned()),
            ("audit".to_owned(), "orders".to_owned()),
        ]),
        users: Some(BTreeSet::from(["ops@x.io".to_owned()])),
        teams: Some(BTreeSet::from(["Support".to_owned()])),
        plugins: Some(BTreeSet::from(["scoring".to_owned()])),
    }
}

fn definition(value: serde_json::Value) -> Definition {
    from_json(value).unwrap()
}

/// The problems of a definition, one line each.
fn problems(value: serde_json::Value) -> Vec<String> {
    let view = SchemaView::served(&schema());
    match check(&definition(value), &known(&view)) {
        Ok(()) => Vec::new(),
        Err(found) => found.iter().map(ToString::to_string).collect(),
    }
}

/// A definition of `steps` on orders.
fn on_orders(steps: serde_json::Value) -> serde_json::Value {
    let mut definition = json!({"name": "refund", "collection": "orders"});
    definition["steps"] = steps;
    definition
}

#[test]
fn a_good_definition_has_no_problem() {
    let found = problems(json!({
        "name": "refund",
        "collection": "orders",
        "triggers": {
            "schedules": [{"cron": "0 3 * * *", "user": "OPS@x.io",
                           "filter": {"field": "status", "operator": "Equal", "value": "paid"}}],
            "recordChanges": [{"on": ["create", "update"],
                               "when": {"field": "total", "operator": "GreaterThan", "value": 100}}],
        },
        "steps": [
            {"key": "read", "type": "get-data", "fields": ["status", "total", "customer:email"]},
            {"key": "ask", "type": "guidance", "prompt": "Call the customer", "answer": true},
            {"key": "check", "type": "decision", "options": [
                {"name": "big", "when": {"aggregator": "And", "conditions": [
                    {"field": "context.read.total", "operator": "GreaterThan", "value": 100},
                    {"field": "status", "operator": "Equal", "value": "paid"}]}, "next": "refund"},
                {"name": "small", "next": "done"}]},
            {"key": "refund", "type": "trigger-action", "action": "Refund",
             "values": {"reason": "{{answer.ask}}"}},
            {"key": "mark", "type": "update-data", "mode": "automatic",
             "values": {"status": "refunded", "total": "{{context.read.total}}"}},
            {"key": "line", "type": "load-related", "relation": "lines", "fields": ["qty"],
             "filter": {"field": "qty", "operator": "GreaterThan", "value": 0}},
            {"key": "score", "type": "plugin", "plugin": "scoring", "handler": "score"},
            {"key": "hand", "type": "escalation", "team": "Support", "user": "ops@x.io"},
            {"key": "sub", "type": "sub-workflow", "workflow": "audit"},
            {"key": "done", "type": "end"},
        ],
    }));
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn structure_needs_steps_with_unique_well_formed_keys() {
    assert_eq!(
        problems(json!({"name": "x", "collection": "orders", "steps": []})),
        ["steps: a workflow needs at least one step"]
    );
    assert_eq!(
        problems(on_orders(json!([
            {"key": "a", "type": "end"},
            {"key": "a", "type": "end"},
            {"key": "b c", "type": "end"},
        ]))),
        [
            "step \"a\": key: steps[0] has the same key",
            "steps[2].key: \"b c\" is not a step key: use 1 to 100 letters, digits, `_` or `-`",
        ]
    );
    assert_eq!(
        problems(json!({"name": " ", "collection": "", "steps": [{"key": "a", "type": "end"}]})),
        ["name: is required", "collection: is required"]
    );
}

#[test]
fn every_transition_names_another_step() {
    assert_eq!(
        problems(on_orders(json!([
            {"key": "read", "type": "get-data", "fields": ["status"], "next": "nowhere"},
            {"key": "check", "type": "decision", "options": [
                {"name": "a", "when": {"field": "status", "operator": "Equal", "value": "x"}, "next": "read"},
                {"name": "b", "next": "dne"}]},
            {"key": "jump", "type": "go-to", "target": "jump"},
            {"key": "loop", "type": "guidance", "prompt": "p", "next": "loop"},
            {"key": "end", "type": "end", "next": "read"},
        ]))),
        [
            "step \"read\": next: no step \"nowhere\"",
            "step \"check\": options[1].next: no step \"dne\"",
            "step \"jump\": target: a step cannot lead to itself",
            "step \"loop\": next: a step cannot lead to itself",
            "step \"end\": next: a end step chooses where the run goes itself: remove `next`",
        ]
    );
}

#[test]
fn a_decision_has_options_and_at_most_one_default() {
    assert_eq!(
        problems(on_orders(json!([
            {"key": "empty", "type": "decision", "options": []},
            {"key": "two", "type": "decision", "options": [
                {"name": "a", "next": "empty"}, {"name": "a", "next": "empty"}]},
            {"key": "manual", "type": "decision", "mode": "manual", "options": [
                {"name": "yes", "next": "empty"}, {"name": "no", "next": "two"}]},
        ]))),
        [
            "step \"empty\": options: a decision needs at least one option",
            "step \"two\": options[1].name: another option is named \"a\"",
            "step \"two\": options[1].when: options[0] is already the default (the option \
             without `when`): a decision has at most one",
        ]
    );
}

#[test]
fn each_kind_runs_in_the_modes_it_allows() {
    assert_eq!(
        problems(on_orders(json!([
            {"key": "read", "type": "get-data", "fields": ["status"], "mode": "manual"},
            {"key": "guide", "type": "guidance", "prompt": "p", "mode": "automatic"},
            {"key": "choose", "type": "decision", "mode": "confirm", "options": [{"name": "a", "next": "read"}]},
            {"key": "jump", "type": "go-to", "target": "read", "mode": "confirm"},
            {"key": "write", "type": "update-data", "values": {"status": "x"}, "mode": "manual"},
            {"key": "write2", "type": "update-data", "values": {"status": "x"}, "mode": "automatic"},
            {"key": "act", "type": "trigger-action", "action": "Refund", "mode": "manual"},
            {"key": "end", "type": "end", "mode": "manual"},
        ]))),
        [
            "step \"read\": mode: a get-data step cannot run \"manual\": it runs automatic",
            "step \"guide\": mode: a guidance step cannot run \"automatic\": it runs manual",
            "step \"choose\": mode: a decision step cannot run \"confirm\": it runs automatic or manual",
            "step \"jump\": mode: a go-to step cannot run \"confirm\": it runs automatic",
            "step \"end\": mode: a end step cannot run \"manual\": it runs automatic",
        ]
    );
}

#[test]
fn templates_name_a_step_that_ran_before_on_every_path() {
    assert_eq!(
        problems(on_orders(json!([
            {"key": "check", "type": "decision", "options": [
                {"name": "a", "when": {"field": "status", "operator": "Equal", "value": "x"}, "next": "read"},
                {"name": "b", "next": "write"}]},
            {"key": "read", "type": "get-data", "fields": ["total"]},
            {"key": "write", "type": "update-data", "values": {
                "total": "{{context.read.total}}",
                "status": "{{context.read.status}} {{context.nope.x}} {{answer.read}} {{oops}}",
            }},
            {"key": "self", "type": "guidance", "prompt": "{{context.self.x}} {{context.later.total}}"},
            {"key": "later", "type": "get-data", "fields": ["total"]},
        ]))),
        [
            "step \"write\": values.status: step \"read\" does not run before this step on every path",
            "step \"write\": values.status: {{context.read.status}}: step \"read\" keeps total, not \"status\"",
            "step \"write\": values.status: {{context.nope.x}}: no step \"nope\"",
            "step \"write\": values.status: {{answer.read}}: step \"read\" is not a guidance step \
             with `answer = true`",
            "step \"write\": values.status: step \"read\" does not run before this step on every path",
            "step \"write\": values.status: {{oops}} is not a template: use \
             {{context.<step>.<field>}} or {{answer.<step>}}",
            "step \"write\": values.total: step \"read\" does not run before this step on every path",
            "step \"self\": prompt: step \"self\" is this step",
            "step \"self\": prompt: step \"later\" does not run before this step on every path",
        ]
    );
}

#[test]
fn names_are_checked_against_the_served_schema() {
    assert_eq!(
        problems(json!({"name": "x", "collection": "invoices", "steps": [
            {"key": "read", "type": "get-data", "fields": ["nope"]}]})),
        ["collection: no collection \"invoices\" in the served schema"]
    );
    assert_eq!(
        problems(on_orders(json!([
            {"key": "read", "type": "get-data", "fields": ["nope", "customer:nope", "customer", "lines:qty"]},
            {"key": "write", "type": "update-data", "values": {"createdAt": 1, "customer": 2, "ghost": 3}},
            {"key": "rel", "type": "load-related", "relation": "status", "fields": ["qty"]},
            {"key": "rel2", "type": "load-related", "relation": "ghosts"},
            {"key": "rel3", "type": "load-related", "relation": "lines", "fields": ["nope"],
             "filter": {"field": "qty", "operator": "Like", "value": "x"}},
            {"key": "act", "type": "trigger-action", "action": "Cancel"},
        ]))),
        [
            "step \"read\": fields[0]: \"orders\" has no field \"nope\"",
            "step \"read\": fields[1]: \"customers\" has no field \"nope\"",
            "step \"read\": fields[2]: orders.customer is a relation: name one of its fields \
             (`customer:field`)",
            "step \"read\": fields[3]: orders.lines is a to-many relation: a condition can only go \
             through to-one relations",
            "step \"write\": values.createdAt: orders.createdAt is read-only",
            "step \"write\": values.customer: orders.customer is a relation: set its foreign key \
             column instead",
            "step \"write\": values.ghost: \"orders\" has no field \"ghost\"",
            "step \"rel\": relation: orders.status is a column, not a relation",
            "step \"rel2\": relation: \"orders\" has no relation \"ghosts\"",
            "step \"rel3\": filter: The given operator 'Like' is not supported by the column: \
             'qty'. The allowed types are: [Equal,NotEqual,GreaterThan,Present,In]",
            "step \"rel3\": fields[0]: \"lines\" has no field \"nope\"",
            "step \"act\": action: no action \"Cancel\" on \"orders\" (it has Refund)",
        ]
    );
}

#[test]
fn conditions_parse_against_the_collection_and_the_context() {
    let found = problems(on_orders(json!([
        {"key": "read", "type": "get-data", "fields": ["total"]},
        {"key": "check", "type": "decision", "options": [
            {"name": "a", "next": "read", "when": {"aggregator": "Xor", "conditions": []}},
            {"name": "b", "next": "read", "when": {"field": "status", "operator": "Sometimes"}},
            {"name": "c", "next": "read", "when": {"field": "context.read.total", "operator": "Never"}},
            {"name": "d", "next": "read", "when": {"field": "context.read", "operator": "Equal"}},
            {"name": "e", "next": "read", "when": "status = 1"},
        ]},
    ])));
    assert_eq!(
        found,
        [
            "step \"check\": options[0].when.aggregator: \"Xor\" is not \"And\" or \"Or\"",
            "step \"check\": options[0].when.conditions: a branch needs a non-empty `conditions` array",
            "step \"check\": options[1].when: unknown operator \"Sometimes\" on \"status\"",
            "step \"check\": options[2].when.operator: unknown operator \"Never\"",
            "step \"check\": options[3].when.field: \"context.read\": a context field is \
             `context.<step>.<field>`",
            "step \"check\": options[4].when: a condition must be an object",
        ]
    );
}

#[test]
fn the_store_and_the_plugins_are_checked() {
    assert_eq!(
        problems(json!({
            "name": "refund", "collection": "orders",
            "triggers": {
                "schedules": [{"cron": "every day", "user": "nobody@x.io", "limit": 0}],
                "recordChanges": [{"on": []}],
            },
            "steps": [
                {"key": "score", "type": "plugin", "plugin": "ghost", "handler": ""},
                {"key": "hand", "type": "escalation", "team": "Sales"},
                {"key": "nobody", "type": "escalation"},
                {"key": "self", "type": "sub-workflow", "workflow": "refund"},
                {"key": "other", "type": "sub-workflow", "workflow": "notify"},
                {"key": "ghost", "type": "sub-workflow", "workflow": "ghost"},
                {"key": "rec", "type": "sub-workflow", "workflow": "notify", "record": "hand"},
            ],
        }))
        .iter()
        .map(|p| p
            .split(": \"every day\" is not")
            .next()
            .unwrap_or(p)
            .to_owned())
        .collect::<Vec<_>>(),
        [
            "step \"score\": plugin: no plugin \"ghost\" is loaded (loaded: scoring)",
            "step \"score\": handler: is required",
            "step \"hand\": team: no team \"Sales\"",
            "step \"nobody\": an escalation names a `team`, a `user`, or both",
            "step \"self\": workflow: a workflow cannot start itself",
            "step \"other\": workflow: workflow \"notify\" runs on \"customers\", not on \"orders\"",
            "step \"ghost\": workflow: no workflow \"ghost\"",
            "step \"rec\": record: step \"hand\" is a escalation step: name a load-related step",
            "step \"rec\": workflow: workflow \"notify\" runs on \"customers\", not on \"orders\"",
            "triggers.schedules[0].cron",
            "triggers.schedules[0].user: no user \"nobody@x.io\"",
            "triggers.schedules[0].limit: must be from 1 to 10000",
            "triggers.recordChanges[0].on: name at least one of \"create\", \"update\"",
        ]
    );
}

#[test]
fn a_sub_workflow_may_run_on_a_related_record() {
    assert_eq!(
        problems(on_orders(json!([
            {"key": "customer", "type": "load-related", "relation": "customer"},
            {"key": "tell", "type": "sub-workflow", "workflow": "notify", "record": "customer"},
        ]))),
        Vec::<String>::new()
    );
}

#[test]
fn what_is_not_known_is_not_checked() {
    let loose = definition(on_orders(json!([
        {"key": "read", "type": "get-data", "fields": ["anything"]},
        {"key": "score", "type": "plugin", "plugin": "anything", "handler": "h"},
    ])));
    assert_eq!(check(&loose, &Known::default()), Ok(()));
}

#[test]
fn problems_are_listed_one_per_line_after_the_file() {
    let view = SchemaView::served(&schema());
    let found = check(
        &definition(on_orders(json!([
            {"key": "check", "type": "decision", "options": [{"name": "a", "next": "dne"}]}
        ]))),
        &known(&view),
    )
    .unwrap_err();
    assert_eq!(
        describe(Some("workflows/refund.toml"), &found),
        "workflows/refund.toml: step \"check\": options[0].next: no step \"dne\""
    );
}

#[test]
fn parse_errors_keep_their_line_column_step_and_field() {
    let toml = "collection = \"orders\"\n\n[[steps]]\nkey = \"read\"\ntype = \"get-data\"\n\
                fields = [\"status\"]\n\n[[steps]]\nkey = \"check\"\ntype = \"decision\"\n\
                options = [{ name = \"a\" }]\n";
    let error = parse(Format::Toml, toml).unwrap_err();
    assert!(
        error.starts_with("line 8, column 1: step \"check\": "),
        "{error}"
    );
    assert!(error.contains("missing field `next`"), "{error}");

    let error = parse(Format::Toml, "collection = \n").unwrap_err();
    assert!(error.starts_with("line 1, column 14: "), "{error}");

    let yaml = "collection: orders\nsteps:\n  - key: read\n    type: get-data\n    \
                fields: [status]\n  - key: ask\n    type: guidance\n    prompt: 7\n    \
                answer: maybe\n";
    let error = parse(Format::Yaml, yaml).unwrap_err();
    assert!(error.contains("step \"ask\""), "{error}");
    assert!(error.starts_with("line "), "{error}");

    let error = parse(Format::Yaml, "collection: [orders\n").unwrap_err();
    assert!(error.starts_with("line "), "{error}");

    let json = "{\"collection\": \"orders\", \"steps\": [{\"key\": \"a\", \"type\": \"end\"}],\n \"bogus\": 1}";
    let error = parse(Format::Json, json).unwrap_err();
    assert!(error.starts_with("line 2, column "), "{error}");
    assert!(error.contains("bogus"), "{error}");

    let error = from_json(json!({"collection": "orders", "steps": [
        {"key": "read", "type": "get-data", "fields": "status"}]}))
    .unwrap_err();
    assert!(error.starts_with("step \"read\": "), "{error}");
    let error = from_json(json!({"collection": "orders", "steps": [], "extra": 1})).unwrap_err();
    assert!(error.contains("unknown field `extra`"), "{error}");
}

#[test]
fn the_three_formats_read_the_same_definition_and_hash() {
    let toml = r#"
name = "refund"
collection = "orders"

[[steps]]
key = "check"
type = "decision"
options = [
  { name = "big", when = { field = "total", operator = "GreaterThan", value = 100 }, next = "done" },
  { name = "small", next = "done" },
]

[[steps]]
key = "done"
type = "end"
"#;
    let yaml = r#"
name: refund
collection: orders
steps:
  - type: decision
    key: check
    options:
      - {name: big, when: {operator: GreaterThan, field: total, value: 100}, next: done}
      - {name: small, next: done}
  - {key: done, type: end}
"#;
    let from_toml = parse(Format::Toml, toml).unwrap();
    let from_yaml = parse(Format::Yaml, yaml).unwrap();
    let from_json = from_json(serde_json::from_str(&from_toml.canonical_json()).unwrap()).unwrap();
    assert_eq!(from_toml, from_yaml);
    assert_eq!(from_toml, from_json);
    assert_eq!(from_toml.hash(), from_yaml.hash());
    assert_eq!(from_toml.hash().len(), 64);
    let mut changed = from_toml.clone();
    changed.description = Some("now described".into());
    assert_ne!(changed.hash(), from_toml.hash());
    // `active` is the workflow's state, not part of a version.
    let mut inactive = from_toml.clone();
    inactive.active = Some(false);
    assert_eq!(inactive.hash(), from_toml.hash());
}
