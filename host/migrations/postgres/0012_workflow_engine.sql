-- The run engine (issue 13 §3, `workflows::engine`): what it needs beyond the tables of 0009.
--
-- A trigger-action step whose action needs an approval files an approval request and waits for
-- its decision; `approval_id` links the step to it, so that deciding the request (approve or
-- reject, `http::approvals`) finds the run to resume in one indexed read.
ALTER TABLE workflow_run_steps ADD COLUMN approval_id BIGINT;
CREATE INDEX workflow_run_steps_approval ON workflow_run_steps (approval_id)
    WHERE approval_id IS NOT NULL;

-- A sub-workflow's run names its parent: when it ends, the parent waiting for it resumes.
CREATE INDEX workflow_runs_parent ON workflow_runs (parent_run_id)
    WHERE parent_run_id IS NOT NULL;

-- Who started the run. `user_id` is who the run acts as now: a person who resumes a run takes
-- it over, and the run's later steps act with their rights.
ALTER TABLE workflow_runs ADD COLUMN started_by_user_id BIGINT;

-- The newest runs of the environment (the runs listing without a narrower filter).
CREATE INDEX workflow_runs_environment ON workflow_runs (project, environment, created_at DESC);
