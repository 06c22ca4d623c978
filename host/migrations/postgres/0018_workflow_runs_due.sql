-- The engine's claim (`Store::claim_run`) looks for the environment's oldest due queued run.
-- The index on `available_at` alone left the planner with the environment's index, which reads
-- every run the environment ever had (any state) and sorts them: each claim grew with the
-- history (issue 23: 2,000 finished runs halved the engine's rate on SQLite). This one holds
-- only the queued runs, in the claim's order, so a claim reads one entry.
CREATE INDEX workflow_runs_due ON workflow_runs (project, environment, available_at, created_at)
    WHERE state = 'queued';
DROP INDEX workflow_runs_queue;
