-- What on-call sees before rows park: each dependency's state, the events in retry, and
-- the lease that lets one process at a time evaluate the in-process alerts.
-- Idempotent: safe to apply again.
--
-- 1. A dependency's state as the worker processes last observed it (`gateway settle`
--    and `serve`'s relay), written only when a process sees it change (and re-asserted
--    at most every 30 s while seen), so a steady state costs nothing per event. `since`
--    is when it entered that state; `checked_at` and `checked_by` when and by which
--    process it was last seen so.
CREATE TABLE IF NOT EXISTS dependency_state (
    dependency  text        PRIMARY KEY,          -- currency-service, ledger, nats, database
    state       text        NOT NULL CHECK (state IN ('up', 'down')),
    since       timestamptz NOT NULL,
    checked_at  timestamptz NOT NULL,
    checked_by  text        NOT NULL,
    error_class text                              -- the failure that marked it down
);

-- 2. Settlement events whose last attempt failed transiently and that wait for their
--    next delivery: written when the worker schedules a retry, deleted when a
--    redelivered event settles or parks (a first delivery that settles writes nothing).
CREATE TABLE IF NOT EXISTS settlement_retries (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    error_class text        NOT NULL,
    dependency  text,                             -- the dependency the class blames, if any
    deliveries  integer     NOT NULL,
    retry_at    timestamptz NOT NULL,             -- when the next delivery is due
    noted_at    timestamptz NOT NULL,
    noted_by    text        NOT NULL,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX IF NOT EXISTS settlement_retries_retry_at_idx ON settlement_retries (retry_at);

-- 3. The in-process alerts' lease: one process at a time evaluates and notifies, so two
--    processes with different thresholds cannot answer each other's notices. The holder
--    renews it every evaluation; another process takes it once it has expired.
CREATE TABLE IF NOT EXISTS alert_lease (
    name        text        PRIMARY KEY,
    holder      text        NOT NULL,
    expires_at  timestamptz NOT NULL,
    settings    jsonb       NOT NULL,             -- the thresholds the holder judges with
    renewed_at  timestamptz NOT NULL
);
