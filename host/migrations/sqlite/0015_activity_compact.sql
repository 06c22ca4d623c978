-- Compact activity log (issue 21 §3): an entry cost about 700 bytes on disk with its indexes on
-- SQLite, now about 190 (175 after VACUUM) at 1M entries (host/benches/activity.rs). How:
-- - names repeated on every entry are interned in small lookup tables: the project and
--   environment (`activity_scopes`), the user as they were when they acted (`activity_actors`:
--   id, email, username, team), and collections, action labels and token ids (`activity_names`);
-- - the action is a small integer (`activity_actions`, fixed by `platform::activity::Action`),
--   `type` follows from it, status and origin are small integers;
-- - the entry id and the request id (UUIDs) are 16-byte blobs, not 36 characters of text;
-- - one record id is stored as itself, several (or one starting with `[`) as a JSON array;
-- - entries are numbered in write order (`seq`, the rowid), which every index carries in 1 to 4
--   bytes instead of the 36-byte id; ties of the same millisecond are listed in that order;
-- - only the indexes a listing filter needs (see `Store::activity_logs`).
--
-- `activity_logs` becomes a view with the old columns, for operators and tests reading the store.

CREATE TABLE activity_scopes (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    UNIQUE (project, environment)
);

CREATE TABLE activity_actors (
    id INTEGER PRIMARY KEY,
    user_id BIGINT NOT NULL,
    email TEXT NOT NULL,
    username TEXT NOT NULL,
    team_name TEXT NOT NULL,
    UNIQUE (user_id, email, username, team_name)
);
CREATE INDEX activity_actors_email ON activity_actors (email);
CREATE INDEX activity_actors_team ON activity_actors (team_name);

