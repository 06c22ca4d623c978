//! What the agent takes from the request's context, through `canopy::http::router` and
//! `canopy::app` on the shop fixture of `list`: `currentUser.*` chart variables from the session
//! token, `?timezone=` names in any case, the per-request log line as JSON, and the schema file's
//! `meta.liana_features` from the `experimental` options.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::auth::{PermissionLevel, SessionClaims, SessionKey};
use canopy::config::{Config, LogFormat, ServeArgs};
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::http::{app, envelope, get, send};

/// The secret `crate::http::app` verifies tokens with.
const SECRET: &str = "a-test-auth-secret";

/// A token for an editor whose role id is 1 and team id 2 (claims the Canopy platform will put
/// in its tokens; the agent's test client already puts `roleId`).
fn token_with_ids() -> String {
    let claims = SessionClaims {
        id: 7,
        email: "eve@x.io".to_owned(),
        first_name: "Eve".to_owned(),
        last_name: "Editor".to_owned(),
        team: "Operations".to_owned(),
        team_id: Some(2),
        role: "Editor".to_owned(),
        role_id: Some(1),
        permission_level: PermissionLevel::Editor,
        rendering_id: 1,
        tags: Default::default(),
        iat: 0,
        exp: 0,
    };
    SessionKey::new(SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap()
}

fn post(uri: &str, token: &str, body: &Json) -> Request<Body> {
    Request::post(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

async fn current_user_variables_in_charts(backend: Backend) {
    let (_db, app) = app(backend).await;
    let token = token_with_ids();
    // Orders 1 and 2: the role id and the team id, substituted in the chart's filter.
    let by_ids = json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count",
        "filter": {"aggregator": "or", "conditions": [
            {"field": "id", "operator": "equal", "value": "{{currentUser.roleId}}"},
            {"field": "id", "operator": "equal", "value": "{{currentUser.team.id}}"}]}});
    let (status, _, body) = send(
        &app,
        post("/forest/stats/orders?timezone=UTC", &token, &by_ids),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["value"],
        json!({"countCurrent": 2}),
        "{body}"
    );

    // The level and both ids as bound values of a native query.
    let query = json!({"type": "Value", "connectionName": "main",
        "query": "SELECT COUNT(*) AS value FROM orders WHERE {{currentUser.permissionLevel}} = 'editor' \
                  AND id IN ({{currentUser.roleId}}, {{currentUser.team.id}})"});
    let (status, _, body) = send(
        &app,
        post(
            "/forest/_internal/native_query?timezone=UTC",
            &token,
            &query,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"]["attributes"]["value"],
        json!({"countCurrent": 2}),
        "{body}"
    );

    // A token without them (the Node agent's own tokens): the variable is unknown.
    let plain = crate::http::token();
    let (status, _, body) = send(
        &app,
        post("/forest/stats/orders?timezone=UTC", &plain, &by_ids),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body,
        envelope(
            "ValidationError",
            "Unknown context variable \"{{currentUser.roleId}}\"",
            400
        )
    );
}

async fn timezone_names_in_any_case(backend: Backend) {
    let (_db, app) = app(backend).await;
    let (status, _, lower) = send(&app, get("/forest/orders/count?timezone=europe%2Fparis")).await;
    assert_eq!(status, StatusCode::OK, "{lower}");
    let (_, _, canonical) = send(&app, get("/forest/orders/count?timezone=Europe%2FParis")).await;
    assert_eq!(lower, canonical);
    let (status, _, _) = send(&app, get("/forest/orders/count?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = send(&app, get("/forest/orders/count?timezone=utc")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = send(&app, get("/forest/orders/count?timezone=europe%2Fpariss")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        envelope(
            "ValidationError",
            "Invalid timezone: \"europe/pariss\"",
            400
        )
    );
}

on_all_backends!(current_user_variables_in_charts, timezone_names_in_any_case);

/// Keeps every byte written, for reading the log lines back.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_request_log_line_is_a_json_object_with_its_fields() {
    let (_db, app) = app(Backend::Sqlite).await;
    let capture = Capture::default();
    let writer = {
        let capture = capture.clone();
        move || capture.clone()
    };
    let subscriber = canopy::logging::subscriber("info", LogFormat::Json, writer, false).unwrap();
    // The router runs on this thread inside `oneshot`, so a thread default sees its events.
    let _default = tracing::subscriber::set_default(subscriber);
    let (status, headers, _) = send(&app, get("/forest/orders/count?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Json> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("every line is one JSON object"))
        .filter(|line: &Json| line["target"] == "canopy::http")
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    let line = &lines[0];
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["message"], "request");
    assert_eq!(line["method"], "GET");
    assert_eq!(line["path"], "/forest/orders/count");
    assert_eq!(line["route"], "forest");
    // The fixture's session token is user 1's.
    assert_eq!(line["user"], "1");
    assert_eq!(line["status"], 200);
    assert!(
        line["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
        "{line}"
    );
    let id = headers["x-forest-correlation-id"].to_str().unwrap();
    assert_eq!(line["correlation_id"], id);
}

/// `canopy serve` settings over the fixture database, writing the schema file to `path`.
fn serve_args(url: &str, path: &std::path::Path) -> ServeArgs {
    ServeArgs {
        database_url: Some(url.to_owned()),
        auth_secret: Some(SECRET.to_owned()),
        env_secret: Some("0".repeat(64)),
        schema_path: Some(path.to_owned()),
        ..ServeArgs::default()
    }
}

fn meta_of(path: &std::path::Path) -> Json {
    let file: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["meta"].clone()
}

#[tokio::test]
async fn the_schema_file_meta_lists_the_experimental_features() {
    let (db, _datasource) = crate::list::shop(Backend::Sqlite).await;
    let dir = std::env::temp_dir().join(format!("canopy-context-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(".forestadmin-schema.json");

    let (config, _) = Config::load(serve_args(&db.url, &path)).unwrap();
    canopy::app::schema(&config).await.unwrap();
    assert_eq!(meta_of(&path)["liana_features"], Json::Null);

    let args = ServeArgs {
        experimental_webhook_custom_actions: Some(true),
        experimental_update_record_custom_actions: Some(true),
        ..serve_args(&db.url, &path)
    };
    let (config, _) = Config::load(args).unwrap();
    canopy::app::schema(&config).await.unwrap();
    assert_eq!(
        meta_of(&path)["liana_features"],
        json!({"webhook-custom-actions": "1.0.0", "update-record-actions": "1.0.0"})
    );

    // In production the file is read, not written, unless webhook actions are on.
    std::fs::remove_file(&path).unwrap();
    let listener = || async { tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap() };
    let production = ServeArgs {
        production: Some(true),
        experimental_update_record_custom_actions: Some(true),
        ..serve_args(&db.url, &path)
    };
    let (config, _) = Config::load(production).unwrap();
    let error = canopy::app::run(config, listener().await, std::future::ready(()))
        .await
        .unwrap_err();
    assert!(
        format!("{error:#}").contains("Providing a schema is mandatory in production"),
        "{error:#}"
    );
    assert!(!path.exists());
    let production = ServeArgs {
        production: Some(true),
        experimental_webhook_custom_actions: Some(true),
        ..serve_args(&db.url, &path)
    };
    let (config, _) = Config::load(production).unwrap();
    canopy::app::run(config, listener().await, std::future::ready(()))
        .await
        .unwrap();
    assert_eq!(
        meta_of(&path)["liana_features"],
        json!({"webhook-custom-actions": "1.0.0"})
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
