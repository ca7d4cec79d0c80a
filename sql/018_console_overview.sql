-- The console's overview: each sender's newest event, and dead letters resolved per
-- hour. Idempotent: safe to apply again.
--
-- 1. The overview shows, for every configured provider and service, its newest event
--    and how old it is, so a provider that went quiet (an endpoint disabled upstream, a
--    rotated secret) stands out. No other index of processed_webhooks leads with the
--    provider and orders by time: without this one, finding the newest event of a
--    provider silent for a day read every event recorded since, and the page asks
--    every 10 s. One backward step of this index answers it at any table size. The
--    event log's search by provider uses it too where the provider is rare: a sender
--    with no event in a 30-day window of 1 M is answered in 0.02 ms instead of a walk of
--    the whole window (bench/console_lists.py). Ingest maintains one more entry per
--    event, and no column in it is ever updated (the outbox and retention update
--    others), so their updates stay in place (HOT).
CREATE INDEX IF NOT EXISTS processed_webhooks_provider_received_idx
    ON processed_webhooks (provider, received_at);

-- 2. Net growth per hour subtracts the rows resolved in each hour. The index of 008 on
--    resolved_at holds only the rows whose payload is still kept, so it misses rows a
--    short payload retention emptied; this one holds every resolved row (dead letters
--    are few beside events, and a row is resolved once).
CREATE INDEX IF NOT EXISTS dlq_webhooks_resolved_at_idx
    ON dlq_webhooks (resolved_at) WHERE is_resolved;
