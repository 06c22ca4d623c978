//! Application tokens of the public API (issue 12 §1, platform-api.md §2.2 and decision 6):
//! opaque bearer strings `cnp_` + 32 random bytes in base62 + a 6-character base62 CRC32 of them,
//! so a secret scanner can tell a real token from a look-alike offline, as GitHub's are. The
//! store keeps only the SHA-256 of the whole token (UNIQUE: verifying is one index lookup) and a
//! hint (prefix + last 4) the owner recognises. A token belongs to one user of the project and
//! acts as that user with that user's rights at the time of each call, narrowed by its scopes.
//!
//! Creating and revoking a token writes an admin log entry (resource `token`) in the same
//! transaction, with the token's id, name, owner, scopes and expiry: never its secret, its hash
//! or its hint.
//!
//! Verifying a presented token (with its cache and the coalesced `last_used_at`) is
//! `auth::tokens`; this file is the format and the table (migration 0005).

use std::fmt;

use argon2::password_hash::rand_core::{OsRng, RngCore as _};
use sha2::{Digest as _, Sha256};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use serde_json::{Value as Json, json};

use super::{Actor, Error, Result, Scope, Store};

/// What every token starts with: easy to spot in a leaked file or a scanner's rule.
pub const PREFIX: &str = "cnp_";
/// Random bytes in a token: 256 bits, beyond guessing, so a plain SHA-256 is enough to store it
/// (a slow hash is for human passwords).
const RANDOM_BYTES: usize = 32;
/// 62^43 > 2^256: the random part always fits 43 base62 digits (left-padded with `0`).
const BODY_LEN: usize = 43;
/// 62^6 > 2^32: a CRC32 fits 6 base62 digits.
const CHECK_LEN: usize = 6;
/// The length of every token.
pub const TOKEN_LEN: usize = PREFIX.len() + BODY_LEN + CHECK_LEN;
/// Longest token name.
const MAX_NAME_CHARS: usize = 100;

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A token in clear, as shown once at its creation. `Debug` and `Display` never print it.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(String);

impl TokenSecret {
    /// The token itself, to hand to its owner (once) and to nobody else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenSecret({})", hint(&self.0))
    }
}

/// A new token: random, with its checksum.
pub fn generate() -> TokenSecret {
    let mut bytes = [0u8; RANDOM_BYTES];
    OsRng.fill_bytes(&mut bytes);
    let body = base62(&bytes, BODY_LEN);
    let check = base62(&crc32fast::hash(body.as_bytes()).to_be_bytes(), CHECK_LEN);
    TokenSecret(format!("{PREFIX}{body}{check}"))
}

/// Whether `token` has the shape of one of ours, checksum included: what a scanner checks, and
/// what the verifier checks before touching the store.
pub fn well_formed(token: &str) -> bool {
    let Some(rest) = token.strip_prefix(PREFIX) else {
        return false;
    };
    if rest.len() != BODY_LEN + CHECK_LEN || !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return false;
    }
    let (body, check) = rest.split_at(BODY_LEN);
    base62(&crc32fast::hash(body.as_bytes()).to_be_bytes(), CHECK_LEN) == check
}

/// The stored form of a token: the SHA-256 of the whole string.
pub fn secret_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// [`secret_hash`] in hex, as the table keeps it.
pub fn hex(hash: &[u8; 32]) -> String {
    hex::encode(hash)
}

/// What the owner sees of a token: its prefix and last 4 characters.
pub fn hint(token: &str) -> String {
    let tail = token
        .len()
        .checked_sub(4)
        .and_then(|at| token.get(at..))
        .unwrap_or("");
    format!("{PREFIX}…{tail}")
}

/// `bytes` (big-endian) in base62, left-padded with `0` to `width` digits.
fn base62(bytes: &[u8], width: usize) -> String {
    let mut number = bytes.to_vec();
    let mut digits = Vec::with_capacity(width);
    while number.iter().any(|b| *b != 0) {
        // Long division of the big-endian number by 62.
        let mut remainder = 0u32;
        for byte in &mut number {
            let value = (remainder << 8) | u32::from(*byte);
            *byte = u8::try_from(value / 62).unwrap_or(u8::MAX);
            remainder = value % 62;
        }
        digits.push(ALPHABET[remainder as usize]);
    }
    while digits.len() < width {
        digits.push(b'0');
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// An application token as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// UUIDv7.
    pub id: String,
    pub user_id: i64,
    pub name: String,
    /// Canonical: sorted by wire name, no duplicates, never empty.
    pub scopes: Vec<Scope>,
    pub hint: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

impl Token {
    /// Whether its expiry has passed at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|at| at <= now_ms)
    }
}

/// A token to create.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub name: String,
    pub scopes: Vec<Scope>,
    /// Unix ms; must be in the future.
    pub expires_at: Option<i64>,
}

