"""Settlement's side of ordering: how far each key is applied (`order_applied`), its
hold, and the log of what was applied (`order_log`), from sql/014_ordering.sql.

How a key moves (the compare-and-set of `applied_seq` with its log rows) is
`key_moves`; here are the reads of the keys' state, their holds, the deferrals still
owed, an operator's release and a dead letter's place.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import orjson

from gateway.adapters.postgres import Conn, translate_errors

__all__ = [
    "KeyState",
    "hold",
    "place_of",
    "positions",
    "release",
    "resolve_deferral",
    "states",
    "still_owed",
]

#: (provider, order_key)
Key = tuple[str, str]
#: (provider, order_key, key_seq)
KeySeq = tuple[str, str, int]


class KeyState(NamedTuple):
    """A key's position and hold; a key without a row is at 0 and not held. (Named
    tuples, as `key_moves.Advance`: one per key of every batch the ordering gate settles.)"""

    applied_seq: int = 0
    progressed_at: datetime | None = None
    held_seq: int | None = None
    held_dlq_id: int | None = None
    hold_reason: str | None = None
    held_at: datetime | None = None

    @property
    def held(self) -> bool:
        return self.held_seq is not None


#: The state of a key that has no `order_applied` row yet.
UNSEEN = KeyState()


_STATES = """
SELECT k.provider, k.order_key, a.applied_seq, a.progressed_at, a.held_seq, a.held_dlq_id,
       a.hold_reason, a.held_at
FROM unnest($1::text[], $2::text[]) AS k(provider, order_key)
JOIN order_applied a USING (provider, order_key)
"""


async def states(conn: Conn, keys: Sequence[Key]) -> dict[Key, KeyState]:
    """Each key's state (one statement); keys never applied come back as `UNSEEN`."""
    found: dict[Key, KeyState] = {key: UNSEEN for key in keys}
    if not keys:
        return found
    with translate_errors():
        rows = await conn.fetch(_STATES, [k[0] for k in keys], [k[1] for k in keys])
    for r in rows:
        found[(r["provider"], r["order_key"])] = KeyState(
            int(r["applied_seq"]),
            r["progressed_at"],
            None if r["held_seq"] is None else int(r["held_seq"]),
            None if r["held_dlq_id"] is None else int(r["held_dlq_id"]),
            r["hold_reason"],
            r["held_at"],
        )
    return found


class KeyPosition(NamedTuple):
    """What the settlement gate plans by (`gateway.core.ordering.gate.Position`)."""

    applied_seq: int
    progressed_s: float | None  # when applied_seq last moved, seconds since the epoch
    held_seq: int | None


# Only what the gate plans by, read for every batch the gate settles: the keys go as one
# JSON document and each comes back by its place in it (an integer to decode instead of
# two strings), its last move as epoch seconds (a float to decode instead of a
# timestamp). Two text arrays of a batch's keys cost the worker 1.7 us a key to encode
# and decode against 0.7 for this; the database spends the microsecond instead.
_POSITIONS = """
SELECT k.i, a.applied_seq, extract(epoch FROM a.progressed_at)::float8, a.held_seq
FROM json_array_elements($1::json) WITH ORDINALITY AS k(key, i)
JOIN order_applied a ON a.provider = k.key->>0 AND a.order_key = k.key->>1
"""


async def positions(conn: Conn, keys: Sequence[Key]) -> dict[Key, KeyPosition]:
    """The position of each key that has one (one statement); a key missing from the
    answer was never applied (at 0, not held)."""
    if not keys:
        return {}
    with translate_errors():
        rows = await conn.fetch(_POSITIONS, orjson.dumps(keys).decode())
    return {keys[r[0] - 1]: KeyPosition(r[1], r[2], r[3]) for r in rows}


# A key moved past a number without settling its event in two ways: a deferral (a
# refund before its capture), and a skip (an operator's release, `on_poison = "skip"`).
# Either event may still come (its own retry, a replayed row republished), and it must
# then be settled, not taken for a repeat of something applied.
_STILL_OWED = """
SELECT l.provider, l.order_key, l.key_seq
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(provider, order_key, key_seq)
JOIN order_log l USING (provider, order_key, key_seq)
WHERE l.outcome IN ('deferred', 'skipped') AND l.resolution IS NULL
"""


async def still_owed(conn: Conn, items: Sequence[KeySeq]) -> set[KeySeq]:
    """Which of these (provider, key, seq), at or below their key's position, were moved
    past without being settled (deferred or skipped) and are still to be settled."""
    if not items:
        return set()
    with translate_errors():
        rows = await conn.fetch(
            _STILL_OWED, [i[0] for i in items], [i[1] for i in items], [i[2] for i in items]
        )
    return {(r["provider"], r["order_key"], int(r["key_seq"])) for r in rows}


