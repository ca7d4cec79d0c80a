"""The event loop's lag, measured on a real loop: a blocked loop is seen as late, an idle
one is not."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from gateway.metrics.loop_lag import watch_loop_lag


async def _observed_while(action: object, seconds: float, interval_s: float) -> list[float]:
    seen: list[float] = []
    task = asyncio.create_task(watch_loop_lag(seen.append, interval_s))
    await asyncio.sleep(interval_s * 3)
    if callable(action):
        action()
    await asyncio.sleep(seconds)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return seen


async def test_a_blocked_loop_is_seen_late_by_about_the_block() -> None:
    seen = await _observed_while(lambda: time.sleep(0.08), 0.05, interval_s=0.01)
    assert max(seen) >= 0.06
    assert max(seen) < 0.5


async def test_an_idle_loop_is_not_late() -> None:
    seen = await _observed_while(None, 0.2, interval_s=0.01)
    assert len(seen) >= 10
    # Scheduling noise on a busy test machine stays well below a blocked loop's 60 ms.
    assert sorted(seen)[len(seen) // 2] < 0.005


async def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        await watch_loop_lag(lambda _: None, 0)
