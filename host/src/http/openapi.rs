//! The OpenAPI 3.1 document of the public API `/v1`, generated from the handlers that serve it,
//! served at `/{prefix}/v1/openapi.json`, with a reference page (Swagger UI, served from the
//! binary under a strict Content-Security-Policy) at `/{prefix}/v1/docs`.
//!
//! # How a `/v1` module registers its routes
//!
//! The document cannot drift from the routes because one line does both: a module exposes
//! `pub fn routes() -> OpenApiRouter<SharedState>` built with `utoipa_axum::routes!`, which
//! mounts each handler at the path and methods of its `#[utoipa::path]` and adds the same
//! operation to the document. [`router`] merges every module's `routes()` once.
//!
//! ```ignore
//! /// `GET /v1/project/{project}/environment/{environment}/notes`: …
//! #[utoipa::path(
//!     get,
//!     path = "/project/{project}/environment/{environment}/notes", // below `/v1`
//!     tag = "notes",
//!     params(
//!         ("project" = String, Path, description = "The project's name (case sensitive)"),
//!         ("environment" = String, Path, description = "The environment's name (case sensitive)"),
//!         NotesQuery,                           // the query: a struct deriving IntoParams
//!     ),
//!     responses((status = 200, description = "The newest notes", body = NoteList)),
//! )]
//! async fn list(admin: Admin, …) -> Result<Response> { … }
//!
//! pub fn routes() -> OpenApiRouter<SharedState> {
//!     OpenApiRouter::new().routes(routes!(list, create)) // same path, one `routes!` per path
//! }
//! // and in `router` below: `.merge(notes::routes())`
//! ```
//!
//! - Path parameters are declared in the tuple form above, by name: utoipa (axum_extras) also
//!   reads them from the handler's `Path` extractor and merges the two by name (an `IntoParams`
//!   struct for the path would list them twice). Give ids their type and bounds
//!   (`("id" = i64, Path, minimum = 1, …)`), so that generated clients send what is accepted.
//! - Paths are written below `/v1` (`/project/{project}/…`), with axum's `{name}` captures; the
//!   document names them `/v1/…` and says the prefix in `servers` (so a client calls exactly
//!   what it reads), the router nests them under `/{prefix}/v1`.
//! - Declare only the answers of the operation itself (its 2xx, and 409/413/422 when it has
//!   them); [`complete`] adds the errors every `/v1` route can give (400, 401, 403, 404, 429 with
//!   `Retry-After`, 500, and 413 when there is a body), all in the one shape [`ErrorBody`], and
//!   the `bearerAuth` requirement is document-wide.
//! - Response and body schemas are `#[derive(utoipa::ToSchema)]` types named after what the
//!   client sees; register nothing by hand (`routes!` collects the schemas an operation names).
//! - `tests/e2e/openapi.rs` fails when a documented operation is not routed, when a `/v1` route
//!   is not documented, or when the document is not valid OpenAPI 3.1; schemathesis
//!   (`host/tests/openapi.rs`) then checks every documented answer against the real server.

use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use utoipa::ToSchema;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi, Ref, RefOr, Server};
use utoipa_axum::router::OpenApiRouter;

use super::{SharedState, approvals, platform, workflows};

/// Where the document is served, below `/{prefix}/v1`.
pub const DOCUMENT_PATH: &str = "/openapi.json";
/// Where the reference page is served, below `/{prefix}/v1`.
pub const REFERENCE_PATH: &str = "/docs";

