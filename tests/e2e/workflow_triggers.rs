//! What starts workflow runs (issue 13 §4), on a served stack with Canopy's store on SQLite and
//! on PostgreSQL: the signed webhook with every status of the spec's table in its check order
//! (a request wrong in two ways gets the earlier answer), one run per record under 1,000
//! concurrent calls, tampered, truncated and superseded URLs and bad bodies creating nothing,
//! disable/enable keeping the URL, the per-webhook rate limit, the manual start and the triggers
//! API with its permissions.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use canopy::platform::{Actor, NewToken, Scope, Store};
use canopy::workflows::definition::{Definition, Kind, Step};
use canopy_e2e::Backend;
use serde_json::Value as Json;
use sqlx::Row as _;
use tower::ServiceExt as _;

use crate::admin::{Env, on_store_backends, serve_with, token_for};

const BASE: &str = "/v1/project/acme/environment/production";

/// Ann administers; Sam edits with the Support role (orders yes, countries no); Nat has no team.
pub(crate) const PERMISSIONS: &str = r#"
mode = "seed"

[roles.Admin]
collections = { "*" = "all" }

[roles.Support]
collections = { orders = ["browse", "read", "edit"], customers = ["browse", "read", "edit"] }

[teams.Operations]

[teams.Ops.scopes]
orders = { field = "status", operator = "equal", value = "new" }

[[users]]
email = "ann@acme.io"
first_name = "Ann"
level = "admin"
role = "Admin"
teams = ["Operations"]

[[users]]
email = "sam@acme.io"
first_name = "Sam"
level = "editor"
role = "Support"
teams = ["Ops"]

[[users]]
email = "nat@acme.io"
first_name = "Nat"
level = "editor"
role = "Support"
"#;

/// A served stack with the file above and this webhook rate limit.
pub(crate) async fn serve(backend: Backend, per_minute: u32) -> Env {
    serve_with(backend, Some(PERMISSIONS), |config| {
        config.triggers.webhook_per_minute = std::num::NonZeroU32::new(per_minute).unwrap();
        // Many calls with one token in some tests: the /v1 limit is not what they test.
        let many = std::num::NonZeroU32::new(1_000_000).unwrap();
        config.rate_limit.per_minute = many;
        config.rate_limit.burst = many;
    })
    .await
    .unwrap()
}

/// A workflow of one `end` step on `collection`, stored as wfdef's store functions do (one row
/// and its version 1); returns its id.
pub(crate) async fn add_workflow(
    store: &Store,
    name: &str,
    collection: &str,
    active: bool,
) -> String {
    let definition = Definition {
        name: name.to_owned(),
        collection: collection.to_owned(),
        description: None,
        active: Some(active),
        triggers: Default::default(),
        steps: vec![Step {
            key: "done".to_owned(),
            title: None,
            mode: None,
            next: None,
            kind: Kind::End {
                outcome: None,
                message: None,
            },
        }],
    };
    add_definition(store, &definition).await
}

/// Stores `definition` as a workflow at version 1; returns its id.
pub(crate) async fn add_definition(store: &Store, definition: &Definition) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "INSERT INTO workflows (id, project, environment, name, collection_name, description, \
         active, latest_version, source, created_by_user_id, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, NULL, $6, 1, 'api', NULL, $7, $7)",
    )
    .bind(&id)
    .bind(store.project())
    .bind(store.environment())
    .bind(&definition.name)
    .bind(&definition.collection)
    .bind(i64::from(definition.active.unwrap_or(true)))
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO workflow_versions (id, workflow_id, version, definition, definition_hash, \
         created_by_user_id, created_at) VALUES ($1, $2, 1, $3, 'test', NULL, $4)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(&id)
    .bind(serde_json::to_string(definition).unwrap())
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();
    id
}

/// An application token of `email` with these scopes.
pub(crate) async fn app_token(store: &Store, email: &str, scopes: &[Scope]) -> String {
    let user = store.user_by_email(email).await.unwrap().unwrap();
    let (_, secret) = store
        .create_token(
            &Actor::System,
            user.id,
            NewToken {
                name: format!("{email} {scopes:?}"),
                scopes: scopes.to_vec(),
                expires_at: None,
            },
        )
        .await
        .unwrap();
    secret.expose().to_owned()
}

