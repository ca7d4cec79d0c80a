"""The waiting room of the ordering gate (`gateway.settlement.ordered.gate`): messages that
wait for an earlier event of their key, held in the worker and planned again with the
next batch not kept from their key by another batch in flight (or on their own when none
comes) until their turn, their gap timeout, or the worker's stop.

Their predecessor is usually in another batch, on another worker, or retrying. Putting
a waiting message back to the stream instead spent a delivery per wait, so a message
behind a retrying predecessor reached its own turn with its retry schedule used up (and
a busy key crawled at a few events a second through the stream). The stream is told a
held message is still in progress every third of `ack_wait_s`, so it does not deliver it
again meanwhile; a worker killed holding messages leaves them to be redelivered after
`ack_wait_s`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.adapters.jetstream.consumer import Delivery
from gateway.core.events.model import Event
from gateway.core.ordering.gate import Keyed
from gateway.metrics import Metrics

log = logging.getLogger(__name__)

#: How often, as a share of `ack_wait_s`, the stream hears that a held message is in
#: progress: twice more before the stream would give up on it.
PROGRESS_SHARE = 1 / 3


@dataclass(slots=True)
class Held:
    """A waiting message held in the worker; `told_s`: when the stream last heard it is
    in progress (monotonic); `waited`: whether it has been counted as a wait."""

    msg: Delivery
    item: tuple[Event, int]
    told_s: float
    waited: bool = True


#: What `WaitingRoom.take` hands out beside the messages, by `id(msg)`: when the stream
#: last heard each is in progress, and whether it has been counted as a wait.
Told = dict[int, tuple[float, bool]]


class WaitingRoom:
    """The held messages of one worker: at most `max_held` waiting ones, and beside them
    at most `max_kept` kept behind a batch in flight (so kept ones never crowd out a
    wait; with the batches in flight they stay within the consumer's `max_ack_pending`),
    and one delivery of each stream message: a message delivered again while an earlier
    delivery is held is held as its newest delivery only, so it is planned (and
    answered) once."""

    def __init__(self, metrics: Metrics, ack_wait_s: float, max_held: int, max_kept: int) -> None:
        self._metrics = metrics
        self._progress_s = ack_wait_s * PROGRESS_SHARE
        self._max_held = max_held
        self._max_kept = max_kept
        self._held: dict[int, Held] = {}  # by stream sequence
        self._kept = 0  # how many of them are kept, not waiting (`Held.waited` false)

    def __len__(self) -> int:
        return len(self._held)

    def has_room(self, count: int) -> bool:
        """Whether `count` more messages can be kept behind a batch (`keep_behind`)."""
        return self._kept + count <= self._max_kept

    def take(self, taking: Callable[[Event], bool]) -> tuple[list[Held], Told]:
        """The held messages whose events `taking` takes, to be planned again (each
        comes back by `hold`; the rest stay), and what the room knew of each."""
        held = [h for h in self._held.values() if taking(h.item[0])]
        for h in held:
            del self._held[h.msg.stream_seq]
            self._kept -= not h.waited
        return held, {id(h.msg): (h.told_s, h.waited) for h in held}

    def give_back(self, held: list[Held]) -> None:
        """Held messages `take` handed out to a batch that was cancelled (its worker
        stepping aside): held again, so `put_back` hands them to the stream."""
        for h in held:
            self._keep(h)

    def hold(self, msg: Delivery, item: tuple[Event, int], k: Keyed, told: Told) -> bool:
        """Hold a waiting message (again) if there is room; a delivery's first wait is
        counted. False: no room, the caller puts it back to the stream."""
        if len(self._held) - self._kept >= self._max_held:
            return False
        told_s, waited = told.get(id(msg), (None, False))
        if not waited:
            self._metrics.order_gap_waits_total.inc(provider=k.provider)
        if told_s is None:  # just delivered: the stream's ack_wait starts now
            told_s = time.monotonic()
        self._keep(Held(msg, item, told_s))
        return True

    def keep_behind(self, msg: Delivery, item: tuple[Event, int]) -> None:
        """Keep a just delivered message whose key an earlier batch in flight is moving,
        for the next batch that finds its key free: it waits for nothing missing, so it
        is not counted as a wait (unless it comes to wait). The caller made room
        (`has_room`)."""
        self._keep(Held(msg, item, time.monotonic(), waited=False))

    def _keep(self, held: Held) -> None:
        """Hold `held`, unless a later delivery of its message is held already (an
        earlier one gives way: the stream answers only the newest delivery's ack)."""
        seq = held.msg.stream_seq
        other = self._held.get(seq)
        if other is None or other.msg.num_delivered <= held.msg.num_delivered:
            self._held[seq] = held
            self._kept += (not held.waited) - (other is not None and not other.waited)

    async def tell_progress(self) -> None:
        """The stream hears that the held messages are still in progress, in time."""
        now_s = time.monotonic()
        due = [h for h in self._held.values() if now_s - h.told_s >= self._progress_s]
        for h in due:
            h.told_s = now_s
        results = await asyncio.gather(*(h.msg.in_progress() for h in due), return_exceptions=True)
        if any(isinstance(r, Exception) for r in results):  # redelivered after ack_wait
            log.warning("could not tell the stream a held message is in progress")

    async def put_back(self) -> None:
        """Stopping: every held message goes back to the stream, for another worker."""
        held, self._held, self._kept = self._held, {}, 0
        for h in held.values():
            try:
                await h.msg.nak(0.0)
            except Exception:  # not answered: redelivered after ack_wait, and harmless
                log.exception("nak failed; the message will be redelivered")
