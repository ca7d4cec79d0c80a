"""The operator's SQL of per-key order: listing keys, releasing a held one, and the
figures behind the hold gauges.

A release is one transaction that locks the key's `order_applied` row first (as
settlement's compare-and-set does), so it never races settlement moving the same key;
the move itself is settlement's store's (`ordering.release`), so there is one way a
key is moved past a hold.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.ordering import applied as ordering
from gateway.core.ordering.admin import KeyListing, Release
from gateway.errors import OrderingUsageError, OrderKeyNotFound

# Every key has a counter (ingest numbers it before settlement sees it); the list walks
# the counters newest first through order_counters_touched_idx.
_KEYS = """
SELECT c.provider, c.order_key, coalesce(a.applied_seq, 0) AS applied_seq,
       c.last_seq, c.touched_at, a.progressed_at,
       a.held_seq, a.held_dlq_id, a.hold_reason, a.held_at
FROM order_counters c
LEFT JOIN order_applied a ON a.provider = c.provider AND a.order_key = c.order_key
WHERE ($1::text IS NULL OR c.provider = $1)
ORDER BY c.touched_at DESC, c.provider, c.order_key
LIMIT $2
"""
# Held keys, oldest hold first, through the partial index order_applied_held_idx.
_HELD_KEYS = """
SELECT a.provider, a.order_key, a.applied_seq, c.last_seq, c.touched_at, a.progressed_at,
       a.held_seq, a.held_dlq_id, a.hold_reason, a.held_at
FROM order_applied a
LEFT JOIN order_counters c ON c.provider = a.provider AND c.order_key = a.order_key
WHERE a.held_at IS NOT NULL AND ($1::text IS NULL OR a.provider = $1)
ORDER BY a.held_at, a.provider, a.order_key
LIMIT $2
"""

_LOCK_KEY = """
SELECT provider, order_key, applied_seq, held_seq, held_dlq_id, hold_reason, held_at
FROM order_applied WHERE provider = $1 AND order_key = $2
FOR UPDATE
"""
_LOCK_HOLDER = """
SELECT provider, order_key, applied_seq, held_seq, held_dlq_id, hold_reason, held_at
FROM order_applied WHERE held_dlq_id = $1 AND held_at IS NOT NULL
FOR UPDATE
"""
_COUNTED = "SELECT EXISTS (SELECT 1 FROM order_counters WHERE provider = $1 AND order_key = $2)"

# The blocking dead letter is resolved as `gateway dlq resolve` resolves a row.
_RESOLVE_HOLDER = """
UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now(), resolution = 'manual',
       resolution_note = $2, resolved_by = $3
WHERE id = $1 AND NOT is_resolved
"""
# The key's other open dead letters: what stays parked behind it, in replay order.
_PARKED = """
SELECT id FROM dlq_webhooks
WHERE NOT is_resolved AND provider = $1 AND order_key = $2 AND id <> $3
ORDER BY key_seq NULLS LAST, received_at, id
"""

_HOLDS = (
    "SELECT count(*) AS held, min(held_at) AS oldest FROM order_applied WHERE held_at IS NOT NULL"
)


def _state(r: asyncpg.Record) -> KeyListing:
    return KeyListing(
        provider=r["provider"],
        order_key=r["order_key"],
        applied_seq=int(r["applied_seq"]),
        last_seq=None if r["last_seq"] is None else int(r["last_seq"]),
        touched_at=r["touched_at"],
        progressed_at=r["progressed_at"],
        held_seq=r["held_seq"],
        held_dlq_id=r["held_dlq_id"],
        hold_reason=r["hold_reason"],
        held_at=r["held_at"],
    )


async def list_keys(
    conn: Conn, *, held: bool, provider: str | None, limit: int
) -> tuple[list[KeyListing], bool]:
    """Keys newest first (held ones: oldest hold first), up to `limit`; and whether
    more match."""
    with translate_errors():
        records = await conn.fetch(_HELD_KEYS if held else _KEYS, provider, limit + 1)
    return [_state(r) for r in records[:limit]], len(records) > limit


async def release_key(conn: Conn, provider: str, order_key: str, note: str, actor: str) -> Release:
    """Release the key's hold (see `_release`); `OrderKeyNotFound` for a key with no
    state, `OrderingUsageError` for one that is not held."""
    with translate_errors():
        async with conn.transaction():
            row = await conn.fetchrow(_LOCK_KEY, provider, order_key)
            if row is None or row["held_at"] is None:
                if row is None and not await conn.fetchval(_COUNTED, provider, order_key):
                    raise OrderKeyNotFound(
                        f"no ordering state for key {order_key!r} of provider {provider!r}"
                    )
                raise OrderingUsageError(
                    f"key {order_key!r} of provider {provider!r} is not held; nothing to "
                    "release (gateway ordering keys --held lists the held ones)"
                )
            return await _release(conn, row, note, actor)


async def release_holder(conn: Conn, dlq_id: int, note: str, actor: str) -> Release | None:
    """Release the key the dead letter `dlq_id` holds; None when it holds none (the
    caller then resolves it as any other row)."""
    with translate_errors():
        async with conn.transaction():
            row = await conn.fetchrow(_LOCK_HOLDER, dlq_id)
            if row is None:
                return None
            return await _release(conn, row, note, actor)


async def _release(conn: Conn, row: asyncpg.Record, note: str, actor: str) -> Release:
    """Inside the transaction that locked the key's row: resolve the blocking dead
    letter by hand, then log every number up to the held one as skipped by `actor`
    (`core.ordering.admin.skipped_seqs`), move `applied_seq` there and clear the hold."""
    provider, order_key = row["provider"], row["order_key"]
    applied, held_seq, dlq_id = int(row["applied_seq"]), int(row["held_seq"]), row["held_dlq_id"]
    if dlq_id is not None:
        await conn.execute(_RESOLVE_HOLDER, dlq_id, note, actor)
    await ordering.release(conn, provider, order_key, actor, note)
    parked = await conn.fetch(_PARKED, provider, order_key, dlq_id or 0)
    return Release(
        provider=provider,
        order_key=order_key,
        from_seq=applied,
        to_seq=max(applied, held_seq),
        hold_reason=row["hold_reason"],
        dead_letter_id=dlq_id,
        actor=actor,
        note=note,
        parked_behind=tuple(int(r["id"]) for r in parked),
    )


async def holds(conn: Conn) -> tuple[int, datetime | None]:
    """(keys held, the oldest hold's start): an index-only look at the held rows."""
    with translate_errors():
        record = await conn.fetchrow(_HOLDS)
    if record is None:
        return 0, None
    return int(record["held"]), record["oldest"]
