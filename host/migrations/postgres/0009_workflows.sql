-- Workflows (issue 13, platform-api.md §4.4): definitions and their versions, triggers with
-- signed webhook URLs, runs and their steps. The runs table is the queue: workers claim queued
-- runs with a lease (`locked_by`, `lease_expires_at`), and a run whose lease expired is claimed
-- again. Times are unix ms; definitions, contexts and step data are JSON text.
--
-- Step inputs and outputs may hold record values: they stay in this store, never in logs.

--
-- Flags are BIGINT 0/1 and counters BIGINT, as in the other tables: one decoding through sqlx Any.
-- A workflow of one collection. Every change of its definition is a new row of
-- workflow_versions; `latest_version` is the one new runs start on, while `active`.
CREATE TABLE workflows (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    name TEXT NOT NULL,
    collection_name TEXT NOT NULL,
    description TEXT,
    active BIGINT NOT NULL,
    latest_version BIGINT NOT NULL,
    -- `file` (the workflows folder) or `api`.
    source TEXT NOT NULL,
    created_by_user_id BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (project, environment, name)
);

CREATE TABLE workflow_versions (
    id TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    version BIGINT NOT NULL,
    definition TEXT NOT NULL,
    -- SHA-256 hex of the canonical definition: loading an unchanged file makes no new version.
    definition_hash TEXT NOT NULL,
    created_by_user_id BIGINT,
    created_at BIGINT NOT NULL,
    UNIQUE (workflow_id, version)
);

-- How runs of a workflow start: `manual` and `webhook` (one each per workflow). A webhook URL
-- carries (id, url_version, signing_kid) under an HMAC; regenerating bumps `url_version`, so the
-- old URL is refused as superseded; disabling flips `enabled` only, so enabling again restores
-- the same URL.
CREATE TABLE workflow_triggers (
    id TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    url_version BIGINT NOT NULL,
    signing_kid TEXT,
    rate_limit_per_minute BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    updated_by_user_id BIGINT,
    UNIQUE (workflow_id, kind)
);

CREATE TABLE workflow_trigger_url_versions (
    trigger_id TEXT NOT NULL REFERENCES workflow_triggers (id) ON DELETE CASCADE,
    url_version BIGINT NOT NULL,
    signing_kid TEXT,
    created_at BIGINT NOT NULL,
    created_by_user_id BIGINT,
    superseded_at BIGINT,
    superseded_by_user_id BIGINT,
    PRIMARY KEY (trigger_id, url_version)
);

-- One run of a workflow version on one record. `state` is queued, running, awaiting_input,
-- succeeded, failed or cancelled; `waiting_reason` says why an awaiting run waits.
CREATE TABLE workflow_runs (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    workflow_id TEXT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    version_id TEXT NOT NULL REFERENCES workflow_versions (id),
    collection_name TEXT NOT NULL,
    -- The record's id in its packed wire form (`1|2` for a composite key).
    record_id TEXT NOT NULL,
    state TEXT NOT NULL,
    waiting_reason TEXT,
    -- manual, webhook, schedule, record_change or sub_workflow.
    trigger_kind TEXT NOT NULL,
    trigger_id TEXT,
    trigger_url_version BIGINT,
    -- The run acts with this user's rights (the token's user for a webhook).
    user_id BIGINT NOT NULL,
    token_id TEXT,
    parent_run_id TEXT,
    -- The step the run is at (its index in workflow_run_steps), and the context steps build.
    current_step_index BIGINT,
    context TEXT NOT NULL,
    assignee_user_id BIGINT,
    assignee_team TEXT,
    error_code TEXT,
    error_message TEXT,
    attempt BIGINT NOT NULL,
    available_at BIGINT NOT NULL,
    locked_by TEXT,
    lease_expires_at BIGINT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    updated_at BIGINT NOT NULL,
    finished_at BIGINT
);
-- One ongoing run per (workflow, record), enforced by the store: the webhook inserts with
-- `ON CONFLICT … DO NOTHING` and reads "no row" as 409 (no check-then-insert race).
CREATE UNIQUE INDEX workflow_runs_ongoing ON workflow_runs (workflow_id, collection_name, record_id)
    WHERE state IN ('queued', 'running', 'awaiting_input');
-- Claiming the next queued run.
CREATE INDEX workflow_runs_queue ON workflow_runs (available_at) WHERE state = 'queued';
-- The lease reaper.
CREATE INDEX workflow_runs_leases ON workflow_runs (lease_expires_at) WHERE state = 'running';
-- A record's run history, and a workflow's.
CREATE INDEX workflow_runs_record ON workflow_runs (project, environment, collection_name, record_id, created_at DESC);
CREATE INDEX workflow_runs_workflow ON workflow_runs (workflow_id, created_at DESC);

-- The steps of a run in the order they ran (a revised step is run again at a new index, with
-- `original_step_index` pointing back). `phase` is the write-ahead marker of mutating steps:
-- `executing` is saved before the side effect and `done` with its result after, so a step that
-- was done is never run twice, and one found `executing` after a crash waits for a person.
CREATE TABLE workflow_run_steps (
    run_id TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    step_index BIGINT NOT NULL,
    step_key TEXT NOT NULL,
    step_type TEXT NOT NULL,
    mode TEXT NOT NULL,
    -- pending, running, awaiting_input, succeeded, failed, skipped or cancelled.
    status TEXT NOT NULL,
    revised BIGINT NOT NULL,
    original_step_index BIGINT,
    attempt BIGINT NOT NULL,
    phase TEXT,
    selected_option TEXT,
    input TEXT,
    output TEXT,
    error_message TEXT,
    actor_user_id BIGINT,
    started_at BIGINT,
    finished_at BIGINT,
    PRIMARY KEY (run_id, step_index)
);
