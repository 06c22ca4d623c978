-- Workflow triggers beyond the webhook (issue 13 §4): the ticks of cron schedules. Instances
-- sharing a store fire each tick once: the one whose insert of the tick's row succeeds starts
-- its runs; the others see the row and skip it.
CREATE TABLE workflow_schedule_ticks (
    workflow_id TEXT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    -- The schedule's position in the definition's `triggers.schedules`.
    schedule_index BIGINT NOT NULL,
    -- The tick (unix ms) the row fires.
    tick_at BIGINT NOT NULL,
    -- The instance that claimed it, and how many runs it queued.
    claimed_by TEXT NOT NULL,
    runs BIGINT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (workflow_id, schedule_index, tick_at)
);
