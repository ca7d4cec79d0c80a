"""Per-key numbers at ingest (`order_counters`): the advisory lock each key is numbered
under, the INSERT that numbers a group's keyed rows as it records them, and the number a
replayed row takes after the fact.

Per (provider, order_key), numbers run 1, 2, 3, ... with no gap, in commit order: each
group takes its keys' locks before its first write, reads the counters under them, and
commits its rows and counters together. `webhooks.record_events` runs it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors

#: The group's rows as `webhooks.record_events` sends them: one JSON document, `$1`. `n`
#: (arrival order) and `order_key` are set only for a group with keyed rows.
GROUP_ROWS = """json_to_recordset($1::json)
     AS r(provider text, event_id text, event_type text, subject text, headers jsonb,
          body text, received_at timestamptz, body_sha256 text, source text, traceparent text,
          order_key text, n int)"""

#: How far behind `order_counters.touched_at` may be (`_INSERT_NUMBERED`, 3.): far below
#: any retention horizon, and long enough that a key's events mostly update in place.
TOUCH_GRANULARITY_S = 3600
_TOUCH = f"interval '{TOUCH_GRANULARITY_S} seconds'"

# A group with keyed rows numbers them in the same statement, under the keys' locks
# (`_LOCK_KEYS`, taken by the statement before, so the counters and rows read here are the
# last committed ones: READ COMMITTED takes a new snapshot per statement).
# 1. `numbered`: each keyed row not already recorded (by id, or by body digest where it
#    has one) gets last + 1, last + 2, ... per key, in arrival order (`n`). The look-ups
#    are scalar subqueries on purpose: always one index probe per row, where a join or
#    NOT EXISTS let the planner (which guesses 100 rows for the JSON) hash a scan of the
#    whole counter table, or of every digest, into each group (measured: 20 ms a group
#    at 5,000 keys).
# 2. `inserted`: the rows, with their numbers; a row a concurrent writer recorded since
#    this statement's snapshot is still skipped by ON CONFLICT (after waiting for it).
# 3. `counted`: each key's counter moves to the highest number actually inserted.
#    `touched_at` (retention's idle clock) moves only once it is an hour old: an update
#    that leaves every indexed column as it was is HOT (no new index entries), which
#    measured 10 against 16 us a key. It is never more than `TOUCH_GRANULARITY_S` behind.
# 4. The answer: the rows inserted, with how many numbers were planned. A planned number
#    whose row was skipped would leave a gap behind the ones after it, so the caller
#    rolls the whole group back and numbers it again (`webhooks.record_events`).
_INSERT_NUMBERED = f"""
WITH r AS MATERIALIZED (SELECT r.*, decode(r.body_sha256, 'hex') AS digest FROM {GROUP_ROWS}),
numbered AS (
    SELECT r.n, coalesce((SELECT c.last_seq FROM order_counters c
                          WHERE c.provider = r.provider AND c.order_key = r.order_key), 0)
           + row_number() OVER (PARTITION BY r.provider, r.order_key ORDER BY r.n) AS key_seq
    FROM r
    WHERE r.order_key IS NOT NULL
      AND (SELECT p.id FROM processed_webhooks p
           WHERE p.provider = r.provider AND p.event_id = r.event_id) IS NULL
      AND (r.digest IS NULL OR (SELECT p.id FROM processed_webhooks p
           WHERE p.provider = r.provider AND p.body_sha256 = r.digest) IS NULL)
),
inserted AS (
    INSERT INTO processed_webhooks (provider, event_id, event_type, subject, headers, body,
                                    received_at, body_sha256, source, traceparent,
                                    order_key, key_seq)
    SELECT r.provider, r.event_id, r.event_type, r.subject, r.headers,
           decode(r.body, 'base64'), r.received_at, r.digest, r.source, r.traceparent,
           r.order_key, numbered.key_seq
    FROM r LEFT JOIN numbered ON numbered.n = r.n
    ORDER BY r.n
    ON CONFLICT DO NOTHING
    RETURNING id, provider, event_id, order_key, key_seq
),
counted AS (
    INSERT INTO order_counters AS c (provider, order_key, last_seq)
    SELECT provider, order_key, max(key_seq) FROM inserted
    WHERE key_seq IS NOT NULL
    GROUP BY provider, order_key
    ON CONFLICT (provider, order_key) DO UPDATE
    SET last_seq = greatest(c.last_seq, EXCLUDED.last_seq),
        touched_at = CASE WHEN c.touched_at < now() - {_TOUCH} THEN now() ELSE c.touched_at END
)
SELECT i.id, i.provider, i.event_id, i.order_key, i.key_seq, planned.n AS planned
FROM (SELECT count(*) AS n FROM numbered) planned LEFT JOIN inserted i ON true
"""  # noqa: S608 - only constants are interpolated

# One lock per key, in ascending order (so two groups sharing keys never deadlock), all
# in one statement and before the transaction's first write. Why before: the first write
# gives the transaction its id (`outbox_xid`, the relay's walk order). A transaction that
# got its id and then waited for a key would be walked before the one it waited for, and
# the stream would carry a key's number 6 before its 5. Locked first, per key: id order
# = lock order = commit order = number order. An advisory lock rather than the counter
# row's: locking a row writes it (and so takes an id), and a key's first event has no
# row to lock yet.
_LOCK_KEYS = """
SELECT pg_advisory_xact_lock(k) FROM (SELECT unnest($1::bigint[]) AS k ORDER BY 1) keys
"""
#: Attempts at numbering one group before it is refused as not durable (503: the sender
#: retries). A second attempt only follows a concurrent writer of the same event under
#: another key, whose row the retry then sees.
NUMBERING_ATTEMPTS = 3


def key_lock_id(provider: str, order_key: str) -> int:
    """The 64-bit advisory lock id of a key (`_LOCK_KEYS`), the same in every process.

    Two keys sharing one only wait for each other; the relay's and retention's own lock
    ids are single constants a 64-bit hash meets with negligible odds.
    """
    digest = hashlib.blake2b(
        f"{provider}\x00{order_key}".encode("utf-8", "surrogatepass"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


class PlannedRowSkipped(Exception):
    """A number was planned for a row a concurrent writer recorded first."""


async def insert_numbered(
    conn: Conn, rows_json: str, keys: Iterable[tuple[str, str]]
) -> list[asyncpg.Record]:
    """Lock the keys, then insert the group numbering its keyed rows; the rows inserted
    (`id` None on the one row of an answer where nothing was). Inside a transaction
    that has not written yet; raises `PlannedRowSkipped` (roll it back, try again) when
    a planned number's row was skipped."""
    with translate_errors():
        await conn.execute(_LOCK_KEYS, _lock_ids(keys))
        rows = await conn.fetch(_INSERT_NUMBERED, rows_json)
    _check_numbered(rows)
    return rows


