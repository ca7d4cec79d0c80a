-- DLQ operations: who resolved a row by hand and why, the replay order, and the state of
-- the in-process alerts. Idempotent: safe to apply again.

ALTER TABLE dlq_webhooks ADD COLUMN IF NOT EXISTS resolution_note text;  -- `dlq resolve --note`
ALTER TABLE dlq_webhooks ADD COLUMN IF NOT EXISTS resolved_by text;      -- OS user who resolved it

-- `dlq replay` claims open rows oldest first: (received_at, id) is its ORDER BY.
CREATE INDEX IF NOT EXISTS dlq_webhooks_replay_order_idx
    ON dlq_webhooks (received_at, id)
    WHERE NOT is_resolved;

-- "Rows added in the last 5 minutes" counts resolved rows too.
CREATE INDEX IF NOT EXISTS dlq_webhooks_first_failed_idx
    ON dlq_webhooks (first_failed_at);

-- One row per alert (and per subject for the retry alert): what the webhook receiver was
-- last told. Kept here rather than in memory so that several gateway processes, or one
-- restarted, still notify once per episode.
CREATE TABLE IF NOT EXISTS dlq_alert_state (
    rule        text        NOT NULL,
    key         text        NOT NULL DEFAULT '',
    state       text        NOT NULL CHECK (state IN ('ok', 'firing')),
    since       timestamptz NOT NULL,
    value       float8,
    notified_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (rule, key)
);
