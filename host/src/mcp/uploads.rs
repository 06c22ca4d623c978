//! Action files uploaded out of band (mcp.md §3.9): a model cannot put megabytes of base64 in a
//! tool call, so `requestActionFileUpload` hands out a one-time upload URL and a signed handle;
//! the client PUTs the bytes, then passes `"$uploadedFile:<handle>"` as the field's value to
//! `executeAction`, which checks the handle (signature, expiry, uploader), the size and the
//! SHA-256, and sends the file on as the data URI the action's route expects.
//!
//! Files are kept in a directory the instances share when one is set (`--mcp-upload-dir`), else
//! in Canopy's store when it is PostgreSQL (so any instance behind a balancer takes the PUT and
//! any other serves the handle), else in memory (one instance only: a warning says so at
//! start). Expired slots are swept as new ones are made.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::config::UploadConfig;
use crate::platform::Store;
use crate::platform::store::Dialect;

/// The prefix of a field value that names an uploaded file.
pub const HANDLE_PREFIX: &str = "$uploadedFile:";
const KEY_PURPOSE: &[u8] = b"canopy mcp upload handle v1";
const HANDLE_TYPE: &str = "mcp-upload";
/// What a file name must escape in a data URI parameter (its separators, and `%` itself).
const NAME: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'%')
    .add(b',')
    .add(b';')
    .add(b'=');
/// The longest file name kept in a key.
const MAX_NAME: usize = 128;

/// Why an upload or a handle was refused; each maps to one HTTP status or tool message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    /// 404: no such upload URL, or it expired.
    #[error("this upload URL is unknown or has expired: request a new one")]
    Unknown,
    /// 409: the URL was used already (single use).
    #[error("this upload URL was already used: request a new one for another file")]
    Used,
    /// 413.
    #[error("the file is larger than the {0} bytes allowed")]
    TooLarge(u64),
    /// 507: the server holds as many uploaded bytes as it may (`max_total_bytes`).
    #[error("the server holds as many uploaded bytes as it may; retry later")]
    Full,
    /// The handle is not valid (tool error).
    #[error("{0}")]
    Handle(String),
    #[error("the upload store failed: {0}")]
    Io(String),
}

/// The claims of a file handle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handle {
    pub typ: String,
    pub key: String,
    pub name: String,
    pub mime: String,
    /// The user id of whoever asked for the upload: nobody else may use the file.
    pub uploader: i64,
    /// Hex SHA-256 the client announced, checked against the bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    pub exp: u64,
}

/// A slot waiting for its bytes, or holding them.
struct Slot {
    url_expires: Instant,
    file_expires: Instant,
    bytes: Option<Vec<u8>>,
}

/// Where the files wait for the action that takes them.
enum Backend {
    /// This process's memory: one instance only.
    Memory(Mutex<HashMap<String, Slot>>),
    /// A directory the instances share: a marker file per slot, the bytes beside it.
    Directory(PathBuf),
    /// The `mcp_uploads` table of Canopy's PostgreSQL store (migration 0023).
    Store(Store),
}

/// The upload store and the handle keys.
pub struct Uploads {
    pub settings: UploadConfig,
    encoding: EncodingKey,
    decoding: DecodingKey,
    backend: Backend,
}

impl Uploads {
    /// `store` is Canopy's store: on PostgreSQL it keeps the files unless `settings` names a
    /// directory.
    pub fn new(settings: UploadConfig, auth_secret: &str, store: &Store) -> Self {
        let key = super::token::derive(auth_secret, KEY_PURPOSE);
        let backend = match &settings.directory {
            Some(dir) => Backend::Directory(dir.clone()),
            None if store.dialect() == Dialect::Postgres => Backend::Store(store.clone()),
            None => Backend::Memory(Mutex::new(HashMap::new())),
        };
        Self {
            settings,
            encoding: EncodingKey::from_secret(&key),
            decoding: DecodingKey::from_secret(&key),
            backend,
        }
    }

    /// Whether files are kept in this process only.
    pub fn in_memory(&self) -> bool {
        matches!(self.backend, Backend::Memory(_))
    }

