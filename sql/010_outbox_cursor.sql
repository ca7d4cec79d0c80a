-- The outbox without a second write per event. Idempotent: safe to apply again.
--
-- Until now every row was written twice: the INSERT, then an UPDATE of `published_at`
-- once JetStream acknowledged it (a new row version with new index entries: not HOT,
-- since the outbox index's predicate named the column). Now each row carries the id of
-- the transaction that recorded it (`outbox_xid`), and one cursor row says how far the
-- relay got, in the style of PgQ:
--
-- * `done_snapshot`: every row whose transaction is visible in this snapshot is on the
--   stream (or parked, or has no subject).
-- * `target_snapshot`: the range being walked: rows visible in it and not in
--   `done_snapshot`. Its membership is fixed when it is taken (a transaction that had not
--   committed by then is invisible in it, whatever its id), so transactions that commit
--   out of id order are never skipped: a late one falls into a later range.
-- * `after_xid`, `after_id`: the walk's position in the range, in (outbox_xid, id) order.
--   When the range is walked, done takes the target's place.
--
-- Several relays share the one cursor under an advisory lock, so one walks at a time. A
-- relay that dies mid-batch never moved the cursor: the next one publishes the batch
-- again, and JetStream's duplicate window (Nats-Msg-Id) absorbs the repeats.

-- No rewrite: a nullable column, then a default for new rows only. Rows recorded before
-- keep NULL and count as published when `published_at` says so.
ALTER TABLE processed_webhooks ADD COLUMN IF NOT EXISTS outbox_xid xid8;
ALTER TABLE processed_webhooks ALTER COLUMN outbox_xid SET DEFAULT pg_current_xact_id();

CREATE TABLE IF NOT EXISTS outbox_cursor (
    name            text PRIMARY KEY,
    done_snapshot   pg_snapshot NOT NULL,
    target_snapshot pg_snapshot NOT NULL,
    after_xid       xid8        NOT NULL,
    after_id        bigint      NOT NULL,
    advanced_at     timestamptz NOT NULL DEFAULT now()
);

-- '1:1:' makes nothing visible: every stamped row starts in the outbox.
INSERT INTO outbox_cursor (name, done_snapshot, target_snapshot, after_xid, after_id)
VALUES ('default', '1:1:', '1:1:', '0', 0)
ON CONFLICT (name) DO NOTHING;

-- Rows still waiting under the old scheme join the new one.
UPDATE processed_webhooks SET outbox_xid = pg_current_xact_id()
WHERE outbox_xid IS NULL AND published_at IS NULL AND subject IS NOT NULL
  AND publish_parked_at IS NULL;

-- The relay's walk: new ranges read forward from the cursor, and the few transactions
-- still running when `done_snapshot` was taken are looked up by id.
CREATE INDEX IF NOT EXISTS processed_webhooks_outbox_xid_idx
    ON processed_webhooks (outbox_xid, id) WHERE outbox_xid IS NOT NULL;

-- Every new row now has `published_at IS NULL`: the old partial index would hold them all.
DROP INDEX IF EXISTS processed_webhooks_outbox_idx;

-- Whether a row is still owed to the stream: it has a subject, is not parked, and the
-- cursor has not passed it. The one definition every reader uses (the relay's gauges,
-- retention, `gateway events`, reconciliation).
CREATE OR REPLACE FUNCTION outbox_holds(pw processed_webhooks) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT pw.subject IS NOT NULL AND pw.publish_parked_at IS NULL
       AND CASE
           WHEN pw.outbox_xid IS NULL THEN pw.published_at IS NULL
           ELSE NOT EXISTS (
               SELECT 1 FROM outbox_cursor c
               WHERE c.name = 'default'
                 AND (pg_visible_in_snapshot(pw.outbox_xid, c.done_snapshot)
                      OR (pg_visible_in_snapshot(pw.outbox_xid, c.target_snapshot)
                          AND (pw.outbox_xid, pw.id) <= (c.after_xid, c.after_id))))
       END
$$;

-- Whether a row reached the stream: it has a subject, is not parked, and is not owed.
CREATE OR REPLACE FUNCTION outbox_published(pw processed_webhooks) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT pw.subject IS NOT NULL AND pw.publish_parked_at IS NULL AND NOT outbox_holds(pw)
$$;
