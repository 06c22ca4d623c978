-- No-code actions an admin added from the console (issue 24, part 6), beside those of the config
-- file's `[[noCodeActions]]`. `definition` is the action as a `[[noCodeActions]]` entry would
-- write it, in JSON (webhook header values included: the endpoint needs them in clear, and the
-- console never shows them back).
CREATE TABLE no_code_actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    definition TEXT NOT NULL,
    created_by BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX no_code_actions_env ON no_code_actions (project, environment, id);
