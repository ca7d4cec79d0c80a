"""Settlement's side of ordering: how far each key is applied (`order_applied`), its
hold, and the log of what was applied (`order_log`), from sql/014_ordering.sql.

A key moves from n - 1 to n only by a compare-and-set on `applied_seq`, with its
`order_log` row written by the same statement, so two workers holding copies of one
event cannot both move it: the second changes nothing. Callers run `advance` in the
transaction that marks the settlements settled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.adapters.postgres import Conn, translate_errors

__all__ = [
    "Advance",
    "KeyState",
    "advance",
    "hold",
    "open_deferrals",
    "place_of",
    "release",
    "resolve_deferral",
    "states",
]

#: (provider, order_key)
Key = tuple[str, str]
#: (provider, order_key, key_seq)
KeySeq = tuple[str, str, int]


@dataclass(frozen=True)
class KeyState:
    """A key's position and hold; a key without a row is at 0 and not held."""

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


@dataclass(frozen=True)
class Advance:
    """Move a key to `key_seq` with this `order_log` outcome ('applied', 'deferred',
    'skipped'); `actor` and `note` for an operator's skip."""

    provider: str
    order_key: str
    key_seq: int
    outcome: str
    event_id: str | None
    actor: str | None = None
    note: str | None = None


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


_OPEN_DEFERRALS = """
SELECT l.provider, l.order_key, l.key_seq
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(provider, order_key, key_seq)
JOIN order_log l USING (provider, order_key, key_seq)
WHERE l.outcome = 'deferred' AND l.resolution IS NULL
"""


async def open_deferrals(conn: Conn, items: Sequence[KeySeq]) -> set[KeySeq]:
    """Which of these (provider, key, seq) are deferrals still to be settled."""
    if not items:
        return set()
    with translate_errors():
        rows = await conn.fetch(
            _OPEN_DEFERRALS, [i[0] for i in items], [i[1] for i in items], [i[2] for i in items]
        )
    return {(r["provider"], r["order_key"], int(r["key_seq"])) for r in rows}


# One statement for a batch of steps:
#   1. `cur`: each key's applied_seq, its row locked (FOR UPDATE waits for a concurrent
#      mover and then reads what it committed); a key without a row is at 0.
#   2. `run`: per key, the steps after applied_seq in seq order that continue it without
#      a gap (seq - its rank = applied_seq), so n and n + 1 in one call both move.
#   3. `moved`: the compare-and-set. A new key's row is inserted; a key another
#      transaction created or moved meanwhile (the conflict waits for it to commit)
#      fails the WHERE and moves nothing. A hold
#      at or below the new position is released.
#   4. the log rows of the keys that moved, in seq order (ids follow commit order).
_ADVANCE = """
WITH s AS (
    SELECT DISTINCT ON (provider, order_key, key_seq) *
    FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[],
                $7::text[]) AS s(provider, order_key, key_seq, outcome, event_id, actor, note)
    ORDER BY provider, order_key, key_seq
), locked AS (
    -- In key order, so two workers locking overlapping keys cannot deadlock.
    SELECT a.provider, a.order_key, a.applied_seq FROM order_applied a
    WHERE (a.provider, a.order_key) IN (SELECT provider, order_key FROM s)
    ORDER BY a.provider, a.order_key
    FOR UPDATE
), cur AS (
    SELECT k.provider, k.order_key, coalesce(l.applied_seq, 0) AS applied_seq
    FROM (SELECT DISTINCT provider, order_key FROM s) k
    LEFT JOIN locked l USING (provider, order_key)
), ranked AS (
    SELECT s.*, c.applied_seq,
           s.key_seq - row_number() OVER (PARTITION BY s.provider, s.order_key
                                          ORDER BY s.key_seq) AS base
    FROM s JOIN cur c USING (provider, order_key)
    WHERE s.key_seq > c.applied_seq
), run AS (
    SELECT * FROM ranked WHERE base = applied_seq
), target AS (
    SELECT provider, order_key, min(applied_seq) AS from_seq, max(key_seq) AS to_seq
    FROM run GROUP BY provider, order_key
), moved AS (
    INSERT INTO order_applied AS a (provider, order_key, applied_seq, progressed_at)
    SELECT provider, order_key, to_seq, now() FROM target
    ON CONFLICT (provider, order_key) DO UPDATE
    SET applied_seq = EXCLUDED.applied_seq,
        progressed_at = now(),
        held_seq = CASE WHEN a.held_seq <= EXCLUDED.applied_seq THEN NULL ELSE a.held_seq END,
        held_dlq_id = CASE WHEN a.held_seq <= EXCLUDED.applied_seq THEN NULL
                           ELSE a.held_dlq_id END,
        hold_reason = CASE WHEN a.held_seq <= EXCLUDED.applied_seq THEN NULL
                           ELSE a.hold_reason END,
        held_at = CASE WHEN a.held_seq <= EXCLUDED.applied_seq THEN NULL ELSE a.held_at END
    WHERE a.applied_seq = (SELECT t.from_seq FROM target t
                           WHERE t.provider = a.provider AND t.order_key = a.order_key)
    RETURNING a.provider, a.order_key
), logged AS (
    INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id, actor, note)
    SELECT r.provider, r.order_key, r.key_seq, r.outcome, r.event_id, r.actor, r.note
    FROM run r JOIN moved m USING (provider, order_key)
    ORDER BY r.provider, r.order_key, r.key_seq
    RETURNING provider, order_key, key_seq
)
SELECT provider, order_key, key_seq FROM logged
"""


async def advance(conn: Conn, steps: Sequence[Advance]) -> set[KeySeq]:
    """Move each key through its steps that continue it from where it is (one
    statement); the (provider, key, seq) that moved. A step at or below the key's
    position, after a gap, or on a key another transaction moved meanwhile, moves
    nothing: a second copy of an event changes nothing."""
    if not steps:
        return set()
    with translate_errors():
        rows = await conn.fetch(
            _ADVANCE,
            [s.provider for s in steps],
            [s.order_key for s in steps],
            [s.key_seq for s in steps],
            [s.outcome for s in steps],
            [s.event_id for s in steps],
            [s.actor for s in steps],
            [s.note for s in steps],
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
  AND outcome = 'deferred' AND resolution IS NULL
"""


async def resolve_deferral(
    conn: Conn, provider: str, order_key: str, seq: int, resolution: str
) -> None:
    """Close an open deferral: 'settled' (it settled on its own retries) or 'parked'."""
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
