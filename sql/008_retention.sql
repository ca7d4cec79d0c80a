-- Retention: payloads (bodies and headers) are removed after `[retention]
-- payload_max_age_s`, dedup keys (the rows themselves) after `key_max_age_s` (0 = kept
-- for ever). `gateway retention run` and the background task of `gateway serve` do it in
-- small batches. Idempotent: safe to apply again.
--
-- Adding nullable columns without a default rewrites nothing. No index is added to
-- processed_webhooks: the payload pass walks the primary key from a stored watermark
-- (retention_progress), so the ingest INSERT maintains no more indexes than before, and
-- emptying a body touches no indexed column (a HOT update where the page has room).

ALTER TABLE processed_webhooks ADD COLUMN IF NOT EXISTS payload_removed_at timestamptz;
ALTER TABLE dlq_webhooks ADD COLUMN IF NOT EXISTS payload_removed_at timestamptz;

-- Deleting a key looks for dead letters that reference it (the foreign key's own check,
-- and the "never while an open dead letter holds it" rule); without this index each
-- deleted row would scan dlq_webhooks.
CREATE INDEX IF NOT EXISTS dlq_webhooks_webhook_id_idx
    ON dlq_webhooks (webhook_id)
    WHERE webhook_id IS NOT NULL;

-- Resolved dead letters whose payload is still kept, oldest resolution first: what the
-- dead-letter pass walks (and, through webhook_id, the event rows it held back).
CREATE INDEX IF NOT EXISTS dlq_webhooks_resolved_payload_idx
    ON dlq_webhooks (resolved_at, id)
    WHERE is_resolved AND payload_removed_at IS NULL;

-- How far each pass got: every processed_webhooks row below `next_id` was either
-- emptied or held back (by a dead letter, whose own pass releases it later) when the
-- pass went by. The watermark never passes a row still waiting for the outbox.
CREATE TABLE IF NOT EXISTS retention_progress (
    name       text        PRIMARY KEY,
    next_id    bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
