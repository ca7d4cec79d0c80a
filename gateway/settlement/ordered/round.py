"""One round of the ordering gate (`gateway.settlement.ordered.gate`): its messages settled
as one batch, each turn's key moved in the transaction that marks its settlement settled
(or, for a turn that settled nothing or was deferred, in one statement after the round),
and its messages answered once their keys' moves are committed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from gateway import tracing
from gateway.adapters.jetstream.consumer import Delivery
from gateway.adapters.postgres import Conn, transaction
from gateway.adapters.postgres.ordering import applied as store
from gateway.adapters.postgres.ordering import key_moves as moves
from gateway.core.events.model import Event
from gateway.core.failures.disposition import Action, Policies, dispose
from gateway.core.ordering import gate
from gateway.core.ordering.gate import Keyed, KeyEffect, TurnResult
from gateway.core.settlement.instructions import SettlementInstruction
from gateway.errors import PaymentNotSettled
from gateway.settlement.batch import settle_batch
from gateway.settlement.items import Item, Result
from gateway.settlement.ordered.answers import KeyAnswers
from gateway.settlement.parts import SettlementParts
from gateway.settlement.traced import settle_span

log = logging.getLogger(__name__)


#: An event's settlement instruction as `Settler.instruction` gave it: None for an event
#: that settles nothing, the exception for a payload it could not read.
ReadInstruction = SettlementInstruction | None | Exception


@dataclass
class _Round:
    """One round's messages (indices into the batch) and what its turns did."""

    indices: list[int]
    moved_in_tx: set[int] = field(default_factory=set)  # indices moved with their settlement


