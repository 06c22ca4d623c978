//! Canopy as the Forest server of other agents: the calls an agent makes to its server (protocol
//! §5.1), answered from this instance's store, at the Forest server's own paths (outside the
//! `/{prefix}/forest` mount), so that another Canopy (`--server-url`) or a Node agent
//! (`forestServerUrl`) takes its permissions from this one.
//!
//! - `GET /liana/v4/permissions/environment`, `/users`, `/renderings/{id}` and
//!   `GET /liana/v1/ip-whitelist-rules`: the documents of `platform::documents` (the `"*"`
//!   wildcard written out for the collections and actions of the uploaded schema);
//! - `POST /forest/apimaps/hashcheck` and `POST /forest/apimaps`: the agent's schema upload at
//!   start, kept per environment;
//! - `GET /liana/v4/subscribe-to-events`: server-sent events, a `heartbeat` at once and then
//!   regularly, and `refresh-users`, `refresh-roles`, `refresh-renderings` when the permission
//!   model changes (whichever process changed it: the store's admin log moves);
//! - `GET /liana/model-customizations` (`[]`: no no-code customizations) and
//!   `GET /liana/forest-schema` (the uploaded schema).
//!
//! Every call carries `forest-secret-key: <envSecret>`. One Canopy process serves one
//! environment, so the only secret accepted is this process's own: missing → 401, another → 403
//! (compared in constant time). An instance that reads its own permissions from another server
//! does not serve these routes (`AppState::liana` is `None`): the documents it would serve are
//! not the ones it applies.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value as Json, json};
use tokio::sync::watch;
use tower::ServiceExt as _;

use super::SharedState;
use super::error::envelope;
use super::reload::constant_time_eq;
use crate::platform::remote::SECRET_HEADER;
use crate::platform::{self, PermissionSource as _, Store};

/// How often the event stream sends a heartbeat (the agent warns when none came within 45 s).
const HEARTBEAT: Duration = Duration::from_secs(25);

/// How often the store is looked at for changes while some agent follows the events.
const CHANGE_POLL: Duration = Duration::from_secs(1);

/// The schema upload paths, under the agent's fixed `/forest` (not the mount prefix).
const HASHCHECK_PATH: &str = "/forest/apimaps/hashcheck";
const APIMAPS_PATH: &str = "/forest/apimaps";

/// This instance as a permission server: its store, its env secret, and the change feed of its
/// event streams. One per process, shared by every generation of the served stack.
pub struct LianaServer {
    store: Store,
    /// Never printed (`Debug` leaves it out).
    env_secret: String,
    /// The latest change seen in the store, for the event streams.
    changes: watch::Sender<Change>,
    /// The task looking for changes, started by the first event stream.
    poller: OnceLock<()>,
    /// The store's change marker last seen while some stream was open; `None` while none is.
    /// A stream sets it when it opens, so that a change right after is not taken for the
    /// starting point.
    seen: tokio::sync::Mutex<Option<Marker>>,
    /// `true` once the server stops: event streams end, so that the graceful shutdown (which
    /// waits for every response to finish) is not held by a stream meant to stay open.
    closing: watch::Sender<bool>,
    /// `GET /liana/model-customizations`: the no-code actions of this server's config file and
    /// the switches that gate those added from the console.
    no_code: crate::config::ExperimentalConfig,
}

/// What tells a change: this process's generation and the store's newest admin log id.
type Marker = (u64, Option<String>);

/// A change of the permission model, numbered, with the renderings to refresh.
#[derive(Debug, Clone, Default)]
struct Change {
    version: u64,
    rendering_ids: Arc<Vec<i64>>,
}