    /// Where files are kept, for the start-up log: `memory`, `directory` or `store`.
    pub fn kept_in(&self) -> &'static str {
        match self.backend {
            Backend::Memory(_) => "memory",
            Backend::Directory(_) => "directory",
            Backend::Store(_) => "store",
        }
    }

    /// Makes a slot for one file of `uploader` and returns its key and handle.
    pub async fn reserve(
        &self,
        uploader: i64,
        filename: &str,
        mime: &str,
        sha256: Option<&str>,
    ) -> Result<(String, String), UploadError> {
        let sha256 = match sha256.map(str::trim).filter(|s| !s.is_empty()) {
            Some(given) => Some(normalize_sha256(given).ok_or_else(|| {
                UploadError::Handle("sha256 must be 64 hex characters or base64 of 32 bytes".into())
            })?),
            None => None,
        };
        let key = format!(
            "mcp-uploads/{}/{}",
            uuid::Uuid::new_v4().simple(),
            sanitize(filename)
        );
        let now = Instant::now();
        let slot = Slot {
            url_expires: now + self.settings.url_ttl,
            file_expires: now + self.settings.handle_ttl,
            bytes: None,
        };
        match &self.backend {
            Backend::Memory(memory) => {
                let mut memory = memory.lock().map_err(|_| UploadError::Io("lock".into()))?;
                memory.retain(|_, s| {
                    s.file_expires > now && (s.bytes.is_some() || s.url_expires > now)
                });
                memory.insert(key.clone(), slot);
            }
            Backend::Directory(dir) => {
                // The slot is a marker file with the URL's expiry; the bytes go beside it.
                let marker = self.path(dir, &key, "slot");
                if let Some(parent) = marker.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| UploadError::Io(e.to_string()))?;
                }
                let expires = now_secs() + self.settings.url_ttl.as_secs();
                std::fs::write(&marker, expires.to_string())
                    .map_err(|e| UploadError::Io(e.to_string()))?;
            }
            Backend::Store(store) => {
                let now = now_ms();
                sqlx::query(
                    "DELETE FROM mcp_uploads WHERE file_expires_at <= $1 \
                     OR (size IS NULL AND url_expires_at <= $1)",
                )
                .bind(now)
                .execute(store.pool())
                .await?;
                sqlx::query(
                    "INSERT INTO mcp_uploads (upload_key, project, environment, uploader, \
                     url_expires_at, file_expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&key)
                .bind(store.project())
                .bind(store.environment())
                .bind(uploader)
                .bind(now.saturating_add(millis(self.settings.url_ttl)))
                .bind(now.saturating_add(millis(self.settings.handle_ttl)))
                .execute(store.pool())
                .await?;
            }
        }
        let handle = Handle {
            typ: HANDLE_TYPE.to_owned(),
            key: key.clone(),
            name: filename.trim().to_owned(),
            mime: mime.trim().to_owned(),
            uploader,
            sha256,
            exp: now_secs() + self.settings.handle_ttl.as_secs(),
        };
        let token = encode(&Header::new(Algorithm::HS256), &handle, &self.encoding)
            .map_err(|e| UploadError::Io(e.to_string()))?;
        Ok((key, format!("{HANDLE_PREFIX}{token}")))
    }

    fn path(&self, dir: &std::path::Path, key: &str, suffix: &str) -> PathBuf {
        // Keys are made here (a uuid and a sanitized name): no `..` or separators beyond ours.
        dir.join(format!("{key}.{suffix}"))
    }

    /// Stores the bytes PUT on a slot's URL: once, before the URL expires, within the sizes.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), UploadError> {
        let size = bytes.len() as u64;
        if size > self.settings.max_bytes {
            return Err(UploadError::TooLarge(self.settings.max_bytes));
        }
        if !valid_key(key) {
            return Err(UploadError::Unknown);
        }
        let now = Instant::now();
        match &self.backend {
            Backend::Memory(memory) => {
                let mut memory = memory.lock().map_err(|_| UploadError::Io("lock".into()))?;
                let held: u64 = memory
                    .values()
                    .filter_map(|s| s.bytes.as_ref())
                    .map(|b| b.len() as u64)
                    .sum();
                let slot = memory.get_mut(key).ok_or(UploadError::Unknown)?;
                if slot.bytes.is_some() {
                    return Err(UploadError::Used);
                }
                if slot.url_expires <= now {
                    return Err(UploadError::Unknown);
                }
                if held + size > self.settings.max_total_bytes {
                    return Err(UploadError::Full);
                }
                slot.bytes = Some(bytes);
                Ok(())
            }
            Backend::Directory(dir) => {
                let marker = self.path(dir, key, "slot");
                let data = self.path(dir, key, "data");
                let expires: u64 = std::fs::read_to_string(&marker)
                    .map_err(|_| UploadError::Unknown)?
                    .trim()
                    .parse()
                    .map_err(|_| UploadError::Unknown)?;
                if expires <= now_secs() {
                    return Err(UploadError::Unknown);
                }
                // `create_new` makes the single use atomic across instances.
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&data)
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::AlreadyExists => UploadError::Used,
                        _ => UploadError::Io(e.to_string()),
                    })?;
                std::io::Write::write_all(&mut file, &bytes)
                    .map_err(|e| UploadError::Io(e.to_string()))
            }
            Backend::Store(store) => put_in_store(store, &self.settings, key, bytes).await,
        }
    }

    /// Reads a handle back for `user`: signature, expiry, kind and uploader.
    pub fn handle(&self, value: &str, user: i64) -> Result<Handle, UploadError> {
        let token = value.strip_prefix(HANDLE_PREFIX).unwrap_or(value);
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp"]);
        let handle = decode::<Handle>(token, &self.decoding, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
                    UploadError::Handle("the file handle has expired: upload the file again".into())
                }
                _ => UploadError::Handle("the file handle is not valid".into()),
            })?
            .claims;
        if handle.typ != HANDLE_TYPE {
            return Err(UploadError::Handle("the file handle is not valid".into()));
        }
        if handle.uploader != user {
            return Err(UploadError::Handle(
                "the file handle belongs to another user".into(),
            ));
        }
        Ok(handle)
    }

    /// The file of a handle as a data URI (`data:<mime>;name=<name>;base64,…`), after checking
    /// its size and SHA-256.
    pub async fn data_uri(&self, handle: &Handle) -> Result<String, UploadError> {
        let missing = || {
            UploadError::Handle(format!(
                "no file was uploaded for {:?} yet: PUT it to the upload URL first",
                handle.name
            ))
        };
        let bytes = match &self.backend {
            Backend::Memory(memory) => {
                let memory = memory.lock().map_err(|_| UploadError::Io("lock".into()))?;
                memory
                    .get(&handle.key)
                    .and_then(|s| s.bytes.clone())
                    .ok_or_else(missing)?
            }
            Backend::Directory(dir) => {
                std::fs::read(self.path(dir, &handle.key, "data")).map_err(|_| missing())?
            }
            Backend::Store(store) => {
                let bytes: Option<Option<Vec<u8>>> = sqlx::query_scalar(
                    "SELECT bytes FROM mcp_uploads WHERE upload_key = $1 AND project = $2 \
                     AND environment = $3 AND file_expires_at > $4",
                )
                .bind(&handle.key)
                .bind(store.project())
                .bind(store.environment())
                .bind(now_ms())
                .fetch_optional(store.pool())
                .await?;
                bytes.flatten().ok_or_else(missing)?
            }
        };
        if bytes.len() as u64 > self.settings.max_bytes {
            return Err(UploadError::TooLarge(self.settings.max_bytes));
        }
        if let Some(expected) = &handle.sha256 {
            let actual = hex::encode(Sha256::digest(&bytes));
            if &actual != expected {
                return Err(UploadError::Handle(format!(
                    "the uploaded bytes of {:?} do not match the announced sha256",
                    handle.name
                )));
            }
        }
        let mime = if handle.mime.is_empty() {
            "application/octet-stream"
        } else {
            &handle.mime
        };
        let name: String = percent_encoding::utf8_percent_encode(&handle.name, NAME).to_string();
        Ok(format!(
            "data:{mime};name={name};base64,{}",
            STANDARD.encode(&bytes)
        ))
    }
}

