"""The `processed_webhooks` and `dlq_webhooks` tables: the idempotency gate (whose rows
the outbox walks, `outbox.py`, and whose keyed rows are numbered as they are recorded,
`key_numbers.py`) and dead letters. Every statement here is one round trip; callers own
the batching."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import asyncpg
import orjson

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.confirmations import owe_fetches
from gateway.adapters.postgres.ordering.key_numbers import (
    GROUP_ROWS,
    NUMBERING_ATTEMPTS,
    KeyedRow,
    PlannedRowSkipped,
    insert_numbered,
    insert_numbered_whole,
    key_counts,
)
from gateway.core.events.model import Event, Failure, Stage
from gateway.core.failures.excerpt import DETAIL_MAX_CHARS, capped
from gateway.errors import DatabaseUnavailable

# One statement commits a whole group. The rows travel as one JSON document (bodies in
# base64, since they are bytes): encoding seven parameter arrays element by element cost
# the serving process about twice the CPU per row. Conflicts with rows already recorded
# are skipped, and RETURNING says which rows were new. The conflict has no target on
# purpose: it covers UNIQUE (provider, event_id), the idempotency gate, and the partial
# UNIQUE (provider, body_sha256) of sql/005, so a body-only signature replayed under a
# forged id is skipped like a repeat (rows of one statement conflict with each other too).
_INSERT_EVENTS = f"""
INSERT INTO processed_webhooks (provider, event_id, event_type, subject, headers, body,
                                received_at, body_sha256, source, traceparent)
SELECT r.provider, r.event_id, r.event_type, r.subject, r.headers, decode(r.body, 'base64'),
       r.received_at, decode(r.body_sha256, 'hex'), r.source, r.traceparent
FROM {GROUP_ROWS}
ON CONFLICT DO NOTHING
RETURNING id, provider, event_id, NULL::bigint AS key_seq
"""  # noqa: S608 - only constants are interpolated


class Recorded(NamedTuple):
    """A row `record_events` inserted: its id, and its number among its key's events."""

    webhook_id: int
    key_seq: int | None


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
    Such a group is its own transaction (one statement on its own when it is all new and
    valid, else BEGIN, the statement, COMMIT), taking the keys' locks before its first
    write, so `conn` must not be inside one that has written already (`key_numbers`
    says why).
    Invalid events that were new also get their `stage='ingest'` dead letter in the same
    transaction, so a committed row never lacks the reason it went no further. The
    events must be unique by (provider, event_id); the caller removes repeats. An event
    whose `body_sha256` is already recorded for its provider is not inserted (a replay
    under another id), so it is missing from the answer like any repeat.
    """
    if any(e.order_key is not None for e in events):
        return await _record_numbered(conn, events)
    rows_json = _rows_json(events, ())
    with translate_errors():
        if all(e.failure is None and not e.awaits_confirmation for e in events):
            # One statement is atomic on its own: no BEGIN/COMMIT round trips.
            rows = await conn.fetch(_INSERT_EVENTS, rows_json)
            return {(r["provider"], r["event_id"]): Recorded(int(r["id"]), None) for r in rows}
        async with conn.transaction():
            rows = await conn.fetch(_INSERT_EVENTS, rows_json)
            return await _with_dead_letters(conn, events, rows)


class _WholeStatements:
    """Whether to try a keyed group as one statement on its own (`_record_numbered`): a
    try that meets a keyed repeat costs the group a second statement, which a burst of
    retried events would pay nearly every group; so after one, `SKIP_GROUPS` groups of
    this process go the transaction's way first."""

    SKIP_GROUPS = 16

    def __init__(self) -> None:
        self._skip = 0

    def worth_trying(self) -> bool:
        if self._skip:
            self._skip -= 1
            return False
        return True

    def refused(self) -> None:
        self._skip = self.SKIP_GROUPS

    def reset(self) -> None:
        self._skip = 0


#: This process's `_WholeStatements` (`reset` starts it afresh: a benchmark's passes).
WHOLE_STATEMENTS = _WholeStatements()


