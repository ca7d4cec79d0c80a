"""The SQL of retention: emptying payloads, deleting keys, releasing what resolved dead
letters held back, the pass's lock and watermark, and the storage figures.

Every statement touches at most one batch of rows, found through an index (the primary
key from a watermark, or a partial index of `dlq_webhooks`), in a transaction of its
own: ingestion never waits long for a row lock, and no statement grows with the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.retention import (
    LOOKAHEAD_ROWS,
    Scan,
    ScannedRow,
    needs_later_stamp,
    next_watermark,
    plan_scan,
)

#: `pg_try_advisory_lock` key of retention passes: one process works at a time.
LOCK_KEY = 0x6761746577617952
#: `retention_progress.name` of the payload pass's watermark.
PAYLOADS = "payloads"

# A row the outbox has still to publish. Retention never touches one (its body is what
# will be published) and the payload watermark never passes one. Kept in one place: it
# is the outbox's definition (sql/010), not retention's.
_IN_OUTBOX = "outbox_holds({p})"
# A webhook whose fetch was ever owed: its body names what a later repeat fetches again
# (a chargeback months after the payment), and its row makes that repeat a repeat. Such
# a body is a few bytes (`id=tr_…`), so it is kept as long as the row.
_CONFIRMING = "EXISTS (SELECT 1 FROM confirmations c WHERE c.webhook_id = {p}.id)"
# A dead letter still needing its event: open, or resolved within the payload horizon;
# or a fetch still owed.
_DEAD_LETTER_HOLDS = (
    "EXISTS (SELECT 1 FROM dlq_webhooks d WHERE d.webhook_id = {p}.id"
    " AND (NOT d.is_resolved OR d.resolved_at >= {cutoff}))"
)
_HELD = f"({_DEAD_LETTER_HOLDS} OR {_CONFIRMING})"

# One batch of the payload pass: the next `$3` rows by id from the watermark `$1`, each
# with whether it stops the walk (still in the outbox) and whether it is wanted (a body
# kept, no dead letter holding it; `$2` is the cutoff). Where the walk stops, by age
# or otherwise, is decided in `core.retention.plan_scan`.
_PAYLOAD_SCAN = f"""
SELECT s.id, s.received_at, {_IN_OUTBOX.format(p="s")} AS blocks,
       s.payload_removed_at IS NULL AND NOT {_HELD.format(p="s", cutoff="$2")} AS wanted
FROM processed_webhooks s
WHERE s.id >= $1
ORDER BY s.id
LIMIT $3
"""  # noqa: S608 - only constants are interpolated

# The first believable stamp (at most `$2`) among the `$3` rows after id `$1`: it dates
# the rows at a batch's end that a wrong clock stamped in the future.
_LATER_STAMP = """
SELECT a.received_at
FROM (SELECT id, received_at FROM processed_webhooks WHERE id > $1 ORDER BY id LIMIT $3) a
WHERE a.received_at <= $2
ORDER BY a.id
LIMIT 1
"""

# Rows another transaction holds are skipped (the watermark stops at the first of them);
# the conditions are checked again under the lock. Both passes use it: the payload pass
# for the rows its scan found, the dead-letter pass for the rows dead letters released.
# A stamp after `$3` is a wrong clock's, not believed: the payload walk dated such a row
# by the rows recorded after it, and a released row arrived before its dead letter.
_EMPTY_PAYLOADS = f"""
WITH locked AS (
    SELECT p.id FROM processed_webhooks p
    WHERE p.id = ANY($1::bigint[]) AND p.payload_removed_at IS NULL
      AND (p.received_at < $2 OR p.received_at > $3)
      AND NOT {_IN_OUTBOX.format(p="p")} AND NOT {_HELD.format(p="p", cutoff="$2")}
    FOR UPDATE SKIP LOCKED
)
UPDATE processed_webhooks p
SET body = ''::bytea, headers = '{{}}'::jsonb, payload_removed_at = now()
FROM locked WHERE p.id = locked.id
RETURNING p.id
"""  # noqa: S608 - only constants are interpolated

_SAVE_WATERMARK = """
INSERT INTO retention_progress (name, next_id) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET next_id = EXCLUDED.next_id, updated_at = now()
"""

# Resolved dead letters past the horizon, oldest resolution first: their payload is
# emptied, and so is the event row they held back once nothing else holds it. A dead
# letter whose event went back to the outbox (a replayed `publish` row) waits.
_DUE = f"""
SELECT d.id, d.webhook_id FROM dlq_webhooks d
WHERE d.is_resolved AND d.payload_removed_at IS NULL AND d.resolved_at < $1
  AND NOT EXISTS (SELECT 1 FROM processed_webhooks p
                  WHERE p.id = d.webhook_id AND {_IN_OUTBOX.format(p="p")})