/// Stores the bytes of a slot in the `mcp_uploads` table. One conditional update takes the
/// slot (unused, its URL live) so that of two PUTs racing on two instances exactly one wins; a
/// missed update is then told apart (used, or unknown and expired). The total held is checked
/// before, so racing PUTs may pass it by one file each: it bounds the table, not a byte count.
async fn put_in_store(
    store: &Store,
    settings: &UploadConfig,
    key: &str,
    bytes: Vec<u8>,
) -> Result<(), UploadError> {
    let now = now_ms();
    let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    let held: Option<i64> = sqlx::query_scalar(
        "SELECT CAST(SUM(size) AS BIGINT) FROM mcp_uploads WHERE file_expires_at > $1",
    )
    .bind(now)
    .fetch_one(store.pool())
    .await?;
    let total = i64::try_from(settings.max_total_bytes).unwrap_or(i64::MAX);
    if held.unwrap_or(0).saturating_add(size) > total {
        return Err(UploadError::Full);
    }
    let taken = sqlx::query(
        "UPDATE mcp_uploads SET bytes = $1, size = $2 WHERE upload_key = $3 AND project = $4 \
         AND environment = $5 AND size IS NULL AND url_expires_at > $6",
    )
    .bind(bytes)
    .bind(size)
    .bind(key)
    .bind(store.project())
    .bind(store.environment())
    .bind(now)
    .execute(store.pool())
    .await?
    .rows_affected();
    if taken == 1 {
        return Ok(());
    }
    let used: Option<bool> = sqlx::query_scalar(
        "SELECT size IS NOT NULL FROM mcp_uploads WHERE upload_key = $1 AND project = $2 \
         AND environment = $3",
    )
    .bind(key)
    .bind(store.project())
    .bind(store.environment())
    .fetch_optional(store.pool())
    .await?;
    Err(if used == Some(true) {
        UploadError::Used
    } else {
        UploadError::Unknown
    })
}

/// A failure of the store keeping the files.
impl From<sqlx::Error> for UploadError {
    fn from(error: sqlx::Error) -> Self {
        Self::Io(error.to_string())
    }
}

