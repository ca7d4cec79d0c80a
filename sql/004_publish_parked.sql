-- Publishing: a row the broker refuses for good (too large for `max_payload`) or that
-- keeps failing to publish is parked in dlq_webhooks (stage 'publish') and marked here,
-- so the outbox relay stops claiming it and moves on. `gateway dlq replay` of the dead
-- letter clears the mark and the relay tries again. Idempotent: safe to apply again.

ALTER TABLE processed_webhooks ADD COLUMN IF NOT EXISTS publish_parked_at timestamptz;

-- The relay's claim skips parked rows; the index follows, so they cost it nothing.
CREATE INDEX IF NOT EXISTS processed_webhooks_outbox_idx
    ON processed_webhooks (received_at)
    WHERE published_at IS NULL AND subject IS NOT NULL AND publish_parked_at IS NULL;

DROP INDEX IF EXISTS processed_webhooks_unpublished_idx;
