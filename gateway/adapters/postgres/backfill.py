"""`backfill_progress`: how far a backfill of one window got, so a killed run continues
from its cursor, and how many passes in a row failed on its next page (sql/011), so a
page that keeps failing is skipped; and which fetched event ids are already recorded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.backfill.decisions import PageState, Tally, Window

# Unfinished runs of the same provider and type filter that reach back at least as far
# as the new one (and started before the new one's since is out of them), newest first:
# the candidates to continue rather than start over (`Claims.continue_unfinished`).
_UNFINISHED = """
SELECT since, until, cursor, pages, fetched, present, recovered, failed
FROM backfill_progress
WHERE provider = $1 AND types = $2 AND completed_at IS NULL AND skipped_at IS NULL
  AND since <= $3 AND until > $3
ORDER BY updated_at DESC
LIMIT 20
"""

# The row again once the continuing run holds it: its run may have completed or been
# skipped, or moved its cursor, since `_UNFINISHED` read it.
_HELD_UNFINISHED = """
SELECT cursor, pages, fetched, present, recovered, failed
FROM backfill_progress
WHERE provider = $1 AND since = $2 AND until = $3 AND types = $4
  AND completed_at IS NULL AND skipped_at IS NULL
"""

# A run asked for again with exactly a skipped run's window (an operator's) starts its
# failing page afresh.
_START = """
INSERT INTO backfill_progress (provider, since, until, types)
VALUES ($1, $2, $3, $4)
ON CONFLICT (provider, since, until, types) DO UPDATE SET updated_at = now(),
    failed_passes = CASE WHEN backfill_progress.skipped_at IS NULL
                         THEN backfill_progress.failed_passes ELSE 0 END,
    skipped_at = NULL
RETURNING cursor, pages, fetched, present, recovered, failed, completed_at
"""

_SAVE = """
UPDATE backfill_progress
SET cursor = $5, pages = pages + 1, fetched = fetched + $6, present = present + $7,
    recovered = recovered + $8, failed = failed + $9, updated_at = now(),
    completed_at = CASE WHEN $10 THEN now() ELSE NULL END,
    failed_passes = 0, last_error = NULL
WHERE provider = $1 AND since = $2 AND until = $3 AND types = $4
"""

_PAGE_FAILED = """
UPDATE backfill_progress
SET failed_passes = failed_passes + 1, last_error = $5, updated_at = now(),
    skipped_at = CASE WHEN failed_passes + 1 >= $6 THEN now() END
