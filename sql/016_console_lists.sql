-- The console's dead-letter list: pages by keyset (first_failed_at, id), the order
-- `gateway dlq list` prints, and a row's neighbours on its ordering key. Idempotent:
-- safe to apply again.
--
-- The single-column first_failed_at indexes of 001 and 003 bound a page's start but
-- not its tie-break on id: rows parked in one transaction share their now(), and a page
-- inside such a group read and sorted the whole group again (200,000 rows, 50,000 to a
-- time: 18 ms a page, against 0.1 ms through these). The open rows' index is partial,
-- as the list's default is open rows only.
CREATE INDEX IF NOT EXISTS dlq_webhooks_open_page_idx
    ON dlq_webhooks (first_failed_at, id)
    WHERE NOT is_resolved;
CREATE INDEX IF NOT EXISTS dlq_webhooks_page_idx
    ON dlq_webhooks (first_failed_at, id);

-- A detail page's neighbours: the other dead letters of its key, by number.
CREATE INDEX IF NOT EXISTS dlq_webhooks_key_seq_idx
    ON dlq_webhooks (provider, order_key, key_seq)
    WHERE order_key IS NOT NULL;
