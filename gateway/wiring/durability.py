"""The database durability check of `gateway serve`, `relay` and `settle`: once at
start-up, then every `CHECK_INTERVAL_S`, into the log, `/readyz` and the metrics.

What each process does with a reading (`gateway.core.health.durability` decides the state):

1. At start-up, once the pool is open, one reading. Anything but `synchronous` is one
   warning line (state and reason, never the URL). With `[database]
   require_synchronous_standby = true` it is instead a refusal to start
   (`DatabaseNotDurable`, exit 2 with one line naming the setting), for every state
   the database answered with: `at_risk` (a failover can lose acknowledged events),
   `waiting_for_standby` (a process started now would answer 503 until a standby
   streams, so refusing costs nothing and says why) and `unknown` (the gateway cannot
   prove durability, e.g. its role lacks `pg_monitor`).
2. A database that does not answer at start-up stops nothing, required or not: the
   gateway starts while the database is down and answers 503 meanwhile, as it always
   has. The state is `unknown` until the periodic reading gets an answer, which is then
   logged like a start-up reading (the refusal aside: the process is already serving).
3. Every `CHECK_INTERVAL_S` a new reading updates the metric and `/readyz`, and a
   change of state is logged once: a warning on entering any state but `synchronous`,
   info on returning to it. A running process never stops over it, required or not:
   after a failover the new primary usually has no standby yet, and the gateway must go
   on taking events there; operators see it in the log, `/readyz` and the
   `GatewayDatabaseNotDurable` alert. Readings of an unreachable database set
   `unknown` but are not announced: the outage has its own log lines and `/readyz`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from gateway.adapters.postgres import Pool, open_pool
from gateway.adapters.postgres.durability import read_durability
from gateway.core.health.durability import (
    Durability,
    DurabilityReason,
    DurabilityState,
    announce,
    unreachable,
)
from gateway.errors import DatabaseNotDurable, DatabaseUnavailable, GatewayError
from gateway.metrics import Metrics
from gateway.settings import Settings

log = logging.getLogger(__name__)

#: How often a running process reads the database's durability again. A failover is
#: seen within this long; a reading is two small queries on one pooled connection.
CHECK_INTERVAL_S = 30.0
#: A reading that takes longer counts as no answer: a black-holed database must not hold
#: up start-up for the pool's whole connect and command timeouts (the next reading, one
#: interval later, tries again).
READ_TIMEOUT_S = 5.0

Read = Callable[[], Awaitable[Durability]]


class Probe(Protocol):
    """`/readyz`'s question to the database (`gateway.ingest.parts.Probe`)."""

    async def ping(self) -> bool: ...


