"""DLQ health inside `gateway serve`: the DLQ gauges, and the team's three alert
thresholds sent to `[alerts] webhook_url` for teams without Prometheus.

Each evaluation (every `interval_s`, 30 s by default):
1. one query fetches the DLQ figures, which also refresh the gauges, and one the held
   keys of per-key order (`dlq.order_gauges`);
2. the retry counter of this process is sampled into a one-minute window;
3. the backfill pages skipped in the last hour are counted by provider
   (`backfill_progress.skipped_at`, sql/011);
4. each condition is compared with what the receiver was last told, stored in
   `dlq_alert_state`; a difference is notified under that row's lock and recorded only
   once the receiver answered 2xx. Keeping the state in PostgreSQL is what makes it once
   per episode across several gateway processes and across restarts;
5. only the holder of the `alert_lease` row (sql/027) judges the shared figures (DLQ,
   backfill), so processes started with different thresholds cannot undo each other's
   notices; each notice names the thresholds it was judged with (`settings`). A
   process's own retry rate is judged by that process, lease or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from gateway.adapters.postgres import Pool, alert_lease, connection, transaction
from gateway.adapters.postgres.alert_state import alert_states, lock_alert_state, save_alert_state
from gateway.adapters.postgres.backfill import skipped_by_provider
from gateway.adapters.postgres.dead_letters import rows as dead_letters
from gateway.adapters.postgres.dependency_state import DependencyRow, dependency_states
from gateway.core.health.alerting import (
    BACKFILL_SKIP_WINDOW_S,
    AlertSettings,
    AlertState,
    Notice,
    Observation,
    Reading,
    RetryWindow,
    Rule,
    readings,
    settings_named,
    transition,
)
from gateway.dlq.order_gauges import refresh_order_gauges
from gateway.errors import AlertNotDelivered, GatewayError
from gateway.metrics import Metrics

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
#: The `alert_lease` row of the in-process alerts.
LEASE = "in-process-alerts"


class AlertReceiver(Protocol):
    """Where notices go (`adapters.alert_webhook.AlertWebhook`, opened by the composition
    root); `AlertNotDelivered` unless the receiver accepted the document."""

    async def post(self, doc: Mapping[str, Any]) -> None: ...


def _utc_now() -> datetime:
    return datetime.now(UTC)


def set_dlq_gauges(metrics: Metrics, unresolved: int, oldest_s: float | None) -> None:
    metrics.dlq_unresolved.set(unresolved)
    metrics.dlq_oldest_unresolved_seconds.set(oldest_s or 0.0)


async def refresh_dlq_gauges(
    pool: Pool, metrics: Metrics, window_s: float = 300.0, now: datetime | None = None
) -> tuple[int, float | None]:
    """Set `gateway_dlq_unresolved` and `gateway_dlq_oldest_unresolved_seconds` from the
    table; return (rows first failed in the last `window_s`, oldest unresolved age)."""
    now = now or _utc_now()
    async with connection(pool) as conn:
        added, unresolved, oldest = await dead_letters.health_counts(conn, now, window_s)
    oldest_s = None if oldest is None else max(0.0, (now - oldest).total_seconds())
    set_dlq_gauges(metrics, unresolved, oldest_s)
    return added, oldest_s


def down_for_s(rows: list[DependencyRow], now: datetime) -> dict[str, float]:
    """Seconds each recorded dependency has been down (0 while up)."""
    return {
        r.dependency: max(0.0, (now - r.since).total_seconds()) if r.state == "down" else 0.0
        for r in rows
    }


def retries_by_subject(metrics: Metrics) -> dict[str, float]:
    """This process's `gateway_retries_total`, summed by subject."""
    totals: dict[str, float] = {}
    for labels, value in metrics.retries_total.values.items():
        subject = dict(labels).get("subject", "")
        totals[subject] = totals.get(subject, 0.0) + value
    return totals


