//! The customizer stack through the `/forest` routes, with closure handlers on the shop fixture
//! of `list`: computed fields (relation paths, computed on computed, one call per field on
//! distinct rows), hooks at each position, static and dynamic segments, replaced and disabled
//! search (and the 403 of extended search with a handler), actions of each scope with their form
//! hooks and every result builder, and API charts; on the wire-key tables of `wire_values`,
//! action record ids and missing-link errors in the keys' wire form.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{StatusCode, header};
use canopy::customizer::{
    ActionHandler, Customization, FieldSelection, HookData, HookOperation, HookPosition, Kind,
    SearchMode, SegmentSource, build_stack, closures,
};
use canopy::datasource::action::{
    ActionOutcome, ActionResult, ActionScope, DropdownSearch, FieldType, FormElement, FormField,
    FormPhase, Widget,
};
use canopy::datasource::chart::ChartResult;
use canopy::datasource::sql::Options;
use canopy::datasource::{ConditionTree, DataSource, Error, Operator, Record, Value};
use canopy::http::router;
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{
    attribute, ids, join_rows, on, post, serve, state, string_field, text, with_body,
};
use crate::http::{delete, envelope, get, send};
use crate::list::shop;

/// What the closure handlers saw: computed-field calls with their row counts, hook runs.
#[derive(Default)]
struct Log {
    computed: Mutex<Vec<(String, usize)>>,
    hooks: Mutex<Vec<String>>,
}

fn computed(log: &Arc<Log>, collection: &str, name: &str, deps: &[&str]) -> Customization {
    let log = Arc::clone(log);
    let field = name.to_owned();
    string_field(
        "test-plugin",
        collection,
        name,
        deps,
        closures::compute(move |batch| {
            log.computed
                .lock()
                .unwrap()
                .push((field.clone(), batch.len));
            Ok(join_rows(batch))
        }),
    )
}

fn hook(log: &Arc<Log>, position: HookPosition, operation: HookOperation) -> Customization {
    let log = Arc::clone(log);
    on(
        "orders",
        Kind::Hook {
            position,
            operation,
            handler: closures::hook(move |_, p, data| {
                log.hooks
                    .lock()
                    .unwrap()
                    .push(format!("{p:?} {operation:?}"));
                match (p, data) {
                    (HookPosition::Before, HookData::Create { records, .. }) => {
                        for r in records {
                            r.insert("note", Value::String("hooked".into()));
                        }
                    }
                    (HookPosition::Before, HookData::Update { patch, .. }) => {
                        patch.insert("note", Value::String("patched".into()));
                    }
                    (HookPosition::Before, HookData::Delete { .. }) => {
                        return Err(Error::validation("Orders are kept"));
                    }
                    (
                        HookPosition::After,
                        HookData::List {
                            records: Some(records),
                            ..
                        },
                    ) => {
                        for r in records {
                            if let Some(Value::String(note)) = r.get_mut("note") {
                                *note = note.to_uppercase();
                            }
                        }
                    }
                    _ => {}
                }
                Ok(())
            }),
        },
    )
}

fn action(
    name: &str,
    scope: ActionScope,
    form: Option<Vec<FormElement>>,
    handler: Arc<dyn ActionHandler>,
) -> Kind {
    Kind::Action {
        name: name.to_owned(),
        scope,
        generate_file: false,
        description: None,
        submit_button_label: None,
        static_form: form,
        handler,
    }
}

/// A handler for actions whose execution the test does not reach.
fn never() -> Arc<dyn ActionHandler> {
    closures::action(|_, _| Ok(Vec::new()), |_, _| async { unreachable!() })
}

