-- Every change to the permission model writes an admin log entry (`Store::admin_log`): users,
-- teams, roles, rights, scopes, tokens. On a PostgreSQL store shared by several instances, the
-- entry also announces itself on the `canopy_changes` channel when its transaction commits
-- (`pg_notify` is transactional), so every other instance reloads its permissions and drops its
-- cached tokens within milliseconds (`Store::listen_changes`) instead of at its next poll. A
-- trigger rather than a call in Rust: every writer, the CLI and older code paths included,
-- announces without knowing it.
CREATE FUNCTION canopy_announce_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('canopy_changes', NEW.project);
    RETURN NULL;
END;
$$;

CREATE TRIGGER admin_logs_announce AFTER INSERT ON admin_logs
    FOR EACH ROW EXECUTE FUNCTION canopy_announce_change();