/// The root of the document: what every operation shares.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Canopy public API",
        description = "The public HTTP API of Canopy: the project's users, teams, roles and \
            permission documents, admin logs, activity logs, notes on records, approval \
            requests, application tokens and workflows.\n\n\
            Authenticate with `Authorization: Bearer <token>`: an application token (`cnp_…`) \
            or a session token of a signed-in user. Every error answers `{code, message, error}`; \
            a rate-limited call answers 429 with `Retry-After` (seconds) and `retry_after`."
    ),
    modifiers(&BearerAuth),
    security(("bearerAuth" = [])),
    components(schemas(ErrorBody)),
    tags(
        (name = "users", description = "The project's users"),
        (name = "teams", description = "The project's teams"),
        (name = "roles", description = "The project's roles"),
        (name = "permissions", description = "An environment's permission documents"),
        (name = "admin-logs", description = "What the project's admins changed"),
        (name = "approval-requests", description = "Actions waiting for an approver"),
        (name = "activity-logs", description = "What users did, operation by operation"),
        (name = "notes", description = "Notes on records, each with a thread of messages"),
        (name = "tokens", description = "The caller's application tokens"),
        (name = "workflows", description = "Workflow definitions and their versions"),
        (name = "workflow-runs", description = "Runs of workflows on records, and their control"),
        (name = "workflow-triggers", description = "What starts workflow runs: the manual \
            start, the signed webhook and its settings"),
    )
)]
struct Root;

/// `bearerAuth`: the one scheme of the API.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearerAuth",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An application token (`cnp_…`, made with `canopy tokens create` or the \
                         tokens API) or the session token of a signed-in user.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The body of every `/v1` error.
#[derive(ToSchema)]
#[schema(as = Error)]
#[allow(
    dead_code,
    reason = "documentation only: http::platform::Error writes these bodies"
)]
pub struct ErrorBody {
    /// A stable, machine-readable reason (`invalid_parameter`, `unauthorized`, `forbidden`,
    /// `not_found`, `conflict`, `too_many_requests`, …).
    code: String,
    /// What went wrong, for a human; a bad parameter is named.
    message: String,
    /// The HTTP status text (`Bad Request`, `Unauthorized`, …), as the platform's own
    /// authentication and rate-limit errors carry it.
    error: Option<String>,
    /// Seconds to wait before retrying (429 only), as `Retry-After` says.
    retry_after: Option<u64>,
    /// Details some errors carry (e.g. `roleIdsAllowedToApprove`).
    data: Option<serde_json::Value>,
}

/// Every `/v1` route, documented; the axum router (paths below `/v1`, state not yet applied)
/// and the document (paths from `/v1`, no servers yet).
pub fn routes() -> (Router<SharedState>, OpenApi) {
    let (router, mut document) = OpenApiRouter::with_openapi(<Root as utoipa::OpenApi>::openapi())
        .merge(platform::routes())
        .merge(approvals::routes())
        .merge(workflows::routes())
        .split_for_parts();
    document.paths.paths = std::mem::take(&mut document.paths.paths)
        .into_iter()
        .map(|(path, item)| (format!("/v1{path}"), item))
        .collect();
    complete(&mut document);
    add_links(&mut document);
    (router, document)
}

