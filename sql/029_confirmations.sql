-- The confirm stage (`gateway confirm`): a webhook that only names an object (Mollie's
-- classic `id=tr_…`) is recorded unpublished and waits here for its fetch from the
-- provider's API. The events the answer holds go through the idempotency gate as rows
-- of their own (`source = 'confirmed'`); what the API answered is kept beside the
-- request. Idempotent: safe to apply again.
CREATE TABLE IF NOT EXISTS confirmations (
    webhook_id  bigint PRIMARY KEY REFERENCES processed_webhooks (id) ON DELETE CASCADE,
    provider    text        NOT NULL,
    -- pending: a fetch is owed; confirmed: the answer's events are recorded;
    -- parked: a dead letter at stage 'confirm' says why (a 404 among them).
    state       text        NOT NULL DEFAULT 'pending',
    attempts    integer     NOT NULL DEFAULT 0,
    -- When the next fetch is due; while a worker fetches, the end of its lease.
    due_at      timestamptz NOT NULL DEFAULT now(),
    -- The last webhook that asked for a fetch: a repeat arriving during a fetch, which
    -- may have read the object before it changed, asks for one more.
    armed_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Since when a fetch has been owed: set when the row becomes pending, kept while it
    -- stays pending (the backlog's age, which the alert reads).
    pending_since timestamptz NOT NULL DEFAULT now(),
    created_at  timestamptz NOT NULL DEFAULT now(),
    fetched_at  timestamptz,
    answer      bytea,          -- the API's last answer, byte for byte
    last_error  text,
    CONSTRAINT confirmations_state_check
        CHECK (state IN ('pending', 'confirmed', 'parked'))
);

-- The worker claims the earliest due rows, read in order along this index (a leading
-- provider column would make every claim sort all the due rows: after an outage,
-- hundreds of thousands); the gauges count the pending ones.
CREATE INDEX IF NOT EXISTS confirmations_due_idx
    ON confirmations (due_at) WHERE state = 'pending';
