"""The SQL of the console's event log: a page of `processed_webhooks` by keyset, and
what one event's page shows beside the row (its dead letters, its key's place).

The filter's WHERE clause is `gateway events list`'s own (`events.where_clause`); the
console adds the publish state, JSON containment and the cursor, every value a bound
parameter. Pages walk `processed_webhooks_received_idx` (sql/017) backwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.events import BRIEF_COLUMNS, brief_of, where_clause
from gateway.core.events.rows import EventBrief
from gateway.core.events.search import CONTAINS_TIMEOUT_S, EventSearch, PublishState
from gateway.core.keyset import Keyset
from gateway.errors import EventsUsageError

# The states by `outbox_holds`, the outbox's one definition (sql/010), as the list's
# `publish_state` column computes them.
_STATE_SQL = {
    PublishState.PUBLISHED: (
        "subject IS NOT NULL AND publish_parked_at IS NULL AND NOT outbox_holds(processed_webhooks)"
    ),
    # A row still owed was recorded by a transaction the cursor's done snapshot does not
    # see, so its transaction id is at least that snapshot's xmin: the few owed rows are
    # read through processed_webhooks_outbox_xid_idx first (an array the planner knows
    # is short), not found by filtering every row of the window. Rows without an id are
    # all published: sql/010 stamped the ones still waiting.
    PublishState.WAITING: (
        "id = ANY(ARRAY(SELECT o.id FROM processed_webhooks o WHERE o.outbox_xid IS NOT NULL"
        " AND o.outbox_xid >= (SELECT pg_snapshot_xmin(done_snapshot) FROM outbox_cursor"
        " WHERE name = 'default'))) AND outbox_holds(processed_webhooks)"
    ),
    PublishState.PARKED: "subject IS NOT NULL AND publish_parked_at IS NOT NULL",
    PublishState.NO_SUBJECT: "subject IS NULL",
}


# Every provider that has events, one index step each (a loose scan of the unique
# (provider, event_id) index): an event id looked up without a provider is then found
# through that index, provider by provider, instead of by reading the window.
_PROVIDERS = """
ARRAY(WITH RECURSIVE p(name) AS (
    SELECT min(provider) FROM processed_webhooks
    UNION ALL
    SELECT (SELECT min(provider) FROM processed_webhooks WHERE provider > p.name)
    FROM p WHERE p.name IS NOT NULL)
SELECT name FROM p WHERE name IS NOT NULL)"""


def _search_where(s: EventSearch) -> tuple[str, list[Any]]:
    where, args = where_clause(s.filter)
    parts = [where]
    if s.filter.event_ids and not s.filter.providers:
        parts.append(f"provider = ANY({_PROVIDERS})")
    if s.state is not None:
        parts.append(_STATE_SQL[s.state])
    if s.contains is not None:
        # Only while the body is kept; a body that is not JSON is NULL, never an error.
        args.append(s.contains)
        parts.append(f"payload_removed_at IS NULL AND body_as_jsonb(body) @> ${len(args)}::jsonb")
    if s.after is not None:
        args += [s.after.at, s.after.id]
        parts.append(f"(received_at, id) < (${len(args) - 1}, ${len(args)})")
    return " AND ".join(parts), args


def search_sql(s: EventSearch) -> tuple[str, list[Any]]:
    """The page's statement and its arguments (the EXPLAIN test reads them)."""
    where, args = _search_where(s)
    args.append(s.limit + 1)
    sql = " ".join(
        ["SELECT", BRIEF_COLUMNS, "FROM processed_webhooks WHERE", where,
         "ORDER BY received_at DESC, id DESC LIMIT", f"${len(args)}"]
    )  # fmt: skip
    return sql, args


async def search_events(conn: Conn, s: EventSearch) -> tuple[list[EventBrief], Keyset | None]:
    """A page of matching events, newest first, and the keyset the next page starts
    after (None on the last page). A containment search that reads longer than
    `CONTAINS_TIMEOUT_S` is refused (`EventsUsageError`)."""
    sql, args = search_sql(s)
    with translate_errors():
        if s.contains is None:
            records = await conn.fetch(sql, *args)
        else:
            records = await _bounded_fetch(conn, sql, args)
    rows = [brief_of(r) for r in records[: s.limit]]
    more = len(records) > s.limit
    return rows, Keyset(rows[-1].received_at, rows[-1].id) if more and rows else None


async def _bounded_fetch(conn: Conn, sql: str, args: list[Any]) -> list[asyncpg.Record]:
    timeout_ms = int(CONTAINS_TIMEOUT_S * 1000)
    try:
        async with conn.transaction():
            # SET LOCAL: the bound ends with this transaction, the pooled connection
            # goes back without it.
            await conn.execute(f"SET LOCAL statement_timeout = {timeout_ms}")
            return list(await conn.fetch(sql, *args))
    except asyncpg.QueryCanceledError:
        raise EventsUsageError(
            f"contains: the search read for more than {CONTAINS_TIMEOUT_S:g} s without "
            "filling a page; narrow the window (since, until) or add provider or type"
        ) from None


@dataclass(frozen=True)
class EventDeadLetter:
    """A dead letter of the event, as its page lists it."""

    id: int
    stage: str
    error_class: str
    error_message: str
    attempts: int
    last_failed_at: datetime
    is_resolved: bool
    resolution: str | None


@dataclass(frozen=True)
class KeyPlace:
    """Where the event's key stands, and what settlement did with its number."""

    applied_seq: int  # 0: nothing of the key applied yet
    held_seq: int | None
    held_dlq_id: int | None
    hold_reason: str | None
    held_at: datetime | None
    outcome: str | None  # the order_log outcome of this number: applied|deferred|skipped
    actor: str | None
    note: str | None


# The event's own dead letters by row id (dlq_webhooks_webhook_id_idx); an open one
# recorded without the row id by its event (dlq_webhooks_open_event_stage_key).
_DEAD_LETTERS = """
SELECT id, stage, error_class, error_message, attempts, last_failed_at, is_resolved, resolution
FROM dlq_webhooks
WHERE (webhook_id IS NOT NULL AND webhook_id = $1)
   OR (NOT is_resolved AND provider = $2 AND event_id = $3)
ORDER BY first_failed_at, id
LIMIT 100
"""
_KEY_PLACE = """
SELECT coalesce(a.applied_seq, 0) AS applied_seq, a.held_seq, a.held_dlq_id, a.hold_reason,
       a.held_at, l.outcome, l.actor, l.note
FROM (SELECT $1::text AS provider, $2::text AS order_key) k
LEFT JOIN order_applied a ON a.provider = k.provider AND a.order_key = k.order_key
LEFT JOIN order_log l ON l.provider = k.provider AND l.order_key = k.order_key
                     AND l.key_seq = $3
"""


async def dead_letters_of(
    conn: Conn, row_id: int, provider: str, event_id: str
) -> list[EventDeadLetter]:
    with translate_errors():
        records = await conn.fetch(_DEAD_LETTERS, row_id, provider, event_id)
    return [EventDeadLetter(**dict(r)) for r in records]


async def key_place(conn: Conn, provider: str, order_key: str, key_seq: int) -> KeyPlace:
    with translate_errors():
        record = await conn.fetchrow(_KEY_PLACE, provider, order_key, key_seq)
    if record is None:  # the one-row subquery always yields a row; this keeps mypy honest
        raise RuntimeError("key place query returned nothing")
    return KeyPlace(**dict(record))