/// OpenAPI links from each operation that creates a resource to the operations on it, so that a
/// client (and schemathesis's stateful phase) can follow a create to the `{id}` operations with
/// the real id: the 2xx answer of `POST …/things` names `id` for every operation of
/// `…/things/{id}` and below whose other path parameters are the project and environment (a
/// step `{index}` or a `{version}` cannot be read from the answer). The manual run of a workflow
/// (`POST …/workflows/{id}/runs`, answering `runId`) links to the run's operations the same way.
fn add_links(document: &mut OpenApi) {
    use utoipa::openapi::link::LinkBuilder;

    const CONTEXT: [&str; 2] = ["{project}", "{environment}"];
    let operation_ids = |item: &utoipa::openapi::PathItem| -> Vec<String> {
        [&item.get, &item.put, &item.post, &item.patch, &item.delete]
            .into_iter()
            .filter_map(|op| op.as_ref()?.operation_id.clone())
            .collect()
    };
    // Every operation: its path and id.
    let targets: Vec<(String, String)> = document
        .paths
        .paths
        .iter()
        .flat_map(|(path, item)| {
            operation_ids(item)
                .into_iter()
                .map(move |id| (path.clone(), id))
        })
        .collect();
    // (creating path, answer field naming the id, the collection path whose `{id}` it fills).
    let mut sources: Vec<(String, &str, String)> = Vec::new();
    for (path, item) in &document.paths.paths {
        if item.post.is_some() && !path.ends_with('}') {
            sources.push((path.clone(), "id", path.clone()));
        }
    }
    let runs = document
        .paths
        .paths
        .keys()
        .find(|p| p.ends_with("/workflow-runs"))
        .cloned();
    if let Some(runs) = runs {
        for path in document.paths.paths.keys() {
            if path.ends_with("/workflows/{id}/runs") {
                sources.push((path.clone(), "runId", runs.clone()));
            }
        }
    }
    for (source, field, collection) in sources {
        let below = format!("{collection}/{{id}}");
        let links: Vec<(String, utoipa::openapi::link::Link)> = targets
            .iter()
            .filter(|(path, _)| {
                (path == &below || path.starts_with(&format!("{below}/")))
                    && path
                        .split('/')
                        .filter(|segment| segment.starts_with('{'))
                        .all(|segment| segment == "{id}" || CONTEXT.contains(&segment))
            })
            .map(|(path, operation_id)| {
                let mut link = LinkBuilder::new()
                    .operation_id(operation_id)
                    .parameter("id", format!("$response.body#/{field}"));
                for context in CONTEXT {
                    if path.contains(context) && source.contains(context) {
                        let name = context.trim_matches(['{', '}']);
                        link = link.parameter(name, format!("$request.path.{name}"));
                    }
                }
                (operation_id.clone(), link.build())
            })
            .collect();
        if links.is_empty() {
            continue;
        }
        let Some(operation) = document
            .paths
            .paths
            .get_mut(&source)
            .and_then(|item| item.post.as_mut())
        else {
            continue;
        };
        for (status, response) in operation.responses.responses.iter_mut() {
            if !status.starts_with('2') {
                continue;
            }
            if let RefOr::T(response) = response {
                for (name, link) in &links {
                    response.links.insert(name.clone(), RefOr::T(link.clone()));
                }
            }
        }
    }
}

/// `/{prefix}/v1`, to nest at `platform::base_path`: every documented route, the document and the
/// reference page, and the API's own 404 and 405 answers.
pub fn router(state: SharedState, base_path: &str) -> Router {
    let (routes, mut document) = routes();
    let prefix = base_path.strip_suffix("/v1").unwrap_or_default();
    if !prefix.is_empty() {
        // Relative to the server that serves the document: the paths stay `/v1/…`.
        document.servers = Some(vec![Server::new(prefix)]);
    }
    let mut json = to_json(&document);
    served_names(&mut json, state.datasource.schema());
    let json = json.to_string();
    // The page is served at `…/v1/docs`, which a browser may also ask for as `…/v1/docs/` (the
    // router drops the slash, the browser does not): only absolute paths resolve the same from
    // both, so the document and the page's files are named from the root, prefix included.
    let assets = format!("{base_path}{REFERENCE_PATH}");
    let config = Arc::new(
        utoipa_swagger_ui::Config::new([format!("{base_path}{DOCUMENT_PATH}")])
            // Swagger UI would otherwise send the document to its public validator.
            .validator_url("none"),
    );
    let page = reference_page(&assets, Arc::clone(&config));
    routes
        .route(
            DOCUMENT_PATH,
            get(move || {
                let json = json.clone();
                async move { typed(super::JSON_CONTENT_TYPE, json) }
            }),
        )
        .route(
            REFERENCE_PATH,
            get({
                let page = page.clone();
                move || reference_index(page.clone())
            }),
        )
        .route(
            &format!("{REFERENCE_PATH}/{{*file}}"),
            get(move |Path(file): Path<String>| async move {
                if file == "index.html" {
                    reference_index(page).await
                } else {
                    reference_file(file, config).await
                }
            }),
        )
        .fallback(platform::not_found)
        .method_not_allowed_fallback(platform::method_not_allowed)
        .with_state(state)
}

/// The request bodies that must name a collection of the served schema (the server refuses any
/// other with a 400 naming the field), each with its JSON pointer in the served document: the
/// schema there gets the served names as its `enum`. Filters (`?collectionName=`) stay free text:
/// a collection served no more still matches the entries written while it was.
const COLLECTION_FIELDS: [&str; 2] = [
    "/components/schemas/NewNoteSchema/properties/collectionName",
    "/components/schemas/WorkflowDefinition/properties/collection",
];

