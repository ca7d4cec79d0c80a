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
- A key remembers the last number it delivered (or parked, or filtered out): a later
  event waits in memory for its predecessor, however the stream hands them back, for up
  to the gap timeout (`[ordering] gap_timeout_s`); then it goes anyway, as a
  predecessor that never comes (parked before it reached the stream, say) must not hold
  the key for ever. A key first seen by this process starts at whatever comes first.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from gateway.adapters.jetstream.consumer import Delivery, event_from_message
from gateway.core.forward.request import ForwardedEvent
from gateway.core.forward.retry import Decision, Verdict
from gateway.errors import BrokerUnavailable, StreamMessageUnreadable
from gateway.forward.unreadable import unreadable_reason

#: A blocker that has not come back this long after its retry was due is forgotten (it
#: was delivered by another forwarder of the destination, or parked by one).
BLOCKER_GRACE_S = 30.0
#: Events behind a blocker come back this long after it.
BEHIND_S = 1.0
#: An event whose step failed unexpectedly is offered again after this long.
FAILED_STEP_DELAY_S = 5.0
#: Keys whose last delivered number is remembered; the least recently used go first.
MAX_REMEMBERED_KEYS = 100_000

log = logging.getLogger(__name__)

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
    """The event a stream message carries, as the forwarder sends it;
    `StreamMessageUnreadable` when it carries none (`forward.unreadable`)."""
    reason = unreadable_reason(delivery.headers)
    if reason is not None:
        raise StreamMessageUnreadable(reason)
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
    last: int | None = None  # the last number delivered, parked or filtered out
    head_since_s: float = 0.0  # since when the first waiting event waits for a gap

    def add(self, waiting: Waiting, now_s: float) -> None:
        if not self.waiting or waiting.seq < self.waiting[0].seq:
            self.head_since_s = now_s
        bisect.insort(self.waiting, waiting, key=lambda w: w.seq)

    def head_ready(self) -> bool:
        """The first waiting event's predecessor is done (or unknown to this process)."""
        return bool(self.waiting) and (self.last is None or self.waiting[0].seq <= self.last + 1)

    def done(self, seq: int) -> None:
        self.last = seq if self.last is None else max(self.last, seq)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running and self.blocker is None