"""  # noqa: S608 - only constants are interpolated
_DUE_DEAD_LETTERS = _DUE + "ORDER BY d.resolved_at, d.id\nLIMIT $2"

# What a dry run of the dead-letter pass would empty. Event rows from `$2` up to `$3`
# are the payload pass's (counted there).
_COUNT_DUE = f"""
WITH due AS ({_DUE})
SELECT (SELECT count(*) FROM due) AS dead_letters,
       (SELECT count(*) FROM processed_webhooks p
        WHERE p.id IN (SELECT webhook_id FROM due) AND NOT (p.id >= $2 AND p.id < $3)
          AND p.payload_removed_at IS NULL AND (p.received_at < $1 OR p.received_at > $4)
          AND NOT {_IN_OUTBOX.format(p="p")} AND NOT {_HELD.format(p="p", cutoff="$1")})
       AS webhooks
"""  # noqa: S608 - only constants are interpolated

_EMPTY_DEAD_LETTERS = """
UPDATE dlq_webhooks d
SET payload = ''::bytea, headers = '{}'::jsonb, payload_removed_at = now()
FROM (SELECT id FROM dlq_webhooks WHERE id = ANY($1::bigint[]) AND payload_removed_at IS NULL
      FOR UPDATE SKIP LOCKED) due
WHERE d.id = due.id
RETURNING d.id
"""

# One batch of the key pass: the next `$2` rows by id after `$1`, up to the first row
# too young for the key cutoff (`core.retention.plan_scan`). Never a row in the outbox,
# never one an open dead letter references; neither stops the walk.
_KEY_SCAN = f"""
SELECT s.id, s.received_at, false AS blocks,
       NOT {_IN_OUTBOX.format(p="s")} AND NOT {_CONFIRMING.format(p="s")} AND NOT EXISTS (
           SELECT 1 FROM dlq_webhooks d WHERE d.webhook_id = s.id AND NOT d.is_resolved
       ) AS wanted
FROM processed_webhooks s
WHERE s.id > $1
ORDER BY s.id
LIMIT $2
"""  # noqa: S608 - only constants are interpolated

# Resolved dead letters are kept (their audit trail) but let go of the event row.
_UNLINK_DEAD_LETTERS = """
UPDATE dlq_webhooks SET webhook_id = NULL
WHERE webhook_id = ANY($1::bigint[]) AND is_resolved
"""

_DELETE_KEYS = f"""
DELETE FROM processed_webhooks p
WHERE p.id IN (SELECT id FROM processed_webhooks
               WHERE id = ANY($1::bigint[]) FOR UPDATE SKIP LOCKED)
  AND NOT {_IN_OUTBOX.format(p="p")} AND NOT {_CONFIRMING.format(p="p")}
  AND NOT EXISTS (SELECT 1 FROM dlq_webhooks d WHERE d.webhook_id = p.id)
RETURNING p.id
"""  # noqa: S608 - only constants are interpolated

_STORAGE = """
SELECT c.relname AS name, greatest(c.reltuples, 0)::float8 AS rows,
       pg_total_relation_size(c.oid)::float8 AS bytes
FROM unnest($1::text[]) AS t(name)
JOIN pg_class c ON c.oid = to_regclass(t.name)
"""

# The oldest body still kept: the first row at the watermark, or one a dead letter holds.
_OLDEST_PAYLOAD = """
SELECT least(
    (SELECT received_at FROM processed_webhooks
     WHERE id >= $1 AND payload_removed_at IS NULL ORDER BY id LIMIT 1),
    (SELECT min(p.received_at) FROM dlq_webhooks d
     JOIN processed_webhooks p ON p.id = d.webhook_id
     WHERE (NOT d.is_resolved OR d.payload_removed_at IS NULL)
       AND p.payload_removed_at IS NULL AND p.id < $1))
"""


def _rows(records: Sequence[asyncpg.Record]) -> list[ScannedRow]:
    return [ScannedRow(r["id"], r["received_at"], r["blocks"], r["wanted"]) for r in records]


async def _planned(
    conn: Conn, rows: list[ScannedRow], cutoff: datetime, trusted_until: datetime, limit: int
) -> Scan:
    """The batch planned; a full batch ending in rows stamped in the future first looks
    up to `LOOKAHEAD_ROWS` further for a believable stamp to date them by."""
    later = None
    if needs_later_stamp(rows, trusted_until, limit):
        later = await conn.fetchval(_LATER_STAMP, rows[-1].id, trusted_until, LOOKAHEAD_ROWS)
    return plan_scan(rows, cutoff, trusted_until, later)


async def try_lock(conn: Conn) -> bool:
    """Take the retention lock for this session, if no other session holds it."""
    with translate_errors():
        return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY))


async def unlock(conn: Conn) -> None:
    with translate_errors():
        await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)


async def database_now(conn: Conn) -> datetime:
    """The database's clock: every process computes the same cutoffs from it."""
    with translate_errors():
        return await conn.fetchval("SELECT now()")  # type: ignore[no-any-return]


