//! The OpenAPI document of `/v1` against the routes it describes, on a served stack with its
//! store on SQLite and PostgreSQL: it is served (and its reference page), it is OpenAPI 3.1 with
//! every reference resolved and every operation named once, every documented operation is routed
//! (no answer is the router's own "no route" 404 or its 405), every method a documented path does
//! not document is a 405 naming exactly the documented ones, and no `/v1` module mounts a route
//! outside `routes!` (the one way a route could escape the document). Schemathesis then checks
//! the answers themselves against the real binary (`host/tests/openapi.rs`).

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy_e2e::Backend;
use serde_json::Value as Json;
use tower::ServiceExt as _;

use canopy::http::openapi::REFERENCE_CSP;

use crate::admin::{call, on_store_backends, serve, serve_with, token_for};

const METHODS: [&str; 5] = ["get", "put", "post", "patch", "delete"];

/// The served document.
async fn document(app: &axum::Router) -> Json {
    let (status, document) = call(app, "GET", "/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK, "{document}");
    document
}

/// Each documented operation: path template and method.
fn operations(document: &Json) -> Vec<(String, String)> {
    let paths = document["paths"].as_object().expect("paths");
    let mut out = Vec::new();
    for (path, item) in paths {
        for method in METHODS {
            if item.get(method).is_some() {
                out.push((path.clone(), method.to_owned()));
            }
        }
    }
    out
}

/// A concrete path: the served project and environment, id 1.
fn concrete(template: &str) -> String {
    template
        .replace("{project}", "acme")
        .replace("{environment}", "production")
        .replace("{id}", "1")
        .replace("{hook}", "not-a-hook")
}

async fn the_document_and_reference_page_are_served_without_a_token(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let document = document(&env.router).await;
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(document["info"]["title"], "Canopy public API");
    // The default prefix: the paths are what a client calls, no servers entry needed.
    assert!(document.get("servers").is_none(), "{}", document["servers"]);
    assert!(document["paths"]["/v1/project/{project}/users"]["get"].is_object());

    // The page is at `/v1/docs`, with or without the trailing slash a browser may add (the
    // router drops it): no redirect, the same page, the strict policy.
    let (status, headers, html) = get_raw(&env.router, "/v1/docs").await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&html));
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "{headers:?}"
    );
    assert_eq!(headers[header::CONTENT_SECURITY_POLICY], REFERENCE_CSP);
    for alias in ["/v1/docs/", "/v1/docs/index.html"] {
        let (status, headers, same) = get_raw(&env.router, alias).await;
        assert_eq!(status, StatusCode::OK, "{alias}");
        assert_eq!(headers[header::CONTENT_SECURITY_POLICY], REFERENCE_CSP);
        assert_eq!(same, html, "{alias}");
    }
    let html = String::from_utf8(html).unwrap();
    assert!(
        !REFERENCE_CSP.contains("unsafe-inline")
            && REFERENCE_CSP.starts_with("default-src 'self';")
    );
    // Every reference is an absolute path on this server under the page's own folder (so that it
    // resolves the same from `/v1/docs` and `/v1/docs/`): no scheme, no other host.
    let attributes = regex::Regex::new(r#"(?:src|href)="([^"]*)""#).unwrap();
    let referenced: Vec<String> = attributes
        .captures_iter(&html)
        .map(|reference| reference[1].to_owned())
        .collect();
    for reference in &referenced {
        assert!(
            reference.starts_with("/v1/docs/")
                && !reference.contains("//")
                && !reference.contains(':'),
            "the page references another place: {reference}"
        );
    }
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "{html}"
    );
    // No inline script: every <script> has a src and no body.
    let scripts = regex::Regex::new(r"(?s)<script([^>]*)>(.*?)</script>").unwrap();
    for script in scripts.captures_iter(&html) {
        assert!(script[1].contains("src="), "inline script: {}", &script[0]);
        assert!(script[2].trim().is_empty(), "inline script: {}", &script[0]);
    }
    assert!(
        referenced
            .iter()
            .any(|r| r == "/v1/docs/swagger-ui-bundle.js")
            && referenced
                .iter()
                .any(|r| r == "/v1/docs/swagger-initializer.js")
            && referenced.iter().any(|r| r == "/v1/docs/swagger-ui.css"),
        "{referenced:?}"
    );
    // Each of them is served, each with the strict policy.
    for file in &referenced {
        let (status, headers, body) = get_raw(&env.router, file).await;
        assert_eq!(status, StatusCode::OK, "{file}");
        assert_eq!(
            headers[header::CONTENT_SECURITY_POLICY],
            REFERENCE_CSP,
            "{file}"
        );
        assert!(!body.is_empty(), "{file}");
    }
    // The initializer loads the document from this server, by its path from the root.
    let (_, _, initializer) = get_raw(&env.router, "/v1/docs/swagger-initializer.js").await;
    let initializer = String::from_utf8(initializer).unwrap();
    assert!(
        initializer.contains("\"/v1/openapi.json\""),
        "{initializer}"
    );
    assert!(!initializer.contains("https://"), "{initializer}");
    let (status, _, _) = get_raw(&env.router, "/v1/docs/no-such-file.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A GET without credentials: status, headers and body bytes.
async fn get_raw(app: &axum::Router, uri: &str) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let request = Request::builder().uri(uri).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, headers, body.to_vec())
}

