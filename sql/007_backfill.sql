-- Backfill from the providers' APIs (`gateway backfill PROVIDER`). Idempotent: safe to
-- apply again.
--
-- 1. Where each recorded event came from: 'live' for what reached POST /webhooks/{provider}
--    or POST /v1/events, 'backfill' for what `gateway backfill` fetched from the
--    provider's API because it never arrived. A constant default adds the column without
--    rewriting the table (PostgreSQL 11+); every existing row arrived live.
ALTER TABLE processed_webhooks ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT 'live';

-- 2. One row per (provider, window, type filter): how far a backfill of that window got,
--    so a run that dies continues from the provider's page cursor instead of starting
--    over, and what it counted so far. `cursor` is the provider's own (a Stripe event
--    id, a GitHub deliveries cursor, a Paddle event id); NULL = from the newest event.
CREATE TABLE IF NOT EXISTS backfill_progress (
    provider     text        NOT NULL,
    since        timestamptz NOT NULL,
    until        timestamptz NOT NULL,
    types        text        NOT NULL DEFAULT '',   -- the --type filter, sorted, comma-joined
    cursor       text,
    pages        integer     NOT NULL DEFAULT 0,
    fetched      integer     NOT NULL DEFAULT 0,
    present      integer     NOT NULL DEFAULT 0,
    recovered    integer     NOT NULL DEFAULT 0,
    failed       integer     NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,                       -- NULL while unfinished
    PRIMARY KEY (provider, since, until, types)
);