/// Every customization of these tests.
fn customizations(log: &Arc<Log>) -> Vec<Customization> {
    let mut out = vec![
        computed(log, "customers", "displayName", &["name", "country:name"]),
        // Computed on a computed field of another collection, through a relation.
        computed(log, "orders", "label", &["customer:displayName", "status"]),
    ];
    for operation in [
        HookOperation::List,
        HookOperation::Create,
        HookOperation::Update,
        HookOperation::Delete,
        HookOperation::Aggregate,
    ] {
        out.push(hook(log, HookPosition::Before, operation));
        out.push(hook(log, HookPosition::After, operation));
    }
    out.push(on(
        "orders",
        Kind::Segment {
            name: "Paid".into(),
            source: SegmentSource::Static(ConditionTree::leaf(
                "status",
                Operator::Equal,
                Value::String("paid".into()),
            )),
        },
    ));
    out.push(on(
        "orders",
        Kind::Segment {
            name: "Mine".into(),
            source: SegmentSource::Dynamic(closures::segment(|caller| {
                Ok(Some(ConditionTree::leaf(
                    "customer_id",
                    Operator::Equal,
                    Value::Int(caller.id),
                )))
            })),
        },
    ));
    out.push(on(
        "customers",
        Kind::Search(SearchMode::Fields(FieldSelection {
            only: Some(vec!["email".into()]),
            ..FieldSelection::default()
        })),
    ));
    out.push(on(
        "countries",
        Kind::Search(SearchMode::Handler(closures::search(|text, _| {
            Ok(Some(ConditionTree::leaf(
                "name",
                Operator::StartsWith,
                Value::String(text.to_owned()),
            )))
        }))),
    ));
    out.push(on("order_lines", Kind::Search(SearchMode::Disabled)));
    out.extend(actions());
    out.push(who_ordered());
    out.push(on(
        "customers",
        Kind::Chart {
            name: "record".into(),
            handler: closures::chart(|_, request| {
                let id = request.record_id.clone().unwrap_or_default();
                Ok(ChartResult::Value {
                    current: id.first().and_then(Value::as_f64).unwrap_or(-1.0),
                    previous: request
                        .parameters
                        .get("previous")
                        .and_then(|p| p.parse().ok()),
                })
            }),
        },
    ));
    out.push(Customization::datasource(
        "test-plugin",
        Kind::Chart {
            name: "mix".into(),
            handler: closures::chart(|_, _| {
                Ok(ChartResult::Leaderboard(
                    [("a".to_owned(), 1.0), ("b".to_owned(), 3.0)]
                        .into_iter()
                        .collect(),
                ))
            }),
        },
    ));
    out
}

/// customers: `Mark VIP` (Single, static form), `Send mail` (Bulk, dynamic form),
/// `Result` (Global: answers the result builder named by its `kind` value).
fn actions() -> Vec<Customization> {
    let vip = FormField {
        value: Some(json!(false)),
        widget: Some(Widget::Checkbox),
        ..FormField::new("VIP", FieldType::Boolean)
    };
    let mark_vip = {
        let handler = closures::action(
            |_, _| Ok(Vec::new()),
            |caller, ctx| async move {
                let vip = ctx.form_values.get("VIP") == Some(&json!(true));
                let id = ctx.get_record_id(&caller).await?;
                let mut patch = Record::new();
                patch.insert("vip", Value::Bool(vip));
                ctx.base
                    .collection()?
                    .update(&caller, &ctx.filter, &patch)
                    .await?;
                Ok(ActionResult::success(format!("{id} is VIP: {vip}")))
            },
        );
        action(
            "Mark VIP",
            ActionScope::Single,
            Some(vec![FormElement::Field(vip)]),
            handler,
        )
    };
    let send_mail = {
        let handler = closures::action(
            |ctx, phase| {
                let subject = ctx
                    .form_values
                    .get("Subject")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_owned();
                let mut subject_field = FormField::new("Subject", FieldType::String);
                subject_field.watch_changes = true;
                subject_field.value = Some(json!(subject));
                let mut body = FormField::new("Body", FieldType::String);
                body.value = Some(json!(format!(
                    "Hello {subject} (changed: {})",
                    ctx.has_field_changed("Subject")
                )));
                let search = match phase {
                    FormPhase::Search { search_value, .. } => search_value.clone(),
                    _ => None,
                };
                let mut template = FormField::new("Template", FieldType::String);
                template.widget = Some(Widget::Dropdown {
                    options: ["welcome", "reminder", "goodbye"]
                        .into_iter()
                        .filter(|o| search.as_deref().is_none_or(|s| o.contains(s)))
                        .map(|o| json!(o))
                        .collect(),
                    search: DropdownSearch::Dynamic,
                    placeholder: None,
                });
                Ok(vec![
                    FormElement::Field(subject_field),
                    FormElement::Separator,
                    FormElement::Field(body),
                    FormElement::Field(template),
                ])
            },
            |caller, ctx| async move {
                let records = ctx.get_records(&caller, &["email"]).await?;
                Ok(ActionResult::success(format!("{} mails", records.len())))
            },
        );
        action("Send mail", ActionScope::Bulk, None, handler)
    };
    let result = {
        let handler = closures::action(
            |_, _| {
                Ok(vec![FormElement::Field(FormField::new(
                    "kind",
                    FieldType::String,
                ))])
            },
            |_, ctx| async move {
                let kind = ctx.form_values.get("kind").and_then(Json::as_str);
                let outcome = match kind {
                    Some("error") => ActionOutcome::Error {
                        message: "Nope".into(),
                        html: Some("<b>no</b>".into()),
                    },
                    Some("webhook") => ActionOutcome::Webhook {
                        url: "https://hooks.example/x".into(),
                        method: "POST".into(),
                        headers: [("a".to_owned(), "b".to_owned())].into_iter().collect(),
                        body: json!({"n": 1}),
                    },
                    Some("redirect") => ActionOutcome::Redirect {
                        path: "/customers".into(),
                    },
                    Some("file") => ActionOutcome::File {
                        name: "report.csv".into(),
                        mime_type: "text/csv".into(),
                        bytes: b"a,b\n1,2\n".to_vec(),
                    },
                    _ => ActionOutcome::Success {
                        message: "Done".into(),
                        html: Some("<p>ok</p>".into()),
                        invalidated: vec!["orders".into()],
                    },
                };
                Ok(ActionResult {
                    outcome,
                    headers: vec![("x-canopy".into(), "yes".into())],
                })
            },
        );
        action("Result", ActionScope::Global, None, handler)
    };
    [mark_vip, send_mail, result]
        .into_iter()
        .map(|kind| on("customers", kind))
        .collect()
}

