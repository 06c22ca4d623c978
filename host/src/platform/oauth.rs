//! The tables of the MCP endpoint's OAuth 2.1 authorization server (migration 0014): clients
//! registered dynamically (RFC 7591), one-time authorization codes, and refresh tokens grouped in
//! families. The protocol (PKCE, redirect URI matching, token minting) is the `mcp` module's; this
//! file only keeps state, and makes the two checks that must be atomic in the database: a code is
//! redeemed once, and a refresh token is spent once.
//!
//! A family is one interactive sign-in of one client: every refresh token rotated from it shares
//! its grant (user, resource, scope, when the user signed in). A refresh token presented again
//! after it was spent is a stolen copy or a replay, and nobody can tell the thief from the client,
//! so the whole family is revoked (RFC 9700 §4.14.2, OAuth 2.1 §4.3.1).
//!
//! Codes and refresh tokens are kept only as the SHA-256 (hex) of their value: the caller hashes
//! them (`auth::login::code_hash`), so a copy of the store gives nothing to replay. Every row is
//! of this store's project and environment; refresh tokens are through their family.

use std::time::Duration;

use serde_json::Value as Json;
use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::store::now_ms;
use super::{Error, Result, Store};

/// What every client id starts with, so a log line tells an MCP client from anything else.
pub const CLIENT_ID_PREFIX: &str = "mcp_";
/// Random bytes of a client id: 24 bytes are 32 URL-safe base64 characters, beyond guessing.
const CLIENT_ID_BYTES: usize = 24;
/// How long a spent refresh token (or one that expired) is kept: presented again within that
/// time it is recognised as a replay and revokes its family; later it is merely unknown (still
/// refused). Revoked families are forgotten after the same delay.
pub const SPENT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// A client to register: what the registration endpoint validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOAuthClient {
    pub client_name: Option<String>,
    /// The exact redirect URIs the client may use.
    pub redirect_uris: Vec<String>,
    /// The registration document, echoed back by the registration endpoint.
    pub metadata: Json,
}

/// A registered client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClient {
    /// `mcp_` + 32 URL-safe characters.
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
    pub metadata: Json,
    pub created_at: i64,
}

/// What an authorization code stands for, checked again at the exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeGrant {
    pub client_id: String,
    pub user_id: i64,
    pub redirect_uri: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// The RFC 8707 resource the tokens will be for.
    pub resource: String,
    pub scope: String,
}

/// A refresh-token family: what each of its tokens grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshGrant {
    pub family_id: String,
    pub client_id: String,
    pub user_id: i64,
    pub resource: String,
    pub scope: String,
    /// When the user signed in interactively (unix ms): rotating tokens never extends it.
    pub session_started_at: i64,
}

/// What presenting a refresh token gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshUse {
    /// The token was live and is now spent: issue its successor in the same family.
    Valid(RefreshGrant),
    /// The token was already spent, or its family revoked: a replay. The family is now revoked,
    /// so every other token of it (the legitimate client's latest included) is refused too.
    Reused(RefreshGrant),
    /// The token is past its expiry.
    Expired,
    /// No such token in this project and environment.
    Unknown,
}

/// A JSON column that did not decode, as the database error it is.
fn decode_error(error: serde_json::Error) -> Error {
    Error::Database(sqlx::Error::Decode(Box::new(error)))
}

/// A value that did not encode to JSON (never, for strings and `Value`s).
fn encode_error(error: serde_json::Error) -> Error {
    Error::Database(sqlx::Error::Encode(Box::new(error)))
}

const CLIENT_COLUMNS: &str = "client_id, client_name, redirect_uris, metadata, created_at";

fn client_from_row(row: &AnyRow) -> Result<OAuthClient> {
    let redirect_uris: String = row.try_get(2)?;
    let metadata: String = row.try_get(3)?;
    Ok(OAuthClient {
        client_id: row.try_get(0)?,
        client_name: row.try_get(1)?,
        redirect_uris: serde_json::from_str(&redirect_uris).map_err(decode_error)?,
        metadata: serde_json::from_str(&metadata).map_err(decode_error)?,
        created_at: row.try_get(4)?,
    })
}

