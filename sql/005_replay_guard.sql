-- Replays of body-only signatures: for a scheme whose signature does not cover the event
-- id (github, shopify, hmac with an id header), the gateway records the SHA-256 of what
-- the signature covers, and this index makes a second row with the same digest a
-- duplicate, whatever delivery id it claims. NULL for every other event (and for rows
-- recorded before this migration), so the index holds only the rows that need it.
-- UNIQUE (provider, event_id) stays the idempotency gate; the ingest INSERT skips a
-- conflict with either. Idempotent: safe to apply again.
--
-- Adding a nullable column without a default changes no row; building the partial index
-- reads the table once and holds off inserts meanwhile (it finds no entry to add).

ALTER TABLE processed_webhooks ADD COLUMN IF NOT EXISTS body_sha256 bytea;

CREATE UNIQUE INDEX IF NOT EXISTS processed_webhooks_provider_body_sha256_key
    ON processed_webhooks (provider, body_sha256)
    WHERE body_sha256 IS NOT NULL;
