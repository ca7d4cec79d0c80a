"""The `processed_webhooks` and `dlq_webhooks` tables: the idempotency gate (whose rows
the outbox walks, `outbox.py`), the per-key numbers given at insert (`order_counters`),
and dead letters. Every statement here is one round trip; callers own the batching."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import asyncpg
import orjson

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.excerpt import DETAIL_MAX_CHARS, capped
from gateway.core.model import Event, Failure, Stage
from gateway.errors import DatabaseUnavailable

# One statement commits a whole group. The rows travel as one JSON document (bodies in
# base64, since they are bytes): encoding seven parameter arrays element by element cost
# the serving process about twice the CPU per row. Conflicts with rows already recorded
# are skipped, and RETURNING says which rows were new. The conflict has no target on
# purpose: it covers UNIQUE (provider, event_id), the idempotency gate, and the partial
# UNIQUE (provider, body_sha256) of sql/005, so a body-only signature replayed under a
# forged id is skipped like a repeat (rows of one statement conflict with each other too).
_ROWS = """json_to_recordset($1::json)
     AS r(provider text, event_id text, event_type text, subject text, headers jsonb,
          body text, received_at timestamptz, body_sha256 text, source text, traceparent text,
          order_key text, n int)"""
_INSERT_EVENTS = f"""
INSERT INTO processed_webhooks (provider, event_id, event_type, subject, headers, body,
                                received_at, body_sha256, source, traceparent)
SELECT r.provider, r.event_id, r.event_type, r.subject, r.headers, decode(r.body, 'base64'),
       r.received_at, decode(r.body_sha256, 'hex'), r.source, r.traceparent
FROM {_ROWS}
ON CONFLICT DO NOTHING
RETURNING id, provider, event_id, NULL::bigint AS key_seq
"""  # noqa: S608 - only constants are interpolated

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
#    rolls the whole group back and numbers it again (`record_events`).
_INSERT_NUMBERED = f"""
WITH r AS MATERIALIZED (SELECT r.*, decode(r.body_sha256, 'hex') AS digest FROM {_ROWS}),
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


class Recorded(NamedTuple):
    """A row `record_events` inserted: its id, and its number among its key's events."""

    webhook_id: int
    key_seq: int | None


