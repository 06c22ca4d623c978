-- Application tokens of the public API (platform::tokens, issue 12 §1). A token is shown once and
-- only the SHA-256 of the whole token (hex) is kept: UNIQUE, so verifying one is one index lookup,
-- and a copy of the store gives nothing to replay. `hint` (prefix + last 4) lets a user tell their
-- tokens apart. Scopes are the canonical sorted list, comma-separated. Times are unix ms.
CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    scopes TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    -- Written at most once a minute per token (coalesced by the verifier).
    last_used_at BIGINT,
    revoked_at BIGINT,
    revoked_by_user_id BIGINT
);
-- A user's tokens, for the listing.
CREATE INDEX api_tokens_owner ON api_tokens (project, user_id, revoked_at);
