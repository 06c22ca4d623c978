-- The public API's rate limits, held in the store when it is PostgreSQL so that several
-- instances share one quota per token, user or address (`http::ratelimit`): one row per key and
-- policy with its GCRA theoretical arrival time (unix ms). A row whose time has passed is a
-- whole quota, the same as no row: they are pruned in the background.
CREATE TABLE api_rate_limits (
    project TEXT NOT NULL,
    policy TEXT NOT NULL,
    key TEXT NOT NULL,
    tat BIGINT NOT NULL,
    PRIMARY KEY (project, policy, key)
);