CREATE TABLE activity_names (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE activity_actions (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL
);
INSERT INTO activity_actions (id, name, type) VALUES
    (1, 'create', 'write'),
    (2, 'read', 'read'),
    (3, 'update', 'write'),
    (4, 'delete', 'write'),
    (5, 'action', 'write'),
    (6, 'search', 'read'),
    (7, 'filter', 'read'),
    (8, 'listRelatedData', 'read'),
    (9, 'describeCollection', 'read'),
    (10, 'index', 'read'),
    (11, 'select', 'read'),
    (12, 'dashboard', 'read'),
    (13, 'workspace', 'read'),
    (14, 'export', 'read'),
    (15, 'createNote', 'write'),
    (16, 'openNote', 'read'),
    (17, 'deleteNote', 'write'),
    (18, 'createMessage', 'write'),
    (19, 'createApproval', 'write'),
    (20, 'approveApproval', 'write'),
    (21, 'rejectApproval', 'write'),
    (22, 'ignoreApprovalWarning', 'write'),
    (23, 'markApprovalAsFailed', 'write'),
    (24, 'sendApprovalBackInReview', 'write'),
    (25, 'startProcessingInboxTask', 'write'),
    (26, 'completeInboxTask', 'write'),
    (27, 'cancelInboxTask', 'write'),
    (28, 'cancelInboxTaskNotTreated', 'write'),
    (29, 'autoCancelInboxTask', 'write'),
    (30, 'assignUserToInboxTask', 'write'),
    (31, 'unassignUserFromInboxTask', 'write'),
    (32, 'triggerWorkflow', 'write'),
    (33, 'abortWorkflow', 'write'),
    (34, 'completeWorkflow', 'write'),
    (35, 'selectWorkflowOption', 'write'),
    (36, 'completeWorkflowStep', 'write'),
    (37, 'reviseWorkflowStep', 'write'),
    (38, 'resumeWorkflow', 'write');

-- status: 0 completed, 1 failed. origin: 0 ui, 1 api, 2 webhook, 3 mcp, 4 executor.
CREATE TABLE activity_entries (
    seq INTEGER PRIMARY KEY,
    scope INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    id BLOB NOT NULL,
    action INTEGER NOT NULL,
    status INTEGER NOT NULL,
    actor INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    collection INTEGER,
    record_ids TEXT,
    label INTEGER,
    origin INTEGER NOT NULL,
    token INTEGER,
    request_id BLOB
);
-- The listing newest first, the date filters, `startingAfter` and the pruning.
CREATE INDEX activity_entries_recent ON activity_entries (scope, created_at);
-- `startingAfter=<id>`.
CREATE UNIQUE INDEX activity_entries_id ON activity_entries (id);
-- `userId`, and `userEmail` and `teamName` when they name one user (the user's id is kept beside
-- the actor, so that a user's entries in several teams or under an old name are one range).
CREATE INDEX activity_entries_user ON activity_entries (scope, user_id, created_at);
-- `action`: most of the 38 actions are rare (notes, approvals, workflows), which a walk of the
-- newest entries would look for through the whole log.
CREATE INDEX activity_entries_action ON activity_entries (scope, action, created_at);
-- `collectionName`.
CREATE INDEX activity_entries_collection ON activity_entries (scope, collection, created_at);

-- `recordId`: one row per record id of an entry, newest first within a record.
CREATE TABLE activity_records (
    scope INTEGER NOT NULL,
    record_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (scope, record_id, created_at, seq)
) WITHOUT ROWID;

-- The existing entries, in their listing order.
INSERT INTO activity_scopes (project, environment)
    SELECT DISTINCT project, environment FROM activity_logs;
INSERT INTO activity_actors (user_id, email, username, team_name)
    SELECT DISTINCT user_id, user_email, username, team_name FROM activity_logs;
INSERT OR IGNORE INTO activity_names (name)
    SELECT collection_name FROM activity_logs WHERE collection_name IS NOT NULL
    UNION SELECT label FROM activity_logs WHERE label IS NOT NULL
    UNION SELECT token_id FROM activity_logs WHERE token_id IS NOT NULL;
INSERT INTO activity_entries
    (scope, created_at, id, action, status, actor, user_id, collection, record_ids, label, origin,
     token, request_id)
SELECT s.id, a.created_at,
    COALESCE(unhex(replace(a.id, '-', '')), CAST(a.id AS BLOB)),
    x.id,
    CASE a.status WHEN 'completed' THEN 0 ELSE 1 END,
    p.id, a.user_id, c.id,
    CASE
        WHEN a.record_ids IS NULL OR a.record_ids = '[]' THEN NULL
        WHEN json_array_length(a.record_ids) = 1
            AND substr(json_extract(a.record_ids, '$[0]'), 1, 1) <> '['
            THEN json_extract(a.record_ids, '$[0]')
        ELSE a.record_ids
    END,
    l.id,
    CASE a.origin WHEN 'ui' THEN 0 WHEN 'api' THEN 1 WHEN 'webhook' THEN 2 WHEN 'mcp' THEN 3
        ELSE 4 END,
    t.id,
    unhex(replace(a.request_id, '-', ''))
FROM activity_logs a
JOIN activity_scopes s ON s.project = a.project AND s.environment = a.environment
JOIN activity_actions x ON x.name = a.action
JOIN activity_actors p ON p.user_id = a.user_id AND p.email = a.user_email
    AND p.username = a.username AND p.team_name = a.team_name
LEFT JOIN activity_names c ON c.name = a.collection_name
LEFT JOIN activity_names l ON l.name = a.label
LEFT JOIN activity_names t ON t.name = a.token_id
ORDER BY a.created_at, a.id;
INSERT OR IGNORE INTO activity_records (scope, record_id, created_at, seq)
SELECT e.scope, r.record_id, e.created_at, e.seq
FROM activity_log_records r
JOIN activity_entries e ON e.id = COALESCE(unhex(replace(r.activity_log_id, '-', '')),
    CAST(r.activity_log_id AS BLOB));

DROP TABLE activity_log_records;
DROP TABLE activity_logs;

CREATE VIEW activity_logs AS
SELECT
    CASE WHEN length(e.id) = 16 THEN lower(
        substr(hex(e.id), 1, 8) || '-' || substr(hex(e.id), 9, 4) || '-' ||
        substr(hex(e.id), 13, 4) || '-' || substr(hex(e.id), 17, 4) || '-' ||
        substr(hex(e.id), 21)) ELSE CAST(e.id AS TEXT) END AS id,
    s.project, s.environment, e.created_at, x.type, x.name AS action,
    l.name AS label,
    CASE e.status WHEN 0 THEN 'completed' ELSE 'failed' END AS status,
    p.user_id, p.email AS user_email, p.username, p.team_name,
    c.name AS collection_name,
    CASE WHEN e.record_ids IS NULL THEN NULL
        WHEN substr(e.record_ids, 1, 1) = '[' THEN e.record_ids
        ELSE json_array(e.record_ids) END AS record_ids,
    CASE e.origin WHEN 0 THEN 'ui' WHEN 1 THEN 'api' WHEN 2 THEN 'webhook' WHEN 3 THEN 'mcp'
        ELSE 'executor' END AS origin,
    t.name AS token_id,
    CASE WHEN e.request_id IS NULL THEN NULL ELSE lower(
        substr(hex(e.request_id), 1, 8) || '-' || substr(hex(e.request_id), 9, 4) || '-' ||
        substr(hex(e.request_id), 13, 4) || '-' || substr(hex(e.request_id), 17, 4) || '-' ||
        substr(hex(e.request_id), 21)) END AS request_id
FROM activity_entries e
JOIN activity_scopes s ON s.id = e.scope
JOIN activity_actions x ON x.id = e.action
JOIN activity_actors p ON p.id = e.actor
LEFT JOIN activity_names c ON c.id = e.collection
LEFT JOIN activity_names l ON l.id = e.label
LEFT JOIN activity_names t ON t.id = e.token;
