//! Whole responses of the `/forest` routes, checked against the insta snapshots committed in
//! `snapshots/`: status, headers and body of every route family (healthcheck, list, count, get,
//! CSV, create, update, delete, bulk delete, relation routes, stats, native query, capabilities)
//! and of every error case of protocol §2 and §7, on SQLite, PostgreSQL and MariaDB.
//!
//! The fixture (`library`) uses only column types whose wire values agree on the three databases,
//! so one snapshot serves all three; a response that legitimately differs per database is
//! snapshotted with the backend as suffix (`Fixture::snap_per_backend`). Values that change on
//! every run are redacted: the correlation id (checked to be a uuid v4 first), `Last-Modified`,
//! and the ids of stats documents (checked to be uuids).
//!
//! CI runs with `CI=true`, where insta fails on a mismatch instead of writing; after a deliberate
//! wire change, `INSTA_UPDATE=always cargo test -p canopy-e2e --test e2e snapshots` rewrites the
//! files, and `git diff tests/e2e/snapshots` is the review.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use canopy::auth::{SessionClaims, SessionKey};
use canopy::config::HttpConfig;
use canopy::customizer::{Customization, build_stack};
use canopy::datasource::sql::{Options, SqlDataSource};
use canopy::datasource::{Caller, Collection, DataSource, DataSourceSchema, Record, Value};
use canopy::http::{AppState, router};
use canopy_e2e::{Backend, TestDb, on_all_backends};
use indexmap::IndexMap;
use serde_json::{Map, Value as Json, json};
use tower::ServiceExt as _;

use crate::harness::encode;
use crate::list::{portable, ts};

const SECRET: &str = "a-test-auth-secret";

/// The largest JSON body the fixture's router reads (`jsonLimit`).
const JSON_LIMIT: u64 = 4096;

/// authors ← books (author) ↔ tags through book_tags; books ← covers (OneToOne, `book_id` is
/// unique). Every column is an INT, a short VARCHAR, a BOOLEAN, a DATE or a timestamp, whose wire
/// values are the same on the three databases.
///
/// | book | title | pages | published | author | tags | cover |
/// |---|---|---|---|---|---|---|
/// | 1 | Earthsea | 183 | 2024-01-15 | Ursula | fantasy | 1 blue |
/// | 2 | Dispossessed | 341 | 2024-02-03 | Ursula | sf | — |
/// | 3 | Mort | 243 | 2024-02-20 | Terry | fantasy, humour | — |
/// | 4 | Excession | 451 | 2024-04-01 | Iain | sf | — |
/// | 5 | Anonymous | NULL | NULL | — | — | — |
///
/// Cover 2 (red) belongs to no book. Iain is not `active`.
pub(crate) async fn library(backend: Backend) -> (TestDb, SqlDataSource) {
    let db = TestDb::new(backend).await;
    db.execute(&portable(
        backend,
        "CREATE TABLE authors (id {pk}, name VARCHAR(100) NOT NULL, active {bool} NOT NULL);
         CREATE TABLE books (id {pk}, title VARCHAR(100) NOT NULL, pages INT, published DATE,
            added_at {ts}, author_id INT, FOREIGN KEY (author_id) REFERENCES authors(id));
         CREATE TABLE tags (id {pk}, label VARCHAR(50) NOT NULL);
         CREATE TABLE book_tags (book_id INT NOT NULL, tag_id INT NOT NULL,
            PRIMARY KEY (book_id, tag_id), FOREIGN KEY (book_id) REFERENCES books(id),
            FOREIGN KEY (tag_id) REFERENCES tags(id));
         CREATE TABLE covers (id {pk}, book_id INT UNIQUE, color VARCHAR(20),
            FOREIGN KEY (book_id) REFERENCES books(id));",
    ))
    .await;
    let t = |utc: &str| ts(backend, utc);
    db.execute(&format!(
        "INSERT INTO authors (name, active) VALUES ('Ursula', TRUE);
         INSERT INTO authors (name, active) VALUES ('Terry', TRUE);
         INSERT INTO authors (name, active) VALUES ('Iain', FALSE);
         INSERT INTO books (title, pages, published, added_at, author_id)
            VALUES ('Earthsea', 183, '2024-01-15', {}, 1);
         INSERT INTO books (title, pages, published, added_at, author_id)
            VALUES ('Dispossessed', 341, '2024-02-03', {}, 1);
         INSERT INTO books (title, pages, published, added_at, author_id)
            VALUES ('Mort', 243, '2024-02-20', {}, 2);
         INSERT INTO books (title, pages, published, added_at, author_id)
            VALUES ('Excession', 451, '2024-04-01', {}, 3);
         INSERT INTO books (title, pages, published, added_at, author_id)
            VALUES ('Anonymous', NULL, NULL, NULL, NULL);
         INSERT INTO tags (label) VALUES ('fantasy');
         INSERT INTO tags (label) VALUES ('sf');
         INSERT INTO tags (label) VALUES ('humour');
         INSERT INTO book_tags (book_id, tag_id) VALUES (1, 1);
         INSERT INTO book_tags (book_id, tag_id) VALUES (2, 2);
         INSERT INTO book_tags (book_id, tag_id) VALUES (3, 1);
         INSERT INTO book_tags (book_id, tag_id) VALUES (3, 3);
         INSERT INTO book_tags (book_id, tag_id) VALUES (4, 2);
         INSERT INTO covers (book_id, color) VALUES (1, 'blue');
         INSERT INTO covers (book_id, color) VALUES (NULL, 'red');",
        t("2024-01-15 09:30:00"),
        t("2024-02-03 23:45:10"),
        t("2024-02-20 00:00:00"),
        t("2024-04-01 12:00:00"),
    ))
    .await;
    let options = Options {
        connection_name: Some("main".to_owned()),
        ..Options::default()
    };
    let ds = db.datasource(options).await;
    (db, ds)
}

