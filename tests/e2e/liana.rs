//! Canopy as the Forest server of other agents (`canopy::http::liana`) on SQLite and PostgreSQL
//! stores: the permission documents at the Forest server's paths in the §5.1 shapes, the env
//! secret on every route, the schema upload, the event stream; and the other side,
//! `platform::remote::RemoteSource`, reading them over real HTTP and feeding `Permissions`
//! (instant refresh through the events, and the time-to-live mode), failing closed when the
//! server is down or refuses the secret.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use canopy::auth::{CachePolicy, CollectionRight, Permissions, SessionKey};
use canopy::config::HttpConfig;
use canopy::datasource::sql::Options;
use canopy::datasource::{Caller, PermissionLevel};
use canopy::http::liana::LianaServer;
use canopy::http::{AppState, router};
use canopy::platform::documents::{
    CollectionPermissions, CollectionRights, EnvironmentPermissions, Grant, IpWhitelist,
    RenderingCollection,
};
use canopy::platform::remote::{Probe, RemoteSource};
use canopy::platform::{Actor, NewUser, PermissionSource, Store};
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};
use tower::ServiceExt as _;

use crate::http::send;

const ENV_SECRET: &str = "5eeded5eeded5eeded5eeded5eeded5eeded5eeded5eeded5eeded5eeded5eed";
const OTHER_SECRET: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A Canopy serving its store: the store, its router, and the databases kept alive.
struct Server {
    store: Store,
    liana: Arc<LianaServer>,
    router: Router,
    _store_db: TestDb,
    _data_db: TestDb,
}

/// The permission model the tests serve: role Reader (browse and read `books`), role Editor
/// (everything on `books`), team Ops with a scope, two users and an IP rule.
struct Model {
    reader_id: i64,
    editor_id: i64,
    reader_role: i64,
    rendering_id: i64,
}

async fn server(backend: Backend) -> Server {
    let store_db = TestDb::new(backend).await;
    let store = Store::open(&store_db.url, "acme", "production")
        .await
        .unwrap();
    let data_db = TestDb::new(Backend::Sqlite).await;
    data_db
        .execute("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        .await;
    let datasource = data_db.datasource(Options::default()).await;
    let http = HttpConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..HttpConfig::default()
    };
    let mut state = AppState::new(Arc::new(datasource), SessionKey::new("unused"), &http);
    let liana = LianaServer::new(store.clone(), ENV_SECRET);
    state.store = Some(store.clone());
    state.liana = Some(Arc::clone(&liana));
    Server {
        store,
        liana,
        router: router(Arc::new(state)),
        _store_db: store_db,
        _data_db: data_db,
    }
}

fn rights(browse: Grant, read: Grant, edit: Grant, delete: Grant) -> CollectionRights {
    CollectionRights {
        browse_enabled: browse,
        read_enabled: read,
        edit_enabled: edit,
        add_enabled: Grant::All(false),
        delete_enabled: delete,
        export_enabled: Grant::All(false),
    }
}

fn environment(rights: CollectionRights) -> EnvironmentPermissions {
    EnvironmentPermissions::Collections {
        collections: BTreeMap::from([(
            "books".to_owned(),
            CollectionPermissions {
                collection: rights,
                actions: BTreeMap::new(),
            },
        )]),
    }
}