class DurabilityWatcher:
    """The last reading of one process, and the task that keeps it current."""

    def __init__(
        self,
        read: Read,
        metrics: Metrics,
        *,
        required: bool = False,
        interval_s: float = CHECK_INTERVAL_S,
    ) -> None:
        self._read = read
        self._metrics = metrics
        self._required = required
        self.interval_s = interval_s
        #: What `/readyz` shows (its state and code): the latest reading, never a query
        #: of its own.
        self.last = Durability(DurabilityState.UNKNOWN, DurabilityReason.NOT_READ, "not read yet")
        self._announced: DurabilityState | None = None  # the state last logged
        self._task: asyncio.Task[None] | None = None

    async def check_at_start(self, *, quiet: bool = False) -> None:
        """The start-up reading; `DatabaseNotDurable` when it is required and not met.
        `quiet`: log nothing (a check before the process that will log it)."""
        reading = await self.read_once(announce_it=False)
        if quiet and (reading is None or reading.state is DurabilityState.SYNCHRONOUS):
            return
        if reading is None:
            log.info(
                "database durability not read: the database did not answer; read again "
                f"every {self.interval_s:g} s",
                extra={"state": str(self.last.state), "interval_s": self.interval_s},
            )
            return
        if self._required and reading.state is not DurabilityState.SYNCHRONOUS:
            # Refused before any warning: the refusal is the one line the operator reads.
            raise DatabaseNotDurable(str(reading.state), reading.reason)
        self._announce(reading)

    async def read_once(self, *, announce_it: bool = True) -> Durability | None:
        """Read, record and (on a change of state) log; None when the database did not
        answer. Never raises but for cancellation: the watcher must outlive any failure."""
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                reading = await self._read()
        except (DatabaseUnavailable, TimeoutError):
            self._record(unreachable(self.interval_s))
            return None
        except Exception as exc:  # a refusal (SQLSTATE) or a bug: unknown, and say so
            # Our errors' messages carry the SQLSTATE and never a URL; others, their type.
            what = str(exc) if isinstance(exc, GatewayError) else type(exc).__name__
            reading = Durability(
                DurabilityState.UNKNOWN,
                DurabilityReason.QUERY_FAILED,
                f"the durability query failed: {what}",
            )
            log.debug("durability query failed", exc_info=True)
        self._record(reading)
        if announce_it:
            self._announce(reading)
        return reading

    def _record(self, reading: Durability) -> None:
        self.last = reading
        for state in DurabilityState:
            self._metrics.database_durability.set(
                1.0 if state is reading.state else 0.0, state=str(state)
            )
        self._metrics.database_synchronous_standbys.set(float(reading.synchronous_standbys))

    def _announce(self, reading: Durability) -> None:
        line = announce(self._announced, reading)
        self._announced = reading.state
        if line is None:
            return
        # The reason gives the standby rule's shape, never its names (`decide`).
        extra = {
            "state": str(reading.state),
            "reason_code": str(reading.code),
            "reason": reading.reason,
            "synchronous_standbys": reading.synchronous_standbys,
            "required": self._required,
        }
        level = logging.INFO if line.level == "info" else logging.WARNING
        log.log(level, line.message, extra=extra)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="database-durability")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.read_once()

    async def close(self) -> None:
        """Stop the periodic reading and wait until it has ended.

        Waited for with `asyncio.wait`, not by awaiting the task: a cancellation of the
        caller (a shutdown cut short) then reaches the caller, instead of being taken for
        the task's own and swallowed. The task, already told to stop, ends on its own.
        """
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        task.add_done_callback(_report_end)
        await asyncio.wait([task])


def _report_end(task: asyncio.Task[None]) -> None:
    """The reading task ends by its cancellation; anything else is a bug, logged (not
    raised: `close` runs on the way out, where it would hide the error that caused it)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("database durability check ended by an error", exc_info=exc)


@contextlib.asynccontextmanager
async def watching_durability(
    pool: Pool,
    metrics: Metrics,
    settings: Settings,
    *,
    interval_s: float = CHECK_INTERVAL_S,
    read: Read | None = None,
) -> AsyncIterator[DurabilityWatcher]:
    """The start-up check (which may refuse), then the periodic one for the block."""

    async def read_pool() -> Durability:
        return await read_durability(pool)

    watcher = DurabilityWatcher(
        read or read_pool,
        metrics,
        required=settings.database.require_synchronous_standby,
        interval_s=interval_s,
    )
    await watcher.check_at_start()
    watcher.start()
    try:
        yield watcher
    finally:
        await watcher.close()


class DatabaseReadiness:
    """`/readyz`'s database probe, with the durability the watcher read last (a probe
    of `/readyz` runs no query of its own for it)."""

    def __init__(self, probe: Probe, watcher: DurabilityWatcher) -> None:
        self._probe = probe
        self._watcher = watcher

    async def ping(self) -> bool:
        return await self._probe.ping()

    def durability(self) -> Durability:
        return self._watcher.last


async def check_required_durability(settings: Settings) -> None:
    """`gateway serve` before it starts its server: with `require_synchronous_standby`,
    `DatabaseNotDurable` unless the database reads `synchronous`.

    The serving processes check again in their lifespan, but a refusal there ends in
    the server's start-up failure rather than one line and exit 2. Nothing is logged
    here (the serving process logs its own reading), and a database that does not
    answer is left to the serving process, as at any start-up.
    """
    if not settings.database.require_synchronous_standby:
        return
    async with open_pool(settings.database_url, max_size=1) as pool:
        watcher = DurabilityWatcher(lambda: read_durability(pool), Metrics(), required=True)
        await watcher.check_at_start(quiet=True)
