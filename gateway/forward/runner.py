"""The forwarding loop: fetch events from the destination's consumer, send each to the
target, and answer the stream by the verdict (ack, nak with the schedule's delay, or
park), until stopped or until the target answers 410.

Attempts run at most `max_in_flight` at once. With order on, a key has one event in
flight at a time (`forward.key_lines`); the others wait behind it in `key_seq` order.
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
from gateway.adapters.jetstream.consumer import Delivery, DurablePullConsumer, event_from_message
from gateway.adapters.postgres import Pool, connection, transaction
from gateway.adapters.postgres import forwarding as store
from gateway.core.forward_request import delivery_request
from gateway.core.forward_retry import Answer, Decision, Verdict, decide
from gateway.core.model import Failure
from gateway.errors import BrokerUnavailable, DatabaseUnavailable, ErrorClass, GatewayError
from gateway.forward.key_lines import KeyLines, Waiting, forwarded_event
from gateway.forward.view import AttemptSeen, Counts, View
from gateway.metrics import Metrics
from gateway.settings.forward import ForwardOptions

log = logging.getLogger(__name__)

#: Seconds a fetch waits for messages before the loop looks around (pause, held keys).
FETCH_WAIT_S = 1.0
#: A message whose handling hit a database outage is offered again after this long.
OUTAGE_DELAY_S = 5.0
#: How often the keys held by open dead letters are read again (a replay releases them).
HELD_REFRESH_S = 5.0


#: The `outcome` label of each verdict in `gateway_forward_attempts_total`.
_OUTCOMES = {
    Verdict.DELIVERED: "delivered",
    Verdict.RETRY: "retry",
    Verdict.PARK: "parked",
    Verdict.PAUSE: "paused",
}


def max_pending(options: ForwardOptions) -> int:
    """Messages held unanswered at most: the consumer's `max_ack_pending` is this."""
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
        counts: Counts | None = None,
        metrics: Metrics | None = None,
        gap_s: float = 300.0,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.options = options
        self.counts = counts if counts is not None else Counts()
        self._metrics = metrics
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
        # Messages waiting behind their key are reported in progress this often, so the
        # stream does not deliver them a second time while they wait.
        self._touch_every_s = ack_wait_s / 3

    async def run(self) -> Counts:
        """Forward until cancelled or paused; the counts of what was done."""
        held_read_s = float("-inf")
        touched_s = time.monotonic()
        try:
            while not self._stopped.is_set():
                if time.monotonic() - held_read_s > HELD_REFRESH_S and self.options.ordered:
                    await self._read_held()
                    held_read_s = time.monotonic()
                for started in self._lines.expired_gaps():
                    self._spawn(started)
                if time.monotonic() - touched_s > self._touch_every_s:
                    for waiting in self._lines.waiting():
                        await _answer(waiting.delivery.in_progress())
                    touched_s = time.monotonic()
                room = max_pending(self.options) - self._pending()
                if room <= 0:
                    await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
                    continue
                batch = await self._consumer.fetch(min(room, 128), FETCH_WAIT_S)
                for delivery in batch:
                    self._admit(delivery)
                self._view.tick(self.counts, self._clock())
        finally:
            await self._drain()
        return self.counts

    def _pending(self) -> int:
        return len(self._tasks) + self._lines.waiting_count()

    async def _read_held(self) -> None:
        """The held keys as the open dead letters say (a replay or a resolve releases a
        key), keeping those parked while the question was out."""
        before = set(self._lines.held)
        try:
            async with connection(self._pool) as conn:
                found = await store.held_keys(conn, self.options.destination)
        except DatabaseUnavailable as exc:
            log.warning("held keys not read", extra={"error": type(exc).__name__})
            return
        self._lines.held = found | (self._lines.held - before)

    def _admit(self, delivery: Delivery) -> None:
        event = forwarded_event(delivery)
        if not self.options.filters.passes(event.provider, event.event_type, event.body):
            self.counts.filtered += 1
            self._count("filtered")
            self._spawn(_answer(delivery.ack()))
            if self.options.ordered and event.order_key is not None and event.key_seq:
                # Not for this destination, but its number is done: the next may go.
                passed = self._lines.passed((event.provider, event.order_key), event.key_seq)
                if passed is not None:
                    self._spawn(passed)
            return
        if not self.options.ordered or event.order_key is None:
            self._spawn(self._attempt(Waiting(delivery, event)))
            return
        started = self._lines.admit(Waiting(delivery, event))
        if started is not None:
            self._spawn(started)

    def _spawn(self, work: Awaitable[object]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        """Let attempts under way finish; what waits behind them is offered again."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for waiting in self._lines.take_all():
            await _answer(waiting.delivery.nak())

    async def _attempt(self, waiting: Waiting) -> Decision:
        """One attempt of one event, answered on the stream; the decision taken."""
        delivery, event = waiting.delivery, waiting.event
        options = self.options
        async with self._slots:
            if self._stopped.is_set():  # paused meanwhile: nothing more is sent
                await _answer(delivery.nak())
                return Decision(Verdict.PAUSE)
            try:
                prior = 0
                if delivery.num_delivered > 1:
                    async with connection(self._pool) as conn:
                        prior = await store.failures(
                            conn, options.destination, event.provider, event.event_id
                        )
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
                dead_letter = await self._settle(waiting, attempt, prior, attempted, decision)
            except (DatabaseUnavailable, BrokerUnavailable) as exc:
                log.warning(
                    "forward attempt not recorded; offered again",
                    extra={"event_id": event.event_id, "error": type(exc).__name__},
                )
                await _answer(delivery.nak(OUTAGE_DELAY_S))
                return Decision(Verdict.RETRY, OUTAGE_DELAY_S)
        if self._metrics is not None:
            self._metrics.forward_latency_seconds.observe(
                attempted.elapsed_s, destination=options.destination
            )
        self._count(_OUTCOMES[decision.verdict])
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

    def _count(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.forward_attempts_total.inc(
                destination=self.options.destination, outcome=outcome
            )

    async def _send(self, waiting: Waiting, attempt: int) -> Attempted:
        options = self.options
        if attempt <= options.fail_first:  # the developer's fault mode: nothing is sent
            return Attempted(Answer(503), 0.0, b"--fail-first")
        body, headers = delivery_request(
            waiting.event,
            attempt,
            int(self._clock()),
            resign_as=options.resign_as,
            secrets=options.secrets,
            wrap=options.envelope,
        )
        return await self._target.post(body, headers)

    async def _settle(
        self, waiting: Waiting, attempt: int, prior: int, attempted: Attempted, decision: Decision
    ) -> int | None:
        """Record the decision and answer the stream; the dead letter's id when parked."""
        delivery, event = waiting.delivery, waiting.event
        destination = self.options.destination
        verdict = decision.verdict
        if verdict is Verdict.DELIVERED:
            if prior:
                async with connection(self._pool) as conn:
                    await store.forget(conn, destination, event.provider, event.event_id)
            await delivery.ack()
            self.counts.delivered += 1
        elif verdict is Verdict.RETRY:
            async with connection(self._pool) as conn:
                await store.add_failure(
                    conn, destination, event.provider, event.event_id, decision.reason
                )
            await delivery.nak(decision.delay_s)
            self.counts.retried += 1
        elif verdict is Verdict.PAUSE:
            await delivery.nak()
            self.counts.paused = True
            self._stopped.set()
        else:
            code = (
                ErrorClass.FORWARD_REFUSED
                if attempted.answer.status is not None and attempt <= len(self.options.schedule)
                else ErrorClass.FORWARD_ATTEMPTS_EXHAUSTED
            )
            excerpt = attempted.excerpt.decode("utf-8", "replace")
            message = decision.reason + (f"; the answer began: {excerpt}" if excerpt else "")
            row_id = await self._park(waiting, Failure(code, message), attempt)
            self.counts.parked += 1
            return row_id
        return None

    async def _park(self, waiting: Waiting, failure: Failure, attempts: int) -> int:
        async with transaction(self._pool) as conn:
            row_id = await store.park(
                conn,
                self.options.destination,
                event_from_message(waiting.delivery),
                failure,
                attempts,
            )
        await waiting.delivery.ack()  # the dead letter holds it now
        return row_id

    async def _park_blocked(self, waiting: Waiting) -> None:
        """Park an event behind its key's parked predecessor, sending nothing; or, when
        the key was released meanwhile (its dead letters replayed or resolved), send it
        in its turn after all."""
        event = waiting.event
        key = (event.provider, event.order_key or "")
        failure = Failure(
            ErrorClass.BLOCKED_BY_PREDECESSOR,
            f"an earlier event of key {event.order_key!r} is parked for this destination",
        )
        destination = self.options.destination
        try:
            async with transaction(self._pool) as conn:
                still_held = await store.key_held(conn, destination, *key)
                if still_held:
                    model = event_from_message(waiting.delivery)
                    await store.park(conn, destination, model, failure, 0)
        except GatewayError as exc:
            log.warning("blocked event not parked", extra={"error": type(exc).__name__})
            await _answer(waiting.delivery.nak(OUTAGE_DELAY_S))
            return
        if not still_held:
            self._lines.held.discard(key)
            started = self._lines.admit(waiting)
            if started is not None:
                await started
            return
        await _answer(waiting.delivery.ack())  # the dead letter holds it now
        self.counts.blocked += 1
        self._count("blocked")


async def _answer(answer: Awaitable[None]) -> None:
    """Send an answer whose failure is the stream's to handle: it redelivers the message
    after `ack_wait`."""
    with contextlib.suppress(BrokerUnavailable):
        await answer
