-- Order per key: a sequence per (provider, order_key) taken at ingest, the position
-- settlement has applied up to, and a log of what it applied. Idempotent: safe to
-- apply again.
--
-- A key is what a provider's events are about (a payment intent, a transaction, an
-- order). Ingest numbers each new keyed event 1, 2, 3... per key, under a lock on the
-- key held until its transaction commits, so the numbers follow commit order.
-- Settlement applies a key's events only in that order: number n once n - 1 is applied.

-- No rewrite: nullable columns. NULL: the event is not ordered (no key, ordering off,
-- or a subject no ordered consumer receives).
ALTER TABLE processed_webhooks ADD COLUMN IF NOT EXISTS order_key text;
ALTER TABLE processed_webhooks ADD COLUMN IF NOT EXISTS key_seq bigint;
-- Parked events keep their place, so a replay can run a key's events in order.
ALTER TABLE dlq_webhooks ADD COLUMN IF NOT EXISTS order_key text;
ALTER TABLE dlq_webhooks ADD COLUMN IF NOT EXISTS key_seq bigint;

-- Ingest's side: the last number handed out per key. Written by ingest only.
CREATE TABLE IF NOT EXISTS order_counters (
    provider   text        NOT NULL,
    order_key  text        NOT NULL,
    last_seq   bigint      NOT NULL CHECK (last_seq > 0),
    touched_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, order_key)
) WITH (fillfactor = 70);  -- room for each update's new version on its page (HOT)

-- Settlement's side: how far each key is applied, and whether it is held. Written by
-- settlement and by the operator's commands only, so it never waits on ingest's locks.
CREATE TABLE IF NOT EXISTS order_applied (
    provider      text        NOT NULL,
    order_key     text        NOT NULL,
    applied_seq   bigint      NOT NULL DEFAULT 0 CHECK (applied_seq >= 0),
    progressed_at timestamptz NOT NULL DEFAULT now(),  -- when applied_seq last moved
    -- A hold: the event at held_seq was parked (its dead letter held_dlq_id) and every
    -- later event of the key is parked behind it until the hold is released.
    held_seq      bigint,
    held_dlq_id   bigint,
    hold_reason   text,
    held_at       timestamptz,
    PRIMARY KEY (provider, order_key),
    CONSTRAINT order_applied_hold_whole CHECK (
        (held_seq IS NULL) = (held_at IS NULL) AND (held_seq IS NULL) = (hold_reason IS NULL))
) WITH (fillfactor = 70);

CREATE INDEX IF NOT EXISTS order_applied_held_idx
    ON order_applied (held_at) WHERE held_at IS NOT NULL;

-- What settlement applied, one row per key and sequence, written in the transaction that
-- moved applied_seq to it (so, per key, `id` follows commit order). `outcome`:
--   applied  - the event was settled (or settles nothing) in its turn;
--   deferred - it failed for want of an earlier event of its own (a refund before its
--              capture): the key moved on, and the event settles on its own retries;
--              `resolution` says how that ended ('settled' or 'parked');
--   skipped  - moved past without settling: an operator's release (`actor`, `note`),
--              or `on_poison = "skip"` (its dead letter says why).
CREATE TABLE IF NOT EXISTS order_log (
    id          bigserial   PRIMARY KEY,
    provider    text        NOT NULL,
    order_key   text        NOT NULL,
    key_seq     bigint      NOT NULL CHECK (key_seq > 0),
    outcome     text        NOT NULL CHECK (outcome IN ('applied', 'deferred', 'skipped')),
    event_id    text,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    actor       text,
    note        text,
    resolution  text CHECK (resolution IN ('settled', 'parked')),
    resolved_at timestamptz,
    CONSTRAINT order_log_key_seq_key UNIQUE (provider, order_key, key_seq)
);

-- Deferrals still to be settled: few, looked up by key and sequence.
CREATE INDEX IF NOT EXISTS order_log_open_deferrals_idx
    ON order_log (provider, order_key, key_seq)
    WHERE outcome = 'deferred' AND resolution IS NULL;

-- Retention finds idle keys by age.
CREATE INDEX IF NOT EXISTS order_counters_touched_idx ON order_counters (touched_at);