impl std::fmt::Debug for LianaServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LianaServer")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl LianaServer {
    /// Serves `store`'s environment to the agents presenting `env_secret`.
    pub fn new(store: Store, env_secret: &str) -> Arc<Self> {
        Self::with_no_code_actions(store, env_secret, Default::default())
    }

    /// [`Self::new`], handing the no-code actions of `no_code` (and those the console added, of
    /// the types it switches on) to the agents.
    pub fn with_no_code_actions(
        store: Store,
        env_secret: &str,
        no_code: crate::config::ExperimentalConfig,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            env_secret: env_secret.to_owned(),
            changes: watch::Sender::new(Change::default()),
            poller: OnceLock::new(),
            seen: tokio::sync::Mutex::new(None),
            closing: watch::Sender::new(false),
            no_code,
        })
    }

    /// Ends every event stream, now and on arrival (the server is stopping).
    pub fn close_event_streams(&self) {
        self.closing.send_replace(true);
    }

    /// Checks `forest-secret-key` against this environment's secret: the refusal, if any.
    fn refusal(&self, headers: &HeaderMap) -> Option<Response> {
        let Some(presented) = headers.get(SECRET_HEADER) else {
            return Some(envelope(
                StatusCode::UNAUTHORIZED,
                "UnauthorizedError",
                "The forest-secret-key header (the environment secret) is required",
            ));
        };
        if constant_time_eq(presented.as_bytes(), self.env_secret.as_bytes()) {
            None
        } else {
            tracing::warn!(
                target: "canopy::http",
                "permission server call refused: the forest-secret-key is not this environment's secret"
            );
            Some(envelope(
                StatusCode::FORBIDDEN,
                "ForbiddenError",
                "The forest-secret-key does not match the secret of this environment",
            ))
        }
    }

    /// A receiver of the changes from now on: the starting point is read now if no other
    /// stream holds one, and the poller is started once (inside the runtime of the first stream).
    async fn watch_changes(self: &Arc<Self>) -> watch::Receiver<Change> {
        self.poller.get_or_init(|| {
            tokio::spawn(poll_changes(Arc::downgrade(self)));
        });
        let mut seen = self.seen.lock().await;
        let mut changes = self.changes.subscribe();
        changes.mark_unchanged();
        if seen.is_none() {
            match self.marker().await {
                Ok(marker) => *seen = Some(marker),
                // The poller will take its starting point at its next look.
                Err(error) => {
                    tracing::warn!(%error, "event stream: cannot read the store's changes")
                }
            }
        }
        changes
    }

    async fn marker(&self) -> platform::Result<Marker> {
        Ok((self.store.generation(), self.store.change_marker().await?))
    }
}

/// Looks at the store while someone follows the events; stops with the server.
async fn poll_changes(server: Weak<LianaServer>) {
    loop {
        tokio::time::sleep(CHANGE_POLL).await;
        let Some(server) = server.upgrade() else {
            return;
        };
        let mut seen = server.seen.lock().await;
        if server.changes.receiver_count() == 0 {
            // Nobody listens: the next stream starts from what the store is then.
            *seen = None;
            continue;
        }
        let marker = match server.marker().await {
            Ok(marker) => marker,
            Err(error) => {
                tracing::warn!(%error, "event stream: cannot read the store's changes");
                continue;
            }
        };
        let changed = seen.as_ref().is_some_and(|seen| *seen != marker);
        *seen = Some(marker);
        drop(seen);
        if !changed {
            continue;
        }
        let rendering_ids = match server.store.rendering_ids().await {
            Ok(ids) => ids,
            Err(error) => {
                tracing::warn!(%error, "event stream: cannot list the renderings");
                Vec::new()
            }
        };
        server.changes.send_modify(|change| {
            change.version += 1;
            change.rendering_ids = Arc::new(rendering_ids);
        });
    }
}

/// The routes of the permission server, with their state.
fn routes(server: Arc<LianaServer>) -> Router {
    Router::new()
        .route("/liana/v4/permissions/environment", get(environment))
        .route("/liana/v4/permissions/users", get(users))
        .route("/liana/v4/permissions/renderings/{id}", get(rendering))
        .route("/liana/v1/ip-whitelist-rules", get(ip_whitelist))
        .route("/liana/v4/subscribe-to-events", get(events))
        .route("/liana/model-customizations", get(model_customizations))
        .route("/liana/forest-schema", get(forest_schema))
        .route(HASHCHECK_PATH, post(hashcheck))
        .route(APIMAPS_PATH, post(apimaps))
        .method_not_allowed_fallback(super::error::not_found)
        .fallback(super::error::not_found)
        .with_state(server)
}

