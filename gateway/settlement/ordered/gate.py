"""The ordering gate of the settlement worker: a fetched batch's keyed messages settled
in their keys' order (`gateway.core.ordering.gate` decides, this runs it, and
`ordered_round` settles each round).

Round 0 settles the unordered messages, each key's first turn and the deferrals' own
retries as one batch; round 1 the second turns of the keys whose first turn went
through, and so on. A turn moves its key by the compare-and-set of
`adapters.postgres.ordering.key_moves.advance`, in the transaction that marks its settlement
settled; a turn that settled nothing (a duplicate, an ignored type) or was deferred
moves it in one statement after the round. Each message is answered only once its key's
move is committed, so a worker killed in between leaves it to be redelivered, found
settled (a duplicate) and moved then.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence

from gateway.adapters.jetstream.consumer import Delivery
from gateway.adapters.postgres import connection
from gateway.adapters.postgres.ordering import applied as store
from gateway.core.events.model import Event
from gateway.core.failures.disposition import Policies
from gateway.core.ordering import gate
from gateway.core.ordering.gate import Keyed, KeyEffect, Step
from gateway.settlement.ordered.answers import Answers, KeyAnswers
from gateway.settlement.ordered.holding import Held, Told, WaitingRoom
from gateway.settlement.ordered.round import RoundSettler
from gateway.settlement.parts import SettlementParts

log = logging.getLogger(__name__)

#: The largest share of a fetched batch whose keys an earlier batch in flight is still
#: settling that is kept back for the next batch finding those keys free (`OrderedGate.
#: handle`), while the rest of the batch settles beside the earlier one. Over 1,000 keys
#: in fetch order, a batch of 512 shares about 5 % of its keys with the one before it
#: and most of them with the one before that.
FOLLOW_SHARE = 0.25


class OrderedGate:
    """Settles fetched batches through the ordering gate."""

    def __init__(self, parts: SettlementParts, answers: Answers, policies: Policies) -> None:
        self._parts = parts
        self._say = KeyAnswers(answers, parts.metrics, parts.settings.ordering.gap_timeout_s)
        self._ordering = parts.settings.ordering
        self._rounds_of = RoundSettler(parts, self._say, policies, self.on_poison)
        section = parts.settings.settlement
        # Past a batch of held messages, a waiting one is put back with a delay; a batch's
        # share kept behind an earlier one (`handle`) has room of its own.
        max_kept = int(FOLLOW_SHARE * section.batch_size)
        self._room = WaitingRoom(parts.metrics, section.ack_wait_s, section.batch_size, max_kept)
        # The keys of the batches being settled, each with its batch's end (`handle`).
        self._busy: dict[tuple[str, str], asyncio.Future[None]] = {}
        # (provider, key, seq) of waiting messages -> when first seen waiting.
        self._waits: dict[tuple[str, str, int], float] = {}
        self._waits_max = 8 * section.batch_size

    @property
    def holding(self) -> int:
        """How many waiting messages the gate holds, to be planned again."""
        return len(self._room)

    async def put_back(self) -> None:
        """Stopping: every held message goes back to the stream (another worker's)."""
        await self._room.put_back()

    def on_poison(self, provider: str) -> str:
        """The provider's own `on_poison`, else `[ordering] on_poison`."""
        own = self._parts.settings.providers.get(provider)
        return getattr(own, "on_poison", None) or self._ordering.on_poison

    async def handle(self, fetched: Sequence[Delivery], read: Sequence[tuple[Event, int]]) -> None:
        """Settle a batch (read messages and their `(event, delivery number)`) in order,
        together with the waiting messages held from earlier batches.

        A batch sharing keys with earlier batches this worker is still settling must not
        plan those keys' messages against positions about to move: they would only wait
        for what this process already knows. The messages of keys an earlier batch
        shares only a few of (at most `FOLLOW_SHARE` of this batch, per earlier batch)
        are kept in the waiting room for the next batch that finds their keys free
        (this one, if the earlier batch ends first), while the rest settles beside it;
        an earlier batch that shares more is waited for by the whole batch. (Settled as
        a part of their own once that batch was done, the few cost every batch a
        transaction more: docs/performance.md, "Order per key".)
        """
        busy = self._busy
        keys = [_key(e) for e, _ in read]
        by_batch: dict[asyncio.Future[None], list[int]] = {}
        for i, key in enumerate(keys):
            if key is not None and key in busy:
                by_batch.setdefault(busy[key], []).append(i)
        few = {b for b, shared in by_batch.items() if len(shared) <= FOLLOW_SHARE * len(read)}
        kept = sorted(i for b in few for i in by_batch[b])
        if not self._room.has_room(len(kept)):  # no room to keep them: all of it waits
            few, kept = set(), []
        before = set(by_batch) - few
        kept_keys = {keys[i] for i in kept}
        for i in kept:
            self._room.keep_behind(fetched[i], read[i])
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # This batch's keys: a later batch sharing them follows this one. The kept
        # messages' keys stay their earlier batch's until it ends.
        mine = {key for key in keys if key is not None and key not in kept_keys}
        for key in mine:
            busy[key] = done

        def take_held(event: Event) -> bool:
            # Held messages of keys another batch in flight is moving stay held for
            # later; those taken make their keys this batch's, as its own messages do.
            key = _key(event)
            if key is None:
                return True
            if busy.setdefault(key, done) is not done:
                return False
            mine.add(key)
            return True

        def release() -> None:
            # This batch moves its keys no further: a later batch may plan them.
            if done.done():
                return
            done.set_result(None)
            for key in mine:
                if busy.get(key) is done:
                    del busy[key]

        skip = set(kept)  # read by the later batch that takes them
        events = [e for i, (e, _) in enumerate(read) if i not in skip]
        try:
            self._rounds_of.read_ahead(events)
            if before:
                await asyncio.wait(before)
            held, told = self._room.take(take_held)
            try:
                await self._settle(
                    [m for i, m in enumerate(fetched) if i not in skip],
                    [r for i, r in enumerate(read) if i not in skip],
                    held,
                    told,
                    release,
                )
            except asyncio.CancelledError:  # stepping aside: they go back with the room's
                self._room.give_back(held)
                raise
        finally:
            self._rounds_of.forget(events)
            release()

    async def _settle(
        self,
        fetched: Sequence[Delivery],
        read: Sequence[tuple[Event, int]],
        held: list[Held],
        told: Told,
        release: Callable[[], None],
    ) -> None:
        """Settle messages in their keys' order, with the held ones taken from the room;
        `release` once the last round's moves are committed, if no turn failed."""
        # A message the stream delivered again while it was held here: only the fresh
        # delivery is answered. Planned as two copies, one would be acked as the other's
        # repeat (which removes the message from the stream) while the held one waits,
        # and a nak of that one later would bring nothing back.
        if held:
            fresh = {m.stream_seq for m in fetched}
            held = [h for h in held if h.msg.stream_seq not in fresh]
        messages = [*(h.msg for h in held), *fetched]
        # The attempt numbers settlement and its retry schedules see: without the
        # deliveries this worker spent putting an event back to wait for its turn.
        events = [*(h.item[0] for h in held), *(e for e, _ in read)]
        # Nor the deliveries it gave back untried (stepping aside, positions unread).
        attempt, handed_back = self._say.attempt, self._say.answers.handed_back
        work = [
            (e, attempt(e, handed_back.attempt(m))) for m, e in zip(messages, events, strict=True)
        ]
        now_s = time.time()
        waits = self._waits
        keyed = [
            Keyed(i, e.provider, e.order_key, e.key_seq, messages[i].num_delivered,
                  waits.get((e.provider, e.order_key, e.key_seq), now_s) if waits else now_s)
            for i, e in enumerate(events)
            if e.order_key is not None and e.key_seq is not None
        ]  # fmt: skip
        unordered = [i for i, (e, _) in enumerate(work) if e.key_seq is None or e.order_key is None]
        try:
            plan = await self._plan(keyed, now_s)
        except Exception:  # the database: every message back to the stream, backing off
            log.exception("could not read the keys' positions; the batch is put back")
            self._say.answers.handed_back.note(messages)
            await asyncio.gather(
                *(self._say.wait(m, None, gate.outage_delay_s(m.num_delivered)) for m in messages)
            )
            return
        answers: list[Awaitable[None]] = []
        by_round: dict[int, list[Keyed]] = {}
        deferred: dict[int, Keyed] = {}
        waiting: list[Keyed] = []
        decisions = plan.decisions
        for k in keyed:  # one pass: most are turns
            decision = decisions[k.index]
            step = decision.step
            if step is Step.TURN:
                turns = by_round.get(decision.round)
                if turns is None:
                    by_round[decision.round] = [k]
                else:
                    turns.append(k)
                continue
            if step is Step.DEFERRED_RETRY:
                unordered.append(k.index)  # settled unordered, in round 0
                deferred[k.index] = k
                continue
            if step is Step.WAIT:
                waiting.append(k)
                if self._room.hold(messages[k.index], work[k.index], k, told):
                    continue
            if step is Step.PARK_GAP:  # holds its key: released once that is written
                release = _no_release
            answers.append(self._say.now(messages[k.index], work[k.index], k, decision))
        self._remember_waits(keyed, waiting, now_s)
        answers.append(self._room.tell_progress())
        answering = asyncio.gather(*answers)  # answered while the rounds settle
        try:
            await self._rounds(
                messages, work, plan.rounds, by_round, sorted(unordered), deferred, told, release
            )
        finally:
            await answering

    async def _rounds(
        self,
        messages: Sequence[Delivery],
        work: Sequence[tuple[Event, int]],
        rounds: int,
        by_round: dict[int, list[Keyed]],
        unordered: list[int],
        deferred: dict[int, Keyed],
        told: Told,
        release: Callable[[], None],
    ) -> None:
        stopped: dict[tuple[str, str], KeyEffect] = {}  # keys whose turns end in this batch
        waiting: list[Awaitable[object]] = []
        last = max(1, rounds) - 1
        for r in range(last + 1):
            turns: list[Keyed] = []
            for k in by_round.get(r, []):
                if k.key in stopped:  # behind a turn that failed: wait, or park behind it
                    msg, item = messages[k.index], work[k.index]
                    if stopped[k.key] is KeyEffect.HOLD or not self._room.hold(msg, item, k, told):
                        waiting.append(self._say.behind(msg, item, k, stopped[k.key]))
                else:
                    turns.append(k)
            extra = unordered if r == 0 else []
            if turns or extra:
                # After the last round's moves, a batch whose turns all went through moves
                # its keys no further: the next batch sharing them need not wait for the
                # answers (a failed turn may still hold or skip its key as it is answered).
                moved = release if r == last and not stopped else _no_release
                stopped.update(
                    await self._rounds_of.settle(messages, work, turns, extra, deferred, moved)
                )
        await asyncio.gather(*waiting)

    def _remember_waits(
        self, keyed: Sequence[Keyed], waiting: Sequence[Keyed], now_s: float
    ) -> None:
        """When each waiting message was first seen waiting (the gap clock's start), for
        as long as it waits; bounded, the oldest forgotten first."""
        waits = self._waits
        if waits:  # those no longer waiting are forgotten
            still = {k.index for k in waiting}
            for k in keyed:
                if k.index not in still:
                    waits.pop((k.provider, k.order_key, k.key_seq), None)
        for k in waiting:
            waits.setdefault((k.provider, k.order_key, k.key_seq), now_s)
        while len(waits) > self._waits_max:
            del waits[next(iter(waits))]

    async def _plan(self, keyed: Sequence[Keyed], now_s: float) -> gate.Plan:
        if not keyed:
            return gate.Plan({}, 0)
        keys = list({k.key for k in keyed})
        async with connection(self._parts.pool) as conn:
            positions = await store.positions(conn, keys)
            below = [
                (k.provider, k.order_key, k.key_seq)
                for k in keyed
                if (at := positions.get(k.key)) is not None and k.key_seq <= at.applied_seq
            ]
            owed = await store.still_owed(conn, below)
        return gate.plan(
            keyed,
            positions,
            owed,
            now_s=now_s,
            gap_timeout_s=self._ordering.gap_timeout_s,
            rand=random.random,
        )


def _no_release() -> None:
    """No early release (`OrderedGate._rounds`)."""


def _key(event: Event) -> tuple[str, str] | None:
    """The (provider, key) an ordered event moves; None for an unordered one."""
    if event.order_key is None or event.key_seq is None:
        return None
    return event.provider, event.order_key
