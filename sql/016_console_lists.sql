-- The console's dead-letter list: pages by keyset (first_failed_at, id), the order
-- `gateway dlq list` prints, and a row's neighbours on its ordering key. Idempotent:
-- safe to apply again.
--
-- The single-column first_failed_at indexes of 001 and 003 bound a page's start but
-- not its tie-break on id, so a deep page would read every row of its first second
-- again; these carry the whole key. The open rows' index is partial, as the list's
-- default is open rows only.
CREATE INDEX IF NOT EXISTS dlq_webhooks_open_page_idx
    ON dlq_webhooks (first_failed_at, id)
    WHERE NOT is_resolved;
CREATE INDEX IF NOT EXISTS dlq_webhooks_page_idx
    ON dlq_webhooks (first_failed_at, id);

-- A detail page's neighbours: the other dead letters of its key, by number.
CREATE INDEX IF NOT EXISTS dlq_webhooks_key_seq_idx
    ON dlq_webhooks (provider, order_key, key_seq)
    WHERE order_key IS NOT NULL;
