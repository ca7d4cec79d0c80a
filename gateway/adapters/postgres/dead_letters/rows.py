"""The SQL behind the DLQ commands: listing, claiming rows for replay, marking outcomes,
statistics. Filter values are always bound parameters, never formatted into the text."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.dlq.filters import DlqFilter
from gateway.core.dlq.model import DlqRow, DlqStats, RowBrief
from gateway.core.events.model import Failure
from gateway.core.failures.excerpt import DETAIL_MAX_CHARS, capped

_SELECT = """
SELECT id, webhook_id, stage, provider, event_id, subject, error_class, error_message,
       error_detail, payload, headers::text AS headers, attempts, received_at,
       first_failed_at, last_failed_at, is_resolved, resolved_at, resolution,
       resolution_note, resolved_by, payload_removed_at
FROM dlq_webhooks"""

# What tables and plans need: no payload, headers or stack, so listing never loads (or
# prints) a body.
# `list`, `show` and a replay's plan (what `--dry-run` prints) also say how the event
# reached the gateway (live, backfill), from its own row: one primary-key look-up per row
# shown, NULL for a dead letter with no event row. Replay's claims leave it out: they run
# once per row, under lock.
_SHOW = """
SELECT id, webhook_id, stage, provider, event_id, subject, error_class, error_message,
       error_detail, payload, headers::text AS headers, attempts, received_at,
       first_failed_at, last_failed_at, is_resolved, resolved_at, resolution,
       resolution_note, resolved_by, payload_removed_at, auto_replays,
       (SELECT p.source FROM processed_webhooks p WHERE p.id = dlq_webhooks.webhook_id) AS source
FROM dlq_webhooks"""
_LIST = """
SELECT id, stage, provider, event_id, subject, error_class, attempts, received_at,
       first_failed_at, last_failed_at, is_resolved, resolution,
       (SELECT p.source FROM processed_webhooks p WHERE p.id = dlq_webhooks.webhook_id) AS source
FROM dlq_webhooks"""
# `list` also reads each row's message (at most 2,000 characters): its `--json` prints
# the row as the console's list does (`core.dlq.public`). A replay's plan, which may
# read every open row, does without.
_LIST_MESSAGES = """
SELECT id, stage, provider, event_id, subject, error_class, attempts, received_at,
       first_failed_at, last_failed_at, is_resolved, resolution, error_message,
       (SELECT p.source FROM processed_webhooks p WHERE p.id = dlq_webhooks.webhook_id) AS source
FROM dlq_webhooks"""


# The order a replay plans its rows in, and then claims them in, one by one. Ordered (the
# default): the rows of each key, grouped by (provider, order_key), in key_seq order,
# since settlement applies a key's events only in that order (a later one first would be
# parked behind the earlier one again); keys one after another, then the rows without a
# key, oldest first. Unordered: arrival order.
_KEYED = "(order_key IS NOT NULL AND key_seq IS NOT NULL)"
_IN_KEY_ORDER = (
    f"ORDER BY NOT {_KEYED}, CASE WHEN {_KEYED} THEN provider END,"
    f" CASE WHEN {_KEYED} THEN order_key END, CASE WHEN {_KEYED} THEN key_seq END,"
    " received_at, id"
)
_IN_ARRIVAL_ORDER = "ORDER BY received_at, id"


def replay_order(*, ordered: bool) -> str:
    """The ORDER BY of a replay's plan: the order the run claims its rows in, and a dry
    run lists them in."""
    return _IN_KEY_ORDER if ordered else _IN_ARRIVAL_ORDER


def _row(record: asyncpg.Record) -> DlqRow:
    values = dict(record)
    values["payload"] = bytes(values["payload"])
    values["headers"] = orjson.loads(values["headers"])
    return DlqRow(**values)


class _Where:
    """A WHERE clause built from this module's fixed fragments; every value is a parameter."""

    def __init__(self) -> None:
        self.parts: list[str] = ["true"]
        self.args: list[Any] = []

    def add(self, fragment: str, value: Any) -> _Where:
        """Append `fragment`; its `{}` becomes the placeholder bound to `value`."""
        self.args.append(value)
        self.parts.append(fragment.format(f"${len(self.args)}"))
        return self

    def query(self, head: str, tail: str = "", limit: int | None = None) -> list[Any]:
        """`[sql, *args]` for `{head} WHERE ... {tail} LIMIT n` (no LIMIT for None)."""
        args = [*self.args, limit]
        sql = " ".join([head, "WHERE", " AND ".join(self.parts), tail, f"LIMIT ${len(args)}"])
        return [sql, *args]


_TYPED = (
    "EXISTS (SELECT 1 FROM processed_webhooks p WHERE p.id = dlq_webhooks.webhook_id"
    " AND (p.event_type = ANY({}::text[]) OR p.event_type LIKE ANY({}::text[])))"
)


