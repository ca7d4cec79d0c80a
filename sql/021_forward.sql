-- Forwarding to HTTP services (`gateway forward`): the failed attempts of each event a
-- destination is still retrying. Idempotent: safe to apply again.
--
-- Only failures write here: an event delivered at its first attempt never touches the
-- table, and a row is removed once its event is delivered or parked. Counting attempts
-- here rather than by the stream's delivery count keeps a wait behind an earlier event
-- of the same key, or a forwarder's restart, from using up the retry schedule.
CREATE TABLE IF NOT EXISTS forward_attempts (
    destination     text        NOT NULL,
    provider        text        NOT NULL,
    event_id        text        NOT NULL,
    failures        integer     NOT NULL CHECK (failures > 0),
    first_failed_at timestamptz NOT NULL DEFAULT now(),
    last_failed_at  timestamptz NOT NULL DEFAULT now(),
    last_error      text        NOT NULL,
    PRIMARY KEY (destination, provider, event_id)
);

-- The keys a destination holds: its open dead letters that carry an ordering key.
CREATE INDEX IF NOT EXISTS dlq_webhooks_open_keyed_stage_idx
    ON dlq_webhooks (stage, provider, order_key)
    WHERE NOT is_resolved AND order_key IS NOT NULL;
