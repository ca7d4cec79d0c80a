"""One retention pass: three walks in small batches, under an advisory lock.

1. The lock: `pg_try_advisory_lock` on the pass's own connection. Another process
   holding it means that process is doing the work: this pass is skipped, not queued.
2. Payloads: event rows received before `now - payload_max_age_s`, walked by id from a
   stored watermark, get an empty body and headers and `payload_removed_at`. Rows still
   in the outbox stop the walk; rows a dead letter holds (open, or resolved within the
   horizon) are stepped over and released by step 3. A row stamped more than
   `CLOCK_SKEW_S` ahead of the database's clock (a host with a wrong clock) is dated by
   the rows recorded after it (`core.retention.dated`), so it cannot stop the walk.
3. Dead letters resolved before the same cutoff: their payload is emptied, and so is the
   event row they held back.
4. Keys (only with `key_max_age_s` > 0): rows received before `now - key_max_age_s` are
   deleted, except rows in the outbox or referenced by an open dead letter; resolved dead
   letters let go of the row (`webhook_id = NULL`) and are kept.
5. Ordered keys (the same horizon): the counters, applied position and log of keys idle
   since the cutoff and fully applied, with no hold, open deferral or open dead letter,
   are deleted (`adapters.postgres.ordering.retention`); a later event of such a key is
   numbered from 1 again.

Each batch is its own short transaction, followed by `pause_s` of sleep, so ingestion
never waits behind a long statement or a long-held row lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from gateway.adapters.postgres import Conn, Pool, connection
from gateway.adapters.postgres import retention as store
from gateway.adapters.postgres.ordering import retention as order_retention
from gateway.core.retention import (
    DEAD_LETTERS,
    ORDER_APPLIED,
    ORDER_COUNTERS,
    ORDER_LOG,
    WEBHOOKS,
    Cutoffs,
    Removed,
    RetentionReport,
    cutoffs,
    next_watermark,
)
from gateway.errors import GatewayError
from gateway.metrics import Metrics
from gateway.settings import RetentionSettings

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


class RetentionPass:
    """Runs passes against one pool; counts what it removes in `metrics`, if given."""

    def __init__(
        self,
        pool: Pool,
        settings: RetentionSettings,
        metrics: Metrics | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._metrics = metrics
        self._sleep = sleep

    async def run(self, *, dry_run: bool = False) -> RetentionReport:
        """One pass (see the module docstring); with `dry_run`, count and change nothing."""
        started_s = time.monotonic()
        report = RetentionReport(dry_run=dry_run)
        async with connection(self._pool) as conn:
            if not await store.try_lock(conn):
                report.skipped = True
                return report
            try:
                cut = cutoffs(
                    await store.database_now(conn),
                    self._settings.payload_max_age_s,
                    self._settings.key_max_age_s,
                )
                report.payloads_before, report.keys_before = cut.payloads_before, cut.keys_before
                await self._walk(conn, cut, report)
            finally:
                with contextlib.suppress(GatewayError):  # a lost session has let go already
                    await store.unlock(conn)
        report.duration_s = time.monotonic() - started_s
        return report

    async def _walk(self, conn: Conn, cut: Cutoffs, report: RetentionReport) -> None:
        trusted_until = cut.trusted_until
        if cut.payloads_before is not None:
            scanned = await self._payloads(conn, cut.payloads_before, trusted_until, report)
            await self._dead_letters(conn, cut.payloads_before, trusted_until, scanned, report)
        if cut.keys_before is not None:
            await self._keys(conn, cut.keys_before, trusted_until, report)
            await self._order_keys(conn, cut.keys_before, report)

    def _count(self, report: RetentionReport, table: str, what: Removed, rows: int) -> None:
        report.add(table, what, rows)
        if self._metrics is not None and rows and not report.dry_run:
            self._metrics.retention_removed_total.inc(rows, table=table, what=what.value)

    async def _batch_done(self, report: RetentionReport) -> None:
        report.batches += 1
        if not report.dry_run:
            await self._sleep(self._settings.pause_s)

    async def _payloads(
        self, conn: Conn, cutoff: datetime, trusted_until: datetime, report: RetentionReport
    ) -> tuple[int, int]:
        """Walk from the watermark; the id range looked at, for the dry run's counts."""
        start = mark = await store.watermark(conn)
        limit = self._settings.batch_size
        while True:
            scan = await store.scan_payloads(conn, mark, cutoff, trusted_until, limit)
            if scan.scanned == 0:
                break
            if report.dry_run:
                self._count(report, WEBHOOKS, Removed.PAYLOAD, len(scan.eligible))
                mark, ends = next_watermark(scan.last_id, scan.stop_id, ())
            else:
                emptied, mark, ends = await store.empty_payloads(conn, scan, cutoff, trusted_until)
                self._count(report, WEBHOOKS, Removed.PAYLOAD, emptied)
            await self._batch_done(report)
            if ends or scan.scanned < limit:
                break
        return start, mark

    async def _dead_letters(
        self,
        conn: Conn,
        cutoff: datetime,
        trusted_until: datetime,
        scanned: tuple[int, int],
        report: RetentionReport,
    ) -> None:
        if report.dry_run:
            dead_letters, webhooks = await store.count_due_dead_letters(
                conn, cutoff, trusted_until, *scanned
            )
            self._count(report, DEAD_LETTERS, Removed.PAYLOAD, dead_letters)
            self._count(report, WEBHOOKS, Removed.PAYLOAD, webhooks)
            return
        while due := await store.due_dead_letters(conn, cutoff, self._settings.batch_size):
            dead_letters, webhooks = await store.empty_dead_letters(
                conn, [d for d, _ in due], [w for _, w in due if w], cutoff, trusted_until
            )
            self._count(report, DEAD_LETTERS, Removed.PAYLOAD, dead_letters)
            self._count(report, WEBHOOKS, Removed.PAYLOAD, webhooks)
            await self._batch_done(report)
            if dead_letters < len(due):  # others hold some of them: the next pass
                break

    async def _keys(
        self, conn: Conn, cutoff: datetime, trusted_until: datetime, report: RetentionReport
    ) -> None:
        after = 0
        limit = self._settings.batch_size
        while True:
            scan = await store.scan_keys(conn, after, cutoff, trusted_until, limit)
            if scan.scanned == 0:
                break
            deleted = len(scan.eligible)
            if not report.dry_run and scan.eligible:
                deleted = await store.delete_keys(conn, scan.eligible)
            self._count(report, WEBHOOKS, Removed.KEY, deleted)
            await self._batch_done(report)
            if scan.stop_id is not None or scan.scanned < limit or scan.last_id is None:
                break
            after = scan.last_id

    async def _order_keys(self, conn: Conn, cutoff: datetime, report: RetentionReport) -> None:
        """Step 5: idle ordered keys, in batches of keys from a cursor (a key left for
        the next pass is not looked at again by this one)."""
        if report.dry_run:
            self._count_order_keys(report, await order_retention.count_idle_keys(conn, cutoff))
            return
        after = None
        limit = self._settings.batch_size
        while True:
            removed = await order_retention.remove_idle_keys(conn, cutoff, after, limit)
            self._count_order_keys(report, removed)
            if removed.last is None:
                break
            await self._batch_done(report)
            if removed.looked_at < limit:
                break
            after = removed.last

    def _count_order_keys(
        self, report: RetentionReport, removed: order_retention.KeysRemoved
    ) -> None:
        self._count(report, ORDER_COUNTERS, Removed.KEY, removed.counters)
        self._count(report, ORDER_APPLIED, Removed.KEY, removed.applied)
        self._count(report, ORDER_LOG, Removed.KEY, removed.log)