def _lock_ids(keys: Iterable[tuple[str, str]]) -> list[int]:
    return sorted({key_lock_id(provider, key) for provider, key in keys})


def _check_numbered(rows: Sequence[asyncpg.Record]) -> None:
    """Raise `PlannedRowSkipped` unless every planned number went to an inserted row and
    every keyed row inserted got one (a row retention removed since the look-up)."""
    planned = rows[0]["planned"] if rows else 0
    numbered = sum(1 for r in rows if r["key_seq"] is not None)
    unnumbered = any(r["order_key"] is not None and r["key_seq"] is None for r in rows)
    if numbered != planned or unnumbered:
        raise PlannedRowSkipped


# A recorded row numbered after the fact (an `ingest` dead letter replayed once its
# payload passes): the key's next number, unless the row has one already (a second replay
# before the first was published). The caller holds the key's lock (`lock_keys`) and the
# row's (`FOR UPDATE`), in the transaction that queues the row for the outbox.
_NUMBER_ROW = """
WITH target AS (SELECT id FROM processed_webhooks WHERE id = $1 AND key_seq IS NULL),
counted AS (
    INSERT INTO order_counters AS c (provider, order_key, last_seq)
    SELECT $2, $3, 1 FROM target
    ON CONFLICT (provider, order_key) DO UPDATE
    SET last_seq = c.last_seq + 1, touched_at = now()  -- rare: exact is cheap enough
    RETURNING last_seq
),
numbered AS (
    UPDATE processed_webhooks p SET order_key = $3, key_seq = counted.last_seq
    FROM counted WHERE p.id = $1
    RETURNING p.key_seq
)
SELECT coalesce((SELECT key_seq FROM numbered),
                (SELECT key_seq FROM processed_webhooks WHERE id = $1)) AS key_seq
"""


async def lock_keys(conn: Conn, keys: Iterable[tuple[str, str]]) -> None:
    """Take the (provider, order_key) locks ingest numbers under, until the transaction
    ends; call it before the transaction's first write (`_LOCK_KEYS` says why)."""
    with translate_errors():
        await conn.execute(_LOCK_KEYS, _lock_ids(keys))


async def number_row(conn: Conn, webhook_id: int, provider: str, order_key: str) -> int | None:
    """Give a recorded row its key's next number, or keep the one it has; its number
    (None: no such row). Inside the transaction that holds `lock_keys` for the key."""
    with translate_errors():
        value = await conn.fetchval(_NUMBER_ROW, webhook_id, provider, order_key)
    return None if value is None else int(value)