async def _record_numbered(conn: Conn, events: Sequence[Event]) -> dict[tuple[str, str], Recorded]:
    """`record_events` for a group with keyed events: one statement when they are all
    new, else its own transaction, tried again without the repeats that would leave a
    gap (`key_numbers.repeats_before_new`)."""
    keyed_rows = _keyed_rows(events)
    rows_json = _rows_json(events, keyed_rows)
    valid = all(e.failure is None and not e.awaits_confirmation for e in events)
    if valid and not conn.is_in_transaction() and WHOLE_STATEMENTS.worth_trying():
        whole = await insert_numbered_whole(conn, rows_json, keyed_rows)
        if whole is not None:
            return _recorded(whole)
        WHOLE_STATEMENTS.refused()
    for _ in range(NUMBERING_ATTEMPTS):
        try:
            with translate_errors():
                async with conn.transaction():
                    rows = await insert_numbered(conn, rows_json, keyed_rows)
                    return await _with_dead_letters(conn, events, rows)
        except PlannedRowSkipped as skipped:
            # Rolled back, no number used. The rows skipped are recorded already (by this
            # id, or this body's digest, or by a concurrent writer since): numbered again
            # without them, they are answered as the repeats they are.
            events = [e for e in events if (e.provider, e.event_id) not in skipped.repeats]
            keyed_rows = _keyed_rows(events)
            rows_json = _rows_json(events, keyed_rows)
    raise DatabaseUnavailable(
        f"could not number a group of {len(events)} events in {NUMBERING_ATTEMPTS} attempts"
    )


def _keyed_rows(events: Sequence[Event]) -> list[KeyedRow]:
    """The keyed events with their place among their key's events in the group."""
    places: dict[tuple[str, str], int] = {}
    rows = []
    for e in events:
        if e.order_key is not None:
            key = (e.provider, e.order_key)
            places[key] = place = places.get(key, 0) + 1
            rows.append((e.provider, e.event_id, e.order_key, place))
    return rows


def _rows_json(events: Sequence[Event], keyed: Sequence[KeyedRow]) -> str:
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
    if keyed:  # arrival order, and each keyed row's key and how many of its rows follow
        counts = key_counts(keyed)
        places = iter(keyed)
        for n, (row, event) in enumerate(zip(rows, events, strict=True)):
            row["n"] = n
            if event.order_key is not None:
                provider, _, row["order_key"], place = next(places)
                row["after"] = counts[(provider, row["order_key"])] - place
    return orjson.dumps(rows, default=dict).decode()  # headers may be any Mapping


def _recorded(rows: Sequence[asyncpg.Record]) -> dict[tuple[str, str], Recorded]:
    return {(r["provider"], r["event_id"]): Recorded(int(r["id"]), r["key_seq"]) for r in rows}


async def _with_dead_letters(
    conn: Conn, events: Sequence[Event], rows: Sequence[asyncpg.Record]
) -> dict[tuple[str, str], Recorded]:
    """The rows inserted; the new invalid events' dead letters written beside them, and
    the fetches owed for the events awaiting confirmation (`confirmations`)."""
    inserted = _recorded(rows)
    for event in events:
        key = (event.provider, event.event_id)
        if event.failure is not None and key in inserted:
            await _upsert_dlq(conn, inserted[key].webhook_id, Stage.INGEST, event, event.failure)
    if any(e.awaits_confirmation for e in events):
        ids = {key: row.webhook_id for key, row in inserted.items()}
        await owe_fetches(conn, events, ids)
    return inserted


async def _upsert_dlq(
    conn: Conn,
    webhook_id: int | None,
    stage: str,
    event: Event,
    failure: Failure,
    attempts: int = 1,
    order_key: str | None = None,
    key_seq: int | None = None,
) -> int:
    row_id = await conn.fetchval(
        _UPSERT_DLQ,
        webhook_id,
        str(stage),  # a `Stage`, or `forward:NAME`
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
    stage: str,
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