/// The SQL datasource with `tags` made not countable, as a datasource or `disableCount()` does
/// (the SQL datasource itself counts every table).
struct WithoutTagCount {
    inner: SqlDataSource,
    schema: DataSourceSchema,
}

#[async_trait]
impl DataSource for WithoutTagCount {
    fn schema(&self) -> &DataSourceSchema {
        &self.schema
    }

    fn collection(&self, name: &str) -> canopy::datasource::Result<Arc<dyn Collection>> {
        self.inner.collection(name)
    }

    fn native_query_connections(&self) -> Vec<String> {
        self.inner.native_query_connections()
    }

    async fn native_query(
        &self,
        caller: &Caller,
        connection: &str,
        query: &str,
        variables: &IndexMap<String, Value>,
    ) -> canopy::datasource::Result<Vec<Record>> {
        self.inner
            .native_query(caller, connection, query, variables)
            .await
    }
}

/// The router over the library, and the database it keeps alive.
pub(crate) struct Fixture {
    _db: TestDb,
    pub(crate) app: Router,
    backend: Backend,
}

pub(crate) async fn fixture(backend: Backend) -> Fixture {
    fixture_with(backend, Vec::new()).await
}

/// The fixture with these customizations stacked over the library (none: the library as is).
pub(crate) async fn fixture_with(backend: Backend, customizations: Vec<Customization>) -> Fixture {
    let (db, inner) = library(backend).await;
    let mut schema = inner.schema().clone();
    schema
        .collections
        .get_mut("tags")
        .expect("tags collection")
        .countable = false;
    let http = HttpConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        json_limit: JSON_LIMIT,
        // The page of the CORS snapshots; other origins get no credentials.
        cors_allowed_origins: vec!["https://app.example.com".to_owned()],
        ..HttpConfig::default()
    };
    let base: Arc<dyn DataSource> = Arc::new(WithoutTagCount { inner, schema });
    let served = if customizations.is_empty() {
        base
    } else {
        build_stack(base, customizations).expect("the fixture's customizations")
    };
    let state = AppState::new(served, SessionKey::new(SECRET), &http);
    Fixture {
        _db: db,
        app: router(Arc::new(state)),
        backend,
    }
}

/// An admin's claims, read from JSON as a token's would be (new optional claims need no edit).
fn claims() -> SessionClaims {
    serde_json::from_value(json!({
        "id": 1, "email": "ann@x.io", "firstName": "Ann", "lastName": "Admin",
        "team": "Operations", "role": "Admin", "permissionLevel": "admin", "renderingId": 1,
        "tags": {}, "iat": 0, "exp": 0
    }))
    .expect("session claims")
}

pub(crate) fn bearer() -> String {
    let token = SessionKey::new(SECRET)
        .mint(claims(), Duration::from_secs(3600))
        .unwrap();
    format!("Bearer {token}")
}

/// A request with the session token and, when given, a JSON body.
pub(crate) fn request(method: &str, uri: &str, body: Option<&Json>) -> Request<Body> {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, bearer());
    match body {
        Some(body) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .unwrap()
}

pub(crate) fn get(uri: &str) -> Request<Body> {
    request("GET", uri, None)
}

/// A request with the session token and this raw body.
pub(crate) fn raw(method: &str, uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, bearer())
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap()
}

/// `filters=<tree>` for a query string.
pub(crate) fn filters(tree: &Json) -> String {
    format!("filters={}", encode(&tree.to_string()))
}

