"""How a key moves in `order_applied` (sql/014_ordering.sql): from n - 1 to n only
under the lock of its row, by a compare-and-set on `applied_seq` with its `order_log` row
written in the same statement, so two workers holding copies of one event cannot both
move it: the second waits for the first, then finds the key past it and changes
nothing. Callers run `advance` (or the settlement gate's `apply_turns`) in the
transaction that marks the settlements settled. The keys' state and holds are
`ordering`.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import orjson

from gateway.adapters.postgres import Conn, translate_errors
from gateway.errors import DatabaseError, DatabaseUnavailable

__all__ = ["Advance", "Turn", "advance", "apply_turns", "runs"]

#: (provider, order_key)
Key = tuple[str, str]
#: (provider, order_key, key_seq)
KeySeq = tuple[str, str, int]


class Advance(NamedTuple):
    """Move a key to `key_seq` with this `order_log` outcome ('applied', 'deferred',
    'skipped'); `actor` and `note` for an operator's skip."""

    provider: str
    order_key: str
    key_seq: int
    outcome: str
    event_id: str | None
    actor: str | None = None
    note: str | None = None


def _moved_to(seq: str) -> str:
    """The SET list of an `order_applied a` row moved to `seq` (an SQL expression): a
    hold at or below it is released with it."""
    held = f"a.held_seq <= {seq}"
    return (
        f"applied_seq = {seq}, progressed_at = now(),"
        f" held_seq = CASE WHEN {held} THEN NULL ELSE a.held_seq END,"
        f" held_dlq_id = CASE WHEN {held} THEN NULL ELSE a.held_dlq_id END,"
        f" hold_reason = CASE WHEN {held} THEN NULL ELSE a.hold_reason END,"
        f" held_at = CASE WHEN {held} THEN NULL ELSE a.held_at END"
    )


# Two statements for a batch of steps, in the caller's transaction.
#
# 1. `_LOCK`: each key's applied_seq, its row locked until commit. A key without a row
#    gets one (at 0), which its inserting transaction holds locked likewise. Existing
#    rows are taken in key order, then new ones, so two workers locking overlapping keys
#    rarely wait on each other crosswise; when they do (a key created meanwhile, asked
#    again below), PostgreSQL ends one with a deadlock error, a transient failure its
#    events are retried for. A key whose row another transaction is inserting at the
#    same moment is missing from the answer (the insert waited for it and did nothing):
#    it is asked again, and a key still missing fails the transaction.
# 2. `_MOVE`: with every key locked, the runs that continue each key (worked out here)
#    move it and are logged, in one statement of flat arrays (no join the planner could
#    misjudge: one with the log as a nested loop cost 70 ms for 512 keys). The
#    compare-and-set in its WHERE cannot fail under the lock; a count that disagrees
#    means a bug, and the transaction is rolled back.
_LOCK = """
WITH k AS (
    SELECT DISTINCT provider, order_key
    FROM unnest($1::text[], $2::text[]) AS k(provider, order_key)
), locked AS (
    SELECT a.provider, a.order_key, a.applied_seq
    FROM order_applied a JOIN k USING (provider, order_key)
    ORDER BY a.provider, a.order_key
    FOR UPDATE OF a
), created AS (
    INSERT INTO order_applied (provider, order_key)
    SELECT provider, order_key FROM k
    WHERE NOT EXISTS (SELECT 1 FROM locked l
                      WHERE l.provider = k.provider AND l.order_key = k.order_key)
    ORDER BY provider, order_key
    ON CONFLICT (provider, order_key) DO NOTHING
    RETURNING provider, order_key, applied_seq
)
SELECT provider, order_key, applied_seq FROM locked
UNION ALL
SELECT provider, order_key, applied_seq FROM created
"""

_MOVE = f"""
WITH moved AS (
    UPDATE order_applied a
    SET {_moved_to("t.to_seq")}
    FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
         AS t(provider, order_key, from_seq, to_seq)
    WHERE a.provider = t.provider AND a.order_key = t.order_key
      AND a.applied_seq = t.from_seq
    RETURNING 1
), logged AS (
    INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id, actor, note)
    SELECT * FROM unnest($5::text[], $6::text[], $7::bigint[], $8::text[], $9::text[],
                         $10::text[], $11::text[])
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM logged) AS logged
"""  # noqa: S608 - only constants are interpolated


