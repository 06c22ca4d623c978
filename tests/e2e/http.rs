//! The `/forest` HTTP API through `canopy::http::router`, driven in-process with
//! `tower::ServiceExt::oneshot`: healthcheck, CORS, the 401 and 400 envelopes, and the
//! collection routes on the shop fixture of `list`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::auth::{SessionClaims, SessionKey};
use canopy::config::HttpConfig;
use canopy::http::{AppState, router};
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};
use tower::ServiceExt as _;

use crate::list::shop;

const SECRET: &str = "a-test-auth-secret";

fn http_config() -> HttpConfig {
    HttpConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        json_limit: 1024,
        // The page these tests send requests from.
        cors_allowed_origins: vec!["https://app.example.com".to_owned()],
        ..HttpConfig::default()
    }
}

/// The router over the shop fixture; keeps the test database alive with it.
pub(crate) async fn app(backend: Backend) -> (canopy_e2e::TestDb, Router) {
    let (db, datasource) = shop(backend).await;
    let state = AppState::new(
        Arc::new(datasource),
        SessionKey::new(SECRET),
        &http_config(),
    );
    (db, router(Arc::new(state)))
}

pub(crate) fn token() -> String {
    let claims = SessionClaims {
        id: 1,
        email: "ann@x.io".to_owned(),
        first_name: "Ann".to_owned(),
        last_name: "Admin".to_owned(),
        team: "Operations".to_owned(),
        team_id: None,
        role: "Admin".to_owned(),
        role_id: None,
        permission_level: canopy::auth::PermissionLevel::Admin,
        rendering_id: 1,
        tags: Default::default(),
        iat: 0,
        exp: 0,
    };
    SessionKey::new(SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap()
}

/// A GET with the session token.
pub(crate) fn get(uri: &str) -> Request<Body> {
    Request::get(uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", token()))
        .body(Body::empty())
        .unwrap()
}

/// A DELETE without a body, with the session token.
pub(crate) fn delete(uri: &str) -> Request<Body> {
    Request::delete(uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", token()))
        .body(Body::empty())
        .unwrap()
}

/// Status, headers and body (JSON when it parses, else a string).
pub(crate) async fn send(
    app: &Router,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Json) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, headers, body)
}

pub(crate) fn envelope(name: &str, detail: &str, status: u16) -> Json {
    json!({ "errors": [{ "name": name, "detail": detail, "status": status }] })
}

#[tokio::test]
async fn healthcheck_needs_no_token() {
    let (_db, app) = app(Backend::Sqlite).await;
    let request = Request::get("/forest").body(Body::empty()).unwrap();
    let (status, headers, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({ "error": null, "message": "Agent is running" })
    );
    assert!(headers.get("x-forest-correlation-id").is_none());
}

#[tokio::test]
async fn preflight_is_answered_on_every_path_without_a_token() {
    let (_db, app) = app(Backend::Sqlite).await;
    for path in ["/forest/orders", "/forest/nowhere/at/all"] {
        let request = Request::options(path)
            .header(header::ORIGIN, "https://app.example.com")
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "GET")
            .header(
                header::ACCESS_CONTROL_REQUEST_HEADERS,
                "authorization,forest-projection",
            )
            .header("access-control-request-private-network", "true")
            .body(Body::empty())
            .unwrap();
        let (status, headers, _) = send(&app, request).await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let h = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
        assert_eq!(h("access-control-allow-origin"), "https://app.example.com");
        assert_eq!(h("access-control-allow-credentials"), "true");
        assert_eq!(h("access-control-max-age"), "86400");
        assert_eq!(
            h("access-control-allow-headers"),
            "authorization,forest-projection"
        );
        assert_eq!(h("access-control-allow-private-network"), "true");
    }
    // A plain request from a page exposes the correlation id.
    let mut request = get("/forest/orders/count?timezone=UTC");
    request
        .headers_mut()
        .insert(header::ORIGIN, "https://app.example.com".parse().unwrap());
    let (status, headers, _) = send(&app, request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["access-control-expose-headers"],
        "x-forest-correlation-id"
    );
    let id = headers["x-forest-correlation-id"].to_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 4);
}