/// The columns of a family, of the `oauth_grants` table aliased `g`.
const GRANT_COLUMNS: &str =
    "g.family_id, g.client_id, g.user_id, g.resource, g.scope, g.session_started_at";

/// The family of a row whose [`GRANT_COLUMNS`] start at column `first`.
fn grant_from_row(row: &AnyRow, first: usize) -> Result<RefreshGrant> {
    Ok(RefreshGrant {
        family_id: row.try_get(first)?,
        client_id: row.try_get(first + 1)?,
        user_id: row.try_get(first + 2)?,
        resource: row.try_get(first + 3)?,
        scope: row.try_get(first + 4)?,
        session_started_at: row.try_get(first + 5)?,
    })
}

/// `ttl` in milliseconds, saturating.
fn millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Registers a client and returns it with the id the store chose (clients never choose
    /// their own: RFC 7591 §3.2.1). Validating the document is the registration endpoint's job.
    pub async fn register_oauth_client(&self, client: NewOAuthClient) -> Result<OAuthClient> {
        let client = OAuthClient {
            client_id: format!(
                "{CLIENT_ID_PREFIX}{}",
                crate::auth::login::random_token(CLIENT_ID_BYTES)
            ),
            client_name: client.client_name,
            redirect_uris: client.redirect_uris,
            metadata: client.metadata,
            created_at: now_ms(),
        };
        self.remember_oauth_client(&client).await?;
        Ok(client)
    }

    /// Records (or refreshes) a client the server did not register: one described by its Client
    /// ID Metadata Document, whose id is its URL. Its codes and sign-ins refer to it like any
    /// other's.
    pub async fn remember_oauth_client(&self, client: &OAuthClient) -> Result<()> {
        let redirect_uris = serde_json::to_string(&client.redirect_uris).map_err(encode_error)?;
        let metadata = serde_json::to_string(&client.metadata).map_err(encode_error)?;
        sqlx::query(
            "INSERT INTO oauth_clients (client_id, project, environment, client_name, \
             redirect_uris, metadata, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (client_id) DO UPDATE SET client_name = excluded.client_name, \
             redirect_uris = excluded.redirect_uris, metadata = excluded.metadata \
             WHERE oauth_clients.project = excluded.project \
             AND oauth_clients.environment = excluded.environment",
        )
        .bind(&client.client_id)
        .bind(self.project())
        .bind(self.environment())
        .bind(client.client_name.as_deref())
        .bind(redirect_uris)
        .bind(metadata)
        .bind(client.created_at)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The client of this id registered in this project and environment.
    pub async fn oauth_client(&self, client_id: &str) -> Result<Option<OAuthClient>> {
        let row = sqlx::query(&format!(
            "SELECT {CLIENT_COLUMNS} FROM oauth_clients \
             WHERE client_id = $1 AND project = $2 AND environment = $3"
        ))
        .bind(client_id)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(client_from_row).transpose()
    }

    /// Records an authorization code (by its hash) for `grant`, valid for `ttl`, and forgets the
    /// codes that expired: the table only ever holds the codes of the last minute or so. The
    /// client and the user must exist (foreign keys).
    pub async fn create_oauth_code(
        &self,
        code_hash: &str,
        grant: &CodeGrant,
        ttl: Duration,
    ) -> Result<()> {
        let now = now_ms();
        sqlx::query("DELETE FROM oauth_codes WHERE expires_at < $1")
            .bind(now)
            .execute(self.pool())
            .await?;
        sqlx::query(
            "INSERT INTO oauth_codes (code_hash, project, environment, client_id, user_id, \
             redirect_uri, code_challenge, resource, scope, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(code_hash)
        .bind(self.project())
        .bind(self.environment())
        .bind(&grant.client_id)
        .bind(grant.user_id)
        .bind(&grant.redirect_uri)
        .bind(&grant.code_challenge)
        .bind(&grant.resource)
        .bind(&grant.scope)
        .bind(now)
        .bind(now.saturating_add(millis(ttl)))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Spends the code of this hash: `Some` only for the first exchange of an unexpired code of
    /// this project and environment. Marking it used and reading it is one statement, so two
    /// exchanges racing with the same code cannot both win. The code is spent whatever the
    /// caller finds wrong afterwards (another client, a bad PKCE verifier): a code is tried once.
    pub async fn redeem_oauth_code(&self, code_hash: &str) -> Result<Option<CodeGrant>> {
        let now = now_ms();
        let row = sqlx::query(
            "UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND project = $3 \
             AND environment = $4 AND used_at IS NULL AND expires_at > $1 \
             RETURNING client_id, user_id, redirect_uri, code_challenge, resource, scope",
        )
        .bind(now)
        .bind(code_hash)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(CodeGrant {
            client_id: row.try_get(0)?,
            user_id: row.try_get(1)?,
            redirect_uri: row.try_get(2)?,
            code_challenge: row.try_get(3)?,
            resource: row.try_get(4)?,
            scope: row.try_get(5)?,
        }))
    }

    /// Starts a refresh-token family for a user who just signed in interactively with this
    /// client: its session starts now. Its first token is added with [`Store::add_refresh_token`].
    pub async fn start_oauth_grant(
        &self,
        client_id: &str,
        user_id: i64,
        resource: &str,
        scope: &str,
    ) -> Result<RefreshGrant> {
        let grant = RefreshGrant {
            family_id: uuid::Uuid::now_v7().to_string(),
            client_id: client_id.to_owned(),
            user_id,
            resource: resource.to_owned(),
            scope: scope.to_owned(),
            session_started_at: now_ms(),
        };
        sqlx::query(
            "INSERT INTO oauth_grants (family_id, project, environment, client_id, user_id, \
             resource, scope, session_started_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&grant.family_id)
        .bind(self.project())
        .bind(self.environment())
        .bind(&grant.client_id)
        .bind(grant.user_id)
        .bind(&grant.resource)
        .bind(&grant.scope)
        .bind(grant.session_started_at)
        .execute(self.pool())
        .await?;
        Ok(grant)
    }

    /// Adds a refresh token (by its hash) to a family of this project and environment, with an
    /// expiry (unix ms) or none, and forgets the tokens and families kept past
    /// [`SPENT_RETENTION`]. A token added to a revoked family is stored but never valid, so a
    /// rotation racing a replay detection cannot leave a live token behind. `NotFound` when the
    /// family is not of this project and environment (or was forgotten).
    pub async fn add_refresh_token(
        &self,
        token_hash: &str,
        family_id: &str,
        expires_at: Option<i64>,
    ) -> Result<()> {
        let now = now_ms();
        self.forget_spent_refresh_tokens(now).await?;
        let added = sqlx::query(
            "INSERT INTO oauth_refresh_tokens (token_hash, family_id, created_at, expires_at) \
             SELECT $1, family_id, $2, $3 FROM oauth_grants \
             WHERE family_id = $4 AND project = $5 AND environment = $6",
        )
        .bind(token_hash)
        .bind(now)
        .bind(expires_at)
        .bind(family_id)
        .bind(self.project())
        .bind(self.environment())
        .execute(self.pool())
        .await?;
        if added.rows_affected() == 0 {
            return Err(Error::NotFound(format!("OAuth grant {family_id:?}")));
        }
        Ok(())
    }

    /// Spends a refresh token (by its hash). Live (unspent, unexpired, its family not revoked):
    /// it is marked spent in the same statement that checks it, so of two refreshes racing with
    /// one token exactly one is `Valid`. Otherwise the token is looked up to say why: spent
    /// already or its family revoked is a replay, which revokes the family (`Reused`).
    pub async fn use_refresh_token(&self, token_hash: &str) -> Result<RefreshUse> {
        let now = now_ms();
        let spent: Option<String> = sqlx::query_scalar(
            "UPDATE oauth_refresh_tokens SET used_at = $1 WHERE token_hash = $2 \
             AND used_at IS NULL AND (expires_at IS NULL OR expires_at > $1) \
             AND EXISTS (SELECT 1 FROM oauth_grants g \
             WHERE g.family_id = oauth_refresh_tokens.family_id AND g.project = $3 \
             AND g.environment = $4 AND g.revoked_at IS NULL) \
             RETURNING family_id",
        )
        .bind(now)
        .bind(token_hash)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        if let Some(family_id) = spent {
            // The family is gone only if its user or client was deleted meanwhile, its tokens
            // with it.
            return Ok(match self.refresh_grant(&family_id).await? {
                Some(grant) => RefreshUse::Valid(grant),
                None => RefreshUse::Unknown,
            });
        }
        let row = sqlx::query(&format!(
            "SELECT t.used_at, t.expires_at, g.revoked_at, {GRANT_COLUMNS} \
             FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.family_id = t.family_id \
             WHERE t.token_hash = $1 AND g.project = $2 AND g.environment = $3"
        ))
        .bind(token_hash)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else {
            return Ok(RefreshUse::Unknown);
        };
        let used_at: Option<i64> = row.try_get(0)?;
        let expires_at: Option<i64> = row.try_get(1)?;
        let revoked_at: Option<i64> = row.try_get(2)?;
        let grant = grant_from_row(&row, 3)?;
        if used_at.is_some() || revoked_at.is_some() {
            self.revoke_family(&grant.family_id, now).await?;
            return Ok(RefreshUse::Reused(grant));
        }
        if expires_at.is_some_and(|at| at <= now) {
            return Ok(RefreshUse::Expired);
        }
        // Live, unspent and unrevoked, yet the update missed it: only a clock running backwards
        // between the two statements could do that. Refuse without revoking anything.
        Ok(RefreshUse::Unknown)
    }

    /// Revokes a family: none of its tokens is valid any more, and `oauth_grant_revoked` says
    /// so to whoever checks an access token minted from it. Revoking twice keeps the first time.
    pub async fn revoke_oauth_grant(&self, family_id: &str) -> Result<()> {
        self.revoke_family(family_id, now_ms()).await
    }

    /// Whether the family is revoked. A family this project and environment does not know
    /// (forgotten after [`SPENT_RETENTION`], or never issued here) counts as revoked: an access
    /// token naming it must not be honoured.
    pub async fn oauth_grant_revoked(&self, family_id: &str) -> Result<bool> {
        let revoked_at: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT revoked_at FROM oauth_grants \
             WHERE family_id = $1 AND project = $2 AND environment = $3",
        )
        .bind(family_id)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        Ok(revoked_at.is_none_or(|at| at.is_some()))
    }

    /// The family of this id in this project and environment, revoked or not.
    async fn refresh_grant(&self, family_id: &str) -> Result<Option<RefreshGrant>> {
        let row = sqlx::query(&format!(
            "SELECT {GRANT_COLUMNS} FROM oauth_grants g \
             WHERE g.family_id = $1 AND g.project = $2 AND g.environment = $3"
        ))
        .bind(family_id)
        .bind(self.project())
        .bind(self.environment())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(|row| grant_from_row(row, 0)).transpose()
    }

    async fn revoke_family(&self, family_id: &str, now: i64) -> Result<()> {
        sqlx::query(
            "UPDATE oauth_grants SET revoked_at = $1 WHERE family_id = $2 AND project = $3 \
             AND environment = $4 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(family_id)
        .bind(self.project())
        .bind(self.environment())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Forgets, in every project, the refresh tokens spent or expired more than
    /// [`SPENT_RETENTION`] ago and the families revoked that long ago (their tokens with them),
    /// so the tables hold the live sessions and about a day of history. Called on each rotation,
    /// like `create_login_code` forgets expired codes: the indexed deletes find nothing most of
    /// the time.
    async fn forget_spent_refresh_tokens(&self, now: i64) -> Result<()> {
        let before = now.saturating_sub(millis(SPENT_RETENTION));
        sqlx::query("DELETE FROM oauth_refresh_tokens WHERE used_at < $1 OR expires_at < $1")
            .bind(before)
            .execute(self.pool())
            .await?;
        sqlx::query("DELETE FROM oauth_grants WHERE revoked_at < $1")
            .bind(before)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