/// The redactions every snapshot gets; `stats` adds the stats document id.
fn settings(stats: bool) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    // Key order is not part of JSON, and relation order follows each database's introspection.
    settings.set_sort_maps(true);
    settings.set_prepend_module_to_snapshot(true);
    settings.add_dynamic_redaction(".headers[\"x-forest-correlation-id\"]", |value, _| {
        let id = value.as_str().expect("a correlation id string");
        let id = uuid::Uuid::parse_str(id).expect("the correlation id is a uuid");
        assert_eq!(id.get_version_num(), 4, "the correlation id is a uuid v4");
        "[uuid v4]"
    });
    settings.add_redaction(".headers[\"last-modified\"]", "[now]");
    if stats {
        settings.add_dynamic_redaction(".body.data.id", |value, _| {
            let id = value.as_str().expect("a stats id string");
            uuid::Uuid::parse_str(id).expect("the stats id is a uuid");
            "[uuid]"
        });
    }
    settings
}

impl Fixture {
    /// Status, every header but `content-length`, and the body (JSON when it parses, the text
    /// otherwise, `null` when empty).
    async fn respond(&self, request: Request<Body>) -> Json {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let mut headers = Map::new();
        let mut names: Vec<_> = response.headers().keys().cloned().collect();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        for name in names {
            if name == header::CONTENT_LENGTH {
                continue;
            }
            let values: Vec<Json> = response
                .headers()
                .get_all(&name)
                .iter()
                .map(|v| Json::String(String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            let value = match <[Json; 1]>::try_from(values) {
                Ok([one]) => one,
                Err(many) => Json::Array(many),
            };
            headers.insert(name.as_str().to_owned(), value);
        }
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = if bytes.is_empty() {
            Json::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        json!({ "status": status, "headers": headers, "body": body })
    }

    /// Sends the request and checks the whole response against the snapshot `name`, shared by
    /// the three databases.
    pub(crate) async fn snap(&self, name: &str, request: Request<Body>) {
        let response = self.respond(request).await;
        settings(false).bind(|| insta::assert_json_snapshot!(name, response));
    }

    /// As `snap`, for a response that legitimately differs per database: wire values, or the
    /// fields of a collection listed in an error (relations come in introspection order).
    pub(crate) async fn snap_per_backend(&self, name: &str, request: Request<Body>) {
        let response = self.respond(request).await;
        let mut settings = settings(false);
        settings.set_snapshot_suffix(backend_name(self.backend));
        settings.bind(|| insta::assert_json_snapshot!(name, response));
    }

    /// As `snap`, with the stats document id redacted (checked to be a uuid first).
    pub(crate) async fn snap_stats(&self, name: &str, request: Request<Body>) {
        let response = self.respond(request).await;
        assert_eq!(response["body"]["data"]["type"], "stats", "{response}");
        settings(true).bind(|| insta::assert_json_snapshot!(name, response));
    }
}

fn backend_name(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
        Backend::MySql => "mysql",
    }
}

/// Healthcheck, CORS preflight, and the 401s of §4.3.
async fn healthcheck_cors_and_authentication(backend: Backend) {
    let f = fixture(backend).await;
    let anonymous = |method: &str, uri: &str| {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .unwrap()
    };
    f.snap("healthcheck", anonymous("GET", "/forest")).await;
    let preflight = Request::options("/forest/books")
        .header(header::ORIGIN, "https://app.example.com")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "GET")
        .header(
            header::ACCESS_CONTROL_REQUEST_HEADERS,
            "authorization,forest-projection",
        )
        .header("access-control-request-private-network", "true")
        .body(Body::empty())
        .unwrap();
    f.snap("cors_preflight", preflight).await;
    let mut from_page = get("/forest/books/count?timezone=UTC");
    from_page
        .headers_mut()
        .insert(header::ORIGIN, "https://app.example.com".parse().unwrap());
    f.snap("cors_simple_request", from_page).await;
    // An origin outside corsAllowedOrigins: CORS answers without credentials.
    let preflight = Request::options("/forest/books")
        .header(header::ORIGIN, "https://evil.example")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "GET")
        .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "authorization")
        .body(Body::empty())
        .unwrap();
    f.snap("cors_preflight_other_origin", preflight).await;
    let mut from_page = get("/forest/books/count?timezone=UTC");
    from_page
        .headers_mut()
        .insert(header::ORIGIN, "https://evil.example".parse().unwrap());
    f.snap("cors_simple_request_other_origin", from_page).await;

    f.snap(
        "401_no_token",
        anonymous("GET", "/forest/books?timezone=UTC"),
    )
    .await;
    let with_authorization = |value: String| {
        Request::get("/forest/books?timezone=UTC")
            .header(header::AUTHORIZATION, value)
            .body(Body::empty())
            .unwrap()
    };
    f.snap(
        "401_not_a_jwt",
        with_authorization("Bearer not.a.jwt".to_owned()),
    )
    .await;
    let forged = SessionKey::new("another-secret")
        .mint(claims(), Duration::from_secs(3600))
        .unwrap();
    f.snap(
        "401_bad_signature",
        with_authorization(format!("Bearer {forged}")),
    )
    .await;
    let expired = SessionKey::new(SECRET)
        .mint(claims(), Duration::ZERO)
        .unwrap();
    f.snap(
        "401_expired",
        with_authorization(format!("Bearer {expired}")),
    )
    .await;
    f.snap(
        "401_bad_authorization_header",
        with_authorization("Token abc".to_owned()),
    )
    .await;
    let mut cookie = get("/forest/books/count?timezone=UTC");
    cookie.headers_mut().remove(header::AUTHORIZATION);
    let token = bearer().trim_start_matches("Bearer ").to_owned();
    cookie.headers_mut().insert(
        header::COOKIE,
        format!("forest_session_token={token}").parse().unwrap(),
    );
    f.snap("cookie_token", cookie).await;
    f.snap(
        "401_on_capabilities",
        anonymous("POST", "/forest/_internal/capabilities"),
    )
    .await;
}

