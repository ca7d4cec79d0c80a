"""What a worker process sees of its dependencies and of its retries, kept in memory and
written to PostgreSQL about once a second, so the console's overview shows an outage
(and the events waiting it out) before any row parks.

The worker's hot path only touches memory: a state is queued when it changes (or is seen
again after `REASSERT_S`), a retry when one is scheduled, and a settled event only when
it had been delivered before (a first delivery that settles costs a dict look-up). A
flush that fails (the database is the dependency that is down) keeps what it held for
the next one. `gateway_dependency_up` is set at once, without waiting for the write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import dependency_state as store
from gateway.core.events.model import Event
from gateway.core.health.dependencies import Dependency, Health, Seen, blamed, worth_writing
from gateway.errors import GatewayError
from gateway.metrics import Metrics

log = logging.getLogger(__name__)

#: How often what was seen is written.
FLUSH_INTERVAL_S = 1.0
#: A retry row whose delivery has been due this long is pruned (nobody retries it now).
PRUNE_AFTER_S = 86_400.0
_PRUNE_EVERY_S = 3600.0


def process_name(kind: str) -> str:
    """`settle@host:pid`: which process wrote a row."""
    return f"{kind}@{socket.gethostname()}:{os.getpid()}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


class DependencyWatch:
    """Observations of one process, queued for `flush`. `idle()` makes one that records
    nothing (replay, and tests that do not watch)."""

    def __init__(
        self,
        metrics: Metrics | None,
        source: str,
        *,
        enabled: bool = True,
        clock: Callable[[], datetime] = _utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self.source = source
        self._enabled = enabled
        self._clock = clock
        self._monotonic = monotonic
        self._seen: dict[Dependency, Seen] = {}
        self._changes: list[store.StateChange] = []
        self._retrying: dict[tuple[str, str], store.RetryNote] = {}
        self._finished: set[tuple[str, str]] = set()
        self._pruned_at_s: float | None = None

    @classmethod
    def idle(cls) -> DependencyWatch:
        return cls(None, "", enabled=False)

    # ---------------------------------------------------------------- observations

    def answered(self, dependency: Dependency) -> None:
        self._observe(dependency, Health.UP, "")

    def failed(self, dependency: Dependency, error_class: str) -> None:
        self._observe(dependency, Health.DOWN, error_class)

    def failed_with(self, error_class: str) -> None:
        """A failure of this class: its dependency (if it blames one) is down."""
        dependency = blamed(error_class)
        if dependency is not None:
            self.failed(dependency, error_class)

    def _observe(self, dependency: Dependency, health: Health, error_class: str) -> None:
        if not self._enabled:
            return
        now_s = self._monotonic()
        if not worth_writing(self._seen.get(dependency), health, now_s):
            return
        self._seen[dependency] = Seen(health, now_s)
        self._changes.append(store.StateChange(dependency, health, self._clock(), error_class))
        if self._metrics is not None:
            self._metrics.dependency_up.set(float(health is Health.UP), dependency=dependency)

    def retrying(
        self, event: Event, error_class: str, delay_s: float | None, deliveries: int
    ) -> None:
        """The worker scheduled `event`'s next delivery after `delay_s`."""
        if not self._enabled:
            return
        self.failed_with(error_class)
        key = (event.provider, event.event_id)
        self._finished.discard(key)
        dependency = blamed(error_class)
        self._retrying[key] = store.RetryNote(
            event.provider,
            event.event_id,
            error_class,
            "" if dependency is None else dependency.value,
            deliveries,
            self._clock() + timedelta(seconds=delay_s or 0.0),
        )

    def finished(self, event: Event | None, deliveries: int) -> None:
        """`event` settled or parked; only a redelivered one can have been in retry."""
        if not self._enabled or event is None or deliveries <= 1:
            return
        key = (event.provider, event.event_id)
        self._retrying.pop(key, None)
        self._finished.add(key)

    def settled(self, event: Event | None, deliveries: int) -> None:
        """An event settled: the database and the ledger answered."""
        if not self._enabled:
            return
        self.answered(Dependency.DATABASE)
        self.answered(Dependency.LEDGER)
        self.finished(event, deliveries)

    # ---------------------------------------------------------------- writing

    async def flush(self, pool: Pool) -> None:
        """Write what was queued; on failure keep it for the next flush."""
        changes, self._changes = self._changes, []
        retrying, self._retrying = self._retrying, {}
        finished, self._finished = self._finished, set()
        if not (changes or retrying or finished or self._prune_due()):
            return
        now = self._clock()
        try:
            async with connection(pool) as conn:
                await store.write_states(conn, changes, self.source)
                await store.note_retries(conn, list(retrying.values()), now, self.source)
                await store.forget_retries(conn, list(finished))
                if self._prune_due():
                    await store.prune_retries(conn, now - timedelta(seconds=PRUNE_AFTER_S))
                    self._pruned_at_s = self._monotonic()
        except BaseException:
            # Newer observations win over the ones put back.
            self._changes = changes + self._changes
            for key, note in retrying.items():
                if key not in self._finished:
                    self._retrying.setdefault(key, note)
            self._finished |= {k for k in finished if k not in self._retrying}
            raise

    def _prune_due(self) -> bool:
        last = self._pruned_at_s
        return last is None or self._monotonic() - last >= _PRUNE_EVERY_S

    async def run(self, pool: Pool, interval_s: float = FLUSH_INTERVAL_S) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.flush(pool)
            except GatewayError as exc:
                log.warning("dependency states not written yet", extra={"error": repr(exc)})
            except Exception:
                log.exception("dependency states not written")


@contextlib.asynccontextmanager
async def flushing(watch: DependencyWatch, pool: Pool) -> AsyncIterator[DependencyWatch]:
    """Write `watch`'s observations every second while the block runs, and once more at
    its end (best effort)."""
    task = asyncio.create_task(watch.run(pool), name="dependency-watch")
    try:
        yield watch
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(Exception):
            await asyncio.wait_for(watch.flush(pool), 2.0)
