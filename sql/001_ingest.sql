-- Ingestion: the idempotency gate, which doubles as the outbox, and the dead-letter table.

CREATE TABLE IF NOT EXISTS processed_webhooks (
    id               bigserial PRIMARY KEY,
    provider         text        NOT NULL,   -- provider name, or 'service:{name}' for internal events
    event_id         text        NOT NULL,
    event_type       text,                   -- NULL when the event carried none (parked in the DLQ)
    subject          text,                   -- NULL when the event cannot be published (parked in the DLQ)
    headers          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    body             bytea       NOT NULL,   -- the raw request body, byte for byte
    received_at      timestamptz NOT NULL DEFAULT now(),
    published_at     timestamptz,            -- set only after JetStream's PubAck
    publish_attempts integer     NOT NULL DEFAULT 0,
    CONSTRAINT processed_webhooks_provider_event_id_key UNIQUE (provider, event_id)
);

-- The outbox relay scans only rows that still have to reach the stream.
CREATE INDEX IF NOT EXISTS processed_webhooks_unpublished_idx
    ON processed_webhooks (received_at)
    WHERE published_at IS NULL AND subject IS NOT NULL;

CREATE TABLE IF NOT EXISTS dlq_webhooks (
    id              bigserial PRIMARY KEY,
    webhook_id      bigint REFERENCES processed_webhooks (id),
    stage           text        NOT NULL,    -- 'ingest' | 'publish' | 'settlement' | ...
    provider        text        NOT NULL,
    event_id        text        NOT NULL,
    subject         text,
    error_class     text        NOT NULL,
    error_message   text        NOT NULL,
    error_detail    text,                    -- stack trace or structured detail
    payload         bytea       NOT NULL,    -- the original body
    headers         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    attempts        integer     NOT NULL DEFAULT 1,
    received_at     timestamptz NOT NULL DEFAULT now(),  -- when the event first arrived
    first_failed_at timestamptz NOT NULL DEFAULT now(),
    last_failed_at  timestamptz NOT NULL DEFAULT now(),
    is_resolved     boolean     NOT NULL DEFAULT false,
    resolved_at     timestamptz,
    resolution      text
);

-- One open dead letter per event and stage: a redelivered failure updates it instead of
-- adding a second row.
CREATE UNIQUE INDEX IF NOT EXISTS dlq_webhooks_open_event_stage_key
    ON dlq_webhooks (provider, event_id, stage)
    WHERE NOT is_resolved;

CREATE INDEX IF NOT EXISTS dlq_webhooks_unresolved_idx
    ON dlq_webhooks (first_failed_at)
    WHERE NOT is_resolved;