/// `GET /{c}` with every query-string key, `GET /{c}/count` (and deactivated), `GET /{c}/{id}`.
async fn list_count_and_get(backend: Backend) {
    let f = fixture(backend).await;
    f.snap("list_default", get("/forest/books?timezone=UTC&sort=id"))
        .await;
    f.snap(
        "list_fields_sort_page",
        get(
            "/forest/books?timezone=UTC&fields[books]=id,title,author&fields[author]=name\
             &sort=-pages&page[number]=2&page[size]=2",
        ),
    )
    .await;
    f.snap(
        "list_sort_through_relation",
        get(
            "/forest/books?timezone=UTC&fields[books]=id,author&fields[author]=name\
             &sort=author.name,-id",
        ),
    )
    .await;
    f.snap(
        "list_search",
        get("/forest/books?timezone=UTC&fields[books]=id,title&sort=id&search=ES"),
    )
    .await;
    f.snap(
        "list_search_extended",
        get(
            "/forest/books?timezone=UTC&fields[books]=id,title,author&fields[author]=name\
             &sort=id&search=ursula&searchExtended=1",
        ),
    )
    .await;
    let tree = json!({"aggregator": "or", "conditions": [
        {"field": "pages", "operator": "greater_than", "value": 300},
        {"field": "author:name", "operator": "equal", "value": "Terry"}
    ]});
    f.snap(
        "list_filters",
        get(&format!(
            "/forest/books?timezone=UTC&fields[books]=id,title&sort=id&{}",
            filters(&tree)
        )),
    )
    .await;
    let dates = json!({"field": "published", "operator": "before", "value": "2024-02-10"});
    f.snap(
        "list_filters_date",
        get(&format!(
            "/forest/books?timezone=Europe/Paris&fields[books]=id,published&sort=id&{}",
            filters(&dates)
        )),
    )
    .await;
    let mut projection = get("/forest/books?timezone=UTC&sort=id&page[size]=2");
    projection
        .headers_mut()
        .insert("forest-projection", "id,author:name".parse().unwrap());
    f.snap("list_forest_projection_header", projection).await;
    f.snap(
        "list_composite_keys",
        get("/forest/book_tags?timezone=UTC&sort=book_id,tag_id"),
    )
    .await;
    f.snap(
        "list_to_many_links",
        get("/forest/authors?timezone=UTC&sort=id&page[size]=1"),
    )
    .await;

    f.snap("count", get("/forest/books/count?timezone=UTC"))
        .await;
    let paged = json!({"field": "title", "operator": "contains", "value": "o"});
    f.snap(
        "count_filtered_searched",
        get(&format!(
            "/forest/books/count?timezone=UTC&search=mort&{}",
            filters(&paged)
        )),
    )
    .await;
    f.snap("count_deactivated", get("/forest/tags/count?timezone=UTC"))
        .await;

    f.snap("get", get("/forest/books/1?timezone=UTC")).await;
    f.snap(
        "get_with_fields",
        get("/forest/books/3?timezone=UTC&fields[books]=title,author&fields[author]=name"),
    )
    .await;
    f.snap("get_null_relations", get("/forest/books/5?timezone=UTC"))
        .await;
    f.snap(
        "get_composite_id",
        get("/forest/book_tags/3%7C3?timezone=UTC"),
    )
    .await;
}