/// Every `$ref` in `value`, as JSON pointers into the document.
fn references(value: &Json, out: &mut Vec<String>) {
    match value {
        Json::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Json::String(target)) => out.push(target.clone()),
                    _ => references(value, out),
                }
            }
        }
        Json::Array(items) => items.iter().for_each(|v| references(v, out)),
        _ => {}
    }
}

async fn the_document_is_openapi_3_1_with_every_reference_resolved(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let document = document(&env.router).await;
    assert_eq!(document["openapi"], "3.1.0");
    for field in ["title", "version"] {
        assert!(document["info"][field].is_string(), "info.{field}");
    }
    let scheme = &document["components"]["securitySchemes"]["bearerAuth"];
    assert_eq!(scheme["type"], "http");
    assert_eq!(scheme["scheme"], "bearer");
    assert_eq!(
        document["security"],
        serde_json::json!([{"bearerAuth": []}])
    );

    assert!(!document.to_string().contains("x-canopy-raw"));
    let mut refs = Vec::new();
    references(&document, &mut refs);
    assert!(!refs.is_empty());
    for target in refs {
        let pointer = target
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("external reference {target}"));
        assert!(
            document.pointer(pointer).is_some(),
            "{target} does not resolve"
        );
    }

    let mut ids = BTreeSet::new();
    for (path, method) in operations(&document) {
        let operation = &document["paths"][&path][&method];
        let id = operation["operationId"].as_str().unwrap().to_owned();
        assert!(ids.insert(id.clone()), "operationId {id} is used twice");
        assert!(path.starts_with("/v1/"), "{path}");
        // Every placeholder of the path is a declared path parameter, and the reverse.
        let placeholders: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect();
        let parameters = operation["parameters"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut seen = BTreeSet::new();
        for parameter in parameters {
            let key = (parameter["in"].as_str(), parameter["name"].as_str());
            assert!(seen.insert(key), "{method} {path}: {key:?} twice");
        }
        let declared: BTreeSet<&str> = parameters
            .iter()
            .filter(|p| p["in"] == "path")
            .map(|p| {
                assert_eq!(p["required"], true, "{method} {path}: {p}");
                p["name"].as_str().unwrap()
            })
            .collect();
        assert_eq!(placeholders, declared, "{method} {path}");
        // Raw JSON schemas were put in place.
        assert!(
            !operation.to_string().contains("x-canopy-raw"),
            "{operation}"
        );
        // The errors every route can give, in the one shape; 429 says when to retry.
        let responses = &operation["responses"];
        for status in ["400", "401", "403", "404", "429", "500"] {
            assert!(
                responses[status].is_object(),
                "{method} {path}: no {status}"
            );
        }
        assert!(
            responses
                .as_object()
                .unwrap()
                .keys()
                .any(|s| s.starts_with('2')),
            "{method} {path}: no success answer"
        );
        if operation.get("requestBody").is_some() {
            assert!(responses["413"].is_object(), "{method} {path}: no 413");
        }
    }
    let errors = &document["components"]["responses"];
    assert!(errors["TooManyRequests"]["headers"]["Retry-After"].is_object());
    assert_eq!(
        errors["BadRequest"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Error"
    );
    let error = &document["components"]["schemas"]["Error"];
    assert_eq!(error["required"], serde_json::json!(["code", "message"]));
    for field in ["code", "message", "error", "retry_after"] {
        assert!(error["properties"][field].is_object(), "Error.{field}");
    }
}

/// Whether an answer is the `/v1` router's own: no route at this path, or not this method.
fn is_fallback(status: StatusCode, body: &Json) -> bool {
    status == StatusCode::METHOD_NOT_ALLOWED
        || (status == StatusCode::NOT_FOUND && body["message"] == "no route at this path")
}

async fn every_documented_operation_is_routed_and_no_other_method_is(backend: Backend) {
    // Every method on every path, with one token: far beyond the default 60 a minute.
    let env = serve_with(backend, None, |config| {
        let many = std::num::NonZeroU32::new(100_000).unwrap();
        config.rate_limit.per_minute = many;
        config.rate_limit.burst = many;
    })
    .await
    .unwrap();
    let app = &env.router;
    let admin = token_for(&env.store, "admin@canopy.local").await;
    let document = document(app).await;
    let operations = operations(&document);
    assert!(operations.len() >= 25, "{operations:?}");
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, method) in &operations {
        documented
            .entry(path.clone())
            .or_default()
            .insert(method.to_uppercase());
    }
    for (path, methods) in &documented {
        let uri = concrete(path);
        for method in METHODS.map(str::to_uppercase) {
            let (status, body) = call(app, &method, &uri, Some(&admin), None).await;
            if methods.contains(&method) {
                assert!(
                    !is_fallback(status, &body),
                    "{method} {path} is documented but not routed: {status} {body}"
                );
                assert_eq!(
                    body.get("code").is_some(),
                    !status.is_success(),
                    "{method} {uri}: {status} {body}"
                );
            } else {
                assert_eq!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {path} is routed but not documented: {body}"
                );
                assert_eq!(body["code"], "method_not_allowed", "{body}");
                let request = Request::builder()
                    .method(method.as_str())
                    .uri(&uri)
                    .header(header::AUTHORIZATION, format!("Bearer {admin}"))
                    .body(Body::empty())
                    .unwrap();
                let response = app.clone().oneshot(request).await.unwrap();
                let allow: BTreeSet<String> = response
                    .headers()
                    .get(header::ALLOW)
                    .unwrap_or_else(|| panic!("{method} {path}: a 405 without Allow"))
                    .to_str()
                    .unwrap()
                    .split(',')
                    .map(|m| m.trim().to_owned())
                    .filter(|m| m != "HEAD")
                    .collect();
                assert_eq!(&allow, methods, "Allow of {path}");
            }
        }
    }
    // A path beside the documented ones is the API's 404, in its shape.
    let (status, body) = call(app, "GET", "/v1/project/acme/nothing", Some(&admin), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "not_found");
}

