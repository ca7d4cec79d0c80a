-- Forwarding: an event a destination is retrying keeps its ordering key, its number and
-- when its retry is due, so a forwarder that restarts knows which keys wait for a retry
-- and keeps their later events behind it. Idempotent: safe to apply again.
ALTER TABLE forward_attempts ADD COLUMN IF NOT EXISTS order_key text;
ALTER TABLE forward_attempts ADD COLUMN IF NOT EXISTS key_seq bigint;
ALTER TABLE forward_attempts ADD COLUMN IF NOT EXISTS retry_due_at timestamptz;
