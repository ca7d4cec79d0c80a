-- Automatic re-drive of dead letters (`[dlq] auto_replay`, run by `gateway dlq run-jobs`).
-- Idempotent: safe to apply again.
--
-- 1. Each row counts its automatic replays apart from `attempts` (which counts every try,
--    the worker's, a person's and the automatic ones): `[dlq] auto_replay_max` caps this
--    count, and the backoff between automatic replays runs from the last one.
ALTER TABLE dlq_webhooks
    ADD COLUMN IF NOT EXISTS auto_replays        integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS last_auto_replay_at timestamptz;

-- 2. A round looks for the open rows of a few error classes.
CREATE INDEX IF NOT EXISTS dlq_webhooks_open_class_idx
    ON dlq_webhooks (error_class) WHERE NOT is_resolved;

-- 3. Each automatic replay is audited as the process's own action: `via = 'auto'`.
ALTER TABLE console_audit DROP CONSTRAINT IF EXISTS console_audit_via_check;
ALTER TABLE console_audit ADD CONSTRAINT console_audit_via_check
    CHECK (via IN ('cookie', 'bearer', 'proxy', 'cli', 'anonymous', 'auto'));
