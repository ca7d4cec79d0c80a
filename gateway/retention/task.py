"""Retention inside `gateway serve`: every `interval_s`, refresh the storage gauges and,
with `background = true`, run a pass. Every process tries; the advisory lock lets one of
them work and the others skip, so `--workers N` and several machines need no set-up."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import retention as store
from gateway.core.retention import DEAD_LETTERS, WEBHOOKS, RetentionReport, age_s
from gateway.errors import GatewayError
from gateway.metrics import Metrics
from gateway.retention.passes import RetentionPass
from gateway.settings import RetentionSettings

log = logging.getLogger(__name__)

#: The tables whose size is exported: the two retention works on, and the settlement
#: side's two largest.
MEASURED_TABLES = (WEBHOOKS, DEAD_LETTERS, "settlements", "ledger_transfers")
#: The first pass waits this long (at most) after start-up, away from the start's load.
FIRST_PASS_DELAY_S = 10.0


async def refresh_storage_gauges(pool: Pool, metrics: Metrics) -> None:
    """Rows and bytes per table, and the oldest kept payload's age: catalogue figures and
    one index look-up, cheap enough for every process to report."""
    async with connection(pool) as conn:
        sizes = await store.storage(conn, MEASURED_TABLES)
        oldest = await store.oldest_payload(conn)
        now = await store.database_now(conn)
    for table, rows, size in sizes:
        metrics.storage_rows.set(rows, table=table)
        metrics.storage_bytes.set(size, table=table)
    metrics.retention_oldest_payload_seconds.set(age_s(now, oldest))


def log_report(report: RetentionReport) -> None:
    if report.skipped:
        log.debug("retention pass skipped: another process holds the lock")
    elif any(n for by_what in report.removed.values() for n in by_what.values()):
        log.info("retention pass done", extra=report.to_json())


class RetentionTask:
    """The background loop; started and closed by the composition root."""

    def __init__(self, pool: Pool, settings: RetentionSettings, metrics: Metrics) -> None:
        self._pool = pool
        self._settings = settings
        self._metrics = metrics
        self._pass = RetentionPass(pool, settings, metrics)
        self._task: asyncio.Task[None] | None = None

    async def once(self) -> RetentionReport | None:
        """One pass (when enabled), then fresh gauges."""
        report = None
        if self._settings.background:
            report = await self._pass.run()
            log_report(report)
        await refresh_storage_gauges(self._pool, self._metrics)
        return report

    async def run(self) -> None:
        """Until cancelled; a failed pass is logged and tried again next interval."""
        await asyncio.sleep(min(self._settings.interval_s, FIRST_PASS_DELAY_S))
        while True:
            try:
                await self.once()
            except GatewayError as exc:
                log.warning("retention pass failed", extra={"error": repr(exc)})
            except Exception:
                log.exception("retention pass failed unexpectedly")
            await asyncio.sleep(self._settings.interval_s)

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name="retention")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
