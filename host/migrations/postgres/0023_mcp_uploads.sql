-- Action files uploaded to the MCP server out of band (`mcp::uploads`), on a PostgreSQL store
-- shared by several instances: the PUT of the bytes and the `executeAction` that takes them may
-- reach different instances behind a balancer. One row per slot, made when the upload URL is
-- handed out; `size` and `bytes` stay NULL until the single PUT fills them (the conditional
-- UPDATE that makes the URL single-use). Rows are swept once their handle has expired, or
-- their URL did with nothing put. SQLite stores serve one process and keep files in memory.
CREATE TABLE mcp_uploads (
    upload_key TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    -- The user id the URL was made for (the handle carries it too, signed).
    uploader BIGINT NOT NULL,
    url_expires_at BIGINT NOT NULL,
    file_expires_at BIGINT NOT NULL,
    size BIGINT,
    bytes BYTEA
);
CREATE INDEX mcp_uploads_expiry ON mcp_uploads (file_expires_at);
