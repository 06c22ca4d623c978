//! The permission documents read from a Forest-compatible server (`--server-url`): the Forest
//! server itself, or another Canopy serving its store (`http::liana`). The calls are the agent's
//! (protocol §5.1, `forestadmin-client` `utils/server.ts`): header `forest-secret-key`, a 10 s
//! timeout, and the same reading of the server's errors (403, 404, unreachable or 502, 503,
//! timeout), so an operator meets the messages the Node agent would print.
//!
//! With `instantCacheRefresh`, [`RemoteSource::subscribe_to_events`] follows the server's
//! `/liana/v4/subscribe-to-events` stream: each `refresh-*` event (and each connection, since
//! events may have been missed before it) moves this source's generation, and `Permissions`
//! refetches every document on its next check. Moving a generation rather than clearing caches
//! also drops a document whose fetch was in flight when the event came.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::agent::schema_file::SchemaFile;

use super::documents::{
    EnvironmentPermissions, IpWhitelist, IpWhitelistDocument, Rendering, UserEntry,
};
use super::{Error, PermissionSource, Result};

/// The agent's timeout of every call to the server (`maxTimeAllowed`).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The header carrying the env secret, which names the environment to the server.
pub const SECRET_HEADER: &str = "forest-secret-key";

/// The schema upload's timeout (`schemaPublicationTimeout`).
pub const SCHEMA_TIMEOUT: Duration = Duration::from_secs(30);

/// The events path (SSE).
pub const EVENTS_PATH: &str = "/liana/v4/subscribe-to-events";

/// How long the event stream waits before reconnecting (the agent's `reconnectInterval`).
const RECONNECT: Duration = Duration::from_secs(5);

/// How long after connecting a first heartbeat must come before the agent's warning is logged.
const HEARTBEAT_WARNING: Duration = Duration::from_secs(45);

/// A `PermissionSource` over HTTP.
pub struct RemoteSource {
    client: reqwest::Client,
    /// The server's URL without a trailing slash.
    base: String,
    /// The same, without credentials, for messages.
    shown: String,
    env_secret: String,
    generation: Arc<AtomicU64>,
    /// The event stream's task, stopped with the source.
    events: std::sync::Mutex<Option<tokio::task::AbortHandle>>,
}

impl std::fmt::Debug for RemoteSource {
    // The env secret is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSource")
            .field("server", &self.shown)
            .finish_non_exhaustive()
    }
}

impl Drop for RemoteSource {
    fn drop(&mut self) {
        if let Some(task) = self
            .events
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

impl RemoteSource {
    /// A source reading from `server_url` (`http://` or `https://`) as the environment of
    /// `env_secret`.
    pub fn new(server_url: &str, env_secret: &str) -> Result<Self> {
        let base = server_url.trim_end_matches('/').to_owned();
        let shown = match reqwest::Url::parse(&base) {
            Ok(mut url) if matches!(url.scheme(), "http" | "https") => {
                let _ = url.set_username("");
                let _ = url.set_password(None);
                url.as_str().trim_end_matches('/').to_owned()
            }
            _ => {
                return Err(Error::Invalid(format!(
                    "the permission server URL must be an http:// or https:// URL, not {base:?}"
                )));
            }
        };
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            // A redirect would carry the env secret to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::Remote(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            base,
            shown,
            env_secret: env_secret.to_owned(),
            generation: Arc::new(AtomicU64::new(1)),
            events: std::sync::Mutex::new(None),
        })
    }

    /// The server's URL, without credentials.
    pub fn server(&self) -> &str {
        &self.shown
    }

