"""Scheduled backfill inside `gateway serve`: every `[providers.X.backfill] interval_s`,
a pass over the trailing `window_s` for each provider that has one.

Every process tries; per provider, a PostgreSQL advisory lock lets one of them work and
the others skip, and a pass is skipped when another process completed this interval's
already (`pass_due`), so `--workers N` and several machines need no set-up and run one
pass per interval between them. A pass that dies (the process is killed) is continued
from its cursor by the next one (`backfill.run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import backfill as progress
from gateway.backfill.run import BackfillParts, BackfillReport, backfill
from gateway.core.backfill.decisions import keep_completed_s, trailing_window
from gateway.errors import GatewayError
from gateway.settings import ProviderSettings
from gateway.settings.provider_api import BackfillSchedule

log = logging.getLogger(__name__)

#: The first pass waits this long (at most) after start-up, away from the start's load.
FIRST_PASS_DELAY_S = 10.0

#: Opens one pass's parts for a provider (the composition root's `scheduled_parts`).
OpenParts = Callable[[str], AbstractAsyncContextManager[BackfillParts]]


def scheduled(providers: Mapping[str, ProviderSettings]) -> dict[str, BackfillSchedule]:
    """The providers with a `[providers.X.backfill]` schedule, by name."""
    return {
        name: p.api.schedule
        for name, p in sorted(providers.items())
        if p.api is not None and p.api.schedule is not None
    }


class ScheduledBackfill:
    """One loop per scheduled provider; started and closed by the composition root."""

    def __init__(
        self,
        pool: Pool,
        schedules: dict[str, BackfillSchedule],
        open_parts: OpenParts,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._pool = pool
        self._schedules = schedules
        self._open_parts = open_parts
        self._clock = clock
        self._tasks: list[asyncio.Task[None]] = []

    async def once(self, name: str) -> BackfillReport | None:
        """One pass for `name` over its trailing window; None when skipped (another
        process holds the lock, or already ran this interval's pass)."""
        schedule = self._schedules[name]
        async with connection(self._pool) as conn:
            if not await progress.try_lock(conn, name):
                log.debug(
                    "backfill pass skipped: another process runs it", extra={"provider": name}
                )
                return None
            try:
                if not await progress.pass_due(conn, name, 0.9 * schedule.interval_s):
                    return None
                window = trailing_window(self._clock(), schedule.window_s)
                async with self._open_parts(name) as parts:
                    report = await backfill(parts, window, session=conn)
                # Each pass adds a row; without this the table grows by one an interval.
                pruned = await progress.prune_completed(
                    conn, name, keep_completed_s(schedule.interval_s)
                )
            finally:
                with contextlib.suppress(GatewayError):  # a lost session has let go already
                    await progress.unlock(conn, name)
        t = report.tally
        level = logging.WARNING if t.recovered else logging.INFO
        log.log(
            level,
            "scheduled backfill recovered events that never arrived"
            if t.recovered
            else "scheduled backfill pass done",
            extra={
                "provider": name,
                **t.to_json(),
                "unpublished": report.unpublished,
                "stopped": report.stopped,
                "skipped_pages": len(report.skipped),
                "pruned_progress_rows": pruned,
            },
        )
        return report

    async def _loop(self, name: str) -> None:
        """Until cancelled; a failed pass is logged and tried again next interval."""
        interval_s = self._schedules[name].interval_s
        await asyncio.sleep(min(interval_s, FIRST_PASS_DELAY_S))
        while True:
            try:
                await self.once(name)
            except GatewayError as exc:
                log.warning(
                    "scheduled backfill pass failed", extra={"provider": name, "error": repr(exc)}
                )
            except Exception:
                log.exception("scheduled backfill pass failed unexpectedly")
            await asyncio.sleep(interval_s)

    def start(self) -> None:
        for name in self._schedules:
            self._tasks.append(asyncio.create_task(self._loop(name), name=f"backfill-{name}"))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
