-- Every team has its rendering in every environment of its project from its creation on
-- (`Store::create_team`), so that its id is known before anyone signs in. Teams created before
-- this step got theirs at the first read: give the missing ones now, in team order, for each
-- environment the store knows (one with permissions or a rendering).
INSERT INTO renderings (project, environment, team_id, document, updated_at)
SELECT t.project, e.environment, t.id, '{}', (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT
FROM teams t
JOIN (
    SELECT project, environment FROM environment_permissions
    UNION
    SELECT project, environment FROM renderings
) e ON e.project = t.project
WHERE NOT EXISTS (
    SELECT 1 FROM renderings r
    WHERE r.project = t.project AND r.environment = e.environment AND r.team_id = t.id
)
ORDER BY t.id;
