"""The SQL behind the console's dead-letter pages: keyset pages of the list in the order
`gateway dlq list` prints (first_failed_at, id), a capped count, the error class by
stage matrix, one row's extras (its key, event type and trace), its key's neighbours,
its audit trail, resolving by hand one row or many, and the export's batches.

The filter is `dead_letters._filtered`, the one the CLI's list uses, so the console and
`gateway dlq list` choose the same rows. A page never uses OFFSET: it starts after the
last row of the one before, through `dlq_webhooks_open_page_idx` (open rows, the
default) or `dlq_webhooks_page_idx` (sql/016_console_lists.sql).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.dead_letters.rows import _filtered, _Where, resolve_by_hand
from gateway.adapters.postgres.ordering import admin as keys
from gateway.core.dlq.filters import DlqFilter
from gateway.core.dlq.model import RowBrief
from gateway.core.dlq.pages import COUNT_CAP, DlqPage
from gateway.core.keyset import Keyset
from gateway.errors import DlqUsageError

_BRIEF = """
SELECT id, stage, provider, event_id, subject, error_class, attempts, received_at,
       first_failed_at, last_failed_at, is_resolved, resolution, error_message,
       (SELECT p.source FROM processed_webhooks p WHERE p.id = dlq_webhooks.webhook_id) AS source
FROM dlq_webhooks"""
_ORDER = "ORDER BY first_failed_at, id"
_CAPPED_COUNT = "SELECT count(*) FROM (SELECT 1 FROM dlq_webhooks"
#: The metadata export leaves out the stack (`error_detail`) with the payload: a stack
#: may quote the event, which only the export with payloads may carry.
_EXPORT = """
SELECT id, webhook_id, stage, provider, event_id, subject, error_class, error_message,
       attempts, received_at, first_failed_at, last_failed_at, is_resolved,
       resolved_at, resolution, resolution_note, resolved_by, order_key, key_seq
FROM dlq_webhooks"""
_EXPORT_PAYLOADS = """
SELECT id, webhook_id, stage, provider, event_id, subject, error_class, error_message,
       error_detail, attempts, received_at, first_failed_at, last_failed_at, is_resolved,
       resolved_at, resolution, resolution_note, resolved_by, order_key, key_seq,
       payload, headers::text AS headers, payload_removed_at
FROM dlq_webhooks"""
#: What a row's payload weighs, read without the payload (the length is in its header).
_EXPORT_SIZES = "SELECT octet_length(payload) AS size_bytes FROM dlq_webhooks"


def _after(where: _Where, after: Keyset | None) -> _Where:
    if after is not None:
        # A row comparison: the index on (first_failed_at, id) starts the scan there.
        where.args += [after.at, after.id]
        n = len(where.args)
        where.parts.append(f"(first_failed_at, id) > (${n - 1}::timestamptz, ${n}::bigint)")
    return where


def page_query(f: DlqFilter, after: Keyset | None, limit: int) -> list[Any]:
    """`[sql, *args]` of a page: `limit` + 1 rows (the one more says a next page exists)."""
    return _after(_filtered(f), after).query(_BRIEF, _ORDER, limit + 1)


def count_query(f: DlqFilter) -> list[Any]:
    """`[sql, *args]` of the capped count: a LIMIT inside, so 1 M open rows cost 10,001."""
    sql, *args = _filtered(f).query(_CAPPED_COUNT, "", COUNT_CAP + 1)
    return [sql + ") AS capped", *args]


@asynccontextmanager
async def bounded(conn: Conn, timeout_s: float | None) -> AsyncIterator[None]:
    """Statements inside read for at most `timeout_s` (None: no bound); past it
    `DlqUsageError` asks for a narrower filter."""
    if timeout_s is None:
        yield
        return
    try:
        async with conn.transaction():
            # SET LOCAL: the bound ends with this transaction; the pooled connection
            # goes back without it.
            await conn.execute(f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}")
            yield
    except asyncpg.QueryCanceledError:
        raise DlqUsageError(
            f"the filter read for more than {timeout_s:g} s: narrow it (a time window,"
            " a stage, a provider or an error class) or search for longer text"
        ) from None


async def list_page(
    conn: Conn, f: DlqFilter, after: Keyset | None, limit: int, timeout_s: float | None = None
) -> DlqPage:
    """The `limit` rows after `after` in the list's order, whether more follow, and how
    many match `f` in all, counted up to the cap; each read bounded by `timeout_s`."""
    with translate_errors():
        async with bounded(conn, timeout_s):
            records = await conn.fetch(*page_query(f, after, limit))
            total = int(await conn.fetchval(*count_query(f)))
    rows = [RowBrief(**dict(r)) for r in records[:limit]]
    more = len(records) > limit
    last = rows[-1] if rows else None
    next_after = Keyset(last.first_failed_at, last.id) if more and last else None
    return DlqPage(rows, next_after, total, total > COUNT_CAP)


async def matching_ids(conn: Conn, f: DlqFilter, limit: int) -> list[int]:
    """The ids of up to `limit` rows matching `f`, in the list's order."""
    with translate_errors():
        records = await conn.fetch(
            *_filtered(f).query("SELECT id FROM dlq_webhooks", _ORDER, limit)
        )
    return [int(r["id"]) for r in records]