/// Credentials (the session cookie) only for the origins of `corsAllowedOrigins`; any origin
/// with `*`, as the Node agent answers every origin.
#[tokio::test]
async fn cors_credentials_only_for_the_allowed_origins() {
    let (_db, datasource) = shop(Backend::Sqlite).await;
    let datasource: Arc<dyn canopy::datasource::DataSource> = Arc::new(datasource);
    let app_with = |origins: &[&str]| {
        let http = HttpConfig {
            cors_allowed_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            ..http_config()
        };
        router(Arc::new(AppState::new(
            Arc::clone(&datasource),
            SessionKey::new(SECRET),
            &http,
        )))
    };
    let preflight = |origin: &str| {
        Request::options("/forest/orders")
            .header(header::ORIGIN, origin)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "GET")
            .body(Body::empty())
            .unwrap()
    };
    let from = |origin: &str| {
        let mut request = get("/forest/orders/count?timezone=UTC");
        request
            .headers_mut()
            .insert(header::ORIGIN, origin.parse().unwrap());
        request
    };
    let credentials = |headers: &axum::http::HeaderMap| {
        headers
            .get("access-control-allow-credentials")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let default = app_with(&["https://app.forestadmin.com"]);
    for (origin, allowed) in [
        ("https://app.forestadmin.com", true),
        ("https://evil.example", false),
        ("https://app.forestadmin.com.evil.example", false),
    ] {
        for request in [preflight(origin), from(origin)] {
            let (status, headers, _) = send(&default, request).await;
            assert!(status.is_success(), "{origin}: {status}");
            assert_eq!(headers["access-control-allow-origin"], origin);
            assert_eq!(
                credentials(&headers).as_deref(),
                allowed.then_some("true"),
                "{origin}"
            );
        }
    }
    let any = app_with(&["*"]);
    let (_, headers, _) = send(&any, from("https://evil.example")).await;
    assert_eq!(credentials(&headers).as_deref(), Some("true"));
}

#[tokio::test]
async fn authentication_failures_are_the_agents_401s() {
    let (_db, app) = app(Backend::Sqlite).await;
    let unauthorized = envelope("UnauthorizedError", "Authentication Error", 401);
    let none = Request::get("/forest/orders?timezone=UTC")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, none).await.2, unauthorized);
    let forged = Request::get("/forest/orders?timezone=UTC")
        .header(header::AUTHORIZATION, "Bearer not.a.jwt")
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = send(&app, forged).await;
    assert_eq!((status, body), (StatusCode::UNAUTHORIZED, unauthorized));
    assert!(headers.get("x-forest-correlation-id").is_none());
    let malformed = Request::get("/forest/orders?timezone=UTC")
        .header(header::AUTHORIZATION, "Token abc")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        send(&app, malformed).await.2,
        envelope(
            "UnauthorizedError",
            r#"Bad Authorization header format. Format is "Authorization: Bearer <token>""#,
            401
        )
    );
    // The cookie is read before the header.
    let cookie = Request::get("/forest/orders/count?timezone=UTC")
        .header(header::COOKIE, format!("forest_session_token={}", token()))
        .header(header::AUTHORIZATION, "garbage")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, cookie).await.0, StatusCode::OK);
}

#[tokio::test]
async fn timezone_is_mandatory() {
    let (_db, app) = app(Backend::Sqlite).await;
    assert_eq!(
        send(&app, get("/forest/orders")).await.2,
        envelope("ValidationError", "Missing timezone", 400)
    );
    let (status, _, body) = send(&app, get("/forest/orders?timezone=Mars/Olympus")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        envelope(
            "ValidationError",
            r#"Invalid timezone: "Mars/Olympus""#,
            400
        )
    );
}