    /// `GET {server}{path}` as the agent sends it, read as `T`.
    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let body = self.call(reqwest::Method::GET, path, None, TIMEOUT).await?;
        read(&body, &format!("{}{path}", self.shown))
    }

    /// One call to the server with the env secret: the body of a 2xx answer, else the error as
    /// the agent reads it.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
        timeout: Duration,
    ) -> Result<Vec<u8>> {
        let shown = format!("{}{path}", self.shown);
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .timeout(timeout)
            .header(SECRET_HEADER, &self.env_secret)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transport_error(&e, &shown, timeout))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&e, &shown, timeout))?;
        if !(200..300).contains(&status) {
            return Err(server_error(status, &body, &shown));
        }
        Ok(body.to_vec())
    }

    /// The agent's schema upload at start (protocol §6.1): `POST /forest/apimaps/hashcheck`,
    /// then, only if the server asks for it, `POST /forest/apimaps` with the schema as a
    /// JSON:API document (30 s). Returns whether the schema was sent.
    pub async fn send_schema(&self, schema: &SchemaFile) -> Result<bool> {
        let hash = schema.hash();
        let path = "/forest/apimaps/hashcheck";
        let answer = self
            .call(
                reqwest::Method::POST,
                path,
                Some(&serde_json::json!({"schemaFileHash": hash})),
                TIMEOUT,
            )
            .await?;
        let answer: HashCheck = read(&answer, &format!("{}{path}", self.shown))?;
        if answer.send_schema {
            self.call(
                reqwest::Method::POST,
                "/forest/apimaps",
                Some(&apimap(schema, &hash)),
                SCHEMA_TIMEOUT,
            )
            .await?;
        }
        Ok(answer.send_schema)
    }

    /// A request that got no answer: timed out, or the server could not be reached.
    fn transport_error(&self, error: &reqwest::Error, url: &str, timeout: Duration) -> Error {
        if error.is_timeout() {
            Error::Remote(format!(
                "the request to the permission server timed out after {} s while trying to \
                 reach {url}",
                timeout.as_secs()
            ))
        } else {
            Error::Remote(format!(
                "Failed to reach the permission server at {}. Is it running? ({})",
                self.shown,
                error_chain(error)
            ))
        }
    }

    /// One call at start, so that a wrong configuration shows at once: `Refused` when the server
    /// does not accept the env secret (401, 403, 404: a configuration error), `Unavailable` when
    /// it cannot answer now (checks fail closed until it can).
    pub async fn probe(&self) -> Probe {
        let url = format!("{}/liana/v4/permissions/environment", self.base);
        let shown = format!("{}/liana/v4/permissions/environment", self.shown);
        let response = self
            .client
            .get(&url)
            .header(SECRET_HEADER, &self.env_secret)
            .send()
            .await;
        match response {
            Ok(response) if response.status().is_success() => Probe::Ready,
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.bytes().await.unwrap_or_default();
                let error = server_error(status, &body, &shown);
                if matches!(status, 401 | 403 | 404) {
                    Probe::Refused(error)
                } else {
                    Probe::Unavailable(error)
                }
            }
            Err(error) => Probe::Unavailable(self.transport_error(&error, &shown, TIMEOUT)),
        }
    }

    /// Follows the server's event stream until the source is dropped: every `refresh-*` event
    /// and every connection moves the generation (see the module notes). Call once, inside a
    /// tokio runtime.
    pub fn subscribe_to_events(&self) -> Result<()> {
        // No overall timeout (the stream is meant to stay open); keep-alive probes notice a
        // dead peer, and a closed stream reconnects.
        let client = reqwest::Client::builder()
            .connect_timeout(TIMEOUT)
            .tcp_keepalive(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::Remote(format!("cannot build the HTTP client: {e}")))?;
        let stream = EventStream {
            client,
            url: format!("{}{EVENTS_PATH}", self.base),
            shown: format!("{}{EVENTS_PATH}", self.shown),
            env_secret: self.env_secret.clone(),
            generation: Arc::clone(&self.generation),
        };
        let task = tokio::spawn(stream.run()).abort_handle();
        let previous = self
            .events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace(task);
        if let Some(previous) = previous {
            previous.abort();
        }
        Ok(())
    }
}

#[async_trait]
impl PermissionSource for RemoteSource {
    async fn environment_permissions(&self) -> Result<EnvironmentPermissions> {
        self.get("/liana/v4/permissions/environment").await
    }

    async fn users(&self) -> Result<Vec<UserEntry>> {
        self.get("/liana/v4/permissions/users").await
    }

    async fn rendering(&self, rendering_id: i64) -> Result<Rendering> {
        self.get(&format!("/liana/v4/permissions/renderings/{rendering_id}"))
            .await
    }

    async fn ip_whitelist(&self) -> Result<IpWhitelist> {
        let document: IpWhitelistDocument = self.get("/liana/v1/ip-whitelist-rules").await?;
        Ok(document.data.attributes)
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// `{sendSchema}` of the hash check.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct HashCheck {
    send_schema: bool,
}

/// A 2xx body read as `T`.
fn read<T: DeserializeOwned>(body: &[u8], url: &str) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| {
        Error::Remote(format!(
            "the permission server answered {url} with a document Canopy cannot read: {e}"
        ))
    })
}