/// `GET /{c}.csv` and `GET /{c}/{id}/relationships/{r}.csv`.
async fn csv_exports(backend: Backend) {
    let f = fixture(backend).await;
    f.snap(
        "csv",
        get(
            "/forest/books.csv?timezone=UTC&fields[books]=id,title,pages,published,author\
             &fields[author]=name&header=id,title,pages,published,author&filename=books.csv",
        ),
    )
    .await;
    f.snap(
        "csv_without_extension_filtered",
        get(&format!(
            "/forest/books.csv?timezone=UTC&fields[books]=id,title&header=id,title\
             &filename=export&page[size]=1&{}",
            filters(&json!({"field": "author:active", "operator": "equal", "value": true}))
        )),
    )
    .await;
    f.snap(
        "csv_related",
        get(
            "/forest/books/3/relationships/tags.csv?timezone=UTC&fields[tags]=id,label\
             &header=id,label&filename=tags.csv",
        ),
    )
    .await;
}

/// `POST /{c}`, `PUT /{c}/{id}`, `DELETE /{c}/{id}`, `DELETE /{c}`.
async fn create_update_delete(backend: Backend) {
    let f = fixture(backend).await;
    let create = json!({"data": {"type": "books", "attributes": {
            "title": "Small Gods", "pages": 284, "published": "2024-03-05",
            "added_at": "2024-03-05T10:11:12.000Z"},
        "relationships": {"author": {"data": {"type": "authors", "id": "2"}}}}});
    f.snap(
        "create",
        request("POST", "/forest/books?timezone=UTC", Some(&create)),
    )
    .await;
    let one_to_one = json!({"data": {"type": "covers", "attributes": {"color": "green"},
        "relationships": {"book": {"data": {"type": "books", "id": "2"}}}}});
    f.snap(
        "create_with_one_to_one_target",
        request("POST", "/forest/covers?timezone=UTC", Some(&one_to_one)),
    )
    .await;
    let book_with_cover = json!({"data": {"type": "books", "attributes": {"title": "Guards"},
        "relationships": {"cover": {"data": {"type": "covers", "id": "2"}}}}});
    f.snap(
        "create_with_one_to_one_link",
        request("POST", "/forest/books?timezone=UTC", Some(&book_with_cover)),
    )
    .await;
    let update = json!({"data": {"type": "books", "id": "5",
        "attributes": {"title": "Anonymous (2nd ed.)", "pages": 12}}});
    f.snap(
        "update",
        request("PUT", "/forest/books/5?timezone=UTC", Some(&update)),
    )
    .await;
    f.snap(
        "delete_one",
        request("DELETE", "/forest/book_tags/3%7C3?timezone=UTC", None),
    )
    .await;
    let selection = json!({"data": {"type": "action-requests", "attributes": {
        "collection_name": "book_tags", "ids": ["1|1", "2|2"], "all_records": false}}});
    f.snap(
        "bulk_delete",
        request("DELETE", "/forest/book_tags?timezone=UTC", Some(&selection)),
    )
    .await;
    let all_but = json!({"data": {"attributes": {"all_records": true,
        "all_records_ids_excluded": ["4|2"],
        "all_records_subset_query": {"filters": {"field": "tag_id", "operator": "equal", "value": 2}}}}});
    f.snap(
        "bulk_delete_all_records",
        request("DELETE", "/forest/book_tags?timezone=UTC", Some(&all_but)),
    )
    .await;
    f.snap(
        "after_deletes",
        get("/forest/book_tags?timezone=UTC&sort=book_id,tag_id"),
    )
    .await;
}