async fn seed(store: &Store) -> Model {
    let reader = store.create_role(&Actor::System, "Reader").await.unwrap();
    let editor = store.create_role(&Actor::System, "Editor").await.unwrap();
    store.create_team(&Actor::System, "Ops").await.unwrap();
    let user = |email: &str, role: &str| NewUser {
        email: email.to_owned(),
        first_name: "Ri".to_owned(),
        last_name: "Der".to_owned(),
        permission_level: PermissionLevel::User,
        role: Some(role.to_owned()),
        teams: vec!["Ops".to_owned()],
        tags: [("region".to_owned(), "EU".to_owned())].into(),
        password_hash: None,
    };
    let reader_user = store
        .create_user(&Actor::System, user("reader@acme.io", "Reader"))
        .await
        .unwrap();
    let editor_user = store
        .create_user(&Actor::System, user("editor@acme.io", "Editor"))
        .await
        .unwrap();
    let both = Grant::Roles {
        roles: vec![reader.id, editor.id],
    };
    let editors = Grant::Roles {
        roles: vec![editor.id],
    };
    store
        .set_environment_document(
            &Actor::System,
            &environment(rights(both.clone(), both, editors.clone(), editors)),
        )
        .await
        .unwrap();
    let rendering_id = store
        .set_rendering(
            &Actor::System,
            "Ops",
            BTreeMap::from([(
                "books".to_owned(),
                RenderingCollection {
                    scope: Some(json!({"field": "title", "operator": "equal",
                        "value": "{{currentUser.tags.region}}"})),
                    segments: vec!["SELECT id FROM books".to_owned()],
                    live_query_segments: Vec::new(),
                },
            )]),
            vec![json!({"type": "Value", "sourceCollectionName": "books", "aggregator": "Count"})],
        )
        .await
        .unwrap();
    store
        .set_ip_whitelist(
            &Actor::System,
            &IpWhitelist {
                use_ip_whitelist: true,
                rules: vec![
                    json!({"type": 0, "ip": "10.0.0.1"}),
                    json!({"type": 2, "range": "192.168.0.0/16"}),
                ],
            },
        )
        .await
        .unwrap();
    Model {
        reader_id: reader_user.id,
        editor_id: editor_user.id,
        reader_role: reader.id,
        rendering_id,
    }
}

fn call(method: &str, path: &str, secret: Option<&str>, body: Option<&Json>) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(secret) = secret {
        request = request.header("forest-secret-key", secret);
    }
    match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        None => request.body(Body::empty()).unwrap(),
    }
}

async fn get_json(app: &Router, path: &str) -> Json {
    let (status, headers, body) = send(app, call("GET", path, Some(ENV_SECRET), None)).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    assert_eq!(
        headers["content-type"], "application/json; charset=utf-8",
        "{path}"
    );
    body
}

async fn documents_are_served_at_the_forest_server_paths(backend: Backend) {
    let server = server(backend).await;
    let model = seed(&server.store).await;
    let app = &server.router;

    let env = get_json(app, "/liana/v4/permissions/environment").await;
    let reader = model.reader_role;
    assert_eq!(
        env["collections"]["books"]["collection"]["browseEnabled"]["roles"][0],
        json!(reader)
    );
    assert_eq!(
        serde_json::from_value::<EnvironmentPermissions>(env).unwrap(),
        server.store.environment_document().await.unwrap()
    );

    let users = get_json(app, "/liana/v4/permissions/users").await;
    let first = &users[0];
    let mut keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "email",
            "firstName",
            "fullName",
            "id",
            "lastName",
            "permissionLevel",
            "roleId",
            "tags"
        ]
    );
    assert_eq!(
        users,
        json!([
            {"id": model.reader_id, "firstName": "Ri", "lastName": "Der", "fullName": "Ri Der",
             "email": "reader@acme.io", "permissionLevel": "user", "tags": {"region": "EU"},
             "roleId": reader},
            {"id": model.editor_id, "firstName": "Ri", "lastName": "Der", "fullName": "Ri Der",
             "email": "editor@acme.io", "permissionLevel": "user", "tags": {"region": "EU"},
             "roleId": reader + 1},
        ])
    );

    let rendering = get_json(
        app,
        &format!("/liana/v4/permissions/renderings/{}", model.rendering_id),
    )
    .await;
    assert_eq!(rendering["team"]["name"], "Ops");
    assert_eq!(
        rendering["collections"]["books"],
        json!({"scope": {"field": "title", "operator": "equal", "value": "{{currentUser.tags.region}}"},
               "segments": ["SELECT id FROM books"], "liveQuerySegments": []})
    );
    assert_eq!(rendering["stats"][0]["aggregator"], "Count");

    for unknown in ["999999", "not-a-number"] {
        let (status, _, body) = send(
            app,
            call(
                "GET",
                &format!("/liana/v4/permissions/renderings/{unknown}"),
                Some(ENV_SECRET),
                None,
            ),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(body["errors"][0]["name"], "NotFoundError");
    }

    let ips = get_json(app, "/liana/v1/ip-whitelist-rules").await;
    assert_eq!(
        ips,
        json!({"data": {"type": "ip-whitelist-rules", "id": "1", "attributes": {
            "use_ip_whitelist": true,
            "rules": [{"type": 0, "ip": "10.0.0.1"}, {"type": 2, "range": "192.168.0.0/16"}]}}})
    );

    assert_eq!(
        get_json(app, "/liana/model-customizations").await,
        json!([])
    );
    // A trailing slash is the same path, as on every route.
    assert_eq!(get_json(app, "/liana/v4/permissions/users/").await, users);
}

