"""The outbox cursor (sql/010): which recorded rows the relay still owes the stream.

Nothing here writes to `processed_webhooks` on the happy path: a row's transaction id,
stamped when it was recorded, places it in the walk, and one `outbox_cursor` row says how
far the walk got. Only failures write to rows (an attempt count, a park mark).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.webhooks import StoredEvent, stored_event
from gateway.core.relay.cursor import Cursor, Position, xip, xmax
from gateway.errors import MigrationsMissing

#: `pg_try_advisory_xact_lock` key of a sweep: one relay walks the cursor at a time.
LOCK_KEY = 0x6761746577616F62

# With the database's current snapshot, which the sweep aims at when no range is open.
_READ = """
SELECT done_snapshot::text AS done, target_snapshot::text AS target,
       after_xid::text AS after_xid, after_id, pg_current_snapshot()::text AS now
FROM outbox_cursor WHERE name = 'default'
"""

_SAVE = """
UPDATE outbox_cursor
SET done_snapshot = $1::text::pg_snapshot, target_snapshot = $2::text::pg_snapshot,
    after_xid = $3::text::xid8, after_id = $4, advanced_at = now()
WHERE name = 'default'
"""

_COLUMNS = """id, provider, event_id, event_type, subject, headers::text AS headers, body,
              received_at, source, traceparent, order_key, key_seq, outbox_xid"""
_STILL_OWED = """subject IS NOT NULL AND publish_parked_at IS NULL
    AND pg_visible_in_snapshot(outbox_xid, $2::text::pg_snapshot)"""

# The next rows of the range, in walk order. Rows invisible in `done` are either of a
# transaction that was running when it was taken (its `xip`: a handful of ids, passed as
# values so the planner sees how few, looked up one by one) or of a later one (at or past
# its `xmax`, read forward along the index from `$5, $6`, the later of the walk's position
# and that `xmax`: one row bound, which the index starts from; given two bounds of
# different shapes, it starts from the lower). Keeping the two apart keeps a long-running
# transaction elsewhere from turning every sweep into a scan of all recorded since.
_WALK = f"""
SELECT * FROM (
    (SELECT {_COLUMNS} FROM processed_webhooks
     WHERE outbox_xid = ANY($1::text[]::xid8[])
       AND (outbox_xid, id) > ($3::text::xid8, $4::bigint) AND {_STILL_OWED}
     ORDER BY outbox_xid, id LIMIT $7)
    UNION ALL
    (SELECT {_COLUMNS} FROM processed_webhooks
     WHERE (outbox_xid, id) > ($5::text::xid8, $6::bigint) AND outbox_xid IS NOT NULL
       AND outbox_xid < pg_snapshot_xmax($2::text::pg_snapshot) AND {_STILL_OWED}
     ORDER BY outbox_xid, id LIMIT $7)
) owed
ORDER BY outbox_xid, id
LIMIT $7
"""  # noqa: S608 - only constants are interpolated

# The same two ways in, for the gauges: every row recorded and not yet passed. The
# cursor comes in as parameters (as for the walk) so that the index bounds are values.
_STATS = """
SELECT count(*) AS pending,
       coalesce(extract(epoch FROM now() - min(received_at)), 0)::float8 AS lag_s
FROM (
    SELECT received_at, outbox_xid, id, subject, publish_parked_at FROM processed_webhooks
    WHERE outbox_xid = ANY($1::text[]::xid8[])
    UNION ALL
    SELECT received_at, outbox_xid, id, subject, publish_parked_at FROM processed_webhooks
    WHERE (outbox_xid, id) > ($5::text::xid8, -1::bigint) AND outbox_xid IS NOT NULL
) ahead
WHERE subject IS NOT NULL AND publish_parked_at IS NULL
  AND NOT (pg_visible_in_snapshot(outbox_xid, $2::text::pg_snapshot)
           AND (outbox_xid, id) <= ($3::text::xid8, $4::bigint))
"""


async def try_lock(conn: Conn) -> bool:
    """Take the sweep lock for the current transaction; False when another relay has it."""
    with translate_errors():
        return bool(await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", LOCK_KEY))


async def read_cursor(conn: Conn) -> tuple[Cursor, str]:
    """The cursor, and the database's current snapshot (`pg_snapshot` text). Read it
    after `try_lock`, so it is the cursor the last sweep left."""
    with translate_errors():
        row = await conn.fetchrow(_READ)
    if row is None:  # sql/010 inserts it; only a hand-edited database lacks it
        raise MigrationsMissing("outbox_cursor has no 'default' row: run `gateway migrate`")
    after = (int(row["after_xid"]), int(row["after_id"]))
    return Cursor(row["done"], row["target"], after), str(row["now"])


def _ahead_of(cursor: Cursor) -> tuple[list[str], str, str, int]:
    """`$1` to `$4` of the walk and the gauges: the transactions running when `done` was
    taken, the target snapshot and the position (xid8 travels as text)."""
    xids = [str(x) for x in xip(cursor.done_snapshot)]
    return xids, cursor.target_snapshot, str(cursor.after[0]), cursor.after[1]


async def walk(conn: Conn, cursor: Cursor, limit: int) -> tuple[list[StoredEvent], list[Position]]:
    """The next `limit` rows the cursor has not passed, and their walk positions."""
    newer = cursor.newer_than
    with translate_errors():
        rows = await conn.fetch(_WALK, *_ahead_of(cursor), str(newer[0]), newer[1], limit)
    positions = [(int(r["outbox_xid"]), int(r["id"])) for r in rows]
    return [stored_event(r) for r in rows], positions


async def save_cursor(conn: Conn, cursor: Cursor) -> None:
    with translate_errors():
        await conn.execute(
            _SAVE,
            cursor.done_snapshot,
            cursor.target_snapshot,
            str(cursor.after[0]),
            cursor.after[1],
        )


async def count_publish_attempt(conn: Conn, webhook_ids: Sequence[int]) -> dict[int, int]:
    """Count an unconfirmed publish for these rows; return each row's attempts so far."""
    if not webhook_ids:
        return {}
    with translate_errors():
        rows = await conn.fetch(
            "UPDATE processed_webhooks SET publish_attempts = publish_attempts + 1 "
            "WHERE id = ANY($1::bigint[]) RETURNING id, publish_attempts",
            list(webhook_ids),
        )
    return {int(r["id"]): int(r["publish_attempts"]) for r in rows}


async def outbox_stats(conn: Conn) -> tuple[int, float]:
    """(rows waiting to be published, age in seconds of the oldest of them)."""
    cursor, _ = await read_cursor(conn)
    with translate_errors():
        row = await conn.fetchrow(_STATS, *_ahead_of(cursor), str(xmax(cursor.done_snapshot)))
    if row is None:
        return 0, 0.0
    return int(row["pending"]), float(row["lag_s"])
