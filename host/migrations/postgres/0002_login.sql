-- One-time authorization codes of the sign-in flow (auth::login): issued by the sign-in page or the
-- OpenID Connect callback, exchanged once at `GET /forest/authentication/callback`. Only a SHA-256
-- hash of each code is kept (hex), so a copy of the store cannot be replayed. Times are unix ms.
CREATE TABLE login_codes (
    code_hash TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The client's `state` (`{"renderingId":N}`), checked again at the exchange.
    state TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    -- Set by the one exchange that succeeds; a second one finds it set and is refused.
    used_at BIGINT
);
CREATE INDEX login_codes_expiry ON login_codes (expires_at);