def _filtered(f: DlqFilter) -> _Where:
    where = _Where()
    if f.resolved is not None:
        where.add("is_resolved = {}", f.resolved)
    if f.stages:
        where.add("stage = ANY({}::text[])", list(f.stages))
    if f.error_classes:
        where.add("upper(error_class) = ANY({}::text[])", list(f.error_classes))
    if f.providers:
        where.add("provider = ANY({}::text[])", list(f.providers))
    if f.since is not None:
        where.add("first_failed_at >= {}", f.since)
    if f.until is not None:
        where.add("first_failed_at < {}", f.until)
    if f.types:
        # The type is the event's, on its own row (a dead letter does not copy it): one
        # primary-key look-up per candidate row. A row without one matches no pattern.
        exact = [t.text for t in f.types if not t.is_prefix]
        prefixes = [like_literal(t.prefix) + "%" for t in f.types if t.is_prefix]
        where.args += [exact, prefixes]
        n = len(where.args)
        where.parts.append(_TYPED.format(f"${n - 1}", f"${n}"))
    if f.search is not None:
        # `{0}` twice: one parameter, both columns. Without `search_messages`, only the
        # relay's messages (stage `publish`, `core.payload_text`) are searched.
        message = (
            "error_message"
            if f.search_messages
            else "CASE WHEN stage = 'publish' THEN error_message END"
        )
        where.add(
            f"(event_id ILIKE {{0}} OR {message} ILIKE {{0}})", "%" + like_literal(f.search) + "%"
        )
    if f.min_attempts is not None:
        where.add("attempts >= {}", f.min_attempts)
    return where


def like_literal(text: str) -> str:
    """`text` as a LIKE pattern that matches only itself: `%`, `_` and the escape
    character `\\` (LIKE's default) taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def list_rows(conn: Conn, f: DlqFilter, limit: int) -> tuple[list[RowBrief], int]:
    """The matching rows, oldest failure first, up to `limit`; and how many match in all."""
    where = _filtered(f)
    with translate_errors():
        total = await conn.fetchval(*where.query("SELECT count(*) FROM dlq_webhooks"))
        records = await conn.fetch(
            *where.query(_LIST_MESSAGES, "ORDER BY first_failed_at, id", limit)
        )
    return [RowBrief(**dict(r)) for r in records], int(total)


async def get_row(conn: Conn, row_id: int) -> DlqRow | None:
    """The row with this id, or None."""
    with translate_errors():
        record = await conn.fetchrow(*_Where().add("id = {}", row_id).query(_SHOW))
    return None if record is None else _row(record)


async def replay_briefs(
    conn: Conn, f: DlqFilter, ids: Sequence[int], *, ordered: bool = True
) -> list[RowBrief]:
    """Every row a replay of `f` (or of `ids`, whatever their state) considers, in the
    order it claims them (`replay_order`)."""
    where = _Where().add("id = ANY({}::bigint[])", list(ids)) if ids else _filtered(f)
    with translate_errors():
        records = await conn.fetch(*where.query(_LIST, replay_order(ordered=ordered)))
    return [RowBrief(**dict(r)) for r in records]


async def clock(conn: Conn) -> datetime:
    """The database's current time, the clock replay marks are compared against."""
    with translate_errors():
        return await conn.fetchval("SELECT clock_timestamp()")  # type: ignore[no-any-return]


async def claim_next(
    conn: Conn,
    f: DlqFilter,
    ids: Sequence[int],
    stages: Sequence[str],
    *,
    max_attempts: int | None,
    run_started_at: datetime,
) -> DlqRow | None:
    """Lock the oldest replayable row no one else holds; None when none is left. A
    replay names one row at a time in `ids`, in its plan's order.

    Must run inside a transaction: the lock lasts until it ends. A row whose last failure
    is later than `run_started_at` was already tried during this run, by this replay or an
    overlapping one, so while replays overlap each row is attempted at most once.
    """
    where = _filtered(replace(f, resolved=False))
    if ids:
        where.add("id = ANY({}::bigint[])", list(ids))
    where.add("stage = ANY({}::text[])", list(stages))
    if max_attempts is not None:
        where.add("attempts < {}", max_attempts)
    where.add("last_failed_at < {}", run_started_at)
    # FOR UPDATE after LIMIT is how PostgreSQL spells it; LIMIT 1 locks one row.
    sql, *args = where.query(_SELECT, _IN_ARRIVAL_ORDER, 1)
    with translate_errors():
        record = await conn.fetchrow(sql + " FOR UPDATE SKIP LOCKED", *args)
    return None if record is None else _row(record)


async def mark_replayed(conn: Conn, row_id: int) -> None:
    """Resolve a row whose stage ran again successfully."""
    with translate_errors():
        await conn.execute(
            "UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now(), "
            "resolution = 'replayed' WHERE id = $1",
            row_id,
        )