fn now_secs() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A SHA-256 given as hex or base64, as lowercase hex.
fn normalize_sha256(given: &str) -> Option<String> {
    if given.len() == 64 && given.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Some(given.to_ascii_lowercase());
    }
    let bytes = STANDARD
        .decode(given)
        .or_else(|_| URL_SAFE_NO_PAD.decode(given.trim_end_matches('=')))
        .ok()?;
    (bytes.len() == 32).then(|| hex::encode(&bytes))
}

/// A file name safe in a key: letters, digits, `._- ()`, at most 128 characters; `file` when
/// nothing is left or only dots are.
pub fn sanitize(filename: &str) -> String {
    let kept: String = filename
        .trim()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | ' ' | '(' | ')'))
        .take(MAX_NAME)
        .collect();
    if kept.trim_matches('.').trim().is_empty() {
        "file".to_owned()
    } else {
        kept
    }
}

/// Whether a key is one [`Uploads::reserve`] could have made.
fn valid_key(key: &str) -> bool {
    let mut parts = key.splitn(3, '/');
    parts.next() == Some("mcp-uploads")
        && parts
            .next()
            .is_some_and(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        && parts
            .next()
            .is_some_and(|name| !name.contains('/') && name == sanitize(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn uploads(directory: Option<PathBuf>) -> Uploads {
        let store = Store::open("sqlite::memory:", "p", "e").await.unwrap();
        Uploads::new(
            UploadConfig {
                directory,
                max_bytes: 16,
                max_total_bytes: 24,
                ..UploadConfig::default()
            },
            "secret-secret-secret",
            &store,
        )
    }

    /// Runs `check` on the memory store and on a directory (the PostgreSQL store's are in
    /// host/tests/oauth_store.rs).
    async fn each_store<F>(check: impl Fn(Uploads) -> F)
    where
        F: std::future::Future<Output = ()>,
    {
        let memory = uploads(None).await;
        assert_eq!(memory.kept_in(), "memory");
        check(memory).await;
        let dir = std::env::temp_dir().join(format!("canopy-uploads-{}", uuid::Uuid::new_v4()));
        let directory = uploads(Some(dir.clone())).await;
        assert_eq!(directory.kept_in(), "directory");
        check(directory).await;
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_url_takes_one_file_and_the_handle_gives_it_back_to_its_uploader() {
        each_store(|store| async move {
            let sha = hex::encode(Sha256::digest(b"hello"));
            let (key, handle) = store
                .reserve(7, "report (1).pdf", "application/pdf", Some(&sha))
                .await
                .unwrap();
            assert!(key.ends_with("/report (1).pdf"), "{key}");
            store.put(&key, b"hello".to_vec()).await.unwrap();
            assert_eq!(
                store.put(&key, b"again".to_vec()).await,
                Err(UploadError::Used)
            );
            let claims = store.handle(&handle, 7).unwrap();
            assert_eq!(
                store.data_uri(&claims).await.unwrap(),
                "data:application/pdf;name=report%20(1).pdf;base64,aGVsbG8="
            );
            assert!(matches!(
                store.handle(&handle, 8),
                Err(UploadError::Handle(_))
            ));
            assert!(matches!(
                store.handle("$uploadedFile:nope", 7),
                Err(UploadError::Handle(_))
            ));
        })
        .await;
    }

    #[tokio::test]
    async fn sizes_hashes_and_unknown_urls_are_refused() {
        each_store(|store| async move {
            let (key, _) = store.reserve(1, "a.txt", "text/plain", None).await.unwrap();
            assert_eq!(
                store.put(&key, vec![0; 17]).await,
                Err(UploadError::TooLarge(16))
            );
            assert_eq!(
                store
                    .put(
                        "mcp-uploads/00000000000000000000000000000000/a.txt",
                        vec![1]
                    )
                    .await,
                Err(UploadError::Unknown)
            );
            assert_eq!(
                store.put("../../etc/passwd", vec![1]).await,
                Err(UploadError::Unknown)
            );
            let (key, handle) = store
                .reserve(1, "b.txt", "text/plain", Some(&hex::encode(Sha256::digest(b"x"))))
                .await
                .unwrap();
            store.put(&key, b"y".to_vec()).await.unwrap();
            let claims = store.handle(&handle, 1).unwrap();
            assert!(
                matches!(store.data_uri(&claims).await, Err(UploadError::Handle(m)) if m.contains("sha256"))
            );
        })
        .await;
    }

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize("../../etc/passwd"), "....etcpasswd");
        assert_eq!(sanitize("..."), "file");
        assert_eq!(sanitize("résumé.pdf"), "résumé.pdf");
        assert_eq!(sanitize(&"a".repeat(300)).len(), 128);
    }
}