/// The schema as the agent uploads it (`SchemaService.serialize`, json-api-serializer): each
/// collection a `collections` resource whose attributes are its keys but `segments` and
/// `actions`, which become relationships to resources of the `included` list; `meta` is the
/// schema's with the `schemaFileHash`.
pub fn apimap(schema: &SchemaFile, hash: &str) -> serde_json::Value {
    use serde_json::{Map, Value as Json, json};
    let mut data = Vec::with_capacity(schema.collections.len());
    let mut included: Vec<Json> = Vec::new();
    for collection in &schema.collections {
        let Json::Object(keys) = collection else {
            continue;
        };
        let mut attributes = Map::new();
        let mut relationships = Map::new();
        for (key, value) in keys {
            if !matches!(key.as_str(), "segments" | "actions") {
                attributes.insert(key.clone(), value.clone());
                continue;
            }
            let mut links = Vec::new();
            for item in value.as_array().into_iter().flatten() {
                let id = json_api_id(&item["id"]);
                links.push(json!({"type": key, "id": id}));
                let mut item_attributes = item.as_object().cloned().unwrap_or_default();
                item_attributes.remove("id");
                let resource = json!({"type": key, "id": id, "attributes": item_attributes});
                if !included.contains(&resource) {
                    included.push(resource);
                }
            }
            relationships.insert(key.clone(), json!({"data": links}));
        }
        data.push(json!({
            "type": "collections",
            "id": json_api_id(&collection["name"]),
            "attributes": attributes,
            "relationships": relationships,
        }));
    }
    let mut meta = schema.meta.to_json();
    if let Json::Object(meta) = &mut meta {
        meta.insert("schemaFileHash".to_owned(), Json::String(hash.to_owned()));
    }
    json!({"jsonapi": {"version": "1.0"}, "meta": meta, "data": data, "included": included})
}

/// JSON:API ids are strings.
fn json_api_id(id: &serde_json::Value) -> String {
    match id {
        serde_json::Value::String(id) => id.clone(),
        other => other.to_string(),
    }
}

/// What [`RemoteSource::probe`] found.
#[derive(Debug)]
pub enum Probe {
    Ready,
    /// The server refused this env secret.
    Refused(Error),
    /// The server did not answer, or could not.
    Unavailable(Error),
}

/// An error answer of the server, read as the agent reads it (`handleResponseError`): the
/// server's own `errors[0].detail` when it has one.
fn server_error(status: u16, body: &[u8], url: &str) -> Error {
    let detail = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|json| json["errors"][0]["detail"].as_str().map(str::to_owned));
    match status {
        502 => Error::Remote(format!(
            "Failed to reach the permission server ({url} answered 502 Bad Gateway). Is it running?"
        )),
        403 => Error::Remote(format!(
            "Forbidden: {} ({url})",
            detail.unwrap_or_else(|| "the permission server refused the env secret".to_owned())
        )),
        404 => Error::NotFound(detail.unwrap_or_else(|| format!("{url} on the permission server"))),
        503 => Error::Remote(
            "the permission server is in maintenance for a few minutes (503); \
             checks fail until it is back"
                .to_owned(),
        ),
        _ => Error::Remote(match detail {
            Some(detail) => format!("{detail} ({status} from {url})"),
            None => format!("unexpected answer {status} from {url}"),
        }),
    }
}

/// An error with its causes, on one line (reqwest's own `Display` hides why a connection failed).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The task following `/liana/v4/subscribe-to-events`.
struct EventStream {
    client: reqwest::Client,
    url: String,
    shown: String,
    env_secret: String,
    generation: Arc<AtomicU64>,
}

impl EventStream {
    async fn run(self) {
        let mut connected_before = false;
        loop {
            match self.follow(&mut connected_before).await {
                Ok(()) => tracing::debug!(url = %self.shown, "event stream closed, reconnecting"),
                Err(message) => tracing::warn!(url = %self.shown, "event stream: {message}"),
            }
            tokio::time::sleep(RECONNECT).await;
        }
    }

    /// One connection: reads events until the stream ends.
    async fn follow(&self, connected_before: &mut bool) -> Result<(), String> {
        let mut response = self
            .client
            .get(&self.url)
            .header(SECRET_HEADER, &self.env_secret)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| format!("cannot connect: {}", error_chain(&e)))?;
        let status = response.status().as_u16();
        if status != 200 {
            let body = response.bytes().await.unwrap_or_default();
            let error = server_error(status, &body, &self.shown);
            return Err(match status {
                404 => format!(
                    "the permission server does not know the environment of this env secret \
                     ({error})"
                ),
                _ => error.to_string(),
            });
        }
        // Events sent while not connected are lost: refetch everything, as the agent does on a
        // reconnection; and on the first connection too, since documents fetched before it
        // may have changed before the stream was there to say so.
        self.bump("connected");
        if !std::mem::replace(connected_before, true) {
            tracing::info!(url = %self.shown, "following the permission server's events");
        }
        let mut parser = SseParser::default();
        let mut heartbeat_seen = false;
        let warning = tokio::time::sleep(HEARTBEAT_WARNING);
        tokio::pin!(warning);
        loop {
            tokio::select! {
                chunk = response.chunk() => match chunk {
                    Ok(Some(bytes)) => {
                        for event in parser.push(&bytes) {
                            match event.as_str() {
                                "heartbeat" => heartbeat_seen = true,
                                "refresh-users" | "refresh-roles" | "refresh-renderings"
                                | "refresh-customizations" => self.bump(&event),
                                _ => {}
                            }
                        }
                    }
                    Ok(None) => return Ok(()),
                    Err(error) => return Err(format!("connection lost: {}", error_chain(&error))),
                },
                () = &mut warning, if !heartbeat_seen => {
                    heartbeat_seen = true;
                    tracing::error!(
                        url = %self.shown,
                        "no heartbeat from the permission server's event stream: a proxy may be \
                         buffering it, and permission changes may be seen late"
                    );
                }
            }
        }
    }

    fn bump(&self, why: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        tracing::debug!(event = why, "permission documents refreshed");
    }
}