class RoundSettler:
    """Settles the gate's rounds; `on_poison` gives a provider's poison rule."""

    def __init__(
        self,
        parts: SettlementParts,
        say: KeyAnswers,
        policies: Policies,
        on_poison: Callable[[str], str],
    ) -> None:
        self._parts = parts
        self._say = say
        self._policies = policies
        self._on_poison = on_poison
        self._concurrency = parts.settings.settlement.concurrency
        # Instructions read from a batch's bodies as it arrives, by (provider, event_id),
        # until the batch ends (`read_ahead`).
        self._read: dict[tuple[str, str], ReadInstruction] = {}

    def read_ahead(self, events: Sequence[Event]) -> None:
        """Read the events' instructions now, while their batch waits for an earlier one
        (`OrderedGate.handle`): parsing the bodies is the largest share of a batch's own
        work that needs nothing settled first, so it is done while the worker would
        otherwise wait, and the batch settles sooner once its keys are free."""
        instruction = self._parts.settler.instruction
        for event in events:
            try:
                found: ReadInstruction = instruction(event)
            except Exception as exc:  # decided as unreadable when its round settles
                found = exc
            self._read[(event.provider, event.event_id)] = found

    def forget(self, events: Sequence[Event]) -> None:
        """The events' batch has ended: what was read ahead for them goes."""
        for event in events:
            self._read.pop((event.provider, event.event_id), None)

    def instruction(self, event: Event) -> SettlementInstruction | None:
        """The event's instruction, read ahead or read now (a held message's batch may
        have ended); raises as `Settler.instruction` does."""
        key = (event.provider, event.event_id)
        if key not in self._read:
            return self._parts.settler.instruction(event)
        found = self._read[key]
        if isinstance(found, Exception):
            raise found
        return found

    async def settle(
        self,
        messages: Sequence[Delivery],
        work: Sequence[tuple[Event, int]],
        turns: Sequence[Keyed],
        extra: Sequence[int],
        deferred: dict[int, Keyed],
        moved: Callable[[], None],
    ) -> dict[tuple[str, str], KeyEffect]:
        """Settle one round as one batch, move its keys, answer its messages; the keys
        whose turns end here (stopped or held). `moved` is called once the round's moves
        are committed, before its messages are answered, if none of its turns failed."""
        turn_of = {k.index: k for k in turns}
        indices = [*extra, *turn_of]
        state = _Round(indices)

        async def with_settled(conn: Conn, items: Sequence[Item]) -> None:
            # Runs in the transaction that marks these items settled.
            at = [indices[item.index] for item in items]
            moving = [k for i in at if (k := turn_of.get(i)) is not None]
            if moving:  # distinct keys: a round holds one turn of each
                await moves.apply_turns(
                    conn,
                    [
                        (k.provider, k.order_key, k.key_seq, work[k.index][0].event_id)
                        for k in moving
                    ],
                )
            for i in at:
                if i in deferred:
                    d = deferred[i]
                    await store.resolve_deferral(
                        conn, d.provider, d.order_key, d.key_seq, "settled"
                    )
            state.moved_in_tx.update(at)

        sub = [work[i] for i in indices]
        spans = [settle_span(messages[i], e, n) for i, (e, n) in zip(indices, sub, strict=True)]
        results = await settle_batch(
            self._parts.settler, sub, self._concurrency, spans, with_settled, self.instruction
        )
        return await self._answer(messages, work, state, turn_of, deferred, results, spans, moved)

    @staticmethod
    def _applied(k: Keyed, event: Event) -> moves.Advance:
        return moves.Advance(k.provider, k.order_key, k.key_seq, "applied", event.event_id)

    # Past the complexity bar on purpose: one branch per answer a keyed message can get.
    async def _answer(  # noqa: C901
        self,
        messages: Sequence[Delivery],
        work: Sequence[tuple[Event, int]],
        state: _Round,
        turn_of: dict[int, Keyed],
        deferred: dict[int, Keyed],
        results: Sequence[Result],
        spans: Sequence[tracing.Span | None],
        moved: Callable[[], None],
    ) -> dict[tuple[str, str], KeyEffect]:
        later: dict[int, moves.Advance] = {}  # moved after the round, in one statement
        resolved: list[Keyed] = []
        effects: dict[int, KeyEffect] = {}
        for i, result in zip(state.indices, results, strict=True):
            k = turn_of.get(i)
            if isinstance(result, Exception):
                if k is not None:
                    effects[i] = self._effect(k, result, work[i][1])
                    if effects[i] is KeyEffect.DEFERRED:
                        later[i] = moves.Advance(
                            k.provider, k.order_key, k.key_seq, "deferred", work[i][0].event_id
                        )
            elif i not in state.moved_in_tx:
                if k is not None:
                    later[i] = self._applied(k, work[i][0])
                elif i in deferred:
                    resolved.append(deferred[i])
        try:
            if later or resolved:
                async with transaction(self._parts.pool) as conn:
                    await moves.advance(conn, list(later.values()))
                    for d in resolved:
                        await store.resolve_deferral(
                            conn, d.provider, d.order_key, d.key_seq, "settled"
                        )
        except Exception:  # not moved: redelivered, found settled, and moved then
            log.exception("could not move the batch's keys; their messages will be redelivered")
            effects.update(dict.fromkeys(later, KeyEffect.STOP))
        if not effects:  # every turn went through and its key moved
            moved()
        deferrals = sum(1 for e in effects.values() if e is KeyEffect.DEFERRED)
        if deferrals:
            self._parts.metrics.order_deferred_total.inc(deferrals)
        # An ack is only queued on the connection, so a settled message is answered in
        # line; only failures (a retry's note, a dead letter) get a task each.
        say, settled = self._say, self._say.answers.settled

        def answer(
            i: int, result: Result, span: tracing.Span | None
        ) -> Awaitable[KeyEffect | None]:
            k, d, effect = turn_of.get(i), deferred.get(i), effects.get(i)
            return say.turn_settled(messages[i], work[i], k, d, effect, result, span)

        failed: list[tuple[int, Result, tracing.Span | None]] = []
        done: list[tuple[int, KeyEffect | None]] = []
        for i, result, span in zip(state.indices, results, spans, strict=True):
            if isinstance(result, Exception):
                failed.append((i, result, span))
            elif i not in effects:
                # Its key moved: nothing stops.
                await settled(messages[i], result, span, work[i][0])
            else:
                done.append((i, await answer(i, result, span)))
        if failed:
            effects_of = await asyncio.gather(*(answer(*f) for f in failed))
            done.extend(zip((i for i, _, _ in failed), effects_of, strict=True))
        stopped: dict[tuple[str, str], KeyEffect] = {}
        for i, effect in done:
            k = turn_of.get(i)
            if k is not None and effect in (KeyEffect.STOP, KeyEffect.HOLD):
                stopped[k.key] = effect
        return stopped

    def _effect(self, k: Keyed, exc: Exception, attempt: int) -> KeyEffect:
        """What a failed turn does to its key; `attempt` is the number its message's
        answer is disposed with (`work`), so the two agree on retries left."""
        if isinstance(exc, PaymentNotSettled):
            # Its payment may be a later number of this key (a refund numbered before
            # its capture): holding the key would park the capture behind the refund
            # that waits for it. Deferred, retries left or not: the key moves on, and
            # the refund settles on its retries or is parked, closing its deferral.
            return gate.after_turn(TurnResult.DEPENDENCY, "")
        decision = dispose(exc, attempt, random.random, self._policies)
        if decision.action is Action.RETRY:
            return gate.after_turn(TurnResult.RETRY, "")
        return gate.after_turn(TurnResult.DEAD_LETTER, self._on_poison(k.provider))