/// `rest` with the permission server's routes in front of it: `/liana/…`, and the two
/// `/forest/apimaps…` paths, which stay the agent's own when it serves a collection named
/// `apimaps` at `/forest` (then only a call with `forest-secret-key` is a schema upload).
/// Without a [`LianaServer`] on the state, `rest` alone.
pub fn around(state: &SharedState, rest: Router) -> Router {
    let Some(server) = state.liana.clone() else {
        return rest;
    };
    let liana = routes(server);
    let apimaps_is_a_collection = state.mount_path == "/forest"
        && state
            .datasource
            .schema()
            .collections
            .contains_key("apimaps");
    Router::new().fallback_service(tower::service_fn(move |request: Request| {
        let path = request.uri().path();
        let to_liana = path.starts_with("/liana/")
            || ((path == APIMAPS_PATH || path == HASHCHECK_PATH)
                && (!apimaps_is_a_collection || request.headers().contains_key(SECRET_HEADER)));
        let target = if to_liana {
            liana.clone()
        } else {
            rest.clone()
        };
        target.oneshot(request)
    }))
}

/// A store failure: logged, and answered as the server's unexpected error (no details: they may
/// name tables or the database).
fn store_error(error: &platform::Error) -> Response {
    tracing::error!(%error, "permission server: the store failed");
    envelope(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalServerError",
        "Unexpected error",
    )
}

fn answer<T: serde::Serialize>(result: platform::Result<T>) -> Response {
    match result {
        Ok(value) => super::json(&value),
        Err(error) => store_error(&error),
    }
}

async fn environment(State(server): State<Arc<LianaServer>>, headers: HeaderMap) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    answer(served_environment(&server.store).await)
}

/// The environment document as an agent reads it: `"*"` entries written out for the collections
/// and actions of the schema the agents uploaded, since the Node agent only looks names up (the
/// `"*"` entries stay, for another Canopy, which reads them for its own names).
async fn served_environment(store: &Store) -> platform::Result<platform::EnvironmentPermissions> {
    let document = store.environment_document().await?;
    if !document.has_wildcard() {
        return Ok(document);
    }
    let names = store.apimap().await?.map(|a| a.names()).unwrap_or_default();
    Ok(document.expanded(&names))
}

async fn users(State(server): State<Arc<LianaServer>>, headers: HeaderMap) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    answer(platform::PermissionSource::users(&server.store).await)
}

async fn rendering(
    State(server): State<Arc<LianaServer>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    let not_found = || {
        envelope(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("Rendering {id} not found in this environment"),
        )
    };
    let Ok(rendering_id) = id.parse::<i64>() else {
        return not_found();
    };
    match server.store.rendering_document(rendering_id).await {
        Ok(Some(rendering)) => super::json(&rendering),
        Ok(None) => not_found(),
        Err(error) => store_error(&error),
    }
}

async fn ip_whitelist(State(server): State<Arc<LianaServer>>, headers: HeaderMap) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    answer(
        server
            .store
            .ip_whitelist_document()
            .await
            .map(platform::IpWhitelist::into_document),
    )
}

async fn model_customizations(
    State(server): State<Arc<LianaServer>>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    let mut actions = server.no_code.actions.clone();
    actions.extend(
        crate::no_code::stored(&server.store, &server.no_code)
            .await
            .into_iter()
            .map(|(_, action)| action),
    );
    super::json(&crate::no_code::model_customizations(&actions))
}

async fn forest_schema(State(server): State<Arc<LianaServer>>, headers: HeaderMap) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    match server.store.apimap().await {
        Ok(Some(apimap)) => super::json(&apimap.document),
        Ok(None) => envelope(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            "No agent of this environment has sent its schema yet",
        ),
        Err(error) => store_error(&error),
    }
}