/// Gives the fields of [`COLLECTION_FIELDS`] the collections `schema` serves as their `enum`.
fn served_names(document: &mut serde_json::Value, schema: &crate::datasource::DataSourceSchema) {
    let names: Vec<&String> = schema.collections.keys().collect();
    for pointer in COLLECTION_FIELDS {
        if let Some(serde_json::Value::Object(field)) = document.pointer_mut(pointer) {
            field.insert("enum".to_owned(), serde_json::json!(names));
        }
    }
}

/// The reference page's Content-Security-Policy: the strict policy of the sign-in page
/// (`http::authentication::html`: nothing framed, no `<base>`), with the page's own scripts,
/// styles and the document allowed from this origin only, images also as `data:` (Swagger UI's
/// icons), and no inline script (Swagger UI's page has none: its configuration is the
/// `swagger-initializer.js` file).
pub const REFERENCE_CSP: &str = "default-src 'self'; img-src 'self' data:; object-src 'none'; \
     frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Swagger UI's `index.html` with each file it references (all relative to its folder in the
/// dist) named from the root, under `assets`; `None` if the dist has no page.
fn reference_page(
    assets: &str,
    config: Arc<utoipa_swagger_ui::Config<'static>>,
) -> Option<Arc<str>> {
    let found = utoipa_swagger_ui::serve("index.html", config).ok()??;
    let html = String::from_utf8(found.bytes.into_owned()).ok()?;
    let attribute = regex::Regex::new(r#"(src|href)="(?:\./)?([^"/:][^"]*)""#).ok()?;
    let html = attribute.replace_all(&html, |found: &regex::Captures<'_>| {
        format!(r#"{}="{assets}/{}""#, &found[1], &found[2])
    });
    Some(
        html.replace(
            "<title>Swagger UI</title>",
            "<title>Canopy public API</title>",
        )
        .into(),
    )
}

/// The reference page itself, at `…/v1/docs` (and `…/v1/docs/index.html`).
async fn reference_index(page: Option<Arc<str>>) -> Response {
    let Some(page) = page else {
        tracing::error!("the reference page is missing from Swagger UI's files");
        return reference_headers(StatusCode::INTERNAL_SERVER_ERROR.into_response());
    };
    reference_headers(
        (
            StatusCode::OK,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            page.to_string(),
        )
            .into_response(),
    )
}

/// One file of the reference page (Swagger UI's dist, embedded in the binary at build time by
/// `utoipa-swagger-ui`'s `vendored` feature): `""` is its `index.html`.
async fn reference_file(file: String, config: Arc<utoipa_swagger_ui::Config<'static>>) -> Response {
    let found = match utoipa_swagger_ui::serve(&file, config) {
        Ok(found) => found,
        Err(error) => {
            tracing::error!(%error, file, "the reference page could not be served");
            return reference_headers(StatusCode::INTERNAL_SERVER_ERROR.into_response());
        }
    };
    let Some(found) = found else {
        return reference_headers(platform::not_found().await);
    };
    let content_type = HeaderValue::from_str(&found.content_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    reference_headers(
        (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, content_type),
                // The files change with the binary only; the page is checked at each visit.
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            found.bytes.into_owned(),
        )
            .into_response(),
    )
}

/// The reference page's security headers, on each of its answers.
fn reference_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(REFERENCE_CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn typed(content_type: &'static str, body: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// The errors every `/v1` operation can answer, by status: the name of its response component
/// and its description.
const COMMON_ERRORS: [(&str, &str, &str); 6] = [
    (
        "400",
        "BadRequest",
        "A parameter or body field is wrong; the message names it",
    ),
    (
        "401",
        "Unauthorized",
        "The token is missing, invalid or expired",
    ),
    (
        "403",
        "Forbidden",
        "The token's user may not do this, or the token lacks the scope",
    ),
    ("404", "NotFound", "No such project, environment or item"),
    (
        "429",
        "TooManyRequests",
        "Rate limited: retry after `Retry-After` seconds",
    ),
    (
        "500",
        "InternalError",
        "Unexpected error (details are logged)",
    ),
];

/// Adds the shared error responses to the components and to every operation that does not
/// declare them itself (413 to those with a body).
fn complete(document: &mut OpenApi) {
    let error = || {
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Error")))
            .build()
    };
    let components = document.components.get_or_insert_with(Default::default);
    for (_, name, description) in COMMON_ERRORS {
        let mut response = ResponseBuilder::new()
            .description(description)
            .content("application/json", error());
        if name == "TooManyRequests" {
            response = response.header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(Some(
                        ObjectBuilder::new()
                            .schema_type(Type::Integer)
                            .minimum(Some(0)),
                    ))
                    .description(Some("Seconds to wait before the next call"))
                    .build(),
            );
        }
        components
            .responses
            .insert(name.to_owned(), RefOr::T(response.build()));
    }
    components.responses.insert(
        "PayloadTooLarge".to_owned(),
        RefOr::T(
            ResponseBuilder::new()
                .description("The body is larger than the server accepts")
                .content("application/json", error())
                .build(),
        ),
    );
    for item in document.paths.paths.values_mut() {
        for operation in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            add_errors(operation);
        }
    }
}

fn add_errors(operation: &mut Operation) {
    let responses = &mut operation.responses.responses;
    let mut add = |status: &str, name: &str| {
        responses
            .entry(status.to_owned())
            .or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
    };
    for (status, name, _) in COMMON_ERRORS {
        add(status, name);
    }
    if operation.request_body.is_some() {
        add("413", "PayloadTooLarge");
    }
}

/// Where a schema written as JSON Schema waits, inside the typed document, to replace the
/// schema object that carries it ([`unwrap_raw`]). utoipa's typed schema has no `oneOf` inside an
/// object, no `const` and no `anyOf` of formats, and reading JSON into it drops what it lacks.
const RAW: &str = "x-canopy-raw";

/// A schema written as JSON Schema, for what the derive cannot say (`propertyNames`, unions of
/// documents, constants).
pub fn schema(value: serde_json::Value) -> utoipa::openapi::schema::Schema {
    utoipa::openapi::schema::Schema::Object(
        ObjectBuilder::new()
            .extensions(Some(
                utoipa::openapi::extensions::ExtensionsBuilder::new()
                    .add(RAW, value)
                    .build(),
            ))
            .build(),
    )
}

/// Replaces every object that carries a raw schema by that schema.
fn unwrap_raw(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(raw) = map.remove(RAW) {
                *value = raw;
                unwrap_raw(value);
            } else {
                map.values_mut().for_each(unwrap_raw);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(unwrap_raw),
        _ => {}
    }
}

/// The document as served: JSON, raw schemas in place.
pub fn to_json(document: &OpenApi) -> serde_json::Value {
    match serde_json::to_value(document) {
        Ok(mut value) => {
            unwrap_raw(&mut value);
            value
        }
        Err(error) => {
            // Only a map with non-string keys fails, and the document has none.
            tracing::error!(%error, "the OpenAPI document could not be written");
            serde_json::Value::Null
        }
    }
}

/// `tags`: string values under non-blank keys, e.g. `{"region": "EU"}`.
pub fn tags() -> utoipa::openapi::schema::Schema {
    schema(serde_json::json!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "propertyNames": {"pattern": "\\S"},
        "example": {"region": "EU"},
    }))
}

/// A named schema component written as JSON Schema:
/// `json_schema!(Type, "ComponentName", json!({…}))` declares a type to name in `body = Type`.
macro_rules! json_schema {
    ($(#[$meta:meta])* $type:ident, $name:literal, $schema:expr) => {
        $(#[$meta])*
        pub struct $type;

        impl utoipa::PartialSchema for $type {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::RefOr::T($crate::http::openapi::schema($schema))
            }
        }

        impl utoipa::ToSchema for $type {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed($name)
            }
        }
    };
}
pub(crate) use json_schema;
