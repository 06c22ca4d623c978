-- The audit trail (customizer::audit, platform::audit): one row per record created, updated or
-- deleted through the stack, written `pending` before the change with the values before it and
-- confirmed `done` after it with what changed. Values are JSON text in each column's wire form,
-- `changed_fields` lists the changed columns as ",a,b," for the history's `fields` filter.
-- The same table is created in a database named by `auditTrail.databaseUrl` (IF NOT EXISTS,
-- this text is also run there).
CREATE TABLE IF NOT EXISTS canopy_audit_trail (
    id BIGSERIAL PRIMARY KEY,
    entry_key TEXT NOT NULL UNIQUE,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    operation TEXT NOT NULL,
    collection TEXT NOT NULL,
    record_id TEXT,
    user_id BIGINT NOT NULL,
    user_first_name TEXT NOT NULL,
    user_last_name TEXT NOT NULL,
    user_email TEXT NOT NULL,
    action_name TEXT,
    correlation_key TEXT NOT NULL,
    previous_values TEXT NOT NULL,
    new_values TEXT NOT NULL,
    changed_fields TEXT NOT NULL,
    status TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS canopy_audit_trail_record
    ON canopy_audit_trail (project, environment, collection, record_id, created_at);
CREATE INDEX IF NOT EXISTS canopy_audit_trail_correlation
    ON canopy_audit_trail (project, environment, correlation_key);