/// Scopes by their wire names, as a token keeps them: at least one, each known, sorted and
/// without duplicates. The error names the bad one.
pub fn parse_scopes<S: AsRef<str>>(raw: &[S]) -> Result<Vec<Scope>> {
    let mut scopes = raw
        .iter()
        .map(|s| s.as_ref().trim().parse::<Scope>().map_err(Error::Invalid))
        .collect::<Result<Vec<_>>>()?;
    if scopes.is_empty() {
        let known: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
        return Err(Error::Invalid(format!(
            "a token needs at least one scope (one of {})",
            known.join(", ")
        )));
    }
    scopes.sort_by_key(|s| s.as_str());
    scopes.dedup();
    Ok(scopes)
}

fn check_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::Invalid("a token needs a name".to_owned()));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(Error::Invalid(format!(
            "a token name has at most {MAX_NAME_CHARS} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::Invalid(
            "a token name cannot hold control characters".to_owned(),
        ));
    }
    Ok(name.to_owned())
}

/// The admin log's `resource` of token entries.
pub const ADMIN_LOG_RESOURCE: &str = "token";

/// What the admin log keeps of a token: who it acts for and what it may do, nothing of the secret.
fn log_value(token: &Token, owner_email: &str) -> Json {
    json!({
        "object": "token",
        "id": token.id,
        "name": token.name,
        "user": {"object": "user", "id": token.user_id, "email": owner_email},
        "scopes": token.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "expiresAt": token.expires_at,
    })
}

const TOKEN_COLUMNS: &str =
    "id, user_id, name, scopes, hint, created_at, expires_at, last_used_at, revoked_at";

fn token_from_row(row: &AnyRow) -> Result<Token> {
    let scopes: String = row.try_get(3)?;
    let scopes = scopes
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<Scope>().map_err(Error::Invalid))
        .collect::<Result<Vec<_>>>()?;
    Ok(Token {
        id: row.try_get(0)?,
        user_id: row.try_get(1)?,
        name: row.try_get(2)?,
        scopes,
        hint: row.try_get(4)?,
        created_at: row.try_get(5)?,
        expires_at: row.try_get(6)?,
        last_used_at: row.try_get(7)?,
        revoked_at: row.try_get(8)?,
    })
}

