//! Set-up shared by the route tests over a customized stack: the router over a stack, requests
//! with a JSON body and the session token, reading lists (ids, attributes), the `filters`
//! parameter, and the schema file the agent would send. One place, so that every module builds
//! its routers and reads its answers the same way.

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::agent::schema_file::{Meta, NoActions, SchemaFile};
use canopy::app::Served;
use canopy::auth::SessionKey;
use canopy::config::{Config, HttpConfig, ServeArgs};
use canopy::customizer::{Batch, ComputeHandler, Customization, Kind, closures};
use canopy::datasource::{DataSource, PrimitiveType, Value};
use canopy::http::{AppState, router};
use serde_json::{Value as Json, json};

use crate::http::{get, send, token};

/// The secret the session token of `crate::http::token` is minted with.
pub(crate) const AUTH_SECRET: &str = "a-test-auth-secret";

/// The environment secret of the agents served from a configuration (`plugin_config`).
pub(crate) const ENV_SECRET: &str =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The configuration `canopy serve --plugins` would load for the database at `url`, the plugin
/// directory `plugins` and the schema file `schema_path`.
pub(crate) fn plugin_config(url: &str, plugins: &Path, schema_path: &Path) -> Config {
    let args = ServeArgs {
        database_url: Some(url.to_owned()),
        auth_secret: Some(AUTH_SECRET.to_owned()),
        env_secret: Some(ENV_SECRET.to_owned()),
        schema_path: Some(schema_path.to_owned()),
        plugin_dir: Some(plugins.to_owned()),
        // Canopy's own store beside the schema file, in the test's own folder.
        data_dir: schema_path.parent().map(|dir| dir.join(".canopy")),
        ..ServeArgs::default()
    };
    Config::load(args).unwrap().0
}

/// What `canopy serve --plugins` serves for `config`, and its router; `Err` is the start's error
/// with its causes.
pub(crate) async fn served(config: Config) -> Result<(Arc<Served>, Router), String> {
    let base: Arc<dyn DataSource> = Arc::new(canopy::app::connect(&config).await.unwrap());
    let served = Served::start(config, base)
        .await
        .map_err(|e| format!("{e:#}"))?;
    let served = Arc::new(served);
    let router = served.router();
    Ok((served, router))
}

/// The HTTP settings of the routers over a stack: a 1 MiB JSON limit, so that write bodies are
/// never refused for their size.
pub(crate) fn http_config() -> HttpConfig {
    HttpConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        json_limit: 1 << 20,
        ..HttpConfig::default()
    }
}

/// The application state over `stack`, for tests that change a setting before routing it.
pub(crate) fn state(stack: Arc<dyn DataSource>) -> AppState {
    AppState::new(stack, SessionKey::new(AUTH_SECRET), &http_config())
}

/// The `/forest` router over `stack`.
pub(crate) fn serve(stack: Arc<dyn DataSource>) -> Router {
    router(Arc::new(state(stack)))
}

/// A customization of `collection` declared by the plugin `test-plugin`.
pub(crate) fn on(collection: &str, kind: Kind) -> Customization {
    Customization::collection("test-plugin", collection, kind)
}

/// A value as text for the string computations of the tests: null empty, a string as it is,
/// anything else printed.
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Each row of `batch` as a string: the texts of its dependencies joined with " / ".
pub(crate) fn join_rows(batch: &Batch) -> Vec<Value> {
    (0..batch.len)
        .map(|i| {
            let parts: Vec<String> = batch.columns.iter().map(|c| text(&c.values[i])).collect();
            Value::String(parts.join(" / "))
        })
        .collect()
}

/// A String computed field of `collection`, declared by `plugin`, joining its dependencies with
/// " / " (nulls as empty strings).
pub(crate) fn joined(plugin: &str, collection: &str, name: &str, deps: &[&str]) -> Customization {
    string_field(
        plugin,
        collection,
        name,
        deps,
        closures::compute(|batch| Ok(join_rows(batch))),
    )
}

/// A String computed field of `collection`, declared by `plugin`, over `deps`.
pub(crate) fn string_field(
    plugin: &str,
    collection: &str,
    name: &str,
    deps: &[&str],
    handler: Arc<dyn ComputeHandler>,
) -> Customization {
    Customization::collection(
        plugin,
        collection,
        Kind::ComputedField {
            name: name.to_owned(),
            column_type: PrimitiveType::String.into(),
            dependencies: deps.iter().map(|d| (*d).to_owned()).collect(),
            default_value: None,
            enum_values: None,
            handler,
        },
    )
}

/// A request with a JSON body and the session token.
pub(crate) fn with_body(method: &str, uri: &str, body: &Json) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", token()))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// A POST with a JSON body and the session token.
pub(crate) fn post(uri: &str, body: &Json) -> Request<Body> {
    with_body("POST", uri, body)
}

/// The body of a GET that must answer 200.
pub(crate) async fn get_ok(app: &Router, uri: &str) -> Json {
    let (status, _, body) = send(app, get(uri)).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    body
}

/// The ids of a list body, in order.
pub(crate) fn ids(body: &Json) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// One attribute of each record of a list body, in order.
pub(crate) fn attribute(body: &Json, field: &str) -> Vec<Json> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| r["attributes"][field].clone())
        .collect()
}

/// A condition tree for the `filters` query parameter, percent-encoded.
pub(crate) fn filters(tree: &Json) -> String {
    encode(&tree.to_string())
}

/// Percent-encodes a query-string value (everything but unreserved characters).
pub(crate) fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The collections of the schema file the agent would send for this stack.
pub(crate) fn schema_file(stack: &Arc<dyn DataSource>) -> Json {
    let file = SchemaFile::build(stack.schema(), &NoActions, Meta::default()).unwrap();
    json!({ "collections": file.collections })
}

/// A collection of a schema file.
pub(crate) fn schema_collection<'a>(file: &'a Json, collection: &str) -> &'a Json {
    file["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == collection)
        .unwrap_or_else(|| panic!("no collection {collection} in {file}"))
}

/// A field of a collection of a schema file.
pub(crate) fn schema_field<'a>(file: &'a Json, collection: &str, field: &str) -> &'a Json {
    schema_collection(file, collection)["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == field)
        .unwrap_or_else(|| panic!("no field {collection}.{field} in {file}"))
}

/// Permissions that enforce nothing: the plugins' reads here have no caller scope to apply.
pub(crate) fn allow_all() -> std::sync::Arc<canopy::auth::Permissions> {
    std::sync::Arc::new(canopy::auth::Permissions::allow_all())
}