/// The relation routes of §1.3.
async fn relation_routes(backend: Backend) {
    let f = fixture(backend).await;
    f.snap(
        "related_list_one_to_many",
        get("/forest/authors/1/relationships/books?timezone=UTC&fields[books]=id,title&sort=id"),
    )
    .await;
    f.snap(
        "related_list_many_to_many",
        get("/forest/books/3/relationships/tags?timezone=UTC&sort=-id"),
    )
    .await;
    f.snap(
        "related_count_one_to_many",
        get("/forest/authors/1/relationships/books/count?timezone=UTC"),
    )
    .await;
    f.snap(
        "related_count_deactivated",
        get("/forest/books/3/relationships/tags/count?timezone=UTC"),
    )
    .await;
    let link = |id: &str, kind: &str| json!({"data": [{"id": id, "type": kind}]});
    f.snap(
        "associate_one_to_many",
        request(
            "POST",
            "/forest/authors/3/relationships/books?timezone=UTC",
            Some(&link("5", "books")),
        ),
    )
    .await;
    f.snap(
        "associate_many_to_many",
        request(
            "POST",
            "/forest/books/5/relationships/tags?timezone=UTC",
            Some(&link("3", "tags")),
        ),
    )
    .await;
    let ids = |ids: &[&str]| json!({"data": {"attributes": {"ids": ids, "all_records": false}}});
    f.snap(
        "dissociate_one_to_many",
        request(
            "DELETE",
            "/forest/authors/1/relationships/books?timezone=UTC",
            Some(&ids(&["2"])),
        ),
    )
    .await;
    f.snap(
        "dissociate_many_to_many",
        request(
            "DELETE",
            "/forest/books/3/relationships/tags?timezone=UTC",
            Some(&ids(&["3"])),
        ),
    )
    .await;
    f.snap(
        "delete_related",
        request(
            "DELETE",
            "/forest/books/5/relationships/tags?timezone=UTC&delete=true",
            Some(&ids(&["3"])),
        ),
    )
    .await;
    let to = |kind: &str, id: &str| json!({"data": {"type": kind, "id": id}});
    f.snap(
        "update_many_to_one",
        request(
            "PUT",
            "/forest/books/2/relationships/author?timezone=UTC",
            Some(&to("authors", "2")),
        ),
    )
    .await;
    f.snap(
        "update_many_to_one_null",
        request(
            "PUT",
            "/forest/books/3/relationships/author?timezone=UTC",
            Some(&json!({"data": null})),
        ),
    )
    .await;
    f.snap(
        "update_one_to_one",
        request(
            "PUT",
            "/forest/books/4/relationships/cover?timezone=UTC",
            Some(&to("covers", "1")),
        ),
    )
    .await;
    f.snap(
        "after_relation_updates",
        get(
            "/forest/books?timezone=UTC&fields[books]=id,author,cover&fields[author]=id\
             &fields[cover]=color&sort=id",
        ),
    )
    .await;
    f.snap(
        "after_relation_updates_tags",
        get("/forest/book_tags?timezone=UTC&sort=book_id,tag_id"),
    )
    .await;
}

/// `POST /stats/{c}` of every chart type, `POST /_internal/native_query`,
/// `POST /_internal/capabilities`.
async fn stats_native_query_and_capabilities(backend: Backend) {
    let f = fixture(backend).await;
    let stats = |body: Json| request("POST", "/forest/stats/books?timezone=UTC", Some(&body));
    f.snap_stats(
        "stats_value_count",
        stats(json!({"type": "Value", "sourceCollectionName": "books", "aggregator": "Count"})),
    )
    .await;
    f.snap_stats(
        "stats_value_sum_filtered",
        stats(
            json!({"type": "Value", "sourceCollectionName": "books", "aggregator": "Sum",
            "aggregateFieldName": "pages",
            "filter": {"field": "author:name", "operator": "equal", "value": "{{who}}"},
            "contextVariables": {"who": "Ursula"}}),
        ),
    )
    .await;
    f.snap_stats(
        "stats_objective",
        stats(json!({"type": "Objective", "sourceCollectionName": "books",
            "aggregator": "Count", "objective": 10})),
    )
    .await;
    f.snap_stats(
        "stats_pie",
        // Sums, not counts: groups with equal values come in each database's order.
        stats(
            json!({"type": "Pie", "sourceCollectionName": "books", "aggregator": "Sum",
            "aggregateFieldName": "pages", "groupByFieldName": "author:name"}),
        ),
    )
    .await;
    f.snap_stats(
        "stats_line",
        stats(
            json!({"type": "Line", "sourceCollectionName": "books", "aggregator": "Count",
            "groupByFieldName": "published", "timeRange": "Month"}),
        ),
    )
    .await;
    f.snap_stats(
        "stats_line_week_sum",
        stats(
            json!({"type": "Line", "sourceCollectionName": "books", "aggregator": "Sum",
            "aggregateFieldName": "pages", "groupByFieldName": "published",
            "timeRange": "Week"}),
        ),
    )
    .await;
    f.snap_stats(
        "stats_leaderboard",
        request(
            "POST",
            "/forest/stats/authors?timezone=UTC",
            Some(
                &json!({"type": "Leaderboard", "sourceCollectionName": "authors",
                "aggregator": "Sum", "aggregateFieldName": "pages", "labelFieldName": "name",
                "relationshipFieldName": "books", "limit": 2}),
            ),
        ),
    )
    .await;
    f.snap_stats(
        "native_query_value",
        request(
            "POST",
            "/forest/_internal/native_query?timezone=UTC",
            Some(&json!({"type": "Value", "connectionName": "main",
                "query": "SELECT COUNT(*) AS value FROM books WHERE pages > {{min}}",
                "contextVariables": {"min": 200}})),
        ),
    )
    .await;
    // `key` is a reserved word of MariaDB.
    let key = match backend {
        Backend::MySql => "`key`",
        Backend::Sqlite | Backend::Postgres => "\"key\"",
    };
    f.snap_stats(
        "native_query_pie",
        request(
            "POST",
            "/forest/_internal/native_query?timezone=UTC",
            Some(&json!({"type": "Pie", "connectionName": "main",
                "query": format!("SELECT label AS {key}, id AS value FROM tags ORDER BY id")})),
        ),
    )
    .await;
    f.snap(
        "capabilities",
        request(
            "POST",
            "/forest/_internal/capabilities",
            Some(&json!({"collectionNames": ["books", "book_tags"]})),
        ),
    )
    .await;
}

