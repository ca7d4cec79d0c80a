"""What an attempt's verdict leaves behind: its record in PostgreSQL (failed attempts,
dead letters) and its answer on the stream, in that order, so a message is only
acknowledged once what replaces it is committed.

- delivered: the failures counted so far are dropped, then the message is acked;
- retry: one more failure is counted, then the message is nak'd with the delay;
- park: the dead letter (stage `forward:NAME`) is committed, then the message is acked;
- blocked: an event behind its key's dead letter is parked as `BLOCKED_BY_PREDECESSOR`,
  unless the key was released meanwhile, or the event's own dead letter is already
  open (a park whose ack was lost: it is acked again, its reason kept);
- unreadable: a message that carries no event (`forward.unreadable`) is parked as
  `STREAM_MESSAGE_UNREADABLE` with what it held, then termed: never offered again.
"""

from __future__ import annotations

import contextlib
import enum
from datetime import datetime

from gateway.adapters.http_target import Attempted
from gateway.adapters.jetstream.consumer import Delivery, event_from_message
from gateway.adapters.postgres import Pool, connection, transaction
from gateway.adapters.postgres import forwarding as store
from gateway.core.events.model import Failure
from gateway.core.forward.retry import Decision, Verdict, answer_message
from gateway.errors import BrokerUnavailable, ErrorClass
from gateway.forward.key_lines import Waiting
from gateway.forward.unreadable import unreadable_event
from gateway.forward.view import Counts
from gateway.metrics import Metrics


class Blocked(enum.StrEnum):
    """What became of an event of a held key."""

    PARKED = "parked"  # behind the key's dead letter (or its own, already open)
    RELEASED = "released"  # the key is no longer held: the event may be sent


class Recorder:
    """Records one destination's verdicts, counts them, and answers the stream."""

    def __init__(
        self, pool: Pool, destination: str, counts: Counts, metrics: Metrics | None
    ) -> None:
        self._pool = pool
        self._destination = destination
        self.counts = counts
        self._metrics = metrics

    def count(self, outcome: str) -> None:
        """One more attempt (or filtered or blocked event) in the destination's metric."""
        if self._metrics is not None:
            self._metrics.forward_attempts_total.inc(destination=self._destination, outcome=outcome)

    def latency(self, elapsed_s: float) -> None:
        if self._metrics is not None:
            self._metrics.forward_latency_seconds.observe(elapsed_s, destination=self._destination)

    async def record(
        self,
        waiting: Waiting,
        attempt: int,
        prior: int,
        attempted: Attempted,
        decision: Decision,
        schedule_len: int,
    ) -> int | None:
        """Record the decision and answer the stream; the dead letter's id when parked."""
        delivery, event = waiting.delivery, waiting.event
        verdict = decision.verdict
        if verdict is Verdict.DELIVERED:
            if prior:
                async with connection(self._pool) as conn:
                    await store.forget(conn, self._destination, event.provider, event.event_id)
            await delivery.ack()
            self.counts.delivered += 1
        elif verdict is Verdict.RETRY:
            async with connection(self._pool) as conn:
                await store.add_failure(
                    conn,
                    self._destination,
                    event.provider,
                    event.event_id,
                    decision.reason,
                    order_key=event.order_key,
                    key_seq=event.key_seq,
                    retry_in_s=decision.delay_s,
                )
            await delivery.nak(decision.delay_s)
            self.counts.retried += 1
        elif verdict is Verdict.PAUSE:
            await delivery.nak()
            self.counts.paused = True
        else:
            code = (
                ErrorClass.FORWARD_REFUSED
                if attempted.answer.status is not None and attempt <= schedule_len
                else ErrorClass.FORWARD_ATTEMPTS_EXHAUSTED
            )
            message = answer_message(decision.reason, attempted.excerpt)
            row_id = await self.park(waiting, Failure(code, message), attempt)
            self.counts.parked += 1
            return row_id
        return None

    async def park(self, waiting: Waiting, failure: Failure, attempts: int) -> int:
        """File the event's dead letter, then ack its message."""
        async with transaction(self._pool) as conn:
            row_id = await store.park(
                conn, self._destination, event_from_message(waiting.delivery), failure, attempts
            )
        await waiting.delivery.ack()  # the dead letter holds it now
        return row_id

    async def park_blocked(self, waiting: Waiting) -> Blocked:
        """Park an event behind its key's dead letter, sending nothing; `RELEASED` when
        no open dead letter of the destination holds the key any more."""
        event = waiting.event
        failure = Failure(
            ErrorClass.BLOCKED_BY_PREDECESSOR,
            f"an earlier event of key {event.order_key!r} is parked for this destination",
        )
        async with transaction(self._pool) as conn:
            state = await store.hold_on(
                conn, self._destination, event.provider, event.order_key or "", event.event_id
            )
            if state is store.HoldOn.RELEASED:
                return Blocked.RELEASED
            if state is store.HoldOn.HELD:
                model = event_from_message(waiting.delivery)
                await store.park(conn, self._destination, model, failure, 0)
        await waiting.delivery.ack()  # the dead letter holds it now
        if state is store.HoldOn.HELD:
            self.counts.blocked += 1
            self.count("blocked")
        return Blocked.PARKED

    async def park_unreadable(
        self, delivery: Delivery, reason: str, stream_seq: int | None, now: datetime
    ) -> int:
        """File the dead letter of a message that carries no event, with the subject,
        headers and body it had, then term it; the dead letter's id. Raises as the
        database does when the row is not written: the message is then not answered."""
        event = unreadable_event(delivery.subject, delivery.headers, delivery.data, stream_seq, now)
        seq = "?" if stream_seq is None else stream_seq
        failure = Failure(
            ErrorClass.STREAM_MESSAGE_UNREADABLE, f"stream message {seq} cannot be read: {reason}"
        )
        async with transaction(self._pool) as conn:
            row_id = await store.park(conn, self._destination, event, failure, 1)
        # Not termed (NATS is down): the stream offers it again after `ack_wait`, and it
        # is filed into the same open row (its id is the message's own).
        with contextlib.suppress(BrokerUnavailable):
            await delivery.term()
        self.counts.parked += 1
        self.count("parked")
        return row_id
