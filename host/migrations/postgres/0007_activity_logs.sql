-- Activity logs (platform-api.md §1.2, §4.2): one row per operation of a user (a list, a read,
-- a write, an action, a note, an approval…), written in batches by `platform::activity`. Names
-- (email, username, team, collection) are snapshots taken when the operation ran. Record values
-- are never stored: only the ids of the records an operation touched.
--
-- `status` is `completed` or `failed` (an operation refused or broken after it was attempted);
-- the public API serves completed ones. `record_ids` is the JSON array served as `recordIds`;
-- `activity_log_records` holds the same ids one per row, so that a `recordId` filter uses an
-- index instead of scanning JSON.
CREATE TABLE activity_logs (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    type TEXT NOT NULL,
    action TEXT NOT NULL,
    label TEXT,
    status TEXT NOT NULL,
    user_id BIGINT NOT NULL,
    user_email TEXT NOT NULL,
    username TEXT NOT NULL,
    team_name TEXT NOT NULL,
    collection_name TEXT,
    record_ids TEXT,
    origin TEXT NOT NULL,
    token_id TEXT,
    request_id TEXT
);
-- The default listing (newest first) and the date filters; other filters are residual on it,
-- except the user id and the collection, which have their own. Every index is paid on each
-- write and the log is written on every request, so `userEmail`, `teamName`, `action` and `type`
-- stay residual (newest first, they stop at `limit` matches).
CREATE INDEX activity_logs_recent ON activity_logs (project, environment, created_at DESC, id DESC);
CREATE INDEX activity_logs_user ON activity_logs (project, environment, user_id, created_at DESC, id DESC);
CREATE INDEX activity_logs_collection ON activity_logs (project, environment, collection_name, created_at DESC, id DESC);

CREATE TABLE activity_log_records (
    activity_log_id TEXT NOT NULL REFERENCES activity_logs (id) ON DELETE CASCADE,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    record_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (activity_log_id, record_id)
);
CREATE INDEX activity_log_records_record ON activity_log_records (project, environment, record_id, created_at DESC);
