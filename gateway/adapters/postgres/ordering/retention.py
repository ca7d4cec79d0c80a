"""The SQL of retention's key pass over per-key order: the state of keys idle past the
key horizon is removed, so a later event of such a key is numbered from 1 again.

A key goes only when nothing of it is still in flight: ingest numbered nothing since
the cutoff (`order_counters.touched_at`), settlement applied everything it numbered
(`applied_seq = last_seq`) and nothing since the cutoff either, no hold, no deferral
still waiting to settle, and no open dead letter of the key (a replay of one would find
its key's numbers gone).

Each batch is one transaction holding each of its keys' ingest lock (the advisory lock
ingest numbers a key under, `key_numbers.key_lock_id`), taken without waiting: a key ingest
is numbering right now is left for the next pass. Under the lock the key is looked at
again, with a fresh snapshot, and removed; ingest numbering it afterwards waits for the
commit, then finds no counter and starts again at 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.ordering.key_numbers import key_lock_id

# Idle keys from the cursor on, oldest first, through order_counters_touched_idx.
_IDLE = """
FROM order_counters c
LEFT JOIN order_applied a ON a.provider = c.provider AND a.order_key = c.order_key
WHERE c.touched_at < $1
  AND (c.touched_at, c.provider, c.order_key) > ($2::timestamptz, $3::text, $4::text)
  AND coalesce(a.applied_seq, 0) = c.last_seq
  AND a.held_at IS NULL
  AND (a.progressed_at IS NULL OR a.progressed_at < $1)
  AND NOT EXISTS (
      SELECT 1 FROM order_log l
      WHERE l.provider = c.provider AND l.order_key = c.order_key
        AND l.outcome = 'deferred' AND l.resolution IS NULL)
  AND NOT EXISTS (
      SELECT 1 FROM dlq_webhooks d
      WHERE NOT d.is_resolved AND d.provider = c.provider AND d.order_key = c.order_key)
"""
_CANDIDATES = f"""
SELECT c.provider, c.order_key, c.touched_at {_IDLE}
ORDER BY c.touched_at, c.provider, c.order_key
LIMIT $5
"""
# A try-lock never waits, so the order of taking them cannot deadlock.
_TRY_LOCKS = "SELECT k FROM unnest($1::bigint[]) AS k WHERE pg_try_advisory_xact_lock(k)"
# The candidates ingest was not numbering, looked at again under their locks.
_STILL_IDLE = f"""
SELECT c.provider, c.order_key {_IDLE}
  AND (c.provider, c.order_key) IN (SELECT * FROM unnest($5::text[], $6::text[]))
FOR UPDATE OF c
"""  # noqa: S608 - only constants are interpolated

_KEYS = "unnest($1::text[], $2::text[]) AS k(provider, order_key)"
_DELETE = f"""
WITH k AS (SELECT * FROM {_KEYS}),
log AS (
    DELETE FROM order_log l USING k
    WHERE l.provider = k.provider AND l.order_key = k.order_key RETURNING 1),
applied AS (
    DELETE FROM order_applied a USING k
    WHERE a.provider = k.provider AND a.order_key = k.order_key RETURNING 1),
counters AS (
    DELETE FROM order_counters c USING k
    WHERE c.provider = k.provider AND c.order_key = k.order_key RETURNING 1)
SELECT (SELECT count(*) FROM counters) AS counters, (SELECT count(*) FROM applied) AS applied,
       (SELECT count(*) FROM log) AS log
"""  # noqa: S608 - only constants are interpolated

# What a dry run would remove, counted in one statement (nothing is locked).
_COUNT_IDLE = f"""
WITH idle AS (SELECT c.provider, c.order_key, a.provider IS NOT NULL AS applied {_IDLE})
SELECT (SELECT count(*) FROM idle) AS counters,
       (SELECT count(*) FROM idle WHERE applied) AS applied,
       (SELECT count(*) FROM order_log l JOIN idle i
          ON l.provider = i.provider AND l.order_key = i.order_key) AS log
"""  # noqa: S608 - only constants are interpolated

#: Before every key: where the first batch starts.
_START = (datetime(1970, 1, 1, tzinfo=UTC), "", "")


@dataclass(frozen=True)
class KeysRemoved:
    """Rows one batch (or a dry run) removed from each table of per-key order."""

    counters: int = 0
    applied: int = 0
    log: int = 0
    #: The last key the batch looked at (touched_at, provider, key): the next one's cursor.
    last: tuple[datetime, str, str] | None = None
    looked_at: int = 0


async def remove_idle_keys(
    conn: Conn, cutoff: datetime, after: tuple[datetime, str, str] | None, limit: int
) -> KeysRemoved:
    """Remove the state of up to `limit` idle keys after the cursor `after`, in one
    transaction; what was removed, and the cursor past every key looked at."""
    start = after or _START
    with translate_errors():
        async with conn.transaction():
            candidates = await conn.fetch(_CANDIDATES, cutoff, *start, limit)
            if not candidates:
                return KeysRemoved()
            by_lock = {key_lock_id(r["provider"], r["order_key"]): r for r in candidates}
            locked = [by_lock[r["k"]] for r in await conn.fetch(_TRY_LOCKS, list(by_lock))]
            keys = await conn.fetch(
                _STILL_IDLE,
                cutoff,
                *_START,
                [r["provider"] for r in locked],
                [r["order_key"] for r in locked],
            )
            row = None
            if keys:
                providers = [k["provider"] for k in keys]
                row = await conn.fetchrow(_DELETE, providers, [k["order_key"] for k in keys])
    last = candidates[-1]
    return KeysRemoved(
        counters=int(row["counters"]) if row else 0,
        applied=int(row["applied"]) if row else 0,
        log=int(row["log"]) if row else 0,
        last=(last["touched_at"], last["provider"], last["order_key"]),
        looked_at=len(candidates),
    )


async def count_idle_keys(conn: Conn, cutoff: datetime) -> KeysRemoved:
    """What `remove_idle_keys` would remove now, every batch together; changes nothing."""
    with translate_errors():
        row = await conn.fetchrow(_COUNT_IDLE, cutoff, *_START)
    if row is None:
        return KeysRemoved()
    return KeysRemoved(int(row["counters"]), int(row["applied"]), int(row["log"]))