/// orders: `Who ordered` (Single): reads the record through `getField` on a relation path and
/// `getCompositeRecordId`.
fn who_ordered() -> Customization {
    let handler = closures::action(
        |_, _| Ok(Vec::new()),
        |caller, ctx| async move {
            let email = ctx.get_field(&caller, "customer:email").await?;
            let id = ctx.get_composite_record_id(&caller).await?;
            Ok(ActionResult::success(format!(
                "order {} by {}",
                text(&id[0]),
                text(&email)
            )))
        },
    );
    on(
        "orders",
        action(
            "Who ordered",
            ActionScope::Single,
            Some(Vec::new()),
            handler,
        ),
    )
}

/// The router over the customized shop.
async fn app(backend: Backend, unsafe_endpoint: bool) -> (canopy_e2e::TestDb, Router, Arc<Log>) {
    let (db, datasource) = shop(backend).await;
    let log = Arc::new(Log::default());
    let stack = build_stack(Arc::new(datasource), customizations(&log)).unwrap();
    let mut state = state(stack);
    state.use_unsafe_action_endpoint = unsafe_endpoint;
    (db, router(Arc::new(state)), log)
}

async fn computed_fields(backend: Backend) {
    let (_db, app, log) = app(backend, false).await;
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&fields[orders]=id,label&sort=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        attribute(&body, "label"),
        [
            "Ann / France / paid",
            "Ann / France / new",
            "Bob / Japan / paid",
            // No customer: the relation is null, its computed field too.
            " / cancelled",
            "Carl /  / new",
        ]
    );
    // One call per field: displayName on the 3 distinct customers (Ann twice), label on 5 rows.
    assert_eq!(
        *log.computed.lock().unwrap(),
        [("displayName".to_owned(), 3), ("label".to_owned(), 5)]
    );
    log.computed.lock().unwrap().clear();

    // A relation path to a computed field: customer:displayName.
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&fields[orders]=id,customer&fields[customer]=displayName&sort=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let included: Vec<&Json> = body["included"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["attributes"]["displayName"])
        .collect();
    assert!(included.contains(&&json!("Ann / France")), "{body}");
    assert!(included.contains(&&json!("Carl / ")), "{body}");
    assert_eq!(
        *log.computed.lock().unwrap(),
        [("displayName".to_owned(), 3)]
    );

    // Computed fields are read-only columns without operators in the schema.
    let (status, _, body) = send(
        &app,
        get("/forest/customers?timezone=UTC&filters=%7B%22field%22%3A%22displayName%22%2C%22operator%22%3A%22equal%22%2C%22value%22%3A%22x%22%7D"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

async fn hooks(backend: Backend) {
    let (_db, app, log) = app(backend, false).await;
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&fields[orders]=id,note&sort=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The After List hook upper-cased the notes.
    assert_eq!(attribute(&body, "note")[0], "FIRST ORDER");

    let (status, _, body) = send(
        &app,
        post(
            "/forest/orders?timezone=UTC",
            &json!({"data": {"type": "orders", "attributes": {"status": "new", "note": "typed"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["note"], "hooked", "{body}");
    let id = body["data"]["id"].as_str().unwrap().to_owned();

    let (status, _, body) = send(
        &app,
        with_body(
            "PUT",
            &format!("/forest/orders/{id}?timezone=UTC"),
            &json!({"data": {"type": "orders", "attributes": {"note": "changed"}}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The Before Update hook replaced the note; the re-read goes through the After List hook.
    assert_eq!(body["data"]["attributes"]["note"], "PATCHED", "{body}");

    // A Before Delete error stops the delete with its message.
    let (status, _, body) = send(&app, delete(&format!("/forest/orders/{id}?timezone=UTC"))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body, envelope("ValidationError", "Orders are kept", 400));
    let (status, _, body) = send(&app, get(&format!("/forest/orders/{id}?timezone=UTC"))).await;
    assert_eq!(status, StatusCode::OK, "the order is still there: {body}");

    let (status, _, body) = send(&app, get("/forest/orders/count?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"count": 6}));

    let hooks = log.hooks.lock().unwrap().clone();
    for expected in [
        "Before List",
        "After List",
        "Before Create",
        "After Create",
        "Before Update",
        "After Update",
        "Before Delete",
        "Before Aggregate",
        "After Aggregate",
    ] {
        assert!(hooks.iter().any(|h| h == expected), "{expected}: {hooks:?}");
    }
    assert!(!hooks.iter().any(|h| h == "After Delete"), "{hooks:?}");
}

async fn segments_and_search(backend: Backend) {
    let (_db, app, _) = app(backend, false).await;
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&segment=Paid&sort=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids(&body), ["1", "3"]);
    // The token's user has id 1: Ann's orders.
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&segment=Mine&sort=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids(&body), ["1", "2"]);
    let (_, _, body) = send(&app, get("/forest/orders/count?timezone=UTC&segment=Mine")).await;
    assert_eq!(body, json!({"count": 2}));

    // customers search only emails: Carl (no email) is not found by name.
    let (status, _, body) = send(&app, get("/forest/customers?timezone=UTC&search=Carl")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(ids(&body).is_empty(), "{body}");
    let (_, _, body) = send(&app, get("/forest/customers?timezone=UTC&search=bob%40")).await;
    assert_eq!(ids(&body), ["2"]);

    // countries search with a handler (name starts with), extended search refused.
    let (_, _, body) = send(&app, get("/forest/countries?timezone=UTC&search=Ja")).await;
    assert_eq!(ids(&body), ["2"]);
    let (status, _, body) = send(
        &app,
        get("/forest/countries?timezone=UTC&search=Ja&searchExtended=1"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["errors"][0]["name"], "ForbiddenError");

    // disableSearch.
    let (status, _, body) = send(&app, get("/forest/order_lines?timezone=UTC&search=1")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body,
        envelope("ValidationError", "Collection is not searchable", 400)
    );
}

fn selection(ids: &[&str]) -> Json {
    json!({"data": {"attributes": {"collection_name": "customers", "ids": ids}}})
}

async fn actions_and_forms(backend: Backend) {
    let (_db, app, _) = app(backend, false).await;
    // Single, static form: load answers the declaration, execute writes through the callback.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/0/mark-vip/hooks/load?timezone=UTC",
            &selection(&["2"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"fields": [{"field": "VIP", "label": "VIP", "value": false, "type": "Boolean",
            "widgetEdit": {"name": "boolean editor", "parameters": {}}}], "layout": []})
    );
    let mut execute = selection(&["2"]);
    execute["data"]["attributes"]["values"] = json!({"VIP": true});
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/0/mark-vip?timezone=UTC",
            &execute,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"success": "2 is VIP: true", "refresh": {"relationships": []}})
    );
    let (_, _, body) = send(&app, get("/forest/customers/2?timezone=UTC")).await;
    assert_eq!(body["data"]["attributes"]["vip"], true, "{body}");

    // Bulk, dynamic form: load, change (watched field), search (dynamic dropdown).
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/1/send-mail/hooks/load?timezone=UTC",
            &selection(&["1", "2"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["fields"][0]["hook"], "changeHook", "{body}");
    assert_eq!(body["fields"][1]["value"], "Hello  (changed: false)");
    assert_eq!(
        body["layout"],
        json!([{"component": "input", "fieldId": "Subject"}, {"component": "separator"},
            {"component": "input", "fieldId": "Body"}, {"component": "input", "fieldId": "Template"}])
    );
    assert_eq!(
        body["fields"][2]["widgetEdit"],
        json!({"name": "dropdown", "parameters": {"searchType": "dynamic", "isSearchable": true,
            "placeholder": null, "static": {"options": ["welcome", "reminder", "goodbye"]}}})
    );
    let change = json!({"data": {"attributes": {"collection_name": "customers", "ids": ["1"],
        "changed_field": "Subject",
        "fields": [{"field": "Subject", "value": "News"}, {"field": "Body", "value": null}]}}});
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/1/send-mail/hooks/change?timezone=UTC",
            &change,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["fields"][1]["value"], "Hello News (changed: true)");
    let search = json!({"data": {"attributes": {"collection_name": "customers", "ids": ["1"],
        "search_field": "Template",
        "fields": [{"field": "Template", "value": null, "searchValue": "re"}]}}});
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/1/send-mail/hooks/search?timezone=UTC",
            &search,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["fields"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(
        body["fields"][0]["widgetEdit"]["parameters"]["static"]["options"],
        json!(["reminder"])
    );
    let mut all = json!({"data": {"attributes": {"collection_name": "customers",
        "all_records": true, "all_records_ids_excluded": ["4"], "values": {}}}});
    let (status, _, body) = send(
        &app,
        post("/forest/_actions/customers/1/send-mail?timezone=UTC", &all),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "3 mails");
    // Launched from a country's related customers: restricted to France's (Ann and dora).
    let related = json!({"data": {"attributes": {"collection_name": "customers",
        "all_records": true, "all_records_ids_excluded": [], "values": {},
        "parent_collection_name": "countries", "parent_collection_id": "1",
        "parent_association_name": "customers"}}});
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/1/send-mail?timezone=UTC",
            &related,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "2 mails");
    // A wrong index or slug has no route.
    all["data"]["attributes"]["values"] = json!({});
    let (status, _, _) = send(
        &app,
        post("/forest/_actions/customers/0/send-mail?timezone=UTC", &all),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The spec's values route.
    let (status, _, body) = send(
        &app,
        post(
            "/forest/actions/mark-vip/values?timezone=UTC",
            &selection(&["1"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"VIP": false}));
}

async fn action_results(backend: Backend) {
    let (_db, app, _) = app(backend, false).await;
    let run = |kind: &str| {
        post(
            "/forest/_actions/customers/2/result?timezone=UTC",
            &json!({"data": {"attributes": {"collection_name": "customers", "ids": [],
                "values": {"kind": kind}}}}),
        )
    };
    let (status, headers, body) = send(&app, run("success")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"success": "Done", "html": "<p>ok</p>", "refresh": {"relationships": ["orders"]}})
    );
    assert_eq!(headers["x-canopy"], "yes");
    let (status, _, body) = send(&app, run("error")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body, json!({"error": "Nope", "html": "<b>no</b>"}));
    let (status, _, body) = send(&app, run("webhook")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"webhook": {"url": "https://hooks.example/x", "method": "POST",
            "headers": {"a": "b"}, "body": {"n": 1}}})
    );
    let (_, _, body) = send(&app, run("redirect")).await;
    assert_eq!(body, json!({"redirectTo": "/customers"}));
    let (status, headers, body) = send(&app, run("file")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/csv");
    assert_eq!(
        headers[header::CONTENT_DISPOSITION],
        "attachment; filename=\"report.csv\""
    );
    assert_eq!(
        headers[header::ACCESS_CONTROL_EXPOSE_HEADERS],
        "Content-Disposition"
    );
    assert_eq!(body, json!("a,b\n1,2\n"));
    // A File field must hold a data URI: there is none here, so the unsafe endpoint is next.
}

async fn unsafe_endpoint_and_charts(backend: Backend) {
    let (_db, app, _) = app(backend, true).await;
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_actions/customers/mark-vip/hooks/load?timezone=UTC",
            &selection(&["1"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["fields"][0]["field"], "VIP");
    let (status, _, _) = send(
        &app,
        post(
            "/forest/_actions/customers/0/mark-vip/hooks/load?timezone=UTC",
            &selection(&["1"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Collection chart: GET answers the raw value, POST the stats document.
    let (status, _, body) = send(
        &app,
        get("/forest/_charts/customers/record?timezone=UTC&record_id=3&previous=2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"countCurrent": 3, "countPrevious": 2}));
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_charts/customers/record?timezone=UTC",
            &json!({"record_id": "2"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["type"], "stats");
    assert_eq!(
        body["data"]["attributes"]["value"],
        json!({"countCurrent": 2})
    );
    // Datasource chart.
    let (status, _, body) = send(&app, get("/forest/_charts/mix?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!([{"key": "b", "value": 3}, {"key": "a", "value": 1}])
    );
    let (status, _, _) = send(&app, get("/forest/_charts/nope?timezone=UTC")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn duplicate_slugs_with_the_unsafe_endpoint_refuse_to_start() {
    let (_db, datasource) = shop(Backend::Sqlite).await;
    let stack: Arc<dyn DataSource> = build_stack(
        Arc::new(datasource),
        ["Send mail", "send MAIL"]
            .into_iter()
            .map(|name| {
                Customization::collection(
                    "p",
                    "customers",
                    action(name, ActionScope::Global, Some(Vec::new()), never()),
                )
            })
            .collect(),
    )
    .unwrap();
    let error = canopy::agent::action::check_unique_slugs(stack.schema()).unwrap_err();
    assert!(error.to_string().contains("send-mail"), "{error}");
}

/// A Single action runs on exactly one record: `getField` reads it (through a relation here), and
/// a selection of none or several is refused before the handler runs.
async fn single_actions(backend: Backend) {
    let (_db, app, _) = app(backend, false).await;
    let (_, _, order) = send(
        &app,
        get("/forest/orders/1?timezone=UTC&fields[orders]=id,customer&fields[customer]=email"),
    )
    .await;
    let email = order["included"][0]["attributes"]["email"].clone();
    assert!(email.is_string(), "{order}");
    let run = |ids: &[&str]| {
        let body = json!({"data": {"attributes": {"collection_name": "orders", "ids": ids,
            "values": {}}}});
        post("/forest/_actions/orders/0/who-ordered?timezone=UTC", &body)
    };
    let (status, _, body) = send(&app, run(&["1"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["success"],
        format!("order 1 by {}", email.as_str().unwrap())
    );
    for ids in [&["1", "2"][..], &["99999"]] {
        let (status, _, body) = send(&app, run(ids)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{ids:?}: {body}");
        assert_eq!(body["errors"][0]["name"], "ValidationError", "{body}");
    }
    let (_, _, body) = send(&app, run(&["99999"])).await;
    assert_eq!(
        body["errors"][0]["detail"],
        "Query with filter did not match any records"
    );
}

/// The wire-key tables of `wire_values` (prices: decimal key, blobs: binary key) with a Bulk
/// action `Record ids` on each, answering the sorted `getRecordIds()` of its selection.
async fn keyed_app(backend: Backend) -> (canopy_e2e::TestDb, Router) {
    let (db, _) = crate::wire_values::bank(backend).await;
    crate::wire_values::decimal_keys(&db, backend).await;
    let datasource = db.datasource(Options::default()).await;
    let handler = closures::action(
        |_, _| Ok(Vec::new()),
        |caller, ctx| async move {
            let mut ids = ctx.get_record_ids(&caller).await?;
            ids.sort();
            Ok(ActionResult::success(ids.join(",")))
        },
    );
    let customizations = ["prices", "blobs"]
        .into_iter()
        .map(|collection| {
            on(
                collection,
                action(
                    "Record ids",
                    ActionScope::Bulk,
                    Some(Vec::new()),
                    Arc::clone(&handler),
                ),
            )
        })
        .collect();
    let stack = build_stack(Arc::new(datasource), customizations).unwrap();
    (db, serve(stack))
}

/// `getRecordIds()` gives the ids the client sees: the list route's ids of the same records,
/// decimal keys as the driver prints them (`12.3` on MariaDB and SQLite, `12.30` on PostgreSQL)
/// and binary keys in hex.
async fn action_record_ids_are_the_listed_ids(backend: Backend) {
    let (_db, app) = keyed_app(backend).await;
    let expected: [(&str, &[&str]); 2] = [
        (
            "prices",
            match backend {
                Backend::Postgres => &["12.30", "5.00"],
                Backend::MySql | Backend::Sqlite => &["12.3", "5"],
            },
        ),
        ("blobs", &["cafe"]),
    ];
    for (collection, expected) in expected {
        let (status, _, body) =
            send(&app, get(&format!("/forest/{collection}?timezone=UTC"))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut listed = ids(&body);
        listed.sort();
        assert_eq!(listed, expected, "{collection}");
        let selection = json!({"data": {"attributes": {"collection_name": collection,
            "ids": listed, "values": {}}}});
        let (status, _, body) = send(
            &app,
            post(
                &format!("/forest/_actions/{collection}/0/record-ids?timezone=UTC"),
                &selection,
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{collection}: {body}");
        assert_eq!(body["success"], listed.join(","), "{collection}");
    }
}

/// Linking a record that does not exist, on create and on a to-one update, is refused with an
/// error naming the id as the client wrote it: a decimal key as a number, a binary key in hex.
async fn a_missing_linked_record_is_named_as_sent(backend: Backend) {
    let (_db, app) = keyed_app(backend).await;
    let price = "99.9";
    let link = |collection: &str, id: &str| json!({"data": {"type": collection, "id": id}});
    let requests = [
        (
            "POST",
            "/forest/quotes",
            json!({"data": {"type": "quotes", "attributes": {"id": 3},
                "relationships": {"price": link("prices", price)}}}),
            "prices",
            price,
        ),
        (
            "PUT",
            "/forest/quotes/1/relationships/price",
            link("prices", price),
            "prices",
            price,
        ),
        (
            "POST",
            "/forest/blob_tags",
            json!({"data": {"type": "blob_tags", "attributes": {"label": "z"},
                "relationships": {"blob": link("blobs", "dead")}}}),
            "blobs",
            "dead",
        ),
        (
            "PUT",
            "/forest/blob_tags/1/relationships/blob",
            link("blobs", "dead"),
            "blobs",
            "dead",
        ),
    ];
    for (method, uri, body, collection, id) in requests {
        let (status, _, error) = send(
            &app,
            with_body(method, &format!("{uri}?timezone=UTC"), &body),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {uri}: {error}");
        assert_eq!(
            error["errors"][0]["detail"],
            format!("The record '{id}' of '{collection}' does not exist"),
            "{method} {uri}: {error}"
        );
    }
    // Number keys are read as numbers, as the agent's `unpackId` reads them (`Number(part)`):
    // the scale PostgreSQL prints (`99.90`) is not kept, so the error names the number.
    if backend == Backend::Postgres {
        let (status, _, error) = send(
            &app,
            with_body(
                "PUT",
                "/forest/quotes/1/relationships/price?timezone=UTC",
                &link("prices", "99.90"),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        assert_eq!(
            error["errors"][0]["detail"],
            "The record '99.9' of 'prices' does not exist"
        );
    }
}

on_all_backends!(
    action_record_ids_are_the_listed_ids,
    a_missing_linked_record_is_named_as_sent,
    single_actions,
    computed_fields,
    hooks,
    segments_and_search,
    actions_and_forms,
    action_results,
    unsafe_endpoint_and_charts,
);
