"""Getting recorded events onto the stream: the outbox relay.

Every recorded row carries the id of the transaction that recorded it, and one cursor
row says how far the relay got (sql/010). A sweep takes the sweep lock (one relay walks
at a time, however many run), reads the next rows the cursor has not passed, publishes
them, and moves the cursor past those the stream acknowledged, all in one transaction.
The rows themselves are not written: a new event costs one INSERT.

In `gateway serve` (`[outbox] inline = true`) the relay is woken by every group commit,
so events reach the stream right after they are recorded; `gateway relay` processes
sweep every `relay_interval_s`, and straight away again while there is a backlog.

A sweep's rows go out in atomic batches (`[outbox] publish_batch_max`;
`adapters.jetstream.atomic`) where the server (2.12+) and the stream (`allow_atomic`)
take them, else one message at a time, pipelined (said once in the log). Batches keep
the walk's `(outbox_xid, id)` order: each is stored whole or not at all, the next is
sent only once the one before it is stored, and a failed batch is dealt with alone
(sent again one message at a time when it holds an id the duplicate window has, split
when too many) before anything after it is sent. A batch without an answer stops the
sweep: nothing after it is sent, and those rows count no publish attempt.

Nothing is lost: the cursor moves only after a PubAck (a relay that dies mid-batch
leaves it where it was, and the next sweep publishes the batch again: JetStream's
duplicate window absorbs the repeats), and a transaction that commits out of id order is
invisible in the range being walked and falls into the next one. No row may hold the
outbox up: one the broker can never take (larger than its `max_payload`) is parked at
once, and one unconfirmed `max_publish_attempts` times is parked too (`dlq_webhooks`,
stage `publish`); the walk passes parked rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gateway import tracing
from gateway.adapters.jetstream.broker import JetStreamBroker, PublishResult
from gateway.adapters.postgres import Pool, connection, outbox, transaction
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.health.dependencies import Dependency
from gateway.core.relay.batches import BatchLimits
from gateway.core.relay.cursor import advance, holding_the_cursor
from gateway.dependency_watch import DependencyWatch
from gateway.errors import ErrorClass, GatewayError
from gateway.ingest import traced
from gateway.ingest.parking import park_failed
from gateway.metrics import Metrics
from gateway.settings import OutboxSettings

log = logging.getLogger(__name__)

_GAUGE_INTERVAL_S = 5.0
# A woken relay that finds the sweep lock taken asks again this soon: the holder may
# have taken its snapshot before the commit that woke us.
_LOCK_RETRY_S = 0.01


def batch_limits(settings: OutboxSettings) -> BatchLimits:
    """How large the atomic batches of a publish may be."""
    return BatchLimits(settings.publish_batch_max, settings.publish_batch_max_bytes)


async def publish_batch(
    broker: JetStreamBroker,
    batch: Sequence[StoredEvent],
    settings: OutboxSettings,
    path: str,
) -> PublishResult:
    """Publish `batch` in order (in atomic batches where the stream takes them); with
    tracing on, each row's publish span joins the trace of the request that recorded it."""
    timeout_s, limits = settings.publish_timeout_s, batch_limits(settings)
    # The relay's hot path, read once per batch: off, the rows go to the broker as they
    # are, with none of the per-row work of `publish_spans` (parsing the stored
    # `traceparent`, a sampling draw for a row recorded untraced, copies of the row):
    # about 3.5 µs a row at `sample_ratio = 0` (9 µs a row recorded untraced), next to
    # a batched publish of ~30 µs a row.
    if not tracing.ENABLED:
        return await broker.publish(batch, timeout_s, limits)
    sent, spans = traced.publish_spans(batch, path)
    result = await broker.publish(sent, timeout_s, limits)
    traced.publish_done(batch, spans, result, path)
    return result


async def publish_now(
    pool: Pool,
    broker: JetStreamBroker,
    batch: Sequence[StoredEvent],
    settings: OutboxSettings,
    metrics: Metrics,
    path: str,
) -> int:
    """Publish recorded rows ahead of the relay (a replay's courtesy); return how many the
    stream confirmed. The relay publishes them again when its walk reaches them, and the
    duplicate window absorbs that; rows that can never be published are parked now."""
    result = await publish_batch(broker, batch, settings, path)
    if result.too_large:
        async with transaction(pool) as conn:
            await park_failed(conn, batch, result, {}, settings, metrics)
    if result.acked:
        metrics.published_total.inc(len(result.acked), path=path)
    return len(result.acked)


@dataclass(frozen=True)
class Sweep:
    """What one sweep did."""

    moved: int = 0  # rows the cursor passed
    busy: bool = False  # another relay held the sweep lock
    stuck: bool = False  # a row the stream did not confirm held the cursor


