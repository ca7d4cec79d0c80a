"""The per-key order of `gateway forward`, as decision logic: which event of a key goes
when, under a fixed clock, with attempts answered by a script instead of a target."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from gateway.core.forward.request import ForwardedEvent
from gateway.core.forward.retry import Decision, Verdict
from gateway.forward.key_lines import BEHIND_S, KeyLines, Waiting


class FakeDelivery:
    """Records the answers the lines give a message."""

    def __init__(self) -> None:
        self.naks: list[float] = []

    async def nak(self, delay_s: float | None = None) -> None:
        self.naks.append(delay_s or 0.0)


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


class Script:
    """Attempts in the order made, answered by `verdicts` (default: delivered)."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.parked: list[int] = []
        self.verdicts: dict[int, list[Decision]] = {}

    async def attempt(self, waiting: Waiting) -> Decision:
        self.sent.append(waiting.seq)
        queue = self.verdicts.get(waiting.seq)
        return queue.pop(0) if queue else Decision(Verdict.DELIVERED)

    async def park_blocked(self, waiting: Waiting) -> Decision:
        self.parked.append(waiting.seq)
        return Decision(Verdict.PARK)


def msg(seq: int, key: str = "pi_1") -> Waiting:
    event = ForwardedEvent(
        "stripe", f"evt_{key}_{seq}", "t", "2026-12-04T00:00:00+00:00", b"{}", key, seq
    )
    return Waiting(FakeDelivery(), event)  # type: ignore[arg-type]


def lines(script: Script, clock: Clock, gap_s: float = 30.0) -> KeyLines:
    return KeyLines(script.attempt, script.park_blocked, clock, gap_s)


async def run(work: Coroutine[Any, Any, Any] | None) -> None:
    if work is not None:
        await work


async def test_a_later_event_waits_for_its_predecessor() -> None:
    script, clock = Script(), Clock()
    k = lines(script, clock)
    await run(k.admit(msg(1)))
    assert k.admit(msg(3)) is None  # 2 is not done: 3 waits in memory
    assert k.waiting_count() == 1
    await run(k.admit(msg(2)))
    assert script.sent == [1, 2, 3]
    assert k.waiting_count() == 0


async def test_a_key_first_seen_starts_with_what_comes_first() -> None:
    script, clock = Script(), Clock()
    k = lines(script, clock)
    await run(k.admit(msg(57)))
    assert script.sent == [57]


async def test_a_retry_blocks_its_key_and_sends_the_others_back_behind_it() -> None:
    script, clock = Script(), Clock()
    k = lines(script, clock)
    script.verdicts[1] = [Decision(Verdict.RETRY, 5.0)]
    first, second = msg(1), msg(2)
    work = k.admit(first)
    assert k.admit(second) is None  # behind 1, in flight
    await run(work)
    assert script.sent == [1]
    assert second.delivery.naks == [5.0 + BEHIND_S]  # type: ignore[attr-defined]
    # A later arrival before 1's retry is sent back to come after it.
    third = msg(3)
    clock.now_s += 2.0
    await run(k.admit(third))
    assert third.delivery.naks == [3.0 + BEHIND_S]  # type: ignore[attr-defined]
    # 1 comes back, is delivered; 3 and 2 come back in any order and go in order.
    clock.now_s += 3.0
    await run(k.admit(msg(1)))
    await run(k.admit(msg(3)))
    await run(k.admit(msg(2)))
    assert script.sent == [1, 1, 2, 3]


async def test_other_keys_flow_while_one_is_blocked() -> None:
    script, clock = Script(), Clock()
    k = lines(script, clock)
    script.verdicts[1] = [Decision(Verdict.RETRY, 60.0)]
    await run(k.admit(msg(1, "pi_a")))
    await run(k.admit(msg(1, "pi_b")))
    await run(k.admit(msg(2, "pi_b")))
    assert script.sent == [1, 1, 2]


async def test_a_parked_event_holds_its_key() -> None:
    script, clock = Script(), Clock()
    k = lines(script, clock)
    script.verdicts[1] = [Decision(Verdict.PARK)]
    await run(k.admit(msg(1)))
    await run(k.admit(msg(2)))
    await run(k.admit(msg(3)))
    assert script.sent == [1]
    assert script.parked == [2, 3]
    # Released (the dead letters replayed): the next event goes at once.
    k.held.clear()
    await run(k.admit(msg(4)))
    assert script.sent == [1, 4]


async def test_a_predecessor_that_never_comes_holds_the_key_only_for_the_gap() -> None:
    script, clock = Script(), Clock()
    k = lines(script, clock, gap_s=30.0)
    await run(k.admit(msg(1)))
    assert k.admit(msg(3)) is None
    clock.now_s += 29.0
    assert k.expired_gaps() == []
    clock.now_s += 1.0
    await asyncio.gather(*k.expired_gaps())
    assert script.sent == [1, 3]


async def test_a_filtered_event_passes_its_turn() -> None:
    script, clock = Script(), Clock()
    k = lines(script, clock)
    await run(k.admit(msg(1)))
    assert k.admit(msg(3)) is None
    await run(k.passed(("stripe", "pi_1"), 2))  # 2 is not for this destination
    assert script.sent == [1, 3]


async def test_a_pause_stops_the_key_and_keeps_the_rest_for_the_stop() -> None:
    script, clock = Script(), Clock()
    k = lines(script, clock)
    script.verdicts[1] = [Decision(Verdict.PAUSE)]
    work = k.admit(msg(1))
    assert k.admit(msg(2)) is None
    await run(work)
    assert script.sent == [1]
    assert [w.seq for w in k.take_all()] == [2]


async def test_an_unexpected_error_blocks_the_key_as_a_retry_would() -> None:
    """A bug in one event's step must not leave its key's events waiting for ever."""
    script, clock = Script(), Clock()
    k = lines(script, clock)

    async def broken(waiting: Waiting) -> Decision:
        raise RuntimeError("a bug")

    k._attempt = broken
    first, second = msg(1), msg(2)
    work = k.admit(first)
    assert k.admit(second) is None
    await run(work)
    assert first.delivery.naks == [5.0]  # type: ignore[attr-defined]
    assert second.delivery.naks == [5.0 + BEHIND_S]  # type: ignore[attr-defined]
    assert k.waiting_count() == 0
