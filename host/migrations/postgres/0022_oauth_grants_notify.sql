-- A sign-in (an OAuth refresh-token family) is revoked when one of its refresh tokens is
-- presented again: a stolen copy or a replay. Instances remember a sign-in's status for a while
-- (`Mcp::family_revoked`), so on a PostgreSQL store shared by several instances the revocation
-- announces itself on `canopy_changes` as `grants:<project>` when its transaction commits, and
-- every other instance reads its sign-ins again within milliseconds (`Store::listen_changes`)
-- instead of trusting them for up to `FAMILY_RECHECK`. Only the first revocation announces:
-- revoking twice keeps the first time and changes nothing.
CREATE FUNCTION canopy_announce_revocation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('canopy_changes', 'grants:' || NEW.project);
    RETURN NULL;
END;
$$;

CREATE TRIGGER oauth_grants_announce AFTER UPDATE OF revoked_at ON oauth_grants
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION canopy_announce_revocation();
