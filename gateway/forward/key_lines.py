"""Order per key at the target: one event of a key in flight at a time, the key's others
waiting behind it in `key_seq` order.

- An event that fails and will be retried blocks its key until its retry: the events
  waiting behind it are offered again by the stream just after it (a nak with a delay
  one second longer), and a later event of the key that arrives before the retry is sent
  back the same way. Once the blocker is delivered, the key flows again.
- An event that is parked holds its key: every later event of the key is parked behind
  it as `BLOCKED_BY_PREDECESSOR`, sending nothing, until the dead letters are replayed
  (the forwarder reads the held keys from the open dead letters).
- An event earlier than the blocker (a late arrival) may go first: that is its order.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from gateway.adapters.jetstream.consumer import Delivery, event_from_message
from gateway.core.forward_request import ForwardedEvent
from gateway.core.forward_retry import Decision, Verdict
from gateway.errors import BrokerUnavailable

#: A blocker that has not come back this long after its retry was due is forgotten (it
#: was delivered by another forwarder of the destination, or parked by one).
BLOCKER_GRACE_S = 30.0
#: Events behind a blocker come back this long after it.
BEHIND_S = 1.0

Key = tuple[str, str]


@dataclass(frozen=True)
class Waiting:
    """A delivered message and the event it carries."""

    delivery: Delivery
    event: ForwardedEvent

    @property
    def seq(self) -> int:
        return self.event.key_seq or 0


def forwarded_event(delivery: Delivery) -> ForwardedEvent:
    """The event a stream message carries, as the forwarder sends it."""
    event = event_from_message(delivery)
    headers = delivery.headers
    return ForwardedEvent(
        provider=event.provider,
        event_id=event.event_id,
        event_type=event.event_type or "",
        received_at=headers.get("Gateway-Received-At") or event.received_at.isoformat(),
        body=event.body,
        order_key=event.order_key,
        key_seq=event.key_seq,
        traceparent=headers.get("traceparent"),
    )


@dataclass
class _Blocker:
    event_id: str
    seq: int
    due_s: float


@dataclass
class _Line:
    waiting: list[Waiting] = field(default_factory=list)
    running: bool = False
    blocker: _Blocker | None = None

    def add(self, waiting: Waiting) -> None:
        bisect.insort(self.waiting, waiting, key=lambda w: w.seq)


class KeyLines:
    """Every key with an event in flight, waiting, or blocked by a retry."""

    def __init__(
        self,
        attempt: Callable[[Waiting], Awaitable[Decision]],
        park_blocked: Callable[[Waiting], Awaitable[None]],
        clock: Callable[[], float],
    ) -> None:
        self._attempt = attempt
        self._park_blocked = park_blocked
        self._clock = clock
        self._lines: dict[Key, _Line] = {}
        #: Keys an open dead letter holds: their events are parked behind it.
        self.held: set[Key] = set()

    def waiting_count(self) -> int:
        return sum(len(line.waiting) for line in self._lines.values())

    def waiting(self) -> list[Waiting]:
        """Every message waiting behind its key (to tell the stream they are not lost)."""
        return [w for line in self._lines.values() for w in line.waiting]

    def take_all(self) -> list[Waiting]:
        """Every waiting message, removed: the loop is stopping and offers them again."""
        taken = self.waiting()
        for line in self._lines.values():
            line.waiting.clear()
        return taken

    def admit(self, waiting: Waiting) -> Coroutine[Any, Any, Any] | None:
        """Place an event of a keyed message; the work to start now, if any."""
        event = waiting.event
        key = (event.provider, event.order_key or "")
        if key in self.held:
            return _run_awaitable(self._park_blocked(waiting))
        line = self._lines.setdefault(key, _Line())
        blocker = line.blocker
        if blocker is not None and not line.running:
            if event.event_id == blocker.event_id or waiting.seq < blocker.seq:
                if event.event_id == blocker.event_id:
                    line.blocker = None
            elif self._clock() < blocker.due_s + BLOCKER_GRACE_S:
                delay_s = max(blocker.due_s - self._clock(), 0.0) + BEHIND_S
                return _nak(waiting.delivery, delay_s)
            else:
                line.blocker = None
        line.add(waiting)
        if line.running:
            return None
        line.running = True
        return self._run(key, line)

    async def _run(self, key: Key, line: _Line) -> None:
        """Send the key's events one after the other, until none wait or one fails."""
        try:
            while line.waiting:
                waiting = line.waiting.pop(0)
                if key in self.held:
                    await self._park_blocked(waiting)
                    continue
                decision = await self._attempt(waiting)
                if decision.verdict is Verdict.RETRY:
                    due_s = self._clock() + decision.delay_s
                    line.blocker = _Blocker(waiting.event.event_id, waiting.seq, due_s)
                    behind, line.waiting = line.waiting, []
                    for other in behind:
                        await _nak(other.delivery, decision.delay_s + BEHIND_S)
                    break
                if decision.verdict is Verdict.PARK:
                    self.held.add(key)
                elif decision.verdict is Verdict.PAUSE:
                    break  # the rest is offered again when the loop stops
        finally:
            line.running = False
            if not line.waiting and line.blocker is None and self._lines.get(key) is line:
                del self._lines[key]


async def _run_awaitable(work: Awaitable[None]) -> None:
    await work


async def _nak(delivery: Delivery, delay_s: float) -> None:
    with contextlib.suppress(BrokerUnavailable):
        await delivery.nak(delay_s)