#[tokio::test]
async fn unknown_paths_answer_as_koa_and_bad_filters_in_the_envelope() {
    let (_db, app) = app(Backend::Sqlite).await;
    let (status, headers, body) = send(&app, get("/forest/unknown?timezone=UTC")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!("Not Found"));
    assert_eq!(headers[header::CONTENT_TYPE], "text/plain; charset=utf-8");
    let (status, _, body) = send(&app, get("/forest/orders?timezone=UTC&filters=%7Bnope")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errors"][0]["name"], "ValidationError");
    assert!(
        body["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("Invalid filters (")
    );
    let (status, _, body) = send(&app, get("/forest/orders?timezone=UTC&sort=nope")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body, envelope("ValidationError", "Invalid sort: nope", 400));
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let (_db, app) = app(Backend::Sqlite).await;
    let request = Request::delete("/forest/orders?timezone=UTC")
        .header(header::AUTHORIZATION, format!("Bearer {}", token()))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(format!("{{\"pad\":\"{}\"}}", "x".repeat(2048))))
        .unwrap();
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // koa's own answer: its body parser runs before the agent's error handler.
    assert_eq!(body, json!("request entity too large"));
}

async fn list_count_and_get(backend: Backend) {
    let (_db, app) = app(backend).await;
    let (status, _, body) = send(
        &app,
        get("/forest/orders?timezone=UTC&fields[orders]=id,status,customer&fields[customer]=name&sort=-id&page[size]=2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["type"], "orders");
    assert_eq!(data[0]["id"], "5");
    assert_eq!(data[0]["attributes"]["status"], "new");
    assert_eq!(body["jsonapi"], json!({ "version": "1.0" }));
    assert!(
        body["included"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["attributes"]["name"] == "Carl")
    );

    let count = send(&app, get("/forest/orders/count?timezone=UTC")).await;
    assert_eq!((count.0, count.2), (StatusCode::OK, json!({ "count": 5 })));
    let filters = r#"{"field":"status","operator":"equal","value":"paid"}"#;
    let filtered = send(
        &app,
        get(&format!(
            "/forest/orders/count?timezone=UTC&filters={}",
            filters
                .replace('"', "%22")
                .replace('{', "%7B")
                .replace('}', "%7D")
        )),
    )
    .await;
    assert_eq!(filtered.2, json!({ "count": 2 }));

    let (status, _, one) = send(&app, get("/forest/orders/3?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["data"]["id"], "3");
    assert_eq!(one["data"]["attributes"]["status"], "paid");
    let composite = send(&app, get("/forest/order_lines/1%7C2?timezone=UTC")).await;
    assert_eq!(composite.0, StatusCode::OK, "{}", composite.2);
    assert_eq!(composite.2["data"]["id"], "1|2");
    assert_eq!(
        send(&app, get("/forest/orders/999?timezone=UTC")).await.2,
        envelope("NotFoundError", "Record does not exists", 404)
    );
}

async fn csv_export_and_deletes(backend: Backend) {
    let (_db, app) = app(backend).await;
    let (status, headers, body) = send(
        &app,
        get("/forest/countries.csv?timezone=UTC&fields[countries]=id,name&header=id,name&filename=countries"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!("id,name\n1,France\n2,Japan\n"));
    assert_eq!(
        headers[header::CONTENT_DISPOSITION],
        r#"attachment; filename="attachment; filename=countries""#
    );
    // Whatever the file name: koa keeps the type the agent sets.
    assert_eq!(headers[header::CONTENT_TYPE], "text/csv; charset=utf-8");

    let one = delete("/forest/order_lines/1%7C2?timezone=UTC");
    assert_eq!(send(&app, one).await.0, StatusCode::NO_CONTENT);
    let bulk = Request::delete("/forest/order_lines?timezone=UTC")
        .header(header::AUTHORIZATION, format!("Bearer {}", token()))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"data":{"attributes":{"ids":["1|1"],"all_records":false}}}).to_string(),
        ))
        .unwrap();
    assert_eq!(send(&app, bulk).await.0, StatusCode::NO_CONTENT);
    assert_eq!(
        send(&app, get("/forest/order_lines/count?timezone=UTC"))
            .await
            .2,
        json!({ "count": 1 })
    );
}

/// A cross-site form can post to this host with the browser's session cookie (`SameSite=Lax`
/// does not stop another port or subdomain of the same site), but only as a form, `text/plain`
/// or no body: a POST signed in by the cookie must be JSON, and a refused one changes nothing.
#[tokio::test]
async fn cookie_signed_posts_that_a_cross_site_form_could_send_are_refused() {
    let (_db, app) = app(Backend::Sqlite).await;
    let body = json!({"data":{"type":"countries","attributes":{"name":"Spain"}}}).to_string();
    let post = |content_type: Option<&str>, cookie: bool| {
        let mut request = Request::post("/forest/countries?timezone=UTC");
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        request = if cookie {
            request.header(header::COOKIE, format!("forest_session_token={}", token()))
        } else {
            request.header(header::AUTHORIZATION, format!("Bearer {}", token()))
        };
        request.body(Body::from(body.clone())).unwrap()
    };
    let refused = envelope(
        "ForbiddenError",
        "A request signed in by the session cookie must send its body as JSON \
         (Content-Type: application/json)",
        403,
    );
    for content_type in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let (status, _, answer) = send(&app, post(content_type, true)).await;
        assert_eq!(
            (status, answer),
            (StatusCode::FORBIDDEN, refused.clone()),
            "{content_type:?}"
        );
    }
    let count = || async {
        send(&app, get("/forest/countries/count?timezone=UTC"))
            .await
            .2
    };
    assert_eq!(count().await, json!({ "count": 2 }), "a refused post wrote");
    // JSON with the cookie (a same-origin script), and any body with the header, are served.
    assert_eq!(
        send(&app, post(Some("application/json; charset=utf-8"), true))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        send(&app, post(Some("text/plain"), false)).await.0,
        StatusCode::OK
    );
    assert_eq!(count().await, json!({ "count": 4 }));
}

on_all_backends!(list_count_and_get, csv_export_and_deletes);