async def stream_rows(
    conn: Conn, f: DlqFilter, after: Keyset | None, limit: int
) -> list[dict[str, Any]]:
    """A batch of the metadata export: `limit` rows after `after`, every stored field
    but the payload, the headers and the stack."""
    with translate_errors():
        records = await conn.fetch(*_after(_filtered(f), after).query(_EXPORT, _ORDER, limit))
    return [dict(r) for r in records]


async def stream_rows_with_payloads(
    conn: Conn, f: DlqFilter, after: Keyset | None, limit: int, *, budget_bytes: int
) -> list[dict[str, Any]]:
    """A batch of the export with payloads: the rows after `after`, at most `limit`,
    whose payloads together weigh at most `budget_bytes` (one row, however heavy, when
    the first alone weighs more), so a batch's memory is bounded by bytes, not rows.
    The sizes are read first, without the payloads, in the same snapshot as the rows."""
    with translate_errors():
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            sizes = await conn.fetch(
                *_after(_filtered(f), after).query(_EXPORT_SIZES, _ORDER, limit)
            )
            rows, weight = 0, 0
            for record in sizes:
                weight += int(record["size_bytes"] or 0)
                if rows and weight > budget_bytes:
                    break
                rows += 1
            if not rows:
                return []
            records = await conn.fetch(
                *_after(_filtered(f), after).query(_EXPORT_PAYLOADS, _ORDER, rows)
            )
    return [dict(r) for r in records]


async def groups(
    conn: Conn, f: DlqFilter, timeout_s: float | None = None
) -> list[tuple[str, str, int]]:
    """(error_class, stage, rows) of the rows matching `f`, most rows first."""
    sql, *args = _filtered(f).query(
        "SELECT error_class, stage, count(*) AS n FROM dlq_webhooks",
        "GROUP BY error_class, stage ORDER BY count(*) DESC, error_class, stage",
    )
    with translate_errors():
        async with bounded(conn, timeout_s):
            records = await conn.fetch(sql, *args)
    return [(r["error_class"], r["stage"], int(r["n"])) for r in records]


@dataclass(frozen=True)
class RowExtras:
    """What a detail page shows beside the stored row: its place on its key and its
    event's type and trace, from the event's own row."""

    order_key: str | None
    key_seq: int | None
    event_type: str | None
    traceparent: str | None
    held: bool  # the row holds its key (resolving it releases the key)


_EXTRAS = """
SELECT d.order_key, d.key_seq, p.event_type, p.traceparent,
       EXISTS (SELECT 1 FROM order_applied a
               WHERE a.held_dlq_id = d.id AND a.held_at IS NOT NULL) AS held
FROM dlq_webhooks d LEFT JOIN processed_webhooks p ON p.id = d.webhook_id
WHERE d.id = $1
"""
_NEIGHBOURS = """
(SELECT id, key_seq, stage, error_class, is_resolved FROM dlq_webhooks
 WHERE provider = $1 AND order_key = $2 AND key_seq < $3 ORDER BY key_seq DESC LIMIT $4)
UNION ALL
(SELECT id, key_seq, stage, error_class, is_resolved FROM dlq_webhooks
 WHERE provider = $1 AND order_key = $2 AND key_seq >= $3 AND id <> $5
 ORDER BY key_seq LIMIT $4)
ORDER BY key_seq, id
"""
_TRAIL = """
SELECT id, at, actor, role, via, action, outcome, detail::text AS detail FROM console_audit
WHERE target = $1 ORDER BY id DESC LIMIT $2
"""


async def extras(conn: Conn, row_id: int) -> RowExtras | None:
    with translate_errors():
        r = await conn.fetchrow(_EXTRAS, row_id)
    return None if r is None else RowExtras(**dict(r))


async def neighbours(
    conn: Conn, row_id: int, provider: str, order_key: str, key_seq: int, each_side: int = 5
) -> list[dict[str, Any]]:
    """Up to `each_side` dead letters of the key before and after `key_seq`."""
    with translate_errors():
        records = await conn.fetch(_NEIGHBOURS, provider, order_key, key_seq, each_side, row_id)
    return [dict(r) for r in records]


async def audit_trail(conn: Conn, target: str, limit: int = 50) -> list[dict[str, Any]]:
    """The console's audit rows about `target` (e.g. `dlq:412`), newest first."""
    with translate_errors():
        records = await conn.fetch(_TRAIL, target, limit)
    return [dict(r) for r in records]


async def resolve_one(conn: Conn, row_id: int, note: str, actor: str) -> tuple[bool, bool]:
    """Resolve an open row by hand as `gateway dlq resolve` does: a row holding its key
    releases the key. (resolved, released) — neither when the row is not open. Run it
    inside the caller's transaction, with the audit row."""
    release = await keys.release_holder(conn, row_id, note, actor)
    if release is not None:
        return True, True
    return await resolve_by_hand(conn, row_id, note, actor), False


async def open_among(conn: Conn, ids: Sequence[int]) -> list[int]:
    """Which of `ids` are open rows, locked until the transaction ends, in id order."""
    with translate_errors():
        records = await conn.fetch(
            "SELECT id FROM dlq_webhooks WHERE id = ANY($1::bigint[]) AND NOT is_resolved"
            " ORDER BY id FOR UPDATE",
            list(ids),
        )
    return [int(r["id"]) for r in records]


async def database_now(conn: Conn) -> datetime:
    with translate_errors():
        return await conn.fetchval("SELECT now()")  # type: ignore[no-any-return]
