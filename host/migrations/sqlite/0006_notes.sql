-- Notes on records and their threads of messages (issue 12, platform-api.md §4.1). A note keeps
-- the ids of its author and team, plus their names as they were when it was written: the API
-- shows the current names while the user or team exists, and the written ones after it is
-- removed, so a note never loses its author.
--
-- `created_at` strictly increases with `id` within an environment (see notes_clock), so the
-- `createdAt` filters become id bounds and every list is served by an index ending in `id`.
CREATE TABLE notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    team_id BIGINT,
    team_name TEXT NOT NULL,
    collection_name TEXT,
    record_id TEXT NOT NULL,
    title TEXT NOT NULL,
    created_by BIGINT NOT NULL,
    created_by_email TEXT NOT NULL,
    created_by_username TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    archived_at BIGINT,
    archived_by BIGINT,
    deleted_at BIGINT
);
-- Soft-deleted notes are never listed: every list index leaves them out.
CREATE INDEX notes_env ON notes (project, environment, id) WHERE deleted_at IS NULL;
CREATE INDEX notes_collection ON notes (project, environment, collection_name, id)
    WHERE deleted_at IS NULL;
CREATE INDEX notes_record ON notes (project, environment, record_id, id) WHERE deleted_at IS NULL;
CREATE INDEX notes_author ON notes (project, environment, created_by, id) WHERE deleted_at IS NULL;
CREATE INDEX notes_team ON notes (project, environment, team_id, id) WHERE deleted_at IS NULL;
-- Every note, deleted ones too: the createdAt bounds are turned into id bounds through it.
CREATE INDEX notes_created ON notes (project, environment, created_at);
CREATE INDEX notes_updated ON notes (project, environment, updated_at) WHERE deleted_at IS NULL;
CREATE INDEX notes_archived ON notes (project, environment, archived_at)
    WHERE deleted_at IS NULL AND archived_at IS NOT NULL;

CREATE TABLE note_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    note_id BIGINT NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
    author_id BIGINT NOT NULL,
    author_email TEXT NOT NULL,
    author_username TEXT NOT NULL,
    -- Sanitised against the allowlist of platform::notes::sanitize before it is stored.
    content_html TEXT NOT NULL,
    content_text TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX note_messages_note ON note_messages (note_id, created_at, id);

-- The last `created_at` given to a note of each environment. Taking a note's time through this
-- row (an upsert: the row is locked until the note's transaction ends) makes the times strictly
-- increase in id order, even for notes made in the same millisecond or by concurrent writers,
-- so paging by a `createdAt.lt` bound never skips a note.
CREATE TABLE notes_clock (
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    last_ms BIGINT NOT NULL,
    PRIMARY KEY (project, environment)
);
