-- The console's event log: its rare publish states read from indexes of their own.
-- Idempotent: safe to apply again.
--
-- The log's "parked" and "no subject" states are rare rows: found by filtering the
-- window (processed_webhooks_received_idx, sql/017) they would read every event in it,
-- ten million in a busy month. These partial indexes hold only those rows. Ingest adds
-- nothing to them for a publishable event (the predicate is false), and parking a row
-- for the relay, itself rare, is the one update they see.
CREATE INDEX IF NOT EXISTS processed_webhooks_parked_received_idx
    ON processed_webhooks (received_at, id) WHERE publish_parked_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS processed_webhooks_no_subject_received_idx
    ON processed_webhooks (received_at, id) WHERE subject IS NULL;