WHERE provider = $1 AND since = $2 AND until = $3 AND types = $4
RETURNING failed_passes
"""


@dataclass(frozen=True)
class Resumed:
    """An unfinished run found for the same provider and filter."""

    window: Window
    state: PageState


#: `pg_advisory_lock*(key, hashtext(window))` class of the progress rows live runs are
#: advancing ("gwbr"): held by each run's session, so it goes with a run that dies.
RUN_LOCK_CLASS = 0x67776272

#: PostgreSQL's two-key advisory lock functions this module uses, each on (class,
#: hashtext(key)); a void one answers None.
_ADVISORY = {
    name: f"SELECT {name}($1::int, hashtext($2))"
    for name in (
        "pg_try_advisory_lock",
        "pg_advisory_lock_shared",
        "pg_advisory_unlock",
        "pg_advisory_unlock_shared",
    )
}


async def _advisory(conn: Conn, function: str, lock_class: int, key: str) -> bool:
    """Call one of `_ADVISORY` (inside the caller's `translate_errors`)."""
    return bool(await conn.fetchval(_ADVISORY[function], lock_class, key))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _run_key(provider: str, window: Window) -> str:
    # Whole microseconds since the epoch, not isoformat: a row read back carries UTC, a
    # window an operator gave may carry another offset for the same instant.
    since_us = (window.since - _EPOCH) // _US
    until_us = (window.until - _EPOCH) // _US
    return f"{provider} {since_us} {until_us} {window.types_key}"


class Claims:
    """The progress rows one live run is advancing, locked on a session it holds for the
    pass, so that a run at the same moment does not take a live run's row for one that
    died and continue it from its cursor (it reads its own window; the gate keeps the
    two apart).

    A live run holds its rows shared: two runs of the very same window both do. A run
    that would continue a row must hold it alone, for a moment, so it continues only a
    row no live run holds. A hash that collides only makes a dead row look live: the
    next run reads its own window whole instead of continuing, which is safe.
    """

    def __init__(self, conn: Conn, provider: str) -> None:
        self._conn, self._provider = conn, provider
        self._held: list[str] = []

    async def take(self, window: Window) -> None:
        """Hold `window`'s row for this run (waiting, if at all, for a continuing run's
        moment alone with it)."""
        key = _run_key(self._provider, window)
        with translate_errors():
            await _advisory(self._conn, "pg_advisory_lock_shared", RUN_LOCK_CLASS, key)
        self._held.append(key)

    async def continue_unfinished(self, window: Window) -> Resumed | None:
        """The unfinished run this one should continue, now held by this run: the newest
        of `_UNFINISHED` that no live run holds and that is still unfinished once held."""
        with translate_errors():
            rows = await self._conn.fetch(
                _UNFINISHED, self._provider, window.types_key, window.since
            )
            for listed in rows:
                old = Window(listed["since"], listed["until"], window.types)
                key = _run_key(self._provider, old)
                if not await _advisory(self._conn, "pg_try_advisory_lock", RUN_LOCK_CLASS, key):
                    continue  # a live run is advancing it
                try:
                    row = await self._conn.fetchrow(
                        _HELD_UNFINISHED, self._provider, old.since, old.until, old.types_key
                    )
                    if row is not None:
                        await _advisory(self._conn, "pg_advisory_lock_shared", RUN_LOCK_CLASS, key)
                        self._held.append(key)
                        return Resumed(old, _page_state(row))
                finally:
                    await _advisory(self._conn, "pg_advisory_unlock", RUN_LOCK_CLASS, key)
        return None

    async def release(self) -> None:
        """Let go of every row this run held. Only after a pass that ended well: one
        that failed leaves it to its session, reset as it goes back to the pool
        (`pg_advisory_unlock_all`) or gone with its connection, so a server that
        stopped answering is not asked once more per row."""
        with translate_errors():
            for key in self._held:
                await _advisory(self._conn, "pg_advisory_unlock_shared", RUN_LOCK_CLASS, key)
        self._held.clear()


def _page_state(row: Any, *, done: bool = False) -> PageState:
    tally = Tally(
        fetched=row["fetched"],
        present=row["present"],
        recovered=row["recovered"],
        failed=row["failed"],
    )
    return PageState(row["cursor"], row["pages"], tally, done=done)


async def start(conn: Conn, provider: str, window: Window) -> PageState:
    """The window's progress row, made if new; its cursor and counts so far."""
    with translate_errors():
        row = await conn.fetchrow(_START, provider, window.since, window.until, window.types_key)
    if row is None:  # an upsert's RETURNING always gives the row
        raise RuntimeError("backfill_progress upsert returned no row")
    return _page_state(row, done=row["completed_at"] is not None)


async def save(
    conn: Conn, provider: str, window: Window, cursor: str | None, page: Tally, done: bool
) -> None:
    """Record one finished page: the cursor of the next one and the page's counts."""
    with translate_errors():
        await conn.execute(
            _SAVE,
            provider,
            window.since,
            window.until,
            window.types_key,
            cursor,
            page.fetched,
            page.present,
            page.recovered,
            page.failed,
            done,
        )


async def page_failed(conn: Conn, provider: str, window: Window, error: str, attempts: int) -> int:
    """Count a pass that failed on the window's next page, and skip the row once
    `attempts` passes in a row did; the count so far (0: no such row)."""
    with translate_errors():
        count = await conn.fetchval(
            _PAGE_FAILED,
            provider,
            window.since,
            window.until,
            window.types_key,
            error[:1000],
            attempts,
        )
    return int(count or 0)


async def skipped_by_provider(conn: Conn, now: datetime, within_s: float) -> dict[str, int]:
    """Progress rows skipped in the `within_s` before `now`, by provider; every provider
    with a skipped row still kept is listed (0 when none is that recent)."""
    with translate_errors():
        rows = await conn.fetch(
            "SELECT provider, count(*) FILTER ("
            " WHERE skipped_at > $1::timestamptz - make_interval(secs => $2)) AS n "
            "FROM backfill_progress WHERE skipped_at IS NOT NULL GROUP BY provider",
            now,
            within_s,
        )
    return {r["provider"]: int(r["n"]) for r in rows}


async def recorded_ids(conn: Conn, provider: str, event_ids: Sequence[str]) -> set[str]:
    """Which of these event ids the provider already has a row for."""
    event_ids = [e for e in event_ids if e]  # "" (a GitHub id not yet known) is no row
    if not event_ids:
        return set()
    with translate_errors():
        rows = await conn.fetch(
            "SELECT event_id FROM processed_webhooks WHERE provider = $1 AND event_id = ANY($2)",
            provider,
            list(event_ids),
        )
    return {r["event_id"] for r in rows}


async def prune_completed(conn: Conn, provider: str, older_than_s: float) -> int:
    """Delete the provider's completed (or skipped) progress rows that completed more
    than `older_than_s` ago (on the database's clock); how many. Unfinished rows stay:
    they are the cursors a later run continues from."""
    with translate_errors():
        status = await conn.execute(
            "DELETE FROM backfill_progress WHERE provider = $1 "
            "AND coalesce(completed_at, skipped_at) < now() - make_interval(secs => $2)",
            provider,
            older_than_s,
        )
    return int(status.rsplit(" ", 1)[-1])  # "DELETE n"


#: `pg_try_advisory_lock(key, hashtext(provider))` class of scheduled backfill passes: one
#: process at a time per provider ("gwbf").
SCHEDULE_LOCK_CLASS = 0x67776266


async def try_lock(conn: Conn, provider: str) -> bool:
    """Take this provider's scheduled-pass lock for the session, if no one holds it."""
    with translate_errors():
        return await _advisory(conn, "pg_try_advisory_lock", SCHEDULE_LOCK_CLASS, provider)


async def unlock(conn: Conn, provider: str) -> None:
    with translate_errors():
        await _advisory(conn, "pg_advisory_unlock", SCHEDULE_LOCK_CLASS, provider)


async def pass_due(conn: Conn, provider: str, interval_s: float) -> bool:
    """True unless a pass of this provider whose window ended within the last
    `interval_s` (on the database's clock) completed: then another process ran this
    interval's pass, and running it again would only find every event present."""
    with translate_errors():
        recent = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM backfill_progress WHERE provider = $1 "
            "AND completed_at IS NOT NULL AND until > now() - make_interval(secs => $2))",
            provider,
            interval_s,
        )
    return not recent
