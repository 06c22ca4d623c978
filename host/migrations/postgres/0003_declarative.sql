-- Which parts of the permission model a declarative file (`permissions.toml`, mode "managed")
-- holds the truth of, per environment: the CLI and the admin API refuse writes to those parts.
-- `document` is the applied file, normalized (JSON), so that a refusal can say what the file says.
CREATE TABLE declarative_state (
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    parts TEXT NOT NULL,
    document TEXT NOT NULL,
    applied_at BIGINT NOT NULL,
    PRIMARY KEY (project, environment)
);
