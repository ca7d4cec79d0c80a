-- The console's event log and audit pages. Idempotent: safe to apply again.
--
-- 1. The event log lists events newest first inside a time window, a page at a time by
--    the keyset (received_at, id): without this index every page sorted the window.
--    It is the one index added to processed_webhooks, so ingest maintains one more
--    entry per event; nothing in it is ever updated (the outbox and retention update
--    other columns), so those updates stay in place (HOT).
CREATE INDEX IF NOT EXISTS processed_webhooks_received_idx
    ON processed_webhooks (received_at, id);

-- 2. A body read as JSON for the log's containment filter (`payload @> '{...}'`), or NULL
--    when it is not JSON: bodies are bytes, kept as sent, and a verified event whose body
--    is not valid UTF-8 or not JSON at all is still recorded (and parked). A plain cast
--    would fail the whole query on the first such row. Class 22 covers invalid UTF-8
--    (22021), text that is not JSON (22P02) and a \u0000 escape jsonb cannot hold
--    (22P05); class 54 a document nested too deep for the parser.
CREATE OR REPLACE FUNCTION body_as_jsonb(body bytea) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN convert_from(body, 'UTF8')::jsonb;
EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
    RETURN NULL;
END;
$$;