/// Every query-string, id and path error of §2.1, §3.2 and §7.
async fn query_and_path_errors(backend: Backend) {
    let f = fixture(backend).await;
    f.snap("400_missing_timezone", get("/forest/books")).await;
    f.snap(
        "400_invalid_timezone",
        get("/forest/books?timezone=Mars/Olympus"),
    )
    .await;
    f.snap(
        "400_filters_not_json",
        get("/forest/books?timezone=UTC&filters=%7Bnope"),
    )
    .await;
    let leaf = |field: &str, operator: &str, value: Json| {
        get(&format!(
            "/forest/books?timezone=UTC&{}",
            filters(&json!({"field": field, "operator": operator, "value": value}))
        ))
    };
    f.snap_per_backend("400_filters_unknown_field", leaf("nope", "equal", json!(1)))
        .await;
    f.snap(
        "400_filters_unknown_operator",
        leaf("title", "resembles", json!("x")),
    )
    .await;
    f.snap(
        "400_filters_operator_not_for_type",
        leaf("pages", "contains", json!("x")),
    )
    .await;
    f.snap(
        "400_filters_bad_value",
        leaf("published", "equal", json!("not a date")),
    )
    .await;
    f.snap(
        "400_filters_bad_aggregator",
        get(&format!(
            "/forest/books?timezone=UTC&{}",
            filters(&json!({"aggregator": "xor", "conditions": []}))
        )),
    )
    .await;
    f.snap(
        "400_filters_not_a_tree",
        get(&format!(
            "/forest/books?timezone=UTC&{}",
            filters(&json!([1, 2]))
        )),
    )
    .await;
    f.snap_per_backend(
        "400_invalid_projection",
        get("/forest/books?timezone=UTC&fields[books]=id,nope"),
    )
    .await;
    let mut header = get("/forest/books?timezone=UTC");
    header
        .headers_mut()
        .insert("forest-projection", "id,author:nope".parse().unwrap());
    f.snap("400_invalid_projection_header", header).await;
    f.snap(
        "400_invalid_sort",
        get("/forest/books?timezone=UTC&sort=nope"),
    )
    .await;
    f.snap(
        "400_invalid_page_number",
        get("/forest/books?timezone=UTC&page[number]=0"),
    )
    .await;
    f.snap(
        "400_invalid_page_size",
        get("/forest/books?timezone=UTC&page[size]=abc"),
    )
    .await;
    f.snap(
        "400_invalid_segment",
        get("/forest/books?timezone=UTC&segment=best"),
    )
    .await;
    f.snap(
        "422_live_query_without_connection",
        get("/forest/books?timezone=UTC&segmentQuery=SELECT%20id%20FROM%20books"),
    )
    .await;
    f.snap(
        "422_live_query_not_a_select",
        get("/forest/books?timezone=UTC&connectionName=main\
             &segmentQuery=DELETE%20FROM%20books"),
    )
    .await;
    f.snap("400_id_not_a_number", get("/forest/books/abc?timezone=UTC"))
        .await;
    f.snap(
        "400_id_wrong_arity",
        get("/forest/book_tags/1?timezone=UTC"),
    )
    .await;
    f.snap(
        "400_id_too_many_parts",
        get("/forest/books/1%7C2?timezone=UTC"),
    )
    .await;
    f.snap(
        "404_unknown_collection",
        get("/forest/nowhere?timezone=UTC"),
    )
    .await;
    f.snap(
        "404_unknown_collection_count",
        get("/forest/nowhere/count?timezone=UTC"),
    )
    .await;
    f.snap("404_unknown_record", get("/forest/books/99?timezone=UTC"))
        .await;
    f.snap(
        "404_unknown_relation",
        get("/forest/books/1/relationships/nope?timezone=UTC"),
    )
    .await;
    f.snap(
        "404_to_one_relation_has_no_list",
        get("/forest/books/1/relationships/author?timezone=UTC"),
    )
    .await;
    f.snap("404_unknown_path", get("/nowhere")).await;
    f.snap(
        "update_to_one_unknown_parent_is_a_no_op",
        request(
            "PUT",
            "/forest/books/99/relationships/author?timezone=UTC",
            Some(&json!({"data": {"type": "authors", "id": "1"}})),
        ),
    )
    .await;
}