class DlqAlerts:
    """Refreshes the DLQ gauges and notifies the alert receiver once per episode; with no
    receiver (`[alerts] webhook_url` unset) it keeps the gauges only."""

    def __init__(
        self,
        pool: Pool,
        settings: AlertSettings,
        metrics: Metrics,
        receiver: AlertReceiver | None,
        *,
        clock: Clock = _utc_now,
        source: str | None = None,
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._metrics = metrics
        self._receiver = receiver
        self._clock = clock
        self._source = source or socket.gethostname()
        # Unique per evaluator: two processes of one host (or two in one test) differ.
        self._holder = f"{self._source}:{os.getpid()}:{id(self):x}"
        self._named = settings_named(settings)
        self._retries = RetryWindow()
        self._task: asyncio.Task[None] | None = None

    async def evaluate(self, now: datetime) -> list[Notice]:
        """One evaluation at `now`; returns the notices delivered."""
        added, oldest_s = await refresh_dlq_gauges(
            self._pool, self._metrics, self._settings.dlq_window_s, now
        )
        await refresh_order_gauges(self._pool, self._metrics, now)
        self._retries.add(now.timestamp(), retries_by_subject(self._metrics))
        if self._receiver is None:
            return []
        async with connection(self._pool) as conn:
            # The shared figures are judged by the lease's holder alone; a process's own
            # retry rate only it can judge, so it does whether it holds the lease or not.
            holder = await alert_lease.hold(
                conn, LEASE, self._holder, self._settings.interval_s * 3, self._named
            )
            skipped = await skipped_by_provider(conn, now, BACKFILL_SKIP_WINDOW_S)
            down_s = down_for_s(await dependency_states(conn), now)
            stored = await alert_states(conn)
        obs = Observation(added, oldest_s, self._retries.per_minute(), skipped, down_s)
        judged = [r for r in readings(obs, self._settings) if holder or r.rule is Rule.RETRY_STORM]
        delivered = []
        for reading in judged:
            state, since = stored.get((reading.rule.value, reading.key), (AlertState.OK, None))
            if transition(state, since, reading, now) is None:
                continue  # the receiver already knows; nothing to lock
            notice = await self._notify(self._receiver, reading, now)
            if notice is not None:
                delivered.append(notice)
        return delivered

    async def _notify(
        self, receiver: AlertReceiver, reading: Reading, now: datetime
    ) -> Notice | None:
        """Decide again under the state row's lock, send, and record only if delivered."""
        try:
            async with transaction(self._pool) as conn:
                state, since = await lock_alert_state(conn, reading, now)
                # Another process may have sent this very notice while we were deciding.
                notice = transition(state, since, reading, now)
                if notice is None:
                    return None
                await receiver.post({**notice.payload(self._source), "settings": self._named})
                await save_alert_state(conn, notice)
        except AlertNotDelivered as exc:
            log.warning(
                "alert not delivered; will try again",
                extra={"alert": reading.rule.value, "key": reading.key, "error": str(exc)},
            )
            return None
        log.info(
            "alert sent",
            extra={"alert": reading.rule.value, "key": reading.key, "status": notice.state.value},
        )
        return notice

    async def run(self) -> None:
        """Evaluate every `interval_s` until cancelled; a failed pass is logged, not fatal."""
        while True:
            try:
                await self.evaluate(self._clock())
            except GatewayError as exc:
                log.warning("alert evaluation failed", extra={"error": repr(exc)})
            except Exception:
                log.exception("alert evaluation failed unexpectedly")
            await asyncio.sleep(self._settings.interval_s)

    async def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name="dlq-alerts")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.release()

    async def release(self) -> None:
        """Give the lease up, so another process takes it at once (best effort)."""
        with contextlib.suppress(GatewayError):
            async with connection(self._pool) as conn:
                await alert_lease.release(conn, LEASE, self._holder)


async def run_alerts(
    pool: Pool, alerts: AlertSettings, metrics: Metrics, receiver: AlertReceiver | None
) -> None:
    """Keep the DLQ gauges current and send the alerts, until cancelled.

    `[alerts]` was checked with the rest of the settings at start-up. `receiver` is
    opened by the composition root, which passes None when no `webhook_url` is set.
    """
    evaluation = DlqAlerts(pool, alerts, metrics, receiver)
    try:
        await evaluation.run()
    finally:
        # Cancelled: let the next process take the lease now rather than when it expires.
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.wait_for(evaluation.release(), 2.0))