/// Reads `text/event-stream` bytes into the type of each complete event (fields other than
/// `event` are not needed: a generation move refetches every document).
#[derive(Default)]
struct SseParser {
    line: Vec<u8>,
    event: String,
    has_data: bool,
}

impl SseParser {
    /// The types of the events completed by `bytes`.
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut done = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                // A blank line ends an event; one without data is not dispatched (SSE spec).
                let event = std::mem::take(&mut self.event);
                if std::mem::take(&mut self.has_data) {
                    done.push(if event.is_empty() {
                        "message".to_owned()
                    } else {
                        event
                    });
                }
                continue;
            }
            let line = String::from_utf8_lossy(&line);
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line.as_ref(), ""),
            };
            match field {
                "event" => self.event = value.to_owned(),
                "data" => self.has_data = true,
                _ => {}
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_across_chunks_and_line_endings() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"event: heart").is_empty());
        assert_eq!(parser.push(b"beat\ndata: {}\n\n"), ["heartbeat"]);
        assert_eq!(
            parser.push(b": comment\r\nevent: refresh-renderings\r\ndata: {\"renderingIds\":[1]}\r\n\r\nevent: x\n\n"),
            ["refresh-renderings"],
            "an event without data is not dispatched"
        );
        assert_eq!(parser.push(b"data: hi\n\n"), ["message"]);
    }

    #[test]
    fn server_errors_read_as_the_agent_reads_them() {
        let forbidden = server_error(403, br#"{"errors":[{"detail":"nope"}]}"#, "u");
        assert_eq!(
            forbidden.to_string(),
            "permission server: Forbidden: nope (u)"
        );
        assert!(matches!(server_error(404, b"", "u"), Error::NotFound(_)));
        assert!(
            server_error(502, b"", "u")
                .to_string()
                .contains("Failed to reach the permission server")
        );
        assert!(
            server_error(503, b"", "u")
                .to_string()
                .contains("maintenance")
        );
        assert_eq!(
            server_error(500, br#"{"errors":[{"detail":"boom"}]}"#, "u").to_string(),
            "permission server: boom (500 from u)"
        );
    }

    #[test]
    fn the_apimap_is_the_schema_as_json_api() {
        use serde_json::json;
        let schema = SchemaFile {
            collections: vec![json!({
                "name": "books",
                "actions": [{"id": "books-0-mark", "name": "Mark", "type": "single"}],
                "fields": [{"field": "id", "type": "Number"}],
                "segments": [{"id": "books.Recent", "name": "Recent"}],
            })],
            meta: crate::agent::schema_file::Meta::default(),
        };
        let apimap = apimap(&schema, "abc");
        assert_eq!(
            apimap["data"],
            json!([{
                "type": "collections",
                "id": "books",
                "attributes": {"name": "books", "fields": [{"field": "id", "type": "Number"}]},
                "relationships": {
                    "actions": {"data": [{"type": "actions", "id": "books-0-mark"}]},
                    "segments": {"data": [{"type": "segments", "id": "books.Recent"}]},
                },
            }])
        );
        assert_eq!(
            apimap["included"],
            json!([
                {"type": "actions", "id": "books-0-mark", "attributes": {"name": "Mark", "type": "single"}},
                {"type": "segments", "id": "books.Recent", "attributes": {"name": "Recent"}},
            ])
        );
        assert_eq!(apimap["meta"]["schemaFileHash"], "abc");
        assert_eq!(apimap["meta"]["liana"], "forest-nodejs-agent");
    }

    #[test]
    fn only_http_urls_are_accepted_and_credentials_are_not_shown() {
        assert!(RemoteSource::new("ftp://x", "s").is_err());
        let source = RemoteSource::new("https://me:pw@forest.example/", "top-secret").unwrap();
        assert_eq!(source.server(), "https://forest.example");
        let debug = format!("{source:?}");
        assert!(
            !debug.contains("pw") && !debug.contains("top-secret"),
            "{debug}"
        );
    }
}