/// One request: status, headers, JSON body (or the text as a JSON string).
pub(crate) async fn send(
    router: &Router,
    method: &str,
    uri: &str,
    bearer: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, HeaderMap, Json) {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "canopy.test");
    if let Some(bearer) = bearer {
        request = request.header(header::AUTHORIZATION, format!("Bearer {bearer}"));
    }
    let request = match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned())),
        None => request.body(Body::empty()),
    }
    .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = if bytes.is_empty() {
        Json::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (status, headers, body)
}

/// Asserts status and `code` of a `/v1` error (with `message` and `error`).
#[track_caller]
pub(crate) fn refused(got: &(StatusCode, HeaderMap, Json), status: StatusCode, code: &str) {
    let (got_status, _, body) = got;
    assert_eq!(*got_status, status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(body["error"].is_string(), "{body}");
}

/// The webhook of `workflow`: enabled (unless `enabled` is false), with its URL's path.
pub(crate) async fn webhook(env: &Env, admin: &str, workflow: &str, enabled: bool) -> String {
    let action = if enabled { "enable" } else { "disable" };
    let got = send(
        &env.router,
        "POST",
        &format!("{BASE}/workflows/{workflow}/triggers/webhook/{action}"),
        Some(admin),
        None,
    )
    .await;
    assert_eq!(got.0, StatusCode::OK, "{}", got.2);
    path_of(&got.2)
}

/// The path of a trigger's `url`.
pub(crate) fn path_of(trigger: &Json) -> String {
    let url = trigger["url"]
        .as_str()
        .unwrap_or_else(|| panic!("{trigger}"));
    url.strip_prefix("http://canopy.test")
        .unwrap_or_else(|| panic!("{url}"))
        .to_owned()
}

/// Runs of `workflow` in the store, by state.
pub(crate) async fn runs(store: &Store, workflow: &str) -> Vec<(String, String, String)> {
    sqlx::query(
        "SELECT id, record_id, state FROM workflow_runs WHERE workflow_id = $1 ORDER BY created_at",
    )
    .bind(workflow)
    .fetch_all(store.pool())
    .await
    .unwrap()
    .iter()
    .map(|row| (row.get(0), row.get(1), row.get(2)))
    .collect()
}

async fn end_runs(store: &Store, workflow: &str) {
    sqlx::query("UPDATE workflow_runs SET state = 'succeeded' WHERE workflow_id = $1")
        .bind(workflow)
        .execute(store.pool())
        .await
        .unwrap();
}

/// Each status of the spec's table, and for each one a request also wrong in every later way:
/// the earlier status wins. 401 (no application token) → 400 (URL) → 401 (token) → 429 → 404 →
/// 400 (superseded) → 403 → 400 (body) → 409, then 202.
async fn every_webhook_status_in_its_check_order(backend: Backend) {
    let env = serve(backend, 1_000).await;
    let app = &env.router;
    let ann = token_for(&env.store, "ann@acme.io").await;
    let orders = add_workflow(&env.store, "refund", "orders", true).await;
    let countries = add_workflow(&env.store, "audit countries", "countries", true).await;
    let inactive = add_workflow(&env.store, "dormant", "orders", false).await;
    let hook = webhook(&env, &ann, &orders, true).await;
    let countries_hook = webhook(&env, &ann, &countries, true).await;
    let inactive_hook = webhook(&env, &ann, &inactive, true).await;
    let ann_token = app_token(&env.store, "ann@acme.io", &[Scope::WorkflowsTrigger]).await;
    let sam_token = app_token(&env.store, "sam@acme.io", &[Scope::All]).await;
    let notes_token = app_token(&env.store, "ann@acme.io", &[Scope::NotesRead]).await;
    let nat_token = app_token(&env.store, "nat@acme.io", &[Scope::All]).await;
    let good = r#"{"record_id": "1"}"#;
    let post = |path: String, token: Option<String>, body: &'static str| {
        let app = app.clone();
        async move { send(&app, "POST", &path, token.as_deref(), Some(body)).await }
    };
    let tampered = {
        let mut bytes = hook.clone().into_bytes();
        let last = bytes.len() - 3;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    };

    // 401 first: no application token at all (none, or a session token: the webhook takes
    // application tokens), whatever the URL and the body, as every `/v1` operation documents.
    let got = post(tampered.clone(), None, "not json").await;
    refused(&got, StatusCode::UNAUTHORIZED, "unauthorized");
    let got = post(tampered.clone(), Some(ann.clone()), good).await;
    refused(&got, StatusCode::UNAUTHORIZED, "unauthorized");
    // 400: the URL, with a token (checked after the URL, even when it is unknown) and a bad body.
    let got = post(tampered.clone(), Some("cnp_nope".into()), "not json").await;
    refused(&got, StatusCode::BAD_REQUEST, "invalid_webhook_url");
    let got = post(
        hook[..hook.len() - 4].to_owned(),
        Some(ann_token.clone()),
        good,
    )
    .await;
    refused(&got, StatusCode::BAD_REQUEST, "invalid_webhook_url");
    // 401: no token, a bad one, a session token on a good URL.
    let got = post(hook.clone(), None, "not json").await;
    refused(&got, StatusCode::UNAUTHORIZED, "unauthorized");
    let got = post(hook.clone(), Some("cnp_nope".into()), good).await;
    refused(&got, StatusCode::UNAUTHORIZED, "unauthorized");
    let got = post(hook.clone(), Some(ann.clone()), good).await;
    refused(&got, StatusCode::UNAUTHORIZED, "unauthorized");
    // 404: disabled, no active workflow — before the token's rights and the body.
    let got = post(inactive_hook.clone(), Some(notes_token.clone()), "not json").await;
    refused(&got, StatusCode::NOT_FOUND, "not_found");
    webhook(&env, &ann, &countries, false).await;
    let got = post(countries_hook.clone(), Some(nat_token.clone()), "{}").await;
    refused(&got, StatusCode::NOT_FOUND, "not_found");
    webhook(&env, &ann, &countries, true).await;
    // 400 superseded: before the token's rights and the body.
    let (status, _, regenerated) = send(
        app,
        "POST",
        &format!("{BASE}/workflows/{countries}/triggers/webhook/regenerate"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{regenerated}");
    let countries_new = path_of(&regenerated);
    assert_ne!(countries_new, countries_hook);
    let got = post(countries_hook.clone(), Some(nat_token.clone()), "{}").await;
    refused(&got, StatusCode::BAD_REQUEST, "webhook_url_superseded");
    // 403: the scope, a user in no team, a user who may not browse the collection — before
    // the body.
    let got = post(hook.clone(), Some(notes_token.clone()), "not json").await;
    refused(&got, StatusCode::FORBIDDEN, "forbidden");
    let got = post(hook.clone(), Some(nat_token.clone()), "not json").await;
    refused(&got, StatusCode::FORBIDDEN, "forbidden");
    let got = post(countries_new.clone(), Some(sam_token.clone()), "not json").await;
    refused(&got, StatusCode::FORBIDDEN, "forbidden");
    // 400: the body.
    for bad in [
        "not json",
        "[1]",
        "{}",
        r#"{"record_id": null}"#,
        r#"{"record_id": ""}"#,
        r#"{"record_id": {"a": 1}}"#,
        r#"{"recordId": "1"}"#,
    ] {
        let got = post(hook.clone(), Some(ann_token.clone()), bad).await;
        refused(&got, StatusCode::BAD_REQUEST, "invalid_parameter");
    }
    assert!(runs(&env.store, &orders).await.is_empty());
    // 202, then 409 on the same record with the ongoing run's id, 202 on another.
    let (status, headers, created) = post(hook.clone(), Some(ann_token.clone()), good).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    let run_id = created["runId"].as_str().unwrap().to_owned();
    uuid::Uuid::parse_str(&run_id).unwrap();
    assert_eq!(
        headers[header::LOCATION],
        format!("{BASE}/workflow-runs/{run_id}").as_str()
    );
    let got = post(
        hook.clone(),
        Some(ann_token.clone()),
        r#"{"record_id": 1, "extra": true}"#,
    )
    .await;
    assert_eq!(got.0, StatusCode::CONFLICT, "{}", got.2);
    assert_eq!(got.2["code"], "run_ongoing");
    assert_eq!(got.2["runId"], run_id.as_str());
    assert!(got.2["error"].is_string());
    // A packed composite id, unknown fields ignored; the record is not checked.
    let got = post(
        hook.clone(),
        Some(sam_token.clone()),
        r#"{"record_id": "7|2", "x": [1]}"#,
    )
    .await;
    assert_eq!(got.0, StatusCode::ACCEPTED, "{}", got.2);
    // A finished run lets a new one start.
    end_runs(&env.store, &orders).await;
    let got = post(hook.clone(), Some(ann_token.clone()), good).await;
    assert_eq!(got.0, StatusCode::ACCEPTED, "{}", got.2);
    assert_ne!(got.2["runId"], run_id.as_str());
    let stored = runs(&env.store, &orders).await;
    assert_eq!(stored.len(), 3, "{stored:?}");
    let records: Vec<&str> = stored.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(records, ["1", "7|2", "1"]);
}

/// Every webhook run leaves a `triggerWorkflow` entry from origin `webhook`, by the token's user,
/// on the record.
async fn a_webhook_run_is_in_the_activity_log(backend: Backend) {
    let env = serve(backend, 100).await;
    let ann = token_for(&env.store, "ann@acme.io").await;
    let workflow = add_workflow(&env.store, "refund", "orders", true).await;
    let hook = webhook(&env, &ann, &workflow, true).await;
    let token = app_token(&env.store, "sam@acme.io", &[Scope::WorkflowsTrigger]).await;
    let got = send(
        &env.router,
        "POST",
        &hook,
        Some(&token),
        Some(r#"{"record_id":"3"}"#),
    )
    .await;
    assert_eq!(got.0, StatusCode::ACCEPTED, "{}", got.2);
    // The logger writes in batches (within 200 ms): wait for it, bounded.
    let mut found = None;
    for _ in 0..100 {
        found = sqlx::query(
            "SELECT origin, user_email, collection_name, record_ids, token_id, label \
             FROM activity_logs WHERE action = 'triggerWorkflow'",
        )
        .fetch_optional(env.store.pool())
        .await
        .unwrap();
        if found.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let row = found.expect("a triggerWorkflow entry");
    assert_eq!(row.get::<String, _>(0), "webhook");
    assert_eq!(row.get::<String, _>(1), "sam@acme.io");
    assert_eq!(row.get::<Option<String>, _>(2).as_deref(), Some("orders"));
    assert!(
        row.get::<Option<String>, _>(3)
            .unwrap_or_default()
            .contains('3')
    );
    assert!(row.get::<Option<String>, _>(4).is_some());
    assert_eq!(row.get::<Option<String>, _>(5).as_deref(), Some("refund"));
}

/// 1,000 concurrent calls on one record: exactly one 202, 999 409 naming the run created.
async fn a_thousand_concurrent_calls_start_one_run(backend: Backend) {
    let env = serve(backend, 1_000_000).await;
    let ann = token_for(&env.store, "ann@acme.io").await;
    let workflow = add_workflow(&env.store, "refund", "orders", true).await;
    let hook = Arc::new(webhook(&env, &ann, &workflow, true).await);
    let token = Arc::new(app_token(&env.store, "ann@acme.io", &[Scope::WorkflowsTrigger]).await);
    let calls: Vec<_> = (0..1000)
        .map(|_| {
            let app = env.router.clone();
            let hook = Arc::clone(&hook);
            let token = Arc::clone(&token);
            tokio::spawn(async move {
                send(
                    &app,
                    "POST",
                    &hook,
                    Some(&token),
                    Some(r#"{"record_id":"2"}"#),
                )
                .await
            })
        })
        .collect();
    let mut created = Vec::new();
    let mut ongoing = Vec::new();
    for call in calls {
        let (status, _, body) = call.await.unwrap();
        match status {
            StatusCode::ACCEPTED => created.push(body["runId"].as_str().unwrap().to_owned()),
            StatusCode::CONFLICT => ongoing.push(body["runId"].clone()),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(created.len(), 1);
    assert_eq!(ongoing.len(), 999);
    assert!(
        ongoing
            .iter()
            .all(|id| *id == Json::String(created[0].clone()))
    );
    let stored = runs(&env.store, &workflow).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].0, created[0]);
    assert_eq!(stored[0].2, "queued");
}

/// A batch of 37 runs goes in multi-row inserts of 32, 4 and 1 rows: each record gets one run,
/// a run already ongoing and a duplicate in the same statement or in a later one are `Ongoing`
/// naming the run that holds the record, and the answers keep the batch's order.
async fn a_batch_of_runs_is_written_in_chunks_with_one_run_per_record(backend: Backend) {
    use canopy::workflows::{NewRun, Queued, TriggerKind};
    let env = serve(backend, 100).await;
    let workflow = add_workflow(&env.store, "refund", "orders", true).await;
    let version: String = sqlx::query("SELECT id FROM workflow_versions WHERE workflow_id = $1")
        .bind(&workflow)
        .fetch_one(env.store.pool())
        .await
        .unwrap()
        .get(0);
    let run = |record: &str| {
        NewRun::new(
            &workflow,
            &version,
            "orders",
            record,
            TriggerKind::Webhook,
            1,
        )
    };
    let Queued::Created(held) = env.store.queue_run(&run("0")).await.unwrap() else {
        panic!("the first run was not created");
    };
    // 0: already ongoing; 1..=34 new; then "2" again (in the chunk of 4) and "3" again (the
    // last chunk, of 1); and "5" twice inside the first chunk.
    let mut records: Vec<String> = (0..=34).map(|i| i.to_string()).collect();
    records[6] = "5".to_owned();
    records.push("2".to_owned());
    records.push("3".to_owned());
    assert_eq!(records.len(), 37);
    let runs: Vec<NewRun> = records.iter().map(|r| run(r.as_str())).collect();
    let mut tx = env.store.pool().begin().await.unwrap();
    let answers = env.store.queue_runs_in(&mut tx, &runs).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(answers.len(), 37);
    let stored = runs_by_record(&env.store, &workflow).await;
    for (i, (record, answer)) in records.iter().zip(&answers).enumerate() {
        let holder = &stored[record.as_str()];
        match answer {
            Queued::Created(id) => assert_eq!(id, holder, "{i}: {record}"),
            Queued::Ongoing(id) => {
                assert_eq!(id.as_deref(), Some(holder.as_str()), "{i}: {record}")
            }
        }
    }
    let created = answers
        .iter()
        .filter(|a| matches!(a, Queued::Created(_)))
        .count();
    // 34 distinct records besides "0", less the "6" replaced by a second "5".
    assert_eq!(created, 33, "{answers:?}");
    assert_eq!(stored.len(), 34);
    assert_eq!(answers[0], Queued::Ongoing(Some(held)));
    assert!(matches!(answers[2], Queued::Created(_)));
    assert_eq!(answers[35], Queued::Ongoing(Some(stored["2"].clone())));
    assert_eq!(answers[36], Queued::Ongoing(Some(stored["3"].clone())));
    assert_eq!(
        [&answers[5], &answers[6]]
            .iter()
            .filter(|a| matches!(a, Queued::Created(_)))
            .count(),
        1
    );
}

/// The ongoing run of each record of `workflow`.
async fn runs_by_record(
    store: &Store,
    workflow: &str,
) -> std::collections::HashMap<String, String> {
    runs(store, workflow)
        .await
        .into_iter()
        .map(|(id, record, state)| {
            assert_eq!(state, "queued");
            (record, id)
        })
        .collect()
}

/// Disabled: 404 with the same URL, which works again once enabled; regenerated: the old URL is
/// 400 and creates nothing, the new one works.
async fn disable_keeps_the_url_and_regenerate_supersedes_it(backend: Backend) {
    let env = serve(backend, 1_000).await;
    let app = &env.router;
    let ann = token_for(&env.store, "ann@acme.io").await;
    let workflow = add_workflow(&env.store, "refund", "orders", true).await;
    let token = app_token(&env.store, "ann@acme.io", &[Scope::All]).await;
    // Disabled by default: the URL exists (for admins) and answers 404.
    let (status, _, listed) = send(
        app,
        "GET",
        &format!("{BASE}/workflows/{workflow}/triggers"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["data"][0]["kind"], "manual");
    let first = &listed["data"][1];
    assert_eq!(first["kind"], "webhook");
    assert_eq!(first["enabled"], false);
    assert_eq!(first["urlVersion"], 1);
    let url = path_of(first);
    let body = Some(r#"{"record_id":"1"}"#);
    refused(
        &send(app, "POST", &url, Some(&token), body).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(webhook(&env, &ann, &workflow, true).await, url);
    assert_eq!(
        send(app, "POST", &url, Some(&token), body).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(webhook(&env, &ann, &workflow, false).await, url);
    refused(
        &send(app, "POST", &url, Some(&token), body).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(webhook(&env, &ann, &workflow, true).await, url);
    end_runs(&env.store, &workflow).await;
    // Regenerated: the old URL is superseded, the new one has the next version.
    let (status, _, regenerated) = send(
        app,
        "POST",
        &format!("{BASE}/workflows/{workflow}/triggers/webhook/regenerate"),
        Some(&ann),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{regenerated}");
    assert_eq!(regenerated["urlVersion"], 2);
    assert_eq!(regenerated["enabled"], true);
    let new = path_of(&regenerated);
    assert_ne!(new, url);
    let before = runs(&env.store, &workflow).await.len();
    let got = send(
        app,
        "POST",
        &url,
        Some(&token),
        Some(r#"{"record_id":"9"}"#),
    )
    .await;
    refused(&got, StatusCode::BAD_REQUEST, "webhook_url_superseded");
    assert_eq!(runs(&env.store, &workflow).await.len(), before);
    assert_eq!(
        send(app, "POST", &new, Some(&token), body).await.0,
        StatusCode::ACCEPTED
    );
    // The history of URL versions, the admin log of each change.
    let versions = sqlx::query(
        "SELECT url_version, superseded_at FROM workflow_trigger_url_versions \
         ORDER BY url_version",
    )
    .fetch_all(env.store.pool())
    .await
    .unwrap();
    let versions: Vec<(i64, bool)> = versions
        .iter()
        .map(|r| (r.get(0), r.get::<Option<i64>, _>(1).is_some()))
        .collect();
    assert_eq!(versions, [(1, true), (2, false)]);
    let logs = env.store.admin_logs(100).await.unwrap();
    let changes = logs.iter().filter(|l| l.resource == "workflow").count();
    // Enable, disable, enable, regenerate (creating the trigger on first read logs nothing).
    assert_eq!(changes, 4, "{logs:?}");
    assert!(
        logs.iter()
            .all(|l| !format!("{l:?}").contains(&new[new.len() - 10..]))
    );
}

/// Tampered and truncated URLs and bad bodies: 400, nothing created, nothing logged.
async fn bad_urls_and_bodies_create_nothing(backend: Backend) {
    let env = serve(backend, 1_000).await;
    let app = &env.router;
    let ann = token_for(&env.store, "ann@acme.io").await;
    let workflow = add_workflow(&env.store, "refund", "orders", true).await;
    let hook = webhook(&env, &ann, &workflow, true).await;
    let token = app_token(&env.store, "ann@acme.io", &[Scope::All]).await;
    let (prefix, segment) = hook.rsplit_once('/').unwrap();
    let parts: Vec<&str> = segment.split('.').collect();
    let mut bad_urls = vec![
        format!("{prefix}/{}", &segment[..segment.len() - 1]),
        format!("{prefix}/{}", parts[..3].join(".")),
        format!("{prefix}/{}.{}.{}.{}", parts[0], 2, parts[2], parts[3]),
        format!(
            "{prefix}/{}.{}.{}.{}",
            parts[0], parts[1], "other", parts[3]
        ),
        format!(
            "{prefix}/{}.{}.{}.{}",
            uuid::Uuid::new_v4(),
            parts[1],
            parts[2],
            parts[3]
        ),
        format!("{prefix}/{segment}.x"),
        format!("{prefix}/x"),
    ];
    let mut flipped = parts[3].as_bytes().to_vec();
    flipped[0] = if flipped[0] == b'A' { b'B' } else { b'A' };
    bad_urls.push(format!(
        "{prefix}/{}.{}.{}.{}",
        parts[0],
        parts[1],
        parts[2],
        String::from_utf8(flipped).unwrap()
    ));
    for url in &bad_urls {
        let got = send(app, "POST", url, Some(&token), Some(r#"{"record_id":"1"}"#)).await;
        refused(&got, StatusCode::BAD_REQUEST, "invalid_webhook_url");
    }
    for body in [
        "",
        "{",
        "null",
        "\"1\"",
        r#"{"record_id": true}"#,
        r#"{"record_id": [1]}"#,
    ] {
        let got = send(app, "POST", &hook, Some(&token), Some(body)).await;
        refused(&got, StatusCode::BAD_REQUEST, "invalid_parameter");
    }
    assert!(runs(&env.store, &workflow).await.is_empty());
}

/// Over its limit a webhook answers 429 with `Retry-After` (and `retry_after`); another webhook
/// keeps its own quota; a trigger's own limit replaces the default.
async fn each_webhook_has_its_own_rate_limit(backend: Backend) {
    let env = serve(backend, 3).await;
    let app = &env.router;
    let ann = token_for(&env.store, "ann@acme.io").await;
    let first = add_workflow(&env.store, "refund", "orders", true).await;
    let second = add_workflow(&env.store, "notify", "orders", true).await;
    let first_hook = webhook(&env, &ann, &first, true).await;
    let second_hook = webhook(&env, &ann, &second, true).await;
    let token = app_token(&env.store, "ann@acme.io", &[Scope::All]).await;
    for record in 1..=3 {
        let body = format!(r#"{{"record_id":"{record}"}}"#);
        let got = send(app, "POST", &first_hook, Some(&token), Some(&body)).await;
        assert_eq!(got.0, StatusCode::ACCEPTED, "{}", got.2);
    }
    let got = send(
        app,
        "POST",
        &first_hook,
        Some(&token),
        Some(r#"{"record_id":"4"}"#),
    )
    .await;
    refused(&got, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    let retry: u64 = got.1[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    assert_eq!(got.2["retry_after"], retry);
    // 429 comes before the body's 400 and the trigger's 404.
    let got = send(app, "POST", &first_hook, Some(&token), Some("nope")).await;
    refused(&got, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    // The other webhook is not starved.
    let got = send(
        app,
        "POST",
        &second_hook,
        Some(&token),
        Some(r#"{"record_id":"4"}"#),
    )
    .await;
    assert_eq!(got.0, StatusCode::ACCEPTED, "{}", got.2);
    assert_eq!(runs(&env.store, &first).await.len(), 3);
    // Its own limit: 5 a minute, counted from the change.
    let (status, _, changed) = send(
        app,
        "PATCH",
        &format!("{BASE}/workflows/{second}/triggers/webhook"),
        Some(&ann),
        Some(r#"{"rateLimitPerMinute": 5}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["rateLimitPerMinute"], 5);
    let mut accepted = 0;
    for record in 10..20 {
        let body = format!(r#"{{"record_id":"{record}"}}"#);
        if send(app, "POST", &second_hook, Some(&token), Some(&body))
            .await
            .0
            == StatusCode::ACCEPTED
        {
            accepted += 1;
        }
    }
    assert_eq!(accepted, 5);
    for bad in [
        r#"{"rateLimitPerMinute": 0}"#,
        r#"{"rateLimitPerMinute": "5"}"#,
        "{}",
        r#"{"x": 1}"#,
    ] {
        let got = send(
            app,
            "PATCH",
            &format!("{BASE}/workflows/{second}/triggers/webhook"),
            Some(&ann),
            Some(bad),
        )
        .await;
        refused(&got, StatusCode::BAD_REQUEST, "invalid_parameter");
    }
}

/// The manual start: a signed-in user who may browse the collection; the triggers API: anyone
/// who may browse reads it (the URL for admins only), admins change it.
async fn manual_start_and_the_triggers_api_check_their_callers(backend: Backend) {
    let env = serve(backend, 1_000).await;
    let app = &env.router;
    let ann = token_for(&env.store, "ann@acme.io").await;
    let sam = token_for(&env.store, "sam@acme.io").await;
    let nat = token_for(&env.store, "nat@acme.io").await;
    let orders = add_workflow(&env.store, "refund", "orders", true).await;
    let countries = add_workflow(&env.store, "audit", "countries", true).await;
    let start = |workflow: &str| format!("{BASE}/workflows/{workflow}/runs");
    // Sam may browse orders: 202, then 409 on the same record.
    let got = send(
        app,
        "POST",
        &start(&orders),
        Some(&sam),
        Some(r#"{"recordId":"5"}"#),
    )
    .await;
    assert_eq!(got.0, StatusCode::ACCEPTED, "{}", got.2);
    assert!(got.1.contains_key(header::LOCATION));
    let got = send(
        app,
        "POST",
        &start(&orders),
        Some(&ann),
        Some(r#"{"recordId":"5"}"#),
    )
    .await;
    assert_eq!(got.0, StatusCode::CONFLICT, "{}", got.2);
    // By name too.
    let got = send(
        app,
        "POST",
        &start("refund"),
        Some(&ann),
        Some(r#"{"recordId":6}"#),
    )
    .await;
    assert_eq!(got.0, StatusCode::ACCEPTED, "{}", got.2);
    // Refused: no browse right, no team, no credentials, a narrow token, a bad body, unknown.
    refused(
        &send(
            app,
            "POST",
            &start(&countries),
            Some(&sam),
            Some(r#"{"recordId":"1"}"#),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    refused(
        &send(
            app,
            "POST",
            &start(&orders),
            Some(&nat),
            Some(r#"{"recordId":"1"}"#),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    refused(
        &send(
            app,
            "POST",
            &start(&orders),
            None,
            Some(r#"{"recordId":"1"}"#),
        )
        .await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let notes = app_token(&env.store, "ann@acme.io", &[Scope::NotesRead]).await;
    refused(
        &send(
            app,
            "POST",
            &start(&orders),
            Some(&notes),
            Some(r#"{"recordId":"1"}"#),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    refused(
        &send(
            app,
            "POST",
            &start(&orders),
            Some(&ann),
            Some(r#"{"record":"1"}"#),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    refused(
        &send(
            app,
            "POST",
            &start("nope"),
            Some(&ann),
            Some(r#"{"recordId":"1"}"#),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    refused(
        &send(
            app,
            "POST",
            "/v1/project/acme/environment/staging/workflows/x/runs",
            Some(&ann),
            Some(r#"{"recordId":"1"}"#),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(runs(&env.store, &orders).await.len(), 2);
    assert!(runs(&env.store, &countries).await.is_empty());
    // The triggers: Sam reads them without the URL; Ann with it; Sam may change nothing.
    let triggers = format!("{BASE}/workflows/{orders}/triggers");
    let (status, _, listed) = send(app, "GET", &triggers, Some(&sam), None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert!(listed["data"][1].get("url").is_none(), "{listed}");
    let (_, _, listed) = send(app, "GET", &triggers, Some(&ann), None).await;
    assert!(
        listed["data"][1]["url"]
            .as_str()
            .unwrap()
            .starts_with("http://canopy.test/v1/workflow-hooks/")
    );
    refused(
        &send(
            app,
            "GET",
            &format!("{BASE}/workflows/{countries}/triggers"),
            Some(&sam),
            None,
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    for action in ["enable", "disable", "regenerate"] {
        let got = send(
            app,
            "POST",
            &format!("{triggers}/webhook/{action}"),
            Some(&sam),
            None,
        )
        .await;
        refused(&got, StatusCode::FORBIDDEN, "forbidden");
    }
    let got = send(
        app,
        "PATCH",
        &format!("{triggers}/webhook"),
        Some(&sam),
        Some(r#"{"rateLimitPerMinute":1}"#),
    )
    .await;
    refused(&got, StatusCode::FORBIDDEN, "forbidden");
    // An admin's token needs `all` to change triggers.
    let narrow = app_token(&env.store, "ann@acme.io", &[Scope::WorkflowsTrigger]).await;
    refused(
        &send(
            app,
            "POST",
            &format!("{triggers}/webhook/enable"),
            Some(&narrow),
            None,
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    let (_, _, listed) = send(app, "GET", &triggers, Some(&ann), None).await;
    assert_eq!(listed["data"][1]["enabled"], false);
}

on_store_backends!(
    every_webhook_status_in_its_check_order,
    a_webhook_run_is_in_the_activity_log,
    a_thousand_concurrent_calls_start_one_run,
    a_batch_of_runs_is_written_in_chunks_with_one_run_per_record,
    disable_keeps_the_url_and_regenerate_supersedes_it,
    bad_urls_and_bodies_create_nothing,
    each_webhook_has_its_own_rate_limit,
    manual_start_and_the_triggers_api_check_their_callers,
);