def runs(steps: Sequence[Advance], applied: dict[Key, int]) -> list[Advance]:
    """The steps that continue their key from `applied` without a gap, per key in seq
    order (a repeat of a seq counts once; a key not in `applied` moves nothing)."""
    by_key: dict[Key, dict[int, Advance]] = {}
    for step in steps:
        by_key.setdefault((step.provider, step.order_key), {}).setdefault(step.key_seq, step)
    chosen: list[Advance] = []
    for key in sorted(by_key):
        if key not in applied:
            continue
        seqs = by_key[key]
        n = applied[key] + 1
        while n in seqs:
            chosen.append(seqs[n])
            n += 1
    return chosen


async def _locked(conn: Conn, keys: Sequence[Key]) -> dict[Key, int]:
    applied: dict[Key, int] = {}
    missing = list(keys)
    for _ in range(3):  # a key being created by another transaction: locked next time
        rows = await conn.fetch(_LOCK, [k[0] for k in missing], [k[1] for k in missing])
        applied.update({(r["provider"], r["order_key"]): int(r["applied_seq"]) for r in rows})
        missing = [k for k in missing if k not in applied]
        if not missing:
            return applied
    # Never settle a turn without moving its key: the caller's transaction (the one
    # marking the settlements settled) rolls back, and the events are retried.
    raise DatabaseUnavailable(f"{len(missing)} ordering key(s) could not be locked")


# The common case in one statement: each key's one step continues it (a round of the
# settlement gate moves every key by its next number). The compare-and-set is the
# UPDATE's own WHERE, checked again on the newest version of a row another transaction
# was moving (so a second copy of an event moves nothing), and the log rows come from
# the rows it moved (no join). A key's first number creates its row. What neither
# moved (a step after a gap or at or below the position, a key being created by
# another transaction at the same moment) is left to `_LOCK` and `_MOVE`.
def _step(steps: str) -> str:
    """The statement moving each key by the step `steps` (a query of the columns of
    `Advance`, in its order) gives it."""
    return f"""
WITH t AS (
    {steps}
), moved AS (
    UPDATE order_applied a
    SET {_moved_to("t.key_seq")}
    FROM t
    WHERE a.provider = t.provider AND a.order_key = t.order_key
      AND a.applied_seq = t.key_seq - 1
    RETURNING t.*
), created AS (
    INSERT INTO order_applied AS a (provider, order_key, applied_seq)
    SELECT provider, order_key, 1 FROM t
    WHERE key_seq = 1
      AND NOT EXISTS (SELECT 1 FROM moved m
                      WHERE m.provider = t.provider AND m.order_key = t.order_key)
    ORDER BY provider, order_key
    ON CONFLICT (provider, order_key) DO NOTHING
    RETURNING provider, order_key
), logged AS (
    INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id, actor, note)
    SELECT * FROM moved
    UNION ALL
    SELECT t.* FROM t JOIN created c USING (provider, order_key)
    RETURNING provider, order_key, key_seq
)
SELECT t.provider, t.order_key, t.key_seq FROM t
WHERE NOT EXISTS (SELECT 1 FROM logged l WHERE l.provider = t.provider
                  AND l.order_key = t.order_key AND l.key_seq = t.key_seq)
"""  # noqa: S608 - only constants are interpolated


_STEP = _step(
    """SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[],
                         $6::text[], $7::text[])
        AS t(provider, order_key, key_seq, outcome, event_id, actor, note)"""
)
# The settlement gate's turns, once per round: applied, with no actor or note, so only
# the provider, key, number and event id of each go, as one JSON document of arrays
# (text arrays cost the worker about 0.25 us an element to encode: 1.8 us a turn in
# four of them, 0.8 as JSON; the database spends the difference instead).
_APPLY = _step(
    """SELECT t.turn->>0 AS provider, t.turn->>1 AS order_key, (t.turn->>2)::bigint AS key_seq,
           'applied'::text AS outcome, t.turn->>3 AS event_id,
           NULL::text AS actor, NULL::text AS note
    FROM json_array_elements($1::json) AS t(turn)"""
)

