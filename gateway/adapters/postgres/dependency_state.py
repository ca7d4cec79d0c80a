"""The `dependency_state` and `settlement_retries` tables (sql/027): each dependency's
state as the worker processes last saw it, and the settlement events waiting for their
next delivery. Written by `gateway.dependency_watch`; the console's overview and the
in-process alerts read them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.health.dependencies import Dependency

# `since` moves only when the state changes; an observation older than the row's (two
# processes' writes crossing) changes nothing.
_WRITE_STATES = """
INSERT INTO dependency_state AS d (dependency, state, since, checked_at, checked_by, error_class)
SELECT s.dependency, s.state, s.at, s.at, $5, nullif(s.error_class, '')
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[])
     AS s (dependency, state, at, error_class)
ON CONFLICT (dependency) DO UPDATE
SET state = excluded.state,
    since = CASE WHEN d.state = excluded.state THEN d.since ELSE excluded.since END,
    checked_at = excluded.checked_at,
    checked_by = excluded.checked_by,
    error_class = CASE WHEN excluded.state = 'down' THEN excluded.error_class END
WHERE d.checked_at <= excluded.checked_at"""

_NOTE_RETRIES = """
INSERT INTO settlement_retries AS r
    (provider, event_id, error_class, dependency, deliveries, retry_at, noted_at, noted_by)
SELECT p, e, c, nullif(d, ''), n, at, $7, $8
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::timestamptz[])
     AS s (p, e, c, d, n, at)
ON CONFLICT (provider, event_id) DO UPDATE
SET error_class = excluded.error_class, dependency = excluded.dependency,
    deliveries = excluded.deliveries, retry_at = excluded.retry_at,
    noted_at = excluded.noted_at, noted_by = excluded.noted_by
WHERE r.deliveries <= excluded.deliveries"""

_FORGET_RETRIES = """
DELETE FROM settlement_retries r
USING unnest($1::text[], $2::text[]) AS s (p, e)
WHERE r.provider = s.p AND r.event_id = s.e"""


@dataclass(frozen=True)
class StateChange:
    """One observation to write: a dependency seen up or down at a time."""

    dependency: str
    state: str
    at: datetime
    error_class: str = ""


@dataclass(frozen=True)
class RetryNote:
    """A settlement event whose next delivery is scheduled."""

    provider: str
    event_id: str
    error_class: str
    dependency: str  # "" when its class blames no dependency
    deliveries: int
    retry_at: datetime


@dataclass(frozen=True)
class DependencyRow:
    dependency: str
    state: str
    since: datetime
    checked_at: datetime
    checked_by: str
    error_class: str | None


@dataclass(frozen=True)
class RetryCount:
    """Events in retry with one class (and the dependency it blames)."""

    error_class: str
    dependency: str | None
    events: int
    oldest_noted_at: datetime
    next_retry_at: datetime


async def write_states(conn: Conn, changes: Sequence[StateChange], by: str) -> None:
    if not changes:
        return
    with translate_errors():
        await conn.execute(
            _WRITE_STATES,
            [c.dependency for c in changes],
            [c.state for c in changes],
            [c.at for c in changes],
            [c.error_class for c in changes],
            by,
        )


async def note_retries(conn: Conn, notes: Sequence[RetryNote], now: datetime, by: str) -> None:
    if not notes:
        return
    notes = sorted(notes, key=lambda n: (n.provider, n.event_id))  # one lock order
    with translate_errors():
        await conn.execute(
            _NOTE_RETRIES,
            [n.provider for n in notes],
            [n.event_id for n in notes],
            [n.error_class for n in notes],
            [n.dependency for n in notes],
            [n.deliveries for n in notes],
            [n.retry_at for n in notes],
            now,
            by,
        )


async def forget_retries(conn: Conn, keys: Sequence[tuple[str, str]]) -> None:
    """The events settled or parked: no longer in retry."""
    if not keys:
        return
    keys = sorted(keys)
    with translate_errors():
        await conn.execute(_FORGET_RETRIES, [p for p, _ in keys], [e for _, e in keys])


async def prune_retries(conn: Conn, before: datetime) -> None:
    """Rows whose delivery was due before `before` and never came back (a stream purged,
    a message removed by hand): no longer anyone's retry."""
    with translate_errors():
        await conn.execute("DELETE FROM settlement_retries WHERE retry_at < $1", before)


async def dependency_states(conn: Conn) -> list[DependencyRow]:
    """The rows of the dependencies this gateway knows (`Dependency`), at most one each.

    Read every 10 s by each open overview and every evaluation by the alerts: a row of
    any other name (a newer gateway's, or written by hand) is neither shown nor alerted
    on, and however many there are, none is read.
    """
    with translate_errors():
        rows = await conn.fetch(
            "SELECT dependency, state, since, checked_at, checked_by, error_class "
            "FROM dependency_state WHERE dependency = ANY($1::text[]) ORDER BY dependency",
            [d.value for d in Dependency],
        )
    return [DependencyRow(**dict(r)) for r in rows]


async def retries_by_class(conn: Conn, due_after: datetime) -> list[RetryCount]:
    """Events in retry by class, counting only those due after `due_after` (an event
    whose delivery is long overdue is no longer being retried by anyone)."""
    with translate_errors():
        rows = await conn.fetch(
            "SELECT error_class, dependency, count(*) AS events, "
            "min(noted_at) AS oldest_noted_at, min(retry_at) AS next_retry_at "
            "FROM settlement_retries WHERE retry_at >= $1 "
            "GROUP BY error_class, dependency ORDER BY events DESC, error_class",
            due_after,
        )
    return [RetryCount(**dict(r)) for r in rows]