async def watermark(conn: Conn, name: str = PAYLOADS) -> int:
    """Where the pass `name` resumes (0 at first)."""
    with translate_errors():
        value = await conn.fetchval("SELECT next_id FROM retention_progress WHERE name = $1", name)
    return int(value or 0)


async def scan_payloads(
    conn: Conn, from_id: int, cutoff: datetime, trusted_until: datetime, limit: int
) -> Scan:
    """Look at the next `limit` rows from `from_id`; change nothing."""
    with translate_errors():
        rows = _rows(await conn.fetch(_PAYLOAD_SCAN, from_id, cutoff, limit))
        return await _planned(conn, rows, cutoff, trusted_until, limit)


async def empty_payloads(
    conn: Conn, scan: Scan, cutoff: datetime, trusted_until: datetime
) -> tuple[int, int, bool]:
    """Empty the bodies and headers of the scan's eligible rows (skipping rows others
    hold) and move the watermark, in one transaction: (rows emptied, the new watermark,
    whether the pass ends here)."""
    with translate_errors():
        async with conn.transaction():
            rows = await conn.fetch(_EMPTY_PAYLOADS, scan.eligible, cutoff, trusted_until)
            emptied = {int(r["id"]) for r in rows}
            next_id, ends = next_watermark(
                scan.last_id, scan.stop_id, (i for i in scan.eligible if i not in emptied)
            )
            await conn.execute(_SAVE_WATERMARK, PAYLOADS, next_id)
    return len(emptied), next_id, ends


async def due_dead_letters(conn: Conn, cutoff: datetime, limit: int) -> list[tuple[int, int]]:
    """(dead letter id, event row id or 0) of resolved dead letters past the horizon
    whose payload is kept, oldest resolution first."""
    with translate_errors():
        rows = await conn.fetch(_DUE_DEAD_LETTERS, cutoff, limit)
    return [(int(r["id"]), int(r["webhook_id"] or 0)) for r in rows]


async def count_due_dead_letters(
    conn: Conn, cutoff: datetime, trusted_until: datetime, scanned_from: int, scanned_to: int
) -> tuple[int, int]:
    """(dead letters, event rows outside [scanned_from, scanned_to)) the dead-letter pass
    would empty now; changes nothing."""
    with translate_errors():
        row = await conn.fetchrow(_COUNT_DUE, cutoff, scanned_from, scanned_to, trusted_until)
    return (0, 0) if row is None else (int(row["dead_letters"]), int(row["webhooks"]))


async def empty_dead_letters(
    conn: Conn,
    ids: Sequence[int],
    webhook_ids: Sequence[int],
    cutoff: datetime,
    trusted_until: datetime,
) -> tuple[int, int]:
    """Empty these dead letters' payloads and release the event rows they held;
    (dead letters emptied, event rows emptied)."""
    with translate_errors():
        async with conn.transaction():
            emptied = await conn.fetch(_EMPTY_DEAD_LETTERS, list(ids))
            released = await conn.fetch(_EMPTY_PAYLOADS, list(webhook_ids), cutoff, trusted_until)
    return len(emptied), len(released)


async def scan_keys(
    conn: Conn, after_id: int, cutoff: datetime, trusted_until: datetime, limit: int
) -> Scan:
    """Look at the next `limit` rows after `after_id`; change nothing."""
    with translate_errors():
        rows = _rows(await conn.fetch(_KEY_SCAN, after_id, limit))
        return await _planned(conn, rows, cutoff, trusted_until, limit)


async def delete_keys(conn: Conn, ids: Sequence[int]) -> int:
    """Delete these rows (resolved dead letters let go of them first), skipping rows
    others hold, in one transaction; how many were deleted."""
    with translate_errors():
        async with conn.transaction():
            await conn.execute(_UNLINK_DEAD_LETTERS, list(ids))
            rows = await conn.fetch(_DELETE_KEYS, list(ids))
    return len(rows)


async def storage(conn: Conn, tables: Sequence[str]) -> list[tuple[str, float, float]]:
    """(table, estimated rows, bytes with indexes and TOAST) for each table that exists:
    the planner's estimate and the file sizes, so it costs no scan."""
    with translate_errors():
        rows = await conn.fetch(_STORAGE, list(tables))
    return [(r["name"], float(r["rows"]), float(r["bytes"])) for r in rows]


async def oldest_payload(conn: Conn) -> datetime | None:
    """When the oldest event whose body is still kept arrived (None: no body kept)."""
    with translate_errors():
        mark = await watermark(conn)
        return await conn.fetchval(_OLDEST_PAYLOAD, mark)  # type: ignore[no-any-return]
