-- Canopy's own store: who the users are and what they may do (issue 11). Times are unix
-- milliseconds (UTC) and JSON documents are text, in both dialects, so the queries are the same.
CREATE TABLE roles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (project, name)
);

CREATE TABLE teams (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (project, name)
);

CREATE TABLE users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    email TEXT NOT NULL,
    first_name TEXT NOT NULL DEFAULT '',
    last_name TEXT NOT NULL DEFAULT '',
    permission_level TEXT NOT NULL DEFAULT 'user',
    role_id BIGINT REFERENCES roles (id) ON DELETE SET NULL,
    tags TEXT NOT NULL DEFAULT '{}',
    password_hash TEXT,
    disabled BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (project, email)
);

-- A user's first team (lowest position) is the `team` claim of their session token.
CREATE TABLE team_members (
    team_id BIGINT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    position BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user ON team_members (user_id, position);

-- The environment document of the permission API (`/liana/v4/permissions/environment`).
CREATE TABLE environment_permissions (
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    document TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project, environment)
);

-- One rendering per team and environment; its id is the session token's `renderingId`.
CREATE TABLE renderings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    team_id BIGINT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    document TEXT NOT NULL DEFAULT '{}',
    updated_at BIGINT NOT NULL,
    UNIQUE (project, environment, team_id)
);

CREATE TABLE ip_whitelists (
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    document TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project, environment)
);

CREATE TABLE approval_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    collection_name TEXT NOT NULL,
    action_name TEXT NOT NULL,
    requester_id BIGINT NOT NULL,
    requester_email TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    -- The action body's `data.attributes` as the requester sent it (values, ids, all_records...).
    attributes TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    decided_by_id BIGINT,
    decided_by_email TEXT,
    decided_at BIGINT,
    comment TEXT,
    outcome TEXT
);
CREATE INDEX approval_requests_env ON approval_requests (project, environment, status, id);

CREATE TABLE admin_logs (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    type TEXT NOT NULL,
    resource TEXT NOT NULL,
    initiator TEXT NOT NULL,
    actor_user_id BIGINT,
    actor_email TEXT,
    actor_username TEXT,
    target_ref TEXT,
    previous_value TEXT,
    new_value TEXT
);
CREATE INDEX admin_logs_project ON admin_logs (project, created_at DESC, id DESC);
CREATE INDEX admin_logs_actor ON admin_logs (project, actor_user_id, created_at DESC);