# The first parked event of a key holds it; one parked below an existing hold (its own
# predecessor, parked later) takes the hold over, so the key waits for the earliest.
# A key already past `seq` is not held: the event no longer stands in its way.
_HOLD = """
INSERT INTO order_applied AS a (provider, order_key, applied_seq, held_seq, held_dlq_id,
                                hold_reason, held_at)
VALUES ($1, $2, 0, $3, $4, $5, now())
ON CONFLICT (provider, order_key) DO UPDATE
SET held_seq = EXCLUDED.held_seq, held_dlq_id = EXCLUDED.held_dlq_id,
    hold_reason = EXCLUDED.hold_reason, held_at = now()
WHERE a.applied_seq < EXCLUDED.held_seq
  AND (a.held_seq IS NULL OR a.held_seq > EXCLUDED.held_seq)
"""


async def hold(
    conn: Conn, provider: str, order_key: str, seq: int, dlq_id: int | None, reason: str
) -> None:
    """Hold the key at `seq` (its dead letter `dlq_id`, `reason` an error class)."""
    with translate_errors():
        await conn.execute(_HOLD, provider, order_key, seq, dlq_id, reason)


_RESOLVE_DEFERRAL = """
UPDATE order_log SET resolution = $4, resolved_at = now()
WHERE provider = $1 AND order_key = $2 AND key_seq = $3
  AND outcome IN ('deferred', 'skipped')
  AND (resolution IS NULL OR (resolution = 'parked' AND $4 = 'settled'))
"""


async def resolve_deferral(
    conn: Conn, provider: str, order_key: str, seq: int, resolution: str
) -> None:
    """Close a number still owed (`still_owed`): 'settled' (it settled after all) or
    'parked'."""
    with translate_errors():
        await conn.execute(_RESOLVE_DEFERRAL, provider, order_key, seq, resolution)


# An operator's release: every position from applied_seq + 1 up to the hold is logged
# as skipped with the operator and the note (a gap hold skips the missing ones too), and
# the key moves to the hold and is released, all in one statement on the locked row.
_RELEASE = """
WITH cur AS (
    SELECT provider, order_key, applied_seq, held_seq FROM order_applied
    WHERE provider = $1 AND order_key = $2 AND held_seq IS NOT NULL
    FOR UPDATE
), moved AS (
    UPDATE order_applied a
    SET applied_seq = greatest(a.applied_seq, c.held_seq),
        progressed_at = now(),
        held_seq = NULL, held_dlq_id = NULL, hold_reason = NULL, held_at = NULL
    FROM cur c WHERE a.provider = c.provider AND a.order_key = c.order_key
    RETURNING c.applied_seq AS from_seq, c.held_seq
), logged AS (
    INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id, actor, note)
    SELECT $1, $2, n, 'skipped', NULL, $3, $4
    FROM moved, generate_series(moved.from_seq + 1, moved.held_seq) AS n
    ORDER BY n
    RETURNING key_seq
)
SELECT (SELECT held_seq FROM moved) AS held_seq, (SELECT count(*) FROM logged) AS skipped
"""


async def release(conn: Conn, provider: str, order_key: str, actor: str, note: str) -> int | None:
    """An operator's release of a held key: the held position it moved to (every
    position up to it logged 'skipped' with `actor` and `note`), or None if not held."""
    with translate_errors():
        row = await conn.fetchrow(_RELEASE, provider, order_key, actor, note)
    if row is None or row["held_seq"] is None:
        return None
    return int(row["held_seq"])


# A dead letter's place in its key: its own columns, else its event's row (a row parked
# before it was numbered, or by a stage that does not know the number).
_PLACE_OF = """
SELECT coalesce(d.order_key, pw.order_key) AS order_key,
       coalesce(d.key_seq, pw.key_seq) AS key_seq
FROM dlq_webhooks d
LEFT JOIN processed_webhooks pw ON pw.provider = d.provider AND pw.event_id = d.event_id
WHERE d.id = $1
"""


async def place_of(conn: Conn, dlq_id: int) -> tuple[str, int] | None:
    """The (order_key, key_seq) of a dead letter's event; None: it is not ordered."""
    with translate_errors():
        row = await conn.fetchrow(_PLACE_OF, dlq_id)
    if row is None or row["order_key"] is None or row["key_seq"] is None:
        return None
    return str(row["order_key"]), int(row["key_seq"])
