"""One provider's pace: starts spaced `1 / rate_per_s` apart on the clock it is given,
never more than `concurrency` requests under way, and no burst saved up while idle."""

from __future__ import annotations

import asyncio

import pytest

from gateway.confirm.pacing import Pace


class Clock:
    """A monotonic clock that moves only when told (or when `Sleeps` sleeps on it)."""

    def __init__(self, now_s: float = 1_000.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


class Sleeps:
    """A sleep that records how long it was asked for, returns at once, and (with
    `advance`) moves the clock as a real sleep would."""

    def __init__(self, clock: Clock, *, advance: bool = False) -> None:
        self.clock = clock
        self.advance = advance
        self.slept_s: list[float] = []

    async def __call__(self, delay_s: float) -> None:
        self.slept_s.append(delay_s)
        if self.advance:
            self.clock.now_s += delay_s


async def take(pace: Pace, times: int) -> None:
    """Take and give back a slot `times` times, one after another."""
    for _ in range(times):
        async with pace.slot():
            pass


async def test_starts_on_a_still_clock_are_booked_a_gap_apart() -> None:
    """Callers that all arrive at one instant wait 0, 1, 2, 3 gaps: 4 a second is 0.25 s."""
    clock = Clock()
    sleeps = Sleeps(clock)
    await take(Pace(4.0, 8, clock, sleeps), 4)
    assert sleeps.slept_s == pytest.approx([0.25, 0.5, 0.75])


async def test_starts_on_a_moving_clock_are_a_gap_apart() -> None:
    """Once each wait has passed, the next start is one gap after the one before."""
    clock = Clock()
    sleeps = Sleeps(clock, advance=True)
    await take(Pace(20.0, 8, clock, sleeps), 4)
    assert sleeps.slept_s == pytest.approx([0.05, 0.05, 0.05])
    assert clock.now_s == pytest.approx(1_000.15)


async def test_a_start_after_the_gap_waits_for_nothing() -> None:
    """A caller arriving after its turn starts at once."""
    clock = Clock()
    sleeps = Sleeps(clock)
    pace = Pace(2.0, 1, clock, sleeps)
    await take(pace, 1)
    clock.now_s += 0.5
    await take(pace, 1)
    clock.now_s += 0.7
    await take(pace, 1)
    assert sleeps.slept_s == []


async def test_an_idle_pace_saves_up_no_burst() -> None:
    """After an hour idle the first start is at once, and the next one a gap later."""
    clock = Clock()
    sleeps = Sleeps(clock)
    pace = Pace(10.0, 8, clock, sleeps)
    await take(pace, 1)
    clock.now_s += 3_600.0
    await take(pace, 3)
    assert sleeps.slept_s == pytest.approx([0.1, 0.2])


async def test_no_more_than_concurrency_are_under_way() -> None:
    """With two slots the third caller waits for one to be given back, and its start is
    booked when it gets the slot."""
    clock = Clock()
    sleeps = Sleeps(clock)
    pace = Pace(1.0, 2, clock, sleeps)
    inside: set[int] = set()
    most = 0
    release = [asyncio.Event() for _ in range(3)]

    async def request(i: int) -> None:
        nonlocal most
        async with pace.slot():
            inside.add(i)
            most = max(most, len(inside))
            await release[i].wait()
            inside.discard(i)

    async def settle() -> None:
        for _ in range(10):
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(request(i)) for i in range(3)]
    await settle()
    assert inside == {0, 1}
    assert sleeps.slept_s == pytest.approx([1.0])  # the third has booked nothing yet

    release[0].set()
    await settle()
    assert inside == {1, 2}
    assert sleeps.slept_s == pytest.approx([1.0, 2.0])

    release[1].set()
    release[2].set()
    await asyncio.gather(*tasks)
    assert (inside, most) == (set(), 2)


async def test_a_failed_request_gives_its_slot_back() -> None:
    """An exception inside the slot frees it for the next caller."""
    clock = Clock()
    pace = Pace(1_000.0, 1, clock, Sleeps(clock, advance=True))
    with pytest.raises(RuntimeError):
        async with pace.slot():
            raise RuntimeError("the API is away")
    await asyncio.wait_for(take(pace, 1), timeout=1.0)


@pytest.mark.parametrize(
    ("rate_per_s", "concurrency"),
    [(0.0, 1), (-1.0, 1), (float("nan"), 1), (1.0, 0), (1.0, -3)],
)
def test_invalid_arguments_raise(rate_per_s: float, concurrency: int) -> None:
    """A pace needs a positive rate and at least one slot."""
    with pytest.raises(ValueError, match="positive rate"):
        Pace(rate_per_s, concurrency)
