"""How the ordering gate answers messages (`gateway.settlement.ordered.gate`): a duplicate,
a wait, a park behind a held key or after a gap, and a turn once settled, with what its
dead letter's transaction writes to the key (a hold, a skip, a deferral closed)."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import Protocol

from gateway import tracing
from gateway.adapters.jetstream.consumer import Delivery
from gateway.adapters.postgres import Conn
from gateway.adapters.postgres.ordering import applied as store
from gateway.adapters.postgres.ordering import key_moves as moves
from gateway.core.events.model import Event
from gateway.core.failures.disposition import Action
from gateway.core.ordering import gate
from gateway.core.ordering.gate import Decision, Keyed, KeyEffect, Step
from gateway.errors import (
    BlockedByPredecessor,
    OrderPredecessorMissing,
    PaymentNotSettled,
    error_class_of,
)
from gateway.metrics import Metrics
from gateway.settlement.handed_back import HandedBack
from gateway.settlement.items import Result, SettleOutcome

log = logging.getLogger(__name__)

#: Written in the dead letter's transaction, with its row id (a hold, a skip).
AfterParked = Callable[[Conn, int], Awaitable[None]]


class Answers(Protocol):
    """How the worker answers a message (`SettlementWorker`)."""

    @property
    def handed_back(self) -> HandedBack:
        """The deliveries the worker gave back untried (not attempts of a schedule)."""
        ...

    async def settled(
        self,
        msg: Delivery,
        outcome: SettleOutcome,
        span: tracing.Span | None,
        event: Event | None = None,
    ) -> None:
        """Ack a message whose event settled (or had nothing to settle)."""

    async def failed(
        self,
        msg: Delivery,
        event: Event,
        deliveries: int,
        exc: Exception,
        span: tracing.Span | None = None,
        then: AfterParked | None = None,
    ) -> Action | None:
        """Retry or park a message; what was done (None: neither could be sent)."""


def hold_after(k: Keyed, exc: Exception) -> AfterParked:
    """Hold the key at the parked event (its dead letter names the hold)."""

    async def then(conn: Conn, dlq_id: int) -> None:
        reason = error_class_of(exc)  # the dead letter's own code
        await store.hold(conn, k.provider, k.order_key, k.key_seq, dlq_id, reason)

    return then


def skip_after(k: Keyed, event: Event) -> AfterParked:
    """Move the key past the parked event (`on_poison = "skip"`)."""

    async def then(conn: Conn, dlq_id: int) -> None:
        del dlq_id  # the skip is explained by the dead letter of (provider, event_id)
        step = moves.Advance(k.provider, k.order_key, k.key_seq, "skipped", event.event_id)
        await moves.advance(conn, [step])

    return then


def parked_deferral_after(k: Keyed) -> AfterParked:
    """Close a deferral whose retries ran out: it is parked."""

    async def then(conn: Conn, dlq_id: int) -> None:
        del dlq_id
        await store.resolve_deferral(conn, k.provider, k.order_key, k.key_seq, "parked")

    return then


class KeyAnswers:
    """Answers the gate's messages through the worker's `Answers`, counting the gate's
    metrics."""

    #: How many events' put-back waits are remembered (the oldest forgotten first).
    WAITS_REMEMBERED = 100_000

    def __init__(self, answers: Answers, metrics: Metrics, gap_timeout_s: float) -> None:
        self._answers = answers
        self._metrics = metrics
        self._gap_timeout_s = gap_timeout_s
        # (provider, key, seq) -> deliveries this worker spent putting it back to wait.
        self._put_back: dict[tuple[str, str, int], int] = {}

    def attempt(self, event: Event, deliveries: int) -> int:
        """The event's attempt number: its deliveries less those spent waiting for its
        turn (put back by this worker), so a wait does not use up the retry schedule
        its own failures are given (a wait held in the worker spends none)."""
        if not self._put_back or event.order_key is None or event.key_seq is None:
            return deliveries
        waited = self._put_back.get((event.provider, event.order_key, event.key_seq), 0)
        return max(1, deliveries - waited)

    async def now(
        self, msg: Delivery, item: tuple[Event, int], k: Keyed, decision: Decision
    ) -> None:
        """A duplicate, a wait or a park, answered without settling."""
        event, deliveries = item
        if decision.step is Step.DUPLICATE:
            await self._answers.settled(msg, SettleOutcome.DUPLICATE, None)
        elif decision.step is Step.WAIT:
            await self.wait(msg, k, decision.delay_s)
        elif decision.step is Step.PARK_GAP:
            exc = OrderPredecessorMissing(
                f"waited over {self._gap_timeout_s:g} s for an earlier event of its key"
            )
            await self._answers.failed(msg, event, deliveries, exc, then=hold_after(k, exc))
        elif decision.step is Step.PARK_BLOCKED:
            await self.blocked(msg, item)

    async def wait(self, msg: Delivery, k: Keyed | None, delay_s: float | None) -> None:
        """Put a message back to wait for its key's predecessor (counted), or, without
        `k`, back to the stream after `delay_s` (the worker stopping or the database
        gone: not a wait of the gate's)."""
        if k is not None:
            self._metrics.order_gap_waits_total.inc(provider=k.provider)
            if delay_s is None:
                delay_s = gate.wait_delay_s(k.deliveries, random.random)
            put_back = self._put_back
            seq = (k.provider, k.order_key, k.key_seq)
            put_back[seq] = put_back.pop(seq, 0) + 1  # most recent last
            while len(put_back) > self.WAITS_REMEMBERED:
                del put_back[next(iter(put_back))]
        try:
            await msg.nak(delay_s)
        except Exception:  # not answered: redelivered after ack_wait, and harmless
            log.exception("nak failed; the message will be redelivered")

    async def blocked(self, msg: Delivery, item: tuple[Event, int]) -> None:
        event, deliveries = item
        exc = BlockedByPredecessor("an earlier event of its key is parked")
        if await self._answers.failed(msg, event, deliveries, exc) is Action.DEAD_LETTER:
            self._metrics.order_blocked_parked_total.inc()

    async def behind(
        self, msg: Delivery, item: tuple[Event, int], k: Keyed, effect: KeyEffect
    ) -> None:
        if effect is KeyEffect.HOLD:
            await self.blocked(msg, item)
        else:
            await self.wait(msg, k, None)

    @property
    def answers(self) -> Answers:
        """The worker's answers: a settled turn whose key moved is acked through it
        directly (`turn_settled` adds nothing to that)."""
        return self._answers

    async def turn_settled(
        self,
        msg: Delivery,
        item: tuple[Event, int],
        turn: Keyed | None,
        deferral: Keyed | None,
        effect: KeyEffect | None,
        result: Result,
        span: tracing.Span | None,
    ) -> KeyEffect | None:
        """Answer one settled message; what its turn did to its key in the end."""
        event, deliveries = item
        if not isinstance(result, Exception):
            if effect is KeyEffect.STOP and turn is not None:
                # Settled, but its key did not move: redelivered, found settled, moved then.
                tracing.end(span)
                await self.wait(msg, turn, None)
                return effect
            await self._answers.settled(msg, result, span, event)
            return KeyEffect.APPLIED
        if turn is not None and effect is KeyEffect.STOP and isinstance(result, PaymentNotSettled):
            # Deferred, but the key's move did not commit: parked now, it would leave
            # its key neither moved nor held. Back to wait for its turn, as a settled
            # turn whose key did not move is.
            tracing.end(span)
            await self.wait(msg, turn, None)
            return effect
        then: AfterParked | None = None
        if turn is not None and effect is KeyEffect.HOLD:
            then = hold_after(turn, result)
        elif turn is not None and effect is KeyEffect.SKIPPED:
            then = skip_after(turn, event)
        elif turn is not None and effect is KeyEffect.DEFERRED:
            then = parked_deferral_after(turn)  # deferred at its turn, parked at once
        elif deferral is not None:
            then = parked_deferral_after(deferral)
        action = await self._answers.failed(msg, event, deliveries, result, span, then)
        if turn is not None and effect in (KeyEffect.HOLD, KeyEffect.SKIPPED):
            # Not parked: the hold or skip was not written, so the key waits for it.
            return effect if action is Action.DEAD_LETTER else KeyEffect.STOP
        return effect