class OutboxRelay:
    """Walks the outbox cursor: publishes what it has not passed, oldest commit first."""

    def __init__(
        self,
        pool: Pool,
        broker: JetStreamBroker,
        settings: OutboxSettings,
        metrics: Metrics,
        path: str = "relay",
        watch: DependencyWatch | None = None,
    ) -> None:
        self._pool = pool
        # What its sweeps show of the database and NATS, for the console's overview.
        self._watch = watch or DependencyWatch.idle()
        self._broker = broker
        self._settings = settings
        self._metrics = metrics
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.path = path  # the `path` label of what it publishes: "inline" in serve

    def wake(self) -> None:
        """Sweep now: rows were just committed (an `OnCommitted` callback)."""
        self._wake.set()

    async def sweep(self) -> Sweep:
        """One pass: publish the next batch the cursor has not passed, and move it."""
        if not self._broker.connected:
            return Sweep()
        async with transaction(self._pool) as conn:
            if not await outbox.try_lock(conn):
                return Sweep(busy=True)
            cursor, now = await outbox.read_cursor(conn)
            started = cursor
            if not cursor.walking:
                cursor = cursor.aimed_at(now)
            limit = self._settings.batch_size
            batch, positions = await outbox.walk(conn, cursor, limit)
            settled: set[int] = set()
            result = PublishResult([], [])
            if batch:
                result = await publish_batch(self._broker, batch, self._settings, self.path)
                failed = result.failed
                if failed and not result.acked and not await self._broker.stream_answers():
                    # Nothing acknowledged and the stream does not answer: the broker is
                    # in trouble, not these rows; an outage must not park genuine events.
                    failed = []
                attempts = await outbox.count_publish_attempt(
                    conn, holding_the_cursor(positions, set(failed))
                )
                parked = await park_failed(
                    conn, batch, result, attempts, self._settings, self._metrics
                )
                settled = set(result.acked) | parked
            step = advance(cursor, positions, settled, limit)
            if step.cursor != started:
                await outbox.save_cursor(conn, step.cursor)
        if result.acked:
            self._metrics.published_total.inc(len(result.acked), path=self.path)
            if self.path == "relay":
                log.info(
                    "relay published",
                    extra={
                        "rows": len(result.acked),
                        "failed": len(result.failed),
                        "unsent": len(result.unsent),
                    },
                )
        return Sweep(step.moved, stuck=step.stuck)

    async def refresh_metrics(self) -> None:
        """Update the outbox gauges from the table."""
        async with connection(self._pool) as conn:
            pending, lag_s = await outbox.outbox_stats(conn)
        self._metrics.outbox_pending.set(pending)
        self._metrics.outbox_lag_seconds.set(lag_s)

    async def _next_sweep(self, done: Sweep) -> None:
        """Wait as long as the last sweep says: not at all while the walk moves, a moment
        when a woken relay found the lock taken, else until woken or the interval."""
        if done.moved and not done.stuck:
            await asyncio.sleep(0)  # let requests in between back-to-back sweeps
            return
        if done.busy and self._wake.is_set():
            await asyncio.sleep(_LOCK_RETRY_S)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self._settings.relay_interval_s)

    async def run(self) -> None:
        """Sweep until cancelled. The gauges are refreshed on their own clock: counting a
        large backlog after every back-to-back sweep would cost more than the sweeps."""
        refreshed_at = 0.0
        while True:
            done = Sweep(stuck=True)
            try:
                woken = self._wake.is_set()
                self._wake.clear()  # commits after this point are in the sweep's snapshot
                done = await self.sweep()
                self._observed(done)
                if done.busy and woken:
                    self._wake.set()  # keep asking until a sweep starts after that commit
                if time.monotonic() - refreshed_at >= _GAUGE_INTERVAL_S:
                    refreshed_at = time.monotonic()
                    await self.refresh_metrics()
                    await self._watch.flush(self._pool)
            except GatewayError as exc:
                self._watch.failed_with(exc.error_class.value)
                log.warning("relay pass failed", extra={"error": repr(exc)})
            except Exception:
                log.exception("relay pass failed unexpectedly")
            await self._next_sweep(done)

    def _observed(self, done: Sweep) -> None:
        """A sweep that ran answered for the database; one that moved rows, for NATS; one
        held by a row the stream did not confirm, against it."""
        if done.busy:
            return
        self._watch.answered(Dependency.DATABASE)
        if done.stuck:
            self._watch.failed(Dependency.NATS, ErrorClass.BROKER_UNAVAILABLE.value)
        elif done.moved:
            self._watch.answered(Dependency.NATS)

    async def watch(self) -> None:
        """Only refresh the outbox gauges (a serving process whose relay runs elsewhere)."""
        while True:
            try:
                await self.refresh_metrics()
            except GatewayError as exc:
                log.warning("outbox gauges not refreshed", extra={"error": repr(exc)})
            await asyncio.sleep(_GAUGE_INTERVAL_S)

    async def start(self, *, sweep: bool = True) -> None:
        work = self.run() if sweep else self.watch()
        self._task = asyncio.create_task(work, name="outbox-relay" if sweep else "outbox-gauges")

    async def drain(self, timeout_s: float) -> None:
        """Sweep until the walk catches up with what is committed (or `timeout_s`): what a
        stopping `gateway serve` owes the stream goes out before it exits.

        A sweep lock held elsewhere is waited out, not taken for "someone else will
        publish it": the holder may be this relay's own sweep, cancelled a moment ago,
        whose transaction the server has not ended yet (its snapshot may predate the
        last commits), and another relay's sweep is short.
        """
        deadline = time.monotonic() + timeout_s
        done = Sweep(busy=True)
        while time.monotonic() < deadline:
            try:
                done = await self.sweep()
            except GatewayError as exc:
                log.warning("outbox not drained on stop", extra={"error": repr(exc)})
                return
            if done.busy:
                await asyncio.sleep(_LOCK_RETRY_S)
                continue
            if not done.moved or done.stuck:
                return  # caught up, or the stream does not take them now
        # Rows may be left: the next relay to run publishes them; say so.
        log.warning(
            "outbox not drained on stop: time ran out",
            extra={"timeout_s": timeout_s, "last_sweep": "busy" if done.busy else "moving"},
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