async fn every_route_requires_this_environments_secret(backend: Backend) {
    let server = server(backend).await;
    seed(&server.store).await;
    let hashcheck = json!({"schemaFileHash": "abc"});
    let routes: [(&str, &str, Option<&Json>); 8] = [
        ("GET", "/liana/v4/permissions/environment", None),
        ("GET", "/liana/v4/permissions/users", None),
        ("GET", "/liana/v4/permissions/renderings/1", None),
        ("GET", "/liana/v1/ip-whitelist-rules", None),
        ("GET", "/liana/v4/subscribe-to-events", None),
        ("GET", "/liana/model-customizations", None),
        ("POST", "/forest/apimaps/hashcheck", Some(&hashcheck)),
        ("POST", "/forest/apimaps", Some(&hashcheck)),
    ];
    for (method, path, body) in routes {
        let (status, _, answer) = send(&server.router, call(method, path, None, body)).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {path}: {answer}"
        );
        assert_eq!(answer["errors"][0]["status"], 401, "{path}");
        assert!(
            answer["errors"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("forest-secret-key"),
            "{answer}"
        );
        for wrong in [OTHER_SECRET, "", &ENV_SECRET[..63]] {
            let (status, _, answer) =
                send(&server.router, call(method, path, Some(wrong), body)).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
            assert_eq!(answer["errors"][0]["name"], "ForbiddenError");
        }
    }
    // Nothing was stored by the refused upload.
    assert!(server.store.apimap().await.unwrap().is_none());
}