on_store_backends!(
    the_document_and_reference_page_are_served_without_a_token,
    the_document_is_openapi_3_1_with_every_reference_resolved,
    every_documented_operation_is_routed_and_no_other_method_is,
);

/// The only way a `/v1` route can escape the document is to be mounted beside `routes!`: a
/// `.route(` (or `axum::routing`) in a module that builds the `/v1` router. `openapi.rs` mounts
/// the document and reference page themselves that way, on purpose.
#[test]
fn no_v1_module_mounts_a_route_outside_routes_macro() {
    let http = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src/http");
    let mut modules = Vec::new();
    let mut pending = vec![http];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.contains("OpenApiRouter<SharedState>") && !path.ends_with("openapi.rs") {
                    modules.push((path, text));
                }
            }
        }
    }
    let names: Vec<String> = modules
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "platform.rs",
        "users.rs",
        "groups.rs",
        "documents.rs",
        "logs.rs",
        "approvals.rs",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    for (path, text) in modules {
        let text = text.replace("OpenApiRouter::new()", "");
        for forbidden in [".route(", "axum::routing", "Router::new()"] {
            assert!(
                !text.contains(forbidden),
                "{} uses {forbidden}: mount /v1 routes with utoipa_axum::routes! so that they are \
                 documented (see http/openapi.rs)",
                path.display()
            );
        }
    }
}