async def mark_failed(conn: Conn, row_id: int, failure: Failure) -> None:
    """Count another failed attempt and keep its error as the row's current one."""
    with translate_errors():
        # clock_timestamp(), not now(): the mark must be later than the start of any
        # replay that overlaps this one (see `claim_next`).
        await conn.execute(
            "UPDATE dlq_webhooks SET attempts = attempts + 1, last_failed_at = clock_timestamp(),"
            " error_class = $2, error_message = $3, error_detail = $4 WHERE id = $1",
            row_id,
            failure.error_class,
            capped(failure.message),
            None if failure.detail is None else capped(failure.detail, DETAIL_MAX_CHARS),
        )


async def resolve_stage(conn: Conn, stage: str, note: str, by: str) -> int:
    """Resolve every open row of `stage` as `run_stopped`: the dead letters of a
    forwarding run that has ended and that nothing can replay into (`gateway listen`
    without `--name`). How many were resolved."""
    with translate_errors():
        status = await conn.execute(
            "UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now(), "
            "resolution = 'run_stopped', resolution_note = $2, resolved_by = $3 "
            "WHERE stage = $1 AND NOT is_resolved",
            stage,
            note,
            by,
        )
    return int(status.split()[-1])


async def resolve_by_hand(conn: Conn, row_id: int, note: str, user: str | None) -> bool:
    """Resolve an open row with the operator's note; False if it is not open (or absent)."""
    with translate_errors():
        status = await conn.execute(
            "UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now(), "
            "resolution = 'manual', resolution_note = $2, resolved_by = $3 "
            "WHERE id = $1 AND NOT is_resolved",
            row_id,
            note,
            user,
        )
    return status == "UPDATE 1"


_HEALTH = """
SELECT (SELECT count(*) FROM dlq_webhooks
        WHERE first_failed_at > $1::timestamptz - make_interval(secs => $2)
          AND first_failed_at <= $1::timestamptz) AS added,
       (SELECT count(*) FROM dlq_webhooks WHERE NOT is_resolved) AS unresolved,
       (SELECT min(first_failed_at) FROM dlq_webhooks WHERE NOT is_resolved) AS oldest
"""


async def health_counts(
    conn: Conn, now: datetime, window_s: float
) -> tuple[int, int, datetime | None]:
    """(rows first failed in the `window_s` before `now`, unresolved rows, oldest open one).

    `now` comes from the caller so the alert evaluator can run on an injected clock.
    """
    with translate_errors():
        record = await conn.fetchrow(_HEALTH, now, window_s)
    if record is None:
        return 0, 0, None
    return int(record["added"]), int(record["unresolved"]), record["oldest"]


async def stats(conn: Conn, now: datetime, window_s: float = 300.0) -> DlqStats:
    """Unresolved rows by stage and error class, recent additions, the oldest open row."""
    added, unresolved, oldest = await health_counts(conn, now, window_s)
    with translate_errors():
        records = await conn.fetch(
            "SELECT stage, error_class, count(*) AS n FROM dlq_webhooks WHERE NOT is_resolved "
            "GROUP BY stage, error_class ORDER BY count(*) DESC, stage, error_class"
        )
    by_class = [(r["stage"], r["error_class"], int(r["n"])) for r in records]
    return DlqStats(unresolved, by_class, added, window_s, oldest)


class OutboxState(enum.StrEnum):
    """What replaying an `ingest` row found in `processed_webhooks`."""

    QUEUED = "queued"  # the row now has a subject and waits for the outbox
    ALREADY_PUBLISHED = "already_published"  # the effect already happened: nothing to do
    MISSING = "missing"  # the event was never recorded; replay will not insert it


# Only the existing row is updated, and only while unpublished: the idempotency gate's row
# is never duplicated, and an event already on the stream is left as it is. A fresh
# transaction id puts the row ahead of the outbox cursor, which may have passed it.
_QUEUE = """
WITH target AS (
    SELECT pw.id, pw.received_at, outbox_published(pw) AS published
    FROM processed_webhooks pw
    WHERE pw.provider = $1 AND pw.event_id = $2
    FOR UPDATE
), queued AS (
    UPDATE processed_webhooks p
    SET event_type = $3, subject = $4, outbox_xid = pg_current_xact_id()
    FROM target t WHERE p.id = t.id AND NOT t.published
    RETURNING p.id
)
SELECT t.id, t.received_at, t.published FROM target t
"""


async def queue_for_outbox(
    conn: Conn, provider: str, event_id: str, event_type: str, subject: str
) -> tuple[OutboxState, int | None, datetime | None]:
    """Give a recorded, now valid event its type and subject so the outbox publishes it.

    Returns what was found, the `processed_webhooks` id and its `received_at`.
    """
    with translate_errors():
        record = await conn.fetchrow(_QUEUE, provider, event_id, event_type, subject)
    if record is None:
        return OutboxState.MISSING, None, None
    state = OutboxState.ALREADY_PUBLISHED if record["published"] else OutboxState.QUEUED
    return state, int(record["id"]), record["received_at"]
