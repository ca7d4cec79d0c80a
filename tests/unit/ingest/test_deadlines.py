"""The request deadline sweeper: which tasks it cancels, and how a task tells its own
deadline from any other cancellation."""

from __future__ import annotations

import asyncio

from gateway.ingest.deadlines import Deadlines


async def _parked_task() -> asyncio.Task[object]:
    task: asyncio.Task[object] = asyncio.create_task(asyncio.sleep(60))
    await asyncio.sleep(0)  # let it start waiting
    return task


async def test_sweep_cancels_only_tasks_past_their_deadline() -> None:
    deadlines = Deadlines()
    late, early, cleared = await _parked_task(), await _parked_task(), await _parked_task()
    deadlines.set(late, 10.0)
    deadlines.set(early, 30.0)
    deadlines.set(cleared, 5.0)
    deadlines.clear(cleared)

    assert deadlines.sweep(now=20.0) == 1
    await asyncio.sleep(0)
    assert late.cancelled()
    assert not early.done() and not cleared.done()
    assert deadlines.expired(late) is True
    assert deadlines.expired(late) is False  # reported once
    assert deadlines.expired(early) is False
    for task in (early, cleared):
        task.cancel()


async def test_a_later_deadline_replaces_the_earlier_one() -> None:
    deadlines = Deadlines()
    task = await _parked_task()
    deadlines.set(task, 10.0)
    deadlines.set(task, 50.0)  # the body arrived; now the commit's deadline applies
    assert deadlines.sweep(now=20.0) == 0
    assert deadlines.sweep(now=50.0) == 1
    await asyncio.sleep(0)
    assert task.cancelled()


async def test_a_task_cancelled_for_another_reason_is_not_reported_expired() -> None:
    deadlines = Deadlines()
    task = await _parked_task()
    deadlines.set(task, 100.0)
    task.cancel()
    await asyncio.sleep(0)
    assert deadlines.expired(task) is False


async def test_the_sweeper_runs_on_the_loop_clock() -> None:
    deadlines = Deadlines(tick_s=0.01)
    deadlines.start()
    try:
        task = await _parked_task()
        deadlines.set(task, asyncio.get_running_loop().time() + 0.05)
        done, _ = await asyncio.wait({task}, timeout=2.0)
        assert task in done and task.cancelled()
        assert deadlines.expired(task)
    finally:
        await deadlines.stop()