async fn schema_upload_is_checked_by_hash_and_kept_per_environment(backend: Backend) {
    let server = server(backend).await;
    let app = &server.router;
    let check = |hash: &str| {
        call(
            "POST",
            "/forest/apimaps/hashcheck",
            Some(ENV_SECRET),
            Some(&json!({"schemaFileHash": hash})),
        )
    };
    let (status, _, body) = send(app, check("h1")).await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"sendSchema": true}))
    );

    let apimap = json!({
        "data": [{"type": "collections", "id": "books",
                  "attributes": {"name": "books", "fields": [{"field": "id", "type": "Number"}]},
                  "relationships": {"segments": {"data": []}, "actions": {"data": []}}}],
        "included": [],
        "meta": {"liana": "forest-nodejs-agent", "liana_version": "1.0.0", "liana_features": null,
                 "stack": {"engine": "nodejs", "engine_version": "22.0.0"}, "schemaFileHash": "h1"},
    });
    let (status, _, body) = send(
        app,
        call("POST", "/forest/apimaps", Some(ENV_SECRET), Some(&apimap)),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (_, _, body) = send(app, check("h1")).await;
    assert_eq!(
        body,
        json!({"sendSchema": false}),
        "same hash: nothing to send"
    );
    let (_, _, body) = send(app, check("h2")).await;
    assert_eq!(
        body,
        json!({"sendSchema": true}),
        "a changed schema is sent"
    );
    assert_eq!(get_json(app, "/liana/forest-schema").await, apimap);

    // Kept per environment: another environment of the same store has none.
    let staging = server.store.for_environment("staging");
    assert!(staging.schema_file_hash().await.unwrap().is_none());
    assert_eq!(
        server.store.schema_file_hash().await.unwrap().as_deref(),
        Some("h1")
    );

    // Malformed uploads are refused and change nothing.
    for bad in [
        json!({"data": {}, "meta": {"schemaFileHash": "h3"}}),
        json!({"data": []}),
        json!([1, 2]),
    ] {
        let (status, _, body) = send(
            app,
            call("POST", "/forest/apimaps", Some(ENV_SECRET), Some(&bad)),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let not_json = Request::post("/forest/apimaps")
        .header("forest-secret-key", ENV_SECRET)
        .body(Body::from("{nope"))
        .unwrap();
    let (status, _, _) = send(app, not_json).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, body) = send(
        app,
        call(
            "POST",
            "/forest/apimaps/hashcheck",
            Some(ENV_SECRET),
            Some(&json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        server.store.schema_file_hash().await.unwrap().as_deref(),
        Some("h1")
    );
}

/// Reads the event stream until an event of `kind` arrives (or panics after `within`); returns
/// its data.
async fn next_event(body: &mut axum::body::BodyDataStream, kind: &str, within: Duration) -> Json {
    use futures::StreamExt as _;
    let deadline = Instant::now() + within;
    let mut text = String::new();
    loop {
        if let Some(at) = text.find(&format!("event: {kind}\n")) {
            let rest = &text[at..];
            if let Some(end) = rest.find("\n\n") {
                let data = rest[..end]
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .unwrap_or("null");
                return serde_json::from_str(data).unwrap();
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, body.next()).await {
            Ok(Some(Ok(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
            other => panic!("no {kind:?} event within {within:?} ({other:?}); got {text:?}"),
        }
    }
}

async fn event_stream_sends_heartbeats_and_refreshes_on_store_changes(backend: Backend) {
    let server = server(backend).await;
    let model = seed(&server.store).await;
    let response = server
        .router
        .clone()
        .oneshot(call(
            "GET",
            "/liana/v4/subscribe-to-events",
            Some(ENV_SECRET),
            None,
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body().into_data_stream();
    // A heartbeat at once: the agent logs an error when none comes within 45 s.
    next_event(&mut body, "heartbeat", Duration::from_secs(5)).await;

    // A change made through another handle on the same database (as the CLI or another instance
    // would make it) is seen: the admin log moved.
    let other = Store::open(server.store_url(), "acme", "production")
        .await
        .unwrap();
    let sales = other.create_team(&Actor::System, "Sales").await.unwrap();
    next_event(&mut body, "refresh-users", Duration::from_secs(10)).await;
    next_event(&mut body, "refresh-roles", Duration::from_secs(1)).await;
    let renderings = next_event(&mut body, "refresh-renderings", Duration::from_secs(1)).await;
    // The new team's rendering is created with it, so the event names it already.
    let sales_rendering = *other
        .rendering_ids_by_team()
        .await
        .unwrap()
        .get(&sales.id)
        .expect("a team's rendering is created with the team");
    assert_eq!(
        renderings,
        json!({"renderingIds": [model.rendering_id, sales_rendering]})
    );

    // The server stopping ends the stream (the graceful shutdown does not wait for it).
    server.liana.close_event_streams();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        use futures::StreamExt as _;
        while body.next().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the stream ends once the server stops");
}

impl Server {
    fn store_url(&self) -> &str {
        &self._store_db.url
    }
}

/// Serves `router` on a real socket; returns its base URL.
async fn listen(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}")
}

fn caller(id: i64) -> Caller {
    Caller {
        id,
        ..canopy_e2e::caller()
    }
}

/// Retries `check` until it holds, for at most `within`.
async fn eventually(within: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check().await
}

async fn remote_source_applies_another_instances_permissions(backend: Backend) {
    let server = server(backend).await;
    let model = seed(&server.store).await;
    let url = listen(server.router.clone()).await;

    let remote = RemoteSource::new(&url, ENV_SECRET).unwrap();
    assert!(matches!(remote.probe().await, Probe::Ready));
    // The documents read over HTTP are the store's.
    assert_eq!(
        remote.environment_permissions().await.unwrap(),
        server.store.environment_document().await.unwrap()
    );
    assert_eq!(
        PermissionSource::users(&remote).await.unwrap(),
        PermissionSource::users(&server.store).await.unwrap()
    );
    assert_eq!(
        remote.rendering(model.rendering_id).await.unwrap(),
        server.store.rendering(model.rendering_id).await.unwrap()
    );
    assert_eq!(
        remote.ip_whitelist().await.unwrap(),
        server.store.ip_whitelist_document().await.unwrap()
    );
    assert!(matches!(
        remote.rendering(424242).await,
        Err(canopy::platform::Error::NotFound(_))
    ));

    // instantCacheRefresh: documents are cached until the server's events say they changed.
    remote.subscribe_to_events().unwrap();
    let permissions = Permissions::new(
        Arc::new(remote),
        CachePolicy::new(true, Duration::from_secs(900)),
    );
    let reader = caller(model.reader_id);
    let editor = caller(model.editor_id);
    permissions
        .can(&reader, "books", CollectionRight::Browse)
        .await
        .unwrap();
    permissions
        .can(&editor, "books", CollectionRight::Delete)
        .await
        .unwrap();
    let denied = permissions
        .can(&reader, "books", CollectionRight::Delete)
        .await;
    assert!(
        matches!(denied, Err(canopy::auth::Error::Forbidden(ref d)) if d == "Forbidden"),
        "{denied:?}"
    );
    // An id the server does not list is refused.
    assert!(permissions.user(&caller(987_654)).await.is_err());
    let scope = permissions.rendering(model.rendering_id).await.unwrap();
    assert_eq!(scope.team.name, "Ops");

    // The server grants delete to readers: the event refreshes the client's cache.
    let everyone = Grant::All(true);
    server
        .store
        .set_environment_document(
            &Actor::System,
            &environment(rights(
                everyone.clone(),
                everyone.clone(),
                everyone.clone(),
                everyone,
            )),
        )
        .await
        .unwrap();
    let granted = eventually(Duration::from_secs(10), async || {
        permissions
            .can(&reader, "books", CollectionRight::Delete)
            .await
            .is_ok()
    })
    .await;
    assert!(granted, "the grant reaches the client through the events");
}

async fn time_to_live_mode_refetches_once_on_a_denial(backend: Backend) {
    let server = server(backend).await;
    let model = seed(&server.store).await;
    let url = listen(server.router.clone()).await;
    // instantCacheRefresh = false: no events, a time to live, and one refetch on a denial.
    let permissions = Permissions::new(
        Arc::new(RemoteSource::new(&url, ENV_SECRET).unwrap()),
        CachePolicy::new(false, Duration::from_secs(900)),
    );
    let reader = caller(model.reader_id);
    assert!(
        permissions
            .can(&reader, "books", CollectionRight::Edit)
            .await
            .is_err()
    );
    let editors_and_readers = Grant::Roles {
        roles: vec![model.reader_role, model.reader_role + 1],
    };
    server
        .store
        .set_environment_document(
            &Actor::System,
            &environment(rights(
                editors_and_readers.clone(),
                editors_and_readers.clone(),
                editors_and_readers.clone(),
                Grant::All(false),
            )),
        )
        .await
        .unwrap();
    // The cached document (fetched just now, 900 s to live) denies; the refetch allows.
    permissions
        .can(&reader, "books", CollectionRight::Edit)
        .await
        .unwrap();
}

async fn remote_source_fails_closed(backend: Backend) {
    let server = server(backend).await;
    let model = seed(&server.store).await;
    let url = listen(server.router.clone()).await;

    // Another environment's secret: refused at the probe, and every check fails closed.
    let wrong = RemoteSource::new(&url, OTHER_SECRET).unwrap();
    match wrong.probe().await {
        Probe::Refused(error) => assert!(error.to_string().contains("Forbidden"), "{error}"),
        other => panic!("{other:?}"),
    }
    let permissions = Permissions::new(Arc::new(wrong), CachePolicy::new(true, Duration::ZERO));
    let refused = permissions
        .can(&caller(model.reader_id), "books", CollectionRight::Browse)
        .await;
    assert!(
        matches!(refused, Err(canopy::auth::Error::PermissionsUnavailable(ref m)) if m.contains("Forbidden")),
        "{refused:?}"
    );

    // No server at all: unavailable with the agent's wording, checks refused.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let down = RemoteSource::new(&format!("http://127.0.0.1:{port}"), ENV_SECRET).unwrap();
    match down.probe().await {
        Probe::Unavailable(error) => assert!(
            error
                .to_string()
                .contains("Failed to reach the permission server at http://127.0.0.1:"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    let permissions = Permissions::new(Arc::new(down), CachePolicy::new(true, Duration::ZERO));
    let refused = permissions
        .can(&caller(model.editor_id), "books", CollectionRight::Browse)
        .await;
    assert!(
        matches!(refused, Err(canopy::auth::Error::PermissionsUnavailable(ref m)) if m.contains("Failed to reach")),
        "{refused:?}"
    );
}

macro_rules! on_store_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() { super::$name(canopy_e2e::Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() { super::$name(canopy_e2e::Backend::Postgres).await }
            }
        )*
    };
}

on_store_backends!(
    documents_are_served_at_the_forest_server_paths,
    every_route_requires_this_environments_secret,
    schema_upload_is_checked_by_hash_and_kept_per_environment,
    event_stream_sends_heartbeats_and_refreshes_on_store_changes,
    remote_source_applies_another_instances_permissions,
    time_to_live_mode_refetches_once_on_a_denial,
    remote_source_fails_closed,
);

/// `/liana/…` is not served by an instance without a permission server (one that reads its own
/// permissions from elsewhere, or a bare stack): the agent's plain 404.
#[tokio::test]
async fn an_instance_without_a_store_serves_no_permission_documents() {
    let data_db = TestDb::new(Backend::Sqlite).await;
    data_db
        .execute("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        .await;
    let datasource = data_db.datasource(Options::default()).await;
    let state = AppState::new(
        Arc::new(datasource),
        SessionKey::new("unused"),
        &HttpConfig::default(),
    );
    let bare = router(Arc::new(state));
    let (status, _, body) = send(
        &bare,
        call("GET", "/liana/v4/permissions/users", Some(ENV_SECRET), None),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!("Not Found"));
}

/// A collection named `apimaps` served at `/forest` keeps its routes: only a call carrying
/// `forest-secret-key` is a schema upload; elsewhere `/forest/apimaps` is always the upload.
#[tokio::test]
async fn a_collection_named_apimaps_keeps_its_routes() {
    let store_db = TestDb::new(Backend::Sqlite).await;
    let store = Store::open(&store_db.url, "acme", "production")
        .await
        .unwrap();
    let data_db = TestDb::new(Backend::Sqlite).await;
    data_db
        .execute("CREATE TABLE apimaps (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        .await;
    let datasource = data_db.datasource(Options::default()).await;
    let mut state = AppState::new(
        Arc::new(datasource),
        SessionKey::new("a-test-auth-secret"),
        &HttpConfig::default(),
    );
    state.store = Some(store.clone());
    state.liana = Some(LianaServer::new(store.clone(), ENV_SECRET));
    let app = router(Arc::new(state));

    // The agent's own route: a list with the session token, a create refused without one.
    let (status, _, body) = send(&app, crate::http::get("/forest/apimaps?timezone=UTC")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = send(
        &app,
        call("POST", "/forest/apimaps", None, Some(&json!({"data": {}}))),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["errors"][0]["detail"], "Authentication Error");
    // With the env secret: the schema upload.
    let (status, _, body) = send(
        &app,
        call(
            "POST",
            "/forest/apimaps/hashcheck",
            Some(ENV_SECRET),
            Some(&json!({"schemaFileHash": "h"})),
        ),
    )
    .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"sendSchema": true}))
    );
}