/// A JSON body, or why it is not one.
fn json_body(body: &Bytes) -> Result<Json, String> {
    serde_json::from_slice(body).map_err(|e| format!("The body is not valid JSON: {e}"))
}

fn bad_request(detail: &str) -> Response {
    envelope(StatusCode::BAD_REQUEST, "BadRequestError", detail)
}

/// `POST /forest/apimaps/hashcheck {schemaFileHash}` → `{sendSchema}`: whether the agent must
/// upload its schema (it changed since the last upload of this environment).
async fn hashcheck(
    State(server): State<Arc<LianaServer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    let body = match json_body(&body) {
        Ok(body) => body,
        Err(message) => return bad_request(&message),
    };
    let Some(hash) = body.get("schemaFileHash").and_then(Json::as_str) else {
        return bad_request("The body must be {\"schemaFileHash\": \"<sha1 hex>\"}");
    };
    match server.store.schema_file_hash().await {
        Ok(stored) => super::json(&json!({"sendSchema": stored.as_deref() != Some(hash)})),
        Err(error) => store_error(&error),
    }
}

/// `POST /forest/apimaps`: the agent's schema as a JSON:API document (`data` collections,
/// `included` segments and actions, `meta.schemaFileHash`), kept as sent.
async fn apimaps(
    State(server): State<Arc<LianaServer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    let document = match json_body(&body) {
        Ok(document) => document,
        Err(message) => return bad_request(&message),
    };
    if !document.get("data").is_some_and(Json::is_array) {
        return bad_request(
            "The schema must be a JSON:API document whose data is the array of collections",
        );
    }
    let Some(hash) = document
        .pointer("/meta/schemaFileHash")
        .and_then(Json::as_str)
        .map(str::to_owned)
    else {
        return bad_request("The schema's meta.schemaFileHash is missing");
    };
    match server.store.set_apimap(&hash, &document).await {
        Ok(()) => {
            tracing::info!(
                environment = server.store.environment(),
                hash,
                "schema received from an agent"
            );
            StatusCode::NO_CONTENT.into_response()
        }
        Err(error) => store_error(&error),
    }
}

/// `GET /liana/v4/subscribe-to-events`: server-sent events (see the module notes).
async fn events(State(server): State<Arc<LianaServer>>, headers: HeaderMap) -> Response {
    if let Some(refused) = server.refusal(&headers) {
        return refused;
    }
    let feed = Feed {
        changes: server.watch_changes().await,
        closing: server.closing.subscribe(),
        heartbeat: tokio::time::interval(HEARTBEAT),
        pending: VecDeque::new(),
    };
    let stream = futures::stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await?;
        Some((Ok::<_, Infallible>(event), feed))
    });
    (
        // A buffering proxy (nginx) would hold the events back.
        [("x-accel-buffering", HeaderValue::from_static("no"))],
        Sse::new(stream),
    )
        .into_response()
}

/// One event stream's state.
struct Feed {
    changes: watch::Receiver<Change>,
    closing: watch::Receiver<bool>,
    heartbeat: tokio::time::Interval,
    pending: VecDeque<Event>,
}

impl Feed {
    /// The next event, or `None` once the server stops.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if *self.closing.borrow() {
                return None;
            }
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            tokio::select! {
                _ = self.heartbeat.tick() => {
                    self.pending.push_back(Event::default().event("heartbeat").data("{}"));
                }
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                    let ids = Arc::clone(&self.changes.borrow_and_update().rendering_ids);
                    self.pending.push_back(Event::default().event("refresh-users").data("{}"));
                    self.pending.push_back(Event::default().event("refresh-roles").data("{}"));
                    self.pending.push_back(
                        Event::default()
                            .event("refresh-renderings")
                            .data(json!({"renderingIds": *ids}).to_string()),
                    );
                }
                closed = self.closing.changed() => {
                    if closed.is_err() {
                        return None;
                    }
                }
            }
        }
    }
}
