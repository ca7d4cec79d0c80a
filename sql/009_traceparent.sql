-- Tracing: the W3C `traceparent` of the request that recorded the event, so whoever
-- publishes the row later (the inline publisher, or a relay after a NATS outage) joins
-- the request's trace. NULL while tracing is off. Idempotent: safe to apply again.
--
-- A nullable column without a default rewrites nothing, and it is in no index.
ALTER TABLE processed_webhooks ADD COLUMN IF NOT EXISTS traceparent text;