impl Store {
    /// Creates a token for `user_id` (a user of this project) and returns it with its secret,
    /// the only time the secret exists outside its owner's hands. `actor` is who asked (the owner
    /// through the API, the operator on the command line), for the admin log entry written with
    /// it.
    pub async fn create_token(
        &self,
        actor: &Actor,
        user_id: i64,
        new: NewToken,
    ) -> Result<(Token, TokenSecret)> {
        let name = check_name(&new.name)?;
        let scopes = parse_scopes(&new.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>())?;
        let now = super::store::now_ms();
        if let Some(at) = new.expires_at
            && at <= now
        {
            return Err(Error::Invalid(
                "expiresAt: a token's expiry must be in the future".to_owned(),
            ));
        }
        let owner = self
            .user(user_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("user {user_id}")))?;
        let secret = generate();
        let token = Token {
            id: uuid::Uuid::now_v7().to_string(),
            user_id,
            name,
            scopes,
            hint: hint(secret.expose()),
            created_at: now,
            expires_at: new.expires_at,
            last_used_at: None,
            revoked_at: None,
        };
        let scopes: Vec<&str> = token.scopes.iter().map(|s| s.as_str()).collect();
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO api_tokens (id, project, user_id, name, scopes, secret_hash, hint, \
             created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&token.id)
        .bind(self.project())
        .bind(user_id)
        .bind(&token.name)
        .bind(scopes.join(","))
        .bind(hex(&secret_hash(secret.expose())))
        .bind(&token.hint)
        .bind(now)
        .bind(token.expires_at)
        .execute(&mut *tx)
        .await?;
        self.admin_log_on(
            &mut *tx,
            actor,
            "add",
            ADMIN_LOG_RESOURCE,
            &token.id,
            None,
            Some(log_value(&token, &owner.email)),
        )
        .await?;
        tx.commit().await?;
        Ok((token, secret))
    }

    /// The project's tokens that are not revoked (expired ones included, so their owner sees
    /// why a script stopped), of one user or of all, newest first.
    pub async fn tokens(&self, user_id: Option<i64>) -> Result<Vec<Token>> {
        let owner = if user_id.is_some() {
            "AND user_id = $2"
        } else {
            ""
        };
        let query = format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE project = $1 AND revoked_at IS NULL \
             {owner} ORDER BY created_at DESC, id DESC"
        );
        let mut query = sqlx::query(&query).bind(self.project());
        if let Some(user_id) = user_id {
            query = query.bind(user_id);
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter().map(token_from_row).collect()
    }

    /// One token of the project, revoked or not.
    pub async fn token(&self, id: &str) -> Result<Option<Token>> {
        let row = sqlx::query(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE project = $1 AND id = $2"
        ))
        .bind(self.project())
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(token_from_row).transpose()
    }

    /// The token of this project whose secret hashes to `hash` (see [`secret_hash`]).
    pub async fn token_by_secret_hash(&self, hash: &[u8; 32]) -> Result<Option<Token>> {
        let row = sqlx::query(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE secret_hash = $1 AND project = $2"
        ))
        .bind(hex(hash))
        .bind(self.project())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(token_from_row).transpose()
    }

    /// Revokes a token; `false` when there is no such live token. `actor` is who revoked it (an
    /// administrator: the owner or an admin through the API; `System`: the command line), kept
    /// on the token and in the admin log entry written with the revocation.
    pub async fn revoke_token(&self, actor: &Actor, id: &str) -> Result<bool> {
        let by = match actor {
            Actor::Administrator { user_id, .. } => Some(*user_id),
            Actor::System | Actor::IdentityProvider => None,
        };
        let mut tx = self.pool().begin().await?;
        let revoked = sqlx::query(&format!(
            "UPDATE api_tokens SET revoked_at = $1, revoked_by_user_id = $2 \
             WHERE project = $3 AND id = $4 AND revoked_at IS NULL RETURNING {TOKEN_COLUMNS}"
        ))
        .bind(super::store::now_ms())
        .bind(by)
        .bind(self.project())
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = revoked else {
            return Ok(false);
        };
        let token = token_from_row(&row)?;
        // The owner's email as it is now (a token dies with its user: the owner exists).
        let email: Option<String> =
            sqlx::query_scalar("SELECT email FROM users WHERE project = $1 AND id = $2")
                .bind(self.project())
                .bind(token.user_id)
                .fetch_optional(&mut *tx)
                .await?;
        self.admin_log_on(
            &mut *tx,
            actor,
            "remove",
            ADMIN_LOG_RESOURCE,
            &token.id,
            Some(log_value(&token, email.as_deref().unwrap_or_default())),
            None,
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records a use of the token at `at` (the verifier calls it at most once a minute per
    /// token); a later use already recorded is kept.
    pub async fn touch_token(&self, id: &str, at: i64) -> Result<()> {
        sqlx::query(
            "UPDATE api_tokens SET last_used_at = $1 WHERE project = $2 AND id = $3 \
             AND (last_used_at IS NULL OR last_used_at < $1)",
        )
        .bind(at)
        .bind(self.project())
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_is_well_formed_and_unique() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        for token in [&a, &b] {
            assert_eq!(token.expose().len(), TOKEN_LEN);
            assert!(token.expose().starts_with(PREFIX));
            assert!(well_formed(token.expose()), "{}", token.expose());
        }
    }

    #[test]
    fn a_changed_character_breaks_the_checksum() {
        let token = generate().expose().to_owned();
        let mut bytes = token.clone().into_bytes();
        let at = PREFIX.len() + 5;
        bytes[at] = if bytes[at] == b'a' { b'b' } else { b'a' };
        let altered = String::from_utf8(bytes).unwrap();
        assert!(!well_formed(&altered));
        assert!(!well_formed(&token[..TOKEN_LEN - 1]));
        assert!(!well_formed(&format!("xyz_{}", &token[PREFIX.len()..])));
        assert!(!well_formed(""));
        assert!(!well_formed("cnp_é"));
    }

    #[test]
    fn base62_pads_and_encodes_big_endian() {
        assert_eq!(base62(&[0, 0], 3), "000");
        assert_eq!(base62(&[0, 61], 2), "0z");
        assert_eq!(base62(&[0, 62], 2), "10");
        assert_eq!(base62(&[0xff; 32], BODY_LEN).len(), BODY_LEN);
        assert_eq!(base62(&u32::MAX.to_be_bytes(), CHECK_LEN).len(), CHECK_LEN);
    }

    #[test]
    fn the_secret_never_shows_in_debug() {
        let token = generate();
        let shown = format!("{token:?}");
        assert!(!shown.contains(&token.expose()[PREFIX.len()..TOKEN_LEN - 4]));
        assert!(shown.contains(&hint(token.expose())));
    }

    #[test]
    fn scopes_are_canonical_and_checked() {
        let scopes =
            parse_scopes(&["notes:write", "all", "notes:write", "activity_logs:read"]).unwrap();
        assert_eq!(
            scopes,
            [Scope::ActivityLogsRead, Scope::All, Scope::NotesWrite]
        );
        assert!(parse_scopes::<&str>(&[]).is_err());
        let error = parse_scopes(&["notes:delete"]).unwrap_err().to_string();
        assert!(error.contains("notes:delete"), "{error}");
    }

    #[test]
    fn hex_is_lowercase_64_chars() {
        let h = hex(&secret_hash("x"));
        assert_eq!(h.len(), 64);
        assert!(
            h.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