/// Every body error: bad JSON, too large, bad JSON:API shapes, bad chart bodies.
async fn body_errors(backend: Backend) {
    let f = fixture(backend).await;
    f.snap(
        "400_body_not_json",
        raw("POST", "/forest/books?timezone=UTC", "{\"data\":"),
    )
    .await;
    f.snap(
        "413_body_too_large",
        raw(
            "POST",
            "/forest/books?timezone=UTC",
            format!(
                "{{\"pad\":\"{}\"}}",
                "x".repeat(usize::try_from(JSON_LIMIT).unwrap())
            ),
        ),
    )
    .await;
    let create = |body: Json| request("POST", "/forest/books?timezone=UTC", Some(&body));
    f.snap("400_create_empty", create(json!({}))).await;
    f.snap_per_backend(
        "400_create_unknown_field",
        create(json!({"data": {"attributes": {"title": "x", "nope": 1}}})),
    )
    .await;
    f.snap(
        "400_create_bad_value_type",
        create(json!({"data": {"attributes": {"title": "x", "pages": "many"}}})),
    )
    .await;
    f.snap(
        "400_create_missing_required",
        create(json!({"data": {"attributes": {"pages": 3}}})),
    )
    .await;
    f.snap(
        "400_create_unknown_link",
        create(json!({"data": {"attributes": {"title": "x"},
            "relationships": {"author": {"data": {"type": "authors", "id": "99"}}}}})),
    )
    .await;
    f.snap(
        "400_update_bad_value",
        request(
            "PUT",
            "/forest/books/1?timezone=UTC",
            Some(&json!({"data": {"attributes": {"published": "tomorrow"}}})),
        ),
    )
    .await;
    f.snap(
        "400_bulk_delete_bad_ids",
        request(
            "DELETE",
            "/forest/books?timezone=UTC",
            Some(&json!({"data": {"attributes": {"ids": "1", "all_records": false}}})),
        ),
    )
    .await;
    f.snap(
        "400_dissociate_empty_ids",
        request(
            "DELETE",
            "/forest/authors/1/relationships/books?timezone=UTC",
            Some(&json!({"data": {"attributes": {"ids": [], "all_records": false}}})),
        ),
    )
    .await;
    f.snap(
        "400_associate_no_record",
        request(
            "POST",
            "/forest/authors/1/relationships/books?timezone=UTC",
            Some(&json!({"data": []})),
        ),
    )
    .await;
    f.snap(
        "400_update_to_one_bad_body",
        request(
            "PUT",
            "/forest/books/1/relationships/author?timezone=UTC",
            Some(&json!({"data": "1"})),
        ),
    )
    .await;
    let stats = |body: Json| request("POST", "/forest/stats/books?timezone=UTC", Some(&body));
    f.snap(
        "400_stats_bad_type",
        stats(json!({"type": "Smart", "sourceCollectionName": "books"})),
    )
    .await;
    f.snap(
        "400_stats_bad_aggregator",
        stats(json!({"type": "Value", "sourceCollectionName": "books", "aggregator": "Median"})),
    )
    .await;
    f.snap(
        "400_stats_unknown_context_variable",
        stats(
            json!({"type": "Value", "sourceCollectionName": "books", "aggregator": "Count",
            "filter": {"field": "title", "operator": "equal", "value": "{{nope}}"}}),
        ),
    )
    .await;
    f.snap(
        "404_stats_unknown_collection",
        request(
            "POST",
            "/forest/stats/nowhere?timezone=UTC",
            Some(&json!({"type": "Value", "aggregator": "Count"})),
        ),
    )
    .await;
    let native = |body: Json| {
        request(
            "POST",
            "/forest/_internal/native_query?timezone=UTC",
            Some(&body),
        )
    };
    f.snap(
        "422_native_query_missing_connection",
        native(json!({"type": "Value", "query": "SELECT 1 AS value FROM books"})),
    )
    .await;
    f.snap(
        "422_native_query_not_a_select",
        native(json!({"type": "Value", "connectionName": "main", "query": "DELETE FROM books"})),
    )
    .await;
    f.snap(
        "422_native_query_unknown_connection",
        native(json!({"type": "Value", "connectionName": "other",
            "query": "SELECT 1 AS value FROM books"})),
    )
    .await;
}

on_all_backends!(
    healthcheck_cors_and_authentication,
    list_count_and_get,
    csv_exports,
    create_update_delete,
    relation_routes,
    stats_native_query_and_capabilities,
    query_and_path_errors,
    body_errors,
);
