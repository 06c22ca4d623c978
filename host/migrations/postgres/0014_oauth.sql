-- The OAuth 2.1 authorization server of the MCP endpoint (platform::oauth): clients registered
-- dynamically (RFC 7591), one-time authorization codes, and refresh tokens grouped in families,
-- one family per interactive sign-in of one client, so that a refresh token replayed after its
-- rotation revokes the whole family (RFC 9700 §4.14.2). Codes and refresh tokens are kept only
-- as the SHA-256 (hex) of their value: a copy of the store gives nothing to replay. Times are
-- unix ms.
CREATE TABLE oauth_clients (
    -- `mcp_` + 32 random URL-safe characters, chosen by the store.
    client_id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    client_name TEXT,
    -- A JSON array of the exact redirect URIs the client registered.
    redirect_uris TEXT NOT NULL,
    -- The registration document (JSON), echoed back by the registration endpoint.
    metadata TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE oauth_codes (
    code_hash TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    client_id TEXT NOT NULL REFERENCES oauth_clients (client_id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    redirect_uri TEXT NOT NULL,
    -- The PKCE S256 challenge, checked against the verifier at the exchange.
    code_challenge TEXT NOT NULL,
    -- The RFC 8707 resource (the MCP endpoint's URL) the tokens will be for.
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    -- Set by the one exchange that succeeds; a second one finds it set and is refused.
    used_at BIGINT
);
CREATE INDEX oauth_codes_expiry ON oauth_codes (expires_at);

-- One row per refresh-token family: what every token of the family grants, and whether the
-- family was revoked (by its user, or because one of its tokens was replayed).
CREATE TABLE oauth_grants (
    family_id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    client_id TEXT NOT NULL REFERENCES oauth_clients (client_id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    -- When the user signed in interactively: refreshing never extends it.
    session_started_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX oauth_grants_user ON oauth_grants (user_id);
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);
CREATE INDEX oauth_grants_revoked ON oauth_grants (revoked_at);

CREATE TABLE oauth_refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    family_id TEXT NOT NULL REFERENCES oauth_grants (family_id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    -- NULL: no bound of its own.
    expires_at BIGINT,
    -- Set by the one refresh that spends it; presenting it again is a replay.
    used_at BIGINT
);
CREATE INDEX oauth_refresh_tokens_family ON oauth_refresh_tokens (family_id);
CREATE INDEX oauth_refresh_tokens_used ON oauth_refresh_tokens (used_at);
CREATE INDEX oauth_refresh_tokens_expiry ON oauth_refresh_tokens (expires_at);