class KeyLines:
    """Every key with an event in flight, waiting, blocked by a retry, or remembered.

    `attempt` sends one event; `park_blocked` parks one behind its key's dead letter
    (or, if the key was released meanwhile, sends it after all). Both answer the stream
    and return the decision taken; a key's events go through one of them one at a time.
    """

    def __init__(
        self,
        attempt: Callable[[Waiting], Awaitable[Decision]],
        park_blocked: Callable[[Waiting], Awaitable[Decision]],
        clock: Callable[[], float],
        gap_s: float,
    ) -> None:
        self._attempt = attempt
        self._park_blocked = park_blocked
        self._clock = clock
        self._gap_s = gap_s
        self._lines: OrderedDict[Key, _Line] = OrderedDict()
        # The keys with events waiting, and how many: the loop asks every turn, and
        # most remembered keys have none.
        self._waiting_keys: set[Key] = set()
        self._waiting_n = 0
        #: Keys an open dead letter holds: their events are parked behind it.
        self.held: set[Key] = set()

    def waiting_count(self) -> int:
        return self._waiting_n

    def waiting(self) -> list[Waiting]:
        """Every message waiting behind its key (to tell the stream they are not lost)."""
        return [w for key in self._waiting_keys for w in self._lines[key].waiting]

    def take_all(self) -> list[Waiting]:
        """Every waiting message, removed: the loop is stopping and offers them again."""
        taken = self.waiting()
        for key in list(self._waiting_keys):
            self._take(key, self._lines[key])
        return taken

    def _push(self, key: Key, line: _Line, waiting: Waiting) -> None:
        line.add(waiting, self._clock())
        self._waiting_keys.add(key)
        self._waiting_n += 1

    def _pop(self, key: Key, line: _Line) -> Waiting:
        waiting = line.waiting.pop(0)
        self._waiting_n -= 1
        if not line.waiting:
            self._waiting_keys.discard(key)
        return waiting

    def _take(self, key: Key, line: _Line) -> list[Waiting]:
        taken, line.waiting = line.waiting, []
        self._waiting_n -= len(taken)
        self._waiting_keys.discard(key)
        return taken

    def _line(self, key: Key) -> _Line:
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = _Line()
            if len(self._lines) > MAX_REMEMBERED_KEYS:
                self._forget_one()
        else:
            self._lines.move_to_end(key)
        return line

    def _forget_one(self) -> None:
        for key, line in self._lines.items():  # least recently used first
            if line.idle:
                del self._lines[key]
                return

    def restore_blocker(self, key: Key, event_id: str, seq: int, due_in_s: float) -> None:
        """A key whose event waits for its retry, as recorded before this process
        started: its later events wait behind it, as if this process had failed it."""
        line = self._line(key)
        if line.blocker is None or seq < line.blocker.seq:
            line.blocker = _Blocker(event_id, seq, self._clock() + max(due_in_s, 0.0))

    def passed(self, key: Key, seq: int) -> Coroutine[Any, Any, Any] | None:
        """An event of the key that is not for this destination (filtered out): its
        number is done, and the next may go."""
        line = self._line(key)
        line.done(seq)
        return self._start(key, line)

    def admit(self, waiting: Waiting) -> Coroutine[Any, Any, Any] | None:
        """Place an event of a keyed message; the work to start now, if any."""
        event = waiting.event
        key = (event.provider, event.order_key or "")
        line = self._line(key)
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
        self._push(key, line, waiting)
        return self._start(key, line)

    def expired_gaps(self) -> list[Coroutine[Any, Any, Any]]:
        """Keys whose first waiting event has waited `gap_s` for a predecessor that has
        not come: they go on without it."""
        now_s = self._clock()
        started = []
        for key in list(self._waiting_keys):
            line = self._lines[key]
            stuck = not line.running and line.blocker is None and not line.head_ready()
            if stuck and now_s - line.head_since_s >= self._gap_s:
                line.last = line.waiting[0].seq - 1
                work = self._start(key, line)
                if work is not None:
                    started.append(work)
        return started

    def _start(self, key: Key, line: _Line) -> Coroutine[Any, Any, Any] | None:
        if line.running or line.blocker is not None or not line.head_ready():
            return None
        line.running = True
        return self._run(key, line)

    async def _run(self, key: Key, line: _Line) -> None:
        """Send (or park behind the key's dead letter) the key's events one after the
        other while each one's predecessor is done, until none is ready or one must wait
        for a retry."""
        try:
            while line.head_ready():
                waiting = self._pop(key, line)
                line.head_since_s = self._clock()
                step = self._park_blocked if key in self.held else self._attempt
                try:
                    decision = await step(waiting)
                except Exception:  # a bug: the key must not be left waiting for ever
                    log.exception("forwarding an event failed", extra={"key": key[1]})
                    await _nak(waiting.delivery, FAILED_STEP_DELAY_S)
                    decision = Decision(Verdict.RETRY, FAILED_STEP_DELAY_S)
                if decision.verdict is Verdict.RETRY:
                    due_s = self._clock() + decision.delay_s
                    line.blocker = _Blocker(waiting.event.event_id, waiting.seq, due_s)
                    for other in self._take(key, line):
                        await _nak(other.delivery, decision.delay_s + BEHIND_S)
                    break
                if decision.verdict is Verdict.PAUSE:
                    break  # it was offered again; the rest is, when the loop stops
                line.done(waiting.seq)
                if decision.verdict is Verdict.PARK:
                    self.held.add(key)
        finally:
            line.running = False


async def _nak(delivery: Delivery, delay_s: float) -> None:
    with contextlib.suppress(BrokerUnavailable):
        await delivery.nak(delay_s)