#: A turn of the settlement gate (`apply_turns`): provider, key, number, event id.
Turn = tuple[str, str, int, str | None]


def _columns(steps: Sequence[Advance]) -> list[list[Any]]:
    """Non-empty steps as the seven arrays the statements take, in `Advance`'s order."""
    return [list(column) for column in zip(*steps, strict=True)]


async def _step_each(conn: Conn, steps: Sequence[Advance]) -> set[KeySeq]:
    """`_STEP` for steps of distinct keys: the (provider, key, seq) it did not move
    (mostly none, so next to nothing comes back). Sent in key order, which the planner
    mostly keeps (a nested loop over the steps); where two workers still lock shared
    keys crosswise, PostgreSQL ends one with a deadlock error, a transient failure its
    events are retried for, as with `_LOCK`."""
    steps = sorted(steps, key=lambda s: (s.provider, s.order_key))
    rows = await conn.fetch(_STEP, *_columns(steps))
    return {(r[0], r[1], int(r[2])) for r in rows}


async def apply_turns(conn: Conn, turns: Sequence[Turn]) -> None:
    """`advance` for the settlement gate's turns, in the transaction that marks their
    settlements settled: each key (all distinct) moved to its number, logged as
    'applied' with its event id. A step that does not continue its key moves nothing,
    as with `advance`. Sent in key order, as `_step_each` sends its steps."""
    ordered = sorted(turns, key=itemgetter(0, 1, 2))  # by provider, key and number
    with translate_errors():
        rows = await conn.fetch(_APPLY, orjson.dumps(ordered).decode())
        if rows:  # a key being created by another transaction, or a step after a gap
            not_moved = {(r[0], r[1], int(r[2])) for r in rows}
            rest = [
                Advance(p, k, n, "applied", e) for p, k, n, e in ordered if (p, k, n) in not_moved
            ]
            await _advance_runs(conn, rest)


async def advance(conn: Conn, steps: Sequence[Advance]) -> set[KeySeq]:
    """Move each key through its steps that continue it from where it is; the
    (provider, key, seq) that moved. A step at or below the key's position, or after
    a gap, moves nothing: a second copy of an event changes nothing. The keys stay
    locked until the caller's transaction ends (outside one, it runs in its own)."""
    if not steps:
        return set()
    if not conn.is_in_transaction():  # the lock must last from the first to the second
        with translate_errors():
            async with conn.transaction():
                return await advance(conn, steps)
    moved: set[KeySeq] = set()
    if len({(s.provider, s.order_key) for s in steps}) == len(steps):
        with translate_errors():
            not_moved = await _step_each(conn, steps)
        moved = {(s.provider, s.order_key, s.key_seq) for s in steps}
        if not not_moved:
            return moved
        moved -= not_moved
        steps = [s for s in steps if (s.provider, s.order_key, s.key_seq) in not_moved]
    return moved | await _advance_runs(conn, steps)


async def _advance_runs(conn: Conn, steps: Sequence[Advance]) -> set[KeySeq]:
    """`advance` by `_LOCK` and `_MOVE`: any steps, several of a key included."""
    keys = sorted({(s.provider, s.order_key) for s in steps})
    with translate_errors():
        applied = await _locked(conn, keys)
        chosen = runs(steps, applied)
        if not chosen:
            return set()
        last: dict[Key, int] = {}
        for s in chosen:
            last[(s.provider, s.order_key)] = s.key_seq
        row = await conn.fetchrow(
            _MOVE,
            [k[0] for k in last],
            [k[1] for k in last],
            [applied[k] for k in last],
            list(last.values()),
            *_columns(chosen),
        )
    if row is None or row["moved"] != len(last) or row["logged"] != len(chosen):
        raise DatabaseError("a locked ordering key moved under its lock", None)
    return {(s.provider, s.order_key, s.key_seq) for s in chosen}
