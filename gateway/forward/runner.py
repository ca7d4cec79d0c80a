"""The forwarding loop: fetch events from the destination's consumer, send each to the
target, and answer the stream by the verdict (ack, nak with the schedule's delay, or
park: `forward.recording`), until stopped or until the target answers 410.

Attempts run at most `max_in_flight` at once. With order on, a key has one event in
flight at a time (`forward.key_lines`); the others wait behind it in `key_seq` order.
No single event can stop the loop: an attempt that cannot even be sent (a request the
HTTP client refuses) is a failed attempt like a timeout, retried and then parked; and a
message that carries no event is parked at once with what it held (`forward.unreadable`).
A forwarder whose database stops answering steps aside until it answers again
(`forward.aside`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from gateway.adapters.http_target import Attempted, HttpTarget
from gateway.adapters.jetstream.consumer import Delivery, DurablePullConsumer
from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import forwarding as store
from gateway.core.forward.request import ForwardedEvent, delivery_request
from gateway.core.forward.retry import Answer, Decision, Verdict, decide
from gateway.errors import (
    BrokerUnavailable,
    DatabaseUnavailable,
    GatewayError,
    StreamMessageUnreadable,
)
from gateway.forward.aside import StepAside
from gateway.forward.key_lines import KeyLines, Waiting, forwarded_event
from gateway.forward.recording import Blocked, Recorder
from gateway.forward.view import OUTCOMES, AttemptSeen, Counts, View
from gateway.metrics import Metrics
from gateway.settings.forward import ForwardOptions

log = logging.getLogger(__name__)

#: Seconds a fetch waits for messages before the loop looks around (pause, held keys).
FETCH_WAIT_S = 1.0
#: A message whose handling hit a database or NATS outage is offered again after this.
OUTAGE_DELAY_S = 5.0
#: How often the keys held by open dead letters are read again (a replay releases them).
HELD_REFRESH_S = 5.0
#: At a stop, attempts under way get this long to finish (the signal handler asks
#: again after 5 s); what is left is offered again by the stream.
DRAIN_S = 3.0


def max_pending(options: ForwardOptions) -> int:
    """Messages this process holds unanswered at most (in flight or waiting in memory)."""
    return max(64, options.max_in_flight * 8)


class Forwarder:
    """One destination's loop over its consumer."""

    def __init__(
        self,
        options: ForwardOptions,
        consumer: DurablePullConsumer,
        target: HttpTarget,
        pool: Pool,
        view: View,
        *,
        ack_wait_s: float,
        database_url: str,
        counts: Counts | None = None,
        metrics: Metrics | None = None,
        gap_s: float = 300.0,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.options = options
        self.counts = counts if counts is not None else Counts()
        self._recorder = Recorder(pool, options.destination, self.counts, metrics)
        self._consumer = consumer
        self._target = target
        self._pool = pool
        self._view = view
        self._clock = clock
        self._rand = rand
        self._slots = asyncio.Semaphore(options.max_in_flight)
        self._tasks: set[asyncio.Task[object]] = set()
        self._lines = KeyLines(self._attempt, self._park_blocked, clock, gap_s)
        self._stopped = asyncio.Event()
        # A database that stops answering: fetching stops and the messages in hand go
        # back to the stream at once, for a healthy forwarder.
        self.aside = StepAside(
            database_url, pool, consumer, self._lines, worker=f"forward:{options.destination}"
        )
        # Messages waiting behind their key are reported in progress this often, so the
        # stream does not deliver them a second time while they wait.
        self._touch_every_s = ack_wait_s / 3

    async def run(self) -> Counts:
        """Forward until cancelled or paused; the counts of what was done."""
        held_read_s = float("-inf")
        touched_s = time.monotonic()
        watching = asyncio.create_task(self.aside.watch.run(), name="database-watch")
        try:
            if self.options.ordered:
                await self._restore_blockers()
            while not self._stopped.is_set():
                if not self.aside.serving():  # stepped aside: fetch nothing
                    await self.aside.watch.until_serving(self._stopped, timeout_s=0.5)
                    await self.aside.hand_back_stranded()
                    held_read_s = float("-inf")  # back: the held keys may have changed
                    continue
                if self.options.ordered and time.monotonic() - held_read_s > HELD_REFRESH_S:
                    await self._read_held()
                    held_read_s = time.monotonic()
                for started in self._lines.expired_gaps():
                    self._spawn(started)
                if time.monotonic() - touched_s > self._touch_every_s:
                    for waiting in self._lines.waiting():
                        await _answer(waiting.delivery.in_progress())
                    touched_s = time.monotonic()
                room = max_pending(self.options) - len(self._tasks) - self._lines.waiting_count()
                if room <= 0:
                    await self._wait_for_room()
                    continue
                fetched = await self._consumer.fetch(min(room, 128), FETCH_WAIT_S)
                if not self.aside.serving():  # stepped aside during the fetch
                    await self.aside.hand_back(fetched)
                    continue
                for delivery in fetched:
                    self._admit(delivery)
                self._view.tick(self.counts, self._clock())
        finally:
            watching.cancel()
            await self._drain()
        return self.counts

    async def _wait_for_room(self) -> None:
        """Until an attempt finishes, or a moment passes (the events held in memory may
        all be waiting for a predecessor, with no attempt under way)."""
        if self._tasks:
            await asyncio.wait(
                self._tasks, timeout=FETCH_WAIT_S, return_when=asyncio.FIRST_COMPLETED
            )
        else:
            await asyncio.sleep(FETCH_WAIT_S)

    async def _restore_blockers(self) -> None:
        """The keys whose event waits for a retry recorded before this start (a restart,
        a crash): their later events must not overtake it."""
        async with connection(self._pool) as conn:
            found = await store.retrying_keys(conn, self.options.destination)
        for k in found:
            self._lines.restore_blocker(
                (k.provider, k.order_key), k.event_id, k.key_seq, k.due_in_s
            )

    async def _read_held(self) -> None:
        """The held keys as the open dead letters say (a replay or a resolve releases a
        key), keeping those parked while the question was out."""
        before = set(self._lines.held)
        try:
            found = await self.aside.watched(self._held_keys(), None)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the loop itself is stopping
                raise
            return  # stepped aside: read again once back
        except DatabaseUnavailable as exc:
            self.aside.watch.suspect()
            log.warning("held keys not read", extra={"error": type(exc).__name__})
            return
        self._lines.held = found | (self._lines.held - before)

    async def _held_keys(self) -> set[tuple[str, str]]:
        async with connection(self._pool) as conn:
            return await store.held_keys(conn, self.options.destination)

    def _admit(self, delivery: Delivery) -> None:
        try:
            event = forwarded_event(delivery)
        except StreamMessageUnreadable as exc:
            self._spawn(self._park_unreadable(delivery, exc.reason))
            return
        except Exception as exc:  # a bug; the message is kept all the same, not retried
            log.exception("stream message not read")
            self._spawn(self._park_unreadable(delivery, f"not read ({type(exc).__name__})"))
            return
        keyed = self.options.ordered and event.order_key is not None and bool(event.key_seq)
        if not self.options.filters.passes(event.provider, event.event_type, event.body):
            self.counts.filtered += 1
            self._recorder.count("filtered")
            self._spawn(_answer(delivery.ack()))
            if keyed:  # not for this destination, but its turn is used: the next may go
                passed = self._lines.passed(
                    (event.provider, event.order_key or ""), event.key_seq or 0
                )
                if passed is not None:
                    self._spawn(passed)
            return
        started = (
            self._lines.admit(Waiting(delivery, event))
            if keyed
            else self._attempt(Waiting(delivery, event))
        )
        if started is not None:
            self._spawn(started)

    def _spawn(self, work: Awaitable[object]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # A bug: say so. The message it held is redelivered after `ack_wait`.
            log.error("forwarding task failed", exc_info=task.exception())

    async def _drain(self) -> None:
        """Stop sending; give attempts under way `DRAIN_S`, then offer everything left
        to the stream again."""
        self._stopped.set()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=DRAIN_S)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for waiting in self._lines.take_all():
            await _answer(waiting.delivery.nak())
        # What the server sent after the last fetch returned waits in the subscription
        # (`DurablePullConsumer.delivered`): offered again now, not after `ack_wait`.
        for delivery in self._consumer.delivered():
            await _answer(delivery.nak())

    async def _attempt(self, waiting: Waiting) -> Decision:
        """One attempt of one event, recorded and answered on the stream."""
        delivery, event = waiting.delivery, waiting.event
        options = self.options
        async with self._slots:
            # Stopping, paused or stepped aside: nothing more is sent.
            if self._stopped.is_set() or not self.aside.serving():
                await _answer(delivery.nak(0.0))
                return Decision(Verdict.PAUSE)
            try:
                prior = 0
                if delivery.num_delivered > 1:
                    prior = await self.aside.watched(self._failures(event), delivery)
                attempt = prior + 1
                attempted = await self._send(waiting, attempt)
                decision = decide(
                    attempted.answer,
                    attempt,
                    options.schedule,
                    park_on_4xx=options.park_on_4xx,
                    now_s=self._clock(),
                    rand=self._rand,
                )
                recording = self._recorder.record(
                    waiting, attempt, prior, attempted, decision, len(options.schedule)
                )
                if decision.verdict is Verdict.DELIVERED and not prior:
                    dead_letter = await recording  # no database: acked at once
                else:
                    dead_letter = await self.aside.watched(recording, delivery)
            except (DatabaseUnavailable, BrokerUnavailable) as exc:
                if isinstance(exc, DatabaseUnavailable):  # is it there at all?
                    self.aside.watch.suspect()
                log.warning(
                    "forward attempt not recorded; offered again",
                    extra={"event_id": event.event_id, "error": type(exc).__name__},
                )
                await _answer(delivery.nak(OUTAGE_DELAY_S))
                return Decision(Verdict.RETRY, OUTAGE_DELAY_S)
        if decision.verdict is Verdict.PAUSE:
            self._stopped.set()
        self._recorder.latency(attempted.elapsed_s)
        self._recorder.count(OUTCOMES[decision.verdict])
        self._view.attempt(
            AttemptSeen(
                at=datetime.fromtimestamp(self._clock(), UTC).astimezone(),
                provider=event.provider,
                event_type=event.event_type,
                event_id=event.event_id,
                attempt=attempt,
                status=attempted.answer.status,
                elapsed_s=attempted.elapsed_s,
                verdict=decision.verdict,
                delay_s=decision.delay_s,
                error=attempted.answer.error,
                excerpt=attempted.excerpt,
                dead_letter_id=dead_letter,
            )
        )
        return decision

    async def _failures(self, event: ForwardedEvent) -> int:
        """The failed attempts counted so far for a redelivered event."""
        async with connection(self._pool) as conn:
            return await store.failures(
                conn, self.options.destination, event.provider, event.event_id
            )

    async def _send(self, waiting: Waiting, attempt: int) -> Attempted:
        options = self.options
        if attempt <= options.fail_first:  # the developer's fault mode: nothing is sent
            return Attempted(Answer(503), 0.0, b"--fail-first")
        try:
            body, headers = delivery_request(
                waiting.event,
                attempt,
                int(self._clock()),
                resign_as=options.resign_as,
                secrets=options.secrets,
                wrap=options.envelope,
            )
            return await self._target.post(body, headers)
        except Exception as exc:
            log.error(
                "forward attempt not sent",
                extra={"event_id": waiting.event.event_id, "error": type(exc).__name__},
                exc_info=exc,
            )
            return Attempted(Answer(None, error=f"not sent ({type(exc).__name__})"), 0.0)

    async def _park_blocked(self, waiting: Waiting) -> Decision:
        """An event of a held key: parked behind the key's dead letter, or, when the key
        was released meanwhile, sent in its turn after all."""
        try:
            blocked = await self.aside.watched(
                self._recorder.park_blocked(waiting), waiting.delivery
            )
        except GatewayError as exc:
            if isinstance(exc, DatabaseUnavailable):
                self.aside.watch.suspect()
            log.warning("blocked event not parked", extra={"error": type(exc).__name__})
            await _answer(waiting.delivery.nak(OUTAGE_DELAY_S))
            return Decision(Verdict.RETRY, OUTAGE_DELAY_S)
        if blocked is Blocked.PARKED:
            return Decision(Verdict.PARK)
        event = waiting.event
        self._lines.held.discard((event.provider, event.order_key or ""))
        return await self._attempt(waiting)

    async def _park_unreadable(self, delivery: Delivery, reason: str) -> None:
        """Park a message that carries no event, then term it: left unanswered, or nak'd,
        it would come back for ever and hold a place of `max_ack_pending` each time. If
        its dead letter cannot be written, it is offered again after `OUTAGE_DELAY_S`:
        it is only let go once the row holds it. Logged by its stream sequence, never
        with what it holds."""
        seq = _stream_seq(delivery)
        now = datetime.fromtimestamp(self._clock(), UTC)
        try:
            row_id = await self.aside.watched(
                self._recorder.park_unreadable(delivery, reason, seq, now), delivery
            )
        except GatewayError as exc:
            if isinstance(exc, DatabaseUnavailable):
                self.aside.watch.suspect()
            log.warning(
                "unreadable stream message not parked; offered again",
                extra={"stream_seq": seq, "reason": reason, "error": type(exc).__name__},
            )
            await _answer(delivery.nak(OUTAGE_DELAY_S))
            return
        log.warning(
            "stream message unreadable; parked",
            extra={
                "destination": self.options.destination,
                "stream_seq": seq,
                "reason": reason,
                "dead_letter_id": row_id,
            },
        )


def _stream_seq(delivery: Delivery) -> int | None:
    """The message's stream sequence; None when its reply subject says none."""
    try:
        return delivery.stream_seq
    except Exception:  # nats-py's own error for a reply it cannot parse
        return None


async def _answer(answer: Awaitable[None]) -> None:
    """Send an answer whose failure is the stream's to handle: it redelivers the message
    after `ack_wait`."""
    with contextlib.suppress(BrokerUnavailable):
        await answer