def key_lock_id(provider: str, order_key: str) -> int:
    """The 64-bit advisory lock id of a key (`_LOCK_KEYS`), the same in every process.

    Two keys sharing one only wait for each other; the relay's and retention's own lock
    ids are single constants a 64-bit hash meets with negligible odds.
    """
    digest = hashlib.blake2b(
        f"{provider}\x00{order_key}".encode("utf-8", "surrogatepass"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


class _PlannedRowSkipped(Exception):
    """A number was planned for a row a concurrent writer recorded first."""


_UPSERT_DLQ = """
INSERT INTO dlq_webhooks (webhook_id, stage, provider, event_id, subject, error_class,
                          error_message, error_detail, payload, headers, received_at, attempts,
                          order_key, key_seq)
-- Without a row id, the event's own row is found by its key (the settlement worker
-- knows the event, not the row).
VALUES (coalesce($1, (SELECT id FROM processed_webhooks WHERE provider = $3 AND event_id = $4)),
        $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14)
ON CONFLICT (provider, event_id, stage) WHERE NOT is_resolved DO UPDATE
SET attempts = dlq_webhooks.attempts + EXCLUDED.attempts,
    order_key = coalesce(EXCLUDED.order_key, dlq_webhooks.order_key),
    key_seq = coalesce(EXCLUDED.key_seq, dlq_webhooks.key_seq),
    last_failed_at = now(),
    error_class = EXCLUDED.error_class,
    error_message = EXCLUDED.error_message,
    error_detail = EXCLUDED.error_detail
RETURNING id
"""


@dataclass(frozen=True)
class StoredEvent:
    """An event together with the id of its `processed_webhooks` row."""

    webhook_id: int
    event: Event


def _headers_json(event: Event) -> str:
    return orjson.dumps(dict(event.headers)).decode()


async def insert_events(conn: Conn, events: Sequence[Event]) -> dict[tuple[str, str], int]:
    """`record_events`, answering only the row ids."""
    recorded = await record_events(conn, events)
    return {key: row.webhook_id for key, row in recorded.items()}


async def record_events(conn: Conn, events: Sequence[Event]) -> dict[tuple[str, str], Recorded]:
    """Insert what is new; return the row of each (provider, event_id) inserted.

    Each new event with an `order_key` gets the key's next number (`key_seq`) in the same
    transaction: 1, 2, 3, ... per key with no gap, in commit order; a repeat gets none.
    Such a group is its own transaction (BEGIN, the keys' locks, the INSERT, COMMIT), so
    `conn` must not be inside one that has written already (`_LOCK_KEYS` says why).
    Invalid events that were new also get their `stage='ingest'` dead letter in the same
    transaction, so a committed row never lacks the reason it went no further. The
    events must be unique by (provider, event_id); the caller removes repeats. An event
    whose `body_sha256` is already recorded for its provider is not inserted (a replay
    under another id), so it is missing from the answer like any repeat.
    """
    keyed = any(e.order_key is not None for e in events)
    rows_json = _rows_json(events, keyed)
    with translate_errors():
        if not keyed and all(e.failure is None for e in events):
            # One statement is atomic on its own: no BEGIN/COMMIT round trips.
            rows = await conn.fetch(_INSERT_EVENTS, rows_json)
            return {(r["provider"], r["event_id"]): Recorded(int(r["id"]), None) for r in rows}
        if not keyed:
            async with conn.transaction():
                rows = await conn.fetch(_INSERT_EVENTS, rows_json)
                return await _with_dead_letters(conn, events, rows)
        locks = sorted({key_lock_id(e.provider, e.order_key) for e in events if e.order_key})
        for _ in range(NUMBERING_ATTEMPTS):
            try:
                async with conn.transaction():
                    await conn.execute(_LOCK_KEYS, locks)
                    rows = await conn.fetch(_INSERT_NUMBERED, rows_json)
                    _check_numbered(rows)
                    return await _with_dead_letters(conn, events, rows)
            except _PlannedRowSkipped:
                continue  # rolled back: no number was used
    raise DatabaseUnavailable(
        f"could not number a group of {len(events)} events in {NUMBERING_ATTEMPTS} attempts"
    )


def _rows_json(events: Sequence[Event], keyed: bool) -> str:
    rows: list[dict[str, Any]] = [
        {
            "provider": e.provider,
            "event_id": e.event_id,
            "event_type": e.event_type,
            "subject": e.subject,
            "headers": e.headers,
            "body": base64.b64encode(e.body).decode("ascii"),
            "received_at": e.received_at,
            "body_sha256": None if e.body_sha256 is None else e.body_sha256.hex(),
            "source": e.source,
            "traceparent": e.traceparent,
        }
        for e in events
    ]
    if keyed:  # the arrival order numbers follow, and the keys
        for n, (row, event) in enumerate(zip(rows, events, strict=True)):
            row["n"] = n
            row["order_key"] = event.order_key
    return orjson.dumps(rows, default=dict).decode()  # headers may be any Mapping


def _check_numbered(rows: Sequence[asyncpg.Record]) -> None:
    """Raise `_PlannedRowSkipped` unless every planned number went to an inserted row and
    every keyed row inserted got one (a row retention removed since the look-up)."""
    planned = rows[0]["planned"] if rows else 0
    numbered = sum(1 for r in rows if r["key_seq"] is not None)
    unnumbered = any(r["order_key"] is not None and r["key_seq"] is None for r in rows)
    if numbered != planned or unnumbered:
        raise _PlannedRowSkipped


async def _with_dead_letters(
    conn: Conn, events: Sequence[Event], rows: Sequence[asyncpg.Record]
) -> dict[tuple[str, str], Recorded]:
    """The rows inserted; the new invalid events' dead letters written beside them."""
    inserted = {
        (r["provider"], r["event_id"]): Recorded(int(r["id"]), r["key_seq"])
        for r in rows
        if r["id"] is not None  # the planned count's row when nothing was inserted
    }
    for event in events:
        key = (event.provider, event.event_id)
        if event.failure is not None and key in inserted:
            await _upsert_dlq(conn, inserted[key].webhook_id, Stage.INGEST, event, event.failure)
    return inserted


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
        await conn.execute(_LOCK_KEYS, sorted({key_lock_id(p, k) for p, k in keys}))


async def number_row(conn: Conn, webhook_id: int, provider: str, order_key: str) -> int | None:
    """Give a recorded row its key's next number, or keep the one it has; its number
    (None: no such row). Inside the transaction that holds `lock_keys` for the key."""
    with translate_errors():
        value = await conn.fetchval(_NUMBER_ROW, webhook_id, provider, order_key)
    return None if value is None else int(value)


async def _upsert_dlq(
    conn: Conn,
    webhook_id: int | None,
    stage: Stage,
    event: Event,
    failure: Failure,
    attempts: int = 1,
    order_key: str | None = None,
    key_seq: int | None = None,
) -> int:
    row_id = await conn.fetchval(
        _UPSERT_DLQ,
        webhook_id,
        stage.value,
        event.provider,
        event.event_id,
        event.subject,
        failure.error_class,
        capped(failure.message),  # messages repeat event values: bounded whatever they are
        None if failure.detail is None else capped(failure.detail, DETAIL_MAX_CHARS),
        event.body,
        _headers_json(event),
        event.received_at,
        attempts,
        # An ordered event keeps its place, so a replay can run its key's rows in order.
        event.order_key if order_key is None else order_key,
        event.key_seq if key_seq is None else key_seq,
    )
    return int(row_id)


async def record_failure(
    conn: Conn,
    webhook_id: int | None,
    stage: Stage,
    event: Event,
    failure: Failure,
    attempts: int = 1,
    *,
    order_key: str | None = None,
    key_seq: int | None = None,
) -> int:
    """Park an event in the dead-letter table after `attempts` tries, or add them to the
    attempts of its open row; an ordered event keeps its key and number there."""
    with translate_errors():
        return await _upsert_dlq(
            conn, webhook_id, stage, event, failure, attempts, order_key, key_seq
        )


def stored_event(row: asyncpg.Record) -> StoredEvent:
    """A `processed_webhooks` row (with `headers` as JSON text) as a `StoredEvent`."""
    event = Event(
        provider=row["provider"],
        event_id=row["event_id"],
        event_type=row["event_type"],
        subject=row["subject"],
        headers=orjson.loads(row["headers"]),
        body=bytes(row["body"]),
        received_at=row["received_at"],
        source=row["source"],
        # Only the outbox walk reads it: a re-published row joins its request's trace.
        traceparent=row.get("traceparent"),
        # The walk reads them: a keyed, numbered message carries both as headers.
        order_key=row.get("order_key"),
        key_seq=row.get("key_seq"),
    )
    return StoredEvent(int(row["id"]), event)


async def event_type_of(conn: Conn, webhook_id: int) -> str | None:
    """The event type recorded on a `processed_webhooks` row (None: no type, or no row)."""
    with translate_errors():
        value = await conn.fetchval(
            "SELECT event_type FROM processed_webhooks WHERE id = $1", webhook_id
        )
    return value  # type: ignore[no-any-return]


# Reconciliation reads in id order, a page at a time. An open dead letter is an outcome
# the worker reached, and one an operator closed by hand (`resolution = 'manual'`) is a
# decision: neither is re-published. One replayed without settling is not an outcome.
_RECONCILE_WHERE = """
FROM processed_webhooks pw
WHERE outbox_published(pw)
  AND pw.received_at < now() - make_interval(secs => $1)
  AND pw.received_at >= now() - make_interval(secs => $2)
  AND pw.id > $3
  AND NOT EXISTS (
      SELECT 1 FROM dlq_webhooks d
      WHERE d.provider = pw.provider AND d.event_id = pw.event_id
        AND (NOT d.is_resolved OR d.resolution = 'manual'))
"""
_RECONCILE_CANDIDATES = f"""
SELECT pw.id, pw.provider, pw.event_id, pw.event_type, pw.subject, pw.headers::text AS headers,
       pw.body, pw.received_at, pw.source, pw.order_key, pw.key_seq
{_RECONCILE_WHERE}
  AND pw.payload_removed_at IS NULL
ORDER BY pw.id
LIMIT $4
"""
# The same events whose payload retention removed: nothing left to judge or re-publish.
_RECONCILE_REMOVED = f"""
SELECT pw.id, pw.provider, pw.event_id, pw.subject
{_RECONCILE_WHERE}
  AND pw.payload_removed_at IS NOT NULL
ORDER BY pw.id
LIMIT $4
"""


async def reconcile_candidates(
    conn: Conn, older_than_s: float, lookback_s: float, after_id: int, limit: int
) -> list[StoredEvent]:
    """Up to `limit` published events after row `after_id`, in id order: received at least
    `older_than_s` ago and passed by the outbox cursor, received within `lookback_s`, with
    no open dead letter and none closed by an operator."""
    with translate_errors():
        rows = await conn.fetch(_RECONCILE_CANDIDATES, older_than_s, lookback_s, after_id, limit)
    return [stored_event(row) for row in rows]


async def reconcile_removed(
    conn: Conn, older_than_s: float, lookback_s: float, after_id: int, limit: int
) -> list[tuple[int, str, str, str]]:
    """(row id, provider, event id, subject) of the events `reconcile_candidates` would
    consider but whose payload retention removed, in id order."""
    with translate_errors():
        rows = await conn.fetch(_RECONCILE_REMOVED, older_than_s, lookback_s, after_id, limit)
    return [(int(r["id"]), r["provider"], r["event_id"], r["subject"]) for r in rows]
